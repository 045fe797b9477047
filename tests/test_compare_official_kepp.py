"""tools/compare_official_training.py --method kepp against a stand-in checkout, and
--rescore-with-ours (official KEPP weights scored by ours) on the same run."""
import json
from pathlib import Path

import pytest

from vpn_plugin.protocol.official.framework import SideRun

from official_stand_ins import kepp_stand_in, run_tool, schema_stand_in, smaller_ours, tool_error


@pytest.fixture(scope='module')
def kepp_run(shared_data, tmp_path_factory):
    """One comparison of seeds 3 and 4 (10 epochs of 1 step) that both tests read (the suite's
    longest run, once): ``(official checkout, out folder, the tool's arguments)``; ours small
    (U-Net width 32, 10 diffusion steps instead of NIV's 50: the comparison's stages, graph,
    windows and the weights' route are under test, not our sampling) for the whole module
    (``--rescore-with-ours`` builds our model again)."""
    root = tmp_path_factory.mktemp('kepp')
    official, out = kepp_stand_in(root), root / 'out'
    args = ['--method', 'kepp', '--official-dir', official, '--epochs', 10, '--horizon', 4,
            '--seeds', 3, 4, '--out', out, '--data-root', shared_data, '--size',
            'batch_size=4', '--size', 'n_train_steps=1']
    with pytest.MonkeyPatch.context() as monkeypatch:
        smaller_ours(monkeypatch, 'kepp', **{'model.dim': 32, 'model.n_timesteps': 10})
        run_tool(*args)
        yield official, out, args


def test_kepp_against_a_stand_in(kepp_run, tmp_path):
    official, out, _ = kepp_run
    text = (out / 'comparison.md').read_text()
    for change in ('step/inference.py: its checkpoint path', 'PKG/graph_creation.py',
                   'kepp_action_list.txt', '--epochs 10'):
        assert change in text, change
    run, ours = SideRun.load(out / 'official/seed3.json'), SideRun.load(out / 'ours/seed3.json')
    assert run.losses['total'] == pytest.approx([3 / (e + 1) for e in range(10)])
    assert run.metrics['success_rate'] == 13 and run.selected_epoch == 5
    step = run.stages['step_model']
    assert step['losses'] == pytest.approx([5 / (e + 1) for e in range(10)])
    assert (step['accuracy'], step['selected_accuracy'], step['selected_epoch']) == (60, 40, 5)
    # the stand-in's graph is KEPP's counting: ours (build_graph) is the same, edge for edge
    graph = run.stages['graph']
    assert graph['identical_structure'] and graph['max_weight_difference'] < 1e-12
    assert graph['edges'] == graph['ours_edges'] > 0
    assert run.windows == ours.windows and ours.windows['train'] > 0
    assert len(ours.stages['step_model']['losses']) == 10
    assert 'pre-stage step_model' in text and 'identical_structure True' in text
    assert tool_error('--method', 'kepp', '--official-dir', official, '--epochs', 5,
                      '--out', tmp_path / 'other').startswith(
        'error: --horizon 3: the official KEPP retrieves paths of 4 actions only')


def official_weights(checkpoint: Path, out: Path) -> None:
    """Our trained KEPP ``checkpoint`` written as the official ``save_checkpoint`` files of its
    step and plan models (``GaussianDiffusion`` state dicts, PDPP's names under
    ``module.model.``) in ``out``: the weights our test scores (mmengine's EMA, saved as
    ``state_dict``) as ``ema``, zeros as ``model`` (the official validation samples with
    ``ema``: so must ours)."""
    import torch
    from vpn_plugin.engine.checkpoint import read_checkpoint
    from vpn_plugin.models.temporal_unet import official_name
    scored = read_checkpoint(str(checkpoint))['state_dict']
    for model in ('step', 'plan'):
        prefix = f'{model}.unet.'
        weights = {'module.model.' + official_name(k[len(prefix):]): v.clone()
                   for k, v in scored.items() if k.startswith(prefix)}
        assert len(weights) > 100
        torch.save(dict(ema=weights, model={k: torch.zeros_like(v) for k, v in weights.items()},
                        epoch=10), out / f'{model}.pth.tar')


def test_kepp_rescored_with_our_evaluator(kepp_run, shared_data, tmp_path):
    """--rescore-with-ours loads the kept official weights into our model and scores them with
    our evaluator. The oracle: official weights that are our own trained weights of the other
    seed (official seed 3 <- our seed 4, seed 4 <- our seed 3) score exactly what our side
    scored for that seed (the evaluator's sampling noise is the model's sampling_seed, not the
    run's seed); had the conversion kept our template's weights, taken the official 'model'
    weights (zeros) or crossed step and plan, the seeds would not swap."""
    _, out, args = kepp_run
    kept = {s: out / f'official/seed{s}/checkpoints' for s in (3, 4)}
    assert all((kept[s] / f'{m}.pth.tar').is_file() for s in (3, 4) for m in ('step', 'plan'))
    ours = {s: SideRun.load(out / f'ours/seed{s}.json') for s in (3, 4)}
    assert ours[3].metrics != ours[4].metrics  # the two seeds' models are told apart
    for seed, other in ((3, 4), (4, 3)):
        checkpoint = next((out / 'ours').rglob(f'seed{other}_*/epoch_10.pth'))
        official_weights(checkpoint, kept[seed])
    text = run_tool(*args, '--rescore-with-ours')
    rescored = {s: SideRun.load(out / f'official/seed{s}.rescored.json') for s in (3, 4)}
    assert rescored[3].metrics == pytest.approx(ours[4].metrics, abs=1e-9)
    assert rescored[4].metrics == pytest.approx(ours[3].metrics, abs=1e-9)
    assert rescored[3].side == 'official (our evaluator)'
    assert rescored[3].losses == SideRun.load(out / 'official/seed3.json').losses
    assert 'both trainings scored by our evaluator' in text
    assert 'KEPP (official, our evaluator)' in text and 'the evaluator alone' in text
    assert len(json.loads((out / 'comparison.json').read_text())['rescored']) == 2
    # runs made before the weights were kept are named, with the fix
    for path in kept[3].iterdir():
        path.unlink()
    (out / 'official/seed3.rescored.json').unlink()
    assert 'were not kept (runs made before they were); delete' in tool_error(
        *args, '--rescore-with-ours')
    assert "cannot load the official weights into our model yet" in tool_error(
        '--method', 'schema', '--official-dir', schema_stand_in(tmp_path), '--epochs', 1,
        '--out', tmp_path / 'schema', '--data-root', shared_data, '--rescore-with-ours')
