"""Tensor: a numpy (or numba.cuda) array plus autograd metadata.

The ops' methods and operators (``t.sum()``, ``t + u``, ``t.add_(u)``) are not written here: every op declares
itself once in ``numbagrad.ops`` and its declaration binds the Tensor methods when the ops load, so this module
stays below the ops in the import graph. What is here is the data, the autograd metadata and the conversions.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from . import _printing, _upward
from ._types import (
    Size,
    bool_,
    complex64,
    complex128,
    dtype,
    float32,
    float64,
    from_numpy_dtype,
    get_default_complex_dtype,
    get_default_dtype,
    int32,
    int64,
    strided,
    to_device,
    to_dtype,
    wrap_dim,
)
from .backend import _BY_TYPE as _BACKENDS
from .backend import backend_for, layout


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


NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf "
    "Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure "
    "you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more informations."
)


#: The per-instance fields numbagrad itself keeps on a tensor (everything else in ``__dict__`` is the user's).
_TENSOR_FIELDS = frozenset(
    {"_data", "_requires_grad", "grad_fn", "_output_nr", "_grad", "_version_counter", "_base", "_retains_grad",
     "_hooks", "_accumulator", "_is_inference", "_post_accumulate_hooks", "_views", "_views_pruned_at",
     "_creation_meta", "_fw_grad", "_physical", "_grad_slots"}
)  # fmt: skip


def expose(t: Tensor) -> None:
    """``t``'s storage is handed out where no tensor keeps ``t`` alive (numpy, ``.data``, ``detach()``, DLPack,
    a storage object, ``set_``, a node's saved output read back): the node whose output it is (or its base's,
    for a view) may no longer write a gradient into that storage once ``t`` is gone (``SavedTensor.output_ref``)."""
    for x in (t, t._base):
        if x is not None:
            fn = x.__dict__.get("grad_fn")  # (not the property: an invalidated view's raises)
            if hasattr(type(fn), "_output_exposed"):  # (a graph node)
                fn._output_exposed = True


def refuse_non_leaf_requires_grad(value: bool) -> None:
    """torch's refusal to set ``requires_grad`` of a tensor with history."""
    msg = "you can only change requires_grad flags of leaf variables."
    if not value:
        msg += (
            " If you want to use a computed variable in a subgraph that doesn't require differentiation "
            "use var_no_grad = var.detach()."
        )
    raise RuntimeError(msg)


