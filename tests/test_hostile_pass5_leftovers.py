"""Leftovers of the fifth hostile pass (issue 37; /tmp/hostile8_log.md, /tmp/hostile9_log.md):
each case was vague, silent or wrong before its fix (the docstring says what happened), and
each test fails on that behaviour (main c34d551)."""
import errno
import os
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from test_hostile_tools import no_traceback, user_error  # noqa: F401  (an autouse fixture)
from reference_fixtures import REFERENCE
from tool_modules import load_tool


def full_disk(monkeypatch, name_part: str) -> None:
    """Writes (``Path.write_text``) to a file whose name holds ``name_part`` fail as on a full
    disk."""
    write_text = Path.write_text

    def write(path, *args, **kwargs):
        if name_part in path.name:
            raise OSError(errno.ENOSPC, 'No space left on device')
        return write_text(path, *args, **kwargs)
    monkeypatch.setattr(Path, 'write_text', write)


# ---------------------------------------------------------------------- 1. only a best checkpoint
def best_only_work_dir(tmp_path) -> Path:
    """A work dir as a run whose epoch_1.pth save failed leaves it: its best checkpoint only."""
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    torch.save(dict(meta=dict(epoch=1, iter=4), state_dict={}),
               work_dir / 'best_plan_success_rate_epoch_1.pth')
    return work_dir


def resume_config(work_dir):
    from mmengine.config import Config
    return Config(dict(work_dir=str(work_dir)))


def test_resume_names_the_best_checkpoint_it_cannot_continue_from(tmp_path):
    """Before: after a full disk during the epoch_1.pth save (whose message said "continue
    with --resume"), --resume said only "holds no checkpoint to resume from", not that the
    work dir holds a best checkpoint nor why it is no resume point."""
    train = load_tool('train')
    cfg = resume_config(best_only_work_dir(tmp_path))
    with pytest.raises(SystemExit) as stopped:
        train.set_resume(cfg, train.LATEST)
    message = str(stopped.value.code)
    assert 'holds only best_plan_success_rate_epoch_1.pth' in message
    assert 'without optimizer and schedule state' in message and '--overwrite' in message


def test_the_failed_save_says_resume_cannot_continue_from_a_best_checkpoint(tmp_path):
    """Before: "cannot save checkpoint .../epoch_1.pth: ...; continue with --resume", although
    --resume then found nothing to continue from."""
    from vpn_plugin.engine.checkpoint_hook import save_failure_hint
    work_dir = best_only_work_dir(tmp_path)
    hint = save_failure_hint(work_dir)
    assert 'no epoch checkpoint of this run yet, so --resume has nothing to continue' in hint
    assert 'best_plan_success_rate_epoch_1.pth is a best checkpoint' in hint
    torch.save({}, work_dir / 'epoch_2.pth')  # once there is one, --resume continues from it
    assert save_failure_hint(work_dir).endswith('continue with --resume (from epoch_2.pth, the '
                                                'newest epoch checkpoint)')


def test_resume_refuses_a_best_checkpoint(tmp_path):
    """Before: ``--resume best_x.pth`` went on silently with a fresh optimizer and learning-rate
    schedule (mmengine saves best checkpoints without them): not the run continued."""
    from vpn_plugin.engine.checkpoint_hook import RESUME_POINT_KEY, check_resume_point
    with pytest.raises(ValueError, match=r'--resume .*best_a.pth: a best checkpoint .*'
                       r'load_from=.*best_a.pth without --resume'):
        check_resume_point(dict(meta={}), tmp_path / 'best_a.pth')  # saved before the record
    with pytest.raises(ValueError, match='renamed.pth: a best checkpoint'):
        check_resume_point(dict(meta={RESUME_POINT_KEY: False}), tmp_path / 'renamed.pth')
    check_resume_point(dict(meta={}), tmp_path / 'epoch_3.pth')  # no wolf
    check_resume_point(dict(meta={RESUME_POINT_KEY: True}), tmp_path / 'best_b.pth')


