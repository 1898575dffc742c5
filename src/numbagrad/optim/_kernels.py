"""Fused optimizer updates: one pass over a parameter, its gradient and its state per step, on CPU or CUDA.

Each update is written once, as a plain function of one index ``i`` (``sgd_update``, ``adam_update``, following
torch's ``_single_tensor_sgd`` / ``_single_tensor_adam`` operation by operation so results agree to rounding). The
CPU drives it from a serial or a ``prange`` loop chosen by size (``@njit``); the CUDA backend compiles the same
function as a device function and runs it from a grid-stride kernel (``backend.cuda.foreach``). Arrays arrive flat
and contiguous; scalars arrive in the parameter's dtype (constants like ``1 - beta1`` are computed in Python first:
an integer literal in the loop would promote float32 to float64), so float32 parameters update in float32 as
torch's do, and ``error_model="numpy"`` drops the division-by-zero checks that would stop the loops from
vectorising. Imported lazily (it starts Numba).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

#: Parameters with at least this many elements use the ``prange`` loops (same threshold as the elementwise ops).
from ..backend.cpu import PARALLEL_THRESHOLD


def sgd_update(i, p, g, buf, lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize, first):
    """SGD for element ``i``; ``buf`` (the momentum buffer) is only touched when ``momentum != 0``."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        d = d + weight_decay * p[i]
    if momentum != 0:
        b = d if first else buf[i] * momentum + one_minus_dampening * d
        buf[i] = b
        d = d + momentum * b if nesterov else b
    p[i] = p[i] - lr * d


def adam_update(i, p, g, m, v, vmax, step_size, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay,
                bias_correction2_sqrt, amsgrad, maximize):  # fmt: skip
    """Adam for element ``i``; without amsgrad, ``vmax`` is ``v`` itself (written last)."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        d = d + weight_decay * p[i]
    m[i] = m[i] + one_minus_beta1 * (d - m[i])  # exp_avg.lerp_(grad, 1 - beta1)
    new_v = v[i] * beta2 + one_minus_beta2 * d * d  # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    if amsgrad:
        vmax[i] = max(vmax[i], new_v)
        denom = math.sqrt(vmax[i]) / bias_correction2_sqrt + eps
    else:
        denom = math.sqrt(new_v) / bias_correction2_sqrt + eps
    v[i] = new_v
    p[i] = p[i] - step_size * (m[i] / denom)


_sgd_update = njit(cache=True, inline="always", error_model="numpy")(sgd_update)
_adam_update = njit(cache=True, inline="always", error_model="numpy")(adam_update)


@njit(cache=True, nogil=True, error_model="numpy")
def _sgd_serial(p, g, buf, lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize, first):
    for i in range(p.shape[0]):
        _sgd_update(i, p, g, buf, lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize, first)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _sgd_parallel(p, g, buf, lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize, first):
    for i in prange(p.shape[0]):
        _sgd_update(i, p, g, buf, lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize, first)


@njit(cache=True, nogil=True, error_model="numpy")
def _adam_serial(
    p,
    g,
    m,
    v,
    vmax,
    step_size,
    one_minus_beta1,
    beta2,
    one_minus_beta2,
    eps,
    weight_decay,
    bias_correction2_sqrt,
    amsgrad,
    maximize,
):
    for i in range(p.shape[0]):
        _adam_update(
            i,
            p,
            g,
            m,
            v,
            vmax,
            step_size,
            one_minus_beta1,
            beta2,
            one_minus_beta2,
            eps,
            weight_decay,
            bias_correction2_sqrt,
            amsgrad,
            maximize,
        )


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _adam_parallel(
    p,
    g,
    m,
    v,
    vmax,
    step_size,
    one_minus_beta1,
    beta2,
    one_minus_beta2,
    eps,
    weight_decay,
    bias_correction2_sqrt,
    amsgrad,
    maximize,
):
    for i in prange(p.shape[0]):
        _adam_update(
            i,
            p,
            g,
            m,
            v,
            vmax,
            step_size,
            one_minus_beta1,
            beta2,
            one_minus_beta2,
            eps,
            weight_decay,
            bias_correction2_sqrt,
            amsgrad,
            maximize,
        )


def _run(update, serial, parallel, arrays: list, scalars: tuple) -> None:
    """One fused pass: the CPU loop (serial or prange by size), or ``update`` as a CUDA kernel."""
    if isinstance(arrays[0], np.ndarray):
        (parallel if arrays[0].shape[0] >= PARALLEL_THRESHOLD else serial)(*arrays, *scalars)
    else:
        from ..backend import cuda

        cuda.foreach(update, arrays, scalars)


def sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first) -> None:
    """Update flat ``p`` and ``buf`` (the momentum buffer; pass ``p`` itself when momentum is 0) in place."""
    s = p.dtype.type
    scalars = (s(lr), s(momentum), s(1 - dampening), s(weight_decay), nesterov, maximize, first)
    _run(sgd_update, _sgd_serial, _sgd_parallel, [p, g, buf], scalars)


def adam_step(p, g, m, v, vmax, step_size, beta1, beta2, eps, weight_decay, bias_correction2_sqrt, amsgrad, maximize):
    """Update flat ``p``, ``m`` (exp_avg), ``v`` (exp_avg_sq), ``vmax`` (max_exp_avg_sq; ``v`` without amsgrad)."""
    s = p.dtype.type
    hyper = (s(step_size), s(1 - beta1), s(beta2), s(1 - beta2), s(eps), s(weight_decay), s(bias_correction2_sqrt))
    _run(adam_update, _adam_serial, _adam_parallel, [p, g, m, v, vmax], (*hyper, amsgrad, maximize))
