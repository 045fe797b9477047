"""CEFITO (visinf/cefito, read file by file): its README's scripts, against ours.

The official run, per seed, in a copy of the checkout (``src/`` on ``PYTHONPATH``, its
``configs/niv_t3.yaml`` with ``--set`` overrides and a paths file of our data):

1. ``classifier``: ``scripts/train_task_classifier.py`` trains the task classifier and tests it
   on ``val_json`` (the test windows) after every epoch, saving only the best test top-1
   (**test-set selection**: no last-epoch checkpoint exists); the NIV config has no
   ``task_classifier`` section, so the recipe of the official CrossTask/COIN configs (150
   epochs, lr 3e-4, wd 0.01, batch 256) runs, as ours;
2. ``predict``: ``scripts/predict_task_labels.py`` stamps its predictions
   (``event_class_top1``) into the test windows;
3. ``train``: ``scripts/train.py`` with ``eval.oracle_task=false`` (the NIV config plans with
   the **ground-truth task**, an official defect; here the classifier's prediction, as ours),
   testing the EMA with the full search every 3 epochs on the test windows and keeping the
   best success rate (**test-set selection**).

The official NIV recipe otherwise (batch 32, lr 5e-5, wd 1e-3, EMA 0.995 from step 400 every 10,
margins 0.01 / 0.1, 50 negatives), except ``train.epochs``, the seeds and the data. Both sides
read the same action-name features: the MiniLM stand-in ours computes (no CLIP checkpoint
here), written as the official ``action_embeddings.npy`` dict.

Ours: ``configs/baselines/cefito_niv_t{T}.py`` with those features as a file, every training
window (no held-out validation: the task classifier keeps its last epoch), the last epoch
tested.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from .framework import Change, ComparisonData, Method, Settings, SideRun, Stage
from .pdpp import our_classifier_curve, window_json

CONFIG = 'configs/niv_t{T}.yaml'
OFFICIAL_EPOCHS = 200
# the recipe of configs/crosstask_t3.yaml's task_classifier section (ours for every dataset;
# its epochs are the size 'classifier_epochs')
CLASSIFIER = {'task_classifier.batch_size': 256, 'task_classifier.lr': 3e-4,
              'task_classifier.weight_decay': 0.01}

NUMBER = r'(-?[\d.]+|nan|inf)'
EPOCH_START = re.compile(r'\] epoch (\d+)/\d+$')
EPOCH_LOSS = re.compile(r'\] epoch (\d+): train loss ' + NUMBER + r' \| val loss')
EPOCH_TEST = re.compile(r'\] epoch (\d+): SR ' + NUMBER + r' \| mAcc ' + NUMBER + r' \| mIoU '
                        + NUMBER)
CLASSIFIER_EPOCH = re.compile(r'\] epoch (\d+)/\d+: loss ' + NUMBER + r' \| val top-1 ' + NUMBER)
SAMPLES = re.compile(r'train samples: (\d+) \| val samples: (\d+)')


class Cefito(Method):
    name = 'cefito'
    label = 'CEFITO'
    repository = 'visinf/cefito'
    entry = 'scripts/train.py'
    required = ('scripts/train.py', 'scripts/train_task_classifier.py',
                'scripts/predict_task_labels.py', 'src/cefito/config.py',
                'src/cefito/data/dataset.py', 'src/cefito/models/cefito.py', 'configs/niv_t3.yaml')
    datasets = ('niv',)
    sizes = {'classifier_epochs': (150, 'epochs of the task classifier (--set '
                                         'task_classifier.epochs; ours: TaskClassifierHook '
                                         'max_epochs)'),
             'hidden_dim': (384, 'predictor width H (--set model.hidden_dim; ours: '
                                 'model.hidden_dim)'),
             'depth': (4, 'predictor blocks (--set model.depth; ours: model.depth)'),
             'num_heads': (6, 'attention heads (--set model.num_heads; ours: model.num_heads)'),
             'num_negatives': (50, 'negatives per window (--set loss.num_negatives; ours: '
                                   'model.num_negatives)')}
    # size -> (official --set key, our config key); classifier_epochs is set apart
    SIZE_KEYS = {'hidden_dim': ('model.hidden_dim', 'model.hidden_dim'),
                 'depth': ('model.depth', 'model.depth'),
                 'num_heads': ('model.num_heads', 'model.num_heads'),
                 'num_negatives': ('loss.num_negatives', 'model.num_negatives')}
    shims = ()
    loss_names = ('total',)
    variants = {'oracle_task': 'scripts/train.py rerun with --set eval.oracle_task=true (as '
                               'niv_t3.yaml: the test windows planned with the ground-truth '
                               'task, an official defect), the rest of its command unchanged'}

    def check_settings(self, settings: Settings) -> None:
        super().check_settings(settings)
        if settings.epochs % 3:
            raise ValueError(f'--epochs {settings.epochs}: the official training tests every '
                             '3 epochs; give a multiple of 3 so that its last epoch is tested')

    # ------------------------------------------------------------------ official side
    def official_changes(self, settings: Settings) -> list[Change]:
        return [Change('epochs', f'--set train.epochs={settings.epochs} (niv_t3.yaml: '
                       f'{OFFICIAL_EPOCHS}); its test pass every 3 epochs unchanged'),
                Change('data', '--set train.seed / task_classifier.seed = <seed>, run_name '
                       'seed<s>, output_dir <run dir>/runs; --paths: a paths file of our data'),
                Change('data', '--set eval.oracle_task=false: the test windows planned with '
                       'the classifier\'s predicted task (niv_t3.yaml plans with the true '
                       'task, an official defect; ours plans with the prediction)'),
                Change('data', '--set ' + ' '.join(f'{k}={v}' for k, v in CLASSIFIER.items())
                       + f' task_classifier.epochs={self.size(settings, "classifier_epochs")}'
                       ': niv_t3.yaml has no task_classifier section (defaults 20 epochs, '
                       'lr 1e-4, wd 0); the recipe of the official CrossTask/COIN configs '
                       '(150 epochs), as ours'),
                Change('environment', 'PYTHONPATH=<copy>/src (the README installs the '
                       'package with `uv pip install -e .`)')] + [
            Change('size', f'--set {self.SIZE_KEYS[name][0]}={settings.sizes[name]} '
                   f'(niv_t3.yaml: {self.sizes[name][0]})')
            for name in sorted(settings.sizes) if name in self.SIZE_KEYS]

    def prepare_official(self, copy_dir: Path, data: ComparisonData,
                         settings: Settings) -> list[Change]:
        out = data.official_dir
        for split in ('train', 'test'):
            (out / f'cefito_{split}.json').write_text(json.dumps(
                window_json(data.windows[split], data.feature_dir, data.taxonomy)))
        features = action_features(data)
        np.save(out / 'cefito_actions.npy', features)  # ours: a plain (N, Dt) array
        np.save(out / 'cefito_action_embeddings.npy',  # theirs: {action id: vector}
                {i: row for i, row in enumerate(features)}, allow_pickle=True)
        return [Change('data', f'--paths: train_json / val_json {out}/cefito_{{train,test}}'
                       '.json (the unified windows in its loader\'s format), taxonomy '
                       f'{data.data_root}/niv/taxonomy.json (the same format), '
                       f'action_embeddings {out}/cefito_action_embeddings.npy'),
                Change('data', 'action-name features: the MiniLM stand-in (384-d, '
                       'mean-pooled, zero-padded to 512) on both sides; the paper\'s are '
                       'CLIP ViT-B/32, which cannot be downloaded here'),
                Change('data', f'features: {data.feature_dir} (synthetic, public layout)')]

    def official_commands(self, copy_dir, data, settings, seed, run_dir):
        config = CONFIG.format(T=settings.horizon)
        test = data.official_dir / 'cefito_test.json'
        stamped = run_dir / 'test_with_predictions.json'
        env = dict(PYTHONPATH=copy_dir / 'src')
        common = ['--set', f'run_name=seed{seed}', '--set', f'output_dir={run_dir}/runs']
        paths = write_paths(run_dir / 'paths.yaml', data, test)
        yield Stage('classifier', [
            'scripts/train_task_classifier.py', config, '--paths', paths, *common,
            '--set', f'task_classifier.seed={seed}',
            '--set', f'task_classifier.epochs={self.size(settings, "classifier_epochs")}',
            *[a for k, v in CLASSIFIER.items() for a in ('--set', f'{k}={v}')],
            '--output', run_dir / 'task_classifier.pth'], env)
        yield Stage('predict', [
            'scripts/predict_task_labels.py', config, '--paths', paths, '--checkpoint',
            run_dir / 'task_classifier.pth', '--source', test, '--output', stamped], env)
        yield self.train_stage('train', copy_dir, data, settings, seed, run_dir,
                               oracle_task=False)

    def train_stage(self, name: str, copy_dir, data, settings, seed, run_dir,
                    oracle_task: bool) -> Stage:
        """``scripts/train.py`` on the test windows stamped by ``predict``, planning with the
        predicted (``oracle_task=False``) or the ground-truth task; outputs under
        ``<run dir>/runs`` (``runs_<name>`` for a variant)."""
        config = CONFIG.format(T=settings.horizon)
        output = 'runs' if name == 'train' else f'runs_{name}'
        paths = write_paths(run_dir / 'paths_predicted.yaml', data,
                            run_dir / 'test_with_predictions.json')
        return Stage(name, [
            self.entry, config, '--paths', paths, '--set', f'run_name=seed{seed}',
            '--set', f'output_dir={run_dir}/{output}', '--set', f'train.epochs={settings.epochs}',
            '--set', f'train.seed={seed}', '--set', f'eval.oracle_task={str(oracle_task).lower()}',
            *[a for name, (key, _) in self.SIZE_KEYS.items() if name in settings.sizes
              for a in ('--set', f'{key}={settings.sizes[name]}')]],
            dict(PYTHONPATH=copy_dir / 'src'))

    def variant_stages(self, variant, copy_dir, data, settings, seed, run_dir):
        yield self.train_stage(f'train_{variant}', copy_dir, data, settings, seed, run_dir,
                               oracle_task=True)

    def read_variant(self, variant, records, run_dir, settings, seed, main) -> SideRun:
        run = read_train_log(records[f'train_{variant}'], settings.epochs, seed)
        run.side = f'official ({variant})'
        # the same training (only the test pass plans differently): its losses must agree
        difference = max(abs(a - b) for a, b in zip(run.losses['total'],
                                                    main.losses['total']))
        run.stages = dict(check=dict(max_loss_difference_to_main_run=difference))
        return run

    def epoch_finished(self, line: str) -> bool:
        return EPOCH_LOSS.search(line) is not None

    def read_official(self, records, copy_dir, run_dir, settings, seed, data) -> SideRun:
        run = read_train_log(records['train'], settings.epochs, seed)
        run.stages = dict(classifier=read_classifier_log(records['classifier'],
                                                         records['predict']))
        return run

    # ------------------------------------------------------------------ our side
    def our_run(self, data: ComparisonData, settings: Settings) -> dict:
        config = f'configs/baselines/cefito_niv_t{settings.horizon}.py'
        return dict(config=config,
                    cfg_options={'train_dataloader.dataset.val_fraction': 0.0,
                                 'val_dataloader': None, 'val_cfg': None,
                                 'val_evaluator': None,
                                 'model.text_embeddings.file':
                                     str(data.official_dir / 'cefito_actions.npy'),
                                 'model.text_embeddings.taxonomy': None,
                                 'model.text_embeddings.pad_to': None,
                                 'custom_hooks': classifier_epochs(
                                     config, self.size(settings, 'classifier_epochs')),
                                 **{ours: settings.sizes[name]
                                    for name, (_, ours) in self.SIZE_KEYS.items()
                                    if name in settings.sizes}})

    def our_losses(self, logged: dict) -> dict:
        return dict(total=logged['loss'])

    def our_stages(self, work_dir: Path) -> dict:
        return dict(classifier=our_classifier_curve(work_dir))


def classifier_epochs(config: str, epochs: int) -> list:
    """The config's ``custom_hooks`` with ``TaskClassifierHook(max_epochs=epochs)``."""
    from vpn_plugin.data_paths import REPO_ROOT, load_config
    hooks = load_config(REPO_ROOT / config).custom_hooks
    return [dict(hook, max_epochs=epochs) if hook['type'] == 'TaskClassifierHook' else hook
            for hook in hooks]


