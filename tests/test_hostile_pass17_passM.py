"""Issue 37, the fourteenth hostile pass (passM: PDPP/KEPP/CEFITO, the API, the oracle
checkers; log /tmp/passM_log.md). Each test fails on 22f9984."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from test_hostile_outputs import user_error
from vpn_plugin.apis.inference import _given_tasks, _sample_indices
from vpn_plugin.oracles.compare import as_state, read_npz

REAL_FORMS = {  # the same values in every dtype / layout a fixture may be re-saved in
    'float32': lambda v: v, 'float64': lambda v: v.astype(np.float64),
    'big-endian': lambda v: v.astype('>f4'), 'fortran': np.asfortranarray,
    'int64': lambda v: np.round(v * 100).astype(np.int64), 'bool': lambda v: v > 0}


def saved(tmp_path, name: str, arrays: dict, compressed: bool = False):
    path = tmp_path / name
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return path


# ---------------------------------------------------------------- H9: a complex recording
def test_h9_a_complex_recorded_array_is_refused_by_name(tmp_path):
    """H9: outputs.npz holding x_start as complex64 (imaginary part not 0) PASSED: as_array
    cast it to float64, dropping the imaginary part (only numpy's ComplexWarning)."""
    value = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    path = saved(tmp_path, 'outputs.npz', {'x_start': (value + 1j).astype(np.complex64),
                                           'loss': np.float32(0.5)})
    with pytest.raises(ValueError, match=r"outputs.npz: x_start is a complex64 array; "
                                         r"expected real numbers"):
        read_npz(path)


@pytest.mark.parametrize('form', sorted(REAL_FORMS))
@pytest.mark.parametrize('compressed', [False, True])
def test_h9_real_arrays_in_every_form_still_read_as_recorded(tmp_path, form, compressed):
    """No false refusal: the check reads every real dtype, byte order (as the machine's: torch
    is fed them), memory order and text (fixtures hold names as '<U..' arrays), compressed or
    not, with keys in any order."""
    value = REAL_FORMS[form](np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4))
    arrays = {'names': np.array(['a', 'bb']), 'x': value, 'ids': np.arange(3, dtype=np.uint8)}
    path = saved(tmp_path, 'outputs.npz', dict(reversed(list(arrays.items()))), compressed)
    read = read_npz(path)
    assert sorted(read) == sorted(arrays)
    for key, want in arrays.items():
        assert read[key].dtype == want.dtype.newbyteorder('=') and np.array_equal(read[key],
                                                                                 want)


# ---------------------------------------------------------- G_p_outputs_f16: fed float16
def test_g_p_outputs_f16_a_float16_chain_state_is_fed_as_float32():
    """G_p_outputs_f16: a PDPP fixture whose outputs.npz was re-saved as float16 stopped with
    torch's "Input type (c10::Half) and bias type (float) should be the same" (the recorded
    DDIM states are fed to the U-Net): they are fed as the float32 of their values, and the
    rows show how far the rounded recording is."""
    layer = torch.nn.Linear(4, 4)
    state = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    for recorded in (state.astype(np.float16), state, state.astype(np.float64),
                     state.astype('>f2'), np.asfortranarray(state.astype(np.float16))):
        fed = as_state(recorded)
        assert fed.dtype == torch.float32
        assert np.array_equal(fed.numpy(), np.asarray(recorded).astype(np.float32))
        layer(fed)  # torch takes it


# ------------------------------------------------------ H22 / B25 / H24: unsigned integers
@pytest.mark.parametrize('index', [5, np.int64(5), np.uint64(5), np.uint32(5), np.uint16(5),
                                   np.uint8(5), torch.tensor(5, dtype=torch.uint8),
                                   torch.tensor(5, dtype=torch.uint32),
                                   torch.tensor([5], dtype=torch.uint64),
                                   np.array([5], dtype=np.uint64)])
def test_h22_b25_an_unsigned_index_is_the_index(index):
    """B25 / H22: index=np.uint64(5) was refused ("expected ... an integer >= 0"),
    np.uint32(5) stopped with torch's '"min_all" not implemented for 'UInt32''."""
    assert _sample_indices(index, 1).tolist() == [5]
    assert _sample_indices(np.array([5, 6], dtype=np.uint64), 2).tolist() == [5, 6]


