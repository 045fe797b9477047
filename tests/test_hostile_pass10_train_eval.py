"""Issue 37, ninth hostile pass (hostile23: the VPN / SCHEMA / CompactPlanNet / baseline
training and evaluation path through tools/train.py and tools/test.py): values of the right
kind but the wrong meaning, which the typed schema lets through. Each test fails on main
be118b8 (before these fixes) except the guards named *_still_*."""
import re

import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from tiny_configs import option_differences
from vpn_plugin.data_paths import REPO_ROOT, load_config

NIV_CONFIG = str(REPO_ROOT / 'configs/vpn_niv_t3.py')


def checked(options: dict, config: str = NIV_CONFIG):
    """``check_config_entries`` of ``config`` with ``options`` merged as ``--cfg-options``
    would (nothing is read or built before it refuses)."""
    from vpn_plugin.data_paths import apply_horizon, resolve_paths
    from vpn_plugin.runner import check_config_entries
    cfg = resolve_paths(apply_horizon(load_config(config, options)))
    check_config_entries(cfg, cfg.filename)


@pytest.mark.parametrize('options, expected', [
    # before: exit 0 with the metrics of 200 of NIV's 270 test windows (batch_size=100)
    ({'test_dataloader.drop_last': True, 'test_dataloader.batch_size': 100},
     r'test_dataloader.drop_last=True leaves the windows of the last incomplete batch out'),
    ({'val_dataloader.drop_last': True}, r'val_dataloader.drop_last=True leaves the windows'),
    # before: exit 0 with the metrics of 8 of 270 windows, the log saying "270 windows"
    ({'test_dataloader.num_batch_per_epoch': 1},
     r'test_dataloader.num_batch_per_epoch=1 scores only that many batches'),
    ({'val_dataloader.num_batch_per_epoch': 2}, r'val_dataloader.num_batch_per_epoch=2 scores'),
    # before: the test never ended
    ({'test_dataloader.sampler.type': 'InfiniteSampler'},
     r"test_dataloader.sampler.type='InfiniteSampler'; expected 'DefaultSampler'.*endless"),
])
def test_an_evaluation_loader_that_scores_another_set_of_windows_is_refused(options, expected):
    with pytest.raises(ValueError, match=expected):
        checked(options)


def test_valid_evaluation_loaders_still_pass():
    checked({'test_dataloader.drop_last': False, 'test_dataloader.num_batch_per_epoch': None,
             'test_dataloader.batch_size': 100, 'val_dataloader.sampler.shuffle': True})


@pytest.mark.parametrize('options, expected', [
    # before: the worst validation's checkpoint kept as "best" (and tested), without a word
    ({'default_hooks.checkpoint.save_best': 'plan/mean_accuracy',
      'default_hooks.checkpoint.rule': 'less'},
     r"rule='less' for save_best='plan/mean_accuracy', a score where higher is better"),
    ({'default_hooks.checkpoint.less_keys': ['plan/success_rate']},
     r"less_keys=\['plan/success_rate'\] for save_best='plan/success_rate'"),
])
def test_a_best_checkpoint_rule_against_the_score_is_refused(options, expected):
    with pytest.raises(ValueError, match=expected):
        checked(options)


def test_the_greater_rule_still_passes():
    checked({'default_hooks.checkpoint.save_best': ['plan/success_rate', 'plan/miou_set'],
             'default_hooks.checkpoint.rule': 'greater'})


def test_checkpoint_outputs_that_cannot_be_written_are_refused_before_the_run(tmp_path):
    """Before: refused at the first save, an epoch in, advising to free disk space
    (checkpoint hook) or a bare "[Errno 20] Not a directory" (logger hook)."""
    file = tmp_path / 'features.json'
    file.write_text('{}')
    with pytest.raises(ValueError, match=r"filename_tmpl='../esc_\{\}.pth' names a folder"):
        checked({'default_hooks.checkpoint.filename_tmpl': '../esc_{}.pth'})
    for hook in ('checkpoint', 'logger'):
        with pytest.raises(ValueError, match=re.escape(
                f"default_hooks.{hook}.out_dir='{file}/sub': {file} is a file, not a folder")):
            checked({f'default_hooks.{hook}.out_dir': f'{file}/sub'})
    checked({'default_hooks.checkpoint.out_dir': str(tmp_path / 'new'),
             'default_hooks.checkpoint.filename_tmpl': 'ck_{}.pth'})  # still passes


@pytest.mark.parametrize('options, expected', [
    # before: mmengine's "end should be larger than begin, but got begin=5, end=2"
    ({'param_scheduler.0.begin': 5, 'param_scheduler.0.end': 2},
     r'param_scheduler\[0\] \(StepLR\): begin=5, end=2; expected begin < end'),
    # before: a raw re.error traceback ("missing ), unterminated subpattern")
    ({'log_processor.mean_pattern': '('}, r"log_processor.mean_pattern='\(' is no regular"),
    # before: "error: 0" (a KeyError inside the model)
    ({'train_dataloader.collate_fn.type': 'pseudo_collate'},
     r"train_dataloader.collate_fn=\{'type': 'pseudo_collate'\}; expected "
     r"dict\(type='planning_collate'\)"),
])
def test_runner_values_refused_by_mmengine_far_from_their_key_are_named(options, expected):
    with pytest.raises(ValueError, match=expected):
        checked(options)


