"""Third hostile pass (issue 37, "Done means"), training/test/protocol tools and data: cases
found on main 122c153, each failing on the behaviour before its fix."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin.datasets.annotations import BadVideoError


# ------------------------------------------------- feature files that hold no feature file
@pytest.mark.parametrize('content, said', [
    (b'', 'the file is empty (0 bytes)'),
    (b'frames_features: 1 2 3\n', "a text file (it starts with 'frames_features: 1 2 3"),
    (None, 'a zip archive (an npz or torch.save file) with no member'),
    (b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 2, 'a binary file of unknown format (it starts '
                                                    'with bytes '),
])
def test_a_feature_file_that_holds_no_features_says_what_it_holds(tmp_path, content, said):
    """Before: "cannot read X: EOFError('Ran out of input')" (empty), "UnpicklingError" (text)
    and "pickle data was truncated" (an npz with no arrays): the file named, not what it is nor
    what was expected."""
    from vpn_plugin.datasets.features import load_features
    path = tmp_path / 'clip.npz'
    if content is None:
        np.savez(path)
    else:
        path.write_bytes(content)
    with pytest.raises(BadVideoError) as caught:
        load_features(path, 8, vid='clip')
    message = str(caught.value)
    assert f'cannot read {path}: {said}' in message
    assert 'expected a .npy array (seconds, D), an npz archive with "frames_features"' in message


# ------------------------------------------------------- --status of a moved protocol folder
def test_status_of_a_moved_protocol_folder_names_its_own_logs(tiny_crosstask, tmp_path):
    """Before: a Slurm protocol folder moved (or copied) elsewhere printed each unit's log at
    the old location (unit_state.json and the submission records keep absolute paths), and its
    units were no longer matched with their submitted tasks."""
    from test_protocol_slurm import uniform_protocol
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    from vpn_plugin.protocol.status import unit_statuses
    from vpn_plugin.protocol.unit_state import STATE_FILE
    protocol = uniform_protocol(tiny_crosstask)
    old_root, new_root = tmp_path / 'old', tmp_path / 'new'
    old = ProtocolRunner(protocol, old_root, batch_size=64)
    first, second = expand_units(protocol)
    old_work_dir = old.work_dir(second).absolute()
    old_log = old.root.absolute() / 'slurm' / '7_1_0_log.err'
    old_work_dir.mkdir(parents=True)
    (old_work_dir / STATE_FILE).write_text(json.dumps(dict(
        state='failed', attempts=1, job='7_1', log=str(old_log), error='ValueError: x')))
    old_log.parent.mkdir(parents=True)
    old_log.write_text('the log\n')
    (old_log.parent / 'submissions.jsonl').write_text(json.dumps(dict(array='7', tasks=[dict(
        job='7_1', log=str(old_log), units=[str(old_work_dir)])])) + '\n')
    old_root.rename(new_root)
    runner = ProtocolRunner(protocol, new_root, batch_size=64)
    status = unit_statuses(runner, [first, second], queue=lambda jobs: {})[1]
    new_log = runner.root.absolute() / 'slurm' / '7_1_0_log.err'
    assert status.log == str(new_log) and new_log.is_file()
    assert (status.state, status.job, status.why) == ('failed', '7_1', 'ValueError: x')


# ------------------------------------------------------- checkpoints that are no checkpoint
@pytest.mark.parametrize('content, said', [
    (b'hello\n', "a text file (it starts with 'hello\\n')"),
    (b'', 'the file is empty (0 bytes)'),
])
def test_a_checkpoint_that_is_text_or_empty_says_what_it_is(tmp_path, content, said):
    """Before: `train.py --resume notes.pth` (a text file) ended in "error: 101" (torch's
    KeyError), an empty one in "cannot read checkpoint X:  (a truncated ...)"."""
    from vpn_plugin.engine.checkpoint import read_checkpoint
    path = tmp_path / 'notes.pth'
    path.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        read_checkpoint(path)
    assert f'cannot read checkpoint {path}: {said}' in str(caught.value)
    assert 'expected a complete torch checkpoint' in str(caught.value)


# ---------------------------------------------------------------- train.py flags and work dirs
@pytest.mark.parametrize('seed, said', [('-1', "-1: expected an integer >= 0"),
                                        ('4294967296', '4294967296: expected an integer in [0, 2**32 - 1]')])
def test_train_seed_out_of_range_is_named_by_its_flag(seed, said, capsys):
    """Before: numpy's "Seed must be between 0 and 2**32 - 1" after the config was built,
    naming neither the flag nor the value."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit):
        load_tool('train').main(['configs/vpn_niv_t3.py', '--seed', seed])
    assert f'argument --seed: {said}' in capsys.readouterr().err


