"""Issue 37, the nineteenth hostile pass (passM: PDPP/KEPP/CEFITO, the API, the CEFITO text
cache, the oracle checkers; log /tmp/passM_log.md). Each test named after a case fails on
84e3204 (checked in a worktree of it); the ``*_still_*`` tests guard the limits of each fix."""
from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import MODELS
from vpn_plugin.config_types import checked_arguments


# ------------------------- H02a, H02c, H02d, V15, V17: numpy scalars reach the model as Python's
@checked_arguments(prefix='model.')  # as a class's options: a function's data keeps its dtype
def _options(seed: int, flag: bool, weight: float, dims: Sequence[int],
             weights: Optional[Dict[str, float]] = None):
    return seed, flag, weight, dims, weights


def test_h02a_numpy_scalars_are_passed_on_as_python_numbers():
    """H02a, V15: ``model.sampling_seed=np.int32(0)`` and ``model.causal=np.True_`` were
    accepted by the kind checks and handed to the model as numpy scalars, which torch refused
    at every plan ("an integer is required", "is_causal must be bool, not numpy.bool")."""
    seed, flag, weight, dims, weights = _options(
        np.int32(3), np.True_, np.float16(0.5), (np.int64(1), 2), {'a': np.float32(1.0)})
    assert (seed, flag, weight, dims, weights) == (3, True, 0.5, (1, 2), {'a': 1.0})
    assert type(seed) is int and type(flag) is bool and type(weight) is float
    assert type(dims) is tuple and [type(d) for d in dims] == [int, int]
    assert type(weights['a']) is float


def test_h02a_still_the_same_objects_without_numpy_scalars():
    from vpn_plugin.config_types import plain_numbers
    values = [[1, 2], (3.0,), {'x': [True]}, 'text', torch.zeros(2), np.zeros(2)]
    for value in values:
        assert plain_numbers(value) is value


@pytest.mark.parametrize('seed', [np.int32(0), np.int64(0), np.uint8(0), np.uint32(0)])
def test_h02a_a_numpy_seed_plans_as_the_python_seed(seed):
    """H02a/H02c/H02d/V17: a KEPP built with a numpy ``sampling_seed`` draws each window's
    noise as one built with the Python int (np.uint8 overflowed in the seed arithmetic)."""
    models = [MODELS.build(dict(type='KEPP', feature_dim=8, num_actions=6, horizon=3, dim=32,
                                n_timesteps=20, sampling_seed=value)) for value in (seed, 0)]
    samples = {'index': torch.tensor([0, 5])}
    draws = [m.plan.draw(m.plan.generators(2, samples), 2, 'cpu') for m in models]
    assert torch.equal(*draws)


def test_v15_cefito_with_numpy_causal_plans():
    """V15: CEFITO ``causal=np.True_`` (accepted since the pass21 fix V27) failed at every plan
    in torch's attention; it plans as with ``True``."""
    torch.manual_seed(0)
    taxonomy = {0: (0, 1, 2), 1: (5, 3, 4), 2: (6, 2)}
    settings = dict(type='CEFITO', feature_dim=12, num_actions=7, num_tasks=3, horizon=3,
                    taxonomy=taxonomy, text_dim=16, hidden_dim=12, depth=2, num_heads=2,
                    num_negatives=4, action_embeddings=torch.randn(7, 16))
    plans = []
    for causal in (np.True_, True):
        torch.manual_seed(1)
        model = MODELS.build(dict(settings, causal=causal))
        model.classifier.classifier_ready.fill_(True)
        torch.manual_seed(2)
        batch = dict(start=torch.randn(2, 12), goal=torch.randn(2, 12))
        plans.append([s.pred_plan for s in model.eval()(batch, None, mode='predict')])
    assert all(torch.equal(a, b) for a, b in zip(*plans))


# ------------------------------------------ TX01: a text cache of the model the folder holds now
def test_tx01_a_model_replaced_in_its_folder_is_encoded_again(tmp_path, monkeypatch):
    """TX01: the text-feature cache was keyed on the encoder's path: a new model saved in the
    same folder (here: its weights file rewritten) was served the old model's encodings."""
    import os
    import json
    from vpn_plugin.models import text_embeddings as te
    encoder = tmp_path / 'my encoder'
    encoder.mkdir()
    weights = encoder / 'model.safetensors'
    monkeypatch.setattr(te, 'encode_texts', lambda texts, encoder, pooling: float(
        weights.read_text()) * torch.eye(len(texts), 4))
    taxonomy = tmp_path / 'taxonomy.json'
    taxonomy.write_text(json.dumps({'0_a': {'0': 'pour water', '1': 'stir'}}))
    options = dict(taxonomy=str(taxonomy), encoder=str(encoder), pooling='mean',
                   cache_dir=str(tmp_path / 'cache'))
    weights.write_text('1')
    assert te.load_action_features(**options)[0, 0] == 1
    assert te.load_action_features(**options)[0, 0] == 1  # read from the cache
    weights.write_text('2')  # the same size: a fine-tuned model of the same shapes
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert te.load_action_features(**options)[0, 0] == 2
    weights.write_text('3')  # same size, its time restored (cp -p, rsync -a, touch -r)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert te.load_action_features(**options)[0, 0] == 3


