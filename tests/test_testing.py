"""numbagrad.testing against torch.testing: the same inputs pass or raise the same error with the same message."""

import math
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.testing import assert_allclose, assert_close, make_tensor


def _raised(fn, *args, **kwargs):
    """The exception ``fn`` raises, as (type, message with torch's module name spelt as numbagrad's)."""
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return type(info.value), str(info.value).replace("torch.", "numbagrad.")


def _both(torch, make):
    """``make(module)`` built once from numbagrad and once from torch."""
    return make(numbagrad), make(torch)


CASES = {
    "float32 values": lambda m: (m.tensor([1.0, 2.0, 3.0]), m.tensor([1.0, 4.0, 5.0])),
    "float64 2d": lambda m: (
        m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64),
        m.tensor([[1.0, 2.5], [3.0, 0.0]], dtype=m.float64),
    ),
    "int64": lambda m: (m.tensor([1, 2, 3]), m.tensor([1, 5, 4])),
    "0-d": lambda m: (m.tensor(1.5), m.tensor(1.0)),
    "nan": lambda m: (m.tensor([float("nan"), 1.0]), m.tensor([float("nan"), 1.0])),
    "inf": lambda m: (m.tensor([float("inf"), 1.0]), m.tensor([-float("inf"), 1.0])),
    "shape": lambda m: (m.zeros(2), m.zeros(3)),
    "dtype": lambda m: (m.zeros(2), m.zeros(2, dtype=m.float64)),
    "float16": lambda m: (m.tensor([1.0, 2.0], dtype=m.float16), m.tensor([1.0, 2.01], dtype=m.float16)),
    "bool": lambda m: (m.tensor([True, False]), m.tensor([True, True])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_mismatch_message_is_torchs(torch, name):
    (a, e), (ta, te) = _both(torch, CASES[name])
    assert _raised(assert_close, a, e) == _raised(torch.testing.assert_close, ta, te)


@pytest.mark.parametrize(
    "actual, expected",
    [
        (1.0, 1.1),
        (1, 2),
        (0.0, 1e-3),
        (1.0, 0.0),
        ([1.0, 2.0], [1.0, 2.5]),
        ([1.0, 2.0], [1.0]),
        ({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 3.0}),
        ({"a": 1.0}, {"b": 1.0}),
        (None, 1.0),
        (True, False),
        (1.0, 1),
        ((1, [2.0, 3.0]), (1, [2.0, 3.5])),
    ],
)
def test_python_values_match_torch(torch, actual, expected):
    assert _raised(assert_close, actual, expected) == _raised(torch.testing.assert_close, actual, expected)


def test_equal_inputs_pass():
    x = numbagrad.tensor([1.0, 2.0])
    assert_close(x, x.clone())
    assert_close([x, 1.0], [x.clone(), 1.0])
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0]))


def test_default_float32_tolerance_accepts_close_values():
    x = numbagrad.tensor([100.0])
    assert_close(x + 1e-4, x)  # within rtol 1.3e-6 * 100 + atol 1e-5
    with pytest.raises(AssertionError):
        assert_close(x + 1e-3, x)


def test_equal_nan(torch):
    nan = numbagrad.tensor([float("nan")])
    assert_close(nan, nan.clone(), equal_nan=True)
    assert _raised(assert_close, nan, nan.clone()) == _raised(
        torch.testing.assert_close, torch.tensor([math.nan]), torch.tensor([math.nan])
    )


def test_explicit_tolerances_and_check_dtype_false(torch):
    (a, e), (ta, te) = _both(torch, lambda m: (m.tensor([1.0, 2.0]), m.tensor([1.0, 2.1], dtype=m.float64)))
    assert_close(a, e, rtol=0.1, atol=0.0, check_dtype=False)
    got = _raised(assert_close, a, e, rtol=0.01, atol=0.0, check_dtype=False)
    assert got == _raised(torch.testing.assert_close, ta, te, rtol=0.01, atol=0.0, check_dtype=False)


def test_only_one_tolerance_is_an_error(torch):
    x, tx = numbagrad.zeros(1), torch.zeros(1)
    assert _raised(assert_close, x, x, rtol=0.1) == _raised(torch.testing.assert_close, tx, tx, rtol=0.1)


def test_msg_replaces_or_wraps_the_report(torch):
    (a, e), (ta, te) = _both(torch, CASES["float32 values"])
    assert _raised(assert_close, a, e, msg="Argh") == (AssertionError, "Argh")
    wrap = lambda m: f"Header\n\n{m}\n\nFooter"  # noqa: E731
    assert _raised(assert_close, a, e, msg=wrap) == _raised(torch.testing.assert_close, ta, te, msg=wrap)


def test_tensor_against_number_is_a_type_error():
    kind, text = _raised(assert_close, numbagrad.tensor(1.0), 1.0)
    assert kind is TypeError
    assert text.startswith("No comparison pair was able to handle inputs of type")


def test_numpy_arrays_compare_like_torch(torch):
    a, e = np.array([1.0, 2.0]), np.array([1.0, 3.0])
    assert _raised(assert_close, a, e) == _raised(torch.testing.assert_close, a, e)


def test_assert_allclose_warns_and_uses_looser_tolerances(torch):
    with pytest.warns(FutureWarning):
        assert_allclose(numbagrad.tensor([1.0]), [1.00005])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _raised(assert_allclose, numbagrad.tensor([1.0, 2.0]), [1.0, 2.1])
        assert got == _raised(torch.testing.assert_allclose, torch.tensor([1.0, 2.0]), [1.0, 2.1])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool"])
def test_make_tensor_shape_dtype_and_range(dtype):
    d = getattr(numbagrad, dtype)
    t = make_tensor(3, 4, dtype=d, device="cpu")
    assert t.shape == (3, 4) and t.dtype == d
    low, high = {"uint8": (0, 10), "bool": (0, 2)}.get(
        dtype, (-9, 10 if d in (numbagrad.int64, numbagrad.int32) else 9)
    )
    values = t.numpy().astype(np.float64)
    assert values.min() >= low and values.max() < high


def test_make_tensor_options():
    t = make_tensor((2, 3), dtype=numbagrad.float64, device="cpu", low=0.5, high=1.0, requires_grad=True)
    assert t.requires_grad and float(t.min()) >= 0.5 and float(t.max()) < 1.0
    n = make_tensor(2, 3, dtype=numbagrad.float32, device="cpu", noncontiguous=True)
    assert n.shape == (2, 3) and not n.is_contiguous()
    z = make_tensor(50, dtype=numbagrad.int64, device="cpu", low=-1, high=1, exclude_zero=True)
    assert not bool((z == 0).any())


def test_make_tensor_errors_match_torch(torch):
    for kwargs in (
        dict(low=2, high=1),
        dict(low=float("nan")),
        dict(requires_grad=True),
        dict(noncontiguous=True, memory_format="x"),
    ):
        ours = _raised(make_tensor, 2, dtype=numbagrad.int64, device="cpu", **kwargs)
        theirs = _raised(torch.testing.make_tensor, 2, dtype=torch.int64, device="cpu", **kwargs)
        assert ours == theirs, kwargs
