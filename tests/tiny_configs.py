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
