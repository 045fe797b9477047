"""Sixth hostile pass (issue 37), half B: the tools around training (convert_egoper,
make_text_features, check_authors_loader, plan.py, extraction, the python API). Each test is a
case that was vague, silent or wrong before its fix (the docstring says what happened)."""
import copy
import json

import pytest

from test_egoper import ANNOTATION, write_egoper
from test_hostile_tools import no_traceback  # noqa: F401  (an autouse fixture)
from tool_modules import load_tool


# ---------------------------------------------------------------------- convert_egoper
def convert_egoper(tmp_path, annotation=None, raw=None, split_dir='splits'):
    write_egoper(tmp_path, annotation or ANNOTATION)
    if raw is not None:
        (tmp_path / 'annotation.json').write_text(raw)
    return load_tool('convert_egoper').main([
        str(tmp_path / 'annotation.json'), '--split-dir', str(tmp_path / split_dir),
        '--out', str(tmp_path / 'out'), '--errors', 'keep'])


def edited(edit):
    annotation = copy.deepcopy(ANNOTATION)
    edit(annotation)
    return annotation


def test_egoper_duplicate_json_keys_are_refused(tmp_path):
    """Before: a task or an action name written twice in annotation.json was converted, the
    first one dropped by ``json`` without a word (exit 0)."""
    twice = json.dumps(ANNOTATION)[:-1] + ', "tea": ' + json.dumps(ANNOTATION['tea']) + '}'
    with pytest.raises(SystemExit, match=r"annotation.json: the key 'tea' is given twice"):
        convert_egoper(tmp_path, raw=twice)
    action = json.dumps(ANNOTATION).replace('"pour water": 1,',
                                            '"pour water": 1, "grind beans": 5,')
    with pytest.raises(SystemExit, match=r"the key 'grind beans' is given twice"):
        convert_egoper(tmp_path, raw=action)
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('value', [None, 7, ''])
def test_egoper_video_id_must_be_a_string(tmp_path, value):
    """Before: video_id null or 7 became the video 'None' / '7' (matched by a split list
    line), a missing one '' was counted as "videos in no split list"."""
    def edit(annotation):
        annotation['coffee']['segments'][0]['video_id'] = value
    with pytest.raises(SystemExit, match=r"task 'coffee': segments\[0\]: video_id = "
                       + repr(value).replace('(', r'\(') + '; expected the video id'):
        convert_egoper(tmp_path, edited(edit))


def test_egoper_refuses_what_its_dataset_would_refuse(tmp_path):
    """Before: a time of 1e300 s and a task whose actions are all background were converted
    (exit 0); the dataset then refused train.json / taxonomy.json, not naming annotation.json."""
    def huge(annotation):
        annotation['coffee']['segments'][0]['labels']['time_stamp'][1] = [2.5, 1e300]
    with pytest.raises(SystemExit, match=r"segments\[0\] \(video coffee_u1_a\): labels.time_stam"
                       r"p\[1\] = \[2.5, 1e\+300\]; expected .*<= 86400"):
        convert_egoper(tmp_path, edited(huge))

    def only_background(annotation):
        annotation['coffee']['action2idx'] = {'BG': 0}
    with pytest.raises(SystemExit, match=r"task 'coffee': action2idx has no action but "
                       'background'):
        convert_egoper(tmp_path, edited(only_background))


def test_egoper_split_dir_that_is_a_file(tmp_path):
    """Before: "no training.txt (expected .../annotation.json/training.txt ...)"."""
    with pytest.raises(SystemExit, match=r'--split-dir .*annotation.json: is a file; expected '
                       'the folder'):
        convert_egoper(tmp_path, split_dir='annotation.json')


# ---------------------------------------------------------------------- state descriptions
def state_file(tmp_path, raw):
    path = tmp_path / 'state_descriptions.json'
    path.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return path


SENTENCES = {'before': ['a loose tire', 'the brake is off', 'no jack'],
             'after': ['a tight tire', 'the brake is on', 'a jack']}


