"""KEPP: its graph and path retrieval against the official code's recorded answers and a brute
force, the models against the oracle fixture (one training step each; the whole fixture is
``tools/check_reference.py``), bad inputs (released graph files, step-model checkpoints), the
two stages in the mmengine Runner. Tiny sizes; full-size models are only built."""
import itertools
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import MODELS
from tiny_configs import differing_tensors, trained_and_reused_pre_stage, write_tiny_config
from reference_fixtures import copy_fixture, reference_dir, shift_array
from tool_modules import load_tool
from vpn_plugin.core import kepp_paths
from vpn_plugin.data_paths import load_config
from vpn_plugin.engine.kepp_training import STEP_FILE, load_step_model, training_identity
from vpn_plugin.models.base_planner import num_parameters
from vpn_plugin.models.kepp import released_graph
from vpn_plugin.oracles import kepp as kepp_checker
from vpn_plugin.oracles.compare import compare, read_npz

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / 'configs/baselines/kepp_crosstask_t3.py'

pytestmark = pytest.mark.usefixtures('single_thread')


@pytest.fixture(scope='module')
def fixture_dir() -> Path:
    return reference_dir('kepp_small_t3')


def tiny_kepp(horizon=3, num_actions=6, **options):
    return MODELS.build(dict(type='KEPP', feature_dim=8, num_actions=num_actions,
                             horizon=horizon, dim=32, n_timesteps=20, **options))


# ------------------------------------------------------------------ graph and retrieval
def test_graph_and_retrieval_reproduce_the_official_answers(fixture_dir):
    inputs = json.loads((fixture_dir / 'pkg/inputs.json').read_text())
    outputs = json.loads((fixture_dir / 'pkg/outputs.json').read_text())
    graph = kepp_paths.build_graph((r['vid'], r['legal_range']) for r in inputs['action_list'])
    assert graph.nodes == outputs['graph']['nodes']
    assert [list(e) for e in graph.edges()] == outputs['graph']['edges']  # weights exactly
    for query, answer in zip(inputs['queries'], outputs['queries']):
        top = kepp_paths.top_paths(graph, query['start'], query['end'], query['horizon'])
        assert [[p, w] for p, w in top] == answer['top2']  # ties in DFS order
    assert len(inputs['queries']) == len(outputs['queries'])
    for pair, answer in zip(inputs['validate_pairs'], outputs['validate']):
        assert kepp_paths.retrieve(graph, *pair, len(answer['paths'][0]))[0] == answer['paths']


def brute_force_walks(graph, start, end, horizon):
    """Every node sequence of length T, kept when each step is an edge; ordered by the
    successor insertion ranks (= depth-first order); weight = product left to right."""
    rank = {u: {v: i for i, (v, _) in enumerate(graph.successors[u])} for u in graph.nodes}
    weight = {(u, v): w for u, v, w in graph.edges()}
    walks = []
    for middle in itertools.product(graph.nodes, repeat=horizon - 2):
        path = [start, *middle, end]
        if all((u, v) in weight for u, v in zip(path, path[1:])):
            product = weight[(path[0], path[1])]
            for u, v in zip(path[1:], path[2:]):
                product *= weight[(u, v)]
            walks.append((path, product))
    return sorted(walks, key=lambda item: [rank[u][v] for u, v in zip(item[0], item[0][1:])])


@pytest.mark.parametrize('horizon', [3, 4, 5, 6])
def test_walks_of_any_horizon_match_a_brute_force(horizon):
    rng = np.random.default_rng(horizon)
    videos = [(i, rng.integers(0, 6, rng.integers(2, 7)).tolist()) for i in range(12)]
    graph = kepp_paths.build_graph(videos)
    for start, end in itertools.product(graph.nodes, repeat=2):
        assert kepp_paths.all_walks(graph, start, end, horizon) == \
            brute_force_walks(graph, start, end, horizon)


def test_repeated_video_keeps_first_position_and_last_sequence():
    graph = kepp_paths.build_graph([('a', [1, 2]), ('b', [3, 4]), ('a', [5, 6])])
    assert graph.nodes == [5, 6, 3, 4] and graph.num_edges == 2


