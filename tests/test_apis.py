"""vpn_plugin.apis (init_planner, inference_planner) and tools/plan.py, their command line."""
import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import DATASETS, MODELS
from test_pkg_builder import REPO, tiny_uniform_config
from vpn_plugin import core
from vpn_plugin.apis import build_split_dataset, inference_planner, init_planner
from tool_modules import load_tool


def test_init_planner_without_checkpoint_counts_the_training_pkg(tiny_crosstask, tmp_path):
    model = init_planner(str(tiny_uniform_config(tiny_crosstask, tmp_path)))
    train = DATASETS.build(tiny_crosstask['train_dataset'])
    expected = core.build_pkg(train.pkg_sequences('window'), 133, horizon=3)
    assert bool(model.pkg_ready) and not model.training
    np.testing.assert_allclose(model.pkg_probabilities(), expected, atol=1e-6)
    dataset = build_split_dataset(model.cfg, 'test')
    samples = inference_planner(model, dataset, [2, 0], batch_size=1)
    assert [int(s.sample_idx) for s in samples] == [2, 0]
    assert [s.gt_plan.tolist() for s in samples] == dataset.plans[[2, 0]].tolist()
    with pytest.raises(IndexError, match=f'sample index {len(dataset)} is out of range'):
        inference_planner(model, dataset, [len(dataset)])
    with pytest.raises(ValueError, match="split 'dev' is unknown"):
        build_split_dataset(model.cfg, 'dev')


def test_plan_tool_prints_the_checkpoints_plans(tiny_crosstask, tmp_path, capsys):
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=133, horizon=3))
    model.set_pkg(np.roll(np.eye(133), 1, axis=1))  # only a -> a + 1
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, tmp_path / 'chain.pth')
    load_tool('plan').main([str(tiny_uniform_config(tiny_crosstask, tmp_path)), str(tmp_path / 'chain.pth'),
               '--indices', '1', '4'])
    names = DATASETS.build(tiny_crosstask['test_dataset']).taxonomy.action_names
    ids_of = {}  # format_plan's column: 31 characters of a name (names repeat across tasks)
    for action, name in enumerate(names):
        ids_of.setdefault(name[:31], set()).add(action)
    blocks = capsys.readouterr().out.strip().split('\n\n')
    assert [b.splitlines()[0].split(' |')[0] for b in blocks] == ['sample 1', 'sample 4']
    for block in blocks:
        steps = [ids_of[line[7:39].rstrip()] for line in block.splitlines()[2:]]
        assert len(steps) == 3
        assert any((a + 1) % 133 in steps[1] and (a + 2) % 133 in steps[2] for a in steps[0])
