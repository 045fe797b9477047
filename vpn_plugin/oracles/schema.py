"""The ``SCHEMA`` checker of ``oracles.compare``: this plugin's SCHEMA against a fixture of the
official code (``../shared/reference/schema_*``, README section "Reference outputs of SCHEMA").

The model is built from this plugin's SCHEMA config for the fixture's dataset
(``configs/baselines/schema_<dataset>_t<T>.py``, else
``configs/_base_/planners/schema_<dataset>.py`` at horizon T) with the fixture's constructor
arguments (``meta.json`` ``constructor``) and loss weights (``total_loss``), every dropout set
to 0 as the recipe does, the official weights converted (``oracles.authors.convert_state_dict``) and
the fixture's text features and transition matrix installed. Then, as the recipe: a train pass
(ground-truth task to the action decoder, total loss backward), an eval pass (predicted task,
SCHEMA's Viterbi) and the Viterbi probe; every array of ``outputs.npz``, every gradient summary
of ``grads.npz`` and the sinusoidal tables of ``state_dict.npz`` are compared.
"""
import re
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import torch
from torch import nn

from .authors import (CONFIG_DATASETS, TEXT_TOLERANCE, check_inputs, install_authors_weights,
                      method_config, read_authors_state_dict)
from .compare import (GRAD_TOLERANCE, OUTPUT_TOLERANCE, Row, compare, compare_file, compare_grads,
                      grad_summary, read_npz, set_fixture_sizes)
from ..models.schema import OFFICIAL_TABLES
from ..errors import check_number

# constructor argument (meta.json "constructor" and its "args") -> SCHEMA config key
CONSTRUCTOR_FIELDS = {'vis_input_dim': 'feature_dim', 'lang_input_dim': 'text_dim',
                      'embed_dim': 'embed_dim', 'time_horz': 'horizon',
                      'num_classes': 'num_actions', 'num_tasks': 'num_tasks'}
ARG_FIELDS = {'attn_heads': 'num_heads', 'mlp_ratio': 'mlp_ratio', 'num_layers': 'num_layers',
              'dropout': 'dropout', 'no_state_task': 'no_state_task'}
META_REQUIRED = ('dataset', 'num_actions', 'num_tasks', 'horizon', 'batch', 'constructor',
                 'num_parameters')


def read_schema_meta(fixture: Path, meta: dict) -> dict:
    """``meta`` checked: required fields present and consistent with the constructor call."""
    where = fixture / 'meta.json'
    missing = [name for name in META_REQUIRED if name not in meta]
    constructor = meta.get('constructor', {})
    missing += [f'constructor.{name}' for name in CONSTRUCTOR_FIELDS if name not in constructor]
    missing += [f'constructor.args.{name}' for name in ARG_FIELDS
                if name not in constructor.get('args', {})]
    if missing:
        raise ValueError(f'{where}: missing fields {missing}; expected a SCHEMA fixture '
                         '(../shared/reference/README.md, "Reference outputs of SCHEMA")')
    if constructor['args'].get('uncertain', False):
        raise ValueError(f'{where}: constructor.args.uncertain=true (probabilistic SCHEMA) is '
                         'not implemented; expected uncertain=false')
    for field, name in (('num_actions', 'num_classes'), ('num_tasks', 'num_tasks'),
                        ('horizon', 'time_horz')):
        check_number(f'{where}: {field}', meta[field], integer=True, low=1)  # "3" is no T
        if meta[field] != constructor[name]:
            raise ValueError(f'{where}: {field}={meta[field]!r} but constructor.{name}='
                             f'{constructor[name]!r}; expected the same value')
    if meta['dataset'] not in CONFIG_DATASETS:
        raise ValueError(f'{where}: dataset={meta["dataset"]!r} is unknown; expected one of '
                         f'{sorted(CONFIG_DATASETS)}')
    return meta


def model_config(meta: dict):
    """This plugin's SCHEMA model config for the fixture, with the fixture's constructor
    arguments; prints each that differs from the config (e.g. 512-d official observations)."""
    family = CONFIG_DATASETS[meta['dataset']]
    model = method_config(f'configs/baselines/schema_{family}_t{{T}}.py',
                          f'configs/_base_/planners/schema_{family}.py', meta['horizon'])
    constructor = meta['constructor']
    wanted = {key: constructor[name] for name, key in CONSTRUCTOR_FIELDS.items()}
    wanted.update({key: constructor['args'][name] for name, key in ARG_FIELDS.items()})
    set_fixture_sizes(model, wanted)
    text_file = (model.get('text_embeddings') or {}).get('file')
    model.text_embeddings = None  # the fixture brings its own text features
    return model, text_file


