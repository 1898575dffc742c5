"""Matrix products: mm, mv, dot, and matmul's batched case. Forward on the backend's matmul (BLAS on CPU)."""

from __future__ import annotations

import math
import string
from typing import NamedTuple

import numpy as np

from .._tensor import Tensor
from .._typeinfo import CPP_NAMES
from ..autograd.function import Function, edge_of, make_node, saved_input_unhooked
from ..autograd.grad_mode import nothing_records, state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for
from ._common import (
    autocast_to,
    broadcast_shapes,
    not_a_tensor,
    result_np_dtype,
    result_type,
    same_backend,
    wrap_dim,
)
from ._common import new_shell as _new
from ._registry import Call, Sample, T, declare
from .complex_ops import conj
from .inplace import write_inplace
from .reduction import sum_to_shape


def _matmul_data(a: Tensor, b: Tensor) -> Tensor:
    backend = same_backend((a, b))
    dt = result_np_dtype((a, b))
    ad = a._data if a._data.dtype == dt else backend.astype(a._data, dt)
    bd = b._data if b._data.dtype == dt else backend.astype(b._data, dt)
    return Tensor._make(backend.matmul(ad, bd))


def _check_mm(s1: tuple, s2: tuple, d1, d2) -> None:
    """torch's ``mm`` checks of two matrices by their shapes and dtypes (the sizes first)."""
    if s1[1] != s2[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({s1[0]}x{s1[1]} and {s2[0]}x{s2[1]})")
    if d1 != d2:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {CPP_NAMES[d1.name]} != {CPP_NAMES[d2.name]}"
        )
    _no_bool(d1, "addmm_impl_cpu_")


def _check_mv(sm: tuple, sv: tuple, dm, dv) -> None:
    """torch's ``mv`` checks of a matrix and a vector by their shapes and dtypes (the sizes first)."""
    if sm[1] != sv[0]:
        raise RuntimeError(f"size mismatch, got input ({sm[0]}), mat ({sm[0]}x{sm[1]}), vec ({sv[0]})")
    if dm != dv:
        raise RuntimeError(
            f"addmv input tensors must have the same dtype, but got {dv.scalar_name}, {dm.scalar_name}, and "
            f"{dv.scalar_name}"
        )
    _no_bool(dm, "addmv_impl_cpu")


def _check_bmm(s1: tuple, s2: tuple, d1, d2) -> None:
    """torch's ``bmm`` checks of two stacks of matrices by their shapes and dtypes (the sizes first)."""
    _check_batches(s1, s2)
    if d1 != d2:
        raise RuntimeError(f"expected scalar type {d1.scalar_name} but found {d2.scalar_name}")
    _no_bool(d1, "bmm")


def _no_bool(dt, kernel: str) -> None:
    """torch's matrix kernels take no bool tensors (``"dot" not implemented for 'Bool'``)."""
    if dt.name == "bool":
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _plain_float_pair(a, b) -> bool:
    """Whether ``a`` and ``b`` are plain Tensors (not sparse, batched or subclassed) of matrices that multiply, of
    one float dtype on one device: the operands ``mm`` and ``matmul`` hand straight to ``Mm.apply``, whose checks
    they pass."""
    if type(a) is not Tensor or type(b) is not Tensor:
        return False
    ad, bd = a._data, b._data
    return (
        ad.ndim == 2
        and bd.ndim == 2
        and ad.shape[1] == bd.shape[0]
        and ad.dtype is bd.dtype
        and ad.dtype.kind == "f"
        and type(ad) is type(bd)
    )


def _plain_float_stacks(a, b) -> bool:
    """Whether ``a`` and ``b`` are plain Tensors of stacks of matrices with one batch shape (three dims or more
    each) that multiply, of one float dtype on one device: ``matmul``'s operands that pass its checks and take
    ``BatchedMatmul`` as they are (nothing to broadcast or fold)."""
    if type(a) is not Tensor or type(b) is not Tensor:
        return False
    ad, bd = a._data, b._data
    sa, sb = ad.shape, bd.shape
    return (
        len(sa) == len(sb) >= 3
        and sa[:-2] == sb[:-2]
        and sa[-1] == sb[-2]
        and ad.dtype is bd.dtype
        and ad.dtype.kind == "f"
        and type(ad) is type(bd)
    )


