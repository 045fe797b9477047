"""Hostile pass 14 (issue 37's confirmation pass), engineer pass1: tests of training
against test (the training feature folder record, ``not_compared``). Each fails at 90c6eb9."""
from pathlib import Path

import numpy as np
import pytest

from test_train import tiny_cfg  # noqa: F401  (fixture)

from vpn_plugin.engine.checkpoint import (features_folder_note, features_folder_record,
                                          not_compared)


def feature_folder(folder: Path, videos: int = 12, seed: int = 0, sign: float = 1.0) -> Path:
    """``videos`` small synthetic feature files (``frames_features`` of shape (T, 8))."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(videos):
        np.savez(folder / f'task_{i:04d}.npz',
                 frames_features=sign * rng.normal(size=(5 + i, 8)).astype(np.float32))
    return folder


def note_for(trained: Path, tested: Path) -> str:
    meta = {'features_folder': features_folder_record(trained)}
    return features_folder_note({'meta': meta}, 'run.pth', tested)


def test_a_folder_with_one_more_or_one_fewer_video_is_no_other_feature(tmp_path):
    """P_plus1 / P_minus_train / P_extra_npy: the training folder with one more video (or one
    training video removed) was named 'other feature files than the training ones' in every
    test, and written to changed_from_training, though every file both hold is the same."""
    import shutil
    trained = feature_folder(tmp_path / 'trained')
    more = Path(shutil.copytree(trained, tmp_path / 'more'))
    np.savez(more / 'zz_new_0001.npz', frames_features=np.ones((4, 8), np.float32))
    assert note_for(trained, more) == ''
    fewer = Path(shutil.copytree(trained, tmp_path / 'fewer'))
    (fewer / 'task_0003.npz').unlink()
    assert note_for(trained, fewer) == ''


def test_other_features_are_still_named_with_the_files_that_differ(tmp_path):
    """Features of another seed (same names and sizes) or negated: named, as before, now with
    the shared files that differ; a copy names nothing."""
    import shutil
    trained = feature_folder(tmp_path / 'trained')
    assert note_for(trained, Path(shutil.copytree(trained, tmp_path / 'copy'))) == ''
    for name, other in (('seed', feature_folder(tmp_path / 'seed1', seed=1)),
                        ('neg', feature_folder(tmp_path / 'neg', sign=-1.0))):
        note = note_for(trained, other)
        assert note.startswith(f'the test features are read from {other.resolve()} '), name
        assert note.endswith('12 of the 12 files read differ from the training files of the '
                             "same name (['task_0000.npz', 'task_0001.npz', 'task_0002.npz', "
                             "'task_0003.npz', 'task_0004.npz', 'task_0005.npz', "
                             "'task_0006.npz', 'task_0007.npz'] (and 4 more)): other features "
                             '(another seed or extractor?)'), note
    resized = Path(shutil.copytree(trained, tmp_path / 'resized'))
    np.savez(resized / 'task_0002.npz', frames_features=np.zeros((50, 8), np.float32))
    assert "1 of the 12 files read differ from the training files of the same name " \
        "(['task_0002.npz'])" in note_for(trained, resized)


def test_a_record_without_per_file_digests_compares_nothing_and_says_so(tmp_path):
    """A record of the folder fingerprint only (written between 90c6eb9 and fixrec, never
    shipped) is compared with nothing (a fingerprint names a superset as other features):
    not_compared lists it."""
    trained = feature_folder(tmp_path / 'trained')
    record = {k: v for k, v in features_folder_record(trained).items()
              if k not in ('digests', 'frames')}
    negated = feature_folder(tmp_path / 'neg', sign=-1.0)
    meta = {'features_folder': record}
    assert features_folder_note({'meta': meta}, 'old.pth', negated) == ''
    assert not_compared({'meta': meta}, ('features_folder',)) == [
        "training feature files (no per-file digests of the training feature folder, "
        "meta['features_folder'])"]


@pytest.mark.parametrize('record, value', [
    ('features_folder', 'abc'), ('features_folder', ['x']),
    ('features_folder', {'folder': '/f', 'fingerprint': ''}),
    ('features_folder', {'folder': '/f', 'fingerprint': None}),
    ('features_folder', {'sources': {}}), ('features_folder', {'sources': {'a': 'x'}}),
    ('feature_statistics', {'mean': 'abc', 'std': None}),
    ('feature_statistics', [{'mean': 0.0, 'std': 1.0}]),
    ('feature_statistics', {'mean': 0.0}),
])
def test_a_record_nothing_can_read_is_not_compared(record, value):
    """K_ff_str, K_ff_list, K_ff_fp_empty, K_ff_fp_none, K_stats_str, K_stats_list: a meta
    record of another shape was compared with nothing (the comparisons return '' on it) and
    not_compared did not list it: the test exited 0 saying nothing."""
    meta = {'cfg': 'x = 1', 'feature_statistics': {'mean': 0.0, 'std': 1.0},
            'features_folder': {'folder': '/f', 'fingerprint': 'ab', 'digests': {}}}
    meta[record] = value
    missing = not_compared({'meta': meta})
    assert len(missing) == 1 and f"meta['{record}']" in missing[0], missing


def test_a_config_recorded_as_a_dict_is_not_compared_not_a_traceback():
    """K_cfg_dict: meta['cfg'] holding a dict stopped the test with "TypeError: unhashable
    type: 'dict'" (the parsed-config cache); now it is a config nothing can read."""
    meta = {'cfg': {'model': {}}, 'feature_statistics': {'mean': 0.0, 'std': 1.0},
            'features_folder': {'folder': '/f', 'fingerprint': 'ab', 'digests': {}}}
    assert not_compared({'meta': meta}) == [
        "training options (no training config, meta['cfg'])"]


