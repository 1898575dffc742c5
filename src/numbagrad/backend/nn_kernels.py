"""Hand-written CPU kernels of ``nn.functional``: layer norm, im2col/col2im, max/avg/adaptive pooling.

Module-level ``@njit(cache=True)`` functions, served from Numba's disk cache in later processes (the table's
generator writes elementwise kernels into the cache directory instead; these loops are not elementwise, and the
day that generator takes hand-written loops they can move there). Imported lazily by ``backend/cpu.py``'s
primitives: importing this module starts Numba.

Every kernel accumulates in float64 whatever the storage dtype, and loops in the order the memory is laid out
(C-contiguous arrays), so one pass over the data does each job.
"""

from __future__ import annotations

import math

from numba import njit

_OPTS = {"cache": True, "nogil": True, "error_model": "numpy"}


# --- layer norm over the last axis of a (rows, n) array ------------------------------------------------------
@njit(**_OPTS)
def layer_norm_forward(x, weight, bias, eps, out, mean, rstd, affine):
    rows, n = x.shape
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += x[r, j]
        m = s / n
        v = 0.0
        for j in range(n):
            d = x[r, j] - m
            v += d * d
        inv = 1.0 / math.sqrt(v / n + eps)
        mean[r] = m
        rstd[r] = inv
        if affine:
            for j in range(n):
                out[r, j] = (x[r, j] - m) * inv * weight[j] + bias[j]
        else:
            for j in range(n):
                out[r, j] = (x[r, j] - m) * inv


@njit(**_OPTS)
def layer_norm_backward(g, x, mean, rstd, weight, affine, gx, gw, gb, need_x, need_wb):
    """``gx`` (rows, n) and the column sums ``gw`` (of ``g * xhat``) and ``gb`` (of ``g``), float64."""
    rows, n = x.shape
    for j in range(n):
        gw[j] = 0.0
        gb[j] = 0.0
    for r in range(rows):
        m = mean[r]
        inv = rstd[r]
        a = 0.0  # sum of g * w
        b = 0.0  # sum of g * w * xhat
        for j in range(n):
            xhat = (x[r, j] - m) * inv
            gj = g[r, j]
            if need_wb:
                gw[j] += gj * xhat
                gb[j] += gj
            if affine:
                gj = gj * weight[j]
            a += gj
            b += gj * xhat
        if need_x:
            a /= n
            b /= n
            for j in range(n):
                xhat = (x[r, j] - m) * inv
                gj = g[r, j] * weight[j] if affine else g[r, j]
                gx[r, j] = inv * (gj - a - xhat * b)


# --- convolution: columns of (N, C, H, W) -------------------------------------------------------------------
@njit(**_OPTS)
def im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
    """``cols[n, (c, i, j), (y, z)] = x[n, c, y*sh - ph + i*dh, z*sw - pw + j*dw]`` (0 outside)."""
    n_, c_, h_, w_ = x.shape
    for n in range(n_):
        for c in range(c_):
            for i in range(kh):
                for j in range(kw):
                    row = (c * kh + i) * kw + j
                    for y in range(oh):
                        h = y * sh - ph + i * dh
                        base = y * ow
                        if h < 0 or h >= h_:
                            for z in range(ow):
                                cols[n, row, base + z] = 0.0
                            continue
                        for z in range(ow):
                            w = z * sw - pw + j * dw
                            if w >= 0 and w < w_:
                                cols[n, row, base + z] = x[n, c, h, w]
                            else:
                                cols[n, row, base + z] = 0.0


@njit(**_OPTS)
def col2im(cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, x):
    """The adjoint of ``im2col``: ``x`` (zeroed here) receives the sum of the columns that read each element."""
    n_, c_, h_, w_ = x.shape
    for n in range(n_):
        for c in range(c_):
            for h in range(h_):
                for w in range(w_):
                    x[n, c, h, w] = 0.0
            for i in range(kh):
                for j in range(kw):
                    row = (c * kh + i) * kw + j
                    for y in range(oh):
                        h = y * sh - ph + i * dh
                        if h < 0 or h >= h_:
                            continue
                        base = y * ow
                        for z in range(ow):
                            w = z * sw - pw + j * dw
                            if w >= 0 and w < w_:
                                x[n, c, h, w] += cols[n, row, base + z]


# --- pooling over (P, H, W) planes ---------------------------------------------------------------------------
@njit(**_OPTS)
def max_pool2d_forward(x, kh, kw, sh, sw, ph, pw, dh, dw, out, indices):
    """torch's CPU max pool: the first maximum of each window wins, NaN propagates; indices are ``h * W + w``."""
    planes, h_, w_ = x.shape
    _, oh, ow = out.shape
    for p in range(planes):
        for y in range(oh):
            h0 = y * sh - ph
            h1 = min(h0 + (kh - 1) * dh + 1, h_)
            while h0 < 0:
                h0 += dh
            for z in range(ow):
                w0 = z * sw - pw
                w1 = min(w0 + (kw - 1) * dw + 1, w_)
                while w0 < 0:
                    w0 += dw
                best = h0 * w_ + w0
                value = -math.inf
                for h in range(h0, h1, dh):
                    for w in range(w0, w1, dw):
                        v = x[p, h, w]
                        if v > value or v != v:
                            value = v
                            best = h * w_ + w
                out[p, y, z] = value
                indices[p, y, z] = best


