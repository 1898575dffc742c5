"""``scaled_dot_product_attention(is_causal=True)`` with as many keys as queries runs as the backend's block-causal
attention (its products skip the keys no query of a block sees) and its backward kernel: values and gradients are
torch's, for strided views (a GPT's split heads), odd lengths, 2-d and 3-d inputs, a value width of its own and
partial gradient needs; double backward differentiates the tensor-op formula."""

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.backend import cpu

F = numbagrad.nn.functional

SHAPES = {
    "heads": ((2, 3, 8, 4), (2, 3, 8, 4), (2, 3, 8, 4)),
    "odd_length": ((1, 2, 7, 3), (1, 2, 7, 3), (1, 2, 7, 3)),
    "two_queries": ((2, 1, 2, 5), (2, 1, 2, 5), (2, 1, 2, 5)),
    "three_d": ((3, 6, 4), (3, 6, 4), (3, 6, 4)),
    "two_d": ((5, 4), (5, 4), (5, 4)),
    "value_width": ((2, 2, 6, 4), (2, 2, 6, 4), (2, 2, 6, 7)),
}


def _arrays(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _leaves(lib, arrays, grads=(True, True, True)):
    return [lib.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_and_gradients_match_torch(torch, name, dtype):
    arrays = _arrays(SHAPES[name], dtype)
    ours, theirs = _leaves(numbagrad, arrays), _leaves(torch, arrays)
    y_ours = F.scaled_dot_product_attention(*ours, is_causal=True)
    y_theirs = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(y_ours.detach().numpy(), y_theirs.detach().numpy(), rtol=tol, atol=tol)
    g = np.random.default_rng(1).standard_normal(y_theirs.shape).astype(dtype)
    y_ours.backward(numbagrad.tensor(g))
    y_theirs.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol * 10, atol=tol * 10)
        assert a.grad.dtype == a.dtype


def test_split_head_views_as_a_gpt_makes_them(torch):
    """q, k and v are strided views of one projection (split, view, transpose), the gradient arrives transposed."""
    b, t, h, d = 2, 6, 2, 4
    x = np.random.default_rng(2).standard_normal((b, t, 3 * h * d)).astype(np.float32)
    results = []
    for lib, fn in ((numbagrad, F), (torch, torch.nn.functional)):
        xt = lib.tensor(x, requires_grad=True)
        q, k, v = (u.view(b, t, h, d).transpose(1, 2) for u in xt.split(h * d, dim=2))
        y = fn.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(b, t, h * d)
        (y * lib.arange(h * d, dtype=lib.float32)).sum().backward()
        results.append((y.detach().numpy(), xt.grad.numpy()))
    for a, b_ in zip(*results):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("needs", [(False, False, True), (True, False, False), (False, True, True)])
def test_partial_gradient_needs(torch, needs):
    arrays = _arrays(SHAPES["heads"], "float64", seed=3)
    ours, theirs = _leaves(numbagrad, arrays, needs), _leaves(torch, arrays, needs)
    F.scaled_dot_product_attention(*ours, is_causal=True).sum().backward()
    torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True).sum().backward()
    for a, b, need in zip(ours, theirs, needs):
        assert (a.grad is None) == (not need)
        if need:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_gradcheck_and_double_backward():
    inputs = _leaves(numbagrad, _arrays(((1, 2, 5, 3), (1, 2, 5, 3), (1, 2, 5, 2)), "float64", seed=4))
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


