"""Issue 37, session 9: cases the lead fixed between the phases."""
from pathlib import Path

import pytest

from vpn_plugin.data_paths import load_config

REPO = Path(__file__).resolve().parents[1]


def test_feature_dir_flag_refused_when_the_datasets_hold_their_own_absolute_folder(tmp_path):
    """The base's ``paths = dict(feature_dir='{feature_dir}')`` helper followed the flag, so
    the move counted as used while every dataset kept its own absolute folder: the test ran
    on the config's features, exit 0 (fix1's note)."""
    own = tmp_path / 'own_features'
    config = tmp_path / 'absolute.py'
    config.write_text(f"_base_ = [{str(REPO / 'configs/vpn_crosstask_t3.py')!r}]\n" + ''.join(
        f"{split}_dataloader = dict(dataset=dict(feature_dir={str(own)!r}))\n"
        for split in ('train', 'val', 'test')))
    with pytest.raises(ValueError, match=r'feature_dir was set to .*moved.*no path of the '
                       r'config is built from it'):
        load_config(config, feature_dir=str(tmp_path / 'moved'))
    moved = load_config(REPO / 'configs/vpn_crosstask_t3.py', feature_dir=str(tmp_path / 'm'))
    assert moved.test_dataloader.dataset.feature_dir == str(tmp_path / 'm')


def test_a_text_feature_cache_edited_or_copied_in_is_not_used(tmp_path, monkeypatch):
    """pass2 J6: CEFITO's text cache with its rows reversed (same name, same shape, finite)
    was trained on as the texts' encodings, exit 0. A cache is now signed with its folder's
    key: an edited or copied-in cache is refused without encoding, encoded again with it."""
    import torch
    from vpn_plugin.models import text_embeddings as te
    texts = ['a', 'b', 'c']
    cache = tmp_path / f"actions_{te.cache_key(te.DEFAULT_ENCODER, texts)}.pt"
    good = torch.arange(12, dtype=torch.float32).view(3, 4)
    te._write_cache(cache, good)
    assert torch.equal(te._cached_encoding(texts, 'actions', None, tmp_path, False, 'mean'), good)
    torch.save(good.flip(0), cache)  # edited in place: rows reversed
    with pytest.raises(ValueError, match=r'actions_.*\.pt: the text-feature cache carries no '
                       r'valid checksum of its folder'):
        te._cached_encoding(texts, 'actions', None, tmp_path, False, 'mean')
    elsewhere = tmp_path / 'other'
    elsewhere.mkdir()
    te._write_cache(elsewhere / cache.name, good.flip(0))  # signed by another folder's key
    for suffix in ('', '.sig'):
        (tmp_path / (cache.name + suffix)).write_bytes((elsewhere / (cache.name + suffix))
                                                       .read_bytes())
    with pytest.raises(ValueError, match='no valid checksum'):
        te._cached_encoding(texts, 'actions', None, tmp_path, False, 'mean')
    monkeypatch.setattr(te, 'encode_texts', lambda texts, encoder, pooling: good)
    assert torch.equal(te._cached_encoding(texts, 'actions', None, tmp_path, True, 'mean'), good)
    assert torch.equal(te._cached_encoding(texts, 'actions', None, tmp_path, False, 'mean'), good)
