"""The tenth hostile pass (issue 37), core math / Python API / the checks themselves (meaning5).

One kind rule for every check (``errors.check_number`` is ``config_types.check_value``'s rule),
a registered class built in Python held to its ``__init__`` annotations, and the core's
meanings a kind cannot say (a prior that is no distribution, a fraction of 0 that keeps a
sequence, a one-step beam path that misses its goal).
"""
from __future__ import annotations

import math

import pytest
import torch

from vpn_plugin.config_types import Probability, check_value
from vpn_plugin.errors import at_least, check_bool, check_number


@pytest.mark.parametrize('value, limits', [
    (0.5, dict(low=1.0)),
    (-1, dict(integer=True, low=0)),
    (True, dict(integer=True, low=1)),
    (2.0, dict(low=0, high=1.0)),
    ('x', dict(low=0.0, optional=True)),
])
def test_check_number_says_what_check_value_says(value, limits):
    """One rule, one bound format: ``>= 1``, never ``>= 1.0`` beside ``>= 1``."""
    from typing import Annotated, Optional
    from vpn_plugin.config_types import Range
    kind = Annotated[int if limits.get('integer') else float,
                     Range(limits.get('low'), limits.get('high'))]
    if limits.get('optional'):
        kind = Optional[kind]
    with pytest.raises(ValueError) as number_error:
        check_number('model.x', value, **limits)
    with pytest.raises(ValueError) as value_error:
        check_value('model.x', value, kind)
    assert str(number_error.value) == str(value_error.value)
    assert '.0' not in str(number_error.value).split('expected')[1]


def test_bounds_of_argparse_types_read_as_check_values():
    with pytest.raises(Exception, match=r"nan: not a finite number; expected a number >= 0$"):
        at_least(float, 0.0)('nan')
    with pytest.raises(Exception, match=r"expected an integer >= 1 and <= 10 \(why\)$"):
        at_least(int, 1, high=10, why='why')('11')


@pytest.mark.parametrize('check', [
    lambda: check_number('model.lr', 10 ** 400, low=0),
    lambda: check_value('model.lr', 10 ** 400, Probability),
    lambda: at_least(int, 1, high=10)('1' + '0' * 400),
])
def test_an_integer_beyond_a_float_is_refused_by_name_not_an_overflow(check):
    with pytest.raises((ValueError, Exception)) as error:
        check()
    assert not isinstance(error.value, OverflowError), error.value


def test_check_bool_is_check_values_rule():
    with pytest.raises(ValueError, match=r"^model.use_dvl=1; expected True or False$"):
        check_bool('model.use_dvl', 1)
    assert check_bool('model.use_dvl', False) is False


# ------------------------------------------------ registered classes built in Python
def test_every_registered_class_checks_its_annotations_at_construction():
    """The runner checks a config's options before it builds anything; a class built in
    Python is held to the same annotations by ``checked_arguments`` on its ``__init__``."""
    from test_config_types import own_options, registered_classes
    unchecked = [name for name, (_, cls) in registered_classes().items()
                 if own_options(cls) and '__init__' in vars(cls)  # not mmengine's own
                 and name not in ('DRN', 'S3D')  # a stand-in; built by a tool, not a config
                 and not getattr(cls.__init__, 'checked_arguments', False)]
    assert not unchecked, unchecked


@pytest.mark.parametrize('options, message', [
    (dict(dropout=1.0), r'^model.dropout=1.0; expected a finite number >= 0 and < 1$'),
    (dict(input_dropout=-0.1), r'^model.input_dropout=-0.1; expected a finite number >= 0'),
    (dict(feature_dim=0), r'^model.feature_dim=0; expected an integer >= 1$'),
    (dict(dvl_layers=True), r'^model.dvl_layers=True; expected an integer >= 1$'),
    (dict(freeze_visual='no'), r"^model.freeze_visual='no'; expected True or False$"),
])
def test_a_planner_built_in_python_is_held_to_its_annotations(options, message):
    """Before: dropout=1.0 built a network whose transformer drops everything, -0.1 failed in
    torch naming no option, feature_dim=0 built a (0 -> E) layer."""
    from vpn_plugin.models import ViterbiPlanNet
    with pytest.raises(ValueError, match=message):
        ViterbiPlanNet(num_actions=5, num_tasks=2, horizon=3,
                       loss_weights=dict(state=0), **options)


def test_a_perturbation_built_in_python_is_held_to_its_annotation():
    from vpn_plugin.models.pkg_builder import DataFraction, EdgeDropout, PKGBuilder
    with pytest.raises(ValueError, match=r'^DataFraction.fraction=0; expected a finite number > 0'):
        DataFraction(0)
    with pytest.raises(ValueError, match=r'^EdgeDropout.fraction=True; expected a finite'):
        EdgeDropout(True)
    with pytest.raises(ValueError, match=r"^model.pkg.count_mode='windows'; expected one of"):
        PKGBuilder(count_mode='windows')
    assert PKGBuilder(perturbations=[EdgeDropout(0.5)]).seed == 0  # an object passes


