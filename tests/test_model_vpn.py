"""ViterbiPlanNet (the authors' network): sizes, math against brute force, text features."""
import itertools
import json
import pickle
import re
import string
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import MODELS
from vpn_plugin.data_paths import load_config
from vpn_plugin.datasets.sources import SOURCE_KEYS
from vpn_plugin.models import load_state_features
from vpn_plugin.models.viterbi_plan_net import num_parameters, repeat_last_emission
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
N, K, D, T = 5, 2, 12, 4
# The authors' counts (their code, T = 3 / 4 / 5 / 6), as listed in issue 11.
AUTHORS_COUNTS = {
    'crosstask': (5_549_602, 5_583_783, 5_617_964, 5_652_145),
    'niv': (5_482_390, 5_494_726, 5_507_062, 5_519_398),
    'coin': (6_067_795, 6_267_741, 6_467_687, 6_667_633)}


pytestmark = pytest.mark.usefixtures('single_thread')


def build(**overrides):
    cfg = dict(type='ViterbiPlanNet', num_actions=N, num_tasks=K, horizon=T, feature_dim=D,
               text_dim=6, embed_dim=8, loss_weights=dict(state=0.0))
    cfg.update(overrides)
    return MODELS.build(cfg)


def random_pkg(seed=0, zero_row=2) -> np.ndarray:
    """Row-stochastic (N, N) with some forbidden edges and one unobserved (all-zero) row."""
    rng = np.random.default_rng(seed)
    pkg = rng.random((N, N)) * (rng.random((N, N)) < 0.6)
    pkg[:, 0] += 0.1
    pkg[zero_row] = 0
    return pkg / np.maximum(pkg.sum(1, keepdims=True), 1e-300)


def install(model, pkg):
    model.set_pkg(pkg)
    return model


def brute_marginals(emissions: np.ndarray, transitions: np.ndarray) -> np.ndarray:
    """(T, N) posterior marginals of one chain by enumerating all N^T paths (uniform prior)."""
    horizon = len(emissions)
    marginals = np.zeros_like(emissions, dtype=np.float64)
    for path in itertools.product(range(N), repeat=horizon):
        weight = np.prod([emissions[t, a] for t, a in enumerate(path)]) / N
        weight *= np.prod([transitions[a, b] for a, b in zip(path[:-1], path[1:])])
        for t, a in enumerate(path):
            marginals[t, a] += weight
    return marginals / marginals.sum(1, keepdims=True)


def brute_viterbi(emissions: np.ndarray, transitions: np.ndarray) -> list:
    """The best path (product of prior, emissions and raw transitions) by enumeration."""
    def score(path):
        return np.prod([emissions[t, a] for t, a in enumerate(path)]) * np.prod(
            [transitions[a, b] for a, b in zip(path[:-1], path[1:])])
    return list(max(itertools.product(range(N), repeat=len(emissions)), key=score))


def authors_dvl_transitions(pkg: np.ndarray) -> np.ndarray:
    clamped = np.maximum(pkg, 1e-10)
    return clamped / clamped.sum(1, keepdims=True)


@pytest.mark.parametrize('dataset', sorted(AUTHORS_COUNTS))
def test_default_configs_have_the_authors_parameter_counts(dataset):
    for horizon, expected in zip((3, 4, 5, 6), AUTHORS_COUNTS[dataset]):
        cfg = load_config(str(REPO / f'configs/vpn_{dataset}_t{horizon}.py')).model
        assert cfg.type == 'ViterbiPlanNet'
        cfg.text_embeddings, cfg.loss_weights = None, dict(state=0.0)
        assert num_parameters(MODELS.build(cfg)) == expected, (dataset, horizon)


def test_soft_plan_is_the_brute_force_marginal_of_the_clamped_chain():
    """First DVL = posterior marginals of the chain with transitions clamped at 1e-10 and
    renormalised (the unobserved row becomes uniform); second DVL = the same over the
    soft plan; hard Viterbi = best path under the RAW PKG."""
    pkg = random_pkg()
    model = install(build(), pkg).eval()
    log_emissions = torch.randn(2, T, N).clamp(max=0) - 0.1
    soft = model.soft_plan(log_emissions)
    second = model.second_dvl(soft)
    dvl_pkg = authors_dvl_transitions(pkg)
    for b in range(2):
        emissions = log_emissions[b].double().exp().numpy()
        np.testing.assert_allclose(soft[b].numpy(), brute_marginals(emissions, dvl_pkg),
                                   atol=1e-5)
        np.testing.assert_allclose(second[b].numpy(),
                                   brute_marginals(soft[b].double().numpy(), dvl_pkg), atol=1e-5)
        assert model.hard_viterbi(soft)[b].tolist() == brute_viterbi(soft[b].numpy(), pkg)


