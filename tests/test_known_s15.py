"""Issue 37, the known items closing14 left (fixKnown, session 15), each failing on bc5f1b3
(checked in a worktree of it) unless it says it guards a valid input."""
import json
import os
from pathlib import Path

import pytest

from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
UNIFORM = REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py'


def protocol_runner(tmp_path, **options):
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import ProtocolRunner
    return ProtocolRunner(Config(dict(protocol='p', dataset='crosstask')), tmp_path, **options)


# ------------------------------------------------ 1: the effective data root in every record
def test_a_test_records_the_data_root_it_scored(tiny_crosstask, shared_data, tmp_path):
    """Before: ``tools/test.py --data-root X`` wrote test_metrics.json without a word of X, so
    no reader could tell which annotations were scored. Now ``data_root`` names the test set's
    root after --data-root / the config."""
    os.symlink(shared_data, tmp_path / 'other_root')
    loaders = {f'{split}_dataloader': dict(batch_size=64, dataset=dict(
        tiny_crosstask[f'{split}_dataset'], data_root='{data_root}/crosstask',
        observation='mean3', _delete_=True)) for split in ('train', 'val', 'test')}
    config = tmp_path / 'uniform.py'
    config.write_text(f'_base_ = [{str(UNIFORM)!r}]\n'
                      + ''.join(f'{k} = {v!r}\n' for k, v in loaders.items()))
    load_tool('test').main([str(config), '--work-dir', str(tmp_path / 'run'), '--limit', '4',
                            '--data-root', str(tmp_path / 'other_root'),
                            '--out-metrics', str(tmp_path / 'm.json')])
    record = json.loads((tmp_path / 'm.json').read_text())
    assert record['data_root'] == str(tmp_path / 'other_root' / 'crosstask')
    from vpn_plugin.outputs import check_output  # still a metrics file: --overwrite replaces it
    assert check_output(tmp_path / 'm.json', 'metrics', '--out-metrics', overwrite=True) == \
        tmp_path / 'm.json'
    a_list = dict(record, data_root=['/a/crosstask', '/a/niv'],  # a union's roots, and
                  test_set_pkg='graph read from a released file')  # a KEPP test's note
    (tmp_path / 'u.json').write_text(json.dumps(a_list))
    assert check_output(tmp_path / 'u.json', 'metrics', '--out-metrics', overwrite=True)


def test_llm_eval_records_the_data_root_it_scored(tiny_crosstask, shared_data, tmp_path):
    """Before: llm_eval's summary named no data root (its row names one only when given).
    Now ``data_root`` there is the test set's root after --data-root / the config."""
    from fake_openai_server import FakeOpenAIServer
    os.symlink(shared_data, tmp_path / 'other_root')
    config = tmp_path / 'tiny_llm.py'
    datasets = {split: dict(tiny_crosstask[f'{split}_dataset'], data_root='{data_root}/crosstask')
                for split in ('train', 'test')}
    config.write_text(f'data_root = {str(shared_data)!r}\n' + ''.join(
        f'{split}_dataloader = dict(dataset={dataset!r})\n' for split, dataset in datasets.items()))
    reply = {'text': json.dumps({'plan': [0, 0, 0]})}
    with FakeOpenAIServer(lambda prompt, attempt: reply) as server:
        load_tool('llm_eval').main([
            '--config', str(config), '--base-url', server.base_url, '--model', 'fake',
            '--limit', '2', '--no-progress', '--cache-dir', str(tmp_path / 'cache'),
            '--data-root', str(tmp_path / 'other_root'),
            '--out', str(tmp_path / 'results.jsonl')])
    summary = json.loads(next(tmp_path.glob('*.summary.json')).read_text())
    assert summary['data_root'] == str(tmp_path / 'other_root' / 'crosstask')


def test_plan_py_names_the_annotations_it_planned(tiny_pdpp_checkpoint, tiny_crosstask,
                                                  capsys):
    """Before: plan.py printed dataset samples without a word of whose annotations they were;
    now a line on stderr names the split and the data root."""
    config, checkpoint = tiny_pdpp_checkpoint
    load_tool('plan').main([str(config), str(checkpoint), '--indices', '4'])
    err = capsys.readouterr().err
    assert f"test windows of the annotations in {tiny_crosstask['data_root']}" in err


