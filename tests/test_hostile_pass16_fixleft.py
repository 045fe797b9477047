"""Session 11, engineer fixleft: what closing10 "Noticed and left alone" named (issue 37).
Each test fails on 72181f1 (checked in a worktree of it)."""
import errno
import itertools
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------ 6: viterbi_decode on an infeasible chain
def _brute_force(emissions, transitions, prior):
    """Best path and score of one chain (T, N) by enumerating all N^T paths: the highest
    score, ties (all -inf included) to the lexicographically lowest path."""
    horizon, num_actions = emissions.shape
    best, best_path = -math.inf, None
    for path in itertools.product(range(num_actions), repeat=horizon):
        score = prior[path[0]] + sum(emissions[t, a] for t, a in enumerate(path)) \
            + sum(transitions[a, b] for a, b in zip(path, path[1:]))
        if best_path is None or score > best:
            best, best_path = score, path
    return list(best_path), best


@pytest.mark.parametrize('num_actions, horizon', [(2, 2), (2, 4), (3, 3), (3, 4)])
def test_viterbi_decode_equals_all_paths_enumerated_also_where_nothing_is_feasible(
        num_actions, horizon):
    """Before: a chain with no feasible path (a dead end reached after one step) decoded to
    [1, 0, 0, 0] with score -inf, while the docstring said the lowest-id tie (all zeros)."""
    from vpn_plugin.core import viterbi_decode
    generator = torch.Generator().manual_seed(num_actions * 10 + horizon)
    cases = []
    for _ in range(40):
        probs = torch.rand(num_actions, num_actions, generator=generator, dtype=torch.float64)
        probs[torch.rand(num_actions, num_actions, generator=generator) < 0.5] = 0
        probs[torch.randint(num_actions, (1,), generator=generator)] = 0  # a dead end
        rows = probs.sum(1, keepdim=True)
        probs = torch.where(rows > 0, probs / rows.clamp(min=1e-30), probs)
        emissions = torch.randn(horizon, num_actions, generator=generator, dtype=torch.float64)
        emissions[torch.rand(horizon, num_actions, generator=generator) < 0.2] = -math.inf
        cases.append((emissions, probs.log()))
    # the closing note's case: 0 a dead end, 1 -> 0: feasible for T=2 only
    cases.append((torch.zeros(horizon, num_actions, dtype=torch.float64),
                  torch.tensor([[0.0] * num_actions, [1.0] + [0.0] * (num_actions - 1)]
                               + [[0.0] * num_actions] * (num_actions - 2),
                               dtype=torch.float64).log()))
    prior = torch.full((num_actions,), -math.log(num_actions), dtype=torch.float64)
    infeasible = 0
    with np.errstate(invalid='ignore'):
        for emissions, transitions in cases:
            paths, scores = viterbi_decode(emissions[None], transitions)
            path, score = _brute_force(emissions.numpy(), transitions.numpy(), prior.numpy())
            assert paths[0].tolist() == path, (emissions, transitions)
            assert scores[0].item() == pytest.approx(score) or score == scores[0].item()
            infeasible += score == -math.inf
    assert infeasible >= 1  # the infeasible case is among them


def test_viterbi_decode_of_the_closing_note_chain_is_all_zeros():
    from vpn_plugin.core import viterbi_decode
    transitions = torch.tensor([[0.0, 0.0], [1.0, 0.0]]).log()  # 0: dead end; 1 -> 0
    paths, scores = viterbi_decode(torch.zeros(2, 4, 2), transitions)
    assert paths.tolist() == [[0, 0, 0, 0]] * 2 and (scores == -math.inf).all()
    paths, scores = viterbi_decode(torch.zeros(1, 2, 2), transitions)  # feasible: as before
    assert paths.tolist() == [[1, 0]] and torch.isfinite(scores).all()