@pytest.mark.parametrize('key, value', [('feature_dim', 5), ('num_actions', 7)])
def test_a_step_model_size_against_the_planner_is_refused(key, value):
    """Before: PKGBeamSearchPlanner built its step model with its own feature_dim /
    num_actions, replacing model.step_model's without a word."""
    from vpn_plugin.baselines.planners import PKGBeamSearchPlanner
    with pytest.raises(ValueError, match=re.escape(f'model.step_model.{key}={value} contradicts')):
        PKGBeamSearchPlanner(feature_dim=8, num_actions=4, horizon=3,
                             step_model={'type': 'EndpointMLP', key: value})
    PKGBeamSearchPlanner(feature_dim=8, num_actions=4, horizon=3,  # the same value still passes
                         step_model=dict(type='EndpointMLP', feature_dim=8, num_actions=4))


def test_a_diverged_training_step_is_named():
    """Before: weight_decay=1e9 scaled every weight by -9e5 in the first step; the second ended
    in "log_emissions holds NaN or +inf values" naming no cause."""
    from vpn_plugin.core.viterbi import NonFiniteValues
    from vpn_plugin.models.base_planner import NonFiniteLossError, named_divergence
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.fill_(3e6)
    with pytest.raises(NonFiniteLossError, match=r'training.*log_emissions holds NaN.*computed '
                       r'from finite observations; the largest \|weight\| is 3e\+06 \(weight\)'
                       r'.*weight_decay'):
        with named_divergence(model, dict(start=torch.zeros(1, 2))):
            raise NonFiniteValues('log_emissions holds NaN or +inf values')
    with pytest.raises(NonFiniteValues):  # non-finite observations: the decoder's own message
        with named_divergence(model, dict(start=torch.full((1, 2), float('nan')))):
            raise NonFiniteValues('log_emissions holds NaN or +inf values')


@pytest.mark.parametrize('flag, option', [
    # before: the switch won, the option dropped without a word (--auto-scale-lr scaled lr)
    ('--deterministic', 'randomness.deterministic=False'),
    ('--auto-scale-lr', 'auto_scale_lr.enable=False'),
    ('--diff-rank-seed', 'randomness.diff_rank_seed=False'),
    ('--no-validate', 'val_dataloader.batch_size=8'),
    ('--no-validate', 'default_hooks.checkpoint.save_best=plan/miou_set'),
])
def test_a_switch_contradicted_by_a_cfg_option_is_refused(tmp_path, flag, option):
    from tool_modules import load_tool
    train = load_tool('train')
    args = train.parse_args([NIV_CONFIG, flag, '--work-dir', str(tmp_path),
                             '--cfg-options', option])
    with pytest.raises(ValueError, match=re.escape(f'--cfg-options {option}')):
        train.load_config(args)
    args = train.parse_args([NIV_CONFIG, flag, '--work-dir', str(tmp_path)])
    train.load_config(args)  # the switch alone still passes


RUN_CFG = """optim_wrapper = dict(optimizer=dict(type='AdamW', lr=0.0009))
randomness = dict(seed=0)
val_cfg = dict(type='ValLoop')
default_hooks = dict(checkpoint=dict(type='CheckpointHook', save_best='plan/success_rate',
                                     rule='greater'))
"""


@pytest.mark.parametrize('change, expected', [
    # before: exit 0, the last epoch clipped (val SR 4.92 against 6.56 for the plain resume)
    ("optim_wrapper = dict(optimizer=dict(type='AdamW', lr=0.0009), clip_grad=dict(max_norm=0.001))",
     "optim_wrapper.clip_grad: None in the run, {'max_norm': 0.001} here"),
    # before: mmengine restored the run's seed 0 with a warning that did not say so
    ('randomness = dict(seed=5)', 'randomness.seed: 0 in the run, 5 here'),
    # before: miou_set's scores compared with the success rate's best; that best file removed
    ("default_hooks = dict(checkpoint=dict(type='CheckpointHook', save_best='plan/miou_set', "
     "rule='greater'))",
     "default_hooks.checkpoint.save_best: 'plan/success_rate' in the run, 'plan/miou_set' here"),
])
def test_a_resume_names_a_changed_clip_seed_or_best_key(change, expected):
    assert option_differences(RUN_CFG, 'resume') == ([], [])
    assert option_differences(RUN_CFG, 'resume', RUN_CFG + change + '\n') == ([expected], [])


