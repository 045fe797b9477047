"""Ninth hostile pass (issue 37), the protocol and what follows training (hostile21): the
eighth pass's vague cases left (run_protocol --dry-run and --feature-dir, a refusal printed once
per rank, a long bootstrap without a word) and this pass's findings, each test failing on main
f24bbf3 (the behaviour before its fix)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


def tool(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, **kwargs)


# ------------------------------------------------------------ pass 8's vague cases
def niv_runner(tmp_path, feature_dir, smoke=False):
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units, load_protocol
    protocol = load_protocol(str(ROOT / 'configs' / 'protocol' / 'standard_niv.py'))
    units = expand_units(protocol, seeds=[0], methods=['ViterbiPlanNet'], horizons=[3])
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=smoke,
                            data_paths=dict(feature_dir=str(feature_dir)))
    return runner, units


def niv_stems(shared_data, split) -> list:
    rows = json.loads((shared_data / 'niv' / 'splits' / f'{split}_T3.json').read_text())
    return sorted({Path(row['id']['feature']).stem for row in rows})


@pytest.mark.parametrize('smoke', [False, True])
def test_a_dry_run_names_a_feature_dir_without_the_features(tmp_path, shared_data, smoke):
    """Before (pass 8, P4): --dry-run (local or Slurm) with a --feature-dir that does not hold
    the dataset's features listed the runs and said nothing; each run (each queued Slurm
    task) failed later. Now the dry run warns per split; a submission refuses."""
    runner, units = niv_runner(tmp_path, tmp_path / 'nothing_here', smoke)
    checked, problems = runner.check_feature_files(units)
    assert [p.split(':')[0] for p in problems] == [
        f'configs/vpn_niv_t3.py ({split} split)' for split in ('train', 'val', 'test')]
    assert re.search(r'feature_dir .*nothing_here does not exist, so it holds no feature file '
                     r'for (\d+) of the \1 videos this split reads', problems[0])


def test_a_dry_run_names_the_one_missing_feature_file(tmp_path, shared_data):
    """Every video but one has a file: a full run would fail on it, so the dry run says so;
    a --smoke run reads a stratified few windows, so there only a split without any of its
    videos counts."""
    folder = tmp_path / 'features'
    folder.mkdir()
    stems = sorted(set(niv_stems(shared_data, 'train')) | set(niv_stems(shared_data, 'test')))
    for stem in stems[1:]:
        (folder / f'{stem}.npz').touch()
    runner, units = niv_runner(tmp_path, folder)
    checked, (problem,) = runner.check_feature_files(units)
    assert re.search(rf'holds no feature file for 1 of the \d+ videos .* '
                     rf'e\.g\. .*{stems[0]}\.npy \(nor \.npz\)', problem)
    runner, units = niv_runner(tmp_path, folder, smoke=True)
    assert runner.check_feature_files(units) == (len(stems), [])
    (folder / f'{stems[0]}.npy').touch()
    runner, units = niv_runner(tmp_path, folder)
    assert runner.check_feature_files(units) == (len(stems), [])


def test_a_slurm_submission_without_the_features_submits_nothing(tmp_path, shared_data, capsys):
    sys.path.insert(0, str(ROOT / 'tests'))
    from tool_modules import load_tool
    argv = ['configs/protocol/standard_niv.py', '--seeds', '0', '--horizons', '3', '--methods',
            'ViterbiPlanNet', '--smoke', '--feature-dir', str(tmp_path / 'none'), '--out',
            str(tmp_path / 'out')]
    tool = load_tool('run_protocol')
    tool.main(argv + ['--dry-run'])
    captured = capsys.readouterr()
    assert '3 splits lack feature files (warnings above): these runs would fail' in captured.out
    assert captured.err.count('warning: configs/vpn_niv_t3.py') == 3
    with pytest.raises(SystemExit, match=r'nothing was submitted: configs/vpn_niv_t3\.py '
                       r'\(train split\): feature_dir'):
        tool.main(argv + ['--launcher', 'slurm', '--partition', 'debug'])
    assert not (tmp_path / 'out' / 'standard_niv' / 'slurm').exists()


def test_a_refusal_of_a_distributed_run_is_printed_once(tmp_path, monkeypatch, capsys):
    """Before (pass 8): tools/dist_train.sh CONFIG 2 with a refused option printed the same
    "error: ..." once per rank. Now rank 0 prints it; tools/dist_run.py prints another rank's
    message only when it differs from rank 0's."""
    from vpn_plugin.errors import DIST_ERRORS_VARIABLE, explained_errors
    sys.path.insert(0, str(ROOT / 'tools'))
    from dist_run import print_rank_messages
    monkeypatch.setenv(DIST_ERRORS_VARIABLE, str(tmp_path))
    for rank, reason in (('0', 'bad option'), ('1', 'bad option'), ('2', 'other')):
        monkeypatch.setenv('RANK', rank)
        with pytest.raises(SystemExit) as ended, explained_errors():
            raise ValueError(reason)
        assert ended.value.code == (f'error: {reason}\n(set VPN_TRACEBACK=1 for the '
                                    'traceback)' if rank == '0' else 1)
    print_rank_messages(str(tmp_path))
    printed = capsys.readouterr().err
    assert 'bad option' not in printed and printed.startswith('rank 2: error: other\n')