def test_protocol_rows_of_another_data_root_are_other_rows_and_never_pooled(tmp_path):
    """Before: ``run_protocol.py --data-root X`` wrote rows (and a run.json) identical to those
    of the configs' own annotations: a second protocol on other annotations found the first
    one's rows "done", and the report pooled seeds of two roots into one cell. Now the rows'
    settings and the work dir's identity name the root given; the report refuses the pool
    naming ``data_root``. Guard: without --data-root the rows are as before."""
    from vpn_plugin.protocol.report import check_one_run_per_cell
    from vpn_plugin.protocol.runner import TestSpec, TrainUnit
    spec = TestSpec('PKG_uniform_emissions', str(UNIFORM), 3)
    plain_runner = protocol_runner(tmp_path)
    other_runner = protocol_runner(tmp_path, data_paths=dict(data_root='/tmp/other/data',
                                                             feature_dir=None))
    rows = []
    for seed, runner in ((0, plain_runner), (1, other_runner)):
        unit = TrainUnit('u', str(UNIFORM), 3, seed, {}, {}, False, [spec])
        rows.append(runner.row_for(unit, spec, metrics={'success_rate': 10.0}))
    assert 'data_root' not in rows[0].settings  # the configs' own data: rows as before
    assert 'data_root' not in plain_runner.identity(TrainUnit('u', str(UNIFORM), 3, 0, {}, {},
                                                              False, [spec]))
    assert rows[1].settings['data_root'] == '/tmp/other/data'
    assert other_runner.identity(TrainUnit('u', str(UNIFORM), 3, 1, {}, {}, False, [spec]))[
        'data_root'] == '/tmp/other/data'
    with pytest.raises(ValueError, match=r'differ in settings: .*"data_root": "/tmp/other/data"'):
        check_one_run_per_cell(rows)


# ------------------------------ 2: a training limit set in the config file records its draw
def test_a_training_limit_in_the_config_file_records_its_draw(tmp_path):
    """Before: a training split limited in the CONFIG FILE (``train_dataloader.dataset.limit``
    in the file, not by option) recorded no draw version, neither in the rows' settings nor in
    run.json, and a session-12 work dir (its limited training drawn by list position, run.json
    without a draw) was reused as current. Now both record ``sample_draw`` and that work dir is
    refused naming it and what to do. Guard: a full training records nothing new."""
    from vpn_plugin.protocol.runner import TestSpec, TrainUnit, claim_work_dir
    config = tmp_path / 'limited.py'
    config.write_text(f'_base_ = [{str(UNIFORM)!r}]\n'
                      'train_dataloader = dict(dataset=dict(limit=8))\n')
    spec = TestSpec('PKG_uniform_emissions', str(UNIFORM), 3)
    limited = TrainUnit('u', str(config), 3, 0, {}, {}, False, [spec])
    full = TrainUnit('u', str(UNIFORM), 3, 0, {}, {}, False, [spec])
    runner = protocol_runner(tmp_path)
    assert runner.identity(limited)['sample_draw'] == 'window_identity_v2'
    assert runner.settings(limited, spec)['sample_draw'] == 'window_identity_v2'
    assert 'sample_draw' not in runner.identity(full)
    assert 'sample_draw' not in runner.settings(full, spec)
    old = {k: v for k, v in runner.identity(limited).items() if k != 'sample_draw'}
    claim_work_dir(tmp_path / 'w', old)  # session 12's run.json
    with pytest.raises(ValueError, match=r"w/run.json records a training on a limited split but "
                       r"no draw version: its windows were drawn by list position .* delete "
                       r".*/w \(the training then starts over\) or give another --out"):
        claim_work_dir(tmp_path / 'w', runner.identity(limited))


# ----------------------------------- 3: EMA hook options at resume under the class defaults
@pytest.mark.parametrize('trained, here, named', [
    ([dict(type='PDPPEMAHook', decay=0.995, interval=10)], [dict(type='PDPPEMAHook')], None),
    ([dict(type='CEFITOEMAHook')], [dict(type='CEFITOEMAHook', start_step=400)], None),
    ([dict(type='EMAHook', momentum=0.0002)], [dict(type='EMAHook')], None),
    ([dict(type='PDPPEMAHook')], [dict(type='PDPPEMAHook', decay=0.99)],
     "custom_hooks.PDPPEMAHook.decay: 0.995 in the run, 0.99 here"),
    ([dict(type='EMAHook')], [dict(type='EMAHook', momentum=0.001)],
     "custom_hooks.EMAHook.momentum: 0.0002 in the run, 0.001 here")])
