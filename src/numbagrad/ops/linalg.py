"""Matrix products: mm, mv, dot, and matmul's batched case. Forward on the backend's matmul (BLAS on CPU)."""

from __future__ import annotations

import math

import numpy as np

from .._tensor import Tensor
from ..autograd.function import Function
from ._common import result_np_dtype, same_backend
from ._registry import Sample, T, declare
from .reduction import sum_to_shape


def _matmul_data(a: Tensor, b: Tensor) -> Tensor:
    backend = same_backend((a, b))
    dt = result_np_dtype((a, b))
    ad = a._data if a._data.dtype == dt else backend.astype(a._data, dt)
    bd = b._data if b._data.dtype == dt else backend.astype(b._data, dt)
    return Tensor._make(backend.matmul(ad, bd))


def _check_dtypes(a: Tensor, b: Tensor, op: str) -> None:
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {_name(a)} != {_name(b)}"
            if op == "mm"
            else f"expected scalar type {_name(a)} but found {_name(b)}"
        )


def _name(t: Tensor) -> str:
    return {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "bool": "bool"}[t.dtype.name]


class _Product(Function):
    """Shared forward of the matrix products: save both operands, multiply on the backend."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _matmul_data(a, b)


class Mm(_Product):
    node_name = "MmBackward0"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = mm(g, b.t()) if ctx.needs_input_grad[0] else None
        gb = mm(a.t(), g) if ctx.needs_input_grad[1] else None
        return ga, gb


class Mv(_Product):
    node_name = "MvBackward0"

    @staticmethod
    def backward(ctx, g):
        a, v = ctx.saved_tensors
        ga = g.unsqueeze(1) * v.unsqueeze(0) if ctx.needs_input_grad[0] else None
        gv = mv(a.t(), g) if ctx.needs_input_grad[1] else None
        return ga, gv


class Dot(_Product):
    node_name = "DotBackward0"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * b if ctx.needs_input_grad[0] else None), (g * a if ctx.needs_input_grad[1] else None)


class BatchedMatmul(_Product):
    """matmul with a batch dimension (either side), broadcasting batch dims as numpy does."""

    node_name = "UnsafeViewBackward0"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        a2 = a.unsqueeze(0) if a.dim() == 1 else a
        b2 = b.unsqueeze(-1) if b.dim() == 1 else b
        g2 = g
        if a.dim() == 1:
            g2 = g2.unsqueeze(-2)
        if b.dim() == 1:
            g2 = g2.unsqueeze(-1)
        ga = matmul(g2, b2.transpose(-1, -2)) if ctx.needs_input_grad[0] else None
        gb = matmul(a2.transpose(-1, -2), g2) if ctx.needs_input_grad[1] else None
        if ga is not None:
            ga = sum_to_shape(ga, a2.shape).reshape(a.shape)
        if gb is not None:
            gb = sum_to_shape(gb, b2.shape).reshape(b.shape)
        return ga, gb


class Bmm(BatchedMatmul):
    node_name = "BmmBackward0"


class MatmulClone(BatchedMatmul):
    node_name = "CloneBackward0"


class MatmulTranspose(BatchedMatmul):
    node_name = "TransposeBackward0"


class MatmulSqueeze(Function):
    """The ``squeeze_(0)`` that ends torch's vector @ matrix (named ``SqueezeBackward4``)."""

    node_name = "SqueezeBackward4"

    @staticmethod
    def forward(ctx, x):
        return x._view_of(x._data.reshape(x.shape[1:]))

    @staticmethod
    def backward(ctx, g):
        return g.unsqueeze(0)


def _should_fold(a: Tensor, b: Tensor) -> bool:
    """torch's ``should_fold``: can the larger operand be folded into a matrix for one mm?"""
    a_larger = a.dim() >= b.dim()
    shape, strides = (a.shape, a.stride()) if a_larger else (b.shape, b.stride())
    if not a_larger:  # b.mT
        shape = shape[:-2] + (shape[-1], shape[-2])
        strides = strides[:-2] + (strides[-1], strides[-2])
    if not (len(shape) >= 3 and (b.dim() if a_larger else a.dim()) <= 2):
        return False
    if (b if a_larger else a).requires_grad:
        return True
    if a.dim() == 2:
        return False
    return math.prod(shape) == 0 or all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