def test_a_long_bootstrap_says_how_far_it_is(monkeypatch, capsys):
    """Before (pass 8, F12 rest): report.py --num-resamples 1000000 ran ~18 s per cell, minutes
    for a table, without a line. Now from PROGRESS_RESAMPLES on, one line per interval with
    the cell, the count done, elapsed and ETA; below it, nothing."""
    from vpn_plugin.protocol import report
    from vpn_plugin.protocol.results import read_results
    rows = read_results(KEPT)
    monkeypatch.setattr(report, 'PROGRESS_RESAMPLES', 21)
    report.build_table(rows, ['success_rate'], num_resamples=21, num_diff_resamples=20)
    lines = capsys.readouterr().err.splitlines()
    cells = len({r.method for r in rows})
    assert lines[0].startswith(f'report: {cells} bootstrap intervals of up to 21 resamples')
    assert lines[-1].startswith(f'report: bootstrap of {rows[-1].method} crosstask T=3 '
                                f'success_rate ({cells}/{cells} done, elapsed')
    assert len(lines) == cells + 1 and 'eta' in lines[-1]
    report.build_table(rows, ['success_rate'], num_resamples=20, num_diff_resamples=20)
    assert capsys.readouterr().err == ''


# ------------------------------------------------------------ results rows: counts and costs
def edited_row(tmp_path, name, value, usage=None) -> Path:
    lines = KEPT.read_text().splitlines()
    row = json.loads(lines[0])
    if usage is not None:
        row['usage'] = usage
    head, _, key = name.rpartition('.')
    (row[head] if head else row)[key] = value
    path = tmp_path / 'results.jsonl'
    path.write_text('\n'.join([json.dumps(row)] + lines[1:]) + '\n')
    return path


@pytest.mark.parametrize('name, value, expected', [
    ('failures.unparseable', -1, 'expected an integer >= 0'),
    ('usage.total_tokens', -1, 'expected an integer >= 0'),
    ('usage.total_tokens', 1.5, 'expected an integer >= 0'),
    ('usage.total_tokens', True, 'expected an integer >= 0'),
    ('usage.total_tokens', 'abc', 'expected an integer >= 0'),
    ('usage.total_tokens', None, 'expected an integer >= 0'),
    ('usage.paid_tokens', float('inf'), 'expected an integer >= 0'),
    ('usage.cost_paid', -1, 'expected a finite number >= 0'),
    ('usage.cost_paid', float('nan'), 'expected a finite number >= 0'),
    ('usage.cost_paid', [], 'expected a finite number >= 0'),
    ('usage.cost_of_answers', {}, 'expected a finite number >= 0'),
    ('usage.price_per_1k', [1.0], 'expected a'),
])
def test_failure_counts_and_usage_of_another_kind_are_named(tmp_path, name, value, expected):
    """Before: report.py showed a failure count of -1 windows, Tokens -1 / 1 (of 1.5 or true) /
    'infB', Paid -1.00 / nan / inf, and crashed with a TypeError naming no file on 'abc', null
    or {} (usage.total_tokens, usage.cost_paid). (Failure counts: also main's ROW_SCHEMA.)"""
    from vpn_plugin.protocol.results import read_results
    path = edited_row(tmp_path, name, value, usage={'total_tokens': 100, 'paid_tokens': 100})
    with pytest.raises(ValueError, match=rf'results\.jsonl:1: field {re.escape(name)}=.*'
                       + expected):
        read_results(path)


