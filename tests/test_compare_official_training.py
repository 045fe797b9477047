"""tools/compare_official_training.py: SCHEMA against its stand-in, the reading of official logs
and records, the loss figure (PDPP, KEPP, CEFITO: test_compare_official_<method>.py).
"""
import json
import re

import numpy as np
import pytest

from vpn_plugin.protocol.official.framework import EpochProgress, SideRun, read_records
from vpn_plugin.protocol.official.schema import read_schema_log

from official_stand_ins import SMALL, run_tool, schema_stand_in, tool_error


def test_schema_against_a_stand_in(shared_data, tmp_path, capsys):
    official = schema_stand_in(tmp_path)
    out = tmp_path / 'out'
    printed = run_tool('--method', 'schema', '--official-dir', official, '--epochs', 2,
                       '--seeds', 0, 1, 2, '--out', out, '--data-root', shared_data, *SMALL)
    text = (out / 'comparison.md').read_text()
    assert text in printed
    # every change against the official run is listed
    for change in ('--epochs 2 (run_niv.sh: 500)', '--embed_dim 16 (run_niv.sh: 128)',
                   'niv_state_prompt_features.npy replaced', 'torch.Tensor.cuda',
                   "empty module 'clip'", '--features_dir'):
        assert change in text, change
    # the stand-in's losses and metrics come back, per epoch and seed
    official = [SideRun.load(out / f'official/seed{s}.json') for s in (0, 1, 2)]
    ours = [SideRun.load(out / f'ours/seed{s}.json') for s in (0, 1, 2)]
    assert official[1].losses['state'] == [3.01, 1.51]
    assert official[1].losses['total'] == pytest.approx([3 * x + 0.05 for x in (3.01, 1.51)])
    assert official[2].metrics == dict(success_rate=7.0, mean_accuracy=14.0, miou_legacy=21.0)
    assert official[2].selected['success_rate'] == 11.0 and official[2].selected_epoch == 1
    # both sides saw the same windows: the NIV test split and every training window
    assert official[0].windows == ours[0].windows == dict(train=697, test=270)
    assert len(ours[0].losses['total']) == 2 and all(s > 0 for s in ours[0].train_seconds)
    assert set(ours[0].metrics) == {'success_rate', 'mean_accuracy', 'miou_legacy'}
    # the table: official last epochs (5, 6, 7), selected (9, 10, 11), vs ours, CIs over 3 seeds
    assert '| SCHEMA (official, last epoch)† | ' in text
    assert re.search(r'SCHEMA \(official, its own selection\)†[^\n]*10\.00 ± ', text)
    assert re.search(r'\| Δ \| [+-]\d+\.\d\d\*? ± \d', text)
    assert 'ours' in text and 'x faster' in text
    assert (out / 'loss_curves.png').is_file() and (out / 'loss_curves.pdf').is_file()
    saved = json.loads((out / 'comparison.json').read_text())
    assert saved['runs']['official'][0]['losses']['state'] == [3.0, 1.5]
    # the checkout itself was not touched; its copy got our text features
    assert (tmp_path / 'SCHEMA/data/state_description_features/'
            'niv_state_prompt_features.npy').read_text() == ''
    copied = np.load(out / 'official_copy/data/state_description_features/'
                     'niv_state_prompt_features.npy')
    np.testing.assert_array_equal(copied, np.load(shared_data / 'niv/state_features_clip.npy'))
    # a rerun reuses every finished side (nothing trains again), other settings are refused
    capsys.readouterr()
    run_tool('--method', 'schema', '--official-dir', tmp_path / 'SCHEMA', '--epochs', 2,
             '--seeds', 0, 1, 2, '--out', out, '--data-root', shared_data, *SMALL)
    assert (out / 'comparison.md').read_text() == text
    assert 'seed 0' not in capsys.readouterr().err  # no side ran again
    assert 'epochs: 2 there, 3 now' in tool_error(
        '--method', 'schema', '--official-dir', tmp_path / 'SCHEMA', '--epochs', 3,
        '--seeds', 0, '--out', out, '--data-root', shared_data, *SMALL)


def test_different_windows_stop_the_comparison(shared_data, tmp_path, monkeypatch):
    """An official run that trained on other windows (here: the stand-in reports one fewer)
    is no comparison: exit 1 naming both counts before our side trains, no report written."""
    official = schema_stand_in(tmp_path)
    out = tmp_path / 'out'
    monkeypatch.setenv('STAND_IN_DROP', '1')
    message = tool_error('--method', 'schema', '--official-dir', official, '--epochs', 1,
                         '--seeds', 0, '--out', out, '--data-root', shared_data, *SMALL)
    assert "{'train': 696, 'test': 270} windows, ours {'train': 697, 'test': 270}" in message
    assert not (out / 'comparison.md').exists() and not (out / 'ours/seed0.json').exists()


