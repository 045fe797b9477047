"""Tiny end-to-end protocol: 2 seeds x 3 methods (2 trained for 1 epoch) on tiny_crosstask."""
import json
from pathlib import Path

import pytest
from mmengine.config import Config

from vpn_plugin.protocol.plots import plot_qualitative, qualitative_from_checkpoint
from vpn_plugin.protocol.report import build_table, to_markdown
from vpn_plugin.protocol.results import read_results
from vpn_plugin.protocol.runner import ProtocolRunner, clean_metrics, expand_units

REPO = Path(__file__).resolve().parents[1]


def tiny_options(tiny, model_extra=None):
    options = {f'{split}_dataloader.dataset': dict(tiny[f'{split}_dataset'], _delete_=True)
               for split in ('train', 'val', 'test')}
    options.update({
               'model.num_actions': tiny['num_actions']})
    options.update(model_extra or {})
    return options


def tiny_protocol(tiny):
    vpn = dict(tiny_options(tiny), **{'model.num_tasks': tiny['num_tasks'],
                                      'model.loss_weights.align': 0.0,
                                      'model.embed_dim': 32})
    return Config(dict(protocol='tiny', dataset='crosstask', seeds=[0, 1], runs=[
        dict(method='ViterbiPlanNet', config=str(REPO / 'configs/vpn_crosstask_t3.py'),
             cfg_options=vpn,
             tests=[dict(), dict(method='ViterbiPlanNet (argmax)',
                                 cfg_options={'model.decode': 'emission_argmax'})]),
        dict(method='PKG beam search', cfg_options=tiny_options(tiny),
             config=str(REPO / 'configs/baselines/pkg_beam_search_crosstask_t3.py')),
        dict(method='PKG + uniform emissions', train=False, cfg_options=tiny_options(tiny),
             config=str(REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py')),
    ]))


def test_expand_units_fills_horizons_and_filters_methods():
    cfg = Config(dict(protocol='p', runs=[dict(method='A', config='c_t{T}.py', horizons=[3, 4],
                                               tests=[dict(), dict(method='B')])]))
    units = expand_units(cfg, seeds=[0, 1, 2])
    assert [(u.config, u.horizon, u.seed) for u in units][:4] == [
        ('c_t3.py', 3, 0), ('c_t4.py', 4, 0), ('c_t3.py', 3, 1), ('c_t4.py', 4, 1)]
    assert len(units) == 6 and [t.method for t in units[0].tests] == ['A', 'B']
    assert [u.horizon for u in expand_units(cfg, seeds=[0], horizons=[4])] == [4]
    only_b = expand_units(cfg, seeds=[0], methods=['B'])
    assert [[t.method for t in u.tests] for u in only_b] == [['B'], ['B']]
    with pytest.raises(ValueError, match=r'runs\[0\] has no "config"'):
        expand_units(Config(dict(protocol='p', runs=[dict(method='A')])))
    assert clean_metrics({'planning/success_rate': 1}) == {'success_rate': 1.0}


def test_tiny_protocol_end_to_end_and_resume(tiny_crosstask, tmp_path):
    protocol = tiny_protocol(tiny_crosstask)
    units = expand_units(protocol)
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=1, batch_size=64)
    results = runner.run(units)
    rows = read_results(results)
    assert sorted((r.method, r.seed) for r in rows) == sorted(
        (m, s) for m in ('ViterbiPlanNet', 'ViterbiPlanNet (argmax)', 'PKG beam search',
                         'PKG + uniform emissions') for s in (0, 1))
    for row in rows:
        assert row.horizon == 3 and 0 <= row.metrics['success_rate'] <= 100
        assert Path(row.per_sample_file).is_file()
        dump = json.loads(Path(row.per_sample_file).read_text())
        assert dump['metrics']['success_rate'] == pytest.approx(row.metrics['success_rate'])
    by_method = {r.method: r for r in rows}
    assert by_method['PKG + uniform emissions'].params == 0
    assert by_method['ViterbiPlanNet'].params == by_method['ViterbiPlanNet (argmax)'].params > 0
    # the two decodings of one training share its checkpoint: one training per seed
    trainings = Path(tmp_path, 'tiny', 'ViterbiPlanNet', 'T3').glob('seed*/train_done.json')
    assert len(list(trainings)) == 2
    # resuming runs nothing new
    runner.run(expand_units(protocol))
    assert len(read_results(results)) == len(rows)
    table = build_table(rows, ['success_rate', 'mean_accuracy'])
    assert 'PKG beam search' in to_markdown(table)

    # qualitative figure from a trained checkpoint of the protocol
    marker = Path(tmp_path, 'tiny', 'ViterbiPlanNet', 'T3', 'seed0', 'train_done.json')
    data = qualitative_from_checkpoint(protocol.runs[0]['config'],
                                       json.loads(marker.read_text())['checkpoint'], 0,
                                       protocol.runs[0]['cfg_options'])
    num_columns = len(data['action_names'])
    assert data['emissions'].shape == data['soft_plan'].shape == (3, num_columns)
    assert data['transitions'].shape == (num_columns, num_columns)
    assert all(p.is_file() for p in plot_qualitative(**data, out_stem=tmp_path / 'quali'))
