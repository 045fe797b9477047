"""The ``PDPP`` checker of ``oracles.compare``: a fixture of the official PDPP code
(``../shared/reference/pdpp_small_t3``, README "Reference outputs of PDPP") recomputed with
this plugin's classes built from its configs at the fixture's sizes.

Every recorded array is recomputed: the schedule buffers (for every n recorded), one training
step with the injected timesteps and noise (U-Net gradients), 10-step DDIM from the injected
x_T, the task classifier's logits, loss and gradients, the LR multipliers (the config's
scheduler) and one EMA update (the config's EMA settings, mmengine's averaged model).

The rules are ``oracles.compare``'s. The reduced U-Net (dim 32: GroupNorm with one channel per
group over T=3 steps) is ill-conditioned, so float32 round-off depends on the thread count:
the training step's arrays and gradients get the tolerance of their measured conditioning
(the injected noise, start and goal perturbed by 1e-6; ``x_recon_raw`` moves 5e-4 to 8e-4,
hence a tolerance near 3e-3), gradients are compared at the model's largest gradient, and the
DDIM chain step by step (``compare_chain``: its free-running final state amplifies a 1e-6
perturbation of x_T 4e4-fold and is reported only; ``ddim_actions`` judged where the recorded
margin allows).
Header: parameter counts at the fixture's and at every full size of its meta.json (models
built on the meta device, nothing run), and the fixed settings (10 DDIM steps, eta 0).
"""
from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import torch

from ..core import diffusion
from .compare import (GRAD_TOLERANCE, OUTPUT_TOLERANCE, Row, build_registered, check_float_weight, check_ids,
                      check_fixture_state_dict, check_shapes, compare,
                      compare_argmax, compare_chain, compare_file, compare_grads, grad_summary,
                      perturbed_runs, read_npz, report_parameter_counts, report_settings,
                      replayed_header, require_meta_fields, set_fixture_sizes, within)
from ..models.pdpp import observation_pair
from ..models.temporal_unet import from_official, official_name

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'configs/_base_/planners/pdpp_crosstask.py'
# recorded arrays of the DDIM chain, compared by ``compare_chain`` (never as whole arrays)
CHAIN_ARRAYS = ('ddim_states', 'ddim_x_recon_raw', 'ddim_final', 'ddim_actions')
META_FIELDS = ('num_actions', 'num_tasks', 'horizon', 'observation_dim', 'batch', 'n_timesteps',
               'ddim_timesteps', 'eta', 'num_parameters_unet', 'num_parameters_head',
               'constructor')


def read_meta(fixture: Path, meta: dict) -> dict:
    return require_meta_fields(fixture, meta, META_FIELDS, 'PDPP', META_FIELDS[:7])


def unet_widths(meta: dict) -> dict:
    """``dim`` and ``dim_mults`` of the fixture's ``TemporalUnet(...)`` constructor call."""
    call = meta['constructor'].get('temporal_unet', '')
    dim = re.search(r'\bdim=(\d+)', call)
    mults = re.search(r'dim_mults=\(([\d,\s]+)\)', call)
    if not (dim and mults):
        raise ValueError(f'meta.json constructor.temporal_unet={call!r}; expected '
                         '"TemporalUnet(..., dim=<int>, dim_mults=(<ints>))"')
    return dict(dim=int(dim.group(1)), dim_mults=tuple(int(m) for m in mults.group(1).split(',')
                                                       if m.strip()))


def load_cfg():
    """The PDPP config (model, scheduler, hooks; its data paths are not needed here)."""
    from mmengine.config import Config
    return Config.fromfile(str(CONFIG))


def model_config(cfg, meta: dict, widths: dict):
    """The config's PDPP model with the fixture's sizes (each change printed)."""
    model = copy.deepcopy(cfg.model)
    sizes = dict(num_actions=meta['num_actions'], num_tasks=meta['num_tasks'],
                 horizon=meta['horizon'], feature_dim=meta['observation_dim'],
                 n_timesteps=meta['n_timesteps'], **widths)
    set_fixture_sizes(model, sizes)
    return model


def build_pdpp(model_cfg, device=None):
    return build_registered(model_cfg, device)


def parameter_counts(model) -> Tuple[int, int]:
    """(U-Net, task classifier) parameters; the U-Net count is ``num_parameters``."""
    from ..models.base_planner import num_parameters
    return num_parameters(model), num_parameters(model.diffusion.task_head)


