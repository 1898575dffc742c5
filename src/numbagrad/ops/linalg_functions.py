"""The ``torch.linalg`` operations on real float32/float64 matrices (batched over leading dims).

Decompositions and solvers run numpy's LAPACK on the host: a cuda input is copied to the host, factorized there
and the result copied back. Each differentiable decomposition is an ``autograd.Function`` whose backward is
written with differentiable numbagrad ops (recomputing the factorization through the op itself), so double
backward works without a second formula. The public ``numbagrad.linalg`` namespace (``numbagrad/linalg.py``)
re-exports these under torch's names.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._tensor import Tensor
from ..autograd.function import Function
from . import complex_ops
from ._common import wrap_dim
from ._registry import Sample, T, declare
from .creation import eye, zeros_like
from .indexing import where
from .linalg import DiagonalEmbed, diagonal, matmul, tril, triu
from .reduction import Norm, amax, amin, sum, sum_to_shape
from .shape import cat


class LinAlgError(RuntimeError):
    """Raised when a matrix is singular or not positive-definite (torch's ``torch.linalg.LinAlgError``)."""


# --- host helpers --------------------------------------------------------------------------------------------


def _host(t: Tensor) -> np.ndarray:
    """The tensor's values as a host numpy array (a copy from the device for cuda tensors)."""
    return t._backend.to_host(t._data)


def _wrap(a: np.ndarray, like: Tensor) -> Tensor:
    """A new tensor on ``like``'s device holding ``a``."""
    return Tensor._make(like._backend.from_host(np.array(a, order="C")))


_DTYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _check_float(t: Tensor, op: str, what: str = "input") -> None:
    if not t.is_floating_point():
        name = _DTYPE_NAMES.get(t.dtype.name, t.dtype.name)
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as {what}. Got {name}")


#: What torch's CPU kernels raise for float16 input, by op: the kernel that has no such dtype
#: (NotImplementedError), or a RuntimeError's text (``{op}`` and ``{dtype}`` filled in).
_LOW_PRECISION = {
    "linalg.det": "lu_cpu",
    "linalg.solve": "lu_cpu",
    "linalg.solve_ex": "lu_cpu",
    "linalg.lu": "lu_cpu",
    "linalg.lu_solve": "lu_cpu",
    "torch.linalg.lu_factor": "lu_cpu",
    "torch.linalg.lu_factor_ex": "lu_cpu",
    "linalg.svd": "linalg_svd_cpu",
    "linalg.eigh": "linalg_eigh_cpu",
    "linalg.eigvalsh": "linalg_eigh_cpu",
    "linalg.cholesky": "cholesky_cpu",
    "linalg.qr": "geqrf_cpu",
    "geqrf": "geqrf_cpu",
    "linalg.solve_triangular": "triangular_solve_cpu",
    "linalg.pinv": RuntimeError(
        "linalg.pinv({dtype}{{[{shape}]}}): expected a tensor with 2 or more dimensions of float, double, cfloat or "
        "cdouble types"
    ),
    "linalg.matrix_rank": RuntimeError("This function doesn't handle types other than float and double"),
    "torch.linalg.lstsq": RuntimeError("This function doesn't handle types other than float and double"),
}
_LOW_NAMES = {"float16": "Half", "bfloat16": "BFloat16"}


def _check_matrix(t: Tensor, op: str, square: bool = True, name: str = "A") -> None:
    """torch's checks that ``t`` is a (batch of) matrices of a floating dtype that LAPACK handles."""
    if t.dim() < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if square and t.shape[-1] != t.shape[-2]:
        raise RuntimeError(
            f"{op}: {name} must be batches of square matrices, but they are {t.shape[-2]} by {t.shape[-1]} matrices"
        )
    _check_float(t, op)
    _check_precision(t, op)


def _check_precision(t: Tensor, op: str) -> None:
    low = _LOW_NAMES.get(t.dtype.name)
    if low is None or op == "linalg.matrix_exp" or op == "linalg.matrix_power":
        return
    rule = _LOW_PRECISION.get(op)
    if isinstance(rule, str):
        raise NotImplementedError(f"\"{rule}\" not implemented for '{low}'")
    if isinstance(rule, RuntimeError):
        raise RuntimeError(str(rule.args[0]).format(dtype=low, shape=", ".join(map(str, t.shape))))
    raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {low}")


def _batch_prefix(info: np.ndarray) -> tuple[str, int]:
    """The ``(Batch element k): `` prefix and the info code of the first failing matrix."""
    flat = info.reshape(-1)
    k = int(np.flatnonzero(flat)[0])
    return ("" if info.ndim == 0 else f"(Batch element {k}): "), int(flat[k])


def _lu_host(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU with partial pivoting, LAPACK's ``getrf`` convention: packed LU, 1-based pivots, and info (the 1-based
    index of the first exactly-zero pivot, 0 if none), batched over leading dims."""
    lu = np.array(a, dtype=a.dtype, copy=True)
    *batch, m, n = lu.shape
    k = min(m, n)
    piv = np.zeros((*batch, k), dtype=np.int32)
    info = np.zeros(tuple(batch), dtype=np.int32)
    flat = lu.reshape(-1, m, n)
    fpiv = piv.reshape(-1, k)
    finfo = info.reshape(-1)
    rows = np.arange(flat.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            p = j + np.argmax(np.abs(flat[:, j:, j]), axis=1)
            fpiv[:, j] = p + 1
            swap = flat[rows, p, :].copy()
            flat[rows, p, :] = flat[:, j, :]
            flat[:, j, :] = swap
            pivot = flat[:, j, j]
            zero = pivot == 0
            finfo[(finfo == 0) & zero] = j + 1
            safe = np.where(zero, 1, pivot)
            flat[:, j + 1 :, j] /= safe[:, None]
            flat[:, j + 1 :, j] *= ~zero[:, None]
            flat[:, j + 1 :, j + 1 :] -= flat[:, j + 1 :, j, None] * flat[:, j, None, j + 1 :]
    return lu, piv, info


def _potrf_host(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky factors and info codes column by column (LAPACK's unblocked ``potf2``), batched: a matrix that
    is not positive-definite keeps the partial factor LAPACK leaves (what torch's ``cholesky_ex`` returns: the
    failed pivot stored, later columns untouched) and reports the order of its first non-positive leading minor.
    Used only when numpy's cholesky fails."""
    work = np.tril(a)
    flat = work.reshape(-1, a.shape[-1], a.shape[-1])
    info = np.zeros(flat.shape[0], dtype=np.int32)
    for m, matrix in enumerate(flat):
        for j in range(matrix.shape[0]):
            pivot = matrix[j, j] - matrix[j, :j] @ matrix[j, :j]
            matrix[j, j] = pivot
            if not pivot > 0:
                info[m] = j + 1
                break
            matrix[j, j] = np.sqrt(pivot)
            matrix[j + 1 :, j] = (matrix[j + 1 :, j] - matrix[j + 1 :, :j] @ matrix[j, :j]) / matrix[j, j]
    return work, info.reshape(a.shape[:-2])


def _mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


def _diag_embed(v: Tensor) -> Tensor:
    """Matrices with ``v``'s last dim on their diagonal (differentiable)."""
    nd = v.dim() + 1
    return DiagonalEmbed.apply(v, (*v.shape, v.shape[-1]), 0, nd - 2, nd - 1)


def _eye_like(a: Tensor, n: int) -> Tensor:
    return eye(n, dtype=a.dtype, device=a.device)


# --- determinants --------------------------------------------------------------------------------------------


class Det(Function):
    node_name = "LinalgDetBackward0"

    @staticmethod
    def forward(ctx, a):
        out = _wrap(np.asarray(np.linalg.det(_host(a)), dtype=_host(a).dtype), a)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.saved_tensors
        return (g * d).unsqueeze(-1).unsqueeze(-1) * _mT(inv(a))


@declare(name="det", methods=True, samples=(Sample(T(3, 3)), Sample(T(2, 3, 3))))
def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix of ``A`` (runs on the host for cuda inputs)."""
    _check_matrix(A, "linalg.det")
    return Det.apply(A)


class Slogdet(Function):
    node_name = "LinalgSlogdetBackward0"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        sign, logabs = np.linalg.slogdet(_host(a))
        dt = _host(a).dtype
        return _wrap(np.asarray(sign, dtype=dt), a), _wrap(np.asarray(logabs, dtype=dt), a)

    @staticmethod
    def backward(ctx, g_sign, g_log):
        """The sign is locally constant: only ``log|det|`` carries a gradient."""
        (a,) = ctx.saved_tensors
        return g_log.unsqueeze(-1).unsqueeze(-1) * _mT(inv(a))


@declare(name="slogdet", methods=True, samples=(Sample(T(3, 3)),))
def slogdet(A: Tensor) -> tuple[Tensor, Tensor]:
    """``(sign, log|det|)`` of each square matrix (runs on the host for cuda inputs)."""
    _check_matrix(A, "linalg.slogdet")
    return Slogdet.apply(A)


@declare(name="logdet", methods=True)
def logdet(input: Tensor) -> Tensor:  # noqa: A002
    """``log(det)``: nan where the determinant is negative, -inf where it is zero."""
    _check_matrix(input, "logdet")
    sign, logabs = slogdet(input)
    return where(sign < 0, float("nan"), logabs)


# --- inverse and solvers -------------------------------------------------------------------------------------


def _raise_singular_inv(info: np.ndarray, op: str) -> None:
    prefix, k = _batch_prefix(info)
    raise LinAlgError(
        f"{op}: {prefix}The diagonal element {k} is zero, the inversion could not be completed because the "
        "input matrix is singular."
    )


def _inv_host(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverses and LAPACK-style info codes (singular matrices get nan inverses and a nonzero code). The
    pivot search runs only when LAPACK reports a singular matrix."""
    try:
        return np.linalg.inv(a), np.zeros(a.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        pass
    _, _, info = _lu_host(a)
    out = np.full_like(a, np.nan)
    ok = info == 0
    if np.any(ok):
        out[ok] = np.linalg.inv(a[ok])
    return out, info


class Inv(Function):
    node_name = "LinalgInvExBackward0"

    @staticmethod
    def forward(ctx, a, check_errors, op):
        out, info = _inv_host(_host(a))
        if check_errors and np.any(info):
            _raise_singular_inv(info, op)
        info_t, out_t = _wrap(info, a), _wrap(out, a)
        ctx.mark_non_differentiable(info_t)
        ctx.save_for_backward(out_t)
        return out_t, info_t

    @staticmethod
    def backward(ctx, g, g_info):
        (ainv,) = ctx.saved_tensors
        ai_t = _mT(ainv)
        return -matmul(matmul(ai_t, g), ai_t), None, None


@declare(name="inverse", methods=True, samples=(Sample(T(3, 3)), Sample(T(2, 3, 3))))
def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix; a singular one raises ``LinAlgError`` (host LAPACK for cuda)."""
    _check_matrix(A, "linalg.inv")
    return Inv.apply(A, True, "linalg.inv")[0]


def inv_ex(A: Tensor, *, check_errors: bool = False) -> tuple[Tensor, Tensor]:
    """``(inverse, info)``: info is 0 for invertible matrices, else the 1-based index of the zero pivot."""
    _check_matrix(A, "linalg.inv")
    return Inv.apply(A, check_errors, "linalg.inv_ex")


def _is_vector_rhs(A: Tensor, B: Tensor) -> bool:
    """torch's rule: ``B`` is a (batch of) vector(s) when 1-D or when its shape is ``A``'s without the last dim."""
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


class Solve(Function):
    node_name = "LinalgSolveExBackward0"

    @staticmethod
    def forward(ctx, a, b, check_errors=True):
        ctx.b_shape = b.shape
        ad, bd = _host(a), _host(b)
        batch = np.broadcast_shapes(ad.shape[:-2], bd.shape[:-2])
        ad = np.broadcast_to(ad, batch + ad.shape[-2:])
        bd = np.broadcast_to(bd, batch + bd.shape[-2:])
        try:
            out = np.linalg.solve(ad, bd)
        except np.linalg.LinAlgError:
            info = _lu_host(ad)[2]
            if check_errors:
                prefix, _ = _batch_prefix(info)
                raise LinAlgError(
                    f"torch.linalg.solve: {prefix}The solver failed because the input matrix is singular."
                ) from None
            out = np.full(bd.shape, np.nan, dtype=np.result_type(ad, bd))
            ok = info == 0
            if np.any(ok):
                out[ok] = np.linalg.solve(ad[ok], bd[ok])
        x = _wrap(out, a)
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        gb = _solve_matrix(_mT(a), g)
        ga = _sum_to(-matmul(gb, _mT(x)), a.shape) if ctx.needs_input_grad[0] else None
        return ga, (_sum_to(gb, ctx.b_shape) if ctx.needs_input_grad[1] else None), None


def _sum_to(x: Tensor, shape: tuple) -> Tensor:
    """Sum away the broadcast batch dims of a gradient."""
    return sum_to_shape(x, tuple(shape))


def _solve_matrix(A: Tensor, B: Tensor) -> Tensor:
    return Solve.apply(A, B)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``); a singular ``A`` raises
    ``LinAlgError``. Runs on the host for cuda inputs."""
    return _solve(A, B, left, True)


def _solve(A: Tensor, B: Tensor, left: bool, check_errors: bool) -> Tensor:
    """``solve``'s checks and batching; singular matrices raise or (unchecked) solve to nan."""
    _check_matrix(A, "linalg.solve")
    _check_float(B, "linalg.solve")
    if A.dtype != B.dtype:
        raise RuntimeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type {_tname(A)} and B of type "
            f"{_tname(B)} instead"
        )
    vector = _is_vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.shape[-2 if left else -1] != A.shape[-1]:
        shapes = f"({A.shape[-2]}x{A.shape[-1]} and {rhs.shape[-2]}x{rhs.shape[-1]})"
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} {shapes}"
        )
    if not left:  # X A = B  <=>  A^T X^T = B^T
        rhs = _mT(rhs)
    x = Solve.apply(A if left else _mT(A), rhs, check_errors)
    x = x if left else _mT(x)
    return x.squeeze(-1) if vector else x


