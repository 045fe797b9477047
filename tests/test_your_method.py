"""docs/your_method.md, followed as it is written (issue 38): its file blocks (a fenced block
whose first line is ``# my_method/<file>``) are written into a folder that plays the repository
root, its shell commands run there in order, in this process (``.venv/bin/python tools/X.py``
is ``tools/X.py``'s ``main``; ``PYTHONPATH=.`` puts the folder on ``sys.path``), and the table
must have the toy planner's rows. The folder links the repository's ``configs/`` and
``tools/`` and holds a copy of the kitchen example (the page's features are written under its
data root, which resolves from the repository root: here the folder)."""
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from test_docs_commands import code_blocks, joined
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / 'docs' / 'your_method.md'
FILE_HEADER = re.compile(r'# (my_method/[\w.]+\.py)$')


def page_files() -> dict:
    """``{relative path: text}`` of the page's file blocks."""
    files = {}
    for language, lines in code_blocks(PAGE.read_text()):
        if language == 'python' and lines and FILE_HEADER.match(lines[0]):
            files[FILE_HEADER.match(lines[0]).group(1)] = '\n'.join(lines) + '\n'
    return files


def page_commands() -> list:
    """The page's shell command lines, in order (argv lists)."""
    commands = []
    for language, lines in code_blocks(PAGE.read_text()):
        if language == 'bash':
            commands += [shlex.split(line) for line in joined(lines) if line.strip()]
    return commands


def test_the_page_has_its_files_and_commands():
    """The extraction finds what the page shows (a test that reads nothing cannot fail)."""
    assert set(page_files()) == {'my_method/toy_planner.py', 'my_method/toy_kitchen_t3.py',
                                 'my_method/protocol_kitchen.py', 'my_method/toy_niv_t3.py'}
    tools = [next(t for t in argv if t.startswith('tools/')) for argv in page_commands()]
    assert tools == ['tools/make_synthetic_features.py', 'tools/train.py', 'tools/test.py',
                     'tools/run_protocol.py', 'tools/run_protocol.py', 'tools/report.py']


@pytest.fixture
def repository_root(tmp_path, monkeypatch):
    """A folder standing for the repository root (module docstring); the working directory."""
    from vpn_plugin import data_paths
    for name in ('configs', 'tools'):
        (tmp_path / name).symlink_to(REPO / name)
    example = tmp_path / 'examples' / 'custom_dataset'
    shutil.copytree(REPO / 'examples/custom_dataset', example,
                    ignore=shutil.ignore_patterns('features', 'cache', 'synthetic_manifest.json',
                                                  'state_features*.npy'))
    monkeypatch.setattr(data_paths, 'REPO_ROOT', tmp_path)
    monkeypatch.chdir(tmp_path)
    modules = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - modules:  # the page's package, imported from tmp_path
        if name.split('.')[0] == 'my_method':
            del sys.modules[name]


def run_command(argv: list, root: Path, monkeypatch):
    """One shell line of the page: ``[PYTHONPATH=.] .venv/bin/python tools/X.py ARGS``."""
    while '=' in argv[0]:
        name, value = argv.pop(0).split('=', 1)
        assert (name, value) == ('PYTHONPATH', '.'), argv
        monkeypatch.syspath_prepend(str(root))
    assert argv[0] == '.venv/bin/python' and argv[1].startswith('tools/'), argv
    return load_tool(Path(argv[1]).stem).main(argv[2:])


def test_the_page_runs_as_written_and_its_method_reaches_the_table(repository_root,
                                                                   monkeypatch, capsys):
    from mmaction.registry import MODELS
    from vpn_plugin.data_paths import load_config
    for path, text in page_files().items():
        (repository_root / path).parent.mkdir(exist_ok=True)
        (repository_root / path).write_text(text)
    if 'ToyPlanner' in MODELS.module_dict:  # registered by an earlier run in this session
        monkeypatch.delitem(MODELS.module_dict, 'ToyPlanner')
    for argv in page_commands():
        run_command(list(argv), repository_root, monkeypatch)
    out = capsys.readouterr().out
    assert (repository_root / 'work_dirs/toy_kitchen_t3/epoch_1.pth').is_file()
    cells = [line.split('|')[1:-1] for line in out.splitlines()
             if line.startswith('| ') and not line.startswith('| Method')]
    # a row's name with its marks (†: shortened, and whatever else the report marks)
    rows = {re.sub(r'[^\w /]+$', '', cell[0].strip()): cell for cell in cells}
    assert {'ToyPlanner', 'ToyPlanner w/o PKG', 'ViterbiPlanNet'} <= set(rows), out[-3000:]
    assert all('†' in rows[name][0] for name in ('ToyPlanner', 'ToyPlanner w/o PKG'))
    assert rows['ToyPlanner'][1].strip() == '198.43K'  # 2*1536*64 + 64 + 64*3*9 + 3*9
    assert 'Mean over seeds (n=3)' in out
    # the dry run names the dataset (it said '{data_root}', the placeholder)
    assert 'no measured epoch time of ToyPlanner on kitchen' in out
    # the CrossTask/NIV variant of the config is a valid config too (not run: real data)
    niv = load_config(repository_root / 'my_method/toy_niv_t3.py')
    assert niv.model.type == 'ToyPlanner' and niv.model.horizon == 3
