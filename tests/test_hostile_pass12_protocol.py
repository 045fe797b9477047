"""Eleventh hostile pass (issue 37, part B, confirm4): the protocol and what follows training;
each test fails on main e8caac6 (the behaviour before its fix)."""
import json
import shutil
from pathlib import Path

import pytest

from tool_modules import load_tool
from vpn_plugin.protocol.plots import error_overlap
from vpn_plugin.protocol.results import filter_rows, read_results

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / 'docs' / 'results_data'


def test_variant_filter_refuses_one_key_twice():
    """Before (R55): --variant train_fraction=0.1 train_fraction=0.5 kept the 0.5 rows only,
    the first filter dropped without a word."""
    rows = read_results(DATA / 'sample_efficiency_niv.jsonl')
    with pytest.raises(ValueError, match=r"variant filter 'train_fraction' is given twice "
                       r"\(train_fraction=0.1 and train_fraction=0.5\)"):
        filter_rows(rows, variant=['train_fraction=0.1', 'train_fraction=0.5'])
    assert {r.variant['train_fraction'] for r in
            filter_rows(rows, variant=['train_fraction=0.5'])} == {0.5}


def copied_t6(tmp_path) -> Path:
    """docs/results_data/main_t6_niv.jsonl and its per-sample dumps, copied into tmp_path."""
    shutil.copytree(DATA / 'main_t6_niv', tmp_path / 'main_t6_niv')
    shutil.copy(DATA / 'main_t6_niv.jsonl', tmp_path / 'main_t6_niv.jsonl')
    return tmp_path / 'main_t6_niv.jsonl'


def test_overlap_refuses_a_dump_of_another_seed(tmp_path):
    """Before (P16): seed 1's dump copied over seed 0's: the overlap counted seed 1's windows
    twice and seed 0's never, exit 0."""
    results = copied_t6(tmp_path)
    dumps = tmp_path / 'main_t6_niv'
    rows = read_results(results)
    assert error_overlap(rows, 'ViterbiPlanNet', 'SCHEMA w/o PKG').seeds == [0, 1, 2]
    shutil.copy(dumps / 'viterbiplannet_T6_seed1.json', dumps / 'viterbiplannet_T6_seed0.json')
    with pytest.raises(ValueError, match=r"viterbiplannet_T6_seed0.json records \w+ = [\d.]+, but "
                       r"the row of 'ViterbiPlanNet' seed 0 T=6 it belongs to has [\d.]+; expected "
                       r"the dump of that very test"):
        error_overlap(read_results(results), 'ViterbiPlanNet', 'SCHEMA w/o PKG')