def test_resume_auto_says_it_replaces_a_best_checkpoint(tmp_path, capsys):
    """Before: --resume auto started afresh over the best checkpoint without a word."""
    train = load_tool('train')
    cfg = resume_config(best_only_work_dir(tmp_path))
    train.set_resume(cfg, 'auto')
    assert not cfg.resume
    assert 'only best_plan_success_rate_epoch_1.pth' in capsys.readouterr().err


# ---------------------------------------------------------------------- 2. the log file, disk full
def test_a_log_file_on_a_full_disk_stops_the_run_naming_it(tmp_path, capsys):
    """Before: Python's "--- Logging error ---" traceback (for each line logged), and the run
    went on with a log that missed lines."""
    from vpn_plugin.errors import OutputWriteError
    from vpn_plugin.runner import PlanningRunner
    runner = object.__new__(PlanningRunner)  # only what build_logger reads
    runner._experiment_name = f'full_disk_log_{tmp_path.name}'
    logger = runner.build_logger(log_file=str(tmp_path / 'run.log'))
    handler = next(h for h in logger.handlers if isinstance(h, logging.FileHandler))

    class FullDisk:
        def write(self, text):
            raise OSError(errno.ENOSPC, 'No space left on device')
        flush = close = lambda self: None
    handler.stream = FullDisk()
    try:
        with pytest.raises(OutputWriteError, match=r'cannot write the log file .*run.log: '
                           r'No space left on device; the run stopped'):
            logger.info('a line')
        logger.info('another line')  # the handler writes nothing more: no second failure
    finally:
        logger.removeHandler(handler)
    assert 'Logging error' not in capsys.readouterr().err


# ---------------------------------------------------------------------- 3. report.py: both or none
def test_report_writes_both_tables_or_none(tmp_path, monkeypatch):
    """Before: a full disk while writing tab.tex left tab.md (complete) behind: a run that
    fails wrote half of its output."""
    from vpn_plugin.protocol.results import ResultRow, append_result
    results = tmp_path / 'results.jsonl'
    for seed in range(3):
        append_result(results, ResultRow(method='Ours', seed=seed, horizon=3,
                                         metrics={'success_rate': 50.0 + seed},
                                         dataset='crosstask', protocol='standard'))
    full_disk(monkeypatch, 'tab.tex')
    message = user_error('report', [results, '--metrics', 'success_rate', '--out',
                                    tmp_path / 'tab'])
    assert 'cannot write the table' in message and 'tab.tex' in message
    assert 'nothing was written there nor to' in message
    assert not list(tmp_path.glob('*tab*'))  # neither table, nor a temporary file


def test_a_failed_rename_puts_the_files_already_replaced_back(tmp_path, monkeypatch):
    """Before: write_texts_atomically renamed tab.md into place, then the rename of tab.tex
    failed (a file system error): tab.md was the new table and tab.tex the old one, a mixed
    pair, although the message said nothing was written."""
    from vpn_plugin.errors import OutputWriteError, write_texts_atomically
    markdown, latex, fresh = tmp_path / 'tab.md', tmp_path / 'tab.tex', tmp_path / 'new.txt'
    markdown.write_text('old md')
    latex.write_text('old tex')
    rename = os.replace

    def failing(source, target, *args, **kwargs):
        if Path(target) == latex and str(source).endswith('.partial'):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return rename(source, target, *args, **kwargs)
    monkeypatch.setattr(os, 'replace', failing)
    with pytest.raises(OutputWriteError, match=r'cannot write the table .*tab.tex: Input/output '
                       r'error; nothing was written there nor to .*new.txt, .*tab.md'):
        write_texts_atomically({fresh: 'new', markdown: 'new md', latex: 'new tex'}, 'table')
    assert (markdown.read_text(), latex.read_text()) == ('old md', 'old tex')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['tab.md', 'tab.tex']
    monkeypatch.setattr(os, 'replace', rename)
    write_texts_atomically({markdown: 'new md', latex: 'new tex'}, 'table')
    assert (markdown.read_text(), latex.read_text()) == ('new md', 'new tex')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['tab.md', 'tab.tex']