class _Product(Function):
    """Shared forward of the matrix products: save both operands, multiply on the backend."""

    _multilinear = True  # linear in each operand: forward mode's tangent is ``t_a @ b + a @ t_b`` (forward_ad)

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for plain Tensors of one float dtype on one device, outside anomaly and inference mode, with
        no tracer or saved-tensor hooks (``st.fast``): the product and the node ``_link_outputs`` builds (both
        operands saved, the metadata its gradients are checked against), without the general path's loops;
        anything else returns None."""
        a, b = args
        if type(a) is not Tensor or type(b) is not Tensor or not st.fast or a._is_inference or b._is_inference:
            return None
        ad, bd = a._data, b._data
        if ad.dtype is not bd.dtype or type(ad) is not type(bd) or ad.dtype.kind != "f":
            return None
        backend = _BACKENDS.get(type(ad)) or backend_for(ad)
        result = _new(Tensor)
        out = result._data = backend.matmul(ad, bd)
        need_a = a._requires_grad or a.grad_fn is not None
        need_b = b._requires_grad or b.grad_fn is not None
        if st.enabled and (need_a or need_b):
            ctx = cls._backward_cls()
            ctx.needs_input_grad = (need_a, need_b)
            make_node(ctx, (edge_of(a), edge_of(b)), result)
            ctx._input_meta = ((ad.shape, ad.dtype, backend), (bd.shape, bd.dtype, backend))
            ctx._output_meta = ((out.shape, out.dtype, backend),)
            ctx._saved = [saved_input_unhooked(a), saved_input_unhooked(b)]
        return result

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _matmul_data(a, b)


class Mm(_Product):
    node_name = "MmBackward0"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        gd = g._data
        if nothing_records(state) and gd.dtype.kind == "f" and a._data.dtype == b._data.dtype == gd.dtype:
            # (without create_graph: the two products on the arrays, not two transposes and two nodes' calls)
            backend = g._backend
            ga = Tensor._make(backend.matmul(gd, _last_two_swapped(b._data))) if ctx.needs_input_grad[0] else None
            gb = Tensor._make(backend.matmul(_last_two_swapped(a._data), gd)) if ctx.needs_input_grad[1] else None
            return ga, gb
        ga = mm(g, conj(b.t())) if ctx.needs_input_grad[0] else None
        gb = mm(conj(a.t()), g) if ctx.needs_input_grad[1] else None
        return ga, gb


class Mv(_Product):
    node_name = "MvBackward0"

    @staticmethod
    def backward(ctx, g):
        a, v = ctx.saved_tensors
        ga = g.unsqueeze(1) * conj(v.unsqueeze(0)) if ctx.needs_input_grad[0] else None
        gv = mv(conj(a.t()), g) if ctx.needs_input_grad[1] else None
        return ga, gv


class Dot(_Product):
    node_name = "DotBackward0"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * conj(b) if ctx.needs_input_grad[0] else None), (g * conj(a) if ctx.needs_input_grad[1] else None)


class BatchedMatmul(_Product):
    """matmul with a batch dimension (either side), broadcasting batch dims as numpy does."""

    node_name = "UnsafeViewBackward0"

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        if nothing_records(state) and g._data.dtype.kind == "f" and a._data.dtype == b._data.dtype == g._data.dtype:
            return _batched_grads(g._data, a._data, b._data, ctx.needs_input_grad, g._backend)
        a2 = a.unsqueeze(0) if a.dim() == 1 else a
        b2 = b.unsqueeze(-1) if b.dim() == 1 else b
        g2 = g
        if a.dim() == 1:
            g2 = g2.unsqueeze(-2)
        if b.dim() == 1:
            g2 = g2.unsqueeze(-1)
        ga = matmul(g2, conj(b2.transpose(-1, -2))) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            if b2.dim() == 2 and a2.dim() > 2:  # one 2-D product over the folded stack, no per-matrix sum
                gb = mm(conj(a2.reshape(-1, a2.shape[-1]).t()), g2.reshape(-1, g2.shape[-1]))
            else:
                gb = matmul(conj(a2.transpose(-1, -2)), g2)
        if ga is not None:
            ga = sum_to_shape(ga, a2.shape).reshape(a.shape)
        if gb is not None:
            gb = sum_to_shape(gb, b2.shape).reshape(b.shape)
        return ga, gb


def _last_two_swapped(d):
    order = list(range(d.ndim))
    order[-1], order[-2] = order[-2], order[-1]
    return d.transpose(order)


def _batched_grads(gd, ad, bd, needs: tuple, backend) -> tuple:
    """``BatchedMatmul``'s gradients on the arrays, for a backward that records no graph (real floats of one
    dtype): the formula's dozen tensor ops cost more than its products at attention's sizes (a (2, 2, 4, 8)
    product's forward and backward: 90 us; torch 56)."""
    a2 = backend.reshape(ad, (1, *ad.shape)) if ad.ndim == 1 else ad
    b2 = backend.reshape(bd, (*bd.shape, 1)) if bd.ndim == 1 else bd
    g2 = gd
    if ad.ndim == 1:
        g2 = backend.reshape(g2, (*g2.shape[:-1], 1, g2.shape[-1]))
    if bd.ndim == 1:
        g2 = backend.reshape(g2, (*g2.shape, 1))
    ga = gb = None
    if needs[0]:
        ga = backend.reshape(backend.sum_to_shape(backend.matmul(g2, _last_two_swapped(b2)), a2.shape), ad.shape)
    if needs[1]:
        if b2.ndim == 2 and a2.ndim > 2:  # one 2-D product over the folded stack, no per-matrix sum
            rows = _last_two_swapped(backend.reshape(a2, (-1, a2.shape[-1])))
            gb = backend.matmul(rows, backend.reshape(g2, (-1, g2.shape[-1])))
        else:
            gb = backend.sum_to_shape(backend.matmul(_last_two_swapped(a2), g2), b2.shape)
        gb = backend.reshape(gb, bd.shape)
    return (None if ga is None else Tensor._make(ga)), (None if gb is None else Tensor._make(gb))


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


class Operand(NamedTuple):
    """What torch's ``matmul`` reads of an operand to choose its path: the shape, the strides (whether the larger
    operand folds into a matrix as a view) and whether it requires grad."""

    shape: tuple
    strides: tuple
    requires_grad: bool

    @classmethod
    def of(cls, t: Tensor) -> Operand:
        """The layout of tensor ``t``."""
        return cls(tuple(t.shape), t.stride(), t.requires_grad)

    @classmethod
    def contiguous(cls, shape: tuple, requires_grad: bool) -> Operand:
        """A new row-major tensor of ``shape`` (an op's result)."""
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
        return cls(tuple(shape), strides, requires_grad)

    def first(self) -> Operand:
        """The operand's first matrix (``t[0]``)."""
        return Operand(self.shape[1:], self.strides[1:], self.requires_grad)


def _should_fold(a: Operand, b: Operand) -> bool:
    """torch's ``should_fold``: can the larger operand be folded into a matrix for one mm?"""
    a_larger = len(a.shape) >= len(b.shape)
    shape, strides = (a.shape, a.strides) if a_larger else (b.shape, b.strides)
    if not a_larger:  # b.mT
        shape = shape[:-2] + (shape[-1], shape[-2])
        strides = strides[:-2] + (strides[-1], strides[-2])
    if not (len(shape) >= 3 and len(b.shape if a_larger else a.shape) <= 2):
        return False
    if (b if a_larger else a).requires_grad:
        return True
    if len(a.shape) == 2:
        return False
    return math.prod(shape) == 0 or all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


def _batched_class(a: Operand, b: Operand) -> type:
    """Which node torch's ``_matmul_impl`` ends with for these operands (the computation is the same)."""
    if _should_fold(a, b):
        if len(b.shape) > len(a.shape) == 2:  # output.mT().contiguous()
            n, p = a.shape[0], b.shape[-1]
            return MatmulTranspose if 1 in (n, p) else MatmulClone
        return BatchedMatmul
    if len(a.shape) == 3 and len(b.shape) == 3 and a.shape[0] != b.shape[0]:
        if a.shape[0] == 1 and a.requires_grad:
            return _batched_class(a.first(), b)
        if b.shape[0] == 1 and b.requires_grad:
            return _batched_class(a, b.first())
    return BatchedMatmul


_SMALL_PRODUCT_NODES = {
    (1, 1): "DotBackward0",
    (2, 1): "MvBackward0",
    (1, 2): "SqueezeBackward4",
    (2, 2): "MmBackward0",
}


def matmul_node_name(a: Operand, b: Operand) -> str:
    """The node torch's ``matmul`` of operands laid out so ends with (for ops built on it, as attention's math
    path is in torch)."""
    small = _SMALL_PRODUCT_NODES.get((len(a.shape), len(b.shape)))
    return small or _batched_class(a, b).node_name


def _check_2d(t: Tensor, name: str) -> None:
    if t.dim() != 2:
        raise RuntimeError(f"{name} must be a matrix")


@declare(
    methods=True,
    samples=(Sample(T(3, 4), T(4, 2)),),
    calls=(Call("mm", lambda lib, a, b: lib.mm(a, b), T(2, 3), T(3, 4), node="MmBackward0"),),
)
def mm(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors (or of a sparse COO matrix and a dense one, see ``ops/sparse.py``)."""
    if _plain_float_pair(a, b) and state.autocast is None:  # the common call: nothing to check or convert
        return Mm.apply(a, b)
    if getattr(a, "is_sparse", False):
        return a.mm(b)
    if state.autocast is not None:
        a, b = autocast_to(None, a, b)
    _check_2d(a, "self")
    _check_2d(b, "mat2")
    _check_mm(a.shape, b.shape, a.dtype, b.dtype)
    return Mm.apply(a, b)


@declare(methods=True, samples=(Sample(T(3, 4), T(4)),))
def mv(a: Tensor, v: Tensor) -> Tensor:
    """Matrix-vector product of a 2-d ``a`` and a 1-d ``v`` (torch names them ``input`` and ``vec``)."""
    if a.dim() != 2 or v.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {a.dim()}, {v.dim()}")
    _check_mv(a.shape, v.shape, a.dtype, v.dtype)
    return Mv.apply(a, v)


@declare(methods=True, samples=(Sample(T(4), T(4)),))
def dot(a: Tensor, b: Tensor) -> Tensor:
    """Inner product of two 1-d tensors of the same length (torch names them ``input`` and ``tensor``)."""
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found {a.dtype.scalar_name} and {b.dtype.scalar_name}"
        )
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have the same "
            f"number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively"
        )
    _no_bool(a.dtype, "dot")
    return Dot.apply(a, b)


@declare(
    methods=("matmul", "__matmul__"),
    samples=(Sample(T(2, 3, 4), T(4, 2)), Sample(T(4), T(2, 4, 3))),
    calls=(
        Call("matmul_op", lambda lib, a, b: a @ b, T(2, 3), T(3, 4), node="MmBackward0"),
        Call("matmul_1d_1d", lambda lib, a, b: lib.matmul(a, b), T(3), T(3), node="DotBackward0"),
        Call("matmul_2d_1d", lambda lib, a, b: lib.matmul(a, b), T(2, 3), T(3), node="MvBackward0"),
        Call("matmul_1d_2d", lambda lib, a, b: lib.matmul(a, b), T(3), T(3, 2), node="SqueezeBackward4"),
        Call("matmul_batched", lambda lib, a, b: lib.matmul(a, b), T(2, 2, 3), T(2, 3, 2), node="UnsafeViewBackward0"),
        Call("matmul_3d_2d", lambda lib, a, b: lib.matmul(a, b), T(2, 2, 3), T(3, 2), node="UnsafeViewBackward0"),
        Call("matmul_2d_3d", lambda lib, a, b: lib.matmul(a, b), T(2, 3), T(2, 3, 2), node="CloneBackward0"),
        Call("matmul_3d_1d", lambda lib, a, b: lib.matmul(a, b), T(2, 2, 3), T(3), node="UnsafeViewBackward0"),
        Call("matmul_1d_3d", lambda lib, a, b: lib.matmul(a, b), T(3), T(2, 3, 2), node="UnsafeViewBackward0"),
        Call(
            "matmul_broadcast_4d",
            lambda lib, a, b: lib.matmul(a, b),
            T(2, 1, 2, 3),
            T(2, 3, 2),
            node="UnsafeViewBackward0",
        ),
        Call("matmul_row_3d", lambda lib, a, b: lib.matmul(a, b), T(1, 3), T(2, 3, 2), node="TransposeBackward0"),
        Call(
            "matmul_squeezed_batch", lambda lib, a, b: lib.matmul(a, b), T(1, 2, 3), T(2, 3, 2), node="CloneBackward0"
        ),
    ),
)
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """torch.matmul: dot, mv, mm, or a broadcast batched product, by the operands' dimensions."""
    if _plain_float_pair(a, b) and state.autocast is None:  # two float matrices: mm's common call
        return Mm.apply(a, b)
    if _plain_float_stacks(a, b) and state.autocast is None:  # stacks of one batch shape (attention's scores)
        return BatchedMatmul.apply(a, b)
    if state.autocast is not None:
        a, b = autocast_to(None, a, b)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise not_a_tensor("matmul", "other", 1, b if isinstance(a, Tensor) else a)
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
    _check_stacks(a, b)
    return _batched_class(Operand.of(a), Operand.of(b)).apply(a, b)


@declare(methods=True, samples=(Sample(T(2, 3, 4), T(2, 4, 2)),))
def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product of (b, n, m) and (b, m, p) tensors (torch names them ``input`` and ``mat2``)."""
    if state.autocast is not None:
        a, b = autocast_to(None, a, b)
    if a.dim() != 3 or b.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    _check_bmm(a.shape, b.shape, a.dtype, b.dtype)
    return Bmm.apply(a, b)


def _check_batches(s1: tuple, s2: tuple) -> None:
    """torch's check that a stack of shape ``s2`` is (batches of ``s1``, columns of ``s1``, *)."""
    if s2[:2] != (s1[0], s1[2]):
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{s1[0]}, {s1[2]}] but got: "
            f"[{s2[0]}, {s2[1]}]."
        )


