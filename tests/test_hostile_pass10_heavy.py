"""Ninth hostile pass (issue 37), the heavy methods and the core math called directly
(hostile24).

Each test is a case that was wrong, silent or vague on be118b8 (case ids of
/tmp/hostile24_log.md).
"""
import re

import numpy as np
import pytest
import torch

from vpn_plugin.core import dvl, metrics, pkg, stats, viterbi


def log_emissions(num_actions: int = 4) -> torch.Tensor:
    """(2, 3, N) log probabilities."""
    noise = torch.randn(2, 3, num_actions, generator=torch.Generator().manual_seed(0))
    return torch.log_softmax(noise, -1)


def random_pkg(num_actions: int = 4) -> np.ndarray:
    """(N, N) float64 row-stochastic."""
    counts = np.random.default_rng(1).random((num_actions, num_actions))
    return counts / counts.sum(1, keepdims=True)


LOG_PKG = pkg.pkg_log_transitions(random_pkg())


# ------------------------------------------------------------------- DVL temperature / floor
@pytest.mark.parametrize('temperature', [1e-40, 1e300])
def test_dvl_refuses_a_temperature_beyond_the_dtype(temperature):
    """DV1 / DV3: temperature=1e-40 turned every finite log value into -inf (a feasible
    chain returned u = 0 and log Z = -inf, as if no path existed); 1e300 gave log Z = +inf."""
    with pytest.raises(ValueError, match=re.escape(f'temperature={temperature:g}: ') + r'.*expected a '
                                         r'temperature in \['):
        dvl.differentiable_viterbi(log_emissions(), LOG_PKG, temperature=temperature)
    soft, log_z = dvl.differentiable_viterbi(log_emissions(), LOG_PKG, temperature=1e-6)
    assert torch.isfinite(log_z).all()  # a small temperature that fits still runs
    assert torch.equal(soft.argmax(-1), viterbi.viterbi_decode(log_emissions(), LOG_PKG)[0])


@pytest.mark.parametrize('call, pattern', [
    (lambda: dvl.differentiable_viterbi(log_emissions(), LOG_PKG, clamp_probs=0.9),
     r'clamp_probs=0.9 with N=4 actions adds up to 3.6 to a row'),
    (lambda: pkg.pkg_log_transitions(random_pkg(), clamp=0.5),
     r'pkg_log_transitions\(\) argument clamp=0.5 with N=4 actions'),
])
def test_a_probability_floor_must_keep_rows_distributions(call, pattern):
    """DV13: clamp_probs=0.9 floored every probability to the same value (uniform marginals,
    the emissions erased, no word); PK14: pkg_log_transitions(clamp=0.5) returned rows
    summing to 2, which the decoder then refused as not coming "from pkg_log_transitions"."""
    with pytest.raises(ValueError, match=pattern):
        call()
    assert pkg.pkg_log_transitions(random_pkg(), clamp=1e-10).shape == (4, 4)  # the authors'


# ------------------------------------------------------------------- decoders' inputs
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_decoders_read_a_pkg_stored_in_a_half_dtype(dtype):
    """V9 / V10: pkg_log_transitions(dtype=torch.bfloat16) of a valid PKG was refused by
    viterbi_decode ("row 2 has probabilities summing to 1.00123"): the 1e-3 row-sum tolerance
    is below bfloat16's rounding."""
    counts = np.random.default_rng(0).random((133, 133))
    log_transitions = pkg.pkg_log_transitions(counts / counts.sum(1, keepdims=True), dtype=dtype)
    paths, _ = viterbi.viterbi_decode(log_emissions(133), log_transitions)
    assert paths.shape == (2, 3)
    soft, _ = dvl.differentiable_viterbi(log_emissions(133), log_transitions)
    assert soft.shape == (2, 3, 133)
    with pytest.raises(ValueError, match='row 0 has probabilities summing to'):
        viterbi.viterbi_decode(log_emissions(133), log_transitions + 0.05)  # still refused


