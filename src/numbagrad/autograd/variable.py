"""``torch.autograd.Variable``: the legacy constructor, kept because old code still calls it. Since Variables and
Tensors merged it makes a tensor: ``Variable(t, requires_grad=True)`` is a history-free alias of ``t``'s storage
that requires grad, and every tensor passes ``isinstance(x, Variable)``."""

from __future__ import annotations

import warnings

from .._tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False, volatile=False)``: a new leaf sharing ``data``'s storage and version
    counter (``volatile`` no longer does anything, and says so)."""

    def __new__(cls, data, requires_grad: bool = False, volatile: bool = False) -> Tensor:  # type: ignore[misc]
        if volatile:
            warnings.warn(
                "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                UserWarning,
                stacklevel=2,
            )
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad and data._data.dtype.kind not in "fcV":
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t = data.detach()
        if requires_grad:
            t._requires_grad = True
        return t