def test_h22_an_unsigned_index_beyond_int64_is_refused_by_name():
    with pytest.raises(ValueError, match=r'index=np.uint64\(18446744073709551615\); expected '
                                         r'the dataset index'):
        _sample_indices(np.uint64(2 ** 64 - 1), 1)
    with pytest.raises(ValueError, match=r'index=.*; expected the dataset index'):
        _sample_indices(np.array([3, 2 ** 63], dtype=np.uint64), 2)


def test_h24_an_unsigned_task_is_the_task():
    """H24: task=np.uint64(1) was refused ("torch reads: an integer is required")."""
    model = SimpleNamespace(num_tasks=3)
    assert _given_tasks(model, np.uint64(1), 1).tolist() == [1]
    assert _given_tasks(model, np.array([2, 0], dtype=np.uint32), 2).tolist() == [2, 0]
    with pytest.raises(ValueError, match=r'task=np.uint64\(7\); expected 1 task index'):
        _given_tasks(model, np.uint64(7), 1)


# ---------------------------------------------------- H36, H15 and the known loader item
def test_h36_check_authors_loader_given_its_windows_json_names_the_folder(tmp_path):
    """H36: check_authors_loader.py .../windows.json said "windows.json: no windows.json"."""
    (tmp_path / 'windows.json').write_text('[]')
    message = user_error('check_authors_loader', [tmp_path / 'windows.json'])
    assert (f'fixture {tmp_path / "windows.json"} is a regular file; expected the '
            'authors-loader fixture folder (the one holding windows.json: '
            f'{tmp_path})') in message


@pytest.mark.parametrize('files, check', [
    (('windows.json', 'expected.npz'), 'check_authors_loader.py'),
    (('expected_frames_features.npy',), 'convert_features.py'),
    (('sequence_completion.txt',), 'tests/test_llm_prompting.py -k paper')])
def test_check_authors_reference_points_a_non_fixture_folder_to_its_check(tmp_path, files,
                                                                          check):
    """Known item (closing11) and H15: check_authors_reference.py on authors_loader_small or
    feature_layouts said only "no meta.json"; check_reference.py named the check that fits."""
    for name in files:
        (tmp_path / name).write_text('')
    for tool in ('check_authors_reference', 'check_reference'):
        message = user_error(tool, [tmp_path])
        assert 'no meta.json, so not a model fixture' in message and check in message


# ------------------------------------------------------- known item: a reordered taxonomy
@pytest.mark.parametrize('order', ['reversed', 'shuffled', 'rotated'])
@pytest.mark.parametrize('name', ['crosstask/taxonomy_133.json', 'authors_loader'])
def test_a_taxonomy_listing_its_tasks_in_another_order_is_the_same_taxonomy(tmp_path, order,
                                                                             name):
    """Known item (closing11, passM L15): taxonomy.json with its task keys in reverse order
    (each key carries its index, "2_task2" first) was refused ("has index 2, expected 0")."""
    import json
    import random
    from reference_fixtures import REFERENCE
    from vpn_plugin.datasets import load_taxonomy
    source = (REFERENCE / 'authors_loader_small/taxonomy.json' if name == 'authors_loader'
              else REFERENCE.parent / 'data' / name)
    if not source.is_file():
        pytest.skip(f'{source} not found')
    items = list(json.loads(source.read_text()).items())
    items = {'reversed': items[::-1], 'rotated': items[1:] + items[:1],
             'shuffled': random.Random(3).sample(items, len(items))}[order]
    assert [k for k, _ in items] != list(json.loads(source.read_text()))
    path = tmp_path / 'taxonomy.json'
    path.write_text(json.dumps(dict(items), indent=3, ensure_ascii=False))
    assert load_taxonomy(path) == load_taxonomy(source)


def test_a_taxonomy_with_a_missing_task_index_is_still_refused(tmp_path):
    path = tmp_path / 'taxonomy.json'
    path.write_text('{"2_b": {"1": "y"}, "0_a": {"0": "x"}}')
    with pytest.raises(ValueError, match=r"task '2_b' has index 2; no task has index 1; "
                                         r"expected task indices 0\.\.1, each once"):
        from vpn_plugin.datasets import load_taxonomy
        load_taxonomy(path)


