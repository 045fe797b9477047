"""Session 10, hostile pass (passP): the protocol's rows, report / plots / keep_results.
Each test fails on 99a4fbd."""
from pathlib import Path

import pytest
from mmengine.config import Config

from test_hostile_pass15_fixrows import rows_of, tool_refusal

ROOT = Path(__file__).resolve().parents[1]


def untrained_protocol(horizons=(3, 6)) -> Config:
    """An untrained planner of the T=6 config tested at T=3 and T=6."""
    return Config(dict(protocol='xh_untrained', dataset='niv', seeds=[0], runs=[dict(
        method='PKG + uniform emissions', train=False,
        config='configs/baselines/uniform_emissions_niv_t6.py',
        tests=[dict(horizon=t) for t in horizons])]))


def test_an_untrained_planner_tested_at_another_horizon_records_its_training_horizon(
        tmp_path, monkeypatch):
    """P01 / P12 (lead's note): the runner wrote ``train_horizon: null`` for an untrained
    planner tested at T=3 under a config built at horizon = 6 (its PKG counted on the T=6
    training windows): a false record, which report / plots / keep_results then refused as
    "a row of another run or an edited one". Now the row says train_horizon 6 and is shown as
    its own '(train T=6)' row; the test at its own horizon still writes null."""
    from vpn_plugin.protocol.results import check_rows_match_configs, renamed
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    monkeypatch.chdir(ROOT)
    protocol = untrained_protocol()
    units = expand_units(protocol)
    runner = ProtocolRunner(protocol, tmp_path / 'out', smoke=True)
    rows = [runner.row_for(units[0], spec, metrics={'success_rate': 3.0}) for spec in
            units[0].tests]
    assert [(r.horizon, r.train_horizon) for r in rows] == [(3, 6), (6, None)]
    check_rows_match_configs(rows)  # no refusal of the protocol's own rows
    assert [renamed(r, {}) for r in rows] == ['PKG + uniform emissions (train T=6)',
                                              'PKG + uniform emissions']


def test_a_relative_config_is_found_from_the_repository_outside_it(tmp_path, monkeypatch):
    """R02 / R20 (lead's note): rows name configs relative to the repository
    (configs/vpn_niv_t6.py); report.py run from another folder found no such file and compared
    nothing: an edited horizon or dataset passed without a word. Now looked up from the
    repository too."""
    monkeypatch.chdir(tmp_path)
    edited = rows_of(tmp_path, 'edited.jsonl', lambda row: row.update(horizon=5,
                                                                       train_horizon=5))
    assert ('names config configs/vpn_niv_t6.py, whose horizon = 6, but the row says '
            'train_horizon=5') in tool_refusal('report', [str(edited)])
    other = rows_of(tmp_path, 'other.jsonl', lambda row: row.update(dataset='coin'))
    for tool, argv in (('report', [str(other)]),
                       ('keep_results', [str(other), '--out', str(tmp_path / 'kept.jsonl')])):
        assert "whose test data is 'niv', but the row says dataset='coin'" in \
            tool_refusal(tool, argv), tool
    assert not (tmp_path / 'kept.jsonl').exists()


def test_a_config_found_nowhere_is_named(tmp_path, capsys):
    """R17 / K08: a row naming a config that is no file here was not compared, without a
    word; now a note names the config, its rows' count and the first row's file:line."""
    from tool_modules import load_tool
    path = rows_of(tmp_path, 'gone.jsonl', lambda row: row.update(
        config='configs/vpn_niv_t6_gone.py'))
    load_tool('report').main([str(path), '--metrics', 'success_rate'])
    err = ' '.join(capsys.readouterr().err.split())
    assert ('note: 3 results rows name a config that is no config file here (looked up from '
            f'{Path.cwd()} and from {ROOT}): configs/vpn_niv_t6_gone.py (3 rows, e.g. '
            f'{path}:1); their horizon and dataset are not compared with a config') in err


