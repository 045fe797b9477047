"""tools/compare_official_training.py --method kepp against a stand-in checkout."""
import pytest

from vpn_plugin.protocol.official.framework import SideRun

from official_stand_ins import kepp_stand_in, run_tool, smaller_ours, tool_error


def test_kepp_against_a_stand_in(shared_data, tmp_path, monkeypatch):
    official = kepp_stand_in(tmp_path)
    out = tmp_path / 'out'
    # U-Net width 32, 10 diffusion steps instead of NIV's 50: the comparison's stages, graph
    # and windows are under test, not our sampling
    smaller_ours(monkeypatch, 'kepp', **{'model.dim': 32, 'model.n_timesteps': 10})
    run_tool('--method', 'kepp', '--official-dir', official, '--epochs', 10, '--horizon', 4,
             '--seeds', 3, '--out', out, '--data-root', shared_data, '--size', 'batch_size=4',
             '--size', 'n_train_steps=1')
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
