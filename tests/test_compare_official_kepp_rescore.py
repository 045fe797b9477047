"""tools/compare_official_training.py --rescore-with-ours: official KEPP weights scored by ours."""
import json
from pathlib import Path

import pytest

from vpn_plugin.protocol.official.framework import SideRun

from official_stand_ins import kepp_stand_in, run_tool, schema_stand_in, smaller_ours, tool_error


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


def test_kepp_rescored_with_our_evaluator(shared_data, tmp_path, monkeypatch):
    """--rescore-with-ours loads the kept official weights into our model and scores them with
    our evaluator. The oracle: official weights that are our own trained weights of the other
    seed (official seed 3 <- our seed 4, seed 4 <- our seed 3) score exactly what our side
    scored for that seed (the evaluator's sampling noise is the model's sampling_seed, not the
    run's seed); had the conversion kept our template's weights, taken the official 'model'
    weights (zeros) or crossed step and plan, the seeds would not swap."""
    official = kepp_stand_in(tmp_path)
    out = tmp_path / 'out'
    # 10 diffusion steps instead of NIV's 50: the weights' route is under test, not sampling
    smaller_ours(monkeypatch, 'kepp', **{'model.dim': 32, 'model.n_timesteps': 10})
    args = ['--method', 'kepp', '--official-dir', official, '--epochs', 5, '--horizon', 4,
            '--seeds', 3, 4, '--out', out, '--data-root', shared_data, '--size',
            'batch_size=4', '--size', 'n_train_steps=2']
    run_tool(*args)
    kept = {s: out / f'official/seed{s}/checkpoints' for s in (3, 4)}
    assert all((kept[s] / f'{m}.pth.tar').is_file() for s in (3, 4) for m in ('step', 'plan'))
    ours = {s: SideRun.load(out / f'ours/seed{s}.json') for s in (3, 4)}
    assert ours[3].metrics != ours[4].metrics  # the two seeds' models are told apart
    for seed, other in ((3, 4), (4, 3)):
        checkpoint = next((out / 'ours').rglob(f'seed{other}_*/epoch_5.pth'))
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