@pytest.mark.parametrize('call, error, pattern', [
    (lambda: viterbi.viterbi_decode(torch.empty(2, 3, 4, device='meta'),
                                    torch.empty(4, 4, device='meta')),
     ValueError, 'log_emissions is on the meta device'),
    (lambda: viterbi.viterbi_decode_probs(log_emissions().exp().numpy(),
                                          LOG_PKG.exp().numpy()),
     TypeError, 'emissions is a ndarray; expected a torch.Tensor'),
    (lambda: pkg.pkg_log_transitions(random_pkg(), dtype='float32'),
     TypeError, "dtype='float32'; expected a floating-point torch.dtype"),
    (lambda: pkg.check_pkg(random_pkg() + 0.5j),
     TypeError, 'pkg has dtype complex128; expected real probabilities'),
])
def test_decoder_and_pkg_inputs_are_named(call, error, pattern):
    """V15: meta tensors stopped with "Tensor.item() cannot be called on meta tensors"; VP5:
    numpy inputs with "'numpy.ndarray' object has no attribute 'dim'"; PK16: dtype='float32'
    with "'str' object has no attribute 'is_floating_point'"; PK18: a complex PKG lost its
    imaginary part under a numpy ComplexWarning and was used."""
    with pytest.raises(error, match=pattern):
        call()


def test_union_pkg_refuses_a_square_integer_matrix():
    """PK21: a deterministic PKG given as an integer (N, N) array (a permutation) was read
    as N sequences of action ids and counted into another graph, without a word."""
    permutation = np.eye(3, dtype=np.int64)[[1, 2, 0]]  # 0 -> 1 -> 2 -> 0
    with pytest.raises(TypeError, match=r'square \(3, 3\) int64 array, which reads as a PKG '
                                        'and as 3 sequences alike'):
        pkg.union_pkg(permutation, num_actions=3)
    assert np.array_equal(pkg.union_pkg(permutation.astype(float)), permutation)
    windows = pkg.union_pkg([[0, 1, 2], [1, 2, 0], [2, 0, 1]], num_actions=3)  # as a list
    assert np.array_equal(windows, permutation)


# ------------------------------------------------------------------- bootstrap
@pytest.mark.parametrize('scores, error, pattern', [
    ([True, False, True], TypeError, r'scores\[0\] = True \(bool\)'),
    (['10', '20', '30'], TypeError, r"scores\[0\] = '10' \(str\)"),
    (np.array([True, False, True]), TypeError, 'scores holds bool values'),
    ('abc', TypeError, 'scores is a str; expected one score per seed'),
    ({'a': 1.0, 'b': 2.0, 'c': 3.0}, TypeError, 'scores is a dict'),
    (None, TypeError, 'scores is a NoneType'),
    ((x for x in [1.0, 2.0, 3.0]), TypeError, 'scores is a generator'),
    ([1e308, 1e308, 1e308], ValueError, 'whose sum overflows float64'),
])
def test_bootstrap_scores_are_numbers(scores, error, pattern):
    """S1 / S2: booleans and numeric strings were read as numbers (True as 1, '10' as 10.0);
    S3 / S4 / S21 / S22: 'abc', a dict, None and a generator stopped with numpy's words
    ("could not convert string to float", None as "NaN or infinite values: [nan]");
    S14: scores of 1e308 returned (inf, nan, nan) with exit 0."""
    with pytest.raises(error, match=pattern):
        stats.bootstrap_ci(scores)


def test_bootstrap_reads_a_tensor_that_requires_grad():
    """S5: stopped with torch's "Can't call numpy() on Tensor that requires grad"."""
    mean, low, high = stats.bootstrap_ci(torch.tensor([1.0, 2.0, 3.0], requires_grad=True))
    assert (mean, low, high) == stats.bootstrap_ci([1.0, 2.0, 3.0])


@pytest.mark.parametrize('call, pattern', [
    (lambda: stats.bootstrap_ci([5.0]), 'scores has 1 score'),
    (lambda: stats.bootstrap_difference([50.0], [49.0]), 'a has 1 score'),
    (lambda: stats.bootstrap_difference([50.0, 51.0], [49.0, 48.0]), 'a has 2 score'),
    (lambda: stats.bootstrap_difference([50.0, 51.0, 52.0], [49.0]), 'b has 1 score'),
])
def test_no_interval_nor_significance_below_three_seeds(call, pattern):
    """S6 / S7 / S8: bootstrap_ci([5.0]) returned the interval (5, 5, 5) and
    bootstrap_difference([50], [49]) "significant" True: one seed's interval is a point,
    against the project's rule (MIN_SEEDS_FOR_CI: fewer seeds give the mean only)."""
    with pytest.raises(ValueError, match=pattern + r'\(s\); expected at least 3 seeds'):
        call()
    assert stats.seed_interval([5.0]) == (5.0, None, None)  # the path for any seed count