def _check_stacks(a: Tensor, b: Tensor) -> None:
    """torch's error for a ``matmul`` with an operand of three dims or more, raised by the op its ``_matmul_impl``
    hands them to: ``mm`` or ``mv`` of the larger operand folded into a matrix (with the other, or both transposed
    when the larger is on the right), else, after the batch shapes' broadcast, ``bmm`` of the broadcast stacks."""
    if _should_fold(Operand.of(a), Operand.of(b)):
        if a.dim() >= b.dim():
            folded, other, dtypes = (math.prod(a.shape[:-1]), a.shape[-1]), tuple(b.shape), (a.dtype, b.dtype)
        else:
            folded = (math.prod(b.shape[:-2]) * b.shape[-1], b.shape[-2])
            other, dtypes = tuple(a.shape)[::-1], (b.dtype, a.dtype)
        (_check_mm if len(other) == 2 else _check_mv)(folded, other, *dtypes)
        return
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] != b.shape[0]:  # torch squeezes a single batch that needs grad
        if a.shape[0] == 1 and a.requires_grad:
            return _check_stacks(a[0], b)
        if b.shape[0] == 1 and b.requires_grad:
            return _check_stacks(a, b[0])
    batch = math.prod(broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    n, p = (a.shape[-2] if a.dim() > 1 else 1), (b.shape[-1] if b.dim() > 1 else 1)
    m2 = b.shape[-2] if b.dim() > 1 else b.shape[0]
    _check_bmm((batch, n, a.shape[-1]), (batch, m2, p), a.dtype, b.dtype)


@declare(name="_rmatmul_operator", methods=("__rmatmul__",))
def rmatmul(b: Tensor, a) -> Tensor:
    """``a @ b`` with the tensor on the right."""
    return matmul(a, b)


# --- addmm, baddbmm, outer, trace, diag, diagonal, triu/tril, einsum ------------------------------------------
class Addmm(Function):
    """``beta * input + alpha * (mat1 @ mat2)`` (``bmm`` for the batched form), one node."""

    node_name = "AddmmBackward0"
    product = staticmethod(lambda a, b: mm(a, b))

    @staticmethod
    def forward(ctx, input, m1, m2, beta, alpha):  # noqa: A002
        ctx.beta, ctx.alpha, ctx.in_shape = beta, alpha, input.shape
        ctx.save_for_backward(m1, m2)
        dtype = m1.dtype
        narrow = dtype.is_floating_point and dtype.itemsize == 2
        if narrow:  # a 2-byte float: the whole sum in float32, rounded once, as torch's CPU kernel computes it
            input, m1, m2 = input.float(), m1.float(), m2.float()
        out = _matmul_data(m1, m2)
        if alpha != 1:
            out = out * alpha
        if beta != 0:  # beta = 0 ignores input entirely (NaN and inf included), as torch
            out = out + (input if beta == 1 else input * beta)
        return out.to(dtype) if narrow else out

    @staticmethod
    def backward(ctx, g):
        m1, m2 = ctx.saved_tensors
        product = ctx._forward_cls.product
        needs = ctx.needs_input_grad
        gi = (g * ctx.beta if ctx.beta != 1 else g).sum_to_size(ctx.in_shape) if needs[0] else None
        g1 = product(g, conj(m2.transpose(-1, -2))) if needs[1] else None
        g2 = product(conj(m1.transpose(-1, -2)), g) if needs[2] else None
        if ctx.alpha != 1:
            g1 = None if g1 is None else g1 * ctx.alpha
            g2 = None if g2 is None else g2 * ctx.alpha
        return gi, g1, g2, None, None


class Baddbmm(Addmm):
    node_name = "BaddbmmBackward0"
    product = staticmethod(lambda a, b: bmm(a, b))


def _check_same_dtype(input: Tensor, m1: Tensor, m2: Tensor) -> None:  # noqa: A002
    for t in (m1, m2):
        if t._data.dtype != input._data.dtype:
            raise RuntimeError(
                f"self and mat2 must have the same dtype, but got {input.dtype.scalar_name} and {t.dtype.scalar_name}"
            )


@declare(methods=True, samples=(Sample(T(3, 2), T(3, 4), T(4, 2)), Sample(T(2), T(3, 4), T(4, 2), beta=0.5, alpha=2.0)))
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to the product's shape."""
    if state.autocast is not None:
        input, mat1, mat2 = autocast_to(None, input, mat1, mat2)
    _check_2d(mat1, "mat1")
    _check_2d(mat2, "mat2")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})"
        )
    _check_same_dtype(input, mat1, mat2)
    input.expand(mat1.shape[0], mat2.shape[1])  # torch's message when input does not broadcast
    beta, alpha = _scales(input, beta, alpha)
    return Addmm.apply(input, mat1, mat2, beta, alpha)


