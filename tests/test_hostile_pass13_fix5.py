"""Hostile pass 13 (fix5): the blocks the tenth pass never reached: authors' checkpoint
conversion, EgoPER conversion, S3D extraction on tiny videos, the observation cache.
Each test fails on 230a96d."""
import numpy as np
import pytest
import torch

from vpn_plugin.oracles.authors import read_authors_state_dict


def _state(tmp_path):
    return {'state_encoder.logit_scale': np.float16(2.5) * np.ones(()),
            'task_decoder.0.weight': np.ones((3, 4), np.float16)}


@pytest.mark.parametrize('suffix', ['.npz', '.pth'])
@pytest.mark.parametrize('bad, expected', [
    (np.nan, r"task_decoder\.0\.weight holds 1 NaN/inf value\(s\) \(first at index \(1, 2\)"),
    (np.inf, r"task_decoder\.0\.weight holds 1 NaN/inf value\(s\)")])
def test_k17_non_finite_official_weights_are_refused_by_name(tmp_path, suffix, bad, expected):
    """K17: an authors' state dict with a NaN weight was converted (rc 0) into a checkpoint
    that plans nothing, without a word."""
    state = _state(tmp_path)
    state['task_decoder.0.weight'] = state['task_decoder.0.weight'].astype(np.float32)
    state['task_decoder.0.weight'][1, 2] = bad
    path = tmp_path / f'theirs{suffix}'
    if suffix == '.npz':
        np.savez(path, **state)
    else:
        torch.save({k: torch.from_numpy(np.asarray(v)) for k, v in state.items()}, path)
    with pytest.raises(ValueError, match=f'{path}: ' + expected):
        read_authors_state_dict(path)


def test_k9_truncated_and_k24_string_state_dicts_are_named(tmp_path):
    """K9: a truncated .npz SRC ended in a BadZipFile traceback; K24: string parameters in
    'could not convert string to float' without file or parameter."""
    whole = tmp_path / 'whole.npz'
    np.savez(whole, **_state(tmp_path))
    cut = tmp_path / 'cut.npz'
    cut.write_bytes(whole.read_bytes()[:150])
    with pytest.raises(ValueError, match=f'{cut}: cannot read the recorded arrays'):
        read_authors_state_dict(cut)
    strings = tmp_path / 'strings.npz'
    np.savez(strings, **dict(_state(tmp_path), **{'task_decoder.0.weight': np.array(['a'] * 3)}))
    with pytest.raises(ValueError, match=f"{strings}: parameter 'task_decoder.0.weight' is a <U1 "
                       "array; expected the official model's real-valued weights"):
        read_authors_state_dict(strings)
