"""Shape ops: views (view, reshape, transpose, permute, squeeze, unsqueeze, expand) share storage and the
version counter with their base; cat, stack, clone, repeat and dtype/device moves copy."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from .._types import Size, to_device, to_dtype
from ..autograd.function import Function
from ._common import check_same_device, result_type, shape_str, wrap_dim


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _infer_shape(shape: tuple, numel: int) -> tuple:
    """Resolve a single -1, with torch's error for shapes that do not fit."""
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    fits = (known != 0 and numel % known == 0) if -1 in shape else known == numel
    if not fits:
        raise RuntimeError(f"shape '{shape_str(shape)}' is invalid for input of size {numel}")
    return tuple(numel // known if s == -1 else s for s in shape)


class View(Function):
    node_name = "ViewBackward0"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return x._view_of(x._data.reshape(shape))

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.in_shape), None


class ReshapeCopy(View):
    node_name = "UnsafeViewBackward0"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return Tensor._make(
            x._data.copy().reshape(shape) if isinstance(x._data, np.ndarray) else x._data.reshape(shape)
        )


def _is_view_possible(data, shape) -> bool:
    if not isinstance(data, np.ndarray):
        return data.is_c_contiguous()
    try:
        r = data.view()
        r.shape = shape  # raises when a copy would be needed
        return True
    except AttributeError:
        return False


def view(x: Tensor, *shape) -> Tensor:
    """Same storage, new shape; fails (like torch) when the strides do not allow it."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, Size, int)):
        return x.to(shape[0])
    shape = _infer_shape(_shape_arg(shape), x.numel())
    if not _is_view_possible(x._data, shape):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
            "two contiguous subspaces). Use .reshape(...) instead."
        )
    return View.apply(x, shape)


def reshape(x: Tensor, *shape) -> Tensor:
    """A view when possible, else a copy (torch's two node names follow)."""
    shape = _infer_shape(_shape_arg(shape), x.numel())
    if shape == x.shape and x.grad_fn is None and not x.requires_grad:
        return View.apply(x, shape)
    return (View if _is_view_possible(x._data, shape) else ReshapeCopy).apply(x, shape)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if x.dim() == 0:
        return reshape(x, 1)
    s, e = wrap_dim(start_dim, x.dim()), wrap_dim(end_dim, x.dim())
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x
    shape = x.shape[:s] + (int(np.prod(x.shape[s : e + 1])),) + x.shape[e + 1 :]
    return reshape(x, shape)


class Permute(Function):
    node_name = "PermuteBackward0"

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return x._view_of(x._data.transpose(dims))

    @staticmethod
    def backward(ctx, g):
        return permute(g, tuple(np.argsort(ctx.dims))), None


class Transpose(Permute):
    node_name = "TransposeBackward0"


class T(Permute):
    node_name = "TBackward0"


def permute(x: Tensor, *dims) -> Tensor:
    dims = _shape_arg(dims) if dims and not isinstance(dims[0], int) else tuple(dims)
    if len(dims) != x.dim():
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired "
            f"ordering of dimensions i.e. input.dim() = {x.dim()} is not equal to len(dims) = {len(dims)}"
        )
    dims = tuple(wrap_dim(d, x.dim()) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return Permute.apply(x, dims)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    if x.dim() == 0:
        return View.apply(x, ())
    d0, d1 = wrap_dim(dim0, x.dim()), wrap_dim(dim1, x.dim())
    dims = list(range(x.dim()))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return Transpose.apply(x, tuple(dims))


swapaxes = transpose


def t(x: Tensor) -> Tensor:
    if x.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
    return T.apply(x, tuple(reversed(range(x.dim()))))


class Squeeze(Function):
    node_name = "SqueezeBackward0"

    @staticmethod
    def forward(ctx, x, dims):
        ctx.in_shape = x.shape
        return x._view_of(x._data.reshape([s for i, s in enumerate(x.shape) if i not in dims]))

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.in_shape), None


class SqueezeDim(Squeeze):
    node_name = "SqueezeBackward1"


def squeeze(x: Tensor, dim=None) -> Tensor:
    if dim is None:
        return Squeeze.apply(x, tuple(i for i, s in enumerate(x.shape) if s == 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(wrap_dim(d, x.dim()) for d in dims)
    return SqueezeDim.apply(x, tuple(d for d in dims if x.shape[d] == 1))


class Unsqueeze(Function):
    node_name = "UnsqueezeBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        shape = x.shape[:dim] + (1,) + x.shape[dim:]
        return x._view_of(x._data.reshape(shape))

    @staticmethod
    def backward(ctx, g):
        return squeeze(g, ctx.dim), None


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    return Unsqueeze.apply(x, wrap_dim(dim, x.dim() + 1))


class Expand(Function):
    node_name = "ExpandBackward0"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        if isinstance(x._data, np.ndarray):
            return x._view_of(np.broadcast_to(x._data, shape))
        from ..backend import cuda

        return x._view_of(cuda.broadcast_to(x._data, shape))

    @staticmethod
    def backward(ctx, g):
        from .reduction import sum_to_shape

        return sum_to_shape(g, ctx.in_shape), None


def expand(x: Tensor, *sizes) -> Tensor:
    """Broadcast to ``sizes`` without copying (-1 keeps a dimension)."""
    sizes = _shape_arg(sizes)
    if len(sizes) < x.dim():
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{shape_str(x.shape)}}}, size={shape_str(sizes)}): the number of sizes "
            f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({x.dim()})"
        )
    lead = len(sizes) - x.dim()
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    for i, s in enumerate(x.shape):
        if s != 1 and s != shape[i + lead]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[i + lead]}) must match the existing size ({s}) at "
                f"non-singleton dimension {i + lead}.  Target sizes: {shape_str(sizes)}.  Tensor sizes: "
                f"{shape_str(x.shape)}"
            )
    if shape == x.shape and not x.requires_grad:
        return x._view_of(x._data)
    return Expand.apply(x, shape)


