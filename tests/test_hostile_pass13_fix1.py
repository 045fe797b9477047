"""Session 9, phase 1 (issue 37), fix1: what a test cannot compare with the checkpoint's
training is said, not passed over (closing8 "Left" 1 and 2).

1. A checkpoint without a training config (converted authors' checkpoints, bare state dicts),
   without feature statistics (older than session 8) or without the training feature folder's
   fingerprint: tools/test.py, init_planner / inference_planner and plan.py say so in one line,
   and test_metrics.json lists it as ``not_compared`` (meaning1 K_x10, confirm1 K_nostats_x10,
   K_nocfg_obs1: exit 0, nothing said).
2. Features of another synthetic seed or negated features (same mean and std: meaning3 H4,
   confirm3 C6): the checkpoint records its training feature folder's fingerprint
   (``meta['features_folder']``); a test or plan from a folder of another fingerprint names both
   (``changed_from_training``); the same folder and a copy of it elsewhere are not named.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tool_modules import load_tool


def negated_copy(source: Path, target: Path) -> Path:
    """``source``'s feature files with every feature negated (same names, sizes, mean 0 and
    std: no statistic tells them apart)."""
    target.mkdir()
    for path in sorted(source.glob('*.npz')):
        with np.load(path) as data:
            fields = {key: data[key] for key in data.files}
        fields['frames_features'] = -fields['frames_features']
        np.savez(target / path.name, **fields)
    return target


@pytest.fixture(scope='module')
def trained(tiny_crosstask, tmp_path_factory):
    """(config, checkpoint, folder): one epoch of the tiny ViterbiPlanNet, as tools/train.py
    saves it."""
    import os
    from test_apis import tiny_vpn_config
    folder = tmp_path_factory.mktemp('fix1')
    os.environ.setdefault('LOCAL_RANK', '0')
    config = tiny_vpn_config(tiny_crosstask, folder)
    load_tool('train').main([str(config), '--work-dir', str(folder / 'run'), '--no-validate',
                             '--cfg-options', 'train_cfg.max_epochs=1'])
    return config, folder / 'run' / 'epoch_1.pth', folder


def config_on(tiny_crosstask, features: Path, folder: Path) -> Path:
    """The tiny ViterbiPlanNet config with every split reading ``features`` (its own cache)."""
    from test_apis import REPO
    folder.mkdir(exist_ok=True)
    config = folder / 'vpn_tiny.py'
    datasets = {split: dict(tiny_crosstask[f'{split}_dataset'], feature_dir=str(features),
                            cache_dir=str(folder / 'cache')) for split in ('train', 'val', 'test')}
    splits = ''.join(f"{split}_dataloader = dict(dataset=dict(_delete_=True, **{dataset!r}))\n"
                     for split, dataset in datasets.items())
    config.write_text(f"_base_ = [{str(REPO / 'configs/vpn_crosstask_t3.py')!r}]\n" + splits)
    return config


def run_test(config, checkpoint, out: Path, *extra) -> dict:
    load_tool('test').main([str(config), str(checkpoint), '--work-dir', str(out.parent / 'w'),
                            '--out-metrics', str(out), *map(str, extra)])
    return json.loads(out.read_text())


def test_training_records_its_feature_folder_and_a_test_of_it_or_a_copy_names_nothing(
        trained, tiny_crosstask, tmp_path, capsys):
    """The quickstart's train-then-test (same folder) and a test on a copy of the folder: no
    warning, no ``changed_from_training``, no ``not_compared``."""
    from vpn_plugin.datasets.provenance import folder_fingerprint
    config, checkpoint, _ = trained
    meta = torch.load(checkpoint, weights_only=False)['meta']
    feature_dir = Path(tiny_crosstask['feature_dir'])
    assert meta['features_folder']['fingerprint'] == \
        folder_fingerprint(feature_dir)['fingerprint']
    assert meta['features_folder']['folder'] == str(feature_dir.resolve())
    metrics = run_test(config, checkpoint, tmp_path / 'same.json')
    assert 'changed_from_training' not in metrics and 'not_compared' not in metrics
    copy = shutil.copytree(feature_dir, tmp_path / 'copy')
    metrics = run_test(config_on(tiny_crosstask, copy, tmp_path / 'c'), checkpoint,
                       tmp_path / 'copy.json')
    assert 'changed_from_training' not in metrics and 'not_compared' not in metrics
    out = capsys.readouterr().out
    assert 'Load checkpoint from' in out  # the log is read here
    assert 'records too little' not in out and 'other feature files' not in out


def test_a_test_on_negated_features_names_the_training_folder(trained, tiny_crosstask,
                                                              tmp_path):
    """confirm3 C6 / meaning3 H4 at test: negated features (the same mean and std) passed
    unnamed; now named with both folders and fingerprints in changed_from_training."""
    config, checkpoint, _ = trained
    negated = negated_copy(Path(tiny_crosstask['feature_dir']), tmp_path / 'negated')
    metrics = run_test(config_on(tiny_crosstask, negated, tmp_path / 'n'), checkpoint,
                       tmp_path / 'neg.json')
    changed = metrics['changed_from_training']
    assert isinstance(changed, list) and len(changed) == 1, changed
    assert f'the test features are read from {negated.resolve()} (fingerprint ' in changed[0]
    assert f'was trained on the features of {Path(tiny_crosstask["feature_dir"]).resolve()}' \
        in changed[0]
    assert 'not_compared' not in metrics


def test_a_checkpoint_without_records_lists_what_was_not_compared(trained, tmp_path, capsys):
    """confirm1 K_nocfg_obs1, K_nostats_x10 (meaning1 K_x10): a checkpoint without meta['cfg']
    tested with observed_steps=1, and without feature statistics, exited 0 saying nothing.
    Now one warning line, and test_metrics.json's not_compared lists each missing record."""
    config, checkpoint, _ = trained
    loaded = torch.load(checkpoint, weights_only=False)
    for key in ('cfg', 'feature_statistics', 'features_folder'):
        del loaded['meta'][key]
    bare = tmp_path / 'bare.pth'
    torch.save(loaded, bare)
    metrics = run_test(config, bare, tmp_path / 'bare.json', '--cfg-options',
                     'test_dataloader.dataset.observed_steps=1')
    assert metrics['not_compared'] == [
        "training options (no training config, meta['cfg'])",
        "feature scale (no training feature statistics, meta['feature_statistics'])",
        "training feature files (no per-file digests of the training feature folder, "
        "meta['features_folder'])"]
    lines = [line for line in capsys.readouterr().out.splitlines()
             if 'records too little' in line]
    assert len(lines) == 1 and 'not compared: training options' in lines[0], lines


