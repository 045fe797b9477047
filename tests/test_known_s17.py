"""Issue 37, the known items closing16 left (fixKnown, session 17), each failing on 84e3204
(checked in a worktree of it) unless it says it guards a valid input."""
import pytest
from mmengine.config import Config

# ------------------------- 1 (closing16 Next 1): a value no row check reads is unread, not refused
BASE = ("horizon = 3\ntest_horizon = 3\ndata_root = 'data/niv'\n"
        "test_dataloader = dict(dataset=dict(type='X', horizon=3, data_root=data_root))\n")
H = "_base_ = ['b3.py']\nhorizon = 3\n"


def _config(folder, text: str, name='c.py'):
    (folder / 'b3.py').write_text(BASE)
    (folder / name).write_text(text)
    return folder / name


def _check(*configs, horizon=3, dataset='niv'):
    from vpn_plugin.protocol.results import check_rows_match_configs, row_from_dict
    check_rows_match_configs([row_from_dict({
        'method': 'VPN', 'seed': seed, 'horizon': horizon, 'config': str(config),
        'dataset': dataset, 'metrics': {'success_rate': 1.0}})
        for config in configs for seed in (0, 1)])


# values the reader does not compute (a call of a builtin, an attribute, a lambda inside a
# value, and what is computed from one) in keys no row check reads: (text, key, construct)
UNREAD = {
    'comprehension_over_range': (
        "custom_hooks = [dict(type='PauseHook', seed=s) for s in range(2)]\n",
        'custom_hooks', 'a call of range'),
    'subscript_of_unread': ("steps = [10, 20][len('ab') - 1]\n", 'steps', 'a call of len'),
    'condition_on_unread': ("lr = 0.1 if max(1, 2) > 1 else 0.2\n", 'lr', 'a call of max'),
    'lambda_inside': ('optim = dict(f=lambda: 1)\n', 'optim.f', 'a lambda inside a value'),
    'attribute': ("n = (1).real\n", 'n', 'an attribute'),
}


@pytest.mark.parametrize('name', sorted(UNREAD))
def test_a_value_no_row_check_reads_is_noted_not_refused(tmp_path, capsys, name):
    """Before (lead, closing16 Noticed): any expression outside the subset refused every row
    naming the config (report, keep_results, plots, run_protocol's resubmission), also in a
    key no check reads. Now it is "unread at file:line (construct)" and a note names it once
    per config (two rows here)."""
    text, key, construct = UNREAD[name]
    path = _config(tmp_path, H + text)
    _check(path)
    err = capsys.readouterr().err
    assert err.count('note: ') == 1, err
    assert f'{path} (named by 2 results rows' in err
    assert f'not read without running the config: {key} ({path}:3, {construct}' in err
    assert 'not checked that it runs' in err


def test_the_slurm_tests_custom_hooks_comprehension_is_read_as_mmengine_builds_it(tmp_path,
                                                                                 capsys):
    """test_slurm_cluster's config (9008531 rewrote its comprehension as a literal list because
    rows naming it were refused): a comprehension over values read is computed, equal to
    mmengine's; no note (no false caveat)."""
    from vpn_plugin.data_paths import read_config_safely
    path = _config(tmp_path, H + (
        "custom_hooks = [dict(type='PKGHook')] + [dict(type='PauseAfterEpochOnRequestHook', "
        f"epoch=1, seed=seed, request={str(tmp_path)!r} + f'/pause{{seed}}', "
        f"marker={str(tmp_path)!r} + f'/paused{{seed}}') for seed in (0, 1)]\n"))
    assert read_config_safely(path).to_dict() == Config.fromfile(str(path)).to_dict()
    _check(path)
    assert capsys.readouterr().err == ''


