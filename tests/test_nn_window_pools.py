"""``adaptive_max_pool3d`` and ``fractional_max_pool2d/3d`` against torch: values, int64 indices (ties and NaNs
picked as torch's kernels pick), gradients, node names, the same windows as torch's from the same
``_random_samples`` in every float dtype, their modules, gradcheck, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF


def _input(seed: int, shape, ties: bool = False, dtype: str = "float64"):
    x = np.random.default_rng(seed).standard_normal(shape)
    return (np.round(x * 2) if ties else x).astype(dtype)  # few distinct values: equal maxima in most windows


def _samples(seed: int, shape, dtype: str = "float64"):
    return np.random.default_rng(seed + 100).random(shape).astype(dtype)


def _run(lib, fn, x, *extra):
    t = lib.tensor(x, requires_grad=True)
    values, indices = fn(lib, t, *(lib.tensor(e) for e in extra))
    values.backward(lib.tensor(np.random.default_rng(99).standard_normal(tuple(values.shape)).astype(x.dtype)))
    return values, indices, t.grad.numpy()


def _same_as_torch(torch, fn, x, *extra):
    ours, our_idx, our_grad = _run(numbagrad, fn, x, *extra)
    theirs, their_idx, their_grad = _run(torch, fn, x, *extra)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    np.testing.assert_array_equal(our_idx.numpy(), their_idx.numpy())
    tol = 2e-3 if x.dtype == np.float16 else 1e-6  # overlapping windows sum their gradients in another order
    np.testing.assert_allclose(our_grad, their_grad, rtol=tol, atol=tol)
    assert our_idx.dtype.name == "int64" and ours.dtype.name == theirs.dtype.__str__().split(".")[1]
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__


ADAPTIVE = [((2, 2, 5, 7, 6), (3, 4, 2)), ((2, 5, 7, 6), (2, None, 4)), ((1, 2, 3, 2, 4), 5), ((1, 1, 4, 4, 4), 1)]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("shape,size", ADAPTIVE, ids=str)
def test_adaptive_max_pool3d_matches_torch(torch, shape, size, ties):
    fn = lambda lib, t: lib.nn.functional.adaptive_max_pool3d(t, size, return_indices=True)  # noqa: E731
    _same_as_torch(torch, fn, _input(0, shape, ties))


def test_adaptive_max_pool3d_picks_the_last_nan_like_torch(torch):
    x = _input(1, (1, 2, 5, 6, 6))
    x[np.random.default_rng(5).random(x.shape) < 0.2] = np.nan
    fn = lambda lib, t: lib.nn.functional.adaptive_max_pool3d_with_indices(t, (3, 4, 2))  # noqa: E731
    _same_as_torch(torch, fn, x)


FRACTIONAL_2D = [((2, 3, 11, 13), (2, 3), (5, 4)), ((3, 50, 32), 3, (13, 12)), ((1, 2, 9, 9), 2, (8, 8))]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("shape,kernel,size", FRACTIONAL_2D, ids=str)
def test_fractional_max_pool2d_with_the_same_samples_matches_torch(torch, shape, kernel, size, dtype):
    batch = shape[0] if len(shape) == 4 else 1
    samples = _samples(0, (batch, shape[-3], 2), dtype)

    def fn(lib, t, s):
        return lib.nn.functional.fractional_max_pool2d(t, kernel, size, return_indices=True, _random_samples=s)

    _same_as_torch(torch, fn, _input(0, shape, dtype=dtype), samples)


FRACTIONAL_3D = [((2, 2, 9, 11, 13), (2, 3, 2), (5, 4, 6)), ((2, 7, 6, 9), 2, (3, 4, 5)), ((1, 1, 5, 5, 5), 1, 4)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape,kernel,size", FRACTIONAL_3D, ids=str)
def test_fractional_max_pool3d_with_the_same_samples_matches_torch(torch, shape, kernel, size, dtype):
    batch = shape[0] if len(shape) == 5 else 1
    samples = _samples(1, (batch, shape[-4], 3), dtype)

    def fn(lib, t, s):
        return lib.nn.functional.fractional_max_pool3d_with_indices(t, kernel, size, _random_samples=s)

    _same_as_torch(torch, fn, _input(2, shape, ties=True, dtype=dtype), samples)


def test_fractional_max_pool_output_ratio_gives_torchs_size(torch):
    x = _input(3, (2, 3, 10, 9))
    ours = NF.fractional_max_pool2d(numbagrad.tensor(x), 2, output_ratio=(0.5, 0.7))
    theirs = torch.nn.functional.fractional_max_pool2d(torch.tensor(x), 2, output_ratio=(0.5, 0.7))
    assert tuple(ours.shape) == tuple(theirs.shape) == (2, 3, 5, 6)
    ours3 = NF.fractional_max_pool3d(numbagrad.tensor(x), 2, output_ratio=0.5)
    assert tuple(ours3.shape) == tuple(
        torch.nn.functional.fractional_max_pool3d(torch.tensor(x), 2, output_ratio=0.5).shape
    )


def test_fractional_max_pool_draws_its_samples_from_numbagrads_generator():
    x = numbagrad.tensor(_input(4, (2, 3, 12, 12)))
    numbagrad.manual_seed(7)
    first = NF.fractional_max_pool2d(x, 2, output_size=5, return_indices=True)[1]
    numbagrad.manual_seed(7)
    again = NF.fractional_max_pool2d(x, 2, output_size=5, return_indices=True)[1]
    numbagrad.manual_seed(7)
    samples = numbagrad.rand(2, 3, 2, dtype=x.dtype)
    given = NF.fractional_max_pool2d(x, 2, output_size=5, return_indices=True, _random_samples=samples)[1]
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    np.testing.assert_array_equal(first.numpy(), given.numpy())


S2_GRAD, S3_GRAD = _samples(5, (2, 4, 2)), _samples(5, (1, 2, 3))
GRAD_CASES = {
    "adaptive3d": lambda t: NF.adaptive_max_pool3d(t, (2, 3, 2)),
    "fractional2d": lambda t: NF.fractional_max_pool2d(t[0], 2, (3, 4), _random_samples=numbagrad.tensor(S2_GRAD)),
    "fractional3d": lambda t: NF.fractional_max_pool3d(t, 2, (2, 3, 3), _random_samples=numbagrad.tensor(S3_GRAD)),
}


@pytest.mark.parametrize("case", GRAD_CASES)
def test_window_pools_pass_gradcheck_and_gradgradcheck(case):
    fn = GRAD_CASES[case]
    x = numbagrad.tensor(_input(5, (1, 2, 4, 5, 6)), requires_grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(lambda t: fn(t) ** 2, (x,))


MODULES = [
    ("AdaptiveMaxPool3d", ((2, None, 3),), {"return_indices": True}, (1, 2, 3, 4, 5)),
    ("FractionalMaxPool2d", (2,), {"output_size": (3, 4), "return_indices": True}, (2, 2, 6, 7)),
    ("FractionalMaxPool3d", ((2, 1, 2),), {"output_ratio": 0.5, "return_indices": True}, (2, 2, 6, 6, 7)),
]


@pytest.mark.parametrize("name,args,kw,shape", MODULES, ids=str)
def test_window_pool_modules_match_torch(torch, name, args, kw, shape):
    """Same constructor, torch's state_dict (the fixed ``_random_samples`` buffer of the fractional pools) loaded."""
    extra = {}
    if name.startswith("Fractional"):
        extra = {"_random_samples": _samples(6, (shape[0], shape[1], int(name[-2])))}
    theirs_module = getattr(torch.nn, name)(*args, **kw, **{k: torch.tensor(v) for k, v in extra.items()})
    ours_module = getattr(nn, name)(
        *args, **kw, **{k: numbagrad.zeros(v.shape, dtype=numbagrad.float64) for k, v in extra.items()}
    )
    state = {k: numbagrad.tensor(v.numpy()) for k, v in theirs_module.state_dict().items()}
    ours_module.load_state_dict(state)
    assert repr(ours_module) == repr(theirs_module)
    modules = {numbagrad: ours_module, torch: theirs_module}
    _same_as_torch(torch, lambda lib, t: modules[lib](t), _input(7, shape))


