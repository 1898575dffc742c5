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


def adadelta_update(i, p, g, square_avg, acc_delta, neg_lr, rho, one_minus_rho, eps, weight_decay, maximize):
    """Adadelta for element ``i``: the step is ``sqrt(acc_delta + eps) / sqrt(square_avg + eps) * grad``."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        d = d + weight_decay * p[i]
    sq = square_avg[i] * rho + one_minus_rho * d * d  # square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
    square_avg[i] = sq
    std = math.sqrt(sq + eps)  # square_avg.add(eps).sqrt_()
    delta = math.sqrt(acc_delta[i] + eps) / std * d  # acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
    acc_delta[i] = acc_delta[i] * rho + one_minus_rho * delta * delta
    p[i] = p[i] + neg_lr * delta  # param.add_(delta, alpha=-lr)


def adamax_update(i, p, g, exp_avg, exp_inf, neg_clr, one_minus_beta1, beta1, beta2, eps, weight_decay, maximize):
    """Adamax for element ``i``: the second moment is the decayed maximum ``max(beta2 * u, |grad| + eps)``, a nan
    on either side winning as in ``torch.maximum``."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        d = d + weight_decay * p[i]
    m = lerp(exp_avg[i], d, one_minus_beta1, beta1)  # exp_avg.lerp_(grad, 1 - beta1)
    exp_avg[i] = m
    a = exp_inf[i] * beta2
    b = abs(d) + eps
    u = b if b > a or b != b else a
    exp_inf[i] = u
    p[i] = p[i] + neg_clr * m / u  # param.addcdiv_(exp_avg, exp_inf, value=-clr)


def nadam_update(i, p, g, m, v, one_minus_beta1, beta1, beta2, one_minus_beta2, bias_correction2, eps, weight_decay,
                 decay_factor, decoupled, grad_coef, avg_coef, maximize):  # fmt: skip
    """NAdam for element ``i``: two ``addcdiv`` steps, the gradient's (``grad_coef = -lr (1 - mu) / (1 - prod mu)``)
    then the momentum's (``avg_coef = -lr mu_next / (1 - prod mu * mu_next)``), as torch takes them."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        if decoupled:
            p[i] = p[i] * decay_factor  # param.mul_(1 - lr * weight_decay)
        else:
            d = d + weight_decay * p[i]
    mi = lerp(m[i], d, one_minus_beta1, beta1)
    m[i] = mi
    vi = v[i] * beta2 + one_minus_beta2 * d * d
    v[i] = vi
    denom = math.sqrt(vi / bias_correction2) + eps  # exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
    p[i] = p[i] + grad_coef * d / denom
    p[i] = p[i] + avg_coef * mi / denom


def radam_update(i, p, g, m, v, one_minus_beta1, beta1, beta2, one_minus_beta2, bias_correction1, lr, bc2_sqrt,
                 rect, eps, weight_decay, decay_factor, decoupled, rectified, maximize):  # fmt: skip
    """RAdam for element ``i``: the bias-corrected momentum times ``lr``, and while the variance is tractable
    (``rectified``: torch's ``rho_t > 5``) times the adaptive rate ``sqrt(bc2) / (sqrt(v) + eps)`` and ``rect``."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        if decoupled:
            p[i] = p[i] * decay_factor
        else:
            d = d + weight_decay * p[i]
    mi = lerp(m[i], d, one_minus_beta1, beta1)
    m[i] = mi
    vi = v[i] * beta2 + one_minus_beta2 * d * d
    v[i] = vi
    t = mi / bias_correction1 * lr
    if rectified:
        t = t * (bc2_sqrt / (math.sqrt(vi) + eps)) * rect
    p[i] = p[i] - t  # param.add_(update, alpha=-1.0)


def asgd_update(i, p, g, ax, decay, neg_eta, mu, weight_decay, maximize):
    """ASGD for element ``i``: a decayed SGD step (``decay = 1 - lambd * eta``), then the running average ``ax``
    moves toward the parameter by ``mu`` (``ax`` is the parameter itself while ``mu == 1``)."""
    d = -g[i] if maximize else g[i]
    if weight_decay != 0:
        d = d + weight_decay * p[i]
    pi = p[i] * decay
    pi = pi + neg_eta * d  # param.add_(grad, alpha=-eta)
    p[i] = pi
    if mu != 1:
        ax[i] = ax[i] + (pi - ax[i]) * mu  # ax.add_(param.sub(ax).mul_(mu))
    else:
        ax[i] = pi


def rprop_update(i, p, g, prev, step_size, etaminus, etaplus, one, step_size_min, step_size_max, maximize):
    """Rprop for element ``i``: the step size grows by ``etaplus`` while the gradient keeps its sign and shrinks by
    ``etaminus`` when it flips (that gradient then counts as zero); the parameter moves by the step size against
    the gradient's sign. A nan gradient gives a nan step size, as torch's sign and clamp do."""
    d = -g[i] if maximize else g[i]
    s = d * prev[i]
    if s > 0:
        factor = etaplus
    elif s < 0:
        factor = etaminus
    elif s == 0:
        factor = one
    else:
        factor = s  # nan
    size = step_size[i] * factor
    if size < step_size_min:
        size = step_size_min
    elif size > step_size_max:
        size = step_size_max
    step_size[i] = size
    if factor == etaminus:
        d = one - one  # grad[sign.eq(etaminus)] = 0
    if d > 0:
        p[i] = p[i] - size
    elif d < 0:
        p[i] = p[i] + size
    elif d != d:
        p[i] = p[i] + d
    prev[i] = d