def test_a_comprehension_beyond_the_bound_is_unread_not_computed(tmp_path, monkeypatch, capsys):
    """Nested comprehensions share one bound per file (10**5 items; 200 here): a config
    cannot make the reader loop 10**12 times, nor add up many statements under the bound."""
    from vpn_plugin import data_paths
    monkeypatch.setattr(data_paths, 'SIZE_BOUND', 200)
    path = _config(tmp_path, H + "y = [1] * 50\nz = ('a' * 20).join(['b'] * 20)\n"
                                 "x = [[j for j in 'a' * 60] for i in 'ab']\n")
    _check(path)
    err = capsys.readouterr().err
    assert f'x ({path}:5, a comprehension of more than 200 items' in err
    assert f'z ({path}:4, a call of .join, too large to compute here)' in err
    assert f'y ({path}' not in err  # [1] * 50: within the bound


def test_statements_under_the_bound_share_one_bound_per_file(tmp_path, monkeypatch, capsys):
    from vpn_plugin import data_paths
    monkeypatch.setattr(data_paths, 'SIZE_BOUND', 100)
    path = _config(tmp_path, H + "a = [i for i in 'a' * 40]\nb = [i for i in 'b' * 40]\n")
    _check(path)
    err = capsys.readouterr().err
    assert f'a ({path}' not in err  # 80 items
    assert f'b ({path}:4, ' in err  # 80 more: over the file's 100


# expressions the reader now computes as Python does (were refused as outside the subset)
COMPUTED = {
    'subscripts': "a = [10, 20][1]\nb = 'abc'[-1]\nc = dict(k=1)['k']\nd = [1, 2, 3][::2]\n",
    'conditions': "a = 1 if 2 > 1 else 1 / 0\nb = 0 or 'x'\nc = 1 < 2 < 3\nd = not 0\n",
    'comprehensions': "a = [i * 2 for i in (1, 2) if i > 1]\nb = {k: v for k, v in "
                      "dict(x=1).items()}\nc = {i for i in 'aba'}\n",
    'operators': "a = 2 ** 10 % 7 << 2\nb = 'x%sy' % 1\nc = [0] * 3\nd = ~5 ^ 3 | 8 & 12\n",
    'texts': "a = f'{3:05d}-{0.5!r}-{\"s\"!s:>3}'\nb = 'a,b'.split(',')\nc = [*'ab', *(1,)]\n",
    'horizon_from_a_subscript': "t = dict(h=3)\nhorizon = t['h']\ntest_horizon = [3][0]\n",
}


@pytest.mark.parametrize('name', sorted(COMPUTED))
def test_values_the_reader_computes_equal_mmengine_and_need_no_note(tmp_path, capsys, name):
    """Guard against a false refusal / caveat: each computed exactly as mmengine runs it."""
    from vpn_plugin.data_paths import read_config_safely
    path = _config(tmp_path, H + COMPUTED[name])
    assert read_config_safely(path).to_dict() == Config.fromfile(str(path)).to_dict()
    _check(path)
    assert capsys.readouterr().err == ''


# a row check that needs a value not read refuses naming it: (text, options, match)
NEEDED = {
    'horizon': ("_base_ = ['b3.py']\nhorizon = int(3)\n", None,
                r'horizon is not read without running the config \(.*c\.py:2, a call of int\), '
                r"which the row's horizon is compared with"),
    'test_horizon_of_a_base': ("_base_ = ['u.py']\n", None,
                               r'test_horizon is not read .*u\.py:3, a call of abs'),
    'data_root': (H + "test_dataloader = dict(dataset=dict(data_root=str('data/niv')))\n", None,
                  r"test_dataloader\.dataset\.data_root is not read .*c\.py:3, a call of str\), "
                  r"which the row's dataset is compared with"),
    'dataset_horizon': (H + 'train_dataloader = dict(dataset=dict(type="X", horizon=round(3)))\n',
                        None, r'train_dataloader\.dataset\.horizon is not read .*round'),
    'loader_of_a_comprehension': (
        H + "test_dataloader = [dict(dataset=dict(horizon=h)) for h in range(1)][0]\n", None,
        r'test_dataloader is not read .*c\.py:3, a call of range\), so neither is '
        r'test_dataloader\.dataset\.type'),
    'option_into_unread_model': (H + "model = dict(type=str('VPN'))\n", {'model.horizon': 3},
                                 r'model\.type is not read .*c\.py:3, a call of str'),
    'dict_over_an_unread_base_value': (
        "_base_ = ['u.py']\ntest_horizon = 3\nmodel = dict(type='VPN')\n", None,
        r'model is not read .*u\.py:4, a call of sorted'),
}