def _tname(t: Tensor) -> str:
    return {"float32": "Float", "float64": "Double"}.get(t.dtype.name, t.dtype.name)


def _trisolve_host(a: np.ndarray, b: np.ndarray, upper: bool, unit: bool) -> np.ndarray:
    """Substitution for ``A X = B`` with triangular ``A`` (zero diagonals give inf/nan, as LAPACK's trtrs)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    x = np.array(np.broadcast_to(b, batch + b.shape[-2:]), dtype=np.result_type(a, b))
    n = a.shape[-1]
    order = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in order:
            others = slice(i + 1, n) if upper else slice(0, i)
            acc = x[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, others], x[..., others, :])
            x[..., i, :] = acc if unit else acc / a[..., i, i, None]
    return x


class SolveTriangular(Function):
    node_name = "LinalgSolveTriangularBackward0"

    @staticmethod
    def forward(ctx, a, b, upper, unit):
        ctx.upper, ctx.unit, ctx.b_shape = upper, unit, b.shape
        x = _wrap(_trisolve_host(_host(a), _host(b), upper, unit), a)
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        gb = SolveTriangular.apply(_mT(a), g, not ctx.upper, ctx.unit)
        ga = None
        if ctx.needs_input_grad[0]:
            ga = -matmul(gb, _mT(x))
            ga = triu(ga, 1 if ctx.unit else 0) if ctx.upper else tril(ga, -1 if ctx.unit else 0)
            ga = _sum_to(ga, a.shape)
        return ga, (_sum_to(gb, ctx.b_shape) if ctx.needs_input_grad[1] else None), None, None


def _check_rhs(A: Tensor, B: Tensor, left: bool, op: str) -> None:
    """torch's check that ``B`` fits ``A X = B`` (or ``X A = B``)."""
    if B.shape[-2 if left else -1] != A.shape[-1]:
        raise RuntimeError(
            f"{op}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
            f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})"
        )


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """The solution of ``A X = B`` (or ``X A = B``) for triangular ``A``; only ``A``'s ``upper`` or lower
    triangle is read. Runs on the host for cuda inputs."""
    _check_matrix(A, "linalg.solve_triangular")
    if B.dim() < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    _check_float(B, "linalg.solve_triangular")
    _check_rhs(A, B, left, "linalg.solve_triangular")
    if left:
        return SolveTriangular.apply(A, B, upper, unitriangular)
    return _mT(SolveTriangular.apply(_mT(A), _mT(B), not upper, unitriangular))


