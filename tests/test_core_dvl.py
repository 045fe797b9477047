"""DVL and Viterbi decoding against brute-force enumeration of all N^T paths."""
import functools
import itertools
import math

import numpy as np
import pytest
import torch

from vpn_plugin.core import differentiable_viterbi, pkg_log_transitions, viterbi_decode

NEG_INF = -math.inf


@pytest.fixture(params=['levels', 'dense'])
def dvl(request):
    """The DVL with its matrix-product (levels) or dense log-space evaluation of Q_t."""
    return functools.partial(differentiable_viterbi, impl=request.param)


def random_chain(batch=2, horizon=3, num_actions=4, seed=0, zeros=(), dtype=torch.float64):
    """Random log emissions (B, T, N) and a row-stochastic log transition matrix (N, N)."""
    gen = torch.Generator().manual_seed(seed)
    emissions = torch.randn(batch, horizon, num_actions, generator=gen, dtype=dtype)
    probs = torch.rand(num_actions, num_actions, generator=gen, dtype=torch.float64) + 0.1
    for i, j in zeros:
        probs[i, j] = 0
    probs = probs / probs.sum(1, keepdim=True).clamp(min=1e-300)
    return emissions, probs.log().to(dtype)


def path_scores(emissions, transitions, prior):
    """All N^T paths and their log scores (B, N^T), by plain Python enumeration."""
    batch, horizon, num_actions = emissions.shape
    emissions, transitions, prior = (x.detach() for x in (emissions, transitions, prior))
    paths = list(itertools.product(range(num_actions), repeat=horizon))
    scores = torch.empty(batch, len(paths), dtype=torch.float64)
    for b in range(batch):
        for k, path in enumerate(paths):
            total = float(prior[path[0]])
            total += sum(float(emissions[b, t, path[t]]) for t in range(horizon))
            total += sum(float(transitions[path[t - 1], path[t]]) for t in range(1, horizon))
            scores[b, k] = total
    return paths, scores


def brute_marginals(emissions, transitions, prior):
    """Exact posterior marginals (B, T, N) and log partition (B,) by enumeration."""
    paths, scores = path_scores(emissions, transitions, prior)
    weights = torch.softmax(scores, 1)
    marginals = torch.zeros(emissions.shape, dtype=torch.float64)
    for k, path in enumerate(paths):
        for t, state in enumerate(path):
            marginals[:, t, state] += weights[:, k]
    return marginals, torch.logsumexp(scores, 1)


def uniform_prior(num_actions):
    return torch.full((num_actions,), -math.log(num_actions), dtype=torch.float64)


@pytest.mark.parametrize('horizon', [1, 2, 4])
def test_gamma_one_gives_exact_posteriors_and_log_partition(horizon, dvl):
    emissions, transitions = random_chain(horizon=horizon, zeros=[(0, 1), (2, 3)])
    soft, log_z = dvl(emissions, transitions)
    marginals, expected_z = brute_marginals(emissions, transitions, uniform_prior(4))
    torch.testing.assert_close(soft, marginals)
    torch.testing.assert_close(log_z, expected_z)


def test_gamma_one_soft_plan_is_gradient_of_log_partition(dvl):
    emissions, transitions = random_chain(batch=3, horizon=3, num_actions=5, seed=1)
    emissions.requires_grad_(True)
    soft, log_z = dvl(emissions, transitions)
    (grad,) = torch.autograd.grad(log_z.sum(), emissions)
    torch.testing.assert_close(grad, soft.detach())


def test_custom_prior_matches_brute_force(dvl):
    emissions, transitions = random_chain(seed=2)
    prior = torch.tensor([0.7, 0.1, 0.2, 0.0], dtype=torch.float64).log()
    soft, log_z = dvl(emissions, transitions, prior)
    marginals, expected_z = brute_marginals(emissions, transitions, prior)
    torch.testing.assert_close(soft, marginals)
    torch.testing.assert_close(log_z, expected_z)
    assert (soft[:, 0, 3] == 0).all()


