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


# ------------------------------------------------------------ left 5: result rows
def row_record(**fields) -> dict:
    from dataclasses import asdict
    from vpn_plugin.protocol.results import read_results
    return {**asdict(read_results(KEPT)[0]), **fields}


def test_plan_entropy_is_bounded(tmp_path):
    """Before (confirm4 R12): plan_entropy = 1e9 bits was read (only >= 0 was checked), a cell
    of 333333334.26 ± 666666665.74. Now at most 64 bits for any row (an entropy of n plans is
    at most log2 n bits) and at most the row's own bound (``metric_bounds``, written by the
    protocol: log2 of the largest group)."""
    from vpn_plugin.protocol.results import row_from_dict
    metrics = {'success_rate': 10.0, 'plan_entropy': 1e9}
    with pytest.raises(ValueError, match=r'metrics.plan_entropy=1000000000.0; expected a finite '
                       r'number >= 0 and <= 64'):
        row_from_dict(row_record(metrics=metrics), 'r.jsonl:1')
    metrics['plan_entropy'] = 3.5
    with pytest.raises(ValueError, match=r'r.jsonl:1: metrics.plan_entropy = 3.5 exceeds '
                       r'metric_bounds.plan_entropy = 2'):
        row_from_dict(row_record(metrics=metrics, metric_bounds={'plan_entropy': 2.0}),
                      'r.jsonl:1')
    row = row_from_dict(row_record(metrics=metrics, metric_bounds={'plan_entropy': 4.0}))
    assert row.metric_bounds == {'plan_entropy': 4.0}
    assert row_from_dict(row_record(metrics=metrics)).metric_bounds == {}  # an older row


def test_the_protocol_records_the_entropy_bound(tmp_path):
    import json
    import math
    from vpn_plugin.protocol.runner import diversity_metrics
    dump = tmp_path / 'per_sample.json'
    gt = [[1, 2, 3]] * 5 + [[4, 5, 6]] * 2
    pred = [[1, 2, 3], [1, 7, 3], [1, 8, 3], [1, 9, 3], [1, 2, 3], [4, 5, 6], [4, 5, 6]]
    dump.write_text(json.dumps(dict(pred_plan=pred, gt_plan=gt)))
    bounds = {}
    metrics = diversity_metrics(dump, bounds)
    assert bounds == {'plan_entropy': math.log2(5)}
    assert 0 < metrics['plan_entropy'] <= bounds['plan_entropy']


