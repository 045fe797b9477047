"""Issue 37, the known items closing15 left (fixKnown, session 16), each failing on 3ce84f9
(checked in a worktree of it) unless it says it guards a valid input."""
import os
import shutil
from pathlib import Path

import pytest

from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
KEPT = REPO / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'
VPN_T3 = 'configs/vpn_crosstask_t3.py'


# ------------------------------------ 1 (N_mixspell2): one config however its rows spell it
def _spelt(rows, spellings):
    """The ViterbiPlanNet rows of ``rows``, seed s naming its config as ``spellings[s]``."""
    for row in rows:
        if row.method == 'ViterbiPlanNet' and row.seed in spellings:
            row.config = spellings[row.seed]
    return rows


def test_rows_spelling_one_config_three_ways_share_a_cell(tmp_path, monkeypatch):
    """Before (passC N_mixspell2): rows naming one config as ``/abs/configs/x.py``,
    ``configs/x.py`` and through a link (``./x.py`` from another folder) were refused as
    "differ in config". Now the cell groups the resolved file and its content."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    os.symlink(REPO / VPN_T3, tmp_path / 'x.py')
    monkeypatch.chdir(tmp_path)  # another working directory: configs/x.py is the repository's
    rows = _spelt(read_results(KEPT), {0: str(REPO / VPN_T3), 1: './x.py', 2: VPN_T3})
    table = build_table(rows, metrics=('success_rate',))
    assert table.cells == build_table(read_results(KEPT), metrics=('success_rate',)).cells


def test_two_configs_of_one_name_stay_apart(tmp_path):
    """Guard: two files named alike but of other content (``a/x.py``, ``b/x.py``) are two
    run settings, named with the files they are."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    for folder, note in (('a', '# one\n'), ('b', '# another\n')):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / 'x.py').write_text(f'_base_ = [{str(REPO / VPN_T3)!r}]\n{note}')
    rows = _spelt(read_results(KEPT), {0: str(tmp_path / 'a/x.py'), 1: str(tmp_path / 'b/x.py'),
                                       2: str(tmp_path / 'b/x.py')})
    with pytest.raises(ValueError, match=r'differ in config: ".*/a/x.py" \(seed 0\); '
                       r'".*/b/x.py" \(seeds 1, 2\)'):
        build_table(rows, metrics=('success_rate',))


# ------------------------------------ 2 (KS3): a refused training writes nothing
def _train_refused_before_it_began(tiny_crosstask, tmp_path, work_dir):
    """tools/train.py of a tiny KEPP whose ``model.step_checkpoint`` is no step model (passM's
    case: refused when its step model is loaded, in ``before_train``): exits non-zero."""
    import torch
    from tiny_configs import write_tiny_config
    torch.save({'state_dicts': {}}, tmp_path / 'not_a_step_model.pth')
    body = ("model = dict(feature_dim=512, dim=32, n_timesteps=20)\n"
            "train_cfg = dict(max_epochs=1, val_interval=1)\n")
    config = write_tiny_config(tmp_path / 'tiny_kepp.py',
                               REPO / 'configs/baselines/kepp_crosstask_t3.py', body,
                               tiny_crosstask, batch_size=32, steps_per_epoch=1)
    with pytest.raises(SystemExit) as refused:
        load_tool('train').main([str(config), '--work-dir', str(work_dir), '--cfg-options',
                                 f'model.step_checkpoint={tmp_path / "not_a_step_model.pth"}'])
    assert 'not a KEPP step model' in str(refused.value.code)


def test_a_training_refused_before_it_began_leaves_no_new_work_dir(tiny_crosstask, tmp_path):
    """Before (passM KS3): a training refused once its model was built left the Runner's
    config copy in the new work dir. Now the config is written when the run begins
    (``before_train`` ran): the refused run leaves no work dir."""
    _train_refused_before_it_began(tiny_crosstask, tmp_path, tmp_path / 'new' / 'run')
    assert not (tmp_path / 'new').exists(), sorted(
        str(p.relative_to(tmp_path)) for p in (tmp_path / 'new').rglob('*'))


def test_a_training_refused_before_it_began_keeps_an_existing_work_dir_as_it_was(
        tiny_crosstask, tmp_path):
    """Before: the refused run replaced the earlier run's config copy in an existing work
    dir. Now every file there stays as it was."""
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    (work_dir / 'tiny_kepp.py').write_text('# the earlier run\n')
    (work_dir / 'notes.txt').write_text('mine\n')
    before = {p.name: p.read_bytes() for p in work_dir.iterdir()}
    _train_refused_before_it_began(tiny_crosstask, tmp_path, work_dir)
    assert {p.name: p.read_bytes() for p in work_dir.iterdir()} == before


# ------------------------------------ 3: an output's suffix compared without case
@pytest.mark.parametrize('name, kind', [('X.JSON', 'metrics'), ('X.NPY', 'text_features'),
                                        ('X.JSONL', 'results'), ('X.Npz', 'features'),
                                        ('T.TEX', 'report_latex')])
def test_an_output_suffix_in_capitals_is_that_format(tmp_path, name, kind):
    """Before (passV): ``--out X.JSON`` / ``X.NPY`` / ``X.JSONL`` were refused "expected a
    file name ending in .json" by every tool (outputs.check_output's suffix rule was
    case-sensitive). Now one rule (``outputs.has_suffix``) compares without case."""
    from vpn_plugin.outputs import check_output
    assert check_output(tmp_path / name, kind, '--out') == tmp_path / name


def test_another_suffix_is_still_refused(tmp_path):
    """Guard: a name of another format is refused as before (case aside)."""
    from vpn_plugin.outputs import check_output
    for name in ('X.txt', 'X.JSON.bak', 'X.NPZ'):
        with pytest.raises(ValueError, match='expected a file name ending in .npy'):
            check_output(tmp_path / name, 'text_features', '--out')


def test_a_results_file_named_in_capitals_is_written_and_read(tmp_path):
    """Before: rows appended to ``R.JSONL`` were refused ("use a .jsonl name") and reading it
    said 'unknown results format ".JSONL"'; llm_eval refused ``--out R.JSONL``."""
    from vpn_plugin.protocol.results import append_result, read_results
    row = read_results(KEPT)[0]
    assert append_result(tmp_path / 'R.JSONL', row)
    assert read_results(tmp_path / 'R.JSONL') == [row]
    args = load_tool('llm_eval').parse_args(['--config', VPN_T3, '--model', 'm', '--base-url',
                                             'http://localhost:1/v1',
                                             '--out', str(tmp_path / 'L.JSONL')])
    assert args.out == str(tmp_path / 'L.JSONL')
