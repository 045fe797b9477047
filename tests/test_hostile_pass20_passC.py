"""Seventeenth hostile pass, engineer passC (the literal config reader and its callers): each
test fails on bc5f1b3 (checked in a worktree of it) unless marked a guard. Log:
/tmp/passC_log.md.

The oracle is mmengine running the same files (``Config.fromfile``): the literal reading of a
config outside configs/ (``data_paths.read_config_safely``) gives mmengine's value or refuses
naming file and line. Found at bc5f1b3: top-level annotations (Python evaluates them: ``x:
_base_.update(horizon=9) = 1``) were ignored (A01-A06, W_ann_h: rows accepted under a config
that trains at another horizon); a lambda value, which mmengine drops, was kept unread (T04,
W_lambda_th: a false refusal); ``_base_ = x = [...]`` refused with a false reason (T01);
``1 + 2j`` refused as "Python refuses it" (V48); operations, constructors, keys and
generators Python refuses were read (V20-V57, T10: rows accepted under configs that cannot
load); ``{{$ENV:default}}`` in a comment or docstring refused (C01-C03); a cycle that exists
only with links resolved refused (L02, W_cycle); a ``.txt`` base and a ``..`` through a missing
folder read (Y09, N06); an unread dataset horizon, a test_dataloader that is no dict, a
row's cfg_options over an unread value passed or failed with mmengine's words (W_unread_dsh,
W_loader_list, W_unread_model).
"""
import pytest
from mmengine.config import Config

BASE = ("horizon = 3\ntest_horizon = 3\nlst = [1, 2]\ndata_root = 'data/niv'\n"
        "test_dataloader = dict(dataset=dict(type='X', horizon=3, data_root=data_root))\n")
H = "_base_ = ['b3.py']\n"


def write(folder, files: dict, main='c.py'):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / 'b3.py').write_text(BASE)
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder / main


def literal(path):
    from vpn_plugin.data_paths import read_config_safely
    return read_config_safely(str(path)).to_dict()


# read by mmengine; the literal reading must give exactly its values
READ = {
    'T01_base_first_of_two_targets': "_base_ = x = ['b3.py']\nhorizon = 6\n",
    'T04_lambda_dropped': H + 'test_horizon = lambda: 0\nf = lambda x: x\n',
    'V48_complex': H + 'c = 1 + 2j\nd = -(2j)\n',
    'X_minus_true': H + 'x = -True\n',  # found while fixing: "unary USub of True" refused
    'C01_env_in_comment': H + 'horizon = 6  # was {{$PASSC_H:3}}\n',
    'C02_env_in_docstring': '"""Run with {{$PASSC_H:3}}."""\n' + H + 'horizon = 6\n',
    'G_dict_of_pairs': H + "d = dict([('a', 1)])\nk = list({'a': 1})\nt = tuple()\n",  # guard
    'G_annotation_types': H + "horizon: int = 6\nlst: list[int] = [3]\nroot: 'str' = 'r'\n",
}


@pytest.mark.parametrize('name', sorted(READ))
def test_a_config_mmengine_reads_is_read_with_its_values(tmp_path, name):
    path = write(tmp_path, {'c.py': READ[name]})
    assert literal(path) == Config.fromfile(str(path)).to_dict()


def test_an_env_placeholder_in_a_yaml_comment_is_no_value_but_one_in_a_value_is(tmp_path):
    path = write(tmp_path, {'c.yaml': '_base_: [b3.py]\nhorizon: 6  # {{$PASSC_H:3}}\n'},
                 'c.yaml')
    assert literal(path) == Config.fromfile(str(path)).to_dict()
    (tmp_path / 'c.yaml').write_text("horizon: 6  # {{$PASSC_H:3}}\nroot: '{{$PASSC_R:x}}'\n")
    with pytest.raises(ValueError, match=r'c\.yaml: line 2: \{\{\$PASSC_R:x\}\} takes its value'):
        literal(path)


