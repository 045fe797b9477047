"""``predict_fixture(model, fixture_dir)``: a converted model's predictions on an oracle
fixture's batch (``../shared/reference/*``), with the fixture's recorded outputs."""
import numpy as np
import torch


def predict_fixture(model, fixture_dir):
    """(samples of ``model`` in predict mode on the fixture's start/goal, {recorded output})."""
    model.eval()
    with np.load(fixture_dir / 'inputs.npz') as inputs, \
            np.load(fixture_dir / 'outputs.npz') as outputs:
        batch = {k: torch.from_numpy(inputs[k]) for k in ('start', 'goal')}
        samples = model(batch, dict(plan=torch.from_numpy(inputs['actions'])), mode='predict')
        return samples, {k: outputs[k] for k in outputs.files}