# --- cholesky ------------------------------------------------------------------------------------------------


class Cholesky(Function):
    node_name = "LinalgCholeskyExBackward0"

    @staticmethod
    def forward(ctx, a, upper, check_errors):
        ctx.upper = upper
        data = _host(a)
        try:
            out, info = np.linalg.cholesky(data), np.zeros(data.shape[:-2], dtype=np.int32)
        except np.linalg.LinAlgError:
            out, info = _potrf_host(data)
        if check_errors and np.any(info):
            prefix, k = _batch_prefix(info)
            raise LinAlgError(
                f"linalg.cholesky: {prefix}The factorization could not be completed because the input is not "
                f"positive-definite (the leading minor of order {k} is not positive-definite)."
            )
        info_t, factor = _wrap(info, a), _wrap(np.swapaxes(out, -1, -2) if upper else out, a)
        ctx.mark_non_differentiable(info_t)
        ctx.save_for_backward(factor)
        return factor, info_t

    @staticmethod
    def backward(ctx, g, g_info):
        (factor,) = ctx.saved_tensors
        low, g_low = (_mT(factor), _mT(g)) if ctx.upper else (factor, g)
        phi = tril(matmul(_mT(low), g_low))
        phi = phi - 0.5 * _diag_embed(diagonal(phi, 0, -2, -1))
        linv = SolveTriangular.apply(low, _eye_like(low, low.shape[-1]).expand(*low.shape), False, False)
        ga = matmul(matmul(_mT(linv), phi), linv)
        return 0.5 * (ga + _mT(ga)), None, None


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> tuple[Tensor, Tensor]:
    """``(L, info)``: the Cholesky factor and, per matrix, the order of the first non-positive-definite leading
    minor (0 on success). Runs on the host for cuda inputs."""
    _check_matrix(A, "linalg.cholesky")
    return Cholesky.apply(A, upper, check_errors)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The lower (or ``upper``) Cholesky factor of each symmetric positive-definite matrix; raises
    ``LinAlgError`` otherwise. Runs on the host for cuda inputs."""
    _check_matrix(A, "linalg.cholesky")
    return Cholesky.apply(A, upper, True)[0]


# --- qr, eigh, svd -------------------------------------------------------------------------------------------


def _copyltu(m: Tensor) -> Tensor:
    """The symmetric matrix built from ``m``'s lower triangle."""
    low = tril(m, -1)
    return low + _mT(low) + _diag_embed(diagonal(m, 0, -2, -1))


class Qr(Function):
    node_name = "LinalgQrBackward0"

    @staticmethod
    def forward(ctx, a, mode):
        ctx.mode = mode
        q, r = np.linalg.qr(_host(a), mode="complete" if mode == "complete" else "reduced")
        q_t, r_t = _wrap(np.zeros((0,), dtype=r.dtype) if mode == "r" else q, a), _wrap(r, a)
        ctx.save_for_backward(q_t, r_t)
        return q_t, r_t

    @staticmethod
    def backward(ctx, gq, gr):
        if ctx.mode == "r":
            raise RuntimeError(
                "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."
            )
        q, r = ctx.saved_tensors
        if ctx.mode == "complete" and q.shape[-2] > r.shape[-1]:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        return _qr_backward(q, r, gq, gr), None


