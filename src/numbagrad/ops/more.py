"""More of torch's tensor functions, composed from the differentiable ops (views, indexing, cat, matmul, ...) so
their gradients and double backward come from those ops; ``Take`` and ``IndexCopy`` are Functions of their own
because torch names their nodes and no composition gives those nodes.
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

from .._tensor import Tensor
from .._types import Size, bool_, float64, int32, int64, wrap_dim
from .._types import broadcast_shapes as _broadcast_shapes
from ..autograd.function import Function
from ..autograd.grad_mode import state as grad_state
from . import complex_ops, creation, indexing, inplace, linalg, reduction, shape
from ._common import autocast_to, not_a_tensor, result_type
from ._registry import Sample, T, declare


def _int_tuple(value) -> tuple:
    """An int or a sequence of ints as a tuple."""
    if isinstance(value, (int, np.integer)):
        return (int(value),)
    return tuple(int(v) for v in value)


def _size_str(x: Tensor) -> str:
    return "[" + ", ".join(str(s) for s in x.shape) + "]"


# --- views and reshapes ----------------------------------------------------------------------------------------


@declare(methods=True, aliases=("moveaxis",), samples=(Sample(T(2, 3, 4), 0, 2), Sample(T(2, 3, 4), (0, 1), (2, 0))))
def movedim(input: Tensor, source, destination) -> Tensor:  # noqa: A002
    """A view with the dims ``source`` moved to positions ``destination``, the others keeping their order."""
    src, dst = _int_tuple(source), _int_tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the same number "
            f"of dims as destination ({list(dst)} dims)"
        )
    n = input.dim()
    src = tuple(wrap_dim(d, n) for d in src)
    dst = tuple(wrap_dim(d, n) for d in dst)
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(_int_tuple(source))})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(_int_tuple(destination))})")
    order = [-1] * max(n, 1)
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [o if o != -1 else next(rest) for o in order]
    return shape.permute(input, *order[:n]) if n else shape.permute(input, ())  # (a 0-dim tensor: a view of it)


@declare(methods=True, samples=(Sample(T(3, 4), 0, 1), Sample(T(3, 4), 1, -1)))
def select(input: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """A view of the slice at ``index`` of ``dim`` (that dim removed)."""
    if input.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(int(dim), input.dim())
    size = input.shape[d]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {_size_str(input)} at dimension {d}")
    return input[(slice(None),) * d + (index,)]


@declare(methods=True, samples=(Sample(T(2, 6), 1, (2, 3)), Sample(T(6, 2), 0, (-1, 2))))
def unflatten(input: Tensor, dim: int, sizes) -> Tensor:  # noqa: A002
    """``dim`` split into the dims ``sizes`` (one of them may be -1)."""
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    d = wrap_dim(int(dim), input.dim())
    n = input.shape[d]
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1 or known == 0 or n % known:
            raise RuntimeError(
                f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {int(dim)} ({n}) in "
                f"the input tensor"
            )
        sizes = tuple(n // known if s == -1 else s for s in sizes)
    elif math.prod(sizes) != n:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {int(dim)} ({n}) in the "
            f"input tensor"
        )
    return shape.view(input, tuple(input.shape[:d]) + sizes + tuple(input.shape[d + 1 :]))


@declare(methods=True, samples=(Sample(T(2, 3)),))
def ravel(input: Tensor) -> Tensor:  # noqa: A002
    """The elements as one dim: a view when the strides allow it, else a copy."""
    return shape.reshape(input, -1)


# --- indexing --------------------------------------------------------------------------------------------------


class Take(Function):
    """``input`` read as 1-D at ``index``; the gradient adds back into zeros of the input's shape."""

    node_name = "TakeBackward0"

    @staticmethod
    def forward(ctx, x, index):
        ctx.shape = tuple(x.shape)
        ctx.save_for_backward(index)
        flat = shape.reshape(x, -1)
        return shape.reshape(indexing.index_select(flat, 0, shape.reshape(index, -1)), tuple(index.shape)).clone()

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = creation.zeros(math.prod(ctx.shape), dtype=g.dtype, device=g.device)
        return shape.reshape(
            indexing.index_add(zeros, 0, shape.reshape(index, -1), shape.reshape(g, -1)), ctx.shape
        ), None


@declare(methods=True, samples=(Sample(T(2, 3), T(4, dtype="int64", high=6)), Sample(T(3), T(2, 2, dtype="int64"))))
def take(input: Tensor, index: Tensor) -> Tensor:  # noqa: A002
    """The elements of ``input`` read as 1-D at ``index`` (negative indices count from the end), in ``index``'s
    shape."""
    if index.dtype != int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {_dtype_name(index.dtype)}")
    n = input.numel()
    idx = index.detach().numpy() if index.numel() else np.zeros(0, np.int64)
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad.flat[0])} on a tensor of {n} elements.")
    if n and idx.size and (idx < 0).any():
        index = index.remainder(n)
    return Take.apply(input, index)


def _dtype_name(d) -> str:
    """A dtype as torch's C++ messages name it (``Float``, ``Long``)."""
    return {
        "float32": "Float",
        "float64": "Double",
        "float16": "Half",
        "bfloat16": "BFloat16",
        "int64": "Long",
        "int32": "Int",
        "int16": "Short",
        "int8": "Char",
        "uint8": "Byte",
        "bool": "Bool",
        "complex64": "ComplexFloat",
        "complex128": "ComplexDouble",
    }.get(str(d).replace("numbagrad.", "").replace("torch.", ""), str(d))


@declare(
    methods=True,
    samples=(
        Sample(T(3, 4), T(3, 2, dtype="int64", high=4), 1),
        Sample(T(3, 4), T(5, dtype="int64", high=12)),
        Sample(T(3, 4), T(1, 4, dtype="int64", high=3), 0),
    ),
)
def take_along_dim(input: Tensor, indices: Tensor, dim=None) -> Tensor:  # noqa: A002
    """``gather`` along ``dim`` after broadcasting the other dims of ``input`` and ``indices`` together; without
    ``dim`` both are read as 1-D."""
    if indices.dtype != int64:
        raise RuntimeError(
            f"torch.take_along_dim(): dtype of indices should be Long but got {_dtype_name(indices.dtype)}"
        )
    if dim is None:
        return indexing.gather(shape.reshape(input, -1), 0, shape.reshape(indices, -1))
    if input.dim() != indices.dim():
        raise RuntimeError(
            f"torch.take_along_dim(): input and indices should have the same number of dimensions, but got "
            f"{input.dim()} dimensions for input, and {indices.dim()} dimensions for indices"
        )
    d = wrap_dim(int(dim), input.dim())
    in_shape, idx_shape = list(input.shape), list(indices.shape)
    in_shape[d] = idx_shape[d] = 1
    common = list(_broadcast_shapes(tuple(in_shape), tuple(idx_shape)))
    in_target, idx_target = list(common), list(common)
    in_target[d], idx_target[d] = input.shape[d], indices.shape[d]
    x = input if list(input.shape) == in_target else shape.expand(input, tuple(in_target))
    i = indices if list(indices.shape) == idx_target else shape.expand(indices, tuple(idx_target))
    return indexing.gather(x, d, i)


class IndexCopy(Function):
    """``x`` with the slices of ``dim`` at ``index`` replaced by ``source``'s."""

    node_name = "IndexCopyBackward0"

    @staticmethod
    def forward(ctx, x, dim, index, source):
        ctx.dim = dim
        ctx.save_for_backward(index)
        out = x._backend.copy(x._data)
        x._backend.setitem(out, (slice(None),) * dim + (index._data,), source._data)
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gx = indexing.index_fill(g, ctx.dim, index, 0) if ctx.needs_input_grad[0] else None
        gs = indexing.index_select(g, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return gx, None, None, gs


@declare(
    methods=True,
    samples=(
        Sample(T(4, 3), 0, T(1, dtype="int64", high=4), T(1, 3)),
        Sample(T(3, 4), 1, T(1, dtype="int64", high=4), T(3, 1)),
    ),
)
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """A copy of ``input`` whose slices of ``dim`` at ``index`` are ``source``'s slices, in order."""
    if not isinstance(index, Tensor):
        raise TypeError(f"index_copy(): argument 'index' (position 3) must be Tensor, not {type(index).__name__}")
    if index.dtype != int64:
        raise RuntimeError("index_copy_(): Expected a long tensor for index, but got " + _dtype_name(index.dtype))
    if index.dim() > 1:
        raise IndexError("index_copy_(): Index should have dimension 1 or 0 (got " + str(index.dim()) + ")")
    if source.dtype != input.dtype:
        raise RuntimeError(
            f"index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{_dtype_name(input.dtype)} and (source) {_dtype_name(source.dtype)}"
        )
    d = wrap_dim(int(dim), input.dim())
    n = input.shape[d] if input.dim() else 1
    idx = index.detach().numpy().reshape(-1)
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise IndexError(f"index_copy_(): index {int(bad[0])} is out of bounds for dimension {d} with size {n}")
    index = shape.reshape(index, -1)
    expected = list(input.shape)
    if expected:
        expected[d] = index.numel()
    if list(source.shape) != expected and source.numel() != math.prod(expected):
        raise RuntimeError("index_copy_(): Source/destination tensor must have same slice shapes.")
    if list(source.shape) != expected:
        source = shape.reshape(source, tuple(expected))
    return IndexCopy.apply(input, d, index, source)


@declare(methods=("index_copy_",), name="_index_copy_")
def index_copy_(input: Tensor, dim: int, index, source: Tensor) -> Tensor:  # noqa: A002
    """``index_copy`` written into ``input``."""
    return inplace.write_inplace(input, lambda t: index_copy(t, dim, index, source), (source,))


# --- splitting and stacking ------------------------------------------------------------------------------------


def _split_at(input: Tensor, bounds: list, d: int) -> tuple:
    """The slices of dim ``d`` between consecutive ``bounds`` (clamped to the dim, as Python slices)."""
    size = input.shape[d]
    out = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        start = min(max(start, 0), size)
        stop = min(max(stop, start), size)
        out.append(input[(slice(None),) * d + (slice(start, stop),)])
    return tuple(out)


@declare(methods=True, samples=(Sample(T(5, 2), 3), Sample(T(2, 6), [1, 4], 1), Sample(T(7), (2, 9))))
def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:  # noqa: A002
    """Views of ``input`` split along ``dim`` into ``n`` nearly equal parts (the first ``size % n`` one longer), or
    at the listed indices."""
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = wrap_dim(int(dim), input.dim())
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.dtype != int64:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                + _dtype_name(indices_or_sections.dtype)
            )
        if indices_or_sections.dim() > 1:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional "
                f"tensor, but got a tensor with {indices_or_sections.dim()} dims"
            )
        values = indices_or_sections.tolist()
        indices_or_sections = values
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        size = input.shape[d]
        base, extra = divmod(size, n)
        bounds = [0]
        for k in range(n):
            bounds.append(bounds[-1] + base + (1 if k < extra else 0))
        return _split_at(input, bounds, d)
    return _split_at(input, [0, *(int(i) for i in indices_or_sections), input.shape[d]], d)


