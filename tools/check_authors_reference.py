"""Check this plugin's ViterbiPlanNet against an oracle fixture of the authors' code.

    .venv/bin/python tools/check_authors_reference.py ../shared/reference/authors_crosstask_t3

Reads ``meta.json`` (format: ``../shared/reference/README.md``), builds the model from this
plugin's config for the fixture's dataset and horizon (``configs/vpn_<dataset>_t<T>.py``, else
``configs/_base_/models/vpn_<dataset>.py``) with the fixture's sizes, converts the authors'
weights, runs the fixture's batch in eval mode (at ``eval_horizon`` when it is shorter than
``horizon``: the authors' cross-horizon rule) and prints, for every array of ``outputs.npz``
(losses included) and every gradient summary of ``grads.npz``, the max abs difference and the
max relative difference (max abs difference / max abs reference). Exits 1 when any relative
difference exceeds 1e-4 (outputs, losses) or 1e-3 (gradients), the parameter count differs, or
(``text_features: authors_clip``) the config's text-feature file is not the fixture's array.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from mmaction.registry import MODELS
from vpn_plugin.data_paths import load_config
from vpn_plugin.models import load_state_features
from vpn_plugin.models.authors import check_reference, compare, read_meta
from vpn_plugin.models.base_planner import num_parameters

REPO = Path(__file__).resolve().parents[1]
TEXT_TOLERANCE = 1e-3  # the shipped arrays are float16
# fixture dataset name -> the config family of this plugin
CONFIG_DATASETS = {'crosstask': 'crosstask', 'crosstask_133': 'crosstask',
                   'crosstask_105': 'crosstask', 'niv': 'niv', 'coin': 'coin'}
# meta.json field -> model config key it must equal
SIZE_FIELDS = {'num_actions': 'num_actions', 'num_tasks': 'num_tasks', 'horizon': 'horizon',
               'feature_dim': 'feature_dim', 'text_dim': 'text_dim', 'embed_dim': 'embed_dim',
               'mlp_ratio': 'mlp_ratio', 'dropout': 'dropout'}


def model_config(meta: dict):
    """This plugin's model config for the fixture, with the fixture's sizes set; prints each
    size that differs from the config (e.g. the 105-action CrossTask taxonomy)."""
    if meta['dataset'] not in CONFIG_DATASETS:
        raise SystemExit(f'meta.json dataset={meta["dataset"]!r} is unknown; expected one of '
                         f'{sorted(CONFIG_DATASETS)}')
    family = CONFIG_DATASETS[meta['dataset']]
    leaf = REPO / f'configs/vpn_{family}_t{meta["horizon"]}.py'
    path = leaf if leaf.is_file() else REPO / f'configs/_base_/models/vpn_{family}.py'
    model = load_config(path).model
    print(f'config: {path.relative_to(REPO)} (type={model.type})')
    for field, key in SIZE_FIELDS.items():
        if model.get(key) != meta[field]:
            print(f'  {key}: config {model.get(key)!r} -> fixture {meta[field]!r}')
            model[key] = meta[field]
    text_file = (model.get('text_embeddings') or {}).get('file')
    if text_file and meta['dataset'] == 'crosstask_105':  # the merged taxonomy's features
        text_file = text_file.replace('clip_133', 'clip_105')
    # the fixture brings its own text features (text_features kind in meta.json)
    model.text_embeddings = None
    model.loss_weights = dict(state=0.0)
    return model, text_file


def check_text_file(fixture: Path, meta: dict, text_file) -> bool:
    """With ``text_features: authors_clip``, the config's shipped array must be the fixture's
    (the authors' CLIP features of this dataset); other kinds are only reported."""
    if meta['text_features'] != 'authors_clip' or not text_file:
        print(f'text features: {meta["text_features"]} (the fixture\'s own are used)')
        return True
    path = Path(text_file) if Path(text_file).is_absolute() else REPO / text_file
    if not path.is_file():
        print(f'text features: config file {text_file} not found here; not compared')
        return True
    with np.load(fixture / 'inputs.npz', allow_pickle=False) as inputs:
        reference = inputs['state_prompt_features']
    diff, rel = compare(reference, load_state_features(file=str(path)).numpy())
    ok = rel <= TEXT_TOLERANCE
    print(f'text features: config {text_file} vs fixture: max abs {diff:.3e}, max rel '
          f'{rel:.3e} {"ok" if ok else "MISMATCH"}')
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('fixture', help='directory with meta.json, inputs.npz, outputs.npz, '
                        'grads.npz, authors_state_dict.npz')
    args = parser.parse_args(argv)
    fixture = Path(args.fixture)
    meta = read_meta(fixture)
    print(f'fixture {fixture}: case={meta.get("case")} dataset={meta["dataset"]} '
          f'N={meta["num_actions"]} K={meta["num_tasks"]} T={meta["horizon"]} '
          f'eval T={meta["eval_horizon"]} B={meta["batch"]} text={meta["text_features"]} '
          f'seed={meta.get("seed")}')
    model_cfg, text_file = model_config(meta)
    model = MODELS.build(model_cfg)
    model.loss_weights['state'] = 1.0  # the fixture's text features are installed below
    count = num_parameters(model)
    ok = check_text_file(fixture, meta, text_file) and count == meta['num_parameters']
    print(f'parameters: {count:,} (authors: {meta["num_parameters"]:,}) '
          f'{"ok" if ok else "MISMATCH"}')
    rows, _ = check_reference(fixture, model)
    width = max(len(row[0]) for row in rows)
    print(f'{"array":<{width}}  {"max abs":>10}  {"max rel":>10}  {"tol":>7}')
    for name, diff, rel, tolerance, row_ok in rows:
        print(f'{name:<{width}}  {diff:10.3e}  {rel:10.3e}  {tolerance:7.0e}'
              f'{"" if row_ok else "  FAIL"}')
        ok &= row_ok
    print('PASS' if ok else 'FAIL: differences beyond tolerance')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