def test_two_dvl_layers_train_and_decode_the_second_layers_soft_plan():
    """dvl_layers=2: the soft plan is the brute-force marginal of the chain whose emissions
    are the first layer's marginals; the plan loss is on it; 'dvl_argmax' adds ONE more DVL."""
    pkg = random_pkg(2)
    model = install(build(dvl_layers=2), pkg).eval()
    log_emissions = torch.randn(2, T, N).clamp(max=0) - 0.1
    soft = model.soft_plan(log_emissions)
    dvl_pkg = authors_dvl_transitions(pkg)
    for b in range(2):
        first = brute_marginals(log_emissions[b].double().exp().numpy(), dvl_pkg)
        np.testing.assert_allclose(soft[b].numpy(), brute_marginals(first, dvl_pkg), atol=1e-5)
        assert not np.allclose(soft[b].numpy(), first, atol=1e-3)
        np.testing.assert_allclose(model.second_dvl(soft)[b].numpy(),
                                   brute_marginals(soft[b].double().numpy(), dvl_pkg), atol=1e-5)
    inputs = {'start': torch.randn(3, D), 'goal': torch.randn(3, D)}
    plan, task = torch.randint(0, N, (3, T)), torch.randint(0, K, (3,))
    loss = model(inputs, {'plan': plan, 'task': task}, mode='loss')['loss_plan']
    second = model.soft_plan(model.log_emissions(model.encode(inputs)))
    one_hot = torch.zeros(3, T, N).scatter_(-1, plan[..., None], 1.0)
    torch.testing.assert_close(loss, ((second - one_hot) ** 2).mean())
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match='model.dvl_layers'):
            build(dvl_layers=bad)


def test_coin_t6_configs_stack_two_dvl_layers():
    for config in ('vpn_coin_t6.py', 'vpn_coin_t6_eval_t3.py', 'selection/vpn_coin_t6_authors.py',
                   'mtid_protocol/vpn_coin_t6.py'):
        assert load_config(str(REPO / 'configs' / config)).model.dvl_layers == 2, config
    for config in ('vpn_coin_t5.py', 'vpn_crosstask_t6.py', 'mtid_protocol/vpn_coin_t5.py'):
        assert load_config(str(REPO / 'configs' / config)).model.get('dvl_layers', 1) == 1


def test_stand_in_text_features_are_padded_and_named(tmp_path, caplog):
    """COIN's MiniLM stand-in (pad_to=768 keeps the paper's network) is named in the log and
    in protocol rows; the paper's kind (a file, CLIP pooling) is not."""
    from vpn_plugin.models.text_embeddings import stand_in_label
    from vpn_plugin.protocol.runner import config_variant
    array = np.random.default_rng(0).random((N, 6, 4)).astype(np.float32)
    np.save(tmp_path / 'small.npy', array)
    padded = load_state_features(file=str(tmp_path / 'small.npy'), pad_to=9)
    assert padded.shape == (N, 6, 9) and torch.equal(padded[..., :4], torch.from_numpy(array))
    assert not padded[..., 4:].any()
    with pytest.raises(ValueError, match='pad_to=3 is smaller'):
        load_state_features(file=str(tmp_path / 'small.npy'), pad_to=3)
    coin = load_config(str(REPO / 'configs/vpn_coin_t3.py')).model.text_embeddings
    label = stand_in_label(coin)
    assert 'stand-in all-MiniLM-L6-v2' in label and '768' in label and 'not the paper' in label
    assert stand_in_label(dict(coin, encoder='/models/clip', pooling='clip')) is None
    assert stand_in_label(dict(file='x.npy')) is None and stand_in_label(None) is None
    assert config_variant(str(REPO / 'configs/vpn_coin_t3.py'), {}) == {'text_features': label}
    assert config_variant(str(REPO / 'configs/vpn_coin_t3.py'),
                          {'model.text_embeddings.pooling': 'clip'}) == {}
    assert config_variant(str(REPO / 'configs/vpn_niv_t3.py'), {}) == {}


def test_decode_modes_map_to_the_authors_outputs():
    pkg = random_pkg(1)
    model = install(build(), pkg).eval()
    log_emissions = torch.randn(3, T, N).clamp(max=0)
    soft = model.soft_plan(log_emissions)
    decode = model.decode_plan
    assert torch.equal(decode(log_emissions, mode='emission_argmax'), log_emissions.argmax(-1))
    assert torch.equal(decode(log_emissions, mode='dvl_argmax'), model.second_dvl(soft).argmax(-1))
    for b in range(3):
        assert decode(log_emissions, mode='dvl_viterbi')[b].tolist() == brute_viterbi(
            soft[b].numpy(), pkg)
        assert decode(log_emissions, mode='emission_viterbi')[b].tolist() == brute_viterbi(
            log_emissions[b].exp().numpy(), pkg)


