"""The shared rules of the oracle checker (``vpn_plugin.oracles.compare``): chains step by step
with the free-running state judged only where well-conditioned, gradients at the model's
scale, tolerances from measured conditioning, argmaxes judged where the margin allows; and the
PDPP fixture (whose U-Net is ill-conditioned) at one and at two torch threads, correct and
with a wrong weight, plus a float64 recomputation that agrees with the official float32
recording at the float32 conditioning level."""
import json

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from reference_fixtures import copy_fixture, reference_dir, shift_array
from tool_modules import load_tool
from vpn_plugin.oracles import compare as C


@pytest.fixture
def threads(request):
    """``torch.set_num_threads(request.param)`` for the test."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def failed_rows(report: str) -> set:
    return {line.split()[0] for line in report.splitlines() if line.endswith('FAIL')}


# ------------------------------------------------------------------ synthetic chains
def linear_chain(a: float, steps: int, x0: np.ndarray, dtype=np.float64):
    """x_{i+1} = a x_i - (a - 1): the fixed point 1 repels (a > 1) or attracts (a < 1) the
    deviation x - 1; output i = a x_i. Recorded in float64."""
    states, outputs = [x0.astype(dtype)], []
    for _ in range(steps):
        outputs.append(a * states[-1])
        states.append(outputs[-1] - (a - 1))
    return np.stack(states), np.stack(outputs)


def chain_step(a: float, wrong_step: int = -1, wrong_by: float = 0.0):
    """Our implementation of ``linear_chain`` in float32 (``wrong_by``: a wrong coefficient
    at ``wrong_step``)."""
    def step(i, state):
        coefficient = a * (1 + wrong_by) if i == wrong_step else a
        out = coefficient * state.float()
        return out, out - (a - 1)
    return step


X0 = 1 + 1e-6 * np.random.default_rng(0).standard_normal(16)


def test_ill_conditioned_chain_is_judged_step_by_step_and_reported_not_failed(capsys):
    states, outputs = linear_chain(10.0, 6, X0)  # deviations grow 1e6-fold
    rows = C.compare_chain('chain', states, outputs, chain_step(10.0), 1e-4)
    report = capsys.readouterr().out
    assert 'chain is ill-conditioned' in report and 'amplification' in report
    by_name = {row[0]: row for row in rows}
    stepwise = [by_name['chain:outputs[step-by-step]'], by_name['chain:states[step-by-step]']]
    assert all(row[4] for row in stepwise)  # float32 steps fed float64 states
    free = by_name['chain:final[free-running]']
    assert free[3] == C.REPORTED and free[4]
    # a float32 free run from the rounded state 0 really does drift
    drifted = C.run_chain(chain_step(10.0), torch.from_numpy(states[0].astype(np.float32)), 6)
    assert C.compare(states[-1], drifted)[1] > 1e-4


def test_a_wrong_step_fails_step_by_step(capsys):
    states, outputs = linear_chain(10.0, 6, X0)
    rows = C.compare_chain('chain', states, outputs, chain_step(10.0, 3, 1e-3), 1e-4)
    failed = {row[0] for row in rows if not row[4]}
    assert failed == {'chain:outputs[step-by-step]', 'chain:states[step-by-step]'}


def test_a_well_conditioned_chain_judges_its_free_running_final_state(capsys):
    states, outputs = linear_chain(0.5, 6, X0)
    rows = C.compare_chain('chain', states, outputs, chain_step(0.5), 1e-4)
    assert 'chain is well-conditioned' in capsys.readouterr().out
    free = {row[0]: row for row in rows}['chain:final[free-running]']
    assert free[3] == 1e-4 and free[4]
    rows = C.compare_chain('chain', states, outputs, chain_step(0.5, 3, 1e-3), 1e-4)
    assert all(not row[4] for row in rows)  # a wrong step: step by step and free-running


def test_chain_argmax_judged_only_where_the_recorded_margin_allows(capsys):
    states, outputs = linear_chain(0.5, 3, np.array([[1.0, 1.5, 3.0], [2.0, 2.0 + 1e-9, 0.0]]))
    recorded_argmax = states[-1].argmax(-1)
    rows = C.compare_chain('chain', states, outputs, chain_step(0.5), 1e-4,
                           argmax=('actions', recorded_argmax, lambda s: s))
    row = rows[-1]
    assert row[0] == 'chain:actions[step-by-step]' and row[4]
    assert 'judged at 1 of 2 positions' in capsys.readouterr().out
    rows = C.compare_chain('chain', states, outputs, chain_step(0.5), 1e-4,
                           argmax=('actions', np.array([0, 1]), lambda s: s))
    assert not rows[-1][4]  # the recorded argmax must be that of the recorded scores


# ------------------------------------------------------------------ gradients
def grads_file(tmp_path, recorded: dict):
    path = tmp_path / 'grads.npz'
    np.savez(path, **{k: C.grad_summary(torch.as_tensor(v)) for k, v in recorded.items()})
    return path


def test_compare_grads_passes_round_off_of_a_zero_gradient_and_fails_a_wrong_one(tmp_path):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal(300) * 1e3
    # a conv bias before a GroupNorm with one channel per group: zero in exact arithmetic
    bias_recorded, bias_ours = rng.standard_normal(32) * 1e-4, rng.standard_normal(32) * 1e-4
    path = grads_file(tmp_path, dict(weight=weight, bias=bias_recorded))
    def summaries(**grads):
        return {k: C.grad_summary(torch.from_numpy(v)) for k, v in grads.items()}
    ours = summaries(weight=weight * (1 + 1e-7), bias=bias_ours)
    rows = {row[0]: row for row in C.compare_grads(path, ours, 1e-3)}
    assert rows['grads.npz:bias'][4] and rows['grads.npz:weight'][4]
    # at its own scale the round-off would be a 100% difference
    assert C.compare(summaries(b=bias_recorded)['b'], ours['bias'])[1] > 0.1
    wrong = summaries(weight=weight, bias=bias_ours + 10.0)  # 10 = 1% of the largest
    rows = {row[0]: row for row in C.compare_grads(path, wrong, 1e-3)}
    assert not rows['grads.npz:bias'][4] and rows['grads.npz:weight'][4]
    wrong = summaries(weight=weight * 1.01, bias=bias_ours)
    rows = {row[0]: row for row in C.compare_grads(path, wrong, 1e-3)}
    assert not rows['grads.npz:weight'][4] and rows['grads.npz:bias'][4]
    missing = C.compare_grads(path, dict(weight=ours['weight']), 1e-3)
    assert [row[0] for row in missing if not row[4]] == [
        'grads.npz:bias (recorded only: the implementation produces no such array (an extra '
        'row in the fixture, or one of another model?))']


def test_measured_conditioning_sets_the_tolerance_of_an_ill_conditioned_array(tmp_path, capsys):
    """x -> (x - mean x) / std x of nearly equal numbers (a one-channel GroupNorm's
    cancellation): a 1e-6 perturbation moves it by far more than 1e-4."""
    x = torch.tensor([5.0, 5.0 + 1e-4, 5.0 - 2e-4], dtype=torch.float64)

    def normalise(x):
        centred = x - x.mean()
        return dict(y=(centred / centred.norm()).numpy())
    recorded = normalise(x)['y']
    np.savez(tmp_path / 'out.npz', y=recorded)
    ours = normalise(x.float().double())  # float32 round-off of the input
    perturbed = C.perturbed_runs(normalise, dict(x=x))
    row, = C.compare_file(tmp_path / 'out.npz', ours, 1e-4, perturbed=perturbed)
    assert row[4] and row[3] > 1e-3
    assert 'conditioning: out.npz:y' in capsys.readouterr().out
    assert not C.compare_file(tmp_path / 'out.npz', ours, 1e-4)[0][4]  # unmeasured: fails
    def wrong(x):  # the centring forgotten
        return dict(y=(x / x.norm()).numpy())
    assert not C.compare_file(tmp_path / 'out.npz', wrong(x), 1e-4,
                              perturbed=C.perturbed_runs(wrong, dict(x=x)))[0][4]


# ------------------------------------------------------------------ non-finite values
def test_a_nan_or_inf_on_one_side_fails_at_any_tolerance_and_a_matching_pattern_passes(
        tmp_path, capsys):
    """Issue 37 item 6: a NaN in a recorded array made its scale NaN, the measured movement
    inf and the tolerance inf: the row passed."""
    recorded = np.array([1.0, -2.0, np.nan, 4.0])
    ours = np.array([1.0, -2.0, 3.0, 4.0])
    assert C.compare(recorded, ours) == (np.inf, np.inf)
    assert C.compare(ours, recorded) == (np.inf, np.inf)
    assert C.compare(ours, np.array([1.0, -2.0, np.inf, 4.0]))[1] == np.inf
    # -inf log-probabilities at the same positions (a Viterbi table): the finite part is judged
    table = np.array([[0.0, -np.inf, -1.5], [-np.inf, -2.0, -0.5]])
    diff, rel = C.compare(table, table + np.where(np.isfinite(table), 1e-6, 0.0))
    assert diff == pytest.approx(1e-6) and rel == pytest.approx(1e-6 / 2.0)
    assert C.compare(table, np.where(np.isinf(table), np.inf, table))[1] == np.inf
    # a tolerance is never infinite: a non-finite measurement fails the row
    assert np.isnan(C.conditioned_tolerance(1e-4, np.inf))
    assert not C.within(0.0, np.nan) and not C.within(np.nan, 1.0) and not C.within(np.inf, 1e9)
    np.savez(tmp_path / 'out.npz', y=recorded)

    def run(x):
        return dict(y=(x * torch.tensor([1.0, -2.0, 3.0, 4.0])).numpy())
    perturbed = C.perturbed_runs(run, dict(x=torch.tensor(1.0)))
    row, = C.compare_file(tmp_path / 'out.npz', run(torch.tensor(1.0)), 1e-4, perturbed=perturbed)
    assert not row[4] and np.isfinite(row[3])
    np.savez(tmp_path / 'out.npz', y=np.array([1.0, -2.0, 3.0, 4.0]))
    nan_run = [dict(y=np.array([1.0, -2.0, np.nan, 4.0]))]  # a perturbed rerun turned NaN
    row, = C.compare_file(tmp_path / 'out.npz', run(torch.tensor(1.0)), 1e-4, perturbed=nan_run)
    assert not row[4] and np.isnan(row[3])
    assert 'no conditioning can be measured' in capsys.readouterr().out


def test_non_finite_gradients_chains_and_argmaxes_fail(tmp_path):
    rng = np.random.default_rng(0)
    recorded = dict(w=rng.standard_normal(70), b=rng.standard_normal(70))
    path = grads_file(tmp_path, recorded)
    ours = {k: C.grad_summary(torch.from_numpy(v)) for k, v in recorded.items()}
    assert all(row[4] for row in C.compare_grads(path, ours, 1e-3))
    ours['b'][5] = np.nan
    rows = {row[0]: row for row in C.compare_grads(path, ours, 1e-3)}
    assert not rows['grads.npz:b'][4] and rows['grads.npz:w'][4]
    states, outputs = linear_chain(0.5, 4, X0)
    states[2, 3] = np.nan  # a NaN in a recorded state
    rows = C.compare_chain('chain', states, outputs, chain_step(0.5), 1e-4)
    assert not {row[0]: row for row in rows}['chain:states[step-by-step]'][4]
    states, outputs = linear_chain(10.0, 4, X0)  # ill-conditioned: final state reported
    rows = C.compare_chain('chain', states, outputs, lambda i, x: (x * np.nan, x * np.nan), 1e-4)
    assert not any(row[4] for row in rows)  # a NaN even fails the reported row
    scores = np.array([[0.1, 0.9], [0.8, 0.2]])
    assert C.compare_argmax('a', scores, [1, 0], scores, 1e-3)[4]
    assert not C.compare_argmax('a', scores, [1, 0], scores, np.nan)[4]
    assert not C.compare_argmax('a', scores, [1, 0], np.where(scores > 0.5, np.nan, scores),
                                1e-3)[4]


# ------------------------------------------------------------------ optimiser steps
SHIFT = dict(batch=64, dim=16, softmaxes=32, classes=5)


def shift_problem():
    """Inputs (B, D), targets (B, R), weights W (R, D, K) and shifts c (R,) of R softmaxes
    with a shared shift each: d loss / d c is 0 in exact arithmetic (softmax ignores a
    constant shift, as the key third of an attention ``qkv.bias``), float32 round-off here."""
    gen = torch.Generator().manual_seed(0)
    b, d, r, k = SHIFT.values()
    return (torch.randn(b, d, generator=gen) * 3, torch.randint(0, k, (b, r), generator=gen),
            dict(W=torch.randn(r, d, k, generator=gen) * 0.3,
                 c=torch.randn(r, generator=gen) * 0.3))


def shift_grads(x, targets, params, reordered=False):
    """The gradients of the summed cross-entropy; ``reordered``: the same products summed in
    another order (a correct implementation whose round-off differs)."""
    w, c = (params[k].clone().requires_grad_(True) for k in ('W', 'c'))
    if reordered:
        logits = (x[:, None, :, None] * w[None]).flip(2).sum(2)
    else:
        logits = torch.einsum('bd,rdk->brk', x, w)
    logits = logits + c[None, :, None]
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                      targets.reshape(-1), reduction='sum').backward()
    return dict(W=w.grad, c=c.grad)


def adamw(lr=1e-2, weight_decay=0.05, bias_correction=True):
    """``step(before, grads) -> after`` of a first AdamW step; without bias correction it is
    what an implementation that forgets it computes."""
    def step(before, grads):
        if not bias_correction:
            b1, b2 = 0.9, 0.999
            return {k: before[k] * (1 - lr * weight_decay) - lr * (1 - b1) * grads[k]
                    / ((1 - b2) ** 0.5 * grads[k].abs() + 1e-8) for k in before}
        params = {k: torch.nn.Parameter(v.clone()) for k, v in before.items()}
        for k, p in params.items():
            p.grad = grads[k].clone()
        torch.optim.AdamW(list(params.values()), lr=lr, weight_decay=weight_decay).step()
        return {k: p.detach() for k, p in params.items()}
    return step


def test_optimiser_rows_judge_a_round_off_gradient_by_its_measured_conditioning(tmp_path,
                                                                               capsys):
    """Issue 37 item 9: AdamW's first step turns a round-off gradient into +-lr; a correct
    implementation with other round-off passes, wrong ones (lr, missing bias correction,
    weight decay, a moved weight) fail, and the fixed relative rule could not tell."""
    from vpn_plugin.oracles import optimiser_step as O
    x, targets, before = shift_problem()
    recorded = adamw()(before, shift_grads(x, targets, before))
    path = tmp_path / 'train_step.npz'
    np.savez(path, **{f'after_adamw.{k}': v.numpy() for k, v in recorded.items()})

    def rows_of(step, start=before):
        run = lambda x: shift_grads(x, targets, start, reordered=True)  # noqa: E731
        grads = run(x)
        spread = O.update_spread(step, start, grads, O.gradient_uncertainty(
            grads, C.perturbed_runs(run, dict(x=x))))
        return {row[0].split('.')[-1]: row for row in
                O.compare_steps(path, 'after_adamw.', before, step(start, grads), spread, 1e-4,
                                'x')}

    ours = adamw()(before, shift_grads(x, targets, before, reordered=True))
    assert (ours['c'] - recorded['c']).abs().max() > 0.5e-2  # the sign flipped somewhere
    old_rule = {row[0].split(':')[-1]: row[4] for row in C.compare_file(
        path, {f'after_adamw.{k}': v.numpy() for k, v in ours.items()}, 1e-4)}
    assert not old_rule['after_adamw.c']
    rows = rows_of(adamw())
    assert rows['c'][4] and rows['W'][4], rows
    assert 'undetermined' in capsys.readouterr().out
    scale = (recorded['c'] - before['c']).abs().max().item()  # the update scale, ~lr
    assert 1e-4 < rows['c'][3] * scale <= 2e-2 * 1.001  # at most the whole range, 2 lr
    for wrong in (adamw(lr=1.1e-2), adamw(bias_correction=False), adamw(weight_decay=0.1)):
        assert not rows_of(wrong)['W'][4]
    moved = dict(before, W=before['W'].clone())
    moved['W'][3, 4, 2] += 0.05
    assert not rows_of(adamw(), moved)['W'][4]
    assert rows_of(adamw(), moved)['c'][4]


# ------------------------------------------------------------------ the PDPP fixture
@pytest.fixture(scope='module')
def pdpp_fixture():
    return reference_dir('pdpp_small_t3')


@pytest.mark.parametrize('threads', [1, 2], indirect=True)
def test_pdpp_fixture_passes_at_any_thread_count(pdpp_fixture, threads, capsys):
    assert load_tool('check_reference').main([str(pdpp_fixture), '--no-sensitivity']) == 0
    report = capsys.readouterr().out
    assert 'columns: "array" = ' in report and 'max rel' in report.splitlines()[
        next(i for i, line in enumerate(report.splitlines()) if line.startswith('array '))]
    assert any(line.startswith('outputs.npz:x_recon_raw ') and line.rstrip().endswith('x')
               for line in report.splitlines())  # its widened column
    assert 'outputs.npz:ddim_final[free-running]: the chain is ill-conditioned' in report
    assert 'reported, not judged' in report and report.rstrip().endswith('PASS')


@pytest.mark.parametrize('threads', [2], indirect=True)
def test_pdpp_wrong_weight_fails_at_two_threads(pdpp_fixture, threads, tmp_path, capsys):
    copy = copy_fixture(pdpp_fixture, tmp_path)
    shift_array(copy, 'state_dict.npz', 'model.mid_block1.blocks.1.block.0.weight', (0, 0, 1),
                0.05)
    assert load_tool('check_reference').main([str(copy)]) == 1
    failed = failed_rows(capsys.readouterr().out)
    assert {'outputs.npz:x_recon_raw', 'outputs.npz:x_recon', 'outputs.npz:loss',
            'outputs.npz:ddim_x_recon_raw[step-by-step]',
            'outputs.npz:ddim_states[step-by-step]'} <= failed
    assert sum(name.startswith('grads.npz:') for name in failed) > 10
    assert not any('head' in name or 'sched' in name for name in failed)


@pytest.fixture
def float64_default():
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


@pytest.mark.usefixtures('float64_default')
def test_pdpp_in_float64_agrees_with_the_recording_at_its_conditioning(pdpp_fixture, capsys):
    """An independent check of the implementation: run in float64, our recomputation is off
    the official float32 recording only by that recording's round-off, which the measured
    conditioning bounds (x_recon_raw, gradients, every DDIM step fed the recorded state)."""
    from vpn_plugin.core import diffusion
    from vpn_plugin.oracles import pdpp
    meta = json.loads((pdpp_fixture / 'meta.json').read_text())
    cfg = pdpp.load_cfg()
    model = pdpp.build_pdpp(pdpp.model_config(cfg, meta, pdpp.unet_widths(meta)))
    pdpp.install_weights(model, pdpp_fixture)
    module = model.diffusion.double()
    inputs = C.read_npz(pdpp_fixture / 'inputs.npz')
    recorded = C.read_npz(pdpp_fixture / 'outputs.npz')
    batch = {k: v.double() for k, v in pdpp.batch_inputs(pdpp_fixture, inputs).items()}
    onehot = module.task_onehot
    module.task_onehot = lambda task: onehot(task).double()
    injected = dict(actions=torch.from_numpy(inputs['actions']),
                    tasks=torch.from_numpy(inputs['tasks']), t=torch.from_numpy(inputs['t']),
                    noise=torch.from_numpy(inputs['noise']).double(), **batch)
    run = lambda **values: pdpp.training_outputs(module, **values)  # noqa: E731
    outputs, grads = run(**injected)
    perturbed = C.perturbed_runs(run, injected)
    raw = C.compare_file(pdpp_fixture / 'outputs.npz', outputs, 1e-4, names=['x_recon_raw'],
                         perturbed=[o for o, _ in perturbed])[0]
    assert raw[4] and raw[2] > 1e-5  # it IS ill-conditioned: float32 round-off shows
    assert all(row[4] for row in C.compare_grads(pdpp_fixture / 'grads.npz', grads, 1e-3,
                                                 perturbed=[g for _, g in perturbed]))
    module.eval()
    sample_onehot = module.task_onehot(torch.from_numpy(inputs['task_sample']))
    states, recons = (recorded[k].astype(np.float64) for k in ('ddim_states', 'ddim_x_recon_raw'))

    def step(i, x, denoise=module.unet):  # compare.as_state feeds a float32-exact state
        return diffusion.ddim_step(denoise, x.double(), 9 - i,  # as float32: exact here
                                   lambda y: module.project(y, sample_onehot, batch),
                                   module.schedule(), module.ddim_timestep_seq)
    assert all(row[4] for row in C.compare_chain('outputs.npz', states, recons, step, 1e-4))
    # the DDIM update alone (fed the recorded U-Net output) is well-conditioned: 1e-6
    with torch.no_grad():
        for i in range(10):
            _, state = step(i, torch.from_numpy(states[i]),
                            lambda x, t: torch.from_numpy(recons[i]))
            assert C.compare(states[i + 1], state)[1] < 1e-6


@pytest.mark.parametrize('recorded_shape', [(6,), (0,), (2, 3, 1)])
def test_a_recorded_array_of_another_shape_fails_naming_both_shapes(tmp_path, recorded_shape):
    """Before: a flattened or emptied recorded output failed as `inf` without saying 'shape'
    (an emptied one also printed 'tol nan', from the conditioning of no entries)."""
    ours = np.arange(6, dtype=np.float64).reshape(2, 3)
    path = tmp_path / 'outputs.npz'
    np.savez(path, x=np.resize(ours, recorded_shape))
    (row,) = C.compare_file(path, dict(x=ours), 1e-4, perturbed=[dict(x=ours + 1e-9)])
    assert row[0] == f'outputs.npz:x (shape {recorded_shape} recorded, (2, 3) computed)'
    assert row[3] == 1e-4 and row[4] is False


def test_an_s3d_output_that_was_not_recomputed_names_its_missing_input():
    """Before: a removed input of the S3D fixture failed its outputs as '(missing)' without
    naming the input."""
    from vpn_plugin.oracles.s3d import input_of, why_not_computed
    fixture = reference_dir('s3d_small')
    outputs = np.load(fixture / 'outputs.npz')
    inputs = dict(np.load(fixture / 'inputs.npz'))
    assert {input_of(name) for name in outputs} == set(inputs)  # every output has its input
    why = why_not_computed({k: v for k, v in inputs.items() if k != 'video_b_uint8'})
    assert why('video_b_mixed_4f_tl') == 'inputs.npz has no video_b_uint8'
    why = why_not_computed({**inputs, 'video_a_uint8': inputs['video_a_uint8'][0]})
    assert why('video_a_mixed_5c') == ('inputs.npz:video_a_uint8 has shape (3, 16, 112, 112); '
                                       'expected 5 dims')
