"""Tests for numbagrad._printing: hand-written expectations plus a character-for-character
comparison against PyTorch's repr (the latter skipped when torch is not installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from numbagrad._printing import format_tensor, get_printoptions, printoptions, set_printoptions


@pytest.fixture(autouse=True)
def restore_options():
    """Every test starts and ends with torch's default print options (ours and torch's)."""
    set_printoptions(profile="default")
    yield
    set_printoptions(profile="default")
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_printoptions(profile="default")


def f(values, dtype_name="float32", **kwargs):
    np_dtype = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32}
    return format_tensor(np.asarray(values, dtype=np_dtype.get(dtype_name, bool)), dtype_name=dtype_name, **kwargs)


# ----------------------------------------------------------------------------- hand-written cases


@pytest.mark.parametrize(
    ("values", "dtype_name", "expected"),
    [
        ([1.0, 4.0, 9.0], "float32", "tensor([1., 4., 9.])"),
        (32.0, "float32", "tensor(32.)"),
        ([7.0, 9.0, 11.0], "float32", "tensor([ 7.,  9., 11.])"),
        ([0.0, 0.0, 1.2601], "float32", "tensor([0.0000, 0.0000, 1.2601])"),
        ([1e-8, 1e10], "float32", "tensor([1.0000e-08, 1.0000e+10])"),
        ([1, 2, 3], "int64", "tensor([1, 2, 3])"),
        ([True, False], "bool", "tensor([ True, False])"),
        (True, "bool", "tensor(True)"),
        ([math.nan, math.inf, -math.inf, 1.5], "float32", "tensor([   nan,    inf,   -inf, 1.5000])"),
        ([0.0, math.nan], "float32", "tensor([0., nan])"),
        ([-0.0, 1.0], "float32", "tensor([-0., 1.])"),
        ([1, 2], "int32", "tensor([1, 2], dtype=numbagrad.int32)"),
        (3, "int32", "tensor(3, dtype=numbagrad.int32)"),
        ([1.0, 2.0], "float64", "tensor([1., 2.], dtype=numbagrad.float64)"),
        (
            [[1.5, -200.25], [3.0, 4.0]],
            "float32",
            "tensor([[   1.5000, -200.2500],\n        [   3.0000,    4.0000]])",
        ),
    ],
)
def test_basic(values, dtype_name, expected):
    assert f(values, dtype_name) == expected


def test_3d_blocks_separated_by_blank_line():
    expected = (
        "tensor([[[ 0.,  1.,  2.,  3.],\n"
        "         [ 4.,  5.,  6.,  7.],\n"
        "         [ 8.,  9., 10., 11.]],\n"
        "\n"
        "        [[12., 13., 14., 15.],\n"
        "         [16., 17., 18., 19.],\n"
        "         [20., 21., 22., 23.]]])"
    )
    assert f(np.arange(24.0).reshape(2, 3, 4)) == expected


def test_summarized_1d_int():
    assert f(np.arange(2000), "int64") == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"


def test_summarized_2d_wraps_and_uses_sci_mode():
    expected = (
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 3.7000e+01, 3.8000e+01,\n"
        "         3.9000e+01],\n"
        "        [4.0000e+01, 4.1000e+01, 4.2000e+01,  ..., 7.7000e+01, 7.8000e+01,\n"
        "         7.9000e+01],\n"
        "        [8.0000e+01, 8.1000e+01, 8.2000e+01,  ..., 1.1700e+02, 1.1800e+02,\n"
        "         1.1900e+02],\n"
        "        ...,\n"
        "        [1.0800e+03, 1.0810e+03, 1.0820e+03,  ..., 1.1170e+03, 1.1180e+03,\n"
        "         1.1190e+03],\n"
        "        [1.1200e+03, 1.1210e+03, 1.1220e+03,  ..., 1.1570e+03, 1.1580e+03,\n"
        "         1.1590e+03],\n"
        "        [1.1600e+03, 1.1610e+03, 1.1620e+03,  ..., 1.1970e+03, 1.1980e+03,\n"
        "         1.1990e+03]])"
    )
    assert f(np.arange(1200.0).reshape(30, 40)) == expected


def test_line_wrapping_at_80():
    expected = (
        "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
        "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
        "        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n"
        "        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])"
    )
    assert f(np.arange(30.0) * 1.5) == expected


def test_empty():
    assert f([]) == "tensor([])"
    assert f(np.empty((2, 0))) == "tensor([], size=(2, 0))"
    # An empty tensor shows its dtype whenever it is not the default float dtype, int64 included.
    assert f([], "int64") == "tensor([], dtype=numbagrad.int64)"
    assert f(np.empty((0, 3)), "bool") == "tensor([], size=(0, 3), dtype=numbagrad.bool)"


def test_suffixes():
    assert f([1.0, 2.0, 3.0], suffixes=["requires_grad=True"]) == "tensor([1., 2., 3.], requires_grad=True)"
    assert f(32.0, suffixes=["grad_fn=<SumProdBackward>"]) == "tensor(32., grad_fn=<SumProdBackward>)"
    assert (
        f([1.0, 2.0], "float64", device_suffix="cuda:0", suffixes=["requires_grad=True"])
        == "tensor([1., 2.], device='cuda:0', dtype=numbagrad.float64, requires_grad=True)"
    )
    assert f([1, 2], "int32", dtype_prefix="torch.") == "tensor([1, 2], dtype=torch.int32)"
    assert f([1.0], "float64", default_dtype_name="float64") == "tensor([1.])"


def test_suffix_wraps_onto_new_line():
    expected = (
        "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
        "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000],\n"
        "       dtype=numbagrad.float64, grad_fn=<MulBackward0>)"
    )
    assert f(np.arange(16.0) * 1.5, "float64", suffixes=["grad_fn=<MulBackward0>"]) == expected


def test_parameter_prefix():
    expected = "Parameter containing:\ntensor([[1., 2.],\n        [3., 4.]], requires_grad=True)"
    got = f([[1.0, 2.0], [3.0, 4.0]], prefix="Parameter containing:\ntensor(", suffixes=["requires_grad=True"])
    assert got == expected


def test_printoptions():
    set_printoptions(precision=2)
    assert f([1.12345]) == "tensor([1.12])"
    set_printoptions(threshold=5)
    assert f(np.arange(10), "int64") == "tensor([0, 1, 2,  ..., 7, 8, 9])"
    set_printoptions(profile="default")
    assert f([1.12345]) == "tensor([1.1235])"
    set_printoptions(sci_mode=True)
    assert f([1.0, 2.5]) == "tensor([1.0000e+00, 2.5000e+00])"
    set_printoptions(sci_mode=False)
    assert f([1e-8, 1e10]) == "tensor([          0.0000, 10000000000.0000])"
    with printoptions(precision=1):
        assert get_printoptions()["precision"] == 1
        assert f([0.25]) == "tensor([0.2])"
    assert get_printoptions()["precision"] == 4
    set_printoptions(edgeitems=0, threshold=5)
    assert f(np.arange(10.0)) == "tensor([...], size=(10,))"
    assert f(np.ones((3, 4))) == "tensor([...], size=(3, 4))"


# ----------------------------------------------------------------------------- comparison with torch


def _dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _ours(a: np.ndarray, t, **kwargs) -> str:
    return format_tensor(a, dtype_name=_dtype_name(t), dtype_prefix="torch.", **kwargs)


def _cases() -> list[np.ndarray]:
    rng = np.random.default_rng(1234)
    shapes = [
        (),
        (1,),
        (5,),
        (3, 4),
        (2, 3, 4),
        (2, 2, 2, 3),
        (2000,),
        (40, 50),
        (11, 13, 17),
        (3, 40),
        (0,),
        (2, 0),
    ]
    out: list[np.ndarray] = []
    for shape in shapes:
        for scale in (1.0, 1e-6, 1e9, 1e-300, 1e30, 123.0):
            for dt in (np.float32, np.float64):
                out.append(np.asarray(rng.normal(size=shape) * scale).astype(dt))
        out.append(np.asarray(rng.integers(-100000, 100, size=shape), dtype=np.int64))
        out.append(np.asarray(rng.integers(-5, 5, size=shape), dtype=np.int32))
        out.append(np.asarray(rng.integers(0, 2, size=shape), dtype=bool))
        out.append(np.asarray(np.round(rng.normal(size=shape) * 100), dtype=np.float32))
        special = np.asarray(rng.normal(size=shape))
        if special.size:
            special.flat[0] = np.nan
            special.flat[-1] = -np.inf
            special.flat[special.size // 2] = -0.0
        out.append(special)
    out.append(np.array([np.nan, np.inf, -np.inf, 0.0], dtype=np.float32))
    out.append(np.array([1e-320, 1e308, -1e308]))
    out.append(np.array([9.99996, -99999.99999, 5e-5]))
    return out


def test_matches_torch(torch):
    for a in _cases():
        t = torch.from_numpy(a)
        assert _ours(a, t) == repr(t), (a.shape, a.dtype)


def test_matches_torch_autograd_suffixes(torch):
    for a in _cases():
        if not np.issubdtype(a.dtype, np.floating):
            continue
        leaf = torch.from_numpy(a.copy()).requires_grad_()
        assert _ours(a, leaf, suffixes=["requires_grad=True"]) == repr(leaf)
        out = leaf * 1.0
        assert _ours(a, out, suffixes=["grad_fn=<MulBackward0>"]) == repr(out)
        param = torch.nn.Parameter(torch.from_numpy(a.copy()))
        got = _ours(a, param, prefix="Parameter containing:\ntensor(", suffixes=["requires_grad=True"])
        assert got == repr(param)


@pytest.mark.parametrize(
    "options",
    [
        {"precision": 2},
        {"sci_mode": False},
        {"sci_mode": True},
        {"precision": 2, "sci_mode": False},
        {"precision": 8},
        {"threshold": 10},
        {"edgeitems": 1, "threshold": 50},
        {"edgeitems": 0, "threshold": 50},
        {"linewidth": 40},
        {"linewidth": 5},
        {"profile": "short"},
        {"profile": "full"},
    ],
)
def test_matches_torch_with_printoptions(torch, options):
    set_printoptions(**options)
    torch.set_printoptions(**options)
    for a in _cases():
        if a.size > 1000 and options.get("profile") == "full":
            continue
        t = torch.from_numpy(a)
        assert _ours(a, t) == repr(t), (options, a.shape, a.dtype)


_float_arrays = st.sampled_from([np.float32, np.float64]).flatmap(
    lambda dt: hnp.arrays(
        dtype=dt,
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
        elements=st.floats(width=32 if dt is np.float32 else 64),
    )
)


@settings(max_examples=150, deadline=None)
@given(
    a=_float_arrays,
    precision=st.sampled_from([None, 1, 4, 6]),
    sci_mode=st.sampled_from([None, True, False]),
    linewidth=st.sampled_from([None, 30, 80]),
)
def test_hypothesis_matches_torch(torch, a, precision, sci_mode, linewidth):
    try:
        set_printoptions(precision=precision, sci_mode=sci_mode, linewidth=linewidth)
        torch.set_printoptions(precision=precision, sci_mode=sci_mode, linewidth=linewidth)
        t = torch.from_numpy(a.copy())
        assert _ours(a, t) == repr(t)
    finally:
        set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
