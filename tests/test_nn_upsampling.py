"""``F.interpolate`` in every mode, ``nn.Upsample`` and its fixed-mode forms, and the 1-d/3-d adaptive average
pools, against torch (values, input gradients and node names; float64 and float32), gradcheck and
gradgradcheck in float64, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF


def _run(lib, fn, x, dtype):
    t = lib.tensor(x.astype(dtype), requires_grad=True)
    out = fn(lib, t)
    seed = np.random.default_rng(99).standard_normal(tuple(out.shape)).astype(dtype)
    out.backward(lib.tensor(seed))
    return out, t.grad.numpy()


def _same_as_torch(torch, fn, shape, dtype=np.float64, tol=1e-12):
    x = np.random.default_rng(0).standard_normal(shape)
    ours, our_grad = _run(numbagrad, fn, x, dtype)
    theirs, their_grad = _run(torch, fn, x, dtype)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == str(theirs.dtype)[6:]
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(our_grad, their_grad, rtol=tol, atol=tol)
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__


SHAPES = {
    "nearest": [(1, 2, 5), (1, 2, 4, 5), (1, 1, 3, 4, 2)],
    "nearest-exact": [(1, 2, 5), (2, 1, 4, 5), (1, 1, 3, 4, 2)],
    "area": [(1, 2, 7), (1, 2, 6, 7), (1, 1, 4, 5, 3)],
    "linear": [(2, 2, 5)],
    "bilinear": [(1, 2, 4, 5)],
    "bicubic": [(1, 2, 4, 5)],
    "trilinear": [(1, 1, 3, 4, 2)],
}
SIZES = [
    lambda d: {"size": (3,) * d},
    lambda d: {"size": 7},
    lambda d: {"scale_factor": 1.7},
    lambda d: {"scale_factor": (0.6,) * d},
    lambda d: {"scale_factor": 2.3, "recompute_scale_factor": True},
]
CASES = [
    pytest.param(mode, shape, k, ac, id=f"{mode}-{len(shape) - 2}d-size{k}" + ("" if ac is None else f"-ac{ac}"))
    for mode, shapes in SHAPES.items()
    for shape in shapes
    for k in range(len(SIZES))
    for ac in ([None] if mode in ("nearest", "nearest-exact", "area") else [False, True])
]


@pytest.mark.parametrize("mode,shape,k,align_corners", CASES)
def test_interpolate_matches_torch(torch, mode, shape, k, align_corners):
    kw = {**SIZES[k](len(shape) - 2), "mode": mode, "align_corners": align_corners}
    _same_as_torch(torch, lambda lib, x: lib.nn.functional.interpolate(x, **kw), shape)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
@pytest.mark.parametrize("scale", [0.7, 1.3, 3.0])
def test_interpolate_float32_matches_torch(torch, mode, scale):
    """Source positions are computed in torch's float32 arithmetic: the same elements are picked (bicubic's sums
    of four products round differently, within a few float32 ulps of the values)."""
    kw = {"scale_factor": scale, "mode": mode}
    tol = 3e-5 if mode == "bicubic" else 2e-6
    _same_as_torch(torch, lambda lib, x: lib.nn.functional.interpolate(x, **kw), (1, 2, 7, 9), np.float32, tol)


@pytest.mark.parametrize(
    "mode,shape",
    [("linear", (1, 2, 4)), ("bilinear", (1, 1, 3, 3)), ("bicubic", (1, 1, 3, 3)), ("trilinear", (1, 1, 2, 2, 3))],
)
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_gradcheck_and_gradgradcheck(mode, shape, align_corners):
    x = numbagrad.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
    fn = lambda t: NF.interpolate(t, scale_factor=1.5, mode=mode, align_corners=align_corners)  # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(lambda t: fn(t) ** 2, (x,))


@pytest.mark.parametrize(
    "mode,shape", [("nearest", (1, 1, 3, 2)), ("nearest-exact", (1, 2, 3)), ("area", (1, 1, 3, 4, 2))]
)
def test_interpolate_piecewise_modes_gradcheck(mode, shape):
    x = numbagrad.tensor(np.random.default_rng(2).standard_normal(shape), requires_grad=True)
    assert gradcheck(lambda t: NF.interpolate(t, scale_factor=1.6, mode=mode), (x,))


ERRORS = [
    ((1, 2, 3), {"size": 0}),
    ((1, 2, 3), {"scale_factor": 0.2}),
    ((1, 1, 3, 3), {"scale_factor": 0.1, "mode": "bilinear"}),
    ((1, 1, 3, 3, 3), {"size": (0, 1, 1)}),
    ((1, 2, 3), {"size": (2, 2)}),
    ((1, 2, 3), {"scale_factor": (2.0, 2.0)}),
    ((1, 2, 3), {"size": 2, "scale_factor": 2}),
    ((1, 2, 3), {}),
    ((1, 2, 3), {"size": 2, "recompute_scale_factor": True}),
    ((1, 2, 3), {"size": 2, "mode": "bilinear"}),
    ((1, 2, 3, 3), {"size": 2, "mode": "linear"}),
    ((1, 2, 3, 3, 3), {"size": 2, "mode": "bicubic"}),
    ((1, 2, 3), {"size": 2, "align_corners": True}),
    ((1, 2, 3), {"size": 2, "mode": "cubic"}),
    ((1, 2, 3), {"size": 2, "mode": "linear", "antialias": True}),
    ((1, 2, 3, 3), {"size": 2, "mode": "lanczos", "align_corners": True, "antialias": True}),
    ((1, 2, 3, 3), {"size": 2, "mode": "lanczos"}),
]


ANTIALIAS = [
    {"scale_factor": 0.4},
    {"size": (3, 5)},
    {"scale_factor": 1.7},
    {"size": (16, 4)},
    {"scale_factor": (0.3, 2.2), "align_corners": True},
    {"size": (1, 1)},
]


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", ANTIALIAS, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_antialiased_interpolate_matches_torch(torch, mode, kw, dtype):
    kw = {**kw, "mode": mode, "antialias": True}
    tol = 1e-12 if dtype == np.float64 else 3e-6
    _same_as_torch(torch, lambda lib, x: lib.nn.functional.interpolate(x, **kw), (2, 2, 8, 9), dtype, tol)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_interpolate_gradcheck(mode):
    x = numbagrad.tensor(np.random.default_rng(4).standard_normal((1, 1, 5, 4)), requires_grad=True)
    assert gradcheck(lambda t: NF.interpolate(t, size=(2, 3), mode=mode, antialias=True), (x,))


@pytest.mark.parametrize("shape,kw", ERRORS, ids=str)
def test_interpolate_errors_match_torch(torch, shape, kw):
    x = np.zeros(shape)
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.interpolate(torch.tensor(x), **kw)
    with pytest.raises(type(theirs.value)) as ours:
        NF.interpolate(numbagrad.tensor(x), **kw)
    assert str(ours.value) == str(theirs.value)


MODULES = [
    ("Upsample", (), {"scale_factor": 2}, (1, 2, 3, 2)),
    ("Upsample", (), {"size": (4, 5), "mode": "bilinear"}, (1, 2, 3, 2)),
    ("Upsample", (), {"scale_factor": (1.5, 2, 0.5), "mode": "trilinear", "align_corners": True}, (1, 1, 2, 3, 4)),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bicubic", "recompute_scale_factor": True}, (1, 1, 3, 3)),
    ("Upsample", (5,), {"mode": "nearest-exact"}, (2, 2, 3)),
    ("UpsamplingNearest2d", (), {"scale_factor": 3}, (1, 2, 2, 2)),
    ("UpsamplingBilinear2d", ((3, 4),), {}, (1, 2, 2, 2)),
]


@pytest.mark.parametrize("name,args,kw,shape", MODULES, ids=str)
def test_upsampling_modules_match_torch(torch, name, args, kw, shape):
    assert repr(getattr(nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args, **kw))
    _same_as_torch(torch, lambda lib, x: getattr(lib.nn, name)(*args, **kw)(x), shape)


def test_upsample_stores_its_scale_factor_as_torch_does():
    assert nn.Upsample(scale_factor=2).scale_factor == 2.0
    assert nn.Upsample(scale_factor=(2, 3)).scale_factor == (2.0, 3.0)
    assert nn.Upsample(size=3).scale_factor is None


@pytest.mark.parametrize(
    "name,shape,size",
    [
        ("adaptive_avg_pool1d", (2, 3, 7), 3),
        ("adaptive_avg_pool1d", (3, 7), (5,)),
        ("adaptive_avg_pool3d", (1, 2, 5, 4, 7), (2, 3, 4)),
        ("adaptive_avg_pool3d", (2, 5, 4, 3), (None, 2, 5)),
        ("adaptive_avg_pool3d", (1, 2, 5, 4, 7), 1),
    ],
)
def test_adaptive_avg_pools_match_torch(torch, name, shape, size):
    _same_as_torch(torch, lambda lib, x: getattr(lib.nn.functional, name)(x, size), shape)


def test_upsampling_modules_load_from_torchs_module_path():
    from numbagrad.nn.modules.upsampling import Upsample

    assert Upsample is nn.Upsample


def test_upsample_function_warns_and_interpolates(torch):
    x = np.random.default_rng(3).standard_normal((1, 1, 2, 3))
    with pytest.warns(UserWarning) as ours:
        a = NF.upsample(numbagrad.tensor(x), scale_factor=2, mode="bilinear")
    with pytest.warns(UserWarning) as theirs:
        b = torch.nn.functional.upsample(torch.tensor(x), scale_factor=2, mode="bilinear")
    assert str(ours[0].message) == str(theirs[0].message)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


#: Where torch's forward and backward kernels pick differently: a dim that keeps its size under a scale factor
#: (copied by the 2-d nearest and the linear kernels, resampled by the 1-d and 3-d nearest ones, copied by the
#: bicubic backward only), an exact 2x, and float32 ratios.
KERNEL_RULES = [
    ((2, 2, 5), {"scale_factor": 1.01, "mode": "nearest"}),
    ((2, 2, 4, 4), {"scale_factor": (1.16, 2.6), "mode": "nearest"}),
    ((1, 2, 2, 3), {"scale_factor": (2.28, 1.2), "mode": "nearest"}),
    ((2, 1, 6, 6), {"scale_factor": (2.13, 2.21), "mode": "nearest"}),
    ((2, 1, 5, 2, 3), {"scale_factor": (0.39, 3.01, 1.11), "mode": "nearest"}),
    ((1, 2, 2, 1, 1), {"scale_factor": (1.35, 2.18, 1.0), "mode": "trilinear"}),
    ((2, 2, 4, 4), {"scale_factor": (1.16, 1.0), "mode": "bicubic"}),
    ((2, 2, 4, 4), {"scale_factor": 1.1, "mode": "bicubic"}),
]


@pytest.mark.parametrize("shape,kw", KERNEL_RULES, ids=str)
def test_interpolate_follows_torchs_forward_and_backward_kernels(torch, shape, kw):
    _same_as_torch(torch, lambda lib, x: lib.nn.functional.interpolate(x, **kw), shape)