def test_fallback_is_counted():
    graph = kepp_paths.build_graph([(0, [0, 1, 2])])
    retriever = kepp_paths.PathRetriever(graph, 3)
    paths, fallback = retriever.batch([2, 2, 0], [0, 0, 2])
    assert paths[0].tolist() == [[2, 2, 0]] * 2 and paths[2].tolist() == [[0, 1, 2]] * 2
    assert fallback.tolist() == [True, True, False]
    assert retriever.fallback_pairs == [(2, 0)] and retriever.fallback_windows == 2
    assert kepp_paths.fallback_path(2, 0, 5) == [2, 2, 2, 0, 0]
    model = tiny_kepp(horizon=3)
    model.set_graph(graph)
    _, paths, fallback = model.path_block(torch.tensor([2]), torch.tensor([0]), 'cpu')
    assert paths.tolist() == [[[2, 2, 0]] * 2] and fallback.tolist() == [True]
    assert model.retriever().fallback_windows == 1


def test_path_block_overwrites_instead_of_adding():
    block = kepp_paths.path_block(np.array([[[1, 2, 3], [1, 0, 3]]]), 4)
    assert block[0, 0].tolist() == pytest.approx([0, 1 / 3, 0, 0])  # both paths agree
    assert block[0, 1].tolist() == pytest.approx([1 / 3, 0, 2 / 3, 0])


# ------------------------------------------------------------------ the oracle fixture
def test_reference_fixture_passes(fixture_dir, capsys):
    assert load_tool('check_reference').main([str(fixture_dir), '--no-sensitivity']) == 0
    report = capsys.readouterr().out
    assert 'parameters crosstask_133: plan U-Net 42,184,335 (official 42,184,335), step U-Net ' \
           '41,843,589 (official 41,843,589) ok' in report
    for row in ('outputs.npz:ddpm_states', 'outputs.npz:step_ddim_states', 'outputs.npz:cond_pkg',
                'outputs.npz:ema_new.model.time_mlp.1.weight', 'step_grads.npz:model.ups.1.2.conv',
                'pkg:queries top2 paths (ties in DFS order) (224 compared)',
                'pkg:validate paths (fallbacks included) (81 compared)',
                'inputs.npz:pkg_paths_sample (retrieved)'):
        assert row in report
    assert report.rstrip().endswith('PASS')


def test_perturbed_fixture_fails(fixture_dir, tmp_path, capsys):
    copy_dir = copy_fixture(fixture_dir, tmp_path)
    actions = 2 * json.loads((fixture_dir / 'meta.json').read_text())['num_actions']
    for name, key, index in (('state_dict.npz', 'model.final_conv.1.weight', (actions, 0, 0)),
                             ('step_state_dict.npz', 'model.downs.0.0.blocks.0.block.0.weight',
                              (0, -1, 1))):
        shift_array(copy_dir, name, key, index, 0.05)
    assert load_tool('check_reference').main([str(copy_dir)]) == 1
    failed = {line.split()[0] for line in capsys.readouterr().out.splitlines()
              if line.endswith('FAIL')}
    assert {'outputs.npz:loss', 'outputs.npz:x_recon', 'outputs.npz:ddim_states[step-by-step]',
            'outputs.npz:step_loss', 'outputs.npz:step_ddpm_states[step-by-step]'} <= failed
    assert not any(name.startswith('pkg:') or 'sched' in name for name in failed)


def failed_rows(report: str) -> set:
    return {line.split()[0] for line in report.splitlines() if line.endswith('FAIL')}


def test_a_nan_output_or_a_moved_schedule_buffer_fails(fixture_dir, tmp_path, capsys):
    """Issue 37 item 6: a NaN in step_x_start passed (its tolerance became inf), and betas[0]
    +0.05 in the state dicts passed (the schedule was rebuilt from meta.json, the buffers never
    read)."""
    copy_dir = copy_fixture(fixture_dir, tmp_path)
    shift_array(copy_dir, 'outputs.npz', 'step_x_start', (1, 0, 3), np.nan)
    shift_array(copy_dir, 'step_state_dict.npz', 'betas', (0,), 0.05)
    shift_array(copy_dir, 'state_dict.npz', 'posterior_mean_coef1', (5,), 1e-3)
    assert load_tool('check_reference').main([str(copy_dir)]) == 1
    report = capsys.readouterr().out
    assert failed_rows(report) == {'outputs.npz:step_x_start', 'step_state_dict.npz:betas',
                                   'state_dict.npz:posterior_mean_coef1'}, report
    assert 'sensitivity: not run (the check failed' in report