def test_ema_hook_options_at_resume_are_compared_with_class_defaults(trained, here, named):
    """Before: a resume spelling an EMA hook option at its class default (``decay=0.995``,
    ``momentum=0.0002``) was refused as "None in the run, 0.995 here", though every other
    section fills its class defaults on both sides. Now equal; a changed decay / momentum is
    still named (refused at resume)."""
    import vpn_plugin.mm  # noqa: F401  (the hooks registered)
    from vpn_plugin.engine.checkpoint import ema_hook_differences
    lines = ema_hook_differences(trained, here)
    assert lines == ([named] if named else [])


# ------------------------------------------ 9: a control character of a vid in a message
def test_a_vid_holding_a_nul_is_escaped_in_every_message():
    """Before: a NUL (or escape, newline) in a vid went raw into "(vid ...)" (a terminal
    dropped the rest of the line, a newline forged another). Now by the one rule of names in
    printed lines (``errors.plain_text``)."""
    from vpn_plugin.datasets.annotations import BadVideoError, check_listed_length, \
        check_step_order
    from vpn_plugin.datasets.validation import AnnotationWarnings
    vid = 'a\x00b\nc\x1b[31m'
    with pytest.raises(BadVideoError) as caught:
        check_step_order('ann.json', vid, 'entry 0', [9.0, 5.0, 1.0])
    message = str(caught.value)
    assert '(vid a\\x00b\\nc\\x1b[31m)' in message
    assert not any(c in message for c in '\x00\n\x1b')
    with pytest.raises(BadVideoError, match=r'\(vid a\\x00b\\nc\\x1b\[31m\): field "length"'):
        check_listed_length('list.json', dict(entry=0, vid=vid, length=3), 'x.csv', 2)
    warnings = AnnotationWarnings()
    check_step_order('ann.json', vid, 'entry 0', [1.0, 9.0, 5.0], warnings)
    assert '\x00' not in str(vars(warnings)) and 'a\\\\x00b' in str(vars(warnings))