def _direction_split(name: str, input: Tensor, indices_or_sections, dim: int, min_dims: int) -> tuple:
    if input.dim() < min_dims:
        raise RuntimeError(
            f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor with "
            f"{input.dim()} dimensions!"
        )
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        size = input.shape[dim]
        if n == 0 or size % n:
            raise RuntimeError(
                f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension {size} is "
                f"not divisible by the split_size {n}!"
            )
    return tensor_split(input, indices_or_sections, dim)


@declare(methods=True, samples=(Sample(T(2, 4), 2), Sample(T(6), [1, 4])))
def hsplit(input: Tensor, indices_or_sections) -> tuple:  # noqa: A002
    """``tensor_split`` along dim 1 (dim 0 of a 1-D tensor); a section count must divide the dim."""
    return _direction_split("hsplit", input, indices_or_sections, 1 if input.dim() > 1 else 0, 1)


@declare(methods=True, samples=(Sample(T(4, 2), 2), Sample(T(5, 2), [1, 3])))
def vsplit(input: Tensor, indices_or_sections) -> tuple:  # noqa: A002
    """``tensor_split`` along dim 0 of a tensor of at least 2 dims; a section count must divide the dim."""
    return _direction_split("vsplit", input, indices_or_sections, 0, 2)


@declare(methods=True, samples=(Sample(T(2, 2, 4), 2), Sample(T(1, 2, 5), [3])))
def dsplit(input: Tensor, indices_or_sections) -> tuple:  # noqa: A002
    """``tensor_split`` along dim 2 of a tensor of at least 3 dims; a section count must divide the dim."""
    return _direction_split("dsplit", input, indices_or_sections, 2, 3)


@declare(samples=(Sample(T(3)), Sample(T(2, 3))))
def atleast_1d(*tensors):
    """Each tensor as at least 1-D (0-d ones as views of shape ``(1,)``); one tensor gives a tensor, several a
    tuple."""
    return _atleast(tensors, 1)


@declare(samples=(Sample(T(3)), Sample(T(2, 3))))
def atleast_2d(*tensors):
    """Each tensor as at least 2-D: 0-d as ``(1, 1)``, 1-D ``(n,)`` as ``(1, n)``."""
    return _atleast(tensors, 2)


@declare(samples=(Sample(T(3)), Sample(T(2, 3)), Sample(T(2, 3, 2))))
def atleast_3d(*tensors):
    """Each tensor as at least 3-D: 0-d as ``(1, 1, 1)``, ``(n,)`` as ``(1, n, 1)``, ``(m, n)`` as ``(m, n, 1)``."""
    return _atleast(tensors, 3)


def _atleast(tensors: tuple, ndim: int):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    out = tuple(_raise_dims(t, ndim) for t in tensors)
    return out[0] if single else out


def _raise_dims(t: Tensor, ndim: int) -> Tensor:
    n = t.dim()
    if n >= ndim:
        return t
    if n == 0:
        return shape.reshape(t, (1,) * ndim)
    if ndim == 2:
        return shape.unsqueeze(t, 0)
    if n == 1:
        return shape.unsqueeze(shape.unsqueeze(t, 0), 2)
    return shape.unsqueeze(t, 2)


def _tensor_list(name: str, tensors) -> list:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


@declare(samples=(Sample([T(2, 3), T(2, 1)]), Sample([T(3), T(2)])))
def hstack(tensors) -> Tensor:
    """Concatenate along dim 1 (dim 0 for 1-D tensors), after ``atleast_1d``."""
    tensors = [_raise_dims(t, 1) for t in _tensor_list("hstack", tensors)]
    return shape.cat(tensors, 0 if tensors[0].dim() == 1 else 1)


@declare(aliases=("row_stack",), samples=(Sample([T(2, 3), T(1, 3)]), Sample([T(3), T(3)])))
def vstack(tensors) -> Tensor:
    """Concatenate along dim 0 after ``atleast_2d`` (1-D tensors become rows)."""
    return shape.cat([_raise_dims(t, 2) for t in _tensor_list("vstack", tensors)], 0)


@declare(samples=(Sample([T(2, 3), T(2, 3)]), Sample([T(3), T(3)]), Sample([T(1, 2, 1), T(1, 2, 2)])))
def dstack(tensors) -> Tensor:
    """Concatenate along dim 2 after ``atleast_3d``."""
    return shape.cat([_raise_dims(t, 3) for t in _tensor_list("dstack", tensors)], 2)


@declare(samples=(Sample([T(3), T(3, 2)]), Sample([T(2, 2), T(2)])))
def column_stack(tensors) -> Tensor:
    """Concatenate along dim 1, 0-d and 1-D tensors first made columns ``(n, 1)``."""
    cols = [shape.reshape(t, (t.numel(), 1)) if t.dim() <= 1 else t for t in _tensor_list("column_stack", tensors)]
    return shape.cat(cols, 1)


# --- rearranging -----------------------------------------------------------------------------------------------


@declare(methods=True, samples=(Sample(T(2, 3), (2, 2)), Sample(T(2, 3), (3,)), Sample(T(3), (2, 1, 2))))
def tile(input: Tensor, dims) -> Tensor:  # noqa: A002
    """``repeat`` with ``dims`` padded with leading 1s to the input's number of dims."""
    dims = _int_tuple(dims)
    dims = (1,) * (input.dim() - len(dims)) + dims
    return shape.repeat(input, dims)


class Rot90(Function):
    """A copy rotated by ``k`` quarter turns from ``dims[0]`` towards ``dims[1]``; the gradient turns back."""

    node_name = "Rot90Backward0"

    @staticmethod
    def forward(ctx, x, k, dims):
        ctx.k, ctx.dims = k, dims
        d0, d1 = dims
        if k == 1:
            out = shape.transpose(shape.flip(x, (d1,)), d0, d1)
        elif k == 2:
            out = shape.flip(x, (d0, d1))
        elif k == 3:
            out = shape.flip(shape.transpose(x, d0, d1), (d1,))
        else:
            out = x
        return shape.clone(out).contiguous()

    @staticmethod
    def backward(ctx, g):
        return Rot90.apply(g, (4 - ctx.k) % 4, ctx.dims), None, None


@declare(
    methods=True, samples=(Sample(T(2, 3)), Sample(T(2, 3, 2), 3, (2, 0)), Sample(T(2, 3), -2), Sample(T(2, 3), 0))
)
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:  # noqa: A002
    """Rotate by ``k`` quarter turns in the plane of ``dims``, from the first dim towards the second."""
    dims = _int_tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = wrap_dim(dims[0], input.dim()), wrap_dim(dims[1], input.dim())
    if d0 == d1 or abs(dims[0] - dims[1]) == input.dim():
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    return Rot90.apply(input, int(k) % 4, (d0, d1))


@declare(methods=True, samples=(Sample(T(2, 3)),))
def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    """Reverse dim 1 (a copy)."""
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return shape.flip(input, (1,))


@declare(methods=True, samples=(Sample(T(2, 3)), Sample(T(3))))
def flipud(input: Tensor) -> Tensor:  # noqa: A002
    """Reverse dim 0 (a copy)."""
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return shape.flip(input, (0,))


@declare(
    methods=True,
    samples=(
        Sample(T(5)),
        Sample(T(3, 4), 2, 1),
        Sample(T(3, 4), 1, 0, T(1, 4), T(2, 4)),
        Sample(T(2, 3), n=3, dim=-1, append=T(2, 1)),
    ),
)
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:  # noqa: A002
    """The ``n``-th forward difference along ``dim`` (``prepend``/``append`` joined on first); booleans differ by
    exclusive or."""
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(int(dim), input.dim())
    parts = [t for t in (prepend, input, append) if t is not None]
    x = shape.cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        later = shape.narrow(x, d, 1, size - 1)
        earlier = shape.narrow(x, d, 0, size - 1)
        x = later.logical_xor(earlier) if x.dtype == bool_ else later - earlier
    return x


# --- products --------------------------------------------------------------------------------------------------


def _scaled(t: Tensor, factor) -> Tensor:
    return t if factor == 1 else t * factor


def _plus_scaled_input(prod: Tensor, input: Tensor, beta, alpha) -> Tensor:  # noqa: A002
    """``beta * input + alpha * prod``; ``beta == 0`` ignores ``input`` (its NaNs too), as torch's BLAS ops."""
    prod = _scaled(prod, alpha)
    if beta == 0:
        return shape.expand(prod, tuple(prod.shape)).clone() if prod.dim() else prod
    return _scaled(shape.expand(input, tuple(prod.shape)), beta) + prod


