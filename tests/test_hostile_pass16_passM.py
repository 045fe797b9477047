"""Hostile pass 16 (session 11, passM: PDPP / KEPP / CEFITO, the API, text-feature caches,
oracle checkers): each test fails on 72181f1."""
import pytest
import torch


def test_tc14_an_encoder_as_wide_as_pad_to_is_not_called_zero_padded():
    """pad_to=384 over the 384-d MiniLM pads nothing, yet the stand-in label (the log line,
    CEFITO.text_label, a protocol row's text-features caveat) said 'zero-padded to 384-d': a
    false caveat. A narrower encoder is still named padded."""
    from vpn_plugin.models.text_embeddings import stand_in_label
    config = dict(taxonomy='t.json', pooling='mean', pad_to=384)
    assert stand_in_label(config) == "stand-in all-MiniLM-L6-v2 (mean-pooled), not the paper's CLIP"
    assert stand_in_label(config, 384) == stand_in_label(config)
    assert 'zero-padded to 512-d' in stand_in_label(dict(config, pad_to=512))
    assert 'zero-padded to 512-d' in stand_in_label(dict(config, pad_to=512), 384)


def test_tc12_a_cache_dir_that_is_a_file_is_named_as_such(tmp_path):
    """model.text_embeddings.cache_dir a regular file: the refusal said 'File exists:
    <cache_dir>/actions_....pt' (a path that does not exist), not that cache_dir is a file."""
    from vpn_plugin.models.text_embeddings import _write_cache
    folder = tmp_path / 'afile'
    folder.write_text('x')
    with pytest.raises(OSError, match=r"cache_dir='.*afile': .*afile is a file, not a folder; "
                                      r'expected a writable folder'):
        _write_cache(folder / 'actions_0123.pt', torch.zeros(2, 3))
    assert folder.read_text() == 'x'


def test_l11_l20_an_authors_loader_oracle_array_or_value_no_field_compares_is_named(tmp_path):
    """check_authors_loader.py on a copy of authors_loader_small whose expected.npz holds one
    more array: 'OK: the dataset reproduces the authors' loader', the array never compared
    and never named. Now refused, naming the array and the arrays the check reads."""
    import numpy as np
    from tool_modules import load_tool
    from vpn_plugin.errors import REPO_ROOT
    compare = load_tool('check_authors_loader').compare
    source = REPO_ROOT.parent / 'shared' / 'reference' / 'authors_loader_small'
    if not source.is_dir():
        pytest.skip('../shared/reference/authors_loader_small is not here')
    for name in ('windows.json', 'taxonomy.json'):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    (tmp_path / 'features').symlink_to(source / 'features')
    with np.load(source / 'expected.npz') as recorded:
        recorded = dict(recorded)
    np.savez(tmp_path / 'expected.npz', mine=np.zeros(3), **recorded)
    with pytest.raises(ValueError, match=r"expected\.npz: arrays \['mine'\] are none of the "
                                         r'recorded fields this check compares; expected only '
                                         r"\['window_index', 'states'"):
        compare(tmp_path)
    # L20: an inf in states where no compared field reads it (start frames of step 0 are
    # 'start', which the file also records) passed as "OK"
    states = recorded['states'].copy()
    states[1, 0, 0, 0, 0] = np.inf
    np.savez(tmp_path / 'expected.npz', **dict(recorded, states=states))
    with pytest.raises(ValueError, match=r'expected\.npz: states holds 1 NaN/inf value\(s\)'):
        compare(tmp_path)
    np.savez(tmp_path / 'expected.npz', **recorded)  # the oracle as shipped: 0 mismatches
    assert not any(compare(tmp_path).values())


def test_f64_a_fixture_re_saved_as_float64_feeds_the_model_float32(tmp_path):
    """check_reference.py on pdpp/kepp/cefito_small_t3 re-saved with every array float64 (the
    same values) stopped with a raw 'Input type (double) and bias type (float) should be the
    same' (a false refusal). A fed input of float32-exact float64 values is read as float32;
    a float64 input that float32 cannot hold (a counted transition matrix) stays float64."""
    import numpy as np
    from vpn_plugin.oracles.compare import read_npz
    noise = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    counted = np.array([[1 / 3, 2 / 3], [0.1, 0.9]])
    np.savez(tmp_path / 'inputs.npz', noise=noise.astype(np.float64), transition_matrix=counted,
             actions=np.arange(3))
    read = read_npz(tmp_path / 'inputs.npz')
    assert read['noise'].dtype == np.float32 and np.array_equal(read['noise'], noise)
    assert read['transition_matrix'].dtype == np.float64
    assert np.array_equal(read['transition_matrix'], counted)
    assert read['actions'].dtype == np.int64
    np.savez(tmp_path / 'outputs.npz', x=noise.astype(np.float64))  # compared: as is ...
    assert read_npz(tmp_path / 'outputs.npz')['x'].dtype == np.float64
    from vpn_plugin.oracles.compare import as_state  # ... but a recorded chain state is fed
    assert as_state(noise.astype(np.float64)).dtype == torch.float32
    assert as_state(counted).dtype == torch.float64


def test_b6_an_index_beyond_int64_is_named():
    """plan_from_features(..., index=2**70): torch's bare 'ValueError: Overflow when unpacking
    long long' named neither the argument nor what was expected."""
    from vpn_plugin.apis.inference import _sample_indices
    for index in (2 ** 70, [1, 2 ** 70], [None]):
        with pytest.raises(ValueError, match=r'index=.*; expected the dataset index of the '
                                             r'observations \(an integer >= 0 and < 2\*\*63, '
                                             r'int64\) or 2 of them'):
            _sample_indices(index, 2)
    assert _sample_indices(2 ** 63 - 1, 2).tolist() == [2 ** 63 - 1] * 2
