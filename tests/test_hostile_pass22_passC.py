"""Nineteenth hostile pass, engineer passC (the literal config reader and its callers): each
test fails on 84e3204 (checked in a worktree of it) unless marked a guard. Log:
/tmp/passC_log.md.

The oracle is mmengine running the same files (``Config.fromfile``). Found at 84e3204:
- two names bound to one dict (``test_dataloader = val_dataloader``, a YAML anchor) were merged
  as one object, so ``_delete_`` was read for the first only and the second was merged over its
  base: mmengine copies each value apart first (W_alias, K_alias, F_alias: a false refusal
  "whose test data is 'crosstask'"; D32, I19, I20, J04, J06: other values);
- ``_base_.values`` / ``_base_.d.copy`` read as the key, where mmengine gives the dict method
  (F01, F02, J07): now unread, naming ``{{_base_.x}}`` for the key;
- annotations ``list[int] | None`` and ``tuple[int, ...]`` refused (D01, D02, J02), and
  ``None | None`` (a TypeError in Python) read (J01);
- a .json / .yaml config outside configs/ with a key twice or a YAML 1.1 number (``06``,
  ``1:30``) read without a word, which the same file in configs/ is refused for (W_json_dup,
  W_yaml_dup, W_yaml_oct, J08, J10);
- a test ``data_root`` that is no text skipped the dataset check (H_drlist); the dataset
  refusal of a row whose own ``cfg_options`` set the data put it on the config (H_opt_ds).
"""
import json

import pytest
from mmengine.config import Config
from test_hostile_pass20_passC import H, literal, write


def rows_file(tmp_path, config, options=None, dataset='niv'):
    path = tmp_path / 'rows.jsonl'
    path.write_text(json.dumps({
        'method': 'VPN', 'seed': 0, 'horizon': 6, 'dataset': dataset, 'config': str(config),
        'settings': {'cfg_options': options or {}}, 'metrics': {'success_rate': 1.0}}) + '\n')
    return path


def check_rows(path):
    from vpn_plugin.protocol.results import check_rows_match_configs, read_results
    check_rows_match_configs(read_results(path))


CROSSTASK_BASE = ("horizon = 3\ntest_dataloader = dict(batch_size=4, dataset=dict(type='X', "
                  "horizon=3, data_root='data/crosstask'))\nval_dataloader = dict(dataset=dict("
                  "type='X', horizon=3, data_root='data/crosstask'))\n"
                  "train_dataloader = dict(dataset=dict(type='X', horizon=3, "
                  "data_root='data/crosstask'))\n")

ALIASED = {
    'W_alias': H + ("horizon = 6\nval_dataloader = dict(_delete_=True, dataset=dict(type='X', "
                    "horizon=6))\ntest_dataloader = val_dataloader\n"),
    'D32': H + 'test_dataloader = dict(_delete_=True, dataset=dict(horizon=6))\n'
               'copy = test_dataloader\n',
    'I19': H + ("ds = dict(_delete_=True, type='Y')\ntrain_dataloader = dict(dataset=ds)\n"
                'test_dataloader = dict(dataset=ds)\n'),
    'I20': H + ('val_dataloader = dict(_delete_=True, x=1)\ntest_dataloader = val_dataloader\n'
                'train_dataloader = val_dataloader\n'),
    'J06': H + "d = dict(_delete_=True, a=1)\nx = [d, (d, [d])]\ntest_dataloader = d\n",
    # guards: a shared dict without _delete_, a copy by list(), a tuple rebound by +=
    'J05': H + ('shared = dict(dataset=dict(horizon=6))\ntrain_dataloader = shared\n'
                'test_dataloader = shared\nval_dataloader = shared\n'),
    'E40': H + 'x = [dict(_delete_=True, a=1)]\ny = x\nz = list(x)\n',
    'E38': H + 'a = (1,)\nb = a\na += (2,)\n',
}


# a base setting the three loaders (each name of ALIASED merges over one)
LOADERS = ("horizon = 3\nlst = [1, 2]\ntest_dataloader = dict(dataset=dict(type='X', "
           "horizon=3, data_root='data/niv'))\ntrain_dataloader = dict(dataset=dict(type='X', "
           "horizon=3))\nval_dataloader = dict(dataset=dict(type='V'))\n")


