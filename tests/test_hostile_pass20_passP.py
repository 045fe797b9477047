"""Session 15, hostile pass (passP, log /tmp/passP_log.md): LaTeX rows starting with '[' or
'*', the params figure's dodge of a chain of neighbours, --status of a unit whose work dir
holds another run or whose Slurm task finished, report's K read with other digits, the overlap
figure's percentages, variant numbers written 0 / 0.0. Each test fails on bc5f1b3 (its
no-false-refusal / no-false-caveat halves pass there too)."""
import json

import numpy as np
import re
from pathlib import Path

import pytest

from test_hostile_pass17_passP import T3, renamed, tables


# ------------------------------------------- LX1-LX3, L11, L13: a LaTeX row starting '[' or '*'
def latex_rows(latex: str) -> list:
    """The lines of the tabular's body (the method rows)."""
    body = latex.split(r'\midrule', 1)[1].split(r'\midrule', 1)[0]
    return [line for line in body.splitlines() if line.strip()]


@pytest.mark.parametrize('names', [
    {'ViterbiPlanNet': '[12] SCHEMA', 'Base Model': '[2pt] Base'},
    {'ViterbiPlanNet': ' [x] lead blank', 'Base Model': '*Base (ours)'},
    {'ViterbiPlanNet': '*', 'Base Model': '* 2'}])
def test_a_latex_row_never_starts_with_a_bracket_or_a_star(tmp_path, names):
    """LX1-LX3, L11, L13 (wrong): a row line starting '[' (blanks skipped) was read by the
    \\midrule or \\\\ before it as their optional argument: '[2pt] Base' printed 'Base',
    '[12] SCHEMA' stopped pdfLaTeX ("Illegal unit of measure"), ' [x] ...' hung it; a '*' after
    \\\\ was its star ('* 2' printed '2'). The names stay as written."""
    _, latex = tables(renamed(tmp_path, names))
    rows = latex_rows(latex)
    assert not [line for line in rows if line.lstrip().startswith(('[', '*'))], rows
    for name in names.values():
        assert any(line.startswith('{}' + name) for line in rows), (name, rows)


def test_other_latex_rows_are_unchanged(tmp_path):
    """No-false-change half: names not starting with '[' or '*' (a bracket or star later in
    the name included) are written as before."""
    _, latex = tables(renamed(tmp_path, {'ViterbiPlanNet': 'VPN [12]*', 'Base Model': 'x*'}))
    rows = latex_rows(latex)
    assert any(line.startswith('VPN [12]*') for line in rows)
    assert any(line.startswith('x*') for line in rows)
    assert not any(line.startswith('{}') for line in rows)


# --------------------------------------------------- VI1-VI3: variant numbers written 0 and 0.0
PKG_QUALITY = T3.parent / 'pkg_quality_niv.jsonl'


def whole_numbers_as_int(tmp_path, csv=False) -> Path:
    """The kept pkg-quality rows with seed 1's whole-number levels written as integers (0 for
    0.0, 1 for 1.0), as a spreadsheet saves them (``csv``: a CSV of those rows)."""
    from vpn_plugin.protocol.results import read_results, write_results_csv
    rows = []
    for line in PKG_QUALITY.read_text().splitlines():
        row = json.loads(line)
        if row['seed'] == 1 and float(row['variant'].get('level', 0.5)).is_integer():
            row['variant']['level'] = int(row['variant']['level'])
        rows.append(json.dumps(row))
    path = tmp_path / 'levels.jsonl'
    path.write_text('\n'.join(rows) + '\n')
    if csv:
        write_results_csv(tmp_path / 'levels.csv', read_results([path]))
        return tmp_path / 'levels.csv'
    return path


@pytest.mark.parametrize('csv', [False, True])
@pytest.mark.parametrize('variant', [['perturbation=none'], ['perturbation=none', 'level=0'],
                                     ['perturbation=weight_noise', 'level=1.0']])
