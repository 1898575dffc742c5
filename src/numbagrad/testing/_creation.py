"""``make_tensor``: a tensor of a given shape, dtype and device with values drawn uniformly from ``[low, high)``,
torch.testing's helper for writing tests."""

from __future__ import annotations

import collections.abc
import math
import warnings

from .._tensor import Tensor
from .._typeinfo import finfo, iinfo
from .._types import bool_, dtype, float16, float32, float64, int64
from ..ops.creation import empty, randint

_FLOATING = (float16, float32, float64)


def make_tensor(
    *shape,
    dtype: dtype,
    device,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format=None,
) -> Tensor:
    """A tensor of ``shape`` filled from ``[low, high)`` (defaults: bool 0..2, unsigned 0..10, signed -9..10,
    floats -9..9), bounds clamped to the dtype's range; ``noncontiguous`` returns every second column of a wider
    tensor, ``exclude_zero`` replaces zeros with 1 (integers) or the dtype's ``tiny``."""

    def modify_low_high(low, high, *, lowest_inclusive, highest_exclusive, default_low, default_high):
        low = low if low is not None else default_low
        high = high if high is not None else default_high
        if any(isinstance(value, float) and math.isnan(value) for value in (low, high)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got {low=} and {high=}")
        elif low == high and dtype in _FLOATING:
            warnings.warn(
                "Passing `low==high` to `torch.testing.make_tensor` for floating or complex types "
                "is deprecated since 2.1 and will be removed in 2.3. "
                "Use `torch.full(...)` instead.",
                FutureWarning,
                stacklevel=3,
            )
        elif low >= high:
            raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
        elif high < lowest_inclusive or low >= highest_exclusive:
            raise ValueError(
                f"The value interval specified by `low` and `high` is [{low}, {high}), "
                f"but {dtype} only supports [{lowest_inclusive}, {highest_exclusive})"
            )
        low = min(max(low, lowest_inclusive), highest_exclusive)
        high = min(max(high, lowest_inclusive), highest_exclusive)
        if dtype not in _FLOATING:
            return math.ceil(low), math.ceil(high)
        return low, high

    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(
            f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, "
            f"but got {noncontiguous=} and {memory_format=}"
        )
    if requires_grad and dtype not in _FLOATING:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, but got {dtype=}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is bool_:
        low, high = modify_low_high(low, high, lowest_inclusive=0, highest_exclusive=2, default_low=0, default_high=2)
        result = randint(low, high, shape, device=device, dtype=dtype)
    elif dtype in _FLOATING:
        info = finfo(dtype)
        low, high = modify_low_high(
            low, high, lowest_inclusive=info.min, highest_exclusive=info.max, default_low=-9, default_high=9
        )
        result = empty(shape, device=device, dtype=dtype)
        if high - low >= info.max:
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    else:
        info = iinfo(dtype)
        low, high = modify_low_high(
            low,
            high,
            lowest_inclusive=info.min,
            highest_exclusive=info.max + (1 if dtype is not int64 else 0),
            default_low=-9,
            default_high=10,
        )
        result = randint(low, high, shape, device=device, dtype=dtype)
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if dtype not in _FLOATING else finfo(dtype).tiny
    if dtype in _FLOATING:
        result.requires_grad = requires_grad
    return result
