"""The ``KEPP`` checker of ``oracles.compare``: a fixture of the official KEPP code
(``../shared/reference/kepp_small_t3``, README "Reference outputs of KEPP") recomputed with this
plugin's ``KEPP`` built from its config at the fixture's sizes.

Recomputed: the step model's training step (gradients), DDIM and DDPM chains and validation
loss; the PKG of ``pkg/inputs.json`` and the retrieval of both batches' paths (the chain step
model -> PKG -> plan model); the plan model's PKG/LLM blocks, training step (gradients), DDIM and
DDPM chains and validation loss; the schedule buffers, the config's LR multipliers and one EMA
update. ``pkg/``: the graph (nodes, edges, successors, in order), every query's path count, top
two and (where recorded) every walk in order, and every validate pair (fallbacks included).
Header: parameter counts of both U-Nets at the fixture's and every full size (built on the meta
device), the fixed settings. Sizes are read from meta.json and the arrays. Chains are compared
step by step and gradients at the model's scale, each with the tolerance of its measured
conditioning (``oracles.compare``), so a correct implementation passes at any thread count.
"""
from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import List, Tuple

import numpy as np
import torch

from ..core import diffusion, kepp_paths
from ..errors import read_json
from ..models.temporal_unet import official_name
from .compare import (GRAD_TOLERANCE, OUTPUT_TOLERANCE, Row, build_registered, check_ids,
                      check_shapes, compare,
                      compare_chain, compare_file, compare_grads, grad_summary, perturbed_runs,
                      read_npz, report_parameter_counts, report_settings, require_meta_fields,
                      replayed_header, set_fixture_sizes, within)
from .pdpp import (buffer_rows, ema_decay, install_unet, lr_outputs, report_ema_decay,
                   schedule_outputs, to_numpy)

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'configs/_base_/planners/kepp_crosstask.py'
META_FIELDS = ('num_actions', 'horizon', 'observation_dim', 'batch', 'n_timesteps',
               'ddim_timesteps', 'eta', 'num_parameters_plan_unet',
               'num_parameters_step_unet', 'constructor')


def read_meta(fixture: Path, meta: dict) -> dict:
    require_meta_fields(fixture, meta, META_FIELDS, 'KEPP', META_FIELDS[:6])
    for key in ('class_dim_graph', 'class_dim_llama'):
        if meta.get(key, meta['num_actions']) != meta['num_actions']:
            raise ValueError(f'{fixture / "meta.json"}: {key}={meta[key]} differs from '
                             f'num_actions={meta["num_actions"]}; KEPP here has P = L = N')
    return meta


def unet_widths(meta: dict, key: str) -> dict:
    call = meta['constructor'].get(key, '')
    match = re.search(r'TemporalUnet\([^,]+,\s*(?:dim=)?(\d+),\s*(?:dim_mults=)?\(([\d,\s]+)\)',
                      call)
    if not match:
        raise ValueError(f'meta.json constructor.{key}={call!r}; expected '
                         '"TemporalUnet(<C>, dim=<int>, dim_mults=(<ints>))"')
    return dict(dim=int(match.group(1)),
                dim_mults=tuple(int(m) for m in match.group(2).split(',') if m.strip()))


def load_cfg():
    from mmengine.config import Config
    return Config.fromfile(str(CONFIG))


def model_config(cfg, meta: dict) -> dict:
    model = copy.deepcopy(cfg.model)
    widths = unet_widths(meta, 'plan_temporal_unet')
    if widths != unet_widths(meta, 'step_temporal_unet'):
        raise ValueError('meta.json: the plan and step U-Nets have different widths; KEPP '
                         'here builds both with model.dim and model.dim_mults')
    sizes = dict(num_actions=meta['num_actions'], horizon=meta['horizon'],
                 feature_dim=meta['observation_dim'], n_timesteps=meta['n_timesteps'],
                 **widths)
    set_fixture_sizes(model, sizes)
    return model


def build_kepp(model_cfg, device=None):
    return build_registered(model_cfg, device)


