"""docs/model_zoo.md: every "ours" figure (SR / mAcc / mIoU) is the row of the table it links."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CELL = re.compile(r'(\d+\.\d\d) / (\d+\.\d\d) / (\d+\.\d\d) '
                  r'\(\[[^\]]*\]\((results_synthetic_\w+\.md)\)')


def table_rows(path):
    """``[{column: cell}]`` of the first Markdown table of ``path``, marks and bold removed."""
    lines = [line for line in path.read_text().splitlines() if line.startswith('| ')]
    header = [c.strip() for c in lines[0].strip('|').split('|')]
    rows = []
    for line in lines[1:]:
        cells = [re.sub(r'<u>|</u>|\*\*|\*', '', c).split(' ± ')[0].strip()
                 for c in line.strip('|').split('|')]
        rows.append(dict(zip(header, cells)))
    return rows


def metric(row, name):
    """The row's cell of the metric ``name`` ('SR', 'mAcc', 'mIoU'), whatever the horizon."""
    return next(v for k, v in row.items() if re.fullmatch(rf'T=\d {name}', k))


def test_every_ours_figure_is_a_row_of_its_table():
    cells = CELL.findall((REPO / 'docs' / 'model_zoo.md').read_text())
    assert len(cells) >= 10
    for sr, acc, iou, table in cells:
        rows = table_rows(REPO / 'docs' / table)
        assert any((metric(r, 'SR'), metric(r, 'mAcc'), metric(r, 'mIoU')) == (sr, acc, iou)
                   for r in rows), (sr, acc, iou, table)


def test_the_check_fails_on_a_figure_that_is_not_in_its_table():
    rows = table_rows(REPO / 'docs' / 'results_synthetic_standard_t3.md')
    assert ('31.10', '59.66', '61.56') in {(metric(r, 'SR'), metric(r, 'mAcc'), metric(r, 'mIoU'))
                                           for r in rows}
    assert ('31.11', '59.66', '61.56') not in {(metric(r, 'SR'), metric(r, 'mAcc'),
                                                metric(r, 'mIoU')) for r in rows}
