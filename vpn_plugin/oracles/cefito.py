"""The ``CEFITO`` checker of ``oracles.compare``: a fixture of the official CEFITO code
(``../shared/reference/cefito_small_t3``, README "Reference outputs of CEFITO") recomputed
with this plugin's ``CEFITO`` built from its config at the fixture's sizes.

Recomputed: the predictor probe (every intermediate), the loss with the injected negatives
(and the negatives redrawn from ``negatives_seed`` with ``negative_rng='global'``), the
50-negative sampler and the margin probes, the gradients of the total loss and of each term,
the task classifier (layers, loss, gradients, top-1/top-3), the search (every energy of
A(c^)^T with the prefix tree and with chunked full sequences, the official top-k at both chunk
sizes, the synthetic-energy searches with and without ties), the metrics, one training step
(AdamW + EMA) and the loader's window rule (``datasets.observations``). Sizes come from
meta.json and the arrays, never from this fixture's values.

Plans that may contain exact ties are compared through the recorded energy table: a plan
differing from the recorded one only among exactly tied sequences has difference 0.
"""
from __future__ import annotations

import copy
import itertools
import math
import random
import re
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..core import energy_field, energy_search, metrics, negatives
from ..datasets import observations
from ..engine.cefito_training import ema_update
from ..errors import read_json
from ..models.pdpp import observation_pair
from . import compare as cmp, optimiser_step
from .compare import (GRAD_TOLERANCE, OUTPUT_TOLERANCE, build_registered, check_ids,
                      compare_file, compare_grads, read_npz, report_parameter_counts,
                      require_meta_fields, set_fixture_sizes)

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'configs/baselines/cefito_crosstask_t3.py'
META_FIELDS = ('num_actions', 'num_tasks', 'horizon', 'observation_dim', 'hidden_dim',
               'num_heads', 'depth', 'task_to_actions', 'constructor', 'top_k', 'small_chunk')
OWN_ROWS = ('search_all_', 'decode_probe')  # arrays checked by their own rows
CONSTRUCTOR_KEYS = ('mlp_ratio', 'num_negatives', 'hard_negative_ratio', 'min_margin',
                    'max_margin', 'aux_weight', 'permutation_negative_ratio',
                    'margin_order_weight')


def read_meta(fixture: Path, meta: dict) -> dict:
    return require_meta_fields(fixture, meta, META_FIELDS, 'CEFITO', META_FIELDS[:7])


def constructor_values(meta: dict) -> dict:
    """The keyword values of meta's ``CEFITO(...)`` call that are numbers or booleans."""
    call = meta['constructor']['cefito']
    values = {}
    for key in CONSTRUCTOR_KEYS + ('causal_attention',):
        match = re.search(rf'\b{key}=([\w.+-]+)', call)
        if match:
            text = match.group(1)
            values[key] = text == 'True' if text in ('True', 'False') else float(text)
    return values


def task_lists(meta: dict) -> Dict[int, tuple]:
    return {int(task): tuple(int(a) for a in actions) for task, actions in meta['task_to_actions']}


def model_config(meta: dict, embeddings: np.ndarray):
    """The config's CEFITO with the fixture's sizes and loss recipe (each change printed)."""
    from mmengine.config import Config
    cfg = Config.fromfile(str(CONFIG))
    model = copy.deepcopy(cfg.model)
    call = constructor_values(meta)
    sizes = dict(num_actions=meta['num_actions'], num_tasks=meta['num_tasks'],
                 horizon=meta['horizon'], feature_dim=meta['observation_dim'],
                 hidden_dim=meta['hidden_dim'], num_heads=meta['num_heads'],
                 depth=meta['depth'], text_dim=int(embeddings.shape[1]),
                 causal=call.pop('causal_attention', True),
                 **{k: (int(v) if k == 'num_negatives' else v) for k, v in call.items()})
    set_fixture_sizes(model, sizes)
    model.update(taxonomy=task_lists(meta), text_embeddings=None)
    return model


def build(model_cfg, embeddings=None, device=None):
    args = {} if embeddings is None else dict(action_embeddings=torch.as_tensor(embeddings))
    return build_registered(model_cfg, device, **args)


def check_counts(model_cfg, meta: dict, model) -> bool:
    """The fixture's counts and every ``full_size`` entry (built on the meta device)."""
    from ..models.base_planner import num_parameters

    def counts(built):
        return num_parameters(built), num_parameters(built.classifier)

    cases = [('fixture', counts(model), (meta.get('num_parameters_cefito'),
                                         meta.get('num_parameters_task_classifier')))]
    for name, full in meta.get('full_size', {}).items():
        full = dict(dict(hidden_dim=384, depth=4, num_heads=6, mlp_ratio=4.0, text_dim=512),
                    **full)
        cfg = dict(model_cfg, num_actions=full['num_actions'], num_tasks=full['num_tasks'],
                   feature_dim=full['observation_dim'], hidden_dim=full['hidden_dim'],
                   depth=full['depth'], num_heads=full['num_heads'],
                   mlp_ratio=full['mlp_ratio'], text_dim=full['text_dim'],
                   taxonomy={t: (0,) for t in range(full['num_tasks'])})
        built = build(cfg, torch.zeros(full['num_actions'], full['text_dim']), 'meta')
        cases.append((name, counts(built),
                      (full['cefito_parameters'], full['task_classifier_parameters'])))
    return report_parameter_counts(cases, ('CEFITO', 'task classifier'))


