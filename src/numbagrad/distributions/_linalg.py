"""The two matrix factorizations MultivariateNormal needs, as differentiable Functions: the Cholesky factor and
the triangular solve. Each backward is made of these same Functions and matmul, so double backward works.

Forward runs numpy's LAPACK on the host data (the distributions' matrices are small)."""

from __future__ import annotations

import numpy as np

from .. import ops
from .._tensor import Tensor
from ..autograd.function import Function


def _from_host(array: np.ndarray, like: Tensor) -> Tensor:
    return ops.as_tensor(np.ascontiguousarray(array, dtype=like._host().dtype), device=like.device)


class Cholesky(Function):
    """``L`` with ``L @ L.mT == A`` (lower triangular, positive diagonal), batched over leading dimensions."""

    node_name = "LinalgCholeskyExBackward0"

    @staticmethod
    def forward(ctx, a):
        try:
            lower = np.linalg.cholesky(a._host())
        except np.linalg.LinAlgError:
            raise RuntimeError(
                "linalg.cholesky: The factorization could not be completed because the input is not positive-definite."
            ) from None
        out = _from_host(lower, a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        # A = L L^T: dA = L^-T Phi(L^T dL) L^-1 with Phi the lower triangle and half the diagonal, symmetrized.
        (lower,) = ctx.saved_tensors
        n = lower.shape[-1]
        half_diagonal = 1.0 - 0.5 * ops.eye(n, dtype=lower.dtype, device=lower.device)
        phi = ops.matmul(lower.mT, g).tril() * half_diagonal
        z = solve_triangular(lower.mT, phi, upper=True)
        s = solve_triangular(lower.mT, z.mT, upper=True).mT
        return 0.5 * (s + s.mT)


class SolveTriangular(Function):
    """``X`` with ``A @ X == B`` for triangular ``A`` (its other triangle is ignored)."""

    node_name = "LinalgSolveTriangularBackward0"

    @staticmethod
    def forward(ctx, a, b, upper):
        a_host = a._host()
        a_host = np.triu(a_host) if upper else np.tril(a_host)
        batch = np.broadcast_shapes(a_host.shape[:-2], b._host().shape[:-2])
        a_host = np.broadcast_to(a_host, batch + a_host.shape[-2:])
        b_host = np.broadcast_to(b._host(), batch + b._host().shape[-2:])
        out = _from_host(np.linalg.solve(a_host, b_host), a)
        ctx.upper = upper
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        gb = solve_triangular(a.mT, g, upper=not ctx.upper)
        ga = None
        if ctx.needs_input_grad[0]:
            ga = -ops.matmul(gb, x.mT)
            ga = ga.triu() if ctx.upper else ga.tril()
        return ga, gb, None


def cholesky(a: Tensor) -> Tensor:
    """The lower Cholesky factor of the symmetric positive-definite matrices ``a``."""
    return Cholesky.apply(a)


def solve_triangular(a: Tensor, b: Tensor, *, upper: bool) -> Tensor:
    """``A^-1 B`` for lower (or ``upper``) triangular ``a``, broadcasting batch dimensions."""
    return SolveTriangular.apply(a, b, upper)


def cholesky_ok(a: Tensor) -> Tensor:
    """A bool per matrix: whether its Cholesky factorization exists (it is positive definite)."""
    host = a.detach()._host()
    flat = host.reshape((-1,) + host.shape[-2:])
    ok = []
    for m in flat:
        try:
            np.linalg.cholesky(m)
            ok.append(True)
        except np.linalg.LinAlgError:
            ok.append(False)
    return ops.tensor(np.array(ok, dtype=bool).reshape(host.shape[:-2]), device=a.device)