# ---------------------------------------------------------------------- 4. --mem-per-run -4G
def test_mem_per_run_with_a_leading_dash_names_option_value_and_form():
    """Before: argparse's "argument --mem-per-run: expected one argument" ('-4G' read as an
    option)."""
    message = user_error('run_protocol', ['configs/protocol/standard_niv.py', '--launcher',
                                          'slurm', '--partition', 'gpu', '--mem-per-run',
                                          '-4G', '--dry-run'])
    assert "--mem-per-run '-4G': expected a size as sbatch --mem takes it" in message


def test_join_dash_values_keeps_options_and_lists():
    """No wolf: a following option, a prefix of one, and lists stay as argparse reads them."""
    import argparse
    from vpn_plugin.errors import join_dash_values
    parser = argparse.ArgumentParser()
    parser.add_argument('--mem')
    parser.add_argument('--max-epochs')
    parser.add_argument('--seeds', nargs='+')
    parser.add_argument('--dry-run', action='store_true')
    assert join_dash_values(parser, ['--mem', '-4G', '--seeds', '-1']) == [
        '--mem=-4G', '--seeds', '-1']
    assert join_dash_values(parser, ['--mem', '--dry-run']) == ['--mem', '--dry-run']
    assert join_dash_values(parser, ['--mem', '--max']) == ['--mem', '--max']
    assert join_dash_values(parser, ['--mem', '-h']) == ['--mem', '-h']


# ---------------------------------------------------------------------- 5. an extra grads row
def test_an_extra_recorded_gradient_is_named_as_one_the_model_does_not_produce(tmp_path):
    """Before: an extra row in a fixture's grads.npz failed as "grads.npz:extra.weight
    (missing)", as if the model's gradient were missing."""
    from vpn_plugin.oracles import compare as C
    weight = np.arange(8, dtype=np.float64)
    summary = C.grad_summary(torch.from_numpy(weight))
    np.savez(tmp_path / 'grads.npz', weight=summary, **{'extra.weight': summary})
    rows = {row[0]: row for row in C.compare_grads(tmp_path / 'grads.npz',
                                                   dict(weight=summary), 1e-3)}
    assert rows['grads.npz:weight'][4]
    label = next(name for name in rows if name.startswith('grads.npz:extra.weight'))
    assert 'recorded only: the implementation produces no such array' in label
    assert not rows[label][4]
    np.savez(tmp_path / 'grads.npz', weight=summary)
    rows = C.compare_grads(tmp_path / 'grads.npz', dict(weight=summary, bias=summary), 1e-3)
    assert [row[0] for row in rows if not row[4]] == [
        'grads.npz:bias (not recorded: the fixture lacks this array, which the implementation '
        'produces)']


# ---------------------------------------------------------------------- 6. S3D state-dict hint
def test_an_s3d_fixture_state_dict_of_another_model_gets_the_fixtures_hint(tmp_path):
    """Before: "checkpoint .../state_dict.npz does not fit the model S3D of the config: ...
    Test it with the config it was trained with ...; to start fine-tuning from it, set
    load_partial=True": a checkpoint's hint for a fixture."""
    source = REFERENCE / 's3d_small'
    if not (source / 'meta.json').is_file():
        pytest.skip(f'{source} not found')
    fixture = tmp_path / 's3d'
    shutil.copytree(source, fixture)
    state = dict(np.load(fixture / 'state_dict.npz'))
    state['extra.weight'] = np.zeros(3, np.float32)
    np.savez(fixture / 'state_dict.npz', **state)
    message = user_error('check_reference', [fixture])
    assert "state_dict.npz: does not fit the S3D built from the fixture's meta.json: " \
           "unexpected keys ['extra.weight']" in message
    assert 'load_partial' not in message and 'fine-tuning' not in message


def test_a_fixture_state_dict_names_missing_and_reshaped_tensors(tmp_path):
    from vpn_plugin.oracles.compare import check_fixture_state_dict
    model = torch.nn.Linear(3, 2)
    check_fixture_state_dict(tmp_path / 's.npz', {k: v.numpy() for k, v in
                                                  model.state_dict().items()}, model)
    with pytest.raises(ValueError, match=r"s.npz: does not fit the Linear .*missing keys "
                       r"\['bias'\]; other shapes or dtypes: weight: \(2, 4\) in the fixture"):
        check_fixture_state_dict(tmp_path / 's.npz', dict(weight=np.zeros((2, 4))), model)