def test_a_pkg_only_folder_is_checked_as_a_pkg(fixture_dir, tmp_path, capsys):
    """Issue 37 item 8: ``kepp_small_t3/pkg`` (meta ``component: pkg``) was refused with
    "missing fields num_actions, horizon, ..."."""
    assert load_tool('check_reference').main([str(fixture_dir / 'pkg')]) == 0
    report = capsys.readouterr().out
    assert 'KEPP PKG' in report and 'pkg:queries top2 paths (ties in DFS order) (224 compared)' \
        in report and report.rstrip().splitlines()[-2] == 'PASS', report
    copy_dir = copy_fixture(fixture_dir / 'pkg', tmp_path)
    meta = json.loads((copy_dir / 'meta.json').read_text())
    del meta['component']  # recognised by its files too
    (copy_dir / 'meta.json').write_text(json.dumps(meta))
    outputs = json.loads((copy_dir / 'outputs.json').read_text())
    outputs['graph']['edges'][3][2] += 1e-3
    (copy_dir / 'outputs.json').write_text(json.dumps(outputs))
    assert load_tool('check_reference').main([str(copy_dir)]) == 1
    assert failed_rows(capsys.readouterr().out) == {'pkg:graph'}  # 'pkg:graph edge weights'


def fixture_model(fixture_dir):
    meta = json.loads((fixture_dir / 'meta.json').read_text())
    model = kepp_checker.build_kepp(kepp_checker.model_config(kepp_checker.load_cfg(), meta))
    kepp_checker.install_unet(model.plan.unet, fixture_dir / 'state_dict.npz')
    kepp_checker.install_unet(model.step.unet, fixture_dir / 'step_state_dict.npz')
    return model


def training_losses(model, fixture_dir):
    inputs, recorded = (read_npz(fixture_dir / f) for f in ('inputs.npz', 'outputs.npz'))
    batch = kepp_checker.batch_inputs(inputs)
    actions = torch.from_numpy(inputs['actions'])
    block = torch.from_numpy(kepp_paths.path_block(inputs['pkg_paths_train'], model.num_actions))
    plan, _ = kepp_checker.training_outputs(
        model.plan, '', actions, torch.cat([block] * 2, -1), torch.from_numpy(inputs['t']),
        torch.from_numpy(inputs['noise']), **batch)
    step, _ = kepp_checker.training_outputs(
        model.step, 'step_', actions, model.step.empty_block(batch),
        torch.from_numpy(inputs['step_t']), torch.from_numpy(inputs['step_noise']), **batch)
    return {k: compare(recorded[k], v)[1] for k, v in {**plan, **step}.items() if k in recorded}


def test_training_steps_match_and_a_perturbed_weight_fails(fixture_dir):
    model = fixture_model(fixture_dir)
    diffs = training_losses(model, fixture_dir)
    # the U-Nets' raw outputs (one channel per GroupNorm group) amplify float32 round-off to
    # ~1e-4 of their scale even at one thread (the checker widens those rows by the measured
    # conditioning); the losses and clipped reconstructions stay at ~1e-5
    raw = {key for key in diffs if key.endswith('x_recon_raw')}
    assert max(diffs[key] for key in raw) < 1e-3, diffs
    assert max(value for key, value in diffs.items() if key not in raw) < 5e-5, diffs
    with torch.no_grad():
        model.plan.unet.final_conv[1].weight[2 * model.num_actions, 0, 0] += 0.05
        model.step.unet.final_conv[1].weight[0, 0, 0] += 0.05
    diffs = training_losses(model, fixture_dir)
    assert diffs['loss'] > 1e-4 and diffs['step_loss'] > 1e-4 and diffs['x_recon'] > 1e-3