def check_counts(model_cfg, meta: dict, model) -> bool:
    from ..models.base_planner import num_parameters

    def counts(built):
        return num_parameters(built), num_parameters(built.step)

    cases = [('fixture', counts(model),
              (meta['num_parameters_plan_unet'], meta['num_parameters_step_unet']))]
    for name, full in meta.get('full_size_parameter_counts', {}).items():
        cfg = dict(model_cfg, num_actions=full['num_actions'], feature_dim=full['observation_dim'],
                   dim=full['temporal_unet_dim'], dim_mults=tuple(full['dim_mults']))
        cases.append((name, counts(build_kepp(cfg, 'meta')),
                      (full['plan_unet_parameters'], full['step_unet_parameters'])))
    return report_parameter_counts(cases, ('plan U-Net', 'step U-Net'))


def check_settings(cfg, meta: dict) -> bool:
    calls = ' '.join(meta['constructor'].get(k, '') for k in
                     ('plan_gaussian_diffusion', 'step_gaussian_diffusion'))
    checks = {
        f'ddim_timesteps={meta["ddim_timesteps"]} (plugin {diffusion.DDIM_STEPS})':
            meta['ddim_timesteps'] == diffusion.DDIM_STEPS,
        f'eta={meta["eta"]} (plugin 0)': meta['eta'] == 0,
        'loss Weighted_MSE': 'loss_type' not in calls or "loss_type='Weighted_MSE'" in calls,
        'uniform DDIM steps': 'ddim_discr_method' not in calls or "'uniform'" in calls,
        'plan loss x5 (config)': cfg.model.plan_endpoint_weight == 5.0,
        'step loss x10 (config)': cfg.model.step_endpoint_weight == 10.0}
    report_ema_decay(cfg, meta)
    return report_settings(checks)


# ---------------------------------------------------------------------- recomputation
def batch_inputs(inputs: dict) -> dict:
    observations = torch.from_numpy(inputs['global_img_tensors']).float()
    return dict(start=observations[:, 0], goal=observations[:, -1])


def training_outputs(module, prefix: str, actions, block, t, noise, start, goal
                     ) -> Tuple[dict, dict]:
    """One training step from the injected inputs: its arrays (official names with
    ``prefix``) and the U-Net gradient summaries."""
    module.train()
    module.zero_grad()
    module.requires_grad_(True)
    batch = dict(start=start, goal=goal)
    x0 = module.target(actions, block, batch)
    terms = module.training_terms(x0, t, noise, block, batch)
    terms['loss'].backward()
    grads = {'model.' + official_name(n): grad_summary(p.grad)
             for n, p in module.unet.named_parameters()}
    return to_numpy({prefix + k: v for k, v in dict(terms, x_start=x0).items()}), grads


def training_rows(fixture: Path, module, prefix: str, grads_file: str, injected: dict
                  ) -> List[Row]:
    """Rows of a training step's arrays and gradients (at the model's scale), each with the
    tolerance of its measured conditioning (``oracles.compare``: the injected noise, start, goal
    and condition block perturbed)."""
    run = lambda **values: training_outputs(module, prefix, **values)  # noqa: E731
    outputs, grads = run(**injected)
    perturbed = perturbed_runs(run, injected)
    what = 'the injected noise, start, goal and PKG block'
    return (compare_file(fixture / 'outputs.npz', outputs, OUTPUT_TOLERANCE, names=list(outputs),
                         perturbed=[o for o, _ in perturbed], perturbed_what=what)
            + compare_grads(fixture / grads_file, grads, GRAD_TOLERANCE,
                            perturbed=[g for _, g in perturbed], perturbed_what=what))


