"""Train a method by its official script and by this plugin on the same data; compare the runs.

    git clone https://github.com/WenliangGuo/SCHEMA /tmp/SCHEMA   # the official checkout
    nice .venv/bin/python tools/compare_official_training.py --method schema \
        --official-dir /tmp/SCHEMA --official-python /tmp/official_venv/bin/python \
        --dataset niv --epochs 60 --seeds 0 1 2 --out work_dirs/official/schema_niv

Writes synthetic features (public layout) and the unified splits in the official loader's
format, runs the official training script unchanged except for data paths, sizes and epochs
(each change is listed), runs ours on the same features and windows (the protocol runner), one
seed after the other, alternating the sides, and prints per-epoch training losses, the final
SR / mAcc / mIoU of both with 90% bootstrap CIs over seeds and Δ = ours - official (``*``:
beyond seed noise), and seconds per training epoch of each. ``--rescore-with-ours`` (KEPP) also
scores the official run's final weights with our evaluator (a third table: both trainings under
one evaluator). ``<out>/comparison.md`` and
``.json`` hold the same, ``<out>/loss_curves.{png,pdf}`` the loss curves (``--figure STEM``
elsewhere). Resumable: a finished side of a seed is reused by a rerun with the same settings.
Nothing of the official checkout is copied into this repository (its copy lives in ``<out>``).
The official code's own dependencies go into a venv of their own (``--official-python``; see
docs/reproducibility.md). Plug-ins: ``vpn_plugin/protocol/official/<method>.py``.
"""
import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vpn_plugin.errors import (NON_NEGATIVE_INT, POSITIVE_INT, at_least, parse_once,  # noqa: E402
                               path_argument, tool_main)
from vpn_plugin.tool_choices import OFFICIAL_METHODS  # noqa: E402
# vpn_plugin.mm (compat fixes + registration before configs are read) and the comparison are
# imported after the arguments are parsed (--help and refusals answer in ~0.1 s;
# tests/test_import_purity.py)


def size_option(text: str) -> tuple:
    name, sep, value = text.partition('=')
    if not sep or not name:
        raise argparse.ArgumentTypeError(f'{text!r}: expected NAME=VALUE, e.g. batch_size=64')
    try:
        return name, int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r}: {value!r} is not an integer') from None


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--method', required=True, choices=OFFICIAL_METHODS)
    parser.add_argument('--official-dir', type=path_argument, required=True,
                        help='checkout of the official repository (never modified: a copy runs)')
    parser.add_argument('--official-python', type=path_argument,
                        help='python of the official runs (a venv with their dependencies; '
                        'default: this one)')
    parser.add_argument('--dataset', default='niv')
    parser.add_argument('--horizon', type=POSITIVE_INT, default=3)
    parser.add_argument('--epochs', type=POSITIVE_INT, required=True)
    parser.add_argument('--seeds', type=NON_NEGATIVE_INT, nargs='+', default=[0, 1, 2])
    parser.add_argument('--threads', type=POSITIVE_INT, default=1,
                        help='torch threads of each side (default 1)')
    parser.add_argument('--size', type=size_option, action='append', default=[],
                        metavar='NAME=VALUE', help="a size both sides set (the plug-in's "
                        "sizes; default: the official script's)")
    parser.add_argument('--difficulty', type=at_least(float, 0.0, high=1.0), default=0.5,
                        help='synthetic features (tools/make_synthetic_features.py)')
    parser.add_argument('--feature-seed', type=NON_NEGATIVE_INT, default=0)
    parser.add_argument('--frame-dim', type=POSITIVE_INT, default=512,
                        help='dims of a synthetic frame (default 512, as S3D); observations '
                        'are 3 frames (PDPP and KEPP only: smaller models for CPU runs)')
    parser.add_argument('--data-root', type=path_argument, default='../shared/data',
                        help='annotations laid out as ../shared/data')
    parser.add_argument('--out', type=path_argument, required=True,
                        help='work folder of the comparison')
    parser.add_argument('--figure', type=path_argument,
                        help='stem of the loss-curve figure (default <out>/loss_curves)')
    parser.add_argument('--official-variant', action='append', default=[], metavar='NAME',
                        help="also rerun the official side with one of the plug-in's "
                        'variants (an official default it does not inherit switched back on, '
                        'e.g. cefito oracle_task) and compare it with the main official run')
    parser.add_argument('--rescore-with-ours', action='store_true',
                        help='also score the official run\'s final weights with our evaluator '
                        '(loaded into our model; kepp): a third table compares both trainings '
                        'under one evaluator')
    return parse_once(parser, argv)


def report(method, result: dict, settings) -> str:
    """The comparison as Markdown: settings (``framework.Settings``), changes, losses, metrics,
    speed."""
    from vpn_plugin.outputs import markdown_text
    from vpn_plugin.protocol.official import summary
    # the changes name the user's folders (--out) and placeholders (<copy>, <seed>): text, not
    # markup (a raw <copy> is an HTML tag GitHub hides, a '_' or '*' of a path emphasis)
    changes = '\n'.join(f'- {markdown_text(c.line())}' for c in result['changes'])
    return '\n'.join([
        '## ' + markdown_text(f'{method.label}: official training vs ours, {settings.dataset} '
                              f'T={settings.horizon}'),
        '', markdown_text(f'settings: {json.dumps(dataclasses.asdict(settings))}'), '',
        'changes against the official run:', changes, '',
        'training loss per epoch (mean ± 90% bootstrap CI width over seeds):', '',
        summary.loss_table(summary.loss_curves(result, method.loss_names), method.loss_names,
                           settings.epochs),
        f'test metrics after {settings.epochs} epochs:', '',
        summary.metric_table(method.label, result, settings, method.metrics),
        summary.speed_lines(result)]
        + [summary.stage_text(result, stage) for stage in summary.stage_names(result)]
        + [summary.check_lines(result),
           summary.variant_text(method.label, result, settings, method.metrics),
           summary.rescore_text(method.label, result, settings, method.metrics)])


@tool_main
def main(argv=None):
    args = parse_args(argv)
    import vpn_plugin.mm  # noqa: F401  (compat fixes + registration before configs are read)
    from vpn_plugin.protocol.official import load_method, summary
    from vpn_plugin.protocol.official.framework import Settings, compare, python_of
    method = load_method(args.method)
    settings = Settings(args.method, args.dataset, args.horizon, args.epochs, args.seeds,
                        args.threads, args.difficulty, args.feature_seed, dict(args.size),
                        frame_dim=args.frame_dim)
    import torch
    torch.set_num_threads(args.threads)
    result = compare(method, args.official_dir, args.out, settings,
                     python=python_of(args.official_python), shared_root=args.data_root,
                     variants=args.official_variant, rescore=args.rescore_with_ours)
    out = Path(args.out)
    text = report(method, result, settings)
    figure = summary.plot_losses(method.label, result, args.figure or out / 'loss_curves')
    (out / 'comparison.md').write_text(text)
    (out / 'comparison.json').write_text(json.dumps(dict(
        settings=dataclasses.asdict(settings), changes=[c.line() for c in result['changes']],
        speed=summary.speed(result),
        runs={side: [dataclasses.asdict(r) for r in result[side]]
              for side in ('official', 'ours')},
        variants={name: [dataclasses.asdict(r) for r in runs]
                  for name, runs in result.get('variants', {}).items()},
        rescored=[dataclasses.asdict(r) for r in result.get('rescored', [])]), indent=1))
    print(text)
    print('figure: ' + ', '.join(map(str, figure)))


if __name__ == '__main__':
    main()
