"""The paper's studies beside SCHEMA (issue 20, item 4): the pre-trained frozen encoder of the
sample-efficiency study, intermediate observations, the union dataset of the
dataset-independent PKG, a graph recounted at test time, the mean over datasets, the figures'
data (sample efficiency styles, PKG quality with a reference, the three-set Venn) and a tiny
end-to-end run of each new protocol mechanism (pre-training stage, union model)."""
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import DATASETS, MODELS
from vpn_plugin import core
from vpn_plugin.models import load_state_features
from vpn_plugin.protocol.plots import (efficiency_styles, error_overlap3, pkg_quality_panels,
                                       plot_error_overlap3, plot_pkg_quality,
                                       plot_sample_efficiency)
from vpn_plugin.protocol.results import ResultRow, mean_over_datasets, read_results
from vpn_plugin.protocol.runner import ProtocolRunner, UnitsFailedError, expand_units

from test_model_vpn import D, K, N, T, build  # the tiny ViterbiPlanNet

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures('single_thread')


def save_checkpoint(model, path) -> str:
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return str(path)


# ------------------------------------------------------------ sample efficiency: the encoder
def test_frozen_encoder_is_the_pretrained_one(tmp_path):
    with pytest.raises(ValueError, match='freeze_visual=True needs model.init_visual_from'):
        build(freeze_visual=True)
    trained = build()
    checkpoint = save_checkpoint(trained, tmp_path / 'pre.pth')
    model = build(freeze_visual=True, init_visual_from=checkpoint)
    encoder = model.state_encoder.visual_encoder
    for name, value in trained.state_encoder.visual_encoder.state_dict().items():
        assert torch.equal(encoder.state_dict()[name], value)
    assert not torch.equal(model.emission_head[0].weight, trained.emission_head[0].weight)
    inputs = {'start': torch.randn(3, D), 'goal': torch.randn(3, D)}
    samples = {'plan': torch.randint(0, N, (3, T)), 'task': torch.randint(0, K, (3,))}
    sum(model(inputs, samples, mode='loss').values()).backward()
    assert all(p.grad is None and not p.requires_grad for p in encoder.parameters())
    assert model.emission_head[0].weight.grad is not None
    # fine-tuning from the pre-trained weights: loaded, trainable
    assert all(p.requires_grad for p in build(init_visual_from=checkpoint)
               .state_encoder.visual_encoder.parameters())
    with pytest.raises(ValueError, match=r"state_encoder.visual_encoder.0.weight: "
                                         r"\(24, 12\) there, "
                                         r"\(26, 13\) here"):
        build(feature_dim=13, init_visual_from=checkpoint)
    torch.save({'state_dict': {'other.weight': torch.zeros(1)}}, tmp_path / 'bad.pth')
    with pytest.raises(ValueError, match='bad.pth holds no visual encoder'):
        build(init_visual_from=str(tmp_path / 'bad.pth'))


# ------------------------------------------------------------- intermediate observations
def test_observed_end_states_are_after_description_evidence():
    model = build().eval()
    model.state_encoder.set_state_features(torch.randn(N, 6, 6))
    encoder = model.state_encoder
    inputs = {'start': torch.randn(2, D), 'goal': torch.randn(2, D),
              'observed': torch.randn(2, 3, D)}
    evidence = encoder.observed_evidence(inputs['observed'], T)
    assert evidence.shape == (2, T, N) and torch.all(evidence[:, 3:] == 0)
    # oracle by hand: exp(logit_scale) x mean cosine with the 3 "after" sentences (slots 3-5)
    text = encoder.text_encoder(encoder.state_features)
    for b, step in itertools.product(range(2), range(3)):
        state = encoder.visual_encoder(inputs['observed'][b, step])
        logits = torch.stack([encoder.logit_scale.exp() * torch.stack([
            torch.dot(state, s) / state.norm() / s.norm() for s in text[a, 3:]]).mean()
            for a in range(N)])
        torch.testing.assert_close(evidence[b, step], logits.log_softmax(-1))
    plain = model.log_emissions(model.encode(inputs))
    torch.testing.assert_close(model.log_emissions(model.encode(inputs), None,
                                                   inputs['observed']), plain + evidence)
    with pytest.raises(ValueError, match='4 observed steps of a T=4 plan'):
        encoder.observed_evidence(torch.randn(2, 4, D), T)
    with pytest.raises(ValueError, match='built without state-description features'):
        build().state_encoder.observed_evidence(inputs['observed'], T)