class Addmv(Function):
    node_name = "AddmvBackward0"

    @staticmethod
    def forward(ctx, input, mat, vec, beta, alpha):  # noqa: A002
        ctx.in_shape, ctx.beta, ctx.alpha = tuple(input.shape), beta, alpha
        ctx.save_for_backward(mat, vec)
        return _plus_scaled_input(linalg.mv(mat, vec), input, beta, alpha)

    @staticmethod
    def backward(ctx, g):
        mat, vec = ctx.saved_tensors
        gi = reduction.sum_to_shape(_scaled(g, ctx.beta), ctx.in_shape) if ctx.needs_input_grad[0] else None
        gm = _scaled(linalg.outer(g, vec), ctx.alpha) if ctx.needs_input_grad[1] else None
        gv = _scaled(linalg.mv(mat.t(), g), ctx.alpha) if ctx.needs_input_grad[2] else None
        return gi, gm, gv, None, None


@declare(methods=True, samples=(Sample(T(2), T(2, 3), T(3)), Sample(T(1), T(2, 3), T(3), beta=0.5, alpha=2.0)))
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``."""
    if mat.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, {mat.dim()}, {vec.dim()}")
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({mat.shape[0]}), mat ({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})"
        )
    return Addmv.apply(input, mat, vec, beta, alpha)


class Addr(Function):
    node_name = "AddrBackward0"

    @staticmethod
    def forward(ctx, input, vec1, vec2, beta, alpha):  # noqa: A002
        ctx.in_shape, ctx.beta, ctx.alpha = tuple(input.shape), beta, alpha
        ctx.save_for_backward(vec1, vec2)
        return _plus_scaled_input(linalg.outer(vec1, vec2), input, beta, alpha)

    @staticmethod
    def backward(ctx, g):
        vec1, vec2 = ctx.saved_tensors
        gi = reduction.sum_to_shape(_scaled(g, ctx.beta), ctx.in_shape) if ctx.needs_input_grad[0] else None
        g1 = _scaled(linalg.mv(g, vec2), ctx.alpha) if ctx.needs_input_grad[1] else None
        g2 = _scaled(linalg.mv(g.t(), vec1), ctx.alpha) if ctx.needs_input_grad[2] else None
        return gi, g1, g2, None, None


@declare(methods=True, samples=(Sample(T(2, 3), T(2), T(3)), Sample(T(3), T(2), T(3), beta=2.0, alpha=-1.0)))
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    if vec1.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.dim()}-D")
    if vec2.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec2, but got {vec2.dim()}-D")
    return Addr.apply(input, vec1, vec2, beta, alpha)


class Addbmm(Function):
    node_name = "AddbmmBackward0"

    @staticmethod
    def forward(ctx, input, batch1, batch2, beta, alpha):  # noqa: A002
        ctx.in_shape, ctx.beta, ctx.alpha = tuple(input.shape), beta, alpha
        ctx.save_for_backward(batch1, batch2)
        return _plus_scaled_input(reduction.sum(linalg.bmm(batch1, batch2), 0), input, beta, alpha)

    @staticmethod
    def backward(ctx, g):
        batch1, batch2 = ctx.saved_tensors
        gi = reduction.sum_to_shape(_scaled(g, ctx.beta), ctx.in_shape) if ctx.needs_input_grad[0] else None
        gb = _scaled(shape.expand(g, (batch1.shape[0], *g.shape)), ctx.alpha)
        g1 = linalg.bmm(gb, batch2.transpose(1, 2)) if ctx.needs_input_grad[1] else None
        g2 = linalg.bmm(batch1.transpose(1, 2), gb) if ctx.needs_input_grad[2] else None
        return gi, g1, g2, None, None


@declare(
    methods=True, samples=(Sample(T(2, 4), T(3, 2, 5), T(3, 5, 4)), Sample(T(4), T(2, 2, 3), T(2, 3, 4), beta=0.5))
)
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    if batch1.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(
            f"batch1 and batch2 must have same number of batches, got {batch1.shape[0]} and {batch2.shape[0]}"
        )
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(
            f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
            f"{batch2.shape[1]}x{batch2.shape[2]})"
        )
    return Addbmm.apply(input, batch1, batch2, beta, alpha)


class Vdot(Function):
    node_name = "VdotBackward0"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return linalg.dot(complex_ops.conj(a), b)

    @staticmethod
    def backward(ctx, g):
        # sum(conj(a) * b): d/dconj(a) is b, so a's gradient is conj(g) * b; b's is g * a
        a, b = ctx.saved_tensors
        ga = complex_ops.conj(g) * b if ctx.needs_input_grad[0] else None
        return ga, (g * a if ctx.needs_input_grad[1] else None)


@declare(methods=True, samples=(Sample(T(4), T(4)),))
def vdot(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The dot product of two 1-D tensors, the first conjugated (real tensors: ``dot``)."""
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    linalg.dot(input.detach(), other.detach())  # dot's size and dtype errors, which vdot shares
    return Vdot.apply(input, other)


@declare(samples=(Sample(T(2, 3), T(2, 3, 4)), Sample(T(2, 3), T(3, 2), ([0, 1], [1, 0])), Sample(T(2, 3), T(4), 0)))
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Sum of products over the last ``dims`` dims of ``a`` and the first ``dims`` of ``b`` (or the listed dim
    pairs), as one matrix product of the two reshaped tensors."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={int(dims)}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(
                f"tensordot expects dims < ndim_a or ndim_b, but got dims={int(dims)}, ndim_a={a.dim()}, "
                f"ndim_b={b.dim()}"
            )
        dims_a = list(range(-int(dims), 0))
        dims_b = list(range(int(dims)))
    else:
        dims_a, dims_b = (list(_int_tuple(d)) for d in dims)
        if len(dims_a) != len(dims_b):
            raise RuntimeError("both dimension lists should have same length")
    for da, db in zip(dims_a, dims_b):
        size_a, size_b = a.shape[wrap_dim(da, a.dim())], b.shape[wrap_dim(db, b.dim())]
        if size_a != size_b and size_b == 1:  # a size-1 dim broadcasts: the other side is summed over its dim
            a = a.sum(da, keepdim=True)
        elif size_a != size_b and size_a == 1:
            b = b.sum(db, keepdim=True)
        elif size_a != size_b:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} and second has "
                f"size {b.shape[db]} in dim {db}"
            )
    dims_a = [wrap_dim(d, a.dim()) for d in dims_a]
    dims_b = [wrap_dim(d, b.dim()) for d in dims_b]
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    m = math.prod(a.shape[d] for d in free_a)
    n = math.prod(b.shape[d] for d in free_b)
    left = shape.reshape(shape.permute(a, *free_a, *dims_a), (m, k))
    right = shape.reshape(shape.permute(b, *dims_b, *free_b), (k, n))
    out_shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return shape.reshape(linalg.mm(left, right), out_shape)


@declare(methods=True, samples=(Sample(T(2, 3), T(4, 3)), Sample(T(3), T(3)), Sample(T(2, 3), T(3))))
def inner(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """Sum of products over the last dim of both (a scalar times a tensor when either is 0-d)."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes {_size_str(input)} and "
            f"{_size_str(other)}"
        )
    return tensordot(input, other, ([-1], [-1]))


@declare(methods=True, samples=(Sample(T(2, 3), T(3, 2)), Sample(T(2), T(2, 1, 3))))
def kron(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The Kronecker product: every element of ``input`` times a block ``other``, dims aligned from the right."""
    n = max(input.dim(), other.dim())
    a = shape.reshape(input, (1,) * (n - input.dim()) + tuple(input.shape))
    b = shape.reshape(other, (1,) * (n - other.dim()) + tuple(other.shape))
    interleaved_a, interleaved_b = [], []
    for sa, sb in zip(a.shape, b.shape):
        interleaved_a += [sa, 1]
        interleaved_b += [1, sb]
    prod = shape.reshape(a, tuple(interleaved_a)) * shape.reshape(b, tuple(interleaved_b))
    # torch's kron ends in an unsafe view of the product (node UnsafeViewBackward0)
    return shape.ReshapeCopy.apply(prod, tuple(sa * sb for sa, sb in zip(a.shape, b.shape)))


@declare(samples=(Sample(T(2, 3), T(3, 4), T(4, 2)), Sample(T(2, 3), T(3, 2))))
def chain_matmul(*matrices) -> Tensor:
    """The product of 2-D matrices left to right (torch's deprecated form of ``linalg.multi_dot``)."""
    warnings.warn(
        "torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use torch.linalg.multi_dot "
        "instead, which accepts a list of two or more tensors rather than multiple parameters.",
        UserWarning,
        stacklevel=2,
    )
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    if len(matrices) == 1:
        return shape.clone(matrices[0])
    out_ = matrices[0]
    for m in matrices[1:]:
        out_ = linalg.mm(out_, m)
    return shape.view(out_, tuple(out_.shape))  # torch's multi_dot views its product as the output shape


# --- building matrices and grids -------------------------------------------------------------------------------


class BlockDiag(Function):
    """The 2-D inputs along the diagonal of a zero matrix; the gradient of each is its block of ``g``."""

    node_name = "BlockDiagBackward0"

    @staticmethod
    def forward(ctx, dtype, *blocks):
        ctx.spans = []
        rows, cols = sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)
        backend = blocks[0]._backend
        out = backend.zeros((rows, cols), dtype)
        r = c = 0
        for b in blocks:
            ctx.spans.append((r, c, b.shape[0], b.shape[1]))
            backend.setitem(out, (slice(r, r + b.shape[0]), slice(c, c + b.shape[1])), b._data.astype(dtype))
            r, c = r + b.shape[0], c + b.shape[1]
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, g):
        return None, *(g[r : r + h, c : c + w] for r, c, h, w in ctx.spans)


@declare(samples=(Sample(T(2, 3), T(1, 2)), Sample(T(3), T(2, 2))))
def block_diag(*tensors) -> Tensor:
    """A block-diagonal matrix of the inputs (0-d ones as 1x1 blocks, 1-D ones as single rows), in their promoted
    dtype."""
    blocks = []
    for k, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {k} has {t.dim()} dimensions"
            )
        blocks.append(shape.reshape(t, (1, 1) if t.dim() == 0 else (1, t.shape[0])) if t.dim() < 2 else t)
    if not blocks:
        return creation.empty(1, 0)
    dtype = result_type(*blocks)
    return BlockDiag.apply(dtype.numpy, *blocks)


