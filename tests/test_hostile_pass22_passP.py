"""Session 17, hostile pass (passP, log /tmp/passP_log.md): a results file shared by a
hard-linked copy of a protocol folder, a round-off difference called significant, a variant
level written -0.0 or one ulp off, control characters and backquotes in the LaTeX table, a
--rename with a control character. Each test fails on 84e3204 (the no-false-change halves
pass there too)."""
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from test_hostile_pass17_passP import renamed, row_line, tables

REPO = Path(__file__).resolve().parents[1]
PKG_QUALITY = REPO / 'docs' / 'results_data' / 'pkg_quality_niv.jsonl'


def _row(method='VPN', seed=0, sr=10.0, **fields):
    from vpn_plugin.protocol.results import ResultRow
    return ResultRow(method=method, seed=seed, horizon=3, metrics={'success_rate': sr},
                     **fields)


# ------------------------------------------- P03 (data loss): a hard-linked protocol folder
def test_appending_a_row_leaves_a_hard_linked_copy_of_the_results_file_as_it_was(tmp_path):
    """P03 (data loss): `cp -al runs runs_copy`, then a resumed run into runs_copy appended its
    row in place to the file both folders share: runs/'s results (and its --status) gained a
    run it never made. The row is written to a new file of runs_copy's, the link broken."""
    from vpn_plugin.protocol.results import append_result, read_results
    (tmp_path / 'runs').mkdir()
    (tmp_path / 'copy').mkdir()
    original = tmp_path / 'runs' / 'results.jsonl'
    append_result(original, _row(seed=0))
    before = original.read_bytes()
    copy = tmp_path / 'copy' / 'results.jsonl'
    os.link(original, copy)
    assert append_result(copy, _row(seed=1))
    assert original.read_bytes() == before
    assert [r.seed for r in read_results(copy)] == [0, 1]
    assert copy.read_bytes().startswith(before)
    assert os.stat(copy).st_nlink == 1 and os.stat(original).st_nlink == 1


def test_a_results_file_of_one_link_is_still_appended_in_place(tmp_path):
    """No-false-change half: a plain file keeps its inode (concurrent readers see one file)."""
    from vpn_plugin.protocol.results import append_result, read_results
    path = tmp_path / 'results.jsonl'
    append_result(path, _row(seed=0))
    inode = os.stat(path).st_ino
    append_result(path, _row(seed=1))
    assert os.stat(path).st_ino == inode
    assert [r.seed for r in read_results(path)] == [0, 1]


# ------------------------------------ H01, H15 (wrong): a round-off difference is significant
@pytest.mark.parametrize('paired', [False, True])
def test_scores_equal_but_for_their_last_bit_are_no_significant_difference(paired):
    """H01, H15 (wrong): two methods whose per-seed scores differ by one ulp (a metric summed
    in another order) got Δ '+0.00000000000000*': every replicate's Δ* was 2e-16 > 0, so the
    interval "excluded 0". An interval leaving out 0 by round-off only is no difference."""
    from vpn_plugin.core.stats import bootstrap_difference
    b = [1.015228426395939] * 3
    a = [math.nextafter(v, math.inf) for v in b]
    assert not bootstrap_difference(a, b, paired=paired)[3]
    assert not bootstrap_difference(b, a, paired=paired)[3]


@pytest.mark.parametrize('paired', [False, True])
def test_a_small_real_difference_stays_significant(paired):
    """No-false-change half: a constant difference far above round-off (1e-9 of 1) is
    significant as before, and other intervals are unchanged (the authors' draw)."""
    from vpn_plugin.core.stats import bootstrap_difference
    assert bootstrap_difference([1 + 1e-9] * 3, [1.0] * 3, paired=paired)[3]
    assert bootstrap_difference([-1.0] * 3, [-1 + 1e-9] * 3, paired=paired)[3]
    delta, low, high, significant = bootstrap_difference([3, 4, 5, 9], [1, 2, 2, 3, 8, 1], 500,
                                                         0.8, 7)
    assert (delta, low, high, significant) == (pytest.approx(29 / 12), 0.5, 4.5, True)


