"""Tensor methods that torch has and the other op modules did not need: views of the memory block itself
(``as_strided``, ``unfold``, ``storage_offset``), in-place shape changes (``squeeze_``, ``t_``, ``resize_``,
``set_``), reductions into positions (``scatter_reduce``, ``index_reduce``) and the cheap layout predicates.

A tensor's storage is the memory block its array views (a numpy base array, a device allocation); torch's
``storage_offset`` and ``as_strided`` count elements from the start of that block, and the backend answers both.

``as_strided``'s gradient (and ``unfold``'s, which is one) works on storage positions, as torch's does: the output
gradient is summed into the positions the output reads, and each input element takes the sum at its position
(divided among the input elements that share one position, for an expanded input). Positions the output reads
outside the input get no gradient.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._tensor import Tensor, expose
from .._typeinfo import CPP_NAMES as _CPP_NAMES
from .._types import bool_, get_default_dtype, to_device
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad, state
from ..backend import for_device
from . import apply, complex_ops, more, storage
from ._common import not_a_tensor, wrap_dim
from ._registry import Declaration, Sample, T, declare, register
from .creation import _dtype_or_default, _new_like, _rng_for
from .elementwise import CLASSES
from .indexing import gather, scatter, scatter_add
from .inplace import check_inplace, random_fill_, write_inplace
from .shape import MatrixTranspose, Squeeze, Transpose, Unsqueeze, cat


# --- storage ------------------------------------------------------------------------------------------------
def storage_offset(input: Tensor) -> int:  # noqa: A002
    """How many elements lie between the start of the storage and this tensor's first element."""
    return int(input._backend.storage_offset(input._data))


Tensor.storage_offset = storage_offset


def _shape_list(shape) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