def chain_rows(fixture: Path, module, prefix: str, block, batch, recorded: dict, x_t, noise,
               argmax_names: dict) -> List[Row]:
    """The DDIM and DDPM chains of one model (recorded draws): state 0 = project(x_T), the
    timesteps, the recorded final = the last state, then the chain step by step
    (``compare_chain``: each step fed the recorded state; the free-running final state judged
    where the chain is well-conditioned; the argmax where the recorded margin allows)."""
    module.eval()
    schedule = module.schedule()

    def project(x):
        return module.project(x, block, batch)

    steps = {'ddim': lambda i, x: diffusion.ddim_step(
                 module.unet, x, diffusion.DDIM_STEPS - 1 - i, project, schedule,
                 module.ddim_timestep_seq),
             'ddpm': lambda i, x: diffusion.ddpm_step(module.unet, x, i, project, schedule,
                                                      torch.from_numpy(noise[i]))}
    sequences = {'ddim': module.ddim_timestep_seq[:diffusion.DDIM_STEPS][::-1],
                 'ddpm': np.arange(len(module.betas))[::-1]}
    rows = []
    for sampler, step in steps.items():
        name = f'{prefix}{sampler}'
        states, raws = recorded[f'{name}_states'], recorded[f'{name}_x_recon_raw']
        with torch.no_grad():
            start = project(x_t)
        same = np.array_equal(recorded[f'{name}_final'], states[-1])
        diff, rel = compare(states[0], start.numpy())
        rows += [(f'outputs.npz:{name}_states[0]=project(x_T)', diff, rel, OUTPUT_TOLERANCE,
                  within(rel, OUTPUT_TOLERANCE)),
                 (f'outputs.npz:{name}_final(recorded={name}_states[-1])',
                  0.0 if same else math.inf, 0.0 if same else math.inf, 0.0, same)]
        rows += compare_file(fixture / 'outputs.npz', {f'{name}_t': sequences[sampler].copy()},
                             OUTPUT_TOLERANCE, names=[f'{name}_t'])
        argmax = argmax_names.get(sampler)
        rows += compare_chain('outputs.npz', states, raws, step, OUTPUT_TOLERANCE,
                              names=(f'{name}_x_recon_raw', f'{name}_states', f'{name}_final'),
                              argmax=argmax and (argmax[0], recorded[argmax[0]], argmax[1]))
    return rows


def validation_rows(fixture: Path, module, prefix: str, block, batch, inputs: dict,
                    recorded: dict) -> List[Row]:
    """The official validate loss: Weighted_MSE of the (recorded) DDPM output against the
    x_start of the sampling batch's ground truth (the chain itself has its own rows)."""
    x0 = module.target(torch.from_numpy(inputs['actions_sample']), block, batch)
    final = torch.from_numpy(recorded[f'{prefix}ddpm_final'])
    values = {f'{prefix}ddpm_val_x_start': x0,
              f'{prefix}ddpm_val_loss': module.weighted_mse(final, x0)}
    return compare_file(fixture / 'outputs.npz', to_numpy(values), OUTPUT_TOLERANCE,
                        names=list(values))


def ema_outputs(cfg, meta: dict, unet, inputs: dict) -> dict:
    """One official EMA update of ``ema_old.<official name>`` toward the plan U-Net's
    parameters of the same names (mmengine's averaged model, the fixture's decay)."""
    from mmaction.registry import MODELS
    names = {k[len('ema_old.'):] for k in inputs if k.startswith('ema_old.')}
    if not names:
        return {}
    current = {n: p for n, p in unet.named_parameters() if 'model.' + official_name(n) in names}
    holder = torch.nn.ParameterDict({n.replace('.', '/'): torch.nn.Parameter(p.detach().clone())
                                     for n, p in current.items()})
    old = copy.deepcopy(holder)
    for n in current:
        old[n.replace('.', '/')].data = torch.from_numpy(
            inputs['ema_old.model.' + official_name(n)]).float()
    ema = MODELS.build(dict(type='ExponentialMovingAverage', momentum=1 - ema_decay(cfg, meta),
                            interval=1), default_args=dict(model=old))
    ema.steps.fill_(1)
    ema.update_parameters(holder)
    return {'ema_new.model.' + official_name(n.replace('/', '.')): p
            for n, p in ema.module.items()}


# ---------------------------------------------------------------------- the PKG
PKG_FILES = ('inputs.json', 'outputs.json')
PKG_COMPONENTS = ('pkg', 'plan+step+pkg')  # meta.json "component" of a KEPP fixture


def read_pkg(folder: Path) -> Tuple[dict, dict]:
    """``inputs.json`` and ``outputs.json`` of a PKG folder (``kepp_small_t3/pkg/``)."""
    loaded = []
    for name in PKG_FILES:
        path = folder / name
        try:  # a key given twice: json kept the last (a wrong first graph passed)
            loaded.append(read_json(path, 'KEPP PKG oracle'))
        except (OSError, ValueError) as error:
            raise ValueError(f'{path}: cannot read the PKG oracle ({error}); expected the JSON '
                             'file of a KEPP PKG fixture (../shared/reference/README.md, '
                             '"Reference outputs of KEPP")') from None
    check_recorded_ids(loaded[1], folder / PKG_FILES[1])
    return loaded[0], loaded[1]


