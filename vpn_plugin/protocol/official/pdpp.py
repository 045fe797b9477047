"""PDPP (MCG-NJU/PDPP): its three stages as its README runs them, against ours.

The official run, per seed, in a copy of the checkout (README, "Train"):

1. ``classifier``: ``train_mlp.py`` trains the task classifier (the ``head`` MLP, AdamW 1e-4,
   the warm-up/step schedule over ``--epochs`` x ``--n_train_steps``); every second epoch,
   *before* training it, it tests on ``--json_path_val`` (the test windows) and keeps the
   checkpoint of the best test accuracy in ``save_max_mlp/``: **test-set selection**;
2. ``predict`` (twice): ``temp.py`` writes the test windows with the classifier's predicted
   task (``event_class``); the README says to edit its checkpoint path (line 86) and output
   path (line 111), both empty strings: the copy reads them from ``$VPN_PDPP_CLASSIFIER`` /
   ``$VPN_PDPP_PREDICTIONS`` (the one patch). Run with the last epoch's checkpoint
   (``predict_last``, what the training stage tests with) and the test-selected one
   (``predict_selected``, the official pipeline's, for its accuracy);
3. ``train``: ``main_distributed.py`` trains the diffusion model (U-Net dim 256, EMA) and every
   5 epochs samples the test windows with the EMA weights and the predicted tasks, keeping the
   checkpoint of the best test success rate (**test-set selection** again).

Flags as the README and its NIV settings (50 diffusion steps, lr 3e-4, 130 epochs x 50 steps,
batch 256), except ``--epochs``, ``--n_train_steps``, ``--batch_size`` (sizes), ``--seed``,
data paths, ``--num_thread_reader`` (README: 8; 2 CPU cores here) and
``--multiprocessing-distributed`` (left out: it spawns one process per GPU). Losses, test
metrics and the seconds of each epoch come from its TensorBoard event files.

Ours: ``configs/baselines/pdpp_niv_t{T}.py`` with PDPP's observations ('concat3'), every
training window (no held-out validation: the task classifier keeps its last step, as the
official last epoch), the same batch size and steps, the last epoch tested.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

from .framework import (Change, ComparisonData, Method, Settings, SideRun, Stage, flag_list,
                        read_event_scalars, seconds_between)

# README "Train" + its NIV row (the flags the comparison does not change)
README_NIV = dict(dataset='NIV', action_dim=48, class_dim=5, observation_dim=1536,
                  n_diffusion_steps=50, lr=3e-4, batch_size_val=256, root='dataset/NIV',
                  cudnn_benchmark=1, pin_memory=True, resume=True, evaluate=True)
OFFICIAL = dict(epochs=130, n_train_steps=50, batch_size=256, num_thread_reader=8, seed=217)
TEMP_PATCH = (('torch.load("",', 'torch.load(os.environ["VPN_PDPP_CLASSIFIER"],'),
              ('data_name = ""', 'data_name = os.environ["VPN_PDPP_PREDICTIONS"]'))
ACCURACY = re.compile(r'acc:\s+([\d.]+)')
# official test metric (TensorBoard tag) -> ours: Val/MIoU2 is the per-sample set IoU;
# Val/MIoU1 (one set IoU per test batch of 256) has no counterpart in the table
# the tags as the event files hold them: the scripts log 'Val/EpochAcc@1' through tensorboardX,
# which stores it as 'Val/EpochAcc_1' (characters outside [-/\w.] become '_')
VAL_TAGS = {'success_rate': 'Val/Traj_Success_Rate', 'mean_accuracy': 'Val/EpochAcc_1',
            'miou_set': 'Val/MIoU2'}
WORKERS = 2
UNET_DIM = 256  # TemporalUnet(..., dim=256, ...): a literal in the official scripts


class Pdpp(Method):
    name = 'pdpp'
    label = 'PDPP'
    repository = 'MCG-NJU/PDPP'
    entry = 'main_distributed.py'
    required = ('main_distributed.py', 'train_mlp.py', 'temp.py', 'dataloader/data_load.py',
                'dataloader/data_load_mlp.py', 'data_load_json.py', 'utils/args.py',
                'model/diffusion.py', 'model/temporal.py')
    datasets = ('niv',)
    sizes = {'batch_size': (256, 'batch size of both stages (--batch_size; ours: '
                            'train_dataloader.batch_size)'),
             'n_train_steps': (50, 'steps per epoch of both stages (--n_train_steps; ours: '
                               'train_dataloader.batch_sampler.steps_per_epoch)'),
             'unet_dim': (UNET_DIM, 'width of the temporal U-Net (hard-coded dim=256 in '
                                    'main_distributed.py: patched in the copy; ours: '
                                    'model.dim)')}
    patched_sizes = ('unet_dim',)
    any_frame_dim = True  # --observation_dim 3 x frame dim (ours: model.feature_dim)
    unet_files = ('main_distributed.py',)  # the scripts that build the U-Net
    shims = ('cuda_noop', 'gloo_single_process', 'load_on_cpu')
    metrics = ('success_rate', 'mean_accuracy', 'miou_set')
    loss_names = ('total',)

    # ------------------------------------------------------------------ official side
    def official_changes(self, settings: Settings) -> list[Change]:
        changes = [Change('epochs', f'--epochs {settings.epochs} (README, NIV: 130) for both '
                          'stages; the warm-up/step schedule spans the shortened run'),
                   Change('data', '--seed <seed> per run (default 217), --checkpoint_dir '
                          'seed<s>, --log_root <run dir>/log'),
                   Change('environment', f'--num_thread_reader {WORKERS} (README: 8; 2 CPU '
                          'cores here); --multiprocessing-distributed left out (it spawns '
                          'one process per GPU, none here)'),
                   Change('patch', 'temp.py: its checkpoint path (line 86) and output path '
                          '(line 111), empty strings the README says to edit, read '
                          '$VPN_PDPP_CLASSIFIER / $VPN_PDPP_PREDICTIONS')]
        return changes + self.size_changes(settings, 'README, NIV')

    def prepare_official(self, copy_dir: Path, data: ComparisonData,
                         settings: Settings) -> list[Change]:
        patch_file(copy_dir / 'temp.py', TEMP_PATCH)
        for split in ('train', 'test'):
            (data.official_dir / f'pdpp_{split}.json').write_text(json.dumps(
                window_json(data.windows[split], data.feature_dir, data.taxonomy)))
        return self.unet_dim_patch(copy_dir, settings) + [Change('data', f'--json_path_train {data.official_dir}/pdpp_train.json, '
                       f'--json_path_val (classifier) {data.official_dir}/pdpp_test.json: '
                       "the unified windows in the loader's format (legal_range [start, end, "
                       'action], feature = our file), then the predicted-task file of '
                       'predict_last for the diffusion stage'),
                Change('data', f'features: {data.feature_dir} (synthetic, public layout)')]

    def unet_dim_patch(self, copy_dir: Path, settings: Settings) -> list[Change]:
        """``--size unet_dim=D``: ``dim=256,`` -> ``dim=D,`` in every script that builds the
        U-Net (``unet_files``, so a checkpoint one writes fits the next)."""
        if 'unet_dim' not in settings.sizes:
            return []
        dim = settings.sizes['unet_dim']
        for name in self.unet_files:
            patch_file(copy_dir / name, ((f'dim={UNET_DIM},', f'dim={dim},'),))
        return [Change('patch', f'{", ".join(self.unet_files)}: the temporal U-Net\'s '
                       f'hard-coded dim={UNET_DIM} set to {dim} (size unet_dim; ours: '
                       f'model.dim={dim})')]

    def official_commands(self, copy_dir, data, settings, seed, run_dir):
        # the checkpoints of an earlier seed would be resumed (--resume) or selected
        for folder in ('checkpoint_mlp', 'checkpoint'):
            shutil.rmtree(copy_dir / folder / f'seed{seed}', ignore_errors=True)
        for folder in ('save_max_mlp', 'save_max'):
            for path in (copy_dir / folder).glob('epoch*.pth.tar'):
                path.unlink()
        common = dict(README_NIV, observation_dim=3 * settings.frame_dim,
                      horizon=settings.horizon, epochs=settings.epochs,
                      n_train_steps=self.size(settings, 'n_train_steps'),
                      batch_size=self.size(settings, 'batch_size'),
                      num_thread_reader=WORKERS, seed=seed, checkpoint_dir=f'seed{seed}',
                      log_root=run_dir / 'log',
                      json_path_train=data.official_dir / 'pdpp_train.json',
                      json_path_val=data.official_dir / 'pdpp_test.json')
        yield Stage('classifier', ['train_mlp.py', *flag_list(common)])
        last = copy_dir / f'checkpoint_mlp/seed{seed}/epoch{settings.epochs:04d}.pth.tar'
        selected = sorted((copy_dir / 'save_max_mlp').glob('epoch*.pth.tar'))
        for stage, checkpoint in (('predict_last', last), ('predict_selected', selected[-1])):
            yield Stage(stage, ['temp.py', *flag_list(common)], dict(
                VPN_PDPP_CLASSIFIER=checkpoint, VPN_PDPP_PREDICTIONS=run_dir / f'{stage}.json'))
        yield Stage('train', [self.entry, *flag_list(dict(
            common, json_path_val=run_dir / 'predict_last.json'))])

    def official_epochs_done(self, records: list, run_dir: Path) -> int:
        folders = event_folders(run_dir, 'log_2')
        return len(read_event_scalars(folders[-1]).get('Train/EpochLoss', [])) if folders else 0

    def check_settings(self, settings: Settings) -> None:
        super().check_settings(settings)
        if settings.epochs % 5:
            raise ValueError(f'--epochs {settings.epochs}: the official training tests every '
                             '5 epochs; give a multiple of 5 so that its last epoch is tested')

    def read_official(self, records, copy_dir, run_dir, settings, seed, data) -> SideRun:
        windows = dict(train=len(json.loads((data.official_dir / 'pdpp_train.json').read_text())),
                       test=len(json.loads((run_dir / 'predict_last.json').read_text())))
        run = read_diffusion_training(event_folders(run_dir, 'log_2')[-1], records['train'],
                                      settings.epochs, seed, windows)
        run.selection += '; the task classifier of the last epoch'
        run.stages = dict(classifier=read_classifier_stage(records, run_dir, settings.epochs))
        return run

    # ------------------------------------------------------------------ our side
    def our_run(self, data: ComparisonData, settings: Settings) -> dict:
        options = {'train_dataloader.dataset.val_fraction': 0.0,
                   'val_dataloader': None, 'val_cfg': None, 'val_evaluator': None,
                   'train_dataloader.batch_size': self.size(settings, 'batch_size'),
                   'train_dataloader.batch_sampler.steps_per_epoch':
                       self.size(settings, 'n_train_steps'),
                   'model.dim': self.size(settings, 'unet_dim')}
        for split in ('train', 'test'):
            options[f'{split}_dataloader.dataset.observation'] = 'concat3'
        options.update(frame_dim_options(settings))
        return dict(config=f'configs/baselines/pdpp_niv_t{settings.horizon}.py',
                    cfg_options=options)

    def our_losses(self, logged: dict) -> dict:
        return dict(total=logged['loss'])

    def our_stages(self, work_dir: Path) -> dict:
        return dict(classifier=our_classifier_curve(work_dir))


def frame_dim_options(settings: Settings) -> dict:
    """Our cfg_options for ``--frame-dim`` other than 512: the datasets' frame dim and the
    model's observation dim (3 frames)."""
    if settings.frame_dim == 512:
        return {}
    return {'model.feature_dim': 3 * settings.frame_dim,
            **{f'{split}_dataloader.dataset.frame_dim': settings.frame_dim
               for split in ('train', 'test')}}