def install_weights(model, fixture: Path) -> None:
    """The official state dict (``field.`` prefix here) and the classifier's, float32."""
    official = read_npz(fixture / 'state_dict.npz')
    field = model.field
    cmp.check_fixture_state_dict(fixture / 'state_dict.npz', official, field)
    field.load_state_dict({k: torch.from_numpy(v.astype(np.float32)) for k, v in official.items()})
    head = read_npz(fixture / 'head_state_dict.npz')
    cmp.check_fixture_state_dict(fixture / 'head_state_dict.npz', head,
                                 model.classifier.task_head)
    model.classifier.task_head.load_state_dict(
        {k: torch.from_numpy(v.astype(np.float32)) for k, v in head.items()})
    model.classifier.classifier_ready.fill_(True)


# ---------------------------------------------------------------------- recomputation
def tensors(inputs: dict, *names):
    return [torch.from_numpy(np.asarray(inputs[n])) for n in names]


def predictor_outputs(model, inputs: dict) -> dict:
    field = model.field
    start, goal, actions = tensors(inputs, 'initial_state', 'goal_state', 'actions')
    norm_start = energy_field.normalize_observation(start)
    norm_goal = energy_field.normalize_observation(goal)
    trace: dict = {}
    with torch.no_grad():
        predicted = field.predict(norm_start, actions, trace)
        recon: dict = {}
        logits = field.recon_logits(norm_start, predicted['latents'], recon)
    return dict(norm_initial=norm_start, norm_goal=norm_goal, pos_embed=field.predictor.pos_embed,
                probe_action_tokens=trace['action_tokens'], probe_tokens_in=trace['tokens_in'],
                probe_block_out=trace['block_out'], probe_latents=predicted['latents'],
                probe_predicted_goal=predicted['predicted_goal'],
                probe_energy=energy_field.energy(predicted['predicted_goal'], norm_goal),
                probe_recon_tokens_in=recon['recon_tokens_in'],
                probe_recon_block_out=recon['recon_block_out'], probe_recon_logits=logits)


def loss_outputs(model, inputs: dict, negative_plans: torch.Tensor, backward=None):
    """The loss with the given negatives; ``backward``: the term(s) to backpropagate, whose
    gradient summaries are returned."""
    start, goal, actions = tensors(inputs, 'initial_state', 'goal_state', 'actions')
    model.zero_grad()
    terms = model.loss_terms(start, goal, actions, negative_plans)
    grads = {}
    if backward is not None:
        terms[backward].backward()
        grads = {k[len('field.'):]: cmp.grad_summary(p.grad)
                 for k, p in model.named_parameters()
                 if k.startswith('field.') and p.grad is not None}
    batch = len(actions)
    out = dict(candidates=terms['candidates'], loss_action_tokens=terms['action_tokens'],
               loss_predicted_goal=terms['predicted_goal'],
               loss_state_latents=terms['latents'], loss_recon_logits=terms['recon_logits'],
               loss_distances=terms['distances'], loss_margins=terms['margins'],
               loss_triplet=terms['triplet'], loss_num_active=terms['num_active'],
               loss_aux_ce=terms['ce'], loss_aux_per_sequence=terms['ce'].mean((0, 2)),
               loss_contrastive=terms['contrastive'], loss_auxiliary=terms['auxiliary'],
               loss_total=terms['total'])
    assert out['loss_aux_ce'].shape[0] == batch
    return {k: v.detach() for k, v in out.items()}, grads


def redrawn_negatives(model, inputs: dict) -> torch.Tensor:
    """The negatives the official sampler draws after ``random.seed(negatives_seed)``."""
    state = random.getstate()
    try:
        random.seed(int(inputs['negatives_seed']))
        drawn = negatives.sample_negatives(
            inputs['actions'].tolist(), inputs['tasks'].tolist(), model.task_to_actions,
            inputs['negatives'].shape[1], model.hard_negative_ratio,
            model.permutation_negative_ratio, negatives.global_stream())
    finally:
        random.setstate(state)
    return torch.tensor(drawn)


def sampler_outputs(model, inputs: dict, recorded: dict) -> dict:
    count = recorded['sampler50_negatives'].shape[1]
    drawn = torch.tensor(negatives.sample_negatives(
        inputs['actions'].tolist(), inputs['tasks'].tolist(), model.task_to_actions, count,
        model.hard_negative_ratio, model.permutation_negative_ratio,
        random.Random(int(inputs['sampler50_seed']))))
    actions = torch.from_numpy(inputs['actions'])
    positives, probes = tensors(inputs, 'margin_probe_positives', 'margin_probe_negatives')
    margins = {name: energy_field.adaptive_margins(positives, probes, model.min_margin,
                                                   model.max_margin, weight)
               for name, weight in margin_probe_weights(recorded).items()}
    return dict(sampler50_negatives=drawn,
                sampler50_margins=energy_field.adaptive_margins(
                    actions, drawn, model.min_margin, model.max_margin,
                    model.margin_order_weight), **margins)


