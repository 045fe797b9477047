"""Session 10, phase 1 (fixrows): results rows, report / plots / keep_results, figures, the
checkpoint-hook refusal (issue 37 items left by the eleventh pass). Each test fails on 2d3cae8."""
import json
from pathlib import Path

import pytest

from tiny_configs import tiny_vpn_config
from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
T6 = ROOT / 'docs' / 'results_data' / 'main_t6_niv.jsonl'
EVAL_T3 = 'configs/vpn_niv_t6_eval_t3.py'  # trains at horizon = 6, tests at test_horizon = 3


def rows_of(tmp_path, name: str, edit, source: Path = T6) -> Path:
    """A copy of a kept results file (its per-sample dumps dropped) with ``edit(row)`` applied
    to its ViterbiPlanNet rows."""
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    for row in rows:
        row['per_sample_file'] = ''
        if row['method'] == 'ViterbiPlanNet':
            edit(row)
    path = tmp_path / name
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return path


def tool_refusal(tool: str, argv: list) -> str:
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main(argv)
    return ' '.join(str(stopped.value).split())


def all_tools_argv(path: Path, tmp_path: Path) -> dict:
    return {'report': [str(path), '--metrics', 'success_rate'],
            'plots': ['params', str(path), '--horizon', '3', '--out', str(tmp_path / 'f')],
            'keep_results': [str(path), '--out', str(tmp_path / 'kept.jsonl')]}


# ------------------------------------------------------- R13: train_horizon null, eval config
def test_a_null_training_horizon_under_a_cross_horizon_config_is_refused(tmp_path, monkeypatch):
    """pass4 R13: rows of configs/vpn_niv_t6_eval_t3.py (trained at T=6) written with
    ``train_horizon: null`` at T=3 were shown as plain T=3 cells beside models trained at T=3;
    now refused by report, plots and keep_results naming file:line, method, seed and fields."""
    monkeypatch.chdir(ROOT)
    path = rows_of(tmp_path, 'null.jsonl', lambda row: row.update(
        horizon=3, train_horizon=None, config=EVAL_T3))
    line = next(number for number, text in enumerate(path.read_text().splitlines(), 1)
                if '"ViterbiPlanNet"' in text)
    seed = json.loads(path.read_text().splitlines()[line - 1])['seed']
    for tool, argv in all_tools_argv(path, tmp_path).items():
        message = tool_refusal(tool, argv)
        assert (f"{path}:{line}: row of 'ViterbiPlanNet' (seed {seed}, dataset 'niv', T=3, "
                f'train_horizon=null) names config {EVAL_T3}, which trains at horizon = 6 and '
                'tests at test_horizon = 3, but the row says train_horizon=null') in message, tool
        assert 'expected train_horizon: 6 in the row (shown as "ViterbiPlanNet (train T=6)")' \
            in message
    assert not list(tmp_path.glob('f.*')) and not (tmp_path / 'kept.jsonl').exists()


def test_the_same_rows_with_their_training_horizon_are_shown_apart(tmp_path, monkeypatch,
                                                                   capsys):
    """No cry wolf: the row with ``train_horizon: 6`` is its own '(train T=6)' row; a row of the
    eval config tested at its training horizon (T=6, train_horizon null) is a plain T=6 cell
    when it records the test horizon it was run at (``settings.cfg_options``, as the protocol
    runner writes it since fixKnown s17 item 4; without it, refused: the config tests at 3,
    tests/test_known_s17.py)."""
    monkeypatch.chdir(ROOT)
    path = rows_of(tmp_path, 'six.jsonl', lambda row: row.update(
        horizon=3, train_horizon=6, config=EVAL_T3))
    load_tool('report').main([str(path), '--metrics', 'success_rate'])
    assert '| ViterbiPlanNet (train T=6)' in capsys.readouterr().out
    from vpn_plugin.protocol.results import check_rows_match_configs, read_results
    at_six = rows_of(tmp_path, 'at6.jsonl', lambda row: row.update(
        horizon=6, train_horizon=None, config=EVAL_T3,
        settings={**row['settings'], 'cfg_options': {'horizon': 6, 'test_horizon': 6}}))
    check_rows_match_configs(read_results(at_six))