def _scales(input: Tensor, beta, alpha) -> tuple:  # noqa: A002
    """``(beta, alpha)`` as torch applies them: truncated to integers for an integer ``input``."""
    if input._data.dtype.kind in "biu":
        return int(beta), int(alpha)
    return beta, alpha


@declare(
    methods=True, samples=(Sample(T(2, 3, 5), T(2, 3, 4), T(2, 4, 5)), Sample(T(5), T(2, 3, 4), T(2, 4, 5), beta=2.0))
)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    if state.autocast is not None:
        input, batch1, batch2 = autocast_to(None, input, batch1, batch2)
    if batch1.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    _check_same_dtype(input, batch1, batch2)
    _check_batches(batch1.shape, batch2.shape)
    input.expand(batch1.shape[0], batch1.shape[1], batch2.shape[2])
    beta, alpha = _scales(input, beta, alpha)
    return Baddbmm.apply(input, batch1, batch2, beta, alpha)


@declare(methods=True, aliases=("ger",), samples=(Sample(T(3), T(4)),))
def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002
    """``input[i] * vec2[j]`` (torch's ``input.reshape(n, 1) * vec2``)."""
    for name, t in (("self", input), ("vec2", vec2)):
        if t.dim() != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.dim()}-D")
    return input.reshape(input.shape[0], 1) * vec2