def test_small_temperature_gives_one_hot_viterbi_path(dvl):
    emissions, transitions = random_chain(batch=4, horizon=4, num_actions=4, seed=3)
    paths, scores = path_scores(emissions, transitions, uniform_prior(4))
    best = torch.tensor([paths[k] for k in scores.argmax(1)])
    soft, log_z = dvl(emissions, transitions, temperature=1e-3)
    expected = torch.nn.functional.one_hot(best, 4).double()
    torch.testing.assert_close(soft, expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(log_z, scores.max(1).values, atol=1e-2, rtol=0)


@pytest.mark.parametrize('temperature', [1.0, 0.5, 2.0])
def test_gradcheck_float64(temperature, dvl):
    emissions, transitions = random_chain(batch=2, horizon=3, num_actions=3, seed=4)
    prior = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64).log()
    inputs = tuple(x.clone().requires_grad_(True) for x in (emissions, transitions, prior))

    def run(e, t, p):
        return dvl(e, t, p, temperature=temperature)
    assert torch.autograd.gradcheck(run, inputs)


@pytest.mark.parametrize('temperature', [0.5, 2.0])
def test_temperature_matches_brute_force_of_scaled_path_scores(temperature, dvl):
    """gamma placement: u = marginals of the path scores / gamma (prior included) and
    log Z = gamma * logsumexp(scores / gamma), by enumeration of all N^T paths."""
    emissions, transitions = random_chain(batch=3, horizon=3, num_actions=4, seed=12,
                                          zeros=[(0, 1), (3, 2)])
    prior = torch.tensor([0.6, 0.25, 0.15, 0.0], dtype=torch.float64).log()
    soft, log_z = dvl(emissions, transitions, prior, temperature=temperature)
    _, scores = path_scores(emissions, transitions, prior)
    marginals, _ = brute_marginals(emissions / temperature, transitions / temperature,
                                   prior / temperature)
    torch.testing.assert_close(soft, marginals)
    torch.testing.assert_close(log_z, temperature * torch.logsumexp(scores / temperature, 1))


@pytest.mark.parametrize('temperature', [0.8, 2.0])
def test_forward_matches_literal_recursion_of_the_issue(temperature, dvl):
    """Soft plan and log Z == the recursion written out literally (naive_dvl below)."""
    emissions, transitions = random_chain(batch=3, horizon=5, num_actions=6, seed=13)
    soft, log_z = dvl(emissions, transitions, temperature=temperature)
    expected_soft, expected_z = naive_dvl(emissions, transitions, temperature=temperature)
    torch.testing.assert_close(soft, expected_soft)
    torch.testing.assert_close(log_z, expected_z)


@pytest.mark.parametrize('num_layers', [1, 2])
def test_autograd_keeps_no_pairwise_tensor_alive(num_layers, dvl):
    """Tensors saved for backward: O(B T N), never a (B, N, N) backpointer per step."""
    batch, horizon, num_actions = 4, 5, 60
    emissions, transitions = random_chain(batch, horizon, num_actions, seed=14)
    sizes = {}
    for name, implementation in (('ours', functools.partial(dvl, num_layers=num_layers)),
                                 ('naive', naive_dvl)):
        saved = []

        def pack(tensor, saved=saved):
            saved.append(tensor.numel())
            return tensor
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            implementation(emissions.clone().requires_grad_(True), transitions)
        sizes[name] = saved
    pairwise, per_step = batch * num_actions * num_actions, batch * horizon * num_actions
    assert max(sizes['ours']) <= max(per_step, num_actions ** 2)
    assert sum(sizes['ours']) <= num_layers * (8 * per_step + num_actions ** 2)
    # the literal oracle keeps one per step: the checks above can fail
    assert max(sizes['naive']) >= pairwise and sum(sizes['naive']) >= (horizon - 1) * pairwise


