"""Pooling in 1 and 3 dims against torch: ``max_pool1d/3d`` (values, argmax indices with ties, gradients),
``avg_pool1d/3d`` (``count_include_pad``, ``ceil_mode``, ``divisor_override``), their modules and the adaptive
average pool modules, gradcheck in float64 and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF


def _input(seed: int, shape, ties: bool = False):
    x = np.random.default_rng(seed).standard_normal(shape)
    return np.round(x * 2) if ties else x  # few distinct values: equal maxima in most windows


def _run(lib, fn, x):
    t = lib.tensor(x, requires_grad=True)
    out = fn(lib, t)
    values, indices = out if isinstance(out, tuple) else (out, None)
    values.backward(lib.tensor(np.random.default_rng(99).standard_normal(tuple(values.shape))))
    return values, indices, t.grad.numpy()


def _same_as_torch(torch, fn, x):
    ours, our_idx, our_grad = _run(numbagrad, fn, x)
    theirs, their_idx, their_grad = _run(torch, fn, x)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(our_grad, their_grad, rtol=1e-12, atol=1e-14)
    if their_idx is not None:
        np.testing.assert_array_equal(our_idx.numpy(), their_idx.numpy())
        assert our_idx.dtype.name == "int64"
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__


POOLS = [
    ("max_pool1d", (2, 3, 7), (3, 2, 1), {"return_indices": True}),
    ("max_pool1d", (3, 8), (2,), {"dilation": 2, "ceil_mode": True, "return_indices": True}),
    ("avg_pool1d", (2, 3, 7), (3, 2, 1), {}),
    ("avg_pool1d", (3, 8), (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}),
    ("max_pool3d", (2, 2, 4, 5, 6), (2,), {"return_indices": True}),
    (
        "max_pool3d",
        (2, 5, 4, 6),
        ((2, 3, 2), (1, 2, 2), (1, 1, 0)),
        {"dilation": (2, 1, 1), "ceil_mode": True, "return_indices": True},
    ),  # fmt: skip
    ("max_pool3d", (1, 2, 4, 5, 6), (3, 2, 1), {"return_indices": True}),
    ("avg_pool3d", (2, 2, 4, 5, 6), (2,), {}),
    ("avg_pool3d", (2, 5, 4, 6), ((2, 3, 2), (1, 2, 2), (1, 1, 0)), {"ceil_mode": True}),
    ("avg_pool3d", (2, 2, 4, 5, 6), (3, 2, 1), {"count_include_pad": False}),
    ("avg_pool3d", (2, 2, 4, 5, 6), (3, 2, 1), {"divisor_override": 5}),
    ("avg_pool3d", (1, 2, 5, 5, 5), (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}),
    ("adaptive_max_pool1d", (2, 3, 7), (3,), {"return_indices": True}),
    ("adaptive_max_pool1d", (3, 7), ((5,),), {"return_indices": True}),
    ("adaptive_max_pool2d", (2, 2, 5, 7), ((3, 4),), {"return_indices": True}),
    ("adaptive_max_pool2d", (2, 5, 7), ((2, None),), {"return_indices": True}),
    ("adaptive_max_pool2d", (1, 2, 3, 4), ((7, 9),), {"return_indices": True}),
]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("name,shape,args,kw", POOLS, ids=str)
def test_pooling_matches_torch(torch, name, shape, args, kw, ties):
    _same_as_torch(torch, lambda lib, x: getattr(lib.nn.functional, name)(x, *args, **kw), _input(0, shape, ties))


@pytest.mark.parametrize(
    "name,shape,args",
    [
        ("max_pool1d", (1, 2, 5), (2, 1, 1)),
        ("avg_pool1d", (1, 2, 5), (2, 1, 1)),
        ("max_pool3d", (1, 1, 3, 4, 3), (2, 1, 1)),
        ("avg_pool3d", (1, 1, 3, 4, 3), (2, 1, 1)),
        ("adaptive_max_pool1d", (1, 2, 5), (3,)),
        ("adaptive_max_pool2d", (1, 2, 3, 5), ((2, 3),)),
    ],
)
def test_pooling_gradcheck_and_gradgradcheck(name, shape, args):
    x = numbagrad.tensor(_input(1, shape), requires_grad=True)
    fn = lambda t: getattr(NF, name)(t, *args)  # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(lambda t: fn(t) ** 2, (x,))


ERRORS = [
    ("max_pool1d", (2, 3, 4, 5), (2,), {}),
    ("max_pool1d", (1, 2, 3), (2,), {"padding": 2}),
    ("max_pool1d", (1, 2, 3), (4,), {}),
    ("avg_pool1d", (1, 2, 3), (2,), {"padding": 2}),
    ("avg_pool1d", (1, 2, 3), (4,), {}),
    ("avg_pool1d", (2,), (2,), {}),
    ("max_pool3d", (2, 3), (2,), {}),
    ("avg_pool3d", (2, 3), (2,), {}),
    ("max_pool3d", (1, 1, 2, 2, 2), (3,), {}),
    ("avg_pool3d", (1, 1, 2, 2, 2), (3,), {}),
    ("max_pool3d", (1, 1, 4, 4, 4), (2,), {"padding": 2}),
    ("avg_pool3d", (1, 1, 4, 4, 4), (2,), {"padding": 2}),
    ("avg_pool3d", (1, 1, 4, 4, 4), (2,), {"divisor_override": 0}),
    ("adaptive_max_pool1d", (2, 3, 4, 5), (2,), {}),
    ("adaptive_max_pool2d", (2, 3), (2,), {}),
    ("adaptive_max_pool2d", (1, 2, 3, 3), ((1, 2, 3),), {}),
]


@pytest.mark.parametrize("name,shape,args,kw", ERRORS, ids=str)
def test_pooling_errors_match_torch(torch, name, shape, args, kw):
    x = np.zeros(shape)
    with pytest.raises(Exception) as theirs:
        getattr(torch.nn.functional, name)(torch.tensor(x), *args, **kw)
    with pytest.raises(type(theirs.value)) as ours:
        getattr(NF, name)(numbagrad.tensor(x), *args, **kw)
    assert str(ours.value) == str(theirs.value)


MODULES = [
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, (2, 3, 7)),
    ("MaxPool3d", (2,), {"stride": 1, "ceil_mode": True}, (1, 2, 3, 4, 3)),
    ("AvgPool1d", (3,), {"padding": 1, "count_include_pad": False}, (2, 3, 7)),
    ("AvgPool3d", (2,), {"stride": 1, "padding": 1, "divisor_override": 3}, (1, 2, 3, 4, 3)),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 7)),
    ("AdaptiveAvgPool3d", ((2, None, 3),), {}, (1, 2, 3, 4, 5)),
    ("AdaptiveMaxPool1d", (3,), {}, (2, 3, 7)),
    ("AdaptiveMaxPool2d", ((2, None),), {"return_indices": True}, (1, 2, 3, 4)),
]


@pytest.mark.parametrize("name,args,kw,shape", MODULES, ids=str)
def test_pooling_modules_match_torch(torch, name, args, kw, shape):
    assert repr(getattr(nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args, **kw))
    _same_as_torch(torch, lambda lib, x: getattr(lib.nn, name)(*args, **kw)(x), _input(2, shape))


def test_max_pool_modules_return_indices_like_torch(torch):
    x = _input(3, (1, 2, 4, 4, 4), ties=True)
    values, indices = nn.MaxPool3d(2, return_indices=True)(numbagrad.tensor(x))
    expected = torch.nn.MaxPool3d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(values.numpy(), expected[0].numpy())
    np.testing.assert_array_equal(indices.numpy(), expected[1].numpy())


def test_adaptive_max_pool_picks_the_last_nan_like_torch(torch):
    x = _input(4, (1, 2, 6, 6))
    x[np.random.default_rng(5).random(x.shape) < 0.2] = np.nan
    _same_as_torch(torch, lambda lib, t: lib.nn.functional.adaptive_max_pool2d(t, (4, 5), True), x)


def test_pooling_modules_load_from_torchs_module_path():
    from numbagrad.nn.modules.pooling import AdaptiveAvgPool3d, AvgPool1d, MaxPool3d

    assert (AdaptiveAvgPool3d, AvgPool1d, MaxPool3d) == (nn.AdaptiveAvgPool3d, nn.AvgPool1d, nn.MaxPool3d)


@pytest.mark.parametrize(
    "name,shape,args", [("max_pool1d", (1, 1, 1), (2, 1, 1, 2)), ("max_pool3d", (1, 1, 1, 3, 3), (2, 1, 1, 2))]
)
def test_windows_with_no_input_element_are_minus_infinity_and_pass_no_gradient(torch, name, shape, args):
    """Dilation over padding can leave a window empty: torch's value is -inf and its index points past the input
    (its backward would write there); ours receive no gradient."""
    x = _input(6, shape)
    t = numbagrad.tensor(x, requires_grad=True)
    out = getattr(NF, name)(t, *args)
    expected = getattr(torch.nn.functional, name)(torch.tensor(x), *args)
    np.testing.assert_array_equal(out.detach().numpy(), expected.numpy())
    out.sum().backward()
    assert np.isinf(out.detach().numpy()).any()
    assert t.grad.sum().item() == np.isfinite(out.detach().numpy()).sum()


@pytest.mark.parametrize("shape,args", [((2, 1, 4), (1, 3, 1, 1)), ((1, 1), (2, 2, 0, 2))], ids=str)
def test_max_pool1d_with_indices_checks_as_the_2d_pool_like_torch(torch, shape, args):
    x = np.zeros(shape)
    with pytest.raises(RuntimeError) as theirs:
        torch.nn.functional.max_pool1d(torch.tensor(x), *args, return_indices=True)
    with pytest.raises(RuntimeError) as ours:
        NF.max_pool1d(numbagrad.tensor(x), *args, return_indices=True)
    assert str(ours.value) == str(theirs.value)