def test_state_descriptions_two_entries_for_one_action_are_refused(tmp_path):
    """Before: 'brake on' and 'BRAKE ON!' (names are compared ignoring case and punctuation)
    in one task, or one action key written twice: the last one was encoded, exit 0."""
    from vpn_plugin.models.text_embeddings import state_texts
    other = {'before': ['WRONG'] * 3, 'after': ['WRONG'] * 3}
    alike = state_file(tmp_path, {'Tire': {'brake on': SENTENCES, 'BRAKE ON!': other}})
    with pytest.raises(ValueError, match=r"actions 'brake on' and 'BRAKE ON!' are one name"):
        state_texts(['brake on'], ['Tire'], alike)
    twice = state_file(tmp_path, '{"Tire": {"brake on": %s, "brake on": %s}}'
                       % (json.dumps(other), json.dumps(SENTENCES)))
    with pytest.raises(ValueError, match=r"the key 'brake on' is given twice"):
        state_texts(['brake on'], ['Tire'], twice)
    tasks = state_file(tmp_path, {'Tire': {'brake on': SENTENCES}, 'tire!': {'x': SENTENCES}})
    with pytest.raises(ValueError, match=r"tasks 'Tire' and 'tire!' are one name"):
        state_texts(['brake on'], ['Tire'], tasks)
    assert state_texts(['brake on'], ['Tire'], state_file(tmp_path, {'Tire': {
        'brake on': SENTENCES}}))[0] == [SENTENCES['before']]


def test_a_text_longer_than_the_encoder_reads_is_counted(tmp_path, capsys):
    """Before: a 1002-token state sentence was cut to MiniLM's 512 tokens without a word."""
    from mmengine.logging import MMLogger
    from vpn_plugin.models.text_embeddings import encode_texts
    MMLogger.get_instance('hostile6_text', log_level='INFO')
    encode_texts(['the car tire is loose ' * 200, 'a short one'])
    out = capsys.readouterr()
    assert '1 of 2 texts are longer than its 512 tokens and were truncated' in out.out + out.err
    assert 'indexing errors' not in out.out + out.err


# ---------------------------------------------------------------------- check_authors_loader
def damaged_loader_fixture(tmp_path, damage):
    import shutil
    import numpy as np
    from vpn_plugin.data_paths import REPO_ROOT
    fixture = tmp_path / 'fixture'
    shutil.copytree(REPO_ROOT.parent / 'shared/reference/authors_loader_small', fixture)
    arrays = dict(np.load(fixture / 'expected.npz'))
    damage(arrays, fixture / 'expected.npz')
    return fixture


def _without_tasks(arrays, path):
    import numpy as np
    del arrays['tasks']
    np.savez(path, **arrays)


def _no_window(arrays, path):
    import numpy as np
    np.savez(path, **{k: v[:0] for k, v in arrays.items()})


def _object_tasks(arrays, path):
    import numpy as np
    np.savez(path, **dict(arrays, tasks=arrays['tasks'].astype(object)))


def _truncated(arrays, path):
    path.write_bytes(path.read_bytes()[:1000])


@pytest.mark.parametrize('damage,message', [
    (_without_tasks, r"expected.npz: no recorded array 'tasks'"),
    (_no_window, r'expected.npz: states has shape \(0, 3, 2, 3, 512\); expected .* W >= 1'),
    (_object_tasks, r'expected.npz: cannot read the recorded arrays \(Object arrays'),
    (_truncated, r'expected.npz: cannot read the recorded arrays \(File is not a zip file'),
])
def test_check_authors_loader_names_a_damaged_expected_npz(tmp_path, damage, message):
    """Before: "tasks is not a file in the archive", "cannot reshape array of size 0 ...",
    "Object arrays cannot be loaded ..." (no file named) and a BadZipFile traceback."""
    fixture = damaged_loader_fixture(tmp_path, damage)
    with pytest.raises(SystemExit, match=message):
        load_tool('check_authors_loader').main([str(fixture)])


# ---------------------------------------------------------------------- tools/plan.py
@pytest.mark.parametrize('argv,message', [
    (['CFG', 'CKPT', '--fps', '8'], r"--fps: the frame recipe of --video; dataset samples"),
    (['--checkpoint', 'CKPT', '--features', 'f.npz', '--start-time', '1', '--goal-time', '5',
      '--fps', '8', '--crop', 'none'], r'--fps, --crop: the frame recipe of --video; --features'),
    (['CFG', 'CKPT', '--decode', 'emission_argmax', '--cfg-options', 'model.decode=viterbi'],
     r'--decode emission_argmax and --cfg-options model.decode=viterbi contradict'),
])
def test_plan_flags_that_would_be_ignored_are_refused(argv, message, capsys):
    """Before: --fps/--crop on dataset samples or with --features were ignored, and --decode
    silently replaced a contradicting (even invalid) --cfg-options model.decode; exit 0."""
    with pytest.raises(SystemExit):
        load_tool('plan').parse_args(argv)
    assert __import__('re').search(message, capsys.readouterr().err)
    args = load_tool('plan').parse_args(['CFG', 'CKPT', '--decode', 'emission_argmax',
                                         '--cfg-options', 'model.decode=emission_argmax'])
    assert args.decode == 'emission_argmax'