def test_a_variant_number_written_0_or_0_0_is_one_setting(tmp_path, csv, variant):
    """VI1-VI3 (wrong, false refusals): seed 1's level 0 beside the other seeds' 0.0 was refused
    as "rows ... differ in variant" (their JSON texts were compared); the table is the one of
    the rows as written (no-false-refusal: the same figures)."""
    from tool_modules import load_tool
    import contextlib
    import io
    tables_made = []
    for path in (PKG_QUALITY, whole_numbers_as_int(tmp_path, csv)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            load_tool('report').main([str(path), '--variant', *variant, '--metrics',
                                      'success_rate', '--num-resamples', '20',
                                      '--num-diff-resamples', '20'])
        tables_made.append(out.getvalue())
    assert tables_made[0] == tables_made[1]


def test_a_row_identity_reads_whole_floats_as_their_integer():
    """The one identity text (``results.identity_text``, rows' key and the report's cells):
    20.0 and 20 are one value; a boolean is not a number; 0.5 stays 0.5."""
    from vpn_plugin.protocol.results import identity_text
    assert identity_text({'a': 0.0, 'b': [1.0, 2.5]}) == identity_text({'b': [1, 2.5], 'a': 0})
    assert identity_text({'a': True}) != identity_text({'a': 1})
    assert identity_text({'a': -0.0}) == identity_text({'a': 0})


# ------------------------------------------------------ F04, F05: report's K in other digit forms
@pytest.mark.parametrize('flag', ['--num-resamples', '--num-diff-resamples'])
@pytest.mark.parametrize('text', ['1_000', '１０００', '١٠٠٠'])
def test_report_resamples_are_read_as_every_integer_flag(flag, text):
    """F04, F05 (silent): report's K was read by int(), which takes '1_000' and other digits
    than ASCII, while every other integer flag (--digits, --horizons) refuses them."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit):
        load_tool('report').parse_args([str(T3), flag, text])


@pytest.mark.parametrize('text, value', [('1000', 1000), (' 1000', 1000), ('+20', 20)])
def test_report_resamples_in_plain_forms_are_read(text, value):
    """No-false-refusal half: ASCII digits, a blank, a '+' (as --digits / --horizons)."""
    from tool_modules import load_tool
    args = load_tool('report').parse_args([str(T3), '--num-resamples', text,
                                           '--num-diff-resamples', text])
    assert args.num_resamples == value == args.num_diff_resamples


# ------------------------------------------ P13, P18: --status of a foreign or a finished unit
def status_of(tmp_path, state: dict, run_json=None, task=None):
    """The status of standard_niv's ViterbiPlanNet T=3 seed 0 (smoke) whose work dir holds
    ``unit_state.json`` = ``state`` (and ``run.json`` = ``run_json``: the runner's identity
    of the unit when None); ``task``: the Slurm task it was submitted in."""
    from mmengine.config import Config
    from vpn_plugin.protocol import status as status_module
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    root = Path(__file__).resolve().parents[1]
    protocol = Config.fromfile(root / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    work_dir = Path(runner.work_dir(units[0]))
    work_dir.mkdir(parents=True)
    (work_dir / 'unit_state.json').write_text(json.dumps(state))
    identity = json.loads(json.dumps(runner.identity(units[0]), sort_keys=True, default=str))
    if run_json is not False:
        (work_dir / 'run.json').write_text(json.dumps(identity if run_json is None
                                                      else run_json(identity)))
    original = status_module.read_submissions
    if task:
        status_module.read_submissions = lambda folder: {str(work_dir.absolute()): task}
    try:
        (status,) = status_module.unit_statuses(runner, units, queue=lambda jobs: {})
    finally:
        status_module.read_submissions = original
    return status


FINISHED = dict(state='done', started=1.0, ended=2.0, pid=1, host='vm', attempts=1)


def test_status_names_a_work_dir_of_other_settings(tmp_path):
    """P13 (wrong): a work dir trained with other cfg_options than the protocol's now (an
    edited protocol file) was "interrupted: its run finished, but its rows are not in ...: a
    rerun tests it again", while a rerun refuses it (claim_work_dir): it says so."""
    status = status_of(tmp_path, FINISHED, run_json=lambda identity: dict(
        identity, cfg_options={'train_dataloader.batch_size': 16}))
    assert status.state == 'failed'
    assert 'a rerun refuses it' in status.why and 'holds a run made with other settings' \
        in status.why and 'train_dataloader.batch_size' in status.why, status.why
    assert 'tests it again' not in status.why