def _qr_backward(q: Tensor, r: Tensor, gq: Tensor, gr: Tensor) -> Tensor:
    """Tall or square ``A = Q R``: ``gA = (gQ + Q copyltu(R gR^T - gQ^T Q)) R^{-T}``. Wide ``[X | Y] = Q [U | V]``:
    ``Y = Q V`` passes ``Y gV^T`` on to ``gQ`` of the square ``X = Q U``, and gets ``gY = Q gV``."""
    m, n = q.shape[-2], r.shape[-1]
    if m >= n:
        rhs = gq + matmul(q, _copyltu(matmul(r, _mT(gr)) - matmul(_mT(gq), q)))
        return _mT(SolveTriangular.apply(r, _mT(rhs), True, False))
    u, v = r[..., :, :m], r[..., :, m:]
    gu, gv = gr[..., :, :m], gr[..., :, m:]
    gx = _qr_backward(q, u, gq + matmul(matmul(q, v), _mT(gv)), gu)
    return cat([gx, matmul(q, gv)], -1)


def qr(A: Tensor, mode: str = "reduced") -> tuple[Tensor, Tensor]:
    """``(Q, R)`` with orthonormal ``Q`` and upper-triangular ``R`` (modes ``reduced``, ``complete``, ``r``).
    Runs on the host for cuda inputs."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
        )
    _check_matrix(A, "linalg.qr", square=False)
    return Qr.apply(A, mode)


class Eigh(Function):
    node_name = "LinalgEighBackward0"

    @staticmethod
    def forward(ctx, a, uplo):
        w, v = np.linalg.eigh(_host(a), UPLO=uplo)
        w_t, v_t = _wrap(w, a), _wrap(v, a)
        ctx.save_for_backward(w_t, v_t)
        ctx.set_materialize_grads(False)
        return w_t, v_t

    @staticmethod
    def backward(ctx, gw, gv):
        """``gA = V (diag(gw) + (V^T gV) / (w_j - w_i)) V^T``, symmetrized as torch returns it."""
        w, v = ctx.saved_tensors
        inner = _diag_embed(gw) if gw is not None else None
        if gv is not None:
            ident = _eye_like(v, v.shape[-1])
            gaps = w.unsqueeze(-2) - w.unsqueeze(-1) + ident
            off = where(ident.bool(), 0.0, matmul(_mT(v), gv) / gaps)
            inner = off if inner is None else inner + off
        if inner is None:
            return None, None
        ga = matmul(matmul(v, inner), _mT(v))
        return 0.5 * (ga + _mT(ga)), None


def _check_uplo(UPLO: str) -> None:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A: Tensor, UPLO: str = "L") -> tuple[Tensor, Tensor]:
    """Ascending eigenvalues and orthonormal eigenvectors of symmetric matrices, reading the ``UPLO`` triangle.
    Runs on the host for cuda inputs."""
    _check_matrix(A, "linalg.eigh")
    _check_uplo(UPLO)
    return Eigh.apply(A, UPLO)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The ascending eigenvalues of symmetric matrices (runs on the host for cuda inputs)."""
    _check_matrix(A, "linalg.eigvalsh")
    _check_uplo(UPLO)
    return Eigh.apply(A, UPLO)[0]


class Svd(Function):
    node_name = "LinalgSvdBackward0"

    @staticmethod
    def forward(ctx, a, full_matrices):
        u, s, vh = np.linalg.svd(_host(a), full_matrices=full_matrices)
        outs = _wrap(u, a), _wrap(s, a), _wrap(vh, a)
        ctx.save_for_backward(*outs)
        ctx.set_materialize_grads(False)
        return outs

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        """``gA = U (diag(gS) + (skew(U^T gU) / E) S + S (skew(V^T gV) / E)) V^T`` with ``E_ij = s_j^2 - s_i^2``,
        plus the parts of ``gU`` and ``gV`` outside the spans of ``U`` and ``V`` for non-square ``A``."""
        u, s, vh = ctx.saved_tensors
        m, n = u.shape[-2], vh.shape[-1]
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        if gu is None and gvh is None:
            if gs is None:
                return None, None
            return matmul(u * gs.unsqueeze(-2), vh), None
        ret = _diag_embed(gs) if gs is not None else zeros_like(s).unsqueeze(-1) * zeros_like(s).unsqueeze(-2)
        s2 = s * s
        gaps = s2.unsqueeze(-2) - s2.unsqueeze(-1) + _eye_like(s, k)
        v = _mT(vh)
        ga = None
        if gu is not None:
            gu = gu[..., :, :k]
            ut_gu = matmul(_mT(u), gu)
            ret = ret + (ut_gu - _mT(ut_gu)) / gaps * s.unsqueeze(-2)
            if m > k:
                ga = matmul((gu - matmul(u, ut_gu)) / s.unsqueeze(-2), vh)
        if gvh is not None:
            gv = _mT(gvh[..., :k, :])
            vt_gv = matmul(_mT(v), gv)
            ret = ret + s.unsqueeze(-1) * ((vt_gv - _mT(vt_gv)) / gaps)
            if n > k:
                extra = matmul(u, _mT((gv - matmul(v, vt_gv)) / s.unsqueeze(-2)))
                ga = extra if ga is None else ga + extra
        core = matmul(matmul(u, ret), vh)
        return (core if ga is None else core + ga), None


def _check_driver(driver) -> None:
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."
        )


def svd(A: Tensor, full_matrices: bool = True, *, driver=None) -> tuple[Tensor, Tensor, Tensor]:
    """``(U, S, Vh)`` with ``A = U diag(S) Vh`` and descending ``S`` (runs on the host for cuda inputs)."""
    _check_matrix(A, "linalg.svd", square=False)
    _check_driver(driver)
    return Svd.apply(A, full_matrices)


def svdvals(A: Tensor, *, driver=None) -> Tensor:
    """The singular values in descending order (runs on the host for cuda inputs)."""
    _check_matrix(A, "linalg.svd", square=False)
    _check_driver(driver)
    return Svd.apply(A, False)[1]


# --- pseudo-inverse, rank, least squares ---------------------------------------------------------------------


def _tolerances(a: np.ndarray, atol, rtol, s: np.ndarray) -> np.ndarray:
    """torch's cutoff ``max(atol, rtol * largest singular value)`` (default ``rtol``: eps * max(m, n) when no
    ``atol`` is given, else 0)."""
    if rtol is None:
        rtol = np.finfo(a.dtype).eps * max(a.shape[-2:]) if (atol is None or np.all(np.asarray(atol) <= 0)) else 0.0
    atol = 0.0 if atol is None else atol
    smax = s.max(axis=-1) if s.shape[-1] else np.zeros(s.shape[:-1], dtype=s.dtype)
    return np.maximum(np.asarray(atol, dtype=a.dtype), np.asarray(rtol, dtype=a.dtype) * smax)


def _tol_value(x):
    return _host(x) if isinstance(x, Tensor) else x