@pytest.mark.parametrize('name, file', [*((name, 'b3.py') for name in sorted(ALIASED)),
                                         ('W_alias', 'b3.json'), ('I19', 'b3.json')])
def test_names_sharing_one_dict_are_merged_apart_as_mmengine_does(tmp_path, name, file):
    """W_alias / D32 / I19 / I20 / J06 (wrong values): ``_delete_`` popped from the dict two
    names share, so the second name was merged over its base."""
    base = LOADERS
    files = {'c.py': ALIASED[name].replace('b3.py', file)}
    if file == 'b3.json':  # the same base as JSON (another layout)
        files['b3.json'] = json.dumps(Config.fromstring(base, '.py').to_dict())
    else:
        files['b3.py'] = base
    path = write(tmp_path, files)
    if file == 'b3.py':
        (tmp_path / 'b3.py').write_text(base)
    assert literal(path) == Config.fromfile(str(path)).to_dict()


def test_a_yaml_anchor_shared_by_two_keys_is_merged_apart(tmp_path):
    """J04 (wrong value): ``test_dataloader: *v`` after ``train_dataloader: &v`` with
    ``_delete_: true``."""
    path = write(tmp_path, {'c.yaml': "_base_: [b3.py]\ntrain_dataloader: &v\n  _delete_: true"
                                      "\n  dataset: {horizon: 6}\ntest_dataloader: *v\n"},
                 'c.yaml')
    (tmp_path / 'b3.py').write_text(LOADERS)
    assert literal(path) == Config.fromfile(str(path)).to_dict()
    assert literal(path)['test_dataloader'] == {'dataset': {'horizon': 6}}


def test_a_row_naming_a_config_with_an_aliased_loader_is_not_refused(tmp_path):
    """W_alias / K_alias / F_alias (false refusal): "whose test data is 'crosstask'" while
    mmengine's test data has no data_root (the child's dict replaces the base's)."""
    path = write(tmp_path, {
        'ct.py': CROSSTASK_BASE,
        'c.py': ("_base_ = ['ct.py']\nhorizon = 6\nval_dataloader = dict(_delete_=True, "
                 "dataset=dict(type='X', horizon=6))\ntest_dataloader = val_dataloader\n")})
    assert 'data_root' not in Config.fromfile(str(path)).test_dataloader.dataset
    check_rows(rows_file(tmp_path, path))


@pytest.mark.parametrize('text, method', [
    ("_base_ = ['bm.py']\nv = _base_.values\n", 'values'),
    ("_base_ = ['bm.py']\nv = _base_.d.copy\n", 'copy'),
    ("_base_ = ['bm.py']\nv = _base_.d.get\n", 'get'),
])
def test_a_base_key_named_as_a_dict_method_is_not_read_as_the_key(tmp_path, text, method):
    """F01 / F02 / J07 (wrong values): mmengine's ``_base_.values`` is ConfigDict's method,
    not the key: unread, naming the line and the placeholder that reads the key."""
    from vpn_plugin.data_paths import Unread, read_config_safely
    path = write(tmp_path, {'c.py': text, 'bm.py': 'values = [1, 2]\nd = dict(copy=3, get=2)\n'})
    assert callable(Config.fromfile(str(path)).v)
    value = read_config_safely(str(path))._cfg_dict['v']
    assert isinstance(value, Unread)
    assert value.where.startswith(f'{path}:2, _base_.') and f'dict method {method}()' \
        in value.where and '{{_base_.' in value.where


def test_a_base_key_read_by_placeholder_or_another_name_is_read(tmp_path):
    """Guard: ``{{_base_.values}}`` (mmengine subscripts: the key) and other keys."""
    path = write(tmp_path, {'c.py': "_base_ = ['bm.py']\na = {{_base_.values}}\nb = _base_.d.k\n",
                            'bm.py': 'values = [1, 2]\nd = dict(k=3)\n'})
    assert literal(path) == Config.fromfile(str(path)).to_dict()


