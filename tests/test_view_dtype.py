"""``Tensor.view(dtype)`` reads the same memory as another dtype, as torch does: the bits reinterpreted (the last dim
scaled between element sizes), writes shared both ways, no gradient, and torch's errors for geometries that cannot
be read so."""

import numpy as np
import pytest

import numbagrad


def _outcome(lib, program):
    try:
        result = program(lib)
    except Exception as e:  # noqa: BLE001 - the exception type and message are what is compared
        return type(e).__name__, str(e)
    return str(result.dtype).split(".")[-1], tuple(result.shape), result.stride(), result.tolist()


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.tensor([1.0, -2.0]).view(m.int32),
        lambda m: m.tensor([1065353216], dtype=m.int32).view(m.float32),
        lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64).view(m.int32),
        lambda m: m.tensor([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=m.int16).view(m.int64),
        lambda m: m.tensor([1, 0, 2], dtype=m.uint8).view(m.bool),
        lambda m: m.tensor([1.5, 2.0], dtype=m.float16).view(m.int16),
        lambda m: m.tensor(1.0).view(m.int32),
        lambda m: m.arange(8, dtype=m.int16)[2:6].view(m.int32),
        lambda m: m.arange(12, dtype=m.int32).reshape(3, 4)[::2].view(m.int16),
    ],
)
def test_view_as_another_dtype_reads_the_same_bits_as_torch(torch, program):
    assert _outcome(numbagrad, program) == _outcome(torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.tensor(1.0).view(m.int16),
        lambda m: m.arange(6, dtype=m.int32).reshape(2, 3).t().view(m.int16),
        lambda m: m.arange(3, dtype=m.int16).view(m.int32),
        lambda m: m.arange(6, dtype=m.int16)[1:5].view(m.int32),
        lambda m: (
            m.arange(12, dtype=m.int16).reshape(3, 4)[:, :2].contiguous().as_strided((2, 2), (3, 1)).view(m.int32)
        ),
    ],
)
def test_view_as_another_dtype_refuses_what_torch_refuses(torch, program):
    assert _outcome(numbagrad, program) == _outcome(torch, program)


def test_writes_through_a_dtype_view_reach_the_tensor_and_back():
    x = numbagrad.tensor([1.0, 2.0])
    v = x.view(numbagrad.int32)
    version = x._version
    v.fill_(0)
    assert x.tolist() == [0.0, 0.0]
    assert x._version == version + 1
    x[1] = 1.0
    assert v.tolist() == [0, 1065353216]


def test_a_dtype_view_carries_no_gradient_and_leaves_the_base_history(torch):
    for lib in (numbagrad, torch):
        y = lib.tensor([1.0, 2.0], requires_grad=True) * 1
        v = y.view(lib.int16)
        assert not v.requires_grad and v.grad_fn is None
        v.fill_(0)
        assert type(y.grad_fn).__name__ == "MulBackward0"
        assert np.array_equal(y.detach().numpy(), [0.0, 0.0])
