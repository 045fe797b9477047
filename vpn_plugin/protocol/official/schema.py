"""SCHEMA (WenliangGuo/SCHEMA): ``main.py`` as ``scripts/run_niv.sh`` runs it, against ours.

The official run: ``main.py`` with the flags of ``scripts/run_niv.sh`` (AdamW lr 3e-3, batch 256,
StepLR(40, 0.65), 2 decoder layers of 32 heads, E=128, dropout 0.2, ``--no_state_task``, M=2,
512-d observations), except ``--epochs``, ``--seed``, the data paths (``--train_json``,
``--valid_json``, ``--features_dir``) and the sizes given with ``--size``. Its NIV loader reads
``{video: {"task_id", "steps": [{"action_id", "start", "end"}]}}`` and ``<video>.npy`` features,
builds every window of T consecutive steps, observes a step by the mean of frames t-1..t+1
(``M=2``) and counts its transition matrix over consecutive steps of the training videos. Its
text features (``data/state_description_features/niv_state_prompt_features.npy``) are replaced
by ours, which are the same CLIP features in our action order (the ids written into the
jsons). Each epoch it trains, then tests on the ``--valid_json`` windows (the test split) and
keeps the checkpoint of the best test success rate: **test-set selection**, an official
defect; the comparison reports the last epoch (selection off) and that checkpoint (on).

Ours: ``configs/baselines/schema_niv_t{T}.py`` with the same observation recipe ('mean3',
512-d), the official transition counting (``pkg.count_mode='video'``), every training window
(no held-out validation videos) and the last epoch tested.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from .framework import Change, ComparisonData, Method, Settings, SideRun, Stage, flag_list

# scripts/run_niv.sh (the flags the comparison does not change)
RUN_NIV = dict(optimizer='adam', lr=0.003, dropout=0.2, M=2, aug_range=0, step_size=40,
               lr_decay=0.65, dataset='niv', num_action=48, num_tasks=5, img_input_dim=512,
               text_input_dim=768, no_state_task=True)
OFFICIAL_EPOCHS = 500
OFFICIAL_SEED = 3407  # tools/parser.py default
TEXT_FEATURES = 'data/state_description_features/niv_state_prompt_features.npy'

NUMBER = r'(-?[\d.]+|nan|inf)'
TRAIN_OR_TEST = re.compile(r'Epoch: (\d+) State Loss: ' + NUMBER)
ACTION = re.compile(r'Action Loss: ' + NUMBER)
VITERBI = re.compile(r'Viterbi, SR: ' + NUMBER + '% Acc: ' + NUMBER + '% MIoU: ' + NUMBER)
TASK = re.compile(r'Task Loss: ' + NUMBER)
STATE_PRED = re.compile(r'State Pred Loss: ' + NUMBER)
VOLUME = re.compile(r'Training set volumn: (\d+) Testing set volumn: (\d+)')


class Schema(Method):
    name = 'schema'
    label = 'SCHEMA'
    repository = 'WenliangGuo/SCHEMA'
    entry = 'main.py'
    required = ('main.py', 'models/procedure_model.py', 'dataset/niv_dataloader.py',
                'tools/parser.py', TEXT_FEATURES)
    datasets = ('niv',)
    sizes = {'batch_size': (256, 'batch size (--batch_size; ours: train_dataloader.batch_size)'),
             'embed_dim': (128, 'width E (--embed_dim; ours: model.embed_dim)'),
             'attn_heads': (32, 'attention heads (--attn_heads; ours: model.num_heads)'),
             'num_layers': (2, 'decoder layers (--num_layers; ours: model.num_layers)')}
    shims = ('cuda_noop', 'stub_clip')
    loss_names = ('total', 'action', 'state', 'task', 'state_decode')
    state_decode_weight = 0.1  # main.py: total = action + state + task + 0.1 * state_decode

    # ------------------------------------------------------------------ official side
    def official_changes(self, settings: Settings) -> list[Change]:
        changes = [Change('epochs', f'--epochs {settings.epochs} (run_niv.sh: '
                          f'{OFFICIAL_EPOCHS}); StepLR(40, 0.65) unchanged'),
                   Change('data', '--seed <seed> per run (default 3407), --model_name seed<s>, '
                          '--saved_path <run dir>')]
        return changes + self.size_changes(settings, 'run_niv.sh')

    def prepare_official(self, copy_dir: Path, data: ComparisonData,
                         settings: Settings) -> list[Change]:
        for split in ('train', 'test'):
            (data.official_dir / f'niv_{split}.json').write_text(
                json.dumps(niv_json(data.videos[split], data.taxonomy)))
        ours = np.load(data.data_root / 'niv/state_features_clip.npy')
        np.save(copy_dir / TEXT_FEATURES, ours)
        return [Change('data', f'--train_json / --valid_json: {data.official_dir}/niv_'
                       '{train,test}.json, the unified split in the NIV loader\'s format, '
                       'action ids of our taxonomy (the test windows are the --valid_json)'),
                Change('data', f'--features_dir {data.feature_dir} (synthetic, public layout)'),
                Change('data', f'{TEXT_FEATURES} replaced by niv/state_features_clip.npy '
                       '(the same CLIP features, rows in our action order)')]

    def official_commands(self, copy_dir, data, settings, seed, run_dir) -> list:
        flags = dict(RUN_NIV, batch_size=self.size(settings, 'batch_size'),
                     embed_dim=self.size(settings, 'embed_dim'),
                     attn_heads=self.size(settings, 'attn_heads'),
                     num_layers=self.size(settings, 'num_layers'),
                     epochs=settings.epochs, max_traj_len=settings.horizon, seed=seed,
                     model_name=f'seed{seed}', saved_path=run_dir,
                     root_dir='dataset/niv',
                     train_json=data.official_dir / 'niv_train.json',
                     valid_json=data.official_dir / 'niv_test.json',
                     features_dir=data.feature_dir)
        (Path(run_dir) / 'niv').mkdir(parents=True, exist_ok=True)  # main.py saves there
        yield Stage('train', [self.entry, *flag_list(flags)])

    def epoch_finished(self, line: str) -> bool:
        return VITERBI.search(line) is not None

    def read_official(self, records, copy_dir, run_dir, settings, seed, data) -> SideRun:
        return read_schema_log(records['train'], settings.epochs, seed,
                               self.state_decode_weight)

    # ------------------------------------------------------------------ our side
    def our_run(self, data: ComparisonData, settings: Settings) -> dict:
        options = {'model.feature_dim': 512, 'model.pkg.count_mode': 'video',
                   'train_dataloader.dataset.val_fraction': 0.0,
                   'val_dataloader': None, 'val_cfg': None, 'val_evaluator': None,
                   'model.embed_dim': self.size(settings, 'embed_dim'),
                   'model.num_heads': self.size(settings, 'attn_heads'),
                   'model.num_layers': self.size(settings, 'num_layers'),
                   'train_dataloader.batch_size': self.size(settings, 'batch_size')}
        for split in ('train', 'test'):
            options[f'{split}_dataloader.dataset.observation'] = 'mean3'
        return dict(config=f'configs/baselines/schema_niv_t{settings.horizon}.py',
                    cfg_options=options)

    def our_losses(self, logged: dict) -> dict:
        return dict(total=logged['loss'], action=logged['loss_action'],
                    state=logged['loss_state'], task=logged['loss_task'],
                    state_decode=logged['loss_state_decode'] / self.state_decode_weight)


def niv_json(videos, taxonomy) -> dict:
    """Videos (steps in annotation order, whole seconds) in the official NIV loader's format."""
    return {video.feature: dict(task=taxonomy.task_names[video.task], task_id=video.task,
                                steps=[dict(action=taxonomy.action_names[action],
                                            action_id=action, start=start, end=end)
                                       for start, end, action in video.steps])
            for video in videos}


