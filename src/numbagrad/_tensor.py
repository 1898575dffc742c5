"""Tensor: a numpy (or numba.cuda) array plus autograd metadata.

Operators and methods forward to ``numbagrad.ops`` (bound as ``_ops`` when the ops package loads), so this module
stays below the ops in the import graph. Every op is an ``autograd.Function``; see ``ops/``.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import _printing
from ._types import (
    CPU,
    Size,
    bool_,
    dtype,
    float32,
    float64,
    from_numpy_dtype,
    int32,
    int64,
    to_device,
    to_dtype,
)

_ops = None  # numbagrad.ops, bound at import of that package
_grad_mode = None  # numbagrad.autograd.grad_mode, bound likewise


class _Version:
    """A version counter shared by a tensor and its views; in-place ops bump it."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict) -> None:
        self._hooks = hooks
        RemovableHandle._next_id += 1
        self.id = RemovableHandle._next_id

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


_NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf "
    "Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure "
    "you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more informations."
)


def _is_cpu_array(data) -> bool:
    return isinstance(data, np.ndarray)


class Tensor:
    """A multi-dimensional array that records the operations applied to it, for reverse-mode autograd."""

    __slots__ = (
        "_data",
        "_requires_grad",
        "grad_fn",
        "_output_nr",
        "_grad",
        "_version_counter",
        "_base",
        "_retains_grad",
        "_hooks",
        "_accumulator",
        "_is_inference",
        "__dict__",
        "__weakref__",
    )

    __array_priority__ = 1000  # make numpy defer to our reflected operators

    def __init__(self, *args, dtype=None, device=None, requires_grad: bool = False) -> None:
        """``Tensor(2, 3)`` is uninitialised storage of that shape, ``Tensor([1, 2])`` copies data (as float)."""
        if len(args) == 1 and not isinstance(args[0], int):
            data = np.array(
                args[0]._data if isinstance(args[0], Tensor) else args[0],
                dtype=(to_dtype(dtype) if dtype else float32).numpy,
            )
        else:
            shape = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
            data = np.empty(tuple(shape), (to_dtype(dtype) if dtype else float32).numpy)
        Tensor._init(self, data)
        if requires_grad:
            self.requires_grad_(True)
        if device is not None and to_device(device).type != "cpu":
            moved = self.to(device)
            self._data = moved._data

    # --- construction ----------------------------------------------------------------------------------------
    def _init(self, data, requires_grad: bool = False) -> None:
        self._data = data
        self._requires_grad = requires_grad
        self.grad_fn = None
        self._output_nr = 0
        self._grad = None
        self._version_counter = _Version()
        self._base = None
        self._retains_grad = False
        self._hooks = None
        self._accumulator = None
        self._is_inference = _grad_mode is not None and _grad_mode.state.inference

    @classmethod
    def _make(cls, data, requires_grad: bool = False) -> Tensor:
        """Wrap storage without copying or checking (the fast path every op uses)."""
        t = object.__new__(cls)
        t._init(data, requires_grad)
        return t

    def _view_of(self, data) -> Tensor:
        """A new tensor over ``data`` that is a view of ``self``: same version counter, ``_base`` set."""
        t = Tensor._make(data)
        t._version_counter = self._version_counter
        t._base = self if self._base is None else self._base
        return t

    # --- basic properties ------------------------------------------------------------------------------------
    @property
    def data(self) -> Tensor:
        """The same storage without history; in-place changes through it are invisible to autograd."""
        return Tensor._make(self._data)

    @data.setter
    def data(self, other: Tensor) -> None:
        self._data = other._data

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_ops.wrap_dim(dim, self.dim())]

    @property
    def dtype(self) -> dtype:
        return from_numpy_dtype(self._data.dtype)

    @property
    def device(self):
        return CPU if _is_cpu_array(self._data) else to_device("cuda")

    @property
    def is_cuda(self) -> bool:
        return not _is_cpu_array(self._data)

    @property
    def ndim(self) -> int:
        return len(self._data.shape)

    def dim(self) -> int:
        return len(self._data.shape)

    def numel(self) -> int:
        return int(np.prod(self._data.shape, dtype=np.int64))

    nelement = numel

    def element_size(self) -> int:
        return self._data.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    def is_contiguous(self) -> bool:
        return bool(self._data.flags.c_contiguous) if _is_cpu_array(self._data) else self._data.is_c_contiguous()

    def stride(self, dim: int | None = None):
        strides = tuple(s // self._data.dtype.itemsize for s in self._data.strides)
        return strides if dim is None else strides[_ops.wrap_dim(dim, self.dim())]

    def data_ptr(self) -> int:
        if _is_cpu_array(self._data):
            return self._data.__array_interface__["data"][0]
        return self._data.__cuda_array_interface__["data"][0]

    @property
    def _version(self) -> int:
        return self._version_counter.value

    def _bump_version(self) -> None:
        self._version_counter.value += 1

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    # --- autograd metadata -----------------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self.grad_fn is not None:
            msg = "you can only change requires_grad flags of leaf variables."
            if not value:
                msg += (
                    " If you want to use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach()."
                )
            raise RuntimeError(msg)
        if value and self._data.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self.grad_fn is not None and requires_grad:
            return self
        if requires_grad and self._data.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")  # the C++ method's text
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self) -> Tensor | None:
        if self._grad is None and self.grad_fn is not None and not self._retains_grad:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}"
                )
            if value.shape != self.shape:
                raise RuntimeError("assigned grad has data of a different size")
            if value.dtype is not self.dtype and value.dtype != self.dtype:
                raise RuntimeError("assigned grad has data of a different type")
            if value.device != self.device:
                raise RuntimeError("assigned grad has data located on a different device")
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf after backward (a no-op on leaves)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        self.grad_fn._retain_grad_of(self)
        self._retains_grad = True

    def register_hook(self, hook) -> RemovableHandle:
        """Call ``hook(grad)`` whenever the gradient for this tensor is computed; a returned tensor replaces it."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            hooks = self.grad_fn._tensor_hooks_for(self._output_nr)
        else:
            if self._hooks is None:
                self._hooks = {}
            hooks = self._hooks
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_post_accumulate_grad_hook(self, hook) -> RemovableHandle:
        """Call ``hook(self)`` after backward has accumulated a gradient into this leaf's ``.grad`` (what
        DistributedDataParallel uses to start a bucket's all-reduce)."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        hooks = self.__dict__.setdefault("_post_accumulate_hooks", {})
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see ``autograd.backward``)."""
        from .autograd import backward

        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        """Same storage and version counter, no history."""
        t = Tensor._make(self._data)
        t._version_counter = self._version_counter
        return t

    def detach_(self) -> Tensor:
        if self._base is not None and self._base.requires_grad:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
                "refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
            )
        self.grad_fn = None
        self._requires_grad = False
        return self

    # --- conversion ------------------------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The storage itself on CPU (shared memory, like torch)."""
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if not force and not _is_cpu_array(self._data):
            raise TypeError(
                "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                "memory first."
            )
        return self._host()

    def _host(self) -> np.ndarray:
        return self._data if _is_cpu_array(self._data) else self._data.copy_to_host()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self._host().reshape(-1)[0].item()

    def tolist(self):
        return self._host().tolist()

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        a = self._host()
        return a if dtype is None else a.astype(dtype)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __len__(self) -> int:
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._host(), self.requires_grad))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the "
                "moment.  If you were attempting to deepcopy a module, this may be because of a torch.nn.utils."
                "weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001"
            )
        new = type(self)._make(self._data.copy(), self._requires_grad) if type(self) is Tensor else _copy_param(self)
        if self._grad is not None:
            new._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new

    # --- printing --------------------------------------------------------------------------------------------
    def _repr_suffixes(self) -> list[str]:
        if self.grad_fn is not None:
            return [f"grad_fn=<{type(self.grad_fn).__name__}>"]
        if self.requires_grad:
            return ["requires_grad=True"]
        return []

    def __repr__(self, *, prefix: str = "tensor(") -> str:
        return _printing.format_tensor(
            self._host(),
            dtype_name=self.dtype.name,
            default_dtype_name="float32" if _ops is None else _ops.get_default_dtype().name,
            suffixes=self._repr_suffixes(),
            device_suffix=None if _is_cpu_array(self._data) else "cuda:0",
            prefix=prefix,
        )

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.dim() == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    # --- dtype / device movement -----------------------------------------------------------------------------
    def to(self, *args, **kwargs) -> Tensor:
        return _ops.to(self, *args, **kwargs)

    def type(self, dtype=None):
        if dtype is None:
            return f"torch.{self.dtype.scalar_name}Tensor"
        return self.to(dtype)

    def float(self) -> Tensor:
        return self.to(float32)

    def double(self) -> Tensor:
        return self.to(float64)

    def long(self) -> Tensor:
        return self.to(int64)

    def int(self) -> Tensor:
        return self.to(int32)

    def bool(self) -> Tensor:
        return self.to(bool_)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        return self.to("cuda" if device is None else device)

    def __cuda_array_interface_get(self):
        if _is_cpu_array(self._data):
            raise AttributeError("__cuda_array_interface__ is only defined on cuda tensors")
        if self.requires_grad:
            raise RuntimeError(
                "Can't get __cuda_array_interface__ on Variable that requires grad. If gradients aren't "
                "required, use var.detach() to get Variable that doesn't require grad."
            )
        return self._data.__cuda_array_interface__

    __cuda_array_interface__ = property(__cuda_array_interface_get)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this tensor's memory (see ``numbagrad._interop``)."""
        return _interop().dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return _interop().dlpack_device(self)

    # --- arithmetic (each is an autograd Function in numbagrad.ops) ------------------------------------------
    def __add__(self, other):
        return _ops.add(self, other)

    def __radd__(self, other):
        return _ops.add(other, self)

    def __sub__(self, other):
        return _ops.sub(self, other)

    def __rsub__(self, other):
        return _ops.rsub(self, other)

    def __mul__(self, other):
        return _ops.mul(self, other)

    def __rmul__(self, other):
        return _ops.mul(other, self)

    def __truediv__(self, other):
        return _ops.div(self, other)

    def __rtruediv__(self, other):
        return _ops.mul(_ops.reciprocal(self), other)

    def __pow__(self, other):
        return _ops.pow(self, other)

    def __rpow__(self, other):
        return _ops.pow(other, self)

    def __matmul__(self, other):
        return _ops.matmul(self, other)

    def __rmatmul__(self, other):
        return _ops.matmul(other, self)

    def __neg__(self):
        return _ops.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ops.abs(self)

    def __floordiv__(self, other):
        return _ops.floor_divide(self, other)

    def __mod__(self, other):
        return _ops.remainder(self, other)

    def __eq__(self, other):  # noqa: D105
        return _ops.eq(self, other)

    def __ne__(self, other):
        return _ops.ne(self, other)

    def __lt__(self, other):
        return _ops.lt(self, other)

    def __le__(self, other):
        return _ops.le(self, other)

    def __gt__(self, other):
        return _ops.gt(self, other)

    def __ge__(self, other):
        return _ops.ge(self, other)

    def __and__(self, other):
        return _ops.logical_op(self, other, "and")

    def __or__(self, other):
        return _ops.logical_op(self, other, "or")

    def __xor__(self, other):
        return _ops.logical_op(self, other, "xor")

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__  # symmetric: `False & t` is `t & False`

    def __invert__(self):
        return _ops.logical_not(self)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def __getitem__(self, index):
        return _ops.getitem(self, index)

    def __setitem__(self, index, value) -> None:
        _ops.setitem(self, index, value)

    # --- named methods ---------------------------------------------------------------------------------------
    def add(self, other, *, alpha=1):
        return _ops.add(self, other if alpha == 1 else _ops.mul(other, alpha))

    def sub(self, other, *, alpha=1):
        return _ops.sub(self, other if alpha == 1 else _ops.mul(other, alpha))

    def mul(self, other):
        return _ops.mul(self, other)

    def div(self, other):
        return _ops.div(self, other)

    def pow(self, exponent):
        return _ops.pow(self, exponent)

    def neg(self):
        return _ops.neg(self)

    def exp(self):
        return _ops.exp(self)

    def log(self):
        return _ops.log(self)

    def sqrt(self):
        return _ops.sqrt(self)

    def rsqrt(self):
        return _ops.rsqrt(self)

    def reciprocal(self):
        return _ops.reciprocal(self)

    def abs(self):
        return _ops.abs(self)

    def sin(self):
        return _ops.sin(self)

    def cos(self):
        return _ops.cos(self)

    def tan(self):
        return _ops.tan(self)

    def tanh(self):
        return _ops.tanh(self)

    def sigmoid(self):
        return _ops.sigmoid(self)

    def relu(self):
        return _ops.relu(self)

    def clamp(self, min=None, max=None):  # noqa: A002
        return _ops.clamp(self, min, max)

    clip = clamp

    def maximum(self, other):
        return _ops.maximum(self, other)

    def minimum(self, other):
        return _ops.minimum(self, other)

    def sum(self, dim=None, keepdim=False, *, dtype=None):
        return _ops.sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return _ops.mean(self, dim, keepdim, dtype=dtype)

    def prod(self, dim=None, keepdim=False, *, dtype=None):
        return _ops.prod(self, dim, keepdim, dtype=dtype)

    def max(self, dim=None, keepdim=False):
        return _ops.max(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return _ops.min(self, dim, keepdim)

    def amax(self, dim=(), keepdim=False):
        return _ops.amax(self, dim, keepdim)

    def amin(self, dim=(), keepdim=False):
        return _ops.amin(self, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return _ops.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _ops.argmin(self, dim, keepdim)

    def norm(self, p="fro", dim=None, keepdim=False):
        return _ops.norm(self, p, dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _ops.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _ops.std(self, dim, unbiased, keepdim, correction=correction)

    def softmax(self, dim, dtype=None):
        return _ops.softmax(self, dim, dtype)

    def log_softmax(self, dim, dtype=None):
        return _ops.log_softmax(self, dim, dtype)

    def mm(self, other):
        return _ops.mm(self, other)

    def matmul(self, other):
        return _ops.matmul(self, other)

    def dot(self, other):
        return _ops.dot(self, other)

    def t(self):
        return _ops.t(self)

    @property
    def T(self):  # noqa: N802
        return _ops.permute(self, tuple(reversed(range(self.dim()))))

    def transpose(self, dim0, dim1):
        return _ops.transpose(self, dim0, dim1)

    def permute(self, *dims):
        return _ops.permute(self, *dims)

    def view(self, *shape):
        return _ops.view(self, *shape)

    def view_as(self, other):
        return _ops.view(self, other.shape)

    def reshape(self, *shape):
        return _ops.reshape(self, *shape)

    def reshape_as(self, other):
        return _ops.reshape(self, other.shape)

    def flatten(self, start_dim=0, end_dim=-1):
        return _ops.flatten(self, start_dim, end_dim)

    def squeeze(self, dim=None):
        return _ops.squeeze(self, dim)

    def unsqueeze(self, dim):
        return _ops.unsqueeze(self, dim)

    def expand(self, *sizes):
        return _ops.expand(self, *sizes)

    def expand_as(self, other):
        return _ops.expand(self, other.shape)

    def repeat(self, *sizes):
        return _ops.repeat(self, *sizes)

    def sort(self, dim=-1, descending=False):
        return _ops.sort(self, dim, descending)

    def clone(self):
        return _ops.clone(self)

    def contiguous(self):
        return self if self.is_contiguous() else _ops.clone(self)

    def where(self, condition, other):
        return _ops.where(condition, self, other)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return _ops.allclose(self, other, rtol, atol, equal_nan)

    def equal(self, other):
        return _ops.equal(self, other)

    def eq(self, other):
        return _ops.eq(self, other)

    def ne(self, other):
        return _ops.ne(self, other)

    def lt(self, other):
        return _ops.lt(self, other)

    def le(self, other):
        return _ops.le(self, other)

    def gt(self, other):
        return _ops.gt(self, other)

    def ge(self, other):
        return _ops.ge(self, other)

    def any(self, dim=None, keepdim=False):
        return _ops.reduce_bool(self, "any", dim, keepdim)

    def all(self, dim=None, keepdim=False):
        return _ops.reduce_bool(self, "all", dim, keepdim)

    def logical_not(self):
        return _ops.logical_not(self)

    def sign(self):
        return _ops.sign(self)

    def floor(self):
        return _ops.rounding(self, "floor")

    def ceil(self):
        return _ops.rounding(self, "ceil")

    def round(self):
        return _ops.rounding(self, "round")

    def isnan(self):
        return _ops.isnan(self)

    def nonzero(self):
        return _ops.nonzero(self)

    def square(self):
        return _ops.pow(self, 2)

    def narrow(self, dim, start, length):
        return _ops.narrow(self, dim, start, length)

    def chunk(self, chunks, dim=0):
        return _ops.chunk(self, chunks, dim)

    def split(self, split_size, dim=0):
        return _ops.split(self, split_size, dim)

    def unbind(self, dim=0):
        return _ops.unbind(self, dim)

    def new_zeros(self, *size, dtype=None):
        return _ops.zeros(*size, dtype=dtype or self.dtype, device=self.device)

    def new_ones(self, *size, dtype=None):
        return _ops.ones(*size, dtype=dtype or self.dtype, device=self.device)

    def new_tensor(self, data, dtype=None):
        return _ops.tensor(data, dtype=dtype or self.dtype, device=self.device)

    def new_full(self, size, fill_value, dtype=None):
        return _ops.full(size, fill_value, dtype=dtype or self.dtype, device=self.device)

    def new_empty(self, *size, dtype=None):
        return _ops.empty(*size, dtype=dtype or self.dtype, device=self.device)

    # --- in-place --------------------------------------------------------------------------------------------
    def add_(self, other, *, alpha=1):
        return _ops.inplace(self, "add", other if alpha == 1 else _ops.mul(other, alpha))

    def sub_(self, other, *, alpha=1):
        return _ops.inplace(self, "sub", other if alpha == 1 else _ops.mul(other, alpha))

    def mul_(self, other):
        return _ops.inplace(self, "mul", other)

    def div_(self, other):
        return _ops.inplace(self, "div", other)

    def pow_(self, other):
        return _ops.inplace(self, "pow", other)

    def clamp_(self, min=None, max=None):  # noqa: A002
        return _ops.inplace(self, "clamp", min, max)

    def relu_(self):
        return _ops.inplace(self, "relu")

    def neg_(self):
        return _ops.inplace(self, "neg")

    def exp_(self):
        return _ops.inplace(self, "exp")

    def sqrt_(self):
        return _ops.inplace(self, "sqrt")

    def abs_(self):
        return _ops.inplace(self, "abs")

    def tanh_(self):
        return _ops.inplace(self, "tanh")

    def sigmoid_(self):
        return _ops.inplace(self, "sigmoid")

    def zero_(self):
        return _ops.fill_(self, 0)

    def fill_(self, value):
        return _ops.fill_(self, value)

    def copy_(self, src, non_blocking=False):
        return _ops.copy_(self, src)

    def normal_(self, mean=0.0, std=1.0):
        return _ops.random_fill_(self, "normal", mean, std)

    def uniform_(self, a=0.0, b=1.0):
        return _ops.random_fill_(self, "uniform", a, b)

    def apply_(self, fn) -> Tensor:
        """Apply ``fn`` to every element in place, compiled by Numba (see ``numbagrad.ops.apply``)."""
        return _ops.apply_(self, fn)

    def map_(self, other, fn) -> Tensor:
        """``self[i] = fn(self[i], other[i])`` element by element, in place (torch's ``map_``)."""
        return _ops.map_(self, other, fn)


def _rebuild(data, requires_grad):
    return Tensor._make(np.array(data), requires_grad)


def _copy_param(t):
    new = object.__new__(type(t))
    new._init(t._data.copy(), t._requires_grad)
    return new


def _interop():
    from . import _interop as module  # DLPack helpers, loaded on first use

    return module


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


_SUPPORTED = (float32, float64, int64, int32, bool_)
