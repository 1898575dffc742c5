"""DLPack and numpy interop: zero-copy both ways with numpy and torch (each test writes through one side and reads
the other), torch's refusals, and the ctypes DLPack structures numbagrad builds and reads for cuda tensors
(exercised here on CPU memory, where numpy and torch can consume and produce them).

The cuda cases run where numbagrad.cuda.is_available(), e.g. ``NUMBA_ENABLE_CUDASIM=1 pytest -m cuda
tests/test_interop.py``.
"""

import gc
import re

import numpy as np
import pytest

import numbagrad
from numbagrad import _interop


# --- numpy ----------------------------------------------------------------------------------------------------
def test_numpy_from_dlpack_shares_the_tensors_memory():
    t = numbagrad.arange(6.0).reshape(2, 3)
    a = np.from_dlpack(t)
    a[0, 1] = 42.0
    assert t[0, 1].item() == 42.0
    t[1, 2] = -3.0
    assert a[1, 2] == -3.0


def test_numpy_from_dlpack_of_a_view_keeps_its_strides():
    t = numbagrad.arange(12.0, dtype=numbagrad.float64).reshape(3, 4)[:, 1::2]
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, [[1.0, 3.0], [5.0, 7.0], [9.0, 11.0]])
    a[2, 0] = 0.5
    assert t[2, 0].item() == 0.5


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.bool_])
def test_from_dlpack_of_a_numpy_array_shares_memory(dtype):
    a = np.zeros(4, dtype)
    t = numbagrad.from_dlpack(a)
    assert t.dtype.numpy == np.dtype(dtype) and not t.requires_grad
    t[2] = 1
    assert a[2] == 1
    a[0] = 1
    assert t[0].item() == 1


def test_from_dlpack_refuses_numpy_types_numbagrad_cannot_store():
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.uint16"):
        numbagrad.from_dlpack(np.zeros(2, np.uint16))


def test_dlpack_device_of_a_cpu_tensor():
    assert numbagrad.ones(1).__dlpack_device__() == (1, 0)


# --- torch ----------------------------------------------------------------------------------------------------
@pytest.mark.torch
def test_torch_from_dlpack_shares_the_tensors_memory(torch):
    t = numbagrad.arange(6.0).reshape(2, 3).t()
    tt = torch.from_dlpack(t)
    assert tt.shape == (3, 2) and tt.stride() == (1, 3) and tt.dtype == torch.float32
    tt[2, 1] = 100.0
    assert t[2, 1].item() == 100.0
    t[0, 0] = -1.0
    assert tt[0, 0].item() == -1.0


@pytest.mark.torch
def test_from_dlpack_of_a_torch_tensor_shares_memory(torch):
    src = torch.arange(10, dtype=torch.int64)[::3]
    t = numbagrad.from_dlpack(src)
    assert t.dtype == numbagrad.int64 and t.tolist() == [0, 3, 6, 9]
    t[1] = 33
    assert src[1].item() == 33


@pytest.mark.torch
def test_from_dlpack_of_a_legacy_capsule(torch):
    src = torch.ones(3, dtype=torch.float64)
    t = numbagrad.from_dlpack(torch.utils.dlpack.to_dlpack(src))
    t[0] = 5.0
    assert src[0].item() == 5.0


@pytest.mark.torch
def test_dlpack_device_matches_torchs(torch):
    assert numbagrad.ones(1).__dlpack_device__() == tuple(torch.ones(1).__dlpack_device__())


@pytest.mark.torch
def test_export_of_a_tensor_requiring_grad_is_torchs_error(torch):
    with pytest.raises(BufferError) as expected:
        torch.ones(1, requires_grad=True).__dlpack__()
    with pytest.raises(BufferError, match="^" + re.escape(str(expected.value)) + "$"):
        numbagrad.ones(1, requires_grad=True).__dlpack__()


@pytest.mark.torch
def test_a_stream_for_a_cpu_tensor_is_torchs_error(torch):
    with pytest.raises(AssertionError) as expected:
        torch.ones(1).__dlpack__(stream=3)
    with pytest.raises(AssertionError, match="^" + re.escape(str(expected.value)) + "$"):
        numbagrad.ones(1).__dlpack__(stream=3)


# --- np.asarray ---------------------------------------------------------------------------------------------------
@pytest.mark.torch
def test_asarray_of_a_tensor_requiring_grad_is_torchs_error(torch):
    with pytest.raises(RuntimeError) as expected:
        np.asarray(torch.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError) as ours:
        np.asarray(numbagrad.ones(2, requires_grad=True))
    assert str(ours.value) == str(expected.value)


