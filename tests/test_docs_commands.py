"""Every command and path of README.md and docs/*.md runs as written, or names what exists.

The commands are taken from the pages' code blocks and inline code: each ``tools/<name>.py``
(ours, or MMAction2's own under ``mmaction/.mim/tools``) must exist and accept every flag given to
it (its argparse parser, caught as the tool builds it) with a value among the flag's choices;
``--methods`` must name a method of the protocol; every repository path must exist (brace and
glob patterns must match), every link must reach a file and heading, and a path the tools write
(a checkpoint, a protocol results file) must have the form they write. The cheap commands run:
``--help`` of every named tool, and the Python API example's calls bind to the functions.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import functools
import importlib.util
import inspect
import io
import itertools
import re
import shlex
import sys
from pathlib import Path

import pytest

from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
PAGES = ([REPO / 'README.md'] + sorted((REPO / 'docs').glob('*.md'))
         + sorted((REPO / 'examples').glob('*/README.md')))

# Named by pages that other branches are writing right now (KEPP, CEFITO); empty these sets
# when those branches are merged.
PENDING_FILES = set()
PENDING_FLAGS = {}
# folders of the repository (and of the shared data) a documented path may start with
CHECKED_ROOTS = ('configs/', 'tools/', 'examples/', 'prompts/', 'docs/', 'vpn_plugin/',
                 'tests/', '../shared/')
# flags whose value is a path the command writes (it need not exist before)
OUTPUT_FLAGS = {'--out', '--dst', '--out-metrics', '--save-anchors', '--work-dir', '--cache-dir',
                '--figure'}  # --figure: a stem the tool writes .png and .pdf to
# what tools/train.py, the protocol runner and TaskClassifierHook write into a work dir
CHECKPOINT_NAMES = re.compile(r'(best_plan_success_rate_epoch_(<N>|\d+)|epoch_(<N>|N|\d+)'
                              r'|task_classifier)\.pth')
WRITTEN_CHECKPOINTS = ('best_plan_success_rate_epoch_12.pth', 'epoch_12.pth', 'task_classifier.pth')
# ProtocolRunner.results_file
RESULTS_NAME = re.compile(r'results(_[a-z_]+-[^_/]+)*(_smoke)?\.jsonl')
SETTINGS = ('batch_size', 'max_epochs', 'val_interval')  # ProtocolRunner's results file name


# ------------------------------------------------------------------------------ extraction
def shown_name(page: Path) -> str:
    return str(page.relative_to(REPO))


def code_blocks(text: str):
    """``(language, lines)`` of every fenced block and every 4-space indented block (outside
    lists' continuation lines) of a Markdown page."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = re.match(r'\s*```(\w*)', line)
        if fence:
            end = next((j for j in range(index + 1, len(lines))
                        if lines[j].strip().startswith('```')), len(lines))
            yield fence.group(1), lines[index + 1:end]
            index = end + 1
            continue
        starts_block = index == 0 or not lines[index - 1].strip()
        if line.startswith('    ') and line.strip() and starts_block:
            end = index
            while end < len(lines) and (lines[end].startswith('    ') or not lines[end].strip()):
                end += 1
            yield 'indented', [item[4:] for item in lines[index:end]]
            index = end
            continue
        index += 1


def prose(text: str) -> str:
    """The page without its code blocks (what inline code and links are read from)."""
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    return '\n'.join(line for line in text.splitlines() if not line.startswith('    '))


def joined(lines):
    """Lines with backslash continuations joined, and the indented lines of options that go on
    a usage line (``    [--deterministic] ...``)."""
    out, pending = [], ''
    for line in lines:
        if out and not pending and re.match(r'\s+(\[|--)', line):
            out[-1] += ' ' + line.strip()
            continue
        if line.rstrip().endswith('\\'):
            pending += line.rstrip()[:-1] + ' '
            continue
        out.append(pending + line)
        pending = ''
    if pending:
        out.append(pending)
    return out


def tokens_of(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # pseudo-syntax with a lone quote (e.g. test_horizon=T')
        return line.split('#')[0].split()


def segments(tokens):
    """A shell line's simple commands (split at ; && & || and shell keywords)."""
    current = []
    for token in tokens:
        if token in (';', '&&', '&', '||', 'do', 'done', 'then', 'fi'):
            if current:
                yield current
            current = []
            continue
        for piece in re.split(r'(?<=[^\\]);|&(?!&)', token):
            current.append(piece)
    if current:
        yield current


def clean(token: str) -> str:
    return token.strip('[](),;:').rstrip('.')


TOOL_TOKEN = re.compile(r'(?:^|/)(tools/[\w-]+\.(?:py|sh)|\$MMA_TOOLS/(?:train|test)\.py)$')


def commands():
    """``(page, line, argv)`` for every command line that runs a tool of this repository or
    MMAction2's (argv starts at the tool)."""
    found = []
    for page in PAGES:
        text = page.read_text()
        lines = []
        for language, block in code_blocks(text):
            if language not in ('python', 'json'):
                lines += joined(block)
        lines += re.findall(r'`([^`\n]*tools/[\w-]+\.(?:py|sh)[^`\n]*)`', prose(text))
        for line in lines:
            for segment in segments(tokens_of(line)):
                for position, token in enumerate(segment):
                    if TOOL_TOKEN.search(clean(token)):
                        argv = [clean(token)] + segment[position + 1:]
                        found.append((shown_name(page), line.strip(), argv))
                        break
    return found


def tool_of(argv0: str) -> str:
    match = TOOL_TOKEN.search(argv0)
    return match.group(1) if match else argv0


# ------------------------------------------------------------------------------ the tools
class _Caught(Exception):
    pass


def _catch_parser(call):
    """The ArgumentParser ``call`` builds, caught when it parses (nothing else runs)."""
    caught = []

    def catch(self, args=None, namespace=None):
        caught.append(self)
        raise _Caught

    original = argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_known_args = catch
    try:
        call()
    except _Caught:
        pass
    finally:
        argparse.ArgumentParser.parse_known_args = original
    assert caught, f'{call}: built no ArgumentParser'
    return caught[0]


def mmaction_tool(name: str) -> Path:
    import mmaction
    return Path(mmaction.__file__).parent / '.mim' / 'tools' / f'{name}.py'


@functools.lru_cache(maxsize=None)
def module_of(tool: str):
    if tool.startswith('$MMA_TOOLS/'):
        path = mmaction_tool(Path(tool).stem)
        spec = importlib.util.spec_from_file_location(f'mmaction_tool_{path.stem}', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load_tool(Path(tool).stem)


@functools.lru_cache(maxsize=None)
def parser_of(tool: str) -> argparse.ArgumentParser:
    module = module_of(tool)
    if tool.startswith('$MMA_TOOLS/'):
        return _catch_parser(module.parse_args)
    return _catch_parser(lambda: module.main(['--help']))


def subparsers(parser):
    return {name: sub for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def options(parser) -> dict:
    """``{flag: action}`` of a parser."""
    return {flag: action for action in parser._actions for flag in action.option_strings}


# shell scripts: the tool whose flags they pass on
SCRIPT_TOOLS = {'tools/dist_train.sh': 'tools/train.py', 'tools/slurm_train.sh': 'tools/train.py',
                'tools/dist_test.sh': 'tools/test.py', 'tools/slurm_test.sh': 'tools/test.py',
                'tools/dist_extract.sh': 'tools/extract_features.py',
                'tools/slurm_extract.sh': 'tools/extract_features.py'}
PLACEHOLDER = re.compile(r'[A-Z$<{*]|\.\.\.')


def alternatives(value: str) -> list[str]:
    """``{a,b}``, ``a|b`` and ``[a]`` as the literal values they stand for."""
    value = value.strip('[]()')
    if value.startswith('{') and value.endswith('}'):
        return value[1:-1].split(',')
    return value.split('|')


def flag_problems(tool: str, argv: list[str]) -> list[str]:
    """What in ``argv`` (the arguments after the tool) the tool's parser does not accept."""
    parser = parser_of(SCRIPT_TOOLS.get(tool, tool))
    subs = subparsers(parser)
    words = [clean(token) for token in argv]
    chosen = next((subs[word] for word in words if word in subs), None)
    known = {**options(parser), **(options(chosen) if chosen else {})}
    if subs and chosen is None:
        for sub in subs.values():
            known.update(options(sub))
    problems = []
    for index, raw in enumerate(argv):
        for token in alternatives(raw) if '|' in raw else [raw.strip('[]()')]:
            if not re.match(r'--?[a-zA-Z]', token):
                continue
            flag = token.split('=')[0]
            if flag in PENDING_FLAGS.get(tool, ()):
                continue
            if flag not in known:
                problems.append(f'{tool} has no flag {flag}')
                continue
            choices = known[flag].choices
            value = argv[index + 1] if index + 1 < len(argv) and '=' not in token else None
            if choices and value and not value.startswith('-'):
                for literal in alternatives(value):
                    if literal and not PLACEHOLDER.search(literal) and literal not in choices:
                        problems.append(f'{tool} {flag} {literal}: not among {list(choices)}')
    return problems


# ------------------------------------------------------------------------------ the paths
def expand_braces(pattern: str) -> list[str]:
    """Shell brace expansion (``{a,b}``, ``{3..6}``)."""
    match = re.search(r'\{([^{}]*)\}', pattern)
    if not match:
        return [pattern]
    body = match.group(1)
    numbers = re.fullmatch(r'(\d+)\.\.(\d+)', body)
    if numbers:
        choices = [str(n) for n in range(int(numbers.group(1)), int(numbers.group(2)) + 1)]
    elif ',' in body:
        choices = body.split(',')
    else:  # a literal brace (e.g. a format), not an expansion
        return [pattern]
    head, tail = pattern[:match.start()], pattern[match.end():]
    return list(itertools.chain.from_iterable(expand_braces(head + c + tail) for c in choices))


def path_problem(token: str) -> str | None:
    """Why a documented repository path does not exist ('' / None when it does)."""
    path = clean(token).split('::')[0]
    if not path.startswith(CHECKED_ROOTS) or '$' in path or path in PENDING_FILES:
        return None
    if path.count('{') != path.count('}'):  # a brace list cut at its spaces: prose, no path
        return None
    if path.startswith('../shared/') and not (REPO.parent / 'shared').is_dir():
        return None
    for candidate in expand_braces(path):
        pattern = re.sub(r'<[^>]*>|\bT\b(?=\d|_)|[A-Z][A-Z_]+', '*', candidate)
        matches = list(REPO.glob(pattern)) if not pattern.startswith('../') else \
            list(REPO.parent.glob(pattern[3:]))
        if not matches:
            return f'{candidate}: no such file in the repository'
    return None


def produced_form_problem(token: str, results_outputs: set) -> str | None:
    """A path under work_dirs/ must have the form the tools write."""
    path = clean(token)
    if not path.startswith('work_dirs/') or '$' in path:
        return None
    name = Path(path).name
    if name.endswith('.pth') and not (
            CHECKPOINT_NAMES.fullmatch(name)
            or any(fnmatch.fnmatch(written, name) for written in WRITTEN_CHECKPOINTS)):
        return (f'{path}: no tool writes a checkpoint named {name} '
                '(best_plan_success_rate_epoch_<N>.pth, epoch_<N>.pth)')
    if name.endswith('.jsonl') and path not in results_outputs:
        if '*' in name or '?' in name:  # a glob must match some name the runner writes
            if not any(fnmatch.fnmatch(example, name) for example in
                       ('results.jsonl', 'results_max_epochs-3.jsonl')):
                return f'{path}: matches no results file name the runner writes'
            name = 'results.jsonl'
        if not RESULTS_NAME.fullmatch(name):
            return (f'{path}: protocol results files are named '
                    'results[_<setting>-<value>][_smoke].jsonl')
        settings = re.findall(r'_([a-z_]+)-', name)
        if any(s not in SETTINGS for s in settings) or settings != sorted(settings):
            return f'{path}: results file settings {settings}; expected sorted among {SETTINGS}'
        parent = Path(path).parent.name
        if not re.search(r'[<*?]', parent) and parent not in protocol_names():
            return (f'{path}: {Path(path).parent.name} is no protocol name; the runner writes '
                    f'<out>/<protocol>/results*.jsonl, protocols {sorted(protocol_names())}')
    return None


def protocol_name(path: Path) -> str:
    """A protocol config's ``protocol`` (the results folder), read from it or the base it names
    (read as text: loading all of them with mmengine takes seconds)."""
    text = path.read_text()
    own = re.search(r"^protocol = '([^']+)'", text, flags=re.M)
    if own:
        return own.group(1)
    base = re.search(r"_base_ = \['([^']+)'\]", text)
    return protocol_name((path.parent / base.group(1)).resolve())


@functools.lru_cache(maxsize=None)
def protocols() -> dict:
    """``{protocol config path: protocol name}`` of configs/protocol/."""
    return {str(path.relative_to(REPO)): protocol_name(path)
            for path in sorted((REPO / 'configs' / 'protocol').glob('*.py'))}


@functools.lru_cache(maxsize=None)
def page_protocols() -> frozenset:
    """The protocols a page writes itself (a Python block setting ``protocol = '...'``, as
    docs/your_method.md's own protocol config)."""
    names = set()
    for page in PAGES:
        for language, block in code_blocks(page.read_text()):
            if language == 'python':
                names.update(re.findall(r"^protocol = '([^']+)'", '\n'.join(block), flags=re.M))
    return frozenset(names)


def protocol_names() -> set:
    return set(protocols().values()) | page_protocols()


@functools.lru_cache(maxsize=None)
def methods_of(config: str) -> frozenset:
    """The method names (runs and their tests) of a protocol config."""
    from vpn_plugin.protocol.runner import load_protocol
    cfg = load_protocol(str(REPO / config))
    names = set()
    for run in cfg.runs:
        names.add(run['method'])
        names.update(test['method'] for test in run.get('tests', ()) if 'method' in test)
    return frozenset(names)


def method_problems(tool: str, argv: list[str]) -> list[str]:
    """``--methods`` of run_protocol.py / report.py must name methods of the protocol run."""
    if tool not in ('tools/run_protocol.py', 'tools/report.py') or '--methods' not in argv:
        return []
    if tool == 'tools/run_protocol.py':
        configs = [path for path in protocols() if path in argv]
    else:
        named = {Path(clean(token)).parent.name for token in argv if token.endswith('.jsonl')}
        configs = [path for path, name in protocols().items() if name in named]
    valid = set().union(*map(methods_of, configs))
    start = argv.index('--methods') + 1
    given = list(itertools.takewhile(lambda t: not t.startswith('-'), argv[start:]))
    return [f'{tool} --methods {name!r}: not a method of the protocol ({sorted(valid)})'
            for name in given if valid and name not in valid]


# ------------------------------------------------------------------------------ the tests
COMMANDS = commands()


def test_the_pages_have_commands():
    """The extraction finds the README's recipes (a test that reads nothing cannot fail)."""
    readme = [argv for page, _, argv in COMMANDS if page == 'README.md']
    assert len(readme) >= 10
    assert {'tools/train.py', 'tools/test.py', 'tools/run_protocol.py', 'tools/report.py',
            'tools/llm_eval.py', '$MMA_TOOLS/train.py'} <= {tool_of(argv[0]) for argv in readme}


def test_every_tool_exists_and_takes_the_documented_flags():
    problems = []
    for page, line, argv in COMMANDS:
        tool = tool_of(argv[0])
        if tool in PENDING_FILES:
            continue
        path = mmaction_tool(Path(tool).stem) if tool.startswith('$MMA_TOOLS/') else REPO / tool
        if not path.is_file():
            problems.append(f'{page}: {line}\n    {tool} does not exist')
            continue
        if tool.endswith('.sh') and tool not in SCRIPT_TOOLS:
            continue
        problems += [f'{page}: {line}\n    {problem}'
                     for problem in flag_problems(tool, argv[1:]) + method_problems(tool, argv[1:])]
    assert not problems, '\n'.join(problems)


def test_shell_scripts_and_make_targets_exist():
    for script in SCRIPT_TOOLS:
        assert (REPO / script).stat().st_mode & 0o111, f'{script} is not executable'
    makefile = (REPO / 'Makefile').read_text()
    for page in PAGES:
        for target in re.findall(r'^\s*make (\w+)', page.read_text(), flags=re.M):
            assert re.search(rf'^{target}:', makefile, flags=re.M), \
                f'{shown_name(page)}: make {target}: no such Makefile target'


def test_every_documented_path_exists_or_has_the_produced_form():
    results_outputs = {clean(argv[argv.index('--out') + 1]) for _, _, argv in COMMANDS
                       if tool_of(argv[0]) == 'tools/llm_eval.py' and '--out' in argv}
    problems = []
    for page in PAGES:
        text = page.read_text()
        words = re.findall(r'`([^`\n]+)`', prose(text))
        for _, block in code_blocks(text):
            words += block
        for word in words:
            tokens = tokens_of(word) if ' ' in word else [word]
            for index, token in enumerate(tokens):
                if index and tokens[index - 1] in OUTPUT_FLAGS:
                    continue
                for problem in (path_problem(token), produced_form_problem(token, results_outputs)):
                    if problem:
                        problems.append(f'{shown_name(page)}: {problem}')
    assert not problems, '\n'.join(sorted(set(problems)))


def anchors(page: Path) -> set:
    """GitHub's anchors of a page's headings."""
    slugs = set()
    for heading in re.findall(r'^#+ (.+)$', re.sub(r'```.*?```', '', page.read_text(), flags=re.S),
                              flags=re.M):
        slug = re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')
        slugs.add(slug)
    return slugs


def test_every_link_reaches_a_file_and_heading():
    problems = []
    for page in PAGES:
        for target in re.findall(r'\]\(([^)\s]+)\)', prose(page.read_text())):
            if re.match(r'https?:|mailto:', target):
                continue
            file, _, anchor = target.partition('#')
            path = (page.parent / file).resolve() if file else page
            shown = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
            if shown in PENDING_FILES:
                continue
            if not path.exists():
                problems.append(f'{shown_name(page)}: link {target}: {shown} does not exist')
            elif anchor and path.suffix == '.md' and anchor not in anchors(path):
                problems.append(f'{shown_name(page)}: link {target}: '
                                f'no heading #{anchor} in {shown}')
    assert not problems, '\n'.join(problems)


def test_every_named_tool_answers_help():
    """The cheap run: ``--help`` of every tool the pages name, in this process."""
    tools = sorted({tool_of(argv[0]) for _, _, argv in COMMANDS} - PENDING_FILES)
    for tool in tools:
        if tool.endswith('.sh') or not (tool.startswith('$') or (REPO / tool).is_file()):
            continue  # a missing tool fails test_every_tool_exists_and_takes_the_documented_flags
        module = module_of(tool)
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as stop:
            if tool.startswith('$MMA_TOOLS/'):
                argv, sys.argv = sys.argv, [tool, '--help']
                try:
                    module.parse_args()
                finally:
                    sys.argv = argv
            else:
                module.main(['--help'])
        assert stop.value.code == 0, tool
        assert 'usage:' in stdout.getvalue(), tool


def test_mmaction2_tools_are_where_the_readme_says():
    """README: MMAction2's train.py / test.py sit under site-packages mmaction/.mim/tools."""
    assert 'mmaction/.mim/tools/' in (REPO / 'README.md').read_text()
    for name in ('train', 'test'):
        assert mmaction_tool(name).is_file()


def python_examples():
    for page in PAGES:
        for language, block in code_blocks(page.read_text()):
            if language == 'python' and 'from vpn_plugin' in '\n'.join(block):
                yield shown_name(page), '\n'.join(block)


def test_the_python_examples_call_what_exists():
    """Each ``from vpn_plugin.x import names`` resolves, every call of such a name binds to its
    signature, and every path the example names exists or has the produced form."""
    examples = list(python_examples())
    assert any(page == 'docs/usage.md' for page, _ in examples)
    problems = []
    for page, source in examples:
        tree = ast.parse(source)
        functions = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module.startswith('vpn_plugin'):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if not hasattr(module, alias.name):
                        problems.append(f'{page}: {node.module} has no {alias.name}')
                    else:
                        functions[alias.asname or alias.name] = getattr(module, alias.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, 'id', None) in functions:
                function = functions[node.func.id]
                try:
                    inspect.signature(function).bind(*node.args,
                                                     **{k.arg: k.value for k in node.keywords})
                except TypeError as error:
                    problems.append(f'{page}: {ast.unparse(node)}: {error}')
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                problems += [f'{page}: {p}' for p in (path_problem(node.value),
                                                       produced_form_problem(node.value, set()))
                             if p]
    assert not problems, '\n'.join(problems)


# ------------------------------------------------------------------------------ the checker
def test_the_checks_catch_what_issue_34_found():
    """The checker itself fails on the README's old mistakes and on made-up names."""
    assert produced_form_problem('work_dirs/vpn_niv_t3/best.pth', set())
    assert not produced_form_problem('work_dirs/vpn_niv_t3/best_*.pth', set())
    assert produced_form_problem('work_dirs/protocol/standard_nv/results.jsonl', set())
    assert 'my_method_kitchen' in page_protocols()  # docs/your_method.md's own protocol
    assert not produced_form_problem('work_dirs/protocol/my_method_kitchen/results.jsonl', set())
    assert produced_form_problem('work_dirs/protocol/standard/results_epochs-3.jsonl', set())
    assert not produced_form_problem(
        'work_dirs/protocol/standard_niv/results_batch_size-64_max_epochs-3.jsonl', set())
    assert path_problem('configs/vpn_niv_t7.py')
    assert path_problem('configs/vpn_{crosstask,niv,kitchen}_t3.py')
    assert not path_problem('configs/baselines/schema_<dataset>_t{3..6}.py')
    assert flag_problems('tools/train.py', ['CONFIG', '--epochs', '3'])
    assert flag_problems('tools/make_synthetic_features.py', ['--dataset', '{crosstask,ego}'])
    assert not flag_problems('tools/make_synthetic_features.py',
                             ['--dataset', '{crosstask,niv,coin}', '--format', 'npz|public'])
    assert method_problems('tools/run_protocol.py',
                           ['configs/protocol/standard_niv.py', '--methods', 'Base_Model'])


def test_troubleshooting_lists_every_message_the_code_raises():
    """docs/troubleshooting.md is the page tests/troubleshooting_page.py writes from the source,
    so a message added or changed in the code is missing there until the page is rewritten."""
    from troubleshooting_page import PAGE, raised_messages, render_page
    page, messages = PAGE.read_text(), raised_messages()
    assert page == render_page(messages), (
        'docs/troubleshooting.md differs from the messages in the code; rewrite it: '
        '.venv/bin/python tests/troubleshooting_page.py')
    assert sum(map(len, messages.values())) > 400
    assert '`checkpoint <name> does not exist`' in page
