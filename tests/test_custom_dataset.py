"""A dataset of your own, as README and examples/custom_dataset/README.md tell it: synthetic
features for its per-video JSON, then ONE training command from any directory (observation
and text caches under the dataset's root, console without mmengine's environment and hook
dumps); the text-feature tool; the task field's spellings."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tool_modules import load_tool
from vpn_plugin.data_paths import REPO_ROOT

EXAMPLE = REPO_ROOT / 'examples' / 'custom_dataset'
CONFIG = str(EXAMPLE / 'vpn_kitchen_t3.py')


def test_the_example_trains_in_one_command_from_another_directory(tmp_path, monkeypatch,
                                                                   capsys):
    """The documented command (tools/train.py CONFIG --data-root DIR), run in this process."""
    root = tmp_path / 'kitchen'
    shutil.copytree(EXAMPLE / 'kitchen', root, ignore=shutil.ignore_patterns('features', 'cache'))
    load_tool('make_synthetic_features').main(['--config', CONFIG, '--data-root', str(root)])
    assert len(list((root / 'features').glob('*.npz'))) == 29  # 22 train + 7 test videos
    (tmp_path / 'elsewhere').mkdir()
    monkeypatch.chdir(tmp_path / 'elsewhere')
    capsys.readouterr()
    load_tool('train').main([CONFIG, '--data-root', '../kitchen', '--cfg-options',
                             'train_cfg.max_epochs=2', 'train_cfg.val_interval=2'])
    work_dir = tmp_path / 'elsewhere' / 'work_dirs' / 'vpn_kitchen_t3'
    assert (work_dir / 'epoch_2.pth').is_file()
    assert any((root / 'cache').glob('obs_*.npz')) and any((root / 'cache').glob('states_*.pt'))
    console = ''.join(capsys.readouterr())
    assert 'Epoch(train) [2]' in console and 'plan/success_rate' in console
    for noise in ('System environment', 'Hooks will be executed', 'Exp name', 'deprecated',
                  'Loading weights'):
        assert noise not in console, noise
    log = next(work_dir.glob('*/*.log')).read_text()
    assert 'System environment' in log and 'Hooks will be executed' in log
    # issue 34: the log states each split's windows (counted here from the JSON by hand)
    import re
    sizes = {split: (int(n), int(v)) for split, n, v in re.findall(
        r'PlanningDataset \((train|val|test), T=3\): (\d+) windows of (\d+) videos', log)}
    assert set(sizes) == {'train', 'val', 'test'}
    for split, names in (('train', ('train', 'val')), ('test', ('test',))):
        videos = json.loads((root / f'{split}.json').read_text())
        assert sum(sizes[n][0] for n in names) == sum(max(0, len(v['steps']) - 2)
                                                      for v in videos)
        assert sum(sizes[n][1] for n in names) == len([v for v in videos if len(v['steps']) >= 3])


def test_text_feature_tool_writes_what_the_model_reads(tmp_path):
    """The tool's array = load_state_features of the same files (slots: 3 before, 3 after)."""
    from test_model_vpn import tiny_clip
    from vpn_plugin.models import load_state_features
    encoder = tiny_clip(tmp_path)
    out = tmp_path / 'out' / 'state_features.npy'
    files = dict(taxonomy=str(EXAMPLE / 'kitchen/taxonomy.json'),
                 state_descriptions=str(EXAMPLE / 'kitchen/state_descriptions.json'))
    load_tool('make_text_features').main(['--taxonomy', files['taxonomy'], '--state-descriptions',
                                          files['state_descriptions'], '--out', str(out),
                                          '--encoder', str(encoder)])
    written = np.load(out)
    assert written.shape == (9, 6, 16) and written.dtype == np.float32
    expected = load_state_features(**files, encoder=str(encoder), pooling='clip',
                                   cache_dir=str(tmp_path / 'cache'))
    np.testing.assert_allclose(written, expected.numpy(), rtol=1e-6)
    # slot 3 of 'boil water' (action 0) is its first "after" sentence
    sentence = json.loads(Path(files['state_descriptions']).read_text())['make tea'][
        'boil water']['after'][0]
    from transformers import AutoModel, AutoTokenizer
    model = AutoModel.from_pretrained(encoder).eval()
    with torch.no_grad():
        alone = model(**AutoTokenizer.from_pretrained(encoder)([sentence], return_tensors='pt'))
    np.testing.assert_allclose(written[0, 3], alone.pooler_output[0].numpy(), atol=1e-5)


def test_the_task_field_takes_a_name_a_taxonomy_key_or_an_index():
    from vpn_plugin.datasets import load_taxonomy
    taxonomy = load_taxonomy(EXAMPLE / 'kitchen/taxonomy.json')
    assert [taxonomy.task_index(k) for k in ('make_toast', '1_make_toast', 1, '1')] == [1] * 4
    with pytest.raises(ValueError, match=r"task '2_make_toast' is not a task of taxonomy .*; "
                       r"expected a task name \['make_tea', 'make_toast'\]\.\.\., a key "
                       r"\['0_make_tea', '1_make_toast'\]\.\.\. or an index 0\.\.1"):
        taxonomy.task_index('2_make_toast')