def patch_file(path: Path, replacements) -> None:
    """Apply ``(old, new)`` or ``(old, new, count)`` replacements; ``old`` must occur exactly
    ``count`` times (default once), else the checkout is not the one the patch is for."""
    text = path.read_text()
    for old, new, *count in replacements:
        count = count[0] if count else 1
        if text.count(old) != count:
            raise ValueError(f'{path}: expected {count} x {old!r} to patch, found '
                             f'{text.count(old)}; is this the official checkout?')
        text = text.replace(old, new)
    path.write_text(text)


def window_json(windows, feature_dir: Path, taxonomy) -> list:
    """Windows in PDPP's loader format (the unified window format, feature = our file)."""
    return [dict(id=dict(vid=w.vid, feature=str(feature_dir / f'{w.feature}.npy'),
                         legal_range=[[s, e, a] for (s, e), a in zip(w.times, w.steps)],
                         task_id=w.task, task_name=taxonomy.task_names[w.task]),
                 instruction_len=w.video_num_steps) for w in windows]


def event_folders(run_dir: Path, prefix: str) -> list:
    """The SummaryWriter folders ``<run dir>/log<suffix>_<time>_<dataset>`` of a stage
    (``log_mlp_``: the classifier; ``log_2``: the diffusion, whose time starts with 2)."""
    return sorted(p for p in Path(run_dir).glob(f'{prefix}*') if p.is_dir())


