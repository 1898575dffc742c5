"""Hand-written CPU kernels of ``nn.functional``: layer norm, softmax, cross entropy, im2col/im2row/col2im,
max/avg/adaptive pooling; and ``topk``'s selection, the running sums and products of ``cumsum``/``cumprod``, and
the row additions of ``index_add`` (embedding and indexing backwards).

Module-level ``@njit(cache=True)`` functions, served from Numba's disk cache in later processes (the table's
generator writes elementwise kernels into the cache directory instead; these loops are not elementwise, and the
day that generator takes hand-written loops they can move there). Imported lazily by ``backend/cpu.py``'s
primitives: importing this module starts Numba.

Every kernel accumulates in float64 whatever the storage dtype, and loops in the order the memory is laid out
(C-contiguous arrays), so one pass over the data does each job.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import codegen

_OPTS = {"cache": True, "nogil": True, "error_model": "numpy"}
#: Reductions may be reordered (and multiply-adds fused), so LLVM vectorizes the row sums: 4x faster layer norm
#: and softmax; the sums stay in float64, the results within float32 rounding of the sequential ones.
_REDUCING = {**_OPTS, "fastmath": {"reassoc", "contract", "nsz"}}


# --- layer norm over the last axis of a (rows, n) array ------------------------------------------------------
@njit(**_REDUCING)
def layer_norm_forward(x, weight, bias, eps, out, mean, rstd, affine):
    rows, n = x.shape
    typed = mean[:1].copy()  # scalars of the data's dtype (float32 data stays float32: vectorized, no conversions)
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += x[r, j]
        typed[0] = s / n
        m = typed[0]
        v = 0.0
        for j in range(n):
            d = x[r, j] - m
            v += d * d
        typed[0] = 1.0 / math.sqrt(v / n + eps)
        inv = typed[0]
        mean[r] = m
        rstd[r] = inv
        if affine:
            for j in range(n):
                out[r, j] = (x[r, j] - m) * inv * weight[j] + bias[j]
        else:
            for j in range(n):
                out[r, j] = (x[r, j] - m) * inv


#: Rows ``residual_layer_norm_forward`` sums before normalizing them: they stay in the first-level cache (16 rows of
#: 128 float32 features: 8 KiB) while the norm reads them.
_RESIDUAL_BLOCK = 16


@njit(**_REDUCING)
def residual_layer_norm_forward(a, v, c, weight, bias, eps, s, out, mean, rstd, affine, has_c):
    """``s = a + (v + c)`` (``c`` per column, when ``has_c``), then ``layer_norm_forward`` of ``s``, a block of rows
    at a time: each block is normalized right after it is summed, while it is in cache. Fast-math may add the
    three as ``(a + v) + c``: within one rounding of the unfused ops' sum."""
    rows, n = a.shape
    for r0 in range(0, rows, _RESIDUAL_BLOCK):
        r1 = min(r0 + _RESIDUAL_BLOCK, rows)
        for r in range(r0, r1):
            if has_c:
                for j in range(n):
                    s[r, j] = a[r, j] + (v[r, j] + c[j])
            else:
                for j in range(n):
                    s[r, j] = a[r, j] + v[r, j]
        layer_norm_forward(s[r0:r1], weight, bias, eps, out[r0:r1], mean[r0:r1], rstd[r0:r1], affine)


@njit(**_REDUCING)
def layer_norm_backward(g, x, mean, rstd, weight, gx, gw, gb, need_x):
    """``gx`` (rows, n) and the column sums ``gw`` (of ``g * xhat``) and ``gb`` (of ``g``), in the data's dtype;
    the row sums in float64. ``weight`` has n entries (ones without an affine weight): no branch in the loops."""
    rows, n = x.shape
    typed = mean[:1].copy()
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
            gw[j] += gj * xhat
            gb[j] += gj
            gj = gj * weight[j]
            a += gj
            b += gj * xhat
        if need_x:
            typed[0] = a / n
            a_mean = typed[0]
            typed[0] = b / n
            b_mean = typed[0]
            for j in range(n):
                xhat = (x[r, j] - m) * inv
                gx[r, j] = inv * (g[r, j] * weight[j] - a_mean - xhat * b_mean)


# --- batch norm over the channels of an (N, C, S) array ----------------------------------------------------------
# Two walks over (N, C, S) data: its planes (any strided view, each channel's S positions innermost), or, where the
# channels lie side by side in memory (a transposed (N, L, C) sequence, a channels-last image, an (N, C) batch),
# its row-major (N * S, C) rows (``cpu._channel_rows``: a view, or a copy), channels innermost: LLVM vectorizes
# those across the channels, where a 3-d view's unknown strides leave it element by element.
@njit(**_REDUCING)
def _channel_sums(x, out):
    """``out[c]`` = the float64 sum of channel c over the N and S axes of the planes ``x``."""
    n_, c_, s_ = x.shape
    out[:] = 0.0
    for n in range(n_):
        for c in range(c_):
            s = 0.0
            for j in range(s_):
                s += x[n, c, j]
            out[c] += s


