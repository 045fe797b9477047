"""Issue 37, sixth hostile pass (training / evaluation half): a data loss, wrong results and
silent cases found by new inputs, each now refused naming the file or key, the value and what
was expected. Every test fails on c34d551 (before these fixes)."""
import json
import shutil
from pathlib import Path

import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from tool_modules import load_tool
from vpn_plugin.data_paths import REPO_ROOT, load_config

NIV_CONFIG = str(REPO_ROOT / 'configs/vpn_niv_t3.py')


def checked(options: dict):
    """``check_config_entries`` and the split check of ``configs/vpn_niv_t3.py`` with
    ``options`` merged as ``--cfg-options`` would (no data is read before they refuse)."""
    from vpn_plugin.data_paths import apply_horizon, resolve_paths
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    from vpn_plugin.runner import check_config_entries
    cfg = resolve_paths(apply_horizon(load_config(NIV_CONFIG, options)))
    check_config_entries(cfg, cfg.filename)
    check_split_disjoint(cfg)


@pytest.mark.parametrize('option, value, expected', [
    # before: exit 0 with 241 of the 270 test windows scored as the test (wrong result)
    ('test_dataloader.dataset.split', 'train', r"test_dataloader.dataset.split='train'; "
                                               r"expected 'test'"),
    # before: exit 0 with the 29 windows of 4 test videos scored as the test
    ('test_dataloader.dataset.split', 'val', r"test_dataloader.dataset.split='val'; expected"),
    # before: trained on every window of the training file, its validation videos too
    ('train_dataloader.dataset.split', 'test', r"train_dataloader.dataset.split='test'; "
                                               r"expected 'train'"),
    # before: checkpoints selected on windows the model trained on, without a word
    ('val_dataloader.dataset.split', 'train', r"val_dataloader.dataset.split='train'; "
                                              r"expected 'val' or 'test'"),
])
def test_a_dataloader_reading_another_split_is_refused(option, value, expected):
    with pytest.raises(ValueError, match=expected):
        checked({option: value})


def test_the_authors_selection_still_validates_on_the_test_split():
    """Validation may read the test windows (configs/selection: the authors' checkpoint
    selection), so that config passes the split check."""
    from vpn_plugin.datasets.planning_dataset import _planning_dataset, check_split_roles
    cfg = load_config(str(REPO_ROOT / 'configs/selection/vpn_niv_t3_authors.py'), {})
    assert cfg.val_dataloader.dataset.split == 'test'
    check_split_roles({s: _planning_dataset(cfg, s) for s in ('train', 'val', 'test')},
                      cfg.filename)


@pytest.mark.parametrize('option, value, expected', [
    # before: an unknown env_cfg key was ignored without a word (exit 0)
    ('env_cfg.cudnn_benchmarkk', True, r"env_cfg has no option\(s\) \['cudnn_benchmarkk'\]; "
                                       r".*did you mean 'cudnn_benchmark'"),
    # before: TypeError tracebacks (mmengine / torch), the checkpoint hook's only after training
    ('optim_wrapper.optimiser.lr', 1.0, r"optim_wrapper: OptimWrapper has no option\(s\) "
                                        r"\['optimiser'\]"),
    ('default_hooks.checkpoint.intervall', 2, r"default_hooks.checkpoint has no option\(s\) "
                                              r"\['intervall'\].*did you mean 'interval'"),
    ('randomness.seeds', 1, r"randomness has no option\(s\) \['seeds'\]"),
    ('train_dataloader.batchsize', 4, r"train_dataloader has no option\(s\) \['batchsize'\]"),
    ('optim_wrapper.optimizer.type', 'Nope', r"optim_wrapper.optimizer: type 'Nope' is not "
                                             r"registered"),
    ('optim_wrapper.type', 'AmpOptimWrapper', r"AmpOptimWrapper' \(mixed precision\) needs a "
                                              r"GPU"),
    # before: torch's "Invalid beta parameter at index 1: 1.5", no config entry named
    ('optim_wrapper.optimizer.betas', [0.9, 1.5], r'optim_wrapper.optimizer.betas=\[0.9, 1.5\]; '
                                                  r'expected a list of 2 values'),
    ('param_scheduler.0.endd', 3, r"param_scheduler\[0\] \(StepLR\) has no option\(s\) "
                                  r"\['endd'\].*did you mean 'end'"),
])
def test_misspelt_runner_options_are_refused_naming_the_entry(option, value, expected):
    if option == 'optim_wrapper.type' and torch.cuda.is_available():
        pytest.skip('mixed precision runs on a GPU')
    with pytest.raises(ValueError, match=expected):
        checked({option: value})