def _recorded_ids(outputs: dict):
    """(field, value) of every action id, path and count ``outputs.json`` records (the
    start, end and horizon each answer repeats included)."""
    graph = outputs.get('graph') if isinstance(outputs.get('graph'), dict) else {}
    yield 'graph.nodes', graph.get('nodes')
    for index, edge in enumerate(graph.get('edges') or []):
        yield f'graph.edges[{index}][:2]', edge[:2] if isinstance(edge, list) else edge
    for node, successors in (graph.get('successors') or {}).items():
        yield f'graph.successors[{node!r}]', successors
    for kind in ('queries', 'validate'):
        for index, answer in enumerate(outputs.get(kind) or []):
            if not isinstance(answer, dict):
                continue
            yield f'{kind}[{index}].num_paths', [answer.get('num_paths', 0)]
            for field in ('start', 'end', 'horizon'):  # the query it answers
                if field in answer:
                    yield f'{kind}[{index}].{field}', [answer[field]]
            for field in ('top2', 'all_sorted'):
                for rank, entry in enumerate(answer.get(field) or []):
                    yield f'{kind}[{index}].{field}[{rank}][0]', (
                        entry[0] if isinstance(entry, list) and entry else entry)
            for rank, path in enumerate(answer.get('paths') or []):
                yield f'{kind}[{index}].paths[{rank}]', path


def _edge_weight_pairs(recorded: list, edges: list) -> list:
    """(recorded, ours) weight of each edge, matched by (u, v) (an edge list in another order
    is the order row's failure: its weights are still compared, not shown as inf); an edge on
    one side only is (inf, 0)."""
    ours = {(u, v): w for u, v, w in edges}
    theirs = {(u, v): w for u, v, w in recorded}
    return [(theirs[key], ours[key]) if key in theirs and key in ours else (math.inf, 0.0)
            for key in list(theirs) + [key for key in ours if key not in theirs]]


def check_recorded_ids(outputs, path) -> None:
    """Every action id, path entry and path count of a PKG ``outputs.json`` is a JSON integer:
    ``true`` or ``1.0`` compared equal to 1 and a damaged recording passed. ``ValueError``
    naming the file, the field, the value and what was expected."""
    if not isinstance(outputs, dict):
        raise ValueError(f'{path}: holds a {type(outputs).__name__}; expected the JSON object '
                         'of a KEPP PKG fixture ("graph", "queries", "validate")')
    for field, values in _recorded_ids(outputs):
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f'{path}: {field} holds {value!r} ({type(value).__name__}); '
                                 'expected integers (action ids, paths of action ids, path '
                                 'counts and horizons, as the official code records them)')
    for field, value in _recorded_weights(outputs):  # "0.25" was read as the number 0.25
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f'{path}: {field} = {value!r} ({type(value).__name__}); expected '
                             'a number (an edge or path weight, as the official code records '
                             'it)')


def _recorded_weights(outputs: dict):
    """(field, value) of every edge and path weight ``outputs.json`` records."""
    graph = outputs.get('graph') if isinstance(outputs.get('graph'), dict) else {}
    for index, edge in enumerate(graph.get('edges') or []):
        if isinstance(edge, list) and len(edge) > 2:
            yield f'graph.edges[{index}][2]', edge[2]
    for index, answer in enumerate(outputs.get('queries') or []):
        for field in ('top2', 'all_sorted') if isinstance(answer, dict) else ():
            for rank, entry in enumerate(answer.get(field) or []):
                if isinstance(entry, list) and len(entry) > 1:
                    yield f'queries[{index}].{field}[{rank}][1]', entry[1]


def pkg_graph(inputs: dict, where: str = 'inputs.json') -> kepp_paths.KEPPGraph:
    """The graph of a PKG fixture's ``action_list`` (official mode ``train_out_n``); each row's
    ``legal_range`` must be a list of action ids (integers >= 0)."""
    rows = inputs.get('action_list') if isinstance(inputs, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f'{where}: "action_list" = {rows!r}; expected a list of '
                         '{"vid", "legal_range"} rows')
    for index, row in enumerate(rows):
        actions = row.get('legal_range') if isinstance(row, dict) else None
        if not isinstance(row, dict) or 'vid' not in row or not isinstance(actions, list):
            raise ValueError(f'{where}: action_list[{index}] = {row!r}; expected '
                             '{"vid": ..., "legal_range": [action ids]}')
        for step, action in enumerate(actions):
            if isinstance(action, bool) or not isinstance(action, int) or action < 0:
                raise ValueError(f'{where}: action_list[{index}] (vid {row["vid"]!r}) '
                                 f'"legal_range"[{step}] = {action!r}; expected an action id '
                                 '(an integer >= 0)')
    return kepp_paths.build_graph((row['vid'], row['legal_range']) for row in rows)