def test_gradient_matches_plain_autograd_oracle(dvl):
    """Hand-written backward == autograd through a direct (N^T-free) implementation."""
    emissions, transitions = random_chain(batch=3, horizon=4, num_actions=5, seed=5,
                                          zeros=[(1, 2), (3, 0)])
    target = torch.rand(3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    grads = []
    for implementation in (dvl, naive_dvl):
        e = emissions.clone().requires_grad_(True)
        soft, log_z = implementation(e, transitions, temperature=0.8)
        ((soft - target) ** 2).sum().add(0.3 * log_z.sum()).backward()
        grads.append(e.grad)
    torch.testing.assert_close(grads[0], grads[1])


def test_levels_as_accurate_as_dense_on_wide_dynamic_range(monkeypatch):
    """float32 emissions spanning hundreds of nats (several levels; too deep -> dense):
    the level evaluation is as close to a float64 oracle as the dense float32 one."""
    from vpn_plugin.core import dvl as dvl_module
    calls = []
    original = dvl_module._LevelStep.log_normaliser
    monkeypatch.setattr(dvl_module._LevelStep, 'log_normaliser',
                        staticmethod(lambda levels, split: calls.append(len(split))
                                     or original(levels, split)))
    gen = torch.Generator().manual_seed(11)
    zeros = [(i, j) for i in range(12) for j in range(12) if (i * 7 + j * 3) % 5 == 0]
    _, transitions = random_chain(num_actions=12, zeros=zeros)
    for spread in (5.0, 30.0, 400.0):
        emissions = torch.randn(6, 5, 12, generator=gen, dtype=torch.float64) * spread
        target = torch.rand(6, 5, 12, generator=gen, dtype=torch.float64)
        results = {}
        for name, impl, dtype in (('levels', 'levels', torch.float32),
                                  ('dense', 'dense', torch.float32),
                                  ('oracle', 'dense', torch.float64)):
            e = emissions.to(dtype).clone().requires_grad_(True)
            t = transitions.to(dtype).clone().requires_grad_(True)
            soft, log_z = differentiable_viterbi(e, t, impl=impl)
            ((soft - target.to(dtype)) ** 2).sum().add(log_z.sum() * 1e-3).backward()
            results[name] = [x.double() for x in (soft, log_z, e.grad, t.grad)]
        for levels, dense, oracle in zip(results['levels'], results['dense'], results['oracle']):
            error, reference = (levels - oracle).abs().max(), (dense - oracle).abs().max()
            assert error <= 2 * reference + 1e-6, (spread, error, reference)
    assert max(calls) > 1  # several levels were used


@pytest.mark.parametrize('deep, boost', [(100.0, 200.0), (500.0, 900.0)])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_branch_deep_below_the_best_can_still_win(deep, boost, dtype, dvl):
    """State 1 is ``deep`` nats below state 0 at t=1 but wins at t=2 (identity transitions):
    its backpointer mass must come from the deep level, not be lost to underflow."""
    transitions = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=dtype).log()
    emissions = torch.tensor([[[0.0, -deep], [0.0, boost]]], dtype=dtype)
    soft, log_z = dvl(emissions, transitions)
    expected = torch.tensor([[[0.0, 1.0], [0.0, 1.0]]], dtype=dtype)
    torch.testing.assert_close(soft, expected)
    torch.testing.assert_close(log_z, torch.tensor([boost - deep - math.log(2)], dtype=dtype))


def floor_chain(dtype):
    """Log transitions ``log(p + 1e-30)`` of a sparse p (3, 3) and emissions (2, 4, 3) whose
    best path of sample 1 takes two floor edges (-69 nats), paid back by an 80-nat boost."""
    probs = torch.tensor([[0.7, 0.3, 0.0], [0.0, 0.6, 0.4], [0.5, 0.0, 0.5]],
                         dtype=torch.float64)
    emissions = torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(7),
                            dtype=torch.float64)
    emissions[1, 1, 2] += 80.0  # 0 -> 2 is a floor edge (p = 0)
    emissions[1, 2, 1] += 80.0  # 2 -> 1 too
    return emissions.to(dtype), torch.log(probs + 1e-30).to(dtype)