def logging_started(records: list) -> float:
    """Time of the stage's 'logging outputs to' line (its Logger: the loop starts)."""
    times = [t for t, line in records if line.startswith('logging outputs to')]
    if not times:
        raise ValueError('the official stage printed no "logging outputs to" line')
    return times[-1]


def our_classifier_curve(work_dir: Path) -> dict:
    """``{losses, seconds}`` per epoch of the task classifier our run trained (the record
    ``TaskClassifierHook`` saves beside its weights; PDPP's and CEFITO's)."""
    from vpn_plugin.engine.pdpp_training import CLASSIFIER_FILE
    saved = torch.load(Path(work_dir) / CLASSIFIER_FILE, map_location='cpu', weights_only=True)
    record, = saved['records'].values()
    return dict(losses=record['epoch_losses'], seconds=record['epoch_seconds'])


def value_at(events: dict, tag: str, step: int) -> float:
    return next(value for _, s, value in events[tag] if s == step)


def train_wall(events: dict, step: int) -> float:
    return next(wall for wall, s, _ in events['Train/EpochLoss'] if s == step)


def read_diffusion_training(folder: Path, records: list, epochs: int, seed: int,
                            windows: dict) -> SideRun:
    """The official side of a PDPP-style ``main_distributed.py`` run (PDPP, KEPP's plan
    model) from its TensorBoard folder: per-epoch loss and seconds, the test metrics of every
    5th epoch (the last one and the one it keeps), and the seconds of each test pass."""
    events = read_event_scalars(folder)
    losses = [value for _, _, value in sorted(events['Train/EpochLoss'], key=lambda e: e[1])]
    if len(losses) != epochs:
        raise ValueError(f'{folder}: the official training logged {len(losses)} epochs; '
                         f'expected {epochs}')
    scores = {step: {name: value_at(events, tag, step) for name, tag in VAL_TAGS.items()}
              for _, step, _ in events['Val/Traj_Success_Rate']}
    best = official_selection(scores)
    return SideRun('official', seed, dict(total=losses),
                   seconds_between(events, 'Train/EpochLoss', logging_started(records)),
                   scores[epochs], windows,
                   eval_seconds=[wall - train_wall(events, step) for wall, step, _ in
                                 sorted(events['Val/Traj_Success_Rate'])],
                   selected=scores[best], selected_epoch=best,
                   selection='the test pass of the best success rate (main_distributed.py '
                             'tests every 5 epochs on the test windows and keeps it)')