def test_state_logits_by_hand():
    """exp(logit_scale) * cosine(visual, text), mean over the 3 before / 3 after sentences."""
    model = build().eval()
    model.state_encoder.set_state_features(torch.randn(N, 6, 6))
    states = torch.randn(3, 2, 8)
    text = model.state_encoder.text_encoder(model.state_encoder.state_features)
    expected = torch.zeros(3, 2, N)
    for b, side, action in itertools.product(range(3), range(2), range(N)):
        sentences = text[action, 3 * side:3 * side + 3]
        cosines = [torch.dot(states[b, side], s) / states[b, side].norm() / s.norm()
                   for s in sentences]
        expected[b, side, action] = (1 / 0.07) * sum(cosines) / 3
    torch.testing.assert_close(model.state_logits(states), expected, atol=1e-4, rtol=1e-5)


def test_cross_horizon_repeats_the_last_emission_and_evaluates_the_first_steps():
    values = torch.arange(6.).view(1, 6, 1)
    assert repeat_last_emission(values, 3).flatten().tolist() == [0, 1, 5, 5, 5, 5]
    assert repeat_last_emission(values, 6).flatten().tolist() == [0, 1, 2, 3, 4, 5]
    pkg = random_pkg(2)
    model = install(build(cross_horizon='repeat_last'), pkg).eval()
    inputs = {'start': torch.randn(2, D), 'goal': torch.randn(2, D)}
    samples = model(inputs, {'plan': torch.zeros(2, 2, dtype=torch.long)}, mode='predict')
    with torch.no_grad():
        full = model.log_emissions(model.encode(inputs))  # (B, T, N), not rearranged
    for b, sample in enumerate(samples):
        chain = full[b, [0, 3, 3, 3]].exp().double().numpy()
        soft = brute_marginals(chain, authors_dvl_transitions(pkg))
        assert sample.pred_plan.tolist() == brute_viterbi(soft.astype(np.float32), pkg)[:2]
        np.testing.assert_allclose(sample.soft_plan.numpy(), soft[:2], atol=1e-5)
    strict = build()
    with pytest.raises(ValueError, match="horizon mismatch.*cross_horizon='repeat_last'"):
        strict(inputs, {'plan': torch.zeros(2, 2, dtype=torch.long)}, mode='predict')


def test_losses_have_the_authors_reductions():
    model = build(use_dvl=False, loss_weights=dict(state=0.0)).eval()
    inputs = {'start': torch.randn(4, D), 'goal': torch.randn(4, D)}
    plan, task = torch.randint(0, N, (4, T)), torch.randint(0, K, (4,))
    losses = model(inputs, {'plan': plan, 'task': task}, mode='loss')
    emissions = model(inputs, mode='tensor')
    one_hot = torch.zeros(4, T, N).scatter_(-1, plan[..., None], 1.0)
    expected_plan = ((emissions - one_hot) ** 2).sum() / (4 * T * N)  # mean over B*T*N
    torch.testing.assert_close(losses['loss_plan'], expected_plan)
    assert set(losses) == {'loss_plan', 'loss_task'}


def test_predicted_samples_pickle_only_their_own_data():
    model = install(build(num_actions=N), random_pkg()).eval()
    inputs = {'start': torch.randn(256, D), 'goal': torch.randn(256, D)}
    plan = torch.randint(0, N, (256, T))
    samples = model(inputs, {'plan': plan, 'task': plan[:, 0] % K,
                             'index': torch.arange(256)}, mode='predict')
    one = len(pickle.dumps(samples[0].to_dict()))
    own = 2 * T * N * 4  # soft_plan and emissions, float32
    assert one < own + 3000, f'{one} bytes pickled for one sample'  # batch: 256x larger


def test_missing_text_features_is_a_clear_error():
    with pytest.raises(ValueError, match='text_embeddings is missing'):
        build(loss_weights=dict(state=1.0))