def build_schema(**overrides):
    cfg = dict(type='SCHEMA', num_actions=N, num_tasks=K, horizon=T, feature_dim=D,
               text_dim=6, embed_dim=8, num_heads=2, num_layers=1)
    model = MODELS.build(dict(cfg, **overrides))
    model.state_encoder.set_state_features(torch.randn(N, 6, 6))
    return model


def test_schema_shares_the_pretrained_encoder_and_the_observed_evidence(tmp_path):
    vpn = build()
    schema = build_schema(freeze_visual=True,
                          init_visual_from=save_checkpoint(vpn, tmp_path / 'vpn.pth')).eval()
    for name, value in vpn.state_encoder.visual_encoder.state_dict().items():
        assert torch.equal(schema.state_encoder.visual_encoder.state_dict()[name], value)
    assert not any(p.requires_grad for p in schema.state_encoder.visual_encoder.parameters())
    schema.set_pkg(np.full((N, N), 1.0 / N))
    inputs = {'start': torch.randn(2, D), 'goal': torch.randn(2, D),
              'observed': torch.randn(2, 2, D)}
    samples = {'plan': torch.randint(0, N, (2, T)), 'task': torch.randint(0, K, (2,))}
    logits = schema.network(inputs)['action_logits']
    evidence = schema.state_encoder.observed_evidence(inputs['observed'], T)
    expected = (logits.log_softmax(-1) + evidence).softmax(-1)
    predicted = schema(inputs, samples, mode='predict')
    torch.testing.assert_close(torch.stack([p.emissions for p in predicted]), expected)
    assert not torch.allclose(expected[:, :2], logits.softmax(-1)[:, :2])
    torch.testing.assert_close(expected[:, 2:], logits.softmax(-1)[:, 2:])  # unobserved steps


# ------------------------------------------------------------------ the graph, recounted
def test_recount_replaces_the_checkpoint_graph():
    trained = build()
    trained.set_pkg(np.eye(N)[::-1].copy())
    kept, recounted = build(), build(pkg=dict(recount=True))
    kept.load_state_dict(trained.state_dict())
    recounted.load_state_dict(trained.state_dict())
    assert bool(kept.pkg_ready) and torch.equal(kept.log_transitions, trained.log_transitions)
    assert not bool(recounted.pkg_ready)  # PKGHook counts the config's (perturbed) graph
    assert torch.equal(recounted.emission_head[0].weight, trained.emission_head[0].weight)


# ------------------------------------------------------------------- the union dataset
def source_config(tmp_path, tiny, name) -> str:
    """A dataset config file of the tiny CrossTask subset (one source of a union)."""
    path = tmp_path / f'{name}.py'
    loaders = {f'{split}_dataloader': dict(dataset=tiny[f'{split}_dataset'])
               for split in ('train', 'val', 'test')}
    path.write_text('\n'.join(f'{k} = {v!r}' for k, v in loaders.items()))
    return str(path)


def union_dataset(tmp_path, tiny, split='train', select=None):
    sources = [dict(name=n, config=source_config(tmp_path, tiny, n)) for n in ('a', 'b')]
    return dict(type='ConcatPlanningDataset', sources=sources, horizon=3, split=split,
                select=select)


