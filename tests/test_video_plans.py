"""Plans for a video of your own (issue 38): features of S3D with random weights are refused by
the Python API unless asked for, and then every plan is marked UNUSABLE, as the tools mark
theirs (item 3); a plan says where its task comes from (the classifier with its probability,
the ground truth, or a task given with the video) and warns when its actions leave that task
(item 6)."""
import math

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.structures import InstanceData  # noqa: F401  (mmengine structures loaded)

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import MODELS
from mmaction.structures import ActionDataSample
from vpn_plugin.apis import plan_from_features, video_observations
from vpn_plugin.apis.inference import UnusableFeaturesError, UnusableObservations
from vpn_plugin.apis.video import format_video_plan
from vpn_plugin.datasets.taxonomy import Taxonomy
from vpn_plugin.models.base_planner import BasePlanner

FRAMES = np.arange(10 * 512, dtype=np.float32).reshape(10, 512) / 5120
# CrossTask's two tasks of issue 38's report, three actions each
TAXONOMY = Taxonomy(action_names=['jack up car', 'unscrew wheel', 'put wheel on',
                                  'check breathing', 'give compressions', 'give breath'],
                    task_names=['Changing a car tire', 'Perform CPR'],
                    task_keys=['t0', 't1'], action_task=[0, 0, 0, 1, 1, 1],
                    task_actions=[[0, 1, 2], [3, 4, 5]])


def observation_config():
    return Config(dict(test_dataloader=dict(dataset=dict(observation='mean3', frame_dim=512))))


def uniform_planner():
    """No network: Viterbi of uniform emissions through a chain PKG (0 -> 1 -> ... -> 5)."""
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=6, horizon=3))
    model.set_pkg(np.roll(np.eye(6), 1, axis=1))
    return model


# ------------------------------------------------------------------ item 3: random weights
def test_random_weights_features_are_refused_unless_asked_for_and_then_every_plan_is_marked(
        tmp_path):
    """Before: video_observations read a ``usable=False`` file like any other and
    plan_from_features planned from it without a word (the CLI printed UNUSABLE)."""
    random_file, real_file = tmp_path / 'random.npz', tmp_path / 'real.npz'
    np.savez(random_file, frames_features=FRAMES, usable=np.bool_(False),
             warning=np.str_('UNUSABLE: S3D with RANDOM weights (--random-weights), test'))
    np.savez(real_file, frames_features=FRAMES, usable=np.bool_(True))
    cfg, model = observation_config(), uniform_planner()
    with pytest.raises(UnusableFeaturesError, match=r'random.npz: field "usable" is false '
                       r'\(UNUSABLE: S3D with RANDOM weights.*pass allow_unusable=True '
                       r'\(tools/plan.py: --random-weights\)'):
        video_observations(cfg, random_file, 1, 8)
    start, goal = video_observations(cfg, random_file, 1, 8, allow_unusable=True)
    assert isinstance(start, UnusableObservations) and isinstance(goal, UnusableObservations)
    plain_start, plain_goal = video_observations(cfg, real_file, 1, 8)
    assert type(plain_start) is torch.Tensor
    torch.testing.assert_close(start.as_subclass(torch.Tensor), plain_start)  # same numbers
    # one plan, and a batch that stacks marked and plain observations: all marked
    for planned in (plan_from_features(model, start, goal),
                    plan_from_features(model, torch.stack([plain_start, start]),
                                       torch.stack([plain_goal, goal]))):
        assert [s.metainfo['usable'] for s in planned] == [False] * len(planned)
        assert all('RANDOM weights' in s.metainfo['warning'] for s in planned)
    clean = plan_from_features(model, plain_start, plain_goal)[0]
    assert clean.metainfo['usable'] is True and 'warning' not in clean.metainfo
    # the tools' display reads the same mark (one rule): first and last line
    lines = format_video_plan(planned[0], TAXONOMY, 'random.npz', 1, 8)
    assert lines[0].startswith('*** UNUSABLE') and lines[-1] == lines[0]
    assert not format_video_plan(clean, TAXONOMY, 'real.npz', 1, 8)[0].startswith('***')
    # in-memory features carry no record: usable (plan_from_video marks random S3D itself)
    assert type(video_observations(cfg, FRAMES, 1, 8)[0]) is torch.Tensor


def test_a_usable_field_that_is_no_boolean_is_an_error_naming_the_file(tmp_path):
    np.savez(tmp_path / 'odd.npz', frames_features=FRAMES, usable=np.str_('no'))
    with pytest.raises(ValueError, match=r"odd.npz: field \"usable\" = .*'no'.*expected a "
                                         'boolean'):
        video_observations(observation_config(), tmp_path / 'odd.npz', 1, 8)
    with pytest.raises(ValueError, match=r'missing.npz does not exist\.'):
        video_observations(observation_config(), tmp_path / 'missing.npz', 1, 8)


