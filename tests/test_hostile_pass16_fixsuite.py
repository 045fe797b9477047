"""Session 11, engineer fixsuite: an order effect of the suite that was a bug for API users."""
import logging
import os
import sys
from pathlib import Path

import pytest

from tiny_configs import write_tiny_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def benchmark_epoch():
    sys.path.insert(0, str(REPO / 'tools'))
    try:
        import benchmark_epoch
    finally:
        sys.path.pop(0)
    return benchmark_epoch


def test_a_benchmark_in_a_process_leaves_no_log_file_in_its_deleted_folder(
        benchmark_epoch, tiny_crosstask, shared_data, tmp_path, capsys):
    """Before: tools/benchmark_epoch.py trained in a temporary folder it then deleted, and its
    runner's logger (mmengine's current one, which later messages of the process reach) kept
    its log file there, opened in mode 'a'. Once logging's handlers were closed (importing
    submitit runs ``logging.config.dictConfig``, which closes them all; simulated here for this
    logger only), the next message reopened that file: ``read_checkpoint`` of a file just saved
    said "cannot read checkpoint ...: FileNotFoundError" (the suite's order effect of
    test_train.py, whose last test benchmarks, before test_hostile_pass3.py)."""
    import torch
    from mmengine.logging import MMLogger
    from vpn_plugin.engine.checkpoint import read_checkpoint
    body = ("model = dict(feature_dim=512, text_embeddings=dict(file="
            f"{str(shared_data / 'crosstask/state_features_clip_133.npy')!r}))\n")
    config = write_tiny_config(tmp_path / 'tiny_vpn.py',
                               REPO / 'configs/synthetic/vpn_crosstask_t3_synthetic.py', body,
                               tiny_crosstask, batch_size=128)
    rows, _ = benchmark_epoch.main([str(config), '--epochs', '1'])
    assert [row['epoch'] for row in rows] == [1]
    logger = MMLogger.get_current_instance()
    files = [handler.baseFilename for handler in logger.handlers
             if isinstance(handler, logging.FileHandler)]
    assert all(os.path.isdir(os.path.dirname(name)) for name in files), files
    for handler in logger.handlers:  # what logging.config.dictConfig does to every handler
        handler.close()
    path = tmp_path / 'x.pth'
    torch.save({'state_dict': {'w': torch.ones(2)}}, path)
    assert torch.equal(read_checkpoint(path)['state_dict']['w'], torch.ones(2))