def test_backend_blocks_give_the_whole_products():
    """The block products equal the whole ones with the causal mask (the skipped corner is masked anyway)."""
    q, k, v = _arrays(SHAPES["odd_length"], "float64", seed=5)
    mask = np.triu(np.full((7, 7), -np.inf), 1)
    out, stats = cpu.causal_attention(q, k, v, mask, 0.5)
    scores = mask + (q @ np.swapaxes(k, -1, -2)) * 0.5
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, expected @ v, rtol=1e-12, atol=1e-15)
    g = _arrays(((1, 2, 7, 3),), "float64", seed=6)[0]
    g_q, g_k, g_v = cpu.causal_attention_backward(g, q, k, v, stats, 0.5, True, True, True)
    g_probs = g @ np.swapaxes(v, -1, -2)
    g_scores = expected * (g_probs - (expected * g_probs).sum(-1, keepdims=True))
    np.testing.assert_allclose(g_v, np.swapaxes(expected, -1, -2) @ g, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g_q, g_scores @ k * 0.5, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(g_k, np.swapaxes(g_scores, -1, -2) @ q * 0.5, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("backend", ["cpu"] + (["cuda"] if numbagrad.cuda.is_available() else []))
def test_backends_agree(backend):
    """Each backend's ``causal_attention`` and its backward give the numpy blocks' results (the cuda one runs the
    whole products and keeps the probabilities for its backward, the CPU one each row's softmax statistics;
    under Numba's simulator where CUDA is absent: ``NUMBA_ENABLE_CUDASIM=1``)."""
    from numbagrad.backend import cuda

    b = cpu if backend == "cpu" else cuda
    q, k, v = _arrays(SHAPES["value_width"], "float32", seed=7)
    g = _arrays(((2, 2, 6, 7),), "float32", seed=8)[0]
    mask = np.triu(np.full((6, 6), -np.inf, np.float32), 1)
    out, stats = cpu.causal_attention(q, k, v, mask, 0.5)
    grads = cpu.causal_attention_backward(g, q, k, v, stats, 0.5, True, True, True)
    put = b.from_host
    d_out, d_kept = b.causal_attention(put(q), put(k), put(v), put(mask), 0.5)
    d_grads = b.causal_attention_backward(put(g), put(q), put(k), put(v), d_kept, 0.5, True, True, True)
    for ours, expected in zip((d_out, *d_grads), (out, *grads)):
        host = b.to_host(ours)
        assert host.dtype == np.float32 and host.shape == expected.shape
        np.testing.assert_allclose(host, expected, rtol=1e-5, atol=1e-6)
    assert b.causal_attention_backward(put(g), put(q), put(k), put(v), d_kept, 0.5, False, False, True)[:2] == (
        None,
        None,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: [u.view(2, 5, 3, 8).transpose(1, 2) for u in lib.randn(2, 5, 72).split(24, dim=2)],
        lambda lib: [lib.randn(2, 3, 5, 8)] * 3,
        lambda lib: [lib.randn(5, 3, 2, 8).permute(2, 1, 0, 3)] * 3,
    ],
    ids=["split_heads", "contiguous", "permuted"],
)
def test_output_laid_out_as_torch_lays_it_out(torch, make):
    """The output follows the query's layout, as torch's CPU flash attention writes it: split heads give (B, T, H,
    E) memory, so ``transpose(1, 2)`` of the output is contiguous."""
    ours = F.scaled_dot_product_attention(*make(numbagrad), is_causal=True)
    theirs = torch.nn.functional.scaled_dot_product_attention(*make(torch), is_causal=True)
    assert ours.stride() == theirs.stride()
    assert ours.transpose(1, 2).is_contiguous() == theirs.transpose(1, 2).is_contiguous()


def test_split_head_gradients_laid_out_as_torch_lays_them_out(torch):
    """Heads split from one projection get their gradients in (B, T, H, E) memory, as torch's flash backward
    writes them: the transpose and view back to the projection copy nothing."""
    strides = []
    for lib, fn in ((numbagrad, F), (torch, torch.nn.functional)):
        x = lib.randn(2, 5, 72, requires_grad=True)
        heads = [u.view(2, 5, 3, 8).transpose(1, 2) for u in x.split(24, dim=2)]
        seen = []
        for t in heads:
            t.register_hook(lambda g, seen=seen: seen.append(g.stride()))
        fn.scaled_dot_product_attention(*heads, is_causal=True).sum().backward()
        strides.append(sorted(seen))
    assert strides[0] == strides[1]


def test_a_nan_key_stays_out_of_earlier_queries(torch):
    """torch's causal attention never computes a query's scores against later keys: a nan in the last key leaves
    the earlier queries' outputs finite (the masked score is not added to ``-inf``, which would give nan)."""
    q, k, v = _arrays(SHAPES["heads"], "float32", seed=9)
    k[:, :, -1, 0] = np.nan
    ours = F.scaled_dot_product_attention(*(numbagrad.tensor(a) for a in (q, k, v)), is_causal=True).numpy()
    theirs = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), is_causal=True).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.isfinite(ours[:, :, :-1]).all()
    np.testing.assert_allclose(ours[:, :, :-1], theirs[:, :, :-1], rtol=1e-5, atol=1e-6)
