"""Issue 37, pass 17 (fixsmall): small items the fourteenth hostile pass noticed and left. Each
test fails on 90c48c9 (checked in a worktree of it) but the two guards of what the change keeps
(an integer horizon, a CSV with a byte-order mark)."""
import ast
import json
from pathlib import Path

import pytest

from test_hostile_pass10_protocol import niv_runner, niv_stems
from test_hostile_pass15_fixrows import rows_of, tool_refusal

ROOT = Path(__file__).resolve().parents[1]
T3 = ROOT / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


# ---------------------------------------------- 1: the row check refuses what the run refuses
@pytest.mark.parametrize('body, refused', [
    ('horizon = 6.0', 'horizon=6.0; expected an integer >= 1'),
    ('test_horizon = 0', 'test_horizon=0; expected an integer >= 1 (or None)'),
], ids=['float-horizon', 'zero-test-horizon'])
def test_a_row_naming_a_config_its_run_refuses_is_refused(tmp_path, body, refused):
    """passP C_float: a row naming a config with ``horizon = 6.0`` passed the row check
    (6.0 == 6), although the run refuses that config (data_paths.apply_horizon); a config's
    ``test_horizon = 0`` was read as "no test horizon". The row check now applies the run's
    rule (runner_keys.check_runner_kinds of the two keys) and says what the run says."""
    from vpn_plugin.data_paths import load_config
    config = tmp_path / 'their_vpn_niv_t6.py'
    config.write_text(f"_base_ = ['{ROOT / 'configs' / 'vpn_niv_t6.py'}']\n{body}\n")
    with pytest.raises(ValueError) as run:  # the run's refusal
        load_config(str(config))
    assert str(run.value) == f'{config}: {refused}'
    path = rows_of(tmp_path, 'float.jsonl', lambda row: row.update(config=str(config)))
    message = tool_refusal('report', [str(path)])
    assert f'names config {config} (with its settings.cfg_options ' in message
    assert f'to compare the row with it: ValueError: {config}: {refused}; fix the row or ' \
        'the config' in message


def test_a_row_naming_a_config_of_an_integer_horizon_still_passes(tmp_path, capsys):
    """No cry wolf: the same config with ``horizon = 6`` is read and shown."""
    from tool_modules import load_tool
    config = tmp_path / 'their_vpn_niv_t6.py'
    config.write_text(f"_base_ = ['{ROOT / 'configs' / 'vpn_niv_t6.py'}']\nhorizon = 6\n")
    path = rows_of(tmp_path, 'int.jsonl', lambda row: row.update(config=str(config)))
    load_tool('report').main([str(path), '--metrics', 'success_rate'])
    assert '| ViterbiPlanNet' in capsys.readouterr().out


# ---------------------------------------------- 2: a .jsonl with a byte-order mark
def test_a_jsonl_with_a_byte_order_mark_is_read_as_without(tmp_path):
    """passP R10: a results .jsonl saved with a UTF-8 BOM was refused ("Unexpected UTF-8 BOM")
    while the same rows as CSV with a BOM were read. One reader of results text reads past it
    (also when a row is appended to such a file); errors still name the file's own byte."""
    from vpn_plugin.protocol.results import append_result, read_results
    plain = read_results(T3)
    bom = tmp_path / 'bom.jsonl'
    bom.write_bytes(b'\xef\xbb\xbf' + T3.read_bytes())
    assert read_results(bom) == plain
    assert append_result(bom, plain[0]) is False  # the row is there: found, not doubled
    assert len(read_results(bom)) == len(plain)
    bad = tmp_path / 'bad.jsonl'
    bad.write_bytes(b'\xef\xbb\xbf{"a\xff')
    with pytest.raises(ValueError, match='at byte 6;'):
        read_results(bad)


# ---------------------------------------------- 3: --help descriptions are whole sentences
def test_every_tool_help_description_is_a_whole_sentence():
    """passP: ``tools/keep_results.py --help`` showed "... so that its tables and figures can
    be" (the docstring's first line, cut mid-sentence); so did benchmark_checked_arguments,
    benchmark_observation_cache, make_text_features and plan. Each tool whose description is
    its docstring's first line has a sentence there."""
    cut = []
    for path in sorted((ROOT / 'tools').glob('*.py')):
        text = path.read_text()
        if 'description=__doc__' not in text:
            continue
        first = ast.get_docstring(ast.parse(text), clean=False).splitlines()[0]
        if not first.rstrip().endswith('.'):
            cut.append(f'{path.name}: {first}')
    assert cut == []


# ---------------------------------------------- 4: V.NPZ beside the V.npz looked for
def test_a_feature_file_of_an_upper_case_extension_is_named(tmp_path):
    """passV H36: a folder holding only ``V.NPZ`` got "V.npy does not exist (nor V.npz)"
    without a word of the file there; the message now names it (it is not read)."""
    from vpn_plugin.datasets.annotations import BadVideoError
    from vpn_plugin.datasets.features import find_feature_file, load_features
    (tmp_path / 'V.NPZ').write_bytes(b'not read')
    with pytest.raises(BadVideoError) as raised:
        load_features(find_feature_file(tmp_path, 'V'), 512)
    assert (f'feature file {tmp_path / "V.npy"} does not exist (nor V.npz); the folder holds '
            'V.NPZ, whose extension differs only by case: expected V.npz or V.npy (rename '
            'it)') in str(raised.value)
    (tmp_path / 'W.npz').write_bytes(b'')  # another video's file is no near name of V's
    (tmp_path / 'V.NPZ').unlink()
    with pytest.raises(BadVideoError) as raised:
        load_features(find_feature_file(tmp_path, 'V'), 512)
    assert 'the folder holds' not in str(raised.value)


def test_a_dry_run_names_the_upper_case_feature_files(tmp_path, shared_data):
    """The protocol's feature check (run_protocol --dry-run, before a submission) names the
    upper-case file of its first missing video too."""
    folder = tmp_path / 'features'
    folder.mkdir()
    stems = sorted(set(niv_stems(shared_data, 'train')) | set(niv_stems(shared_data, 'test')))
    for stem in stems:
        (folder / f'{stem}.NPZ').touch()
    runner, units = niv_runner(tmp_path, folder)
    _, problems = runner.check_feature_files(units)
    assert problems and all('.NPZ, whose extension differs only by case' in p for p in problems)


# ---------------------------------------------- guard: the .jsonl CSV twin still reads
def test_a_csv_with_a_byte_order_mark_still_reads(tmp_path):
    from vpn_plugin.protocol.results import read_results, write_results_csv
    rows = read_results(T3)
    csv_path = tmp_path / 'r.csv'
    write_results_csv(csv_path, rows)
    csv_path.write_bytes(b'\xef\xbb\xbf' + csv_path.read_bytes())
    assert [json.dumps(r.metrics, sort_keys=True) for r in read_results(csv_path)] == \
        [json.dumps(r.metrics, sort_keys=True) for r in rows]
