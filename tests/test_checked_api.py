"""Public functions hold their arguments to their declared kinds by one rule
(``config_types.checked_arguments``), and results rows hold their fields to
``protocol.results.ROW_SCHEMA``: a value of another kind is refused naming the function (or the
file and line), the parameter (or field), the value and the kind, never read by its truth value
or as a number it is not (issue 37; pass 8's silent cases in /tmp/hostile18_log.md and
/tmp/hostile19_log.md)."""
import importlib
import inspect
import json
import math
import pkgutil
import re
import typing
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin
from vpn_plugin.config_types import conforms, describe, option_types
from vpn_plugin.protocol.results import METRIC_KINDS, ROW_SCHEMA, read_results

HOSTILE = [0, -1, 1.5, 'abc', None, True, [], {}, 1e9, float('nan'), float('inf')]
# the rooms whose public functions must be decorated (the brief of issue 37's schema3)
SCOPE = ('vpn_plugin.core', 'vpn_plugin.apis', 'vpn_plugin.baselines.llm',
         'vpn_plugin.datasets', 'vpn_plugin.protocol.report', 'vpn_plugin.protocol.plots',
         'vpn_plugin.protocol.results')
# public functions of those rooms that must carry the marker (pass 8's and the API's entries)
MUST_BE_CHECKED = [
    'vpn_plugin.core.stats.bootstrap_ci', 'vpn_plugin.core.stats.bootstrap_difference',
    'vpn_plugin.core.stats.seed_interval', 'vpn_plugin.core.stats.stratified_sample',
    'vpn_plugin.core.diversity.decoding_diversity', 'vpn_plugin.core.beam_search.pkg_beam_search',
    'vpn_plugin.core.dvl.differentiable_viterbi', 'vpn_plugin.core.viterbi.viterbi_decode_probs',
    'vpn_plugin.core.metrics.miou_batch', 'vpn_plugin.core.pkg.build_pkg',
    'vpn_plugin.core.pkg.union_pkg', 'vpn_plugin.core.pkg.edge_dropout',
    'vpn_plugin.core.pkg.weight_noise', 'vpn_plugin.core.pkg.subsample_sequences',
    'vpn_plugin.core.pkg.label_noise', 'vpn_plugin.core.pkg.pkg_log_transitions',
    'vpn_plugin.apis.inference.init_planner', 'vpn_plugin.apis.inference.inference_planner',
    'vpn_plugin.apis.inference.video_observations', 'vpn_plugin.apis.video.init_s3d',
    'vpn_plugin.apis.video.plan_from_video', 'vpn_plugin.baselines.llm.evaluate.run_planner',
    'vpn_plugin.baselines.llm.anchors.load_anchor_predictions',
    'vpn_plugin.datasets.annotations.build_windows', 'vpn_plugin.datasets.features.load_features',
    'vpn_plugin.protocol.report.build_table', 'vpn_plugin.protocol.plots.curve_points',
]


def checked_functions() -> dict:
    """``{module.qualname: function}`` of every function of the package carrying the
    decorator's marker (found by walking the package)."""
    found = {}
    for info in pkgutil.walk_packages(vpn_plugin.__path__, 'vpn_plugin.'):
        if info.name == 'vpn_plugin.mm' or not info.name.startswith(SCOPE):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isfunction(value) and getattr(value, 'checked_arguments', False):
                found[f'{value.__module__}.{value.__qualname__}'] = value
    return found


CHECKED = checked_functions()


def config_kind(annotation) -> bool:
    """Whether ``annotation`` declares a config kind (a value the rule holds), not a tensor,
    a path or a class of its own."""
    base = typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated \
        else annotation
    origin = typing.get_origin(base)
    if origin in (typing.Union, __import__('types').UnionType):
        members = [m for m in typing.get_args(base) if m is not type(None)]
        return bool(members) and all(config_kind(m) for m in members)
    return base in (bool, int, float, str, list, dict) or origin in (typing.Literal, list,
                                                                     dict, tuple)


def declared_kinds(function) -> dict:
    return {name: kind for name, kind in option_types(function).items() if config_kind(kind)}


def sample_value(kind):
    """A value of ``kind`` (for the other parameters of a call)."""
    literals = [a for a in typing.get_args(kind) if typing.get_origin(kind) is typing.Literal]
    for value in literals + [1, 2, 0.5, 'x', False, [], {}, None]:
        if conforms(value, kind):
            return value
    raise AssertionError(f'no sample value of {describe(kind)}')


def hostile_call(function, name, value):
    """Call ``function`` with ``name=value``, the other declared parameters at a conforming
    value and the undeclared ones at a placeholder (the check runs before the body)."""
    kinds = declared_kinds(function)
    arguments = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.name == name:
            arguments[name] = value
        elif parameter.default is parameter.empty:
            arguments[parameter.name] = (sample_value(kinds[parameter.name])
                                         if parameter.name in kinds else
                                         placeholder(option_types(function).get(parameter.name)))
    return function(**arguments)