# ------------------------------------------------ security: a row's config runs no foreign code
def foreign_config(folder: Path, marker: Path, body: str = 'horizon = 6') -> Path:
    """A config outside the repository whose code would write ``marker`` when run (in its
    body and in its ``_base_`` expression, which mmengine evaluates to find the bases)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / 'their_vpn_niv_t6.py'
    config.write_text(
        f"_base_ = [__import__('pathlib').Path({str(marker)!r}).write_text('ran') and "
        f"'{ROOT / 'configs' / 'vpn_niv_t6.py'}']\n"
        f"open({str(marker)!r}, 'w').write('ran')\n"
        f'{body}\n'
        "test_dataloader = dict(dataset=dict(data_root='/their/data/niv'))\n")
    return config


def test_a_results_row_runs_no_code_of_the_config_it_names(tmp_path, capsys):
    """Security (closing9, noticed): report.py / plots.py / keep_results.py loaded the Python
    config a row names with mmengine, so a results file from someone else ran that config's
    code. A config outside the repository's configs/ is now read as literals (``ast``): the
    marker its code writes never appears, and its literal facts are still compared."""
    marker = tmp_path / 'marker'
    config = foreign_config(tmp_path / 'theirs', marker)
    path = rows_of(tmp_path, 'theirs.jsonl', lambda row: row.update(config=str(config)))
    # since passC s14 a config outside the literal subset is refused naming its line
    assert f'{config}:1: _base_: a call' in tool_refusal('report', [str(path)])
    assert not marker.exists()
    # a plain one is read: its literal facts are compared (another horizon / dataset refused)
    config.write_text(f"_base_ = ['{ROOT / 'configs' / 'vpn_niv_t6.py'}']\n"
                      "test_dataloader = dict(dataset=dict(data_root='/their/data/niv'))\n")
    for tool, argv in all_tools_argv(path, tmp_path).items():
        if tool != 'plots':
            load_tool(tool).main(argv if tool == 'report' else argv + ['--overwrite'])
    load_tool('plots').main(['params', str(path), '--horizon', '6', '--out',
                             str(tmp_path / 'f')])
    assert '| ViterbiPlanNet' in capsys.readouterr().out
    wrong = rows_of(tmp_path, 'wrong.jsonl', lambda row: row.update(
        config=str(config), horizon=4, train_horizon=None))
    assert f'names config {config}, whose horizon = 6, but the row says horizon=4' in \
        tool_refusal('report', [str(wrong)])
    other = rows_of(tmp_path, 'other.jsonl', lambda row: row.update(
        config=str(config), dataset='coin'))
    assert "whose test data is 'niv', but the row says dataset='coin'" in \
        tool_refusal('report', [str(other)])
    assert not marker.exists()


def test_a_foreign_config_whose_horizon_is_code_is_refused_without_running_it(tmp_path):
    marker = tmp_path / 'marker'
    config = foreign_config(tmp_path / 'theirs', marker,
                            body="horizon = int(__import__('os').environ.get('T', '6'))")
    path = rows_of(tmp_path, 'code.jsonl', lambda row: row.update(config=str(config)))
    message = tool_refusal('report', [str(path)])
    assert f'names config {config} (with its settings.cfg_options' in message
    assert f"which does not load to compare the row with it: ValueError: {config}:1: " in message
    assert not marker.exists()


def test_a_foreign_yaml_config_builds_no_object(tmp_path):
    """mmengine reads YAML with the full loader (a ``!!python/object/apply`` tag runs code):
    a foreign .yaml config is read with ``yaml.safe_load``, so the tag is refused, not run."""
    marker = tmp_path / 'marker'
    config = tmp_path / 'theirs.yaml'
    config.write_text(f"horizon: !!python/object/apply:os.system ['touch {marker}']\n")
    path = rows_of(tmp_path, 'yaml.jsonl', lambda row: row.update(config=str(config)))
    message = tool_refusal('report', [str(path)])
    assert f'names config {config}' in message and 'which does not load' in message
    assert not marker.exists()


def test_a_path_through_configs_to_a_foreign_file_is_read_as_literals(tmp_path):
    """A path that starts in the repository's configs/ but resolves elsewhere
    (``configs/../../tmp/...``) is foreign: its code is not run."""
    import os
    from vpn_plugin.data_paths import read_config_safely
    marker = tmp_path / 'marker'
    config = foreign_config(tmp_path / 'theirs', marker)
    through = ROOT / 'configs' / os.path.relpath(config, ROOT / 'configs')
    assert str(through).startswith(str(ROOT / 'configs')) and through.is_file()
    with pytest.raises(ValueError, match=rf'{config}:1: _base_: a call'):  # literal: refused
        read_config_safely(through)
    assert not marker.exists()


SHIPPED = ('configs/vpn_niv_t6_eval_t3.py', 'configs/vpn_coin_t3.py',
           'configs/union/vpn_union_t4.py', 'configs/baselines/kepp_niv_t3.py',
           'configs/baselines/uniform_emissions_crosstask_t5.py',
           'configs/union/schema_union_t6.py')


@pytest.mark.parametrize('config', SHIPPED)
def test_the_literal_reading_of_a_shipped_config_is_what_mmengine_reads(config, monkeypatch):
    """The oracle: for shipped configs (``dict(...)``, ``**paths``, ``{{_base_.x}}``,
    ``_delete_``, sums; every one of the 242 of configs/ agreed when written) the literal
    reading gives mmengine's whole config, not only the facts rows are compared by."""
    from vpn_plugin.data_paths import literal_config, read_config_file
    monkeypatch.chdir(ROOT)
    executed = read_config_file(config).to_dict()
    from mmengine.config import Config
    literal = Config(literal_config(config)).to_dict()
    assert literal == executed