@njit(**_REDUCING)
def _row_sums(rows, out):
    """``out[c]`` = the float64 sum of column c of the rows ``rows``."""
    out[:] = 0.0
    for r in range(rows.shape[0]):
        for c in range(rows.shape[1]):
            out[c] += rows[r, c]


@njit(**_REDUCING)
def batch_norm_forward(x, rows, weight, bias, eps, training, momentum, running_mean, running_var, mean, var, rstd,
                       out):  # fmt: skip
    """Batch norm of (N, C, S) ``x`` into ``out``, as torch's CPU kernel computes it: in training each channel's
    mean and biased variance (float64 ``mean``, ``var``, the centered squares' mean: two passes) are computed,
    in eval ``mean`` and ``var`` hold the running statistics. ``rstd = 1 / sqrt(var + eps)``, and the output is
    ``x * alpha + beta`` with ``alpha = rstd * weight``, ``beta = bias - mean * alpha`` in the data's dtype.
    ``weight`` and ``bias`` are length-C arrays or empty ones (none). In training a non-empty ``running_mean``
    and ``running_var`` are updated in place, ``momentum`` the batch's weight (the variance unbiased).

    ``rows``: ``x``'s (N * S, C) rows (``cpu._channel_rows``), which the passes then walk, or an empty array: they
    walk ``x``'s planes."""
    n_, c_, s_ = x.shape
    count = n_ * s_
    if training:
        if rows.size:
            _row_sums(rows, mean)
        else:
            _channel_sums(x, mean)
        for c in range(c_):
            mean[c] /= count
        var[:] = 0.0
        if rows.size:
            for r in range(count):
                for c in range(c_):
                    d = rows[r, c] - mean[c]
                    var[c] += d * d
        else:
            for n in range(n_):
                for c in range(c_):
                    m = mean[c]
                    v = 0.0
                    for j in range(s_):
                        d = x[n, c, j] - m
                        v += d * d
                    var[c] += v
        for c in range(c_):
            var[c] /= count
        unbias = count / max(count - 1, 1)
        for c in range(running_mean.size):
            running_mean[c] = running_mean[c] * (1.0 - momentum) + mean[c] * momentum
        for c in range(running_var.size):
            running_var[c] = running_var[c] * (1.0 - momentum) + var[c] * unbias * momentum
    scale = np.empty(c_, out.dtype)
    shift = np.empty(c_, out.dtype)
    for c in range(c_):
        r = 1.0 / math.sqrt(var[c] + eps)
        rstd[c] = r
        a = r * weight[c] if weight.size else r
        scale[c] = a
        shift[c] = (bias[c] if bias.size else 0.0) - mean[c] * a
    if rows.size:
        for n in range(n_):
            for j in range(s_):
                r = n * s_ + j
                for c in range(c_):
                    out[n, c, j] = rows[r, c] * scale[c] + shift[c]
    else:
        for n in range(n_):
            for c in range(c_):
                a = scale[c]
                b = shift[c]
                for j in range(s_):
                    out[n, c, j] = x[n, c, j] * a + b


@njit(**_REDUCING)
def batch_norm_backward(g, x, g_rows, x_rows, mean, rstd, weight, training, sum_g, dot, gx):
    """Per channel the float64 sums of ``g`` and of ``g * (x - mean)`` (``sum_g``, ``dot``: the bias and weight
    gradients' sums), then, when ``gx`` is not empty, the input gradient into it: in training torch's
    ``((g - sum_g / count) - (x - mean) * dot * rstd^2 / count) * rstd * weight``, in eval ``g * rstd * weight``.
    ``weight`` is a length-C array or an empty one (none). ``g_rows`` and ``x_rows``: both arrays' rows
    (``batch_norm_forward``'s ``rows``), walked instead of their planes, or empty arrays."""
    n_, c_, s_ = x.shape
    count = max(n_ * s_, 1)
    by_rows = x_rows.size > 0
    dot[:] = 0.0
    if by_rows:
        sum_g[:] = 0.0
        for r in range(n_ * s_):
            for c in range(c_):
                sum_g[c] += g_rows[r, c]
                dot[c] += g_rows[r, c] * (x_rows[r, c] - mean[c])
    else:
        _channel_sums(g, sum_g)
        for n in range(n_):
            for c in range(c_):
                m = mean[c]
                b = 0.0
                for j in range(s_):
                    b += g[n, c, j] * (x[n, c, j] - m)
                dot[c] += b
    if gx.size == 0:
        return
    scale = np.empty(c_, gx.dtype)
    k = np.empty(c_, gx.dtype)
    shift = np.empty(c_, gx.dtype)
    for c in range(c_):
        r = rstd[c]
        a = r * weight[c] if weight.size else r
        scale[c] = a
        k[c] = dot[c] * r * r / count if training else 0.0
        shift[c] = sum_g[c] / count if training else 0.0
    if by_rows:
        for n in range(n_):
            for j in range(s_):
                r = n * s_ + j
                for c in range(c_):
                    gx[n, c, j] = (g_rows[r, c] - shift[c] - (x_rows[r, c] - mean[c]) * k[c]) * scale[c]
    else:
        for n in range(n_):
            for c in range(c_):
                m = mean[c]
                kc = k[c]
                gm = shift[c]
                sc = scale[c]
                for j in range(s_):
                    gx[n, c, j] = (g[n, c, j] - gm - (x[n, c, j] - m) * kc) * sc