def _check_geometry(x: Tensor, size: tuple, stride: tuple, offset: int) -> None:
    """torch's checks of an ``as_strided`` geometry: matching lengths, no negative size, stride or offset, and
    every element inside the storage."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: "
                           f"{_shape_list(stride)}")  # fmt: skip
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {_shape_list(size)}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    item = x._data.dtype.itemsize
    needed = 0 if 0 in size else (offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))) * item
    available = int(x._backend.storage_nbytes(x._data))
    if needed > available:
        raise RuntimeError(
            f"setStorage: sizes {_shape_list(size)}, strides {_shape_list(stride)}, storage offset {offset}, and "
            f"itemsize {item} requiring a storage size of {needed} are out of bounds for storage of size {available}"
        )


def _positions(size: tuple, stride: tuple, offset: int) -> np.ndarray:
    """The storage position of every element of the geometry, flattened in row-major order."""
    pos = np.full((), offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        step = np.arange(n, dtype=np.int64) * s
        pos = pos + step.reshape((1,) * k + (n,) + (1,) * (len(size) - k - 1))
    return np.broadcast_to(pos, tuple(size)).reshape(-1)


class _StorageMap:
    """The linear map between an input geometry and an output geometry over the same storage: ``to_output``
    reads the output's elements from the input's (zero where the output reads a position outside the input),
    ``to_input`` is its transpose (``as_strided``'s backward). Positions are worked out on first use."""

    __slots__ = ("inp", "out", "_arrays")

    def __init__(self, inp: tuple, out: tuple) -> None:
        self.inp, self.out = inp, out  # (size, stride, offset) each
        self._arrays = None

    def arrays(self) -> tuple:
        if self._arrays is None:
            in_pos, out_pos = _positions(*self.inp), _positions(*self.out)
            length = int(max(in_pos.max(initial=-1), out_pos.max(initial=-1))) + 1
            counts = np.bincount(in_pos, minlength=length)
            shared = bool((counts > 1).any())
            self._arrays = (in_pos, out_pos, length, counts[in_pos].astype(np.float64) if shared else None)
        return self._arrays

    def _move(self, t: Tensor, src_pos, dst_pos, length: int, divide, shape: tuple) -> Tensor:
        backend = t._backend
        values = backend.reshape(backend.ascontiguous(t._data), (-1,))
        if divide is not None and src_pos is self._arrays[0]:
            values = (Tensor._make(values) / Tensor._make(backend.from_host(divide.astype(values.dtype))))._data
        buf = backend.index_add_zeros((length,), values.dtype, (src_pos,), values)
        picked = backend.getitem(buf, (dst_pos,))
        result = Tensor._make(backend.reshape(picked, shape))
        if divide is not None and dst_pos is self._arrays[0]:
            result = result / Tensor._make(backend.from_host(divide.astype(values.dtype).reshape(shape)))
        return result

    def to_input(self, g: Tensor) -> Tensor:
        in_pos, out_pos, length, divide = self.arrays()
        return self._move(g, out_pos, in_pos, length, divide, tuple(self.inp[0]))

    def to_output(self, x: Tensor) -> Tensor:
        in_pos, out_pos, length, divide = self.arrays()
        return self._move(x, in_pos, out_pos, length, divide, tuple(self.out[0]))


def _geometry(x: Tensor) -> tuple:
    return tuple(x.shape), x.stride(), storage_offset(x)


class AsStrided(Function):
    """A view of the input's storage with a given geometry (torch's ``AsStridedBackward0``)."""

    node_name = "AsStridedBackward0"

    @staticmethod
    def forward(ctx, x, size, stride, offset):
        ctx.map = _StorageMap(_geometry(x), (size, stride, offset))
        return x._view_of(x._backend.as_strided(x._data, size, stride, offset))

    @staticmethod
    def backward(ctx, g):
        return StorageToInput.apply(g, ctx.map), None, None, None


class StorageToInput(Function):
    """``as_strided``'s backward as a Function of its own, so its gradient (the forward map) is differentiable."""

    node_name = "AsStridedScatterBackward0"

    @staticmethod
    def forward(ctx, g, storage_map):
        ctx.map = storage_map
        return storage_map.to_input(g)

    @staticmethod
    def backward(ctx, gg):
        return StorageToOutput.apply(gg, ctx.map), None


class StorageToOutput(Function):
    """The output's elements read from an input-shaped tensor through a storage map (``StorageToInput``'s
    backward)."""

    node_name = "AsStridedBackward0"

    @staticmethod
    def forward(ctx, x, storage_map):
        ctx.map = storage_map
        return storage_map.to_output(x)

    @staticmethod
    def backward(ctx, g):
        return StorageToInput.apply(g, ctx.map), None


def _int_tuple(values, name: str) -> tuple:
    if isinstance(values, int):
        return (values,)
    try:
        return tuple(int(v) for v in values)
    except TypeError:
        raise TypeError(f"as_strided(): argument '{name}' must be tuple of ints") from None


@declare(methods=True, samples=(Sample(T(3, 4), (2, 2), (1, 2)), Sample(T(6), (3, 2), (1, 1), 1)))
def as_strided(input: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:  # noqa: A002
    """A view of ``input``'s storage with the given sizes, element strides and offset (by default, the input's
    own offset); the elements may overlap and may lie outside ``input``, but not outside its storage."""
    size, stride = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    _check_geometry(input, size, stride, offset)
    return AsStrided.apply(input, size, stride, offset)


@declare  # (no samples: torch 2.13's gradient for input differs, tests/test_tensor_methods.py checks ours)
def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``src`` written into the elements ``input.as_strided(size, stride,
    storage_offset)`` would view (the copy's storage is fresh, so offsets count from its first element)."""
    if not isinstance(src, Tensor):
        raise not_a_tensor("as_strided_scatter", "src", 2, src)
    out = input.clone(memory_format=None)
    offset = 0 if storage_offset is None else int(storage_offset)
    view = as_strided(out, size, stride, offset)
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(
            f"expected src to have a size equal to the slice of self. src size = {_shape_list(src.shape)}, slice "
            f"size = {_shape_list(view.shape)}"
        )
    view.copy_(src)
    return out


Tensor.as_strided_scatter = as_strided_scatter


# --- unfold -------------------------------------------------------------------------------------------------
class Unfold(AsStrided):
    node_name = "UnfoldBackward0"


@declare(methods=("unfold",), name="_unfold_method", torch_name="unfold",
         samples=(Sample(T(7), 0, 3, 2), Sample(T(3, 5), 1, 2, 1), Sample(T(2, 3), 0, 2, 2)))  # fmt: skip
def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:  # noqa: A002
    """A view holding every slice of ``size`` elements along ``dimension``, ``step`` apart, in a new last dim."""
    ndim = input.dim()
    dim = wrap_dim(dimension, max(ndim, 1))
    length = input.shape[dim] if ndim else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {dim} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    strides = input.stride()
    along = strides[dim] if ndim else 1
    shape = list(input.shape)
    new_strides = list(strides)
    if ndim:
        shape[dim] = (length - size) // step + 1
        new_strides[dim] = along * step
    return Unfold.apply(input, (*shape, size), (*new_strides, along), storage_offset(input))


# --- empty_strided ------------------------------------------------------------------------------------------
@declare(differentiable=False)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:  # fmt: skip
    """A tensor with uninitialised values laid out by ``stride`` in a storage just large enough for it."""
    size, stride = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    backend = for_device(to_device(device))
    np_dtype = _dtype_or_default(dtype).numpy
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    block = backend.empty((extent,), np_dtype)
    t = Tensor._make(backend.as_strided(block, size, stride, 0))
    if requires_grad:
        t.requires_grad_(True)
    return t


@declare(methods=("new_empty_strided",), name="_new_empty_strided", differentiable=False)
def new_empty_strided(input: Tensor, size, stride, *, dtype=None, layout=None, device=None,  # noqa: A002
                      requires_grad: bool = False, pin_memory: bool = False) -> Tensor:  # fmt: skip
    """``empty_strided`` with this tensor's dtype and device (unless given)."""
    dt, dev = _new_like(input, dtype, device)
    return empty_strided(size, stride, dtype=dt, device=dev, requires_grad=requires_grad)


# --- in-place shape changes ---------------------------------------------------------------------------------
def _reshape_in_place(x: Tensor, view: Tensor) -> Tensor:
    """Give ``x`` the geometry of ``view`` (a view of ``x`` just made by a shape op) and, under autograd, the
    view's node, as torch's in-place view ops do; ``x`` keeps its storage, base and version counter."""
    x._data = view._data
    if view.grad_fn is not None:
        x.grad_fn, x._output_nr = view.grad_fn, view._output_nr
    x._bump_version()
    return x


def _shape_op_in_place(x: Tensor, op) -> Tensor:
    check_inplace(x)
    return _reshape_in_place(x, op(x))


class SqueezeInPlace(Squeeze):
    node_name = "SqueezeBackward3"


class SqueezeDimInPlace(Squeeze):
    node_name = "SqueezeBackward4"


class SqueezeDimsInPlace(Squeeze):
    node_name = "SqueezeBackward5"


class UnsqueezeInPlace(Unsqueeze):
    node_name = "UnsqueezeBackward1"


class TInPlace(MatrixTranspose):
    node_name = "TBackward1"


class TransposeInPlace(Transpose):
    node_name = "TransposeBackward1"


class AsStridedInPlace(AsStrided):
    node_name = "AsStridedBackward1"


@declare(methods=("squeeze_",), name="_squeeze_")
def squeeze_(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """In-place ``squeeze``: this tensor loses its size-1 dims (those in ``dim`` when given)."""
    if dim is None:
        return _shape_op_in_place(input, lambda x: SqueezeInPlace.apply(x, tuple(i for i, n in enumerate(x.shape)
                                                                                 if n == 1)))  # fmt: skip
    cls = SqueezeDimInPlace if isinstance(dim, int) else SqueezeDimsInPlace
    dims = tuple(wrap_dim(d, input.dim()) for d in ((dim,) if isinstance(dim, int) else dim))
    return _shape_op_in_place(input, lambda x: cls.apply(x, tuple(d for d in dims if x.dim() and x.shape[d] == 1)))


@declare(methods=("unsqueeze_",), name="_unsqueeze_")
def unsqueeze_(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """In-place ``unsqueeze``: this tensor gains a size-1 dim at ``dim``."""
    return _shape_op_in_place(input, lambda x: UnsqueezeInPlace.apply(x, wrap_dim(dim, x.dim() + 1)))


@declare(methods=("t_",), name="_t_")
def t_(input: Tensor) -> Tensor:  # noqa: A002
    """In-place ``t``: this (at most 2-d) tensor is transposed."""
    if input.dim() > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {input.dim()}D")
    return _shape_op_in_place(input, lambda x: TInPlace.apply(x, tuple(reversed(range(x.dim())))))


@declare(methods=("transpose_", "swapdims_", "swapaxes_"), name="_transpose_")
def transpose_(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    """In-place ``transpose``: dims ``dim0`` and ``dim1`` of this tensor are swapped."""
    n = max(input.dim(), 1)
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    dims = list(range(input.dim()))
    if dims:
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return _shape_op_in_place(input, lambda x: TransposeInPlace.apply(x, tuple(dims)))


@declare(methods=("as_strided_",), name="_as_strided_")
def as_strided_(input: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:  # noqa: A002
    """In-place ``as_strided``: this tensor takes the given geometry over its storage."""
    size, stride = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    _check_geometry(input, size, stride, offset)
    return _shape_op_in_place(input, lambda x: AsStridedInPlace.apply(x, size, stride, offset))


def _check_resizable(x: Tensor) -> None:
    if x.requires_grad and state.enabled:
        raise RuntimeError("cannot resize variables that require grad")


def _row_major_strides(shape: tuple) -> tuple:
    """The element strides of a contiguous tensor of ``shape`` (a size-0 or size-1 dim steps as size 1)."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _resize_to(x: Tensor, shape: tuple) -> Tensor:
    """torch's ``resize_``: row-major strides from the current offset, the storage grown (its old contents kept)
    when the new size does not fit."""
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {_shape_list(shape)}")
    if tuple(x.shape) == tuple(shape):
        return x  # (torch changes nothing, not even the version)
    backend = x._backend
    data = x._data
    offset = storage_offset(x)
    item = data.dtype.itemsize
    numel = math.prod(shape)
    strides = _row_major_strides(shape)
    capacity = int(backend.storage_nbytes(data)) // item
    if numel and offset + numel > capacity:  # a larger block, holding the old one's elements first
        block = backend.empty((offset + numel,), data.dtype)
        if capacity:
            backend.setitem(block, (slice(0, capacity),), backend.as_strided(data, (capacity,), (1,), 0))
        data = block
    x._data = backend.as_strided(data, shape, strides, offset)
    x._bump_version()  # a resize is a write, as torch counts it
    return x


@declare(methods=("resize_",), name="_resize_")
def resize_(input: Tensor, *sizes, memory_format=None) -> Tensor:  # noqa: A002
    """This tensor with the given sizes in row-major order over its storage (grown when too small); the elements
    it had stay where they are in the storage, new ones are uninitialised."""
    _check_resizable(input)
    shape = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else tuple(sizes)
    return _resize_to(input, tuple(int(s) for s in shape))


@declare(methods=("resize_as_",), name="_resize_as_")
def resize_as_(input: Tensor, the_template: Tensor, memory_format=None) -> Tensor:  # noqa: A002
    """``resize_`` to ``the_template``'s sizes."""
    _check_resizable(input)
    return _resize_to(input, tuple(the_template.shape))


@declare(methods=("resize",), name="_resize")
def resize(input: Tensor, *sizes) -> Tensor:  # noqa: A002
    """A new tensor over a copy of this one's storage, resized as ``resize_`` does (torch's deprecated form)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    out = input.detach().clone()
    return resize_(out, *sizes)


@declare(methods=("resize_as",), name="_resize_as")
def resize_as(input: Tensor, tensor: Tensor) -> Tensor:  # noqa: A002
    """A new tensor over a copy of this one's storage, resized to ``tensor``'s sizes (torch's deprecated form)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    out = input.detach().clone()
    return resize_as_(out, tensor)


class _SetNotDifferentiable(Function):
    """The node ``set_`` leaves on a tensor that requires grad: torch has no derivative for it."""

    node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, x):
        return Tensor._make(x._data)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for aten::set_ is not implemented")


@declare(methods=("set_",), name="_set_")
def set_(input: Tensor, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:  # noqa: A002
    """This tensor made to view ``source``'s storage (a tensor's, or a storage object's whole block read in this
    tensor's dtype): the same elements as ``source``, or the geometry given by ``storage_offset``, ``size`` and
    ``stride``; with no source, an empty storage."""
    check_inplace(input)
    if isinstance(source, (storage.UntypedStorage, storage.TypedStorage)):
        source = storage.block_of(source, input.dtype)
    if source is None:
        data = input._backend.empty((0,), input._data.dtype)
    else:
        if not isinstance(source, Tensor):
            raise not_a_tensor("set_", "source", 1, source)
        if source._data.dtype != input._data.dtype:
            raise RuntimeError(
                f"Could not set tensor of type {input.dtype.scalar_name} to a tensor of type {source.dtype.scalar_name}"
            )
        data = source._data
        expose(source)
        if size is not None:
            size = _int_tuple(size, "size")
            stride = _row_major_strides(size) if stride is None else _int_tuple(stride, "stride")
            _check_geometry(source, size, stride, int(storage_offset))
            data = source._backend.as_strided(data, size, stride, int(storage_offset))
    needs_node = state.enabled and (input.requires_grad or (source is not None and source.requires_grad))
    input._data = data
    input._bump_version()
    if needs_node:
        result = _SetNotDifferentiable.apply(input)
        input.grad_fn, input._output_nr = result.grad_fn, 0
    return input


# --- reductions into positions ------------------------------------------------------------------------------
_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


class ScatterReduce(Function):
    """``scatter_reduce``: every ``src`` element reduced into the position ``index`` names along ``dim``."""

    node_name = "ScatterReduceBackward0"

    @staticmethod
    def forward(ctx, x, dim, index, src, reduce, include_self):
        backend = x._backend
        out = backend.scatter_reduce(x._data, dim, index._data, src._data, reduce, include_self)
        result = Tensor._make(out)
        ctx.dim, ctx.reduce, ctx.include_self = dim, reduce, include_self
        ctx.save_for_backward(x, index, src, result)
        return result

    @staticmethod
    def backward(ctx, g):
        x, index, src, result = ctx.saved_tensors
        gx, gsrc = _scatter_reduce_grads(g, x, ctx.dim, index, src, result, ctx.reduce, ctx.include_self)
        if tuple(gsrc.shape) != tuple(src.shape):
            gsrc = _zero_padded(gsrc, tuple(src.shape))
        return (gx if ctx.needs_input_grad[0] else None), None, None, (gsrc if ctx.needs_input_grad[3] else None), \
            None, None  # fmt: skip


def _scatter_reduce_grads(g, x, dim, index, src, result, reduce, include_self) -> tuple:
    """torch's ``scatter_reduce_backward``, in differentiable ops (so that double backward follows)."""
    src = src[tuple(slice(0, s) for s in index.shape)] if tuple(src.shape) != tuple(index.shape) else src
    if reduce == "sum":
        gx, gsrc = g, gather(g, dim, index)
    elif reduce == "mean":
        counts = x.new_ones(x.shape) if include_self else x.new_zeros(x.shape)
        counts = scatter_add(counts, dim, index, src.new_ones(src.shape))
        counts = counts.masked_fill(counts == 0, 1)
        gx = g / counts
        gsrc = gather(g, dim, index) / gather(counts, dim, index)
    elif reduce == "prod":
        masked_x = x.masked_fill(x == 0, 1)
        gx = g * ScatterReduce.apply(masked_x, dim, index, src, "prod", include_self) / masked_x
        src_zero = src == 0
        zeros_at = scatter_add(x.new_zeros(x.shape), dim, index, src_zero.to(x.dtype))
        zeros_at_src = gather(zeros_at, dim, index)
        single_zero = src_zero & (zeros_at_src == 1)
        masked_src = src.masked_fill(single_zero, 1)
        masked_result = ScatterReduce.apply(x, dim, index, masked_src, "prod", include_self)
        gsrc = (gather(g * masked_result, dim, index)).where(
            single_zero, gather(g * result, dim, index) / src.masked_fill(src_zero, 1)
        )
    else:  # amax, amin: the gradient shared evenly among the elements equal to the result
        value = gather(result, dim, index)
        x_is = (x == result).to(x.dtype)
        src_is = (src == value).to(x.dtype)
        shares = scatter_add(x_is, dim, index, src_is)
        g_share = g / shares
        gx = x_is * g_share
        gsrc = src_is * gather(g_share, dim, index)
    if not include_self:
        gx = scatter(gx, dim, index, 0)
    return gx, gsrc


def _zero_padded(g: Tensor, shape: tuple) -> Tensor:
    """``g`` at the start of zeros of ``shape`` (the gradient of a ``src`` larger than its index: the elements
    past the index are not read)."""
    for d, (have, want) in enumerate(zip(g.shape, shape)):
        if have < want:
            filler = list(g.shape)
            filler[d] = want - have
            g = cat([g, g.new_zeros(filler)], d)
    return g


def _check_scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str) -> int:  # noqa: A002
    if not isinstance(src, Tensor):
        raise not_a_tensor("scatter_reduce", "src", 3, src)
    if reduce not in _SCATTER_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if index._data.dtype not in (np.int64, np.int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src._data.dtype != input._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    dim = wrap_dim(dim, max(input.dim(), 1))
    if index.dim() != input.dim() or index.dim() != src.dim():
        if index.numel():
            raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    for d in range(index.dim()):
        if index.shape[d] > src.shape[d] or (d != dim and index.shape[d] > input.shape[d]):
            raise RuntimeError(
                f"Expected index {_shape_list(index.shape)} to be no larger than self {_shape_list(input.shape)} "
                f"apart from dimension {dim} and to be no larger size than src {_shape_list(src.shape)}"
            )
    host = index._host()
    size = input.shape[dim] if input.dim() else 1
    if host.size and (host.min() < 0 or host.max() >= size):
        bad = host[(host < 0) | (host >= size)].reshape(-1)[0]
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
    return dim


@declare(
    methods=True,
    samples=(
        Sample(T(3, 4), 1, T(3, 3, dtype="int64", high=4), T(3, 3), "sum"),
        Sample(T(3, 4), 0, T(4, 4, dtype="int64", high=3), T(4, 4), "prod"),
        Sample(T(3, 4), 1, T(3, 3, dtype="int64", high=4), T(3, 3), "mean", include_self=False),
        Sample(T(4), 0, T(5, dtype="int64", high=4), T(5), "amax"),
        Sample(T(4), 0, T(5, dtype="int64", high=4), T(5), "amin", include_self=False),
    ),
)
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,  # noqa: A002
                   include_self: bool = True) -> Tensor:  # fmt: skip
    """A copy of ``input`` with each ``src`` element reduced (``sum``, ``prod``, ``mean``, ``amax``, ``amin``)
    into the position ``index`` names along ``dim``; without ``include_self`` the positions that receive
    elements reduce those alone. Integer means round down. torch's older names ``max``/``min`` are accepted."""
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)
    dim = _check_scatter_reduce(input, dim, index, src, reduce)
    return ScatterReduce.apply(input, dim, index.long(), src, reduce, bool(include_self))


@declare(methods=("scatter_reduce_",), name="_scatter_reduce_")
def scatter_reduce_(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,  # noqa: A002
                    include_self: bool = True) -> Tensor:  # fmt: skip
    """In-place ``scatter_reduce``: the result written into this tensor (checked first)."""
    return write_inplace(
        input, lambda x: scatter_reduce(x, dim, index, src, reduce, include_self=include_self), (index, src)
    )


class IndexReduce(ScatterReduce):
    node_name = "IndexReduceBackward0"


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _along_dim(index: Tensor, dim: int, shape: tuple) -> Tensor:
    """A 1-d index (one entry per slice of ``source`` along ``dim``) spread to ``source``'s shape, as ``scatter``
    reads it."""
    view = [1] * len(shape)
    if shape:
        view[dim] = -1
    return index.reshape(view).expand(shape) if shape else index.reshape(())


@declare(
    methods=True,
    samples=(
        Sample(T(3, 4), 0, T(5, dtype="int64", high=3), T(5, 4), "prod"),
        Sample(T(3, 4), 1, T(2, dtype="int64", high=4), T(3, 2), "mean", include_self=False),
        Sample(T(4, 2), 0, T(3, dtype="int64", high=4), T(3, 2), "amax"),
        Sample(T(4, 2), 0, T(3, dtype="int64", high=4), T(3, 2), "amin", include_self=False),
    ),
)
def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,  # noqa: A002
                 include_self: bool = True) -> Tensor:  # fmt: skip
    """A copy of ``input`` with slice ``i`` of ``source`` along ``dim`` reduced (``prod``, ``mean``, ``amax``,
    ``amin``) into slice ``index[i]``; without ``include_self`` the slices that receive reduce those alone."""
    warnings.warn("index_reduce() is in beta and the API may change at any time.", UserWarning, stacklevel=2)
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if not isinstance(index, Tensor):
        raise not_a_tensor("index_reduce", "index", 3, index)
    if index._data.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: {index.dtype.scalar_name}")
    if index.dim() > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if not isinstance(source, Tensor):
        raise not_a_tensor("index_reduce", "source", 4, source)
    if source._data.dtype != input._data.dtype:
        raise RuntimeError(
            f"index_reduce_(): self ({input.dtype.scalar_name}) and source ({source.dtype.scalar_name}) must have "
            "the same scalar type"
        )
    dim = wrap_dim(dim, max(input.dim(), 1))
    n = index.numel()
    if input.dim() and (source.dim() != input.dim() or source.shape[dim] != n or any(
            source.shape[d] != input.shape[d] for d in range(input.dim()) if d != dim)):  # fmt: skip
        raise RuntimeError("index_reduce_(): Source/destination tensor must have the same shape except for the "
                           f"dimension {dim}")  # fmt: skip
    size = input.shape[dim] if input.dim() else 1
    host = index._host().reshape(-1)
    if host.size and (host.min() < 0 or host.max() >= size):
        raise IndexError("index out of range in self")
    spread = _along_dim(index.long(), dim, tuple(source.shape))
    return IndexReduce.apply(input, dim, spread.contiguous(), source, reduce, bool(include_self))


@declare(methods=("index_reduce_",), name="_index_reduce_")
def index_reduce_(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,  # noqa: A002
                  include_self: bool = True) -> Tensor:  # fmt: skip
    """In-place ``index_reduce``: the result written into this tensor (checked first)."""
    return write_inplace(
        input, lambda x: index_reduce(x, dim, index, source, reduce, include_self=include_self), (index, source)
    )


# --- in-place forms of existing ops -------------------------------------------------------------------------
def _inplace_of(op, name: str, doc: str):
    """``t.<name>(...)``: ``op(t, ...)`` written into ``t`` (torch's checks first, so a refusal writes nothing)."""

    def inplace(input: Tensor, *args, **kwargs) -> Tensor:  # noqa: A002
        operands = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        return write_inplace(input, lambda x: op(x, *args, **kwargs), operands)

    inplace.__name__ = inplace.__qualname__ = name
    inplace.__doc__ = doc
    register(Declaration(f"_{name}", inplace, (name,)))
    return inplace


for _name in ("addbmm", "addmv", "addr", "gcd", "lcm", "ldexp", "renorm"):
    _inplace_of(getattr(more, _name), _name + "_", f"In-place ``{_name}``: the result written into this tensor.")


@declare(methods=("float_power_",), name="_float_power_")
def float_power_(input: Tensor, exponent) -> Tensor:  # noqa: A002
    """In-place ``float_power``: the result is double precision, so this tensor must be float64."""
    if input._data.dtype != np.float64:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {input.dtype.scalar_name} but the operation's result requires "
            "dtype Double"
        )
    operands = (exponent,) if isinstance(exponent, Tensor) else ()
    return write_inplace(input, lambda x: more.float_power(x, exponent), operands)


# --- random fills -------------------------------------------------------------------------------------------
def _check_floating(input: Tensor, what: str) -> None:  # noqa: A002
    if input._data.dtype.kind != "f":
        raise RuntimeError(
            f"{what} is a continuous probability distribution. dtype must be a floating point but you specified "
            f"{_CPP_NAMES[input.dtype.name]}"
        )


@declare(methods=("cauchy_",), name="_cauchy_")
def cauchy_(input: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with draws of the Cauchy distribution centred at ``median`` with scale ``sigma``."""
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    _check_floating(input, "Cauchy distribution")
    return random_fill_(input, median + sigma * _rng_for(generator).standard_cauchy(input.shape))


@declare(methods=("log_normal_",), name="_log_normal_")
def log_normal_(input: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with ``exp`` of draws of N(mean, std^2)."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f"\"log_normal_cpu\" not implemented for '{input.dtype.scalar_name}'")
    return random_fill_(input, _rng_for(generator).lognormal(mean, std, input.shape))


@declare(methods=("geometric_",), name="_geometric_")
def geometric_(input: Tensor, p: float, *, generator=None) -> Tensor:  # noqa: A002
    """Fill with the number of Bernoulli(``p``) trials up to and including the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return random_fill_(input, _rng_for(generator).geometric(p, input.shape))


# --- layout and dtype predicates (answers for dense real tensors) -------------------------------------------
def _false(self: Tensor) -> bool:
    return False


for _name in ("is_meta", "is_mkldnn", "is_mps", "is_mtia", "is_maia", "is_xla", "is_xpu", "is_ipu", "is_vulkan",
              "is_quantized", "is_nested", "is_sparse_csr"):  # fmt: skip
    setattr(Tensor, _name, property(_false, doc=f"``{_name}``: False, numbagrad tensors are dense CPU/CUDA arrays."))

_FALSE_BECAUSE = {
    "is_neg": "real tensors carry no lazy negation",
    "is_distributed": "torch's legacy flag, False for every dense tensor",
    "is_pinned": "host storage is ordinary (pageable) numpy memory",
    "is_shared": "host storage is ordinary process memory",
}


def _false_method(name: str, reason: str):
    def answer(self: Tensor) -> bool:
        return False

    answer.__name__ = answer.__qualname__ = name
    answer.__doc__ = f"``{name}()``: False, as {reason}."
    return answer


for _name, _reason in _FALSE_BECAUSE.items():
    setattr(Tensor, _name, _false_method(_name, _reason))


def is_signed(self: Tensor) -> bool:
    """True for dtypes that hold negative values (floats, complex and signed integers; not bool or uint8)."""
    return self._data.dtype.kind in "fic"


def is_nonzero(self: Tensor) -> bool:
    """The truth of a one-element tensor (torch's error for any other size)."""
    n = self.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self._host().reshape(-1)[0])


def is_same_size(self: Tensor, other: Tensor) -> bool:
    """True when ``other`` has the same sizes."""
    return tuple(self.shape) == tuple(other.shape)


def is_set_to(self: Tensor, tensor: Tensor) -> bool:
    """True when both tensors view the same storage with the same geometry."""
    return (
        self.data_ptr() == tensor.data_ptr()
        and tuple(self.shape) == tuple(tensor.shape)
        and self.stride() == tensor.stride()
        and self.dtype == tensor.dtype
    )


def get_device(self: Tensor) -> int:
    """The index of the GPU holding this tensor, -1 for the CPU."""
    device = self.device
    return -1 if device.type == "cpu" else (device.index or 0)


def dim_order(self: Tensor, *, ambiguity_check: bool = False) -> tuple:
    """The dims from outermost to innermost in memory (by decreasing stride; ties keep the dims' order)."""
    strides = self.stride()
    return tuple(sorted(range(self.dim()), key=lambda d: -strides[d]))


def const_data_ptr(self: Tensor) -> int:
    """The address of the first element (``data_ptr``; numbagrad has no read-only pointer)."""
    return self.data_ptr()


def ndimension(self: Tensor) -> int:
    """The number of dims (``dim()``)."""
    return self.dim()


def share_memory_(self: Tensor) -> Tensor:
    """Nothing to move: CPU storage is an ordinary numpy array that ``multiprocessing`` pickles, so the tensor is
    returned as it is (torch moves storage into shared memory here)."""
    return self


def _grad_dtype(self: Tensor):
    """The dtype a gradient of this tensor has: its own."""
    return self.dtype


for _fn in (is_signed, is_nonzero, is_same_size, is_set_to, get_device, dim_order, const_data_ptr, ndimension,
            share_memory_):  # fmt: skip
    setattr(Tensor, _fn.__name__, _fn)
Tensor.grad_dtype = property(_grad_dtype)
Tensor.volatile = property(_false, doc="``volatile``: always False (torch's removed flag; use ``no_grad``).")
Tensor.name = None  # torch's named-tensor field, None for unnamed tensors


# --- views and copies that other ops already make -----------------------------------------------------------
def positive(self: Tensor) -> Tensor:
    """This tensor itself (``+t``); bool tensors are refused, as in torch."""
    if self._data.dtype == np.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return self


def resolve_conj(self: Tensor) -> Tensor:
    """A conjugate view's values in a tensor of its own; any other tensor itself."""
    return complex_ops.resolve_conj(self)


def resolve_neg(self: Tensor) -> Tensor:
    """This tensor: real tensors carry no lazy negation to resolve."""
    return self


def conj(self: Tensor) -> Tensor:
    """The conjugate: a lazy view of a complex tensor, a real tensor itself."""
    return complex_ops.conj(self)


def conj_physical(self: Tensor) -> Tensor:
    """The conjugate in a new tensor (a copy of a real tensor)."""
    return complex_ops.conj_physical(self)


def conj_physical_(self: Tensor) -> Tensor:
    """Conjugate in place (nothing to write for a real tensor)."""
    if self._data.dtype.kind != "c":
        return self
    return write_inplace(self, complex_ops.conj_physical)


def _real(self: Tensor) -> Tensor:
    """The real parts as a view sharing the storage (a real tensor is its own real part)."""
    return complex_ops.real(self)


def _imag(self: Tensor) -> Tensor:
    """The imaginary parts as a view sharing the storage (torch's error for a real tensor)."""
    return complex_ops.imag(self)


def isreal(self: Tensor) -> Tensor:
    """True everywhere: every element of a real tensor is real."""
    return self.new_ones(self.shape, dtype=bool_)


def adjoint(self: Tensor) -> Tensor:
    """The conjugate transpose: the last two dims swapped, a complex tensor lazily conjugated."""
    if self.dim() < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{self.dim()}-D tensor.")  # fmt: skip
    return complex_ops.conj(self.transpose(-2, -1))


def msort(self: Tensor) -> Tensor:
    """The values sorted along dim 0."""
    return self.sort(dim=0).values


def narrow_copy(self: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``narrow``'s elements in a new tensor."""
    return self.narrow(dim, start, length).clone()


def split_with_sizes(self: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Views of consecutive pieces of ``split_sizes`` elements along ``dim`` (the sizes must add up)."""
    sizes = [int(s) for s in split_sizes]
    if sum(sizes) != self.shape[wrap_dim(dim, self.dim())]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {self.shape[wrap_dim(dim, self.dim())]} "
            f"(input tensor's size at dimension {dim}), but got split_sizes={_shape_list(sizes)}"
        )
    return self.split(sizes, dim)


def unsafe_split(self: Tensor, split_size: int, dim: int = 0) -> tuple:
    """``split`` (torch's form whose pieces may be changed in place without its view checks)."""
    return self.split(split_size, dim)


def unsafe_split_with_sizes(self: Tensor, split_sizes, dim: int = 0) -> tuple:
    """``split_with_sizes`` (torch's form whose pieces may be changed in place without its view checks)."""
    return split_with_sizes(self, split_sizes, dim)


def unsafe_chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple:
    """``chunk`` (torch's form whose pieces may be changed in place without its view checks)."""
    return self.chunk(chunks, dim)


def dist(self: Tensor, other: Tensor, p=2) -> Tensor:
    """The ``p``-norm of ``self - other`` (broadcast)."""
    return (self - other).norm(p)


def hardshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """``nn.functional.hardshrink``: zero where ``|x| <= lambd`` (the table row ``hardshrink``)."""
    if not self.is_floating_point():
        raise NotImplementedError(f"\"hardshrink_cpu\" not implemented for '{self.dtype.scalar_name}'")
    return CLASSES["hardshrink"][""].apply(self, lambd)


def angle(self: Tensor) -> Tensor:
    """The argument of each element as a complex number: pi for negative values, 0 otherwise (NaN stays);
    integers give the default float dtype. Its gradient is zero, as torch's for real input."""
    if self._data.dtype.kind == "c":
        return complex_ops.angle_complex(self)
    x = self if self._data.dtype.kind == "f" else self.to(get_default_dtype())
    with no_grad():
        value = (x < 0).to(x.dtype) * math.pi
        value = value.where(~x.isnan(), x)
    return x * 0 + value if x.requires_grad else value


for _fn in (positive, resolve_conj, resolve_neg, conj, conj_physical, conj_physical_, isreal, adjoint, msort,
            narrow_copy, split_with_sizes, unsafe_split, unsafe_split_with_sizes, unsafe_chunk, dist, hardshrink,
            angle):  # fmt: skip
    setattr(Tensor, _fn.__name__, _fn)
Tensor.real = property(_real)
Tensor.imag = property(_imag)


# --- the rest of torch's Tensor methods -----------------------------------------------------------------------
def map2_(self: Tensor, x: Tensor, y: Tensor, callable) -> Tensor:  # noqa: A002
    """``self[i] = callable(self[i], x[i], y[i])`` in place, ``x`` and ``y`` broadcast to this tensor's shape
    (compiled by Numba as ``map_``'s function is)."""
    if self.requires_grad:
        raise RuntimeError("Can't call map2_() on Variable that requires grad. Use var.detach().map2_() instead.")
    for name, other in (("x", x), ("y", y)):
        if not isinstance(other, Tensor) or other.dtype != self.dtype:
            got = f"torch.{other.dtype.scalar_name}Tensor" if isinstance(other, Tensor) else type(other).__name__
            raise TypeError(f"map2_: expected torch.{self.dtype.scalar_name}Tensor for argument '{name}' (got {got})")
    if not _callable(callable):
        raise TypeError(f"'{type(callable).__name__}' object is not callable")
    if self._data.size:
        backend = self._backend
        others = [backend.copy(backend.broadcast_to(o._data, self.shape)).reshape(-1) for o in (x, y)]
        apply._run(self, callable, others, "map2_")
    self._bump_version()
    return self


_callable = callable


class Alias(Function):
    """The same storage under another Python class (``as_subclass``): a view whose gradient passes through."""

    node_name = "AliasBackward0"

    @staticmethod
    def forward(ctx, x, cls):
        out = x._view_of(x._data)
        out.__class__ = cls
        return out

    @staticmethod
    def backward(ctx, g):
        return g, None


def as_subclass(self: Tensor, cls: type) -> Tensor:
    """This tensor's storage and history as an instance of ``cls`` (a subclass of Tensor)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(
            "Creating a Tensor subclass from a class that does not inherit from Tensor is not possible. Make sure "
            "your class inherits from Tensor."
        )
    return Alias.apply(self, cls)


def nonzero_static(self: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero()``'s rows, cut or padded with ``fill_value`` to exactly ``size`` rows."""
    if not isinstance(size, int) or size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    found = self.nonzero()
    if found.shape[0] >= size:
        return found[:size].clone()
    pad = found.new_full((size - found.shape[0], found.shape[1]), fill_value)
    return cat([found, pad])


def module_load(self: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """What ``load_state_dict`` swaps in for this parameter or buffer: ``other`` detached when assigning, else
    this tensor with ``other`` copied into it, detached."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


for _fn in (map2_, as_subclass, nonzero_static, module_load):
    setattr(Tensor, _fn.__name__, _fn)


# --- statistics and flat writes -------------------------------------------------------------------------------
def cov(self: Tensor, *, correction: int = 1, fweights: Tensor | None = None, aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in the rows (observations in the columns; a 1-d tensor is one
    variable), with ``correction`` subtracted from the degrees of freedom and optional integer frequency and
    float importance weights of the observations."""
    if self.dim() > 2:
        raise RuntimeError(
            f"cov(): expected input to have two or fewer dimensions but got an input with {self.dim()} dimensions"
        )
    x = self.reshape(1, -1) if self.dim() < 2 else self
    if not x.is_floating_point():
        x = x.to(get_default_dtype())
    n = x.shape[1]
    weight = None
    for name, w, kind in (("fweights", fweights, "iu"), ("aweights", aweights, "f")):
        if w is None:
            continue
        if w.dim() > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{w.dim()} dimensions")  # fmt: skip
        if w.numel() != n:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                               f"input but got {w.numel()} != {n}")  # fmt: skip
        if w._data.dtype.kind not in kind:
            wanted = "integral" if kind == "iu" else "floating point"
            raise RuntimeError(f"cov(): expected {name} to have {wanted} dtype but got {name} with "
                               f"{w.dtype.scalar_name} dtype")  # fmt: skip
        if bool((w < 0).any()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        weight = w if weight is None else weight * w
    if weight is None:
        total = n
        mean = x.mean(1, keepdim=True)
        dof = n - correction
    else:
        weight = weight.to(x.dtype)
        total = weight.sum()
        mean = (x * weight).sum(1, keepdim=True) / total
        if correction == 0:
            dof = total
        elif aweights is None:
            dof = total - correction
        else:
            dof = total - correction * (weight * aweights).sum() / total
    if float(dof) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)  # fmt: skip
        dof = dof * 0 if isinstance(dof, Tensor) else 0
    centred = x - mean
    weighted = centred if weight is None else centred * weight
    result = weighted.matmul(centred.t()) / dof
    return result.squeeze() if self.dim() < 2 else result


def corrcoef(self: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the variables in the rows, clipped to [-1, 1]."""
    c = cov(self)
    if c.dim() == 0:
        return c / c
    d = c.diagonal()
    stddev = d.sqrt()
    c = c / stddev.unsqueeze(1) / stddev.unsqueeze(0)
    return c.clamp(-1, 1)


class Put(Function):
    """``put``: ``source`` written (or added) at flat positions ``index`` of a copy of the input."""

    node_name = "PutBackward0"

    @staticmethod
    def forward(ctx, x, index, source, accumulate):
        ctx.save_for_backward(index)
        ctx.accumulate, ctx.shape = accumulate, tuple(x.shape)
        flat = x.reshape(-1).clone()
        flat.index_put_((index.reshape(-1),), source.reshape(-1), accumulate=accumulate)
        return flat.reshape(ctx.shape)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gx = g if ctx.accumulate else Put.apply(g, index, g.new_zeros(index.shape), False)
        gsource = g.reshape(-1).index_select(0, index.reshape(-1)).reshape(index.shape)
        return gx, None, gsource, None


def _check_put(self: Tensor, index: Tensor, source: Tensor) -> Tensor:
    if index._data.dtype != np.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {index.dtype.scalar_name}")
    if source._data.dtype != self._data.dtype:
        raise RuntimeError(
            f"put_(): self and source expected to have the same dtype, but got self.dtype = {self.dtype.scalar_name}"
            f" and source.dtype = {source.dtype.scalar_name}"
        )
    if source.numel() != index.numel():
        raise IndexError(
            "put_(): Expected source and index to have the same number of elements, but got source.numel() = "
            f"{source.numel()}, index.numel() = {index.numel()}"
        )
    n = self.numel()
    host = index._host().reshape(-1)
    bad = host[(host < -n) | (host >= n)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {bad[0]} on a tensor of {n} elements.")
    return index % max(n, 1) if host.size and host.min() < 0 else index


def put(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy with ``source`` written (or, with ``accumulate``, added) at the flat positions ``index`` (negative
    positions count from the end)."""
    index = _check_put(self, index, source)
    return Put.apply(self, index, source, bool(accumulate))


def put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place ``put``: the result written into this tensor (checked first)."""
    check_inplace(self)
    _check_put(self, index, source)
    return write_inplace(self, lambda x: put(x, index, source, accumulate), (index, source))


for _fn in (cov, corrcoef, put, put_):
    setattr(Tensor, _fn.__name__, _fn)