def placeholder(kind):
    """A value for an undeclared parameter (a tensor, a path) that its own kind lets through:
    an object where nothing is checked, a path where a path is declared."""
    for value in (object(), Path('x'), 'x'):
        if kind is None or conforms(value, kind):
            return value
    raise AssertionError(f'no placeholder of {describe(kind)}')


CASES = [(qualname, name, value) for qualname, function in sorted(CHECKED.items())
         for name, kind in declared_kinds(function).items() for value in HOSTILE
         if not conforms(value, kind)]


def test_the_walk_finds_every_public_entry():
    missing = [name for name in MUST_BE_CHECKED if name not in CHECKED]
    assert not missing, f'not decorated with checked_arguments: {missing}'
    assert len(CASES) > 300, len(CASES)


@pytest.mark.parametrize('qualname, name, value', CASES,
                         ids=[f'{q.rsplit(".", 1)[1]}-{n}-{v!r}' for q, n, v in CASES])
def test_a_hostile_argument_is_refused_naming_function_parameter_and_value(qualname, name,
                                                                           value):
    function = CHECKED[qualname]
    kind = declared_kinds(function)[name]
    with pytest.raises(ValueError) as error:
        hostile_call(function, name, value)
    assert str(error.value) == (f'{function.__qualname__}() argument {name}={value!r}; '
                                f'expected {describe(kind)}')


@pytest.mark.parametrize('qualname', sorted(CHECKED))
def test_defaults_conform_to_their_kinds(qualname):
    function = CHECKED[qualname]
    kinds = declared_kinds(function)
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name in kinds and parameter.default is not parameter.empty:
            assert conforms(parameter.default, kinds[parameter.name]), \
                (qualname, parameter.name, parameter.default, describe(kinds[parameter.name]))


# --------------------------------------------------- pass 8's silent cases, by name (hostile19)
def test_pass8_bootstrap_num_resamples_true_is_no_count():
    from vpn_plugin.core import bootstrap_ci
    with pytest.raises(ValueError, match=r'bootstrap_ci\(\) argument num_resamples=True; '
                                         r'expected an integer >= 1'):
        bootstrap_ci([1.0, 2.0, 3.0], num_resamples=True)
    mean, low, high = bootstrap_ci([1.0, 2.0, 3.0], num_resamples=np.int64(50))
    assert mean == 2.0 and low < high


def test_pass8_bootstrap_difference_paired_no_is_no_switch():
    from vpn_plugin.core import bootstrap_difference
    with pytest.raises(ValueError, match=r"bootstrap_difference\(\) argument paired='no'; "
                                         'expected True or False'):
        bootstrap_difference([1, 2, 3], [1, 2, 4], paired='no')
    assert bootstrap_difference([1, 2, 3], [1, 2, 4], paired=True)[0] == pytest.approx(-1 / 3)


def test_pass8_stratified_sample_limit_true_and_float_tasks():
    from vpn_plugin.core.stats import stratified_sample
    with pytest.raises(ValueError, match=r'stratified_sample\(\) argument limit=True; '
                                         r'expected an integer >= 1 \(or None\)'):
        stratified_sample([0, 1, 1], True, keys=range(3))
    with pytest.raises(TypeError, match='tasks hold float64 values; expected integer task'):
        stratified_sample([0.5, 1.7, 1.2], 2, keys=range(3))  # the array's own dtype check, kept
    assert len(stratified_sample(np.array([0, 1, 1, 2]), np.int32(2), keys=range(4))) == 2


def test_pass8_min_group_size_one_and_a_half():
    from vpn_plugin.core import decoding_diversity
    plans = np.array([[0, 1, 2], [0, 2, 2], [0, 1, 2]])
    with pytest.raises(ValueError, match=r'decoding_diversity\(\) argument min_group_size=1.5; '
                                         r'expected an integer >= 1'):
        decoding_diversity(plans, plans, min_group_size=1.5)
    assert decoding_diversity(plans, plans, min_group_size=3)['num_groups'] == 1


def test_pass8_beam_search_first_as_a_fraction_keeps_its_tensor_check():
    from vpn_plugin.core import pkg_beam_search
    log_transitions = torch.full((3, 3), 1 / 3).log()
    for first in (torch.tensor([1.7]), torch.tensor([True])):
        with pytest.raises((TypeError, ValueError), match='first'):
            pkg_beam_search(log_transitions, first, torch.tensor([2]), 3)
    with pytest.raises(ValueError, match=r'pkg_beam_search\(\) argument horizon=2.5'):
        pkg_beam_search(log_transitions, torch.tensor([1]), torch.tensor([2]), 2.5)
    paths, _ = pkg_beam_search(log_transitions, torch.tensor([1]), torch.tensor([2]), 3)
    assert paths[0, 0] == 1 and paths[0, -1] == 2