def check_counts(model_cfg, meta: dict, model) -> bool:
    """The fixture's counts and each of ``full_size_parameter_counts`` (built, not run)."""
    cases = [('fixture', parameter_counts(model),
              (meta['num_parameters_unet'], meta['num_parameters_head']))]
    for name, full in meta.get('full_size_parameter_counts', {}).items():
        cfg = dict(model_cfg, num_actions=full['num_actions'], num_tasks=full['num_tasks'],
                   feature_dim=full['observation_dim'], dim=full['temporal_unet_dim'],
                   dim_mults=tuple(full['dim_mults']))
        cases.append((name, parameter_counts(build_pdpp(cfg, 'meta')),
                      (full['unet_parameters'], full['head_parameters'])))
    return report_parameter_counts(cases, ('U-Net', 'task classifier'))


def check_settings(cfg, meta: dict) -> bool:
    """What the plugin fixes: 10 DDIM steps, eta 0, Weighted_MSE, uniform DDIM steps, the
    EMA decay."""
    call = meta['constructor'].get('gaussian_diffusion', '')
    checks = {
        f'ddim_timesteps={meta["ddim_timesteps"]} (plugin {diffusion.DDIM_STEPS})':
            meta['ddim_timesteps'] == diffusion.DDIM_STEPS,
        f'eta={meta["eta"]} (plugin 0)': meta['eta'] == 0,
        'loss Weighted_MSE': "loss_type='Weighted_MSE'" in call or 'loss_type' not in call,
        'uniform DDIM steps': 'ddim_discr_method' not in call or "'uniform'" in call}
    report_ema_decay(cfg, meta)
    return report_settings(checks)


def ema_decay(cfg, meta: dict) -> float:
    """The EMA decay the fixture recorded its update with (meta ``ema.beta``), else the
    config's: the recomputation checks the EMA update, at the fixture's setting."""
    beta = meta.get('ema', {}).get('beta')
    return float(beta) if beta is not None else ema_hook(cfg)['decay']


def report_ema_decay(cfg, meta: dict) -> None:
    """A line saying the EMA decay the update is recomputed with and the config's (a fixture
    recorded at another decay than the official default is not a wrong config)."""
    config = ema_hook(cfg)['decay']
    fixture = ema_decay(cfg, meta)
    print(f'setting EMA decay: recomputed at the fixture\'s {fixture} (config {config}'
          f'{"" if abs(config - fixture) < 1e-12 else ": another setting, not judged"})')


def ema_hook(cfg) -> dict:
    hooks = [h for h in cfg.custom_hooks if h['type'] == 'PDPPEMAHook']
    if len(hooks) != 1:
        raise ValueError(f'{cfg.filename}: expected one PDPPEMAHook in custom_hooks; got '
                         f'{hooks}')
    return dict(dict(decay=0.995, start_step=400, interval=10), **hooks[0])


# ---------------------------------------------------------------------- recomputation
def install_weights(model, fixture: Path) -> None:
    """The official U-Net (``model.*`` of state_dict.npz) and head weights, float32."""
    install_unet(model.diffusion.unet, fixture / 'state_dict.npz')
    head = read_npz(fixture / 'head_state_dict.npz')
    check_fixture_state_dict(fixture / 'head_state_dict.npz', head, model.diffusion.task_head)
    model.diffusion.task_head.load_state_dict(
        {k: torch.from_numpy(v.astype(np.float32)) for k, v in head.items()})


def install_unet(unet, path: Path) -> None:
    """The official U-Net weights (``model.*`` of a ``GaussianDiffusion.state_dict()`` file,
    float16 or float32) into a ``TemporalUNet``, as float32; every name and shape checked
    (``temporal_unet.from_official``)."""
    shapes = {name: tuple(parameter.shape) for name, parameter in unet.named_parameters()}
    official = from_official(shapes, read_npz(path), str(path))
    for name, value in official.items():
        check_float_weight(path, 'model.' + official_name(name), value)
    unet.load_state_dict({name: torch.from_numpy(value.astype(np.float32))
                          for name, value in official.items()})


