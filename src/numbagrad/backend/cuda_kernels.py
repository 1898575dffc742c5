"""Hand-written ``numba.cuda`` kernels of the CUDA backend's non-elementwise primitives (their launchers, under
the CPU backend's names, are in ``backend.cuda``): convolution columns (``im2col``/``col2im``), max/avg/adaptive
pooling and their backwards, layer norm, fused cross entropy, the index primitives (``gather``, ``scatter``,
``index_select``, ``index_add``, ``index_put``, advanced ``getitem``/``setitem`` with integer arrays,
``take_along_axis``), ``argmax``/``argmin``, ``cumsum``/``cumprod``, ``sort``/``topk``, ``triu``/``tril``,
``flip``; the complex primitives (``conj``, ``make_complex``, ``complex_abs``/``angle``/``sgn``); dropout's keep mask;
and
the device-side bounds check of ``check_index``, whose error surfaces at the next download.

Every kernel is a grid-stride loop with one thread per output element, or per row where a row is scanned, or
per column where repeated indices add into it (index_add, scatter_add, index_put with ``accumulate``, embedding
backward: each thread walks the indices in order, so sums are deterministic and in numpy's order). Overlapping
pooling windows add with ``cuda.atomic.add``. Accumulations run in float64 whatever the storage dtype, as the CPU
kernels do; the nn kernels run float16 arrays through float32 copies (the CPU kernels do the same). ``sort`` is a
stable insertion sort per row: fine for the short rows of training (top-k logits, small attention rows),
quadratic in the row length.

Imported by ``backend.cuda`` on first use only (importing it imports numba.cuda). What still runs on the host
(``backend.cuda._host_op``), none of it in a training step of conv/pool/norm/attention/cross-entropy models:
``tile``, ``coo_matmul``, ``einsum``, ``embed_diagonal``, ``index_fill``, ``masked_scatter``, ``repeat_index``,
``roll``, ``unique``, ``scatter`` with ``reduce='multiply'``, and ``getitem``/``setitem``/``index_put`` with a
boolean mask or an index mixing arrays with partial slices (a mask's result size depends on the data). Outside the
backend, ops that build small index or weight tables with numpy upload them per call (``adaptive_max_pool2d``,
``interpolate``, reflect/replicate ``pad``), and random draws (``dropout``) come from the host generator.
"""

from __future__ import annotations

import math

from numba import cuda, uint64


@cuda.jit(device=True, cache=True)
def _lesser(a, b):
    """``min`` of two numbers (the builtin's overloads are not all available in kernels)."""
    return a if a <= b else b


@cuda.jit(device=True, cache=True)
def _greater(a, b):
    return a if a >= b else b


@cuda.jit(cache=True)
def _check_kernel(index, low, high, skip, cell, code):
    i = cuda.grid(1)
    while i < index.size:
        v = index[i]
        if (v < low or v >= high) and v != skip:
            if cuda.atomic.cas(cell, 0, 0, code) == 0:
                cell[1] = v
        i += cuda.gridsize(1)