def test_window_pool_modules_load_from_torchs_module_path():
    from numbagrad.nn.modules.pooling import AdaptiveMaxPool3d, FractionalMaxPool2d, FractionalMaxPool3d

    assert (AdaptiveMaxPool3d, FractionalMaxPool2d, FractionalMaxPool3d) == (
        nn.AdaptiveMaxPool3d,
        nn.FractionalMaxPool2d,
        nn.FractionalMaxPool3d,
    )


S2 = np.zeros((1, 1, 2))
ERRORS = [
    ("adaptive_max_pool3d", (2, 3, 4), (2,), {}),
    ("adaptive_max_pool3d", (1, 1, 3, 4, 5), ((2, 2),), {}),
    ("adaptive_max_pool3d", (1, 0, 3, 4, 5), (2,), {}),
    ("fractional_max_pool2d", (7, 9), (2, (4, 5)), {"_random_samples": S2}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (5, (4, 5)), {"_random_samples": S2}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (2, (4, 9)), {"_random_samples": S2}),
    ("fractional_max_pool2d", (3, 1, 7, 9), (2, (4, 5)), {"_random_samples": S2}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (2, (4, 5)), {"_random_samples": np.zeros((1, 2))}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (2, (4, 5)), {"_random_samples": np.zeros((1, 3, 2))}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (2, (4, 5)), {"_random_samples": np.zeros((1, 1, 3))}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (2, (4, 5)), {"_random_samples": S2.astype(np.float32)}),
    ("fractional_max_pool2d", (1, 1, 7, 9), ((2, 2, 2), (4, 5)), {}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (2,), {}),
    ("fractional_max_pool2d", (1, 1, 7, 9), (2,), {"output_ratio": (0.5, 0.5, 0.5)}),
    ("fractional_max_pool2d", (1, 0, 7, 9), (2, (4, 5)), {}),
    ("fractional_max_pool3d", (1, 1, 5, 6, 7), (5, (3, 4, 5)), {}),
    ("fractional_max_pool3d", (1, 1, 5, 6, 7), (2, (3, 4, 9)), {}),
    ("fractional_max_pool3d", (1, 1, 5, 5, 5), (1, 5), {}),
    ("fractional_max_pool3d", (1, 1, 5, 6, 7), ((2, 2), (3, 4, 5)), {}),
    ("fractional_max_pool3d", (1, 1, 5, 6, 7), (2, (3, 4)), {}),
    ("fractional_max_pool3d", (1, 0, 5, 6, 7), (2, (3, 4, 5)), {}),
    ("fractional_max_pool3d", (1, 1, 5, 6, 7), (2, (3, 4, 5)), {"_random_samples": S2}),
]