@pytest.mark.parametrize('name', sorted(NEEDED))
def test_a_row_check_needing_an_unread_value_refuses_naming_it(tmp_path, name):
    from vpn_plugin.protocol.results import check_rows_match_configs, row_from_dict
    text, options, match = NEEDED[name]
    (tmp_path / 'u.py').write_text("_base_ = ['b3.py']\nhorizon = 3\ntest_horizon = abs(-3)\n"
                                   "model = sorted([1])\n")
    path = _config(tmp_path, text)
    row = row_from_dict({'method': 'VPN', 'seed': 0, 'horizon': 3, 'config': str(path),
                         'dataset': 'niv', 'metrics': {'success_rate': 1.0},
                         'settings': {'cfg_options': options or {}}})
    with pytest.raises(ValueError, match=match) as error:
        check_rows_match_configs([row])
    assert "names config" in str(error.value) and 'Unread' not in str(error.value)


# what Python refuses is refused when the reader computes it, also in a key no check reads
# (on 84e3204 refused too, as "not read as a literal"; now with Python's words; the cases of
# 'a' % 1, 'abc'[5], 2.0 ** 10000, 10 ** 100000, [i for i in 5]: test_hostile_pass21_passC)
REFUSED = {
    'division': ('custom_hooks = [dict(x=1 / 0)]\n', r'c\.py:3: int / int \(1 / 0\): Python '
                                                     r'refuses it \(ZeroDivisionError'),
    'digits_by_shifts': ('x = 1 << 20000\n', r'c\.py:3: an operation \(1 << 20000\).*4300 digits'),
    'comprehension_element': ("x = [1 / i for i in (1, 0)]\n", r'c\.py:3: .*division by zero'),
    'condition_test': ("x = 1 if 'a' < 1 else 2\n", r"c\.py:3: a comparison .*'<' not "
                                                    r'supported'),
    'method_of_an_int': ('x = (5).split()\n', r'c\.py:3: .*split'),
    'unknown_function': ('x = [foo(1)]\n', r'c\.py:3: a call \(foo\), which may run any code'),
}


@pytest.mark.parametrize('name', sorted(REFUSED))
def test_what_python_refuses_stays_refused_when_computed(tmp_path, name):
    text, match = REFUSED[name]
    path = _config(tmp_path, H + text)
    with pytest.raises(ValueError, match=match):
        _check(path)


# ------------------------------------ 2: a row's config is read once, however its rows spell it
def test_a_config_spelt_four_ways_is_read_once_and_again_when_it_changes(tmp_path, monkeypatch):
    """Before: ``results._config_facts`` was cached by the path as spelt (``./c.py``,
    ``sub/../c.py``, the absolute path, a link to it: four reads, ~1.2 s each for a repository
    config); now by the file read and its bytes. A changed file is read again (guard)."""
    import os
    from vpn_plugin import data_paths
    from vpn_plugin.protocol.results import _config_facts
    reads = []
    real = data_paths.read_config_safely
    monkeypatch.setattr(data_paths, 'read_config_safely',
                        lambda path: reads.append(path) or real(path))
    _config_facts.cache_clear()
    path = _config(tmp_path, H)
    (tmp_path / 'sub').mkdir()
    os.symlink(path, tmp_path / 'link.py')
    monkeypatch.chdir(tmp_path)
    _check('./c.py', 'sub/../c.py', path, tmp_path / 'link.py')
    assert len(reads) == 1, reads
    path.write_text(H.replace('horizon = 3', 'horizon = 4'))
    with pytest.raises(ValueError, match='which trains at horizon = 4'):
        _check('c.py')
    assert len(reads) == 2


