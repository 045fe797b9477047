"""The main job: ViterbiPlanNet on synthetic features for the real CrossTask annotations.

1. generates synthetic S3D-like features for every CrossTask video (once; reused afterwards),
2. trains ViterbiPlanNet at T=3 with a short schedule (model = last epoch; the validation
   split is held-out TRAINING videos, the test windows are never used for selection),
3. evaluates on the official CrossTask T=3 test windows and prints the metrics table,
4. prints three example plans with action names next to the ground truth.

    .venv/bin/python tools/quickstart.py [--epochs 30] [--work-dir work_dirs/quickstart]
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py)
from vpn_plugin.errors import (POSITIVE_INT, check_folder_target, parse_once, path_argument,
                               seed_argument, tool_main)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = 'configs/synthetic/vpn_crosstask_t3_quickstart.py'
METRICS = (('success_rate', 'Success rate (SR)'), ('mean_accuracy', 'Mean accuracy (mAcc)'),
           ('miou_set', 'mIoU (set)'), ('miou_legacy', 'mIoU (legacy formula)'),
           ('first_accuracy', 'First-step accuracy'), ('last_accuracy', 'Last-step accuracy'))


# the defaults are relative to the repository (the job runs there); paths a user gives are
# relative to the directory the command was started in
DEFAULTS = dict(config=CONFIG, data_root='../shared/data', features='data/synthetic/crosstask',
                work_dir='work_dirs/quickstart')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config', type=path_argument, help=f'default: {CONFIG}')
    parser.add_argument('--data-root', type=path_argument,
                        help=f'default: {DEFAULTS["data_root"]} (from the repository)')
    parser.add_argument('--features', type=path_argument,
                        help='synthetic feature folder (generated when missing; default: '
                        f'{DEFAULTS["features"]})')
    parser.add_argument('--work-dir', type=path_argument,
                        help=f'default: {DEFAULTS["work_dir"]}')
    parser.add_argument('--epochs', type=POSITIVE_INT, help='override the schedule length')
    parser.add_argument('--seed', type=seed_argument, default=0)
    parser.add_argument('--threads', type=POSITIVE_INT, default=1,
                        help='torch intra-op threads (1 is fastest for this small model on a '
                        'busy 2-core CPU)')
    args = parse_once(parser, argv)
    for name, default in DEFAULTS.items():
        given = getattr(args, name)
        setattr(args, name, str(Path(given).absolute()) if given else default)
    return args


class Progress:
    def __init__(self, total_steps: int):
        self.begin, self.total = time.time(), total_steps

    def step(self, number: int, text: str):
        print(f'\n[{number}/{self.total}] {text}  (t={time.time() - self.begin:.0f}s)',
              flush=True)


DATASET_LABELS = dict(crosstask='CrossTask', niv='NIV', coin='COIN')


def config_dataset(cfg) -> str:
    """The folder name of the config's test annotations ('crosstask' for the quickstart
    config): what the features are made for and what the results table says (another
    --config trained NIV under the title 'CrossTask T=3')."""
    dataset = (cfg.get('test_dataloader') or {}).get('dataset') or {}
    return Path(str(dataset.get('data_root', 'crosstask'))).name


def ensure_features(data_root: str, out: str, dataset: str, config: str):
    """Generate the synthetic features unless the folder already holds them (a dataset of
    the shared layout by its name, any other by the config's videos)."""
    from vpn_plugin.datasets.provenance import read_record
    feature_dir = Path(out) / 'features'
    if feature_dir.is_dir() and any(feature_dir.iterdir()):
        made_for = read_record(feature_dir).get('dataset')
        if made_for not in (None, dataset):
            raise SystemExit(f'--features {out}: {feature_dir} holds synthetic features of '
                             f"dataset '{made_for}' ({feature_dir / 'provenance.json'}); this "
                             f"config reads '{dataset}': give another --features folder")
        print(f'features found in {feature_dir}, reusing them (what they are: the "features:" '
              'line of the results)')
        return
    source = ['--dataset', dataset] if dataset in DATASET_LABELS else ['--config', config]
    command = [sys.executable, str(ROOT / 'tools/make_synthetic_features.py'), *source,
               '--data-root', data_root, '--out', out]
    print(' '.join(command), flush=True)
    status = subprocess.run(command, cwd=ROOT).returncode
    if status:
        raise SystemExit(f'make_synthetic_features.py stopped (exit status {status}): its '
                         'error is above; nothing was trained')


def build_config(args):
    from vpn_plugin.data_paths import load_config
    cfg = load_config(ROOT / args.config, data_root=args.data_root,
                      feature_dir=str(Path(args.features) / 'features'))
    cfg.work_dir = args.work_dir
    cfg.randomness = dict(seed=args.seed, deterministic=False)
    if args.epochs:
        cfg.train_cfg.max_epochs = args.epochs
    return cfg


def print_table(metrics: dict, epochs: int, features: dict, title: str):
    """The metrics, under a title naming what the model was trained and tested on (the
    feature folder's provenance record: another folder given with --features is named as
    what it is, never called synthetic)."""
    kind = 'synthetic features' if features.get('kind') == 'synthetic' else \
        f'{features.get("kind", "unknown")} features'
    print(f'\n{title}, {kind}, {epochs} epochs, official test windows')
    print(f'features: {features.get("label", "not recorded")}')
    print(f'{"metric":<26}{"value (%)":>10}')
    print('-' * 36)
    for key, label in METRICS:
        value = next((v for k, v in metrics.items() if k.split('/')[-1] == key), None)
        print(f'{label:<26}{"n/a" if value is None else f"{value:10.2f}":>10}')


def example_indices(dataset, count: int = 3):
    """``count`` test samples of different tasks, spread over the test set."""
    picked, tasks = [], set()
    step = max(1, len(dataset) // (4 * count))
    for i in range(0, len(dataset), step):
        if int(dataset.tasks[i]) not in tasks:
            picked.append(i)
            tasks.add(int(dataset.tasks[i]))
        if len(picked) == count:
            break
    return picked


@tool_main
def main(argv=None):
    args = parse_args(argv)
    os.chdir(ROOT)
    progress = Progress(4)
    import vpn_plugin.mm  # noqa: F401  (compat + registration)
    cfg = build_config(args)
    check_folder_target(args.work_dir)  # before minutes of feature generation
    dataset_name = config_dataset(cfg)
    label = DATASET_LABELS.get(dataset_name, dataset_name)
    title = f'{cfg.model.type}, {label} T={cfg.model.get("horizon", cfg.get("horizon"))}'
    progress.step(1, f'synthetic features for the real {label} annotations')
    if not (Path(args.data_root) / dataset_name).is_dir():
        raise SystemExit(f'{label} annotations (of --config {args.config}) not found in '
                         f'{args.data_root}/{dataset_name}; pass --data-root (the shared data '
                         'folder)')
    ensure_features(args.data_root, args.features, dataset_name, str(ROOT / args.config))

    progress.step(2, f'training {title} with the mmengine Runner')
    import torch
    from mmengine.model import is_model_wrapper
    from vpn_plugin.runner import build_runner
    torch.set_num_threads(args.threads)
    from vpn_plugin.apis import inference_planner
    from vpn_plugin.models.plan_display import format_plan
    runner = build_runner(cfg)
    runner.train()

    progress.step(3, 'evaluating the last-epoch model on the official test windows')
    metrics = runner.test()
    from vpn_plugin.protocol.runner import read_features
    print_table(metrics, cfg.train_cfg.max_epochs, read_features(runner.test_dataloader),
                title)

    progress.step(4, 'example plans (predicted | ground truth)')
    dataset = runner.test_dataloader.dataset
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    for sample in inference_planner(model, dataset, example_indices(dataset)):
        print('\n'.join(format_plan(sample, dataset.taxonomy)))
        print()
    print(f'done in {time.time() - progress.begin:.0f}s; checkpoints and logs in '
          f'{args.work_dir}')


if __name__ == '__main__':
    main()