def read_schema_log(records: list, epochs: int, seed: int, state_decode_weight: float) -> SideRun:
    """A :class:`SideRun` from ``main.py``'s log lines ``[(time, line)]``: per epoch a
    training block (State / Action / Task / State Pred losses) then a test block (the same
    plus ``Viterbi, SR: .. Acc: .. MIoU: ..``); seconds between the blocks' ends."""
    blocks, current, windows, start = [], None, None, None
    for moment, line in records:
        if (match := VOLUME.search(line)):
            windows = dict(train=int(match[1]), test=int(match[2]))
            start = moment
        elif (match := TRAIN_OR_TEST.search(line)):
            current = dict(epoch=int(match[1]), state=float(match[2]), began=moment)
        elif current is not None:
            for key, pattern in (('action', ACTION), ('task', TASK)):
                if (match := pattern.search(line)):
                    current[key] = float(match[1])
            if (match := VITERBI.search(line)):
                current['viterbi'] = tuple(float(v) for v in match.groups())
            if (match := STATE_PRED.search(line)):
                current.update(state_decode=float(match[1]), ended=moment)
                blocks.append(current)
                current = None
    if windows is None:
        raise ValueError('the official log has no "Training set volumn" line')
    train = [b for b in blocks if 'viterbi' not in b]
    test = [b for b in blocks if 'viterbi' in b]
    if [b['epoch'] for b in train] != list(range(1, epochs + 1)) or len(test) != epochs:
        raise ValueError(f'the official log holds training epochs {[b["epoch"] for b in train]}'
                         f' and {len(test)} test passes; expected {epochs} of each')
    losses = {name: [b[name] for b in train] for name in ('action', 'state', 'task',
                                                          'state_decode')}
    losses = dict(total=[a + s + t + state_decode_weight * d for a, s, t, d in zip(
        losses['action'], losses['state'], losses['task'], losses['state_decode'])], **losses)
    ends = [start] + [b['ended'] for b in test[:-1]]
    train_seconds = [b['ended'] - end for b, end in zip(train, ends)]
    eval_seconds = [t['ended'] - b['ended'] for b, t in zip(train, test)]
    scores = [dict(zip(('success_rate', 'mean_accuracy', 'miou_legacy'), t['viterbi']))
              for t in test]
    best = max(range(epochs), key=lambda e: (scores[e]['success_rate'], -e))
    return SideRun('official', seed, losses, train_seconds, scores[-1], windows,
                   eval_seconds=eval_seconds, selected=scores[best], selected_epoch=best + 1,
                   selection='the epoch of the best test success rate (main.py tests on the '
                             'test split after every epoch and keeps that checkpoint)')

METHOD = Schema()