def check_queries(queries, where: Path) -> None:
    """Each query of a PKG fixture's inputs: ``start`` / ``end`` action ids (integers >= 0),
    ``horizon`` an integer (a string would fail inside the retrieval as a bare TypeError)."""
    if not isinstance(queries, list):
        raise ValueError(f'{where}: "queries" = {queries!r}; expected a list of '
                         '{"start", "end", "horizon"} queries')
    for index, query in enumerate(queries):
        for field in ('start', 'end', 'horizon'):
            value = query.get(field) if isinstance(query, dict) else None
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f'{where}: queries[{index}] field "{field}" = {value!r}; '
                                 'expected an integer >= 0')


def check_input_shapes(fixture: Path, meta: dict, inputs: dict) -> None:
    """inputs.npz's arrays have the sizes of meta.json (B, T, N, D; the plan model's width
    3N + D, the step model's N + D): an edited array is named, not met as a torch size error."""
    b, t, n, d = meta['batch'], meta['horizon'], meta['num_actions'], meta['observation_dim']
    plan, step = 3 * n + d, n + d
    expected = dict(global_img_tensors=(b, t + 1, d), actions=(b, t), actions_sample=(b, t),
                    pkg_paths_train=(b, 2, t), t=(b,), step_t=(b,), noise=(b, t, plan),
                    x_T=(b, t, plan), step_noise=(b, t, step), step_x_T=(b, t, step))
    check_shapes(fixture / 'inputs.npz', inputs, expected,
                 f'batch={b}, horizon={t}, num_actions={n}, observation_dim={d}')


def check_answers(folder: Path, inputs: dict, outputs: dict, graph) -> None:
    """outputs.json answers every query and validate pair of inputs.json, in order (each
    answer repeats its query's start, end and horizon), and a query whose end is no node of
    the graph has no recorded path: else ``ValueError`` naming the query, the answer and the
    node (a removed or edited query FAILed its rows without saying why)."""
    where_in, where_out = folder / PKG_FILES[0], folder / PKG_FILES[1]
    nodes = set(graph.nodes)
    for asked, answered, fields in (('queries', 'queries', ('start', 'end', 'horizon')),
                                    ('validate_pairs', 'validate', ('start', 'end'))):
        questions, answers = inputs.get(asked) or [], outputs.get(answered)
        if not isinstance(answers, list):
            raise ValueError(f'{where_out}: "{answered}" = {answers!r}; expected a list of '
                             f'answers, one per {asked} entry of {where_in.name}')
        for index, (question, answer) in enumerate(zip(questions, answers)):
            asked_for = (dict(question) if isinstance(question, dict)
                         else dict(zip(fields, question)))
            key = tuple(asked_for.get(f) for f in fields)
            got = tuple(answer.get(f) for f in fields) if isinstance(answer, dict) else answer
            if got != key:
                strange = [f'{f} {v!r} is no node of the graph built from action_list'
                           for f, v in zip(fields[:2], key[:2]) if v not in nodes]
                raise ValueError(
                    f'{where_in}: {asked}[{index}] asks {_named(fields, key)}'
                    f'{" (" + "; ".join(strange) + ")" if strange else ""}, but '
                    f'{where_out.name} {answered}[{index}] answers {_named(fields, got)}: '
                    'expected one answer per entry, in the same order (an entry removed or '
                    'edited in one file?)')
        if len(questions) != len(answers):
            more, name, entries = ((where_in.name, asked, questions)
                                   if len(questions) > len(answers)
                                   else (where_out.name, answered, answers))
            first = min(len(questions), len(answers))
            entry = entries[first]
            shown = (_named(fields, tuple(entry.get(f) for f in fields))
                     if isinstance(entry, dict) else repr(entry))
            raise ValueError(
                f'{folder}: {where_in.name} has {len(questions)} {asked}, {where_out.name} '
                f'{len(answers)} {answered}; {more} {name}[{first}] ({shown}) and any after '
                'it have no counterpart: expected one answer per entry (an entry removed from '
                'one file?)')
    for index, (query, answer) in enumerate(zip(inputs['queries'], outputs['queries'])):
        for end in ('start', 'end'):
            if query[end] not in nodes and answer.get('num_paths'):
                raise ValueError(
                    f'{where_in}: queries[{index}] {end} = {query[end]} is no node of the '
                    f'graph built from action_list (nodes {sorted(nodes)}), yet '
                    f'{where_out.name} records {answer["num_paths"]} path(s) for it: expected '
                    'a node of the graph (an edited query?)')