def test_tx01_still_one_cache_for_an_unchanged_folder_and_the_default_encoder(tmp_path):
    from vpn_plugin.models import text_embeddings as te
    encoder = tmp_path / 'enc'
    encoder.mkdir()
    (encoder / 'config.json').write_text('{}')
    texts = ['pour water', 'stir']
    first = te._cache_file(texts, 'actions', str(encoder), tmp_path, 'mean')
    assert te._cache_file(texts, 'actions', str(encoder), tmp_path, 'mean') == first
    # the installed MiniLM keeps its key (caches written before stay valid)
    assert te._cache_file(texts, 'actions', None, tmp_path, 'mean').name == \
        f'actions_{te.cache_key(te.DEFAULT_ENCODER, texts)}.pt'
    # a name that is no folder (nothing to read): the key of the name, as before
    assert te._cache_file(texts, 'actions', 'no/such/dir', tmp_path, 'mean').name == \
        f'actions_{te.cache_key("no/such/dir", texts)}.pt'


# ------------------------------- PL2, PL3: plan.py says when a stochastic plan is one draw
def _plan_lines(capsys, config, checkpoint, features, start, goal):
    from tool_modules import load_tool
    load_tool('plan').main([str(config), str(checkpoint), '--features', str(features),
                            '--start-time', str(start), '--goal-time', str(goal)])
    return capsys.readouterr().out


def test_pl2_a_stochastic_plan_of_no_window_is_said_to_be_one_draw(
        tiny_pdpp_checkpoint, tiny_crosstask, tmp_path, capsys):
    """PL2/PL3: plan.py --features of a file outside the split's feature folder (a byte copy of
    a test video's) printed PDPP's plan from unseeded noise, another one each run, without a
    word; a file of the folder at a window's times is planned as the test did (no note)."""
    import shutil
    from mmengine.config import Config
    from vpn_plugin.apis import build_split_dataset
    config, checkpoint = tiny_pdpp_checkpoint
    window = build_split_dataset(Config.fromfile(str(config)), 'test').windows[0]
    start, goal = window.times[0][0], window.times[-1][1]
    own = next(Path(tiny_crosstask['feature_dir']).glob(f'{window.feature}.*'))
    copy = tmp_path / 'my video' / own.name
    copy.parent.mkdir()
    shutil.copy(own, copy)
    out = _plan_lines(capsys, config, checkpoint, copy, start, goal)
    assert 'NOTE: PDPP plans from random noise' in out and 'one draw' in out
    out = _plan_lines(capsys, config, checkpoint, own, start, goal)
    assert 'is window 0 of the test split' in out and 'one draw' not in out


def test_pl2_still_no_note_for_a_planner_without_noise():
    from vpn_plugin.apis.inference import draws_noise
    kepp = MODELS.build(dict(type='KEPP', feature_dim=8, num_actions=6, horizon=3, dim=32,
                             n_timesteps=20))
    assert draws_noise(kepp)
    cefito = MODELS.build(dict(type='CEFITO', feature_dim=12, num_actions=7, num_tasks=3,
                               horizon=3, taxonomy={0: (0, 1, 2), 1: (5, 3, 4), 2: (6, 2)},
                               text_dim=16, hidden_dim=12, depth=2, num_heads=2,
                               num_negatives=4, action_embeddings=torch.randn(7, 16)))
    assert not draws_noise(cefito)


# ------------------------- X08, X09, X10: a fixture's input ids in another dtype
@pytest.mark.parametrize('dtype', [np.uint8, np.uint64, np.int8, np.int32])
def test_x09_input_ids_of_any_integer_dtype_are_read_as_int64(tmp_path, dtype):
    """X09/X10: pdpp_small_t3's inputs.npz with its int64 ids re-saved as uint8 or uint64
    ended in "RuntimeError: one_hot is only applicable to index tensor of type LongTensor"
    (a traceback): the same ids are read as int64, as int16/int32 ones were."""
    from vpn_plugin.oracles.compare import read_npz
    np.savez(tmp_path / 'inputs.npz', actions=np.array([[0, 3, 8]], dtype=dtype))
    actions = read_npz(tmp_path / 'inputs.npz')['actions']
    assert actions.dtype == np.int64 and actions.tolist() == [[0, 3, 8]]