def test_a_plain_type_annotation_is_read(tmp_path):
    """D01 / D02 / J02 (false refusals): ``list[int] | None`` and ``tuple[int, ...]`` are plain
    types (docs: "list[int]-style or int | None"); the last three are guards."""
    annotations = ['list[int] | None', 'None | dict[str, list[int]]', 'tuple[int, ...]',
                   'tuple[int, ...] | int', 'tuple[()]', 'int | str | None', 'None | int',
                   "'int | None'"]
    path = write(tmp_path, {'c.py': H + ''.join(f'x{i}: {annotation} = (1,)\n'
                                                for i, annotation in enumerate(annotations))})
    assert literal(path) == Config.fromfile(str(path)).to_dict()


@pytest.mark.parametrize('annotation', ['None | None', "int | 'str'", 'list[int] | 1'])
def test_an_annotation_python_refuses_is_refused(tmp_path, annotation):
    """J01 (silent): ``None | None`` is a TypeError when the config runs; it was read."""
    path = write(tmp_path, {'c.py': H + f'x: {annotation} = 1\n'})
    with pytest.raises(TypeError):
        Config.fromfile(str(path))
    with pytest.raises(ValueError, match=rf'c\.py:2: an annotation \({annotation}\)'):
        literal(path)


@pytest.mark.parametrize('name, text, message', [
    ('c.json', '{"_base_": ["b3.py"], "horizon": 3, "horizon": 6}',
     r"the key 'horizon' is given twice in one object: 3 and 6"),
    ('c.json', '{"_base_": ["b3.py"], "x": {"a": 1, "a": 2}}',
     r"the key 'a' is given twice in one object: 1 and 2"),
    ('c.yaml', '_base_: [b3.py]\nhorizon: 3\nhorizon: 6\n',
     r"line 3: the key 'horizon' is given twice in one mapping"),
    ('c.yaml', '_base_: [b3.py]\nhorizon: 06\n', r'line 2: 06 is read by YAML 1.1 as the int 6'),
    ('c.yaml', '_base_: [b3.py]\na: 1:30\n', r'line 2: 1:30 is read by YAML 1.1 as the int 90'),
    ('c.yml', '_base_: [b3.py]\nhorizon: 0x6\n', r'line 2: 0x6 is read by YAML 1.1 as the int 6'),
])
def test_a_mapping_config_is_held_to_the_rules_of_one_in_configs(tmp_path, name, text, message):
    """W_json_dup / W_yaml_dup / W_yaml_oct / J08 / J10 (silent): read without a word outside
    configs/, refused inside it (data_paths.check_mapping_file)."""
    path = write(tmp_path, {name: text}, name)
    with pytest.raises(ValueError, match=message):
        literal(path)


@pytest.mark.parametrize('name, text', [
    ('c.yaml', "_base_: [b3.py]\na: 6\nb: -0.5\nc: '06'\nd: \"0x6\"\ne: 1.0e+3\nf: .inf\n"),
    ('c.yml', '_base_: b3.py\nhorizon: 6\ntest_horizon: ~\nx: {a: 1, b: [1, 2]}\n'),
    ('c.json', '{"_base_": "b3.py", "horizon": 6, "x": {"a": 1}, "y": {"a": 2}, "n": NaN}'),
])
def test_a_mapping_config_in_plain_forms_is_read(tmp_path, name, text):
    """Guard (no false refusal): plain decimals, quoted odd forms, one key per mapping."""
    path = write(tmp_path, {name: text}, name)
    assert str(literal(path)) == str(Config.fromfile(str(path)).to_dict())


def test_a_test_data_root_that_is_no_text_is_refused(tmp_path):
    """H_drlist (silent): ``data_root=['../shared/data/niv']`` skipped the dataset check."""
    path = write(tmp_path, {'c.py': H + "horizon = 6\ntest_horizon = 6\ntest_dataloader = "
                                        "dict(dataset=dict(data_root=['data/crosstask']))\n"})
    with pytest.raises(ValueError, match=r"test_dataloader\.dataset\.data_root = "
                                         r"\['data/crosstask'\]; expected the folder"):
        check_rows(rows_file(tmp_path, path))


