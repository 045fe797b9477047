"""PDPP (Wang et al., CVPR 2023; github MCG-NJU/PDPP), the official method, and its U-Net as
the first/last step model of the PKG beam search.

* ``TaskHead``: the official task classifier (``train_mlp.py`` ``head``), trained FIRST, alone,
  with cross-entropy (``TaskClassifierHook``, ``vpn_plugin/engine``).
* ``PDPPDiffusion`` (MODELS): the temporal U-Net, the cosine schedule, the conditioned x0
  loss (``Weighted_MSE``) and 10-step DDIM sampling (``core.diffusion``), with the task head.
  Training conditions on the ground-truth task, sampling on the head's predicted task.
  ``middle_actions=False`` is the ViterbiPlanNet authors' step model
  (``step_models/Diffusion_based_with_task``): the action dims of the middle steps are zero in
  x0 and weighted 0 in the loss, so only the first and last actions are learnt.
* ``PDPP`` (MODELS): a ``BasePlanner`` around ``PDPPDiffusion``: plan = argmax of the
  sampled x0's action dims (``decode='argmax'``, official) or hard Viterbi through the PKG
  of their log-softmax (``decode='viterbi'``, an option).

The paper counts the U-Net only (41,866,647 at CrossTask N=133, K=18, D=1536); the head
(7,094,290) is ``counted_apart`` (``models.base_planner.num_parameters``).
Shapes: B batch, T horizon, K tasks, N actions, D observation dim, C = K + N + D.
"""
import logging
from typing import Annotated, Dict, Literal, Optional, Sequence

from vpn_plugin.config_types import Count, NonNegative, Range, Seed, checked_arguments
import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from torch import nn

from mmaction.registry import MODELS

from .. import core
from ..core import diffusion
from ..errors import check_number
from .base_planner import (ActionCount, Horizon, MAX_ACTIONS, BasePlanner, num_parameters,
                           task_fields, unread_pkg_note)
from .temporal_unet import GROUPS, MAX_DIM, MAX_FEATURE_DIM, DiffusionModel, TemporalUNet

DECODES = ('argmax', 'viterbi')
SEED_STRIDE = 1_000_003  # per-window noise seed = sampling_seed * stride + window index


class TaskHead(nn.Module):
    """Official ``head``: fc1 D->D//3, fc2 ->4D, ReLU, fc3 ->D//3, ReLU, mean over the start and
    goal, fc4 ->K (no activation after fc1); Kaiming-normal (fan-in) weights, zero biases.
    observations (B, 2, D) -> logits (B, K)."""

    def __init__(self, feature_dim: int, num_tasks: int):
        super().__init__()
        check_number('task classifier feature_dim', feature_dim, integer=True, low=3,
                     high=MAX_FEATURE_DIM)
        check_number('task classifier num_tasks', num_tasks, integer=True, low=1,
                     high=MAX_ACTIONS)
        middle, wide = feature_dim // 3, feature_dim * 4
        self.fc1, self.fc2 = nn.Linear(feature_dim, middle), nn.Linear(middle, wide)
        self.fc3, self.fc4 = nn.Linear(wide, middle), nn.Linear(middle, num_tasks)
        for layer in (self.fc1, self.fc2, self.fc3, self.fc4):
            nn.init.kaiming_normal_(layer.weight, mode='fan_in')
            nn.init.zeros_(layer.bias)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc2(self.fc1(observations)))
        return self.fc4(F.relu(self.fc3(x)).mean(1))


def observation_pair(inputs: Dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, 2, D): the start and goal observations, the task head's input."""
    return torch.stack([inputs['start'], inputs['goal']], 1)


