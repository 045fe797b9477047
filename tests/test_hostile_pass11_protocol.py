"""Tenth hostile pass (issue 37), the protocol and what follows training (meaning4): the ninth
pass's leftovers in this scope and this pass's findings, each test failing on main 1c6544e (the
behaviour before its fix)."""
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from mmengine.config import Config

from tool_modules import load_tool
from vpn_plugin.core.stats import bootstrap_ci, bootstrap_difference, seed_interval
from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
from vpn_plugin.protocol.slurm import SlurmRequest, plan_array, submit
from vpn_plugin.protocol.status import RECORDS

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------ leftover 1: --poll-seconds
@pytest.mark.parametrize('value', ['86400', '601', 'inf'])
def test_poll_seconds_has_an_upper_bound(capsys, value):
    """Before: --poll-seconds 86400 was taken: --wait looked at the queue once a day."""
    tool = load_tool('run_protocol')
    with pytest.raises(SystemExit) as exit_:
        tool.parse_args(['configs/protocol/standard_niv.py', '--launcher', 'slurm',
                         '--partition', 'debug', '--wait', '--poll-seconds', value])
    assert exit_.value.code == 2
    assert re.search(r'--poll-seconds: .*expected a number > 0 and <= 600 \(--wait must see '
                     r'the end of the protocol within 10 minutes\)', capsys.readouterr().err)
    args = tool.parse_args(['configs/protocol/standard_niv.py', '--launcher', 'slurm',
                            '--partition', 'debug', '--wait', '--poll-seconds', '600'])
    assert args.poll_seconds == 600.0