@pytest.mark.parametrize('option, given', [('val_fraction', 0.5), ('split_seed', 5)])
def test_held_out_options_on_the_test_split_are_refused(tiny_crosstask, option, given):
    """Before: read and ignored (the test split is read whole), exit 0 without a word."""
    from mmaction.registry import DATASETS
    with pytest.raises(ValueError, match=re.escape(f'PlanningDataset (test): {option}={given!r}; '
                                                   'these draw the validation videos')):
        DATASETS.build(dict(tiny_crosstask['test_dataset'], **{option: given}))
    DATASETS.build(dict(tiny_crosstask['test_dataset'], val_fraction=0.1, split_seed=0))


def test_a_test_that_observes_otherwise_than_training_is_named():
    """Before: observed_steps=1 at the test of a run trained with 0 moved SR from 12.59 to
    17.41 and observation='concat3' on an 'authors' run (the same 1536 dims) was scored,
    both without a word (the override warning compared model options only)."""
    trained = ("train_dataloader = dict(dataset=dict(type='PlanningDataset', "
               "observation='authors', window_policy='authors'))\n")
    tested = trained.replace('train_', 'test_')
    assert option_differences(trained, 'test', tested) == ([], [])
    assert option_differences(trained, 'test', tested.replace(
        "observation='authors'", "observation='concat3', observed_steps=1")) == ([], [
            "test_dataloader.dataset.observation: 'authors' in training, 'concat3' here",
            'test_dataloader.dataset.observed_steps: 0 in training, 1 here'])


def test_a_training_cut_to_a_few_batches_is_marked_shortened(tmp_path):
    """Before: train_dataloader.num_batch_per_epoch=1 trained one batch per epoch and its
    checkpoints were not marked shortened (a training split limit was)."""
    from tool_modules import load_tool
    train = load_tool('train')
    args = train.parse_args([NIV_CONFIG, '--work-dir', str(tmp_path), '--cfg-options',
                             'train_dataloader.num_batch_per_epoch=1'])
    assert 'train_dataloader.num_batch_per_epoch=1' in train.load_config(args).shortened
    assert not train.load_config(train.parse_args([NIV_CONFIG, '--work-dir', str(tmp_path)])
                                 ).get('shortened')


def test_an_unknown_distributed_backend_is_named():
    """Before: "AssertionError: Unknown backend type abc", a traceback inside
    init_process_group on each rank of tools/dist_train.sh (no key named)."""
    with pytest.raises(ValueError, match=r"env_cfg.dist_cfg.backend='abc'; expected one of"):
        checked({'env_cfg.dist_cfg.backend': 'abc'})
    checked({'env_cfg.dist_cfg.backend': 'gloo'})  # still passes


def test_an_evaluator_out_file_in_use_by_another_run_is_refused(tmp_path, lock_held_elsewhere):
    """Before: two tests at once with one test_evaluator.out_file both exited 0; the file held
    the first one's per-sample scores, the second's replaced without a word (W5)."""
    from mmengine.config import Config
    from vpn_plugin.runner import evaluator_output_locks
    out = tmp_path / 'per_sample.json'
    cfg = Config(dict(test_evaluator=dict(type='PlanningMetric', out_file=str(out))))
    with lock_held_elsewhere(out, wait=False, what='other'):  # another run's
        with pytest.raises(Exception, match=re.escape(f'test_evaluator.out_file {out}')):
            evaluator_output_locks(cfg)
    with evaluator_output_locks(cfg):  # free again: taken
        pass


def test_an_output_onto_a_file_the_config_reads_is_refused_even_with_overwrite(tmp_path):
    """Before: ``test.py --data-root COPY --out-metrics COPY/niv/taxonomy.json --overwrite``
    replaced the taxonomy the test had read (exit 0): only the config file and the
    checkpoint counted as inputs (W8b, data loss)."""
    from vpn_plugin.outputs import check_spares_config_inputs
    data = tmp_path / 'data'
    (data / 'niv').mkdir(parents=True)
    taxonomy = data / 'niv' / 'taxonomy.json'
    taxonomy.write_text('{"actions": []}')
    text = tmp_path / 'text.npy'
    text.write_bytes(b'x')
    config = dict(test_dataloader=dict(dataset=dict(data_root=str(data))),
                  model=dict(text_embeddings=dict(file=str(text))), work_dir=str(tmp_path))
    with pytest.raises(ValueError, match=re.escape(
            f'--out-metrics {taxonomy}: is inside {data}, a folder this command reads '
            '(test_dataloader.dataset.data_root)')):
        check_spares_config_inputs(taxonomy, 'metrics', '--out-metrics', config)
    with pytest.raises(ValueError, match=r'is a file this command reads \(model.text_embeddings'):
        check_spares_config_inputs(text, 'predictions', '--out', config)
    earlier = tmp_path / 'metrics.json'  # an earlier metrics file in the work dir: replaced
    earlier.write_text('{"plan/success_rate": 1.0}')
    check_spares_config_inputs(earlier, 'metrics', '--out-metrics', config)
    check_spares_config_inputs(tmp_path / 'new.json', 'metrics', '--out-metrics', config)