class Pinv(Function):
    node_name = "LinalgPinvBackward0"

    @staticmethod
    def forward(ctx, a, atol, rtol, hermitian):
        data = _host(a)
        if hermitian:
            w, v = np.linalg.eigh(data)
            cut = _tolerances(data, atol, rtol, np.abs(w))[..., None]
            winv = np.where(np.abs(w) > cut, 1 / np.where(w == 0, 1, w), 0)
            out = (v * winv[..., None, :]) @ np.swapaxes(v, -1, -2)
        else:
            u, s, vh = np.linalg.svd(data, full_matrices=False)
            cut = _tolerances(data, atol, rtol, s)[..., None]
            sinv = np.where(s > cut, 1 / np.where(s == 0, 1, s), 0)
            out = np.swapaxes(vh, -1, -2) @ (sinv[..., :, None] * np.swapaxes(u, -1, -2))
        p = _wrap(out.astype(data.dtype), a)
        ctx.save_for_backward(a, p)
        return p

    @staticmethod
    def backward(ctx, g):
        """``-P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A)`` for ``P = pinv(A)`` of constant rank."""
        a, p = ctx.saved_tensors
        pt = _mT(p)
        gt = _mT(g)
        left = _eye_like(a, a.shape[-2]) - matmul(a, p)
        right = _eye_like(a, a.shape[-1]) - matmul(p, a)
        return (
            -matmul(matmul(pt, g), pt)
            + matmul(matmul(left, gt), matmul(p, pt))
            + matmul(matmul(pt, p), matmul(gt, right)),
            None,
            None,
            None,
        )


@declare(name="pinverse", methods=True)
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:  # noqa: A002
    """The Moore-Penrose pseudo-inverse with singular values below ``rcond * max`` dropped (runs on the host for
    cuda inputs)."""
    _check_matrix(input, "linalg.pinv", square=False)
    return Pinv.apply(input, None, rcond, False)


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse, dropping singular values below ``max(atol, rtol * max)`` (runs on the host
    for cuda inputs)."""
    _check_matrix(A, "linalg.pinv", square=False)
    return Pinv.apply(A, _tol_value(atol), _tol_value(rtol), hermitian)


def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The number of singular values above ``max(atol, rtol * max)`` (an int64 tensor; host for cuda)."""
    _check_matrix(A, "linalg.matrix_rank", square=False)
    data = _host(A)
    s = np.abs(np.linalg.eigvalsh(data)) if hermitian else np.linalg.svd(data, compute_uv=False)
    cut = _tolerances(data, _tol_value(atol), _tol_value(rtol), s)[..., None]
    return _wrap(np.asarray((s > cut).sum(axis=-1), dtype=np.int64), A)


def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(solution, residuals, rank, singular_values)`` of ``min ||A X - B||`` with the outputs of each LAPACK
    ``driver`` as torch's CPU fills them (default ``gelsy``): the minimum-norm solution (through the
    pseudo-inverse, differentiable); the squared residuals for tall full-rank ``A`` except with ``gelsy``; the rank
    except with ``gels``; the singular values with ``gelsd``/``gelss``. Runs on the host for cuda inputs."""
    if driver is None:
        driver = "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    _check_matrix(A, "torch.linalg.lstsq", square=False)
    vector = B.dim() == A.dim() - 1
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    dt = _host(A).dtype
    tol = np.finfo(dt).eps * max(A.shape[-2:]) if rcond is None else rcond
    x = matmul(pinv(A, rtol=tol), rhs)
    empty = _wrap(np.zeros((0,), dtype=dt), A)
    rank = matrix_rank(A, rtol=tol)
    residuals = empty
    m, n = A.shape[-2], A.shape[-1]
    if driver != "gelsy" and m > n and bool(np.all(_host(rank) == n)):
        residuals = sum((matmul(A, x) - rhs) ** 2, -2)
        residuals = residuals.squeeze(-1) if vector else residuals
    if driver == "gels":
        rank = _wrap(np.zeros((0,), dtype=np.int64), A)
    singular_values = svdvals(A).detach() if driver in ("gelsd", "gelss") else empty
    return (x.squeeze(-1) if vector else x), residuals, rank, singular_values


# --- powers and exponential ----------------------------------------------------------------------------------


@declare(name="matrix_power", methods=True, samples=(Sample(T(3, 3), 3), Sample(T(2, 3, 3), 2)))
def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (the inverse's power for negative ``n``, identity for 0), by
    repeated squaring as torch does."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"linalg_matrix_power(): argument 'n' (position 2) must be int, not {type(n).__name__}")
    _check_matrix(A, "linalg.matrix_power")
    if n == 0:
        return _eye_like(A, A.shape[-1]).expand(*A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    if n == 1:
        return A.clone()
    result = None
    z = A
    while n:
        if n & 1:
            result = z if result is None else matmul(result, z)
        n >>= 1
        if n:
            z = matmul(z, z)
    return result


def _expm_host(a: np.ndarray) -> np.ndarray:
    """Scaling and squaring: each matrix is scaled by ``2**-s`` to a 1-norm of at most 1/2, where a degree-18
    Taylor polynomial is exact to rounding, and the result squared ``s`` times. Non-finite matrices give nan."""
    if a.size == 0:
        return a.copy()
    finite = np.isfinite(a).all(axis=(-2, -1))
    safe = np.where(finite[..., None, None], a, 0)
    norms = np.abs(safe).sum(axis=-2).max(axis=-1)
    squarings = np.ceil(np.log2(np.maximum(norms, 1e-300) / 0.5)).clip(min=0).astype(np.int64)
    x = safe / np.exp2(squarings)[..., None, None]
    out = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape).copy()
    term = out.copy()
    for k in range(1, 19):
        term = term @ x / k
        out = out + term
    for step in range(int(squarings.max())):
        more = squarings > step
        out[more] = out[more] @ out[more]
    out[~finite] = np.nan
    return out.astype(a.dtype)


class MatrixExp(Function):
    node_name = "LinalgMatrixExpBackward0"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _wrap(_expm_host(_host(a)), a)

    @staticmethod
    def backward(ctx, g):
        """The adjoint of the Fréchet derivative: the upper-right block of ``exp([[A^T, G], [0, A^T]])``."""
        (a,) = ctx.saved_tensors
        n = a.shape[-1]
        at = _mT(a)
        top = cat([at, g], -1)
        bottom = cat([zeros_like(g), at], -1)
        big = MatrixExp.apply(cat([top, bottom], -2))
        return big[..., :n, n:]


@declare(name="matrix_exp", methods=True, samples=(Sample(T(3, 3)), Sample(T(2, 2, 2))))
def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of each square matrix (computed on the host for cuda inputs)."""
    _check_matrix(A, "linalg.matrix_exp")
    return MatrixExp.apply(A)


# --- products ------------------------------------------------------------------------------------------------