@pytest.mark.parametrize('fields, said', [
    (dict(horizon=6, train_horizon=6), "names config configs/vpn_crosstask_t3.py, whose "
     "horizon = 3, but the row says train_horizon=6"),                        # R19
    (dict(train_horizon=6), 'whose horizon = 3, but the row says train_horizon=6'),  # R21
    (dict(horizon=6, train_horizon=None), 'whose horizon = 3, but the row says horizon=6'),
    (dict(dataset='niv'), "whose test data is 'crosstask', but the row says dataset='niv'"),  # R20
])
def test_a_row_that_contradicts_its_config_is_refused(monkeypatch, fields, said):
    """Before (confirm4 R19/R20/R21): rows of configs/vpn_crosstask_t3.py made a T=6 column,
    a NIV column, or a plain T=3 cell of a model trained at T=6."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    from dataclasses import replace
    monkeypatch.chdir(ROOT)
    rows = read_results(KEPT)
    assert rows[0].config == 'configs/vpn_crosstask_t3.py'
    rows = [replace(r, **fields) if r.method == rows[0].method else r for r in rows]
    with pytest.raises(ValueError, match=f"row of '{rows[0].method}' .*{said}"):
        build_table(rows, ['success_rate'], num_resamples=20, num_diff_resamples=20)


def test_rows_of_the_cross_horizon_protocol_agree_with_their_configs(monkeypatch):
    """No cry wolf: a model of configs/vpn_niv_t6.py tested at T=3 (the cross-horizon
    protocol's rows) and every kept table (every protocol of configs/protocol passes too)."""
    from vpn_plugin.protocol.results import ResultRow, check_rows_match_configs, read_results
    from vpn_plugin.protocol.runner import expand_units, load_protocol
    monkeypatch.chdir(ROOT)
    rows = []
    for name in ('cross_horizon_niv',):
        protocol = load_protocol(f'configs/protocol/{name}.py')
        rows += [ResultRow(method=s.method, seed=0, horizon=s.horizon,
                           metrics={'success_rate': 1.0},
                           dataset=protocol.dataset, config=s.config,
                           train_horizon=u.horizon if u.train else None,
                           settings={'cfg_options': {**u.cfg_options, **s.cfg_options}})
                 for u in expand_units(protocol, seeds=[0]) for s in u.tests]
    assert {(r.horizon, r.train_horizon) for r in rows} >= {(3, 6), (4, 4)}
    check_rows_match_configs(rows + read_results(KEPT))


def test_a_rename_keeps_the_training_horizon(tmp_path, capsys):
    """Before (confirm4 R21): --rename 'ViterbiPlanNet (train T=6)=VPN' showed rows trained at
    T=6 as a plain 'VPN' T=3 cell beside the models trained at T=3."""
    from dataclasses import replace
    from vpn_plugin.protocol.results import append_result, read_results, rename_methods
    rows = [replace(r, method='ViterbiPlanNet (train T=6)', train_horizon=6, config='')
            for r in read_results(KEPT) if r.method == 'ViterbiPlanNet']
    renamed = rename_methods(rows, ['ViterbiPlanNet (train T=6)=VPN'], {rows[0].method})
    assert {r.method for r in renamed} == {'VPN (train T=6)'}
    said = rename_methods(rows, ['ViterbiPlanNet (train T=6)=VPN T=6'], {rows[0].method})
    assert {r.method for r in said} == {'VPN T=6'}  # already says it
    path = tmp_path / 'cross.jsonl'
    for row in rows:
        append_result(path, row)
    load_tool('report').main([str(path), '--rename', 'ViterbiPlanNet (train T=6)=VPN',
                              '--methods', 'ViterbiPlanNet (train T=6)', '--metrics',
                              'success_rate', '--num-resamples', '20',
                              '--num-diff-resamples', '20'])
    assert '| VPN (train T=6)' in capsys.readouterr().out


# ------------------------------------------------------------ next 2: a test's trust in its row
def test_a_test_s_caveats_reach_its_row():
    """Before: a protocol row of a test with changed options (model.decode), a checkpoint that
    recorded no feature statistics, features of another scale, CEFITO given the true task or
    a KEPP checkpoint whose graph holds test videos read as any other row. Now
    ``test_caveats`` carries them into the row (either shape of test_metrics.json's lists)."""
    import types
    import torch
    from vpn_plugin.protocol.runner import test_caveats
    model = types.SimpleNamespace(task_source='ground_truth')
    runner = types.SimpleNamespace(
        model=model, changed_from_training="model.decode: 'viterbi' in training; seed: 0",
        not_compared=['feature scale (no training feature statistics)'],
        feature_statistics_note='test features: mean moved by 3 training std')
    assert test_caveats(runner) == {
        'changed_from_training': ["model.decode: 'viterbi' in training", 'seed: 0'],
        'not_compared': ['feature scale (no training feature statistics)'],
        'feature_scale': 'test features: mean moved by 3 training std',
        'task_source': 'ground_truth'}
    plain = types.SimpleNamespace(model=torch.nn.Linear(1, 1), changed_from_training='')
    assert test_caveats(plain) == {}
    listed = types.SimpleNamespace(model=torch.nn.Linear(1, 1), not_compared=(),
                                   changed_from_training=["model.decode: 'viterbi'; 'argmax'"])
    assert test_caveats(listed) == {'changed_from_training': ["model.decode: 'viterbi'; 'argmax'"]}
    # the ablation's own test option (in the row's settings and name) is no caveat
    assert test_caveats(listed, declared={'model.decode': 'argmax'}) == {}
    assert test_caveats(runner, declared={'model.decode': 'argmax'})['changed_from_training'] \
        == ['seed: 0']


def caveat_rows(caveats: dict):
    from dataclasses import replace
    from vpn_plugin.protocol.results import read_results
    return [replace(r, caveats=caveats) if r.method == 'ViterbiPlanNet' else r
            for r in read_results(KEPT)]


def test_rows_read_caveats_in_both_shapes_and_refuse_others(tmp_path):
    from vpn_plugin.protocol.results import (caveat_lines, read_results, row_from_dict,
                                             write_results_csv)
    old = row_from_dict(row_record(caveats={'changed_from_training': 'a: 1; b: 2'}))
    new = row_from_dict(row_record(caveats={'changed_from_training': ['a: 1', 'b: 2']}))
    assert caveat_lines(old) == caveat_lines(new) == {'changed_from_training': ['a: 1', 'b: 2']}
    with pytest.raises(ValueError, match="r.jsonl:1: field caveats.task_source='classifier'"):
        row_from_dict(row_record(caveats={'task_source': 'classifier'}), 'r.jsonl:1')
    with pytest.raises(ValueError, match='caveats'):
        row_from_dict(row_record(caveats={'changed_from_trainnig': ['a']}), 'r.jsonl:1')
    rows = caveat_rows({'not_compared': ['training options']})
    write_results_csv(tmp_path / 'r.csv', rows)
    assert [r.caveats for r in read_results(tmp_path / 'r.csv')] == [r.caveats for r in rows]


def test_report_marks_each_kind_of_caveat():
    """One mark per kind beside the method, explained under the table (Markdown and LaTeX);
    a table without caveats is unchanged (the kept docs table)."""
    from vpn_plugin.protocol.report import build_table, to_latex, to_markdown
    caveats = {'changed_from_training': ["model.decode: 'viterbi' in training"],
               'not_compared': ['feature scale'], 'feature_scale': 'mean moved',
               'task_source': 'ground_truth'}
    table = build_table(caveat_rows(caveats), ['success_rate'], num_resamples=20,
                        num_diff_resamples=20)
    markdown = to_markdown(table)
    assert '| ViterbiPlanNet†‖♯♭≈⋆ |' in markdown
    assert ("♯ tested with options that differ from the checkpoint's training (ViterbiPlanNet: "
            "model.decode: 'viterbi' in training).") in markdown
    assert '♭ the checkpoint did not record what the test compares' in markdown
    assert '≈ test features of another scale' in markdown
    assert '⋆ given the true task of each window' in markdown
    latex = to_latex(table)
    assert (r'ViterbiPlanNet\textsuperscript{\dag}\textsuperscript{\textbardbl}'
            r'\textsuperscript{$\sharp$}') in latex
    assert '♯' not in latex and r'\textsuperscript{$\star$} given the true task' in latex
    plain = to_markdown(build_table(caveat_rows({}), ['success_rate'], num_resamples=20,
                                    num_diff_resamples=20))
    assert not any(mark in plain for mark in '♯♭≈⋆')
