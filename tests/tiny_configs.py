"""Child config files of a method's config at tiny sizes, on the tests' tiny CrossTask data."""
from pathlib import Path


def write_tiny_config(path: Path, base: Path, body: str, tiny_crosstask: dict, batch_size: int,
                      steps_per_epoch: int = None) -> Path:
    """``path``: ``_base_ = [base]``, the config lines ``body``, and train/val/test loaders of
    ``batch_size`` over the ``tiny_crosstask`` splits (512-d 'mean3' observations, device
    resident); ``steps_per_epoch`` for a config with PDPP's steps-per-epoch sampler."""
    loaders = {f'{split}_dataloader': dict(batch_size=batch_size, dataset=dict(
        tiny_crosstask[f'{split}_dataset'], observation='mean3', device_resident=True,
        _delete_=True)) for split in ('train', 'val', 'test')}
    if steps_per_epoch is not None:
        loaders['train_dataloader']['batch_sampler'] = dict(steps_per_epoch=steps_per_epoch)
    path.write_text(f'_base_ = [{str(base)!r}]\n' + body
                    + ''.join(f'{name} = {value!r}\n' for name, value in loaders.items()))
    return path


def tiny_vpn_config(tiny_crosstask: dict, tmp_path: Path, **dataset) -> Path:
    """configs/vpn_crosstask_t3.py (the authors' network) on the tiny CrossTask subset
    (``dataset``: options given to its three splits)."""
    repo = Path(__file__).resolve().parents[1]
    config = tmp_path / 'vpn_tiny.py'
    splits = ''.join(f"{split}_dataloader = dict(dataset=dict(_delete_=True, "
                     f"**{dict(tiny_crosstask[f'{split}_dataset'], **dataset)!r}))\n"
                     for split in ('train', 'val', 'test'))
    config.write_text(f"_base_ = [{str(repo / 'configs/vpn_crosstask_t3.py')!r}]\n" + splits)
    return config


def save_recorded(model, path: Path, dataset_cfg: dict) -> Path:
    """``model`` saved as training saves it: its tensors and what it was trained for
    (``engine.checkpoint.recorded_setting``: the metainfo of ``dataset_cfg``, a
    ``PlanningDataset`` config dict, and the model's text features)."""
    import torch
    from vpn_plugin.datasets.planning_dataset import config_metainfo
    from vpn_plugin.engine.checkpoint import recorded_setting
    torch.save({'state_dict': model.state_dict(),
                'meta': recorded_setting(model, config_metainfo(dataset_cfg))}, path)
    return path


TINY_PDPP_EMA_BODY = (
    "model = dict(feature_dim=512, num_tasks=3, dim=32, n_timesteps=20)\n"
    "train_cfg = dict(max_epochs=2, val_interval=2)\n"
    "default_hooks = dict(checkpoint=dict(interval=1, save_best=None),\n"
    "                     logger=dict(interval=50))\n"
    "custom_hooks = [dict(type='PKGHook'),\n"
    "    dict(type='TaskClassifierHook', lr=1e-4, weight_decay=0.0),\n"
    "    dict(type='PDPPEMAHook', decay=0.9, start_step=3, interval=1)]\n")


def write_tiny_pdpp_ema_config(tmp_path: Path, tiny_crosstask: dict) -> Path:
    """A tiny PDPP (2 epochs of 3 steps) whose EMA copies the model at step 3 and averages
    from step 4 on: the checkpoint after epoch 1 shares every trained tensor with its EMA."""
    repo = Path(__file__).resolve().parents[1]
    return write_tiny_config(tmp_path / 'tiny_pdpp.py',
                             repo / 'configs/baselines/pdpp_crosstask_t3.py',
                             TINY_PDPP_EMA_BODY, tiny_crosstask, batch_size=32,
                             steps_per_epoch=3)


def trained_and_reused_pre_stage(config: Path, tmp_path: Path, pre_stage_file: str,
                                 checkpoint: str) -> tuple:
    """Train ``config`` into ``tmp_path/trained`` (its pre-stage trained and saved as
    ``pre_stage_file``), then into ``tmp_path/reused``, which holds a copy of that file (a
    restart of the run: the pre-stage reused, not retrained); returns the two runs'
    ``checkpoint`` (``read_checkpoint``: the EMA's shared tensors put back)."""
    import shutil
    from tool_modules import load_tool, run_logs
    from vpn_plugin.engine.checkpoint import read_checkpoint
    train = load_tool('train').main
    train([str(config), '--work-dir', str(tmp_path / 'trained')])
    (tmp_path / 'reused').mkdir()
    shutil.copy(tmp_path / 'trained' / pre_stage_file, tmp_path / 'reused' / pre_stage_file)
    train([str(config), '--work-dir', str(tmp_path / 'reused')])
    assert '(not retrained)' in run_logs(tmp_path / 'reused')
    return tuple(read_checkpoint(tmp_path / run / checkpoint) for run in ('trained', 'reused'))


def differing_tensors(first: dict, second: dict) -> list:
    """'part[key]' of every tensor of the two checkpoints' ``state_dict`` and ``ema_state_dict``
    (the EMA and the trained weights) that is not bit-identical; [] when none."""
    import torch
    differ = []
    for part in ('state_dict', 'ema_state_dict'):
        for key, value in first.get(part, {}).items():
            other = second.get(part, {}).get(key)
            if torch.is_tensor(value) and not (torch.is_tensor(other) and torch.equal(value, other)):
                differ.append(f'{part}[{key}]')
    return differ


def option_differences(trained_text: str, purpose: str, config_text: str = None,
                       change: dict = None):
    """``engine.checkpoint.training_option_differences`` at ``purpose`` ('resume', 'test')
    between the run of the config text ``trained_text`` and the config of ``config_text``
    (the run's own by default) with the dotted keys of ``change`` set."""
    from mmengine.config import Config
    from vpn_plugin.engine.checkpoint import training_option_differences
    cfg = Config.fromstring(trained_text if config_text is None else config_text, '.py')
    cfg.merge_from_dict(change or {})
    return training_option_differences(trained_text, cfg, purpose)