def broadcast_to(x: Tensor, shape) -> Tensor:
    return expand(x, tuple(shape))


class Clone(Function):
    node_name = "CloneBackward0"

    @staticmethod
    def forward(ctx, x):
        return Tensor._make(x._data.copy())

    @staticmethod
    def backward(ctx, g):
        return g


def clone(x: Tensor, memory_format=None) -> Tensor:
    return Clone.apply(x)


class Cat(Function):
    node_name = "CatBackward0"

    @staticmethod
    def forward(ctx, dim, *tensors):
        ctx.dim = dim
        ctx.sizes = [t.shape[dim] for t in tensors]
        dt = result_type(*tensors).numpy
        if check_same_device(*tensors):
            from ..backend import cuda

            return Tensor._make(cuda.concatenate([t._data for t in tensors], dim, dt))
        return Tensor._make(np.concatenate([t._data.astype(dt, copy=False) for t in tensors], axis=dim))

    @staticmethod
    def backward(ctx, g):
        out, start = [None], 0
        for size in ctx.sizes:
            out.append(narrow(g, ctx.dim, start, size))
            start += size
        return tuple(out)


class Stack(Cat):
    node_name = "StackBackward0"

    @staticmethod
    def forward(ctx, dim, *tensors):
        return Cat.forward(
            ctx, dim, *[t._view_of(t._data.reshape(t.shape[:dim] + (1,) + t.shape[dim:])) for t in tensors]
        )

    @staticmethod
    def backward(ctx, g):
        return (None, *unbind(g, ctx.dim))


def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    tensors = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)] or tensors[:1]
    d = wrap_dim(dim, tensors[0].dim())
    ref = tensors[0].shape
    for i, t in enumerate(tensors):
        if t.dim() != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and {t.dim()}")
        for k, (a, b) in enumerate(zip(ref, t.shape)):
            if k != d and a != b:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {a} but got size {b} for "
                    f"tensor number {i} in the list."
                )
    return Cat.apply(d, *tensors)


concat = concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors along a new dimension."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {shape_str(tensors[0].shape)} at entry 0 and "
                f"{shape_str(t.shape)} at entry {i}"
            )
    return Stack.apply(wrap_dim(dim, tensors[0].dim() + 1), *tensors)


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, start + length)
    return x[tuple(index)]


def unbind(x: Tensor, dim: int = 0) -> tuple:
    dim = wrap_dim(dim, x.dim())
    index = [slice(None)] * x.dim()
    out = []
    for i in range(x.shape[dim]):
        index[dim] = i
        out.append(x[tuple(index)])
    return tuple(out)


def split(x: Tensor, split_size, dim: int = 0) -> tuple:
    dim = wrap_dim(dim, x.dim())
    n = x.shape[dim]
    sizes = (
        [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
        if isinstance(split_size, int)
        else list(split_size)
    )
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, dim, start, s))
        start += s
    return tuple(out)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    n = x.shape[wrap_dim(dim, x.dim())]
    return split(x, -(-n // chunks), dim)


class Repeat(Function):
    node_name = "RepeatBackward0"

    @staticmethod
    def forward(ctx, x, reps):
        ctx.in_shape, ctx.reps = x.shape, reps
        return Tensor._make(np.tile(x._data, reps))

    @staticmethod
    def backward(ctx, g):
        shape = ctx.in_shape
        lead = len(ctx.reps) - len(shape)
        full = (1,) * lead + tuple(shape)
        split_shape = []
        for r, s in zip(ctx.reps, full):
            split_shape += [r, s]
        gs = g.reshape(tuple(split_shape))
        from .reduction import sum as reduce_sum

        out = reduce_sum(gs, tuple(range(0, len(split_shape), 2)))
        return out.reshape(shape), None


def repeat(x: Tensor, *sizes) -> Tensor:
    sizes = _shape_arg(sizes)
    if len(sizes) < x.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return Repeat.apply(x, sizes)


class ToCopy(Function):
    """dtype and device conversion."""

    node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, x, dtype, device):
        ctx.in_dtype, ctx.in_cuda = x.dtype, x.is_cuda
        data = x._data
        if device is not None and (device.type == "cuda") != x.is_cuda:
            from ..backend import cuda

            data = cuda.to_device(data) if device.type == "cuda" else data.copy_to_host()
        if dtype is not None and data.dtype != dtype.numpy:
            data = data.astype(dtype.numpy)
        elif data is x._data:
            data = data.copy()
        return Tensor._make(data)

    @staticmethod
    def backward(ctx, g):
        return to(g, ctx.in_dtype, "cuda" if ctx.in_cuda else "cpu"), None, None


def to(x: Tensor, *args, dtype=None, device=None, copy: bool = False, non_blocking: bool = False, **kwargs) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``; returns ``x`` itself when
    nothing changes (unless ``copy``)."""
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, str) or type(a).__name__ == "device":
            device = a
        elif a is not None:
            dtype = a
    dtype = to_dtype(dtype) if dtype is not None else None
    device = to_device(device) if device is not None else None
    same_dtype = dtype is None or dtype.numpy == x._data.dtype
    same_device = device is None or (device.type == "cuda") == x.is_cuda
    if same_dtype and same_device and not copy:
        return x
    if device is not None and device.type == "cuda":
        from ..backend import cuda

        cuda.require()
    return ToCopy.apply(x, dtype, device)