class Tensor:
    """A multi-dimensional array that records the operations applied to it, for reverse-mode autograd.

    Only ``_data`` is set per instance when an op makes a tensor; every other field starts as the class default
    below and is written only when it changes (a version counter appears at the first in-place op or view).
    """

    __array_priority__ = 1000  # make numpy defer to our reflected operators

    _requires_grad = False  # a leaf that requires grad (non-leaves require grad through their grad_fn)
    grad_fn = None
    _output_nr = 0
    _grad = None
    _version_counter: _Version | None = None
    _base = None
    _retains_grad = False
    _hooks = None
    _accumulator = None
    _is_inference = False
    _views: list | None = None  # weak references to the live views of this base (see ``_view_of``)
    _views_pruned_at = 0
    _creation_meta: str | None = None  # how a view was made, when in-place changes to it are refused
    _fw_grad = None  # the tangent at the active forward-AD level (``autograd.forward_ad``), if any
    _lazy_conj = False  # True for a conjugate view of a complex tensor (``ops.complex_ops.ConjView``)
    _grad_slots = 0  # while a backward owns this gradient's buffer: how many of its slots hold it (autograd.engine)

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
        if requires_grad:
            self._requires_grad = True
        if _upward.grad_mode is not None and _upward.grad_mode.state.inference:
            self._is_inference = True

    @classmethod
    def _make(cls, data, requires_grad: bool = False) -> Tensor:
        """Wrap storage without copying or checking (the fast path every op uses)."""
        t = object.__new__(cls)
        t._data = data
        if requires_grad:
            t._requires_grad = True
        return t

    def _user_attributes(self) -> dict:
        """Attributes a user set on this tensor (what pickling and ``save`` keep), without numbagrad's own."""
        return {k: v for k, v in self.__dict__.items() if k not in _TENSOR_FIELDS}

    def _shared_version(self) -> _Version:
        """This tensor's version counter, created on first need (a view or a saved tensor shares it)."""
        counter = self._version_counter
        if counter is None:
            counter = self._version_counter = _Version()
        return counter

    def _view_of(self, data) -> Tensor:
        """A new tensor over ``data`` that is a view of ``self``: same version counter, ``_base`` set to the root.

        The root keeps a weak reference to each live view, so that an in-place op that gives the root a new
        history can give its views theirs (``ops.inplace``); where the view sits in the root is worked out from
        the storage only then. A view of a view inherits the reason an in-place change of it is refused."""
        t = Tensor._make(data)
        t._version_counter = self._shared_version()
        root = self._base
        if root is None:
            root = self
        elif self._creation_meta is not None:
            t._creation_meta = self._creation_meta
        t._base = root
        views = root._views
        if views is None:
            root._views = [weakref.ref(t)]
        else:
            views.append(weakref.ref(t))
            if len(views) > 2 * root._views_pruned_at + 16:  # drop dead references, amortised O(1) per view
                views[:] = [r for r in views if r() is not None]
                root._views_pruned_at = len(views)
        return t

    def _is_view(self) -> bool:
        """True if this tensor is a view of another (its ``_base``)."""
        return self._base is not None

    @property
    def _backend(self):
        """The backend module of this tensor's storage (``backend.cpu`` or ``backend.cuda``)."""
        data = self._data
        return _BACKENDS.get(type(data)) or backend_for(data)

    # --- basic properties ------------------------------------------------------------------------------------
    @property
    def data(self) -> Tensor:
        """The same storage without history; in-place changes through it are invisible to autograd."""
        expose(self)
        return Tensor._make(self._data)

    @data.setter
    def data(self, other: Tensor) -> None:
        if not isinstance(other, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(other).__name__}")
        if self.requires_grad and other._data.dtype.kind not in "fcV":
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        expose(other)
        self._data = other._data

    @property
    def shape(self) -> Size:
        """The size of each dim, as a ``Size`` (a tuple)."""
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape as a ``Size``, or the size of ``dim`` when given."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[wrap_dim(dim, self.dim())]

    @property
    def dtype(self) -> dtype:
        """The element type (``numbagrad.float32``...)."""
        return from_numpy_dtype(self._data.dtype)

    @property
    def device(self):
        """Where the storage lives: ``device('cpu')`` or ``device('cuda', 0)``."""
        return backend_for(self._data).DEVICE

    @property
    def is_cuda(self) -> bool:
        """True if the storage is on the GPU."""
        return backend_for(self._data).DEVICE.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        """True if the storage is in host memory."""
        return backend_for(self._data).DEVICE.type == "cpu"

    @property
    def ndim(self) -> int:
        """The number of dims (same as ``dim()``)."""
        return len(self._data.shape)

    def dim(self) -> int:
        """The number of dims."""
        return len(self._data.shape)

    def numel(self) -> int:
        """The number of elements (``nelement`` is an alias)."""
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element."""
        return self._data.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per element (same as ``element_size()``)."""
        return self._data.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes the elements take (``numel() * element_size()``, whatever the strides)."""
        return int(self._data.size) * self._data.dtype.itemsize

    @property
    def output_nr(self) -> int:
        """Which output of its ``grad_fn`` this tensor is (0 for leaves)."""
        return self._output_nr

    def is_floating_point(self) -> bool:
        """True if the dtype is a float type."""
        return self._data.dtype.kind in "fV"

    def is_complex(self) -> bool:
        """True if the dtype is a complex type."""
        return self._data.dtype.kind == "c"

    #: Dense tensors are strided; sparse COO tensors are ``ops.sparse.SparseCOOTensor``.
    is_sparse = False
    layout = strided

    def is_contiguous(self, memory_format=None) -> bool:
        """True if the elements are laid out row-major without gaps (or in ``memory_format``'s order:
        ``channels_last`` is (N, H, W, C) in memory), size-1 dims aside, as torch's."""
        if memory_format is None or memory_format.name in ("contiguous_format", "preserve_format"):
            return backend_for(self._data).is_contiguous(self._data)
        return layout.is_contiguous_as(self._data.shape, layout.element_strides(self._data), memory_format.name)

    def stride(self, dim: int | None = None):
        """The step in elements between neighbours along each dim, or along ``dim`` when given."""
        strides = tuple(s // self._data.dtype.itemsize for s in self._data.strides)
        return strides if dim is None else strides[wrap_dim(dim, self.dim())]

    def data_ptr(self) -> int:
        """The address of the first element (a device address for cuda tensors)."""
        return backend_for(self._data).data_ptr(self._data)

    @property
    def _version(self) -> int:
        counter = self._version_counter
        return 0 if counter is None else counter.value

    def _bump_version(self) -> None:
        self._shared_version().value += 1
        mode = _upward.grad_mode.state
        if not (mode.enabled or mode.in_forward):  # (else the in-place op or Function gives the views new history)
            root = self._base if self._base is not None else self
            if root._views:
                _upward.ops.inplace.regenerate_after_write(self)

    def is_inference(self) -> bool:
        """True for a tensor made in inference mode: it records no version changes, so autograd may not save it,
        and outside inference mode it may not be changed in place."""
        return self._is_inference

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded op (``grad_fn is None``): backward fills their ``.grad``."""
        return self.grad_fn is None

    # --- autograd metadata -----------------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether autograd records ops on this tensor; settable on leaves (float dtypes only)."""
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self.grad_fn is not None:
            refuse_non_leaf_requires_grad(value)
        if value and self._data.dtype.kind not in "fcV":
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        if value and self._is_inference and not _upward.grad_mode.state.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place and return this tensor."""
        if self.grad_fn is not None and requires_grad:
            return self
        if requires_grad and self._data.dtype.kind not in "fcV":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")  # the C++ method's text
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self) -> Tensor | None:
        """The gradient backward accumulated into this tensor (``None`` until then).

        Reading it on a non-leaf that does not ``retain_grad()`` warns, as torch does.
        """
        if self._grad is None and self.grad_fn is not None and not self._retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}"
                )
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of size "
                    f"'{list(self.shape)}'. Please ensure that the gradient and the tensor are the same size"
                )
            if value.dtype is not self.dtype and value.dtype != self.dtype:
                raise RuntimeError("assigned grad has data of a different type")
            if value.device != self.device:
                raise RuntimeError("assigned grad has data located on a different device")
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        """True if ``retain_grad()`` was called on this non-leaf."""
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
        _upward.autograd.backward(self, gradient, retain_graph, create_graph, None, inputs)

    def detach(self) -> Tensor:
        """Same storage and version counter, no history."""
        expose(self)
        t = Tensor._make(self._data)
        t._version_counter = self._shared_version()
        return t

    def detach_(self) -> Tensor:
        """Detach this tensor from the graph in place (it becomes a leaf not requiring grad)."""
        if self._base is not None and self._base.requires_grad:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
                "refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
            )
        expose(self)  # (its node no longer sees it)
        self.grad_fn = None
        self._requires_grad = False
        return self

    # --- conversion ------------------------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The storage itself on CPU (shared memory, like torch)."""
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if not force and self.is_cuda:
            raise TypeError(
                "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                "memory first."
            )
        expose(self)
        return self._host()

    def _host(self) -> np.ndarray:
        """The values as a numpy array: the storage itself on the CPU, a copy from a device."""
        return backend_for(self._data).to_host(self._data)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self._host().reshape(-1)[0].item()

    def tolist(self):
        """The values as (nested) Python lists of numbers."""
        return self._host().tolist()

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        expose(self)
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
            many = "more than one value" if self.numel() else "no values"
            raise RuntimeError(f"Boolean value of Tensor with {many} is ambiguous")
        return bool(self.item())

    def __len__(self) -> int:
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(_upward.ops.unbind(self, 0))  # as torch: each element is an output of one UnbindBackward0

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
        suffixes = []
        try:
            grad_fn = self.grad_fn
        except RuntimeError:  # a view that may not follow its base's in-place change (ops.inplace): as torch prints
            suffixes.append("grad_fn=<Invalid>")
            grad_fn = None
        if grad_fn is not None:
            suffixes.append(f"grad_fn=<{type(grad_fn).__name__}>")
        elif not suffixes and self.requires_grad:
            suffixes.append("requires_grad=True")
        if self._fw_grad is not None:  # a dual tensor (``autograd.forward_ad``) shows its tangent, as torch's does
            suffixes.append(f"tangent={self._fw_grad!r}")
        return suffixes

    def __repr__(self, *, prefix: str = "tensor(") -> str:
        return _printing.format_tensor(
            self._host(),
            dtype_name=self.dtype.name,
            default_dtype_name=get_default_dtype().name,
            default_complex_name=get_default_complex_dtype().name,
            suffixes=self._repr_suffixes(),
            device_suffix=None if self.is_cpu else str(self.device),
            prefix=prefix,
        )

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats its value (``f"{t}"`` gives ``1.5``), as torch's does; others format their repr."""
        if self.dim() == 0 and type(self) is Tensor:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    # --- dtype / device movement -----------------------------------------------------------------------------
    def float(self) -> Tensor:
        """A float32 copy (this tensor itself if already float32)."""
        return self.to(float32)

    def cfloat(self) -> Tensor:
        """A complex64 copy (this tensor itself if already complex64)."""
        return self.to(complex64)

    def cdouble(self) -> Tensor:
        """A complex128 copy (this tensor itself if already complex128)."""
        return self.to(complex128)

    def double(self) -> Tensor:
        """A float64 copy (this tensor itself if already float64)."""
        return self.to(float64)

    def long(self) -> Tensor:
        """An int64 copy (this tensor itself if already int64)."""
        return self.to(int64)

    def int(self) -> Tensor:
        """An int32 copy (this tensor itself if already int32)."""
        return self.to(int32)

    def bool(self) -> Tensor:
        """A bool copy (this tensor itself if already bool)."""
        return self.to(bool_)

    def cpu(self) -> Tensor:
        """A copy in host memory (this tensor itself if already there)."""
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        """A copy on the GPU (this tensor itself if already there)."""
        return self.to("cuda" if device is None else device)

    def __cuda_array_interface_get(self):
        if self.is_cpu:
            raise AttributeError("__cuda_array_interface__ is only defined on cuda tensors")
        if self.requires_grad:
            raise RuntimeError(
                "Can't get __cuda_array_interface__ on Variable that requires grad. If gradients aren't "
                "required, use var.detach() to get Variable that doesn't require grad."
            )
        return self._data.__cuda_array_interface__

    __cuda_array_interface__ = property(__cuda_array_interface_get)


def _rebuild(data, requires_grad):
    return Tensor._make(np.array(data), requires_grad)


def _copy_param(t):
    new = object.__new__(type(t))
    new._init(t._data.copy(), t._requires_grad)
    return new


def is_tensor(obj) -> bool:
    """True if ``obj`` is a numbagrad Tensor (Parameters included)."""
    return isinstance(obj, Tensor)


_SUPPORTED = (float32, float64, int64, int32, bool_)
