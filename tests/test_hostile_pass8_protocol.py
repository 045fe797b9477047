"""Seventh hostile pass (issue 37), the protocol and what follows training (hostile14): cases
found on main 69b959e, each test failing on the behaviour before its fix."""
import json
from pathlib import Path

import pytest

from vpn_plugin.protocol.report import build_table
from vpn_plugin.protocol.results import read_results

KEPT = Path(__file__).resolve().parents[1] / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


def kept_lines(count=6) -> list:
    return KEPT.read_text().splitlines()[:count]


# ------------------------------------------------------------ results files as read
def test_a_results_row_with_a_key_twice_is_refused_not_read_as_the_last(tmp_path):
    """Before: {"method": "ViterbiPlanNet", "method": "train DVL / infer argmax", ...} was read
    as the last method, the other dropped without a word (json keeps the last)."""
    lines = kept_lines()
    lines[0] = lines[0].replace('"method": ', '"method": "ViterbiPlanNet", "method": ', 1)
    path = tmp_path / 'results.jsonl'
    path.write_text('\n'.join(lines) + '\n')
    with pytest.raises(ValueError, match=r"results\.jsonl:1: the key 'method' is given twice"):
        read_results(path)
    (tmp_path / 'results.json').write_text(
        '[' + lines[0] + ']')
    with pytest.raises(ValueError, match="the key 'method' is given twice"):
        read_results(tmp_path / 'results.json')


def test_a_results_line_that_is_no_object_is_named(tmp_path):
    """Before: a line `null` (or a number) raised TypeError "argument of type 'NoneType' is not
    iterable", naming neither the file nor the line."""
    path = tmp_path / 'results.jsonl'
    path.write_text('\n'.join(kept_lines(2) + ['null']) + '\n')
    with pytest.raises(ValueError, match=r'results\.jsonl:3: a results row must be a JSON '
                       r'object of fields, got None'):
        read_results(path)


@pytest.mark.parametrize('suffix', ['.jsonl', '.csv'])
def test_a_compressed_results_file_is_named(tmp_path, suffix):
    """Before: "'utf-8' codec can't decode byte 0x8b in position 1" without the file."""
    import gzip
    path = tmp_path / f'results{suffix}'
    path.write_bytes(gzip.compress(KEPT.read_bytes()))
    with pytest.raises(ValueError, match=rf'results\{suffix}: not UTF-8 text'):
        read_results(path)


def test_a_cell_of_seeds_with_two_pkg_sources_is_refused():
    """Before: one seed's row with pkg_source 'other.json' beside two of the run's own PKG made
    one cell, marked as if every seed had read the released graph."""
    rows = [r for r in read_results(KEPT) if r.method == 'ViterbiPlanNet']
    rows[0].pkg_source = 'test-set PKG'
    with pytest.raises(ValueError, match=r'differ in pkg_source: "test-set PKG" \(seed 0\)'):
        build_table(rows, ['success_rate'], num_resamples=20, num_diff_resamples=20)
    for row in rows:
        row.pkg_source = 'test-set PKG'
    assert build_table(rows, ['success_rate'], num_resamples=20, num_diff_resamples=20)


# ------------------------------------------------------------ report.py flags
def test_ours_and_reference_naming_one_method_are_refused():
    """Before: `--ours X --reference X` printed "Δ: none" (the asked-for row dropped)."""
    rows = read_results(KEPT)
    with pytest.raises(ValueError, match="--ours and --reference both name 'ViterbiPlanNet'"):
        build_table(rows, ['success_rate'], ours='ViterbiPlanNet', reference='ViterbiPlanNet',
                    num_resamples=20, num_diff_resamples=20)


@pytest.mark.parametrize('new', ['', ' ', '\u200b'])
def test_a_rename_to_an_empty_name_is_refused(new):
    """Before: `--rename 'ViterbiPlanNet='` made a table row without a name, exit 0."""
    from vpn_plugin.protocol.results import rename_methods
    rows = read_results(KEPT)
    with pytest.raises(ValueError, match='the new name .* is empty or invisible'):
        rename_methods(rows, [f'ViterbiPlanNet={new}'], {r.method for r in rows})


# ------------------------------------------------------------ plots.py
def test_an_overlap_of_a_method_with_itself_is_refused():
    """Before: `overlap --pair ViterbiPlanNet ViterbiPlanNet` drew a Venn and a table of 0
    fixed / 0 introduced windows, exit 0 (`--sets` refused the same)."""
    from vpn_plugin.protocol.plots import error_overlap
    rows = read_results(KEPT.with_name('main_t6_niv.jsonl'))
    with pytest.raises(ValueError, match="got 'ViterbiPlanNet' twice"):
        error_overlap(rows, 'ViterbiPlanNet', 'ViterbiPlanNet', 6)
    assert error_overlap(rows, 'ViterbiPlanNet', 'SCHEMA w/ PKG', 6).seeds


# ------------------------------------------------------------ run_protocol.py
@pytest.mark.parametrize('max_epochs', [None, 3])
def test_a_val_interval_that_is_not_applied_is_refused(tmp_path, max_epochs):
    """Before: `--val-interval 5` without --max-epochs was ignored (each run kept its config's
    schedule) while the rows and the results file name recorded val_interval=5; with
    `--max-epochs 3` no validation ever ran."""
    from vpn_plugin.protocol.runner import ProtocolRunner, load_protocol
    protocol = load_protocol('configs/protocol/standard_niv.py')
    with pytest.raises(ValueError, match='--val-interval 5 applies with --max-epochs'):
        ProtocolRunner(protocol, tmp_path, max_epochs=max_epochs, val_interval=5)
    assert ProtocolRunner(protocol, tmp_path, max_epochs=6, val_interval=3).results_file.name \
        == 'results_max_epochs-6_val_interval-3.jsonl'


# ------------------------------------------------------------ llm_eval replies
def test_a_reply_with_two_different_plans_is_unparseable_not_its_first():
    """Before: '{"plan": [1, 2, 3]}{"plan": [4, 5, 6]}' was scored as [1, 2, 3] (counted ok)."""
    from vpn_plugin.baselines.llm.parsing import ActionMatcher, ReplyParseError, parse_plan
    matcher = ActionMatcher([f'a{i}' for i in range(10)], range(10))
    with pytest.raises(ReplyParseError, match='2 different plans'):
        parse_plan('{"plan": [1, 2, 3]}\n{"plan": [4, 5, 6]}', matcher, 3)
    assert parse_plan('{"plan": [1, 2, 3]} so {"plan": [1, 2, 3]}', matcher, 3) == [1, 2, 3]


def test_a_results_file_given_twice_to_report_is_named(tmp_path):
    """Before: report.py FILE ./FILE said "duplicate results for method=... seed=0; filter by
    protocol/variant first" (the cause, the file twice, unnamed; the advice wrong)."""
    link = tmp_path / 'link.jsonl'
    link.symlink_to(KEPT)
    with pytest.raises(ValueError, match=r'link\.jsonl is given twice'):
        read_results([KEPT, link])



def test_seeds_of_one_cell_with_two_parameter_counts_are_refused():
    """Before: one seed's row with params=1 beside 5549602 showed 5.55M (the max), no word."""
    rows = [r for r in read_results(KEPT) if r.method == 'ViterbiPlanNet']
    rows[0].params = 1
    with pytest.raises(ValueError, match=r'differ in params: 1 \(seed 0\)'):
        build_table(rows, ['success_rate'], num_resamples=20, num_diff_resamples=20)
