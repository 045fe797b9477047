"""Predict plans for chosen dataset samples and print them with action names."""
from typing import List, Sequence

import torch
from mmengine.dataset import default_collate


@torch.no_grad()
def predict_indices(model, dataset, indices: Sequence[int]) -> list:
    """``ActionDataSample`` predictions of ``model`` for ``dataset[i]``, i in ``indices``."""
    for i in indices:
        if not 0 <= i < len(dataset):
            raise IndexError(f'sample index {i} is out of range; the dataset has '
                             f'{len(dataset)} samples (0..{len(dataset) - 1})')
    model.eval()
    batch = default_collate([dataset[i] for i in indices])
    batch = model.data_preprocessor(batch, False)
    return model(batch['inputs'], batch['data_samples'], mode='predict')


def format_plan(sample, taxonomy, width: int = 32) -> List[str]:
    """Lines: task, then one row per step with predicted and true action names."""
    pred = [int(a) for a in sample.pred_plan]
    truth = [int(a) for a in sample.gt_plan]
    names = taxonomy.action_names
    task = taxonomy.task_names[int(sample.gt_task)]
    verdict = 'success' if pred == truth else f'{sum(p == t for p, t in zip(pred, truth))}/' \
                                              f'{len(truth)} steps right'
    lines = [f'sample {int(sample.sample_idx)} | task: {task} | {verdict}',
             f'  {"step":<5}{"predicted":<{width}}   {"ground truth"}']
    for step, (p, t) in enumerate(zip(pred, truth), 1):
        mark = '=' if p == t else 'x'
        lines.append(f'  {step:<5}{names[p][:width - 1]:<{width}} {mark} {names[t]}')
    return lines