def test_full_size_parameter_counts_from_the_configs():
    expected = {'crosstask': (42_184_335, 41_843_589), 'coin': (44_663_070, 42_669_834),
                'niv': (41_857_680, 41_734_704)}
    for dataset, counts in expected.items():
        cfg = load_config(str(REPO / f'configs/baselines/kepp_{dataset}_t3.py'))
        with torch.device('meta'):
            model = MODELS.build(cfg.model)
        assert (num_parameters(model), num_parameters(model.step)) == counts


# ------------------------------------------------------------------ bad inputs
def digraph_pickle(successors) -> bytes:
    """A protocol-2 pickle of a networkx.DiGraph's state, written opcode by opcode (networkx
    is not needed)."""
    nodes = list(dict.fromkeys([u for u in successors] + [v for r in successors.values()
                                                          for v in r]))
    state = {'graph': {}, '_node': {n: {} for n in nodes},
             '_succ': {n: {v: {'weight': w} for v, w in successors.get(n, {}).items()}
                       for n in nodes}}
    body = pickle.dumps(state, protocol=2)[2:-1]  # without PROTO and STOP
    return (b'\x80\x02cnetworkx.classes.digraph\nDiGraph\n)\x81' + body + b'b.')


def test_released_graph_is_read_safely_and_checked(tmp_path):
    path = tmp_path / 'trained_graph.pkl'
    path.write_bytes(digraph_pickle({0: {1: 0.5, 2: 0.5}, 1: {2: 1.0}}))
    graph = released_graph(path, num_actions=3, horizon=4)
    assert graph.nodes == [0, 1, 2] and graph.edges() == [(0, 1, .5), (0, 2, .5), (1, 2, 1.)]
    with pytest.raises(ValueError, match=r'T=4 paths .* this run has horizon=3'):
        released_graph(path, num_actions=3, horizon=3)
    with pytest.raises(ValueError, match=r'action ids in \[0, 2\] .* num_actions=2'):
        released_graph(path, num_actions=2, horizon=4)


def test_a_graph_pickled_with_its_cached_views_is_read(tmp_path):
    """networkx 3 pickles the views a DiGraph has cached (``G.adj``, ``G.nodes``), as the graph
    KEPP's PKG/graph_creation.py writes after reading them."""
    nx = pytest.importorskip('networkx')
    made = nx.DiGraph()
    made.add_edge(0, 1, weight=0.5)
    made.add_edge(0, 2, weight=0.5)
    made.add_edge(1, 2, weight=1.0)
    assert list(made.adj[0]) == [1, 2] and list(made.succ[1]) == [2] and len(made.nodes) == 3
    path = tmp_path / 'trained_graph.pkl'
    path.write_bytes(pickle.dumps(made))
    assert b'AdjacencyView' in path.read_bytes()
    graph = released_graph(path, num_actions=3, horizon=4)
    assert graph.nodes == [0, 1, 2] and graph.edges() == [(0, 1, .5), (0, 2, .5), (1, 2, 1.)]


def test_a_graph_file_with_a_payload_never_runs(tmp_path):
    marker = tmp_path / 'ran'

    class Payload:
        def __reduce__(self):
            return (__import__('os').system, (f'touch {marker}',))

    path = tmp_path / 'graph.pkl'
    path.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ValueError, match=r"graph.pkl: refused: the pickle names '(posix|os)"):
        released_graph(path, num_actions=3, horizon=4)
    assert not marker.exists()


def test_released_graph_marks_the_run(tmp_path):
    path = tmp_path / 'trained_graph.pkl'
    path.write_bytes(digraph_pickle({0: {1: 1.0}}))
    model = tiny_kepp(horizon=4, released_graph=str(path))
    model.build_pkg(None)
    assert bool(model.test_set_pkg)