# ------------------------------------------------------------ leftover 2: the time floor
def niv_plan(tmp_path, request, limit):
    protocol = Config.fromfile(REPO / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    return plan_array(ProtocolRunner(protocol, tmp_path, max_epochs=30), units, request, 4.32,
                      limit=limit)


def test_a_partition_maxtime_below_the_floor_is_refused(tmp_path, sinfo_of_no_nodes):
    """Before: a partition with MaxTime 1 minute capped the cost model's limit to 1 minute,
    below submitit's 90 s signal lead: every task requeued as it started, nothing trained."""
    with pytest.raises(ValueError, match=r'--partition tiny: its MaxTime caps every task at '
                       r'00:01:00 \(partition tiny MaxTime 1\).* expected a partition whose '
                       r'MaxTime is at least 2 minutes'):
        niv_plan(tmp_path, SlurmRequest('tiny'), (1, 'partition tiny MaxTime 1'))
    # a --time-limit above such a MaxTime stays refused as before, and 2 minutes pass
    with pytest.raises(ValueError, match='MaxTime'):
        niv_plan(tmp_path, SlurmRequest('tiny', time_limit=2), (1, 'partition tiny MaxTime 1'))
    plan = niv_plan(tmp_path, SlurmRequest('short'), (2, 'partition short MaxTime 2'))
    assert plan.time_limit == 2


# ------------------------------------------------------------ leftover 3: records deleted
def test_a_running_job_the_records_lost_is_named_not_submitted_again(tmp_path):
    """Before: the records folder deleted while its array ran, the same command submitted the
    units a second time (the unit lock then kept it to one row)."""
    from vpn_plugin.protocol.slurm import check_unrecorded_jobs
    folder = tmp_path / 'standard_niv' / 'slurm'
    folder.mkdir(parents=True)
    with pytest.raises(ValueError, match=r'job array 296 \(RUNNING\) of this protocol folder '
                       r'.* does not record it .*scancel 296'):
        check_unrecorded_jobs(folder, {'296': 'RUNNING'})
    (folder / RECORDS).write_text(json.dumps(dict(array='296', tasks=[])) + '\n')
    check_unrecorded_jobs(folder, {'296': 'RUNNING'})  # recorded: a resubmission skips its units
    check_unrecorded_jobs(folder, {})


def test_submit_asks_slurm_for_the_folders_jobs_and_marks_its_own(tmp_path, monkeypatch):
    from vpn_plugin.protocol.status import folder_marker
    protocol = Config.fromfile(REPO / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=30)
    asked = []

    def marked(marker):
        asked.append(marker)
        return {'7': 'PENDING'}
    with pytest.raises(ValueError, match='job array 7 .PENDING.'):
        submit(runner, units, SlurmRequest('debug'), 4.32, marked=marked,
               limit=(120, 'partition debug MaxTime 2:00:00'))
    assert asked == [folder_marker(runner.root)]
    assert folder_marker(runner.root) != folder_marker(tmp_path / 'copy' / 'standard_niv')
    assert not list((tmp_path / 'standard_niv' / 'slurm').glob('*_submission.sh'))


def test_the_marker_becomes_the_sbatch_comment(tmp_path, monkeypatch):
    from submitit.slurm import slurm
    from vpn_plugin.protocol.slurm import make_executor, parse_options
    monkeypatch.setattr(slurm.SlurmExecutor, 'affinity', classmethod(lambda cls: 2))
    executor = make_executor(tmp_path, SlurmRequest('gpu'), 90, 'vpn_x',
                             marker='vpn_plugin:0123456789abcdef')._executor
    lines = slurm._make_sbatch_string(command='run', folder=tmp_path, map_count=1,
                                      **executor.parameters).splitlines()
    assert '#SBATCH --comment=vpn_plugin:0123456789abcdef' in lines
    with pytest.raises(ValueError, match='comment is set by'):
        parse_options(['comment=mine'])


# ------------------------------------------------------------ leftover 4: score contents
@pytest.mark.parametrize('scores, message', [
    ([20.0, True, 30.0], r"scores\[1\] = True \(bool\)"),
    ([20.0, np.True_, 30.0], r"scores\[1\] = .*True \(bool_?\)"),
    ([20.0, 25.0, '30.0'], r"scores\[2\] = '30.0' \(str\)"),
    ([20.0, None, 30.0], r"scores\[1\] = None \(NoneType\)"),
    ([20.0, 25.0, float('nan')], r"scores\[2\] = nan"),
    (np.array([20.0, np.inf, 30.0]), r"scores\[1\] = inf"),
    (np.array([20.0, 'x', 30.0], dtype=object), r"scores\[1\] = 'x' \(str\)"),
])
def test_score_contents_are_checked_at_the_stats_entry(scores, message):
    """Before: [20, True, 30] was averaged as [20, 1, 30] (np.asarray makes True 1.0), and a
    NaN was named without its position."""
    for call in (lambda: seed_interval(scores), lambda: bootstrap_ci(scores)):
        with pytest.raises((TypeError, ValueError), match=message):
            call()
    for name, call in (('a', lambda: bootstrap_difference(scores, [1.0, 2.0, 3.0])),
                       ('b', lambda: bootstrap_difference([1.0, 2.0, 3.0], scores))):
        with pytest.raises((TypeError, ValueError), match=message.replace('scores', name)):
            call()


def test_numbers_of_every_kind_still_pass():
    import torch
    expected = seed_interval([20.0, 25.0, 30.0])
    for scores in ([20, 25, 30], (20.0, 25.0, 30.0), np.array([20, 25, 30], dtype=np.int32),
                   [np.float32(20), np.float64(25), np.int64(30)],
                   torch.tensor([20.0, 25.0, 30.0], requires_grad=True),
                   [torch.tensor(20.0), torch.tensor(25.0), torch.tensor(30.0)]):
        assert seed_interval(scores) == pytest.approx(expected)
    assert math.isclose(seed_interval([7.5])[0], 7.5)


# ------------------------------------------------------------ this pass's findings
KEPT = REPO / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


@pytest.mark.parametrize('field, value', [('selection', 'unified: best val/success_rate'),
                                          ('shortened', '')])
def test_a_cell_never_pools_seeds_of_two_checkpoint_selections(field, value):
    """Before (R20 / R18): one seed's row tested on its best-validation checkpoint (or marked a
    full run) among seeds tested on the last epoch was averaged into the same cell; the
    caption listed both selections without saying which seeds."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    rows = read_results(KEPT)
    for row in rows:
        if row.method == 'ViterbiPlanNet' and row.seed == 1:
            setattr(row, field, value)
    with pytest.raises(ValueError, match=rf"rows of method 'ViterbiPlanNet' \(dataset "
                       rf"'crosstask', T=3\) differ in {field}: .*\(seed 1\)"):
        build_table(rows)
    build_table(read_results(KEPT))


def test_a_filter_that_matches_no_row_names_what_the_rows_hold():
    """Before (R32 / R33 / R44): "no results rows match protocol=None dataset='niv' ..." did
    not say which datasets, protocols or variant settings the file holds."""
    from vpn_plugin.protocol.results import filter_rows, read_results
    rows = read_results(REPO / 'docs' / 'results_data' / 'sample_efficiency_niv.jsonl')
    with pytest.raises(ValueError, match=r"dataset='crosstask' .*; the 60 rows hold protocol\(s\) "
                       r"\['sample_efficiency_niv'\], dataset\(s\) \['niv'\], variant setting\(s\) "
                       r"\['train_fraction=0.05', 'train_fraction=0.1'"):
        filter_rows(rows, dataset='crosstask')


def test_keep_results_refuses_two_measurements_of_one_run(tmp_path):
    """Before (K4): a results file holding one run's row twice with other metrics (a rerun
    appended) was kept as it was ("kept 31 rows"), a file report.py then refused."""
    lines = KEPT.read_text().splitlines()
    row = json.loads(lines[0])
    row['metrics'] = dict(row['metrics'], success_rate=0.05)
    given = tmp_path / 'given.jsonl'
    given.write_text('\n'.join(lines + [json.dumps(row)]) + '\n')
    tool = load_tool('keep_results')
    with pytest.raises(SystemExit, match=r"two rows of one run: 'train DVL / infer argmax' seed "
                       r"0 T=3 \(protocol 'main_t3'\) with other success_rate \(success_rate "
                       r"0.0 and 0.05\)"):
        tool.main([str(given), '--out', str(tmp_path / 'kept.jsonl')])
    assert not (tmp_path / 'kept.jsonl').exists()


def test_report_names_the_two_values_of_a_duplicate_seed(tmp_path):
    """Before (R3 / R4): "duplicate results ...; filter by protocol/variant first", advice that
    cannot help: rows differing in protocol or variant never reach one cell."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    rows = read_results(KEPT)
    copy = [r for r in rows if r.method == 'ViterbiPlanNet' and r.seed == 0][0]
    from dataclasses import replace
    with pytest.raises(ValueError, match=r"seed=0: two rows of one run setting \(.*"
                       r"main_t3_crosstask.jsonl:\d+ and a row: success_rate 25.8\d* and "
                       r"25.8\d*\), the same row twice"):
        build_table(rows + [replace(copy)])