@pytest.mark.parametrize('kind', ['file', 'fifo'])
def test_a_work_dir_that_is_a_file_is_named(tmp_path, kind):
    """Before: "error: [Errno 17] File exists: 'X'" (mmengine's makedirs)."""
    import os
    from tool_modules import load_tool
    target = tmp_path / 'notes'
    target.write_text('mine\n') if kind == 'file' else os.mkfifo(target)
    with pytest.raises(SystemExit, match=f'work dir {target} is a (regular file|FIFO); expected '
                                         'a folder'):
        load_tool('train').main(['configs/vpn_niv_t3.py', '--smoke', '--work-dir', str(target)])
    assert not (tmp_path / '.notes.lock').exists()


@pytest.mark.parametrize('epochs', [0, -1, float('nan'), 'x', 1.5])
def test_a_smoke_run_of_a_config_with_a_bad_epoch_count_is_refused(epochs):
    """Before: `train.py CFG --smoke --cfg-options train_cfg.max_epochs=x` trained and wrote
    "(config: x epochs)" into the checkpoint's `shortened` (the smoke schedule replaced the
    value before any check saw it)."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.smoke import smoke_config
    with pytest.raises(ValueError, match=r'train_cfg.max_epochs=.*; expected an integer >= 1'):
        # refused by load_config already (runner_keys), before the smoke schedule
        smoke_config(load_config('configs/vpn_niv_t3.py', {'train_cfg.max_epochs': epochs}))


@pytest.mark.parametrize('size', [0, -1, 1.5])
def test_a_smoke_run_of_a_bad_batch_size_is_refused(size):
    """Before: --smoke read batch_size=0 as unset (8 windows), 1.5 as 1 and -1 as "limit=-4"."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.smoke import smoke_config
    with pytest.raises(ValueError, match=r'train_dataloader.batch_size=.*; expected an integer >= 1'):
        # refused by load_config already (runner_keys), before the smoke schedule
        smoke_config(load_config('configs/vpn_niv_t3.py', {'train_dataloader.batch_size': size}))


