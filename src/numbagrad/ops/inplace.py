"""In-place ops. Each bumps the version counter; under autograd the tensor is rebased onto a new node.

Rebasing: the op runs out of place on an alias holding the tensor's old value and history, then the result is
written back into the same storage (so views and numpy arrays sharing it see the change) and the tensor takes
the result's grad_fn, as torch does. Without autograd a table row writes straight into the tensor's storage.

Before anything is written, torch's checks run, so no error leaves a tensor half-written: a leaf that requires
grad, a destination whose elements share memory (an expanded view), an operand partly overlapping the destination,
a result dtype that cannot be cast to the destination's, a broadcast that would grow the destination.
"""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from .._types import from_numpy_dtype
from ..autograd.grad_mode import no_grad, state
from ._common import broadcast_shapes, shape_str

_CASTS = {"b": 0, "i": 1, "u": 1, "f": 2}


def check_inplace(t: Tensor) -> None:
    """torch's ``check_inplace``: no in-place change of a leaf (or a view of one) that requires grad."""
    if not state.enabled:
        return
    if t.grad_fn is None and t._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = t._base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


def check_written(t: Tensor, operands=(), destination=None) -> None:
    """torch's overlap checks before a write: the destination's elements (``destination``, a view of ``t``'s
    storage, by default all of it) must not share memory, and an operand must be the destination itself or not
    overlap it at all."""
    data = t._data if destination is None else destination
    if has_internal_overlap(data):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation."
        )
    for o in operands:
        if isinstance(o, Tensor) and o._data is not data and t._backend.overlap(data, o._data) == "partial":
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                "single memory location. Please clone() the tensor before performing the operation."
            )


def has_internal_overlap(data) -> bool:
    """True when two elements of ``data`` are one memory location (a stride-0 dim of size > 1: expanded)."""
    return (
        data.size > 1
        and 0 in data.strides
        and any(stride == 0 and size > 1 for stride, size in zip(data.strides, data.shape))
    )


def check_result(t: Tensor, result_dtype: np.dtype, result_shape: tuple) -> None:
    """The result must fit the destination: castable dtype (torch's category rule) and the destination's shape."""
    if _CASTS[result_dtype.kind] > _CASTS[t._data.dtype.kind]:
        raise RuntimeError(
            f"result type {from_numpy_dtype(result_dtype).scalar_name} can't be cast to the desired output type "
            f"{t.dtype.scalar_name}"
        )
    if tuple(result_shape) != t._data.shape:
        raise RuntimeError(
            f"output with shape {shape_str(t.shape)} doesn't match the broadcast shape "
            f"{shape_str(broadcast_shapes(t._data.shape, result_shape))}"
        )


def rebase(t: Tensor, op) -> Tensor:
    """Run ``op(old_value_of_t)`` with autograd, write the result into ``t`` and give ``t`` its history.

    A retained gradient follows the tensor to its new node (``retain_grad`` reports the newest version's
    gradient, as in torch); hooks registered before stay with the old version."""
    if t._base is not None and (t._base.requires_grad or t.requires_grad):
        raise RuntimeError(
            "numbagrad does not support in-place operations that need autograd on a view of a tensor that requires "
            "grad; apply the operation to the base tensor, or clone() the view first."
        )
    old = Tensor._make(t._backend.copy(t._data))
    old.grad_fn, old._output_nr, old._requires_grad = t.grad_fn, t._output_nr, t._requires_grad
    old_node = t.grad_fn
    result = op(old)
    check_result(t, result._data.dtype, result._data.shape)
    t._backend.setitem(t._data, (Ellipsis,), result._data)
    t._bump_version()
    t.grad_fn, t._output_nr = result.grad_fn, result._output_nr
    if t._retains_grad and old_node is not None and result.grad_fn is not None:
        retained = old_node._retained
        if retained is not None and retained.get(old._output_nr) is not None and retained[old._output_nr]() is t:
            del retained[old._output_nr]
        result.grad_fn._retain_grad_of(t)
    return t


def needs_graph(t: Tensor, operands) -> bool:
    if not state.enabled:
        return False
    if t._requires_grad or t.grad_fn is not None:
        return True
    return any(isinstance(o, Tensor) and (o._requires_grad or o.grad_fn is not None) for o in operands)


def write_result(t: Tensor, result: Tensor) -> Tensor:
    """Write an out-of-place result into ``t`` (checked first), bumping its version."""
    check_result(t, result._data.dtype, result._data.shape)
    t._backend.setitem(t._data, (Ellipsis,), result._data)
    t._bump_version()
    return t


def random_fill_(t: Tensor, values: np.ndarray) -> Tensor:
    """Overwrite ``t`` with host ``values`` drawn by the caller (no graph; a leaf requiring grad refuses)."""
    check_inplace(t)
    check_written(t)
    t._backend.setitem(t._data, (Ellipsis,), t._backend.from_host(values.astype(t._data.dtype, copy=False)))
    t._bump_version()
    return t


def write_inplace(t: Tensor, op, operands=()) -> Tensor:
    """``t.<op>_(...)``: torch's checks, then ``op`` run out of place on ``t`` and written back (rebased onto the
    op's node under autograd), so an error leaves ``t`` untouched."""
    check_inplace(t)
    check_written(t, [o for o in operands if isinstance(o, Tensor)])
    if needs_graph(t, operands):
        return rebase(t, op)
    with no_grad():
        result = op(t)
    return write_result(t, result)