def action_features(data: ComparisonData) -> np.ndarray:
    """(N, 512) float32: our configs' action-name features (the MiniLM stand-in, padded)."""
    from vpn_plugin.models.text_embeddings import load_action_features
    features = load_action_features(taxonomy=str(data.data_root / 'niv/taxonomy.json'),
                                    encoder=None, pooling='mean', pad_to=512,
                                    cache_dir=str(data.cache_dir))
    return features.numpy().astype(np.float32)


def write_paths(path: Path, data: ComparisonData, val_json: Path) -> Path:
    """The official ``paths.yaml`` entry of NIV, pointing at our files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = data.official_dir
    entry = dict(root=str(out), train_json=str(out / 'cefito_train.json'),
                 val_json=str(val_json), taxonomy=str(data.data_root / 'niv/taxonomy.json'),
                 action_embeddings=str(out / 'cefito_action_embeddings.npy'), feature_root=None)
    path.write_text(json.dumps(dict(niv=entry), indent=1))  # JSON is YAML
    return path


def read_train_log(records: list, epochs: int, seed: int) -> SideRun:
    """A :class:`SideRun` from ``scripts/train.py``'s lines: per epoch 'epoch N/E' (start),
    'epoch N: train loss .. | val loss ..' (after training and its validation-loss pass) and,
    every 3rd, 'epoch N: SR .. | mAcc .. | mIoU ..' (after the full search on the test
    windows)."""
    starts, ends, losses, tests, windows = {}, {}, {}, {}, None
    for moment, line in records:
        if (match := SAMPLES.search(line)):
            windows = dict(train=int(match[1]), test=int(match[2]))
        elif (match := EPOCH_START.search(line)):
            starts[int(match[1])] = moment
        elif (match := EPOCH_LOSS.search(line)):
            ends[int(match[1])], losses[int(match[1])] = moment, float(match[2])
        elif (match := EPOCH_TEST.search(line)):
            tests[int(match[1])] = (moment, tuple(float(v) for v in match.groups()[1:]))
    if sorted(losses) != list(range(1, epochs + 1)) or windows is None:
        raise ValueError(f'the official CEFITO log holds epochs {sorted(losses)}; expected '
                         f'1..{epochs}')
    if epochs not in tests:
        raise ValueError(f'the official CEFITO training tests every 3 epochs; epoch {epochs} '
                         'was not tested (give --epochs a multiple of 3)')
    scores = {e: dict(zip(('success_rate', 'mean_accuracy', 'miou_legacy'), v))
              for e, (_, v) in tests.items()}
    best = max(sorted(scores), key=lambda e: (scores[e]['success_rate'],
                                              scores[e]['mean_accuracy']))
    return SideRun('official', seed, dict(total=[losses[e] for e in range(1, epochs + 1)]),
                   [ends[e] - starts[e] for e in range(1, epochs + 1)], scores[epochs], windows,
                   eval_seconds=[moment - ends[e] for e, (moment, _) in sorted(tests.items())],
                   selected=scores[best], selected_epoch=best,
                   selection='the test pass of the best success rate (scripts/train.py tests '
                             'every 3 epochs on the test windows and keeps it as best.pth)')


def read_classifier_log(records: list, predict_records: list) -> dict:
    """The task classifier: per-epoch losses and seconds, its test top-1 at the last epoch and
    at the epoch it keeps (the best), and the accuracy of the stamped predictions."""
    epochs = [(moment, int(m[1]), float(m[2]), float(m[3])) for moment, line in records
              if (m := CLASSIFIER_EPOCH.search(line))]
    if not epochs:
        raise ValueError('the official task classifier printed no epoch line')
    times = [moment for moment, *_ in epochs]
    first = next(moment for moment, line in records if 'train ' in line and ' samples' in line)
    best = max(epochs, key=lambda e: (e[3], -e[1]))  # strictly better only: the first best
    return dict(losses=[loss for *_, loss, _ in epochs],
                seconds=[b - a for a, b in zip([first] + times[:-1], times)],
                accuracy=epochs[-1][3], selected_accuracy=best[3], selected_epoch=best[1])


METHOD = Cefito()