def test_x09_still_video_frames_and_huge_uint64_stay(tmp_path):
    from vpn_plugin.oracles.compare import read_npz
    frames = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    huge = np.array([2 ** 63, 1], dtype=np.uint64)
    np.savez(tmp_path / 'inputs.npz', video_uint8=frames, ids=huge)
    arrays = read_npz(tmp_path / 'inputs.npz')
    assert arrays['video_uint8'].dtype == np.uint8 and arrays['ids'].dtype == np.uint64


def test_x08_float_ids_are_refused_naming_the_dtype_the_file_holds(tmp_path):
    """X08: ids re-saved as float64 were refused "actions has dtype float32" (the dtype after
    the float32 read of exact float64 inputs): the refusal names the file's float64."""
    from vpn_plugin.oracles.compare import check_ids, read_npz
    np.savez(tmp_path / 'inputs.npz', actions=np.array([[0.0, 3.0, 8.0]]))
    arrays = read_npz(tmp_path / 'inputs.npz')
    with pytest.raises(ValueError, match=r'actions has dtype float64; expected integer ids'):
        check_ids(tmp_path / 'inputs.npz', arrays, {'actions': 9})


# ------------------------------------------------ K8: test.py --out preds.PKL
@pytest.mark.parametrize('name', ['preds.PKL', 'preds.Pickle', 'preds.pkl'])
def test_k8_an_upper_case_pickle_suffix_is_a_pickle(tmp_path, name):
    """K8: ``test.py --out preds.PKL`` passed the tool's own suffix check (outputs.has_suffix,
    without case) and was then refused by mmengine's DumpResults "The output file must be a
    pkl file." (its check has case)."""
    from vpn_plugin.evaluation.dump_results import AtomicDumpResults
    metric = AtomicDumpResults(out_file_path=str(tmp_path / name))
    metric.compute_metrics([{'pred_plan': [1, 2, 3]}])
    assert (tmp_path / name).is_file()


def test_k8_still_refuses_another_suffix_naming_the_flag(tmp_path):
    from vpn_plugin.evaluation.dump_results import AtomicDumpResults
    with pytest.raises(ValueError, match=r'--out .*preds\.txt: expected a file name ending in '
                                         r'\.pkl or \.pickle'):
        AtomicDumpResults(out_file_path=str(tmp_path / 'preds.txt'))


# ------------------------------------------- P4: a split's folder through a link to the same one
def test_p4_a_link_to_the_splits_feature_folder_is_the_same_folder(tmp_path, monkeypatch):
    """P4: ``--cfg-options test_dataloader.dataset.feature_dir=<a symlink to the training
    feature folder>`` was refused "the splits read different feature_dirs" (the path strings
    differ, the folder does not)."""
    from vpn_plugin.data_paths import load_config
    config = Path(__file__).resolve().parents[1] / 'configs/vpn_niv_t3.py'
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'features').mkdir()
    (tmp_path / 'link').symlink_to(tmp_path / 'features')
    options = {f'{split}_dataloader.dataset.feature_dir': str(tmp_path / 'features')
               for split in ('train', 'val')}
    options['test_dataloader.dataset.feature_dir'] = str(tmp_path / 'link')
    assert load_config(config, options).test_dataloader.dataset.feature_dir == \
        str(tmp_path / 'link')
    options['test_dataloader.dataset.feature_dir'] = str(tmp_path / 'other')
    with pytest.raises(ValueError, match='the splits read different feature_dirs'):
        load_config(config, options)


# --------------------------- MT1: make_text_features' advice for CEFITO's action names
def test_mt1_the_action_names_advice_names_the_text_width(tmp_path, monkeypatch, capsys):
    """MT1: ``make_text_features.py --action-names`` (the default MiniLM: Dt = 384) printed
    "in the config: model.text_embeddings=dict(file=...)"; followed as printed, CEFITO (text_dim
    512) refused it "gave 384-d text features but model.text_dim=512": the line names text_dim,
    as the state-description branch does."""
    import json
    from tool_modules import load_tool
    from vpn_plugin.models import text_embeddings as te
    monkeypatch.setattr(te, 'load_action_features', lambda **options: torch.eye(2, 384))
    taxonomy = tmp_path / 'taxonomy.json'
    taxonomy.write_text(json.dumps({'0_a': {'0': 'pour water', '1': 'stir'}}))
    load_tool('make_text_features').main(['--taxonomy', str(taxonomy), '--action-names',
                                          '--out', str(tmp_path / 'acts.npy')])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert 'in the config: model.text_dim=384, model.text_embeddings=dict(file=' in line
