"""The CPU backend's causal attention kernels (``cpu.causal_attention``, the softmax statistics it keeps, and its
backward, which makes the probabilities again from them) against a float64 numpy reference: lengths and head
widths on and off the register blocks' multiples, values of another width, strided and transposed layouts, other
ranks, a nan key, any subset of gradients, and the slices shared among two threads giving the same bits as one."""

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import blas, cpu, cpu_threads


def _reference(q, k, v, g, scale):
    """Causal attention's output, each row's softmax statistics (its largest scaled score and the reciprocal of
    its sum of exponentials) and the gradients in float64, by the formulas."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    length = q.shape[-2]
    hidden = np.triu(np.ones((length, length), bool), 1)
    scores = np.where(hidden, -np.inf, q @ np.swapaxes(k, -1, -2) * scale)
    largest = scores.max(-1, keepdims=True)
    probs = np.exp(scores - largest)
    total = probs.sum(-1, keepdims=True)
    probs /= total
    stats = np.concatenate([largest, 1 / total], -1)
    g_probs = g @ np.swapaxes(v, -1, -2)
    g_scores = probs * (g_probs - (probs * g_probs).sum(-1, keepdims=True))
    g_q = g_scores @ k * scale
    g_k = np.swapaxes(g_scores, -1, -2) @ q * scale
    return probs @ v, stats, g_q, g_k, np.swapaxes(probs, -1, -2) @ g


def _inputs(shape, value_width, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    v, g = (rng.standard_normal((*shape[:-1], value_width)).astype(dtype) for _ in range(2))
    return q, k, v, g


def _check(q, k, v, g, tolerance, needs=(True, True, True)):
    scale = q.shape[-1] ** -0.5 if q.shape[-1] else 1.0
    mask = np.zeros((q.shape[-2],) * 2, q.dtype)
    out, stats = cpu.causal_attention(q, k, v, mask, scale)
    grads = cpu.causal_attention_backward(g, q, k, v, stats, scale, *needs)
    expected = _reference(q, k, v, g, scale)
    np.testing.assert_allclose(out, expected[0], rtol=tolerance, atol=tolerance)
    assert stats.shape == (*q.shape[:-1], 2) and stats.dtype == q.dtype
    np.testing.assert_allclose(stats, expected[1], rtol=tolerance, atol=tolerance)
    for grad, want, need in zip(grads, expected[2:], needs):
        assert (grad is None) == (not need)
        if need:
            assert grad.shape == want.shape and grad.dtype == q.dtype
            np.testing.assert_allclose(grad, want, rtol=tolerance, atol=tolerance)
    return out, stats, grads


@pytest.mark.parametrize("length", [2, 7, 13, 64, 67])
@pytest.mark.parametrize("width", [1, 5, 32, 40, 70])
def test_lengths_and_head_widths_match_the_formulas(length, width):
    _check(*_inputs((2, 3, length, width), width, np.float32), 2e-5)


@pytest.mark.parametrize("value_width", [0, 3, 17, 64, 100])
def test_values_of_another_width(value_width):
    _check(*_inputs((2, 2, 20, 16), value_width, np.float64), 1e-12)


def test_float64_is_float64_exact():
    _check(*_inputs((3, 2, 33, 24), 24, np.float64), 1e-12)


def test_heads_split_from_one_projection_are_read_in_place_and_laid_out_as_the_query():
    rng = np.random.default_rng(1)
    fused = rng.standard_normal((3, 40, 3, 4, 16)).astype(np.float32)  # (B, T, q/k/v, H, E)
    q, k, v = (fused[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    g = rng.standard_normal((3, 4, 40, 16)).astype(np.float32)
    out, _, grads = _check(q, k, v, g, 2e-5)
    for a in (out, *grads):
        assert a.transpose(0, 2, 1, 3).flags.c_contiguous


def test_strided_last_dimension_and_other_ranks():
    q, k, v, g = _inputs((2, 12, 10), 10, np.float64)
    _check(q, k, v, g, 1e-12)  # 3-d
    _check(*(a[None, None] for a in (q[0], k[0], v[0], g[0])), 1e-12)  # 4-d of one slice
    _check(*(a.reshape(2, 1, 1, 12, 10) for a in (q, k, v, g)), 1e-12)  # 5-d
    wide = [np.repeat(a, 2, axis=-1) for a in (q, k, v, g)]
    _check(*(a[..., ::2] for a in wide), 1e-12)  # every other element of the last dimension


@pytest.mark.parametrize("needs", [(True, False, False), (False, True, False), (False, False, True),
                                   (False, False, False), (True, True, False)])  # fmt: skip
def test_only_the_gradients_asked_for(needs):
    _check(*_inputs((2, 2, 19, 8), 8, np.float32), 2e-5, needs)


def test_a_nan_key_reaches_only_the_queries_that_see_it():
    q, k, v, g = _inputs((1, 1, 12, 8), 8, np.float32)
    k[0, 0, 5] = np.nan
    out, stats = cpu.causal_attention(q, k, v, np.zeros((12, 12), np.float32), 0.5)
    assert np.isfinite(out[0, 0, :5]).all() and np.isfinite(stats[0, 0, :5]).all()
    assert np.isnan(out[0, 0, 5:]).all()


@pytest.mark.skipif(blas.openblas() is None or not blas.openblas().runs_tasks, reason="no BLAS threads for tasks")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_slices_shared_between_two_threads_give_one_threads_bits(monkeypatch, dtype):
    q, k, v, g = _inputs((5, 4, 64, 32), 32, dtype)
    before = numbagrad.get_num_threads()
    results = []
    calls = []
    real = cpu_threads.run_compiled
    try:
        for threads in (1, 2):
            numbagrad.set_num_threads(threads)
            calls.clear()
            monkeypatch.setattr(cpu_threads, "run_compiled", lambda f, args: calls.append(len(args)) or real(f, args))
            out, stats = cpu.causal_attention(q, k, v, np.zeros((64, 64), dtype), 0.25)
            grads = cpu.causal_attention_backward(g, q, k, v, stats, 0.25, True, True, True)
            monkeypatch.undo()
            assert calls == ([] if threads == 1 else [2, 2])
            results.append((out, stats, *grads))
    finally:
        numbagrad.set_num_threads(before)
    for one, two in zip(*results):
        np.testing.assert_array_equal(two, one)


def test_reversed_rows_are_read_as_their_values():
    q, k, v, g = _inputs((2, 2, 16, 8), 8, np.float64)
    _check(*(a[:, ::-1] for a in (q, k, v, g)), 1e-12)  # (negative strides between heads: copied first)
