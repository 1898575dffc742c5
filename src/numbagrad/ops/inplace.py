"""In-place ops. Each bumps the version counter; under autograd the tensor is rebased onto a new node.

Rebasing: the op runs out of place on an alias holding the tensor's old value and history, then the result is
written back into the same storage (so views and numpy arrays sharing it see the change) and the tensor takes
the result's grad_fn, as torch does.
"""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..autograd.grad_mode import state
from ..scalar_math import ROWS
from ._common import (
    as_operand,
    backend_of,
    broadcast_shapes,
    check_same_device,
    float_dtype,
    result_type,
    shape_str,
)


def check_inplace(t: Tensor) -> None:
    """torch's ``check_inplace``: no in-place change of a leaf (or a view of one) that requires grad."""
    if not state.enabled:
        return
    if t.grad_fn is None and t._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = t._base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


def rebase(t: Tensor, op) -> Tensor:
    """Run ``op(old_value_of_t)`` with autograd, write the result into ``t`` and give ``t`` its history."""
    if t._base is not None and (t._base.requires_grad or t.requires_grad):
        raise RuntimeError(
            "numbagrad does not support in-place operations that need autograd on a view of a tensor that requires "
            "grad; apply the operation to the base tensor, or clone() the view first."
        )
    old = Tensor._make(t._data.copy())
    old.grad_fn, old._output_nr, old._requires_grad = t.grad_fn, t._output_nr, t._requires_grad
    result = op(old)
    _write(t, result._data)
    t._bump_version()
    t.grad_fn, t._output_nr = result.grad_fn, result._output_nr
    return t


def _write(t: Tensor, data) -> None:
    if isinstance(t._data, np.ndarray):
        np.copyto(t._data, data, casting="unsafe")
    else:
        t._data.copy_to_device(data)


def _check_cast(t: Tensor, dt) -> None:
    if dt.is_floating_point and not t.is_floating_point() or (dt.name != "bool" and t.dtype.name == "bool"):
        raise RuntimeError(
            f"result type {dt.scalar_name} can't be cast to the desired output type {t.dtype.scalar_name}"
        )


def inplace(t: Tensor, name: str, *args) -> Tensor:
    """``t.<name>_(*args)`` for a row of the elementwise table (``add_``, ``mul_``, ``clamp_``, ...)."""
    from . import elementwise

    check_inplace(t)
    row = ROWS[name]
    others = [as_operand(a) for a in args[: row.arity - 1]]
    params = args[row.arity - 1 :]
    if name == "clamp":
        lo, hi = params
        params = (-np.inf if lo is None else lo, np.inf if hi is None else hi)
    dt = result_type(t, *others)
    if row.float_only:
        dt = float_dtype(dt)
    _check_cast(t, dt)
    tensor_args = [a for a in others if isinstance(a, Tensor)]
    is_cuda = check_same_device(t, *tensor_args)
    for a in tensor_args:
        if a.dim() > t.dim() or np.broadcast_shapes(a.shape, t.shape) != t.shape:
            raise RuntimeError(
                f"output with shape {shape_str(t.shape)} doesn't match the broadcast shape "
                f"{shape_str(np.broadcast_shapes(a.shape, t.shape))}"
            )
    if state.enabled and (t.requires_grad or any(a.requires_grad for a in tensor_args)):
        fn = elementwise.function_for(name)
        return rebase(t, lambda old: fn.apply(old, *others, *params))
    backend = backend_of(is_cuda)
    arrays = [t._data] + [a._data if isinstance(a, Tensor) else a for a in others]
    if dt.numpy == t._data.dtype and backend.is_contiguous(t._data):
        backend.elementwise(row, arrays, params, dt.numpy, out=t._data)
    else:
        _write(t, backend.elementwise(row, arrays, params, dt.numpy))
    t._bump_version()
    return t


def fill_(t: Tensor, value) -> Tensor:
    from .indexing import setitem

    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
        )
    setitem(t, Ellipsis, value)
    return t


def copy_(t: Tensor, src) -> Tensor:
    from .indexing import setitem

    src = as_operand(src)
    if isinstance(src, Tensor):
        broadcast_shapes(t.shape, src.shape)  # torch's message for sources that cannot broadcast
        if src.is_cuda != t.is_cuda:
            src = src.to(t.device)
    setitem(t, Ellipsis, src)
    return t


def random_fill_(t: Tensor, how: str, a: float, b: float) -> Tensor:
    """``normal_`` / ``uniform_`` from numbagrad's generator (no graph; the storage is overwritten)."""
    from .creation import _generator

    check_inplace(t)
    rng = _generator()
    data = rng.normal(a, b, t.shape) if how == "normal" else rng.uniform(a, b, t.shape)
    with_grad = state.enabled
    state.enabled = False
    try:
        _write(t, data.astype(t._data.dtype))
    finally:
        state.enabled = with_grad
    t._bump_version()
    return t