def test_a_latex_caption_shows_a_method_name_as_text(tmp_path, capsys):
    """R34: the LaTeX caption inserted method names with ``$ \\ { } ~ ^`` unescaped (the
    row escaped them): '\\textbf{VPN}~$x^2$' was typeset bold with x squared in the caption,
    and a name such as 'A^2' or 'x{' would not compile. The caption now escapes them as the
    row does; its own $\\pm$ / $\\Delta$ stay math."""
    from tool_modules import load_tool
    name = r'\textbf{VPN}~$x^2$'
    path = rows_of(tmp_path, 'latex.jsonl', lambda row: row.update(method=name))
    load_tool('report').main([str(path), '--metrics', 'success_rate', '--format', 'latex'])
    caption = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith(r'\caption{'))
    text = r'\textbackslash{}textbf\{VPN\}\textasciitilde{}\$x\textasciicircum{}2\$'
    assert rf'$\Delta$: {text} minus SCHEMA w/ PKG' in caption
    assert f'({text}: max\\_epochs=60' in caption
    assert name not in caption and r'$\pm$ full width' in caption


@pytest.mark.parametrize('protocol, expected', [
    (dict(dataset='niv', runs=[dict(method='VPN', config='configs/vpn_{dataset}_t{T}.py',
                                    horizons=[7])]),
     "protocol 'p': runs[0].config 'configs/vpn_{dataset}_t{T}.py' gives "
     "'configs/vpn_niv_t7.py' (dataset 'niv', T=7), which is no file; a relative path is "
     'read from the current folder'),
    (dict(runs=[dict(method='VPN', config='configs/vpn_{dataset}_t{T}.py', horizons=[3])]),
     "gives 'configs/vpn__t3.py' (dataset '', T=3), which is no file (the protocol sets no "
     'dataset = ..., which fills {dataset})')])
def test_a_protocol_config_that_is_no_file_is_named(protocol, expected, monkeypatch):
    """P07 / P09: a run's config that is no file was a raw "[Errno 2] No such file or
    directory: 'configs/vpn_niv_t7.py'", naming neither the protocol, its field, nor the
    empty dataset that filled ``{dataset}``."""
    from vpn_plugin.protocol.runner import expand_units
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError) as refused:
        expand_units(Config(dict(protocol='p', seeds=[0], **protocol)))
    assert expected in str(refused.value)


def test_a_refusal_names_the_config_file_a_relative_path_found(tmp_path, monkeypatch):
    """H11: from a folder holding a configs/vpn_niv_t6.py of its own (horizon = 3), the
    repository's rows were refused naming only 'configs/vpn_niv_t6.py', read as the
    repository's; the refusal now names the file read."""
    (tmp_path / 'configs').mkdir()
    (tmp_path / 'configs' / 'vpn_niv_t6.py').write_text('horizon = 3\n')
    monkeypatch.chdir(tmp_path)
    path = rows_of(tmp_path, 'rows.jsonl', lambda row: None)
    assert ('whose horizon = 3, but the row says train_horizon=6: a row of another run or an '
            'edited one; fix its config or its horizon (the config file read: '
            f'{tmp_path / "configs" / "vpn_niv_t6.py"})') in tool_refusal('report', [str(path)])


def test_a_row_written_before_the_fix_is_refused_saying_what_it_needs(tmp_path, monkeypatch):
    """P02 / P13 / P23 / P24: the untrained planner's rows written with ``train_horizon: null``
    before the runner's fix were refused as "a row of another run or an edited one" only; the
    refusal now says what such a row needs (a row with parameters gets no such hint)."""
    from dataclasses import replace
    from vpn_plugin.protocol.results import check_rows_match_configs
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    monkeypatch.chdir(ROOT)
    protocol = untrained_protocol(horizons=(3,))
    unit = expand_units(protocol)[0]
    row = replace(ProtocolRunner(protocol, tmp_path, smoke=True).row_for(
        unit, unit.tests[0], metrics={'success_rate': 3.0}, params=0), train_horizon=None)
    hint = ('(the row of an untrained planner tested at T=3 under this config, which '
            'tools/run_protocol.py wrote with train_horizon: null until 2026-11-28, needs '
            'train_horizon: 6)')
    with pytest.raises(ValueError, match='a row of another run or an edited one') as refused:
        check_rows_match_configs([row])
    assert hint in str(refused.value)
    with pytest.raises(ValueError) as refused:
        check_rows_match_configs([replace(row, params=5)])
    assert hint not in str(refused.value)
