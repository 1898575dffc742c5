"""Reductions, scans and shape ops beyond the generated declaration tests: gradients through zeros and
infinities, named tuples, integer dtypes, split/chunk/unbind as torch's multi-output nodes, flip/roll, and errors,
compared with torch 2.13."""

from __future__ import annotations

import math

import numpy as np
import pytest

import numbagrad
from torch_same import same

pytestmark = pytest.mark.torch


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _errors_match(torch, call, kind=RuntimeError):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises(kind) as info:
            call(lib)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


# --- scans ----------------------------------------------------------------------------------------------------------
ZEROS = np.array([[2.0, 0.0, 3.0, 0.5, 4.0], [1.5, 2.0, -1.0, 3.0, 0.0], [0.0, 2.0, 3.0, 0.0, 5.0], [1, 2, 3, 4, 5.0]])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_gradient_through_zeros_matches_torch(torch, dim):
    same(torch, lambda lib, x: lib.cumprod(x, dim), ZEROS.copy())


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x: lib.cumsum(x, 1), id="cumsum"),
        pytest.param(lambda lib, x: x.cumsum(dim=0, dtype=lib.float32), id="cumsum-dtype"),
        pytest.param(lambda lib, x: lib.cumsum(x[0, 0], 0), id="cumsum-0d"),
        pytest.param(lambda lib, x: lib.cumprod(x[0, 0], -1), id="cumprod-0d"),
        pytest.param(lambda lib, x: (x * 1).cumsum_(1), id="cumsum_"),
        pytest.param(lambda lib, x: (x * 1).cumprod_(0), id="cumprod_"),
        pytest.param(lambda lib, x: lib.cumsum(x > 0, 1), id="cumsum-bool-is-int64"),
        pytest.param(lambda lib, x: lib.cumprod((x * 3).to(lib.int32), 1), id="cumprod-int32-is-int64"),
        pytest.param(lambda lib, x: lib.cumsum(x.float() * 1e4, 1), id="cumsum-float32-accumulates-in-double"),
        pytest.param(lambda lib, x: lib.cumprod(x.float(), 0), id="cumprod-float32"),
    ],
)
def test_scans_match_torch(torch, fn):
    same(torch, fn, _r(3, 4))


# --- logsumexp, var_mean, std_mean ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "x",
    [
        pytest.param(np.array([[1000.0, 1000.0, -5.0], [-1000.0, -999.0, -1001.0]]), id="large"),
        pytest.param(np.array([[-math.inf, -math.inf, 1.0], [-math.inf, -math.inf, -math.inf]]), id="minus-inf"),
    ],
)
def test_logsumexp_is_stable_and_matches_torch(torch, x):
    same(torch, lambda lib, t: lib.logsumexp(t, 1), x)


def test_logsumexp_of_integers_is_the_default_float(torch):
    same(torch, lambda lib, t: lib.logsumexp(t, 0), np.array([1, 2, 3]))


def test_logsumexp_with_an_infinite_element_is_that_infinity(torch):
    same(torch, lambda lib, t: lib.logsumexp(t, 0), np.array([math.inf, 1.0]), grads=False)


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x: lib.var_mean(x), id="var_mean"),
        pytest.param(lambda lib, x: lib.var_mean(x, 1, unbiased=False), id="var_mean-biased"),
        pytest.param(lambda lib, x: lib.var_mean(x, (0, 1), keepdim=True, correction=2), id="var_mean-correction"),
        pytest.param(lambda lib, x: lib.std_mean(x, dim=0), id="std_mean"),
        pytest.param(lambda lib, x: lib.std_mean(x, 1, keepdim=True, correction=0), id="std_mean-keepdim"),
        pytest.param(lambda lib, x: lib.var_mean(x, False), id="var_mean-unbiased-positional"),
    ],
)
def test_var_mean_and_std_mean_match_torch(torch, fn):
    same(torch, fn, _r(3, 4))


def test_var_mean_returns_a_plain_pair_from_one_node():
    x = numbagrad.tensor(_r(3, 4), requires_grad=True)
    result = numbagrad.var_mean(x, 1)
    assert type(result) is tuple and len(result) == 2
    assert result[0].grad_fn is result[1].grad_fn and [t.output_nr for t in result] == [0, 1]


