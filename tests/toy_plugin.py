"""A tiny dataset, model and metric registered in MMAction2's registries.

Used by tests/test_compat.py to exercise the mmengine Runner (train, resume,
test, torchrun) without depending on the real ViterbiPlanNet parts.
"""
import torch
from mmengine.evaluator import BaseMetric
from mmengine.model import BaseModel
from torch.utils.data import Dataset

from mmaction.registry import DATASETS, METRICS, MODELS


@DATASETS.register_module()
class ToyCompatDataset(Dataset):
    """Linearly separable 2-class points; label = (x0 + x1 > 0)."""

    metainfo = dict(classes=('negative', 'positive'))

    def __init__(self, num_samples=32, dim=4, seed=0):
        generator = torch.Generator().manual_seed(seed)
        self.points = torch.randn(num_samples, dim, generator=generator)
        self.labels = (self.points[:, 0] + self.points[:, 1] > 0).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return dict(inputs=self.points[index], data_samples=self.labels[index])


@MODELS.register_module()
class ToyCompatModel(BaseModel):
    """Logistic regression; `mode='predict'` returns (prediction, label) pairs."""

    def __init__(self, dim=4):
        super().__init__()
        self.linear = torch.nn.Linear(dim, 2)
        self.register_buffer('num_seen', torch.zeros((), dtype=torch.long))

    def forward(self, inputs, data_samples=None, mode='tensor'):
        logits = self.linear(inputs)
        if mode == 'loss':
            self.num_seen += len(inputs)
            return dict(loss=torch.nn.functional.cross_entropy(logits, data_samples))
        if mode == 'predict':
            return list(zip(logits.argmax(-1).tolist(), data_samples.tolist()))
        return logits


@METRICS.register_module()
class ToyCompatAccuracy(BaseMetric):
    default_prefix = 'toy'

    def process(self, data_batch, data_samples):
        self.results.extend(data_samples)

    def compute_metrics(self, results):
        correct = sum(int(pred == label) for pred, label in results)
        return dict(accuracy=100.0 * correct / max(len(results), 1))


@MODELS.register_module()
class ToyDropoutModel(ToyCompatModel):
    """The toy model with dropout on its inputs (a random stream that a resumed run must
    continue, not replay); ``predict`` returns (samples seen, 0) pairs: a validation score
    that grows every epoch, so that every validation keeps a new best checkpoint."""

    def forward(self, inputs, data_samples=None, mode='tensor'):
        if mode == 'loss':
            inputs = torch.nn.functional.dropout(inputs, 0.5, training=True)
            return super().forward(inputs, data_samples, mode)
        if mode == 'predict':
            return [(int(self.num_seen), 0)] * len(inputs)
        return super().forward(inputs, data_samples, mode)


@METRICS.register_module()
class ToySeenMetric(ToyCompatAccuracy):
    """``toy/seen``: the first element of the predictions (ToyDropoutModel: samples seen)."""

    def compute_metrics(self, results):
        return dict(seen=float(results[0][0]))