def test_asarray_works_after_detach_and_on_plain_tensors():
    x = numbagrad.ones(2, requires_grad=True)
    np.testing.assert_array_equal(np.asarray(x.detach()), [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(x * 0 + 2 > 1), [True, True])  # comparisons do not require grad
    assert np.asarray(numbagrad.arange(3), dtype=np.float64).dtype == np.float64


# --- the ctypes DLPack structures (what cuda tensors use), on CPU memory --------------------------------------
def export_cpu(array, versioned):
    """A capsule built by numbagrad's own DLPack writer over a numpy array's memory."""
    strides = tuple(s // array.itemsize for s in array.strides)
    ptr = array.__array_interface__["data"][0]
    return _interop._make_capsule(ptr, array.shape, strides, array.dtype, (1, 0), array, versioned)


@pytest.mark.parametrize("versioned", [False, True])
def test_own_capsule_is_read_by_numpy_without_copying(versioned):
    src = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    out = np.from_dlpack(_interop._CapsuleHolder(export_cpu(src, versioned), (1, 0)))
    np.testing.assert_array_equal(out, src)
    assert np.shares_memory(out, src)


@pytest.mark.torch
@pytest.mark.parametrize("versioned", [False, True])
def test_own_capsule_is_read_by_torch_without_copying(torch, versioned):
    src = np.arange(6, dtype=np.int64).reshape(2, 3).T
    out = torch.from_dlpack(export_cpu(src, versioned))
    assert out.tolist() == src.tolist() and out.stride() == (1, 3)
    out[0, 1] = 77
    assert src[0, 1] == 77


@pytest.mark.parametrize("consume", [True, False])
def test_own_capsule_releases_its_buffer_when_done(consume):
    src = np.ones(3)
    before = len(_interop._exported)
    capsule = export_cpu(src, versioned=True)
    assert len(_interop._exported) == before + 1
    out = np.from_dlpack(_interop._CapsuleHolder(capsule, (1, 0))) if consume else None
    del capsule, out
    gc.collect()
    assert len(_interop._exported) == before  # the deleter ran (through the consumer, or the capsule's destructor)


@pytest.mark.torch
@pytest.mark.parametrize("versioned", [False, True])
def test_reading_torch_capsules_with_the_own_reader(torch, versioned):
    src = torch.arange(6.0, dtype=torch.float64).reshape(2, 3).t()
    capsule = src.__dlpack__(max_version=(1, 0)) if versioned else torch.utils.dlpack.to_dlpack(src)
    imported = _interop._Imported(capsule)
    assert imported.device == (1, 0) and imported.dtype == np.float64

    class Host:
        __array_interface__ = imported.interface()

    view = np.asarray(Host())
    np.testing.assert_array_equal(view, src.numpy())
    view[2, 1] = 9.0
    assert src[2, 1].item() == 9.0
    with pytest.raises(ValueError, match="has not been consumed yet"):
        _interop._Imported(capsule)  # a capsule is consumed once
    imported.release()


# --- cuda -----------------------------------------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.skipif(not numbagrad.cuda.is_available(), reason="needs CUDA or NUMBA_ENABLE_CUDASIM=1")
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_cuda_tensor_round_trips_through_its_capsule(max_version):
    t = numbagrad.arange(6.0).reshape(2, 3).cuda()
    assert t.__dlpack_device__() == (2, 0)
    u = numbagrad.from_dlpack(t.__dlpack__(max_version=max_version))
    assert u.device.type == "cuda"
    u[0, 1] = 50.0
    assert t[0, 1].item() == 50.0


@pytest.mark.cuda
@pytest.mark.skipif(not numbagrad.cuda.is_available(), reason="needs CUDA or NUMBA_ENABLE_CUDASIM=1")
def test_from_dlpack_takes_a_cuda_array_interface_object():
    t = numbagrad.arange(4.0).cuda()
    u = numbagrad.from_dlpack(t._data)  # a numba device array: __cuda_array_interface__ only
    u[3] = -1.0
    assert t[3].item() == -1.0


@pytest.mark.cuda
@pytest.mark.skipif(not numbagrad.cuda.is_available(), reason="needs CUDA or NUMBA_ENABLE_CUDASIM=1")
def test_cuda_export_requiring_grad_is_refused():
    with pytest.raises(BufferError, match=re.escape("Can't export tensors that require gradient, use tensor.detach()")):
        numbagrad.ones(2, device="cuda", requires_grad=True).__dlpack__()