def margin_probe_weight(name: str) -> float:
    """The ``margin_order_weight`` a probe's name records: ``margin_probe_w<digits>``, the
    first digit the units and the rest the decimals (``w0`` 0, ``w07`` 0.7, ``w1`` 1.0,
    ``w035`` 0.35), as the README documents ``margin_probe_w0`` and ``margin_probe_w07``;
    never the model's own weight (the probes are computed at their own)."""
    match = re.fullmatch(r'margin_probe_w(\d)(\d*)', name)
    if not match:
        raise ValueError(f'outputs.npz: {name}: expected margin_probe_w<digits> (e.g. '
                         'margin_probe_w07 = adaptive_margins at margin_order_weight 0.7)')
    return float(f'{match.group(1)}.{match.group(2) or 0}')


def margin_probe_weights(recorded: dict) -> Dict[str, float]:
    """{recorded ``margin_probe_w*`` array: its margin_order_weight}."""
    return {name: margin_probe_weight(name) for name in recorded
            if name.startswith('margin_probe_w')}


def classifier_outputs(model, inputs: dict) -> Tuple[dict, dict]:
    head = model.classifier.task_head
    states = torch.from_numpy(inputs['states'])
    batch = dict(start=states[:, 0], goal=states[:, -1])
    pair = observation_pair(batch)
    head.requires_grad_(True)
    head.zero_grad()
    fc1 = head.fc1(pair)
    fc2 = head.fc2(fc1)
    fc3 = head.fc3(F.relu(fc2))
    logits = head(pair)
    tasks = torch.from_numpy(inputs['tasks'])
    loss = model.classifier.task_loss(batch, dict(task=tasks))
    loss.backward()
    grads = {n: cmp.grad_summary(p.grad) for n, p in head.named_parameters()}
    head.requires_grad_(False)
    ranked = logits.topk(min(3, logits.shape[1]), 1).indices
    out = dict(head_observations=pair, head_fc1=fc1, head_fc2=fc2, head_fc3=fc3,
               head_logits=logits, head_loss=loss, head_pred=logits.argmax(-1),
               head_top1=100.0 * (logits.argmax(-1) == tasks).double().mean(),
               head_top3=100.0 * (ranked == tasks[:, None]).any(1).double().mean())
    return {k: v.detach() for k, v in out.items()}, grads


def energy_tables(model, inputs: dict, scorer: str) -> Dict[int, torch.Tensor]:
    """Per sample: the energies (|A(c^)|^T,) of every sequence, in enumeration order."""
    start, goal, tasks = tensors(inputs, 'initial_state', 'goal_state', 'search_tasks')
    start = energy_field.normalize_observation(start)
    goal = energy_field.normalize_observation(goal)
    tables = {}
    with torch.no_grad():
        for b in range(len(tasks)):
            actions = torch.tensor(model.task_to_actions[int(tasks[b])])
            tables[b] = energy_search.energy_table(model.field, start[b:b + 1], goal[b:b + 1],
                                                   actions, model.horizon, scorer)[0]
    return tables


def official_search(model, inputs: dict, chunk_size: int, top_k: int):
    """``plan`` as the official code runs it: full sequences, no merging of same-embedding
    actions, torch.topk per chunk; also the rows of every energy call."""
    start, goal, tasks = tensors(inputs, 'initial_state', 'goal_state', 'search_tasks')
    start = energy_field.normalize_observation(start)
    goal = energy_field.normalize_observation(goal)
    plans = torch.zeros(len(tasks), top_k, model.horizon, dtype=torch.long)
    energies = torch.zeros(len(tasks), top_k)
    calls: List[int] = []
    with torch.no_grad():
        for task, members in energy_search.group_by_task(tasks):
            actions = torch.tensor(model.task_to_actions[task])
            table = energy_search.chunked_energies(model.field.energies, start[members],
                                                   goal[members], actions, model.horizon,
                                                   chunk_size, calls)
            order, best = energy_search.select_top_k(table, top_k, 'topk', chunk_size)
            plans[members] = energy_search.decode_candidates(
                order.reshape(-1), actions, model.horizon).view(len(members), top_k, -1)
            energies[members] = best
    return plans, energies, torch.tensor(calls)


def synthetic_energy_fn(meta: dict, modulus: int):
    """The fixture's integer-valued synthetic energy (meta ``synthetic_energy``)."""
    constants = meta['synthetic_energy']
    q, r = int(constants['Q']), int(constants['R'])

    def energy_fn(start, sequences, goal):
        horizon = sequences.shape[1]
        weights = torch.tensor([1000 ** (horizon - 1 - t) for t in range(horizon)])
        code = start[:, 0].round().long()
        value = ((sequences.long() * weights).sum(1) % modulus) * r + code * q
        return (value % modulus).float()
    return energy_fn