def test_a_union_record_tested_on_one_folder_is_compared_with_its_sources(tmp_path):
    """K_ff_sources: a checkpoint whose folder record is a union's ({'sources': ...}) tested
    on one folder compared nothing (no fingerprint at the top) and said nothing; now the
    folder is compared with each source: one of them is enough, none names it."""
    import shutil
    trained = feature_folder(tmp_path / 'trained')
    meta = {'features_folder': {'sources': {'a': features_folder_record(trained)}}}
    copy = Path(shutil.copytree(trained, tmp_path / 'copy'))
    assert features_folder_note({'meta': meta}, 'u.pth', copy) == ''
    other = feature_folder(tmp_path / 'neg', sign=-1.0)
    assert 'differ from the training files' in \
        features_folder_note({'meta': meta}, 'u.pth', other)


def test_the_same_features_in_another_file_format_are_no_other_features(tmp_path):
    """H_asnpy: the training .npz files saved as .npy arrays (same frames) were named 'other
    feature files than the training ones'; now the sampled videos' frames arrays are compared
    when the folders share no file name. Other arrays in .npy are still named."""
    trained = feature_folder(tmp_path / 'trained')
    for sign, name in ((1.0, 'npy'), (-1.0, 'npy_negated')):
        folder = tmp_path / name
        folder.mkdir()
        for path in trained.glob('*.npz'):
            np.save(folder / f'{path.stem}.npy', sign * np.load(path)['frames_features'])
        note = note_for(trained, folder)
        assert (note == '') == (sign > 0), note
    assert '12 of the 12 files read differ from the training files' in note


def test_a_smoke_run_resumed_as_another_smoke_run_is_not_called_a_full_run(tiny_cfg, tmp_path):
    """K_resume_no_train_data: a smoke run resumed with --smoke and another max_epochs was
    refused (rightly) as 'a smoke run never continues a full run or the reverse', though
    both are smoke runs; now the reason names what differs."""
    from test_hostile_pass4 import planning_runner
    cfg = tiny_cfg
    work_dir = tmp_path / 'run'
    planning_runner(cfg, work_dir, **{'train_cfg.max_epochs': 1, 'train_cfg.val_interval': 1},
                    shortened='smoke: A').train()
    resumed = planning_runner(cfg, work_dir, **{'train_cfg.max_epochs': 2}, resume=True,
                              shortened='smoke: B')
    with pytest.raises(ValueError, match=r'shortened=smoke: A, this config is shortened=smoke:'
                                         r' B; a smoke run continues only the smoke run of the '
                                         r'same config'):
        resumed.train()


def test_a_test_on_the_training_windows_is_named_as_such(tmp_path):
    """X_test_wf_train: test_dataloader.dataset.window_file = the training windows was refused
    as a validation problem ('in both the validation and the test split ... validate on
    held-out training videos'); now as what it is: videos both trained and tested on."""
    from vpn_plugin.data_paths import load_config, resolve_paths, apply_horizon
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    cfg = resolve_paths(apply_horizon(load_config(
        str(Path(__file__).resolve().parents[1] / 'configs/vpn_niv_t3.py'),
        {'feature_dir': str(tmp_path),
         'test_dataloader.dataset.window_file': 'splits/train_T3.json'})))
    with pytest.raises(ValueError, match=r'train_dataloader.dataset / test_dataloader.dataset: '
                                         r'\d+ video\(s\) are in both the training and the test'):
        check_split_disjoint(cfg)


def test_a_planners_evaluator_must_score_plans(tmp_path):
    """X_test_evaluator_type: test_evaluator.type=AccMetric (mmaction2's classifier metric)
    stopped the test with "error: pred_score"; now refused naming the key, the value and the
    metric expected. The dump of --out (a DumpResults) and PlanningMetric pass."""
    from vpn_plugin.data_paths import load_config, resolve_paths, apply_horizon
    from vpn_plugin.runner import check_planning_evaluators

    def config(**options):
        return resolve_paths(apply_horizon(load_config(
            str(Path(__file__).resolve().parents[1] / 'configs/vpn_niv_t3.py'),
            {'feature_dir': str(tmp_path), **options})))
    check_planning_evaluators(config(), 'vpn_niv_t3.py')
    check_planning_evaluators(config(test_evaluator=[
        dict(type='PlanningMetric'), dict(type='AtomicDumpResults', out_file_path='x.pkl')]),
        'vpn_niv_t3.py')
    with pytest.raises(ValueError, match=r"vpn_niv_t3.py: test_evaluator type='AccMetric' "
                                         r'does not score plans: ViterbiPlanNet predicts'):
        check_planning_evaluators(config(**{'test_evaluator.type': 'AccMetric'}),
                                  'vpn_niv_t3.py')
