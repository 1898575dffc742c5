"""A Python number written into a tensor (an index write, ``fill_``, ``full``, ``masked_fill``, clamp's bounds) is
converted as torch converts it: refused when it overflows the dtype (torch's RuntimeError), wrapped when it is the
negative of an unsigned value, and taken as it is by the dtypes torch does not check."""

import numpy as np
import pytest

import numbagrad


def _outcome(lib, program):
    try:
        result = program(lib)
    except Exception as e:  # noqa: BLE001 - the exception type and message are what is compared
        return type(e).__name__, str(e)
    return str(result.dtype).split(".")[-1], result.tolist()


def _set(lib, dtype, value):
    x = lib.zeros(2, dtype=getattr(lib, dtype))
    x[0] = value
    return x


@pytest.mark.parametrize(
    ("dtype", "value"),
    [("int16", 70000), ("int16", -32768), ("int8", 128), ("int8", -129), ("uint8", -1), ("uint8", -255),
     ("uint8", -256), ("uint8", 256), ("int32", 1e10), ("int32", float("nan")), ("int32", 2.7),
     ("float32", 1e300), ("float32", float("inf")), ("float16", 1e300), ("bool", 5)],
)  # fmt: skip
def test_index_write_of_a_number_converts_as_torch(torch, dtype, value):
    assert _outcome(numbagrad, lambda m: _set(m, dtype, value)) == _outcome(torch, lambda m: _set(m, dtype, value))


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.zeros(2, dtype=m.int16).fill_(70000),
        lambda m: m.zeros(2, dtype=m.uint8).fill_(-2),
        lambda m: m.zeros(1, dtype=m.int8).expand(3).fill_(300),
        lambda m: m.full((2,), 300, dtype=m.int8),
        lambda m: m.full((2,), -1, dtype=m.uint8),
        lambda m: m.full((2,), 1e300),
        lambda m: m.zeros(2, dtype=m.int8).masked_fill(m.tensor([True, False]), 300),
        lambda m: m.zeros(2, dtype=m.uint8).masked_fill(m.tensor([True, False]), -3),
        lambda m: m.zeros(2, dtype=m.int8).clamp(max=300),
        lambda m: m.zeros(2, dtype=m.int8).clamp(min=-129),
        lambda m: m.ones(2, dtype=m.int8).clamp(min=-128, max=127),
    ],
)
def test_fills_and_bounds_convert_a_number_as_torch(torch, program):
    assert _outcome(numbagrad, program) == _outcome(torch, program)


def test_a_refused_write_leaves_the_tensor_unchanged():
    x = numbagrad.tensor([1, 2], dtype=numbagrad.int8)
    with pytest.raises(RuntimeError):
        x[0] = 1000
    with pytest.raises(RuntimeError):
        x.fill_(-1000)
    np.testing.assert_array_equal(x.numpy(), [1, 2])