def test_step_checkpoint_of_another_horizon_is_refused(tmp_path):
    class Dataset:
        class taxonomy:
            action_names, path = ['a', 'b', 'c', 'd', 'e', 'f'], 'tiny'
    saved = tiny_kepp(horizon=4)
    torch.save(dict(identity=training_identity(saved, Dataset),
                    state_dict=saved.step.state_dict()), tmp_path / STEP_FILE)
    with pytest.raises(ValueError, match=r'trained at T=4, this model has horizon=3'):
        tiny_kepp(horizon=3).load_state_dict(saved.state_dict())
    model = tiny_kepp(horizon=3)
    with pytest.raises(ValueError, match=r'a KEPP step model trained for tiny \(horizon=4\), '
                                         r'but this run is tiny \(horizon=3\); it is never '
                                         r'reused for another run'):
        load_step_model(tmp_path / STEP_FILE, model, training_identity(model, Dataset))
    assert not bool(model.step_ready)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="count_mode='window'; KEPP's graph counts"):
        tiny_kepp(pkg=dict(count_mode='window'))
    with pytest.raises(ValueError, match='only change the training sequences'):
        tiny_kepp(pkg=dict(perturbations=[dict(type='EdgeDropout', fraction=0.1)]))
    with pytest.raises(ValueError, match='model.sampler'):
        tiny_kepp(sampler='euler')


def test_prediction_chain_step_pkg_plan():
    model = tiny_kepp(horizon=3).eval()
    model.set_graph(kepp_paths.build_graph([(0, [0, 1, 2, 3, 4, 5, 0])]))
    with pytest.raises(RuntimeError, match='step model was never trained'):
        model.predict_endpoints(dict(start=torch.zeros(1, 8), goal=torch.zeros(1, 8)))
    model.step_ready.fill_(True)
    inputs = dict(start=torch.randn(3, 8), goal=torch.randn(3, 8))
    samples = dict(plan=torch.tensor([[0, 1, 2]] * 3), index=torch.arange(3))
    outputs = model(inputs, samples, mode='predict')
    again = model(inputs, dict(samples, index=torch.tensor([5, 1, 2])), mode='predict')
    for first, second in zip(outputs[1:], again[1:]):  # per-window seeds
        assert torch.equal(first.action_scores, second.action_scores)
    for out in outputs:
        ends = out.step_endpoints.tolist()
        assert out.pkg_paths[:, [0, -1]].tolist() == [ends, ends]
        assert out.pred_plan.shape == (3,)


# ------------------------------------------------------------------ the Runner, two stages
@pytest.fixture(scope='module')
def tiny_config(tiny_crosstask, tmp_path_factory) -> Path:
    """configs/baselines/kepp_crosstask_t3.py at tiny sizes (a child config file): 512-d
    observations, U-Net dim 32, 20 diffusion steps, 2 epochs of 3 steps of batch 32."""
    body = ("model = dict(feature_dim=512, dim=32, n_timesteps=20)\n"
            "train_cfg = dict(max_epochs=2, val_interval=2)\n"
            "default_hooks = dict(checkpoint=dict(interval=2, save_best=None),\n"
            "                     logger=dict(interval=50))\n")
    return write_tiny_config(tmp_path_factory.mktemp('kepp') / 'tiny_kepp.py', CONFIG,
                             body, tiny_crosstask, batch_size=32, steps_per_epoch=3)


@pytest.mark.usefixtures('single_thread')
def test_a_restart_reusing_the_saved_step_model_trains_the_same_plan_model(tiny_config,
                                                                           tmp_path):
    """Training the step model and predicting the training windows' endpoints draw random
    numbers, reusing its file draws none: they run on their own seeded streams (as the
    official step script, a process of its own), so a restart of the run that reuses the file
    trains the plan model from the same streams, bit for bit."""
    trained, reused = trained_and_reused_pre_stage(tiny_config, tmp_path, STEP_FILE,
                                                   'epoch_2.pth')
    assert len(trained['state_dict']) > 100
    assert differing_tensors(trained, reused) == []