class Diagonal(Function):
    """``diagonal``: a view of the elements ``x[..., i, ..., i + offset, ...]`` along a new last dim."""

    node_name = "DiagonalBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.shape, ctx.offset, ctx.dim1, ctx.dim2 = x._data.shape, offset, dim1, dim2
        return x._view_of(x._backend.diagonal(x._data, offset, dim1, dim2))

    @staticmethod
    def backward(ctx, g):
        return DiagonalEmbed.apply(g, ctx.shape, ctx.offset, ctx.dim1, ctx.dim2), None, None, None


class DiagonalCopy(Diagonal):
    """``diag`` of a matrix: the diagonal copied (torch prints this node as ``DiagonalBackward0_copy``)."""

    node_name = "DiagonalBackward0_copy"

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.shape, ctx.offset, ctx.dim1, ctx.dim2 = x._data.shape, offset, dim1, dim2
        backend = x._backend
        return Tensor._make(backend.copy(backend.diagonal(x._data, offset, dim1, dim2)))


class DiagonalEmbed(Function):
    """Zeros of ``shape`` with ``g`` on the diagonal (the backward of ``diagonal`` and ``trace``)."""

    node_name = "DiagonalBackwardBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, g, shape, offset, dim1, dim2):
        ctx.args = (offset, dim1, dim2)
        backend = g._backend
        out = backend.zeros(tuple(shape), g._data.dtype)
        backend.setitem(backend.diagonal(out, offset, dim1, dim2), (Ellipsis,), g._data)
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, gg):
        return Diagonal.apply(gg, *ctx.args), None, None, None, None


