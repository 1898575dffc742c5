"""``grouped_mm`` (one matmul per group, the groups cut along a dim by ``offs``) and the float8 products
``scaled_mm``/``scaled_grouped_mm``, as torch's CPU kernels take them. numbagrad has no float8 dtype and torch's
CPU build has no ``scaled_grouped_mm``, so for every tensor numbagrad can make those two raise torch's errors.
This module imports nothing from ``nn.functional`` (which re-exports it)."""

from __future__ import annotations

import enum

import numpy as np

from .. import ops
from .._tensor import Tensor
from .._typeinfo import CPP_NAMES
from ..autograd.function import Function


class ScalingType(enum.IntEnum):
    """How ``scaled_mm``'s scales cover their matrix (torch's ``nn.functional.ScalingType``)."""

    TensorWise = 0
    RowWise = 1
    BlockWise1x16 = 2
    BlockWise1x32 = 3
    BlockWise1x128 = 4
    BlockWise128x128 = 5


class SwizzleType(enum.IntEnum):
    """The memory arrangement of ``scaled_mm``'s scales (torch's ``nn.functional.SwizzleType``)."""

    NO_SWIZZLE = 0
    SWIZZLE_32_4_4 = 1


def _groups(offs: np.ndarray) -> list:
    """``[start, stop)`` of each group from the cumulative ends ``offs``."""
    starts = np.concatenate([[0], offs[:-1]])
    return [(int(a), int(b)) for a, b in zip(starts, offs)]


def _product(a: Tensor, b: Tensor, offs) -> Tensor:
    """The grouped product with differentiable ops (what forward computes and backward differentiates)."""
    if offs is None:  # (G, M, K) @ (G, K, N)
        return a.matmul(b)
    spans = _groups(offs)
    if a.dim() == 2 and b.dim() == 3:  # rows of a cut into groups, each times its b
        return ops.cat([a[i:j].matmul(b[g]) for g, (i, j) in enumerate(spans)], 0)
    if a.dim() == 3 and b.dim() == 2:  # columns of b cut into groups, each times its a
        return ops.cat([a[g].matmul(b[:, i:j]) for g, (i, j) in enumerate(spans)], 1)
    return ops.stack([a[:, i:j].matmul(b[i:j]) for i, j in spans], 0)  # the contraction dim cut: (G, M, N)


class GroupedMm(Function):
    """One node for the grouped product (torch's ``GroupedMmBackward0``); its backward is the product's own,
    written with differentiable ops."""

    node_name = "GroupedMmBackward0"

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor, offs):
        ctx.offs = offs
        ctx.save_for_backward(a, b)
        return _product(a, b, offs)

    @staticmethod
    def backward(ctx, g: Tensor):
        a, b = ctx.saved_tensors
        offs = ctx.offs
        if offs is None:
            return g.matmul(b.transpose(-1, -2)), a.transpose(-1, -2).matmul(g), None
        spans = _groups(offs)
        if a.dim() == 2 and b.dim() == 3:
            ga = ops.cat([g[i:j].matmul(b[k].t()) for k, (i, j) in enumerate(spans)], 0)
            gb = ops.stack([a[i:j].t().matmul(g[i:j]) for i, j in spans], 0)
        elif a.dim() == 3 and b.dim() == 2:
            ga = ops.stack([g[:, i:j].matmul(b[:, i:j].t()) for i, j in spans], 0)
            gb = ops.cat([a[k].t().matmul(g[:, i:j]) for k, (i, j) in enumerate(spans)], 1)
        else:
            ga = ops.cat([g[k].matmul(b[i:j].t()) for k, (i, j) in enumerate(spans)], 1)
            gb = ops.cat([a[:, i:j].t().matmul(g[k]) for k, (i, j) in enumerate(spans)], 0)
        return ga, gb, None


def _check_strides(t: Tensor) -> None:
    size = t.element_size()
    if any((s * size) % 16 for s in t.stride() if s != 1):
        raise RuntimeError("strides should be multiple of 16 bytes")