# --- topk, argsort, unique ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x: lib.topk(x, 2), id="topk"),
        pytest.param(lambda lib, x: x.topk(3, dim=0, largest=False), id="topk-smallest"),
        pytest.param(lambda lib, x: lib.topk(x, 0), id="topk-zero"),
        pytest.param(lambda lib, x: lib.topk(x[0, 0], 1), id="topk-0d"),
        pytest.param(lambda lib, x: lib.argsort(x, dim=0, descending=True), id="argsort"),
        pytest.param(lambda lib, x: x.argsort(), id="argsort-method"),
    ],
)
def test_topk_and_argsort_match_torch(torch, fn):
    same(torch, fn, _r(4, 5))


def test_topk_returns_torchs_named_tuple():
    values, indices = numbagrad.topk(numbagrad.tensor([1.0, 3.0, 2.0]), 2)
    result = numbagrad.topk(numbagrad.tensor([1.0, 3.0, 2.0]), 2)
    assert result.values.tolist() == [3.0, 2.0] and result.indices.tolist() == [1, 2]
    assert repr(result).startswith("numbagrad.return_types.topk(\nvalues=tensor([3., 2.]),\nindices=tensor([1, 2]))")
    assert values.tolist() == [3.0, 2.0] and indices.dtype is numbagrad.int64


def test_topk_of_too_many_is_torchs_error(torch):
    _errors_match(torch, lambda lib: lib.topk(lib.zeros(3, 4), 5))


def test_argsort_is_stable_for_ties(torch):
    same(torch, lambda lib, x: lib.argsort(x, stable=True), np.array([2.0, 1.0, 2.0, 1.0, 0.0, 2.0]))


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x: lib.unique(x), id="unique"),
        pytest.param(lambda lib, x: lib.unique(x, sorted=False), id="unique-unsorted-request"),
        pytest.param(lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True), id="inverse-counts"),
        pytest.param(lambda lib, x: x.unique(return_counts=True), id="counts-method"),
        pytest.param(lambda lib, x: lib.unique(x, dim=0, return_inverse=True), id="dim"),
        pytest.param(lambda lib, x: lib.unique(x, dim=1, return_counts=True), id="dim-1"),
    ],
)
def test_unique_matches_torch(torch, fn):
    same(torch, fn, np.array([[3, 1, 2], [1, 3, 2], [3, 1, 2], [0, 0, 0]]))


def test_unique_keeps_every_nan_like_torch(torch):
    same(torch, lambda lib, x: lib.unique(x.detach()), np.array([3.0, 1.0, math.nan, math.nan]))


# --- split, chunk, unbind: one node, several view outputs ---------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x: lib.split(x, 2), id="split"),
        pytest.param(lambda lib, x: x.split([1, 4]), id="split-sizes"),
        pytest.param(lambda lib, x: lib.split(x, [2, 0, 1], dim=1), id="split-with-empty"),
        pytest.param(lambda lib, x: lib.split(x, 10), id="split-larger-than-dim"),
        pytest.param(lambda lib, x: lib.chunk(x, 2), id="chunk"),
        pytest.param(lambda lib, x: x.chunk(3, 1), id="chunk-3-of-3"),
        pytest.param(lambda lib, x: lib.chunk(x, 4), id="chunk-fewer-pieces"),
        pytest.param(lambda lib, x: lib.unbind(x, 1), id="unbind"),
        pytest.param(lambda lib, x: x.unbind(), id="unbind-method"),
        pytest.param(lambda lib, x: lib.narrow(x, 0, 1, 3), id="narrow"),
    ],
)
def test_splits_match_torch_nodes_and_gradients(torch, fn):
    same(torch, fn, _r(5, 3))


def test_pieces_are_views_sharing_storage():
    x = numbagrad.zeros(3, 2)
    a, b = x.split(2)
    a[0, 0] = 10.0
    assert x[0, 0].item() == 10.0 and a._base is x and b.shape == (1, 2)


def test_unused_pieces_get_zero_gradients():
    x = numbagrad.ones(4, 2, requires_grad=True)
    a, b = x.chunk(2)
    (a * 3).sum().backward()
    assert x.grad.tolist() == [[3.0, 3.0], [3.0, 3.0], [0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda lib: lib.split(lib.zeros(4, 3), [1, 2]), id="sizes-sum"),
        pytest.param(lambda lib: lib.split(lib.zeros(4, 3), 0), id="size-zero"),
        pytest.param(lambda lib: lib.split(lib.zeros(4, 3), -1), id="size-negative"),
        pytest.param(lambda lib: lib.split(lib.zeros(4, 3), [1, -1, 4]), id="sizes-negative"),
        pytest.param(lambda lib: lib.chunk(lib.zeros(4, 3), 0), id="chunks-zero"),
        pytest.param(lambda lib: lib.flip(lib.zeros(4, 3), [0, 0]), id="flip-repeated-dim"),
        pytest.param(lambda lib: lib.roll(lib.zeros(4, 3), [1, 2], [0]), id="roll-misaligned"),
        pytest.param(lambda lib: lib.roll(lib.zeros(4, 3), [], []), id="roll-no-shifts"),
    ],
)
def test_shape_errors_match_torch(torch, call):
    _errors_match(torch, call)