def test_a_params_axis_over_many_decades_keeps_its_labels_apart():
    """Before: plots.py params with a 1e9-parameter method beside 1M ones put ten 1-2-5 ticks
    on a column-wide axis ('5M10M20M 50M100M200M500M1000M' ran into each other; looked at)."""
    from vpn_plugin.protocol.plots import MAX_LOG_TICKS, format_count, log_ticks
    ticks = log_ticks(0.855e6 / 1.15, 1e9 * 1.15)
    assert [format_count(t) for t in ticks] == ['1M', '10M', '100M', '1B']
    assert len(log_ticks(1.0, 1e30)) <= MAX_LOG_TICKS
    assert [format_count(t) for t in log_ticks(0.855e6 / 1.15, 5.55e6 * 1.15)] == \
        ['1M', '2M', '5M']  # a narrow range keeps the 1-2-5 series


# ------------------------------------------------------------ protocol folders
@pytest.mark.parametrize('copied', [False, True])
def test_a_finished_training_without_its_checkpoint_says_how_to_go_on(tmp_path, copied):
    """Before: a finished unit (train_done.json) whose tested checkpoint was deleted failed
    its tests with "checkpoint ... does not exist", and in a copied protocol folder with
    "... give the checkpoint to continue from as --resume CKPT" (run_protocol has no
    --resume); a finished unit is never trained again, so neither says how to go on."""
    from vpn_plugin.protocol.runner import finished_training
    work_dir = tmp_path / 'ViterbiPlanNet' / 'T3' / 'seed0'
    work_dir.mkdir(parents=True)
    origin = (tmp_path / 'elsewhere' if copied else work_dir) / 'best_epoch_3.pth'
    (work_dir / 'train_done.json').write_text(json.dumps(dict(
        checkpoint=str(origin), params=1, shortened='', selection='unified: best')))
    with pytest.raises(ValueError, match=r'train_done\.json records a finished training whose '
                       r'tested checkpoint best_epoch_3\.pth is not in its work dir .* put the '
                       r'checkpoint back, or remove the work dir'):
        finished_training(work_dir)
    (work_dir / 'best_epoch_3.pth').write_bytes(b'x')
    assert finished_training(work_dir).checkpoint == str(work_dir / 'best_epoch_3.pth')


def test_a_method_with_a_model_per_horizon_shows_its_params_range(tmp_path):
    """Before: report.py of a cross-horizon protocol showed 'ViterbiPlanNet (train T=test T)'
    with Params 5.51M, the largest of its T=3/4/5 models (5.48M, 5.49M, 5.51M), without a
    word."""
    from vpn_plugin.protocol.report import build_table, to_markdown
    from vpn_plugin.protocol.results import read_results
    rows = [json.loads(line) for line in KEPT.read_text().splitlines()]
    for row in rows:
        if row['method'] == 'ViterbiPlanNet' and row['seed'] == 0:  # its T=4 model
            row.update(horizon=4, train_horizon=4, params=5494726,
                       config='configs/vpn_crosstask_t4.py')
    path = tmp_path / 'results.jsonl'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    text = to_markdown(build_table(read_results(path), ['success_rate'], num_resamples=20,
                                   num_diff_resamples=20))
    line = next(t for t in text.splitlines() if t.startswith('| ViterbiPlanNet'))
    assert '| 5.49M-5.55M |' in line
    assert "Params a-b: the method's models differ in size across the columns" in text
    assert '| 5.55M |' in next(t for t in text.splitlines() if t.startswith('| Base Model'))


# ------------------------------------------------------------ Slurm
def test_a_time_limit_inside_submitits_signal_lead_is_refused(tmp_path, sinfo_of_no_nodes):
    """Before: --launcher slurm --time-limit 1 submitted; submitit's USR2 comes 90 s before the
    limit, so the task checkpointed and requeued at once, 4 times, then failed with
    "Job not requeued because: timed-out too many times" (real cluster, job 291)."""
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    from vpn_plugin.protocol.slurm import SlurmRequest, plan_array
    protocol = Config.fromfile(ROOT / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=80)
    with pytest.raises(ValueError, match=r'--time-limit 00:01:00: submitit signals a task to '
                       r'checkpoint and requeue 90 s before .* expected at least 2 minutes'):
        plan_array(runner, units, SlurmRequest('debug', time_limit=1), 4.32,
                   limit=(120, 'partition debug MaxTime 2:00:00'))
    plan = plan_array(runner, units, SlurmRequest('debug', time_limit=2), 4.32,
                      limit=(120, 'partition debug MaxTime 2:00:00'))
    assert plan.time_limit == 2