def test_a_log_x_curve_refuses_a_point_it_cannot_draw(tmp_path):
    """Before (P7): a curve with --log-x over rows with train_fraction 0 exited 0, the x=0
    points gone from the figure (matplotlib drops x <= 0 on a log axis)."""
    from vpn_plugin.protocol.plots import plot_curves
    from vpn_plugin.protocol.results import read_results
    rows = read_results(REPO / 'docs' / 'results_data' / 'sample_efficiency_niv.jsonl')
    for row in rows:
        if row.variant['train_fraction'] == 0.05:
            row.variant['train_fraction'] = 0
    with pytest.raises(ValueError, match=r"train_fraction=0 \(line '.*', niv T=3\): a log x axis "
                       r"\(--log-x\) cannot show a value <= 0"):
        plot_curves(rows, 'train_fraction', 'success_rate', tmp_path / 'fig', log_x=True)
    assert not list(tmp_path.iterdir())


def test_an_interval_without_a_neighbour_is_drawn_as_an_error_bar():
    """Before (P3 / P4): a curve or efficiency figure of one x value noted "Bands: 90% bootstrap
    CI over 3 seeds per point" and drew no interval: a band of one x has no width."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from vpn_plugin.protocol.plots import _draw_line
    fig, ax = plt.subplots()
    _draw_line(ax, [(1.0, 30.0, 28.0, 33.0)])  # one point
    _draw_line(ax, [(1.0, 30.0, 28.0, 33.0), (2.0, 31.0, None, None),
                    (3.0, 32.0, 30.0, 34.0), (4.0, 33.0, 31.0, 35.0)])  # 1 alone, 3-4 a band
    bars = [c for c in ax.containers if isinstance(c, matplotlib.container.ErrorbarContainer)]
    assert len(bars) == 2
    segments = [seg for bar in bars for seg in bar.lines[2][0].get_segments()]
    assert sorted((float(s[0][0]), float(s[0][1]), float(s[1][1])) for s in segments) == [
        (1.0, 28.0, 33.0), (1.0, 28.0, 33.0)]
    plt.close(fig)


@pytest.mark.parametrize('group, message', [
    ('train_fraction', r'--group train_fraction is the --x key: each line would be one point'),
    ('nonexistent', r"--group 'nonexistent' is no variant key of the rows; they have none "
                    r'besides --x'),
])
def test_a_curve_group_names_another_variant_key(tmp_path, group, message):
    """Before (P19): --group equal to --x drew a line of one point per x value, the legend
    over the axes (exit 0); (P14) a --group key no row has was refused as "rows ... differ in
    variant", not naming the key."""
    from vpn_plugin.protocol.plots import plot_curves
    from vpn_plugin.protocol.results import read_results
    rows = read_results(REPO / 'docs' / 'results_data' / 'sample_efficiency_niv.jsonl')
    with pytest.raises(ValueError, match=message):
        plot_curves(rows, 'train_fraction', 'success_rate', tmp_path / 'fig', group_key=group)
    assert not list(tmp_path.iterdir())