# mmengine refuses (or reads another value than the literal reading of bc5f1b3 gave)
REFUSED = {
    'A01_annotation_call': (H + 'x: _base_.update(horizon=9) = 1\n', r'c\.py:2: an annotation'),
    'A02_annotation_only': (H + "horizon: globals().__setitem__('horizon', 9)\n",
                            r'c\.py:2: an annotation'),
    'A03_annotation_walrus': (H + 'x: (horizon := 9) = 1\n', r'c\.py:2: an annotation'),
    'A04_annotation_name': (H + 'horizon: undefined_name\n', r'c\.py:2: an annotation \(undefined_name\)'),
    'V20_division_by_zero': (H + 'x = 1 / 0\n', r'c\.py:2: .*division by zero'),
    'V22_text_minus_text': (H + "x = 'a' - 'b'\n", r'c\.py:2: str - str'),
    'V25_text_times_float': (H + "x = 'a' * 2.5\n", r'c\.py:2: str \* float'),
    'V37_unhashable_in_set': (H + 'x = {1, (2, [3])}\n', r'c\.py:2: a set'),
    'V39_unhashable_key': (H + 'k = [1]\nx = {k: 2}\n', r'c\.py:3: the dict key \[1\]'),
    'V50_list_of_none': (H + 'x = list(None)\n', r'c\.py:2: list\(None\)'),
    'V54_list_keyword': (H + 'x = list(a=1)\n', r'c\.py:2: list\(a=1\) .*keyword'),
    'V57_dict_two_values': (H + "x = dict({'a': 1}, {'b': 2})\n", r'c\.py:2: dict\(.*at most 1 argument'),
    'T10_generator': (H + 'g = (i for i in [1])\n', r'c\.py:2: a generator expression'),
    'Y09_txt_base': ("_base_ = ['b.txt']\n", r"c\.py: its _base_ file .*b\.txt has \.txt"),
    'N06_dotdot_missing_folder': ("_base_ = ['nosub/../b3.py']\n",
                                  r"c\.py:1: its _base_ file 'nosub/\.\./b3\.py' does not exist "
                                  'as written'),
    'N04_spaced_base': ("_base_ = ['b3.py ']\n", r"c\.py:1: its _base_ file 'b3\.py ' does not "
                                                 'exist \\(its name ends or starts with a space'),
    'T05_reserved': (H + "filename = 'x'\n", r'c\.py: filename is a name mmengine keeps'),
    'E10_nul': (H + "x = 'a\x00b'\n", r'c\.py: line 2: a NUL character'),
    'V12_placeholder_index': (H + 'h = {{_base_.lst.0}}\n', r'c\.py: \{\{_base_\.lst\.0\}\}: no '
                                                           'such value'),
}


@pytest.mark.parametrize('name', sorted(REFUSED))
def test_a_config_mmengine_refuses_or_reads_otherwise_is_refused_naming_it(tmp_path, name):
    text, match = REFUSED[name]
    path = write(tmp_path, {'c.py': text, 'b.txt': 'horizon: 6\n'})
    with pytest.raises((ValueError, OSError), match=match):
        literal(path)


def test_a_yaml_key_that_is_no_text_is_named(tmp_path):
    path = write(tmp_path, {'c.yaml': '_base_: [b3.py]\n1: one\n'}, 'c.yaml')
    with pytest.raises(ValueError, match=r'c\.yaml: the top-level key 1 is int'):
        literal(path)


def test_a_base_link_loop_is_named_a_loop(tmp_path):
    path = write(tmp_path, {'c.py': "_base_ = ['L1.py']\n"})
    (tmp_path / 'L1.py').symlink_to('L2.py')
    (tmp_path / 'L2.py').symlink_to('L1.py')
    with pytest.raises(FileNotFoundError, match=r'L1\.py is a symbolic link to L2\.py, which '
                                                r'leads back to itself'):
        literal(path)


def cycle_through_links(tmp_path):
    """L02: A/c.py -> A/L/m.py (a link to B/m.py, whose `_base_ = ['c.py']`) -> A/L/c.py, found
    beside the link as mmengine finds it; with links resolved B/c.py -> A/c.py: a cycle."""
    write(tmp_path, {'A/c.py': "_base_ = ['L/m.py']\n", 'A/L/c.py': H.replace('b3', '../../b3')
                     + 'horizon = 6\n', 'B/m.py': "_base_ = ['c.py']\n"})
    (tmp_path / 'A/L/m.py').symlink_to('../../B/m.py')
    (tmp_path / 'B/c.py').symlink_to('../A/c.py')
    return tmp_path / 'A/c.py'


