"""One data root: configs resolve their locations from the repository root, tools move them
with --data-root / --feature-dir, --cfg-options can too (vpn_plugin.data_paths)."""
import json
import sys
from pathlib import Path

import pytest

from vpn_plugin.data_paths import REPO_ROOT, load_config
from tool_modules import load_tool

NIV_T3 = str(REPO_ROOT / 'configs' / 'vpn_niv_t3.py')
TOOLS = ('train', 'test', 'plan', 'run_protocol', 'llm_eval')


def dataset_paths(cfg):
    return [cfg[f'{split}_dataloader'].dataset for split in ('train', 'val', 'test')]


def test_file_locations_resolve_from_the_repo_root_in_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(NIV_T3)
    shared = (REPO_ROOT / '../shared/data').resolve()
    assert same_place(cfg.data_root, shared)
    for dataset in dataset_paths(cfg):
        assert same_place(dataset.data_root, shared / 'niv')
        assert dataset.feature_dir == str(REPO_ROOT / 'data/synthetic/niv/features')
        assert dataset.cache_dir == str(REPO_ROOT / 'data/cache/niv')
    assert same_place(cfg.model.text_embeddings.file, shared / 'niv/state_features_clip.npy')


def same_place(path: str, expected: Path) -> bool:
    """``path`` is absolute and names ``expected`` (``../shared`` may be a symlink: compared
    resolved, whichever spelling the config keeps)."""
    return Path(path).is_absolute() and Path(path).resolve() == expected.resolve()


def test_flags_and_cfg_options_move_every_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(NIV_T3, {'cache_dir': 'my_cache', 'model.dropout': 0.0},
                      data_root='my_root', feature_dir='/abs/features')
    for dataset in dataset_paths(cfg):
        assert dataset.data_root == str(tmp_path / 'my_root' / 'niv')
        assert (dataset.feature_dir, dataset.cache_dir) == ('/abs/features',
                                                            str(tmp_path / 'my_cache'))
        assert dataset.taxonomy == 'taxonomy.json'  # relative to the dataset's data_root
    assert cfg.model.text_embeddings.file == str(tmp_path / 'my_root/niv/state_features_clip.npy')
    assert cfg.model.dropout == 0.0
    by_option = load_config(NIV_T3, {'data_root': 'other'})
    assert by_option.test_dataloader.dataset.data_root == str(tmp_path / 'other' / 'niv')
    with pytest.raises(ValueError, match='--data-root mine and --cfg-options data_root=other '
                                         'contradict each other'):  # neither wins unsaid
        load_config(NIV_T3, {'data_root': 'other'}, data_root='mine')
    both = load_config(NIV_T3, {'data_root': 'mine'}, data_root='mine')
    assert both.test_dataloader.dataset.data_root == str(tmp_path / 'mine' / 'niv')


def test_a_split_moved_alone_is_refused_naming_every_split(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"the splits read different feature_dirs: "
                       r"train_dataloader.dataset.feature_dir='/x', "
                       r"val_dataloader.dataset.feature_dir='.*"
                       r"--cfg-options feature_dir=DIR \(or --feature-dir DIR\)"):
        load_config(NIV_T3, {'train_dataloader.dataset.feature_dir': '/x'})
    every = {f'{split}_dataloader.dataset.feature_dir': '/x' for split in ('train', 'val', 'test')}
    assert [d.feature_dir for d in dataset_paths(load_config(NIV_T3, every))] == ['/x'] * 3


def test_a_child_config_moves_the_datasets_with_its_variables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = ['{NIV_T3}']\ndata_root = '/data/public'\n"
                     "feature_dir = '{data_root}/niv/s3d'\n")
    cfg = load_config(child)
    for dataset in dataset_paths(cfg):
        assert (dataset.data_root, dataset.feature_dir) == ('/data/public/niv',
                                                            '/data/public/niv/s3d')
        assert dataset.cache_dir == str(REPO_ROOT / 'data/cache/niv')
    assert cfg.model.text_embeddings.file == '/data/public/niv/state_features_clip.npy'
    moved = load_config(child, data_root='other')  # and the flag still moves it
    assert moved.test_dataloader.dataset.feature_dir == str(tmp_path / 'other/niv/s3d')


def test_a_location_nothing_reads_or_an_undefined_placeholder_is_refused(tmp_path):
    literal = tmp_path / 'literal.py'
    literal.write_text("data_root = 'a'\ntest_dataloader = dict(dataset=dict(data_root='/b/niv'))\n")
    with pytest.raises(ValueError, match=r"literal.py: data_root was set to .*/c, but no path "
                       "of the config is built from it"):
        load_config(literal, data_root=str(tmp_path / 'c'))
    undefined = tmp_path / 'undefined.py'
    undefined.write_text("model = dict(file='{data_root}/x.npy')\n")
    with pytest.raises(ValueError, match=r"model.file = '\{data_root\}/x.npy' names a location "
                       "variable the config does not define"):
        load_config(undefined)