def test_every_config_passes_the_runner_option_checks():
    """The checks above refuse no config of the repository (a false alarm would stop runs)."""
    from vpn_plugin.runner import check_runner_options
    for name in ('vpn_niv_t3.py', 'baselines/pdpp_niv_t3.py', 'baselines/cefito_niv_t3.py',
                 'baselines/kepp_niv_t3.py', 'baselines/schema_niv_t3.py'):
        cfg = load_config(str(REPO_ROOT / 'configs' / name), {})
        check_runner_options(cfg, name)


def test_an_evaluator_out_file_never_replaces_the_checkpoint_or_a_foreign_json(tmp_path):
    """Before: ``test.py CFG run/x.pth --cfg-options test_evaluator.out_file=run/x.pth``
    replaced the checkpoint under test by the per-sample JSON, exit 0 (data loss)."""
    from vpn_plugin.evaluation.planning_metric import PlanningMetric
    checkpoint = tmp_path / 'epoch_3.pth'
    torch.save({'state_dict': {}}, checkpoint)
    before = checkpoint.read_bytes()
    with pytest.raises(ValueError, match=r'PlanningMetric out_file .*epoch_3.pth: expected a '
                                         r'file name ending in .json'):
        PlanningMetric(out_file=str(checkpoint))
    mine = tmp_path / 'mine.json'
    mine.write_text('{"notes": 1}')
    with pytest.raises(ValueError, match=r'mine.json: the file exists and it is not '
                       r'recognisably an earlier output of this kind \(per-sample scores JSON of '
                       r'PlanningMetric\).*; give the evaluator another out_file$') as error:
        PlanningMetric(out_file=str(mine))
    assert '--overwrite' not in str(error.value)  # the evaluator has no such flag
    assert checkpoint.read_bytes() == before and mine.read_text() == '{"notes": 1}'
    # an earlier dump is replaced (a protocol rerun), as is a new file
    dump = tmp_path / 'per_sample.json'
    metric = PlanningMetric(out_file=str(dump))
    metric.results = [dict(sample_idx=0, pred_plan=[1, 2, 3], gt_plan=[1, 2, 3])]
    metric.compute_metrics(metric.results)
    PlanningMetric(out_file=str(dump)).compute_metrics(metric.results)
    assert json.loads(dump.read_text())['pred_plan'] == [[1, 2, 3]]


def test_a_subset_fraction_of_a_split_that_is_read_whole_is_refused(tiny_crosstask):
    """Before: ``test_dataloader.dataset.subset_fraction=0.5`` scored the whole test split
    and said nothing (the option is read for the training split only)."""
    from vpn_plugin.datasets.planning_dataset import PlanningDataset
    arguments = {k: v for k, v in tiny_crosstask['test_dataset'].items() if k != 'type'}
    with pytest.raises(ValueError, match=r'PlanningDataset \(test\): subset_fraction=0.5; a '
                                         r'subset is drawn of the training split only'):
        PlanningDataset(**arguments, subset_fraction=0.5)


def test_a_key_given_twice_in_an_annotation_object_is_refused(tmp_path):
    """Before: a window with ``legal_range`` twice kept the last one and dropped the other
    without a word (Python's JSON reader does)."""
    from vpn_plugin.datasets.annotations import read_json_file
    path = tmp_path / 'train_T3.json'
    path.write_text('[{"id": {"feature": "a_1.npy", "legal_range": [[1, 2, 3]], '
                    '"task_id": 0, "legal_range": [[4, 5, 6]]}, "instruction_len": 3}]')
    with pytest.raises(ValueError, match=r"train_T3.json: the key 'legal_range' is given twice "
                                         r"in one object \(in the object of feature 'a_1.npy'\)"
                                         r": \[\[1, 2, 3\]\] and \[\[4, 5, 6\]\]"):
        read_json_file(path)