# ------------------------------------------------- known item: a half-precision checkpoint
def loaded_warnings(stored: dict, caplog) -> list:
    """The WARNING lines ``engine.checkpoint.load_weights`` logs loading ``stored`` (a state
    dict) into a float32 Linear(3, 2), and checks the weights are the stored values."""
    import logging
    from vpn_plugin.engine.checkpoint import load_weights
    model = torch.nn.Linear(3, 2)
    logger = logging.getLogger('pass17_passM_checkpoint')
    with caplog.at_level(logging.WARNING, logger=logger.name):
        load_weights(model, {'state_dict': stored}, 'ckpt.pth', logger=logger)
    for key, value in stored.items():
        assert torch.equal(model.state_dict()[key], value.float())
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_a_half_precision_checkpoint_is_named_when_loaded(caplog, dtype):
    """Known item (closing11, passM M2): a checkpoint whose state_dict was re-saved as float16
    loaded without a word; the model then runs with rounded weights, not those trained."""
    torch.manual_seed(0)
    stored = {'weight': torch.randn(2, 3).to(dtype), 'bias': torch.randn(2)}
    messages = loaded_warnings(stored, caplog)
    assert messages == [f'checkpoint ckpt.pth: 1 of its 2 floating tensors are stored in '
                        f'{dtype} (first weight), coarser than the model\'s torch.float32: the '
                        'model runs with their rounded values, not with the weights as trained']


@pytest.mark.parametrize('form', ['float32', 'float64', 'non-contiguous', 'reordered'])
def test_a_checkpoint_as_fine_as_the_model_loads_without_a_caveat(caplog, form):
    """No false caveat: float32, float64 (finer), a transposed view, keys in another order."""
    torch.manual_seed(0)
    weight, bias = torch.randn(2, 3), torch.randn(2)
    stored = {'float32': {'weight': weight, 'bias': bias},
              'float64': {'weight': weight.double(), 'bias': bias.double()},
              'non-contiguous': {'weight': weight.t().contiguous().t(), 'bias': bias},
              'reordered': {'bias': bias, 'weight': weight}}[form]
    assert loaded_warnings(stored, caplog) == []


# ------------------------------------------- after the stop: a scalar recorded as shape (1,)
@pytest.mark.parametrize('name', ['sampler50_seed', 'negatives_seed', 'decode_task'])
def test_a_cefito_seed_recorded_with_another_shape_is_named(tmp_path, name):
    """Found after the stop (not counted): cefito_small_t3 re-saved with np.asfortranarray
    (0-d arrays become shape (1,)) stopped with "TypeError: only 0-dimensional arrays can be
    converted to Python scalars" at int(inputs['sampler50_seed'])."""
    import shutil
    from reference_fixtures import reference_dir
    from vpn_plugin.oracles.compare import check_fixture
    fixture = tmp_path / 'cefito'
    shutil.copytree(reference_dir('cefito_small_t3'), fixture)
    arrays = dict(np.load(fixture / 'inputs.npz'))
    arrays[name] = arrays[name].reshape(1)
    np.savez(fixture / 'inputs.npz', **arrays)
    with pytest.raises(ValueError, match=rf'inputs.npz: {name} has shape \(1,\); expected '
                                         r'\(\) from meta.json'):
        check_fixture(fixture)


@pytest.mark.parametrize('dtype', [np.int32, np.int16, np.uint16, np.uint32, np.int64,
                                   np.uint8])
def test_fed_ids_stored_in_another_integer_width_are_fed_as_the_official_int64(tmp_path,
                                                                               dtype):
    """Found after the stop (not counted): pdpp_small_t3 with every integer array re-saved as
    int32 (the same ids) stopped with torch's "one_hot is only applicable to index tensor of
    type LongTensor". Ids are fed as int64, uint8 ones too (pass22 X08); uint8 video frames (3+
    dimensions) stay uint8."""
    ids = np.array([[0, 2, 1], [1, 1, 0]], dtype=dtype)
    read = read_npz(saved(tmp_path, 'inputs.npz', {'task_sample': ids}))['task_sample']
    assert read.dtype == np.int64
    assert np.array_equal(read, ids)
    frames = np.zeros((2, 4, 4, 3), np.uint8)
    assert read_npz(saved(tmp_path, 'frames.npz', {'video': frames}))['video'].dtype == np.uint8
    torch.nn.functional.one_hot(torch.from_numpy(read).long() if dtype == np.uint8
                                else torch.from_numpy(read), 3)