def test_marked_observations_survive_a_deep_copy():
    marked = torch.ones(3).as_subclass(UnusableObservations)
    import copy
    assert isinstance(copy.deepcopy(marked), UnusableObservations)


# ------------------------------------------------------------------ item 6: the task
N, K, D, T = 6, 2, 12, 3


def small_planners():
    """Every planner that predicts a task, small (their tests' sizes)."""
    from test_cefito import tiny_cefito
    from test_model_vpn import build as vpn
    from test_schema import small as schema
    pdpp = MODELS.build(dict(type='PDPP', feature_dim=D, num_actions=N, num_tasks=K, horizon=T,
                             dim=32, n_timesteps=10))
    pdpp.diffusion.classifier_ready.fill_(True)
    compact = MODELS.build(dict(type='CompactPlanNet', feature_dim=D, num_actions=N,
                                num_tasks=K, horizon=T, embed_dim=16, num_heads=2,
                                dropout=0.0, loss_weights=dict(align=0.0)))
    return dict(ViterbiPlanNet=vpn(horizon=3), SCHEMA=schema(), PDPP=pdpp,
                CompactPlanNet=compact, CEFITO=tiny_cefito())


def chain(model):
    if not bool(model.pkg_ready):
        size = model.num_actions
        model.set_pkg(np.full((size, size), 1.0 / size))
    return model.eval()


EXPECTED_SOURCES = {  # (task_score, plan_uses_task, the task head's output -> score)
    'ViterbiPlanNet': ('score', False, lambda m, i: m.task_logits(m.encode(i))),
    'SCHEMA': ('probability', True, lambda m, i: m.network(i)['task_logits'].softmax(-1)),
    'PDPP': ('probability', True, lambda m, i: m.diffusion.task_logits(i).softmax(-1)),
    'CompactPlanNet': ('probability', False, lambda m, i: m.task_head(
        torch.cat(m.encode(i)[:2], -1)).softmax(-1)),
    'CEFITO': ('probability', True, lambda m, i: m.classifier.task_logits(i).softmax(-1)),
}


@pytest.mark.parametrize('name', sorted(EXPECTED_SOURCES))
def test_every_planner_with_a_task_says_where_it_comes_from_and_scores_it(name):
    """Oracle: the head's own output at the predicted task (softmax for the cross-entropy
    classifiers, the raw regression output for ViterbiPlanNet's MSE head)."""
    torch.manual_seed(0)
    model = chain(small_planners()[name])
    inputs = {'start': torch.randn(4, D), 'goal': torch.randn(4, D)}  # D of every small one
    samples = model(inputs, None, mode='predict')
    score_kind, uses_task, head = EXPECTED_SOURCES[name]
    with torch.no_grad():
        expected = head(model, inputs)
    for row, sample in enumerate(samples):
        assert sample.metainfo == dict(task_source='classifier', task_score=score_kind,
                                       plan_uses_task=uses_task)
        assert int(sample.pred_task) == int(expected[row].argmax())
        assert math.isclose(float(sample.pred_task_score), float(expected[row].max()),
                            rel_tol=1e-5)


def test_cefito_of_the_true_task_plans_within_the_given_one():
    """task_source='ground_truth' (CEFITO's oracle task): without ground truth the task must
    be given; the plan then lies inside it and says so."""
    from test_cefito import tiny_cefito
    model = chain(tiny_cefito(task_source='ground_truth'))
    start, goal = torch.randn(2, 12), torch.randn(2, 12)
    with pytest.raises(ValueError, match=r"CEFITO plans within the true task \(model.task_"
                                         r"source='ground_truth'\): give the task the video "
                                         r'shows, plan_from_features\(\.\.\., task=K\)'):
        plan_from_features(model, start, goal)
    samples = plan_from_features(model, start, goal, task=1)
    for sample in samples:
        assert int(sample.given_task) == int(sample.pred_task) == 1
        assert 'gt_task' not in sample and sample.metainfo['task_source'] == 'given'
        assert set(sample.pred_plan.tolist()) <= set(model.task_to_actions[1])
    with pytest.raises(ValueError, match=r'task=7; expected 2 task index\(es\) in 0..2'):
        plan_from_features(model, start, goal, task=7)
    with pytest.raises(TypeError, match=r'task=1.5; expected a task index or 2 of them'):
        plan_from_features(model, start, goal, task=1.5)
    with pytest.raises(TypeError, match=r"task='Perform CPR' is a name; expected its index"):
        plan_from_features(model, start, goal, task='Perform CPR')


def video_sample(plan, task=None, score=0.31, **info):
    sample = ActionDataSample()
    sample.pred_plan = torch.tensor(plan)
    if task is not None:
        sample.pred_task, sample.pred_task_score = torch.tensor(task), torch.tensor(score)
    sample.set_metainfo(dict(usable=True, num_seconds=120, **info))
    return sample