def test_the_report_prints_no_star_for_a_round_off_difference(tmp_path):
    """H01 through the table: the Δ cell of the one-ulp pair is '+0.00 ± 0.00', no star."""
    from vpn_plugin.protocol.report import build_table, to_markdown
    rows = [_row('A', seed, 1.015228426395939) for seed in range(3)] + \
        [_row('B', seed, math.nextafter(1.015228426395939, 2)) for seed in range(3)]
    markdown = to_markdown(build_table(rows, ['success_rate'], ours='B', reference='A'))
    assert row_line(markdown, 'Δ') == '| Δ | +0.00 ± 0.00 |'


# ------------------------------------------- V09 (false caveat), V07, V08: a level written otherwise
def _quality_rows(change):
    from vpn_plugin.protocol.results import read_results
    rows = read_results(PKG_QUALITY)
    for row in rows:
        change(row)
    return rows


def _set_level(level, perturbation, old, seed=1):
    def change(row):
        if row.variant.get('perturbation') == perturbation and row.variant['level'] == old \
                and row.seed == seed:
            row.variant = {**row.variant, 'level': level}
    return change


def test_a_level_written_minus_zero_is_one_point_of_three_seeds():
    """V09 (wrong, false caveat): seed 1's unperturbed level written -0.0 made the figure's
    note say "points of 1-2 seeds: mean only", while every point pooled its 3 seeds with a
    band: the note counted seeds by str(level). Seeds are counted per setting as the
    identities compare it (-0.0 is 0)."""
    from vpn_plugin.protocol.plots import pkg_quality_panels, seeds_per_group
    rows = _quality_rows(_set_level(-0.0, 'none', 0.0))
    assert set(seeds_per_group(rows, ('perturbation', 'level'))) == {3}
    panels, _ = pkg_quality_panels(rows)
    plain, _ = pkg_quality_panels(_quality_rows(lambda row: None))
    assert panels == plain


def test_a_level_one_ulp_off_is_refused_by_the_figure_and_the_filter():
    """V07, V08 (silent): seed 1's level 0.10000000000000002 (0.1 computed) was a point of
    its own on the curve (the setting's band lost) and was silently dropped by the report's
    --variant level=0.1 (n=2). Both refuse it, naming the row and both values."""
    from vpn_plugin.protocol.plots import curve_points
    from vpn_plugin.protocol.results import filter_rows
    rows = _quality_rows(_set_level(0.10000000000000002, 'edge_dropout', 0.1))
    with pytest.raises(ValueError, match=r"level=0.1 \(seed 0\) and 0.10000000000000002 "
                                         r"\(seed 1\) differ by round-off only"):
        curve_points(rows, 'level', 'success_rate', 'perturbation')
    with pytest.raises(ValueError, match=r"seed 1 T=3 has variant level=0.10000000000000002, "
                                         r"which differs from the filter level=0.1 by round-off"):
        filter_rows(rows, variant=['perturbation=edge_dropout', 'level=0.1'])


@pytest.mark.parametrize('level', [0.1000000000000000055511151231257827, 1 / 10])
def test_the_same_level_written_otherwise_still_pools(level):
    """No-false-refusal half: the same double in another spelling, and -0.0 for 0, pool."""
    from vpn_plugin.protocol.plots import curve_points
    from vpn_plugin.protocol.results import filter_rows
    plain = curve_points(_quality_rows(lambda row: None), 'level', 'success_rate', 'perturbation')
    rows = _quality_rows(_set_level(level, 'edge_dropout', 0.1))
    assert curve_points(rows, 'level', 'success_rate', 'perturbation') == plain
    assert len(filter_rows(rows, variant=['perturbation=edge_dropout', 'level=0.1'])) == 6
    zero = _quality_rows(_set_level(-0.0, 'none', 0.0))
    assert len(filter_rows(zero, variant=['perturbation=none', 'level=0'])) == 9