@pytest.mark.parametrize('option, value, said', [
    ('optim_wrapper.optimizer.lr', 'abc', "optim_wrapper.optimizer.lr='abc'; expected a finite"),
    ('optim_wrapper.optimizer.lr', float('inf'), 'optim_wrapper.optimizer.lr=inf; expected a finite'),
    ('randomness.seed', 'abc', "randomness.seed='abc'; expected an integer >= 0 and <= 4294967295"),
    ('randomness.seed', -5, 'randomness.seed=-5; expected an integer >= 0'),
    ('val_evaluator.type', 'Nope', "val_evaluator: type 'Nope' is not registered"),
    ('test_evaluator.nosuch', 1, "test_evaluator: PlanningMetric has no option"),
    ('unchecked_checkpoint', 'yes', "unchecked_checkpoint='yes'"),
    ('load_partial', 1, 'load_partial=1'),
])
def test_run_options_of_a_config_are_named(option, value, said):
    """Before: lr='abc' and seed='abc' ended in TypeErrors of torch / numpy (a traceback),
    lr=inf in "log_emissions holds NaN" after training started, seed=-5 in numpy's message
    naming no key, an unknown evaluator type in mmengine's registry message naming no key, an
    evaluator option not of its metric in a TypeError at build time; unchecked_checkpoint='yes'
    scored an unchecked checkpoint (any truthy value)."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.runner import check_config_entries
    with pytest.raises(ValueError, match=f'configs/vpn_niv_t3.py: {re.escape(said)}'):
        # the runner's own keys are refused by load_config already (runner_keys)
        check_config_entries(load_config('configs/vpn_niv_t3.py', {option: value}),
                             'configs/vpn_niv_t3.py')


@pytest.mark.parametrize('suffix, content', [('.pth', b'PK\x03\x04'), ('.txt', b'model = 1')])
def test_a_config_that_is_no_config_file_is_named(tmp_path, suffix, content):
    """Before: a checkpoint given as the config: "Only py/yml/yaml/json type are supported
    now!" (no file named)."""
    from vpn_plugin.data_paths import read_config_file
    path = tmp_path / f'run{suffix}'
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f'config file {path}: a {suffix} extension; expected a '
                                         'config'):
        read_config_file(path)


def test_a_config_whose_model_is_no_dict_is_named(tmp_path):
    """Before: `{"model": 1}` as a JSON config: "TypeError: model should be a nn.Module object
    or dict, but got 1" with a traceback."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.runner import build_runner
    path = tmp_path / 'x.json'
    path.write_text('{"model": 1}')
    with pytest.raises(ValueError, match=r'x.json: model = 1; expected a model dict'):
        build_runner(load_config(path))


def test_a_checkpoint_whose_meta_is_no_dict_is_named(tmp_path):
    """Before: `test.py CFG x.pth` with meta = [1, 2]: "AttributeError: 'list' object has no
    attribute 'get'" with a traceback."""
    import torch
    from vpn_plugin.engine.checkpoint import read_checkpoint
    path = tmp_path / 'x.pth'
    torch.save({'state_dict': {}, 'meta': [1, 2]}, path)
    with pytest.raises(ValueError, match=f'checkpoint {path}: "meta" is a list; expected a dict'):
        read_checkpoint(path)


# ------------------------------------------------------------------------- dataset_stats.py
def test_dataset_stats_says_what_the_dataset_counts_as_suspicious(shared_data, tmp_path):
    """Before: dataset_stats counted windows without the warnings a training logs: a train
    video whose CSV is empty (no window), CrossTask's 3 duplicate test windows and 30 with steps
    out of order changed the counts without a word."""
    import os
    from vpn_plugin.datasets.stats import format_table, window_statistics
    root = tmp_path / 'data'
    for dirpath, _, files in os.walk(shared_data / 'crosstask'):
        (root / Path(dirpath).relative_to(shared_data)).mkdir(parents=True, exist_ok=True)
        for name in files:
            os.symlink(Path(dirpath) / name, root / Path(dirpath).relative_to(shared_data) / name)
    listed = json.loads((shared_data / 'crosstask/splits/train_videos.json').read_text())
    video = listed[0]
    csv = root / f"crosstask/crosstask_release/annotations/{video['task']}_{video['vid']}.csv"
    csv.unlink()
    csv.write_text('')
    (root / 'crosstask/splits/train_videos.json').unlink()
    (root / 'crosstask/splits/train_videos.json').write_text(json.dumps(
        [dict(video, length=0)] + listed[1:]))  # listed as a video without steps
    row = window_statistics('crosstask', root, horizons=(3,))[0]
    assert f"1 videos without steps (no window) (first: {csv}: vid {video['vid']})" in \
        row['warnings']['train']
    assert row['warnings']['test'].startswith('3 duplicate windows (first: ')
    assert '30 windows with steps out of temporal order' in row['warnings']['test']
    assert 'WARNING T=3 train: ' in format_table('crosstask', [row])


