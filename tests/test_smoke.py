"""Smoke runs (vpn_plugin/smoke.py) and limited test sets (PlanningDataset limit=, test.py
--limit): any config shortened the same way, marked shortened in every output (issue 38)."""
import json
from pathlib import Path

import numpy as np
import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import DATASETS
from mmengine.config import Config
from tiny_configs import write_tiny_config
from tool_modules import load_tool
from vpn_plugin.core.stats import stratified_sample
from vpn_plugin.data_paths import load_config
from vpn_plugin.smoke import EMA_COPY_EVERY, SMOKE, smoke_config

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize('name', ['baselines/pdpp_niv_t3', 'baselines/kepp_crosstask_t4',
                                  'baselines/cefito_coin_t3', 'baselines/schema_niv_t5',
                                  'baselines/pkg_beam_search_crosstask_t3', 'vpn_niv_t3',
                                  'union/vpn_union_t3'])
def test_every_config_shortens_the_same_way(name):
    cfg = smoke_config(load_config(REPO / f'configs/{name}.py'))
    assert cfg.train_cfg.max_epochs == 1 and cfg.train_cfg.val_interval == 1
    batch = cfg.train_dataloader.batch_size
    assert batch <= SMOKE['batch_size']
    sampler = cfg.train_dataloader.get('batch_sampler') or {}
    assert sampler.get('steps_per_epoch', SMOKE['steps']) == SMOKE['steps']
    limits = []
    for split in ('train', 'val', 'test'):
        dataset = cfg[f'{split}_dataloader'].dataset
        limits.append(dataset.get('limit') or dataset.get('dataset_options', {}).get('limit'))
    assert limits == [SMOKE['steps'] * batch, SMOKE['val_windows'], SMOKE['test_windows']]
    stages = [h for h in cfg.custom_hooks
              if h['type'] in ('TaskClassifierHook', 'KEPPStepModelHook')]
    assert all(h['max_iters'] == SMOKE['pre_stage_steps'] and not h.get('max_epochs')
               for h in stages)
    assert cfg.default_hooks.checkpoint.interval == 1
    epochs = load_config(REPO / f'configs/{name}.py').train_cfg.max_epochs
    assert cfg.shortened.startswith(f'smoke: 1 epoch of 4 steps of {batch} windows (config: '
                                    f'{epochs} epochs)')
    assert ('pre-stages 4 steps' in cfg.shortened) == bool(stages)
    # the EMA (what is validated, saved and tested) copies the model after every step: on the
    # official schedule a 4-step run tested the model after step 1 (PDPP, KEPP) or CEFITO's
    # untrained initial weights
    emas = {h['type']: h for h in cfg.custom_hooks if h['type'].endswith('EMAHook')}
    assert all(h[EMA_COPY_EVERY[kind]] == 1 for kind, h in emas.items())
    assert bool(emas) == any(k in name for k in ('pdpp', 'kepp', 'cefito', 'beam_search'))


def test_a_test_only_config_keeps_its_test_windows_only():
    cfg = smoke_config(load_config(REPO / 'configs/llm/llm_crosstask_t3.py'))
    assert cfg.test_dataloader.dataset.limit == SMOKE['test_windows']
    assert cfg.shortened == f'smoke: {SMOKE["test_windows"]} test windows'


def test_a_dataset_without_limit_is_refused():
    cfg = Config(dict(test_dataloader=dict(dataset=dict(type='ToyCompatDataset'))))
    with pytest.raises(ValueError, match='a ToyCompatDataset cannot be limited to 32 windows'):
        smoke_config(cfg)


def test_limit_keeps_the_windows_the_llm_tool_samples(tiny_crosstask):
    full = DATASETS.build(dict(tiny_crosstask['test_dataset']))
    limited = DATASETS.build(dict(tiny_crosstask['test_dataset'], limit=20, limit_seed=3))
    picked = stratified_sample(full.tasks, 20, seed=3, keys=full.window_keys())
    assert limited.limited == (20, len(full))
    assert [w.feature for w in limited.windows] == [full.windows[i].feature for i in picked]
    np.testing.assert_array_equal(limited.start, full.start[picked])
    np.testing.assert_array_equal(limited.plans, full.plans[picked])
    assert sorted(set(limited.tasks.tolist())) == sorted(set(full.tasks.tolist()))
    assert DATASETS.build(dict(tiny_crosstask['test_dataset'], limit=10_000)).limited is None
    with pytest.raises(ValueError, match=r'limit=0; expected an integer >= 1'):
        DATASETS.build(dict(tiny_crosstask['test_dataset'], limit=0))