def test_a_video_plan_names_its_tasks_source_and_flags_actions_of_other_tasks():
    """Issue 38 item 6: 'task: Changing a car tire' above a plan of CPR actions, said as if
    it were known. Now: where the task comes from, and a warning when the plan leaves it."""
    head = dict(task_source='classifier', task_score='score', plan_uses_task=False)
    lines = format_video_plan(video_sample([3, 4, 5], task=0, **head), TAXONOMY, 'v.mp4', 12, 95)
    assert lines[1] == ('task: Changing a car tire (predicted by the task head, score 0.31; '
                        'the plan does not depend on it)')
    assert [line.split(None, 1)[1] for line in lines[2:5]] == [
        'check breathing', 'give compressions', 'give breath']
    assert lines[5] == ('WARNING: step(s) 1, 2, 3 of 3 are actions of other tasks than '
                        'Changing a car tire: the plan and its task disagree')
    classifier = dict(task_source='classifier', task_score='probability', plan_uses_task=True)
    inside = format_video_plan(video_sample([0, 1, 2], task=0, score=0.875, **classifier),
                               TAXONOMY, 'v.mp4', 12, 95)
    assert inside[1] == ('task: Changing a car tire (predicted by the task classifier, '
                         'probability 0.88; the plan is conditioned on it)')
    assert len(inside) == 5 and not any(line.startswith('WARNING') for line in inside)
    # a task given with the video: the plan is checked against it, the planner's own beside it
    given = video_sample([0, 4, 2], task=0, **classifier)
    given.given_task = torch.tensor(1)
    lines = format_video_plan(given, TAXONOMY, 'v.mp4', 12, 95)
    assert lines[1:3] == ['task: Perform CPR (given)',
                          "the planner's own task: Changing a car tire (predicted by the task "
                          'classifier, probability 0.31; the plan is conditioned on it)']
    assert lines[-1].startswith('WARNING: step(s) 1, 3 of 3 are actions of other tasks than '
                                'Perform CPR')
    # no task at all, and a planner without a plan for the window
    lines = format_video_plan(video_sample([-1, -1, -1]), TAXONOMY, 'v.mp4', 12, 95)
    assert lines[1].startswith('task: none (this planner predicts no task; tools/plan.py '
                               '--task NAME')
    assert [line.split(None, 1)[1] for line in lines[2:]] == ['(no plan)'] * 3


def test_a_dataset_plan_that_leaves_its_true_task_is_flagged():
    from vpn_plugin.models.plan_display import format_plan
    sample = video_sample([0, 4, 2])
    sample.gt_plan, sample.gt_task, sample.sample_idx = (torch.tensor([0, 1, 2]),
                                                         torch.tensor(0), torch.tensor(7))
    lines = format_plan(sample, TAXONOMY)
    assert lines[0] == 'sample 7 | true task (annotation): Changing a car tire | 2/3 steps right'
    assert lines[-1].startswith('WARNING: step(s) 2 of 3 are actions of other tasks than '
                                'Changing a car tire')


class GroundTruthTask(BasePlanner):
    """A planner of the true task with no network: plans the task's first action T times."""
    task_source, plan_uses_task = 'ground_truth', True

    def predict_fields(self, inputs, data_samples, horizon):
        task = data_samples['task']
        return dict(pred_plan=(task * 3)[:, None].expand(-1, horizon), pred_task=task)


def test_the_given_task_reaches_the_planner_and_the_display_says_given():
    model = GroundTruthTask(num_actions=6, horizon=3)
    model.set_pkg(np.full((6, 6), 1 / 6))
    sample = plan_from_features(model, torch.zeros(4), torch.zeros(4), task=1)[0]
    assert sample.pred_plan.tolist() == [3, 3, 3] and int(sample.given_task) == 1
    lines = format_video_plan(sample, TAXONOMY, 'v.mp4', 1, 2)
    assert lines[1] == 'task: Perform CPR (given)'
    assert not any(line.startswith('WARNING') for line in lines)


@pytest.mark.parametrize('name', ['ViterbiPlanNet', 'CompactPlanNet'])
def test_a_task_head_trained_without_task_supervision_predicts_no_task(name):
    """loss_weights.task=0 (the 'w/o task supervision' study): the head is never trained, so
    its argmax is no task of the video; the plan then shows none."""
    from test_model_vpn import build as vpn
    torch.manual_seed(0)
    model = chain(vpn(horizon=3, loss_weights=dict(state=0.0, task=0.0)) if name == 'ViterbiPlanNet'
                  else MODELS.build(dict(type='CompactPlanNet', feature_dim=D, num_actions=N,
                                         num_tasks=K, horizon=T, embed_dim=16, num_heads=2,
                                         loss_weights=dict(align=0.0, task=0.0))))
    sample = plan_from_features(model, torch.randn(D), torch.randn(D))[0]
    assert 'pred_task' not in sample and 'task_source' not in sample.metainfo
    assert format_video_plan(sample, TAXONOMY, 'v.mp4', 1, 2)[1].startswith('task: none')