# ---------------------------------------------------------------------- 7. KEPP PKG edits
def pkg_copy(tmp_path, edit_inputs=None, edit_outputs=None) -> Path:
    source = REFERENCE / 'kepp_small_t3' / 'pkg'
    if not source.is_dir():
        pytest.skip(f'{source} not found')
    fixture = tmp_path / 'pkg'
    shutil.copytree(source, fixture)
    for name, edit in (('inputs.json', edit_inputs), ('outputs.json', edit_outputs)):
        if edit:
            data = json.loads((fixture / name).read_text())
            edit(data)
            (fixture / name).write_text(json.dumps(data))
    return fixture


def set_end(data, value=99):
    data['queries'][0]['end'] = value


@pytest.mark.parametrize('edit_inputs, edit_outputs, expected', [
    # before: each FAILed its num_paths row (1 of 224) without saying why
    (lambda i: i['queries'].pop(), None,
     r'inputs.json has 223 queries, outputs.json 224 queries; outputs.json queries\[223\] '
     r'\(start 5, end 8, horizon 6\) and any after it have no counterpart'),
    (None, lambda o: o['queries'].pop(1),
     r'inputs.json: queries\[1\] asks start \d+, end \d+, horizon \d+, but outputs.json '
     r'queries\[1\] answers'),
    (set_end, None,
     r'queries\[0\] asks start 4, end 99, horizon 3 \(end 99 is no node of the graph built '
     r'from action_list\), but outputs.json queries\[0\] answers start 4, end 5, horizon 3'),
    (set_end, set_end,
     r'queries\[0\] end = 99 is no node of the graph built from action_list .*, yet '
     r'outputs.json records 6 path\(s\) for it'),
    (lambda i: i['validate_pairs'].pop(0), None,
     r'inputs.json: validate_pairs\[0\] asks start \d+, end \d+, but outputs.json validate\[0\] '
     r'answers start 0, end 0'),
])
def test_an_edited_pkg_fixture_names_the_query(tmp_path, edit_inputs, edit_outputs, expected):
    import re
    message = user_error('check_reference', [pkg_copy(tmp_path, edit_inputs, edit_outputs)])
    assert re.search(expected, message), message


# ---------------------------------------------------------------------- 8b. fixture corners
def test_a_nan_in_a_fixture_input_or_weight_is_named(tmp_path):
    """Before: a NaN in inputs.npz (or a state dict) of a copy of cefito_small_t3 made rows
    inf (search_all_energies, losses) and the check FAILed without naming the NaN."""
    from vpn_plugin.oracles.compare import read_npz
    values = np.ones((2, 3), np.float32)
    values[1, 2] = np.nan
    for name in ('inputs.npz', 'loader_inputs.npz', 'state_dict.npz', 'head_state_dict.npz'):
        np.savez(tmp_path / name, x=values, ids=np.arange(3))
        with pytest.raises(ValueError, match=rf'{name}: x holds 1 NaN/inf value\(s\) \(first '
                           r'at index \(1, 2\): nan\); expected finite'):
            read_npz(tmp_path / name)
    np.savez(tmp_path / 'outputs.npz', x=values)  # compared, row by row: not refused here
    assert np.isnan(read_npz(tmp_path / 'outputs.npz')['x'][1, 2])


# ---------------------------------------------------------------------- 8c. read-only folders
def read_only(monkeypatch, folder: Path) -> None:
    """``folder`` is read-only for this process (as for a non-root user: root writes anywhere)."""
    access = __import__('os').access

    def fake(path, mode, *args, **kwargs):
        if Path(path) == folder and mode & __import__('os').W_OK:
            return False
        return access(path, mode, *args, **kwargs)
    monkeypatch.setattr('os.access', fake)