@declare(methods=True, samples=(Sample(T(3, 4)), Sample(T(3, 4), 1), Sample(T(2, 3, 4), -1, 0, 2)))
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """The diagonal ``offset`` of the matrices in dims ``dim1``, ``dim2``, as a view (its elements in a new last
    dim)."""
    d1, d2 = wrap_dim(dim1, input.dim()), wrap_dim(dim2, input.dim())
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return Diagonal.apply(input, int(offset), d1, d2)


class DiagEmbed(Function):
    """``diag`` of a vector: a square matrix with the vector on diagonal ``offset``."""

    node_name = "DiagEmbedBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, v, offset):
        ctx.offset = offset
        return Tensor._make(v._backend.embed_diagonal(v._data, offset))

    @staticmethod
    def backward(ctx, g):
        return Diagonal.apply(g, ctx.offset, 0, 1), None


@declare(methods=True, samples=(Sample(T(3)), Sample(T(3), -1), Sample(T(3, 4)), Sample(T(3, 4), 1)))
def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """A vector's diagonal matrix, or a matrix's diagonal (a copy), at offset ``diagonal``."""
    if input.dim() == 1:
        return DiagEmbed.apply(input, int(diagonal))
    if input.dim() == 2:
        return DiagonalCopy.apply(input, int(diagonal), 0, 1)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


class Trace(Function):
    node_name = "TraceBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x._data.shape
        backend = x._backend
        diag_ = backend.diagonal(x._data, 0, 0, 1)
        dt = np.dtype(np.int64) if x._data.dtype.kind in "biu" else x._data.dtype
        return Tensor._make(backend.reduce(diag_, "sum", None, False, dt))

    @staticmethod
    def backward(ctx, g):
        n = min(ctx.shape)
        return DiagonalEmbed.apply(g.expand(n), ctx.shape, 0, 0, 1)


@declare(methods=True, samples=(Sample(T(3, 3)), Sample(T(2, 4))))
def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of the main diagonal of a matrix (integers sum to int64)."""
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return Trace.apply(input)


class Triu(Function):
    node_name = "TriuBackward0"
    _trusted = True
    upper = True

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return Tensor._make(x._backend.triangle(x._data, ctx._forward_cls.upper, k))

    @staticmethod
    def backward(ctx, g):
        return ctx._forward_cls.apply(g, ctx.k), None


class Tril(Triu):
    node_name = "TrilBackward0"
    upper = False


def _triangle(cls, input: Tensor, diagonal: int, name: str) -> Tensor:  # noqa: A002
    if input.dim() < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    return cls.apply(input, int(diagonal))


@declare(methods=True, samples=(Sample(T(3, 4)), Sample(T(2, 3, 3), -1)))
def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The upper triangle (on and above diagonal ``diagonal``) of the last two dims; the rest zero."""
    return _triangle(Triu, input, diagonal, "triu")


