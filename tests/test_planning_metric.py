"""PlanningMetric: registry, values, independence of batching/order/processes, JSON dump."""
import json

import numpy as np
import pytest
import torch
from mmaction.registry import METRICS

from vpn_plugin import evaluation  # noqa: F401  (registers PlanningMetric)
from vpn_plugin.evaluation.planning_metric import PlanningMetric
from vpn_plugin.core import planning_metrics


def make_samples(count=20, horizon=3, seed=0):
    rng = np.random.default_rng(seed)
    gt = rng.integers(0, 6, size=(count, horizon))
    pred = np.where(rng.random((count, horizon)) < 0.5, gt, rng.integers(0, 6, (count, horizon)))
    samples = [dict(pred_plan=torch.from_numpy(p), gt_plan=torch.from_numpy(g),
                    sample_idx=i, soft_plan=torch.rand(horizon, 6))
               for i, (p, g) in enumerate(zip(pred, gt))]
    return samples, pred, gt


def evaluate(metric, samples, batch_size):
    for start in range(0, len(samples), batch_size):
        metric.process({}, samples[start:start + batch_size])
    return metric.compute_metrics(metric.results)


def test_registered_and_matches_core_metrics():
    samples, pred, gt = make_samples()
    metric = METRICS.build(dict(type='PlanningMetric'))
    assert evaluate(metric, samples, 4) == pytest.approx(planning_metrics(pred, gt))


def test_independent_of_batch_size_order_and_process_split():
    samples, _, _ = make_samples(count=23)
    reference = evaluate(METRICS.build(dict(type='PlanningMetric')), samples, 23)
    for batch_size in (1, 5):
        assert evaluate(METRICS.build(dict(type='PlanningMetric')), samples, batch_size) \
            == pytest.approx(reference, abs=0)
    shuffled = [samples[i] for i in np.random.default_rng(1).permutation(23)]
    assert evaluate(METRICS.build(dict(type='PlanningMetric')), shuffled, 7) == reference
    # two "processes" each see half; mmengine concatenates their results before computing
    ranks = [METRICS.build(dict(type='PlanningMetric')) for _ in range(2)]
    for rank, metric in enumerate(ranks):
        for sample in samples[rank::2]:
            metric.process({}, [sample])
    merged = ranks[0].results + ranks[1].results
    assert ranks[0].compute_metrics(merged) == reference


def test_out_file_holds_per_sample_scores(tmp_path):
    samples, pred, gt = make_samples(count=6)
    out = tmp_path / 'sub' / 'scores.json'
    metric = METRICS.build(dict(type='PlanningMetric', out_file=str(out)))
    metrics = evaluate(metric, samples[::-1], 2)
    dump = json.loads(out.read_text())
    assert dump['sample_idx'] == list(range(6))
    assert dump['gt_plan'] == gt.tolist() and dump['pred_plan'] == pred.tolist()
    assert dump['metrics'] == pytest.approx(metrics)
    for name, values in dump['scores'].items():
        assert np.mean(values) == pytest.approx(metrics[name])


def test_missing_field_gets_clear_error():
    metric = METRICS.build(dict(type='PlanningMetric'))
    with pytest.raises(KeyError, match="lacks \\['gt_plan'\\]"):
        metric.process({}, [dict(pred_plan=torch.zeros(3, dtype=torch.long))])


def test_authors_selection_orders_by_sr_then_mean_of_macc_and_legacy_miou():
    from vpn_plugin.evaluation.planning_metric import authors_selection_score
    one_window = dict(success_rate=100 / 99_999, mean_accuracy=0.0, miou_legacy=0.0)
    best_ties = dict(success_rate=0.0, mean_accuracy=100.0, miou_legacy=100.0)
    assert authors_selection_score(one_window) > authors_selection_score(best_ties)
    tie_a = dict(success_rate=30.0, mean_accuracy=60.0, miou_legacy=80.0)
    tie_b = dict(success_rate=30.0, mean_accuracy=61.0, miou_legacy=78.0)
    assert authors_selection_score(tie_a) > authors_selection_score(tie_b)  # 70 > 69.5
    metric = PlanningMetric(authors_selection=True)
    samples = [dict(pred_plan=[1, 2, 3], gt_plan=[1, 2, 3], sample_idx=0),
               dict(pred_plan=[1, 2, 0], gt_plan=[1, 2, 3], sample_idx=1)]
    metric.process({}, samples)
    metrics = metric.compute_metrics(metric.results)
    assert metrics['authors_selection'] == pytest.approx(
        50.0 + 1e-5 * (metrics['mean_accuracy'] + metrics['miou_legacy']) / 2)
    assert 'authors_selection' not in PlanningMetric().compute_metrics(metric.results)


def test_miou_batch_extra_is_reported_with_its_batch_size():
    from vpn_plugin.core import miou_batch
    samples, pred, gt = make_samples(count=23)
    metric = PlanningMetric(extra_metrics=['miou_batch'], miou_batch_size=8)
    metrics = evaluate(metric, samples[::-1], batch_size=5)  # any order, any batches
    assert metrics['miou_batch'] == pytest.approx(miou_batch(pred, gt, 8))
    assert metrics['miou_batch_size'] == 8
    assert 'miou_batch' not in evaluate(PlanningMetric(), samples, batch_size=5)
    with pytest.raises(ValueError, match='needs miou_batch_size'):
        PlanningMetric(extra_metrics=['miou_batch'])
    with pytest.raises(ValueError, match=r"extra_metrics\[0\]='miou'; expected one of 'miou_batch'"):
        PlanningMetric(extra_metrics=['miou'], miou_batch_size=8)


def test_dumped_predictions_are_written_atomically(tmp_path):
    """``tools/test.py --out``: the pickle holds every prediction, and a failed write (here a
    folder that is a file) names the file and leaves nothing, not a truncated pickle."""
    import pickle
    from vpn_plugin.errors import OutputWriteError
    from vpn_plugin.evaluation import AtomicDumpResults
    results = [dict(pred_plan=[1, 2, 3]), dict(pred_plan=[4, 5, 6])]
    good = tmp_path / 'predictions.pkl'
    AtomicDumpResults(out_file_path=str(good)).compute_metrics(results)
    assert pickle.loads(good.read_bytes()) == results
    (tmp_path / 'file').write_text('')
    bad = tmp_path / 'file' / 'predictions.pkl'
    with pytest.raises(OutputWriteError, match=f'cannot write the predictions {bad} \\(--out\\)'):
        AtomicDumpResults(out_file_path=str(bad)).compute_metrics(results)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['file', 'predictions.pkl']
