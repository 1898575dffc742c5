"""The backend's ``scaled_softmax`` (attention's fused ``softmax(mask + scores * scale)``): bit for bit what the ops
it replaces compute (``add`` with ``alpha``, ``softmax``, the empty rows' zeros), for every mask layout, and the
attention that uses it against torch."""

import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn import functional as F

RNG = np.random.default_rng(0)
CAUSAL = np.where(np.tril(np.ones((5, 5), bool)), 0.0, -math.inf)
MASKS = {
    "none": None,
    "causal (L, S) under (B, H, L, S)": CAUSAL,
    "(B, 1, L, S)": RNG.standard_normal((2, 1, 5, 5)),
    "(1, L, S) with leading ones": CAUSAL[None],
    "a column (L, 1)": RNG.standard_normal((5, 1)),
}


def by_ops(scores: np.ndarray, mask, scale: float, safe: bool) -> np.ndarray:
    s = ng.tensor(scores)
    s = s * scale if mask is None else ng.add(ng.tensor(mask), s, alpha=scale)
    probs = s.softmax(-1)
    if safe and mask is not None:
        probs = probs.masked_fill(s.amax(-1, keepdim=True).isneginf(), 0.0)
    return probs.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", MASKS)
def test_scaled_softmax_equals_the_ops_bit_for_bit(name, dtype):
    scores = RNG.standard_normal((2, 3, 5, 5)).astype(dtype)
    mask = None if MASKS[name] is None else MASKS[name].astype(dtype)
    out = ng.tensor(scores)._backend.scaled_softmax(scores, mask, 0.37, True)
    assert out.dtype == dtype and out.shape == scores.shape
    np.testing.assert_array_equal(out, by_ops(scores, mask, 0.37, True))


def test_scaled_softmax_zeros_rows_without_keys_only_when_safe():
    scores = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    mask = np.zeros((3, 4), np.float32)
    mask[1] = -math.inf
    backend = ng.tensor(scores)._backend
    safe = backend.scaled_softmax(scores, mask, 1.0, True)
    assert (safe[:, 1] == 0).all() and np.allclose(safe[:, [0, 2]].sum(-1), 1)
    assert np.isnan(backend.scaled_softmax(scores, mask, 1.0, False)[:, 1]).all()


def test_scaled_softmax_keeps_nan_rows_nan_when_safe():
    """A row of ``-inf`` and nan is not empty: it stays nan, as ``amax`` then ``isneginf`` leave it."""
    scores = np.array([[[-math.inf, math.nan, -math.inf], [0.0, 1.0, 2.0]]], np.float32)
    out = ng.tensor(scores)._backend.scaled_softmax(scores, np.zeros((2, 3), np.float32), 1.0, True)
    assert np.isnan(out[0, 0]).all()
    np.testing.assert_array_equal(out, by_ops(scores, np.zeros((2, 3), np.float32), 1.0, True))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_causal_attention_at_gpt_head_shape_matches_torch(torch, dtype):
    q, k, v = (RNG.standard_normal((2, 4, 16, 8)).astype(dtype) for _ in range(3))
    g = RNG.standard_normal((2, 4, 16, 8)).astype(dtype)
    results = []
    for lib in (ng, torch):
        leaves = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = lib.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True)
        out.backward(lib.tensor(g))
        results.append([out.detach().numpy()] + [t.grad.numpy() for t in leaves])
    tol = 2e-5 if dtype == "float32" else 1e-12
    for ours, theirs in zip(*results):
        assert ours.dtype == dtype
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


def test_attention_with_a_mask_of_another_dtype_promotes_as_torch(torch):
    """A float32 mask on float64 scores is added by the ops (promoting), not the fused float64 kernel."""
    q = RNG.standard_normal((1, 3, 4))
    mask = RNG.standard_normal((3, 3)).astype(np.float32)
    ours = F.scaled_dot_product_attention(*(ng.tensor(q),) * 3, attn_mask=ng.tensor(mask))
    theirs = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(q),) * 3, attn_mask=torch.tensor(mask))
    assert ours.dtype == ng.float64
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_float32_softmax_matches_torch_with_masked_infinite_and_nan_rows(torch):
    """float32 softmax computes its exponentials with vector_math's float32 exp: torch's values, and its nan and 0
    where a row holds nan, +inf, or -inf entries."""
    x = RNG.standard_normal((12, 4, 8, 64)).astype(np.float32) * 20
    x[0, 0, :, 40:] = -math.inf
    x[0, 1, 0, 3] = math.nan
    x[0, 1, 1, 5] = math.inf
    x[0, 2, 0, :] = -math.inf
    x[0, 3, 0, :] = -100.0  # exp(-100 - max) of the row's equal entries: each 1, the row uniform
    ours = ng.tensor(x).softmax(-1).numpy()
    theirs = torch.tensor(x).softmax(-1).numpy()
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
