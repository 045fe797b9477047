"""Fourteenth hostile pass, passT (training / testing / resume / comparisons): each test fails
on 22f9984. Cases and commands: /tmp/passT_log.md (ids in the test names)."""
import argparse

import numpy as np
import pytest

from vpn_plugin.engine.checkpoint import features_folder_record, files_unlike_training


def _frames(seconds=12, seed=0):
    return np.random.default_rng(seed).standard_normal((seconds, 512)).astype(np.float32)


@pytest.fixture
def training_folder(tmp_path):
    folder = tmp_path / 'train'
    folder.mkdir()
    for index, stem in enumerate(('a_v1', 'a_v2')):
        np.savez(folder / f'{stem}.npz', frames_features=_frames(seed=index))
    return folder


def _copies(tmp_path, training_folder):
    """The same features of a_v1 in other dtypes / layouts / formats (no-false-caveat inputs),
    and a negated one (other features)."""
    frames = np.load(training_folder / 'a_v1.npz')['frames_features']
    out = tmp_path / 'copies'
    out.mkdir()
    files = {'float64.npz': dict(frames_features=frames.astype(np.float64)),
             'bigendian.npz': dict(frames_features=frames.astype('>f4')),
             'reordered.npz': dict(extra=np.zeros(2), frames_features=frames)}
    made = {}
    for name, arrays in files.items():
        (out / name.split('.')[0]).mkdir()
        made[name] = out / name.split('.')[0] / 'a_v1.npz'
        np.savez(made[name], **arrays)
    (out / 'fortran').mkdir()
    made['fortran.npy'] = out / 'fortran' / 'a_v1.npy'
    np.save(made['fortran.npy'], np.asfortranarray(frames.astype(np.float64)))
    (out / 'negated').mkdir()
    made['negated.npz'] = out / 'negated' / 'a_v1.npz'
    np.savez(made['negated.npz'], frames_features=-frames)
    return made


def test_K_noframes_record_without_frames_calls_no_copy_other_features(tmp_path,
                                                                         training_folder):
    """K_noframes_f64: a record without frames digests (edited or partial) called a float64
    copy of the training features "other features (another seed or extractor?)"; a .npy copy
    "not in the training folder". Now such files are 'unknown' (not compared), never 'other'
    or 'absent'; with the full record every copy is the training file and the negated one
    is other features."""
    record = features_folder_record(training_folder)
    copies = _copies(tmp_path, training_folder)
    for name, path in copies.items():
        other, absent, half, unknown, _ = files_unlike_training(record, [path])
        if name == 'negated.npz':
            assert (other, absent, half, unknown) == (['a_v1.npz'], [], [], []), name
        else:
            assert (other, absent, half, unknown) == ([], [], [], []), name
    partial = dict(record)
    partial.pop('frames')
    for name, path in copies.items():
        other, absent, half, unknown, _ = files_unlike_training(partial, [path])
        assert (other, absent, half) == ([], [], []), name
        assert unknown == [path.name], name
    other, absent, half, unknown, _ = files_unlike_training(partial,
                                                            [training_folder / 'a_v1.npz'])
    assert (other, absent, half, unknown) == ([], [], [], [])  # the bytes still compare


def test_K_noframes_note_words_it_not_compared(tmp_path, training_folder):
    """The test's note of K_noframes_f64 says the files were not compared, not that they
    differ."""
    from vpn_plugin.engine.checkpoint import features_folder_note
    record = features_folder_record(training_folder)
    record.pop('frames')
    copy = tmp_path / 'f64'
    copy.mkdir()
    for path in training_folder.glob('*.npz'):
        frames = np.load(path)['frames_features']
        np.savez(copy / path.name, frames_features=frames.astype(np.float64))
    note = features_folder_note({'meta': {'features_folder': record}}, 'ck.pth', copy)
    assert 'other features' not in note and 'differ from' not in note
    assert 'not compared' in note and '2 of the 2 files read' in note