def buffer_rows(path: Path, module) -> List[Row]:
    """The official state dict's buffers (every entry not under ``model.``: the schedule's
    ``betas``, ``alphas_cumprod``, ...) against the ones ``module`` computed from the
    fixture's ``n_timesteps``: a state dict whose buffers disagree with its recorded
    computation fails even though only the U-Net weights are loaded from it, and so does one
    that lacks a buffer the official model registers (a removed ``betas`` would pass unseen)."""
    recorded = [name for name in read_npz(path) if not name.startswith('model.')]
    ours = to_numpy(module.schedule())
    names = recorded + [name for name in ours if name not in recorded]
    return compare_file(path, ours, OUTPUT_TOLERANCE, names=names)


def check_header(fixture: Path, meta: dict, inputs: dict) -> None:
    """meta.json's sizes (B, T, K, N, D) agree with the recorded inputs: an edited header
    (horizon=4 over T=3 arrays) is refused, never checked at sizes the arrays do not have."""
    b, t, d = meta['batch'], meta['horizon'], meta['observation_dim']
    width = meta['num_tasks'] + meta['num_actions'] + d
    expected = dict(actions=(b, t), tasks=(b,), t=(b,), noise=(b, t, width), x_T=(b, t, width),
                    observations=(b, 2, d), global_img_tensors=(b, t + 1, d))
    check_shapes(fixture / 'inputs.npz', inputs, expected,
                 f'batch={b}, horizon={t}, num_tasks={meta["num_tasks"]}, '
                 f'num_actions={meta["num_actions"]}, observation_dim={d}')
    check_ids(fixture / 'inputs.npz', inputs, dict(actions=meta['num_actions'],
                                                   tasks=meta['num_tasks'],
                                                   task_sample=meta['num_tasks'],
                                                   t=meta['n_timesteps']))


def batch_inputs(fixture: Path, inputs: dict) -> Dict[str, torch.Tensor]:
    """{'start', 'goal'} (B, D): the loader's first and last observations (which must be the
    head's ``observations``)."""
    loaded = inputs['global_img_tensors']
    if not np.array_equal(loaded[:, [0, -1]], inputs['observations']):
        raise ValueError(f'{fixture / "inputs.npz"}: observations are not '
                         'global_img_tensors[:, [0, -1]] (start, goal)')
    observations = torch.from_numpy(loaded).float()
    return dict(start=observations[:, 0], goal=observations[:, -1])


def training_outputs(module, actions, tasks, t, noise, start, goal) -> Tuple[dict, dict]:
    """The training step's arrays and the U-Net gradient summaries (official names), from the
    injected inputs (tensors; ``noise``, ``start``, ``goal`` are what a conditioning
    measurement perturbs)."""
    module.train()
    module.zero_grad()
    batch = dict(start=start, goal=goal)
    x0 = module.target(actions, tasks, batch)
    terms = module.training_terms(x0, t, noise, tasks, batch)
    terms['loss'].backward()
    outputs = dict(terms, x_start=x0,
                   cond_task=module.task_onehot(tasks)[:, None].expand(-1, x0.shape[1], -1))
    grads = {'model.' + official_name(n): grad_summary(p.grad)
             for n, p in module.unet.named_parameters()}
    return to_numpy(outputs), grads


def training_rows(fixture: Path, module, inputs: dict, batch) -> List[Row]:
    """Rows of the training step's arrays and gradients, each with the tolerance of its
    measured conditioning (``oracles.compare``: the injected noise, start and goal
    perturbed)."""
    injected = dict(actions=torch.from_numpy(inputs['actions']),
                    tasks=torch.from_numpy(inputs['tasks']), t=torch.from_numpy(inputs['t']),
                    noise=torch.from_numpy(inputs['noise']), **batch)
    run = lambda **values: training_outputs(module, **values)  # noqa: E731
    outputs, grads = run(**injected)
    perturbed = perturbed_runs(run, injected)
    what = 'the injected noise, start and goal'
    return (compare_file(fixture / 'outputs.npz', outputs, OUTPUT_TOLERANCE, names=list(outputs),
                         perturbed=[o for o, _ in perturbed], perturbed_what=what)
            + compare_grads(fixture / 'grads.npz', grads, GRAD_TOLERANCE,
                            perturbed=[g for _, g in perturbed], perturbed_what=what))