def _named(fields, values) -> str:
    """'start 4, end 5, horizon 3' (or the value as it is when it is no tuple)."""
    if not isinstance(values, tuple):
        return repr(values)
    return ', '.join(f'{f} {v!r}' for f, v in zip(fields, values))


def count_row(label: str, wrong: int, total: int, optional: bool = False) -> Row:
    """A row of exact comparisons: ``wrong`` of ``total`` differ (must be 0); nothing compared
    fails unless the recording is ``optional`` (e.g. ``all_sorted``, recorded for some
    queries only)."""
    return (f'{label} ({total} compared)', float(wrong), float(wrong) / max(total, 1), 0.0,
            wrong == 0 and (total > 0 or optional))


def weight_row(label: str, pairs: List[Tuple[float, float]]) -> Row:
    """Recorded against computed path weights (float64 products): 1e-12 of the largest."""
    recorded, ours = (np.array([pair[i] for pair in pairs], np.float64) for i in (0, 1))
    diff, rel = compare(recorded, ours)
    return (f'{label} ({len(pairs)} weights)', diff, rel, 1e-12, within(rel, 1e-12))


def pkg_rows(folder: Path, graph: kepp_paths.KEPPGraph) -> List[Row]:
    """The graph (nodes, edges, weights, successors, in order), every query (path count, top
    two, every walk where recorded, weights) and every validate pair of a PKG folder."""
    inputs, outputs = read_pkg(folder)
    recorded = outputs['graph']
    rows = [count_row('pkg:graph nodes (order)', int(graph.nodes != recorded['nodes']), 1)]
    edges = graph.edges()
    same = [(u, v) for u, v, _ in edges] == [(u, v) for u, v, _ in recorded['edges']]
    rows.append(count_row('pkg:graph edges (order)', int(not same), 1))
    rows.append(weight_row('pkg:graph edge weights', _edge_weight_pairs(recorded['edges'], edges)))
    successors = {str(u): [v for v, _ in graph.successors[u]] for u in graph.nodes}
    rows.append(count_row('pkg:graph successors (order)',
                          int(successors != recorded['successors']), 1))
    wrong_count = wrong_top = wrong_all = compared_all = 0
    weights = []
    check_queries(inputs.get('queries'), folder / PKG_FILES[0])
    check_answers(folder, inputs, outputs, graph)
    for query, answer in zip(inputs['queries'], outputs['queries']):
        walks = kepp_paths.all_walks(graph, query['start'], query['end'], query['horizon'])
        ranked = sorted(walks, key=lambda item: item[1], reverse=True)
        wrong_count += len(walks) != answer['num_paths']
        top = ranked[:kepp_paths.NUM_PATHS]
        wrong_top += [p for p, _ in top] != [p for p, _ in answer['top2']]
        weights += [(w, mine) for (_, w), (_, mine) in zip(answer['top2'], top)]
        if 'all_sorted' in answer:
            compared_all += 1
            wrong_all += [p for p, _ in ranked] != [p for p, _ in answer['all_sorted']]
            weights += [(w, mine) for (_, w), (_, mine) in zip(answer['all_sorted'], ranked)]
    total = len(inputs['queries'])
    rows += [count_row('pkg:queries num_paths', wrong_count, total),
             count_row('pkg:queries top2 paths (ties in DFS order)', wrong_top, total),
             count_row('pkg:queries all_sorted paths', wrong_all, compared_all, optional=True),
             weight_row('pkg:queries path weights', weights)]
    wrong_validate = 0
    for pair, answer in zip(inputs['validate_pairs'], outputs['validate']):
        horizon = len(answer['paths'][0])
        paths, _ = kepp_paths.retrieve(graph, pair[0], pair[1], horizon)
        wrong_validate += paths != answer['paths']
    rows.append(count_row('pkg:validate paths (fallbacks included)', wrong_validate,
                          len(inputs['validate_pairs'])))
    return rows