@pytest.mark.parametrize('length', [3, -1, 'x'])
def test_a_crosstask_csv_with_other_rows_than_its_listed_length_is_named(shared_data, tmp_path,
                                                                          length):
    """Before: train_videos.json's "length" (the video's steps; all 2,748 official entries
    equal their CSV's rows) was never read: a CSV that lost rows gave fewer windows, and
    length -1 or 'x' was accepted."""
    from vpn_plugin.datasets.annotations import BadVideoError, crosstask_videos
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    taxonomy = load_taxonomy(shared_data / 'crosstask/taxonomy_133.json')
    entry = json.loads((shared_data / 'crosstask/splits/train_videos.json').read_text())[0]
    rows = (shared_data / f"crosstask/crosstask_release/annotations/{entry['task']}_"
            f"{entry['vid']}.csv").read_text().splitlines()
    (tmp_path / f"{entry['task']}_{entry['vid']}.csv").write_text('\n'.join(rows[:4]) + '\n')
    (tmp_path / 'videos.json').write_text(json.dumps([dict(entry, length=length)]))
    videos, bad = crosstask_videos(tmp_path / 'videos.json', tmp_path, taxonomy)
    assert not videos and isinstance(bad[0], BadVideoError)
    csv_path = tmp_path / (entry["task"] + "_" + entry["vid"] + ".csv")
    expected = (f'field "length" = {length!r}, but {csv_path} has 4 step rows'
                if isinstance(length, int) else  # another type: named so (pass20 B_strlen)
                f'field "length" = {length!r} (str); expected an integer, the number of step '
                f'rows of {csv_path} (4)')
    assert f'entry 0 (vid {entry["vid"]}): {expected}' in str(bad[0])
    (tmp_path / 'videos.json').write_text(json.dumps([dict(entry, length=4)]))
    assert len(crosstask_videos(tmp_path / 'videos.json', tmp_path, taxonomy)[0][0].steps) == 4


# ----------------------------------------------------------------------------- run_protocol.py
def test_a_seed_given_twice_to_a_protocol_is_refused(capsys):
    """Before: `run_protocol.py P --seeds 0 0 --dry-run` listed every run of seed 0 twice (32
    runs, twice the estimated time); a real run counted them as runs of their own."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit, match=r'seeds \[0, 0\]: seed\(s\) \[0\] given twice'):
        load_tool('run_protocol').main(['configs/protocol/standard_niv.py', '--seeds', '0', '0',
                                        '--dry-run'])


def test_a_log_level_that_is_no_level_is_refused(capsys):
    """Before: `--log-level nope` was accepted (the dry run printed nothing about it)."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit):
        load_tool('run_protocol').main(['configs/protocol/standard_niv.py', '--log-level', 'nope',
                                        '--dry-run'])
    assert "argument --log-level: invalid choice: 'nope'" in capsys.readouterr().err


# ------------------------------------------------------------------------------ llm_eval.py
def test_an_llm_reply_cache_that_is_a_file_is_named(tmp_path):
    """Before: `llm_eval.py --cache-dir FILE`: "[Errno 17] File exists: 'FILE'"."""
    from vpn_plugin.baselines.llm.backends import ResponseCache
    target = tmp_path / 'cache'
    target.write_text('mine\n')
    with pytest.raises(NotADirectoryError, match=f'reply cache {target} is a regular file; '
                                                 'expected a folder .* give another --cache-dir'):
        ResponseCache(target)