class TaskClassifier(nn.Module):
    """PDPP's task classifier (``TaskHead``) as a stage of another planner (CEFITO): trained
    first by ``TaskClassifierHook`` (``classifier_ready``), then frozen and reused.
    ``task_logits(inputs) -> (B, K)``, ``predict_task(inputs) -> (B,)``,
    ``task_loss(inputs, data_samples) -> ()``."""

    def __init__(self, feature_dim: int, num_tasks: int, owner: str = 'planner'):
        super().__init__()
        self.feature_dim, self.num_tasks, self.owner = feature_dim, num_tasks, owner
        self.task_head = TaskHead(feature_dim, num_tasks)
        self.task_head.requires_grad_(False)
        self.register_buffer('classifier_ready', torch.tensor(False))

    def check_batch(self, inputs, task=None) -> None:
        dim = inputs['start'].shape[-1]
        if dim != self.feature_dim:
            raise ValueError(f'{self.owner}: the observations have {dim} dims but the task '
                             f'classifier was built for feature_dim={self.feature_dim}')
        if task is not None and task.numel() and not (
                0 <= int(task.min()) and int(task.max()) < self.num_tasks):
            raise ValueError(f'{self.owner}: the batch has task ids in [{int(task.min())}, '
                             f'{int(task.max())}] but model.num_tasks={self.num_tasks}')

    def task_loss(self, inputs, data_samples) -> torch.Tensor:
        self.check_batch(inputs, data_samples['task'])
        return F.cross_entropy(self.task_head(observation_pair(inputs)), data_samples['task'])

    def task_logits(self, inputs) -> torch.Tensor:
        """(B, K) the trained head's logits."""
        if not bool(self.classifier_ready):
            raise RuntimeError(
                f'{self.owner}: the task classifier was never trained (classifier_ready is '
                'False); train with the config (its custom_hooks hold TaskClassifierHook) or '
                'load a checkpoint of a trained model')
        self.check_batch(inputs)
        return self.task_head(observation_pair(inputs))

    def predict_task(self, inputs) -> torch.Tensor:
        return self.task_logits(inputs).argmax(-1)