# ------------------------------------------------ 7: a missing argument of a direct call
def test_a_direct_calls_missing_argument_is_asked_for_as_an_argument():
    """Before: label_noise([[0, 1]], 0.5) said "label_noise() argument task_actions is missing:
    a required option of label_noise (an entry with _delete_=True keeps none of its base
    config's options)": a config's _delete_ for a Python call."""
    from vpn_plugin.core import label_noise
    with pytest.raises(TypeError) as caught:
        label_noise([[0, 1]], 0.5)
    text = str(caught.value)
    assert text.startswith('label_noise() argument task_actions is missing: a required argument '
                           'of label_noise(); expected label_noise(..., task_actions=...) in a '
                           'Python call (from a config, the entry that builds it must set it')
    # a registered class built from a config keeps the config wording
    from vpn_plugin.models.pkg_builder import LabelNoise
    with pytest.raises(TypeError, match=r"^LabelNoise.fraction is missing: a required option of "
                       r"LabelNoise \(an entry with _delete_=True keeps none of its base "
                       r"config's options\)"):
        LabelNoise()


# ------------------------------------------------ 3: convert_features names dropped fields
def test_convert_features_names_each_object_field_it_leaves_out(tmp_path, capsys):
    """Before: 'left out 2 object fields (not arrays)', naming neither file nor field."""
    from tool_modules import load_tool
    src = tmp_path / 'src'
    src.mkdir()
    frames = np.full((4, 8), 0.5, np.float32)
    np.savez(src / 'a_1.npz', frames_features=frames,
             notes=np.array([{'who': 'x'}], dtype=object), fps=np.float64(1))
    np.savez(src / 'b_2.npz', frames_features=frames, meta=np.array(['x', 1], dtype=object))
    np.save(src / 'c_3.npy', frames)  # nothing left out
    assert load_tool('convert_features').main(
        ['--src', str(src), '--dst', str(tmp_path / 'dst'), '--frame-dim', '8']) == 0
    out = capsys.readouterr().out
    assert ('left out 2 object fields (not arrays): a_1.npz: field "notes", b_2.npz: field '
            '"meta"') in out
    assert sorted(np.load(tmp_path / 'dst/a_1.npz')) == ['fps', 'frames_features']


def test_convert_features_without_object_fields_says_nothing_of_them(tmp_path, capsys):
    from tool_modules import load_tool
    src = tmp_path / 'src'
    src.mkdir()
    np.savez(src / 'a_1.npz', frames_features=np.ones((3, 8), np.float16), fps=np.float64(1))
    assert load_tool('convert_features').main(
        ['--src', str(src), '--dst', str(tmp_path / 'dst'), '--frame-dim', '8']) == 0
    assert 'left out' not in capsys.readouterr().out


# ------------------------------------------------ 4: plan.py --save-features on a full disk
@pytest.mark.parametrize('code', [errno.ENOSPC, errno.EACCES])
def test_save_features_on_a_full_disk_says_what_failed_and_that_nothing_was_written(
        tmp_path, monkeypatch, code):
    """Before: "cannot write the feature file X: No space left on device; it was not written
    (the files written before it are complete: free disk space and run again to resume)":
    one file of plan.py, no extraction to resume."""
    from types import SimpleNamespace
    from tool_modules import load_tool
    from vpn_plugin.errors import OutputWriteError
    plan = load_tool('plan')
    real_savez = np.savez

    def full(f, **arrays):
        real_savez(f, **arrays)
        raise OSError(code, os.strerror(code))
    monkeypatch.setattr(np, 'savez', full)
    path = tmp_path / 'mine.npz'
    with pytest.raises(OutputWriteError) as caught:
        plan.save_features(path, np.ones((3, 4), np.float32), SimpleNamespace(usable=True), '',
                           existed=False)
    text = str(caught.value)
    name = errno.errorcode[code]
    assert text.startswith(f'cannot write the feature file {path}: {os.strerror(code)} '
                           f'({name}); nothing was written ({path} is as it was before the run)')
    assert 'resume' not in text
    assert ('free disk space and run again' if code == errno.ENOSPC else 'fix that and run again'
            ) in text
    assert list(tmp_path.iterdir()) == []  # no partial file


