"""Eighth hostile pass (issue 37), the protocol and what follows training (hostile18): the
seventh pass's vague cases left (E38, F12, D2) and this pass's findings, each test failing on
main b5995ac (the behaviour before its fix)."""
import subprocess
import sys
from pathlib import Path

import pytest

from vpn_plugin.protocol.results import read_results

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


def tool(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


# ------------------------------------------------------------ pass 7's vague cases
@pytest.mark.parametrize('text', ['', '\n\n', '[]'])
def test_a_results_file_without_rows_is_named(tmp_path, text):
    """Before (E38): an empty results file gave "no results rows match protocol=None ...",
    which does not say that the file is empty."""
    path = tmp_path / ('results.json' if text == '[]' else 'results.jsonl')
    path.write_text(text)
    with pytest.raises(ValueError, match=rf'results file .*{path.name} holds no results rows'):
        read_results(path)
    assert read_results(path, empty_ok=True) == []


def test_report_bounds_the_bootstrap_resamples():
    """Before (F12): --num-resamples 100000000 ran with no bound and no word, 7 GB resident
    after 15 s and growing."""
    from vpn_plugin.core.stats import MAX_RESAMPLES, bootstrap_ci
    for flag in ('--num-resamples', '--num-diff-resamples'):
        done = tool('tools/report.py', KEPT, flag, MAX_RESAMPLES + 1)
        assert done.returncode == 2
        assert f'K={MAX_RESAMPLES + 1}; expected 20 .. {MAX_RESAMPLES}' in done.stderr
    with pytest.raises(ValueError, match=f'num_resamples={MAX_RESAMPLES + 1}; expected 20 ..'):
        bootstrap_ci([1.0, 2.0, 3.0], num_resamples=MAX_RESAMPLES + 1)


def test_a_protocol_config_given_as_a_model_config_is_named():
    """Before (D2): dataset_stats.py --config configs/protocol/standard_niv.py said "top-level
    config key 'horizons' is unknown; did you mean 'horizon'?" (train.py/test.py the same)."""
    from vpn_plugin.data_paths import load_config
    with pytest.raises(ValueError, match=r"standard_niv\.py is a protocol config "
                       r"\(protocol='standard_niv'.*tools/run_protocol\.py"):
        load_config(ROOT / 'configs' / 'protocol' / 'standard_niv.py')


# ------------------------------------------------------------ results rows: field types
def edited_row(tmp_path, name, value) -> Path:
    import json
    lines = KEPT.read_text().splitlines()
    row = json.loads(lines[0])
    row[name] = value
    path = tmp_path / 'results.jsonl'
    path.write_text('\n'.join([json.dumps(row)] + lines[1:]) + '\n')
    return path


@pytest.mark.parametrize('name', ['selection', 'dataset', 'config', 'protocol',
                                  'per_sample_file', 'work_dir', 'pkg_source'])
@pytest.mark.parametrize('value', [0, -1, 1.5, True, [], {}])
def test_a_text_field_of_another_type_is_named(tmp_path, name, value):
    """Before: selection -1 / dataset 0 / per_sample_file 1.5 / config [] crashed in the table
    with a TypeError naming no file ("'<' not supported between 'int' and 'str'", "unhashable
    type: 'list'"), and 0, [] or {} were read as an empty text without a word."""
    path = edited_row(tmp_path, name, value)
    with pytest.raises(ValueError, match=rf'results\.jsonl:1: field {name}={value!r}; expected '
                       rf'a string \(or None\)'.replace('[', r'\[')):
        read_results(path)


@pytest.mark.parametrize('value', [0, 1, 0.0, 'abc'])
def test_variant_and_shortened_of_another_type_are_named(tmp_path, value):
    """Before: variant 0 / 'abc' crashed ("'int' object has no attribute 'items'"); shortened
    0 or 1 was read as false / true without a word while -1 was refused."""
    with pytest.raises(ValueError, match=rf'results\.jsonl:1: field variant={value!r}; '
                       'expected a dict'):
        read_results(edited_row(tmp_path, 'variant', value))
    if value != 'abc':
        with pytest.raises(ValueError, match=rf'field shortened={value!r}; expected a string '
                           r'or True or False'):
            read_results(edited_row(tmp_path, 'shortened', value))


# ------------------------------------------------------------ plots.py overlap
def test_an_overlap_share_of_no_windows_is_not_zero_percent():
    """Before: a reference that solves no window gave "introduced: 0.0% of its successes"
    (0 / max(0, 1)), and such a seed pulled the mean over seeds down as a 0%."""
    import numpy as np
    from vpn_plugin.protocol.plots import Overlap, _share_over_seeds, overlap_table
    assert _share_over_seeds(np.array([0, 0]), np.array([0, 0])) == (None, None, None)
    mean, _, _ = _share_over_seeds(np.array([0, 5, 2]), np.array([0, 10, 10]))
    assert mean == pytest.approx(np.mean([50.0, 20.0]))  # seed 0 (no windows) left out
    overlap = Overlap('A', 'B', 229, 41, 0, 0, [0], (15.2, None, None), (None, None, None))
    row = overlap_table([overlap]).splitlines()[2]
    assert row.endswith('| 15.2 | n/a |')
