"""Exit-0 wrong results of issue 37 (items 3-5): a stale or edited observation cache, a
checkpoint that carries nothing to check it by, text features swapped at test time."""
import json
import logging
import os

import numpy as np
import pytest

from test_datasets import frames_for, toy_dataset, write_toy


# ------------------------------------------------------------------ item 3: observation cache
def rewrite_keeping_size_and_mtime(path, frames) -> None:
    """What `cp -p`, `rsync -a` or `touch -r` leave: new content, same size, old mtime."""
    stat = os.stat(path)
    np.savez(path, frames_features=frames)
    assert os.stat(path).st_size == stat.st_size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def warnings_of(monkeypatch) -> list:
    import vpn_plugin.datasets.planning_dataset as module
    logged = []
    monkeypatch.setattr(module, 'print_log', lambda message, logger=None, level=logging.INFO:
                        logged.append(message) if level == logging.WARNING else None)
    return logged


def test_a_feature_file_rewritten_with_its_size_and_mtime_kept_misses_the_cache(tmp_path):
    """Today the cache key is (path, size, mtime_ns): the old observations are served."""
    write_toy(tmp_path)
    cached = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    rewrite_keeping_size_and_mtime(tmp_path / 'feat/11_a1.npz', -frames_for(20))
    again = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    fresh = toy_dataset(tmp_path)  # no cache: read from the files
    np.testing.assert_array_equal(again.start, fresh.start)
    np.testing.assert_array_equal(again.goal, fresh.goal)
    assert not np.array_equal(again.start, cached.start)


def test_an_edited_observation_cache_is_discarded_and_rebuilt(tmp_path, monkeypatch):
    """Today a cache file edited with the same shapes (start and goal swapped) is used as is."""
    write_toy(tmp_path)
    first = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    [cache] = (tmp_path / 'cache').glob('obs_*.npz')
    with np.load(cache) as data:
        arrays = {name: data[name] for name in data.files}
    arrays['start'], arrays['goal'] = arrays['goal'], arrays['start']
    np.savez(cache, **arrays)
    logged = warnings_of(monkeypatch)
    again = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    assert any(f'observation cache {cache} is corrupt' in m and 'digest' in m for m in logged)
    np.testing.assert_array_equal(again.start, first.start)
    np.testing.assert_array_equal(again.goal, first.goal)
    other = tmp_path / 'cache' / 'obs_00000000000000000000.npz'  # a cache file copied over
    cache.rename(other)                                      # another's name: another key
    toy_dataset(tmp_path, cache_dir=tmp_path / 'cache', window_policy='authors')
    [built] = set((tmp_path / 'cache').glob('obs_*.npz')) - {other, cache}
    other.unlink()
    built.rename(cache)
    toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    assert any('its key differs' in m for m in logged)


def test_unchanged_feature_files_are_not_read_again_to_find_the_cache(tmp_path, monkeypatch):
    """The content key costs one hash per changed file (the digest memo), not one per start."""
    write_toy(tmp_path)
    first = toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
    memo = json.loads((tmp_path / 'cache' / 'feature_digests.json').read_text())
    assert len(memo) == 3  # the videos of T=3 windows (b2 has 2 steps)
    import vpn_plugin.datasets.file_digests as digests
    import vpn_plugin.datasets.planning_dataset as module

    def no_reading(*args, **kwargs):
        raise AssertionError('a file was read although nothing changed')
    monkeypatch.setattr(digests, 'sha256_of', no_reading)
    monkeypatch.setattr(module, 'load_features', no_reading)
    np.testing.assert_array_equal(toy_dataset(tmp_path, cache_dir=tmp_path / 'cache').start,
                                  first.start)
    os.utime(tmp_path / 'feat/22_b1.npz')  # touched: its ctime changes, it is hashed again
    with pytest.raises(AssertionError, match='although nothing changed'):
        toy_dataset(tmp_path, cache_dir=tmp_path / 'cache')