@declare(samples=(Sample(T(3), T(2)), Sample(T(2), T(2), T(3))))
def cartesian_prod(*tensors) -> Tensor:
    """Every combination of one element of each 1-D input, as the rows of a matrix (one input: itself)."""
    for t in tensors:
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {_size_str(t)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = shape.meshgrid(*tensors, indexing="ij")
    return shape.stack([shape.reshape(g, -1) for g in grids], 1)


class DiagEmbedND(Function):
    """The last dim of ``input`` placed on diagonal ``offset`` of new dims ``dim1``, ``dim2`` (zeros elsewhere)."""

    node_name = "DiagEmbedBackward0"

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.args = (offset, dim1, dim2)
        n = x.shape[-1] + abs(offset)
        rest = list(x.shape[:-1])
        out_shape = []
        for d in range(len(rest) + 2):
            out_shape.append(n if d in (dim1, dim2) else rest.pop(0))
        backend = x._backend
        out = backend.zeros(tuple(out_shape), x._data.dtype)
        backend.setitem(backend.diagonal(out, offset, dim1, dim2), (Ellipsis,), x._data)
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, g):
        return linalg.diagonal(g, *ctx.args).clone(), None, None, None


@declare(methods=True, samples=(Sample(T(2, 3)), Sample(T(2, 3), 1, 0, 2), Sample(T(3), -1)))
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: A002
    """Matrices in dims ``dim1``, ``dim2`` whose diagonal ``offset`` holds the last dim of ``input``."""
    n = input.dim() + 1
    d1, d2 = wrap_dim(int(dim1), n), wrap_dim(int(dim2), n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {int(dim1)}, {int(dim2)}")
    if input.dim() == 0:
        input = shape.reshape(input, (1,))
    return DiagEmbedND.apply(input, int(offset), d1, d2)


@declare(methods=True, samples=(Sample(T(3)), Sample(T(2, 2), 1), Sample(T(3), -2)))
def diagflat(input: Tensor, offset: int = 0) -> Tensor:  # noqa: A002
    """A square matrix with the flattened input on diagonal ``offset``."""
    return DiagEmbedND.apply(shape.reshape(input, -1), int(offset), 0, 1)


def _triangle_indices(row: int, col: int, offset: int, upper: bool, dtype, device) -> Tensor:
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    r, c = np.indices((row, col)).reshape(2, -1) if row and col else (np.zeros(0, np.int64),) * 2
    keep = (c - r <= offset) if not upper else (c - r >= offset)
    return creation.tensor(np.stack([r[keep], c[keep]]).astype(np.int64), dtype=dtype, device=device)


@declare(differentiable=False, samples=(Sample(3, 3), Sample(3, 4, 1), Sample(4, 2, -1)))
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=int64, device=None, layout=None) -> Tensor:
    """The (row, column) indices of the lower triangle of a ``row x col`` matrix (``c - r <= offset``), row by row,
    as a ``2 x N`` tensor."""
    return _triangle_indices(int(row), int(col), int(offset), False, dtype, device)


@declare(differentiable=False, samples=(Sample(3, 3), Sample(3, 4, 1), Sample(4, 2, -1)))
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=int64, device=None, layout=None) -> Tensor:
    """The (row, column) indices of the upper triangle of a ``row x col`` matrix (``c - r >= offset``), row by row,
    as a ``2 x N`` tensor."""
    return _triangle_indices(int(row), int(col), int(offset), True, dtype, device)


@declare(samples=(Sample(T(2, 1), T(3)), Sample(T(3), T(3))))
def broadcast_tensors(*tensors) -> tuple:
    """Each tensor expanded to the common broadcast shape (a tensor already of that shape is returned as is)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    target = _broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(t if tuple(t.shape) == tuple(target) else shape.expand(t, tuple(target)) for t in tensors)


@declare(differentiable=False)
def broadcast_shapes(*shapes) -> Size:
    """The shape that tensors of ``shapes`` broadcast to (an int is a 1-D shape), without making tensors; the
    error names the first shape that does not fit the ones before it, as torch's."""
    shapes = [(int(s),) if isinstance(s, (int, np.integer)) else s for s in shapes if s is not None]
    if not shapes:
        return Size(())
    for s in shapes:
        if not isinstance(s, (tuple, list)):
            raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {s}")
    common = [1] * max(len(s) for s in shapes)
    for k, s in enumerate(shapes):
        for idx in range(-1, -1 - len(s), -1):
            size = int(s[idx])
            if size == common[idx]:
                continue
            if common[idx] == 1:
                if size < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                common[idx] = size
            if size != 1 and common[idx] != size:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {size} at {idx}! Mismatching argument at index "
                    f"{k} had {s}; but expected shape should be broadcastable to {common}"
                )
    return Size(common)


