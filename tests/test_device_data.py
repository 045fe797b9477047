"""Device-resident batches and the sync-free training step (issue 22, items 2-3): the same
batches and bit-identical weights and logs as the per-item loader with mmengine's
RuntimeInfoHook."""
import copy
import json
from pathlib import Path

import pytest
import torch
from mmengine.hooks import Hook

from vpn_plugin.data_paths import load_config

ROOT = Path(__file__).resolve().parents[1]
EPOCHS, LOG_INTERVAL = 2, 2


class BatchProbe(Hook):
    """Records each training batch's window indices and the length of the message hub's
    ``train/loss`` history after every iteration (after every other hook)."""

    priority = 'LOWEST'

    def __init__(self):
        self.indices, self.logged = [], []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.indices.append(data_batch['data_samples']['index'].tolist())
        history = runner.message_hub.log_scalars.get('train/loss')
        self.logged.append(0 if history is None else len(history.data[0]))


def tiny_config(tiny_crosstask, work_dir, new_path: bool):
    """A tiny ViterbiPlanNet training (262 windows of 512-d observations, batch 64: 5 batches
    per epoch, dropout on, no validation); ``new_path``: device-resident batches +
    DeferredRuntimeInfoHook, else the per-item loader (default_collate) with mmengine's
    RuntimeInfoHook."""
    cfg = load_config(str(ROOT / 'configs/synthetic/vpn_crosstask_t3_synthetic.py'))
    loader = cfg.train_dataloader
    loader.batch_size = 64
    loader.dataset = dict(copy.deepcopy(tiny_crosstask['train_dataset']), observation='mean3',
                          device_resident=new_path)
    if not new_path:
        loader.collate_fn = dict(type='default_collate')
    for key in ('val_dataloader', 'val_evaluator', 'val_cfg', 'test_dataloader',
                'test_evaluator', 'test_cfg'):
        cfg[key] = None
    cfg.model.update(embed_dim=32, feature_dim=512, text_embeddings=None)
    cfg.model.loss_weights.state = 0.0
    cfg.train_cfg.update(max_epochs=EPOCHS)
    cfg.default_hooks.checkpoint.update(interval=EPOCHS, save_best=None)
    cfg.default_hooks.logger.interval = LOG_INTERVAL
    if not new_path:
        cfg.default_hooks.runtime_info = dict(type='RuntimeInfoHook')
    cfg.update(work_dir=str(work_dir), log_level='WARNING')
    return cfg


def train(cfg):
    from vpn_plugin.runner import build_runner
    runner = build_runner(cfg)
    probe = BatchProbe()
    runner.register_hook(probe)
    runner.train()
    return runner, probe


def checkpoint(path: Path) -> dict:
    import vpn_plugin
    with torch.serialization.safe_globals(vpn_plugin.compat.mmengine_checkpoint_globals()):
        return torch.load(path, map_location='cpu', weights_only=True)


def scalars(work_dir: Path) -> list:
    """The rows of scalars.json without the wall-clock fields."""
    (log,) = work_dir.glob('*/vis_data/scalars.json')
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in ('time', 'data_time', 'eta')}
            for row in rows]


def test_device_batches_train_bit_identically_to_the_item_loader(tiny_crosstask, tmp_path,
                                                                 single_thread):
    runs = {}
    for new_path in (False, True):
        work_dir = tmp_path / ('new' if new_path else 'old')
        runs[new_path] = (work_dir, *train(tiny_config(tiny_crosstask, work_dir, new_path)))
    (old_dir, old, old_probe), (new_dir, new, new_probe) = runs[False], runs[True]
    assert new.train_dataloader.dataset.device_resident
    assert not old.train_dataloader.dataset.device_resident
    assert len(new_probe.indices) == EPOCHS * 5
    assert new_probe.indices == old_probe.indices  # same seeded shuffling
    assert new_probe.indices[0] != new_probe.indices[5]  # reshuffled each epoch
    old_weights, new_weights = old.model.state_dict(), new.model.state_dict()
    assert old_weights.keys() == new_weights.keys()
    for name in old_weights:
        assert torch.equal(old_weights[name], new_weights[name]), name
    for key in ('train/loss', 'train/loss_plan', 'train/loss_task'):
        assert old.message_hub.get_scalar(key).data[0].tolist() == \
            new.message_hub.get_scalar(key).data[0].tolist(), key
    assert scalars(new_dir) == scalars(old_dir)  # logged lines: same losses and lr
    hubs = [checkpoint(folder / f'epoch_{EPOCHS}.pth')['message_hub']['log_scalars']
            for folder in (old_dir, new_dir)]
    assert hubs[0].keys() == hubs[1].keys()
    for key in hubs[0]:
        if not key.endswith('time'):
            assert hubs[0][key].data[0].tolist() == hubs[1][key].data[0].tolist(), key
    # the losses reach the message hub only when logged (every 2 batches, and each epoch's
    # last batch), not after every step as with mmengine's hook
    assert old_probe.logged == list(range(1, 11))
    assert new_probe.logged == [0, 2, 2, 4, 5, 5, 7, 7, 9, 10]


def test_device_batches_gather_what_the_items_hold(tiny_crosstask):
    from mmaction.registry import DATASETS
    from mmengine.dataset import default_collate

    from vpn_plugin.datasets.planning_dataset import planning_collate
    dataset = DATASETS.build(dict(tiny_crosstask['train_dataset'], observed_steps=1,
                                  device_resident=True))
    indices = [7, 0, 7, len(dataset) - 1]
    gathered = planning_collate(dataset.__getitems__(indices))
    stacked = default_collate([dataset[i] for i in indices])
    assert gathered['inputs'].keys() == stacked['inputs'].keys() == {'start', 'goal', 'observed'}
    for part in ('inputs', 'data_samples'):
        for name, values in stacked[part].items():
            assert gathered[part][name].dtype == values.dtype, name
            assert torch.equal(gathered[part][name], values), name
    assert gathered['data_samples']['index'].tolist() == indices
    dataset.device_resident = False
    assert planning_collate(dataset.__getitems__(indices)).keys() == stacked.keys()


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
def test_training_step_on_cuda_never_synchronises(tiny_crosstask, tmp_path):
    """From the 2nd step on (the first creates the optimiser state), a step (hooks before
    it, data preprocessing, forward, DVL, backward, fused AdamW) and a batch gather run
    under torch's sync debug mode 'error'."""

    class NoSync(Hook):
        priority = 'HIGHEST'

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            if runner.iter > 0:
                torch.cuda.synchronize()
                torch.cuda.set_sync_debug_mode('error')
                runner.train_dataloader.dataset.__getitems__([3, 1, 2])

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            torch.cuda.set_sync_debug_mode('default')

    from vpn_plugin.runner import build_runner
    runner = build_runner(tiny_config(tiny_crosstask, tmp_path, new_path=True))
    runner.register_hook(NoSync())
    runner.train()
    assert next(runner.model.parameters()).is_cuda