def test_llm_eval_seed_out_of_range_is_named_by_its_flag(capsys):
    """Before: `--seed -1`: "error: expected non-negative integer" (numpy, no flag)."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit):
        load_tool('llm_eval').main(['--config', 'configs/vpn_niv_t3.py', '--model', 'm',
                                    '--seed', '-1'])
    assert 'argument --seed: -1: expected an integer >= 0' in capsys.readouterr().err


def test_a_protocol_out_that_is_a_file_is_refused_before_the_dry_run(tmp_path):
    """Before: `run_protocol.py P --out mine.md --dry-run` listed 80 runs under mine.md/... and
    said nothing (the real run would fail at its first mkdir)."""
    from tool_modules import load_tool
    target = tmp_path / 'mine.md'
    target.write_text('notes\n')
    with pytest.raises(SystemExit, match=f'protocol output folder {target} is a regular file'):
        load_tool('run_protocol').main(['configs/protocol/standard_niv.py', '--out', str(target),
                                        '--dry-run'])


def test_llm_eval_of_a_config_without_training_windows_is_named(capsys):
    """Before: `llm_eval.py --config configs/llm/llm_crosstask_t3.py` (train_dataloader =
    None): "TypeError: argument of type 'NoneType' is not iterable" with a traceback."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit, match=r'llm_crosstask_t3.py: train_dataloader = None; needs '
                                         r'train_dataloader.dataset'):
        load_tool('llm_eval').main(['--config', 'configs/llm/llm_crosstask_t3.py', '--model', 'm',
                                    '--base-url', 'http://127.0.0.1:9/v1'])


# -------------------------------------------------------------------------------- report.py
def test_a_latex_label_that_would_break_the_tex_file_is_refused(capsys):
    """Before: `report.py R --label 'tab:a}'` wrote \\label{tab:a}} into the .tex (exit 0)."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit):
        load_tool('report').main(['results.jsonl', '--label', 'tab:a}'])
    assert "argument --label: 'tab:a}' holds }; expected a LaTeX label key" in \
        capsys.readouterr().err


def test_a_work_dir_spelled_with_dotdot_does_not_refuse_its_own_run(tmp_path, monkeypatch):
    """Before: `train.py CFG --work-dir ../x` ended in "work dir x is in use by another process
    (pid <its own pid>)": train.py locked '../x' and the runner the resolved path, which the
    lock's re-entry did not see as one file."""
    from vpn_plugin.locks import exclusive_lock, lock_path_of
    (tmp_path / 'sub').mkdir()
    monkeypatch.chdir(tmp_path / 'sub')
    with exclusive_lock(lock_path_of('../run'), wait=False):
        with exclusive_lock(lock_path_of(tmp_path / 'run'), wait=False):
            pass


def test_a_coin_step_whose_label_contradicts_its_id_is_named(shared_data, tmp_path):
    """Before: a COIN step's "label" was never compared with its id (all 39,409 official steps
    agree with the taxonomy): an edited id, which moves the step to another action of the same
    task, was read without a word."""
    from vpn_plugin.datasets.annotations import BadVideoError
    from vpn_plugin.datasets.sources import read_source
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    records = json.loads((shared_data / 'coin/annotations/coin_train_70.json').read_text())[:3]
    step = next(iter(records[0].values()))['annotation'][0]
    step['label'] = 'eat a sandwich'
    (tmp_path / 'train.json').write_text(json.dumps(records))
    taxonomy = load_taxonomy(shared_data / 'coin/taxonomy.json')
    _, _, bad = read_source(tmp_path, taxonomy, 3, annotation_file='train.json',
                            annotation_format='coin')
    assert isinstance(bad[0], BadVideoError)
    assert "field \"label\" = 'eat a sandwich', but action 372 of" in str(bad[0])


def test_a_tasks_primary_file_without_some_tasks_is_named(shared_data, tmp_path):
    """Before: a truncated tasks_primary.txt (2 of 18 tasks) was accepted: the step-count check
    it exists for silently skipped the 16 tasks it no longer listed."""
    from vpn_plugin.datasets.annotations import check_crosstask_taxonomy, read_crosstask_tasks
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    text = (shared_data / 'crosstask/crosstask_release/tasks_primary.txt').read_text()
    (tmp_path / 'tasks_primary.txt').write_text(text[:300])
    taxonomy = load_taxonomy(shared_data / 'crosstask/taxonomy_133.json')
    with pytest.raises(ValueError, match=r"tasks_primary.txt lists 2 tasks and not the task\(s\) "
                                         r"\['71781'"):
        check_crosstask_taxonomy(taxonomy, read_crosstask_tasks(tmp_path / 'tasks_primary.txt'))
    check_crosstask_taxonomy(taxonomy, read_crosstask_tasks(
        shared_data / 'crosstask/crosstask_release/tasks_primary.txt'))