@declare(methods=True, samples=(Sample(T(3, 4)), Sample(T(3, 4), 1)))
def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The lower triangle (on and below diagonal ``diagonal``) of the last two dims; the rest zero."""
    return _triangle(Tril, input, diagonal, "tril")


# --- einsum ----------------------------------------------------------------------------------------------------
_LABELS = string.ascii_uppercase + string.ascii_lowercase


def _einsum_parse(equation: str, shapes: list) -> tuple[list[str], str]:
    """Explicit subscripts (one letter per dim, ellipses spelled out) for each operand and the output."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(shapes):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    for k, c in enumerate(eq):
        if not (c in _LABELS or c in ".,->"):
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {k} in the equation string, subscripts must be in [a-zA-Z]"
            )
    free = [c for c in _LABELS if c not in eq]
    ell_dims = [len(shape) - (len(t) - 3) for t, shape in zip(terms, shapes) if "..." in t]
    ellipsis = "".join(free[: max(ell_dims, default=0)])
    explicit = []
    for k, (t, shape) in enumerate(zip(terms, shapes)):
        if "..." in t:
            n = len(shape) - (len(t) - 3)
            if n < 0:
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({len(t) - 3}) is more than the number of "
                    f"dimensions ({len(shape)}) for operand {k}"
                )
            t = t.replace("...", ellipsis[len(ellipsis) - n :])
        elif len(t) != len(shape):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(t)}) does not match the number of "
                f"dimensions ({len(shape)}) for operand {k} and no ellipsis was given"
            )
        explicit.append(t)
    if not arrow:  # implicit output: the ellipsis dims, then the labels used once, in alphabetical order
        counts = "".join(terms)
        out = ellipsis + "".join(sorted(c for c in set(counts) if c in _LABELS and counts.count(c) == 1))
    else:
        out = out.replace("...", ellipsis)
        seen = "".join(explicit)
        for c in out:
            if out.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            if c not in seen:
                raise RuntimeError(
                    f"einsum(): output subscript {c} does not appear in the equation for any input operand"
                )
    return explicit, out


def _einsum_sizes(terms: list[str], shapes: list) -> dict:
    """Each label's size; size-1 dims broadcast, as in torch."""
    sizes: dict = {}
    for k, (t, shape) in enumerate(zip(terms, shapes)):
        own: dict = {}
        for c, n in zip(t, shape):
            if c in own and own[c] != n:
                raise RuntimeError(
                    f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't match, {n} != {own[c]}"
                )
            own[c] = n
            seen = sizes.get(c)
            if seen is None or seen == 1:
                sizes[c] = n
            elif n != 1 and n != seen:
                raise RuntimeError(
                    f"einsum(): subscript {c} has size {n} for operand {k} which does not broadcast with previously "
                    f"seen size {seen}"
                )
    return sizes


class Einsum(Function):
    """``einsum`` in one node: forward by the backend's einsum, backward by einsums of the gradient with the other
    operands. The node takes the name of the last op torch's einsum runs for the equation: ``SumBackward1`` (one
    operand, labels summed), ``PermuteBackward0`` (one operand, none summed), ``ViewBackward0`` (several, labels
    contracted: torch's bmm path ends in a view) or ``MulBackward0`` (several, nothing summed)."""

    _trusted = True

    @staticmethod
    def forward(ctx, terms, out, *operands):
        ctx.terms, ctx.out = terms, out
        ctx.save_for_backward(*operands)
        backend = same_backend(operands)
        data = [o._data for o in operands]
        return Tensor._make(backend.einsum(",".join(terms) + "->" + out, *data))

    @staticmethod
    def backward(ctx, g):
        operands = ctx.saved_tensors
        terms, out = ctx.terms, ctx.out
        grads = [None, None]
        for k, (t, x) in enumerate(zip(terms, operands)):
            if not ctx.needs_input_grad[k + 2]:
                grads.append(None)
                continue
            others = [(terms[j], operands[j]) for j in range(len(terms)) if j != k]
            unique = "".join(dict.fromkeys(t))
            available = out + "".join(s for s, _ in others)
            kept = "".join(c for c in unique if c in available)
            equation = ",".join([out] + [s for s, _ in others]) + "->" + kept
            r = einsum(equation, g, *[o for _, o in others])
            if kept != unique:  # labels only this operand has: the gradient is constant along them
                sizes = dict(zip(t, x.shape))
                r = r.reshape([sizes[c] if c in kept else 1 for c in unique]).expand([sizes[c] for c in unique])
            if unique != t:  # a repeated label (a diagonal): the gradient lives on that diagonal only
                r = _EmbedRepeated.apply(r, tuple(x.shape), tuple(unique.index(c) for c in t))
            grads.append(r)
        return tuple(grads)


_EINSUM_NODES = {
    (False, True): type("EinsumSum", (Einsum,), {"node_name": "SumBackward1"}),
    (False, False): type("EinsumPermute", (Einsum,), {"node_name": "PermuteBackward0"}),
    (True, True): type("EinsumView", (Einsum,), {"node_name": "ViewBackward0"}),
    (True, False): type("EinsumMul", (Einsum,), {"node_name": "MulBackward0"}),
}