def test_a_start_time_after_the_goal_time_is_refused_before_rounding():
    """Before: --start-time 10.5 --goal-time 10.49 were both rounded to 10 s and planned."""
    import numpy as np
    from vpn_plugin.apis import video_observations
    from vpn_plugin.data_paths import REPO_ROOT
    frames = np.zeros((30, 512), np.float32)
    cfg = REPO_ROOT / 'configs/vpn_niv_t3.py'
    with pytest.raises(ValueError, match=r'start_time=10.5, goal_time=10.49 s, .*; expected 0 <= '
                       'start_time <= goal_time'):
        video_observations(cfg, frames, 10.5, 10.49)
    start, goal = video_observations(cfg, frames, 10.49, 10.5)
    assert start.shape == goal.shape == (1536,)


# ---------------------------------------------------------------------- extraction
def test_a_resume_with_other_weights_of_the_same_name_and_size_is_refused(tmp_path):
    """Before: extraction.json recorded the weights as 'NAME (SIZE bytes)': a resume with other
    S3D weights under the same name and size added their features to the folder ("1 written, 3
    already there", exit 0) and provenance.json then named the new weights' sha256 for all."""
    import argparse
    from vpn_plugin.video.extract import check_manifest, write_manifest
    from vpn_plugin.video.recipe import FrameRecipe
    tool = load_tool('extract_features')
    first, second = tmp_path / 'a/s3d.pth', tmp_path / 'b/s3d.pth'
    for path, content in ((first, b'\x01' * 64), (second, b'\x02' * 64)):
        path.parent.mkdir()
        path.write_bytes(content)

    def settings(weights):
        return tool.settings_of(argparse.Namespace(weights=str(weights), random_weights=False,
                                                   naming='stem'), FrameRecipe())
    out = tmp_path / 'features'
    out.mkdir()
    check_manifest(out, settings(first))
    write_manifest(out, settings(first))
    check_manifest(out, settings(first))  # the same weights resume
    with pytest.raises(ValueError, match=r'extraction.json: the features in .* were extracted '
                       r"with other settings than this run asks for \(weights: 's3d.pth \(sha256 "
                       r"[0-9a-f]+\)' there, 's3d.pth \(sha256 [0-9a-f]+\)' asked now\)"):
        check_manifest(out, settings(second))


def test_a_device_that_holds_no_data_is_named():
    """Before: --device meta ended in torch's "Cannot copy out of meta tensor" traceback."""
    with pytest.raises(ValueError, match=r"--device 'meta': a meta device holds no data"):
        load_tool('extract_features').checked_device('meta')


# ---------------------------------------------------------------------- the python API
@pytest.fixture
def niv_planner(tiny_crosstask, tmp_path):
    """An untrained ViterbiPlanNet of the tiny CrossTask data (test_apis.tiny_vpn_config)."""
    from test_apis import tiny_vpn_config
    from vpn_plugin.apis import init_planner
    return init_planner(str(tiny_vpn_config(tiny_crosstask, tmp_path)))


def test_inference_batch_size_below_one_is_refused(niv_planner):
    """Before: batch_size=-1 returned [] for two requested samples (no error), 0 stopped in
    "range() arg 3 must not be zero"."""
    from vpn_plugin.apis import inference_planner
    for size in (-1, 0, 1.5, True):
        with pytest.raises(ValueError, match=rf'batch_size={size!r}; expected an integer >= 1'):
            inference_planner(niv_planner, [None, None], [0, 1], batch_size=size)


def test_video_observations_of_an_unknown_split_are_refused(niv_planner, tmp_path):
    """Before: split='dev' (or a config without that dataloader) read the observations with the
    assumed recipe 'authors' and frame_dim 512, whatever the config's datasets use."""
    import numpy as np
    from mmengine.config import Config
    from vpn_plugin.apis import plan_from_features, video_observations
    frames = np.zeros((30, 512), np.float32)
    with pytest.raises(ValueError, match=r"argument split='dev'; expected one of"):
        video_observations(niv_planner.cfg, frames, 1, 5, split='dev')
    bare = Config(dict(model=dict(type='ViterbiPlanNet')))
    with pytest.raises(ValueError, match=r'no test_dataloader.dataset, whose observation recipe'):
        video_observations(bare, frames, 1, 5)
    start, goal = video_observations(niv_planner.cfg, frames, 1, 5)
    with pytest.raises(ValueError, match=r'start observations of shape \(0, 1536\); expected '
                       r'\(B, 1536\) or \(1536,\) with B >= 1'):
        plan_from_features(niv_planner, start[None][:0], goal[None][:0])


