"""F.scaled_dot_product_attention with is_causal against torch on the direct path (plain float32 or float64 tensors
of one batch shape) and beside it (a broadcast batch, a mask, grouped heads): values, layout, node, gradients of
whichever inputs require them, the same bits with and without create_graph, and error texts."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like


def _qkv(lib, shapes, dtype="float32", needs=(True, True, True)):
    rng = np.random.default_rng(0)
    return [
        lib.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=need) for shape, need in zip(shapes, needs)
    ]


CASES = [
    ("4-d float32", [(2, 2, 4, 8)] * 3, "float32", (True, True, True), lambda t: t),
    ("3-d float64", [(2, 5, 3)] * 3, "float64", (True, True, True), lambda t: t),
    ("query alone", [(1, 2, 4, 8)] * 3, "float32", (True, False, False), lambda t: t),
    ("value alone", [(1, 2, 4, 8)] * 3, "float32", (False, False, True), lambda t: t),
    (
        "heads from one projection",
        [(2, 4, 2, 8)] * 3,
        "float32",
        (True, True, True),
        lambda t: [a.transpose(1, 2) for a in t],
    ),
    ("broadcast batch", [(2, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)], "float32", (True, True, True), lambda t: t),
]


@pytest.mark.parametrize("name, shapes, dtype, needs, arrange", CASES, ids=[c[0] for c in CASES])
def test_values_layout_node_and_gradients_match_torch(torch, name, shapes, dtype, needs, arrange):
    results = []
    for lib in (torch, numbagrad):
        q, k, v = _qkv(lib, shapes, dtype, needs)
        out = lib.nn.functional.scaled_dot_product_attention(*arrange([q, k, v]), is_causal=True)
        out.backward(lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(dtype)))
        grads = [None if t.grad is None else t.grad.numpy() for t in (q, k, v)]
        results.append((out.detach().numpy(), out.stride(), str(out.dtype).split(".")[1], out.grad_fn.name(), grads))
    theirs, ours = results
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    assert ours[1:4] == theirs[1:4]
    for mine, expected in zip(ours[4], theirs[4]):
        assert (mine is None) == (expected is None)
        if mine is not None:
            np.testing.assert_allclose(mine, expected, rtol=1e-4, atol=1e-5)


def test_no_grad_result_has_no_node(torch):
    for lib in (torch, numbagrad):
        q, k, v = _qkv(lib, [(1, 2, 4, 8)] * 3)
        with lib.no_grad():
            out = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert out.grad_fn is None and not out.requires_grad


def test_gradients_without_and_with_create_graph_agree():
    q, k, v = _qkv(numbagrad, [(1, 2, 4, 3)] * 3, "float64")

    def loss():
        return numbagrad.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).pow(2).sum()

    plain = numbagrad.autograd.grad(loss(), (q, k, v))
    graphed = numbagrad.autograd.grad(loss(), (q, k, v), create_graph=True)
    for p, g in zip(plain, graphed):
        assert g.grad_fn is not None
        np.testing.assert_allclose(p.numpy(), g.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_changing_a_saved_input_in_place_is_refused(torch):
    for lib in (torch, numbagrad):
        q, k, v = _qkv(lib, [(1, 2, 4, 8)] * 3)
        q2 = q * 1
        out = lib.nn.functional.scaled_dot_product_attention(q2, k, v, is_causal=True)
        q2.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            lib.ones(1, 4, 8), lib.ones(1, 4, 8, dtype=lib.float64), lib.ones(1, 4, 8), is_causal=True
        ),
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            lib.ones(1, 4, 8), lib.ones(1, 4, 6), lib.ones(1, 4, 8), is_causal=True
        ),
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            lib.ones(1, 4, 8), lib.ones(1, 4, 8), lib.ones(1, 4, 8), dropout_p=1.5, is_causal=True
        ),
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            lib.ones(1, 4, 8), lib.ones(1, 4, 8), lib.ones(1, 4, 8), attn_mask=lib.ones(4, 4) > 0, is_causal=True
        ),
        lambda lib: lib.nn.functional.scaled_dot_product_attention(lib.ones(8), lib.ones(8), lib.ones(8)),
    ],
)
def test_bad_input_raises_torch_error(torch, make):
    raises_like(torch, make)