@pytest.mark.parametrize("name,shape,args,kw", ERRORS, ids=str)
def test_window_pool_errors_match_torch(torch, name, shape, args, kw):
    x = np.zeros(shape)
    with pytest.raises(Exception) as theirs:
        getattr(torch.nn.functional, name)(torch.tensor(x), *args, **{k: torch.tensor(v) for k, v in kw.items()})
    with pytest.raises(type(theirs.value)) as ours:
        getattr(NF, name)(numbagrad.tensor(x), *args, **{k: numbagrad.tensor(v) for k, v in kw.items()})
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "name,args,kw",
    [
        ("FractionalMaxPool2d", (2,), {}),
        ("FractionalMaxPool2d", (2,), {"output_size": 3, "output_ratio": 0.5}),
        ("FractionalMaxPool2d", (2,), {"output_ratio": 1.5}),
        ("FractionalMaxPool3d", (0,), {"output_size": 3}),
        ("FractionalMaxPool3d", (2,), {"output_ratio": (0.5, 0.5, 1.0)}),
    ],
    ids=str,
)
def test_fractional_module_constructor_errors_match_torch(torch, name, args, kw):
    with pytest.raises(ValueError) as theirs:
        getattr(torch.nn, name)(*args, **kw)
    with pytest.raises(ValueError) as ours:
        getattr(nn, name)(*args, **kw)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "fn",
    [lambda F, x: F.adaptive_max_pool3d(x.unsqueeze(-1), (2, 2, 1)), lambda F, x: F.fractional_max_pool2d(x, 2, 3)],
    ids=["adaptive3d", "fractional2d"],
)
def test_window_pools_of_an_empty_batch_are_empty_like_torch(torch, fn):
    ours = fn(NF, numbagrad.zeros(0, 2, 6, 6))
    theirs = fn(torch.nn.functional, torch.zeros(0, 2, 6, 6))
    assert tuple(ours.shape) == tuple(theirs.shape)