def synthetic_searches(model, meta: dict, inputs: dict, top_k: int) -> dict:
    """``synth_{distinct,ties}_{full,chunked,chunk1}_{plans,energies}`` with the official
    top-k, and the same searches with sequence-order ties as ``*_sequence`` (checked against
    a brute force, not against the fixture)."""
    tasks = torch.from_numpy(inputs['search_tasks'])
    codes = torch.from_numpy(inputs['synth_codes']).float()[:, None]
    chunks = dict(full=50_000, chunked=int(meta['small_chunk']), chunk1=1)
    out = {}
    moduli = dict(distinct=meta['synthetic_energy']['M_distinct'],
                  ties=meta['synthetic_energy']['M_ties'])
    for kind, modulus in moduli.items():
        energy_fn = synthetic_energy_fn(meta, int(modulus))
        for name, chunk in chunks.items():
            for tie_break in ('topk', 'sequence'):
                plans = torch.zeros(len(tasks), top_k, model.horizon, dtype=torch.long)
                energies = torch.zeros(len(tasks), top_k)
                for task, members in energy_search.group_by_task(tasks):
                    actions = torch.tensor(model.task_to_actions[task])
                    table = energy_search.chunked_energies(
                        energy_fn, codes[members], torch.zeros(len(members), 1), actions,
                        model.horizon, chunk)
                    order, best = energy_search.select_top_k(table, top_k, tie_break, chunk)
                    plans[members] = energy_search.decode_candidates(
                        order.reshape(-1), actions, model.horizon).view(len(members), top_k, -1)
                    energies[members] = best
                suffix = '' if tie_break == 'topk' else '_sequence'
                out[f'synth_{kind}_{name}_plans{suffix}'] = plans
                out[f'synth_{kind}_{name}_energies{suffix}'] = energies
    return out


def brute_force_top_k(meta: dict, inputs: dict, task_to_actions, horizon: int, modulus: int,
                      top_k: int):
    """(plans (B, k, T), energies (B, k)) by itertools.product, ranked by (energy, index)."""
    q, r = int(meta['synthetic_energy']['Q']), int(meta['synthetic_energy']['R'])
    plans, energies = [], []
    for code, task in zip(inputs['synth_codes'].tolist(), inputs['search_tasks'].tolist()):
        scored = []
        for index, sequence in enumerate(itertools.product(task_to_actions[task],
                                                           repeat=horizon)):
            number = sum(a * 1000 ** (horizon - 1 - t) for t, a in enumerate(sequence))
            scored.append((float(((number % modulus) * r + code * q) % modulus), index,
                           sequence))
        scored.sort()
        best = scored[:top_k] + [scored[min(top_k, len(scored)) - 1]] * max(0, top_k - len(scored))
        plans.append([s for _, _, s in best])
        energies.append([e for e, _, _ in best])
    return np.array(plans), np.array(energies)


def metric_outputs(inputs: dict, plans: np.ndarray, evaluated: np.ndarray,
                   search_tasks: np.ndarray) -> dict:
    """Official metrics: SR, mAcc, the bitwise mIoU (our ``miou_legacy``) in percent, of the
    recorded top-1 plans (unchunked: ``metric_plans``; chunked: ``evaluate``), which the
    search rows check (so a tie resolved otherwise does not fail the metrics)."""
    plan_scores = metrics.per_sample_scores(plans, inputs['actions'])
    pair_scores = metrics.per_sample_scores(inputs['metric_pred'], inputs['metric_target'])
    evaluate_scores = metrics.per_sample_scores(evaluated, inputs['actions'])
    out = {}
    for prefix, values in (('metric_plans', plan_scores), ('metric_pairs', pair_scores)):
        out[f'{prefix}_sr'] = values['success_rate'].mean()
        out[f'{prefix}_macc'] = values['mean_accuracy'].mean()
        out[f'{prefix}_miou'] = values['miou_legacy'].mean()
    out['metric_pairs_miou_rows'] = pair_scores['miou_legacy']
    out['evaluate_success_rate'] = evaluate_scores['success_rate'].mean()
    out['evaluate_mean_accuracy'] = evaluate_scores['mean_accuracy'].mean()
    out['evaluate_mean_iou'] = evaluate_scores['miou_legacy'].mean()
    out['evaluate_task_accuracy'] = 100.0 * (search_tasks == inputs['tasks']).mean()
    return out


TRAIN_STEP_INPUTS = ('initial_state', 'goal_state', 'noise_initial', 'noise_goal')


