"""Eleventh hostile pass, phase 1 (issue 37), result rows, report and stats (fix2): the tenth
pass's "Left" items 3, 4, 5 and "What I would do next" 2 (closing8), each test failing on main
230a96d (the behaviour before its fix; case ids of /tmp/confirm4_log.md, /tmp/confirm5_log.md).
"""
from pathlib import Path

import pytest

from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


# ------------------------------------------------------------ left 3: the resample floor
@pytest.mark.parametrize('k', [1, 10, 19])
def test_a_bootstrap_below_the_resample_floor_is_refused(k):
    """Before: bootstrap_ci(num_resamples=1) gave an "interval" that excluded the mean (one
    resampled mean); K=10 read its 5 % / 95 % ends off the 1st/2nd and 9th/10th means."""
    from vpn_plugin.core import stats
    expected = (rf'num_resamples={k}; expected at least {stats.MIN_RESAMPLES} '
                r'\(a 90 % percentile interval needs enough resamples')
    for call in (lambda: stats.bootstrap_ci([1.0, 2.0, 9.0], k),
                 lambda: stats.seed_interval([1.0, 2.0], k),  # no interval, still refused
                 lambda: stats.bootstrap_difference([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], k)):
        with pytest.raises(ValueError, match=expected):
            call()
    mean, low, high = stats.bootstrap_ci([1.0, 2.0, 9.0], stats.MIN_RESAMPLES)
    assert low <= mean <= high


def test_report_refuses_a_resample_count_below_the_floor(capsys):
    """Before: report.py --num-resamples 1 printed a table whose "± K=1" cells were a single
    resampled mean; build_table(num_diff_resamples=1) the same for the improvement."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    for flag in ('--num-resamples', '--num-diff-resamples'):
        with pytest.raises(SystemExit) as stopped:
            load_tool('report').main([str(KEPT), flag, '1'])
        assert stopped.value.code == 2
        assert (f'argument {flag}: K=1; expected at least 20 (a 90 % percentile interval'
                in capsys.readouterr().err)
    with pytest.raises(ValueError, match='num_diff_resamples=1; expected at least 20'):
        build_table(read_results(KEPT), ['success_rate'], num_resamples=20,
                    num_diff_resamples=1)


# ------------------------------------------------------------ left 4: a file's dataset horizon
def child_config(tmp_path, body: str, base: str = 'configs/vpn_niv_t3.py') -> Path:
    path = tmp_path / 'child.py'
    path.write_text(f"_base_ = ['{ROOT / base}']\n{body}")
    return path


@pytest.mark.parametrize('split', ['train', 'val', 'test'])
def test_a_config_file_whose_dataset_horizon_contradicts_horizon_is_refused(tmp_path, split):
    """Before (confirm5 F16): train_dataloader.dataset.horizon=4 in a config file under
    horizon = 3 trained at T=3 without a word (apply_horizon overwrote it); the same key
    through --cfg-options was already refused."""
    from vpn_plugin.data_paths import load_config
    path = child_config(tmp_path, f'{split}_dataloader = dict(dataset=dict(horizon=4))\n')
    top = 'test_horizon' if split == 'test' else 'horizon'
    with pytest.raises(ValueError, match=rf'child.py: {split}_dataloader.dataset.horizon=4 '
                       rf'contradicts {top}=3 .*set {top} = 4'):
        load_config(path)


def test_a_dataset_horizon_that_agrees_or_is_a_base_copy_passes(tmp_path):
    """The same value passes; so does the base's stale copy (planning_dataset.py writes its
    horizon = 3 into the datasets) under a child's horizon = 6 or --horizon 5, which
    apply_horizon exists to overwrite."""
    from vpn_plugin.data_paths import load_config
    cfg = load_config(child_config(tmp_path, 'train_dataloader = dict(dataset=dict(horizon=3))\n'))
    assert cfg.train_dataloader.dataset.horizon == 3
    cfg = load_config(child_config(tmp_path, 'horizon = 6\n'))
    assert (cfg.train_dataloader.dataset.horizon, cfg.model.horizon) == (6, 6)
    cfg = load_config(ROOT / 'configs' / 'vpn_niv_t3.py', horizon=5)
    assert cfg.test_dataloader.dataset.horizon == 5
    path = child_config(tmp_path, 'model = dict(horizon=4)\n')
    with pytest.raises(ValueError, match='model.horizon=4 contradicts horizon=3'):
        load_config(path)