# --------------------------------------- H04, C02-C09 (wrong): control characters in the LaTeX
@pytest.mark.parametrize('character', ['\x00', '\x08', '\x0b', '\x0c', '\x1b', '\x1c', '\x7f',
                                       '\x85'])
def test_control_characters_of_a_caption_are_written_in_caret_notation(tmp_path, character):
    """H04, C02-C09 (wrong): a DEL, ESC, NUL, VT or BS in a caveat line, the shortened reason
    or the PKG source reached the .tex raw: pdfLaTeX stopped ("Text line contains an invalid
    character", "Unicode character ^^[ not set up"), with no word from the report. They are
    written as TeX's log shows them (^^? for DEL), as text."""
    from vpn_plugin.protocol.results import read_results
    path = renamed(tmp_path, {})
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if row['method'] == 'ViterbiPlanNet':
            row['caveats'] = {'changed_from_training': [f'a{character}b']}
            row['shortened'] = f'max_epochs=20{character}'
            row['pkg_source'] = f'test{character}set'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    read_results(path)
    _, latex = tables(path)
    assert not any(ord(c) < 32 and c != '\n' or 0x7f <= ord(c) <= 0x9f for c in latex)
    code = ord(character)
    caret = chr(code ^ 0x40) if code < 0x80 else f'{code:02x}'
    shown = {'\\': r'\textbackslash{}', '?': '?', '[': '[', '@': '@'}.get(caret, caret)
    assert r'a\textasciicircum{}\textasciicircum{}' + shown + 'b' in latex


def test_a_backquote_prints_as_a_backquote_in_latex(tmp_path):
    """H07b (wrong): '`code`' printed '‘code‘' (TeX reads ` as an opening quote, as it reads
    " as a closing one, which the report already writes in the typewriter font)."""
    _, latex = tables(renamed(tmp_path, {'ViterbiPlanNet': '`code`', 'Base Model': '?`x!``y'}))
    assert row_line(latex, r'\textasciigrave{}code').startswith(
        r'\textasciigrave{}code\textasciigrave{}\textsuperscript')
    assert row_line(latex, '?').startswith(
        r'?\textasciigrave{}x!\textasciigrave{}\textasciigrave{}y')
    assert '`' not in latex


def test_names_without_control_characters_or_backquotes_give_the_same_latex(tmp_path):
    """No-false-change half: a tab, a line break and other marks are written as before."""
    _, latex = tables(renamed(tmp_path, {'ViterbiPlanNet': 'a\tb', 'Base Model': 'c\nd "q"'}))
    assert row_line(latex, 'a\tb').startswith('a\tb\\textsuperscript')
    assert row_line(latex, 'c d').startswith(r'c d \texttt{"}q\texttt{"}')
    assert '^^' not in latex and 'textasciicircum' not in latex


# ------------------------------------------------------ H03 (vague): --rename with a control
def test_a_rename_to_a_name_with_a_control_character_names_the_rename():
    """H03 (vague): `--rename 'ViterbiPlanNet=VPN\\x0cFF'` was refused as "rows[0] (method
    'VPN\\x0cFF', seed 0)": an internal list, not the file's first row nor the option. The
    rename item is named."""
    from vpn_plugin.protocol.results import rename_methods
    rows = [_row('VPN'), _row('Base')]
    with pytest.raises(ValueError, match=r"rename 'VPN=V\\x0cP': the new name holds the control "
                                         r"character\(s\) '\\x0c'"):
        rename_methods(rows, ['VPN=V\x0cP'], known={'VPN', 'Base'})
    assert [r.method for r in rename_methods(rows, ['VPN=V\tP\nQ'], known={'VPN', 'Base'})] == \
        ['V\tP\nQ', 'Base']