@pytest.fixture(scope='module')
def tiny_pdpp(tiny_crosstask, tmp_path_factory) -> Path:
    """configs/baselines/pdpp_crosstask_t3.py at tiny sizes (U-Net dim 32, 20 diffusion steps):
    a heavy method whose smoke run takes seconds."""
    body = "model = dict(feature_dim=512, num_tasks=3, dim=32, n_timesteps=20)\n"
    return write_tiny_config(tmp_path_factory.mktemp('smoke') / 'tiny_pdpp.py',
                             REPO / 'configs/baselines/pdpp_crosstask_t3.py', body,
                             tiny_crosstask, batch_size=32, steps_per_epoch=3)


def test_train_py_smoke_shortens_the_config_into_its_own_work_dir(tiny_pdpp, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    train = load_tool('train')
    cfg = train.load_config(train.parse_args([str(tiny_pdpp), '--smoke']))
    assert cfg.work_dir == 'work_dirs/tiny_pdpp_smoke'
    assert cfg.shortened == ('smoke: 1 epoch of 4 steps of 8 windows (config: 120 epochs), '
                             'pre-stages 4 steps')
    assert train.load_config(train.parse_args([str(tiny_pdpp)])).get('shortened') is None


def test_a_smoke_protocol_ends_in_a_marked_table_row(tiny_pdpp, tmp_path, capsys,
                                                     single_thread):
    """A heavy method (PDPP, tiny sizes) through run_protocol.py --smoke and report.py; its
    checkpoint says so to test.py (--limit adds its own mark) and refuses a full resume."""
    protocol = tmp_path / 'smoke_protocol.py'
    protocol.write_text(f"protocol = 'smoke_check'\ndataset = 'crosstask'\nseeds = [0]\n"
                        f"runs = [dict(method='PDPP', config={str(tiny_pdpp)!r})]\n")
    results = load_tool('run_protocol').main([str(protocol), '--smoke', '--out',
                                              str(tmp_path / 'out'), '--log-level', 'INFO'])
    assert Path(results).name == 'results_smoke.jsonl'
    row = json.loads(Path(results).read_text().splitlines()[0])
    assert row['shortened'] == ('smoke: 1 epoch of 4 steps of 8 windows (config: 120 epochs), '
                                'pre-stages 4 steps; limit=32 of 105 test windows')
    run = (Path(results).parent / row['work_dir']).parent  # rows hold paths relative to it
    assert row['settings']['smoke'] is True and run.name == 'seed0_smoke'
    log = next(run.glob('*/*.log')).read_text()
    assert 'SHORTENED RUN (smoke: 1 epoch' in log
    assert 'limit: 32 of 262 windows, stratified over tasks' in log
    assert 'Epoch(train) [1][4/4]' in log and 'trained diffusion.task_head for 4 steps' in log
    capsys.readouterr()
    load_tool('report').main([str(results), '--metrics', 'success_rate'])
    table = capsys.readouterr().out
    # † shortened, ‖ synthetic features (the tiny dataset's)
    assert '| PDPP†‖ |' in table and '† shortened runs (PDPP: smoke: 1 epoch' in table

    checkpoint = str(run / 'epoch_1.pth')
    load_tool('test').main([str(tiny_pdpp), checkpoint, '--limit', '12', '--work-dir',
                            str(tmp_path / 'test')])
    written = json.loads(next((tmp_path / 'test').glob('*/test_metrics.json')).read_text())
    assert written['shortened'] == ('smoke: 1 epoch of 4 steps of 8 windows (config: 120 '
                                    'epochs), pre-stages 4 steps; limit=12 of 105 test windows')
    assert 0 <= written['plan/success_rate'] <= 100
    with pytest.raises(SystemExit, match=r'a run of shortened=smoke: 1 epoch.*this config is '
                       r'shortened=none \(the full run\)'):
        load_tool('train').main([str(tiny_pdpp), '--work-dir', str(tmp_path / 'full'),
                                 '--resume', checkpoint])


def test_a_smoke_run_of_several_processes_says_what_each_ran(monkeypatch):
    """Fourth hostile pass: a 2-process smoke run was marked '4 steps of 8 windows' but each
    process ran 2 steps of its share (2 x 8 windows a step)."""
    monkeypatch.setenv('WORLD_SIZE', '2')
    cfg = smoke_config(load_config(REPO / 'configs/vpn_niv_t3.py'))
    assert cfg.shortened.startswith('smoke: 1 epoch of 2 steps of 2 x 8 windows (2 processes) '
                                    '(config: ')
    pdpp = smoke_config(load_config(REPO / 'configs/baselines/pdpp_niv_t3.py'))
    assert pdpp.shortened.startswith('smoke: 1 epoch of 4 steps of 2 x 8 windows')  # its sampler