def test_an_expected_list_of_another_protocol_is_refused(tmp_path):
    """Before: a results file with the .expected list of another protocol beside it (copied
    or renamed) was reported as missing that protocol's rows (--allow-missing: its methods as
    empty ¶ rows), while its own missing rows were left unmarked."""
    from vpn_plugin.protocol.expected import IDENTITY, missing_rows
    from vpn_plugin.protocol.results import read_results
    path = tmp_path / 'results.jsonl'
    path.write_text(KEPT.read_text())
    rows = read_results(path)
    foreign = dict({name: getattr(rows[0], name) for name in IDENTITY}, protocol='standard_niv')
    path.with_suffix('.expected').write_text(json.dumps(foreign) + '\n')
    with pytest.raises(ValueError, match=r"results\.expected lists the rows of protocol\(s\) "
                       r"\['standard_niv'\], while .*results\.jsonl holds rows of \['main_t3'\]"):
        missing_rows(path, rows)
    own = dict(foreign, protocol='main_t3', seed=7)
    path.with_suffix('.expected').write_text(json.dumps(own) + '\n')
    assert [row.seed for row in missing_rows(path, rows)] == [7]


# ------------------------------------------------------------ figures: variant values on an axis
EFFICIENCY = ROOT / 'docs' / 'results_data' / 'sample_efficiency_niv.jsonl'


def efficiency_rows(tmp_path, value):
    from vpn_plugin.protocol.results import read_results
    rows = [json.loads(line) for line in EFFICIENCY.read_text().splitlines()]
    for row in rows:
        if row['method'] == 'ViterbiPlanNet' and row['variant'] == {'train_fraction': 0.05}:
            row['variant']['train_fraction'] = value
    path = tmp_path / 'results.jsonl'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return [r for r in read_results(path) if r.horizon == 3]


@pytest.mark.parametrize('value', [True, 'abc', None, [], float('nan'), float('inf')])
def test_a_variant_value_that_is_no_number_is_not_drawn(tmp_path, value):
    """Before: plots.py curve / efficiency drew train_fraction=true at x=1, averaging those
    runs with the train_fraction=1.0 runs into one point of '3-6 seeds' (a wrong point), left
    a NaN point out of the line without a word, and crashed with a bare TypeError on null,
    [] or {} ("float() argument must be ...", no row named)."""
    from vpn_plugin.protocol.plots import curve_values, efficiency_values
    rows = efficiency_rows(tmp_path, value)
    expected = r"results row of 'ViterbiPlanNet' \(seed 0, T=3\): variant train_fraction="
    with pytest.raises(ValueError, match=expected + r'.*expected a finite number'):
        curve_values(rows, 'train_fraction', 'success_rate')
    with pytest.raises(ValueError, match=expected + r'.*expected a finite number'):
        efficiency_values(rows)


@pytest.mark.parametrize('value', [0, -1, 1.5])
def test_a_training_share_outside_0_1_is_not_drawn(tmp_path, value):
    """Before: plots.py efficiency drew train_fraction 1.5 at 150% of the training windows
    (0 at 0%, -1 at -100%). A curve of another variant may take any number."""
    from vpn_plugin.protocol.plots import curve_values, efficiency_values
    rows = efficiency_rows(tmp_path, value)
    with pytest.raises(ValueError, match=r'variant train_fraction=.*; expected the share of '
                       r'the training windows used, in \(0, 1\]'):
        efficiency_values(rows)
    (panel,) = curve_values(rows, 'train_fraction', 'success_rate').values()
    assert float(value) in panel['ViterbiPlanNet']


@pytest.mark.parametrize('value, expected', [
    (True, 'variant level=True; expected a finite number'),
    (float('nan'), 'variant level=nan; expected a finite number'),
    (-1, r'edge dropout level=-1; expected a level \[0, 1\]'),
    (1.5, r'edge dropout level=1.5; expected a level \[0, 1\]')])
def test_a_pkg_quality_level_outside_its_range_is_not_drawn(tmp_path, value, expected):
    """Before: plots.py pkg-quality drew an edge-dropout level of true at 100% of the edges
    dropped, -1 at -100%, 1.5 at 150%, and left NaN out without a word."""
    from vpn_plugin.protocol.plots import pkg_quality_panels
    from vpn_plugin.protocol.results import read_results
    source = ROOT / 'docs' / 'results_data' / 'pkg_quality_niv.jsonl'
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    for row in rows:
        if row['method'] == 'ViterbiPlanNet' and row['variant'] == {
                'level': 0.1, 'perturbation': 'edge_dropout'}:
            row['variant']['level'] = value
    path = tmp_path / 'results.jsonl'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    with pytest.raises(ValueError, match=r"results row of 'ViterbiPlanNet' \(seed 0, T=3\): "
                       + expected):
        pkg_quality_panels(read_results(path), num_resamples=20)