def test_unbind_of_a_0d_tensor_is_torchs_index_error(torch):
    _errors_match(torch, lambda lib: lib.unbind(lib.tensor(1.0)), IndexError)


def test_flip_as_a_function_needs_a_sequence_of_dims_like_torch(torch):
    _errors_match(torch, lambda lib: lib.flip(lib.zeros(2, 2), 0), TypeError)


# --- flip, roll, broadcast_to, detach -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x: lib.flip(x, (0, 1)), id="flip"),
        pytest.param(lambda lib, x: x.flip(1), id="flip-method-varargs"),
        pytest.param(lambda lib, x: x.flip([0]), id="flip-method-list"),
        pytest.param(lambda lib, x: lib.flip(x[0, 0], []), id="flip-0d"),
        pytest.param(lambda lib, x: lib.roll(x, 1), id="roll-flat"),
        pytest.param(lambda lib, x: lib.roll(x, -5), id="roll-flat-negative"),
        pytest.param(lambda lib, x: x.roll((1, -1), (0, 1)), id="roll-two-dims"),
        pytest.param(lambda lib, x: lib.roll(x, 7, -1), id="roll-more-than-size"),
        pytest.param(lambda lib, x: lib.broadcast_to(x[:1], (2, 3, 4)), id="broadcast_to"),
        pytest.param(lambda lib, x: x.t().flip(0), id="flip-transposed"),
    ],
)
def test_flip_roll_broadcast_match_torch(torch, fn):
    same(torch, fn, _r(3, 4))


def test_detach_as_a_function_shares_storage_without_history():
    x = numbagrad.ones(3, requires_grad=True)
    y = numbagrad.detach(x * 2)
    assert not y.requires_grad and y.grad_fn is None
    x2 = numbagrad.ones(2)
    d = numbagrad.detach(x2)
    d[0] = 5.0
    assert x2[0].item() == 5.0 and d._version == x2._version


@pytest.mark.parametrize("shape", [(0, -1), (-1, 0), (2, 0, -1)])
def test_error_an_ambiguous_minus_one_for_0_elements(torch, shape):
    messages = []
    for lib in (numbagrad, torch):
        with pytest.raises(RuntimeError) as info:
            lib.zeros(0, 3).reshape(shape)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


SPREADS = {
    "var over two dims, keepdim": lambda lib, x: x.var((0, 1), keepdim=True),
    "var over the last dim": lambda lib, x: x.var(-1),
    "var of everything, biased": lambda lib, x: x.var(correction=0),
    "std over the first dim, keepdim": lambda lib, x: x.std(0, keepdim=True),
    "var_mean over two dims": lambda lib, x: lib.var_mean(x, (0, 2))[0],
    "mean over two dims, keepdim": lambda lib, x: x.mean((0, 1), keepdim=True),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", SPREADS.values(), ids=SPREADS.keys())
def test_spreads_values_and_gradients_match_torch(torch, fn, dtype):
    """The forward on the storage and the backward's direct path (no create_graph) against torch."""
    x = _r(4, 3, 5).astype(dtype)
    results = []
    for lib in (numbagrad, torch):
        t = lib.tensor(x, requires_grad=True)
        out = fn(lib, t)
        out.backward(lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(dtype)))
        results.append((out.detach().numpy(), t.grad.numpy(), str(out.dtype).split(".")[-1]))
    (a, ga, da), (b, gb, db) = results
    assert da == db
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    np.testing.assert_allclose(ga, gb, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fn", ["var", "std"])
@pytest.mark.parametrize("shape, dim", [((3,), None), ((5, 7), 1), ((4, 6, 3), (0, 2))])
def test_two_byte_float_var_and_std_are_rounded_once_as_torch(torch, dtype, fn, shape, dim):
    """A 2-byte float's spread is computed in float32 and rounded once (not the variance before its root)."""
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32) * 3
    ours = getattr(numbagrad.tensor(a).to(getattr(numbagrad, dtype)), fn)(dim=dim)
    theirs = getattr(torch.tensor(a).to(getattr(torch, dtype)), fn)(dim=dim)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
