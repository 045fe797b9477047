"""Lead fixes of session 11 (the thirteenth hostile pass's merge)."""
import json

import pytest

from vpn_plugin.outputs import KINDS


@pytest.mark.parametrize('extra, ours', [
    ({}, True),
    ({'horizon': 3, 'train_horizon': 6}, True),  # what tools/test.py writes since fixrows2
    ({'damaged_features': ['a.npz: 2 chunks unreadable']}, True),  # since fixleft
    ({'horizon': '3'}, False),
    ({'train_horizon': True}, False),
    ({'damaged_features': [3]}, False),
    ({'epoch': 3}, False),  # not a key of ours: another program's JSON
])
def test_a_metrics_json_of_tools_test_is_recognised_with_its_horizons(tmp_path, extra, ours):
    """Before: the horizons test.py now writes beside the numbers made its own metrics JSON
    'not recognisably an earlier output' (a second test into the same --out-metrics refused)."""
    path = tmp_path / 'metrics.json'
    path.write_text(json.dumps({'plan/success_rate': 27.4, 'not_compared': [], **extra}))
    assert KINDS['metrics'].recognise(path) is ours