def grouped_mm(mat_a: Tensor, mat_b: Tensor, *, offs: Tensor | None = None, bias: Tensor | None = None,
               out_dtype=None) -> Tensor:  # fmt: skip
    """Matrix products of groups: (G, M, K) @ (G, K, N) batched; or, with int32 cumulative group ends ``offs``,
    the rows of a 2-d ``mat_a`` (each group times its matrix of a 3-d ``mat_b``), the columns of a 2-d ``mat_b``
    (times the matrices of a 3-d ``mat_a``), or the contraction dim of two 2-d matrices ((G, M, N) out).
    float32, float16 and bfloat16 only, with rows a multiple of 16 bytes long, as torch's CPU kernel."""
    for name, t in (("mat_a", mat_a), ("mat_b", mat_b)):
        if t.dtype.name not in ("float32", "float16", "bfloat16"):
            raise RuntimeError(f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got {t.dtype.scalar_name}")
        if t.dim() not in (2, 3):
            raise RuntimeError(f"{name} has to be 2 or 3d")
    if (mat_a.dim() == 2 or mat_b.dim() == 2) != (offs is not None):
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d")
    if offs is not None and offs.dtype.name != "int32":
        raise RuntimeError("Offsets have to be int32")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    _check_strides(mat_a)
    _check_strides(mat_b)
    if mat_a.shape[-1] != mat_b.shape[-2]:
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    if offs is None and mat_a.shape[0] != mat_b.shape[0]:
        raise RuntimeError("batched dimension has to match")
    if offs is not None:
        groups = mat_b.shape[0] if mat_b.dim() == 3 else mat_a.shape[0] if mat_a.dim() == 3 else None
        if groups is not None and offs.shape[0] != groups:
            raise RuntimeError("matrix batch sizes have to match")
    if out_dtype is not None and out_dtype != mat_a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    if mat_a.dtype != mat_b.dtype:
        raise RuntimeError(
            f"Expected out tensor to have dtype {CPP_NAMES[mat_b.dtype.name]}, but got {CPP_NAMES[mat_a.dtype.name]} "
            "instead"
        )
    ends = None if offs is None else offs.detach().cpu().numpy().astype(np.int64)
    return GroupedMm.apply(mat_a, mat_b, ends)


def _listed(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def scaled_mm(mat_a: Tensor, mat_b: Tensor, scale_a, scale_recipe_a, scale_b, scale_recipe_b, swizzle_a=None,
              swizzle_b=None, bias: Tensor | None = None, output_dtype=None, contraction_dim=(),
              use_fast_accum: bool = False) -> Tensor:  # fmt: skip
    """torch's ``mm(mat_a, mat_b)`` of float8 matrices decoded by scales. Its CPU kernel takes only float8
    operands, which numbagrad has none of: this raises torch's error for what it is given (the matrix checks, then
    torch's description of the valid scaling configurations)."""
    for name, t in (("mat_a", mat_a), ("mat_b", mat_b)):
        if t.dim() != 2:
            raise ValueError(f"{name} must be a matrix")
    sa, sb = _listed(scale_a)[0], _listed(scale_b)[0]

    def described(t: Tensor) -> str:
        return f"size()={list(t.shape)}, {'scale_a' if t is sa else 'scale_b'}.stride()={list(t.stride())}"

    m, n = mat_a.shape[0], mat_b.shape[1]
    raise ValueError(
        "Invalid scaling configuration.\n"
        "- For TensorWise scaling, a and b should be float8, scales should be float and singletons.\n"
        f"- For RowWise scaling, a and b should be float8, scales should be float, scale_a should be ({m}, 1) and "
        f"scale_b should be (1, {n}), and both should be contiguous.\n"
        f"Got mat_a.dtype()={mat_a.dtype.scalar_name}, scale_a.dtype()={sa.dtype.scalar_name}, "
        f"scale_a.{described(sa)}, mat_b.dtype()={mat_b.dtype.scalar_name}, "
        f"scale_b.dtype()={sb.dtype.scalar_name}, scale_b.{described(sb)}".replace(
            ", scale_b.stride", " and scale_b.stride"
        )
    )


def scaled_grouped_mm(mat_a: Tensor, mat_b: Tensor, scale_a, scale_recipe_a, scale_b, scale_recipe_b,
                      swizzle_a=None, swizzle_b=None, bias: Tensor | None = None, offs: Tensor | None = None,
                      output_dtype=None, contraction_dim=(), use_fast_accum: bool = False) -> Tensor:  # fmt: skip
    """torch's grouped float8 product: its kernel exists only for CUDA, so on the CPU torch refuses every call
    with ``NotImplementedError``, as this does."""
    raise NotImplementedError(
        "Could not run 'aten::_scaled_grouped_mm_v2' with arguments from the 'CPU' backend. This could be because "
        "the operator doesn't exist for this backend, or was omitted during the selective/custom build process (if "
        "using custom build)."
    )