class Cross(Function):
    node_name = "LinalgCrossBackward0"

    @staticmethod
    def forward(ctx, a, b, dim):
        ctx.save_for_backward(a, b)
        ctx.dim = dim
        out = np.cross(_host(a), _host(b), axis=dim)
        return _wrap(np.asarray(out, dtype=np.result_type(_host(a), _host(b))), a)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = _sum_to(Cross.apply(b, g, ctx.dim), a.shape) if ctx.needs_input_grad[0] else None
        gb = _sum_to(Cross.apply(g, a, ctx.dim), b.shape) if ctx.needs_input_grad[1] else None
        return ga, gb, None


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:  # noqa: A002
    """The cross product of 3-vectors along ``dim`` (broadcasting the other dims)."""
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = wrap_dim(dim, input.dim())
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and {other.shape[d]}"
        )
    return Cross.apply(input, other, d)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of ``x`` and ``y`` along ``dim``, broadcasting the others."""
    if x.dim() == 1 and y.dim() == 1 and x.shape[0] != y.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{x.shape[0]}] and src [{y.shape[0]}] to have the same "
            f"number of elements, but got {x.shape[0]} and {y.shape[0]} elements respectively"
        )
    return sum(x * y, dim)


def multi_dot(tensors) -> Tensor:
    """The product of a chain of matrices (the first may be a vector, as may the last), in torch's order."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0], tensors[-1]
    mats = [first.unsqueeze(0) if first.dim() == 1 else first, *tensors[1:-1]]
    mats.append(last.unsqueeze(-1) if last.dim() == 1 else last)
    for i, t in enumerate(mats):
        if t.dim() != 2:
            raise RuntimeError(
                f"multi_dot(): tensor {i} must be 2D but got {t.dim()}D"
                if 0 < i < len(mats) - 1
                else f"multi_dot(): the {'first' if i == 0 else 'last'} tensor must be 1D or 2D but got "
                f"{tensors[i].dim()}D"
            )
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                f"{list(tensors[i + 1].shape)} cannot be multiplied"
            )
    out = _chain(mats)
    if first.dim() == 1:
        out = out.squeeze(0)
    if last.dim() == 1:
        out = out.squeeze(-1)
    return out


def _chain(mats: list) -> Tensor:
    """Multiply in the cheapest order (the classic dynamic program over split points)."""
    dims = [mats[0].shape[0]] + [m.shape[1] for m in mats]
    n = len(mats)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def build(i: int, j: int) -> Tensor:
        if i == j:
            return mats[i]
        k = split[i][j]
        return matmul(build(i, k), build(k + 1, j))

    return build(0, n - 1)