def test_keep_results_keeps_no_row_twice(tmp_path):
    """Before: ``keep_results.py R R --out K`` (or a file holding a copy of its rows) kept
    every row twice, exit 0; report.py refused the kept file afterwards."""
    keep = load_tool('keep_results')
    source = tmp_path / 'r.jsonl'
    shutil.copy(REPO_ROOT / 'docs/results_data/pkg_quality_niv.jsonl', source)
    with pytest.raises(SystemExit, match=r'r.jsonl is given twice'):
        keep.main([str(source), str(tmp_path / '.' / 'r.jsonl'), '--out',
                   str(tmp_path / 'k.jsonl')])
    doubled = tmp_path / 'd.jsonl'
    doubled.write_text(source.read_text() + source.read_text())
    with pytest.raises(SystemExit, match=r'is in the results twice'):
        keep.main([str(doubled), '--out', str(tmp_path / 'k.jsonl')])
    assert not (tmp_path / 'k.jsonl').exists()
    keep.main([str(source), '--out', str(tmp_path / 'k.jsonl')])
    assert len((tmp_path / 'k.jsonl').read_text().splitlines()) == \
        len([line for line in source.read_text().splitlines() if line.strip()])


@pytest.mark.parametrize('option, value, expected', [
    # before: exit 0, trained without one validation and selected no checkpoint, nothing said
    ('train_cfg.val_begin', 10 ** 9, r'train_cfg.val_begin=1000000000 is past '
                                     r'train_cfg.max_epochs=500: no validation would run'),
    # before: a TypeError traceback at the first validation
    ('train_cfg.val_begin', 'abc', r"train_cfg.val_begin='abc'; expected an integer"),
    # before: a TypeError traceback inside the checkpoint hook after the first epoch
    ('default_hooks.checkpoint.max_keep_ckpts', 'abc',
     r"default_hooks.checkpoint.max_keep_ckpts='abc'; expected an integer"),
    ('default_hooks.checkpoint.max_keep_ckpts', None,
     r"default_hooks.checkpoint.max_keep_ckpts=None; expected an integer"),
])
def test_validation_start_and_kept_checkpoints_are_numbers_that_can_happen(option, value,
                                                                           expected):
    with pytest.raises(ValueError, match=expected):
        from vpn_plugin.runner import check_loop_counts
        cfg = load_config(NIV_CONFIG, {option: value})
        check_loop_counts(cfg)
        checked({option: value})


def test_an_unused_limit_seed_of_the_wrong_kind_is_refused(tiny_crosstask):
    """Before: ``limit_seed='abc'`` without ``limit`` was accepted without a word (read only
    when a limit is given)."""
    from vpn_plugin.datasets.planning_dataset import PlanningDataset
    arguments = {k: v for k, v in tiny_crosstask['test_dataset'].items() if k != 'type'}
    with pytest.raises(ValueError, match=r"limit_seed='abc'; expected an integer >= 0"):
        PlanningDataset(**arguments, limit_seed='abc')


@pytest.mark.parametrize('options, expected', [
    ({'val_evaluator.prefix': 'x'}, r"save_best='plan/success_rate' is not a key of the "
                                    r"validation metrics .*did you mean 'x/success_rate'"),
    ({'default_hooks.checkpoint.save_best': 'plan/nosuch'}, r"save_best='plan/nosuch' is not "
                                                            r"a key of the validation metrics"),
    # reported beside miou_batch, but a setting: before, called "not a key of the metrics"
    ({'default_hooks.checkpoint.save_best': 'plan/miou_batch_size',
      'val_evaluator.extra_metrics': ['miou_batch'], 'val_evaluator.miou_batch_size': 4},
     r"save_best='plan/miou_batch_size' is the batch size miou_batch is computed with, the "
     r"same at every validation .*expected a score of the validation metrics .*'plan/miou_batch'"),
])
def test_a_save_best_key_the_validation_never_reports_is_refused_before_training(options,
                                                                                  expected):
    """Before: trained one epoch, then ``error: plan/success_rate`` (mmengine's KeyError)."""
    with pytest.raises(ValueError, match=expected):
        checked(options)
    checked({'val_evaluator.prefix': 'x', 'default_hooks.checkpoint.save_best': 'x/miou_set'})


def test_an_llm_cache_dir_that_holds_other_files_is_refused(tmp_path):
    """Before: ``llm_eval.py --cache-dir ../shared/data/niv`` wrote its secret key and entry
    folders among the dataset's annotation files, exit 0, nothing said."""
    from vpn_plugin.baselines.llm.backends import ResponseCache as ReplyCache
    data = tmp_path / 'niv'
    (data / 'splits').mkdir(parents=True)
    (data / 'taxonomy.json').write_text('{}')
    with pytest.raises(ValueError, match=r"--cache-dir .*niv holds \['splits', "
                                         r"'taxonomy.json'\] and is no reply cache"):
        ReplyCache(data)
    assert sorted(p.name for p in data.iterdir()) == ['splits', 'taxonomy.json']
    ReplyCache(tmp_path / 'new')  # a new folder, then the cache it became
    (tmp_path / 'new' / 'ab').mkdir()
    ReplyCache(tmp_path / 'new')
    old = tmp_path / 'old'  # a cache of an older version: entry folders, no key
    (old / 'cd').mkdir(parents=True)
    ReplyCache(old)