# --- convolution columns ---------------------------------------------------------------------------------------
@cuda.jit(cache=True)
def _im2col_kernel(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
    """``cols[n, (c, i, j), (y, z)] = x[n, c, y*sh - ph + i*dh, z*sw - pw + j*dw]`` (0 outside)."""
    k, length = cols.shape[1], cols.shape[2]
    height, width = x.shape[2], x.shape[3]
    i = cuda.grid(1)
    while i < cols.size:
        pos = i % length
        r = i // length
        row = r % k
        n = r // k
        j = row % kw
        t = row // kw
        ki = t % kh
        c = t // kh
        h = (pos // ow) * sh - ph + ki * dh
        w = (pos % ow) * sw - pw + j * dw
        if 0 <= h < height and 0 <= w < width:
            cols[n, row, pos] = x[n, c, h, w]
        else:
            cols[n, row, pos] = 0
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _col2im_kernel(cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, x):
    """Each input element gathers the column entries that read it (no atomics: one thread owns each sum)."""
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    i = cuda.grid(1)
    while i < x.size:
        w = i % width
        h = (i // width) % height
        c = (i // (width * height)) % channels
        n = i // (width * height * channels)
        acc = 0.0
        for ki in range(kh):
            hy = h + ph - ki * dh
            if hy < 0 or hy % sh != 0 or hy // sh >= oh:
                continue
            for kj in range(kw):
                wz = w + pw - kj * dw
                if wz < 0 or wz % sw != 0 or wz // sw >= ow:
                    continue
                acc += cols[n, (c * kh + ki) * kw + kj, (hy // sh) * ow + wz // sw]
        x[n, c, h, w] = acc
        i += cuda.gridsize(1)


# --- pooling ------------------------------------------------------------------------------------------------------
@cuda.jit(cache=True)
def _max_pool_kernel(x, kh, kw, sh, sw, ph, pw, dh, dw, out, indices):
    """torch's max pool: the first maximum of each window wins, NaN propagates; indices are ``h * W + w``."""
    height, width = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    i = cuda.grid(1)
    while i < out.size:
        z = i % ow
        y = (i // ow) % oh
        p = i // (ow * oh)
        h0 = y * sh - ph
        h1 = _lesser(h0 + (kh - 1) * dh + 1, height)
        while h0 < 0:
            h0 += dh
        w0 = z * sw - pw
        w1 = _lesser(w0 + (kw - 1) * dw + 1, width)
        while w0 < 0:
            w0 += dw
        best = h0 * width + w0
        value = -math.inf
        for h in range(h0, h1, dh):
            for w in range(w0, w1, dw):
                v = x[p, h, w]
                if v > value or v != v:
                    value = v
                    best = h * width + w
        out[p, y, z] = value
        indices[p, y, z] = best
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _max_pool_backward_kernel(g, indices, gx):
    """Each output gradient added at its maximum (an index past the plane, a window over padding only, adds
    nothing)."""
    height, width = gx.shape[1], gx.shape[2]
    oh, ow = g.shape[1], g.shape[2]
    i = cuda.grid(1)
    while i < g.size:
        z = i % ow
        y = (i // ow) % oh
        p = i // (ow * oh)
        k = indices[p, y, z]
        if k < height * width:
            cuda.atomic.add(gx, (p, k // width, k % width), g[p, y, z])
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _avg_pool_kernel(x, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, out):
    """torch's avg pool: the window clipped to the padded input, divided by ``divisor`` (> 0), the padded window's
    size (``count_include_pad``) or the count of input elements in it."""
    height, width = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    i = cuda.grid(1)
    while i < out.size:
        z = i % ow
        y = (i // ow) % oh
        p = i // (ow * oh)
        h0 = y * sh - ph
        w0 = z * sw - pw
        h1 = _lesser(h0 + kh, height + ph)
        w1 = _lesser(w0 + kw, width + pw)
        pool = (h1 - h0) * (w1 - w0)
        h0, w0 = _greater(h0, 0), _greater(w0, 0)
        h1, w1 = _lesser(h1, height), _lesser(w1, width)
        factor = divisor if divisor > 0 else (pool if count_include_pad else (h1 - h0) * (w1 - w0))
        acc = 0.0
        for h in range(h0, h1):
            for w in range(w0, w1):
                acc += x[p, h, w]
        out[p, y, z] = acc / factor if h0 < h1 and w0 < w1 else 0.0
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _avg_pool_backward_kernel(g, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, gx):
    height, width = gx.shape[1], gx.shape[2]
    oh, ow = g.shape[1], g.shape[2]
    i = cuda.grid(1)
    while i < g.size:
        z = i % ow
        y = (i // ow) % oh
        p = i // (ow * oh)
        h0 = y * sh - ph
        w0 = z * sw - pw
        h1 = _lesser(h0 + kh, height + ph)
        w1 = _lesser(w0 + kw, width + pw)
        pool = (h1 - h0) * (w1 - w0)
        h0, w0 = _greater(h0, 0), _greater(w0, 0)
        h1, w1 = _lesser(h1, height), _lesser(w1, width)
        factor = divisor if divisor > 0 else (pool if count_include_pad else (h1 - h0) * (w1 - w0))
        share = g[p, y, z] / _greater(factor, 1)  # (an empty window, over padding only, adds nothing)
        for h in range(h0, h1):
            for w in range(w0, w1):
                cuda.atomic.add(gx, (p, h, w), share)
        i += cuda.gridsize(1)


@cuda.jit(device=True, cache=True)
def _adaptive_window(k, size, out):
    """Input positions ``[floor(k*size/out), ceil((k+1)*size/out))`` of adaptive pooling's output ``k``."""
    return (k * size) // out, -((-(k + 1) * size) // out)


@cuda.jit(cache=True)
def _adaptive_avg_kernel(x, out):
    """Output (y, z) averages the input rows and columns of its adaptive window (``_adaptive_window``)."""
    height, width = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    i = cuda.grid(1)
    while i < out.size:
        z = i % ow
        y = (i // ow) % oh
        p = i // (ow * oh)
        h0, h1 = _adaptive_window(y, height, oh)
        w0, w1 = _adaptive_window(z, width, ow)
        acc = 0.0
        for h in range(h0, h1):
            for w in range(w0, w1):
                acc += x[p, h, w]
        out[p, y, z] = acc / ((h1 - h0) * (w1 - w0))
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _adaptive_avg_backward_kernel(g, gx):
    height, width = gx.shape[1], gx.shape[2]
    oh, ow = g.shape[1], g.shape[2]
    i = cuda.grid(1)
    while i < g.size:
        z = i % ow
        y = (i // ow) % oh
        p = i // (ow * oh)
        h0, h1 = _adaptive_window(y, height, oh)
        w0, w1 = _adaptive_window(z, width, ow)
        share = g[p, y, z] / ((h1 - h0) * (w1 - w0))
        for h in range(h0, h1):
            for w in range(w0, w1):
                cuda.atomic.add(gx, (p, h, w), share)
        i += cuda.gridsize(1)


# --- layer norm ---------------------------------------------------------------------------------------------------
@cuda.jit(cache=True)
def _layer_norm_kernel(x, weight, bias, eps, affine, out, mean, rstd):
    """One thread per row of the (rows, n) ``x``: mean, 1/std (biased variance), then the normalized row."""
    n = x.shape[1]
    r = cuda.grid(1)
    while r < x.shape[0]:
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
        for j in range(n):
            y = (x[r, j] - m) * inv
            out[r, j] = y * weight[j] + bias[j] if affine else y
        r += cuda.gridsize(1)


@cuda.jit(cache=True)
def _layer_norm_backward_x_kernel(g, x, mean, rstd, weight, gx):
    """One thread per row: ``gx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat))``."""
    n = x.shape[1]
    r = cuda.grid(1)
    while r < x.shape[0]:
        m, inv = mean[r], rstd[r]
        a = 0.0
        b = 0.0
        for j in range(n):
            gj = g[r, j] * weight[j]
            a += gj
            b += gj * (x[r, j] - m) * inv
        a /= n
        b /= n
        for j in range(n):
            gx[r, j] = inv * (g[r, j] * weight[j] - a - (x[r, j] - m) * inv * b)
        r += cuda.gridsize(1)


@cuda.jit(cache=True)
def _layer_norm_backward_wb_kernel(g, x, mean, rstd, gw, gb):
    """One thread per column: the sums over rows of ``g * xhat`` and of ``g``."""
    rows = x.shape[0]
    j = cuda.grid(1)
    while j < x.shape[1]:
        sw = 0.0
        sb = 0.0
        for r in range(rows):
            sw += g[r, j] * (x[r, j] - mean[r]) * rstd[r]
            sb += g[r, j]
        gw[j] = sw
        gb[j] = sb
        j += cuda.gridsize(1)


# --- cross entropy ------------------------------------------------------------------------------------------------
@cuda.jit(cache=True)
def _cross_entropy_kernel(x, target, weight, weighted, smoothing, ignore_index, probs, losses, counts):
    """One thread per position ``i = n * S + s`` of the (N, C, S) logits: its softmax into ``probs``; ``(1 - s) *
    w[t] * (lse - x_t) + s / C * sum_c w[c] * (lse - x_c)`` (0 when ignored) into ``losses`` and ``w[t]`` (0 when
    ignored) into ``counts``."""
    c = x.shape[1]
    positions = x.shape[2]
    i = cuda.grid(1)
    while i < x.shape[0] * positions:
        n = i // positions
        p = i - n * positions
        m = x[n, 0, p]
        for k in range(1, c):
            if x[n, k, p] > m:
                m = x[n, k, p]
        total = 0.0
        for k in range(c):
            total += math.exp(x[n, k, p] - m)
        for k in range(c):
            probs[n, k, p] = math.exp(x[n, k, p] - m) / total
        t = target[i]
        if t == ignore_index or t < 0 or t >= c:  # (out of range: check_index reports it)
            losses[i] = 0.0
            counts[i] = 0.0
        else:
            lse = m + math.log(total)
            smooth = 0.0
            if smoothing != 0.0:
                wsum = 0.0
                xs = 0.0
                for k in range(c):
                    wk = weight[k] if weighted else 1.0
                    wsum += wk
                    xs += wk * x[n, k, p]
                smooth = wsum * lse - xs
            wt = weight[t] if weighted else 1.0
            counts[i] = wt
            losses[i] = (1.0 - smoothing) * wt * (lse - x[n, t, p]) + smoothing / c * smooth
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _cross_entropy_backward_kernel(probs, target, weight, weighted, smoothing, ignore_index, g, total, out):
    """``out[n, :, s] = g[i] / total * d loss_i / d x_i`` for position ``i = n * S + s`` (``g`` of one element or
    one per position; ``total`` one element)."""
    c = probs.shape[1]
    positions = probs.shape[2]
    count = probs.shape[0] * positions
    i = cuda.grid(1)
    while i < count:
        n = i // positions
        p = i - n * positions
        t = target[i]
        if t == ignore_index or t < 0 or t >= c:
            for k in range(c):
                out[n, k, p] = 0.0
        else:
            sc = (g[i] if g.size == count and count != 1 else g[0]) / total[0]
            wsum = 0.0
            for k in range(c):
                wsum += weight[k] if weighted else 1.0
            wt = weight[t] if weighted else 1.0
            coef = sc * ((1.0 - smoothing) * wt + smoothing / c * wsum)
            shift = sc * smoothing / c
            for k in range(c):
                out[n, k, p] = coef * probs[n, k, p] - shift * (weight[k] if weighted else 1.0)
            out[n, t, p] -= sc * (1.0 - smoothing) * wt
        i += cuda.gridsize(1)


# --- gather / scatter / index_select / index_add along one dim ------------------------------------------------------
# Arrays are seen as (outer, size along dim, inner); an index as (outer, m, inner) or, for index_select/index_add, a
# 1-d (m,) vector applying to every (outer, inner).
@cuda.jit(cache=True)
def _gather_kernel(a, index, out):
    """``out[o, j, k] = a[o, index[o, j, k], k]`` (negative indices count from the end)."""
    m, inner, size = out.shape[1], out.shape[2], a.shape[1]
    i = cuda.grid(1)
    while i < out.size:
        k = i % inner
        j = (i // inner) % m
        o = i // (inner * m)
        v = index[o, j, k]
        v = v + size if v < 0 else v
        out[o, j, k] = a[o, v, k] if 0 <= v < size else 0  # (out of range: check_index reports it)
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _scatter_kernel(out, index, src, add):
    """``out[o, index[o, j, k], k] = src[o, j, k]`` (added for ``add``). One thread per (o, k) column walks ``j``
    in order: repeated indices add up in numpy's order (deterministic, no atomics) and the last write wins."""
    m, inner, size = index.shape[1], index.shape[2], out.shape[1]
    i = cuda.grid(1)
    while i < index.shape[0] * inner:
        k = i % inner
        o = i // inner
        for j in range(m):
            v = index[o, j, k]
            v = v + size if v < 0 else v
            if 0 <= v < size:  # (out of range: nothing written, check_index reports it)
                out[o, v, k] = out[o, v, k] + src[o, j, k] if add else src[o, j, k]
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _select_kernel(a, index, out):
    """``out[o, j, k] = a[o, index[j], k]``."""
    m, inner, size = out.shape[1], out.shape[2], a.shape[1]
    i = cuda.grid(1)
    while i < out.size:
        k = i % inner
        j = (i // inner) % m
        o = i // (inner * m)
        v = index[j]
        v = v + size if v < 0 else v
        out[o, j, k] = a[o, v, k] if 0 <= v < size else 0  # (out of range: check_index reports it)
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _put_rows_kernel(out, index, src, add):
    """``out[o, index[j], k] = src[o, j, k]`` (added for ``add``), one thread per (o, k) walking ``j`` in order,
    as ``_scatter_kernel``."""
    m, inner, size = src.shape[1], src.shape[2], out.shape[1]
    i = cuda.grid(1)
    while i < src.shape[0] * inner:
        k = i % inner
        o = i // inner
        for j in range(m):
            v = index[j]
            v = v + size if v < 0 else v
            if 0 <= v < size:  # (out of range: nothing written, check_index reports it)
                out[o, v, k] = out[o, v, k] + src[o, j, k] if add else src[o, j, k]
        i += cuda.gridsize(1)


# --- advanced indexing by integer arrays ----------------------------------------------------------------------------
@cuda.jit(cache=True)
def _row_of_kernel(rows, index, size):
    """``rows = rows * size + index`` (a negative index counts from the end): the flat row of several indices."""
    i = cuda.grid(1)
    while i < rows.size:
        v = index[i]
        v = v + size if v < 0 else v
        rows[i] = rows[i] * size + v if 0 <= v < size and rows[i] >= 0 else -(1 << 62)  # (out of range: no row)
        i += cuda.gridsize(1)


# --- scans along one dim: argmax/argmin, cumsum/cumprod, sort -------------------------------------------------------
@cuda.jit(cache=True)
def _arg_kernel(a, largest, out):
    """One thread per (outer, inner): the first index of the max (min) along the middle dim; the first NaN wins."""
    n, inner = a.shape[1], a.shape[2]
    i = cuda.grid(1)
    while i < out.size:
        k = i % inner
        o = i // inner
        best = 0
        value = a[o, 0, k]
        if value == value:
            for j in range(1, n):
                v = a[o, j, k]
                if v != v:
                    best = j
                    break
                if (v > value) if largest else (v < value):
                    value = v
                    best = j
        out[o, k] = best
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _scan_kernel(a, product, out):
    """Running sum (product) along the middle dim, one thread per (outer, inner), accumulated in ``acc``'s type
    (float64 for floats)."""
    n, inner = a.shape[1], a.shape[2]
    i = cuda.grid(1)
    while i < a.shape[0] * inner:
        k = i % inner
        o = i // inner
        acc = a[o, 0, k]
        out[o, 0, k] = acc
        for j in range(1, n):
            acc = acc * a[o, j, k] if product else acc + a[o, j, k]
            out[o, j, k] = acc
        i += cuda.gridsize(1)


@cuda.jit(device=True, cache=True)
def _before(v, w, descending):
    """Whether ``v`` sorts strictly before ``w``: NaN is the largest value, as in torch."""
    if descending:
        return (v > w) or (v != v and w == w)
    return (v < w) or (w != w and v == v)


@cuda.jit(cache=True)
def _sort_kernel(a, descending, values, indices):
    """One thread per (outer, inner) row along the middle dim: a stable insertion sort of the indices."""
    n, inner = a.shape[1], a.shape[2]
    i = cuda.grid(1)
    while i < a.shape[0] * inner:
        k = i % inner
        o = i // inner
        for j in range(n):
            v = a[o, j, k]
            p = j
            while p > 0 and _before(v, a[o, indices[o, p - 1, k], k], descending):
                indices[o, p, k] = indices[o, p - 1, k]
                p -= 1
            indices[o, p, k] = j
        for j in range(n):
            values[o, j, k] = a[o, indices[o, j, k], k]
        i += cuda.gridsize(1)


# --- triangles and flips --------------------------------------------------------------------------------------------
@cuda.jit(cache=True)
def _triangle_kernel(a, upper, diagonal, out):
    """``out`` is ``a`` with the other triangle of each trailing (rows, cols) matrix zeroed."""
    rows, cols = a.shape[1], a.shape[2]
    i = cuda.grid(1)
    while i < a.size:
        c = i % cols
        r = (i // cols) % rows
        b = i // (cols * rows)
        keep = (c - r >= diagonal) if upper else (c - r <= diagonal)
        out[b, r, c] = a[b, r, c] if keep else 0
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _reverse_kernel(a, out):
    """``out[o, j, k] = a[o, n - 1 - j, k]``: one dim of a ``flip``."""
    n, inner = a.shape[1], a.shape[2]
    i = cuda.grid(1)
    while i < a.size:
        k = i % inner
        j = (i // inner) % n
        o = i // (inner * n)
        out[o, j, k] = a[o, n - 1 - j, k]
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _keep_kernel(out, seed, p):
    """``out[i] = 1`` where the uniform draw of element ``i`` is at least ``p``, else 0. The draw is a counter-based
    hash of (``seed``, ``i``) (splitmix64's mixer): no generator state lives on the device, so a draw needs only
    the seed the host generator hands out."""
    i = cuda.grid(1)
    while i < out.size:
        z = uint64(seed) + uint64(i + 1) * uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> uint64(30))) * uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> uint64(27))) * uint64(0x94D049BB133111EB)
        z = z ^ (z >> uint64(31))
        u = float(z >> uint64(40)) * (1.0 / 16777216.0)  # 24 random bits: a float32 in [0, 1)
        out[i] = 1 if u >= p else 0
        i += cuda.gridsize(1)


# --- complex numbers -------------------------------------------------------------------------------------------
@cuda.jit(cache=True)
def _conj_kernel(a, out):
    """``out[i] = conj(a[i])`` over flat contiguous arrays."""
    i = cuda.grid(1)
    while i < a.size:
        out[i] = a[i].conjugate()
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _make_complex_kernel(re, im, out):
    """``out[i] = re[i] + im[i] * 1j``."""
    i = cuda.grid(1)
    while i < out.size:
        out[i] = complex(re[i], im[i])
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _complex_abs_kernel(a, out):
    """``out[i] = |a[i]|`` (``hypot``: no overflow where the squares would)."""
    i = cuda.grid(1)
    while i < a.size:
        out[i] = math.hypot(a[i].real, a[i].imag)
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _complex_angle_kernel(a, out):
    """``out[i]`` = the argument of ``a[i]``."""
    i = cuda.grid(1)
    while i < a.size:
        out[i] = math.atan2(a[i].imag, a[i].real)
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _complex_sgn_kernel(a, out):
    """``out[i] = a[i] / |a[i]|``, 0 where ``a[i]`` is 0."""
    i = cuda.grid(1)
    while i < a.size:
        z = a[i]
        r = math.hypot(z.real, z.imag)
        out[i] = z / r if r != 0 else 0
        i += cuda.gridsize(1)