def linalg_diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of the matrices in dims ``dim1``, ``dim2`` (a view)."""
    return diagonal(A, offset, dim1, dim2)


def vander(x: Tensor, N: int | None = None) -> Tensor:
    """The Vandermonde matrix with increasing powers ``x**0 .. x**(N-1)`` in the last dim."""
    n = (x.shape[-1] if x.dim() else 0) if N is None else N
    if x.dim() == 0 or n <= 1:
        raise RuntimeError("N must be greater than 1.")
    cols = [x.unsqueeze(-1) ** 0 * 1]
    for _ in range(1, n):
        cols.append(cols[-1] * x.unsqueeze(-1))
    return cat(cols, -1)


# --- norms ---------------------------------------------------------------------------------------------------


def _norm_dims(x: Tensor, dim) -> tuple:
    if dim is None:
        return tuple(range(x.dim()))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted(wrap_dim(d, x.dim()) for d in dims))


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The ``ord``-norm of ``x`` over ``dim`` (all dims by default) seen as one vector (of a complex ``x``: of its
    magnitudes)."""
    if x._data.dtype.kind == "c":
        x = complex_ops.abs_complex(x)
    _check_float(x, "linalg.vector_norm")
    if dtype is not None:
        x = x.to(dtype)
    dims = _norm_dims(x, dim)
    if (ord < 0 or ord == math.inf) and x.numel() == 0:  # max/min-like norms of nothing have no value
        where_ = "an empty tensor because"
        if dim is not None:
            empty = [d for d in dims if x.shape[d] == 0]
            if not empty:
                where_ = None
            else:  # (torch's text has no space before "because" here)
                where_ = f"the dimension {empty[0]}because this dimension is empty and"
        if where_ is not None:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {float(ord):g} norm on {where_} the operation does not have "
                "an identity"
            )
    return Norm.apply(x, float(ord), None if dim is None else dims, keepdim)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """The ``ord`` matrix norm (``fro``, ``nuc``, inf, -inf, 1, -1, 2, -2) of the matrices in ``dim``."""
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    _check_float(A, "linalg.matrix_norm")
    if dtype is not None:
        A = A.to(dtype)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
    d0, d1 = wrap_dim(dims[0], A.dim()), wrap_dim(dims[1], A.dim())
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord not in ("nuc", 2, -2, 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if ord in ("nuc", 2, -2):
        _check_precision(A, "linalg.matrix_norm")
        moved = A.permute(*[i for i in range(A.dim()) if i not in (d0, d1)], d0, d1)
        s = svdvals(moved)
        if ord == "nuc" or s.shape[-1] == 0:  # an empty matrix has norm 0
            out = sum(s, -1)
        else:
            out = amax(s, -1) if ord == 2 else amin(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    reduce_first, reduce_then = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = sum(A.abs(), reduce_first, True)
    out = amax(sums, reduce_then, True) if ord > 0 else amin(sums, reduce_then, True)
    if not keepdim:
        out = out.squeeze((d0, d1))
    return out


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """A vector norm or a matrix norm as ``ord`` and ``dim`` say (2-norm of the flattened input by default): a
    string ``ord``, or an ``ord`` with a 2-tuple ``dim`` or a 2-D input and no ``dim``, means a matrix norm."""
    if dim is not None and not isinstance(dim, int):
        dim = tuple(dim)
    if ord is not None and dim is None and A.dim() not in (1, 2):
        raise RuntimeError(
            f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.dim()}D."
        )
    two_dims = A.dim() == 2 if dim is None else isinstance(dim, tuple) and len(dim) == 2
    if isinstance(ord, str) or (ord is not None and two_dims):
        return matrix_norm(A, ord, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# --- LU ------------------------------------------------------------------------------------------------------


class LuFactor(Function):
    node_name = "LinalgLuFactorExBackward0"

    @staticmethod
    def forward(ctx, a):
        lu, piv, info = _lu_host(_host(a))
        lu_t, piv_t, info_t = _wrap(lu, a), _wrap(piv, a), _wrap(info, a)
        ctx.mark_non_differentiable(piv_t, info_t)
        ctx.save_for_backward(lu_t, piv_t)
        return lu_t, piv_t, info_t

    @staticmethod
    def backward(ctx, g, g_piv, g_info):
        lu_data, piv = ctx.saved_tensors
        p, low, up = lu_unpack(lu_data, piv)
        return matmul(p, _lu_backward(low, up, tril(g, -1)[..., :, : up.shape[-2]], triu(g)[..., : low.shape[-1], :]))


def _lu_backward(low: Tensor, up: Tensor, g_low: Tensor, g_up: Tensor) -> Tensor:
    """The gradient of ``P^T A`` from those of ``L`` (strictly lower) and ``U`` (upper) in ``A = P L U``.

    Square: ``L^{-T} (tril(L^T gL, -1) + triu(gU U^T)) U^{-T}``. Wide ``[A1 A2] = L [U1 U2]``: ``A2`` adds
    ``L^{-T} gU2`` and, through ``U2 = L^{-1} A2``, the term ``-L^{-T} gU2 U2^T`` to ``gL``. Tall
    ``[A1; A2] = [L1; L2] U``: ``A2`` gets ``gL2 U^{-T}`` and ``gU`` the term ``-L2^T gL2 U^{-T}``.
    """
    m, n = low.shape[-2], up.shape[-1]
    if m < n:
        up1, up2 = up[..., :, :m], up[..., :, m:]
        g_a2 = SolveTriangular.apply(_mT(low), g_up[..., :, m:], True, True)
        g_low = g_low - tril(matmul(g_a2, _mT(up2)), -1)
        return cat([_lu_backward(low, up1, g_low, g_up[..., :, :m]), g_a2], -1)
    if m > n:
        low1, low2 = low[..., :n, :], low[..., n:, :]
        g_a2 = _mT(SolveTriangular.apply(up, _mT(g_low[..., n:, :]), True, False))
        g_up = g_up - triu(matmul(_mT(low2), g_a2))
        return cat([_lu_backward(low1, up, g_low[..., :n, :], g_up), g_a2], -2)
    phi = tril(matmul(_mT(low), g_low), -1) + triu(matmul(g_up, _mT(up)))
    ident = _eye_like(low, m).expand(*low.shape)
    linv_t = _mT(SolveTriangular.apply(low, ident, False, True))
    uinv_t = _mT(SolveTriangular.apply(up, ident, True, False))
    return matmul(matmul(linv_t, phi), uinv_t)


def _permutation_host(piv: np.ndarray, m: int) -> np.ndarray:
    """The permutation matrices ``P`` of LAPACK pivots (row ``i`` swapped with ``piv[i] - 1`` in turn), so that
    ``A = P L U``."""
    flat = piv.reshape(-1, piv.shape[-1])
    perms = np.tile(np.arange(m), (flat.shape[0], 1))
    for b in range(flat.shape[0]):
        for i, p in enumerate(flat[b]):
            perms[b, [i, p - 1]] = perms[b, [p - 1, i]]
    eye_m = np.eye(m)
    mats = np.stack([eye_m[:, perm] for perm in perms]) if flat.shape[0] else np.zeros((0, m, m))
    return mats.reshape(*piv.shape[:-1], m, m)


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """``(LU, pivots, info)``: the packed LU factorization with partial pivoting (1-based int32 pivots, LAPACK's
    convention) and per matrix the 1-based index of the first zero pivot. Runs on the host for cuda inputs."""
    _check_matrix(A, "torch.linalg.lu_factor_ex", square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu, piv, info = LuFactor.apply(A)
    if check_errors:
        _raise_zero_pivot(_host(info), "torch.linalg.lu_factor_ex")
    return lu, piv, info


def _raise_zero_pivot(info: np.ndarray, op: str) -> None:
    """torch's error (a plain RuntimeError) for a factorization with an exactly zero pivot."""
    if np.any(info):
        prefix, k = _batch_prefix(info)
        raise RuntimeError(
            f"{op}: {prefix}U[{k},{k}] is zero and using it on lu_solve would result in a division by zero. If you "
            "still want to perform the factorization, consider calling linalg.lu(A, pivot) or "
            "linalg.lu_factor_ex(A, pivot)"
        )


def lu_factor(A: Tensor, *, pivot: bool = True) -> tuple[Tensor, Tensor]:
    """``(LU, pivots)`` of ``lu_factor_ex``; a matrix with a zero pivot raises RuntimeError."""
    _check_matrix(A, "torch.linalg.lu_factor", square=False)
    lu, piv, info = lu_factor_ex(A, pivot=pivot)
    _raise_zero_pivot(_host(info), "torch.linalg.lu_factor")
    return lu, piv


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):
    """``(P, L, U)`` from a packed LU factorization (differentiable in ``LU_data``); what is not unpacked is an
    empty tensor."""
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = _wrap(np.zeros((0,), dtype=_host(LU_data).dtype), LU_data)
    p = empty
    if unpack_pivots:
        p = _wrap(_permutation_host(_host(LU_pivots), m).astype(_host(LU_data).dtype), LU_data)
    if not unpack_data:
        return p, empty, empty
    low = tril(LU_data[..., :, :k], -1) + _eye_like(LU_data, m)[:, :k]
    up = triu(LU_data[..., :k, :])
    return p, low, up


def lu(A: Tensor, *, pivot: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """``(P, L, U)`` with ``A = P L U``: unit lower-triangular ``L``, upper-triangular ``U`` (host for cuda)."""
    _check_matrix(A, "linalg.lu", square=False)
    lu_data, piv, _ = lu_factor_ex(A, pivot=pivot)
    return lu_unpack(lu_data, piv)


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """The solution of ``A X = B`` (``X A = B`` for ``left=False``, ``A^T`` for ``adjoint``) from ``A``'s
    ``lu_factor``; differentiable in ``LU`` and ``B``."""
    _check_matrix(LU, "linalg.lu_solve")
    if B.dim() < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    _check_rhs(LU, B, left, "linalg.lu_solve")
    p, low, up = lu_unpack(LU, pivots)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return _mT(lu_solve(LU, pivots, _mT(B), adjoint=not adjoint))
    if adjoint:  # A^T X = B with A^T = U^T L^T P^T
        y = SolveTriangular.apply(_mT(up), B, False, False)
        y = SolveTriangular.apply(_mT(low), y, True, True)
        return matmul(p, y)
    y = SolveTriangular.apply(low, matmul(_mT(p), B), False, True)
    return SolveTriangular.apply(up, y, True, False)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> tuple[Tensor, Tensor]:
    """``(X, info)`` of ``solve``; info is the 1-based index of the first zero pivot of each ``A`` (0 if none)
    and a singular matrix's solution is nan unless ``check_errors`` raises."""
    _check_matrix(A, "linalg.solve_ex")
    x = _solve(A, B, left, check_errors)
    return x, _wrap(_lu_host(_host(A))[2], A)


# --- householder, tensors, condition number ------------------------------------------------------------------


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of ``H_1 ... H_k`` with ``H_i = I - tau_i v_i v_i^T`` and ``v_i`` the ``i``-th
    column of ``A`` below the diagonal with a unit diagonal entry (LAPACK's ``orgqr``), built from
    differentiable ops."""
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.householder_product: input must have at least 2 dimensions.")
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    if m < n:
        raise RuntimeError(
            "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]"
        )
    if n < k:
        raise RuntimeError(
            "torch.linalg.householder_product: input.shape[-1] must be greater than or equal to tau.shape[-1]"
        )
    vs = tril(A, -1) + _eye_like(A, m)[:, :n]
    h = _eye_like(A, m).expand(*A.shape[:-2], m, m)
    for i in range(k):
        v = vs[..., :, i : i + 1]
        h = h - tau[..., i : i + 1].unsqueeze(-1) * matmul(matmul(h, v), _mT(v))
    return h[..., :, :n]


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of ``A`` seen as a linear map from its last dims (after ``ind``) to its first ``ind`` dims."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out_shape, in_shape = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows, cols = math.prod(out_shape), math.prod(in_shape)
    if rows != cols:
        raise RuntimeError(
            "Expected self to satisfy the requirement prod(self.shape[ind:]) == prod(self.shape[:ind]), but got "
            f"{cols} != {rows}"
        )
    return inv(A.reshape(rows, cols)).reshape(*in_shape, *out_shape)


def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """The ``X`` with ``tensordot(A, X, X.ndim) == B`` (``dims`` of ``A`` first moved to the end)."""
    if dims is not None:
        dims = [wrap_dim(d, A.dim()) for d in dims]
        A = A.permute(*[i for i in range(A.dim()) if i not in dims], *dims)
    result_shape = tuple(A.shape[B.dim() :])
    rows, cols = B.numel(), math.prod(result_shape)
    if rows != cols:
        raise RuntimeError(
            "Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), "
            f"but got {cols} != {rows}"
        )
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(*result_shape)


def cond(A: Tensor, p=None) -> Tensor:
    """The condition number in the ``p`` norm (2-norm: ratio of extreme singular values)."""
    if A.dim() < 2:
        raise RuntimeError("linalg.cond: The input tensor A must have at least 2 dimensions.")
    if p is None or p in (2, -2):
        s = svdvals(A)
        big, small = amax(s, -1), amin(s, -1)
        return small / big if p == -2 else big / small
    _check_matrix(A, "linalg.cond")
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


# --- torch's top-level forms ---------------------------------------------------------------------------------


@declare(name="svd", methods=True)
def torch_svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> tuple[Tensor, Tensor, Tensor]:  # noqa: A002
    """``torch.svd``: ``(U, S, V)`` with ``V`` (not ``Vh``); without ``compute_uv`` the vectors are zero
    matrices of the full sizes. Runs on the host for cuda inputs."""
    _check_matrix(input, "linalg.svd", square=False)
    if not compute_uv:
        s = Svd.apply(input, False)[1]
        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        return zeros_like(s).new_zeros(*batch, m, m), s, zeros_like(s).new_zeros(*batch, n, n)
    u, s, vh = Svd.apply(input, not some)
    return u, s, _mT(vh)


@declare(name="qr", methods=True, samples=(Sample(T(4, 3)), Sample(T(2, 3, 3))))
def torch_qr(input: Tensor, some: bool = True) -> tuple[Tensor, Tensor]:  # noqa: A002
    """``torch.qr``: ``linalg.qr`` in ``reduced`` mode (``complete`` when not ``some``)."""
    return qr(input, "reduced" if some else "complete")


@declare(name="cross", methods=True, samples=(Sample(T(2, 3), T(2, 3)), Sample(T(3, 2), T(3, 2), 0)))
def torch_cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:  # noqa: A002
    """``torch.cross``: as ``linalg.cross``, but without ``dim`` the first dim of size 3 is used."""
    if dim is None:
        sizes = list(np.broadcast_shapes(tuple(input.shape), tuple(other.shape)))
        dim = sizes.index(3) if 3 in sizes else -1
        if 3 not in sizes:
            raise RuntimeError("no dimension of size 3 in input")
    return cross(input, other, dim=dim)


@declare(name="vander")
def torch_vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """``torch.vander``: the powers of a 1-D ``x``, decreasing unless ``increasing``."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if n == 0:
        return x.unsqueeze(-1)[..., :0] * 1
    cols = [x.unsqueeze(-1) ** 0 * 1]
    for _ in range(1, n):
        cols.append(cols[-1] * x.unsqueeze(-1))
    powers = cat(cols, -1)
    return powers if increasing else powers.flip(-1)


class CholeskyDeprecated(Cholesky):
    node_name = "CholeskyBackward0"


@declare(name="cholesky", methods=True)
def torch_cholesky(input: Tensor, upper: bool = False) -> Tensor:  # noqa: A002
    """``torch.cholesky`` (deprecated in torch in favour of ``linalg.cholesky``, and warns as torch does)."""
    warnings.warn(
        "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future PyTorch "
        "release.",
        UserWarning,
        stacklevel=2,
    )
    _check_matrix(input, "cholesky")
    return CholeskyDeprecated.apply(input, upper, True)[0]


@declare(name="cholesky_solve", methods=True)
def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:  # noqa: A002
    """The solution of ``A X = input`` given ``A``'s Cholesky factor ``input2`` (lower, or ``upper``)."""
    low = _mT(input2) if upper else input2
    y = solve_triangular(low, input, upper=False)
    return solve_triangular(_mT(low), y, upper=True)


@declare(name="cholesky_inverse", methods=True)
def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:  # noqa: A002
    """The inverse of ``A`` given its Cholesky factor (lower, or ``upper``)."""
    n = input.shape[-1]
    return cholesky_solve(_eye_like(input, n).expand(*input.shape), input, upper)


@declare(name="lu_unpack")
def torch_lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):
    """``(P, L, U)`` from ``lu_factor``'s packed output."""
    return lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)


class Geqrf(Function):
    node_name = "GeqrfBackward0"

    @staticmethod
    def forward(ctx, a):
        h, tau = np.linalg.qr(_host(a), mode="raw")
        return _wrap(np.swapaxes(h, -1, -2), a), _wrap(tau, a)

    @staticmethod
    def backward(ctx, gh, gtau):
        raise RuntimeError("the derivative for 'geqrf' is not implemented.")


@declare(name="geqrf", methods=True, differentiable=False)
def geqrf(input: Tensor) -> tuple[Tensor, Tensor]:  # noqa: A002
    """LAPACK's ``geqrf``: ``R`` above the diagonal and the Householder vectors below it, with their ``tau``
    (``orgqr`` rebuilds ``Q``). Not differentiable, as in torch. Runs on the host for cuda inputs."""
    _check_matrix(input, "geqrf", square=False)
    return Geqrf.apply(input)


@declare(name="orgqr", methods=True)
def orgqr(input: Tensor, input2: Tensor) -> Tensor:  # noqa: A002
    """``torch.orgqr``: ``linalg.householder_product(input, tau=input2)``."""
    return householder_product(input, input2)