def test_a_table_does_not_depend_on_the_order_of_its_rows():
    """Before (R28): the same rows in reverse order gave Δ +7.34 ± 1.09 instead of ± 1.03:
    the bootstrap draws positions, and the seeds were listed in file order (a job array's
    tasks end in any order)."""
    from vpn_plugin.protocol.report import build_table
    from vpn_plugin.protocol.results import read_results
    rows = read_results(KEPT)

    def numbers(table):
        return ({key: (c.mean, c.low, c.high) for key, c in table.cells.items()},
                {key: (i.delta, i.low, i.high) for key, i in table.improvements.items()})
    forward, backward = numbers(build_table(rows)), numbers(build_table(rows[::-1]))
    assert backward == forward


def test_a_figure_does_not_depend_on_the_order_of_its_rows(tmp_path, monkeypatch):
    """Before: the sample-efficiency rows reversed drew other CI bands (the seeds' values in
    file order enter the position-drawing bootstrap)."""
    from vpn_plugin.protocol import plots
    tool = load_tool('plots')
    given = REPO / 'docs' / 'results_data' / 'sample_efficiency_niv.jsonl'
    reversed_file = tmp_path / 'reversed.jsonl'
    reversed_file.write_text('\n'.join(given.read_text().splitlines()[::-1]) + '\n')
    drawn = []
    monkeypatch.setattr(plots, 'plot_sample_efficiency', lambda rows, out, **kw: drawn.append(
        plots.efficiency_points(rows, kw['metric'])) or [])
    for path in (given, reversed_file):
        tool.main(['efficiency', str(path), '--out', str(tmp_path / path.stem)])
    assert drawn[0] == drawn[1]


def test_a_missing_row_names_the_options_of_its_run():
    """Before (X9): a protocol edited between runs (ViterbiPlanNet with model.decode changed)
    failed its unit; report.py then said "missing: ViterbiPlanNet seed=0 T=3
    configs/vpn_niv_t3.py" beside a ViterbiPlanNet seed 0 row of that config."""
    from vpn_plugin.protocol.expected import describe_row
    from vpn_plugin.protocol.results import ResultRow
    row = ResultRow('ViterbiPlanNet', 0, 3, {'success_rate': 1.0}, config='configs/vpn_niv_t3.py',
                    settings={'cfg_options': {'model.decode': 'emission_argmax'}})
    assert describe_row(row) == ("ViterbiPlanNet seed=0 T=3 configs/vpn_niv_t3.py with "
                                 "model.decode='emission_argmax'")
