"""Hostile pass 15 (passM: PDPP / KEPP / CEFITO, the API, text-feature caches): each test
fails on 5f87edc."""
import os

import pytest
import torch


def test_h9_a_step_checkpoint_the_checkpoint_makes_unread_is_no_change_from_training():
    """tools/test.py on a KEPP checkpoint with --cfg-options model.step_checkpoint=OTHER:
    the model logs that the option is not used (the checkpoint holds its own trained step
    model) and the metrics were those of the plain test, yet test_metrics.json said
    'changed_from_training: model.step_checkpoint: None in training, OTHER here' (a false
    caveat). Without a trained step model in the checkpoint the option is read: named."""
    from mmengine.config import Config
    from vpn_plugin.engine.checkpoint import check_test_options
    import vpn_plugin.mm  # noqa: F401  (KEPP registered)
    trained = "model = dict(type='KEPP', feature_dim=8, num_actions=5, horizon=3)\n"
    cfg = Config.fromstring(trained.replace(')', ", step_checkpoint='/x/other.pth')"), '.py')
    line = "model.step_checkpoint: None in training, '/x/other.pth' here"
    assert check_test_options(trained, cfg, 'c.pth', 'test it',
                              {'step_ready': torch.tensor(True)}) == []
    assert check_test_options(trained, cfg, 'c.pth', 'test it',
                              {'step_ready': torch.tensor(False)}) == [line]
    assert check_test_options(trained, cfg, 'c.pth', 'test it') == [line]


def test_t6_a_text_cache_key_of_binary_bytes_is_named(tmp_path):
    """A text-feature cache folder whose .text_cache_key holds random bytes raised a bare
    UnicodeDecodeError naming no file; now the key file is named with what to do."""
    from vpn_plugin.secret_keys import read_or_make_secret
    key = tmp_path / '.text_cache_key'
    key.write_bytes(b'\xe9' + os.urandom(31))
    key.chmod(0o600)
    with pytest.raises(ValueError, match=r'the text-feature cache key .*\.text_cache_key is not '
                                         r'a key this tool wrote \(64 hex digits\); delete it'):
        read_or_make_secret(key, 'the text-feature cache key', 'checksums',
                            'every cached text encoding is encoded again')


def test_h10_h12_a_dict_over_a_base_none_names_the_config_and_the_way_out(tmp_path):
    """A CEFITO config with text_embeddings=None given text features by --cfg-options
    model.text_embeddings.file=X (the way --cfg-options' own refusal of dict(...) advises),
    or by a child config without _delete_: a raw 20-line mmengine TypeError traceback."""
    from pathlib import Path
    from vpn_plugin.data_paths import load_config
    repo = Path(__file__).resolve().parents[1]
    base = tmp_path / 'no_text.py'
    base.write_text(f"_base_ = ['{repo}/configs/baselines/cefito_crosstask_t3.py']\n"
                    "model = dict(text_embeddings=dict(_delete_=True))\n"
                    "model['text_embeddings'] = None\n")
    with pytest.raises(ValueError, match=r"--cfg-options of .*no_text\.py: text_embeddings="
                                         r"\{'file': 'x\.npy'\} is a dict, but the base config "
                                         r'sets text_embeddings to None, so its keys cannot be '
                                         r'set one by one; expected the override in a config '
                                         r'file of your own'):
        load_config(str(base), {'model.text_embeddings.file': 'x.npy'})
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = ['{base}']\nmodel = dict(text_embeddings=dict(file='x.npy'))\n")
    with pytest.raises(ValueError, match=r'child\.py: text_embeddings=.* is a dict, but the base '
                                         r'config sets text_embeddings to None; expected a dict '
                                         r'over a base dict, or `_delete_=True`'):
        load_config(str(child))


def test_t11_a_cache_path_that_is_a_folder_is_named(tmp_path):
    """The cache file's own path a directory (encoding on): the refusal blamed the folder
    ("cannot be written there (Is a directory)") without naming the path that is one."""
    from vpn_plugin.models.text_embeddings import _write_cache
    cache = tmp_path / 'actions_0123.pt'
    cache.mkdir()
    with pytest.raises(OSError, match=r'the text-feature cache cannot be written there \(Is a '
                                      r'directory: .*actions_0123\.pt\); expected a writable '
                                      r'folder where actions_0123\.pt is a file or free'):
        _write_cache(cache, torch.zeros(2, 3))


def test_k4_check_authors_reference_names_a_fixture_of_another_method(tmp_path):
    """tools/check_authors_reference.py on the PDPP fixture listed 18 'unknown fields' and 9
    'missing fields' of its meta.json: the fixture of another method, and the tool that
    checks it, were not named."""
    import json
    from pathlib import Path
    from vpn_plugin.oracles.authors import read_meta
    meta = json.loads((Path(__file__).resolve().parents[1] / '../shared/reference/pdpp_small_t3/'
                       'meta.json').read_text())
    (tmp_path / 'meta.json').write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"meta\.json: method='PDPP', a fixture of another "
                                         r"method .*check this one with .*check_reference\.py"):
        read_meta(tmp_path)


@pytest.mark.parametrize('options, said', [
    (dict(n_timesteps=1), r'model\.n_timesteps=1: fewer diffusion steps than the 10 jumps of the '
                          r'official DDIM sampler; expected model\.n_timesteps >= 10'),
    (dict(n_timesteps=20, step_n_timesteps=5), r'model\.step_n_timesteps=5: .*expected '
                                               r'model\.step_n_timesteps >= 10')])
def test_c8_too_few_diffusion_steps_name_the_model_option(options, said):
    """tools/train.py PDPP --cfg-options model.n_timesteps=1 said 'n_timesteps=1 is below
    the 10 DDIM steps' (core's words: no model option; KEPP's step_n_timesteps=5 was called
    n_timesteps)."""
    import vpn_plugin.mm  # noqa: F401
    from mmaction.registry import MODELS
    with pytest.raises(ValueError, match=said):
        MODELS.build(dict(type='KEPP', feature_dim=8, num_actions=5, horizon=3, dim=32,
                          **options))


def test_a54_a_config_without_a_test_split_says_the_dataset_was_not_compared():
    """init_planner(Config without test_dataloader, checkpoint): the checkpoint's action and
    task names were compared with nothing (meta_mismatches skips the data keys), yet
    model.not_compared was [] and nothing was said."""
    from vpn_plugin.apis import inference
    loaded = {'meta': {}, 'state_dict': {}}
    with pytest.warns(UserWarning, match=r'not compared: .*the dataset it was trained for \(the '
                                         r'config has no test_dataloader\.dataset'):
        missing = inference._not_compared(loaded, 'c.pth', True)
    assert missing[-1] == inference.NO_TEST_SPLIT
    assert inference.NO_TEST_SPLIT not in inference._not_compared(loaded, 'c.pth')
