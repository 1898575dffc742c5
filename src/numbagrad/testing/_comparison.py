"""``assert_close``: torch.testing's comparison of tensors, numbers, ``None``, bools, sequences and mappings.

The inputs are walked into pairs first (sequences by index, mappings by key); each pair is then compared and the
first mismatch raises, with torch's message and the item path (``The failure occurred for item [1]``).
"""

from __future__ import annotations

import cmath
import collections.abc
import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .._tensor import Tensor
from .._types import (
    bfloat16,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    from_numpy_dtype,
    get_default_dtype,
    int64,
    promote_types,
)
from .._types import dtype as _dtype
from ..ops.creation import as_tensor, tensor

#: {dtype: (rtol, atol)}: torch's default tolerances; other dtypes compare exactly.
_DTYPE_PRECISIONS = {float16: (0.001, 1e-5), bfloat16: (0.016, 1e-5), float32: (1.3e-6, 1e-5), float64: (1e-7, 1e-7),
                     complex64: (1.3e-6, 1e-5), complex128: (1e-7, 1e-7)}  # fmt: skip
_NUMBER_DTYPES = {int: int64, float: float64}


class _Mismatch(Exception):
    """A comparison failure: the exception type to raise, its message and the item path where it happened."""

    def __init__(self, kind: type[Exception], msg: str, id: tuple = ()) -> None:
        super().__init__(msg)
        self.kind, self.msg, self.id = kind, msg, id

    def to_error(self, msg: str | Callable[[str], str] | None = None) -> Exception:
        if not isinstance(msg, str):
            generated = self.msg
            if self.id:
                generated += f"\n\nThe failure occurred for item {''.join(str([item]) for item in self.id)}"
            msg = msg(generated) if callable(msg) else generated
        return self.kind(msg)


class _Unsupported(Exception):
    """Raised while pairing inputs when a pair kind cannot handle them; the next kind is tried."""


def _default_tolerances(*dtypes: _dtype, precisions: dict | None = None) -> tuple[float, float]:
    table = precisions or _DTYPE_PRECISIONS
    rtols, atols = zip(*[table.get(d, (0.0, 0.0)) for d in dtypes], strict=True)
    return max(rtols), max(atols)


def _tolerances(*dtypes: _dtype, rtol: float | None, atol: float | None, id: tuple) -> tuple[float, float]:
    """Both tolerances given, or torch's defaults for the loosest dtype: one alone would surprise."""
    if (rtol is None) ^ (atol is None):
        raise _Mismatch(
            ValueError,
            f"Both 'rtol' and 'atol' must be either specified or omitted, "
            f"but got no {'rtol' if rtol is None else 'atol'}.",
            id,
        )
    if rtol is not None and atol is not None:
        return rtol, atol
    return _default_tolerances(*dtypes)


def _mismatch_msg(
    default_identifier: str, identifier, extra: str, abs_diff, abs_idx, atol: float, rel_diff, rel_idx, rtol: float
) -> str:
    equality = rtol == 0 and atol == 0

    def diff_line(kind: str, diff, idx, tol: float) -> str:
        line = (
            f"{kind.title()} difference: {diff}"
            if idx is None
            else f"Greatest {kind} difference: {diff} at index {idx}"
        )
        return line + ("" if equality else f" (up to {tol} allowed)") + "\n"

    if identifier is None:
        identifier = default_identifier
    elif callable(identifier):
        identifier = identifier(default_identifier)
    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += f"{extra.strip()}\n"
    msg += diff_line("absolute", abs_diff, abs_idx, atol)
    msg += diff_line("relative", rel_diff, rel_idx, rtol)
    return msg.strip()


def _scalar_mismatch_msg(actual, expected, rtol: float, atol: float, identifier=None) -> str:
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _mismatch_msg(
        "Scalars", identifier, f"Expected {expected} but got {actual}.", abs_diff, None, atol, rel_diff, None, rtol
    )


