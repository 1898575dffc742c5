"""The per-element optimizer updates: one plain function of an index ``i`` per optimizer.

Each follows torch 2.13's ``_single_tensor_*`` code operation by operation (``lerp`` as torch's, ``addcmul`` as
``self + value * t1 * t2``, ``addcdiv`` as ``self + value * t1 / t2``), so results agree with torch to rounding.
``backend.foreach`` copies a function (with the helpers it calls) into a generated module and drives it from a
serial or ``prange`` ``@njit`` loop on the CPU, or a grid-stride kernel on CUDA: no loop is written here, and
importing this module starts no Numba.

The flags that decide which state arrays are written (``amsgrad``, ``centered``, momentum) come last: the optimizers
pass them as ``static`` values, compiled into the loop as constants so it vectorises. Arrays arrive flat and
contiguous; scalars arrive in the parameter's dtype (constants such as ``1 - beta1`` are
computed in Python first: an integer literal in the loop would promote float32 to float64), so float32 parameters
update in float32 as torch's do. A state array an update does not use is passed as the parameter itself, untouched.
"""

from __future__ import annotations

import math


def lerp(a, b, w, one_minus_w):
    """torch's ``lerp(a, b, w)``: ``a + w (b - a)`` for ``|w| < 0.5``, else ``b - (b - a) (1 - w)``."""
    return a + w * (b - a) if abs(w) < 0.5 else b - (b - a) * one_minus_w


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


def adam_update(i, p, g, m, v, vmax, neg_step_size, one_minus_beta1, beta1, beta2, one_minus_beta2, eps,
                weight_decay, decay_factor, decoupled, bias_correction2_sqrt, maximize, amsgrad):  # fmt: skip
    """Adam and AdamW for element ``i``: ``decoupled`` scales the parameter by ``decay_factor = 1 - lr * wd``
    (AdamW) instead of adding ``wd * p`` to the gradient; without amsgrad, ``vmax`` is ``v`` and untouched."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        if decoupled:
            p[i] = p[i] * decay_factor  # param.mul_(1 - lr * weight_decay)
        else:
            d = d + weight_decay * p[i]  # grad.add(param, alpha=weight_decay)
    m[i] = lerp(m[i], d, one_minus_beta1, beta1)  # exp_avg.lerp_(grad, 1 - beta1)
    new_v = v[i] * beta2 + one_minus_beta2 * d * d  # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    v[i] = new_v
    if amsgrad:
        # torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=...): a nan on either side wins. Written as a select on
        # a local, not max(vmax[i], new_v) and a second read of vmax[i], which kept the loop from vectorizing
        # (Adam with amsgrad at 1e5 float32: 350 us, 47 us as written here)
        vm = vmax[i]
        vm = new_v if new_v > vm or new_v != new_v else vm
        vmax[i] = vm
        denom = math.sqrt(vm) / bias_correction2_sqrt + eps
    else:
        denom = math.sqrt(new_v) / bias_correction2_sqrt + eps
    p[i] = p[i] + neg_step_size * m[i] / denom  # param.addcdiv_(exp_avg, denom, value=-step_size)


def rmsprop_update(i, p, g, square_avg, grad_avg, buf, neg_lr, alpha, one_minus_alpha, eps, weight_decay,
                   momentum, maximize, centered, has_momentum):  # fmt: skip
    """RMSprop for element ``i``: ``grad_avg`` is used when ``centered``, ``buf`` when ``has_momentum``
    (``momentum > 0``)."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        d = d + weight_decay * p[i]
    sq = square_avg[i] * alpha + one_minus_alpha * d * d  # square_avg.mul_(alpha).addcmul_(grad, grad, 1 - alpha)
    square_avg[i] = sq
    if centered:
        ga = lerp(grad_avg[i], d, one_minus_alpha, alpha)  # grad_avg.lerp_(grad, 1 - alpha)
        grad_avg[i] = ga
        avg = math.sqrt(sq - ga * ga)  # square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    else:
        avg = math.sqrt(sq)
    avg = avg + eps
    if has_momentum:
        b = buf[i] * momentum + d / avg  # buf.mul_(momentum).addcdiv_(grad, avg)
        buf[i] = b
        p[i] = p[i] + neg_lr * b  # param.add_(buf, alpha=-lr)
    else:
        p[i] = p[i] + neg_lr * d / avg  # param.addcdiv_(grad, avg, value=-lr)


def adagrad_update(i, p, g, state_sum, neg_clr, eps, weight_decay, maximize):
    """Adagrad for element ``i`` (``neg_clr`` is ``-lr / (1 + (step - 1) * lr_decay)``)."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        d = d + weight_decay * p[i]
    s = state_sum[i] + d * d  # state_sum.addcmul_(grad, grad, value=1)
    state_sum[i] = s
    std = math.sqrt(s) + eps  # state_sum.sqrt().add_(eps)
    p[i] = p[i] + neg_clr * d / std  # param.addcdiv_(grad, std, value=-clr)