def test_not_compared_is_decided_in_one_place():
    from vpn_plugin.engine.checkpoint import not_compared
    assert not_compared({'meta': {'cfg': 'x = 1', 'feature_statistics': {'mean': 0, 'std': 1},
                                  'features_folder': {'digests': {}}}}) == []
    # statistics without a std compare nothing (pass14 pass1 K_stats_*): not compared
    assert len(not_compared({'meta': {'cfg': 'x = 1', 'feature_statistics': {'mean': 0},
                                      'features_folder': {'digests': {}}}})) == 1
    assert len(not_compared({'meta': {'cfg': 'not python ('}})) == 3  # unreadable config too
    assert len(not_compared({})) == 3  # a bare state dict (no meta)
    assert not_compared({}, ('features_folder',)) == [
        "training feature files (no per-file digests of the training feature folder, "
        "meta['features_folder'])"]


def test_plans_name_another_folder_and_what_was_not_compared(trained, tiny_crosstask, tmp_path,
                                                             capsys):
    """meaning3 H4 through plan.py: dataset samples of a negated (or another seed's) feature
    folder planned without a word; the same folder still says nothing; a checkpoint without
    records says what was not compared, once, as a WARNING line."""
    import warnings
    from vpn_plugin.apis import build_split_dataset, inference_planner, init_planner
    config, checkpoint, _ = trained
    plan = load_tool('plan')
    plan.main([str(config), str(checkpoint), '--indices', '0'])
    out = capsys.readouterr()
    assert 'WARNING: the features' not in out.out and 'records too little' not in out.out
    assert 'sample 0' in out.out and 'Warning' not in out.err
    negated = negated_copy(Path(tiny_crosstask['feature_dir']), tmp_path / 'negated')
    plan.main([str(config_on(tiny_crosstask, negated, tmp_path / 'n')), str(checkpoint),
               '--indices', '0'])
    out = capsys.readouterr()
    assert out.out.count('WARNING: the features planned from are read from') == 1, out.out
    assert 'Warning' not in out.err
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        model = init_planner(str(config), str(checkpoint))
        samples = inference_planner(model, build_split_dataset(model.cfg, 'test'), [0])
    assert 'features_note' not in samples[0].metainfo
    loaded = torch.load(checkpoint, weights_only=False)
    del loaded['meta']['cfg'], loaded['meta']['features_folder']
    torch.save(loaded, tmp_path / 'old.pth')
    with pytest.warns(UserWarning, match=r"records too little .* not compared: training "
                                         r"options \(no training config"):
        model = init_planner(str(config), str(tmp_path / 'old.pth'))
    assert model.not_compared == [
        "training options (no training config, meta['cfg'])",
        "training feature files (no per-file digests of the training feature folder, "
        "meta['features_folder'])"]
    capsys.readouterr()
    plan.main([str(config), str(tmp_path / 'old.pth'), '--indices', '0'])
    out = capsys.readouterr()
    assert out.out.count('records too little') == 1, out.out
    assert 'Warning' not in out.err