class _EmbedRepeated(Function):
    """A tensor over the distinct labels placed on the diagonal of an operand with repeated labels (``ii``)."""

    node_name = "DiagonalBackward0"

    @staticmethod
    def forward(ctx, r, shape, positions):
        grid = np.indices(r.shape)
        ctx.index = tuple(grid[p] for p in positions)
        backend = r._backend
        return Tensor._make(backend.index_put(backend.zeros(shape, r._data.dtype), ctx.index, r._data, False))

    @staticmethod
    def backward(ctx, g):
        return g[ctx.index], None, None


def _einsum_operands(args: tuple) -> tuple[str, list]:
    """``einsum(eq, a, b)``, ``einsum(eq, [a, b])`` or torch's sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``."""
    if isinstance(args[0], str):
        rest = args[1:]
        operands = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else list(rest)
        return args[0], operands
    out = args[-1] if len(args) % 2 else None  # an output sublist after the operand/sublist pairs
    pairs = args[:-1] if out is not None else args

    def letters(sub) -> str:
        return "".join("..." if s is Ellipsis else _LABELS[int(s)] for s in sub)

    equation = ",".join(letters(t) for t in pairs[1::2]) + ("" if out is None else "->" + letters(out))
    return equation, list(pairs[0::2])


@declare(
    samples=(
        Sample("ij,jk->ik", T(2, 3), T(3, 4)),
        Sample("bij,bkj->bik", T(2, 2, 3), T(2, 4, 3)),
        Sample("ii->i", T(3, 3)),
        Sample("ij->", T(2, 3)),
        Sample("ij", T(2, 3)),
        Sample("i,j->ji", T(2), T(3)),
        Sample("...ij,...jk", T(2, 2, 3), T(1, 3, 4)),
        Sample("ij,jk,kl->il", T(2, 3), T(3, 4), T(4, 2)),
        Sample("ii,ij->j", T(3, 3), T(3, 2)),
        Sample("ijk,ik->", T(2, 3, 4), T(2, 4)),
    )
)
def einsum(*args) -> Tensor:
    """Sum of products over the labels an equation names (``"ij,jk->ik"`` is a matrix product), with ellipses,
    broadcasting of size-1 dims, repeated labels (diagonals) and implicit outputs, as ``torch.einsum``."""
    equation, operands = _einsum_operands(args)
    for o in operands:
        if not isinstance(o, Tensor):
            raise TypeError(
                f"einsum(): argument 'operands' (position 2) must be tuple of Tensors, not {type(o).__name__}"
            )
    shapes = [tuple(o.shape) for o in operands]
    terms, out = _einsum_parse(equation, shapes)
    sizes = _einsum_sizes(terms, shapes)
    summed = any(c not in out for t in terms for c in t)
    if any(o._data.dtype != operands[0]._data.dtype for o in operands):
        if summed:  # torch contracts with bmm, which takes one dtype; a plain product promotes
            bad = next(o for o in operands if o._data.dtype != operands[0]._data.dtype)
            raise RuntimeError(
                f"expected scalar type {operands[0].dtype.scalar_name} but found {bad.dtype.scalar_name}"
            )
        common = result_type(*operands)
        operands = [o.to(common) for o in operands]
    if len(operands) == 1 and not summed:
        return _einsum_view(operands[0], terms[0], out)
    for k, (t, o) in enumerate(zip(terms, operands)):
        want = tuple(sizes[c] for c in t)
        if want != shapes[k]:
            operands[k] = o.expand(want)
    return _EINSUM_NODES[(len(operands) > 1, summed)].apply(terms, out, *operands)


def _einsum_view(x: Tensor, term: str, out: str) -> Tensor:
    """One operand and nothing summed (``"ij->ji"``, ``"ii->i"``): a view of it, as torch's (its diagonals for
    repeated labels, then a permutation), so writes through the result reach the operand and autograd sees them."""
    labels = list(term)
    while len(set(labels)) < len(labels):
        first = next(i for i, c in enumerate(labels) if labels.index(c) != i)
        label = labels[first]
        start = labels.index(label)
        x = x.diagonal(0, start, first)  # (the diagonal's dim goes last)
        labels = [c for i, c in enumerate(labels) if i not in (start, first)] + [label]
    return x.permute([labels.index(c) for c in out])


@declare(methods=("addmm_",), name="_addmm_")
def addmm_(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """In-place ``addmm``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: addmm(t, mat1, mat2, beta=beta, alpha=alpha), (mat1, mat2))


@declare(methods=("baddbmm_",), name="_baddbmm_")
def baddbmm_(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """In-place ``baddbmm``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: baddbmm(t, batch1, batch2, beta=beta, alpha=alpha), (batch1, batch2))


@declare(methods=("triu_",), name="_triu_")
def triu_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """In-place ``triu``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: triu(t, diagonal))


@declare(methods=("tril_",), name="_tril_")
def tril_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """In-place ``tril``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: tril(t, diagonal))