def test_an_extraction_on_a_full_disk_still_speaks_of_resuming(tmp_path, monkeypatch):
    from vpn_plugin.errors import OutputWriteError
    from vpn_plugin.video.extract import write_features_atomically

    def full(f, **arrays):
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(np, 'savez', full)
    with pytest.raises(OutputWriteError, match=r'No space left on device \(ENOSPC\); it was not '
                       r'written \(the files written before it are complete: free disk space '
                       r'and run again to resume\)'):
        write_features_atomically(tmp_path / 'v.npz', dict(frames_features=np.ones((2, 2))))


# ------------------------------------------------ 1: slurm_extract.sh on a GPU-less partition
def _fake_slurm(tmp_path, gres):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / 'sinfo').write_text(
        '#!/bin/sh\ncase "$*" in *%G*) printf "%s\\n" ' + ' '.join(f"'{g}'" for g in gres)
        + ' ;; *) printf "debug\\nlong\\n" ;; esac\n')
    (bin_dir / 'srun').write_text('#!/bin/sh\necho "srun $*"\n')
    for tool in ('sinfo', 'srun'):
        (bin_dir / tool).chmod(0o755)
    return {**os.environ, 'PATH': f'{bin_dir}:{os.environ["PATH"]}'}


def _extract(env, tmp_path, **variables):
    return subprocess.run(['bash', str(REPO / 'tools/slurm_extract.sh'), 'debug', 'job',
                           'clip.mp4', '--out', 'o'], capture_output=True, text=True,
                          env={**env, **variables}, cwd=tmp_path, timeout=60)


def test_slurm_extract_on_a_partition_without_gpus_says_so(tmp_path):
    """Before: srun's bare "Invalid generic resource (gres) specification" (GPUS_PER_NODE=8 by
    default on a partition of no GPUs, the one-host cluster's 'debug')."""
    env = _fake_slurm(tmp_path, ['(null)'])
    refused = _extract(env, tmp_path)
    assert refused.returncode == 2 and 'srun' not in refused.stdout
    assert ('error: PARTITION=debug has no GPU(s) per node (sinfo gres: (null)), but '
            'GPUS_PER_NODE=8 asks for 8 (srun --gres=gpu:8); expected a partition with GPUs '
            "(sinfo -o '%P %G' lists them) (this one has none: one task per GPU; on CPUs run "
            'tools/extract_features.py without Slurm)') in refused.stderr
    zero = _extract(env, tmp_path, GPUS_PER_NODE='0')
    assert zero.returncode == 2 and 'srun' not in zero.stdout
    assert 'error: GPUS_PER_NODE=0; expected a whole number >= 1 (one task per GPU;' in zero.stderr


def test_slurm_extract_on_a_partition_with_fewer_gpus_names_them(tmp_path):
    env = _fake_slurm(tmp_path, ['gpu:a100:4(S:0-1)'])
    refused = _extract(env, tmp_path)
    assert refused.returncode == 2
    assert ('PARTITION=debug has 4 GPU(s) per node (sinfo gres: gpu:a100:4(S:0-1)), but '
            "GPUS_PER_NODE=8 asks for 8 (srun --gres=gpu:8); expected a partition with GPUs "
            "(sinfo -o '%P %G' lists them) or GPUS_PER_NODE=4 (and GPUS a multiple of it)"
            ) in refused.stderr
    ran = _extract(env, tmp_path, GPUS_PER_NODE='4', GPUS='4')
    assert ran.returncode == 0 and ran.stdout.startswith('srun -p debug ')
    assert '--gres=gpu:4 ' in ran.stdout