def test_a_failing_official_run_is_named(shared_data, tmp_path):
    official = schema_stand_in(tmp_path)
    (official / 'main.py').write_text('import sys\nprint("no GPU found")\nsys.exit(3)\n')
    message = tool_error('--method', 'schema', '--official-dir', official, '--epochs', 1,
                         '--seeds', 0, '--out', tmp_path / 'out', '--data-root', shared_data)
    assert 'exited with status 3' in message and 'no GPU found' in message


def test_refuses_what_is_not_a_checkout(tmp_path):
    message = tool_error('--method', 'schema', '--official-dir', tmp_path, '--epochs', 1,
                         '--out', tmp_path / 'out')
    assert 'lacks' in message and 'WenliangGuo/SCHEMA' in message
    message = tool_error('--method', 'schema', '--official-dir', tmp_path, '--epochs', 1,
                         '--out', tmp_path / 'out', '--size', 'width=3')
    assert "'width'" in message and 'embed_dim' in message


def test_schema_log_reading_and_seconds():
    """Epoch seconds from the recorded times: training = from the end of the previous test
    pass (the first: from the window-count line) to the end of the training block."""
    lines = ['Training set volumn: 10 Testing set volumn: 4']
    for epoch in (1, 2):
        lines += [f'Epoch: {epoch} State Loss: 2.00 Top1 Acc: 1.00%', '\tAction Loss: 3.00, SR',
                  '\tTask Loss: 1.00, Acc1', '\tState Pred Loss: 0.50',
                  f'Epoch: {epoch} State Loss: 9.00 Top1 Acc: 1.00%', '\tAction Loss: 9.00',
                  f'\tViterbi, SR: {10 * epoch:.2f}% Acc: 20.00% MIoU: 30.00',
                  '\tTask Loss: 9.00', '\tState Pred Loss: 9.00']
    times = [0.0] + [1.0, 1, 1, 5.0, 5, 5, 5, 5, 7.0] + [8, 8, 8, 17.0, 17, 17, 17, 17, 20.0]
    run = read_schema_log(list(zip(times, lines)), 2, 0, 0.1)
    assert run.train_seconds == [5.0, 10.0] and run.eval_seconds == [2.0, 3.0]
    assert run.losses['total'] == pytest.approx([6.05, 6.05])
    assert run.metrics['success_rate'] == 20.0 and run.selected_epoch == 2
    with pytest.raises(ValueError, match='expected 3 of each'):
        read_schema_log(list(zip(times, lines)), 3, 0, 0.1)


def test_records_and_progress(tmp_path):
    path = tmp_path / 'r.jsonl'
    path.write_text('[1.5, "a"]\n[2.5, "b"]\n[3.0, "trunc')
    assert read_records(path) == [(1.5, 'a'), (2.5, 'b')]
    clock = iter([0.0, 10.0, 20.0, 21.0]).__next__
    progress = EpochProgress(4, clock=clock)
    progress.start('official')
    progress.epoch('official')  # 10 s per official epoch
    assert progress.eta_text() == ''  # ours not measured yet
    progress.start('ours')
    progress.epoch('ours')      # 1 s per epoch of ours
    assert progress.eta_text() == ' (eta 1 min)'  # 3 x 10 + 3 x 1 s


def test_loss_figure_legend_is_clear_of_every_panel(tmp_path, monkeypatch):
    """The legend sits above the first panel: KEPP's curves (a spike after the warm-up) ran
    under a legend placed inside it."""
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.official import summary
    drawn = {}
    monkeypatch.setattr(plots, 'save_figure', lambda fig, stem: drawn.setdefault('fig', fig))

    def run(side, seed, scale):
        curve = [200, 1800, 1700 + 10 * seed, 700, 400]
        return SideRun(side, seed, dict(total=[scale * v for v in curve]), [1.0] * 5, {},
                       {}, stages=dict(step_model=dict(losses=curve[::-1], seconds=[1.0] * 5)))
    runs = {side: [run(side, s, 1 + 0.1 * (side == 'ours')) for s in range(3)]
            for side in ('official', 'ours')}
    summary.plot_losses('KEPP', runs, tmp_path / 'figure')
    fig = drawn['fig']
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend, = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_ylabel()
    assert box.y0 >= fig.axes[0].get_window_extent(renderer).y1