@njit(**_OPTS)
def max_pool2d_backward(g, indices, gx):
    planes, oh, ow = g.shape
    w_ = gx.shape[2]
    for p in range(planes):
        for h in range(gx.shape[1]):
            for w in range(w_):
                gx[p, h, w] = 0.0
        for y in range(oh):
            for z in range(ow):
                k = indices[p, y, z]
                gx[p, k // w_, k % w_] += g[p, y, z]


@njit(**_OPTS)
def avg_pool2d(x, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, out, backward):
    """Forward (``backward=False``: ``out`` from ``x``) or backward (``x`` is the output gradient, ``out`` the
    input gradient) of torch's CPU average pool; ``divisor`` > 0 overrides the window count."""
    if backward:
        planes, h_, w_ = out.shape
        _, oh, ow = x.shape
        for p in range(planes):
            for h in range(h_):
                for w in range(w_):
                    out[p, h, w] = 0.0
    else:
        planes, h_, w_ = x.shape
        _, oh, ow = out.shape
    for p in range(planes):
        for y in range(oh):
            h0 = y * sh - ph
            h1 = min(h0 + kh, h_ + ph)
            for z in range(ow):
                w0 = z * sw - pw
                w1 = min(w0 + kw, w_ + pw)
                size = (h1 - h0) * (w1 - w0)
                a0, a1, b0, b1 = max(h0, 0), min(h1, h_), max(w0, 0), min(w1, w_)
                if a0 >= a1 or b0 >= b1:
                    if not backward:
                        out[p, y, z] = 0.0
                    continue
                if divisor > 0:
                    factor = divisor
                elif count_include_pad:
                    factor = size
                else:
                    factor = (a1 - a0) * (b1 - b0)
                if backward:
                    share = x[p, y, z] / factor
                    for h in range(a0, a1):
                        for w in range(b0, b1):
                            out[p, h, w] += share
                else:
                    s = 0.0
                    for h in range(a0, a1):
                        for w in range(b0, b1):
                            s += x[p, h, w]
                    out[p, y, z] = s / factor


@njit(**_OPTS)
def adaptive_avg_pool2d(x, out, backward):
    """torch's adaptive windows: ``[floor(i * H / OH), ceil((i + 1) * H / OH))``; forward, or backward with ``x``
    the output gradient and ``out`` the input gradient."""
    if backward:
        planes, h_, w_ = out.shape
        _, oh, ow = x.shape
        for p in range(planes):
            for h in range(h_):
                for w in range(w_):
                    out[p, h, w] = 0.0
    else:
        planes, h_, w_ = x.shape
        _, oh, ow = out.shape
    for p in range(planes):
        for y in range(oh):
            h0 = (y * h_) // oh
            h1 = -((-(y + 1) * h_) // oh)
            for z in range(ow):
                w0 = (z * w_) // ow
                w1 = -((-(z + 1) * w_) // ow)
                count = (h1 - h0) * (w1 - w0)
                if backward:
                    share = x[p, y, z] / count
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            out[p, h, w] += share
                else:
                    s = 0.0
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            s += x[p, h, w]
                    out[p, y, z] = s / count


# --- cross entropy with label smoothing over (N, C) logits ---------------------------------------------------
@njit(**_OPTS)
def cross_entropy_forward(x, target, weight, weighted, smoothing, ignore_index, probs, losses, counts):
    """Per-sample ``(1 - s) * w[t] * nll + s / C * sum_c w[c] * (-log p_c)`` (0 for ignored samples), with the
    softmax kept in ``probs`` for backward and each sample's weight ``w[t]`` (0 when ignored) in ``counts``."""
    n, c = x.shape
    wsum = 0.0
    if weighted:
        for k in range(c):
            wsum += weight[k]
    else:
        wsum = c
    for i in range(n):
        t = target[i]
        if t == ignore_index:
            losses[i] = 0.0
            counts[i] = 0.0
            for k in range(c):
                probs[i, k] = 0.0
            continue
        m = -math.inf
        for k in range(c):
            if x[i, k] > m:
                m = x[i, k]
        s = 0.0
        for k in range(c):
            e = math.exp(x[i, k] - m)
            probs[i, k] = e
            s += e
        lse = m + math.log(s)
        inv = 1.0 / s
        smooth = 0.0
        for k in range(c):
            probs[i, k] *= inv
            if smoothing != 0.0:
                if weighted:
                    smooth += weight[k] * (lse - x[i, k])
                else:
                    smooth += lse - x[i, k]
        wt = weight[t] if weighted else 1.0
        counts[i] = wt
        losses[i] = (1.0 - smoothing) * wt * (lse - x[i, t]) + smoothing / c * smooth


@njit(**_OPTS)
def cross_entropy_backward(probs, target, weight, weighted, smoothing, ignore_index, scale, out):
    """``out[i] = scale[i] * d loss_i / d x_i`` (``scale`` per sample: the incoming gradient over the mean's
    denominator)."""
    n, c = probs.shape
    wsum = 0.0
    if weighted:
        for k in range(c):
            wsum += weight[k]
    else:
        wsum = c
    a = smoothing / c
    for i in range(n):
        t = target[i]
        if t == ignore_index:
            for k in range(c):
                out[i, k] = 0.0
            continue
        wt = weight[t] if weighted else 1.0
        coef = (1.0 - smoothing) * wt + a * wsum  # every p_k's factor
        sc = scale[i]
        for k in range(c):
            out[i, k] = sc * coef * probs[i, k]
        if smoothing != 0.0:
            for k in range(c):
                out[i, k] -= sc * a * (weight[k] if weighted else 1.0)
        out[i, t] -= sc * (1.0 - smoothing) * wt