@MODELS.register_module()
class PDPPDiffusion(DiffusionModel):
    """Projected diffusion over plans of horizon T with its task classifier (module docstring).

    Args:
        feature_dim: D. num_actions: N. num_tasks: K. horizon: T (>= 3 = len(dim_mults)).
        dim, dim_mults: the U-Net's widths (official 256, (1, 2, 4)).
        n_timesteps: diffusion steps n (CrossTask/COIN 200, NIV 50; >= 10 for DDIM).
        endpoint_weight: loss weight of the first/last steps' action dims (official 10).
        middle_actions: False = the first/last step model (middle action dims 0, weight 0).
        sampling_seed: x_T of the window with index i is drawn from
            ``torch.Generator().manual_seed(sampling_seed * 1000003 + i)``, so a window's plan
            does not depend on the batch or the number of processes (the official code draws
            from the global stream; batches without indices still do).
    """

    @checked_arguments(prefix='PDPP model.')
    def __init__(self, feature_dim: Annotated[int, Range(1, MAX_FEATURE_DIM)],
                 num_actions: ActionCount, num_tasks: ActionCount, horizon: Horizon,
                 dim: Annotated[int, Range(GROUPS, MAX_DIM)] = 256,
                 dim_mults: Sequence[Count] = (1, 2, 4),
                 n_timesteps: Annotated[int, Range(1, diffusion.MAX_DIFFUSION_STEPS)] = 200,
                 endpoint_weight: NonNegative = 10.0, middle_actions: bool = True,
                 sampling_seed: Seed = 0):
        super().__init__()
        self.check_horizon('PDPP', horizon, dim_mults)
        self.check_inputs('PDPP', feature_dim, sampling_seed)
        self.num_actions, self.num_tasks, self.horizon = num_actions, num_tasks, horizon
        self.feature_dim = feature_dim
        self.endpoint_weight, self.middle_actions = endpoint_weight, middle_actions
        self.sampling_seed = sampling_seed
        self.unet = TemporalUNet(num_tasks + num_actions + feature_dim, dim, tuple(dim_mults))
        self.task_head = TaskHead(feature_dim, num_tasks)
        self.task_head.requires_grad_(False)  # trained before the U-Net (TaskClassifierHook)
        self.register_schedule(n_timesteps)
        self.register_buffer('classifier_ready', torch.tensor(False))

    # ------------------------------------------------------------------ training
    def task_onehot(self, task: torch.Tensor) -> torch.Tensor:
        return F.one_hot(task, self.num_tasks).float()

    def check_batch(self, inputs, plan=None, task=None) -> None:
        """Observations (B, D), plans (B, T) and tasks (B,) must fit the model's D, N, K."""
        dim = inputs['start'].shape[-1]
        if dim != self.feature_dim:
            raise ValueError(f'PDPP: the observations have {dim} dims but model.feature_dim='
                             f'{self.feature_dim}; set it to the dataset\'s (the observation '
                             'recipe decides: authors/concat3/kepp 3 x 512, mean3 512)')
        for name, ids, limit in (('action', plan, self.num_actions),
                                 ('task', task, self.num_tasks)):
            if ids is None or not ids.numel():
                continue
            if not 0 <= int(ids.min()) <= int(ids.max()) < limit:
                raise ValueError(f'PDPP: the batch has {name} ids in [{int(ids.min())}, '
                                 f'{int(ids.max())}] but model.num_{name}s={limit}')

    def project(self, x, task_onehot, inputs) -> torch.Tensor:
        return diffusion.project_conditions(x, task_onehot, inputs['start'], inputs['goal'])

    def target(self, plan: torch.Tensor, task: torch.Tensor, inputs) -> torch.Tensor:
        """x0 (B, T, C) of ground-truth plans (B, T) and tasks (B,)."""
        return diffusion.plan_tensor(plan, self.task_onehot(task), inputs['start'],
                                     inputs['goal'], self.num_actions, self.middle_actions)

    def training_terms(self, x0, t, noise, task, inputs) -> Dict[str, torch.Tensor]:
        """Official ``p_losses`` with given timesteps t (B,) and noise (B, T, C): the noised
        input before and after projection, the U-Net's x0 before and after, and the loss."""
        onehot = self.task_onehot(task)
        x_q_sample = diffusion.q_sample(x0, t, noise, self.schedule())
        x_noisy = self.project(x_q_sample, onehot, inputs)
        x_recon_raw = self.unet(x_noisy, t)
        x_recon = self.project(x_recon_raw, onehot, inputs)
        loss = diffusion.weighted_mse(x_recon, x0, self.num_tasks, self.num_actions,
                                      self.endpoint_weight, float(self.middle_actions))
        return dict(x_q_sample=x_q_sample, x_noisy=x_noisy, x_recon_raw=x_recon_raw,
                    x_recon=x_recon, loss=loss)

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """The diffusion loss at uniform random timesteps, conditioned on the true task."""
        self.check_batch(inputs, data_samples['plan'], data_samples['task'])
        x0 = self.target(data_samples['plan'], data_samples['task'], inputs)
        t = torch.randint(0, len(self.betas), (x0.shape[0],), device=x0.device)
        noise = torch.randn_like(x0)
        return dict(loss_diffusion=self.training_terms(x0, t, noise, data_samples['task'],
                                                       inputs)['loss'])

    def task_loss(self, inputs, data_samples) -> torch.Tensor:
        """Cross-entropy of the task head (its own training stage)."""
        self.check_batch(inputs, task=data_samples['task'])
        return F.cross_entropy(self.task_head(observation_pair(inputs)), data_samples['task'])

    # ------------------------------------------------------------------ sampling
    def task_logits(self, inputs) -> torch.Tensor:
        """(B, K) the head's logits; their argmax is what the sampler is conditioned on."""
        if not bool(self.classifier_ready):
            raise RuntimeError(
                'PDPP: the task classifier was never trained (classifier_ready is False); '
                'train with the config (its custom_hooks hold TaskClassifierHook) or load a '
                'checkpoint of a trained PDPP')
        return self.task_head(observation_pair(inputs))

    def predict_task(self, inputs) -> torch.Tensor:
        """(B,) the head's task, what the sampler is conditioned on."""
        return self.task_logits(inputs).argmax(-1)

    def initial_noise(self, inputs, data_samples) -> torch.Tensor:
        """x_T (B, T, C): per-window seeded when the batch has indices (class docstring)."""
        start = inputs['start']
        shape = (self.horizon, self.num_tasks + self.num_actions + start.shape[-1])
        indices = (data_samples or {}).get('index')
        if indices is None:
            return torch.randn((start.shape[0], *shape), device=start.device)
        draws = [torch.randn(shape, generator=torch.Generator().manual_seed(
            self.sampling_seed * SEED_STRIDE + int(i))) for i in indices]
        return torch.stack(draws).to(start.device)

    def sample(self, x_t, task, inputs, trace: bool = False):
        """DDIM (10 steps, eta 0) from x_T (B, T, C) conditioned on ``task`` (B,):
        (x0 (B, T, C), states, raw U-Net outputs) (``core.diffusion.ddim_sample``)."""
        onehot = self.task_onehot(task)
        return diffusion.ddim_sample(self.unet, x_t, lambda x: self.project(x, onehot, inputs),
                                     self.schedule(), self.ddim_timestep_seq, trace=trace)

    def action_scores(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        """``pred_task`` (B,) with ``pred_task_score`` (B,) and ``action_scores`` (B, T, N):
        the sampled x0's action dims."""
        self.check_batch(inputs)
        tasks = task_fields(self.task_logits(inputs))
        x0, _, _ = self.sample(self.initial_noise(inputs, data_samples), tasks['pred_task'],
                               inputs)
        return dict(**tasks,
                    action_scores=x0[..., self.num_tasks:self.num_tasks + self.num_actions])

    def endpoint_scores(self, inputs, data_samples) -> torch.Tensor:
        """(B, 2, N) scores of the first and last actions (the beam search's step model)."""
        return self.action_scores(inputs, data_samples)['action_scores'][:, [0, -1]]


def warn_unread_pkg(model_cfg: dict) -> None:
    """A WARNING when the PKG options of ``model_cfg`` change nothing in its plans
    (``unread_pkg_note``): a PKG study of such a model measures no effect."""
    note = unread_pkg_note(model_cfg)
    if note:
        print_log(note, logger='current', level=logging.WARNING)


@MODELS.register_module()
class PDPP(BasePlanner):
    """PDPP as a planner (module docstring). Args as ``PDPPDiffusion`` plus ``decode``
    ('argmax': official; 'viterbi': hard Viterbi through the PKG) and ``pkg``."""

    counted_apart = ('diffusion.task_head',)
    training_hooks = ('TaskClassifierHook',)  # its first stage (runner.check_training_hooks)
    # the task classifier (cross-entropy, its own stage) conditions the diffusion
    task_source, task_score, plan_uses_task = 'classifier', 'probability', True

    @checked_arguments(prefix='PDPP model.')
    def __init__(self, feature_dim: Annotated[int, Range(1, MAX_FEATURE_DIM)],
                 num_actions: ActionCount, num_tasks: ActionCount, horizon: Horizon,
                 dim: Annotated[int, Range(GROUPS, MAX_DIM)] = 256,
                 dim_mults: Sequence[Count] = (1, 2, 4),
                 n_timesteps: Annotated[int, Range(1, diffusion.MAX_DIFFUSION_STEPS)] = 200,
                 endpoint_weight: NonNegative = 10.0, sampling_seed: Seed = 0,
                 decode: Literal[DECODES] = 'argmax', pkg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None):
        super().__init__(num_actions, horizon, pkg, data_preprocessor)
        self.decode = decode
        warn_unread_pkg(dict(type=type(self).__name__, decode=decode, pkg=pkg))
        self.diffusion = PDPPDiffusion(feature_dim, num_actions, num_tasks, horizon, dim,
                                       dim_mults, n_timesteps, endpoint_weight,
                                       sampling_seed=sampling_seed)
        # what plan_from_features checks a given task and observations against
        self.num_tasks, self.feature_dim = num_tasks, feature_dim
        print_log(f'PDPP: U-Net {num_parameters(self):,} parameters, task classifier '
                  f'{num_parameters(self.diffusion.task_head):,} (counted apart) '
                  f'(N={num_actions}, K={num_tasks}, D={feature_dim}, T={horizon}, '
                  f'n={n_timesteps})', logger='current')

    @classmethod
    def plans_read_pkg(cls, model_cfg: dict) -> bool:
        return model_cfg.get('decode', 'argmax') != 'argmax'

    @staticmethod
    def options_shown_by(state_dict: dict) -> dict:
        """{option: (value, what shows it)} of the options a checkpoint's weights fix
        (``engine.checkpoint.check_test_options`` sets them against its ``meta['cfg']``)."""
        shown = DiffusionModel.steps_shown_by(state_dict, 'diffusion.')
        return {'n_timesteps': shown['n']} if shown else {}

    def loss(self, inputs, data_samples) -> Dict[str, torch.Tensor]:
        return self.diffusion.loss(inputs, data_samples)

    def tensor(self, inputs, horizon: int, data_samples=None) -> torch.Tensor:
        """Action scores (B, T, N) of the sampled plans."""
        return self.diffusion.action_scores(inputs, data_samples)['action_scores']

    def predict_fields(self, inputs, data_samples, horizon: int) -> dict:
        fields = self.diffusion.action_scores(inputs, data_samples)
        scores = fields['action_scores']
        if self.decode == 'argmax':
            plan = scores.argmax(-1)
        else:
            plan, _ = core.viterbi_decode(scores.log_softmax(-1), self.log_transitions)
        return dict(pred_plan=plan, **fields)