def test_text_features_file_is_a_plain_float_array(tmp_path):
    array = np.random.default_rng(0).random((N, 6, 6)).astype(np.float16)
    np.save(tmp_path / 'ok.npy', array)
    features = load_state_features(file=str(tmp_path / 'ok.npy'))
    assert features.dtype == torch.float32 and torch.equal(features, torch.from_numpy(
        array.astype(np.float32)))
    model = build(text_embeddings=dict(file=str(tmp_path / 'ok.npy')), loss_weights={})
    assert torch.equal(model.state_encoder.state_features, features)
    np.save(tmp_path / 'pickled.npy', np.array([{'a': 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match='pickled.npy: not a plain .npy'):
        load_state_features(file=str(tmp_path / 'pickled.npy'))
    np.save(tmp_path / 'flat.npy', array[:, 0])
    with pytest.raises(ValueError, match='flat.npy: array of shape \\(5, 6\\)'):
        load_state_features(file=str(tmp_path / 'flat.npy'))
    with pytest.raises(ValueError, match=r'shape \(5, 6, 6\); expected \(5, 6, 7\)'):
        build(text_dim=7, text_embeddings=dict(file=str(tmp_path / 'ok.npy')), loss_weights={})


def test_shipped_clip_features_match_the_configs(shared_data):
    for config, n in (('vpn_crosstask_t3.py', 133), ('vpn_niv_t3.py', 48)):
        text = load_config(str(REPO / 'configs' / config)).model.text_embeddings
        path = Path(text.file)
        path = path if path.is_absolute() else REPO / path
        assert load_state_features(file=str(path)).shape == (n, 6, 768)


def tiny_clip(root: Path) -> Path:
    """A randomly initialised 1-layer CLIPTextModel + a character-level CLIP tokenizer."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer
    vocab = {'<|startoftext|>': 0, '<|endoftext|>': 1}
    for char in string.ascii_lowercase + string.digits:
        vocab[char] = len(vocab)
        vocab[char + '</w>'] = len(vocab)
    torch.manual_seed(0)
    config = CLIPTextConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32,
                            num_hidden_layers=1, num_attention_heads=2,
                            max_position_embeddings=64, bos_token_id=0, eos_token_id=1,
                            pad_token_id=1)
    CLIPTextModel(config).save_pretrained(root / 'clip')
    CLIPTokenizer(vocab=vocab, merges=[]).save_pretrained(root / 'clip')
    return root / 'clip'


def test_clip_features_computed_with_transformers(tmp_path):
    """(N, 6, Dt) from state_descriptions.json = each sentence's CLIP pooled feature, encoded
    alone (no batching, padding or cache), before sentences in slots 0-2, after in 3-5."""
    from transformers import AutoModel, AutoTokenizer
    encoder = tiny_clip(tmp_path)
    taxonomy = {'0_TaskA': {'0': 'pour water', '1': 'stir'}, '1_TaskB': {'2': 'cut'}}
    descriptions = {task: {name: {'before': [f'before {name} {i}' for i in range(3)],
                                  'after': [f'after {name} x{i}' for i in range(3)]}
                           for name in names.values()}
                    for task, names in (('Task A', taxonomy['0_TaskA']),
                                        ('Task B', taxonomy['1_TaskB']))}
    (tmp_path / 'taxonomy.json').write_text(json.dumps(taxonomy))
    (tmp_path / 'states.json').write_text(json.dumps(descriptions))
    options = dict(taxonomy=str(tmp_path / 'taxonomy.json'),
                   state_descriptions=str(tmp_path / 'states.json'), encoder=str(encoder),
                   pooling='clip', cache_dir=str(tmp_path / 'cache'))
    features = load_state_features(**options)
    assert features.shape == (3, 6, 16)
    tokenizer = AutoTokenizer.from_pretrained(encoder)
    model = AutoModel.from_pretrained(encoder).eval()
    with torch.no_grad():
        for action, name in enumerate(['pour water', 'stir', 'cut']):
            texts = descriptions['Task B' if name == 'cut' else 'Task A'][name]
            for slot, text in enumerate(texts['before'] + texts['after']):
                alone = model(**tokenizer([text], return_tensors='pt')).pooler_output[0]
                torch.testing.assert_close(features[action, slot], alone, atol=1e-5, rtol=1e-5)
    cached = load_state_features(**{**options, 'allow_encode': False})
    assert torch.equal(cached, features)


@pytest.mark.parametrize('dataset', ['crosstask', 'niv', 'coin'])
def test_selection_presets(dataset):
    """'authors': all training videos, validation = the official test windows every epoch;
    the default 'unified': validation on held-out training videos."""
    authors = load_config(str(REPO / f'configs/selection/vpn_{dataset}_t4_authors.py'))
    unified = load_config(str(REPO / f'configs/vpn_{dataset}_t4.py'))
    assert authors.selection == 'authors' and unified.get('selection', 'unified') == 'unified'
    val, test = authors.val_dataloader.dataset, authors.test_dataloader.dataset
    assert val.split == 'test' and val.horizon == test.horizon == 4
    assert {k: val.get(k) for k in SOURCE_KEYS} == {k: test.get(k) for k in SOURCE_KEYS}
    assert authors.train_dataloader.dataset.val_fraction == 0.0
    assert authors.train_cfg.val_interval == 1
    assert unified.val_dataloader.dataset.split == 'val'
    assert authors.model == unified.model


def test_authors_selection_trains_on_every_training_video(tiny_crosstask):
    from mmaction.registry import DATASETS
    train = DATASETS.build(tiny_crosstask['train_dataset'])
    val = DATASETS.build(tiny_crosstask['val_dataset'])
    everything = DATASETS.build(dict(tiny_crosstask['train_dataset'], val_fraction=0.0))
    assert len(val) > 0 and len(everything) == len(train) + len(val)


@pytest.mark.parametrize('rows', [3, 40])
def test_linear_pair_equals_the_two_layers(rows):
    """LinearPair (one affine map when rows > E) = Linear -> Linear, values and gradients."""
    from vpn_plugin.models.state_encoder import LinearPair
    torch.manual_seed(0)
    pair = LinearPair(12, 24, 8).double()
    plain = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Linear(24, 8)).double()
    plain.load_state_dict(pair.state_dict())
    x = torch.randn(rows, 12, dtype=torch.double)
    target = torch.randn(rows, 8, dtype=torch.double)
    for module in (pair, plain):
        ((module(x) - target) ** 3).sum().backward()
    torch.testing.assert_close(pair(x), plain(x))
    for (name, a), (_, b) in zip(pair.named_parameters(), plain.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)


def test_model_stats_prints_the_count(capsys):
    load_tool('model_stats').main([str(REPO / 'configs/vpn_niv_t4.py'),
               '--cfg-options', 'model.text_embeddings.file=/no/such.npy'])
    out = capsys.readouterr().out
    assert 'ViterbiPlanNet, 5,494,726 parameters (5.49M)' in out
    assert 'built without text features' in out and 'state_encoder' in out


def test_checkpoints_from_before_the_shared_state_encoder_still_load():
    """The state encoder moved under ``state_encoder.`` (shared with SCHEMA); a state dict
    with the old flat names (visual_encoder.*, text_encoder.*, logit_scale) loads strictly."""
    model = build()
    old = {}
    for name, value in model.state_dict().items():
        flat = name.replace('state_encoder.', '', 1) if name.startswith('state_encoder.') else name
        old[flat] = value + 1 if value.is_floating_point() else value
    assert 'visual_encoder.0.weight' in old and 'logit_scale' in old
    fresh = build()
    fresh.load_state_dict(old, strict=True)
    torch.testing.assert_close(fresh.state_encoder.logit_scale, model.state_encoder.logit_scale + 1)
    torch.testing.assert_close(fresh.state_encoder.visual_encoder[0].weight,
                               model.state_encoder.visual_encoder[0].weight + 1)


@pytest.mark.parametrize('pooling', ['clip', 'clip_eot'])
def test_clip_pooling_of_a_model_that_is_not_clip_is_refused(pooling):
    """Fourth hostile pass: `make_text_features.py --pooling clip` with the MiniLM stand-in
    wrote BERT's pooler output labelled 'clip features', which no table marks as a stand-in."""
    from vpn_plugin.models.text_embeddings import encode_texts
    with pytest.raises(ValueError, match=rf"text pooling '{pooling}' reads a CLIP text tower, "
                                         r"but the encoder .* is a 'bert' model"):
        encode_texts(['pour water'], None, pooling=pooling)


def test_a_missing_text_encoder_folder_is_said(tmp_path):
    from vpn_plugin.models.text_embeddings import encode_texts
    with pytest.raises(FileNotFoundError, match=r"text encoder '.*nope' \(no such folder\)"):
        encode_texts(['pour water'], str(tmp_path / 'nope'))


@pytest.mark.parametrize('argv, message', [
    (['configs/vpn_niv_t3.py', '--cfg-options', 'model.nosuch=1'],
     r"configs/vpn_niv_t3.py: model: ViterbiPlanNet has no option\(s\) \['nosuch'\]"),
    (['configs/_base_/default_runtime.py'], r'default_runtime.py: holds no model entry'),
])
def test_model_stats_names_an_unknown_option_or_a_config_without_model(argv, message,
                                                                      monkeypatch):
    """Fourth hostile pass: a TypeError / AttributeError traceback."""
    from test_hostile_tools import user_error
    monkeypatch.chdir(REPO)
    assert re.search(message, user_error('model_stats', argv))