def test_union_offsets_ids_and_counts_a_block_diagonal_pkg(tiny_crosstask, tmp_path):
    single = DATASETS.build(dict(tiny_crosstask['train_dataset']))
    union = DATASETS.build(union_dataset(tmp_path, tiny_crosstask))
    n, k = single.taxonomy.num_actions, single.taxonomy.num_tasks
    assert union.taxonomy.num_actions == 2 * n and union.taxonomy.num_tasks == 2 * k
    assert union.taxonomy.task_actions[k] == [a + n for a in single.taxonomy.task_actions[0]]
    assert union.taxonomy.task_names[k] == f'b: {single.taxonomy.task_names[0]}'
    assert len(union) == 2 * len(single)
    np.testing.assert_array_equal(union.plans, np.concatenate([single.plans, single.plans + n]))
    np.testing.assert_array_equal(union.tasks, np.concatenate([single.tasks, single.tasks + k]))
    item, twin = union[len(single) + 5], single[5]
    assert torch.equal(item['inputs']['start'], twin['inputs']['start'])
    assert torch.equal(item['data_samples']['plan'], twin['data_samples']['plan'] + n)
    pkg = core.build_pkg(union.pkg_sequences('window'), 2 * n, horizon=3)
    alone = core.build_pkg(single.pkg_sequences('window'), n, horizon=3)
    np.testing.assert_allclose(pkg, np.block([[alone, np.zeros((n, n))],
                                              [np.zeros((n, n)), alone]]))
    test_b = DATASETS.build(union_dataset(tmp_path, tiny_crosstask, 'test', select=['b']))
    single_test = DATASETS.build(dict(tiny_crosstask['test_dataset']))
    np.testing.assert_array_equal(test_b.plans, single_test.plans + n)
    assert test_b.taxonomy.num_actions == 2 * n
    with pytest.raises(ValueError, match=r"select=\['c'\] must name some of the sources"):
        DATASETS.build(union_dataset(tmp_path, tiny_crosstask, 'test', select=['c']))