# ---------------------------------- 5: a config's remembered values keyed on its content
def test_a_config_edited_during_a_protocol_run_is_read_anew(tmp_path):
    """Before: ``config_values`` (which windows a unit's splits keep) was remembered per
    (path, mtime, size) of the config file alone: a base file edited, or the file rewritten at
    the same size and time stamp, kept the old values for the rest of the run. Now keyed on
    the content of the config and its bases."""
    from vpn_plugin.protocol.runner import config_digest, config_values
    base = tmp_path / 'base.py'
    base.write_text(f'_base_ = [{str(UNIFORM)!r}]\n'
                    'train_dataloader = dict(dataset=dict(limit=8))\n')
    child = tmp_path / 'child.py'
    child.write_text("_base_ = ['base.py']\ntest_dataloader = dict(dataset=dict(limit=5))\n")
    first = config_digest(str(child))
    assert config_values(str(child), {}, 'train_dataloader', 'limit') == (8,)
    base.write_text(base.read_text().replace('limit=8', 'limit=9'))
    assert config_values(str(child), {}, 'train_dataloader', 'limit') == (9,)
    assert config_digest(str(child)) != first
    stat = child.stat()
    child.write_text(child.read_text().replace('limit=5', 'limit=6'))  # same size, same time
    os.utime(child, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert config_values(str(child), {}, 'test_dataloader', 'limit') == (6,)


# ----------------------- 8: the reduced-precision note says what is known, not a guess
def test_a_float32_graph_buffer_note_states_facts_without_a_guess():
    """Before: a float64 graph buffer stored as float32 was noted "(a checkpoint saved in half
    precision?)": a guess, and wrong (float32 is no half precision). Now the note says what
    is known: the dtypes and, when true, that the values equal their float16 rounding."""
    import torch
    from vpn_plugin.engine.checkpoint import reduced_precision_note
    expected = {'pkg': torch.zeros(3, 3, dtype=torch.float64), 'w': torch.zeros(2)}
    exact = {'pkg': torch.tensor([[0.5, 0.25, 0.25]] * 3), 'w': torch.ones(2)}
    note = reduced_precision_note(exact, expected)
    assert note == ("1 of its 2 floating tensors are stored in torch.float32 (first pkg), "
                    "coarser than the model's torch.float64: the model runs with their rounded "
                    'values, not with the weights as trained (the torch.float32 values equal '
                    'their float16 rounding)')
    thirds = {'pkg': torch.full((3, 3), 1 / 3), 'w': torch.ones(2)}
    note = reduced_precision_note(thirds, expected)
    assert note.endswith('not with the weights as trained') and '?' not in note
    half = reduced_precision_note({'w': torch.ones(2, dtype=torch.float16)}, expected)
    assert half.endswith('not with the weights as trained') and '?' not in half


# ------------------------------------- 10: the custom dataset README says what the reader does
def test_the_custom_dataset_readme_says_task_indices_are_the_keys(tmp_path):
    """Before: examples/custom_dataset/README.md said task indices are "in file order", while
    ``load_taxonomy`` reads each task at the index its key carries (a file listing them in
    another order is the same taxonomy). The README now says so; checked against the reader."""
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    readme = (REPO / 'examples/custom_dataset/README.md').read_text()
    assert 'in file order' not in readme
    assert 'the `<idx>` of a key is its task index, whatever the order the file lists' in readme
    (tmp_path / 't.json').write_text(json.dumps({'1_make_coffee': {'1': 'grind'},
                                                 '0_make_tea': {'0': 'boil'}}))
    taxonomy = load_taxonomy(tmp_path / 't.json')
    assert taxonomy.task_names == ['make_tea', 'make_coffee']


# ----------------------------- 7: a moved protocol folder's .expected names its own work dirs
def test_a_moved_protocol_folders_expected_rows_name_its_own_work_dirs(tmp_path):
    """Before: ``<results>.expected`` kept the absolute work dirs of the folder's first place,
    so a moved or copied protocol folder named the old place's work dirs (the results rows'
    paths are relative to their folder). Now written relative and read from the folder; an
    absolute one of an older file is read as the moved folder's own when it is there."""
    import shutil
    from vpn_plugin.protocol.expected import add_expected, expected_file, read_expected
    from vpn_plugin.protocol.results import ResultRow
    old = tmp_path / 'old' / 'proto'
    work = old / 'PKG' / 'T3' / 'seed0'
    work.mkdir(parents=True)
    row = ResultRow(method='PKG', seed=0, horizon=3, metrics={}, protocol='p',
                    work_dir=str(work))
    add_expected(old / 'results.jsonl', [row])
    assert json.loads(expected_file(old / 'results.jsonl').read_text())['work_dir'] == \
        'PKG/T3/seed0'
    new = tmp_path / 'new' / 'proto'
    new.parent.mkdir()
    shutil.move(old, new)
    assert read_expected(new / 'results.jsonl')[0].work_dir == str(new / 'PKG/T3/seed0')
    # a file written before (absolute paths of the old place) reads the moved folder's own
    expected_file(new / 'results.jsonl').write_text(json.dumps(dict(
        protocol='p', dataset='', method='PKG', config='', seed=0, horizon=3,
        train_horizon=None, variant={}, settings={}, work_dir=str(work))) + '\n')
    assert read_expected(new / 'results.jsonl')[0].work_dir == str(new / 'PKG/T3/seed0')


# ------------------------------------- 6: the plan_jsd axis and the single-panel curve title
def test_a_single_panel_curve_is_titled_and_plan_jsd_says_lower_is_better(tmp_path,
                                                                         monkeypatch):
    """Before: ``plots curve`` of one dataset and T drew no title (the multi-panel figure
    titles each panel 'NIV, T=3'), and a figure of ``plan_jsd`` (lower is better, unlike every
    other ranked metric) said only 'JSD to ground truth (bits)'. Now titled, and the axis says
    lower is better (looked at: fits at one column width)."""
    import dataclasses
    from vpn_plugin.protocol import plots
    from vpn_plugin.protocol.results import read_results
    kept = []
    monkeypatch.setattr(plots, 'save_figure', lambda fig, stem: kept.append(fig))
    rows = [r for r in read_results([REPO / 'docs/results_data/sample_efficiency_niv.jsonl'])
            if r.horizon == 3]
    jsd = [dataclasses.replace(r, metrics=dict(r.metrics, plan_jsd=0.2 + r.seed / 100))
           for r in rows]
    plots.plot_curves(jsd, 'train_fraction', 'plan_jsd', tmp_path / 'c', log_x=True)
    ax = kept[0].axes[0]
    assert ax.get_title() == 'NIV, T=3'
    assert ax.get_ylabel() == 'JSD to ground truth\n(bits; lower is better)'