def retrieval_rows(model, inputs: dict, first_last: dict) -> List[Row]:
    """The model's retrieval (cached, with the one-path rule) of each batch's (first, last)
    against the recorded ``pkg_paths_<name>`` (B, 2, T)."""
    rows = []
    for name, pairs in first_last.items():
        _, paths, _ = model.path_block(pairs[:, 0], pairs[:, 1], 'cpu')
        recorded = inputs[f'pkg_paths_{name}']
        wrong = int((paths.numpy() != recorded).any(axis=(1, 2)).sum()) \
            if paths.shape == recorded.shape else len(recorded)
        rows.append(count_row(f'inputs.npz:pkg_paths_{name} (retrieved)', wrong, len(recorded)))
    return rows


def check_fixture(fixture, meta: dict):
    """(rows, header ok) for a KEPP fixture (``oracles.compare`` checker)."""
    fixture = Path(fixture)
    if is_pkg_folder(fixture, meta):
        return check_pkg_fixture(fixture, meta)
    meta = read_meta(fixture, meta)
    print(f'fixture {fixture}: KEPP N={meta["num_actions"]} T={meta["horizon"]} '
          f'D={meta["observation_dim"]} n={meta["n_timesteps"]} B={meta["batch"]} '
          f'(torch threads {torch.get_num_threads()})')
    cfg = load_cfg()
    print(f'config: {CONFIG.relative_to(REPO)} (type={cfg.model.type})')
    model_cfg = model_config(cfg, meta)
    model = build_kepp(model_cfg)
    header_ok = replayed_header() or (check_counts(model_cfg, meta, model)
                                      & check_settings(cfg, meta))
    install_unet(model.plan.unet, fixture / 'state_dict.npz')
    install_unet(model.step.unet, fixture / 'step_state_dict.npz')
    inputs = read_npz(fixture / 'inputs.npz')
    recorded = read_npz(fixture / 'outputs.npz')
    check_input_shapes(fixture, meta, inputs)
    check_ids(fixture / 'inputs.npz', inputs, dict(dict.fromkeys(
        ('actions', 'actions_sample', 'pkg_paths_train'), meta['num_actions']),
        t=meta['n_timesteps'], step_t=meta['n_timesteps']))
    batch = batch_inputs(inputs)
    actions = torch.from_numpy(inputs['actions'])
    step, plan, n = model.step, model.plan, meta['num_actions']
    empty = step.empty_block(batch)

    # the step model: training step, chains, validation loss; its query of the PKG is the
    # first/last argmax of the recorded DDIM output (our chain's argmax has its own row)
    rows = (buffer_rows(fixture / 'state_dict.npz', plan)
            + buffer_rows(fixture / 'step_state_dict.npz', step))
    rows += training_rows(fixture, step, 'step_', 'step_grads.npz', dict(
        actions=actions, block=empty, t=torch.from_numpy(inputs['step_t']),
        noise=torch.from_numpy(inputs['step_noise']), **batch))
    chain = chain_rows(fixture, step, 'step_', empty, batch, recorded,
                       torch.from_numpy(inputs['step_x_T']), inputs['step_ddpm_noise'],
                       dict(ddim=('step_pred_list', lambda x: as_numpy(x)[..., :n])))
    rows += chain + validation_rows(fixture, step, 'step_', empty, batch, inputs, recorded)
    query = step.actions(torch.from_numpy(recorded['step_ddim_final'])).argmax(-1)[:, [0, -1]]
    rows += compare_file(fixture / 'outputs.npz', {'pkg_query_sample': query.numpy()},
                         OUTPUT_TOLERANCE, names=['pkg_query_sample'])

    # the PKG, and the retrieval of both batches' paths
    graph = pkg_graph(read_pkg(fixture / 'pkg')[0], str(fixture / 'pkg' / 'inputs.json'))
    model.set_graph(graph)
    rows += retrieval_rows(model, inputs, dict(
        train=actions[:, [0, -1]], sample=torch.from_numpy(recorded['pkg_query_sample'])))

    # the plan model on the recorded paths
    blocks = {}
    for name in ('train', 'sample'):
        block = torch.from_numpy(kepp_paths.path_block(inputs[f'pkg_paths_{name}'], n))
        blocks[name] = torch.cat([block, block], -1)
    conditions = dict(cond_pkg=blocks['train'][..., :n], cond_llm=blocks['train'][..., n:],
                      ddim_cond_pkg=blocks['sample'][..., :n],
                      ddim_cond_llm=blocks['sample'][..., n:])
    rows += compare_file(fixture / 'outputs.npz', to_numpy(conditions), OUTPUT_TOLERANCE,
                         names=list(conditions))
    rows += training_rows(fixture, plan, '', 'grads.npz', dict(
        actions=actions, block=blocks['train'], t=torch.from_numpy(inputs['t']),
        noise=torch.from_numpy(inputs['noise']), **batch))
    actions_of = lambda x: as_numpy(x)[..., 2 * n:3 * n]  # noqa: E731
    chain = chain_rows(fixture, plan, '', blocks['sample'], batch, recorded,
                       torch.from_numpy(inputs['x_T']), inputs['ddpm_noise'],
                       dict(ddim=('ddim_actions', actions_of), ddpm=('ddpm_actions', actions_of)))
    rows += chain + validation_rows(fixture, plan, '', blocks['sample'], batch, inputs, recorded)

    others = dict(**schedule_outputs(list(recorded), meta), **lr_outputs(cfg, recorded),
                  **ema_outputs(cfg, meta, plan.unet, inputs))
    rows += compare_file(fixture / 'outputs.npz', to_numpy(others), OUTPUT_TOLERANCE,
                         names=list(others))
    rows += pkg_rows(fixture / 'pkg', graph)
    return rows + unchecked_rows(rows, recorded), header_ok


