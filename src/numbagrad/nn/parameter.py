"""``nn.Parameter``: a leaf Tensor that a Module registers as one of its parameters; ``nn.Buffer``: the marker that
makes a tensor assigned to a Module attribute one of its buffers."""

from __future__ import annotations

from .. import ops
from .._tensor import Tensor, expose


class Parameter(Tensor):
    """A Tensor that, assigned as a Module attribute, is registered in ``parameters()``.

    It shares storage with ``data`` (as torch's does) and requires grad by default.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = ops.empty(0)
        p = object.__new__(cls)
        expose(data)
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


class _BufferMeta(type):
    """``isinstance(t, Buffer)`` is True for any tensor ``Buffer(...)`` marked (``_is_buffer``), as in torch."""

    def __instancecheck__(cls, instance) -> bool:
        if cls is Buffer and isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False):
            return True
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A tensor that, assigned as a Module attribute, is registered in ``buffers()`` (``persistent``: saved in
    ``state_dict``), as ``register_buffer`` would. ``Buffer(data)`` is ``data`` detached (its ``requires_grad``
    kept) and marked, a plain Tensor as in torch, not an instance of a subclass."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Tensor:  # type: ignore[misc]
        if data is None:
            data = ops.empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


class UninitializedTensorMixin:
    """A placeholder whose shape a lazy module learns from its first input: it holds no elements until
    ``materialize(shape)`` allocates them, and then it becomes a plain ``cls_to_become``."""

    cls_to_become: type = Tensor

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Allocate ``shape`` (in the placeholder's dtype and device unless given) and become ``cls_to_become``."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = self.dtype if dtype is None else dtype
        device = self.device if device is None else device
        self._data = ops.empty(*shape, dtype=dtype, device=device)._data
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
            "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
            "`forward` to initialize the parameters before accessing their attributes."
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    __str__ = __repr__


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A ``Parameter`` of a lazy module whose shape is not known yet."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None) -> UninitializedParameter:
        return Parameter.__new__(cls, ops.empty(0, dtype=dtype, device=device), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        """Everything happens in ``__new__``."""


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer of a lazy module (``running_mean``...) whose shape is not known yet."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None) -> UninitializedBuffer:
        t = object.__new__(cls)
        t._init(ops.empty(0, dtype=dtype, device=device)._data, False)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __init__(self, requires_grad: bool = False, device=None, dtype=None) -> None:
        """Everything happens in ``__new__``."""