def test_stratified_sample_refuses_a_table_of_tasks():
    """S15: tasks of shape (2, M) were flattened and the returned indices pointed into the
    flattened table."""
    with pytest.raises(ValueError, match=r'tasks has shape \(2, 3\); expected one task index'):
        stats.stratified_sample(np.array([[0, 0, 1], [1, 2, 2]]), 2, keys=range(6))


# ------------------------------------------------------------------- models' options
@pytest.mark.parametrize('config', ['pdpp_niv_t3.py', 'kepp_niv_t3.py'])
def test_sampling_seed_within_the_seed_range(config):
    """TP19: model.sampling_seed=2**45 trained a whole run, then stopped at the first
    validation with torch's "Overflow when unpacking long long" (x_T's generator is seeded
    with sampling_seed * 1000003 + window)."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.runner import check_config_entries
    cfg = load_config(f'configs/baselines/{config}', {'model.sampling_seed': 2 ** 45})
    with pytest.raises(ValueError, match=r'model.sampling_seed=35184372088832; expected an '
                                         r'integer >= 0 and <= 4294967295'):
        check_config_entries(cfg, cfg.filename)


def test_cefito_mlp_of_no_hidden_unit_refused():
    """CA8 / TC8: model.mlp_ratio=1e-6 built MLPs of int(384 x 1e-6) = 0 hidden units (a torch
    UserWarning "Initializing zero-element tensors is a no-op" the only word) and trained."""
    from vpn_plugin.models.cefito import CEFITO
    with pytest.raises(ValueError, match=r'mlp_ratio=1e-06 with hidden_dim=384 gives MLPs of '
                                         r'int\(384 x 1e-06\) = 0 hidden units'):
        CEFITO(feature_dim=1536, num_actions=48, num_tasks=5, horizon=3,
               taxonomy='unused.json', mlp_ratio=1e-6)


@pytest.mark.parametrize('planner, hook', [('PDPP', 'TaskClassifierHook'),
                                           ('KEPP', 'KEPPStepModelHook'),
                                           ('CEFITO', 'TaskClassifierHook')])
def test_training_a_staged_planner_needs_its_stage_hook(planner, hook):
    """TK10: train.py kepp_niv_t3.py --cfg-options "custom_hooks=[]" stopped at the first
    training step with a RuntimeError traceback ("KEPP: train_paths='step' needs the step
    model's predictions ..."), the config key not named (checked by hand on be118b8; the
    check is a new name, so this test fails there by ImportError)."""
    from mmaction.registry import MODELS
    import vpn_plugin.mm  # noqa: F401
    from vpn_plugin.runner import check_training_hooks
    from vpn_plugin.models.pkg_hook import PKGHook
    model_class = MODELS.get(planner)
    with pytest.raises(ValueError, match=rf'cfg.py: {planner} is trained in stages, but the '
                                         rf"run's custom_hooks hold no {hook} .*dict\(type="
                                         rf"'{hook}'\)"):
        check_training_hooks(model_class.__new__(model_class), [PKGHook()], 'cfg.py')
    stage = type(hook, (), {})()  # a hook of that name: accepted
    check_training_hooks(model_class.__new__(model_class), [PKGHook(), stage], 'cfg.py')


# ------------------------------------------------------------------- report API
def result_rows(method: str = 'vpn', **metric) -> list:
    from vpn_plugin.protocol.results import ResultRow
    base = dict(success_rate=30.0, mean_accuracy=50.0, miou_set=60.0)
    return [ResultRow(method=method, seed=seed, horizon=3, dataset='niv', protocol='main',
                      metrics={**base, **(metric if seed == 0 else {})}) for seed in range(3)]


@pytest.mark.parametrize('rows, pattern', [
    (result_rows(success_rate=float('nan')), r'metrics.success_rate=nan; expected a finite'),
    (result_rows(success_rate=150.0), r'metrics.success_rate=150.0; expected .* <= 100'),
    (result_rows(success_rate=-5.0), r'metrics.success_rate=-5.0; expected .*>= 0'),
    (result_rows(success_rate='30'), r"metrics.success_rate='30'; expected"),
    (result_rows(success_rate=True), r'metrics.success_rate=True; expected'),
    (result_rows(mean_accuracy=float('inf')), r'metrics.mean_accuracy=inf; expected'),
    (result_rows(''), r"method=''; expected a non-empty string"),
])
def test_build_table_holds_rows_of_the_api_to_the_row_rules(rows, pattern):
    """R2 / R3 / R5 / R20: rows built in memory with a success rate of 150, -5 or True, or an
    empty method name, were averaged into the table (71.00 ± 79.33 ...) without a word;
    R1 / R15: NaN / inf stopped with "scores holds NaN or infinite values: [nan, 31.0, 32.0]"
    (no method, seed nor metric named); R4: '30' was parsed as 30.0. Rows read from files
    were already held to these rules (results.row_from_dict)."""
    from vpn_plugin.protocol.report import build_table
    with pytest.raises(ValueError, match=r"rows\[0\] \(method '.*', seed 0\): field " + pattern):
        build_table(rows)


def test_a_paired_difference_without_common_seeds_is_refused():
    """R12: build_table(paired=True) of two methods with no seed in common printed "Δ: none"
    and "-" cells: the asked comparison vanished without its reason."""
    from vpn_plugin.protocol.report import build_table
    ours, other = result_rows('a'), result_rows('b')
    for row in other:
        row.seed += 3
    with pytest.raises(ValueError, match=r"paired Δ of 'a' minus 'b': no seed in common \(seeds "
                                         r'\[0, 1, 2\] and \[3, 4, 5\]\)'):
        build_table(ours + other, ours='a', reference='b', paired=True)
    assert build_table(ours + other, ours='a', reference='b').improvements  # unpaired: a Δ


@pytest.mark.parametrize('encoder', [5, '', '   '])
def test_text_feature_options_held_to_their_kinds(encoder):
    """TX13 / TX16 / TX17: model.text_embeddings=dict(file=..., encoder=5) (or '' / blanks)
    was accepted and its rows labelled "file f64.npy of 5, not the paper's CLIP": the
    options of the text_embeddings dict were held to no kind."""
    from vpn_plugin.models.cefito import check_text_config
    with pytest.raises(ValueError, match=re.escape(f'model.text_embeddings.encoder={encoder!r}; '
                                                   'expected a non-empty string (or None)')):
        check_text_config(dict(file='features.npy', encoder=encoder))
    check_text_config(dict(file='features.npy', encoder='clip-vit-base-patch32'))


def test_union_pkg_says_a_pkg_must_be_an_array():
    """PK22: a PKG given as nested lists of probabilities stopped with "sequence 0 holds
    float64 values [...]; expected integer action ids", not saying how a PKG is given."""
    with pytest.raises(TypeError, match=r'union_pkg source 0, read as a sequence collection: '
                                        r'.*a PKG must be a float numpy array or torch tensor'):
        pkg.union_pkg(random_pkg().tolist(), num_actions=4)