def is_pkg_folder(fixture: Path, meta: dict) -> bool:
    """A PKG-only fixture (a folder laid out like ``kepp_small_t3/pkg/``): meta.json's
    ``component`` is ``pkg``, or (no component) the folder holds the PKG's JSON files and no
    recorded arrays."""
    if 'component' in meta:
        component = str(meta['component']).strip()
        if component not in PKG_COMPONENTS:
            raise ValueError(f'{fixture / "meta.json"}: "component" = {meta["component"]!r}; '
                             f'expected one of {PKG_COMPONENTS} (\'pkg\': a PKG-only folder '
                             'laid out like kepp_small_t3/pkg/)')
        return component == 'pkg'
    return all((fixture / name).is_file() for name in PKG_FILES) \
        and not (fixture / 'inputs.npz').is_file()


def check_pkg_fixture(fixture: Path, meta: dict):
    """(rows, header ok) for a PKG-only fixture: the graph of its ``action_list`` and every
    retrieval (``pkg_rows``); the header compares meta.json's counts with the files'."""
    inputs, outputs = read_pkg(fixture)
    print(f'fixture {fixture}: KEPP PKG (component {meta.get("component", "pkg")!r}): graph and '
          'path retrieval only')
    graph = pkg_graph(inputs, str(fixture / 'inputs.json'))
    counts = {'num_nodes': len(graph.nodes), 'num_edges': len(graph.edges()),
              'num_queries': len(inputs['queries']),
              'num_validate_pairs': len(inputs['validate_pairs'])}
    # !r: a count written "9" printed as 9 read "num_nodes=9 (files: 9): MISMATCH"
    header_ok = report_settings({f'{key}={meta[key]!r} (files: {value})':
                                 type(meta[key]) is int and meta[key] == value
                                 for key, value in counts.items() if key in meta})
    return pkg_rows(fixture, graph), header_ok


def as_numpy(value) -> np.ndarray:
    return value.detach().cpu().numpy() if torch.is_tensor(value) else np.asarray(value)


def unchecked_rows(rows: List[Row], recorded: dict) -> List[Row]:
    """A failing row for every recorded array no row compared (nothing is skipped
    silently)."""
    named = {row[0].split(':', 1)[-1].split('[')[0].split('(')[0].split(' ')[0]
             for row in rows if row[0].startswith('outputs.npz:')}
    return [(f'outputs.npz:{name} (not compared)', math.inf, math.inf, OUTPUT_TOLERANCE, False)
            for name in sorted(set(recorded) - named)]