# ------------------------------------------------ 3: a caveat on some seeds names them
def test_a_caveat_of_one_seed_names_the_seed_in_the_note():
    """Before (passP): the mark beside the method and its note read as if every seed had the
    caveat. Now a line on some rows names their seeds (and horizon when the method has
    several); one on every row names none (no false caveat)."""
    from test_report import make_rows
    from vpn_plugin.protocol.report import build_table, caveats_of, to_markdown
    rows = make_rows('VPN', [2.0, 3.0, 1.0, 4.0, 2.5]) + make_rows('PDPP', [1.0] * 5)
    rows[1].caveats = {'reduced_precision': 'c.pth in float16'}
    rows[3].caveats = {'reduced_precision': 'c.pth in float16'}
    for row in rows[5:]:
        row.caveats = {'changed_from_training': 'window_policy=keep'}
    text = to_markdown(build_table(rows, ('success_rate',)))
    seeds = sorted({rows[1].seed, rows[3].seed})
    assert f'(VPN: c.pth in float16 (seeds {seeds[0]}, {seeds[1]}))' in text
    assert '(PDPP: window_policy=keep).' in text  # every seed: none named
    other = make_rows('VPN', [2.0] * 5, horizon=4)
    other[0].caveats = {'reduced_precision': 'c.pth in float16'}
    assert caveats_of(rows[:5] + other)['VPN']['reduced_precision'] == [
        f'c.pth in float16 (seeds {seeds[0]}, {seeds[1]} at T=3; seed {other[0].seed} at T=4)']


# ------------------------------------ 4: a row tested at its training horizon, config tests at 3
def _row(config, horizon, train_horizon=None, options=None):
    from vpn_plugin.protocol.results import row_from_dict
    return row_from_dict({'method': 'VPN', 'seed': 0, 'horizon': horizon, 'dataset': 'niv',
                          'train_horizon': train_horizon, 'config': str(config),
                          'metrics': {'success_rate': 1.0},
                          'settings': {'cfg_options': options or {}}})


@pytest.mark.parametrize('train_horizon', [None, 6])
def test_a_row_at_t6_under_a_config_testing_at_t3_is_refused(tmp_path, train_horizon):
    """Before (passC): a T=6 row (trained at 6) naming a config with ``horizon = 6`` and
    ``test_horizon = 3`` passed: its test windows are of T=3. Refused naming both."""
    from vpn_plugin.protocol.results import check_rows_match_configs
    path = _config(tmp_path, "_base_ = ['b3.py']\nhorizon = 6\ntest_horizon = 3\n")
    with pytest.raises(ValueError, match=r'whose test windows are of test_horizon = 3 \(horizon '
                                         r'= 6\), but the row says it was tested at T=6'):
        check_rows_match_configs([_row(path, 6, train_horizon)])


def test_rows_of_other_test_horizons_the_protocol_wrote_pass(tmp_path):
    """Guards (no false refusal): a cross-horizon row (T=3 of a T=6 training) under the T=6
    config or under one testing at 3; the protocol's row of a test at the unit's horizon 6
    under a config testing at 3 records test_horizon (runner.built_horizons) and passes."""
    from types import SimpleNamespace
    from vpn_plugin.protocol.results import check_rows_match_configs
    from vpn_plugin.protocol.runner import built_horizons
    t6 = _config(tmp_path, "_base_ = ['b3.py']\nhorizon = 6\ntest_horizon = 6\n", 't6.py')
    eval3 = _config(tmp_path, "_base_ = ['b3.py']\nhorizon = 6\ntest_horizon = 3\n", 'e3.py')
    unit = SimpleNamespace(horizon=6, train=True)
    built = built_horizons(unit, SimpleNamespace(config=str(eval3), horizon=6), {})
    assert built == {'horizon': 6, 'test_horizon': 6}
    assert built_horizons(unit, SimpleNamespace(config=str(t6), horizon=3), {}) == {}
    check_rows_match_configs([_row(t6, 3, 6), _row(eval3, 3, 6), _row(eval3, 6, 6, built),
                              _row(t6, 6)])