# ------------------------------------------------ H7-H13, P7, P8: numbers in other spellings
SPELLED = [('test', ['C.py', 'K.pth', '--limit', '1_0'], 'H7'),
           ('test', ['C.py', 'K.pth', '--limit', '٥'], 'H8'),
           ('test', ['C.py', 'K.pth', '--horizon', '0_3'], 'H9'),
           ('test', ['C.py', 'K.pth', '--cfg-options', 'test_dataloader.dataset.limit=1_2'], 'H11'),
           ('train', ['C.py', '--cfg-options', 'train_cfg.max_epochs=0_1'], 'H12'),
           ('train', ['C.py', '--seed', '٧'], 'H13'),
           ('train', ['C.py', '--cfg-options', 'a=[1,2_0]'], 'H12 list'),
           ('train', ['C.py', '--cfg-options', "a='1_0'"], 'H12 quoted'),
           ('plan', ['C.py', 'K.pth', '--indices', '1_0'], 'P7'),
           ('plan', ['C.py', 'K.pth', '--features', 'f.npz', '--start-time', '1_0',
                     '--goal-time', '60'], 'P8')]


@pytest.mark.parametrize('tool,argv,case', SPELLED, ids=[case for *_, case in SPELLED])
def test_H7_numbers_spelled_otherwise_are_refused_by_the_parser(tool, argv, case, capsys):
    """int() / float() read '1_0' as 10 and '٥' as 5: --limit, --horizon, --seed, plan.py's
    --indices / --start-time and --cfg-options values ran with the number without a word."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit) as exit_:
        load_tool(tool).parse_args(argv)
    assert exit_.value.code == 2
    assert 'ASCII digits 0-9' in capsys.readouterr().err


def test_H7_plain_numbers_still_read():
    """No false refusal: the same numbers in ASCII decimal, signs, exponents, lists, and
    texts that are no numbers (a path holding '1_0', a name) read as before."""
    from tool_modules import load_tool
    args = load_tool('test').parse_args(
        ['C.py', 'K.pth', '--limit', '10', '--horizon', '3', '--cfg-options', 'a=1e-3',
         'b=[1,2]', 'c=(1,.5)', 'd=x_1', 'e=/data/run_1_0', 'f=-2', 'g=None', 'h=+5'])
    assert (args.limit, args.horizon) == (10, 3)
    assert args.cfg_options == {'a': 0.001, 'b': [1, 2], 'c': (1, 0.5), 'd': 'x_1',
                                'e': '/data/run_1_0', 'f': -2, 'g': None, 'h': 5}
    assert load_tool('train').parse_args(['C.py', '--seed', '7']).seed == 7
    plan = load_tool('plan').parse_args(['C.py', 'K.pth', '--indices', '10', '0'])
    assert plan.indices == [10, 0]


# ------------------------------------------------ P6, P16: plan.py planned from damaged files
DAMAGE = 'ffmpeg: corrupt frame at 12 s'


@pytest.fixture(scope='module')
def damaged_copy(tiny_crosstask, tmp_path_factory):
    """An untrained tiny VPN checkpoint saved as training saves one, and a copy of the tiny
    features where one test video's file records a damaged video; (config, checkpoint,
    folder, damaged stem, index of a window of it, index of a window of another video)."""
    import shutil

    import torch
    from tiny_configs import save_recorded, tiny_vpn_config
    from vpn_plugin.apis import build_split_dataset, init_planner
    folder = tmp_path_factory.mktemp('passT_damage')
    config = tiny_vpn_config(tiny_crosstask, folder)
    torch.manual_seed(0)
    model = init_planner(str(config))
    checkpoint = save_recorded(model, folder / 'vpn.pth', tiny_crosstask['train_dataset'])
    copy = folder / 'features'
    shutil.copytree(tiny_crosstask['feature_dir'], copy)
    windows = build_split_dataset(model.cfg, 'test').windows
    stem = windows[0].feature
    with np.load(copy / f'{stem}.npz') as archive:
        record = {key: archive[key] for key in archive.files}
    np.savez(copy / f'{stem}.npz', **record, damage=np.str_(DAMAGE))
    other = next(i for i, w in enumerate(windows) if w.feature != stem)
    (folder / 'copy').mkdir()
    on_copy = tiny_vpn_config(tiny_crosstask, folder / 'copy', feature_dir=str(copy))
    return on_copy, checkpoint, copy, stem, 0, other


def test_P16_plan_py_indices_of_a_damaged_video_warn(damaged_copy, capsys):
    """Before: plan.py --indices of a window of a damaged video printed its plan without a
    word (tools/test.py warns and records damaged_features); a window of another video of the
    same folder has nothing to say."""
    from tool_modules import load_tool
    config, checkpoint, copy, stem, damaged, other = damaged_copy
    plan = load_tool('plan')
    plan.main([str(config), str(checkpoint), '--indices', str(damaged)])
    out = capsys.readouterr().out
    assert 'record a damaged video' in out and f'{stem}.npz: {DAMAGE}' in out
    plan.main([str(config), str(checkpoint), '--indices', str(other)])
    assert 'damaged video' not in capsys.readouterr().out


def test_P6_plan_py_features_of_a_damaged_file_warn(damaged_copy, capsys):
    """Before: plan.py --features FILE of a file recording a damaged video said nothing (main's
    wording since passV's fix of the same case)."""
    from tool_modules import load_tool
    config, checkpoint, copy, stem, _, _ = damaged_copy
    path = copy / f'{stem}.npz'
    load_tool('plan').main([str(config), str(checkpoint), '--features', str(path),
                            '--start-time', '1', '--goal-time', '5'])
    out = capsys.readouterr().out
    assert f'WARNING: {path} records that its video was decoded from damaged data: {DAMAGE}' \
        in out


# ------------------------------------------------ known item: lock files of finished runs
def test_a_finished_lock_leaves_no_lock_file_and_keeps_one_that_was_there(tmp_path):
    """Before: every successful run left '.<name>.lock' beside its work dir / --out file
    (only refused runs removed theirs). A lock file this call made goes when its block ends;
    one that was there before stays; re-entrant use keeps it until the outer block ends."""
    from vpn_plugin.locks import exclusive_lock, lock_path_of
    path = lock_path_of(tmp_path / 'work')
    with exclusive_lock(path):
        assert path.exists()
        with exclusive_lock(path):
            pass
        assert path.exists()
    assert not path.exists() and list(tmp_path.iterdir()) == []
    path.write_text('')
    with exclusive_lock(path):
        pass
    assert path.exists()


def test_a_lock_waited_on_while_its_file_goes_is_taken_on_the_path(tmp_path):
    """A process that waited on a finished holder's file (deleted as it finished) holds the
    lock of the path, not of the deleted file: a third process is refused meanwhile."""
    import threading

    from vpn_plugin.locks import LockBusyError, exclusive_lock
    path = tmp_path / '.w.lock'
    inside, release, results = threading.Event(), threading.Event(), []

    def second():
        with exclusive_lock(path):  # waits for the first, then holds the path's lock
            inside.set()
            release.wait(10)

    with exclusive_lock(path):
        worker = threading.Thread(target=second)
        worker.start()
        import time
        time.sleep(0.3)  # the worker has opened the first holder's file and waits
    assert inside.wait(10)
    import subprocess
    import sys
    code = ('import sys\nfrom vpn_plugin.locks import exclusive_lock, LockBusyError\n'
            'try:\n    with exclusive_lock(sys.argv[1], wait=False): print("taken")\n'
            'except LockBusyError: print("busy")\n')
    results.append(subprocess.run([sys.executable, '-c', code, str(path)], text=True,
                                  capture_output=True).stdout.strip())
    release.set()
    worker.join(10)
    assert results == ['busy']
    assert not path.exists()


# ------------------------------------------------ known item: training files of damaged videos
def test_training_files_of_damaged_videos_are_recorded_and_named_at_test(tiny_crosstask,
                                                                         tmp_path):
    """Before: a training on feature files recording a damaged video logged them, but its
    checkpoint kept no record, so its test (test_metrics.json, a results row) said nothing.
    Now meta['damaged_features'] holds them and the test names them ('training file ...');
    the finished run leaves no lock file beside its work dir."""
    import json
    import shutil

    import torch
    from tiny_configs import tiny_vpn_config
    from tool_modules import load_tool
    from vpn_plugin.apis import build_split_dataset, init_planner
    copy = tmp_path / 'features'
    shutil.copytree(tiny_crosstask['feature_dir'], copy)
    config = tiny_vpn_config(tiny_crosstask, tmp_path, feature_dir=str(copy))
    train_stem = build_split_dataset(init_planner(str(config)).cfg, 'train').windows[0].feature
    with np.load(copy / f'{train_stem}.npz') as archive:
        record = {key: archive[key] for key in archive.files}
    np.savez(copy / f'{train_stem}.npz', **record, damage=np.str_(DAMAGE))
    work = tmp_path / 'work'
    load_tool('train').main([str(config), '--work-dir', str(work), '--no-validate',
                             '--cfg-options', 'train_cfg.max_epochs=1'])
    assert not (tmp_path / '.work.lock').exists()
    meta = torch.load(work / 'epoch_1.pth', map_location='cpu', weights_only=False)['meta']
    assert meta['damaged_features'] == [f'{train_stem}.npz: {DAMAGE}']
    load_tool('test').main([str(config), str(work / 'epoch_1.pth'), '--work-dir',
                            str(tmp_path / 'test'), '--out-metrics', str(tmp_path / 'm.json')])
    metrics = json.loads((tmp_path / 'm.json').read_text())
    assert metrics['damaged_features'] == [f'training file {train_stem}.npz: {DAMAGE}']
    assert not (tmp_path / '.m.json.lock').exists()


# ------------------------------------------------ H55: --data-root that moves half the config
def test_H55_data_root_that_would_leave_the_datasets_is_refused(tiny_crosstask, shared_data,
                                                                  tmp_path):
    """Before: --data-root R on a config whose datasets hold an absolute data_root moved the
    model's text features to R and left the datasets reading the old folder, exit 0. Now
    refused naming the dataset; a root that holds them (the same folder, a link to it) is
    read as before."""
    import os

    from tiny_configs import tiny_vpn_config
    from vpn_plugin.data_paths import load_config
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    partial = tmp_path / 'partial' / 'crosstask'
    partial.mkdir(parents=True)
    with pytest.raises(ValueError, match=r"--data-root .*partial: train_dataloader\.dataset\."
                                         r"data_root='.*' is not built from the variable"):
        load_config(str(config), data_root=str(partial.parent))
    os.symlink(shared_data, tmp_path / 'link')
    for root in (shared_data, tmp_path / 'link'):
        cfg = load_config(str(config), data_root=str(root))
        assert cfg.test_dataloader.dataset.data_root == tiny_crosstask['test_dataset'][
            'data_root']


# ------------------------------------------------ known item: a second call in one process
def test_lines_after_a_tools_run_do_not_reach_its_log_file(tiny_crosstask, tmp_path):
    """Before: mmengine's current logger kept the finished run's log file open, so a tool
    called again in the same process and refused before its own logger existed wrote its
    lines into the previous run's log. The run's log is complete and closed when main
    returns."""
    from mmengine.logging import print_log
    from tiny_configs import write_tiny_config
    from tool_modules import load_tool, run_logs
    repo = __import__('pathlib').Path(__file__).resolve().parents[1]
    config = write_tiny_config(tmp_path / 'uniform.py',
                               repo / 'configs/baselines/uniform_emissions_crosstask_t3.py',
                               '', tiny_crosstask, batch_size=64)
    load_tool('test').main([str(config), '--work-dir', str(tmp_path / 'run'), '--limit', '4'])
    assert 'SHORTENED' in run_logs(tmp_path / 'run')
    print_log('a line of the next call', logger='current')
    assert 'a line of the next call' not in run_logs(tmp_path / 'run')


def test_H43_an_out_file_brings_no_prefix_warning(tmp_path, monkeypatch):
    """Noticed (H43): every test with --out logged mmengine's WARNING "The prefix is not set in
    metric class AtomicDumpResults." (noise beside the warnings that matter)."""
    import mmengine.evaluator.metric as metric
    from vpn_plugin.evaluation.dump_results import AtomicDumpResults
    logged = []
    monkeypatch.setattr(metric, 'print_log', lambda message, *args, **kwargs:
                        logged.append(message))
    AtomicDumpResults(out_file_path=str(tmp_path / 'p.pkl'))
    assert not [line for line in logged if 'prefix is not set' in line]