@pytest.mark.parametrize('legacy, said', [(True, 'a torch.save file (legacy format); expected'),
                                          (False, 'a zip archive without .npy members')])
def test_a_torch_file_given_as_a_feature_file_is_named(tmp_path, legacy, said):
    """Before: a torch.save file as a feature file: "holds a int" (the legacy format's magic
    number) or "no field "frames_features"; found []" (a zip file read as an npz)."""
    import torch
    from vpn_plugin.datasets.features import load_features
    path = tmp_path / 'clip.npy'
    torch.save({'frames_features': torch.zeros(4, 8)}, path,
               _use_new_zipfile_serialization=not legacy)
    with pytest.raises(BadVideoError, match=re.escape(said)):
        load_features(path, 8, vid='clip')


def test_a_video_list_entry_whose_vid_is_null_is_named(shared_data, tmp_path):
    """Before: `"vid": null` looked for the CSV '<task>_None.csv' and reported it missing."""
    from vpn_plugin.datasets.annotations import read_video_list
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    (tmp_path / 'videos.json').write_text(json.dumps([{'vid': None, 'task': '23521'}]))
    with pytest.raises(ValueError, match=r'videos.json: entry 0: field "vid" = None; expected'):
        read_video_list(tmp_path / 'videos.json',
                        load_taxonomy(shared_data / 'crosstask/taxonomy_133.json'))


def test_llm_eval_save_anchors_without_a_step_model_is_refused(capsys):
    """Before: `--save-anchors a.json` without --step-config ran the oracle setting, exit 0, and
    wrote no a.json without a word."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit):
        load_tool('llm_eval').main(['--config', 'configs/vpn_niv_t3.py', '--model', 'm',
                                    '--base-url', 'http://127.0.0.1:9/v1',
                                    '--save-anchors', 'a.json'])
    assert '--save-anchors writes the step model' in capsys.readouterr().err


def test_a_symlinked_work_dir_and_its_target_are_one_lock(tmp_path):
    """Before: `.link.lock` and `.run.lock` were two lock files, so two trainings started
    through both names were not excluded by the lock."""
    import subprocess
    import sys
    from vpn_plugin.locks import LockBusyError, exclusive_lock, lock_path_of
    (tmp_path / 'run').mkdir()
    (tmp_path / 'link').symlink_to(tmp_path / 'run')
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys, time\nfrom vpn_plugin.locks import exclusive_lock, '
         'lock_path_of\nwith exclusive_lock(lock_path_of(sys.argv[1]), wait=False):\n'
         '    print("held", flush=True)\n    time.sleep(60)', str(tmp_path / 'run')],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        with pytest.raises(LockBusyError):
            with exclusive_lock(lock_path_of(tmp_path / 'link'), wait=False):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_a_relative_row_path_is_never_read_from_the_working_directory(tmp_path, monkeypatch):
    """Before: a row's relative per_sample_file missing from its results folder but present
    from the working directory (another copy of the protocol folder there) was read from the
    working directory, that copy's dump, without a word."""
    from vpn_plugin.protocol.results import ResultRow, append_result, read_results
    results = tmp_path / 'moved' / 'results.jsonl'
    append_result(results, ResultRow('VPN', 0, 3, {'success_rate': 50.0}, protocol='standard',
                                     per_sample_file=str(tmp_path / 'moved/run/dump.json')))
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run/dump.json').write_text('{}')  # another copy's dump, beside the cwd
    monkeypatch.chdir(tmp_path)
    row, = read_results(results)
    assert row.per_sample_file == str(tmp_path / 'moved/run/dump.json')