# ------------------------------------------- a refused training leaves no mmengine log folder
@pytest.mark.parametrize('refusal', ['checkpoint', 'features'])
def test_a_training_refused_before_its_first_epoch_leaves_nothing(tiny_crosstask, tmp_path,
                                                                  refusal):
    """closing9 (noticed): check_saves_a_checkpoint's refusal (a checkpoint hook that saves
    nothing in max_epochs) exited non-zero but left mmengine's ``<work_dir>/<timestamp>/``
    (its log and ``vis_data/config.py``); so did a training feature folder that does not exist.
    Now the work dir this run made is gone again (and the lock beside it)."""
    features = {} if refusal == 'checkpoint' else {'feature_dir': str(tmp_path / 'no_features')}
    config = tiny_vpn_config(tiny_crosstask, tmp_path, **features)
    options = (['--cfg-options', 'default_hooks.checkpoint.save_last=False',
                'default_hooks.checkpoint.interval=-1', 'default_hooks.checkpoint.save_best=None']
               if refusal == 'checkpoint' else [])
    expected = ('default_hooks.checkpoint saves no checkpoint' if refusal == 'checkpoint'
                else 'no_features does not exist')
    work_dir = tmp_path / 'runs' / 'work'
    message = tool_refusal('train', [str(config), '--work-dir', str(work_dir), *options])
    assert expected in message
    assert not (tmp_path / 'runs').exists()  # nor the lock file and folder (fixlog)


def test_a_refused_training_in_an_existing_work_dir_keeps_what_was_there(tiny_crosstask,
                                                                         tmp_path):
    """Only what the refused run made goes: an existing work dir and its files stay."""
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    work_dir = tmp_path / 'work'
    (work_dir / '20200101_000000').mkdir(parents=True)
    (work_dir / 'notes.txt').write_text('mine')
    tool_refusal('train', [str(config), '--work-dir', str(work_dir), '--cfg-options',
                           'default_hooks.checkpoint.save_last=False',
                           'default_hooks.checkpoint.interval=-1',
                           'default_hooks.checkpoint.save_best=None'])
    assert sorted(p.name for p in work_dir.iterdir()) == ['20200101_000000', 'notes.txt']