def _isclose(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """torch.isclose on numpy data: equal, or a finite difference within ``atol + rtol * |b|`` in the data's dtype."""
    close = a == b
    if equal_nan and a.dtype.kind in "fcV":
        close |= np.isnan(a) & np.isnan(b)
    if a.dtype.kind in "fcV" and (rtol != 0 or atol != 0):
        with np.errstate(all="ignore"):
            error = np.abs(a - b)
            allowed = (atol + np.abs(rtol * b)).astype(a.dtype)
            close |= np.isfinite(error) & (error <= allowed)
    elif rtol != 0 or atol != 0:
        with np.errstate(all="ignore"):
            close |= np.abs(a.astype(np.float64) - b) <= atol + rtol * np.abs(b.astype(np.float64))
    return close


def _tensor_mismatch_msg(actual: np.ndarray, expected: np.ndarray, matches: np.ndarray, rtol: float, atol: float):
    """The "Tensor-likes are not close!" report: mismatch count, and the greatest absolute and relative
    differences among the mismatched elements with their indices, computed in the data's dtype as torch does
    (integers in int64, their relative difference in the default float dtype)."""
    total = matches.size - int(matches.sum())
    extra = f"Mismatched elements: {total} / {matches.size} ({total / matches.size:.1%})"
    a, e, m = actual.reshape(-1), expected.reshape(-1), matches.reshape(-1)
    floating = a.dtype.kind in "fVc"
    if not floating:
        a, e = a.astype(np.int64), e.astype(np.int64)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(a - e)
        abs_diff[m] = 0
        if floating:
            rel_diff = abs_diff / np.abs(e)
        else:
            real = get_default_dtype().numpy
            rel_diff = abs_diff.astype(real) / np.abs(e).astype(real)
    rel_diff[m] = 0

    def unravel(flat: int) -> tuple:
        return tuple(int(i) for i in np.unravel_index(flat, matches.shape)) if matches.shape else ()

    abs_idx, rel_idx = _argmax(abs_diff), _argmax(rel_diff)
    return _mismatch_msg(
        "Tensor-likes",
        None,
        extra,
        abs_diff[abs_idx].item(),
        unravel(abs_idx),
        atol,
        rel_diff[rel_idx].item(),
        unravel(rel_idx),
        rtol,
    )


def _argmax(values: np.ndarray) -> int:
    """torch.max's index: the first NaN if there is one, else the first greatest value."""
    if values.dtype.kind in "fV":
        nans = np.flatnonzero(np.isnan(values))
        if nans.size:
            return int(nans[0])
    return int(np.argmax(values))


class _Pair:
    """Two inputs to compare; ``compare`` raises a ``_Mismatch``."""

    def __init__(self, actual: Any, expected: Any, id: tuple) -> None:
        self.actual, self.expected, self.id = actual, expected, id

    def _fail(self, kind: type[Exception], msg: str):
        raise _Mismatch(kind, msg, self.id)


class _NonePair(_Pair):
    def __init__(self, actual: Any, expected: Any, id: tuple, **options: Any) -> None:
        if not (actual is None or expected is None):
            raise _Unsupported
        super().__init__(actual, expected, id)

    def compare(self) -> None:
        if not (self.actual is None and self.expected is None):
            self._fail(AssertionError, f"None mismatch: {self.actual} is not {self.expected}")


class _BooleanPair(_Pair):
    def __init__(self, actual: Any, expected: Any, id: tuple, **options: Any) -> None:
        if not all(isinstance(x, bool | np.bool_) for x in (actual, expected)):
            raise _Unsupported
        super().__init__(bool(actual), bool(expected), id)

    def compare(self) -> None:
        if self.actual is not self.expected:
            self._fail(AssertionError, f"Booleans mismatch: {self.actual} is not {self.expected}")


class _NumberPair(_Pair):
    def __init__(
        self,
        actual: Any,
        expected: Any,
        id: tuple,
        rtol: float | None = None,
        atol: float | None = None,
        equal_nan: bool = False,
        check_dtype: bool = False,
        **options: Any,
    ) -> None:
        kinds = (int, float, complex, np.number)
        if not all(isinstance(x, kinds) for x in (actual, expected)):
            raise _Unsupported
        actual, expected = (x.item() if isinstance(x, np.number) else x for x in (actual, expected))
        if any(isinstance(x, complex) for x in (actual, expected)):
            raise _Mismatch(TypeError, "numbagrad has no complex dtype to compare complex numbers in.", id)
        super().__init__(actual, expected, id)
        self.rtol, self.atol = _tolerances(
            *[_NUMBER_DTYPES[type(x)] for x in (actual, expected)], rtol=rtol, atol=atol, id=id
        )
        self.equal_nan = equal_nan
        self.check_dtype = check_dtype

    def compare(self) -> None:
        if self.check_dtype and type(self.actual) is not type(self.expected):
            self._fail(AssertionError, f"The (d)types do not match: {type(self.actual)} != {type(self.expected)}.")
        if self.actual == self.expected:
            return
        if self.equal_nan and cmath.isnan(self.actual) and cmath.isnan(self.expected):
            return
        abs_diff = abs(self.actual - self.expected)
        if cmath.isfinite(abs_diff) and abs_diff <= self.atol + self.rtol * abs(self.expected):
            return
        self._fail(AssertionError, _scalar_mismatch_msg(self.actual, self.expected, self.rtol, self.atol))


class _TensorLikePair(_Pair):
    """Tensors, or two inputs of a related type that ``as_tensor`` takes (numpy arrays)."""

    def __init__(
        self,
        actual: Any,
        expected: Any,
        id: tuple,
        allow_subclasses: bool = True,
        rtol: float | None = None,
        atol: float | None = None,
        equal_nan: bool = False,
        check_device: bool = True,
        check_dtype: bool = True,
        check_layout: bool = True,
        check_stride: bool = False,
        **options: Any,
    ) -> None:
        if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
            raise _Unsupported
        if not allow_subclasses and type(actual) is not type(expected):
            raise _Unsupported
        actual, expected = (self._to_tensor(x) for x in (actual, expected))
        super().__init__(actual, expected, id)
        self.rtol, self.atol = _tolerances(actual.dtype, expected.dtype, rtol=rtol, atol=atol, id=id)
        self.equal_nan = equal_nan
        self.check_device = check_device
        self.check_dtype = check_dtype
        self.check_stride = check_stride

    @staticmethod
    def _to_tensor(tensor_like: Any) -> Tensor:
        if isinstance(tensor_like, Tensor):
            return tensor_like
        try:
            return as_tensor(tensor_like)
        except Exception:
            raise _Unsupported from None

    def _attribute_mismatch(self, name: str, actual: Any, expected: Any):
        self._fail(AssertionError, f"The values for attribute '{name}' do not match: {actual} != {expected}.")

    def compare(self) -> None:
        actual, expected = self.actual, self.expected
        if actual.shape != expected.shape:
            self._attribute_mismatch("shape", actual.shape, expected.shape)
        if self.check_stride and actual.stride() != expected.stride():
            self._attribute_mismatch("stride()", actual.stride(), expected.stride())
        if self.check_device and actual.device != expected.device:
            self._attribute_mismatch("device", actual.device, expected.device)
        if self.check_dtype and actual.dtype != expected.dtype:
            self._attribute_mismatch("dtype", actual.dtype, expected.dtype)
        a, e = actual.detach().cpu().numpy(), expected.detach().cpu().numpy()
        if a.dtype != e.dtype:
            common = _promote(a.dtype, e.dtype)
            a, e = a.astype(common), e.astype(common)
        matches = _isclose(a, e, self.rtol, self.atol, self.equal_nan)
        if matches.all():
            return
        if a.shape == ():
            self._fail(AssertionError, _scalar_mismatch_msg(a.item(), e.item(), self.rtol, self.atol))
        self._fail(AssertionError, _tensor_mismatch_msg(a, e, matches, self.rtol, self.atol))


def _promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types: a float with an integer or bool is that float (numpy would widen int64 + float32)."""
    if "c" in (a.kind, b.kind):  # (numpy would widen complex64 with int64 to complex128)
        return promote_types(from_numpy_dtype(a), from_numpy_dtype(b)).numpy
    if a.kind in "fV" and b.kind not in "fV":
        return a
    if b.kind in "fV" and a.kind not in "fV":
        return b
    return np.promote_types(a, b)


_PAIR_TYPES = (_NonePair, _BooleanPair, _NumberPair, _TensorLikePair)


def _is_sequence(x: Any) -> bool:
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, str)


def _originate_pairs(actual: Any, expected: Any, id: tuple, options: dict) -> list[_Pair]:
    """Walks nested sequences and mappings in step and makes one pair per leaf."""
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(
                AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", id
            )
        pairs = []
        for idx in range(len(actual)):
            pairs.extend(_originate_pairs(actual[idx], expected[idx], (*id, idx), options))
        return pairs
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise _Mismatch(
                AssertionError,
                f"The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(expected_keys - actual_keys)}\n"
                f"Additional keys in the actual mapping: {sorted(actual_keys - expected_keys)}",
                id,
            )
        keys: Any = actual_keys
        with contextlib.suppress(Exception):
            keys = sorted(keys)
        pairs = []
        for key in keys:
            pairs.extend(_originate_pairs(actual[key], expected[key], (*id, key), options))
        return pairs
    for pair_type in _PAIR_TYPES:
        try:
            return [pair_type(actual, expected, id, **options)]
        except _Unsupported:
            continue
    raise _Mismatch(
        TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.", id
    )


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raises ``AssertionError`` unless ``actual`` and ``expected`` are close: ``|actual - expected| <= atol + rtol *
    |expected|`` elementwise, with torch's default tolerances per dtype (float32: rtol 1.3e-6, atol 1e-5; float64:
    1e-7, 1e-7; float16: 1e-3, 1e-5; others exact), after checking shape, device and dtype. Sequences and mappings
    are compared item by item. ``msg`` replaces the report, or, if callable, receives it."""
    __tracebackhide__ = True
    options = dict(
        allow_subclasses=allow_subclasses,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_device=check_device,
        check_dtype=check_dtype,
        check_layout=check_layout,
        check_stride=check_stride,
    )
    try:
        pairs = _originate_pairs(actual, expected, (), options)
    except _Mismatch as mismatch:
        raise mismatch.to_error() from None
    for pair in pairs:
        try:
            pair.compare()
        except _Mismatch as mismatch:
            raise mismatch.to_error(msg) from None


_ALLCLOSE_PRECISIONS = {float16: (1e-3, 1e-3), float32: (1e-4, 1e-5), float64: (1e-5, 1e-8), complex64: (1e-4, 1e-5),
                        complex128: (1e-5, 1e-8)}  # fmt: skip


def assert_allclose(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    msg: str = "",
) -> None:
    """Deprecated form of ``assert_close`` (looser tolerances, NaNs equal, dtypes not checked); warns as torch's."""
    warnings.warn(
        "`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future release. "
        "Please use `torch.testing.assert_close()` instead. "
        "You can find detailed upgrade instructions in https://github.com/pytorch/pytorch/issues/61844.",
        FutureWarning,
        stacklevel=2,
    )
    if not isinstance(actual, Tensor):
        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        expected = tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = _default_tolerances(actual.dtype, expected.dtype, precisions=_ALLCLOSE_PRECISIONS)
    assert_close(
        actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_device=True,
        check_dtype=False,
        check_stride=False,
        msg=msg or None,
    )