def test_train_py_runs_both_stages_then_test_py(tiny_config, tmp_path):
    load_tool('train').main([str(tiny_config), '--work-dir', str(tmp_path / 'run')])
    log = next((tmp_path / 'run').glob('*/*.log')).read_text()
    assert 'KEPPStepModelHook: trained the step model for 6 steps' in log
    assert 'predicted by the step model' in log and 'KEPP: PKG with' in log
    assert 'plan U-Net' in log and 'step U-Net' in log
    assert (tmp_path / 'run' / STEP_FILE).is_file()
    metrics = load_tool('test').main([str(tiny_config), str(tmp_path / 'run/epoch_2.pth'),
                                      '--work-dir', str(tmp_path / 'test')])
    assert 0 <= metrics['plan/mean_accuracy'] <= 100  # the step model came with the checkpoint
    step_file = tmp_path / 'run' / STEP_FILE
    load_tool('train').main([str(tiny_config), '--work-dir', str(tmp_path / 'again'),
                             '--cfg-options', f'model.step_checkpoint={step_file}'])
    log = next((tmp_path / 'again').glob('*/*.log')).read_text()
    assert f'the step model reused from {step_file} (not retrained)' in log
    assert not (tmp_path / 'again' / STEP_FILE).exists()


def test_a_restart_after_the_step_stage_reuses_it_and_a_foreign_one_is_refused(tiny_config,
                                                                               tmp_path):
    """Issue 38: a run killed after its step-model stage (kepp_step_model.pth written, no
    epoch checkpoint yet) restarts in its work dir reusing the step model and its predictions
    (the restart was refused: the file counted as a checkpoint); the stages log progress with
    an ETA; a step model of other settings (another seed) is refused naming both."""
    run = tmp_path / 'run'
    load_tool('train').main([str(tiny_config), '--work-dir', str(run)])
    log = next(run.glob('*/*.log')).read_text()
    assert re.search(r'KEPPStepModelHook: step model: 1/6 steps \(17%\), 0:00:\d\d elapsed, '
                     r'ETA 0:\d\d:\d\d, loss \d', log)
    assert re.search(r'first/last actions of the training windows: \d+/262 windows', log)
    for path in [*run.glob('epoch_*.pth'), run / 'last_checkpoint']:
        path.unlink()  # killed before the first checkpoint
    load_tool('train').main([str(tiny_config), '--work-dir', str(run), '--seed', '0'])
    log = sorted(run.glob('*/*.log'))[-1].read_text()
    assert f'the step model reused from {run / STEP_FILE} (not retrained)' in log
    assert 'training windows reused from the step model\'s file' in log
    for path in [*run.glob('epoch_*.pth'), run / 'last_checkpoint']:
        path.unlink()
    with pytest.raises(SystemExit, match=r'kepp_step_model.pth: a KEPP step model trained for '
                       r'.*taxonomy_133.json \(seed=0\), but this run is .*taxonomy_133.json '
                       r'\(seed=1\)'):
        load_tool('train').main([str(tiny_config), '--work-dir', str(run), '--seed', '1'])


# ------------------------------------------------------------------ test-set PKG in the protocol
def test_test_set_pkg_is_marked_in_rows_and_tables_and_refused_by_the_main_table(tmp_path):
    from mmengine.config import Config
    from vpn_plugin.protocol.report import build_table, to_latex, to_markdown
    from vpn_plugin.protocol.results import ResultRow, read_results, write_results_csv
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    released = {'model.released_graph': 'PKG/graphs/NIV/NIV_trained_graph.pkl'}
    run = dict(method='KEPP', config='configs/baselines/kepp_niv_t4.py', cfg_options=released)
    for name in ('standard_niv', 'main_t6_niv'):
        standard = Config(dict(protocol=name, dataset='niv', seeds=[0], runs=[run]))
        with pytest.raises(ValueError, match=rf"'{name}' \(the main table\): KEPP .*test-set"):
            expand_units(standard)
    other = Config(dict(protocol='kepp_published', dataset='niv', seeds=[0], runs=[run]))
    unit = expand_units(other)[0]
    row = ProtocolRunner(other, tmp_path).row_for(unit, unit.tests[0], {'success_rate': 20.0})
    assert row.pkg_source == 'test-set PKG'
    rows = [ResultRow('KEPP', seed, 4, {'success_rate': 20.0 + seed}, pkg_source=row.pkg_source)
            for seed in range(3)]
    rows += [ResultRow('PDPP', seed, 4, {'success_rate': 10.0}) for seed in range(3)]
    write_results_csv(tmp_path / 'r.csv', rows)
    table = build_table(read_results(tmp_path / 'r.csv'), ['success_rate'])
    markdown = to_markdown(table)
    assert '| KEPP§ (test-set PKG) |' in markdown and '| PDPP |' in markdown
    assert '§ test-set PKG' in markdown
    assert r'KEPP\textsuperscript{\S} (test-set PKG)' in to_latex(table)