# ---------------------------------------------------------------------- benchmarks' arguments
@pytest.mark.parametrize('tool,argv,message', [
    ('benchmark_cefito_search', ['--batches', '-1'], '--batches: -1: expected an integer >= 0'),
    ('benchmark_cefito_search', ['--repeats', '0'], '--repeats: 0: expected an integer >= 1'),
    ('benchmark_cefito_search', ['--batch-size', '0'], '--batch-size: 0: expected an integer >= 1'),
    ('benchmark_cefito_search', ['--chunk-size', '0'], '--chunk-size: 0: expected an integer >= 1'),
    ('benchmark_cefito_search', ['--threads', '-2'], '--threads: -2: expected an integer >= 0'),
    ('benchmark_dvl', ['--repeats', '0'], '--repeats: 0: expected an integer >= 1'),
    ('benchmark_dvl', ['--time-budget', '-1'], '--time-budget: -1: expected a number > 0'),
    ('benchmark_dvl', ['--max-gb', '0'], '--max-gb: 0: expected a number > 0'),
])
def test_benchmark_arguments_out_of_range_are_refused(tool, argv, message, capsys):
    """Before: benchmark_cefito_search --batches -1 timed every window (as 0 does: over 10
    minutes), --repeats 0 ran once, --batch-size 0 a ZeroDivisionError, --chunk-size 0 ran on;
    benchmark_dvl --repeats 0 / --time-budget -1 timed one run, --max-gb 0 printed a failed
    worker in the table, exit 0."""
    module = load_tool(tool)
    with pytest.raises(SystemExit):
        getattr(module, 'parse_args', module.main)(argv)  # benchmark_dvl parses in main
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------------- the observation cache
def test_a_cache_file_or_memo_forged_without_the_key_is_not_used(tmp_path):
    """Before: the cache's digest was a plain SHA-256 of its arrays: start and goal swapped and
    the digest recomputed, the swapped observations were served; a feature file rewritten and
    its memo entry given its new stat record with the old digest served the old observations."""
    import hashlib
    import os
    import numpy as np
    from test_datasets import toy_dataset, write_toy
    from vpn_plugin.datasets.planning_dataset import CACHE_ARRAYS
    write_toy(tmp_path)
    cache_dir = tmp_path / 'cache'
    truth = toy_dataset(tmp_path, cache_dir=tmp_path / 'fresh')
    toy_dataset(tmp_path, cache_dir=cache_dir)
    cache = next(cache_dir.glob('obs_*.npz'))
    arrays = dict(np.load(cache))
    arrays['start'], arrays['goal'] = arrays['goal'].copy(), arrays['start'].copy()
    digest = hashlib.sha256(str(arrays['key']).encode())
    for name in sorted(CACHE_ARRAYS):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f'{name}:{array.dtype.str}:{array.shape}'.encode())
        digest.update(array.tobytes())
    np.savez(cache, **dict(arrays, digest=np.str_(digest.hexdigest())))
    np.testing.assert_array_equal(toy_dataset(tmp_path, cache_dir=cache_dir).start, truth.start)

    memo_path = cache_dir / 'feature_digests.json'
    memo = json.loads(memo_path.read_text())
    path = next(p for p in memo if p.endswith('22_b1.npz'))
    features = dict(np.load(path))
    features['frames_features'] = features['frames_features'][::-1].copy()
    np.savez(path, **features)
    status = os.stat(path)
    memo[path][:5] = [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
                      status.st_ctime_ns]  # the old digest (and its checksum) kept
    memo_path.write_text(json.dumps(memo))
    rewritten = toy_dataset(tmp_path, cache_dir=tmp_path / 'fresh2')
    assert not np.array_equal(rewritten.start, truth.start)
    np.testing.assert_array_equal(toy_dataset(tmp_path, cache_dir=cache_dir).start,
                                  rewritten.start)
    assert oct((cache_dir / '.cache_key').stat().st_mode & 0o777) == '0o600'


def test_weights_that_are_no_s3d_are_named_as_such(tmp_path):
    """Before: a planner checkpoint given as --weights was refused with a planner's hint, "does
    not fit the model S3D of the config ... Test it with the config it was trained with"."""
    import torch
    from vpn_plugin.apis.video import init_s3d
    weights = tmp_path / 'planner.pth'
    torch.save({'state_encoder.logit_scale': torch.zeros(())}, weights)
    with pytest.raises(ValueError, match=r"S3D weights .*planner.pth do not fit S3D: missing keys "
                       r".*unexpected keys \['state_encoder.logit_scale'\]; expected the "
                       r'S3D_HowTo100M state dict') as error:
        init_s3d(weights)
    assert 'Test it with the config' not in str(error.value)