def test_plan_from_features_checks_a_pdpp_task_and_width():
    """AP4: plan_from_features(pdpp, start, goal, task=5) with NIV's 5 tasks (0..4) planned
    and recorded given_task=5: the PDPP planner exposed no num_tasks (nor feature_dim) to
    check against."""
    from vpn_plugin.apis import plan_from_features
    from vpn_plugin.models.pdpp import PDPP
    model = PDPP(feature_dim=24, num_actions=6, num_tasks=5, horizon=3, dim=32,
                 dim_mults=(1,), n_timesteps=10)
    start = torch.zeros(2, 24)
    with pytest.raises(ValueError, match=r'task=5; expected 2 task index\(es\) in 0..4'):
        plan_from_features(model, start, start, task=5)
    with pytest.raises(ValueError, match=r'start observations of shape \(2, 12\); expected '
                                         r'\(B, 24\)'):
        plan_from_features(model, start[:, :12], start[:, :12])


def test_init_planner_names_a_pre_stage_file(tmp_path):
    """AP21: init_planner(cfg, 'task_classifier.pth') stopped with "does not fit the model
    PDPP of the config: missing keys [...] (and 163 more)", not saying it is a pre-stage
    file (tools/test.py said so)."""
    from vpn_plugin.apis import init_planner
    pre_stage = tmp_path / 'task_classifier.pth'
    torch.save(dict(identity=dict(horizon=3), state_dicts={}), pre_stage)
    with pytest.raises(ValueError, match=r'task_classifier.pth is a pre-stage file, the task '
                                         r'classifier \(TaskClassifierHook\), not a checkpoint'):
        init_planner('configs/baselines/pdpp_niv_t3.py', pre_stage,
                     cfg_options={'model.dim': 32, 'model.dim_mults': [1]})