# ------------------------------------------------------------ figures: no text touches another
def drawn_texts(fig) -> list:
    """(text, window extent) of every text a saved figure shows: tick labels of ticks inside
    the view only (matplotlib keeps labels of ticks outside it, undrawn)."""
    from matplotlib.text import Text
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ticks, shown = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks.update(map(id, (tick.label1, tick.label2)))
                if low - 1e-9 <= tick.get_loc() <= high + 1e-9:
                    shown += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    shown += [t for t in fig.findobj(Text) if id(t) not in ticks and t.get_visible()]
    return [(t.get_text(), t.get_window_extent(renderer)) for t in shown if t.get_text().strip()]


def text_clashes(monkeypatch) -> list:
    """Filled, per figure saved, with the pairs of texts less than 1 point apart, and the note
    line (the figure's supxlabel) less than 3 points from any other text."""
    import itertools
    from vpn_plugin.protocol import plots
    clashes, save = [], plots.save_figure

    def checked(fig, out_stem):
        point = fig.dpi / 72
        texts = drawn_texts(fig)
        note = fig._supxlabel.get_text() if fig._supxlabel is not None else None
        for (a, box_a), (b, box_b) in itertools.combinations(texts, 2):
            gap = 3 if note in (a, b) else 1
            if box_a.padded(gap * point / 2).overlaps(box_b.padded(gap * point / 2)):
                clashes.append((Path(out_stem).name, a, b))
        return save(fig, out_stem)
    monkeypatch.setattr(plots, 'save_figure', checked)
    return clashes


def test_the_overlap_figures_note_line_keeps_clear_of_the_panels(tmp_path, monkeypatch):
    """closing9 (noticed): the overlap figure's note line touched the last line of the panels'
    percentages (1 point apart)."""
    from test_report_plots import overlap_rows
    from vpn_plugin.protocol.plots import error_overlap, plot_error_overlap
    clashes = text_clashes(monkeypatch)
    rows, _ = overlap_rows(tmp_path)
    for row in rows:
        row.shortened = 'max_epochs=60 (config: 500)'
    overlap = error_overlap(rows, 'VPN', 'Base')
    for count in (1, 2, 3):
        plot_error_overlap([overlap] * count, tmp_path / f'venn{count}')
    assert clashes == []


def test_close_x_values_do_not_print_their_tick_labels_over_each_other(tmp_path, monkeypatch):
    """closing9 (noticed): a curve over train_fraction 0.05, 0.1, 0.25, 0.5, 1 printed '0.05'
    and '0.1' over each other; the label that would touch its neighbour is left out (its tick
    stays), the last one always shown."""
    from vpn_plugin.protocol.plots import plot_curves
    from vpn_plugin.protocol.results import ResultRow
    clashes = text_clashes(monkeypatch)
    rows = [ResultRow(method, seed, horizon, {'success_rate': 10 * horizon + 20 * f + seed - drop},
                      variant=dict(train_fraction=f))
            for seed in range(3) for horizon in (3, 6) for f in (0.05, 0.1, 0.25, 0.5, 1.0)
            for method, drop in (('ViterbiPlanNet', 0), ('w/o PKG', 5))]
    plot_curves(rows, 'train_fraction', 'success_rate', tmp_path / 'curve')
    plot_curves([r for r in rows if r.horizon == 3], 'train_fraction', 'success_rate',
                tmp_path / 'one', log_x=True)
    assert clashes == []
    from vpn_plugin.protocol.plots import thin_tick_labels
    from vpn_plugin.protocol.plots import _pyplot
    fig, ax = _pyplot().subplots(figsize=(3, 1))
    ax.set_xticks([0.0, 0.01, 0.02, 0.5, 0.98, 1.0], ['0', '0.01', '0.02', '0.5', '0.98', '1'])
    ax.set_xlim(0, 1)
    thin_tick_labels(ax)
    assert [label.get_text() for label in ax.get_xticklabels()] == ['0', '', '', '0.5', '', '1']
    assert list(ax.get_xticks()) == [0.0, 0.01, 0.02, 0.5, 0.98, 1.0]