# official loss name (meta.json ``total_loss``) -> ``SCHEMA.loss_weights`` key
LOSS_NAMES = {'loss_action': 'action', 'loss_state_encode': 'state', 'loss_task': 'task',
              'loss_state_decode': 'state_decode'}


def total_loss_weights(where: Path, meta: dict, config_weights: dict) -> dict:
    """The loss weights of meta.json ``total_loss`` (``"loss_action + loss_state_encode +
    loss_task + 0.1 * loss_state_decode"``, what the fixture's ``train_loss_total`` and
    gradients were made with), else the config's; a term it does not name weighs 0."""
    text = meta.get('total_loss')
    if text is None:
        return dict(config_weights)
    terms = re.findall(r'(?:([\d.eE+-]+)\s*\*\s*)?(loss_\w+)', str(text))
    unknown = sorted(name for _, name in terms if name not in LOSS_NAMES)
    if not terms or unknown:
        raise ValueError(f'{where}: total_loss={text!r}: expected a sum of [<weight> *] '
                         f'{sorted(LOSS_NAMES)}; unknown {unknown}')
    weights = {key: 0.0 for key in LOSS_NAMES.values()}
    for weight, name in terms:
        weights[LOSS_NAMES[name]] += float(weight) if weight else 1.0
    return weights


def check_text_file(meta: dict, reference: np.ndarray, text_file) -> bool:
    """When meta.json's ``text_features`` names the config's text file, that file must hold
    the fixture's array (float16 there: 1e-3); otherwise only reported."""
    from ..models.text_embeddings import load_state_features
    path = Path(text_file) if text_file else None
    if path is None or path.name not in str(meta.get('text_features', '')) \
            or not path.is_file():
        print(f'text features: the fixture\'s own ({meta.get("text_features", "?")}); '
              'config file not compared')
        return True
    diff, rel = compare(reference, load_state_features(file=str(path)).numpy())
    ok = rel <= TEXT_TOLERANCE
    print(f'text features: config {path.name} vs fixture: max abs {diff:.3e}, max rel '
          f'{rel:.3e} {"ok" if ok else "MISMATCH"}')
    return ok


def build_model(model_cfg, inputs: dict, fixture: Path):
    """The config's SCHEMA with the official weights, the fixture's text and PKG, dropout 0."""
    from mmaction.registry import MODELS
    model = MODELS.build(model_cfg)
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    model.state_encoder.set_state_features(torch.from_numpy(inputs['state_prompt_features']))
    install_authors_weights(model, read_authors_state_dict(fixture / 'state_dict.npz'),
                            inputs['transition_matrix'])
    return model


def train_pass(model, batch: dict, plan: torch.Tensor, task: torch.Tensor,
               visual: torch.Tensor):
    """Outputs (``train_*``) and gradient summaries (official names) of the train pass."""
    model.train()
    model.zero_grad()
    out = model.network(batch, task)
    losses = model.loss_terms(out, plan, task)
    total = sum(model.loss_weights[name[len('loss_'):]] * value
                for name, value in losses.items())
    total.backward()
    middle = (visual[:, 1:, 0] + visual[:, :-1, 1]) / 2  # the official intermediate states
    outputs = dict(
        state_feat=out['states'], inter_state_feat=model.state_encoder.encode(middle),
        state_logits=out['state_logits'], prompt_features=out['text'],
        task_logits=out['task_logits'],
        state_decoder_transformer_out=out['state_decoder_transformer_out'],
        state_decoder_out=out['state_decoder_out'],
        action_decoder_transformer_out=out['action_decoder_transformer_out'],
        action_logits=out['action_logits'], label_state=plan[:, [0, -1]].reshape(-1),
        label_action=plan.reshape(-1), label_task=task,
        label_state_decode=model.state_targets(out['text'], plan).reshape(-1, model.embed_dim),
        loss_total=total, **official_losses(losses))
    return {f'train_{k}': v.detach().numpy() for k, v in outputs.items()}, gradients(model)


