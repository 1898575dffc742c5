"""Fused optimizer updates: one compiled pass over a parameter, its gradient and its state per step.

Each update is written once, for one element (``_sgd_element``, ``_adam_element``, following torch's
``_single_tensor_sgd`` / ``_single_tensor_adam`` operation by operation so results agree to rounding), and driven by
a serial loop or a ``prange`` loop chosen by size. Arrays arrive flat and contiguous; scalars arrive in the
parameter's dtype (constants like ``1 - beta1`` are computed in Python first: an integer literal in the loop would
promote float32 to float64), so float32 parameters update in float32 as torch's do, and ``error_model="numpy"``
drops the division-by-zero checks that would stop the loops from vectorising. Imported lazily (it starts Numba).
"""

from __future__ import annotations

import math

from numba import njit, prange

#: Parameters with at least this many elements use the ``prange`` loops (same threshold as the elementwise ops).
from ..backend.cpu import PARALLEL_THRESHOLD


@njit(cache=True, inline="always", error_model="numpy")
def _sgd_element(p, g, buf, hyper, nesterov, maximize, first):
    lr, momentum, one_minus_dampening, weight_decay = hyper
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    if momentum != 0:
        buf = d if first else buf * momentum + one_minus_dampening * d
        d = d + momentum * buf if nesterov else buf
    return p - lr * d, buf


@njit(cache=True, nogil=True, error_model="numpy")
def _sgd_serial(p, g, buf, hyper, nesterov, maximize, first):
    for i in range(p.shape[0]):
        p[i], new_buf = _sgd_element(p[i], g[i], buf[i], hyper, nesterov, maximize, first)
        if hyper[1] != 0:  # with momentum 0, buf is p itself and must not be written
            buf[i] = new_buf


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _sgd_parallel(p, g, buf, hyper, nesterov, maximize, first):
    for i in prange(p.shape[0]):
        p[i], new_buf = _sgd_element(p[i], g[i], buf[i], hyper, nesterov, maximize, first)
        if hyper[1] != 0:
            buf[i] = new_buf


@njit(cache=True, inline="always", error_model="numpy")
def _adam_element(p, g, m, v, vmax, hyper, amsgrad, maximize):
    step_size, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, bias_correction2_sqrt = hyper
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    m = m + one_minus_beta1 * (d - m)  # exp_avg.lerp_(grad, 1 - beta1)
    v = v * beta2 + one_minus_beta2 * d * d  # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    if amsgrad:
        vmax = max(vmax, v)
        denom = math.sqrt(vmax) / bias_correction2_sqrt + eps
    else:
        denom = math.sqrt(v) / bias_correction2_sqrt + eps
    return p - step_size * (m / denom), m, v, vmax


@njit(cache=True, nogil=True, error_model="numpy")
def _adam_serial(p, g, m, v, vmax, hyper, amsgrad, maximize):
    for i in range(p.shape[0]):
        p[i], m[i], new_v, new_vmax = _adam_element(p[i], g[i], m[i], v[i], vmax[i], hyper, amsgrad, maximize)
        if amsgrad:  # without amsgrad, vmax is v itself: write v last
            vmax[i] = new_vmax
        v[i] = new_v


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _adam_parallel(p, g, m, v, vmax, hyper, amsgrad, maximize):
    for i in prange(p.shape[0]):
        p[i], m[i], new_v, new_vmax = _adam_element(p[i], g[i], m[i], v[i], vmax[i], hyper, amsgrad, maximize)
        if amsgrad:
            vmax[i] = new_vmax
        v[i] = new_v


def sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first) -> None:
    """Update flat ``p`` and ``buf`` (the momentum buffer; pass ``p`` itself when momentum is 0) in place."""
    kernel = _sgd_parallel if p.shape[0] >= PARALLEL_THRESHOLD else _sgd_serial
    s = p.dtype.type
    kernel(p, g, buf, (s(lr), s(momentum), s(1 - dampening), s(weight_decay)), nesterov, maximize, first)


def adam_step(p, g, m, v, vmax, step_size, beta1, beta2, eps, weight_decay, bias_correction2_sqrt, amsgrad, maximize):
    """Update flat ``p``, ``m`` (exp_avg), ``v`` (exp_avg_sq), ``vmax`` (max_exp_avg_sq; ``v`` without amsgrad)."""
    kernel = _adam_parallel if p.shape[0] >= PARALLEL_THRESHOLD else _adam_serial
    s = p.dtype.type
    hyper = (s(step_size), s(1 - beta1), s(beta2), s(1 - beta2), s(eps), s(weight_decay), s(bias_correction2_sqrt))
    kernel(p, g, m, v, vmax, hyper, amsgrad, maximize)