def sampling_rows(fixture: Path, module, inputs: dict, batch, recorded: dict) -> List[Row]:
    """DDIM from the injected x_T conditioned on the injected task: its projection, its
    timesteps and task, and the chain step by step (``compare_chain``; ``ddim_actions``
    judged where the recorded margin allows)."""
    module.eval()
    task = torch.from_numpy(inputs['task_sample'])
    onehot = module.task_onehot(task)
    steps, sequence = diffusion.DDIM_STEPS, module.ddim_timestep_seq
    actions = slice(module.num_tasks, module.num_tasks + module.num_actions)

    def project(x):
        return module.project(x, onehot, batch)

    def step(i, state):  # step i of the chain is DDIM index steps-1-i
        return diffusion.ddim_step(module.unet, state, steps - 1 - i, project, module.schedule(),
                                   sequence)

    with torch.no_grad():
        start = project(torch.from_numpy(inputs['x_T']))
    outputs = dict(ddim_t=sequence[:steps][::-1].copy(),
                   ddim_cond_task=onehot[:, None].expand(-1, start.shape[1], -1).numpy())
    diff, rel = compare(recorded['ddim_states'][0], start.numpy())
    same = np.array_equal(recorded['ddim_final'], recorded['ddim_states'][-1])
    return ([('outputs.npz:ddim_states[0]=project(x_T)', diff, rel, OUTPUT_TOLERANCE,
              within(rel, OUTPUT_TOLERANCE)),
             ('outputs.npz:ddim_final(recorded=ddim_states[-1])', 0.0 if same else math.inf,
              0.0 if same else math.inf, 0.0, same)]
            + compare_file(fixture / 'outputs.npz', outputs, OUTPUT_TOLERANCE,
                           names=list(outputs))
            + compare_chain('outputs.npz', recorded['ddim_states'], recorded['ddim_x_recon_raw'],
                            step, OUTPUT_TOLERANCE,
                            names=('ddim_x_recon_raw', 'ddim_states', 'ddim_final'),
                            argmax=('ddim_actions', recorded['ddim_actions'],
                                    lambda state: state[..., actions])))


def head_outputs(module, tasks, start, goal) -> Tuple[dict, dict]:
    """The task classifier's logits, loss (its training loss) and gradients."""
    head = module.task_head
    head.requires_grad_(True)
    head.zero_grad()
    batch = dict(start=start, goal=goal)
    logits = head(observation_pair(batch))
    loss = module.task_loss(batch, dict(task=tasks))
    loss.backward()
    grads = {n: grad_summary(p.grad) for n, p in head.named_parameters()}
    head.requires_grad_(False)
    return to_numpy(dict(head_logits=logits, head_loss=loss)), grads


def head_rows(fixture: Path, module, inputs: dict, batch, recorded: dict) -> List[Row]:
    """The head's logits, loss and gradients (measured conditioning: start and goal
    perturbed) and its prediction (judged where the recorded logit margin allows)."""
    injected = dict(tasks=torch.from_numpy(inputs['tasks']), **batch)
    run = lambda **values: head_outputs(module, **values)  # noqa: E731
    outputs, grads = run(**injected)
    perturbed = perturbed_runs(run, injected)
    rows = (compare_file(fixture / 'outputs.npz', outputs, OUTPUT_TOLERANCE, names=list(outputs),
                         perturbed=[o for o, _ in perturbed], perturbed_what='start and goal')
            + compare_grads(fixture / 'head_grads.npz', grads, GRAD_TOLERANCE,
                            perturbed=[g for _, g in perturbed], perturbed_what='start and goal'))
    logits_row = next(row for row in rows if row[0].startswith('outputs.npz:head_logits'))
    error = logits_row[3] * float(np.abs(recorded['head_logits']).max())
    return rows + [compare_argmax('outputs.npz:head_pred', recorded['head_logits'],
                                  recorded['head_pred'], outputs['head_logits'], error)]


def schedule_outputs(recorded: List[str], meta: dict) -> dict:
    """``sched[n]_<buffer>`` and ``ddim_timestep_seq[_n]`` for every n recorded."""
    outputs = {}
    sizes = {int(m.group(1)) for k in recorded
             for m in [re.match(r'(?:sched|ddim_timestep_seq_)(\d+)', k)] if m}
    for n in sizes | {None}:
        steps = meta['n_timesteps'] if n is None else n
        suffix = '' if n is None else str(n)
        for name, value in diffusion.diffusion_schedule(steps).items():
            outputs[f'sched{suffix}_{name}'] = value
        outputs['ddim_timestep_seq' + ('' if n is None else f'_{n}')] = \
            diffusion.ddim_timesteps(steps)
    return outputs


