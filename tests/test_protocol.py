"""Protocol expansion of every configs/protocol/*.py, config checks, and a tiny end-to-end
protocol: 2 seeds x 3 methods (2 trained for 1 epoch) on tiny_crosstask, resumed."""
import json
import re
from pathlib import Path

import pytest
from mmengine.config import Config

from vpn_plugin.protocol.plots import plot_qualitative, qualitative_from_checkpoint
from vpn_plugin.protocol.report import build_table, to_markdown
from vpn_plugin.protocol.results import read_results
from vpn_plugin.protocol.runner import (ProtocolRunner, UnitsFailedError, check_config,
                                        clean_metrics, expand_units, load_protocol)
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
SMOKE_DIR = 'seed{seed}_batch_size-64_max_epochs-1'  # work dir of max_epochs=1, batch_size=64


def tiny_options(tiny, model_extra=None):
    options = {f'{split}_dataloader.dataset': dict(tiny[f'{split}_dataset'], _delete_=True)
               for split in ('train', 'val', 'test')}
    options.update({
               'model.num_actions': tiny['num_actions']})
    options.update(model_extra or {})
    return options


def tiny_protocol(tiny):
    vpn = dict(tiny_options(tiny), **{'model.num_tasks': tiny['num_tasks'],
                                      'model.loss_weights.state': 0.0,
                                      'model.embed_dim': 32})
    return Config(dict(protocol='tiny', dataset='crosstask', seeds=[0, 1], runs=[
        dict(method='ViterbiPlanNet', config=str(REPO / 'configs/vpn_crosstask_t3.py'),
             cfg_options=vpn,
             tests=[dict(), dict(method='ViterbiPlanNet (argmax)',
                                 cfg_options={'model.decode': 'emission_argmax'})]),
        dict(method='PKG beam search', cfg_options=tiny_options(tiny),
             config=str(REPO / 'configs/baselines/pkg_beam_search_mlp_crosstask_t3.py')),
        dict(method='PKG + uniform emissions', train=False, cfg_options=tiny_options(tiny),
             config=str(REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py')),
    ]))


def test_expand_units_fills_horizons_and_filters_methods():
    config = str(REPO / 'configs/vpn_niv_t{T}.py')
    cfg = Config(dict(protocol='p', runs=[dict(method='A', config=config, horizons=[3, 4],
                                               tests=[dict(), dict(method='B')])]))
    units = expand_units(cfg, seeds=[0, 1, 2])
    t3, t4 = config.format(T=3), config.format(T=4)
    assert [(u.config, u.horizon, u.seed) for u in units][:4] == [
        (t3, 3, 0), (t4, 4, 0), (t3, 3, 1), (t4, 4, 1)]
    assert len(units) == 6 and [t.method for t in units[0].tests] == ['A', 'B']
    assert [u.horizon for u in expand_units(cfg, seeds=[0], horizons=[4])] == [4]
    only_b = expand_units(cfg, seeds=[0], methods=['B'])
    assert [[t.method for t in u.tests] for u in only_b] == [['B'], ['B']]
    with pytest.raises(ValueError, match=r'runs\[0\] has no "config"'):
        expand_units(Config(dict(protocol='p', runs=[dict(method='A')])))
    assert clean_metrics({'planning/success_rate': 1}) == {'success_rate': 1.0}


def test_tiny_protocol_end_to_end_and_resume(tiny_crosstask, tmp_path, capsys):
    protocol = tiny_protocol(tiny_crosstask)
    units = expand_units(protocol)
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=1, batch_size=64)
    results = runner.run(units)
    progress = capsys.readouterr().err
    assert '6 runs, 0 already finished, 6 to run' in progress
    assert '[1/6] ViterbiPlanNet, ViterbiPlanNet (argmax) T=3 seed=0' in progress  # --methods names
    assert '[6/6]' in progress
    assert 'eta' in progress
    # issue 38: each metric line names method, dataset, horizon and seed
    assert re.search(r'ViterbiPlanNet \(argmax\) crosstask T=3 seed=1: success_rate=[0-9.]+, '
                     r'mean_accuracy=', progress)
    rows = read_results(results)
    assert sorted((r.method, r.seed) for r in rows) == sorted(
        (m, s) for m in ('ViterbiPlanNet', 'ViterbiPlanNet (argmax)', 'PKG beam search',
                         'PKG + uniform emissions') for s in (0, 1))
    for row in rows:
        assert row.horizon == 3 and 0 <= row.metrics['success_rate'] <= 100
        assert Path(row.per_sample_file).is_file()
        dump = json.loads(Path(row.per_sample_file).read_text())
        assert dump['metrics']['success_rate'] == pytest.approx(row.metrics['success_rate'])
        assert 0 <= row.metrics['plan_jsd'] <= 1 and row.metrics['plan_entropy'] >= 0
        assert row.config.endswith('_t3.py') and row.protocol == 'tiny'
    # issue 38: every row says what it was trained and tested on (the tiny synthetic folder)
    fingerprints = {r.features['fingerprint'] for r in rows}
    assert len(fingerprints) == 1 and {r.features['kind'] for r in rows} == {'synthetic'}
    assert all(r.features['label'].startswith('synthetic (make_synthetic_features.py: seed 0')
               and 'trained_on' not in r.features for r in rows)
    by_method = {r.method: r for r in rows}
    assert by_method['PKG + uniform emissions'].params == 0
    assert by_method['ViterbiPlanNet'].params == by_method['ViterbiPlanNet (argmax)'].params > 0
    # the two decodings of one training share its checkpoint: one training per seed
    trainings = Path(tmp_path, 'tiny', 'ViterbiPlanNet', 'T3').glob('seed*/train_done.json')
    assert len(list(trainings)) == 2
    # resuming runs nothing new
    runner.run(expand_units(protocol))
    assert len(read_results(results)) == len(rows)
    assert '6 already finished, 0 to run' in capsys.readouterr().err
    # a lost test row is re-evaluated from the finished training, which is not repeated
    lines = results.read_text().splitlines()
    lost = next(i for i, line in enumerate(lines)
                if json.loads(line)['method'] == 'ViterbiPlanNet (argmax)'
                and json.loads(line)['seed'] == 1)
    results.write_text('\n'.join(lines[:lost] + lines[lost + 1:]) + '\n')
    seed1 = Path(tmp_path, 'tiny', 'ViterbiPlanNet', 'T3', SMOKE_DIR.format(seed=1))
    stamps = {p: p.stat().st_mtime_ns for p in seed1.iterdir()
              if p.is_file() and p.name != 'unit_state.json'}  # the unit ran again
    runner.run(expand_units(protocol))
    assert '1 to run' in capsys.readouterr().err
    again = read_results(results)
    assert sorted(r.key() for r in again) == sorted(r.key() for r in rows)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # no retraining, same checkpoint
    assert not list(seed1.glob('epoch_2.pth'))
    table = build_table(rows, ['success_rate', 'mean_accuracy'])
    assert 'PKG beam search†‖' in to_markdown(table)  # shortened, synthetic
    assert f'Features: synthetic (make_synthetic_features.py: seed 0, difficulty 0.5), ' \
        f'fingerprint {fingerprints.pop()}' in to_markdown(table)

    # qualitative figure from a trained checkpoint of the protocol
    marker = Path(tmp_path, 'tiny', 'ViterbiPlanNet', 'T3', SMOKE_DIR.format(seed=0),
                  'train_done.json')
    data = qualitative_from_checkpoint(protocol.runs[0]['config'],
                                       json.loads(marker.read_text())['checkpoint'], 0,
                                       protocol.runs[0]['cfg_options'])
    num_columns = len(data['action_names'])
    assert data['emissions'].shape == data['soft_plan'].shape == (3, num_columns)
    assert 'test sample 0' in data.pop('caption')
    assert data['features'].startswith('Features: synthetic (make_synthetic_features.py') and \
        data['features'].endswith('(synthetic: a check of the pipeline, not a result on real '
                                  'videos).')
    assert all(p.is_file() for p in plot_qualitative(**data, out_stem=tmp_path / 'quali'))


# ------------------------------------------------ every protocol of the issue, as a dry run
def dry_run(name, monkeypatch):
    """Units of ``configs/protocol/<name>.py`` from the CLI's --dry-run (configs checked)."""
    monkeypatch.chdir(REPO)
    return load_tool('run_protocol').main([f'configs/protocol/{name}.py', '--dry-run'])


def methods_of(units):
    """{test method: [(train horizon, test horizon, merged cfg_options, merged variant)]} over
    seed 0."""
    out = {}
    for unit in units:
        if unit.seed == 0:
            for spec in unit.tests:
                out.setdefault(spec.method, []).append(
                    (unit.horizon, spec.horizon, {**unit.cfg_options, **spec.cfg_options},
                     {**unit.variant, **spec.variant}))
    return out


def test_dry_run_standard(monkeypatch, capsys):
    units = dry_run('standard_crosstask', monkeypatch)
    assert sorted({u.seed for u in units}) == [0, 1, 2, 3, 4]  # default: 5 seeds
    tests = methods_of(units)
    assert set(tests) == {'ViterbiPlanNet', 'Base Model', 'SCHEMA', 'SCHEMA w/o PKG',
                          'PKG beam search', 'PKG + uniform emissions', 'PDPP', 'KEPP',
                          'CEFITO'}
    assert all(sorted(t[:2] for t in runs) == [(3, 3), (4, 4)] for runs in tests.values())
    assert tests['Base Model'][0][2]['model.use_dvl'] is False
    assert tests['SCHEMA'][0][2] == {} and tests['SCHEMA w/o PKG'][0][2] == {
        'model.decode': 'argmax'}  # two rows of one training per (T, seed)
    assert [u.train for u in units if u.slug.startswith('PKG_uniform')] == [False] * 10
    assert tests['CEFITO'][0][3] == {'text_features': "stand-in all-MiniLM-L6-v2 "
                                     "(mean-pooled, zero-padded to 512-d), not the paper's CLIP"}
    assert f'{len(units)} runs; 18 configs checked' in capsys.readouterr().out


@pytest.mark.parametrize('dataset', ['crosstask', 'niv', 'coin'])
def test_dry_run_cross_horizon(dataset, monkeypatch):
    tests = methods_of(dry_run(f'cross_horizon_{dataset}', monkeypatch))
    assert sorted(t[:2] for t in tests['ViterbiPlanNet (train T=6)']) == [(6, 3), (6, 4), (6, 5)]
    assert sorted(t[:2] for t in tests['ViterbiPlanNet (train T=test T)']) == [
        (3, 3), (4, 4), (5, 5)]


@pytest.mark.parametrize('name, extra', [('ablation_crosstask', 0),
                                         ('main_and_ablation_t3_crosstask', 3)])
def test_dry_run_ablation_has_eight_combinations(name, extra, monkeypatch):
    units = dry_run(name, monkeypatch)
    # 2 trainings give 8 rows; main_and_ablation_t3 adds the two PKG beam searches (U-Net and
    # MLP step models) and the uniform-emission planner
    assert len([u for u in units if u.seed == 0]) == 2 + extra
    combos = {(opts.get('model.use_dvl', True), opts['model.decode'])
              for runs in methods_of(units).values() for _, _, opts, _ in runs
              if 'model.decode' in opts}
    assert combos == {(dvl, mode) for dvl in (True, False) for mode in
                      ('emission_argmax', 'emission_viterbi', 'dvl_argmax', 'dvl_viterbi')}


def test_dry_run_pkg_and_task_supervision(monkeypatch):
    tests = methods_of(dry_run('pkg_crosstask', monkeypatch))
    assert tests['w/o PKG (uniform graph)'][0][2] == {
        'model.pkg.perturbations': [dict(type='UniformGraph')]}
    assert tests['w/o task supervision'][0][2] == {'model.loss_weights.task': 0.0}
    assert tests['ViterbiPlanNet'][0][2] == {}
    assert tests['SCHEMA w/o PKG'][0][2] == {'model.decode': 'argmax'} and tests['SCHEMA']


def test_dry_run_sample_efficiency(monkeypatch, capsys):
    units = dry_run('sample_efficiency_crosstask', monkeypatch)
    tests = methods_of(units)
    assert set(tests) == {'ViterbiPlanNet', 'Base Model', 'SCHEMA', 'SCHEMA w/o Viterbi'}
    assert {o['model.decode'] for *_, o, _ in tests['SCHEMA w/o Viterbi']} == {'argmax'}
    for runs in tests.values():
        fractions = sorted(opts['train_dataloader.dataset.subset_fraction']
                           for _, _, opts, _ in runs)
        assert fractions[0] == 0.05 and fractions[-1] == 1.0 and len(fractions) >= 4
        assert all(opts['model.freeze_visual'] is True for _, _, opts, _ in runs)
        assert sorted(v['train_fraction'] for *_, v in runs) == fractions
    # every run starts from the encoder pre-trained once per seed on the whole training set
    stages = {id(u.pretrained['unit']): u.pretrained['unit'] for u in units}
    assert sorted((s.slug, s.seed, s.config) for s in stages.values()) == [
        ('pretrain_encoder', seed, 'configs/vpn_crosstask_t3.py') for seed in range(5)]
    assert all(u.pretrained['option'] == 'model.init_visual_from' and
               u.pretrained['unit'].seed == u.seed for u in units)
    out = capsys.readouterr().out
    assert out.count('rows: none (a pre-training stage)') == 5
    assert f'{len(units)} runs (+5 pre-training stages)' in out


KINDS = dict(edge_dropout='EdgeDropout', weight_noise='WeightNoise',
             data_fraction='DataFraction', label_noise='LabelNoise')


def test_dry_run_pkg_quality(monkeypatch):
    methods = methods_of(dry_run('pkg_quality_crosstask', monkeypatch))
    runs = methods['ViterbiPlanNet']
    kinds = {v['perturbation'] for *_, v in runs}
    assert kinds == {'none', 'edge_dropout', 'weight_noise', 'data_fraction', 'label_noise'}
    for *_, opts, variant in runs:
        if variant['perturbation'] != 'none':
            (perturbation,), = opts.values()
            assert set(opts) == {'model.pkg.perturbations'}
            assert perturbation['type'] == KINDS[variant['perturbation']]
            assert variant['level'] in perturbation.values()
    # a network trained without the graph: one training, tested with each perturbed graph
    # (recounted at test time) and without the graph (the dashed reference)
    with_pkg, (reference,) = methods['SCHEMA w/ PKG'], methods['SCHEMA w/o PKG']
    assert sorted((v['perturbation'], v['level']) for *_, v in with_pkg) == sorted(
        (v['perturbation'], v['level']) for *_, v in runs)
    assert all(o['model.pkg.recount'] is True and o.get('model.pkg.perturbations', []) ==
               next(r[2].get('model.pkg.perturbations', []) for r in runs if r[3] == v)
               for *_, o, v in with_pkg)
    assert reference[3] == dict(perturbation='none', level=0.0)
    assert reference[2] == {'model.decode': 'argmax'}
    assert {o['model.decode'] for *_, o, _ in with_pkg} == {'viterbi'}


def test_dry_run_union_pkg_and_observations(monkeypatch):
    union = methods_of(dry_run('union_pkg_crosstask', monkeypatch))
    extra = [len(opts.get('model.pkg.extra_datasets', []))
             for runs in union.values() for _, _, opts, _ in runs]
    assert sorted(extra) == [0, 1, 1, 2]
    unions = sorted(opts.get('model.pkg.union', 'pool')
                    for runs in union.values() for _, _, opts, _ in runs)
    assert unions == ['mean', 'pool', 'pool', 'pool']
    # the paper's study: T=6, the first three steps observed (trained and tested) against none
    units = dry_run('observations_crosstask', monkeypatch)
    assert {(u.config, u.horizon) for u in units} == {
        ('configs/vpn_crosstask_t6.py', 6), ('configs/baselines/schema_crosstask_t6.py', 6)}
    observed = methods_of(units)
    every_split = {f'{s}_dataloader.dataset.observed_steps': 3 for s in ('train', 'val', 'test')}
    assert sorted((m, v['observed_steps'], o) for m, runs in observed.items()
                  for *_, o, v in runs) == [
        (m, k, every_split if k else {}) for n in ('SCHEMA', 'ViterbiPlanNet')
        for m, k in ((n, 0), (f'{n} (3 steps observed)', 3))]


def test_dry_run_dataset_independent_pkg(monkeypatch):
    units = dry_run('dataset_independent_pkg_crosstask', monkeypatch)
    methods = methods_of(units)
    for name in ('ViterbiPlanNet', 'SCHEMA'):
        union, single = (methods[f'{name} ({kind} PKG)']
                         for kind in ('dataset-independent', 'per-dataset'))
        assert sorted(t for t, *_ in union) == sorted(t for t, *_ in single) == [3, 4, 5, 6]
        assert all(o == {'test_dataloader.dataset.select': ['crosstask']}
                   for *_, o, _ in union)
    assert {(u.slug, u.config) for u in units if u.seed == 0 and u.horizon == 3} == {
        ('ViterbiPlanNet_union', 'configs/union/vpn_union_t3.py'),
        ('ViterbiPlanNet_crosstask', 'configs/vpn_crosstask_t3.py'),
        ('SCHEMA_union', 'configs/union/schema_union_t3.py'),
        ('SCHEMA_crosstask', 'configs/baselines/schema_crosstask_t3.py')}
    niv = dry_run('dataset_independent_pkg_niv', monkeypatch)
    shared = [ProtocolRunner(load_protocol(f'configs/protocol/dataset_independent_pkg_{name}'
                                           '.py')).work_dir(u)
              for name, found in (('crosstask', units), ('niv', niv)) for u in found
              if u.slug == 'ViterbiPlanNet_union' and u.seed == 0 and u.horizon == 3]
    assert len(shared) == 2 and shared[0] == shared[1]  # one union training for both


def test_dry_run_decoding_diversity(monkeypatch):
    units = dry_run('decoding_diversity_crosstask', monkeypatch)
    assert {(u.slug, u.horizon, u.train) for u in units} == {
        ('PKG_uniform_emissions', 6, False), ('SCHEMA', 6, True), ('ViterbiPlanNet', 6, True)}
    methods = methods_of(units)
    assert [o for *_, o, _ in methods['SCHEMA w/o PKG'] + methods['SCHEMA w/ PKG']] == [
        {'model.decode': 'argmax'}, {'model.decode': 'viterbi'}]


def test_dry_run_error_overlap_t6(monkeypatch):
    methods = methods_of(dry_run('main_and_ablation_t6_crosstask', monkeypatch))
    assert {'ViterbiPlanNet', 'Base Model', 'Base Model + PKG Viterbi',
            'ViterbiPlanNet w/o PKG', 'SCHEMA w/o PKG', 'SCHEMA w/ PKG',
            'PKG + uniform emissions'} <= set(methods)
    assert len(methods) == 12 and all(tuple(t) == (6, 6) for runs in methods.values()
                                     for *t, _, _ in runs)
    (*_, no_pkg, _), = methods['ViterbiPlanNet w/o PKG']
    assert no_pkg == {'model.pkg.perturbations': [{'type': 'UniformGraph'}]}
    assert methods['Base Model + PKG Viterbi'][0][2] == {'model.use_dvl': False,
                                                         'model.decode': 'emission_viterbi'}


def test_dry_run_sample_efficiency_with_and_without_pkg(monkeypatch):
    methods = methods_of(dry_run('sample_efficiency_pkg_crosstask', monkeypatch))
    assert set(methods) == {'ViterbiPlanNet', 'ViterbiPlanNet w/o PKG'}
    for name, runs in methods.items():
        assert sorted({(t, v['train_fraction']) for t, _, _, v in runs}) == [
            (t, f) for t in (3, 4, 5, 6) for f in (0.1, 0.25, 0.5, 1.0)]
        graphs = {str(o.get('model.pkg.perturbations')) for *_, o, _ in runs}
        assert graphs == ({'None'} if name == 'ViterbiPlanNet' else {"[{'type': 'UniformGraph'}]"})


def test_dry_run_networks_side_by_side(monkeypatch):
    units = dry_run('networks_crosstask', monkeypatch)
    assert {(u.config, u.seed) for u in units} == {
        (c, s) for c in ('configs/vpn_crosstask_t3.py', 'configs/compact/compact_crosstask_t3.py')
        for s in range(5)}


def test_every_protocol_config_is_covered():
    # niv/coin protocols: tests/test_configs.py (same runs as the CrossTask ones)
    names = {p.stem for p in (REPO / 'configs' / 'protocol').glob('*_crosstask.py')}
    tested = set(re.findall(r"dry_run\('(\w+)'", Path(__file__).read_text()))
    tested |= {'ablation_crosstask', 'main_and_ablation_t3_crosstask',  # parametrized
               'cross_horizon_crosstask'}
    assert names <= tested, f'protocol configs without a dry-run test: {names - tested}'


def test_config_check_names_bad_options(monkeypatch):
    monkeypatch.chdir(REPO)
    config = 'configs/vpn_crosstask_t3.py'
    check_config(config, {'model.freeze_visual': True})
    with pytest.raises(ValueError, match=r"vpn_crosstask_t3.py: model: ViterbiPlanNet has no "
                                         r"option\(s\) \['freeze_visul'\]"):
        check_config(config, {'model.freeze_visul': True})
    with pytest.raises(ValueError, match=r"test_dataloader.dataset: PlanningDataset has no "
                                         r"option\(s\) \['subset_frac'\]"):
        check_config(config, {'test_dataloader.dataset.subset_frac': 0.5})
    with pytest.raises(ValueError, match=r'model.pkg.perturbations\[0\]: EdgeDropout.fraction='
                                         r'1.5; expected a finite number >= 0 and <= 1'):
        check_config(config, {'model.pkg.perturbations': [dict(type='EdgeDropout',
                                                               fraction=1.5)]})
    with pytest.raises(ValueError, match=r"model.pkg: PKGBuilder has no option\(s\) "
                                         r"\['edge_dropout'\]"):
        check_config(config, {'model.pkg.edge_dropout': 0.1})
    with pytest.raises(ValueError, match=r"custom_hooks.0: PKGHook has no option\(s\) "
                                         r"\['no_pkg'\]; it takes no options; the PKG's "
                                         'options are the model'):
        check_config(config, {'custom_hooks.0.no_pkg': True})


def test_run_seed_reaches_the_pkg_builder_and_training_subset(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    runner = ProtocolRunner(Config(dict(protocol='p', runs=[])), tmp_path)
    cfg = runner.build_cfg('configs/vpn_crosstask_t3.py',
                           {'train_dataloader.dataset.subset_fraction': 0.1}, 3, tmp_path)
    assert cfg.randomness['seed'] == 3 and cfg.model.pkg['seed'] == 3
    assert cfg.train_dataloader.dataset.subset_seed == 3
    plain = runner.build_cfg('configs/vpn_crosstask_t3.py', {}, 3, tmp_path)
    assert 'subset_seed' not in plain.train_dataloader.dataset


# ------------------------------------------------------------ run identity (issue 13, item 3)
def beam_search_protocol(tiny, **extra_options):
    return Config(dict(protocol='identity', dataset='crosstask', seeds=[0], runs=[
        dict(method='PKG beam search', cfg_options=dict(tiny_options(tiny), **extra_options),
             config=str(REPO / 'configs/baselines/pkg_beam_search_mlp_crosstask_t3.py'))]))


def test_runs_with_other_settings_are_never_reused(tiny_crosstask, tmp_path, capsys):
    protocol = beam_search_protocol(tiny_crosstask)
    smoke = ProtocolRunner(protocol, tmp_path, max_epochs=1, batch_size=64)
    smoke.run(expand_units(protocol))
    capsys.readouterr()
    longer = ProtocolRunner(protocol, tmp_path, max_epochs=2, batch_size=64)
    results = longer.run(expand_units(protocol))
    assert '1 runs, 0 already finished, 1 to run' in capsys.readouterr().err
    assert [p.name for p in (smoke.results_file, results)] == [
        'results_batch_size-64_max_epochs-1.jsonl', 'results_batch_size-64_max_epochs-2.jsonl']
    rows = read_results([smoke.results_file, results])
    assert [r.settings['max_epochs'] for r in rows] == [1, 2]
    assert all(r.settings['batch_size'] == 64 and r.settings['cfg_options'] for r in rows)
    config_epochs = Config.fromfile(protocol.runs[0]['config']).train_cfg.max_epochs
    assert [r.shortened for r in rows] == [f'max_epochs={n} (config: {config_epochs})'
                                           for n in (1, 2)]
    runs = Path(tmp_path, 'identity', 'PKG_beam_search', 'T3')
    assert sorted(p.name for p in runs.iterdir() if not p.name.startswith('.')) == [
        'seed0_batch_size-64_max_epochs-1', 'seed0_batch_size-64_max_epochs-2']
    assert json.loads((runs / 'seed0_batch_size-64_max_epochs-2' / 'run.json').read_text())[
        'max_epochs'] == 2
    # the same work dir, other overrides: refused, not silently reused
    edited = beam_search_protocol(tiny_crosstask, **{'model.beam_width': 3})
    with pytest.raises(UnitsFailedError, match=r"seed0_batch_size-64_max_epochs-1 holds a run made "
                                         r"with other settings \(cfg_options\.model\.beam_width: .*"
                                         r"delete it or give another --out"):
        ProtocolRunner(edited, tmp_path, max_epochs=1, batch_size=64).run(expand_units(edited))
    assert len(read_results(smoke.results_file)) == 1


def test_runner_tests_the_config_selected_checkpoint(tmp_path):
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import selected_checkpoint
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_40.pth'))
    (tmp_path / 'best_plan_authors_selection_epoch_12.pth').write_bytes(b'')
    authors = Config(dict(selection='authors', default_hooks=dict(
        checkpoint=dict(save_best='plan/authors_selection'))))
    assert selected_checkpoint(authors, tmp_path) == (
        str(tmp_path / 'best_plan_authors_selection_epoch_12.pth'),
        'authors: best plan/authors_selection')
    shortened = Config(dict(default_hooks=dict(checkpoint=dict(interval=40))))
    assert selected_checkpoint(shortened, tmp_path) == (str(tmp_path / 'epoch_40.pth'),
                                                        'unified: last epoch')