def test_the_dvl_and_the_pkg_keep_their_values_under_the_rule():
    """The decorator changes nothing for valid arguments (same values as the function it
    wraps), numpy scalars included."""
    from vpn_plugin.core import build_pkg, differentiable_viterbi, pkg_log_transitions
    pkg = build_pkg([[0, 1, 2], [0, 2, 1]], np.int64(3), smoothing=np.float64(0.5))
    log_transitions = pkg_log_transitions(pkg, clamp=1e-10)
    emissions = torch.randn(2, 3, 3).log_softmax(-1)
    checked = differentiable_viterbi(emissions, log_transitions, temperature=0.5, num_layers=2)
    plain = differentiable_viterbi.__wrapped__(emissions, log_transitions, temperature=0.5,
                                               num_layers=2)
    assert torch.equal(checked[0], plain[0]) and torch.equal(checked[1], plain[1])


# ----------------------------------------------------------- the results row schema (hostile18)
ROW = dict(method='VPN', seed=0, horizon=3, metrics=dict(success_rate=20.0, mean_accuracy=40.0),
           params=1000, dataset='niv', config='cfg.py', train_horizon=3, protocol='standard',
           variant={}, per_sample_file='', work_dir='', shortened='', pkg_source='',
           selection='', features={}, settings={}, failures={}, usage={})
ROW_CASES = [(name, value) for name in ROW_SCHEMA for value in HOSTILE]


def results_file(tmp_path, **edit) -> str:
    path = tmp_path / 'results.jsonl'
    rows = [dict(ROW, seed=5), {**ROW, 'seed': 1, **edit}]
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return str(path)


def test_the_row_schema_declares_every_field():
    from vpn_plugin.protocol.results import ResultRow
    assert set(ROW_SCHEMA) == set(ResultRow.__dataclass_fields__)


@pytest.mark.parametrize('name, value', ROW_CASES, ids=[f'{n}-{v!r}' for n, v in ROW_CASES])
def test_a_hostile_field_is_refused_naming_file_line_field_value_and_kind(tmp_path, name,
                                                                          value):
    path = results_file(tmp_path, **{name: value})
    if conforms(value, ROW_SCHEMA[name]) and name != 'metrics':
        row = read_results(path)[1]
        read = getattr(row, name)
        if value is None:  # null = the field's default
            assert read in ('', None, {}), (name, read)
        elif name in ('per_sample_file', 'work_dir'):  # read from the file's folder
            assert read == str(tmp_path / value)
        elif name != 'shortened':
            assert read == value
        return
    with pytest.raises(ValueError) as error:
        read_results(path)
    message = str(error.value)
    if name == 'metrics' and isinstance(value, dict):  # {}: an empty dict of metrics
        assert message.startswith(f'{path}:2: field metrics={{}}; expected a non-empty dict')
    else:
        assert message == f'{path}:2: field {name}={value!r}; expected ' \
            f'{describe(ROW_SCHEMA[name])}'


@pytest.mark.parametrize('value', [v for v in HOSTILE
                                   if not conforms(v, METRIC_KINDS['success_rate'])])
def test_a_hostile_metric_value_is_refused(tmp_path, value):
    path = results_file(tmp_path, metrics=dict(success_rate=value))
    with pytest.raises(ValueError, match=re.escape(f'{path}:2: field metrics.success_rate='
                                                   f'{value!r}; expected a finite number')):
        read_results(path)


def test_pass8_r_cases_zero_and_empty_list_are_no_text(tmp_path):
    """R1/R12/R56/R89: 0 or [] in a text field (or 0 as shortened) was read as empty."""
    for name in ('shortened', 'selection', 'per_sample_file', 'pkg_source', 'dataset'):
        for value in (0, []):
            with pytest.raises(ValueError, match=re.escape(f':2: field {name}={value!r}; ')):
                read_results(results_file(tmp_path, **{name: value}))


def test_a_csv_row_is_held_to_the_same_schema(tmp_path):
    from vpn_plugin.protocol.results import ResultRow, write_results_csv
    path = tmp_path / 'results.csv'
    write_results_csv(path, [ResultRow(**ROW), ResultRow(**dict(ROW, seed=1))])
    assert [row.seed for row in read_results(path)] == [0, 1]
    header, first, second = path.read_text().splitlines()
    cells = second.split(',')
    cells[header.split(',').index('horizon')] = '2.5'
    path.write_text('\n'.join([header, first, ','.join(cells)]) + '\n')
    with pytest.raises(ValueError, match=re.escape(f"{path}:3: field horizon='2.5'; expected "
                                                   'an integer >= 1')):
        read_results(path)


def test_nan_metrics_in_a_json_row_name_the_row(tmp_path):
    path = results_file(tmp_path, metrics=dict(success_rate=math.nan, mean_accuracy=40.0))
    with pytest.raises(ValueError, match=r'results\.jsonl:2: field metrics\.success_rate=nan'):
        read_results(path)