def test_a_read_only_work_dir_is_named_with_the_user(tmp_path, monkeypatch):
    """Before (as a non-root user): "error: [Errno 13] Permission denied:
    '<folder>/.wd.lock'" for a work dir in a read-only folder, and "... '<work dir>/<timestamp>'"
    for a read-only work dir."""
    from vpn_plugin.errors import check_folder_target
    read_only(monkeypatch, tmp_path)
    with pytest.raises(PermissionError, match=rf'work dir {tmp_path}/wd: {tmp_path}, where it '
                       r'would be made, is read-only for user \S+; expected a folder this user '
                       r'can write the logs and checkpoints into: give another --work-dir'):
        check_folder_target(tmp_path / 'wd')
    with pytest.raises(PermissionError, match=rf'{tmp_path} is read-only for user'):
        check_folder_target(tmp_path)
    check_folder_target(tmp_path, writable=False)  # a read-only cache of replies still serves


def test_make_synthetic_features_names_a_read_only_out(tmp_path, monkeypatch):
    """Before (as a non-root user): "[Errno 13] Permission denied: '<out>'"."""
    read_only(monkeypatch, tmp_path)
    message = user_error('make_synthetic_features', ['--dataset', 'niv', '--out',
                                                     tmp_path / 'syn'])
    assert f'feature folder {tmp_path}/syn/features: {tmp_path}, where it would be made, is ' \
           'read-only for user' in message


def test_extraction_names_a_read_only_out(tmp_path, monkeypatch):
    """Before (as a non-root user): "[Errno 13] Permission denied: '<out>'"."""
    from vpn_plugin.video.extract import extract_videos
    read_only(monkeypatch, tmp_path)
    with pytest.raises(PermissionError, match=rf'--out {tmp_path}/feat: {tmp_path}, where it '
                       r'would be made, is read-only for user \S+; expected a folder this user '
                       r'can write the feature files into'):
        extract_videos(None, [], tmp_path / 'feat', None)


def widen(name):
    def edit(fixture):
        inputs = dict(np.load(fixture / 'inputs.npz'))
        inputs[name] = np.concatenate([inputs[name], inputs[name][..., :1]], -1)
        np.savez(fixture / 'inputs.npz', **inputs)
    return edit


def meta_batch_7(fixture):
    meta = json.loads((fixture / 'meta.json').read_text())
    meta['batch'] = 7
    (fixture / 'meta.json').write_text(json.dumps(meta))


@pytest.mark.parametrize('name, edit, expected', [
    # before: a model of text_dim 513 was built and the check blamed state_dict.npz ("(48, 512)
    # in the fixture, (48, 513) in the model")
    ('cefito_small_t3', widen('action_embeddings'),
     'action_embeddings has shape (20, 513); expected (20, 512) from meta.json'),
    # before: PASS, meta.json's batch never compared with the arrays' (silent)
    ('cefito_small_t3', meta_batch_7, 'states has shape (6, 4, 48); expected (7, 4, 48) from '
     'meta.json (batch=7'),
    # before: torch's traceback "The size of tensor a (74) must match the size of tensor b (73)"
    ('kepp_small_t3', widen('global_img_tensors'),
     'global_img_tensors has shape (4, 4, 65); expected (4, 4, 64) from meta.json'),
])
def test_fixture_inputs_of_other_sizes_than_meta_are_named(tmp_path, name, edit, expected):
    source = REFERENCE / name
    if not (source / 'meta.json').is_file():
        pytest.skip(f'{source} not found')
    fixture = tmp_path / name
    shutil.copytree(source, fixture)
    edit(fixture)
    message = user_error('check_reference', [fixture])
    assert f'{fixture}/inputs.npz: {expected}' in message


@pytest.mark.parametrize('name', ['pdpp_small_t3', 'kepp_small_t3'])
def test_injected_timesteps_beyond_meta_n_timesteps_are_named(tmp_path, name):
    """Before: meta.json n_timesteps 20 -> 10 in a copy of pdpp_small_t3 ended in torch's
    traceback "RuntimeError: index 10 is out of bounds for dimension 0 with size 10"."""
    source = REFERENCE / name
    if not (source / 'meta.json').is_file():
        pytest.skip(f'{source} not found')
    fixture = tmp_path / name
    shutil.copytree(source, fixture, ignore=shutil.ignore_patterns('pkg'))
    meta = json.loads((fixture / 'meta.json').read_text())
    meta['n_timesteps'] = 10
    (fixture / 'meta.json').write_text(json.dumps(meta))
    message = user_error('check_reference', [fixture])
    assert 'inputs.npz: t holds ids in [0, 19]; expected 0..9 (meta.json)' in message


