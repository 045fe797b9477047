"""tools/compare_official_training.py --method cefito against a stand-in checkout."""
import re

import pytest

from vpn_plugin.protocol.official.framework import SideRun

from official_stand_ins import cefito_stand_in, run_tool, smaller_ours, tool_error


def test_cefito_against_a_stand_in(shared_data, tmp_path, monkeypatch):
    official = cefito_stand_in(tmp_path)
    out = tmp_path / 'out'
    smaller_ours(monkeypatch, 'cefito', **{'model.hidden_dim': 32, 'model.num_heads': 2,
                                           'model.num_negatives': 4})
    run_tool('--method', 'cefito', '--official-dir', official, '--epochs', 6, '--seeds', 2,
             '--out', out, '--data-root', shared_data, '--size', 'classifier_epochs=3',
             '--official-variant', 'oracle_task')
    text = (out / 'comparison.md').read_text()
    for change in ('train.epochs=6 (niv_t3.yaml: 200)', 'eval.oracle_task=false',
                   'task_classifier.epochs=3', 'MiniLM stand-in',
                   '[variant] oracle_task: scripts/train.py rerun with --set '
                   'eval.oracle_task=true'):
        assert change in text, change
    # the official defect switched back on: train.py rerun planning with the true task
    oracle = SideRun.load(out / 'official/seed2.oracle_task.json')
    assert oracle.metrics == pytest.approx(dict(success_rate=27, mean_accuracy=54,
                                                miou_legacy=81))
    assert oracle.stages['check']['max_loss_difference_to_main_run'] == pytest.approx(0)
    assert 'eval.oracle_task=true' in (out / 'official/seed2/train_oracle_task.command.txt'
                                       ).read_text()
    table = text.split('official variant oracle_task against')[1]
    assert re.search(r'\| CEFITO \(official, oracle_task\)†? \| \**27\.00', table), table
    assert re.search(r'\| Δ \| \+5\.00', table), table
    run, ours = SideRun.load(out / 'official/seed2.json'), SideRun.load(out / 'ours/seed2.json')
    assert run.losses['total'] == pytest.approx([4 / e + .02 for e in range(1, 7)], abs=1e-4)
    assert run.metrics['success_rate'] == 22 and run.selected_epoch == 3
    assert run.windows == ours.windows == dict(train=697, test=270)
    classifier = run.stages['classifier']
    assert classifier['losses'] == pytest.approx([1, 1 / 2, 1 / 3], abs=1e-4)
    assert (classifier['accuracy'], classifier['selected_accuracy'],
            classifier['selected_epoch']) == (85, 90, 2)
    assert len(ours.stages['classifier']['losses']) == 3 and len(ours.losses['total']) == 6
    assert tool_error('--method', 'cefito', '--official-dir', official, '--epochs', 4,
                      '--out', tmp_path / 'other').startswith('error: --epochs 4: the official')
    assert 'runs with 512-d frames only' in tool_error(
        '--method', 'cefito', '--official-dir', official, '--epochs', 6, '--frame-dim', 64,
        '--out', tmp_path / 'other')
    assert "--official-variant ['oracle']: not a variant of the CEFITO comparison; expected " \
           "one of ['oracle_task']" in tool_error(
               '--method', 'cefito', '--official-dir', official, '--epochs', 6,
               '--official-variant', 'oracle', '--out', tmp_path / 'other')