# ------------------------------------------------ core meanings a kind cannot say
def _chain(num_actions=4):
    generator = torch.Generator().manual_seed(0)
    emissions = torch.randn(2, 3, num_actions, generator=generator).log_softmax(-1)
    transitions = torch.rand(num_actions, num_actions, generator=generator).log_softmax(-1)
    return emissions, transitions


@pytest.mark.parametrize('prior, total', [
    (torch.zeros(4), '4'),  # scores, not log probabilities: N times the mass
    (torch.full((4,), -math.inf), '0'),  # no mass: every chain infeasible
    (torch.tensor([0.5, 0.5, 0.5, 0.5]).log(), '2'),
])
def test_a_prior_that_is_no_distribution_is_refused(prior, total):
    """Before: decoded, with log partitions shifted by log(total) (the transitions' rows were
    held to 1, the prior was not)."""
    from vpn_plugin.core import differentiable_viterbi, viterbi_decode, viterbi_decode_probs
    emissions, transitions = _chain()
    for decode in (differentiable_viterbi, viterbi_decode):
        with pytest.raises(ValueError, match=rf'^log_prior has probabilities summing to {total};'):
            decode(emissions, transitions, prior)
    with pytest.raises(ValueError, match=rf'^prior has probabilities summing to {total};'):
        viterbi_decode_probs(emissions.exp(), transitions.exp(), prior.exp())


def test_a_normalised_prior_still_decodes_as_before():
    from vpn_plugin.core import differentiable_viterbi
    emissions, transitions = _chain()
    prior = torch.tensor([0.7, 0.1, 0.2, 0.0]).log()
    soft, log_z = differentiable_viterbi(emissions, transitions, prior)
    assert torch.allclose(soft.sum(-1), torch.ones(2, 3), atol=1e-5) and log_z.isfinite().all()


def test_a_fraction_of_zero_keeps_no_sequence_rather_than_one():
    """Before: ``subsample_sequences(s, 0.0)`` returned one sequence (its annotation allowed 0,
    its rule kept at least one); DataFraction already refused 0."""
    from vpn_plugin.core import subsample_sequences
    with pytest.raises(ValueError, match=r'fraction=0.0; expected a finite number > 0 and <= 1'):
        subsample_sequences([[0, 1], [1, 2]], 0.0)


def test_compact_plan_net_heads_that_do_not_divide_the_width_are_named():
    """Before: torch's ``AssertionError: embed_dim must be divisible by num_heads`` (no option
    named, and no user error: a traceback in the tools)."""
    from vpn_plugin.models import CompactPlanNet
    with pytest.raises(ValueError, match=r'^model.embed_dim=16 with num_heads=3; expected an '
                                         r'embed_dim divisible by num_heads'):
        CompactPlanNet(feature_dim=8, num_actions=5, num_tasks=2, horizon=3, embed_dim=16,
                       num_heads=3, loss_weights=dict(align=0))


@pytest.mark.parametrize('api', ['plan_from_features', 'inference_planner'])
def test_asking_for_plans_leaves_the_model_in_the_mode_it_had(api):
    """Before: both called ``model.eval()`` and left it so: a planner asked for plans in the
    middle of training (a hook of your own) trained on without dropout."""
    from vpn_plugin.apis import inference_planner, plan_from_features
    from vpn_plugin.models import ViterbiPlanNet
    model = ViterbiPlanNet(num_actions=5, num_tasks=2, horizon=3, feature_dim=8, embed_dim=16,
                           loss_weights=dict(state=0))
    model.log_transitions.copy_(torch.full((5, 5), 0.2).log())
    model.pkg_ready.fill_(True)
    model.train()
    start, goal = torch.randn(2, 8), torch.randn(2, 8)
    if api == 'plan_from_features':
        plans = plan_from_features(model, start, goal)
    else:
        from mmaction.structures import ActionDataSample
        sample = ActionDataSample()
        sample.set_field(torch.tensor([0, 1, 2]), 'gt_plan')
        dataset = [dict(inputs=dict(start=start[0], goal=goal[0]), data_samples=sample)]
        plans = inference_planner(model, dataset, [0])
    assert model.training and len(plans) in (1, 2)


def test_an_empty_list_of_plans_is_called_empty():
    """Before: ``plan_distribution([])`` said 'plans has shape (1, 0)' (the empty list read as
    one plan of length 0)."""
    from vpn_plugin.core import plan_distribution, planning_metrics
    with pytest.raises(ValueError, match=r'^plans is empty; expected plans \(M, T\) with M >= 1'):
        plan_distribution([])
    with pytest.raises(ValueError, match=r'^pred is empty;'):
        planning_metrics([], [])


def test_label_noise_refuses_a_label_outside_its_given_task():
    """Before (meaning5, left silent): with ``tasks`` given, a step its task does not have was
    replaced by one of the task's actions without a word."""
    from vpn_plugin.core import label_noise
    task_actions = [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match=r"label_noise sequence 1 step 2: action 1 is not among "
                                         r"task 1's actions \[2, 3\] \(tasks\[1\]=1\)"):
        label_noise([[0, 1], [2, 3, 1]], 0.5, task_actions, seed=0, tasks=[0, 1])
    assert label_noise([[0, 1], [2, 3]], 0.0, task_actions, tasks=[0, 1]) == [[0, 1], [2, 3]]