@torch.no_grad()
def eval_pass(model, batch: dict, plan: torch.Tensor, task: torch.Tensor,
              probe: torch.Tensor) -> Dict[str, np.ndarray]:
    """Outputs (``eval_*``, ``viterbi_probe_*``) of the eval pass and the Viterbi probe."""
    model.eval()
    out = model.network(batch)
    probabilities = out['action_logits'].softmax(-1)
    path, likelihood = model.viterbi(probabilities)
    probe_path, probe_likelihood = model.viterbi(probe)
    outputs = dict(
        eval_task_logits=out['task_logits'], eval_task_pred=out['action_task'],
        eval_state_logits=out['state_logits'], eval_state_decoder_out=out['state_decoder_out'],
        eval_action_logits=out['action_logits'], eval_action_probs=probabilities,
        eval_viterbi_path=path, eval_viterbi_likelihood=likelihood,
        viterbi_probe_path=probe_path, viterbi_probe_likelihood=probe_likelihood,
        **{f'eval_{k}': v for k, v in official_losses(model.loss_terms(out, plan, task)).items()})
    return {k: v.numpy() for k, v in outputs.items()}


def official_losses(losses: dict) -> dict:
    """Our loss names -> the fixture's (``loss_state`` is the official ``state_encode``)."""
    return {('loss_state_encode' if name == 'loss_state' else name): value
            for name, value in losses.items()}


def gradients(model) -> Dict[str, np.ndarray]:
    """{official name: grad summary} of every parameter that got a gradient."""
    ours_to_official = {}
    for prefix, ours in model.official_prefixes.items():
        for name, _ in model.named_parameters():
            if name.startswith(ours):
                ours_to_official.setdefault(name, prefix + name[len(ours):])
    return {ours_to_official[name]: grad_summary(p.grad)
            for name, p in model.named_parameters() if p.grad is not None}


def check_fixture(fixture: Path, meta: dict) -> Tuple[List[Row], bool]:
    """The ``SCHEMA`` checker of ``oracles.compare``: (rows, header ok)."""
    from ..models.base_planner import num_parameters
    fixture = Path(fixture)
    meta = read_schema_meta(fixture, meta)
    args = meta['constructor']['args']
    print(f'fixture {fixture}: case={meta.get("case")} dataset={meta["dataset"]} '
          f'N={meta["num_actions"]} K={meta["num_tasks"]} T={meta["horizon"]} '
          f'B={meta["batch"]} no_state_task={args["no_state_task"]}')
    inputs = read_npz(fixture / 'inputs.npz')
    model_cfg, text_file = model_config(meta)
    constructor = meta['constructor']
    check_inputs(fixture, dict(batch=meta['batch'], horizon=meta['horizon'],
                               feature_dim=constructor['vis_input_dim'],
                               num_actions=meta['num_actions'], num_tasks=meta['num_tasks'],
                               text_dim=constructor['lang_input_dim']), inputs)
    model = build_model(model_cfg, inputs, fixture)
    weights = total_loss_weights(fixture / 'meta.json', meta, model.loss_weights)
    if weights != model.loss_weights:
        print(f'  loss_weights: config {model.loss_weights} -> fixture {weights}')
        model.loss_weights = weights
    count = num_parameters(model)
    ok = check_text_file(meta, inputs['state_prompt_features'], text_file) \
        and count == meta['num_parameters']
    print(f'parameters: {count:,} (official: {meta["num_parameters"]:,}) '
          f'{"ok" if ok else "MISMATCH"}')
    batch = {k: torch.from_numpy(inputs[k]).float() for k in ('start', 'goal')}
    plan, task = (torch.from_numpy(inputs[k]).long() for k in ('actions', 'tasks'))
    outputs, grads = train_pass(model, batch, plan, task,
                                torch.from_numpy(inputs['visual_features']).float())
    outputs.update(eval_pass(model, batch, plan, task,
                             torch.from_numpy(inputs['viterbi_probe_emissions']).float()))
    tables = {name: getattr(model, name.split('.')[0]).positions[None].numpy()
              for name in OFFICIAL_TABLES}
    rows = (compare_file(fixture / 'outputs.npz', outputs, OUTPUT_TOLERANCE)
            + compare_grads(fixture / 'grads.npz', grads, GRAD_TOLERANCE)
            + compare_file(fixture / 'state_dict.npz', tables, OUTPUT_TOLERANCE,
                           names=OFFICIAL_TABLES))
    return rows, ok
