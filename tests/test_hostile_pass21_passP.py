"""Session 16, hostile pass (passP, log /tmp/passP_log.md): a method name holding a line break
(``\\n``, ``\\r``) in the Markdown caption, the LaTeX table and the figures; --status of a Slurm
unit that left no trace; a variant number written as text on a figure's axis. Each test fails
on 3ce84f9 (its no-false-change halves pass there too)."""
import json
from pathlib import Path

import pytest

from test_hostile_pass17_passP import drawn_params_figure, renamed, row_line, tables


def caption_of(markdown: str) -> str:
    """The Markdown after the table: the caption's lines up to the marker."""
    after = markdown.split('\n| Δ |', 1)[1].split('\n', 1)[1]
    return after.split('<!--', 1)[0].strip('\n')


# --------------------------------------------- H03, H06, H07: a line break in a Markdown caption
@pytest.mark.parametrize('name', ['a\n\nb', 'x\n# y', 'p\n- q', 'a\r\rb', 'c\r\n---'])
def test_a_line_break_in_a_name_keeps_the_markdown_caption_one_paragraph(tmp_path, name):
    """H03, H06 (wrong): a shortened method named 'a\\n\\nb' or 'x\\n# y' is named in the
    caption's † list: the raw line break cut the caption into two paragraphs, or made its whole
    tail ('y: max_epochs=20 ...; Tested checkpoints ...') a heading. A line break is '<br>',
    as in the name's table cell."""
    markdown, _ = tables(renamed(tmp_path, {'ViterbiPlanNet': name}))
    caption = caption_of(markdown)
    assert '\n' not in caption and '\r' not in caption, caption
    flat = name.replace('\r\n', '<br>').replace('\r', '<br>').replace('\n', '<br>')
    assert flat + ': max_epochs=20' in caption, caption
    assert '\r' not in markdown


def test_names_without_line_breaks_give_the_same_markdown(tmp_path):
    """No-false-change half: the escape of other names is as before (markup kept literal)."""
    markdown, _ = tables(renamed(tmp_path, {'ViterbiPlanNet': '*VPN* <b> # 1'}))
    assert row_line(markdown, r'\*VPN') == r'| \*VPN\* \<b\> # 1†‖ | 5.55M | 26.12 ± 0.69 |'
    assert '<br>' not in markdown


# ----------------------------------------------------- H07: a carriage return in a LaTeX name
def test_a_carriage_return_in_a_name_is_no_blank_line_in_latex(tmp_path):
    """H07 (wrong): a name 'a\\r\\rb' was written with its CRs; TeX ends a line at a CR, so
    the two are a blank line, \\par, inside the cell and \\caption: pdfLaTeX stopped
    ("Paragraph ended before \\addcontentsline was complete"). It is folded into a blank, as
    '\\n' was."""
    _, latex = tables(renamed(tmp_path, {'ViterbiPlanNet': 'a\r\rb', 'Base Model': 'c\r\nd'}))
    assert '\r' not in latex
    assert row_line(latex, 'a b').startswith('a b')
    assert row_line(latex, 'c d').startswith('c d')
    assert '\n\n' not in latex


# ------------------------------------------------------ H10: a carriage return in a figure text
def test_a_carriage_return_in_a_name_is_a_line_break_in_a_figure(tmp_path, monkeypatch):
    """H10 (wrong): matplotlib breaks a text only at '\\n': the legend entry of 'a\\r\\rb'
    drew 'b' and the marks † ‖ over its start (the figure named another method, its marks
    lost). Every text of a figure breaks its lines at '\\r' and '\\r\\n' too; '\\n' as before."""
    fig = drawn_params_figure(tmp_path, monkeypatch, renamed(
        tmp_path, {'ViterbiPlanNet': 'a\r\rb', 'PKG + uniform emissions': 'p\nq'}))
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert 'a\n\nb†‖' in texts, texts
    assert 'p\nq‖' in texts, texts
    assert not any('\r' in t for t in texts)