def test_a_base_placeholder_inside_a_text_is_refused_naming_its_line(tmp_path):
    """Before (passC): refused naming the key only ("c.py: root: uses {{_base_.x}}...")."""
    from vpn_plugin.data_paths import read_config_safely
    path = _config(tmp_path, "_base_ = ['b3.py']\nh = {{_base_.horizon}}\nroot = dict(\n"
                             "    a='{{_base_.horizon}}/x')\n")
    with pytest.raises(ValueError, match=r'c\.py:4: root: uses \{\{_base_\.horizon\}\} inside'):
        read_config_safely(path)


# ------------------------------------ 5: a row's endpoint compared as the reply cache keys it
def test_an_endpoint_spelt_another_way_is_the_same_row_as_the_cache_says():
    """Before (fixKnown s16): a row's ``settings.base_url`` was compared as written, while the
    reply cache keys the endpoint (``backends.cache_endpoint``): the same server spelt another
    way was another row (not replaced) and report refused its seeds as "differ in settings".
    Another port, host or path is another server, in the cache (passL K1 of the nineteenth
    pass: the port is part of the key again) and in the row (guard)."""
    from dataclasses import replace
    from test_report import make_rows
    from vpn_plugin.protocol.report import build_table
    rows = make_rows('LLM', [2.0, 3.0, 1.0, 4.0, 2.5])
    for url, row in zip(('http://LocalHost:8000/v1', 'http://localhost:8000/v1/',
                         'HTTP://localhost:8000/v1', 'http://localhost:8000/v1',
                         'http://LOCALHOST:8000/v1//'), rows):
        row.settings = {'backend': 'openai', 'base_url': url}
    build_table(rows, ('success_rate',))  # the seeds are one run setting
    again = replace(rows[0], settings={'backend': 'openai',
                                       'base_url': 'http://localhost:8000/v1'})
    assert again.key() == rows[0].key()  # a rerun replaces the row
    for url in ('http://otherhost:8000/v1', 'http://localhost:8000/v2', 'http://localhost:9/v1'):
        assert replace(rows[0], settings={'backend': 'openai', 'base_url': url}).key() \
            != rows[0].key()


# ------------------------------------ 6: a path option spelt another way is the same row
def test_a_path_option_spelt_three_ways_is_one_row_setting(tmp_path, monkeypatch):
    """Before (passL): ``--cfg-options ...ann_file=tiny/../tiny/x.json`` (or ``./x.json``, or
    the absolute path) was recorded as typed: another row identity beside the first run's.
    Now an option naming an existing file is recorded as row_config_path writes a path; a
    text that names no file is kept as typed (guard)."""
    from tool_modules import load_tool
    llm_eval = load_tool('llm_eval')
    (tmp_path / 'tiny').mkdir()
    (tmp_path / 'tiny' / 'x.json').write_text('{}')
    monkeypatch.chdir(tmp_path)
    recorded = []
    for spelling in ('tiny/../tiny/x.json', './tiny/x.json', str(tmp_path / 'tiny' / 'x.json')):
        args = llm_eval.parse_args(['--config', 'configs/vpn_crosstask_t3.py', '--model', 'm',
                                    '--base-url', 'http://localhost:1/v1', '--cfg-options',
                                    f'test_dataloader.dataset.ann_file={spelling}',
                                    'test_dataloader.dataset.split=tiny/../test'])
        recorded.append(llm_eval.run_settings(args, 5, 5)['cfg_options'])
    assert recorded[0] == recorded[1] == recorded[2] == {
        'test_dataloader.dataset.ann_file': str(tmp_path / 'tiny' / 'x.json'),
        'test_dataloader.dataset.split': 'tiny/../test'}