def test_a_dataset_set_by_the_rows_options_is_named_as_theirs(tmp_path):
    """H_opt_ds (vague): the refusal said the config's test data is 'crosstask' (the config
    tests niv; the row's own cfg_options set crosstask)."""
    path = write(tmp_path, {'c.py': H + 'horizon = 6\ntest_horizon = 6\n'})
    options = {'test_dataloader.dataset.data_root': 'data/crosstask'}
    with pytest.raises(ValueError, match=r"names config .*c\.py \(with its settings\.cfg_options "
                                         r"\{'test_dataloader\.dataset\.data_root': "
                                         r"'data/crosstask'\}\), whose test data is 'crosstask'"):
        check_rows(rows_file(tmp_path, path, options))
    check_rows(rows_file(tmp_path, path))  # guard: the config alone tests niv


def test_the_bare_base_name_is_unread_not_unassigned(tmp_path):
    """F04 (vague): ``x = _base_`` was refused as "_base_ is not assigned earlier in the file"
    (it is; mmengine gives all the bases' values): unread, naming the line."""
    from vpn_plugin.data_paths import Unread, read_config_safely
    path = write(tmp_path, {'c.py': H + 'x = _base_\nhorizon = 6\n'})
    value = read_config_safely(str(path))._cfg_dict['x']
    assert isinstance(value, Unread) and value.where.startswith(f'{path}:2, _base_ alone')


@pytest.mark.parametrize('text', ["_base_: list = ['b3.py']\n", "_base_ = []\n_base_ += ['b3.py']\n"])
def test_a_base_list_annotated_or_augmented_is_named_as_such(tmp_path, text):
    """F25 (vague): ``_base_: list = [...]`` was "a statement outside the subset (AnnAssign)"
    while the docs list ``name: type = value``: mmengine reads no base from it."""
    path = write(tmp_path, {'c.py': text + 'x = 1\n'})
    with pytest.raises(ValueError, match=r'c\.py:\d: _base_ assigned with another name or in '
                                         r'another form .*expected _base_ = \['):
        literal(path)


def test_a_missing_base_placeholder_is_named_with_its_line(tmp_path):
    """D16 (vague): ``{{_base_.nope}}`` was refused naming the file, not the line."""
    path = write(tmp_path, {'c.py': H + 'a = {{_base_.horizon}}\nx = {{_base_.nope}}\n'})
    with pytest.raises(ValueError, match=r"c\.py:3: \{\{_base_\.nope\}\}: no such value"):
        literal(path)


def test_a_folder_name_breaking_a_filled_variable_is_named(tmp_path):
    """G04 (vague): a valid file in a folder named ``it's`` stops parsing once
    ``{{ fileDirname }}`` is filled in; the message said only "does not parse as Python"."""
    path = write(tmp_path, {"it's/c.py": "_base_ = ['{{ fileDirname }}/../b3.py']\n"}, "it's/c.py")
    with pytest.raises(ValueError, match=r"once mmengine has filled in \{\{ fileDirname \}\} .*"
                                         r"it's/c\.py.*a quote or a backslash"):
        literal(path)


def test_a_constructor_of_a_read_method_is_computed(tmp_path):
    """Found checking fixKnown's reader (false refusal): ``list(d.items())`` was "a call of list
    given an attribute (d.items)" while ``d.items()`` alone is computed (docs: ``.items()`` of
    dicts, ``list(...)``); a method passed uncalled (``map(d.get, ...)``) stays refused."""
    path = write(tmp_path, {'c.py': H + "d = dict(b=1, a=2)\na = list(d.items())\nb = tuple("
                                        "'a b'.split())\nc = dict(d.items())\n"})
    assert literal(path) == Config.fromfile(str(path)).to_dict()
    path = write(tmp_path, {'c.py': H + "d = dict(a=1)\na = list(map(d.get, ['a']))\n"})
    with pytest.raises(ValueError, match=r'c\.py:3: a call of list given an attribute \(d\.get\)'):
        literal(path)