@pytest.mark.parametrize('flags, option, expected', [
    (dict(horizon=4), {'horizon': 3}, r'--horizon 4 and --cfg-options horizon=3 contradict'),
    (dict(feature_dir='/a/features'), {'feature_dir': '/b/features'},
     r'--feature-dir /a/features and --cfg-options feature_dir=/b/features contradict'),
    (dict(data_root='/a'), {'data_root': '/b'}, r'--data-root /a and --cfg-options '
                                                r'data_root=/b contradict'),
])
def test_a_flag_and_the_cfg_option_it_sets_may_not_contradict(flags, option, expected):
    """Before: the flag won and the --cfg-options value was dropped without a word (a T=4
    training from ``--horizon 4 --cfg-options horizon=3``)."""
    with pytest.raises(ValueError, match=expected):
        load_config(NIV_CONFIG, option, **flags)
    load_config(NIV_CONFIG, {'horizon': 4}, horizon=4)  # the same value twice is fine


def test_train_seed_flag_and_randomness_seed_option_may_not_contradict():
    """Before: ``--seed 1 --cfg-options randomness.seed=2`` trained with seed 1, nothing said."""
    train = load_tool('train')
    args = train.parse_args([NIV_CONFIG, '--seed', '1', '--cfg-options', 'randomness.seed=2',
                             '--work-dir', '/nonexistent/never'])
    with pytest.raises(ValueError, match=r'^--seed 1 and --cfg-options randomness.seed=2 '
                                         r'contradict each other; give one of the two$'):
        train.load_config(args)


@pytest.mark.parametrize('options, expected', [
    (dict(authors_selection='abc'), r"authors_selection='abc'; expected True or False"),
    (dict(prefix=1.5), r'prefix=1.5; expected a non-empty string \(or None\)'),
    (dict(prefix='a/b'), r'prefix=\'a/b\'; expected a name without "/"'),
    (dict(collect_device='abc'), r"collect_device='abc'; expected one of 'cpu', 'gpu'"),
    (dict(miou_batch_size='abc'), r"miou_batch_size='abc'; expected an integer"),
])
def test_planning_metric_options_of_another_kind_are_refused(options, expected):
    """Before: each was accepted ('abc' read as True, keys '1.5/success_rate', a failure after
    the whole test, an unread value)."""
    from vpn_plugin.evaluation.planning_metric import PlanningMetric
    with pytest.raises(ValueError, match=expected):
        PlanningMetric(**options)


def test_dataset_stats_of_a_union_config_names_it_and_gives_one_row_per_horizon(capsys):
    """Before: ``--config configs/union/...`` ended in ``error: taxonomy`` (a KeyError);
    ``--horizons 3 3`` printed the T=3 row twice."""
    stats = load_tool('dataset_stats')
    with pytest.raises(SystemExit, match=r'schema_union_t3.py: train_dataloader.dataset is a '
                                         r'ConcatPlanningDataset of 3 sources, not one dataset'):
        stats.main(['--config', str(REPO_ROOT / 'configs/union/schema_union_t3.py'),
                    '--horizons', '3'])
    stats.main(['--config', NIV_CONFIG, '--horizons', '3', '3'])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith('3 |')]
    assert len(rows) == 1, rows


def results_copy(tmp_path, edit) -> Path:
    """A copy of a committed results file with ``edit(rows)`` applied to its rows."""
    rows = [json.loads(line) for line in
            (REPO_ROOT / 'docs/results_data/main_t6_niv.jsonl').read_text().splitlines() if line]
    edit(rows)
    path = tmp_path / 'r.jsonl'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return path


@pytest.mark.parametrize('edit, expected', [
    # before: a second 'ViterbiPlanNet' row (an invisible zero-width space), exit 0
    (lambda rows: rows[0].update(method=rows[0]['method'] + '\u200b'),
     r'differing only by spaces, invisible characters or the Unicode form'),
    # before: 'NIV' and 'niv' drawn as two datasets of one table
    (lambda rows: rows[0].update(dataset=rows[0]['dataset'].upper()),
     r"results name the dataset 'niv' as \['NIV', 'niv'\]"),
    # before: a row labelled '' in the table
    (lambda rows: rows[0].update(method=''), r"field method=''; expected a non-empty string"),
    # before: an impossible row (SR 50 with mAcc 10) averaged into the table
    (lambda rows: rows[0]['metrics'].update(success_rate=50.0, mean_accuracy=10.0),
     r'metrics.success_rate = 50 exceeds metrics.mean_accuracy = 10'),
])
def test_results_rows_a_table_would_show_wrongly_are_refused(tmp_path, edit, expected):
    from vpn_plugin.protocol.results import read_results
    with pytest.raises(ValueError, match=expected):
        read_results(results_copy(tmp_path, edit))
    assert read_results(results_copy(tmp_path, lambda rows: None))