def official_selection(scores: dict) -> int:
    """The epoch main_distributed.py keeps: SR >= the best so far, unless equal with a lower
    accuracy (the later of equals wins)."""
    best, best_sr, best_acc = None, 0.0, 0.0
    for epoch in sorted(scores):
        sr, acc = scores[epoch]['success_rate'], scores[epoch]['mean_accuracy']
        if sr >= best_sr and not (sr == best_sr and acc < best_acc):
            best, best_sr, best_acc = epoch, sr, acc
    return best if best is not None else max(scores)


def read_classifier_stage(records: dict, run_dir: Path, epochs: int) -> dict:
    """The task classifier: per-epoch losses and seconds, the test accuracy of the last
    epoch's and of the test-selected checkpoint (temp.py's 'acc:'), the selected epoch."""
    events = read_event_scalars(event_folders(run_dir, 'log_mlp_')[-1])
    losses = [v for _, _, v in sorted(events['Train/EpochLoss'], key=lambda e: e[1])]
    if len(losses) != epochs:
        raise ValueError(f'{run_dir}: the official classifier logged {len(losses)} epochs; '
                         f'expected {epochs}')
    accuracy = {stage: 100 * float(ACCURACY.search(' '.join(l for _, l in records[stage]))[1])
                for stage in ('predict_last', 'predict_selected')}
    command = (Path(run_dir) / 'predict_selected.command.txt').read_text()
    return dict(losses=losses,
                seconds=seconds_between(events, 'Train/EpochLoss',
                                        logging_started(records['classifier'])),
                accuracy=accuracy['predict_last'],
                selected_accuracy=accuracy['predict_selected'],
                selected_epoch=int(re.search(r'epoch(\d+)\.pth\.tar', command)[1]))


METHOD = Pdpp()