# ------------------------------------ 7: the authors' weights in an .NPZ named in capitals
def test_the_authors_weights_in_a_capital_npz_are_read_as_an_npz(tmp_path):
    """Before: ``W.NPZ`` went to torch.load and was refused as "does not unpickle safely"
    (outputs.has_suffix, the suffix rule of every output, reads X.NPZ as an .npz)."""
    import numpy as np
    from vpn_plugin.oracles.authors import read_authors_state_dict
    with open(tmp_path / 'W.NPZ', 'wb') as handle:  # np.savez(name) would add '.npz'
        np.savez(handle, **{'head.weight': np.ones((2, 3), np.float32)})
    assert read_authors_state_dict(tmp_path / 'W.NPZ')['head.weight'].shape == (2, 3)


# ------------------------------------ 8: '~' in any path flag of the tools, one rule
NOT_PATHS = {'--feature-stem', '--feature-prefix', '--layout', '--log-level', '--protocol',
             '--timeout', '--model', '--checkpoint-interval'}  # texts a tool writes or matches


def test_every_path_flag_of_the_tools_takes_path_argument():
    """Before (fixNoticed s16): --out, --anchors-file, --video-root... took '~/x' as a folder
    named '~' (25 path flags and arguments without errors.path_argument). Now every one has
    it, and it expands '~' (next test)."""
    import ast
    import re
    from pathlib import Path
    pathy = re.compile(r'dir|root|file|out|config|checkpoint|src|dst|results|annotation|inputs|'
                       r'cache|protocol$|figure|python|resume|save|anchors|video', re.I)
    missing = []
    for tool in sorted((Path(__file__).resolve().parents[1] / 'tools').glob('*.py')):
        for node in ast.walk(ast.parse(tool.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, 'attr', '') == 'add_argument':
                names = [a.value for a in node.args if isinstance(a, ast.Constant)]
                kinds = {k.arg: ast.unparse(k.value) for k in node.keywords}
                if names and pathy.search(names[0]) and names[0] not in NOT_PATHS \
                        and kinds.get('action') not in ("'store_true'", "'store_false'") \
                        and kinds.get('type') != 'path_argument':
                    missing.append(f'{tool.name}:{node.lineno} {names[0]}')
    assert not missing, missing


def test_a_quoted_home_folder_in_path_flags_is_the_home_folder(tmp_path, monkeypatch):
    from tool_modules import load_tool
    monkeypatch.setenv('HOME', str(tmp_path))
    args = load_tool('llm_eval').parse_args([
        '--config', 'configs/vpn_crosstask_t3.py', '--model', 'm', '--base-url',
        'http://localhost:1/v1', '--out', '~/r.jsonl', '--anchors-file', '~/a.json'])
    assert (args.out, args.anchors_file) == (f'{tmp_path}/r.jsonl', f'{tmp_path}/a.json')
    args = load_tool('keep_results').parse_args(['~/a.jsonl', '--out', '~/k.jsonl'])
    assert (args.results, args.out) == ([f'{tmp_path}/a.jsonl'], f'{tmp_path}/k.jsonl')


# ------------------------------------ 9: repeats in plots' method lists; Ctrl-C before a protocol
@pytest.mark.parametrize('argv, match', [
    (['overlap', 'r.jsonl', '--sets', 'A', 'A', 'B'], r"--sets: 'A' given twice"),
    (['overlap', 'r.jsonl', '--pair', 'A', 'A'], r"--pair: 'A' given twice; a method compared"),
    (['overlap', 'r.jsonl', '--pair', 'A', 'B', '--pair', 'A', 'B'],
     r"--pair: \('A', 'B'\) given twice; the figure would draw the pair twice"),
    (['efficiency', 'r.jsonl', '--dashed', 'X', 'X'], r"--dashed: 'X' given twice"),
])
def test_plots_refuse_a_method_given_twice(tmp_path, argv, match):
    """Before (fixNoticed s16): --sets A A B drew two circles of one method, --pair A A a
    method against itself, --dashed X X: no word. errors.check_given_once, as --methods."""
    from tool_modules import load_tool
    with pytest.raises(SystemExit, match=match):
        load_tool('plots').main([*argv, '--out', str(tmp_path / 'f')])


def test_a_ctrl_c_before_the_protocol_starts_is_one_line(tmp_path, monkeypatch, capsys):
    """Before (fixNoticed s16): Ctrl-C while run_protocol read its protocol and configs (the
    first seconds) printed Python's traceback. Now one line, exit 130, nothing written."""
    from tool_modules import load_tool
    from vpn_plugin.protocol import runner

    def interrupted(path):
        raise KeyboardInterrupt
    monkeypatch.setattr(runner, 'load_protocol', interrupted)
    with pytest.raises(SystemExit) as stopped:
        load_tool('run_protocol').main(['configs/protocol/ablation_niv.py',
                                        '--out', str(tmp_path / 'out')])
    assert stopped.value.code == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        'interrupted (Ctrl-C) before any unit started: nothing was run or written']
    assert not (tmp_path / 'out').exists()