@pytest.mark.parametrize('gres', [['gpu:8'], ['gpu:tesla:8,mps:100'], ['(null)', 'gpu:8']])
def test_slurm_extract_on_a_partition_with_enough_gpus_runs_srun(tmp_path, gres):
    """No false refusal: nodes of 8 GPUs (typed, with other gres, beside GPU-less ones)."""
    ran = _extract(_fake_slurm(tmp_path, gres), tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith('srun -p debug ') and '--gres=gpu:8 ' in ran.stdout


# ------------------------------------------------ 5: a forged meta.cfg against the weights
PDPP_CFG = ("model = dict(type='PDPP', feature_dim=8, num_actions=5, num_tasks=2, horizon=3, "
            "dim=32, n_timesteps={})\n")


def test_a_forged_meta_cfg_is_named_with_what_the_weights_show():
    """Before: a checkpoint of 20 diffusion steps whose meta['cfg'] was edited to 200 gave
    "model.n_timesteps: 200 in training, 20 here": the forged record repeated as the training
    (the weights were trained with 20, and 20 is what the test used)."""
    from mmengine.config import Config
    import vpn_plugin.mm  # noqa: F401  (PDPP, KEPP registered)
    from vpn_plugin.engine.checkpoint import check_test_options
    cfg = Config.fromstring(PDPP_CFG.format(20), '.py')
    weights = {'diffusion.betas': torch.linspace(1e-4, 0.02, 20)}
    assert check_test_options(PDPP_CFG.format(200), cfg, 'c.pth', 'test it', weights) == [
        "model.n_timesteps: 200 in the checkpoint's meta['cfg'] (its training config), but "
        'its weights show 20 (diffusion.betas: a diffusion schedule of 20 steps); 20 here '
        'is used, as the weights show']
    kepp = ("model = dict(type='KEPP', feature_dim=8, num_actions=5, horizon=3, "
            "n_timesteps=20, step_n_timesteps={})\n")
    weights = {'plan.betas': torch.zeros(20), 'step.betas': torch.zeros(30)}
    assert check_test_options(kepp.format(50), Config.fromstring(kepp.format(30), '.py'),
                              'c.pth', 'test it', weights) == [
        "model.step_n_timesteps: 50 in the checkpoint's meta['cfg'] (its training config), "
        'but its weights show 30 (step.betas: a diffusion schedule of 30 steps); 30 here '
        'is used, as the weights show']


def test_an_honest_meta_cfg_keeps_its_lines():
    """No false caveat: a record that agrees with its weights gives no line when the test's
    options are the training's, and the plain 'X in training, Y here' when they differ."""
    from mmengine.config import Config
    import vpn_plugin.mm  # noqa: F401
    from vpn_plugin.engine.checkpoint import check_test_options
    weights = {'diffusion.betas': torch.zeros(20, dtype=torch.float64)}
    same = Config.fromstring(PDPP_CFG.format(20), '.py')
    assert check_test_options(PDPP_CFG.format(20), same, 'c.pth', 'test it', weights) == []
    assert check_test_options(PDPP_CFG.format(20), same, 'c.pth', 'test it') == []
    weights = {'diffusion.betas': torch.zeros(200)}
    assert check_test_options(PDPP_CFG.format(200), same, 'c.pth', 'test it', weights) == [
        'model.n_timesteps: 200 in training, 20 here']
    assert check_test_options(PDPP_CFG.format(200), same, 'c.pth', 'test it', {}) == [
        'model.n_timesteps: 200 in training, 20 here']


# ------------------------------------------------ 8: plan.py --features plans a window as tested
def test_plan_py_features_of_a_test_window_give_the_plan_the_test_scored(
        tiny_pdpp_checkpoint, tiny_crosstask, capsys, monkeypatch):
    """Before: plan.py --features FILE --start-time S --goal-time G of test window i drew
    PDPP's x_T from torch's global stream: a valid sample, not the plan the test scored."""
    import vpn_plugin.apis as apis
    from tool_modules import load_tool
    config, checkpoint = tiny_pdpp_checkpoint
    model = apis.init_planner(str(config), str(checkpoint))
    dataset = apis.build_split_dataset(model.cfg, 'test')
    real, planned = apis.plan_from_features, []

    def recorded(*args, **kwargs):
        samples = real(*args, **kwargs)
        planned.append(samples[0].pred_plan.tolist())
        return samples
    monkeypatch.setattr(apis, 'plan_from_features', recorded)
    plan = load_tool('plan')
    for i in (17,):
        window = dataset.windows[i]
        tested = apis.inference_planner(model, dataset, [i])[0].pred_plan.tolist()
        capsys.readouterr()
        plan.main([str(config), str(checkpoint), '--features',
                   str(Path(tiny_crosstask['feature_dir']) / f'{window.feature}.npz'),
                   '--start-time', str(window.times[0][0]), '--goal-time',
                   str(window.times[-1][1])])
        assert f'is window {i} of the test split: planned as its test planned it' in \
            capsys.readouterr().out
        assert planned[-1] == tested, i


def test_features_of_no_window_are_not_called_one(tiny_pdpp_checkpoint, tiny_crosstask):
    """No false claim: times of no test window, or a copy of the file in another folder, are
    no window (planned from torch's global stream, as before)."""
    import shutil
    import vpn_plugin.apis as apis
    config, checkpoint = tiny_pdpp_checkpoint
    dataset = apis.build_split_dataset(str(config), 'test')
    window = dataset.windows[5]
    source = Path(tiny_crosstask['feature_dir']) / f'{window.feature}.npz'
    copy = Path(str(checkpoint)).parent / 'copy' / source.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(source, copy)
    times = (window.times[0][0], window.times[-1][1])
    start, goal = apis.video_observations(str(config), source, *times)
    assert apis.inference.window_index(str(config), 'test', source, start, goal) == 5
    assert apis.inference.window_index(str(config), 'test', copy, start, goal) is None
    start, goal = apis.video_observations(str(config), source, times[0] + 1, times[1])
    assert apis.inference.window_index(str(config), 'test', source, start, goal) is None


# ------------------------------------------------ 2: a damaged video's note reaches logs and rows
DAMAGE = 'ffmpeg reported 3 decoding error(s), e.g. "[h264] concealing 120 DC errors"'


@pytest.fixture
def feature_copy(tiny_crosstask, tmp_path):
    """A copy of the tiny CrossTask feature folder and its test split's dataset config."""
    import shutil
    folder = tmp_path / 'features'
    shutil.copytree(tiny_crosstask['feature_dir'], folder)
    return folder, dict(tiny_crosstask['test_dataset'], feature_dir=str(folder), cache_dir=None)


def _damage(path: Path, note: str = DAMAGE) -> None:
    record = dict(np.load(path))
    np.savez(path, **record, damage=np.str_(note))


def _build(config):
    from mmaction.registry import DATASETS
    import vpn_plugin.mm  # noqa: F401
    return DATASETS.build(dict(config))


def test_damaged_feature_files_read_are_counted_logged_and_carried_into_the_caveats(
        feature_copy, tmp_path, monkeypatch):
    """Before: extract_features recorded "damage" in a damaged video's npz, and no dataset,
    log, test_metrics.json or results row said that the scores were measured on it."""
    from types import SimpleNamespace
    from tool_modules import load_tool
    from vpn_plugin.protocol.results import row_from_dict
    from vpn_plugin.protocol.runner import test_caveats
    from vpn_plugin.datasets import planning_dataset
    from vpn_plugin.runner import PlanningRunner
    logged = []
    monkeypatch.setattr(planning_dataset, 'print_log', lambda message, logger=None, level=20:
                        logged.append((level, message)))
    folder, config = feature_copy
    stems = sorted({w.feature for w in _build(config).windows})
    for stem in stems[:2]:
        _damage(folder / f'{stem}.npz')
    unread = next(p for p in sorted(folder.glob('*.npz')) if p.stem not in stems)
    _damage(unread)  # a training video's file: the test split never reads it
    for cache in (None, tmp_path / 'cache', tmp_path / 'cache'):  # built, cached, read back
        dataset = _build(dict(config, cache_dir=cache and str(cache)))
        assert dataset.damaged_files() == [f'{stem}.npz: {DAMAGE}' for stem in stems[:2]]
    lines = [(level, line) for level, line in logged if 'damaged video' in line]
    assert len(lines) == 3 and all(level == 30 for level, _ in lines)  # one per build
    line = lines[-1][1]
    assert line.startswith('PlanningDataset (test, T=3): 2 feature file(s) read record a '
                           'damaged video')
    assert f'{stems[0]}.npz: {DAMAGE}; {stems[1]}.npz' in line

    runner = SimpleNamespace(_test_loop=SimpleNamespace(
        dataloader=SimpleNamespace(dataset=dataset)), model=torch.nn.Linear(1, 1))
    damaged = PlanningRunner.damaged_test_files(runner)
    runner.damaged_test_files = lambda: damaged
    test = load_tool('test')
    notes = test.test_notes(SimpleNamespace(test_dataloader=SimpleNamespace(dataset=dataset),
                                            damaged_test_files=runner.damaged_test_files))
    assert notes['damaged_features'] == damaged
    test.write_metrics({'success_rate': 1.0}, tmp_path / 'm.json', notes=notes)
    import json
    assert json.loads((tmp_path / 'm.json').read_text())['damaged_features'] == damaged
    caveats = test_caveats(runner)
    assert caveats == {'damaged_features': damaged}
    row = row_from_dict(dict(method='M', dataset='crosstask', horizon=3, seed=0,
                             metrics={'success_rate': 10.0}, caveats=caveats), 'row')
    assert row.caveats['damaged_features'] == damaged


@pytest.mark.parametrize('layout', ['same', 'float16', 'npy', 'moved', 'empty note'])
def test_undamaged_copies_of_features_give_no_damage_caveat(feature_copy, tmp_path, layout,
                                                            monkeypatch):
    """No false caveat: copies in another dtype or layout, a moved folder, an empty note."""
    import shutil
    from types import SimpleNamespace
    from tool_modules import load_tool
    from vpn_plugin.protocol.runner import test_caveats
    from vpn_plugin.datasets import planning_dataset
    from vpn_plugin.runner import PlanningRunner
    logged = []
    monkeypatch.setattr(planning_dataset, 'print_log',
                        lambda message, logger=None, level=20: logged.append(message))
    folder, config = feature_copy
    for path in sorted(folder.glob('*.npz')):
        frames = np.load(path)['frames_features']
        if layout == 'float16':
            np.savez(path, frames_features=frames.astype(np.float16))
        elif layout == 'npy':
            path.unlink()
            np.save(path.with_suffix('.npy'), frames)
        elif layout == 'empty note':
            _damage(path, '')
    if layout == 'moved':
        shutil.move(folder, tmp_path / 'elsewhere')
        config = dict(config, feature_dir=str(tmp_path / 'elsewhere'))
    dataset = _build(config)
    assert dataset.damaged_files() == []
    assert logged and not [line for line in logged if 'damage' in line]
    runner = SimpleNamespace(_test_loop=SimpleNamespace(
        dataloader=SimpleNamespace(dataset=dataset)), model=torch.nn.Linear(1, 1))
    assert PlanningRunner.damaged_test_files(runner) == []
    runner.damaged_test_files = lambda: []
    assert test_caveats(runner) == {}
    notes = load_tool('test').test_notes(SimpleNamespace(
        test_dataloader=SimpleNamespace(dataset=dataset), damaged_test_files=lambda: []))
    assert not notes['damaged_features']