@pytest.mark.parametrize('dtype, tolerance', [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_log_floor_transitions_match_brute_force(dtype, tolerance, dvl):
    """A floor 69 nats below the best edge (dense fallback under impl='levels'): the soft
    plan, log Z and d log Z / d emissions (= the marginals) equal float64 enumeration."""
    emissions, transitions = floor_chain(dtype)
    prior = uniform_prior(3)
    expected_plan, expected_log_z = brute_marginals(emissions.double(), transitions.double(),
                                                    prior)
    assert expected_plan[1, 1, 2] > 0.5 and expected_plan[1, 2, 1] > 0.5  # floor edges win
    leaf = emissions.clone().requires_grad_(True)
    soft, log_z = dvl(leaf, transitions)
    log_z.sum().backward()
    for value, expected in ((soft, expected_plan), (log_z, expected_log_z),
                            (leaf.grad, expected_plan)):
        torch.testing.assert_close(value.double(), expected, rtol=tolerance, atol=tolerance)


def test_dense_fallback_is_logged_once_with_its_reason(monkeypatch, caplog):
    from vpn_plugin.core import dvl as dvl_module
    monkeypatch.setattr(dvl_module, '_fallback_logged', False)
    emissions, transitions = floor_chain(torch.float32)
    sparse = transitions.masked_fill(transitions < -60, NEG_INF)
    with caplog.at_level('WARNING', logger=dvl_module.__name__):
        differentiable_viterbi(emissions, transitions, impl='dense')  # asked for: silent
        differentiable_viterbi(emissions, sparse)  # -inf edges: level evaluation, silent
        assert caplog.records == []
        for _ in range(2):
            differentiable_viterbi(emissions, transitions)  # 'auto' = levels on the CPU
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    deepest = math.log(0.7 / 1e-30)  # column 0: best edge 0.7, floor 1e-30
    assert 'dense evaluation' in message and f"{deepest:.1f} nats below their column's best" \
        in message


def naive_dvl(emissions, transitions, temperature=1.0):
    """Straightforward autograd DVL with dense Q_t, finite transitions only (test oracle)."""
    gamma, num_actions = temperature, emissions.shape[-1]
    alpha = [emissions[:, 0] - math.log(num_actions)]
    safe = transitions.clamp(min=-1e4)
    backpointers = []
    for t in range(1, emissions.shape[1]):
        scores = (alpha[-1].unsqueeze(1) + safe.t()) / gamma
        backpointers.append(torch.softmax(scores, -1))
        alpha.append(emissions[:, t] + gamma * torch.logsumexp(scores, -1))
    soft = [torch.softmax(alpha[-1] / gamma, -1)]
    for q in reversed(backpointers):
        soft.append(torch.einsum('bj,bji->bi', soft[-1], q))
    return torch.stack(soft[::-1], 1), gamma * torch.logsumexp(alpha[-1] / gamma, -1)


@pytest.mark.parametrize('temperature', [1.0, 1e-3, 5.0])
def test_forbidden_rows_and_unreachable_states_have_no_nan(temperature, dvl):
    # action 2 has no way in, action 1 no way out, action 0 only goes to 1
    zeros = [(i, 2) for i in range(4)] + [(1, j) for j in range(4)] + [(0, 0), (0, 3)]
    emissions, transitions = random_chain(batch=2, horizon=4, num_actions=4, seed=6,
                                          zeros=zeros)
    assert (transitions[1] == NEG_INF).all() and transitions[0, 1] == 0
    for dtype in (torch.float32, torch.float64):
        e = emissions.to(dtype).requires_grad_(True)
        t = transitions.to(dtype).requires_grad_(True)
        soft, log_z = dvl(e, t, temperature=temperature)
        (soft.square().sum() + log_z.sum()).backward()
        for tensor in (soft, log_z, e.grad, t.grad):
            assert torch.isfinite(tensor).all()
        assert (soft[:, 1:, 2] == 0).all()
        assert (soft[:, :-1, 1] == 0).all()
    if temperature == 1.0:
        marginals, expected_z = brute_marginals(emissions, transitions, uniform_prior(4))
        soft, log_z = dvl(emissions, transitions)
        torch.testing.assert_close(soft, marginals)
        torch.testing.assert_close(log_z, expected_z)


def test_no_feasible_path_gives_zero_plan_and_zero_gradient(dvl):
    transitions = torch.full((3, 3), NEG_INF, dtype=torch.float64)  # no edge at all
    emissions = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    soft, log_z = dvl(emissions, transitions)
    (soft.sum() + log_z.clamp(min=-1e3).sum()).backward()
    assert (soft == 0).all() and (log_z == NEG_INF).all()
    assert (emissions.grad == 0).all()


def test_clamp_probs_reproduces_clamped_probabilities(dvl):
    emissions, transitions = random_chain(seed=7, zeros=[(0, 0), (0, 1), (2, 3)])
    soft, log_z = dvl(emissions, transitions, clamp_probs=1e-10)
    clamped = transitions.clamp(min=math.log(1e-10))
    marginals, expected_z = brute_marginals(emissions, clamped, uniform_prior(4))
    torch.testing.assert_close(soft, marginals)
    torch.testing.assert_close(log_z, expected_z)
    assert (soft[:, 1:, 1] > 0).all()  # edges into 1 from 0 only forbidden without clamp


def test_two_layers_feed_log_soft_plan_to_second_layer(dvl):
    emissions, transitions = random_chain(seed=8)
    first, _ = dvl(emissions, transitions)
    expected = dvl(first.log(), transitions)
    stacked = dvl(emissions, transitions, num_layers=2)
    torch.testing.assert_close(stacked[0], expected[0])
    torch.testing.assert_close(stacked[1], expected[1])


@pytest.mark.parametrize('kwargs, message', [
    (dict(emissions=torch.zeros(2, 3)), 'expected a non-empty'),
    (dict(transitions=torch.zeros(3, 4).log_softmax(1)), 'expected \\(4, 4\\)'),
    (dict(transitions=torch.zeros(4, 4)), 'row 0 has probabilities summing to 4'),
    (dict(emissions=torch.full((1, 2, 4), math.nan)), 'NaN'),
    (dict(prior=torch.zeros(3)), 'log_prior has shape'),
    (dict(temperature=0.0), 'temperature'),
])
def test_bad_inputs_get_clear_errors(kwargs, message):
    emissions = kwargs.get('emissions', torch.zeros(1, 2, 4))
    transitions = kwargs.get('transitions', torch.full((4, 4), 0.25).log())
    with pytest.raises(ValueError, match=message):
        differentiable_viterbi(emissions, transitions, kwargs.get('prior'),
                               kwargs.get('temperature', 1.0))
    if 'temperature' not in kwargs:
        with pytest.raises(ValueError, match=message):
            viterbi_decode(emissions, transitions, kwargs.get('prior'))


# ----------------------------------------------------------- the device path (impl='dense')
def hard_chain():
    """Float64 emissions (3, 4, 5) and log transitions (5, 5) with -inf edges, a state no
    edge enters (4), a dead end (3), and sample 2 infeasible: its first step can only be the
    dead end (-inf emissions elsewhere)."""
    zeros = [(i, 4) for i in range(5)] + [(3, j) for j in range(5)] + [(0, 1), (2, 0)]
    emissions, transitions = random_chain(batch=3, horizon=4, num_actions=5, seed=16,
                                          zeros=zeros)
    emissions[2, 0, [0, 1, 2, 4]] = NEG_INF
    emissions[1, 2, 0] = NEG_INF  # an impossible state in a feasible sample
    return emissions, transitions


@pytest.mark.parametrize('temperature', [1.0, 0.6])
def test_dense_equals_levels_and_brute_force_on_hard_chains(temperature):
    """Forward and backward (emissions, transitions, prior) of both paths agree within 1e-6;
    at gamma = 1 both equal enumeration of all paths, the infeasible sample gets 0."""
    emissions, transitions = hard_chain()
    prior = torch.tensor([0.3, 0.2, 0.2, 0.2, 0.1], dtype=torch.float64).log()
    target = torch.rand(3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    results = {}
    for impl in ('levels', 'dense'):
        leaves = [x.clone().requires_grad_(True) for x in (emissions, transitions, prior)]
        soft, log_z = differentiable_viterbi(*leaves, temperature=temperature, impl=impl)
        ((soft - target) ** 2).sum().add(log_z.clamp(min=-1e3).sum()).backward()
        results[impl] = [soft, log_z] + [leaf.grad for leaf in leaves]
    for levels, dense in zip(results['levels'], results['dense']):
        assert torch.isfinite(levels.nan_to_num(neginf=0)).all()
        torch.testing.assert_close(dense, levels, rtol=0, atol=1e-6)
    soft, log_z = results['dense'][:2]
    assert (soft[2] == 0).all() and log_z[2] == NEG_INF and (results['dense'][2][2] == 0).all()
    assert (soft[:, 1:, 4] == 0).all() and (soft[:, :-1, 3] == 0).all() and soft[1, 2, 0] == 0
    if temperature == 1.0:
        marginals, expected_z = brute_marginals(emissions[:2], transitions, prior)
        torch.testing.assert_close(soft[:2].detach(), marginals)
        torch.testing.assert_close(log_z[:2].detach(), expected_z)


def dvl_loss(emissions, transitions, impl):
    soft, log_z = differentiable_viterbi(emissions, transitions, temperature=0.8, impl=impl)
    return soft.square().sum() + log_z.clamp(min=-1e3).sum()


def test_dense_path_traces_as_one_graph_and_levels_does_not():
    """fullgraph=True fails on any value read back to Python: the dense path (forward and
    backward) traces and matches eager mode; the level path, which reads values, breaks."""
    emissions, transitions = hard_chain()
    torch._dynamo.reset()
    compiled = torch.compile(dvl_loss, fullgraph=True, backend='eager')
    grads = []
    for function in (compiled, dvl_loss):
        leaf = emissions.clone().requires_grad_(True)
        value = function(leaf, transitions, 'dense')
        value.backward()
        grads.append((value.detach(), leaf.grad))
    torch.testing.assert_close(grads[0], grads[1])
    with pytest.raises(torch._dynamo.exc.TorchDynamoException, match='(?i)data-dependent'):
        compiled(emissions, transitions, 'levels')
    torch._dynamo.reset()


def test_impl_auto_is_levels_on_cpu_and_dense_elsewhere():
    from vpn_plugin.core.dvl import resolve_impl
    assert resolve_impl('auto', torch.device('cpu')) == 'levels'
    assert resolve_impl('auto', torch.device('cuda', 0)) == 'dense'
    assert resolve_impl('levels', torch.device('cuda', 0)) == 'levels'
    with pytest.raises(ValueError, match=r"differentiable_viterbi\(\) argument impl='fast'; expected one of"):
        differentiable_viterbi(torch.zeros(1, 2, 3), torch.full((3, 3), 1 / 3).log(),
                               impl='fast')


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
def test_dense_path_on_cuda_never_synchronises():
    """torch's sync debug mode raises on any host-device synchronisation."""
    emissions, transitions = (x.float().cuda() for x in hard_chain())
    leaf = emissions.requires_grad_(True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        dvl_loss(leaf, transitions, 'auto').backward()
    finally:
        torch.cuda.set_sync_debug_mode('default')
    assert torch.isfinite(leaf.grad).all()


def test_pkg_log_transitions_feeds_the_dvl(dvl):
    pkg = np.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])
    log_t = pkg_log_transitions(pkg)
    assert log_t.dtype == torch.float32 and log_t[0, 0] == NEG_INF
    soft, _ = dvl(torch.zeros(1, 3, 3), log_t)
    assert torch.isfinite(soft).all()


# ----------------------------------------------------------------------------- viterbi
def classical_viterbi(emissions, transitions, prior):
    """Textbook numpy Viterbi with explicit loops (independent oracle)."""
    horizon, num_actions = emissions.shape
    delta = prior + emissions[0]
    pointers = np.zeros((horizon, num_actions), dtype=int)
    for t in range(1, horizon):
        new = np.empty(num_actions)
        for j in range(num_actions):
            candidates = [delta[i] + transitions[i, j] for i in range(num_actions)]
            pointers[t, j] = int(np.argmax(candidates))
            new[j] = candidates[pointers[t, j]] + emissions[t, j]
        delta = new
    path = [int(np.argmax(delta))]
    for t in range(horizon - 1, 0, -1):
        path.append(pointers[t, path[-1]])
    return path[::-1], float(delta.max())


def test_viterbi_matches_brute_force_and_classical_loop():
    emissions, transitions = random_chain(batch=5, horizon=4, num_actions=4, seed=9,
                                          zeros=[(0, 2), (1, 1), (3, 0)])
    prior = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64).log()
    paths, scores = viterbi_decode(emissions, transitions, prior)
    assert paths.dtype == torch.long and paths.shape == (5, 4)
    all_paths, all_scores = path_scores(emissions, transitions, prior)
    torch.testing.assert_close(scores, all_scores.max(1).values)
    for b in range(5):
        assert tuple(paths[b].tolist()) == all_paths[int(all_scores[b].argmax())]
        path, score = classical_viterbi(emissions[b].numpy(), transitions.numpy(),
                                        prior.numpy())
        assert paths[b].tolist() == path and scores[b].item() == pytest.approx(score)


def test_viterbi_ties_go_to_lowest_id():
    paths, scores = viterbi_decode(torch.zeros(2, 3, 4), torch.full((4, 4), 0.25).log())
    assert paths.tolist() == [[0, 0, 0], [0, 0, 0]]
    assert torch.allclose(scores, torch.full((2,), -3 * math.log(4)))  # prior + 2 edges


def test_viterbi_avoids_forbidden_edges():
    transitions = torch.tensor([[0.0, 1.0], [1.0, 0.0]]).log()  # must alternate
    emissions = torch.tensor([[[0.0, -1.0], [0.0, -1.0], [0.0, -1.0]]])
    paths, _ = viterbi_decode(emissions, transitions)
    assert paths.tolist() == [[0, 1, 0]]


def test_viterbi_exact_ties_follow_the_classical_first_argmax_rule():
    """Integer emissions, sparse rows uniform over 2 successors: many exact ties; the path
    must be the one of the textbook loop (first argmax for predecessor and final state)."""
    gen = torch.Generator().manual_seed(10)
    num_actions = 5
    probs = torch.zeros(num_actions, num_actions, dtype=torch.float64)
    for i in range(num_actions):
        probs[i, [(i + 1) % num_actions, (i + 3) % num_actions]] = 0.5
    transitions = probs.log()
    emissions = torch.randint(0, 2, (40, 4, num_actions), generator=gen).double()
    paths, scores = viterbi_decode(emissions, transitions)
    prior = uniform_prior(num_actions).numpy()
    for b in range(len(emissions)):
        path, score = classical_viterbi(emissions[b].numpy(), transitions.numpy(), prior)
        assert paths[b].tolist() == path and scores[b].item() == score
    assert paths.tolist() == viterbi_decode(emissions, transitions)[0].tolist()


def test_viterbi_on_a_sparse_graph_uses_edge_lists_with_the_same_ties():
    """A PKG-like graph (2 successors per action of 30, one dead end; < SPARSE_FRACTION of
    the edges): the edge-list step gives the textbook loop's paths, scores and ties, also
    where some samples have no feasible path (-inf emissions)."""
    from vpn_plugin.core import viterbi
    gen = torch.Generator().manual_seed(3)
    num_actions = 30
    probs = torch.zeros(num_actions, num_actions, dtype=torch.float64)
    for i in range(num_actions - 1):
        probs[i, [(i + 1) % num_actions, (i + 7) % num_actions]] = 0.5
    transitions = probs.log()
    assert torch.isfinite(transitions).float().mean() < viterbi.SPARSE_FRACTION
    emissions = torch.randint(-1, 2, (30, 4, num_actions), generator=gen).double()
    emissions[emissions < 0] = -math.inf
    emissions[:3] = -math.inf  # nothing feasible
    paths, scores = viterbi_decode(emissions, transitions)
    prior = uniform_prior(num_actions).numpy()
    with np.errstate(invalid='ignore'):
        for b in range(len(emissions)):
            path, score = classical_viterbi(emissions[b].numpy(), transitions.numpy(), prior)
            assert paths[b].tolist() == path and scores[b].item() == score


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_viterbi_without_feasible_path_scores_minus_inf(dtype):
    transitions = torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=dtype).log()  # 1 is a dead end
    emissions = torch.zeros(2, 3, 2, dtype=dtype)
    paths, scores = viterbi_decode(emissions, transitions)
    assert (scores == NEG_INF).all() and paths.tolist() == [[0, 0, 0], [0, 0, 0]]
    two_steps, finite = viterbi_decode(emissions[:, :2], transitions)
    assert two_steps.tolist() == [[0, 1], [0, 1]] and torch.isfinite(finite).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_cuda_matches_cpu(dtype, dvl):
    emissions, transitions = random_chain(batch=3, horizon=4, num_actions=6, seed=15,
                                          zeros=[(0, 1), (2, 2)], dtype=dtype)
    results = []
    for device in ('cpu', 'cuda'):
        e = emissions.detach().clone().to(device).requires_grad_(True)
        soft, log_z = dvl(e, transitions.to(device))
        (soft.square().sum() + log_z.sum()).backward()
        paths, scores = viterbi_decode(e.detach(), transitions.to(device))
        assert soft.device.type == paths.device.type == device
        results.append([x.cpu() for x in (soft, log_z, e.grad, paths, scores)])
    for cpu, cuda in zip(*results):
        torch.testing.assert_close(cuda, cpu)