@pytest.mark.parametrize('damage', ['truncated', 'other seed'])
def test_keep_results_refuses_a_damaged_dump(tmp_path, damage):
    """Before (K4, K3): a truncated dump, or another seed's, was archived ("kept 18 rows, 3
    per-sample dumps"), exit 0; the damage showed only when a figure read the kept copy."""
    results = copied_t6(tmp_path)
    dump = tmp_path / 'main_t6_niv' / 'viterbiplannet_T6_seed0.json'
    if damage == 'truncated':
        dump.write_text(dump.read_text()[:len(dump.read_text()) // 2])
    else:
        shutil.copy(dump.with_name('viterbiplannet_T6_seed1.json'), dump)
    tool = load_tool('keep_results')
    with pytest.raises(SystemExit, match=r'viterbiplannet_T6_seed0.json'):
        tool.main([str(results), '--out', str(tmp_path / 'kept.jsonl'), '--dumps', 'ViterbiPlanNet'])
    assert not (tmp_path / 'kept.jsonl').exists() and not (tmp_path / 'kept').exists()


def test_masked_seed_is_no_score():
    """Before (S3): bootstrap_ci of a masked array averaged the masked seed's value (mean 43.5
    of [20, 99 masked, 30, 25])."""
    import numpy as np
    from vpn_plugin.core.stats import bootstrap_ci
    with pytest.raises(ValueError, match=r'scores is a masked array with masked entries at \[1\]'):
        bootstrap_ci(np.ma.masked_array([20.0, 99.0, 30.0, 25.0], mask=[0, 1, 0, 0]))
    assert bootstrap_ci(np.ma.masked_array([20.0, 25.0, 30.0]))[0] == 25.0


def test_bfloat16_scores_are_read():
    """Before (S4): a bfloat16 tensor of scores: "TypeError: Got unsupported ScalarType
    BFloat16", naming no argument."""
    import torch
    from vpn_plugin.core.stats import bootstrap_ci
    assert bootstrap_ci(torch.tensor([20.0, 25.0, 30.0], dtype=torch.bfloat16))[0] == 25.0


def test_variant_filter_refuses_a_number_written_as_a_string(tmp_path):
    """Before (R71): seed 1's rows holding train_fraction "0.1" (a string): --variant
    train_fraction=0.1 dropped them without a word (a table of n=2)."""
    lines = (DATA / 'sample_efficiency_niv.jsonl').read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        if record['seed'] == 1:
            record['variant']['train_fraction'] = str(record['variant']['train_fraction'])
    given = tmp_path / 'given.jsonl'
    given.write_text(''.join(json.dumps(r) + '\n' for r in records))
    with pytest.raises(ValueError, match=r"row of '[^']+' seed 1 T=3 has variant train_fraction="
                       r'"0.1" \(a string\) where the filter train_fraction=0.1 asks the number'):
        filter_rows(read_results(given), variant=['train_fraction=0.1'])


def test_mem_per_run_without_unit_below_a_gigabyte_is_refused():
    """Before (F20): --mem-per-run 16 went to sbatch as --mem=16, i.e. 16 MB (a task killed
    for memory on a cluster that enforces it), and the dry run showed "memory 16"."""
    from vpn_plugin.protocol.slurm import parse_memory
    with pytest.raises(ValueError, match=r"--mem-per-run '16': sbatch reads a number without a "
                       r"unit as megabytes \(16 MB, too little for a training\); expected the unit "
                       r"written: 16G, or 16M if megabytes are meant"):
        parse_memory('16')
    assert [parse_memory(v) for v in ('16G', '16M', '4000', '1t')] == ['16G', '16M', '4000', '1T']


def test_rename_a_method_whose_name_holds_an_equals_sign():
    """Before (X17): --rename 'ViterbiPlanNet (train T=6)=VPN' split at the first '=': "'ViterbiPlanNet
    (train T' is not a method ...; did you mean 'ViterbiPlanNet (train T=6)'?", a name no
    rename could reach (the cross-horizon protocol's method names hold '=')."""
    from dataclasses import replace
    from vpn_plugin.protocol.results import rename_methods
    rows = [replace(r, method='ViterbiPlanNet (train T=6)') if r.method == 'ViterbiPlanNet' else r
            for r in read_results(DATA / 'main_t3_crosstask.jsonl')]
    known = {r.method for r in rows}
    renamed = rename_methods(rows, ['ViterbiPlanNet (train T=6)=VPN (T=6)'], known)
    assert 'VPN (T=6)' in {r.method for r in renamed}
    assert 'ViterbiPlanNet (train T=6)' not in {r.method for r in renamed}
    assert {r.method for r in rename_methods(rows, ['Base Model=a=b'], known)} >= {'a=b'}


def test_finished_rows_of_other_features_are_not_done(tmp_path):
    """Before (X18/X22): a finished smoke protocol rerun with --feature-dir at other features
    (every array x 2, another fingerprint) said "2 runs, 2 already finished, 0 to run", exit 0,
    the old features' rows standing for the new ones."""
    import numpy as np
    from dataclasses import replace
    from mmengine.config import Config
    from vpn_plugin.datasets.provenance import folder_fingerprint
    from vpn_plugin.protocol.results import append_result
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    features = tmp_path / 'features'
    features.mkdir()
    np.savez(features / 'a.npz', frames_features=np.zeros((4, 2), np.float32))
    protocol = Config.fromfile(REPO / 'configs/protocol/standard_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True,
                            data_paths={'feature_dir': str(features)})
    runner.root.mkdir(parents=True)
    row = runner.row_for(units[0], units[0].tests[0], metrics={'success_rate': 1.0})
    made_with = folder_fingerprint(features)['fingerprint']
    append_result(runner.results_file, replace(row, features={'fingerprint': made_with}))
    runner.check_done_features(units)  # the same features: done
    np.savez(features / 'a.npz', frames_features=np.ones((4, 2), np.float32))
    message = (rf"holds the row of 'ViterbiPlanNet' seed 0 T=3, tested on features of fingerprint "
               rf"{made_with}, but its test now reads .*features \(fingerprint [0-9a-f]{{16}}\): "
               r"other features")
    with pytest.raises(ValueError, match=message):
        runner.check_done_features(units)
    from vpn_plugin.protocol.slurm import SlurmRequest, plan_array  # the Slurm path (H3)
    with pytest.raises(ValueError, match=message):
        plan_array(runner, units, SlurmRequest('debug'), 4.32, limit=(120, 'partition debug'))