def _batched_class(a: Tensor, b: Tensor) -> type:
    """Which node torch's ``_matmul_impl`` ends with for these operands (the computation is the same)."""
    if _should_fold(a, b):
        if b.dim() > a.dim() and a.dim() == 2:  # output.mT().contiguous()
            n, p = a.shape[0], b.shape[-1]
            return MatmulTranspose if 1 in (n, p) else MatmulClone
        return BatchedMatmul
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] != b.shape[0]:
        if a.shape[0] == 1 and a.requires_grad:
            return _batched_class(a[0], b)
        if b.shape[0] == 1 and b.requires_grad:
            return _batched_class(a, b[0])
    return BatchedMatmul


def _check_2d(t: Tensor, name: str) -> None:
    if t.dim() != 2:
        raise RuntimeError(f"{name} must be a matrix")


@declare(methods=True, samples=(Sample(T(3, 4), T(4, 2)),))
def mm(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors."""
    _check_2d(a, "self")
    _check_2d(b, "mat2")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]})"
        )
    _check_dtypes(a, b, "mm")
    return Mm.apply(a, b)


@declare(methods=True, samples=(Sample(T(3, 4), T(4)),))
def mv(a: Tensor, v: Tensor) -> Tensor:
    if a.dim() != 2 or v.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {a.dim()}, {v.dim()}")
    if a.shape[1] != v.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), vec ({v.shape[0]})"
        )
    return Mv.apply(a, v)


@declare(methods=True, samples=(Sample(T(4), T(4)),))
def dot(a: Tensor, b: Tensor) -> Tensor:
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have the same "
            f"number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively"
        )
    _check_dtypes(a, b, "dot")
    return Dot.apply(a, b)


@declare(methods=("matmul", "__matmul__"), samples=(Sample(T(2, 3, 4), T(4, 2)), Sample(T(4), T(2, 4, 3))))
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """torch.matmul: dot, mv, mm, or a broadcast batched product, by the operands' dimensions."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        wrong = type(b if isinstance(a, Tensor) else a).__name__
        raise TypeError(f"matmul(): argument 'other' (position 1) must be Tensor, not {wrong}")
    if a.dim() == 0 or b.dim() == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {a.dim()}D and {b.dim()}D")
    if a.dim() == 1 and b.dim() == 1:
        return dot(a, b)
    if a.dim() == 2 and b.dim() == 1:
        return mv(a, b)
    if a.dim() == 2 and b.dim() == 2:
        return mm(a, b)
    if a.dim() == 1 and b.dim() == 2:
        return MatmulSqueeze.apply(mm(a.unsqueeze(0), b))
    k_a = a.shape[-1]
    k_b = b.shape[-2] if b.dim() > 1 else b.shape[0]
    if k_a != k_b:
        lhs = "x".join(str(s) for s in (math.prod(a.shape[:-1]), k_a))
        rhs = "x".join(str(s) for s in b.shape[-2:])
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({lhs} and {rhs})")
    _check_dtypes(a, b, "mm")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise RuntimeError(
            f"The size of tensor a ({a.shape[0]}) must match the size of tensor b ({b.shape[0]}) at non-singleton "
            "dimension 0"
        ) from None
    return _batched_class(a, b).apply(a, b)


@declare(methods=True, samples=(Sample(T(2, 3, 4), T(2, 4, 2)),))
def bmm(a: Tensor, b: Tensor) -> Tensor:
    if a.dim() != 3 or b.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    return Bmm.apply(a, b)


@declare(name="_rmatmul_operator", methods=("__rmatmul__",))
def rmatmul(b: Tensor, a) -> Tensor:
    """``a @ b`` with the tensor on the right."""
    return matmul(a, b)