@pytest.mark.parametrize('seed', [0, 4])
def test_the_step_model_starts_from_the_official_scripts_draw_of_the_seed(seed, tmp_path,
                                                                         monkeypatch):
    """step/main_distributed.py seeds torch and builds the step U-Net first (our
    TemporalUNet built so equals its TemporalUnet: docs/reproducibility.md); our KEPP builds
    the plan U-Net first, so the hook redraws the step U-Net as the official script does,
    leaving the global torch stream where it was."""
    from vpn_plugin.engine import kepp_training
    from vpn_plugin.models.temporal_unet import TemporalUNet
    started = {}

    def record_start(model, *args, **kwargs):
        started.update({k: v.clone() for k, v in model.step.unet.state_dict().items()})
        return dict(train_loss=1.0, epoch_losses=[1.0], epoch_seconds=[0.1])
    monkeypatch.setattr(kepp_training, 'train_step_model', record_start)
    torch.manual_seed(seed)  # as the runner seeds before building the model
    model = tiny_kepp(horizon=4)
    built = {k: v.clone() for k, v in model.step.unet.state_dict().items()}

    class Runner:
        train_dataloader = [0, 1, 2]
    Runner.seed = seed
    stream = torch.get_rng_state()
    kepp_training.KEPPStepModelHook().train(Runner(), model, None, {}, dict(
        batch_size=2, steps=3, lr=1e-4), tmp_path / 'step.pth')
    assert torch.equal(torch.get_rng_state(), stream)
    torch.manual_seed(seed)
    official = TemporalUNet(*model.step.unet.arguments).state_dict()
    assert set(started) == set(official) and len(official) > 20
    assert all(torch.equal(started[k], official[k]) for k in official)
    assert not all(torch.equal(built[k], official[k]) for k in official)  # the plan drew first
    assert bool(model.step_ready)


def test_official_unet_weights_map_by_name_and_shape_in_both_directions():
    """The one mapping of PDPP's U-Net names (oracles.pdpp.install_unet and the KEPP rescoring's
    unet_state each had their own): block.0 / block.2 are our conv / norm; a missing, reshaped
    or extra official tensor is named."""
    from vpn_plugin.models.temporal_unet import from_official
    shapes = {'downs.0.0.blocks.0.conv.weight': (8, 4, 5), 'final_conv.0.norm.bias': (8,),
              'final_conv.1.weight': (4, 8, 1)}
    official = {'model.downs.0.0.blocks.0.block.0.weight': torch.ones(8, 4, 5),
                'model.final_conv.0.block.2.bias': torch.zeros(8),
                'model.final_conv.1.weight': torch.ones(4, 8, 1), 'betas': torch.ones(3)}
    found = from_official(shapes, official, 'f.pth')
    assert found['final_conv.0.norm.bias'] is official['model.final_conv.0.block.2.bias']
    assert sorted(found) == sorted(shapes)
    with pytest.raises(ValueError, match=r'f.pth: model.final_conv.1.weight has shape '
                       r'\(4, 8, 1\), the parameter final_conv.1.weight of the U-Net built from '
                       r'the config \(4, 8, 2\)'):
        from_official(dict(shapes, **{'final_conv.1.weight': (4, 8, 2)}), official, 'f.pth')
    with pytest.raises(ValueError, match=r'no model.mid.weight for the parameter mid.weight'):
        from_official(dict(shapes, **{'mid.weight': (1,)}), official, 'f.pth')
    with pytest.raises(ValueError, match=r"official parameters \['model.extra'\] have no "
                       'counterpart'):
        from_official(shapes, dict(official, **{'model.extra': torch.ones(1)}), 'f.pth')