def test_status_of_a_work_dir_of_the_same_settings_is_unchanged(tmp_path):
    """No-false-refusal half: the same run.json, the same status as before."""
    status = status_of(tmp_path, FINISHED)
    assert status.state == 'interrupted' and 'its run finished, but its rows are not in' \
        in status.why


def test_status_of_a_finished_slurm_unit_whose_rows_are_missing(tmp_path):
    """P18 (wrong): a unit its Slurm task finished (unit_state: done, this task's), whose rows
    were deleted, was "interrupted: its task 169_0 ended before the unit finished"."""
    status = status_of(tmp_path, dict(FINISHED, job='169_0'), task=('169_0', 'log.err'))
    assert status.state == 'interrupted'
    assert 'its run finished, but its rows are not in' in status.why, status.why
    assert 'before the unit finished' not in status.why


def test_status_of_a_slurm_unit_cut_by_its_task_is_unchanged(tmp_path):
    """No-false-change half: a unit its task started and did not finish is still named so."""
    status = status_of(tmp_path, dict(state='running', started=1.0, pid=1, host='vm',
                                      attempts=1, job='169_0'), task=('169_0', 'log.err'))
    assert status.state == 'interrupted'
    assert 'its task 169_0 ended before the unit finished' in status.why, status.why


# ------------------------------------------------- PL2: the dodge of a chain of close counts
def test_a_chain_of_close_counts_is_drawn_at_its_counts():
    """PL2 (wrong): 18 methods of 700K..2.4M parameters (each close to the next, their error
    bars overlapping the neighbours') were one dodged group respread around its mean: 700K
    was drawn at ~450K, 2.4M at ~4.5M, on an axis of counts. A marker of its own count is
    never moved more than one dodge step from it."""
    from vpn_plugin.protocol import plots
    counts = [100_000 * (i + 1) for i in range(24)]
    points = {f'm{i:02d}': (count, 13 + 1.3 * i, 12.5 + 1.3 * i, 13.5 + 1.3 * i)
              for i, count in enumerate(counts)}
    step = plots.dodge_step(counts)
    drawn, spread = plots.dodged_positions(points, log=True, y_room=0.7, step=step)
    moves = {m: abs(np.log10(drawn[m]) - np.log10(p[0])) for m, p in points.items()}
    assert max(moves.values()) <= step + 1e-12, moves
    assert not any(len(group) > 2 for group in spread), spread


def test_markers_of_one_count_are_still_spread_around_it():
    """No-false-change half: five methods of one count (a VPN and its four ablations) are
    spread around it, step apart, as before; two close counts too."""
    from vpn_plugin.protocol import plots
    points = {name: (5_549_602, 1.0, 0.5, 1.5) for name in 'ABCDE'}
    drawn, spread = plots.dodged_positions(points, log=True, y_room=0.5)
    xs = sorted(np.log10(list(drawn.values())))
    assert spread == [list('ABCDE')]
    assert np.diff(xs) == pytest.approx([plots.DODGE_DECADES] * 4)
    assert np.mean(xs) == pytest.approx(np.log10(5_549_602))


# ---------------------------------------------------- OV2: the overlap figure's percentages
def test_the_overlap_figure_says_over_which_seeds_its_percentages_are(tmp_path, monkeypatch):
    """OV2 (silent): the Venn's note said "% = mean over seeds" beside "summed over 3 seeds"
    while a share is the mean over the seeds whose reference has such windows (100.0 % of one
    seed's successes when the others had none); the .md said so, the figure did not."""
    from test_report_plots import figure_texts, overlap_rows
    from vpn_plugin.protocol.plots import error_overlap, plot_error_overlap
    texts = figure_texts(monkeypatch)
    rows, _ = overlap_rows(tmp_path)
    plot_error_overlap([error_overlap(rows, 'VPN', 'Base')], tmp_path / 'venn')
    note = ' '.join(' '.join(texts).split())
    assert 'mean over the seeds whose reference has such windows' in note, note