# ------------------------------------ 10: CEFITO tensor() of the true tasks; "relabelled"
def test_cefito_tensor_mode_searches_within_the_given_true_tasks():
    """Before (passM): ``tensor()`` searched the classifier's tasks whatever task_source said
    (with 'ground_truth' it refused "needs the batch's tasks" though they were given). Now as
    ``predict``: the batch's true tasks; none given: the clear refusal (guard)."""
    import torch
    from test_cefito import tiny_cefito
    torch.manual_seed(0)
    model = tiny_cefito(task_source='ground_truth')
    batch = dict(start=torch.randn(2, 12), goal=torch.randn(2, 12))
    tasks = torch.tensor([2, 1])
    plans = model(batch, dict(task=tasks), mode='tensor')
    assert torch.equal(plans, model.plan(batch['start'], batch['goal'], tasks)[0][:, 0])
    assert set(plans[0].tolist()) <= {6, 2} and set(plans[1].tolist()) <= {5, 3, 4}
    with pytest.raises(ValueError, match="needs the batch's tasks"):
        model(batch, None, mode='tensor')


def test_the_authors_loader_log_says_which_relabelled_windows_change_labels():
    """Before (passM): the log said "8 relabelled of 20 windows" where the fixture's README
    says 7 windows get other labels: both exact (8 windows have a step copied from the
    previous one; in one of them that step had the same action). The log says both."""
    import json
    from pathlib import Path
    import numpy as np
    fixture = Path(__file__).resolve().parents[2] / 'shared/reference/authors_loader_small'
    if not (fixture / 'expected.npz').is_file():
        pytest.skip(f'no authors_loader_small fixture at {fixture}')
    from vpn_plugin.datasets import PlanningDataset
    dataset = PlanningDataset(data_root=fixture, horizon=3, taxonomy='taxonomy.json',
                              feature_dir=fixture / 'features', window_file='windows.json',
                              split='test', observation='authors', window_policy='authors',
                              observed_steps=2, frame_dim=512)
    expected = np.load(fixture / 'expected.npz')
    windows = json.loads((fixture / 'windows.json').read_text())
    other = sum(list(actions) != [step[2] for step in windows[index]['id']['legal_range']]
                for index, actions in zip(expected['window_index'], expected['actions']))
    assert other == 7  # the README's figure, from the authors' loader's own output
    assert ("8 relabelled (7 of them with other action labels than annotated) of 20 windows"
            in dataset.window_count_summary())


def test_every_tool_parses_its_flags_with_parse_once(capsys):
    """passV's D97/D98 family in every tool (closing16 had it in nine): an option given twice
    with two values is refused by ``errors.parse_once`` (argparse keeps the last without a
    word); dist_run parses with torchrun's own parser."""
    import importlib
    import re
    from pathlib import Path
    tools = sorted((Path(__file__).parents[1] / 'tools').glob('*.py'))
    plain = [path.name for path in tools if re.search(r'\.parse_(known_)?args\(', path.read_text())
             and 'parse_once(' not in path.read_text() and path.stem != 'dist_run']
    assert plain == []
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module('tools.report').main(['r.jsonl', '--dataset', 'niv',
                                                       '--dataset', 'coin'])
    assert exit_.value.code == 2 and 'is given 2 times' in capsys.readouterr().err