# ------------------------------------------- P11: --status of a Slurm unit that left no trace
def slurm_status(tmp_path, make_work_dir: bool):
    """The --status of standard_niv's ViterbiPlanNet T=3 seed 0 (smoke), submitted in task
    210_0 (no longer queued), with no unit_state.json; its work dir made or not."""
    from mmengine.config import Config
    from vpn_plugin.protocol import status as status_module
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    root = Path(__file__).resolve().parents[1]
    protocol = Config.fromfile(root / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    work_dir = Path(runner.work_dir(units[0]))
    if make_work_dir:
        work_dir.mkdir(parents=True)
    original = status_module.read_submissions
    status_module.read_submissions = lambda folder: {str(work_dir.absolute()): ('210_0', 'e')}
    try:
        (status,) = status_module.unit_statuses(runner, units, queue=lambda jobs: {})
    finally:
        status_module.read_submissions = original
    return status


def test_status_of_a_slurm_unit_without_a_trace_says_so(tmp_path):
    """P11 (wrong): a Slurm unit that finished, whose work dir and rows were then deleted, was
    "interrupted: its task 210_0 ended before the unit finished": nothing says how far it got
    (a unit its cancelled task never reached looks the same). The line says what is known."""
    status = slurm_status(tmp_path, make_work_dir=False)
    assert status.state == 'interrupted'
    assert 'before the unit finished' not in status.why, status.why
    assert status.why == ('its task 210_0 ended; the unit left no work dir and its rows are '
                          'not in the results (never reached, or deleted): a rerun runs it'), \
        status.why


def test_status_of_a_slurm_unit_its_task_started_is_unchanged(tmp_path):
    """No-false-change half: a unit whose work dir is there is still "ended before the unit
    finished"."""
    status = slurm_status(tmp_path, make_work_dir=True)
    assert status.why == 'its task 210_0 ended before the unit finished', status.why


# ---------------------------------------------------- VQ7: a variant number written as text
def curve_rows(tmp_path, level):
    """The kept pkg-quality rows with seed 1's edge-dropout level 0.1 written as ``level``."""
    from vpn_plugin.protocol.results import read_results
    source = Path(__file__).resolve().parents[1] / 'docs/results_data/pkg_quality_niv.jsonl'
    rows = []
    for line in source.read_text().splitlines():
        row = json.loads(line)
        if row['seed'] == 1 and row['variant'] == {'level': 0.1, 'perturbation': 'edge_dropout'}:
            row['variant']['level'] = level
        rows.append(row)
    path = tmp_path / 'rows.jsonl'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return read_results([path])


def test_a_variant_number_written_as_text_is_refused_on_an_axis(tmp_path):
    """VQ7 (silent): seed 1's level written "0.1" was drawn as 0.1 and averaged with the other
    seeds' number 0.1 into one point (the tables refuse to pool the two, and the docstring said
    text is refused)."""
    from vpn_plugin.protocol.plots import curve_values
    with pytest.raises(ValueError, match=r"seed 1, T=3\): variant level='0\.1'; expected a "
                                         'finite number, written as a number'):
        curve_values(curve_rows(tmp_path, '0.1'), 'level', 'success_rate', 'perturbation')


@pytest.mark.parametrize('level', [0.1, 1e-1, 0.10000000000000000555])
def test_a_variant_number_in_any_json_spelling_is_one_point(tmp_path, level):
    """No-false-refusal half: the number in any spelling (and an int 0 beside 0.0) draws."""
    from vpn_plugin.protocol.plots import curve_values
    values = curve_values(curve_rows(tmp_path, level), 'level', 'success_rate', 'perturbation')
    assert values == curve_values(curve_rows(tmp_path, 0.1), 'level', 'success_rate',
                                  'perturbation')
    assert len(values[('niv', 3)]['ViterbiPlanNet: edge_dropout'][0.1]) == 3


# ------------------------------------------------ EF1: a figure's band and the table's interval
EFFICIENCY = Path(__file__).resolve().parents[1] / 'docs/results_data/sample_efficiency_niv.jsonl'


def test_a_figure_band_is_the_tables_interval_of_its_cell():
    """EF1 (silent): the curve / efficiency / pkg-quality bands drew K=100 resamples, the
    tables (and the params and overlap figures) the authors' K=1000: ViterbiPlanNet at 25 % of
    the training windows had a band up to 20.74 beside the table's 19.14, and the note named
    no K. Every band is the authors' interval (oracle: their bootstrap, transcribed)."""
    from test_report import authors_interval
    from vpn_plugin.protocol.plots import efficiency_points
    from vpn_plugin.protocol.results import read_results
    rows = read_results([EFFICIENCY])
    points = efficiency_points(rows)[('ViterbiPlanNet', 3)]
    for x, mean, low, high in points:
        scores = [r.metrics['success_rate'] for r in sorted(rows, key=lambda r: r.seed)
                  if r.method == 'ViterbiPlanNet' and 100 * r.variant['train_fraction'] == x]
        assert len(scores) == 3
        assert (low, high) == pytest.approx(authors_interval(scores), abs=1e-9), x
    assert points[2][3] == pytest.approx(19.1358024691358)