@declare(differentiable=False, samples=(Sample(0, 2, 3), Sample(0.0, 1.0, 5, base=2.0), Sample(-1, 1, 4)))
def logspace(
    start,
    end,
    steps: int,
    base: float = 10.0,
    *,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` values ``base ** e`` for ``e`` evenly spaced from ``start`` to ``end`` inclusive."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    exponents = np.linspace(float(start), float(end), int(steps))
    values = np.power(float(base), exponents)
    target = creation.get_default_dtype() if dtype is None else dtype
    if not target.is_floating_point:
        values = np.trunc(values) if values.size else values
    return creation.tensor(values, dtype=target, device=device, requires_grad=requires_grad)


# --- NaN-ignoring reductions and counts ------------------------------------------------------------------------


class NanSum(Function):
    """The sum of the non-NaN elements; NaN positions get no gradient."""

    node_name = "NansumBackward0"

    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        ctx.save_for_backward(x)
        ctx.dim, ctx.keepdim, ctx.shape = dim, keepdim, tuple(x.shape)
        clean = x.masked_fill(x.isnan(), 0) if x.is_floating_point() else x
        return reduction.sum(clean, dim, keepdim, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.dim is not None and not ctx.keepdim:
            for d in sorted(ctx.dim):
                g = shape.unsqueeze(g, d)
        g = shape.expand(g, ctx.shape).to(x.dtype)
        return g.masked_fill(x.isnan(), 0), None, None, None


def _reduce_dims(dim, ndim: int):
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return None
    return tuple(sorted({wrap_dim(int(d), ndim) for d in _int_tuple(dim)}))


@declare(methods=True, samples=(Sample(T(2, 3)), Sample(T(2, 3), 1), Sample(T(2, 3, 2), (0, 2), True)))
def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """``sum`` treating NaNs as zero."""
    return NanSum.apply(input, _reduce_dims(dim, input.dim()), bool(keepdim), dtype)


@declare(methods=True, samples=(Sample(T(2, 3)), Sample(T(2, 3), 1, True)))
def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """``mean`` of the non-NaN elements (NaN where every element is NaN)."""
    if not input.is_floating_point():
        raise RuntimeError(
            "nanmean(): expected input to have floating point or complex dtype but got " + _dtype_name(input.dtype)
        )
    count = reduction.sum(input.isnan().logical_not(), dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


@declare(
    methods=True,
    differentiable=False,
    samples=(Sample(T(2, 3, dtype="int64")), Sample(T(2, 3, dtype="int64"), 1), Sample(T(2, 3, dtype="int64"), (0, 1))),
)
def count_nonzero(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """The number of nonzero elements over ``dim`` (all by default), as int64."""
    return reduction.sum(input != 0, _reduce_dims(dim, input.dim()))


@declare(methods=True, differentiable=False, samples=(Sample(T(2, 3, dtype="int64")), Sample(T(4))))
def argwhere(input: Tensor) -> Tensor:  # noqa: A002
    """The indices of the nonzero elements, one row each (``nonzero``)."""
    return indexing.nonzero(input)


# --- elementwise and lookups -----------------------------------------------------------------------------------


@declare(name="nan_to_num_")
def nan_to_num_(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:  # noqa: A002
    """``nan_to_num`` written into ``input``."""
    return input.nan_to_num_(nan, posinf, neginf)


@declare(differentiable=False)
@creation._recorded
def randint_like(
    input: Tensor,
    low: int = 0,
    high: int | None = None,
    *,
    dtype=None,
    layout=None,
    device=None,  # noqa: A002
    requires_grad: bool = False,
    memory_format=None,
    generator=None,
) -> Tensor:
    """Integers drawn uniformly from ``[low, high)`` (``randint_like(t, high)``: from 0) in ``input``'s shape, dtype
    and device."""
    if high is None:
        low, high = 0, low
    dt, dev = creation._like(input, dtype, device)
    return creation.randint(
        int(low), int(high), tuple(input.shape), generator=generator, dtype=dt, device=dev, requires_grad=requires_grad
    )


@declare(
    methods=True,
    samples=(Sample(T(2, 3), 2), Sample(T(2, 3, domain=(0.5, 2.0)), T(3)), Sample(T(3, domain=(0.5, 2.0)), 0.5)),
)
def float_power(input, exponent) -> Tensor:  # noqa: A002
    """``input ** exponent`` computed in float64 whatever the operands' dtypes."""
    base = input.to(float64) if isinstance(input, Tensor) else float(input)
    power = exponent.to(float64) if isinstance(exponent, Tensor) else float(exponent)
    return base**power


class Ldexp(Function):
    node_name = "LdexpBackward0"

    @staticmethod
    def forward(ctx, x, other, dtype):
        scale = (other.to(dtype) * math.log(2.0)).exp()
        ctx.save_for_backward(scale)
        return x.to(dtype) * scale

    @staticmethod
    def backward(ctx, g):
        (scale,) = ctx.saved_tensors
        return g * scale, None, None


@declare(methods=True, samples=(Sample(T(2, 3), T(3, dtype="int64", high=4)),))
def ldexp(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``input * 2 ** other``, in a floating dtype."""
    dtype = result_type(input, other)
    if not dtype.is_floating_point:
        dtype = creation.get_default_dtype()
    if other.is_floating_point() and other.requires_grad:
        return input.to(dtype) * (other.to(dtype) * math.log(2.0)).exp()
    return Ldexp.apply(input, other, dtype)


def _require_integers(name: str, *tensors) -> None:
    """torch's refusal of a floating result dtype for the integer-only ops."""
    dtype = result_type(*tensors)
    if dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_dtype_name(dtype)}'")


@declare(
    methods=True, differentiable=False, samples=(Sample(T(2, 3, dtype="int64", high=20), T(3, dtype="int64", high=20)),)
)
def gcd(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The greatest common divisor of integer tensors, elementwise (non-negative; ``gcd(0, 0) == 0``), by Euclid's
    algorithm run on whole tensors."""
    _require_integers("gcd", input, other)
    a, b = input.abs(), other.abs()
    common = tuple(_broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    a, b = shape.expand(a, common), shape.expand(b, common)
    dtype = result_type(input, other)
    a, b = a.to(dtype), b.to(dtype)
    while bool((b != 0).any()):
        nonzero = b != 0
        a, b = indexing.where(nonzero, b, a), indexing.where(nonzero, a.remainder(indexing.where(nonzero, b, 1)), 0)
    return a.clone()


@declare(
    methods=True, differentiable=False, samples=(Sample(T(2, 3, dtype="int64", high=12), T(3, dtype="int64", high=12)),)
)
def lcm(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The least common multiple of integer tensors, elementwise (non-negative; 0 where either is 0)."""
    _require_integers("lcm", input, other)
    g = gcd(input, other)
    return indexing.where(g == 0, 0, (input // indexing.where(g == 0, 1, g) * other).abs()).to(g.dtype)


@declare(
    differentiable=False,
    samples=(
        Sample(T(2, 3, dtype="int64", high=6), T(3, dtype="int64", high=6)),
        Sample(T(4, dtype="int64", high=5), T(2, dtype="int64", high=5), invert=True),
    ),
)
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each of ``elements`` occurs in ``test_elements`` (or not, with ``invert``), by comparing every pair:
    simple and device-neutral, for the small test sets this is used with."""
    if not isinstance(elements, Tensor):
        elements = creation.tensor(elements)
    if not isinstance(test_elements, Tensor):
        test_elements = creation.tensor(test_elements)
    found = (shape.unsqueeze(elements, -1) == shape.reshape(test_elements, -1)).any(-1)
    return found.logical_not() if invert else found


def _insertion_points(boundaries: Tensor, values: Tensor, right: bool, out_int32: bool) -> Tensor:
    """How many boundaries each value passes (``<`` on the left side, ``<=`` on the right), counted over all
    pairs; boundaries of several dims hold one sorted sequence per leading index."""
    if boundaries.dim() <= 1:
        seq = shape.reshape(boundaries, -1)
        passed = shape.unsqueeze(values, -1) >= seq if right else shape.unsqueeze(values, -1) > seq
    else:
        seq = shape.unsqueeze(boundaries, -2)
        v = shape.unsqueeze(values, -1)
        passed = v >= seq if right else v > seq
    return reduction.sum(passed, -1).to(int32 if out_int32 else int64)


@declare(
    differentiable=False,
    samples=(Sample(T(2, 3), T(1)), Sample(T(5, dtype="int64", high=3), T(1, dtype="int64", high=3), right=True)),
)
def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:  # noqa: A002
    """The index of the bucket of sorted 1-D ``boundaries`` each value falls in (``right``: ties go after the
    boundary)."""
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    if not isinstance(input, Tensor):
        input = creation.tensor(input, dtype=boundaries.dtype)
    return _insertion_points(boundaries, input, right, out_int32)


@declare(
    differentiable=False,
    samples=(
        Sample(T(1), T(2, 3)),
        Sample(T(2, 1), T(2, 3), right=True),
        Sample(T(1, dtype="int64"), T(4, dtype="int64"), side="right"),
    ),
)
def searchsorted(
    sorted_sequence: Tensor,
    input,
    *,
    out_int32: bool = False,
    right: bool = False,
    side=None,  # noqa: A002
    sorter=None,
) -> Tensor:
    """Where each value would be inserted in ``sorted_sequence`` (its last dim; leading dims matched with
    ``input``'s) to keep it sorted: before equal entries, or after them with ``right`` / ``side="right"``."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
            )
        right = side == "right"
    if sorter is not None:
        sorted_sequence = indexing.gather(sorted_sequence, -1, sorter)
    if not isinstance(input, Tensor):
        input = creation.tensor(input, dtype=sorted_sequence.dtype)
    if sorted_sequence.dim() > 1 and tuple(sorted_sequence.shape[:-1]) != tuple(input.shape[:-1]):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
            f"tensor and input value tensor must match, but we got boundaries tensor {_size_str(sorted_sequence)} "
            f"and input value tensor {_size_str(input)}"
        )
    return _insertion_points(sorted_sequence, input, right, out_int32)


# --- scatters into views ---------------------------------------------------------------------------------------


class _ScatterInto(Function):
    """A copy of ``x`` whose region holds ``src``; the gradient of ``x`` is ``g`` with that region zeroed (the same
    scatter, of zeros), the gradient of ``src`` the region of ``g``. Subclasses say what the region is:
    ``region_of`` (a differentiable view of a tensor) and ``region_data`` (the same view of the backend's data)."""

    @classmethod
    def forward(cls, ctx, x, src, where):
        ctx.where = where
        backend = x._backend
        out = backend.copy(x._data)
        backend.setitem(cls.region_data(backend, out, where), (Ellipsis,), src._data.astype(out.dtype))
        return Tensor._make(out)

    @classmethod
    def backward(cls, ctx, g):
        gx = gsrc = None
        if ctx.needs_input_grad[0]:
            gx = cls.apply(g, creation.zeros_like(cls.region_of(g, ctx.where)), ctx.where)
        if ctx.needs_input_grad[1]:
            gsrc = cls.region_of(g, ctx.where).clone()
        return gx, gsrc, None


class _IndexedScatter(_ScatterInto):
    """The region is a basic index (a selected or sliced dim)."""

    @staticmethod
    def region_of(t, where):
        return t[where]

    @staticmethod
    def region_data(backend, data, where):
        return backend.getitem(data, where)


class SelectScatter(_IndexedScatter):
    node_name = "SelectScatterBackward0"


class SliceScatter(_IndexedScatter):
    node_name = "SliceScatterBackward0"


class DiagonalScatter(_ScatterInto):
    node_name = "DiagonalScatterBackward0"

    @staticmethod
    def region_of(t, where):
        return linalg.diagonal(t, *where)

    @staticmethod
    def region_data(backend, data, where):
        return backend.diagonal(data, *where)


def _check_region(src: Tensor, region: Tensor) -> None:
    if tuple(src.shape) != tuple(region.shape):
        raise RuntimeError(
            f"expected src to have a size equal to the slice of self. src size = {_size_str(src)}, slice size = "
            f"{_size_str(region)}"
        )


@declare(methods=True, samples=(Sample(T(2, 3), T(3), 0, 1), Sample(T(2, 3), T(2), 1, -1)))
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``src`` written at ``input.select(dim, index)``."""
    region = select(input, dim, index)
    _check_region(src, region)
    d = wrap_dim(int(dim), input.dim())
    return SelectScatter.apply(input, src, (slice(None),) * d + (int(index),))


@declare(
    methods=True,
    samples=(Sample(T(4, 3), T(2, 3), 0, 1, 3), Sample(T(2, 6), T(2, 2), 1, 1, None, 3), Sample(T(4), T(4))),
)
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``src`` written at the slice ``start:end:step`` of ``dim``."""
    d = wrap_dim(int(dim), input.dim())
    where = (slice(None),) * d + (slice(start, end, step),)
    _check_region(src, input[where])
    return SliceScatter.apply(input, src, where)


@declare(methods=True, samples=(Sample(T(3, 3), T(3)), Sample(T(2, 3), T(2), 1), Sample(T(2, 3, 2), T(3, 1), -1, 0, 2)))
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``src`` written on its diagonal ``offset`` of dims ``dim1``, ``dim2``."""
    region = linalg.diagonal(input, offset, dim1, dim2)
    _check_region(src, region)
    d1, d2 = wrap_dim(int(dim1), input.dim()), wrap_dim(int(dim2), input.dim())
    return DiagonalScatter.apply(input, src, (int(offset), d1, d2))


# --- order statistics ------------------------------------------------------------------------------------------


def _named_pair(name: str, first: str, second: str) -> type:
    """A named tuple that prints like torch's ``torch.return_types.<name>``."""

    def __repr__(self) -> str:
        return f"numbagrad.return_types.{name}(\n{first}={self[0]!r},\n{second}={self[1]!r})"

    base = namedtuple(name, [first, second])
    return type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": "numbagrad.return_types"})


_RETURN_TYPES = {
    "aminmax": _named_pair("aminmax", "min", "max"),
    **{name: _named_pair(name, "values", "indices") for name in ("kthvalue", "median", "nanmedian")},
}


def _evenly(g: Tensor, x: Tensor, value: Tensor, dim, keepdim: bool) -> Tensor:
    """``g`` shared evenly by the elements of ``x`` equal to ``value`` (NaN matching NaN): the gradient of a
    reduction that picks a value, as torch's."""
    if dim is not None and not keepdim:
        g, value = shape.unsqueeze(g, dim), shape.unsqueeze(value, dim)
    hit = (x == value).logical_or(x.isnan().logical_and(value.isnan()))
    count = reduction.sum(hit, dim, keepdim=True) if dim is not None else reduction.sum(hit)
    return indexing.where(hit, g / count, 0).to(x.dtype)


class Aminmax(Function):
    node_name = "AminmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        ctx.dim, ctx.keepdim = dim, keepdim
        low = reduction.amin(x, () if dim is None else dim, keepdim)
        high = reduction.amax(x, () if dim is None else dim, keepdim)
        ctx.save_for_backward(x, low, high)
        return low, high

    @staticmethod
    def backward(ctx, g_low, g_high):
        x, low, high = ctx.saved_tensors
        grad = None
        for g, value in ((g_low, low), (g_high, high)):
            if g is not None:
                part = _evenly(g, x, value, ctx.dim, ctx.keepdim)
                grad = part if grad is None else grad + part
        return grad, None, None


@declare(methods=True, samples=(Sample(T(2, 3)), Sample(T(2, 3), dim=1), Sample(T(2, 3), dim=0, keepdim=True)))
def aminmax(input: Tensor, *, dim=None, keepdim: bool = False):  # noqa: A002
    """``(min, max)`` of ``input`` (over ``dim`` when given), in one call."""
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
            )
        low, high = Aminmax.apply(input, None, False)
        if keepdim:
            low, high = shape.reshape(low, (1,) * input.dim()), shape.reshape(high, (1,) * input.dim())
    else:
        d = wrap_dim(int(dim), input.dim())
        if input.dim() and input.shape[d] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
        low, high = Aminmax.apply(input, d if input.dim() else None, bool(keepdim))
    return _RETURN_TYPES["aminmax"](low, high)


class _Picked(Function):
    """Values picked along ``dim`` at known indices; the gradient goes back to those indices."""

    @staticmethod
    def forward(ctx, x, dim, index, keepdim):
        ctx.dim, ctx.keepdim, ctx.shape = dim, keepdim, tuple(x.shape)
        ctx.save_for_backward(index)
        out = indexing.gather(x, dim, index)
        return out if keepdim else shape.squeeze(out, dim)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        if not ctx.keepdim:
            g = shape.unsqueeze(g, ctx.dim)
        zeros = creation.zeros(ctx.shape, dtype=g.dtype, device=g.device)
        return indexing.scatter(zeros, ctx.dim, index, g), None, None, None


class KthvalueBackward(_Picked):
    node_name = "KthvalueBackward0"


class MedianDimBackward(_Picked):
    node_name = "MedianBackward1"


class NanmedianDimBackward(_Picked):
    node_name = "NanmedianBackward1"


def _pick_sorted(input: Tensor, dim: int, position: Tensor, keepdim: bool, node: type, name: str):
    """The ``position``-th smallest along ``dim`` (a tensor of positions, one per row, keeping ``dim``) and its
    index in ``input``, from a stable sort (NaNs sort last)."""
    if input.dim() == 0:
        values = node.apply(shape.reshape(input, (1,)), 0, creation.zeros(1, dtype=int64), False)
        return _RETURN_TYPES[name](shape.reshape(values, ()), creation.zeros((), dtype=int64))
    order = indexing.sort(input.detach(), dim, stable=True).indices
    index = indexing.gather(order, dim, position)
    values = node.apply(input, dim, index, keepdim)
    return _RETURN_TYPES[name](values, index if keepdim else shape.squeeze(index, dim))


@declare(methods=True, samples=(Sample(T(5), 2), Sample(T(3, 4), 4, 1), Sample(T(3, 4), 1, 0, True)))
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):  # noqa: A002
    """``(values, indices)`` of the ``k``-th smallest element along ``dim`` (``k`` counts from 1)."""
    d = wrap_dim(int(dim), input.dim())
    n = input.shape[d] if input.dim() else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    position = creation.full(_kept_shape(input, d), k - 1, dtype=int64)
    return _pick_sorted(input, d, position, bool(keepdim), KthvalueBackward, "kthvalue")


def _kept_shape(input: Tensor, d: int) -> tuple:
    kept = list(input.shape)
    if kept:
        kept[d] = 1
    return tuple(kept)


class MedianAll(Function):
    node_name = "MedianBackward0"

    @staticmethod
    def forward(ctx, x, ignore_nan):
        flat = shape.reshape(x, -1)
        valid = flat.isnan().logical_not()
        count = int(reduction.sum(valid)) if ignore_nan else flat.numel()
        if not ignore_nan and count and bool(valid.logical_not().any()):
            out = creation.full((), float("nan"), dtype=x.dtype)
        else:
            out = indexing.sort(flat).values[max(count - 1, 0) // 2].clone()
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return _evenly(g, x, out, None, False), None


class NanmedianAll(MedianAll):
    node_name = "NanmedianBackward0"


def _median(input: Tensor, dim, keepdim: bool, ignore_nan: bool):
    name = "nanmedian" if ignore_nan else "median"
    if dim is None:
        if input.numel() == 0:
            return creation.full((), float("nan"), dtype=input.dtype)
        return (NanmedianAll if ignore_nan else MedianAll).apply(input, ignore_nan)
    d = wrap_dim(int(dim), input.dim())
    if input.dim() and input.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    nan_count = reduction.sum(input.detach().isnan(), d, keepdim=True) if input.dim() else None
    n = input.shape[d] if input.dim() else 1
    if nan_count is None:
        position = creation.zeros((), dtype=int64)
    elif ignore_nan:  # the lower middle of the non-NaN values (the first NaN when all are NaN)
        position = (n - nan_count - 1).clamp_min(0) // 2
    else:  # a row with a NaN gives its first NaN
        position = indexing.where(nan_count > 0, n - nan_count, (n - 1) // 2)
    node = NanmedianDimBackward if ignore_nan else MedianDimBackward
    return _pick_sorted(input, d, position, bool(keepdim), node, name)


@declare(methods=True, samples=(Sample(T(5)), Sample(T(3, 4), 1), Sample(T(3, 4), 0, True)))
def median(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A002
    """The lower median (NaN if there is a NaN): of all elements, or ``(values, indices)`` along ``dim``."""
    return _median(input, dim, keepdim, ignore_nan=False)


@declare(methods=True, samples=(Sample(T(5)), Sample(T(3, 4), 1), Sample(T(3, 4), -1, True)))
def nanmedian(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A002
    """``median`` of the non-NaN elements (NaN where all are NaN)."""
    return _median(input, dim, keepdim, ignore_nan=True)


# --- combinatorics, counting and scans -------------------------------------------------------------------------


@declare(samples=(Sample(T(4)), Sample(T(3), 3, True), Sample(T(4), 1)))
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """The length-``r`` combinations of the elements of a 1-D tensor (as ``itertools.combinations``, or
    ``combinations_with_replacement``), one per row."""
    import itertools  # lazy: only combinations needs it

    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {_size_str(input)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return creation.empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return creation.empty(0, r, dtype=input.dtype, device=input.device)
    columns = creation.tensor(np.array(rows, dtype=np.int64).T, device=input.device)
    return shape.stack([indexing.index_select(input, 0, columns[k]) for k in range(r)], 1)


@declare(
    methods=True,
    differentiable=False,
    samples=(Sample(T(6, dtype="int64", high=4)), Sample(T(5, dtype="int64"), T(5), 5)),
)
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value ``0..max`` occurs in a 1-D non-negative integer tensor (the sum of ``weights`` at its
    positions, when given), at least ``minlength`` long."""
    if input.is_floating_point() or input.dtype == bool_:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_dtype_name(input.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.dim() != 1 or (input.numel() and int(input.min()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    size = max(int(input.max()) + 1 if input.numel() else 0, int(minlength))
    hits = shape.unsqueeze(input, 1) == creation.arange(size, device=input.device)
    if weights is None:
        return reduction.sum(hits, 0)
    out_dtype = weights.dtype if weights.is_floating_point() else float64
    return reduction.sum(hits.to(out_dtype) * shape.unsqueeze(weights.detach().to(out_dtype), 1), 0)


@declare(methods=True, differentiable=False, samples=(Sample(T(8)), Sample(T(2, 5), 4, -1.0, 1.0)))
def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of ``bins`` equal-width bins over ``[min, max]`` (the data's range when both are 0); values
    outside are ignored and ``max`` falls in the last bin."""
    if not input.is_floating_point():
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{_dtype_name(input.dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    low, high = float(min), float(max)
    data = shape.reshape(input.detach(), -1)
    if low == high and data.numel():
        low, high = float(data.min()), float(data.max())
    if low == high:
        low, high = low - 1, high + 1
    if low > high:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {min} max {max}")
    inside = (data >= low).logical_and(data <= high)
    position = ((data - low) * bins / (high - low)).floor().clamp(0, bins - 1).to(int64)
    hits = (shape.unsqueeze(position, 1) == creation.arange(bins, device=input.device)).logical_and(
        shape.unsqueeze(inside, 1)
    )
    return reduction.sum(hits, 0).to(input.dtype)


class _RunningPick(Function):
    """Running maxima or minima along ``dim`` at known indices; the gradient adds back to those indices."""

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.dim, ctx.shape = dim, tuple(x.shape)
        ctx.save_for_backward(index)
        return indexing.gather(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = creation.zeros(ctx.shape, dtype=g.dtype, device=g.device)
        return indexing.scatter_add(zeros, ctx.dim, index, g), None, None


class CummaxBackward(_RunningPick):
    node_name = "CummaxBackward0"


class CumminBackward(_RunningPick):
    node_name = "CumminBackward0"


_RETURN_TYPES.update({name: _named_pair(name, "values", "indices") for name in ("cummax", "cummin")})


def _running_index(x: Tensor, dim: int, largest: bool) -> Tensor:
    """The index of the running max (min) along ``dim``: a scan by doubling shifts, an earlier element winning
    only when strictly better, so ties go to the latest index; NaN beats every number, as in torch."""
    n = x.shape[dim]
    values = x.detach()
    index = shape.expand(
        shape.reshape(creation.arange(n, device=x.device), [n if d == dim else 1 for d in range(x.dim())]),
        tuple(x.shape),
    ).clone()
    step = 1
    while step < n:
        prev_v = shape.narrow(values, dim, 0, n - step)
        prev_i = shape.narrow(index, dim, 0, n - step)
        cur_v = shape.narrow(values, dim, step, n - step)
        cur_i = shape.narrow(index, dim, step, n - step)
        better = (prev_v > cur_v) if largest else (prev_v < cur_v)
        if values.is_floating_point():
            better = better.logical_or(prev_v.isnan().logical_and(cur_v.isnan().logical_not()))
        new_v = indexing.where(better, prev_v, cur_v)
        new_i = indexing.where(better, prev_i, cur_i)
        values = shape.cat([shape.narrow(values, dim, 0, step), new_v], dim)
        index = shape.cat([shape.narrow(index, dim, 0, step), new_i], dim)
        step *= 2
    return index


def _cumulative_pick(input: Tensor, dim: int, largest: bool):
    name = "cummax" if largest else "cummin"
    if input.dim() == 0:
        return _RETURN_TYPES[name](input.clone(), creation.zeros((), dtype=int64, device=input.device))
    d = wrap_dim(int(dim), input.dim())
    if input.shape[d] == 0:
        return _RETURN_TYPES[name](input.clone(), creation.zeros(tuple(input.shape), dtype=int64))
    index = _running_index(input, d, largest)
    node = CummaxBackward if largest else CumminBackward
    return _RETURN_TYPES[name](node.apply(input, d, index), index)


@declare(methods=True, samples=(Sample(T(5), 0), Sample(T(3, 4), 1), Sample(T(3, 4), -2)))
def cummax(input: Tensor, dim: int):  # noqa: A002
    """``(values, indices)`` of the running maximum along ``dim`` (ties and NaNs: the latest index)."""
    return _cumulative_pick(input, dim, True)


@declare(methods=True, samples=(Sample(T(5), 0), Sample(T(3, 4), 1)))
def cummin(input: Tensor, dim: int):  # noqa: A002
    """``(values, indices)`` of the running minimum along ``dim`` (ties and NaNs: the latest index)."""
    return _cumulative_pick(input, dim, False)


def _trapezoid_spacing(name: str, y: Tensor, x, dx, d: int):
    """The spacing: a number, or ``diff(x)`` shaped to broadcast against ``y``'s pairs along ``d``."""
    if x is not None and dx is not None:
        raise TypeError(
            f"{name}() received an invalid combination of arguments - got (Tensor, Tensor, dx={type(dx).__name__}), "
            f"but expected one of:\n * (Tensor y, Tensor x, *, int dim = -1)\n * (Tensor y, *, Number dx = 1, int dim "
            "= -1)\n"
        )
    if x is None:
        return 1.0 if dx is None else dx
    if (x.shape[0] if x.dim() == 1 else x.shape[d]) != y.shape[d]:
        raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
    if x.dim() == 1:
        return shape.reshape(diff(x), [x.shape[0] - 1 if k == d else 1 for k in range(y.dim())])
    return diff(x, dim=d)


@declare(differentiable=True)
def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: sample points ``x`` (or even spacing ``dx``, default 1)."""
    d = wrap_dim(int(dim), y.dim())
    spacing = _trapezoid_spacing("trapezoid", y, x, dx, d)
    if y.shape[d] == 0:
        return reduction.sum(y, d) * 0.0
    n = y.shape[d]
    pairs = shape.narrow(y, d, 1, n - 1) + shape.narrow(y, d, 0, n - 1)
    if isinstance(spacing, Tensor):
        return reduction.sum(spacing * pairs, d) / 2
    return reduction.sum(pairs, d) * (spacing / 2)


@declare(differentiable=True)
def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoidal rule along ``dim`` (one fewer element than ``y`` along it)."""
    d = wrap_dim(int(dim), y.dim())
    spacing = _trapezoid_spacing("cumulative_trapezoid", y, x, dx, d)
    n = y.shape[d]
    if n == 0:
        return y.clone()
    pairs = shape.narrow(y, d, 1, n - 1) + shape.narrow(y, d, 0, n - 1)
    if isinstance(spacing, Tensor):
        return reduction.cumsum(spacing * pairs, d) / 2
    return reduction.cumsum(pairs * (spacing / 2), d)


class Frexp(Function):
    """``input = mantissa * 2 ** exponent`` with ``0.5 <= |mantissa| < 1`` (0, inf and NaN keep exponent 0); the
    gradient of the mantissa is ``g * 2 ** -exponent``."""

    node_name = "FrexpBackward0"

    @staticmethod
    def forward(ctx, x):
        wide = x.to(float64)
        magnitude = wide.abs()
        normal = magnitude.isfinite().logical_and(magnitude > 0)
        exponent = indexing.where(normal, magnitude.masked_fill(normal.logical_not(), 1.0).log2().floor() + 1, 0.0)
        mantissa = wide * _power_of_two(-exponent)
        too_big = normal.logical_and(mantissa.abs() >= 1)  # log2 rounded up just below a power of two
        too_small = normal.logical_and(mantissa.abs() < 0.5)
        exponent = exponent + too_big.to(float64) - too_small.to(float64)
        scale = _power_of_two(-exponent)
        mantissa = (wide * scale).to(x.dtype)
        exponent = exponent.to(int32)
        ctx.mark_non_differentiable(exponent)
        ctx.save_for_backward(scale)
        return mantissa, exponent

    @staticmethod
    def backward(ctx, g, _ge):
        (scale,) = ctx.saved_tensors
        return (g.to(float64) * scale).to(g.dtype)


def _power_of_two(e: Tensor) -> Tensor:
    """``2 ** e`` for integral float64 ``e`` in [-1100, 1100], as two factors so neither under- nor overflows."""
    half = (e / 2).floor()
    return (half * math.log(2.0)).exp() * ((e - half) * math.log(2.0)).exp()


_RETURN_TYPES["frexp"] = _named_pair("frexp", "mantissa", "exponent")


@declare(methods=True, samples=(Sample(T(2, 3, domain=(-100.0, 100.0))), Sample(T(4, domain=(-1e-3, 1e-3)))))
def frexp(input: Tensor):  # noqa: A002
    """``(mantissa, exponent)`` with ``input == mantissa * 2 ** exponent`` and ``0.5 <= |mantissa| < 1`` (the
    exponent as int32)."""
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    mantissa, exponent = Frexp.apply(input)
    return _RETURN_TYPES["frexp"](mantissa, exponent)


def _log_scan(x: Tensor, dim: int) -> Tensor:
    """Running ``logaddexp`` along ``dim`` by doubling shifts (log n steps): each partial result is a log-sum of
    exponentials, so no element under- or overflows whatever the spread of ``x``."""
    n = x.shape[dim]
    out = x
    step = 1
    while step < n:
        combined = shape.narrow(out, dim, step, n - step).logaddexp(shape.narrow(out, dim, 0, n - step))
        out = shape.cat([shape.narrow(out, dim, 0, step), combined], dim)
        step *= 2
    return out


class Logcumsumexp(Function):
    node_name = "LogcumsumexpBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        out = _log_scan(x, dim).clone()
        ctx.save_for_backward(x, out)  # the output itself: its saved copy unpacks linked to this node
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        d = ctx.dim
        # grad_i = sum over j >= i of g_j * exp(x_i - out_j), summed in log space for the positive and the negative
        # parts of g separately; the smallest finite number stands for log(0) so that no NaN appears
        floor = float(np.finfo(np.dtype(str(g.dtype).replace("numbagrad.", ""))).min)
        log_abs = g.abs().log()
        total = None
        for sign, part in ((1.0, g > 0), (-1.0, g < 0)):
            logs = indexing.where(part, log_abs, floor) - out
            reverse = shape.flip(Logcumsumexp.apply(shape.flip(logs, (d,)), d), (d,))
            term = (reverse + x).exp() * sign
            total = term if total is None else total + term
        return total, None


@declare(methods=True, samples=(Sample(T(5), 0), Sample(T(3, 4), 1), Sample(T(3, 4), -2)))
def logcumsumexp(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """``log(cumsum(exp(input)))`` along ``dim``, computed without overflow or underflow."""
    if not input.is_floating_point():
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{_dtype_name(input.dtype)}'")
    if input.dim() == 0:
        return Logcumsumexp.apply(shape.reshape(input, (1,)), 0).reshape(())
    return Logcumsumexp.apply(input, wrap_dim(int(dim), input.dim()))


class _SqueezeLast(shape.SqueezeDim):
    """The squeeze ending a quantile: torch squeezes its result in place, so the node is ``SqueezeBackward4``."""

    node_name = "SqueezeBackward4"


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool) -> Tensor:  # noqa: A002
    """Torch's quantile: sort each row (NaNs last), find the rank ``q * (count - 1)``, and read or interpolate the
    sorted values there; a row with a NaN gives NaN unless ``ignore_nan``. (torch's messages say ``quantile()`` for
    ``nanquantile`` too.)"""
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if not input.is_floating_point() or str(input.dtype) not in ("numbagrad.float32", "numbagrad.float64"):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q.dtype != input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if q.numel() and bool(((q < 0).logical_or(q > 1)).any()):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
    elif not 0 <= q <= 1:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q:g}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(
            "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
            + str(interpolation)
        )
    scalar_q = not isinstance(q, Tensor) or q.dim() == 0
    qs = shape.reshape(q, -1) if isinstance(q, Tensor) else creation.tensor([float(q)], dtype=input.dtype)
    if dim is None:
        rows = shape.reshape(input, ((1,) * input.dim() if keepdim else ()) + (-1,))
    else:
        d = wrap_dim(int(dim), input.dim())
        rows = shape.transpose(shape.unsqueeze(input, -1), d, -1) if keepdim else movedim(input, d, -1)
    ordered = indexing.sort(rows, -1).values
    n = ordered.shape[-1]
    nans = ordered.detach().isnan()
    if ignore_nan:
        count = reduction.sum(nans.logical_not(), -1, keepdim=True).to(input.dtype)
        ranks = (qs * (count - 1)).clamp_min(0)
    else:
        ranks = indexing.where(nans.any(-1, keepdim=True), float(n - 1), qs * (n - 1))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.to(int64)
    values = indexing.gather(ordered, -1, below)
    if interpolation in ("linear", "midpoint"):
        above = ranks.ceil().to(int64)
        weights = creation.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below.to(ranks.dtype)
        values = values.lerp(indexing.gather(ordered, -1, above), weights)
    if not scalar_q:
        values = shape.transpose(shape.unsqueeze(values, 0), 0, -1)
    return _SqueezeLast.apply(values, (values.dim() - 1,))


@declare(
    methods=True,
    samples=(
        Sample(T(7), 0.3),
        Sample(T(3, 4), T(2, domain=(0.0, 1.0), dtype="float64"), 1),
        Sample(T(3, 4), 0.5, 0, True, interpolation="midpoint"),
        Sample(T(2, 5), 0.6, -1, interpolation="nearest"),
    ),
)
def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:  # noqa: A002
    """The ``q``-th quantiles along ``dim`` (of all elements by default), interpolated as ``interpolation`` says; NaN
    for rows holding a NaN. A 1-D ``q`` gives its quantiles along a new first dim."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


@declare(methods=True, samples=(Sample(T(7), 0.3), Sample(T(3, 4), 0.8, 1, interpolation="lower")))
def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:  # noqa: A002
    """``quantile`` of the non-NaN values (NaN where a row has none)."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


class ModeBackward(_Picked):
    node_name = "ModeBackward0"


_RETURN_TYPES["mode"] = _named_pair("mode", "values", "indices")


@declare(
    methods=True,
    samples=(Sample(T(6, dtype="int64", high=3)), Sample(T(3, 5, dtype="int64", high=3), 0, True), Sample(T(3, 4))),
)
def mode(input: Tensor, dim: int = -1, keepdim: bool = False):  # noqa: A002
    """``(values, indices)`` of the most frequent value along ``dim`` (the smallest when several are equally
    frequent) and the last index where it occurs. Every pair of a row is compared, which suits the short rows it
    is used on."""
    if input.dim() == 0:
        return _RETURN_TYPES["mode"](input.clone(), creation.zeros((), dtype=int64, device=input.device))
    d = wrap_dim(int(dim), input.dim())
    n = input.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    rows = movedim(input.detach(), d, -1)
    counts = reduction.sum(shape.unsqueeze(rows, -1) == shape.unsqueeze(rows, -2), -1)
    candidate = counts == reduction.amax(counts, -1, keepdim=True)
    value = reduction.amin(indexing.where(candidate, rows, reduction.amax(rows, -1, keepdim=True)), -1, keepdim=True)
    positions = creation.arange(n, device=input.device)
    index = reduction.amax(indexing.where(rows == value, positions, -1), -1, keepdim=True)
    index = movedim(index, -1, d)
    values = ModeBackward.apply(input, d, index, bool(keepdim))
    return _RETURN_TYPES["mode"](values, index if keepdim else shape.squeeze(index, d))


@declare(
    methods=True,
    differentiable=False,
    samples=(
        Sample(T(8, dtype="int64", high=2)),
        Sample(T(3, 4, dtype="int64", high=2), True, True),
        Sample(T(4, 2, dtype="int64", high=2), return_counts=True, dim=0),
    ),
)
def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim=None):  # noqa: A002
    """Each run of equal consecutive elements (or slices along ``dim``) kept once; with ``return_inverse`` each
    element's run number, with ``return_counts`` each run's length."""
    if dim is None:
        flat = shape.reshape(input.detach(), -1)
        n = flat.numel()
        changed = flat[1:] != flat[:-1] if n else None
        inverse_shape = tuple(input.shape)
    else:
        d = wrap_dim(int(dim), input.dim())
        n = input.shape[d]
        slices = shape.reshape(movedim(input.detach(), d, 0), (n, -1)) if n else None
        changed = (slices[1:] != slices[:-1]).any(1) if n else None
        inverse_shape = (n,)
    if n == 0:
        empty = creation.zeros(0, dtype=int64, device=input.device)
        values = input.detach().clone()
        inverse, counts = creation.zeros(inverse_shape, dtype=int64, device=input.device), empty
    else:
        starts = shape.cat([creation.ones(1, dtype=bool_, device=input.device), changed])
        first = shape.reshape(indexing.nonzero(starts), -1)
        values = (
            indexing.masked_select(flat, starts) if dim is None else indexing.index_select(input.detach(), d, first)
        )
        inverse = shape.reshape(reduction.cumsum(starts, 0) - 1, inverse_shape)
        counts = diff(first, append=creation.tensor([n], dtype=int64, device=input.device))
    if not (return_inverse or return_counts):
        return values
    return (values, *([inverse] if return_inverse else []), *([counts] if return_counts else []))


_RENORM_EPS = 1e-7  # what torch adds to the norm before dividing


def _renorm_parts(x: Tensor, p: float, dim: int, maxnorm: float):
    """The norms of the slices along ``dim`` (over every other dim, kept), which of them exceed ``maxnorm``, and
    the factor each slice is scaled by."""
    others = tuple(k for k in range(x.dim()) if k != dim)
    norm = reduction.sum(x.abs() ** p, others, keepdim=True) ** (1.0 / p)
    over = norm > maxnorm
    factor = indexing.where(over, maxnorm / (norm + _RENORM_EPS), 1.0)
    return norm, over, factor, others


class Renorm(Function):
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``. Its gradient
    is written with differentiable ops of the saved input, so it differentiates again."""

    node_name = "RenormBackward0"

    @staticmethod
    def forward(ctx, x, p, dim, maxnorm):
        ctx.args = (p, dim, maxnorm)
        ctx.save_for_backward(x)
        return x * _renorm_parts(x, p, dim, maxnorm)[2]

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p, dim, maxnorm = ctx.args
        norm, over, factor, others = _renorm_parts(x, p, dim, maxnorm)
        # d norm / d x = sign(x) |x|^(p-1) / norm^(p-1); the factor maxnorm / (norm + eps) falls with the norm
        dnorm = x.sign() * x.abs() ** (p - 1) / norm ** (p - 1)
        inner = reduction.sum(g * x, others, keepdim=True)
        shrink = g * factor - maxnorm / (norm + _RENORM_EPS) ** 2 * inner * dnorm
        return indexing.where(over, shrink, g), None, None, None


@declare(
    methods=True,
    samples=(Sample(T(3, 4), 2, 0, 1.0), Sample(T(2, 3, 2), 1, 1, 0.8), Sample(T(3, 4), 3.0, -1, 5.0)),
)
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:  # noqa: A002
    """``input`` with every slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled to norm ``maxnorm``."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} dimensions")
    d = wrap_dim(int(dim), input.dim())
    if not input.is_floating_point():
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got " + _dtype_name(input.dtype)
        )
    return Renorm.apply(input, float(p), d, float(maxnorm))


class Poisson(Function):
    """Poisson draws with the rates of ``input``; no reparametrised gradient (zeros, as torch)."""

    node_name = "PoissonBackward0"

    @staticmethod
    def forward(ctx, rates, generator):
        host = rates._host()
        draws = creation._rng_for(generator).poisson(host).astype(host.dtype)
        return Tensor._make(rates._backend.from_host(draws))

    @staticmethod
    def backward(ctx, g):
        return g * 0, None


@declare
def poisson(input: Tensor, generator=None) -> Tensor:  # noqa: A002
    """A draw of the Poisson distribution at each element, whose rate it is (in ``input``'s float dtype)."""
    if not input.is_floating_point():
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{_dtype_name(input.dtype)}'")
    if input.numel() and bool((input.detach() < 0).any()):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return Poisson.apply(input, generator)


# --- parametric ReLU (``nn.functional.prelu``, ``torch.prelu`` and ``Tensor.prelu``) ------------------------------
class _PReLU(Function):
    """``input`` where positive, else ``weight * input``, the weight one value or one per channel (dim 1); one node
    (torch's ``PreluKernelBackward0``) with a backward in tensor ops, so it has a second derivative."""

    node_name = "PreluKernelBackward0"

    @staticmethod
    def _channel_weight(input: Tensor, weight: Tensor) -> Tensor:
        if weight.numel() == 1 or input.dim() < 2:
            return weight.reshape(())
        return weight.reshape((input.shape[1],) + (1,) * (input.dim() - 2))

    @staticmethod
    def forward(ctx, input: Tensor, weight: Tensor) -> Tensor:
        ctx.save_for_backward(input, weight)
        return indexing.where(input > 0, input, _PReLU._channel_weight(input, weight) * input)

    @staticmethod
    def backward(ctx, grad: Tensor):
        input, weight = ctx.saved_tensors
        positive = input > 0
        w = _PReLU._channel_weight(input, weight)
        grad_input = indexing.where(positive, grad, w * grad) if ctx.needs_input_grad[0] else None
        grad_weight = None
        if ctx.needs_input_grad[1]:
            per_element = indexing.where(positive, 0.0, input * grad)
            if weight.numel() == 1 or input.dim() < 2:
                grad_weight = per_element.sum().reshape(weight.shape)
            else:
                dims = tuple(d for d in range(input.dim()) if d != 1)
                grad_weight = per_element.sum(dims).reshape(weight.shape)
        return grad_input, grad_weight


@declare(samples=(Sample(T(2, 3, 4), T(3)), Sample(T(2, 3), T(1)), Sample(T(4), T(1))))
def prelu(input: Tensor, weight: Tensor) -> Tensor:  # noqa: A002
    """Parametric ReLU: negative inputs scaled by a learned ``weight`` (one value, or one per channel of dim 1)."""
    if not isinstance(input, Tensor):
        raise not_a_tensor("prelu", "input", 1, input)
    if not isinstance(weight, Tensor):
        raise not_a_tensor("prelu", "weight", 2, weight)
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.dim()}")
    if weight.dtype != input.dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {input.dtype.scalar_name} and {weight.dtype.scalar_name}"
        )
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(
            "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{weight.numel()} and channel size = {channels}."
        )
    if grad_state.autocast is not None:
        input, weight = autocast_to(None, input, weight)
    return _PReLU.apply(input, weight)


@declare(methods=("prelu",), name="_prelu_method")
def _prelu_method(self: Tensor, weight: Tensor) -> Tensor:
    """``Tensor.prelu``: ``prelu(self, weight)`` (its weight is the method's first argument in torch's messages)."""
    if not isinstance(weight, Tensor):
        raise not_a_tensor("prelu", "weight", 1, weight)
    return prelu(self, weight)