def test_an_integer_weight_in_a_fixture_state_dict_is_named(tmp_path):
    """Before: a U-Net weight stored as int64 in a copy of pdpp_small_t3's state_dict.npz was
    cast to float32 (its fractions gone) and the check FAILed its outputs without a word."""
    from vpn_plugin.oracles.compare import check_fixture_state_dict
    from vpn_plugin.oracles.pdpp import install_unet
    model = torch.nn.Linear(3, 2)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r's.npz: weight has dtype int64; expected '
                       r'floating-point weights'):
        check_fixture_state_dict(tmp_path / 's.npz', dict(state, weight=state['weight']
                                                          .astype(np.int64)), model)

    class Unet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2, 2))
    np.savez(tmp_path / 'state_dict.npz', **{'model.w': np.ones((2, 2), np.int64)})
    with pytest.raises(ValueError, match=r'model.w has dtype int64; expected floating-point'):
        install_unet(Unet(), tmp_path / 'state_dict.npz')


# ---------------------------------------------------------------------- 8a. EMA checkpoints
@pytest.mark.usefixtures('single_thread')
def test_a_resume_refuses_a_real_best_checkpoint(tiny_crosstask, tmp_path):
    """Before: ``--resume best_*.pth`` (a tiny PDPP EMA training's) went on with a fresh
    optimizer and learning-rate schedule, without a word. Epoch checkpoints record that they
    are resume points, best ones that they are not."""
    from tiny_configs import write_tiny_pdpp_ema_config
    from vpn_plugin.engine.checkpoint import read_checkpoint
    from vpn_plugin.engine.checkpoint_hook import RESUME_POINT_KEY
    config = write_tiny_pdpp_ema_config(tmp_path, tiny_crosstask)
    train = load_tool('train').main
    options = ['--cfg-options', 'train_cfg.max_epochs=1', 'train_cfg.val_interval=1',
               'default_hooks.checkpoint.save_best=plan/success_rate',
               'default_hooks.checkpoint.rule=greater']
    train([str(config), '--work-dir', str(tmp_path / 'run'), *options])
    assert read_checkpoint(tmp_path / 'run/epoch_1.pth')['meta'][RESUME_POINT_KEY] is True
    (best,) = (tmp_path / 'run').glob('best_*.pth')
    assert read_checkpoint(best)['meta'][RESUME_POINT_KEY] is False
    with pytest.raises(SystemExit, match=r'best_.*pth: a best checkpoint'):
        train([str(config), '--work-dir', str(tmp_path / 'resumed'), '--resume', str(best),
               *options])  # the run's options: only the checkpoint's kind is wrong


def test_a_tested_ema_checkpoint_without_its_raw_weights_is_not_called_the_raw_model():
    """Before: a KEPP checkpoint saved by PDPPEMAHook with ema_state_dict removed was tested
    with the warning "... the weights tested are its state_dict, the raw model, not an EMA of
    it" and the row marked "no EMA weights", although its state_dict holds the EMA weights
    (mmengine swaps them in at save; meta['ema_schedule'] records the hook)."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import HOOKS
    from vpn_plugin.engine.ema import scored_ema_note
    hook = HOOKS.build(dict(type='PDPPEMAHook', decay=0.9, start_step=3, interval=1))
    schedule = dict(hook='PDPPEMAHook', **hook.schedule())
    assert scored_ema_note(hook, dict(meta=dict(iter=100, ema_schedule=schedule),
                                      state_dict={}), 'edited.pth') == ('', '')
    mark, _ = scored_ema_note(hook, dict(meta=dict(iter=100), state_dict={}), 'plain.pth')
    assert mark.startswith('no EMA weights')  # no wolf: a run without an EMA stays marked