def test_a_cycle_only_through_resolved_links_is_no_cycle(tmp_path):
    from vpn_plugin.data_paths import config_chain
    path = cycle_through_links(tmp_path)
    assert literal(path) == Config.fromfile(str(path)).to_dict()
    # the one walker, for configs mmengine runs too: the files mmengine reads
    assert tmp_path / 'A/L/c.py' in config_chain(path)
    assert tmp_path / 'A/c.py' not in config_chain(path)[1:]


def test_the_run_walker_finds_a_linked_bases_own_bases_beside_the_link(tmp_path):
    """Next 2 of closing14: config_chain's run mode resolved each base before reading its
    bases (B/hz.py), mmengine reads them beside the link (A/hz.py)."""
    from vpn_plugin.data_paths import config_chain
    path = write(tmp_path, {'c.py': "_base_ = ['A/m.py']\n", 'A/hz.py': 'horizon = 3\n',
                            'B/m.py': "_base_ = ['hz.py']\n", 'B/hz.py': 'horizon = 6\n'})
    (tmp_path / 'A/m.py').symlink_to('../B/m.py')
    assert Config.fromfile(str(path)).horizon == 3
    assert tmp_path / 'A/hz.py' in config_chain(path)
    assert tmp_path / 'B/hz.py' not in config_chain(path)
    assert config_chain(path) == config_chain(path, literal=True)


def facts(path, options=None):
    import json
    from vpn_plugin.protocol.results import _config_facts, _config_key
    return _config_facts(*_config_key(str(path)), json.dumps(options or {}))


@pytest.mark.parametrize('text, options, match', [
    (H + 'horizon = 6\ntest_horizon = 6\ntest_dataloader = dict(dataset=dict(horizon=[4][0]))\n',
     None, r'test_dataloader\.dataset\.horizon=4 contradicts test_horizon=6'),  # computed (s17)
    (H + 'horizon = 6\ntest_horizon = 6\ntest_dataloader = dict(dataset=dict(horizon=int(4)))\n',
     None, r'test_dataloader\.dataset\.horizon is not read .*c\.py:4, a call of int'),
    (H + 'horizon = 6\nmodel = [dict(type="X")][int(0)]\n', {'model.decode': 'x'},
     r'model is not read .*c\.py:3, a call of int'),
    (H + 'horizon = 6\ntest_dataloader = [1]\n', None, r'test_dataloader = \[1\]; expected a dict'),
])
def test_the_results_check_refuses_what_it_cannot_compare(tmp_path, text, options, match):
    """W_unread_dsh (silent: the run refuses dataset horizon 4 under test_horizon 6),
    W_unread_model (vague: mmengine's inherit text naming data_paths.Unread), W_loader_list
    (silent: no run builds test data from a list)."""
    path = write(tmp_path, {'c.py': text})
    with pytest.raises(ValueError, match=match):
        facts(path, options)


def test_a_block_of_plain_assignments_keeps_the_names_set_before_it(tmp_path):
    """closing14 Next 2: for a config mmengine runs (the horizon and inert-variable checks read
    each file's own top level), a statement outside the subset made every name set before it
    unknown, so those checks skipped the file's horizon without a word; an ``if`` of plain
    assignments changes only the names it assigns. A call still makes everything unknown."""
    from vpn_plugin.data_paths import _own_top_level
    path = tmp_path / 'c.py'
    path.write_text("horizon = 6\nif True:\n    x = 1\nobservation = 'mean3'\n")
    assert _own_top_level(path) == {'horizon': 6, 'observation': 'mean3'}
    path.write_text("horizon = 6\nif True:\n    globals().update(horizon=3)\nobservation = 'm'\n")
    assert _own_top_level(path) == {'observation': 'm'}