def test_a_unit_whose_folder_moved_while_it_ran_says_so(tmp_path, monkeypatch):
    """Before (Slurm, real cluster): a protocol folder moved while its task trained failed with
    "FileNotFoundError: ... vis_data/<stamp>.json" (mmengine's log path), and the unit's
    state was written into a folder recreated at the old place."""
    from vpn_plugin.protocol.runner import ProtocolRunner
    runner, (unit,) = niv_runner(tmp_path, tmp_path / 'features')
    work_dir = runner.work_dir(unit)

    def moving(self, unit, work_dir, done):
        work_dir.rename(tmp_path / 'moved')
        work_dir.mkdir()  # as mmengine's logger makes its folders again
        raise FileNotFoundError(f'{work_dir}/vis_data/20261128_103425.json')
        yield
    monkeypatch.setattr(ProtocolRunner, '_unit_rows', moving)
    with pytest.raises(RuntimeError, match=r'the work dir .*seed0 was moved or removed while '
                       r'this unit ran .*FileNotFoundError.*rerun the same command with --out'):
        list(runner.unit_rows(unit, set()))
    assert not (work_dir / 'unit_state.json').exists()


# ------------------------------------------------------------ protocol configs
def user_protocol(tmp_path, runs: str):
    from vpn_plugin.protocol.runner import load_protocol
    path = tmp_path / 'mine.py'
    path.write_text(f"_base_ = ['{ROOT}/configs/_base_/protocols/standard.py']\n"
                    f"dataset = 'niv'\nprotocol = 'mine'\nruns = {runs}\n")
    return load_protocol(str(path))


@pytest.mark.parametrize('runs, expected', [
    ("[dict(method='A', config='configs/vpn_niv_t3.py', horizons=[3])] * 2",
     r"runs 'A' and 'A' .* both train in the work dir A/T3"),
    ("[dict(method='A', config='configs/vpn_niv_t3.py', horizons=[3], "
     "tests=[dict(method='B'), dict(method='B')])]",
     r"the tests of run 'A' give the row\(s\) 'B' T=3 twice")])
def test_a_run_or_test_declared_twice_is_refused(tmp_path, runs, expected):
    """Before: a protocol with the same run twice (or one test's row twice) was listed twice by
    --dry-run (and its time counted twice); running it trained once and wrote one row, the
    second declaration dropped without a word."""
    from vpn_plugin.protocol.runner import expand_units
    with pytest.raises(ValueError, match=expected):
        expand_units(user_protocol(tmp_path, runs), seeds=[0])


@pytest.mark.parametrize('name', ['../x', 'a/b', '..', '.'])
def test_a_protocol_name_that_is_a_path_is_refused(tmp_path, name):
    """Before: protocol = '../x' put the runs and results in <--out>/../x, outside --out."""
    path = tmp_path / 'mine.py'
    path.write_text(f"_base_ = ['{ROOT}/configs/_base_/protocols/standard.py']\n"
                    f"dataset = 'niv'\nprotocol = {name!r}\n")
    from vpn_plugin.protocol.runner import load_protocol
    with pytest.raises(ValueError, match=rf"mine\.py: protocol = {re.escape(repr(name))}; "
                       'expected a plain name'):
        load_protocol(str(path))


def test_a_run_without_training_of_a_model_with_weights_is_refused():
    """Before: a protocol run dict(method='A', config='configs/vpn_niv_t3.py', train=False)
    wrote a row 'A' (SR 6.25 on the smoke windows) of a ViterbiPlanNet with its random
    initial weights, without a word; train=False is for parameter-free planners."""
    import torch
    from vpn_plugin.protocol.runner import TestSpec, _check_untrained
    spec = TestSpec('A', 'configs/vpn_niv_t3.py', 3)
    with pytest.raises(ValueError, match=r"'A' \(configs/vpn_niv_t3\.py\): its run has "
                       r'train=False, but its model Linear has 12 trainable parameters'):
        _check_untrained(spec, torch.nn.Linear(3, 3))
    frozen = torch.nn.Linear(3, 3).requires_grad_(False)
    _check_untrained(spec, frozen)
    _check_untrained(spec, torch.nn.Module())