def test_plots_efficiency_dashed_method_of_no_row_is_refused(tmp_path):
    """Before: ``--dashed Nope`` drew the figure with no dashed line, exit 0."""
    plots_tool = load_tool('plots')
    with pytest.raises(SystemExit, match=r"--dashed: 'Nope' is not among the valid names"):
        plots_tool.main(['efficiency', str(REPO_ROOT / 'docs/results_data/'
                                           'sample_efficiency_niv.jsonl'),
                         '--dashed', 'Nope', '--out', str(tmp_path / 'eff.png')])
    assert not list(tmp_path.iterdir())


def test_test_metrics_and_per_sample_dump_may_not_share_a_file(tmp_path):
    """Before: ``--out-metrics m.json --cfg-options test_evaluator.out_file=m.json`` wrote the
    per-sample dump, then replaced it by the metrics, exit 0."""
    test_tool = load_tool('test')
    checkpoint = tmp_path / 'x.pth'
    torch.save({'state_dict': {}}, checkpoint)
    out = str(tmp_path / 'm.json')
    args = test_tool.parse_args([NIV_CONFIG, str(checkpoint), '--work-dir', str(tmp_path),
                                 '--out-metrics', out, '--cfg-options',
                                 f'test_evaluator.out_file={out}'])
    with pytest.raises(SystemExit, match=r'--out-metrics .*m.json is also '
                                         r'test_evaluator.out_file'):
        test_tool.load_config(args)


def test_run_protocol_seed_beyond_numpys_range_and_deep_json_are_named(tmp_path):
    """Before: ``--seeds 4294967296 --dry-run`` passed ('1 configs checked'), the run then
    failed the unit; a window file nested 100,000 deep ended in a RecursionError traceback."""
    run_protocol = load_tool('run_protocol')
    with pytest.raises(SystemExit):
        run_protocol.parse_args([str(REPO_ROOT / 'configs/protocol/standard_niv.py'),
                                 '--seeds', '4294967296', '--dry-run'])
    from vpn_plugin.datasets.annotations import read_json_file
    deep = tmp_path / 'train_T3.json'
    deep.write_text('[' * 100000 + ']' * 100000)
    with pytest.raises(ValueError, match=r'train_T3.json: JSON nested deeper than'):
        read_json_file(deep)


def test_an_annotation_path_that_cannot_be_there_says_why(tmp_path):
    """Before: a taxonomy.json that is a symlink loop and a ``splits`` that is a file were both
    reported as 'does not exist'."""
    from vpn_plugin.datasets.sources import why_absent
    loop = tmp_path / 'taxonomy.json'
    loop.symlink_to('taxonomy.json')
    assert 'symbolic link to taxonomy.json, which leads back to itself (a loop of links)' \
        in why_absent(loop)
    (tmp_path / 'splits').write_text('x')
    assert why_absent(tmp_path / 'splits' / 'train_T3.json') == \
        f'does not exist: {tmp_path / "splits"} is a file, not a folder'
    assert why_absent(tmp_path / 'nothing.json') == 'does not exist'


def test_a_frame_dim_too_large_to_allocate_names_the_key(tiny_crosstask):
    """Before: frame_dim=10**9 stopped with numpy's 'Unable to allocate 1.15 TiB for an array
    with shape (105, 3000000000)', naming no config key. (10**12: beyond any address space,
    whatever the machine's overcommit setting.)"""
    from vpn_plugin.datasets.planning_dataset import PlanningDataset
    arguments = {k: v for k, v in tiny_crosstask['test_dataset'].items() if k != 'type'}
    with pytest.raises(ValueError, match=r"PlanningDataset: frame_dim=1000000000000 "
                       r"\(observation 'concat3': 3000000000000-d\) for \d+ windows needs .* "
                       r'GiB of observations, more than this machine can allocate; expected '
                       r'frame_dim = the width'):
        PlanningDataset(**dict(arguments, frame_dim=10 ** 12))
