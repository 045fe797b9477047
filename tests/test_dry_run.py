"""tools/run_protocol.py --dry-run: epochs, folders and the wall-time estimate of each run."""
from pathlib import Path

import pytest

from mmengine.config import Config

from vpn_plugin.protocol.dry_run import (RELATIVE_EPOCH_COST, SMOKE_SECONDS, format_duration,
                                         model_kind, plan_runs, pre_stages, relative_cost)
from vpn_plugin.protocol.runner import ProtocolRunner, expand_units, load_protocol
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]


def test_estimate_is_epochs_times_share_times_epoch_seconds(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    protocol = load_protocol('configs/protocol/sample_efficiency_crosstask.py')
    units = expand_units(protocol, seeds=[1], methods=['ViterbiPlanNet'])
    runner = ProtocolRunner(protocol, tmp_path, max_epochs=20)
    planned = plan_runs(units, runner.work_dir, runner.max_epochs, epoch_seconds=3.0)
    shares = [u.cfg_options['train_dataloader.dataset.subset_fraction'] for u in units]
    assert [p.train_share for p in planned] == shares and 1.0 in shares
    assert [p.seconds for p in planned] == pytest.approx([20 * 3.0 * s for s in shares])
    assert all(p.epochs == 20 and p.seed == 1 for p in planned)
    assert [p.work_dir for p in planned] == [runner.work_dir(u) for u in units]
    assert planned[0].work_dir.parent.parent.parent == tmp_path / 'sample_efficiency'
    # without --max-epochs: the config's own schedule (the paper's 500 epochs)
    assert {p.epochs for p in plan_runs(units, runner.work_dir)} == {500}


def test_untrained_planner_costs_nothing(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    protocol = load_protocol('configs/protocol/standard_crosstask.py')
    units = expand_units(protocol, seeds=[0], methods=['PKG + uniform emissions'])
    planned = plan_runs(units, ProtocolRunner(protocol, tmp_path).work_dir)
    assert [(p.epochs, p.seconds, p.test_horizons) for p in planned] == [(0, 0.0, [3]),
                                                                         (0, 0.0, [4])]


def test_duration_format():
    assert [format_duration(s) for s in (42, 750, 3 * 3600)] == ['42 s', '12.5 min', '3.0 h']


def test_cli_prints_every_run_and_the_total(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPO)
    units = load_tool('run_protocol').main(['configs/protocol/standard_crosstask.py', '--dry-run',
                                      '--seeds', '0', '--max-epochs', '30', '--epoch-seconds',
                                      '2', '--out', str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    trained = [u for u in units if u.train]
    assert len(lines) == len(units) + 2
    first = lines[0]
    assert not any(t.variant for t in units[0].tests)  # (a test variant: '(key=value, ...)')
    rows = ', '.join(f'{t.method!r} T={t.horizon}' for t in units[0].tests)
    assert first.startswith(f'seed=0 T=3 rows: {rows} | {units[0].config} |')
    assert '30 epochs at 2.00 s, ~1.0 min' in first and str(tmp_path / 'standard') in first
    models = {u.config: model_kind(Config.fromfile(u.config).model) for u in trained}
    epoch = {config: RELATIVE_EPOCH_COST[('crosstask', model)] * 2
             for config, model in models.items()}
    total_seconds = sum(epoch[u.config] * 30 + sum(s for _, s in pre_stages(
        models[u.config], 30, epoch[u.config])) for u in trained)
    assert f'estimated training time: ~{format_duration(total_seconds)}' in lines[-2]


def test_each_pre_stage_has_its_cost(monkeypatch, capsys, tmp_path):
    """Issue 38: the dry run prices the pre-stages apart (KEPP's step model trains as many
    steps as its plan model; PDPP's task classifier); --smoke is priced by measured runs."""
    monkeypatch.chdir(REPO)
    tool = load_tool('run_protocol')
    tool.main(['configs/protocol/standard_niv.py', '--dry-run', '--seeds', '0', '--horizons', '3',
               '--methods', 'KEPP', 'PDPP', 'ViterbiPlanNet', '--epoch-seconds', '1',
               '--out', str(tmp_path)])
    lines = {line.split(' | ')[1]: line for line in capsys.readouterr().out.splitlines()
             if ' | ' in line}
    kepp = RELATIVE_EPOCH_COST[('niv', 'KEPP')]
    assert (f'130 epochs at {kepp:.2f} s, step model ~{format_duration(130 * kepp)} + '
            f'step-model predictions ~{format_duration(0.25 * kepp)} + training '
            f'~{format_duration(130 * kepp)} = ~{format_duration((2 * 130 + 0.25) * kepp)}'
            ) in lines['configs/baselines/kepp_niv_t3.py']
    assert 'task classifier ~' in lines['configs/baselines/pdpp_niv_t3.py']
    assert '~' in lines['configs/vpn_niv_t3.py'] and 'classifier' not in lines[
        'configs/vpn_niv_t3.py']
    tool.main(['configs/protocol/standard_niv.py', '--dry-run', '--smoke', '--seeds', '0',
               '--horizons', '3', '--methods', 'KEPP', '--out', str(tmp_path)])
    out = capsys.readouterr().out
    assert f"smoke run, ~{format_duration(SMOKE_SECONDS['KEPP'])} (measured)" in out
    assert 'seed0_smoke' in out


def test_each_dataset_and_model_is_estimated_from_its_own_epoch_cost(monkeypatch, tmp_path):
    """NIV's 636 training windows cost ~0.08 of CrossTask's epoch, not CrossTask's; a model
    without a measured figure says which one stands in."""
    monkeypatch.chdir(REPO)
    planned = {}
    for dataset in ('crosstask', 'niv', 'coin'):
        protocol = load_protocol(f'configs/protocol/standard_{dataset}.py')
        units = expand_units(protocol, seeds=[0], methods=['ViterbiPlanNet'], horizons=[3])
        planned[dataset] = plan_runs(units, ProtocolRunner(protocol, tmp_path).work_dir, 10,
                                     epoch_seconds=4.0)[0]
    assert planned['crosstask'].seconds == pytest.approx(10 * 4.0)
    assert planned['niv'].seconds == pytest.approx(10 * 4.0 * RELATIVE_EPOCH_COST[
        ('niv', 'ViterbiPlanNet')]) and planned['niv'].seconds < planned['crosstask'].seconds / 5
    assert planned['coin'].epoch_seconds == pytest.approx(4.0 * RELATIVE_EPOCH_COST[
        ('coin', 'ViterbiPlanNet')])
    assert relative_cost('niv', 'NewPlanner') == (
        RELATIVE_EPOCH_COST[('niv', 'ViterbiPlanNet')],
        "no measured epoch time of NewPlanner on niv: ViterbiPlanNet on niv's")
    assert relative_cost('egoper', 'ViterbiPlanNet')[1].endswith("ViterbiPlanNet on crosstask's")


def test_the_beam_search_is_estimated_by_its_step_model(monkeypatch, tmp_path):
    """The paper's PDPP step model trains a 42M-parameter U-Net, the MLP 0.86M parameters."""
    monkeypatch.chdir(REPO)
    seconds = {}
    for name in ('pkg_beam_search', 'pkg_beam_search_mlp', 'pdpp'):
        config = Config.fromfile(f'configs/baselines/{name}_crosstask_t3.py')
        seconds[name] = relative_cost('crosstask', model_kind(config.model))
    assert seconds['pkg_beam_search'] == seconds['pdpp'] == (90.0, '')
    assert seconds['pkg_beam_search_mlp'] == (RELATIVE_EPOCH_COST[
        ('crosstask', 'PKGBeamSearchPlanner/EndpointMLP')], '')


def test_the_union_model_is_estimated_from_the_union_epoch(monkeypatch, tmp_path):
    """The dataset-independent PKG study's union model trains on CrossTask + NIV + COIN: its
    estimate is the union's measured epoch, never CrossTask's with a placeholder name."""
    monkeypatch.chdir(REPO)
    protocol = load_protocol('configs/protocol/dataset_independent_pkg_niv.py')
    units = expand_units(protocol, seeds=[0], horizons=[3])
    planned = {p.slug: p for p in plan_runs(units, ProtocolRunner(protocol, tmp_path).work_dir,
                                           2, epoch_seconds=4.0)}
    for name in ('ViterbiPlanNet', 'SCHEMA'):
        union, single = planned[f'{name}_union'], planned[f'{name}_niv']
        assert union.cost_note == single.cost_note == ''
        assert union.epoch_seconds == pytest.approx(4.0 * RELATIVE_EPOCH_COST[('union', name)])
        assert single.epoch_seconds == pytest.approx(4.0 * RELATIVE_EPOCH_COST[('niv', name)])
    assert planned['SCHEMA_union'].seconds > 10 * planned['ViterbiPlanNet_union'].seconds


def test_dry_run_lists_every_row_by_the_name_methods_takes(monkeypatch, capsys, tmp_path):
    """Issue 34: SCHEMA's training gives two rows (w/ and w/o PKG); the dry run names both,
    as --methods spells them (never a folder slug such as Base_Model)."""
    import re
    monkeypatch.chdir(REPO)
    tool = load_tool('run_protocol')
    units = tool.main(['configs/protocol/main_and_ablation_t6_niv.py', '--dry-run', '--seeds',
                       '0', '--out', str(tmp_path)])
    out = capsys.readouterr().out
    expected = {(t.method, t.horizon) for u in units for t in u.tests}
    printed = {(m, int(h)) for m, h in re.findall(r"'([^']+)' T=(\d+)", out)}
    assert printed == expected and ('SCHEMA w/o PKG', 6) in printed
    run_lines = out.splitlines()[:len(units)]
    assert all('_' not in line.split(' | ')[0] for line in run_lines)  # no folder slug
    for method, _ in printed:  # each printed name is one --methods accepts
        assert tool.main(['configs/protocol/main_and_ablation_t6_niv.py', '--dry-run',
                          '--seeds', '0', '--methods', method, '--out', str(tmp_path)])