def test_union_batches_are_gathered_on_the_device_as_the_items_stack(tiny_crosstask, tmp_path):
    from mmengine.dataset import default_collate

    from vpn_plugin.datasets.planning_dataset import planning_collate
    tiny = {f'{split}_dataset': dict(tiny_crosstask[f'{split}_dataset'], device_resident=True)
            for split in ('train', 'val', 'test')}
    union = DATASETS.build(union_dataset(tmp_path, tiny))
    assert union.device_resident
    indices = [len(union) - 1, 0, len(union) // 2 + 1, 0]
    gathered = planning_collate(union.__getitems__(indices))
    stacked = default_collate([union[i] for i in indices])
    for part in ('inputs', 'data_samples'):
        assert gathered[part].keys() == stacked[part].keys()
        for name, values in stacked[part].items():
            assert torch.equal(gathered[part][name], values), name
    items = DATASETS.build(union_dataset(tmp_path, tiny_crosstask))  # the sources' own flag
    assert not items.device_resident and isinstance(items.__getitems__(indices), list)


def test_union_text_features_are_the_sources_in_order(tmp_path):
    parts = [np.random.default_rng(i).random((n, 6, 4)).astype(np.float32)
             for i, n in enumerate((3, 2))]
    for i, part in enumerate(parts):
        np.save(tmp_path / f'{i}.npy', part)
    joined = load_state_features(sources=[dict(file=str(tmp_path / f'{i}.npy'))
                                          for i in range(2)])
    np.testing.assert_array_equal(joined.numpy(), np.concatenate(parts))
    with pytest.raises(ValueError, match='give sources=.* alone'):
        load_state_features(file=str(tmp_path / '0.npy'), sources=[dict(file='x')])


def test_union_config_mirrors_the_dataset_configs():
    from vpn_plugin.data_paths import load_config
    union = load_config(str(REPO / 'configs/union/vpn_union_t3.py'))
    singles = [load_config(str(REPO / f'configs/vpn_{name}_t3.py')).model
               for name in ('crosstask', 'niv', 'coin')]
    assert [s['name'] for s in union.train_dataloader.dataset.sources] == [
        'crosstask', 'niv', 'coin']
    assert union.model.num_actions == sum(m.num_actions for m in singles)
    assert union.model.num_tasks == sum(m.num_tasks for m in singles)
    def content(text):  # where a computed feature is cached is not what it is
        return {k: v for k, v in text.items() if k != 'cache_dir'}
    assert [content(t) for t in union.model.text_embeddings.sources] == [
        content(m.text_embeddings) for m in singles]
    schema = load_config(str(REPO / 'configs/union/schema_union_t3.py'))
    assert schema.model.text_embeddings == union.model.text_embeddings
    assert (schema.model.num_actions, schema.model.num_tasks) == (
        union.model.num_actions, union.model.num_tasks)
    assert schema.train_dataloader == union.train_dataloader


def test_mean_over_datasets():
    rows = [ResultRow('A', seed, 3, {'success_rate': sr, 'miou_set': 1.0}, dataset=d,
                      params=p, variant=v) for seed in (0, 1) for d, sr, p, v in (
                          ('x', 10.0 + seed, 5, {}), ('y', 30.0, 7, {'text_features': 'MiniLM'}))]
    rows.append(ResultRow('A', 0, 4, {'success_rate': 1.0}, dataset='x'))
    with pytest.raises(ValueError, match=r"seed 0 T=4 has datasets \['x'\], other rows of "
                                         r"it \['x', 'y'\]"):
        mean_over_datasets(rows)
    averaged = mean_over_datasets(rows[:-1])
    assert [(r.seed, r.dataset, r.metrics['success_rate'], r.params) for r in averaged] == [
        (0, 'mean(x,y)', 20.0, 7), (1, 'mean(x,y)', 20.5, 7)]
    assert averaged[0].variant == {'text_features': 'y: MiniLM'}


# --------------------------------------------------------------------------- the figures
def test_sample_efficiency_pairs_each_network_with_its_dashed_twin(tmp_path):
    order = ('ViterbiPlanNet', 'Base Model', 'SCHEMA', 'SCHEMA w/o Viterbi')
    lines = {(m, 3): [] for m in sorted(order)}  # efficiency_points sorts them by name
    styles = efficiency_styles(lines, dashed=['Base Model', 'SCHEMA w/o Viterbi'], order=order)
    assert styles[('ViterbiPlanNet', 3)]['color'] == styles[('Base Model', 3)]['color']
    assert styles[('SCHEMA', 3)]['color'] == styles[('SCHEMA w/o Viterbi', 3)]['color']
    assert styles[('SCHEMA', 3)]['color'] != styles[('ViterbiPlanNet', 3)]['color']
    assert {s['linestyle'] for k, s in styles.items() if k[0].startswith(('Base', 'SCHEMA w'))
            } == {'--'}
    named = efficiency_styles({(m, 3): [] for m in ('A', 'B', 'B w/o PKG', 'Base')},
                              dashed=['Base', 'B w/o PKG'], order=('B', 'A'))
    assert named[('B w/o PKG', 3)]['color'] == named[('B', 3)]['color']  # by name first
    assert named[('Base', 3)]['color'] == named[('A', 3)]['color']  # then the free one
    one = efficiency_styles({('VPN', 3): [], ('VPN', 6): [], ('no PKG', 3): []}, ['no PKG'])
    # colour = the method in every figure (one network too); the horizon is the marker
    assert one[('VPN', 3)]['color'] == one[('VPN', 6)]['color'] == one[('no PKG', 3)]['color']
    assert one[('VPN', 3)]['marker'] != one[('VPN', 6)]['marker']
    rows = [ResultRow(m, seed, 3, {'success_rate': 10.0 * i + seed + f},
                      variant=dict(train_fraction=f))
            for i, m in enumerate(order) for seed in range(3) for f in (0.1, 1.0)]
    assert plot_sample_efficiency(rows, tmp_path / 'eff', dashed=[
        'Base Model', 'SCHEMA w/o Viterbi'])[0].is_file()


def test_pkg_quality_reference_is_a_method_without_the_graph(tmp_path):
    rows = [ResultRow('w/o PKG', s, 3, {'success_rate': 20.0 + s},
                      variant=dict(perturbation='none', level=0.0)) for s in range(3)]
    for method, base in (('VPN', 40.0), ('w/ PKG', 30.0)):
        rows += [ResultRow(method, s, 3, {'success_rate': base + s},
                           variant=dict(perturbation='none', level=0.0)) for s in range(3)]
        rows += [ResultRow(method, s, 3, {'success_rate': base - 10 * level},
                           variant=dict(perturbation='edge_dropout', level=level))
                 for s in range(3) for level in (0.1, 0.5)]
    (dropout, noise, data), references = pkg_quality_panels(rows)
    assert list(dropout) == [('VPN', 'edge dropout'), ('w/ PKG', 'edge dropout')]
    assert not noise and not data
    assert [c for x, m, *_ in dropout[('w/ PKG', 'edge dropout')] for c in (x, m)] == \
        pytest.approx([0.0, 31.0, 10.0, 29.0, 50.0, 25.0])
    assert list(references) == ['w/o PKG'] and references['w/o PKG'][0] == pytest.approx(21.0)
    assert plot_pkg_quality(rows, tmp_path / 'pkg')[0].is_file()


def test_three_set_overlap_counts_by_brute_force(tmp_path):
    rng = np.random.default_rng(1)
    gt = rng.integers(0, 9, size=(30, 3))
    rows, solved = [], {}
    for seed, method in itertools.product((0, 1, 2), ('A', 'B', 'C')):
        solved[method, seed] = rng.random(30) < 0.5
        path = tmp_path / f'{method}{seed}.json'
        path.write_text(json.dumps(dict(sample_idx=list(range(30)), gt_plan=gt.tolist(),
                                        pred_plan=gt.tolist(), scores=dict(success_rate=[
                                            100.0 * s for s in solved[method, seed]]))))
        rows.append(ResultRow(method, seed, 6, {'success_rate': 0.0},
                              per_sample_file=str(path)))
    overlap = error_overlap3(rows, ('A', 'B', 'C'), horizon=6)
    for pattern, count in overlap.counts.items():
        assert count == sum(all((not solved[m, s][i]) == f for m, f in zip('ABC', pattern))
                            for s in range(3) for i in range(30))
    assert overlap.total == 90 and overlap.seeds == [0, 1, 2]
    assert [(p.method, p.reference) for p in overlap.pairs] == [('B', 'A'), ('C', 'A'),
                                                                ('C', 'B')]
    paths = plot_error_overlap3(overlap, tmp_path / 'venn3')
    assert paths[0].is_file() and '| yes | yes | yes |' in paths[2].read_text()
    with pytest.raises(ValueError, match='three different methods'):
        error_overlap3(rows, ('A', 'A', 'B'))


# --------------------------------------------------- tiny end-to-end runs of the mechanisms
def tiny_vpn_options(tiny, **extra):
    options = {f'{split}_dataloader.dataset': dict(tiny[f'{split}_dataset'], _delete_=True)
               for split in ('train', 'val', 'test')}
    options.update({'model.num_actions': tiny['num_actions'], 'model.num_tasks':
                    tiny['num_tasks'], 'model.loss_weights.state': 0.0, 'model.embed_dim': 16})
    options.update(extra)
    return options


def test_pretraining_stage_is_trained_once_loaded_frozen_and_never_retrained(
        tiny_crosstask, tmp_path, capsys):
    config = str(REPO / 'configs/vpn_crosstask_t3.py')

    def protocol(fractions):
        return Config(dict(protocol='eff', dataset='crosstask', seeds=[0], stages=dict(
            encoder=dict(config=config, cfg_options=tiny_vpn_options(tiny_crosstask))),
            runs=[dict(method='ViterbiPlanNet', config=config, variant=dict(train_fraction=f),
                       pretrained=dict(stage='encoder', option='model.init_visual_from'),
                       cfg_options=tiny_vpn_options(
                           tiny_crosstask, **{'model.freeze_visual': True,
                                              'train_dataloader.dataset.subset_fraction': f}))
                  for f in fractions]))
    first = protocol([0.25, 0.5])
    runner = ProtocolRunner(first, tmp_path, max_epochs=1, batch_size=64)
    rows = read_results(runner.run(expand_units(first)))
    assert capsys.readouterr().err.count('pre-training stage pretrain_encoder T=3 seed=0') == 1
    stage = tmp_path / 'eff' / 'pretrain_encoder' / 'T3' / 'seed0_batch_size-64_max_epochs-1'
    encoder = json.loads((stage / 'train_done.json').read_text())['checkpoint']
    pre = torch.load(encoder, weights_only=False)['state_dict']
    for done in tmp_path.glob('eff/ViterbiPlanNet*/T3/*/train_done.json'):  # both fractions
        post = torch.load(json.loads(done.read_text())['checkpoint'],
                          weights_only=False)['state_dict']
        encoder_keys = [k for k in pre if k.startswith('state_encoder.visual_encoder.')]
        assert len(encoder_keys) == 4 and all(torch.equal(pre[k], post[k]) for k in encoder_keys)
        assert not torch.equal(pre['emission_head.0.weight'], post['emission_head.0.weight'])
    assert len(rows) == 2 and all(r.settings['pretrained']['stage'] == 'pretrain_encoder'
                                  and r.settings['pretrained']['option'] ==
                                  'model.init_visual_from' for r in rows)
    Path(encoder).unlink()  # a lost stage checkpoint is an error, never a silent retraining
    third = protocol([1.0])
    with pytest.raises(UnitsFailedError, match='records a finished training whose tested '
                       'checkpoint epoch_1.pth is not in its work dir .*never trains a '
                       'finished unit again'):
        ProtocolRunner(third, tmp_path, max_epochs=1, batch_size=64).run(expand_units(third))


def test_union_model_trains_on_both_and_is_tested_on_one(tiny_crosstask, tmp_path):
    n, k = tiny_crosstask['num_actions'], 18  # the taxonomy's tasks, 3 of them used
    options = {f'{split}_dataloader.dataset': dict(union_dataset(tmp_path, tiny_crosstask,
                                                                 split), _delete_=True)
               for split in ('train', 'val', 'test')}
    options.update({'model.num_actions': 2 * n, 'model.num_tasks': 2 * k,
                    'model.loss_weights.state': 0.0, 'model.embed_dim': 16,
                    'model.text_embeddings': None})
    protocol = Config(dict(protocol='union', dataset='b', seeds=[0], runs=[dict(
        method='ViterbiPlanNet (union)', slug='union', config=str(
            REPO / 'configs/vpn_crosstask_t3.py'), cfg_options=options,
        tests=[dict(cfg_options={'test_dataloader.dataset.select': ['{dataset}']})])]))
    units = expand_units(protocol)
    assert units[0].tests[0].cfg_options == {'test_dataloader.dataset.select': ['b']}
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=1, batch_size=64)
    (row,) = read_results(runner.run(units))
    assert row.dataset == 'b' and 0 <= row.metrics['success_rate'] <= 100
    dump = json.loads(Path(row.per_sample_file).read_text())
    single_test = DATASETS.build(dict(tiny_crosstask['test_dataset']))
    assert len(dump['gt_plan']) == len(single_test)
    assert min(min(plan) for plan in dump['gt_plan']) >= n  # source b's ids, offset
