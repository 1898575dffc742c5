"""``nn.Parameter``: a leaf Tensor that a Module registers as one of its parameters."""

from __future__ import annotations

from .. import ops
from .._tensor import Tensor


class Parameter(Tensor):
    """A Tensor that, assigned as a Module attribute, is registered in ``parameters()``.

    It shares storage with ``data`` (as torch's does) and requires grad by default.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = ops.empty(0)
        p = object.__new__(cls)
        p._init(data._data, False)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        """Everything happens in ``__new__`` (Tensor's ``__init__`` would reallocate)."""

    def __repr__(self) -> str:
        return Tensor.__repr__(self, prefix="Parameter containing:\ntensor(")

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self._requires_grad))


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)
