"""More of torch's tensor functions, composed from the differentiable ops (views, indexing, cat, matmul, ...) so
their gradients and double backward come from those ops; ``Take`` and ``IndexCopy`` are Functions of their own
because torch names their nodes and no composition gives those nodes.
"""

from __future__ import annotations

import math

import numpy as np

from .._tensor import Tensor
from .._types import broadcast_shapes as _broadcast_shapes
from .._types import int64, wrap_dim
from ..autograd.function import Function
from . import creation, indexing, inplace, shape
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
    return shape.permute(input, *order[:n]) if n else shape.permute(input)


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