def lr_outputs(cfg, recorded: Dict[str, np.ndarray]) -> dict:
    """``lr_multipliers_<S>``: the config's scheduler stepped as in training, base lr 1, with
    S total steps, for as many steps as recorded."""
    from mmaction.registry import PARAM_SCHEDULERS
    outputs = {}
    for key, reference in recorded.items():
        match = re.fullmatch(r'lr_multipliers_(\d+)', key)
        if not match:
            continue
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        scheduler_cfg = {k: v for k, v in cfg.param_scheduler[0].items()
                         if k not in ('convert_to_iter_based', 'end')}
        scheduler = PARAM_SCHEDULERS.build(dict(scheduler_cfg, by_epoch=False,
                                                total_steps=int(match.group(1))),
                                           default_args=dict(optimizer=optimizer))
        values = []
        for _ in range(len(reference)):
            values.append(optimizer.param_groups[0]['lr'])
            optimizer.step()
            scheduler.step()
        outputs[key] = np.asarray(values)
    return outputs


def ema_outputs(cfg, meta: dict, module, inputs: dict) -> dict:
    """One official EMA update of ``ema_old.*`` toward the head (mmengine's averaged model
    at the fixture's decay, ``ema_decay``; the update of a step past the start, not the first
    copy)."""
    from mmaction.registry import MODELS
    settings = ema_hook(cfg)
    old = copy.deepcopy(module.task_head)
    old.load_state_dict({k[len('ema_old.'):]: torch.from_numpy(v) for k, v in inputs.items()
                         if k.startswith('ema_old.')})
    ema = MODELS.build(dict(type='ExponentialMovingAverage', momentum=1 - ema_decay(cfg, meta),
                            interval=settings['interval']), default_args=dict(model=old))
    ema.steps.fill_(settings['interval'])
    ema.update_parameters(module.task_head)
    return {'ema_new.' + n: p for n, p in ema.module.named_parameters()}


def to_numpy(values: dict) -> dict:
    return {k: v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v)
            for k, v in values.items()}


def check_fixture(fixture, meta: dict):
    """(rows, header ok) for a PDPP fixture (``oracles.compare`` checker)."""
    fixture = Path(fixture)
    meta = read_meta(fixture, meta)
    inputs = read_npz(fixture / 'inputs.npz')
    check_header(fixture, meta, inputs)  # before anything is built at the header's sizes
    print(f'fixture {fixture}: PDPP N={meta["num_actions"]} K={meta["num_tasks"]} '
          f'T={meta["horizon"]} D={meta["observation_dim"]} n={meta["n_timesteps"]} '
          f'B={meta["batch"]}')
    cfg = load_cfg()
    print(f'config: {CONFIG.relative_to(REPO)} (type={cfg.model.type})')
    model_cfg = model_config(cfg, meta, unet_widths(meta))
    model = build_pdpp(model_cfg)
    header_ok = replayed_header() or (check_counts(model_cfg, meta, model)
                                      & check_settings(cfg, meta))
    install_weights(model, fixture)
    recorded = read_npz(fixture / 'outputs.npz')
    batch = batch_inputs(fixture, inputs)
    module = model.diffusion
    rows = buffer_rows(fixture / 'state_dict.npz', module)
    rows += training_rows(fixture, module, inputs, batch)
    rows += head_rows(fixture, module, inputs, batch, recorded)
    rows += sampling_rows(fixture, module, inputs, batch, recorded)
    outputs = dict(**schedule_outputs(list(recorded), meta), **lr_outputs(cfg, recorded),
                   **ema_outputs(cfg, meta, module, inputs))
    compared = {row_array(row[0]) for row in rows if row[0].startswith('outputs.npz:')}
    rest = [name for name in recorded if name not in compared] + list(outputs)
    rows += compare_file(fixture / 'outputs.npz', to_numpy(outputs), OUTPUT_TOLERANCE,
                         names=sorted(set(rest) - set(CHAIN_ARRAYS)))
    return rows, header_ok


def row_array(label: str) -> str:
    """The recorded array a row of ``outputs.npz`` names (``outputs.npz:ddim_states[...]``)."""
    return label.split(':', 1)[-1].split('[')[0].split(' ')[0]