def call_arguments(text: str, call: str, where: str) -> dict:
    """The keyword arguments of ``call(...)`` written in ``text`` (a meta.json description such
    as ``"AdamW(lr=0.0005, weight_decay=0.075) over all parameters"``), as Python values
    (positional arguments such as ``model`` are ignored)."""
    import ast
    found = re.search(rf'\b{call}\(', text)
    depth, end = 1, found.end() if found else 0
    while found and depth and end < len(text):
        depth += {'(': 1, ')': -1}.get(text[end], 0)
        end += 1
    node = None
    if found and not depth:
        try:
            node = ast.parse(text[found.start():end], mode='eval').body
            return {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        except (SyntaxError, ValueError):
            pass
    raise ValueError(f'{where}={text!r}: cannot read the keyword arguments of {call}; '
                     f'expected "{call}(name=<literal>, ...)"')


def train_step_settings(fixture: Path, meta: dict) -> Tuple[dict, dict]:
    """(AdamW keyword arguments, EMA decay/start_step/update_every) of meta ``train_step``:
    every setting the fixture records (betas, eps, ... included), never this config's."""
    step_meta = meta.get('train_step', {})
    where = f'{fixture / "meta.json"} train_step'
    optimizer = call_arguments(step_meta.get('optimizer', ''), 'AdamW', f'{where}.optimizer')
    ema = call_arguments(step_meta.get('ema', ''), 'EMA', f'{where}.ema')
    unknown = set(optimizer) - {'lr', 'betas', 'eps', 'weight_decay', 'amsgrad'}
    if unknown or 'lr' not in optimizer:
        raise ValueError(f'{where}.optimizer={step_meta.get("optimizer")!r}: expected '
                         f'AdamW(lr=..., [betas, eps, weight_decay, amsgrad]); unknown '
                         f'{sorted(unknown)}')
    ema = dict(dict(start_step=0, update_every=1), **ema)
    if 'decay' not in ema:
        raise ValueError(f'{where}.ema={step_meta.get("ema")!r}: expected EMA(model, '
                         'decay=..., start_step=..., update_every=...)')
    return optimizer, ema


def adamw_step(settings: dict):
    """``step(before, grads) -> after``: one AdamW step (fixture settings) from a fresh state."""
    def step(before, grads):
        params = {k: torch.nn.Parameter(v.detach().clone()) for k, v in before.items()}
        for k, p in params.items():
            p.grad = grads[k].detach().clone().to(p.dtype)
        torch.optim.AdamW(list(params.values()), **settings).step()
        return {k: p.detach() for k, p in params.items()}
    return step


def train_step_outputs(model, settings: Tuple[dict, dict], meta: dict, inputs: dict,
                       initial_state, goal_state, noise_initial, noise_goal
                       ) -> Tuple[dict, dict, dict, dict]:
    """``train_one_epoch`` on the batch, on a copy of ``model``: (arrays ``aug_initial``,
    ``aug_goal``, ``losses``; the gradients; the parameters after AdamW; the EMA copy after its
    update), from the given (perturbable) start, goal and noise draws; ``settings``:
    ``train_step_settings``."""
    settings, ema_args = settings
    model = copy.deepcopy(model)
    field = model.field
    ema = copy.deepcopy(field)
    actions = torch.from_numpy(inputs['actions'])
    noise = float(meta['observation_noise'])
    aug_start = initial_state + noise * initial_state.std() * noise_initial
    aug_goal = goal_state + noise * goal_state.std() * noise_goal
    optimizer = torch.optim.AdamW(field.parameters(), **settings)
    optimizer.zero_grad(set_to_none=True)
    terms = model.loss_terms(aug_start, aug_goal, actions, torch.from_numpy(inputs['negatives']))
    terms['total'].backward()
    grads = {k: p.grad.detach().clone() for k, p in field.named_parameters()
             if p.grad is not None}  # AdamW leaves a parameter without a gradient as it is
    optimizer.step()
    ema_update(ema, field, 1, float(ema_args['decay']), int(ema_args['start_step']),
               int(ema_args['update_every']))
    arrays = dict(aug_initial=aug_start, aug_goal=aug_goal,
                  losses=torch.stack([terms['total'], terms['contrastive'], terms['auxiliary']]))
    return (to_numpy(arrays), grads, {k: p.detach() for k, p in field.named_parameters()},
            {k: p.detach() for k, p in ema.named_parameters()})


def ema_spread(field, spread: dict, ema_args: dict) -> dict:
    """What the EMA update makes of an uncertainty of the parameters: the same update applied
    to a zero EMA copy (linear: (1 - decay) x spread, or the spread itself for a copy)."""
    zero, moved = copy.deepcopy(field), copy.deepcopy(field)
    with torch.no_grad():
        for name, parameter in zero.named_parameters():
            parameter.zero_()
        for name, parameter in moved.named_parameters():
            parameter.copy_(spread[name].to(parameter.dtype) if name in spread
                            else torch.zeros_like(parameter))
    ema_update(zero, moved, 1, float(ema_args['decay']), int(ema_args['start_step']),
               int(ema_args['update_every']))
    return {k: p.detach().double().abs() for k, p in zero.named_parameters()}


def train_step_rows(model, meta: dict, fixture: Path, inputs: dict) -> list:
    """The training step's rows: its inputs and losses (measured conditioning), the parameters
    after AdamW and the EMA copy (``optimiser_step``: the update at its own scale, where the
    gradient's measured uncertainty leaves it undetermined within the update's range)."""
    injected = {name: torch.from_numpy(inputs[name]) for name in TRAIN_STEP_INPUTS}
    settings, ema_args = train_step_settings(fixture, meta)
    run = lambda **values: train_step_outputs(model, (settings, ema_args), meta, inputs,  # noqa
                                              **values)
    arrays, grads, after, ema_after = run(**injected)
    perturbed = cmp.perturbed_runs(run, injected)
    what = 'the step\'s start, goal and noise draws'
    path = fixture / 'train_step.npz'
    rows = compare_file(path, arrays, OUTPUT_TOLERANCE, names=list(arrays),
                        perturbed=[p[0] for p in perturbed], perturbed_what=what)
    before = {k: torch.from_numpy(v.astype(np.float32))
              for k, v in read_npz(fixture / 'state_dict.npz').items() if k in after}

    def spreads():
        uncertainty = optimiser_step.gradient_uncertainty(grads, [p[1] for p in perturbed])
        spread = optimiser_step.update_spread(adamw_step(settings),
                                              {k: before[k] for k in grads}, grads, uncertainty)
        return spread, ema_spread(model.field, spread, ema_args)
    spread, spread_ema = cmp.measured(f'{path.name}:spreads', spreads)
    rows += optimiser_step.compare_steps(path, 'after_adamw.', before, after, spread,
                                         OUTPUT_TOLERANCE, what)
    rows += optimiser_step.compare_steps(path, 'ema_after.', before, ema_after, spread_ema,
                                         OUTPUT_TOLERANCE, what)
    return rows


# ---------------------------------------------------------------------- the loader
def _loader_record(record, index: int, features: dict, fixture: Path) -> tuple:
    """(``id`` dict, frames, [(start, end)], [action]) of record ``index`` of
    loader_annotations.json, else ``ValueError`` naming the file, the record and what is
    missing (a bare KeyError said only "vid")."""
    where = f'{fixture / "loader_annotations.json"}: record {index}'
    try:
        info = record['id']
        frames = features[info['vid']]
        times = [(int(s), int(e)) for s, e, _ in info['legal_range']]
        labels = [int(a) for _, _, a in info['legal_range']]
        int(info['task_id']), int(info['event_class_top1'])
    except KeyError as error:
        raise ValueError(f'{where}: no {error.args[0]!r} (of the record, its "id", or the '
                         'videos of loader_inputs.npz); expected {"id": {"vid", "task_id", '
                         '"event_class_top1", "legal_range": [[start, end, action], ...]}}'
                         ) from None
    except (TypeError, ValueError) as error:
        raise ValueError(f'{where}: {error}; expected {{"id": {{"vid", "task_id", '
                         '"event_class_top1", "legal_range": [[start, end, action], ...]}}') \
            from None
    return info, frames, times, labels


def loader_outputs(fixture: Path, meta: dict) -> dict:
    """The official loader's arrays from this plugin's window rule (``datasets.observations``:
    the 'authors' frames t-1..t+1 and the 'authors' window policy), padded to T."""
    records = read_json(fixture / 'loader_annotations.json', 'CEFITO loader annotations')
    features = read_npz(fixture / 'loader_inputs.npz')
    horizon = int(meta.get('loader', {}).get('horizon', meta['horizon']))
    out = {}
    for source in ('ground_truth', 'predicted'):
        rows = dict(states=[], actions=[], task=[], gt_task=[], record_index=[])
        for index, record in enumerate(records):
            info, frames, times, labels = _loader_record(record, index, features, fixture)
            steps = observations.step_map(times, len(frames), 'authors')
            if steps is None:
                continue
            steps = list(steps) + [steps[-1]] * (horizon - len(steps))
            rows['states'].append(window_states(frames, [times[j] for j in steps]))
            rows['actions'].append([labels[j] for j in steps])
            rows['gt_task'].append(int(info['task_id']))
            rows['task'].append(int(info['event_class_top1']) if source == 'predicted'
                                else int(info['task_id']))
            rows['record_index'].append(index)
        out.update({f'{source}_{k}': np.asarray(v) for k, v in rows.items()})
    for key, ranges in read_npz(fixture / 'loader_outputs.npz').items():
        video = re.fullmatch(r'state_window_(.+)_ranges', key)
        if video is None:
            continue
        if video.group(1) not in features:
            raise ValueError(f'{fixture / "loader_outputs.npz"}: {key} names video '
                             f'{video.group(1)!r}, which {fixture / "loader_inputs.npz"} lacks')
        frames = features[video.group(1)]
        out[f'state_window_{video.group(1)}'] = np.stack([
            np.stack([frames[i] for i in observations.frame_indices('authors', s, e, len(frames))])
            for s, e in ranges.tolist()])
    return out


def window_states(frames: np.ndarray, times) -> np.ndarray:
    """(T+1, 3D): start window of step 1, means of adjacent end/start windows, end of step T
    (the official loader's states; only the first and last are read)."""
    length = len(frames)
    pairs = [observations.frame_indices('authors', s, e, length) for s, e in times]
    starts = [observations.observe(frames, p[0], 'authors') for p in pairs]
    ends = [observations.observe(frames, p[1], 'authors') for p in pairs]
    middle = [(ends[t] + starts[t + 1]) / 2 for t in range(len(times) - 1)]
    return np.stack([starts[0]] + middle + [ends[-1]]).astype(np.float32)


# ---------------------------------------------------------------------- comparison
def to_numpy(values: dict) -> dict:
    return {k: v.detach().cpu().numpy() if torch.is_tensor(v) else np.asarray(v)
            for k, v in values.items()}


def plan_rows(name: str, plans: np.ndarray, recorded: np.ndarray, tables: dict,
              candidates: dict, tolerance: float) -> list:
    """Plans compared through the recorded energy table of each sample: max |E(recorded plan) -
    E(our plan)| relative to the table's scale (0 for equal plans or exact ties)."""
    worst, scale = 0.0, 0.0
    if plans.shape != recorded.shape:
        return [(f'{name} (plans, shape)', math.inf, math.inf, tolerance, False)]
    for b in range(len(plans)):
        lookup = {tuple(c): e for c, e in zip(candidates[b].tolist(), tables[b].tolist())}
        if any(tuple(p) not in lookup for p in plans[b].tolist() + recorded[b].tolist()):
            return [(f'{name} (plan outside A(c)^T)', math.inf, math.inf, tolerance, False)]
        ours = np.array([lookup[tuple(p)] for p in plans[b].tolist()])
        theirs = np.array([lookup[tuple(p)] for p in recorded[b].tolist()])
        worst = max(worst, cmp.compare(theirs, ours, 1.0)[0])
        scale = max(scale, cmp.max_abs(tables[b]))
    rel = cmp.relative(worst, scale)
    return [(f'{name} (energy of the plans in the recorded table)', worst, rel, tolerance,
             cmp.within(rel, tolerance))]


def equal_row(name: str, ours: np.ndarray, theirs: np.ndarray) -> tuple:
    same = ours.shape == theirs.shape and np.array_equal(ours, theirs)
    return (name, 0.0 if same else math.inf, 0.0 if same else math.inf, 0.0, same)


def search_rows(model, meta: dict, fixture: Path, inputs: dict, recorded: dict) -> list:
    top_k = int(meta['top_k'])
    samples = len(inputs['search_tasks'])
    tables = {b: recorded[f'search_all_energies_{b}'] for b in range(samples)}
    candidates = {b: recorded[f'search_all_candidates_{b}'] for b in range(samples)}
    rows, ours = [], {}
    for scorer in ('tree', 'chunked'):
        ours_tables = energy_tables(model, inputs, scorer)
        for b in range(samples):
            task = int(inputs['search_tasks'][b])
            enumerated = energy_search.decode_candidates(
                torch.arange(len(tables[b])), torch.tensor(model.task_to_actions[task]),
                model.horizon).numpy()
            rows.append(equal_row(f'search_all_candidates_{b} (enumeration order)',
                                  enumerated, candidates[b]))
            diff, rel = cmp.compare(tables[b], ours_tables[b].numpy())
            rows.append((f'search_all_energies_{b} ({scorer})', diff, rel, OUTPUT_TOLERANCE,
                         cmp.within(rel, OUTPUT_TOLERANCE)))
    for name, chunk in (('full', 50_000), ('chunked', int(meta['small_chunk']))):
        plans, energies, calls = official_search(model, inputs, chunk, top_k)
        ours[f'search_{name}_energies'] = energies
        ours[f'search_{name}_plans'] = plans
        ours[f'search_{name}_rows_per_call'] = calls
        rows += plan_rows(f'search_{name}_plans', plans.numpy(),
                          recorded[f'search_{name}_plans'], tables, candidates,
                          OUTPUT_TOLERANCE)
    default_plans, default_energies = model.plan(*tensors(inputs, 'initial_state', 'goal_state',
                                                          'search_tasks'), top_k=top_k)
    rows += plan_rows('search_full_plans vs tree search, sequence ties', default_plans.numpy(),
                      recorded['search_full_plans'], tables, candidates, OUTPUT_TOLERANCE)
    diff, rel = cmp.compare(recorded['search_full_energies'], default_energies.numpy())
    rows.append(('search_full_energies vs tree search', diff, rel, OUTPUT_TOLERANCE,
                 cmp.within(rel, OUTPUT_TOLERANCE)))
    decode = energy_search.decode_candidates(
        torch.from_numpy(inputs['decode_indices']),
        torch.tensor(model.task_to_actions[int(inputs['decode_task'])]), model.horizon)
    rows.append(equal_row('decode_probe', decode.numpy(), recorded['decode_probe']))
    synthetic = synthetic_searches(model, meta, inputs, top_k)
    for key, value in synthetic.items():
        if not key.endswith('_sequence'):
            ours[key] = value
    for key in [k for k in synthetic if k.endswith('_plans')]:
        rows.append(equal_row(f'{key} (official torch.topk order)', synthetic[key].numpy(),
                              recorded[key]))
    for kind, modulus in (('distinct', meta['synthetic_energy']['M_distinct']),
                          ('ties', meta['synthetic_energy']['M_ties'])):
        brute_plans, brute_energies = brute_force_top_k(meta, inputs, model.task_to_actions,
                                                        model.horizon, int(modulus), top_k)
        for name in ('full', 'chunked', 'chunk1'):
            rows.append(equal_row(f'synth_{kind}_{name} sequence ties = brute force (plans)',
                                  synthetic[f'synth_{kind}_{name}_plans_sequence'].numpy(),
                                  brute_plans))
            rows.append(equal_row(f'synth_{kind}_{name} sequence ties = brute force '
                                  '(energies)',
                                  synthetic[f'synth_{kind}_{name}_energies_sequence'].numpy(),
                                  brute_energies.astype(np.float32)))
    return rows, ours


def check_fixture(fixture, meta: dict):
    """(rows, header ok) for a CEFITO fixture (``oracles.compare`` checker)."""
    fixture = Path(fixture)
    meta = read_meta(fixture, meta)
    inputs = read_npz(fixture / 'inputs.npz')
    recorded = read_npz(fixture / 'outputs.npz')
    check_ids(fixture / 'inputs.npz', inputs, dict(
        actions=meta['num_actions'], tasks=meta['num_tasks'], search_tasks=meta['num_tasks']))
    b, t, e = meta.get('batch', len(inputs['actions'])), meta['horizon'], meta['observation_dim']
    n, text = meta['num_actions'], meta.get('text_dim', inputs['action_embeddings'].shape[-1])
    cmp.check_shapes(fixture / 'inputs.npz', inputs, dict(  # the embeddings size the model
        action_embeddings=(n, text), states=(b, t + 1, e), actions=(b, t), tasks=(b,),
        negatives_seed=(), sampler50_seed=(), decode_task=()),  # scalars: int() of them
        f'batch={b}, horizon={t}, num_actions={n}, observation_dim={e}, text_dim={text}')
    print(f'fixture {fixture}: CEFITO N={meta["num_actions"]} K={meta["num_tasks"]} '
          f'T={meta["horizon"]} E={meta["observation_dim"]} H={meta["hidden_dim"]} '
          f'B={len(inputs["actions"])}')
    print(f'config: {CONFIG.relative_to(REPO)}')
    model_cfg = model_config(meta, inputs['action_embeddings'])
    model = build(model_cfg, inputs['action_embeddings'])
    header_ok = cmp.replayed_header() or check_counts(model_cfg, meta, model)
    install_weights(model, fixture)
    model.eval()

    outputs = predictor_outputs(model, inputs)
    injected = torch.from_numpy(inputs['negatives'])
    loss, grads = loss_outputs(model, inputs, injected, 'total')
    _, grads_contrastive = loss_outputs(model, inputs, injected, 'contrastive')
    _, grads_auxiliary = loss_outputs(model, inputs, injected, 'auxiliary')
    outputs.update(loss)
    outputs.update(sampler_outputs(model, inputs, recorded))
    head, head_grads = classifier_outputs(model, inputs)
    outputs.update(head)
    rows, search = search_rows(model, meta, fixture, inputs, recorded)
    outputs.update(search)
    rows.append(equal_row('negatives redrawn from negatives_seed (global random)',
                          redrawn_negatives(model, inputs).numpy(), inputs['negatives']))
    outputs.update(metric_outputs(inputs, recorded['search_full_plans'][:, 0],
                                  recorded['search_chunked_plans'][:, 0],
                                  inputs['search_tasks']))
    rows += compare_file(fixture / 'outputs.npz', to_numpy(outputs), OUTPUT_TOLERANCE,
                         names=sorted(k for k in recorded if not k.endswith('_plans')
                                      and not k.startswith(OWN_ROWS)))
    for name, values in (('grads.npz', grads), ('grads_contrastive.npz', grads_contrastive),
                         ('grads_auxiliary.npz', grads_auxiliary),
                         ('head_grads.npz', head_grads)):
        rows += compare_grads(fixture / name, values, GRAD_TOLERANCE)
    # an absent file is a failing row: the check passed without the optimiser step or the
    # loader, and said nothing of it
    if (fixture / 'train_step.npz').is_file():
        rows += train_step_rows(model, meta, fixture, inputs)
    else:
        rows.append(cmp.one_side_row('train_step.npz:* (the file; the AdamW + EMA step)',
                                     False, True, OUTPUT_TOLERANCE))
    if (fixture / 'loader_outputs.npz').is_file():
        loader = loader_outputs(fixture, meta)
        rows += compare_file(fixture / 'loader_outputs.npz', loader, 0.0,
                             names=sorted(k for k in read_npz(fixture / 'loader_outputs.npz')
                                          if not re.fullmatch(r'state_window_.+_ranges', k)))
    else:
        rows.append(cmp.one_side_row('loader_outputs.npz:* (the file; the official loader\'s '
                                     'arrays)', False, True, 0.0))
    return rows, header_ok