def test_a_resume_from_a_checkpoint_without_records_says_what_it_cannot_compare(trained,
                                                                                tmp_path, capsys):
    """A resume compares the run's options (meta['cfg']) and training data (its digest) with
    the checkpoint's; one without them resumed without a word. Now one warning line; a resume
    of a checkpoint that records both says nothing of it."""
    config, checkpoint, _ = trained
    train = load_tool('train')
    for name, removed in (('full', ()), ('bare', ('cfg', 'train_data'))):
        loaded = torch.load(checkpoint, weights_only=False)
        for key in removed:
            del loaded['meta'][key]
        work_dir = tmp_path / name
        work_dir.mkdir()
        torch.save(loaded, work_dir / 'epoch_1.pth')
        train.main([str(config), '--work-dir', str(work_dir), '--no-validate', '--resume',
                    str(work_dir / 'epoch_1.pth'), '--cfg-options', 'train_cfg.max_epochs=2'])
        lines = [line for line in capsys.readouterr().out.splitlines()
                 if 'records too little' in line]
        if not removed:
            assert lines == []
        else:
            assert len(lines) == 1 and lines[0].endswith(
                "with this resumed run; not compared: training options (no training config, "
                "meta['cfg']); training data (no training data digest, meta['train_data'])"), lines


def test_an_earlier_metrics_file_with_notes_is_replaced_as_tools_test_output(tmp_path):
    """test_metrics.json with notes (changed_from_training, not_compared, feature_statistics,
    test_windows) was not recognised as tools/test.py's own earlier output: a rerun with the
    same --out-metrics was refused unless --overwrite."""
    from vpn_plugin.outputs import KINDS
    path = tmp_path / 'm.json'
    path.write_text(json.dumps({'plan/success_rate': 1.0, 'not_compared': ['a'],
                                'changed_from_training': ['b'], 'feature_statistics': 'c',
                                'test_windows': 'd', 'shortened': 'e'}))
    assert KINDS['metrics'].recognise(path)
    path.write_text(json.dumps({'plan/success_rate': 1.0, 'not_compared': [1]}))
    assert not KINDS['metrics'].recognise(path)


def test_a_union_records_each_sources_folder_and_statistics(tiny_crosstask, tmp_path):
    """A union training (ConcatPlanningDataset, the dataset-independent PKG protocol) recorded
    neither feature statistics nor a folder: every test of it would say 'not compared'. Now it
    records each source's folder and the union's statistics; a test of one source on the
    training folder says nothing, on negated features names that source."""
    from mmaction.registry import DATASETS
    from test_studies import union_dataset
    from vpn_plugin.engine.checkpoint import (features_folder_note, features_folder_record,
                                              not_compared)
    import vpn_plugin.mm  # noqa: F401  (registration)
    train = DATASETS.build(union_dataset(tmp_path, tiny_crosstask))
    meta = dict(cfg='x = 1', feature_statistics=train.feature_statistics(),
                features_folder=features_folder_record(train.feature_dirs))
    assert set(meta['features_folder']['sources']) == {'a', 'b'}
    assert not_compared({'meta': meta}) == []
    test_b = DATASETS.build(union_dataset(tmp_path, tiny_crosstask, 'test', select=['b']))
    assert features_folder_note({'meta': meta}, 'u.pth', test_b.feature_dirs) == ''
    negated = negated_copy(Path(tiny_crosstask['feature_dir']), tmp_path / 'negated')
    note = features_folder_note({'meta': meta}, 'u.pth', {'b': negated})
    assert note.startswith(f'the test features of b are read from {negated.resolve()}')
