"""Gamma samples with reparameterized gradients (``rsample`` of Gamma, Chi2, Beta, Dirichlet, StudentT), and
Gamma's CDF.

A Gamma(alpha, 1) sample ``x`` is a function of ``alpha`` at a fixed uniform draw ``u = P(alpha, x)`` (the
regularized incomplete gamma function, Gamma's CDF), so by implicit differentiation
``dx/dalpha = -(dP/dalpha)(alpha, x) / p(x; alpha)``. Here ``P`` is evaluated by its power series below
``x < alpha + 1`` and by its continued fraction above (both in float64), and ``dP/dalpha`` by a central
difference of it; torch computes the same derivative with fitted approximations."""

from __future__ import annotations

import math

import numpy as np

from .. import ops
from .._tensor import Tensor
from ..autograd.function import Function
from ..ops.creation import _rng_for

_ITERATIONS = 400


def _lgamma(a: np.ndarray) -> np.ndarray:
    return np.vectorize(math.lgamma, otypes=[np.float64])(a)


def _regularized_lower_gamma(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P(a, x) = gamma(a, x) / Gamma(a), elementwise, for a > 0 and x >= 0."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.zeros(a.shape)
    log_front = a * np.log(np.where(x > 0, x, 1.0)) - x - _lgamma(a)
    series = (x < a + 1) & (x > 0)
    if series.any():
        aa, xx = a[series], x[series]
        term = 1.0 / aa
        total = term.copy()
        for n in range(1, _ITERATIONS):
            term = term * xx / (aa + n)
            total += term
            if np.all(np.abs(term) < np.abs(total) * 1e-17):
                break
        out[series] = total * np.exp(log_front[series])
    fraction = x >= a + 1
    if fraction.any():  # Q(a, x) by Lentz's continued fraction, P = 1 - Q
        aa, xx = a[fraction], x[fraction]
        tiny = 1e-300
        b = xx + 1.0 - aa
        c = np.full(aa.shape, 1.0 / tiny)
        d = 1.0 / b
        h = d.copy()
        for i in range(1, _ITERATIONS):
            an = -i * (i - aa)
            b = b + 2.0
            d = an * d + b
            d = np.where(np.abs(d) < tiny, tiny, d)
            c = b + an / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            d = 1.0 / d
            delta = d * c
            h = h * delta
            if np.all(np.abs(delta - 1.0) < 1e-16):
                break
        out[fraction] = 1.0 - np.exp(log_front[fraction]) * h
    return out


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d x / d alpha of Gamma(alpha, 1) samples ``x`` at fixed CDF value."""
    alpha, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    h = 1e-5 * np.maximum(alpha, 1e-3)
    dp = (_regularized_lower_gamma(alpha + h, x) - _regularized_lower_gamma(alpha - h, x)) / (2 * h)
    safe_x = np.where(x > 0, x, 1.0)
    log_density = (alpha - 1) * np.log(safe_x) - safe_x - _lgamma(alpha)
    return np.where(x > 0, -dp / np.exp(log_density), 0.0)


class StandardGamma(Function):
    """Gamma(alpha, 1) draws from numbagrad's generator; the gradient is the implicit one above."""

    node_name = "StandardGammaBackward0"

    @staticmethod
    def forward(ctx, alpha):
        a = alpha._host()
        draws = _rng_for(None).standard_gamma(a.astype(np.float64)).astype(a.dtype)
        out = ops.as_tensor(draws, device=alpha.device)
        ctx.save_for_backward(alpha, out)
        return out

    @staticmethod
    def backward(ctx, g):
        alpha, x = ctx.saved_tensors
        grad = standard_gamma_grad(alpha.detach()._host(), x.detach()._host()).astype(alpha._host().dtype)
        return g * ops.as_tensor(grad, device=alpha.device)


def standard_gamma(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) samples of ``alpha``'s shape, differentiable in ``alpha``."""
    return StandardGamma.apply(alpha.contiguous())


class RegularizedGammaCdf(Function):
    """``P(a, x)``, the regularized lower incomplete gamma function (torch's ``special.gammainc``): Gamma's CDF.
    As in torch, only ``x`` has a derivative."""

    node_name = "IgammaBackward0"

    @staticmethod
    def forward(ctx, a, x):
        a_host, x_host = np.broadcast_arrays(a._host(), x._host())
        with np.errstate(all="ignore"):
            out = _regularized_lower_gamma(a_host, np.maximum(x_host, 0.0))
        ctx.save_for_backward(a, x)
        return ops.as_tensor(out.astype(np.result_type(a._host(), x._host())), device=a.device)

    @staticmethod
    def backward(ctx, g):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'igamma: input' is not implemented.")
        a, x = ctx.saved_tensors
        return None, g * ops.exp(ops.xlogy(a - 1, x) - x - ops.lgamma(a))


def gammainc(a: Tensor, x: Tensor) -> Tensor:
    """``P(a, x)`` elementwise (broadcast), differentiable in ``x``."""
    return RegularizedGammaCdf.apply(a, x)