# --- convolution: columns of (N, C, H, W) -------------------------------------------------------------------
#: The shortest output row that ``im2col``/``col2im`` walk row by row at stride 1: shorter rows, and strided ones,
#: go through a table of each column entry's source. Measured at 1 thread: the DCGAN's (16, 16, 8, 8) 4x4 stride-2
#: convolution's im2col 38 us against 80 row by row (col2im 26 against 96), its (16, 32, 4, 4) one's 6 against 44;
#: the U-Net's stride-1 rows of 16 and 32 run 2-4x faster row by row, rows of 8 alike either way.
_ROW_WALK = 8


@njit(**_OPTS)
def _column_sources(h_, w_, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """For each entry ``((i, j), (y, z))`` of one channel's columns, the flat index ``h * W + w`` into its (H, W)
    plane that it reads, or -1 where it reads padding."""
    table = np.empty(kh * kw * oh * ow, np.int64)
    t = 0
    for i in range(kh):
        for j in range(kw):
            for y in range(oh):
                h = y * sh - ph + i * dh
                for z in range(ow):
                    w = z * sw - pw + j * dw
                    table[t] = h * w_ + w if 0 <= h < h_ and 0 <= w < w_ else -1
                    t += 1
    return table


@njit(**_OPTS)
def im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
    """``cols[n, (c, i, j), (y, z)] = x[n, c, y*sh - ph + i*dh, z*sw - pw + j*dw]`` (0 outside); both arrays
    C-contiguous. Short or strided output rows read through ``_column_sources`` (one flat loop per channel), long
    stride-1 rows row by row (their copies vectorize)."""
    if sw > 1 or ow < _ROW_WALK:
        _im2col_table(x, _column_sources(*x.shape[2:], kh, kw, sh, sw, ph, pw, dh, dw, oh, ow), cols)
    else:
        _im2col_rows(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols)


@njit(**_OPTS)
def _im2col_table(x, table, cols):
    n_, c_, h_, w_ = x.shape
    m = table.size
    planes = x.reshape(n_, c_, h_ * w_)
    out = cols.reshape(n_, c_, m)
    for n in range(n_):
        for c in range(c_):
            for t in range(m):
                k = table[t]
                v = planes[n, c, max(k, 0)]
                out[n, c, t] = v if k >= 0 else 0.0


@njit(**_OPTS)
def _im2col_rows(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
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
def im2row(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, rows):
    """``im2col``'s columns transposed per sample: ``rows[n, (y, z), (c, i, j)]``, both arrays C-contiguous, so
    that a chunk's (samples * positions, C * kh * kw) rows meet the output gradient in one product (the weight's
    gradient). Through ``_column_sources``; each row's channels read the same taps of their planes."""
    table = _column_sources(*x.shape[2:], kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    n_, c_, h_, w_ = x.shape
    length, taps = oh * ow, kh * kw
    planes = x.reshape(n_, c_, h_ * w_)
    for n in range(n_):
        for t in range(length):
            for c in range(c_):
                base = c * taps
                for q in range(taps):
                    k = table[q * length + t]
                    v = planes[n, c, max(k, 0)]
                    rows[n, t, base + q] = v if k >= 0 else 0.0


@njit(**_OPTS)
def col2im(cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, x):
    """The adjoint of ``im2col``: ``x`` (zeroed here) receives the sum of the columns that read each element; both
    arrays C-contiguous, walked as ``im2col`` walks them."""
    if sw > 1 or ow < _ROW_WALK:
        _col2im_table(cols, _column_sources(*x.shape[2:], kh, kw, sh, sw, ph, pw, dh, dw, oh, ow), x)
    else:
        _col2im_rows(cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, x)


@njit(**_OPTS)
def _col2im_table(cols, table, x):
    n_, c_, h_, w_ = x.shape
    m = table.size
    planes = x.reshape(n_, c_, h_ * w_)
    entries = cols.reshape(n_, c_, m)
    for n in range(n_):
        for c in range(c_):
            for s in range(h_ * w_):
                planes[n, c, s] = 0.0
            for t in range(m):
                k = table[t]
                if k >= 0:
                    planes[n, c, k] += entries[n, c, t]


@njit(**_OPTS)
def _col2im_rows(cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, x):
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
def _window_spans(n_out, stride, pad, k, d, size):
    """Per output position along one axis: its window's first input index and the range ``[lo, hi)`` of its taps
    inside the input. Computed once per call, so that the windows' loops divide nothing."""
    first = np.empty(n_out, np.int64)
    lo = np.empty(n_out, np.int64)
    hi = np.empty(n_out, np.int64)
    for y in range(n_out):
        s = y * stride - pad
        a = 0 if s >= 0 else (-s + d - 1) // d
        b = min(k, (size - 1 - s) // d + 1) if s < size else 0
        first[y], lo[y], hi[y] = s, a, max(a, b)
    return first, lo, hi


@njit(**_OPTS)
def max_pool2d_forward(x, kh, kw, sh, sw, ph, pw, dh, dw, out, indices):
    """torch's CPU max pool: the first maximum of each window wins, NaN propagates; indices are ``h * W + w``.

    A window wholly inside its plane walks a table of its taps' flat offsets, starting from its first tap (the
    same choice as starting from -inf), its comparisons free of the NaN test: a window holding a NaN is walked a
    second time for its last NaN. A clipped window walks its valid taps. Both visit the taps in (i, j) order. At
    the cnn's (4096, 24, 24) 2x2 pool: 2.8 ms against 6.8 for one loop nest with clipping per window."""
    planes, h_, w_ = x.shape
    _, oh, ow = out.shape
    hs, ilo, ihi = _window_spans(oh, sh, ph, kh, dh, h_)
    ws, jlo, jhi = _window_spans(ow, sw, pw, kw, dw, w_)
    taps = np.empty(kh * kw, np.int64)
    for i in range(kh):
        for j in range(kw):
            taps[i * kw + j] = i * dh * w_ + j * dw
    xf = x.reshape(planes, h_ * w_)
    for p in range(planes):
        plane = xf[p]
        for y in range(oh):
            h0, i0, i1 = hs[y], ilo[y], ihi[y]
            for z in range(ow):
                w0, j0, j1 = ws[z], jlo[z], jhi[z]
                if i0 == 0 and i1 == kh and j0 == 0 and j1 == kw:
                    base = h0 * w_ + w0
                    best = base
                    value = plane[base]
                    nan = value != value
                    for t in range(1, kh * kw):
                        k = base + taps[t]
                        v = plane[k]
                        nan |= v != v  # (apart from the comparison chain: a NaN window is walked again)
                        if v > value:
                            value = v
                            best = k
                    if nan:
                        for t in range(kh * kw):
                            k = base + taps[t]
                            if plane[k] != plane[k]:
                                value = plane[k]
                                best = k
                else:
                    best = (h0 + i0 * dh) * w_ + w0 + j0 * dw
                    value = -math.inf
                    for i in range(i0, i1):
                        row = (h0 + i * dh) * w_ + w0
                        for j in range(j0, j1):
                            v = plane[row + j * dw]
                            if v > value or v != v:
                                value = v
                                best = row + j * dw
                out[p, y, z] = value
                indices[p, y, z] = best


@njit(**_OPTS)
def max_pool2d_backward(g, indices, gx):
    """Each output gradient added at its maximum (all three arrays C-contiguous). A window with no input element
    in it (dilation over padding) holds an index past its plane, as torch's does; it receives nothing (torch's
    kernel would write past it)."""
    planes, oh, ow = g.shape
    size = gx.shape[1] * gx.shape[2]
    flat = gx.reshape(planes, size)  # (the flat index needs no division by the width: cnn's pool 1.6 ms to 0.4)
    g2 = g.reshape(planes, oh * ow)
    i2 = indices.reshape(planes, oh * ow)
    for p in range(planes):
        for s in range(size):
            flat[p, s] = 0.0
        for t in range(oh * ow):
            k = i2[p, t]
            if k < size:
                flat[p, k] += g2[p, t]


@njit(**_OPTS, inline="always")
def _pool_shapes(x, out, backward):
    """(planes, input height, input width, output height, output width) of an average pool; backward (``x`` the
    output gradient, ``out`` the input gradient) zeroes ``out`` first, since windows add into it."""
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
    return planes, h_, w_, oh, ow


@njit(**_OPTS, inline="always")
def _average_window(x, out, p, y, z, h0, h1, w0, w1, factor, backward):
    """One window ``[h0, h1) x [w0, w1)`` of plane ``p``: its sum over ``factor`` into ``out[p, y, z]``, or
    (backward) ``x[p, y, z] / factor`` added to each of its elements."""
    if backward:
        share = x[p, y, z] / factor
        for h in range(h0, h1):
            for w in range(w0, w1):
                out[p, h, w] += share
    else:
        s = 0.0
        for h in range(h0, h1):
            for w in range(w0, w1):
                s += x[p, h, w]
        out[p, y, z] = s / factor


@njit(**_OPTS)
def avg_pool2d(x, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, out, backward):
    """Forward (``backward=False``: ``out`` from ``x``) or backward (``x`` is the output gradient, ``out`` the
    input gradient) of torch's CPU average pool; ``divisor`` > 0 overrides the window count."""
    planes, h_, w_, oh, ow = _pool_shapes(x, out, backward)
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
                _average_window(x, out, p, y, z, a0, a1, b0, b1, factor, backward)


@njit(**_OPTS)
def adaptive_avg_pool2d(x, out, backward):
    """torch's adaptive windows: ``[floor(i * H / OH), ceil((i + 1) * H / OH))``; forward, or backward with ``x``
    the output gradient and ``out`` the input gradient."""
    planes, h_, w_, oh, ow = _pool_shapes(x, out, backward)
    for p in range(planes):
        for y in range(oh):
            h0 = (y * h_) // oh
            h1 = -((-(y + 1) * h_) // oh)
            for z in range(ow):
                w0 = (z * w_) // ow
                w1 = -((-(z + 1) * w_) // ow)
                count = (h1 - h0) * (w1 - w0)
                _average_window(x, out, p, y, z, h0, h1, w0, w1, count, backward)


# --- cross entropy with label smoothing over (N, C) logits ---------------------------------------------------
# The exponentials come from numpy (SIMD; Numba's scalar exp is 5x slower without SVML): ``e = exp(x - max)``
# arrives here with its row sums, and these loops do the rest without a transcendental but one log per row.
@njit(**_OPTS, inline="always")
def _row_max(a, i, c):
    """The maximum of row ``i`` of ``a`` (``c >= 1`` elements), by four running maxima: a max reduction does not
    vectorize, four independent chains pipeline (3x faster)."""
    m0 = m1 = m2 = m3 = a[i, 0]
    k = 0
    while k + 4 <= c:
        v0, v1, v2, v3 = a[i, k], a[i, k + 1], a[i, k + 2], a[i, k + 3]
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
        k += 4
    while k < c:
        v0 = a[i, k]
        m0 = v0 if v0 > m0 else m0
        k += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    return m2 if m2 > m0 else m0


@njit(**_REDUCING)
def shift_by_row_max(x, out, rowmax):
    """``out = x - max(x, axis=1)`` (rows of at least one element), the maxima into ``rowmax``."""
    n, c = x.shape
    for i in range(n):
        m = _row_max(x, i, c)
        rowmax[i] = m
        for k in range(c):
            out[i, k] = x[i, k] - m


@njit(**_OPTS)
def scale_mask_shift_rows(s, scale, mask, out, rowmax, empty):
    """Attention scores into softmax's shifted input: ``v = mask + s * scale`` (the product rounded, then the sum,
    as two ops would; no fused multiply-add), each row less its maximum into ``out``, the maxima into ``rowmax``.
    Row ``i`` adds mask row ``i % len(mask)`` (a (L, S) mask repeats down the batch); an empty ``mask`` adds
    nothing. ``empty[i]``: row ``i`` is all ``-inf`` (no nan), so every key is masked out."""
    n, c = s.shape
    mrows = mask.shape[0]
    for i in range(n):
        if mrows:
            r = i % mrows
            for k in range(c):
                out[i, k] = mask[r, k] + s[i, k] * scale
        else:
            for k in range(c):
                out[i, k] = s[i, k] * scale
        m = _row_max(out, i, c)
        rowmax[i] = m
        blank = m == -math.inf
        if blank:
            for k in range(c):
                if out[i, k] != out[i, k]:
                    blank = False
        empty[i] = blank
        for k in range(c):
            out[i, k] = out[i, k] - m


@njit(**_REDUCING)
def softmax_rows(shifted, e, log):
    """Each row of ``e`` (``exp(shifted)``, ``shifted = x - rowmax``) divided by its float64 sum, in place; or, for
    ``log``, ``shifted - log(sum)`` (log_softmax)."""
    n, c = e.shape
    for i in range(n):
        total = 0.0
        for k in range(c):
            total += e[i, k]
        if log:
            lse = math.log(total)
            for k in range(c):
                e[i, k] = shifted[i, k] - lse
        else:
            for k in range(c):
                e[i, k] = e[i, k] / total


@njit(**_REDUCING)
def softmax_backward_rows(y, g, log, gx):
    """The gradient of softmax rows ``y`` for ``g``: ``y * (g - sum(g * y))``; for ``log``, ``y`` holds the
    exponentials of log_softmax's rows, and the gradient is ``g - y * sum(g)`` (sums in float64)."""
    n, c = y.shape
    for i in range(n):
        total = 0.0
        for k in range(c):
            total += g[i, k] if log else g[i, k] * y[i, k]
        if log:
            for k in range(c):
                gx[i, k] = g[i, k] - y[i, k] * total
        else:
            for k in range(c):
                gx[i, k] = y[i, k] * (g[i, k] - total)


@njit(**_OPTS, inline="always")
def _weight_sum(weight, weighted, c):
    """The class weights' sum (the smoothing term's), ``c`` where there are none."""
    if not weighted:
        return float(c)
    total = 0.0
    for k in range(c):
        total += weight[k]
    return total


@njit(**_OPTS, inline="always")
def _sample_loss(lse, x_t, w_t, smoothing, c, smooth):
    """One sample's (or position's) cross entropy: ``(1 - s) * w[t] * (lse - x_t) + s / C * smooth``, ``smooth``
    the smoothing term ``sum_c w[c] * (lse - x_c)``."""
    return (1.0 - smoothing) * w_t * (lse - x_t) + smoothing / c * smooth


# The (N, C, S) kernels below are cross entropy over an input with positions (an image's pixels, a sequence's
# steps), as torch's ``nll_loss2d``: each loop runs along the S positions, which lie next to each other in memory
# (and vectorize), a running value per position, so the logits are never moved to (N * S, C) rows.
@njit(**_OPTS)
def shift_by_plane_max(x, out, rowmax):
    """``out[n, :, s] = x[n, :, s] - max over the classes``, the maxima into ``rowmax[n, s]`` (C >= 1)."""
    n_, c_, s_ = x.shape
    for n in range(n_):
        m = rowmax[n]
        for s in range(s_):
            m[s] = x[n, 0, s]
        for c in range(1, c_):
            for s in range(s_):
                v = x[n, c, s]
                m[s] = v if v > m[s] else m[s]
        for c in range(c_):
            for s in range(s_):
                out[n, c, s] = x[n, c, s] - m[s]


@njit(**_REDUCING)
def normalize_planes(e, total):
    """``e`` (N, C, S) (``exp(x - rowmax)``) into the softmax over the classes in place, each position's float64
    sum of ``e`` into ``total[n, s]`` (its log is the caller's: numpy's vectorizes, a log per position here does
    not)."""
    n_, c_, s_ = e.shape
    inv = np.empty(s_, e.dtype)  # (the inverse in the data's dtype, as the row kernel scales)
    for n in range(n_):
        t = total[n]
        t[:] = 0.0
        for c in range(c_):
            for s in range(s_):
                t[s] += e[n, c, s]
        for s in range(s_):
            inv[s] = 1.0 / t[s]
        for c in range(c_):
            for s in range(s_):
                e[n, c, s] *= inv[s]


@njit(**_REDUCING)
def cross_entropy_planes_losses(x, lse, target, weight, weighted, smoothing, ignore_index, losses, counts, sums):
    """Cross entropy over (N, C, S) from each position's log-sum-exp ``lse[n, s]``: position ``n * S + s``'s loss
    ``(1 - s) * w[t] * (lse - x_t) + s / C * sum_c w[c] * (lse - x_c)`` and its counted weight ``w[t]`` (both 0
    where ``t`` is ``ignore_index``), and their float64 sums (as stored) into ``sums``."""
    n_, c_, s_ = x.shape
    wsum = _weight_sum(weight, weighted, c_)
    sums[0] = sums[1] = 0.0
    for n in range(n_):
        for s in range(s_):
            i = n * s_ + s
            t = target[i]
            if t == ignore_index:
                losses[i] = 0.0
                counts[i] = 0.0
                continue
            smooth = 0.0
            if smoothing != 0.0:
                xs = 0.0
                for c in range(c_):
                    xs += (weight[c] if weighted else 1.0) * x[n, c, s]
                smooth = wsum * lse[n, s] - xs
            w_t = weight[t] if weighted else 1.0
            counts[i] = w_t
            losses[i] = _sample_loss(lse[n, s], x[n, t, s], w_t, smoothing, c_, smooth)
            sums[0] += losses[i]
            sums[1] += counts[i]


@njit(**_REDUCING)
def cross_entropy_planes_backward(probs, target, weight, weighted, smoothing, ignore_index, scale, out):
    """``cross_entropy_backward`` over (N, C, S): position ``n * S + s``'s gradient into ``out[n, :, s]``."""
    n_, c_, s_ = probs.shape
    wsum = _weight_sum(weight, weighted, c_)
    a = smoothing / c_
    coef = np.empty(s_)  # (float64, as the row kernel's per-row values)
    shift = np.empty(s_)
    for n in range(n_):
        for s in range(s_):
            i = n * s_ + s
            t = target[i]
            if t == ignore_index:
                coef[s] = shift[s] = 0.0
                continue
            w_t = weight[t] if weighted else 1.0
            coef[s] = scale[i] * ((1.0 - smoothing) * w_t + a * wsum)
            shift[s] = scale[i] * a
        for c in range(c_):
            w_c = weight[c] if weighted else 1.0
            for s in range(s_):
                out[n, c, s] = coef[s] * probs[n, c, s] - shift[s] * w_c
        for s in range(s_):
            i = n * s_ + s
            t = target[i]
            if t == ignore_index:  # (exactly zero, whatever the probabilities hold)
                for c in range(c_):
                    out[n, c, s] = 0.0
            else:
                out[n, t, s] -= scale[i] * (1.0 - smoothing) * (weight[t] if weighted else 1.0)


@njit(**_REDUCING)
def cross_entropy_backward(probs, target, weight, weighted, smoothing, ignore_index, scale, out):
    """``out[i] = scale[i] * d loss_i / d x_i``: ``coef * p - (1 - s) * w[t] * onehot(t) - s / C * w`` with
    ``coef = (1 - s) * w[t] + s / C * sum(w)`` (``scale`` per sample: the incoming gradient over the mean's
    denominator; or one, for every sample, where the loss was reduced)."""
    n, c = probs.shape
    wsum = _weight_sum(weight, weighted, c)
    a = smoothing / c
    each = scale.shape[0] == n
    for i in range(n):
        t = target[i]
        if t == ignore_index:
            for k in range(c):
                out[i, k] = 0.0
            continue
        wt = weight[t] if weighted else 1.0
        sc = scale[i] if each else scale[0]
        coef = sc * ((1.0 - smoothing) * wt + a * wsum)
        if smoothing == 0.0:
            for k in range(c):
                out[i, k] = coef * probs[i, k]
        elif weighted:
            shift = sc * a
            for k in range(c):
                out[i, k] = coef * probs[i, k] - shift * weight[k]
        else:
            shift = sc * a
            for k in range(c):
                out[i, k] = coef * probs[i, k] - shift
        out[i, t] -= sc * (1.0 - smoothing) * wt


# --- topk ---------------------------------------------------------------------------------------------------------
@njit(**_OPTS, inline="always")
def _beats(v, w, largest):
    """Whether ``v`` comes before ``w`` in the sort (descending for ``largest``; nan the largest); ties do not."""
    if largest:
        return (v != v and w == w) or v > w
    return (w != w and v == v) or v < w


@njit(**_OPTS)
def topk_rows(a, k, largest, values, indices):
    """The ``k`` first elements of each row of ``a`` in a stable sort (descending for ``largest``, nan counted the
    largest): each element in index order displaces the kept ones it beats, so equal values keep their order.
    One pass per row, against a sort of the whole row (a float32 (256, 400) ``topk(5)``: 5.5 ms, torch 0.17)."""
    rows, n = a.shape
    for r in range(rows):
        kept = 0
        for j in range(n):
            v = a[r, j]
            pos = kept
            if kept == k:
                if not _beats(v, values[r, k - 1], largest):
                    continue
                pos = k - 1
            else:
                kept += 1
            while pos > 0 and _beats(v, values[r, pos - 1], largest):
                values[r, pos] = values[r, pos - 1]
                indices[r, pos] = indices[r, pos - 1]
                pos -= 1
            values[r, pos] = v
            indices[r, pos] = j


# --- cumsum / cumprod -----------------------------------------------------------------------------------------------
@njit(**_OPTS)
def cumulative(x, product, out):
    """Running sums (or products, for ``product``) along the middle axis of ``x`` viewed as ``(outer, n, inner)``
    into ``out``, accumulated in float64 as torch's CPU kernel does: one pass, where numpy converted to float64,
    scanned and converted back (float32 (256, 400) along dim 1: 500 us, torch 119)."""
    outer, n, inner = x.shape
    if inner == 1:  # along the last axis: the running value in a register
        for o in range(outer):
            v = 1.0 if product else 0.0
            for k in range(n):
                v = v * x[o, k, 0] if product else v + x[o, k, 0]
                out[o, k, 0] = v
        return
    acc = np.empty(inner, np.float64)
    for o in range(outer):
        for j in range(inner):
            acc[j] = 1.0 if product else 0.0
        for k in range(n):
            for j in range(inner):
                v = acc[j] * x[o, k, j] if product else acc[j] + x[o, k, j]
                acc[j] = v
                out[o, k, j] = v


# --- column sums -----------------------------------------------------------------------------------------------------
@njit(**_OPTS)
def sum_rows(a, out):
    """``out[j] = sum_i a[i, j]`` of a C-contiguous (R, C) ``a`` with C >= 2, in the storage dtype: zeros, then each
    row added in order, as numpy's ``a.sum(0)`` adds them (the same bits; for one column numpy sums pairwise)."""
    rows, cols = a.shape
    for j in range(cols):
        out[j] = 0.0
    for i in range(rows):
        for j in range(cols):
            out[j] += a[i, j]


# --- index_add ------------------------------------------------------------------------------------------------------
@njit(**_OPTS)
def add_at_rows(out, index, values):
    """``out[o, index[r], :] += values[o, r, :]`` for ``out`` viewed as ``(outer, n, inner)`` and ``values`` as
    ``(outer, len(index), inner)``; repeated indices add up, negative ones count from the end, and one out of range
    raises before anything is added. ``np.add.at`` took 2.4x torch's time for an ``index_select`` backward."""
    n = out.shape[1]
    rows = np.empty(index.shape[0], np.int64)
    for r in range(index.shape[0]):
        i = index[r]
        if i < 0:
            i += n
        if i < 0 or i >= n:
            raise IndexError("index out of range in self")
        rows[r] = i
    for o in range(out.shape[0]):
        for r in range(rows.shape[0]):
            i = rows[r]
            for j in range(out.shape[2]):
                out[o, i, j] += values[o, r, j]


# --- gather and scatter along a dim -------------------------------------------------------------------------------
# Arrays viewed as (outer, n, inner) around the dim, the index as (outer, m, inner) with its entries already checked
# to lie in [0, n): numpy's fancy indexing built a full index grid (gather of (64, 512) took 2.3x torch's time) and
# ``np.add.at`` ran per element through its ufunc loop (scatter_add 9.6x).
@njit(**_OPTS)
def gather_rows(a, index, out):
    """``out[o, r, j] = a[o, index[o, r, j], j]``."""
    for o in range(out.shape[0]):
        for r in range(out.shape[1]):
            for j in range(out.shape[2]):
                out[o, r, j] = a[o, index[o, r, j], j]


@njit(**_OPTS)
def scatter_rows(out, index, src, add):
    """``out[o, index[o, r, j], j] = src[o, r, j]`` (``+=`` when ``add``: repeated positions add up in order)."""
    for o in range(src.shape[0]):
        for r in range(src.shape[1]):
            for j in range(src.shape[2]):
                if add:
                    out[o, index[o, r, j], j] += src[o, r, j]
                else:
                    out[o, index[o, r, j], j] = src[o, r, j]


@njit(**_OPTS)
def triangle_rows(a, upper, diagonal, out):
    """``triu`` (``upper``) or ``tril`` of each (n, m) matrix of ``a`` (batch, n, m) into ``out``: each row
    copied on one side of the diagonal and zeroed on the other (numpy's ``tril`` built and applied a full mask:
    3.6x torch's time at (64, 512))."""
    n, m = a.shape[1], a.shape[2]
    for b in range(a.shape[0]):
        for i in range(n):
            edge = min(max(i + diagonal + (0 if upper else 1), 0), m)  # (the first column of the row's second part)
            for j in range(edge):
                out[b, i, j] = 0 if upper else a[b, i, j]
            for j in range(edge, m):
                out[b, i, j] = a[b, i, j] if upper else 0


@njit(**_OPTS)
def first_outside(index, low, high, skip, skipping):
    """The position of the first entry of the flat integer ``index`` outside ``[low, high)`` (other than ``skip``
    when ``skipping``), or -1. A first pass without an early exit vectorizes (numpy's ``min`` and ``max`` took two
    passes, 2.5 us for an embedding's 256 indices; a loop that stopped at the first bad entry, 27 us for 32768);
    only a bad entry makes a second pass look for where it is."""
    bad = 0
    for r in range(index.shape[0]):
        i = index[r]
        bad |= ((i < low) | (i >= high)) & ~(skipping & (i == skip))
    if not bad:
        return -1
    for r in range(index.shape[0]):
        i = index[r]
        if (i < low or i >= high) and not (skipping and i == skip):
            return r
    return -1


# --- bfloat16 storage <-> float32 -----------------------------------------------------------------------------
# bfloat16 is float32's upper half: widening shifts the 16 bits up; narrowing rounds the dropped half to nearest
# even (a nan becomes the quiet nan of its sign), as ml_dtypes' astype and torch do, in one vectorized pass (ml_dtypes'
# casts run per element through its ufunc loop: 2-5x slower at 1e5 elements). Both take flat uint16/uint32 views.
@njit(**_OPTS)
def bfloat16_to_float32(src, dst):
    for i in range(src.shape[0]):
        dst[i] = np.uint32(src[i]) << np.uint32(16)


@njit(**_OPTS)
def float32_to_bfloat16(src, dst):
    for i in range(src.shape[0]):
        u = src[i]
        rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
        nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        dst[i] = np.uint16(((u >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0)) if nan else rounded)


# --- where: one pass over flat operands -------------------------------------------------------------------------
# numpy's where over (32, 200) float32 takes 8 us (its multiply 1.2): it does not vectorize the select.
@njit(**_OPTS)
def select(cond, a, b, out):
    """``out[i] = a[i] if cond[i] else b[i]`` over flat arrays."""
    for i in range(out.shape[0]):
        x, y = a[i], b[i]  # (both read first: the choice is then a select, which vectorizes; not a branch)
        out[i] = x if cond[i] else y


@njit(**_OPTS)
def select_number(cond, a, number, number_where_true, out):
    """``out[i] = number if cond[i] else a[i]`` over flat arrays (``number_where_true``), else the other way
    round: where with one branch a number (``where(cond, g, 0.0)``, a where's gradient)."""
    for i in range(out.shape[0]):
        x = a[i]
        out[i] = number if cond[i] == number_where_true else x


# Compilations are logged, a damaged cache entry is rebuilt, and the warm-up record finds these kernels by module.
codegen.guard_dispatchers(globals(), "nn_kernels", None, origin=__name__)