def test_mmaction2_style_loading_resolves_in_the_runner(tmp_path, monkeypatch):
    """MMAction2's tools: Config.fromfile, --cfg-options merged, then the registry builds the
    runner (PlanningRunner.from_cfg resolves): relative overrides are read from the CWD."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import resolve_paths
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(NIV_T3)
    cfg.merge_from_dict({'data_root': '/nonexistent', 'cache_dir': 'c'})
    resolve_paths(cfg)
    for dataset in dataset_paths(cfg):
        assert (dataset.data_root, dataset.cache_dir) == ('/nonexistent/niv', str(tmp_path / 'c'))
        assert dataset.feature_dir == str(REPO_ROOT / 'data/synthetic/niv/features')
    assert resolve_paths(cfg).to_dict() == cfg.to_dict()  # twice = once


def test_a_config_without_locations_rejects_the_flag(tmp_path):
    config = tmp_path / 'bare.py'
    config.write_text("model = dict(type='X')\n")
    with pytest.raises(ValueError, match=r"bare.py: --data-root needs a config that defines"):
        load_config(config, data_root='somewhere')
    assert load_config(config).model.type == 'X'


@pytest.mark.parametrize('tool', TOOLS)
def test_every_tool_takes_the_data_flags(tool):
    module = load_tool(tool)
    positional = {'train': ['c.py'], 'test': ['c.py', 'w.pth'], 'plan': ['c.py', 'w.pth'],
                  'run_protocol': ['p.py'],
                  'llm_eval': ['--config', 'c.py', '--model', 'm', '--base-url', 'http://x']}
    args = module.parse_args(positional[tool] + ['--data-root', 'R', '--feature-dir', 'F'])
    assert (args.data_root, args.feature_dir) == ('R', 'F')


def tiny_niv_root(shared_data: Path, root: Path, features: Path) -> None:
    """A public-layout data root holding a small NIV (first windows of each split) and
    synthetic features for its videos."""
    from vpn_plugin.datasets import load_taxonomy
    from vpn_plugin.datasets.annotations import chain_windows, read_window_file
    from vpn_plugin.datasets.synthetic import SyntheticFeatureGenerator, write_synthetic_features
    niv = root / 'niv'
    (niv / 'splits').mkdir(parents=True)
    for name in ('taxonomy.json', 'state_descriptions.json', 'state_features_clip.npy'):
        (niv / name).write_bytes((shared_data / 'niv' / name).read_bytes())
    for split, count in (('train', 80), ('test', 12)):
        windows = json.loads((shared_data / f'niv/splits/{split}_T3.json').read_text())[:count]
        (niv / f'splits/{split}_T3.json').write_text(json.dumps(windows))
    taxonomy = load_taxonomy(niv / 'taxonomy.json')
    windows = []
    for split in ('train', 'test'):
        windows += read_window_file(niv / f'splits/{split}_T3.json', taxonomy, 3)[0]
    write_synthetic_features(chain_windows(windows), SyntheticFeatureGenerator(taxonomy, seed=0),
                             features, 'npz', progress=False)


def test_train_one_epoch_from_another_directory_with_data_root(shared_data, tmp_path,
                                                              monkeypatch, single_thread):
    tiny_niv_root(shared_data, tmp_path / 'root', tmp_path / 'features')
    run_dir = tmp_path / 'elsewhere'
    run_dir.mkdir()
    monkeypatch.chdir(run_dir)  # in this process: the relative paths resolve as in a shell
    load_tool('train').main([
        NIV_T3, '--data-root', '../root', '--feature-dir', '../features', '--work-dir', 'wd',
        '--cfg-options', 'train_cfg.max_epochs=1', 'train_cfg.val_interval=1',
        'default_hooks.checkpoint.interval=1', 'cache_dir=../cache',
        'train_dataloader.batch_size=64'])
    assert (run_dir / 'wd' / 'epoch_1.pth').is_file()
    dumped = (run_dir / 'wd' / 'vpn_niv_t3.py').read_text()
    assert str(tmp_path / 'root' / 'niv') in dumped and '../shared/data' not in dumped
    assert str(tmp_path / 'features') in dumped and any((tmp_path / 'cache').iterdir())


def test_input_errors_end_a_tool_with_their_message_not_a_traceback(monkeypatch):
    from vpn_plugin.errors import explained_errors
    from vpn_plugin.datasets.annotations import BadVideoError
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)
    with pytest.raises(SystemExit, match=r'error: feature file f.npy does not exist; run X'):
        with explained_errors():
            raise BadVideoError('v1', 'missing feature file', 'feature file f.npy does not exist; run X')
    with pytest.raises(SystemExit, match='feature_dir d does not exist'):
        with explained_errors():
            raise FileNotFoundError('PlanningDataset: feature_dir d does not exist')
    with pytest.raises(SystemExit, match=r"^error: taxonomy t.json: task 'x'"):
        with explained_errors():  # refused values, names and options: ValueError / KeyError
            raise KeyError("taxonomy t.json: task 'x'")
    with pytest.raises(RuntimeError):  # other errors keep their traceback
        with explained_errors():
            raise RuntimeError('a bug')
    monkeypatch.setenv('VPN_TRACEBACK', '1')
    with pytest.raises(FileNotFoundError):
        with explained_errors():
            raise FileNotFoundError('kept for debugging')


def mmaction2_tool(name: str) -> Path:
    """MMAction2's own ``tools/<name>.py`` as the mmaction2 wheel ships it (= the repo's)."""
    import mmaction
    path = Path(mmaction.__file__).parent / '.mim' / 'tools' / f'{name}.py'
    if not path.is_file():
        pytest.skip(f"this mmaction2 install does not ship MMAction2's tools ({path})")
    return path


def test_mmaction2_test_tool_runs_our_config_from_another_directory(shared_data, tmp_path,
                                                                    monkeypatch, capsys):
    """README: MMAction2's own tools/test.py runs these configs from any directory, and
    --cfg-options data_root=... / feature_dir=... move every split (run in this process)."""
    import runpy
    import numpy as np
    import vpn_plugin.mm  # noqa: F401
    from mmaction.registry import MODELS
    tiny_niv_root(shared_data, tmp_path / 'root', tmp_path / 'features')
    config = str(REPO_ROOT / 'configs/baselines/uniform_emissions_niv_t3.py')
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=48, horizon=3))
    model.set_pkg(np.full((48, 48), 1 / 48))
    from vpn_plugin.data_paths import load_config
    from tiny_configs import save_recorded
    save_recorded(model, tmp_path / 'pkg.pth', load_config(config, data_root=str(
        tmp_path / 'root')).test_dataloader.dataset)
    (tmp_path / 'elsewhere').mkdir()
    monkeypatch.chdir(tmp_path / 'elsewhere')
    monkeypatch.setattr(sys, 'argv', [
        'test.py', config, '../pkg.pth', '--work-dir', 'wd', '--cfg-options',
        'data_root=../root', 'feature_dir=../features', 'cache_dir=../test_cache'])
    runpy.run_path(str(mmaction2_tool('test')), run_name='__main__')
    assert 'plan/success_rate' in capsys.readouterr().out
    assert not (tmp_path / 'elsewhere/wd/uniform_emissions_niv_t3.py').exists()  # a training record
    dumped = next((tmp_path / 'elsewhere/wd').glob('*/uniform_emissions_niv_t3.py')).read_text()
    assert str(tmp_path / 'root' / 'niv') in dumped and '{data_root}' not in dumped
    assert any((tmp_path / 'test_cache').iterdir())


def test_a_repository_config_is_parsed_once_per_content_and_each_caller_gets_a_copy(
        tmp_path, monkeypatch):
    """read_config_file remembers a config of the repository (it and its bases in configs/, no
    {{$ENV}}) by the bytes of its chain: mmengine parses it once; each caller gets its own
    copy; new bytes (also at the same size and time stamp), another file, a config elsewhere
    or one reading the environment are parsed anew."""
    import os
    from mmengine.config import Config
    from vpn_plugin import data_paths
    parsed = []
    original = Config.fromfile
    monkeypatch.setattr(Config, 'fromfile', staticmethod(
        lambda filename, *a, **k: parsed.append(filename) or original(filename, *a, **k)))
    data_paths._repository_config.cache_clear()
    repository, elsewhere = tmp_path / 'configs', tmp_path / 'elsewhere'
    monkeypatch.setattr(data_paths, 'REPOSITORY_CONFIGS', repository)
    for folder in (repository, elsewhere):
        folder.mkdir()
        (folder / 'base.py').write_text("model = dict(type='Base', size=3)\nrate = 0.5\n")
        (folder / 'child.py').write_text("_base_ = ['base.py']\nmodel = dict(size=4)\n")
    child = str(repository / 'child.py')
    first = data_paths.read_config_file(child)
    first.model.size = 99  # the caller's copy: the next reader sees the file's value
    again = data_paths.read_config_file(child)
    assert parsed == [child] and again.model.size == 4 and again.rate == 0.5
    assert again.filename == child and again.text == original(child).text
    assert again.to_dict() == original(child).to_dict()
    parsed.clear()
    base = repository / 'base.py'  # new bytes, the same size and time stamp: read anew
    stat = base.stat()
    base.write_text(base.read_text().replace('0.5', '0.7'))
    os.utime(base, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert base.stat().st_size == stat.st_size
    assert data_paths.read_config_file(child).rate == 0.7 and parsed == [child]
    outside = str(elsewhere / 'child.py')  # not the repository's: its code may read anything
    assert [data_paths.read_config_file(outside).model.size for _ in range(2)] == [4, 4]
    assert parsed == [child, outside, outside]
    parsed.clear()
    (repository / 'env.py').write_text("_base_ = ['base.py']\nrate = '{{$VPN_RATE:0.1}}'\n")
    (repository / 'spaced.py').write_text("_base_ = ['base.py']\nrate = '{{ $VPN_RATE:0.1 }}'\n")
    rates = []
    for name in ('env.py', 'spaced.py'):  # mmengine reads both spellings
        for value in ('0.2', '0.3'):
            monkeypatch.setenv('VPN_RATE', value)
            rates.append(data_paths.read_config_file(str(repository / name)).rate)
    assert rates == ['0.2', '0.3'] * 2 and len(parsed) == 4
