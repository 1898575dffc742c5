"""Hand-written ``numba.cuda`` kernels for the CUDA backend's non-elementwise primitives, and the launchers that
``backend.cuda`` exposes under the CPU backend's names: convolution columns (``im2col``/``col2im``), max/avg/
adaptive pooling and their backwards, layer norm, fused cross entropy, the index primitives (``gather``,
``scatter``, ``index_select``, ``index_add``, ``index_put``, advanced ``getitem``/``setitem`` with integer
arrays, ``take_along_axis``), ``argmax``/``argmin``, ``cumsum``/``cumprod``, ``sort``/``topk``, ``triu``/``tril``
and ``flip``; plus ``check_index``, the device-side bounds check whose error surfaces at the next download.

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
boolean mask or an index mixing arrays with ints or partial slices (a mask's result size depends on the data).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from . import cuda as dev

_HALF = np.dtype(np.float16)
_SINGLE = np.dtype(np.float32)


def _launch(kernel, n: int, *args) -> None:
    """Run a grid-stride ``kernel`` over ``n`` items (nothing when ``n`` is 0)."""
    if n:
        blocks, threads = dev._grid(n)
        kernel[blocks, threads](*args)


def _single(a):
    """float16 storage as a float32 copy (others unchanged)."""
    return dev.astype(a, _SINGLE) if a is not None and a.dtype == _HALF else a


def _half_back(result, half: bool):
    """The float32 arrays of ``result`` back to float16 when the inputs were float16."""
    if not half:
        return result
    if isinstance(result, tuple):
        return tuple(dev.astype(r, _HALF) if dev.is_device_array(r) and r.dtype == _SINGLE else r for r in result)
    return dev.astype(result, _HALF)


def _three_d(a, dim: int):
    """A contiguous array as (outer, size along ``dim``, inner)."""
    shape = tuple(a.shape)
    return dev.ascontiguous(a).reshape(math.prod(shape[:dim]), shape[dim] if shape else 1, math.prod(shape[dim + 1 :]))


# --- deferred index checks ------------------------------------------------------------------------------------
_cell = None  # device int64[2]: the first failed check's code and its bad index (code 0: none failed)
_pending = dev.pending_checks  # code -> the callable making the exception of that check
_next_code = [0]


@cuda.jit(cache=True)
def _check_kernel(index, low, high, skip, cell, code):
    i = cuda.grid(1)
    while i < index.size:
        v = index[i]
        if (v < low or v >= high) and v != skip:
            if cuda.atomic.cas(cell, 0, 0, code) == 0:
                cell[1] = v
        i += cuda.gridsize(1)


def check_index(index, low: int, high: int, skip, error) -> None:
    """Check on the device that every entry of the integer array ``index`` other than ``skip`` lies in ``[low,
    high)``. The check is queued, not waited for (as torch's device-side asserts): the next download raises
    ``error(bad_value)`` for the first failed check, before the caller sees any values."""
    global _cell
    if index.size == 0:
        return
    if _cell is None:
        _cell = dev.zeros((2,), np.int64)
    _next_code[0] += 1
    code = _next_code[0]
    _pending[code] = error
    flat = dev.ascontiguous(index).reshape(-1)
    skip = np.iinfo(np.int64).min if skip is None else int(skip)
    _launch(_check_kernel, flat.size, flat, np.int64(low), np.int64(high), np.int64(skip), _cell, np.int64(code))


def raise_failed_check() -> None:
    """Raise the exception of the first failed ``check_index`` since the last call (the checks are then clear).
    Called before each download; reads the device's error cell only while checks are pending."""
    if not _pending:
        return
    errors = dict(_pending)
    _pending.clear()
    code, value = (int(v) for v in _cell.copy_to_host())
    if code:
        dev.assign(_cell, 0)
        raise errors[code](value)


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


def im2col(x, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """(N, C, H, W) -> (N, C * kh * kw, OH * OW) columns: each output position's receptive field."""
    half = x.dtype == _HALF
    x = dev.ascontiguous(_single(x))
    n, c = x.shape[:2]
    cols = dev.empty((n, c * kernel[0] * kernel[1], out_hw[0] * out_hw[1]), x.dtype)
    _launch(_im2col_kernel, cols.size, x, *kernel, *stride, *padding, *dilation, *out_hw, cols)
    return _half_back(cols, half)


def col2im(cols, shape: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """The adjoint of ``im2col``: an (N, C, H, W) array of ``shape`` summing each column entry into its source."""
    half = cols.dtype == _HALF
    cols = dev.ascontiguous(_single(cols))
    x = dev.empty(tuple(shape), cols.dtype)
    _launch(_col2im_kernel, x.size, cols, *kernel, *stride, *padding, *dilation, *out_hw, x)
    return _half_back(x, half)


def _t(a, axes: tuple):
    return dev._view(a, lambda v: v.transpose(axes))


def conv2d(x, weight, bias, stride: tuple, padding: tuple, dilation: tuple, groups: int, out_hw: tuple) -> tuple:
    """Convolution of (N, C, H, W) by (O, C / groups, kh, kw) as im2col and one batched product (per group):
    (output (N, O, OH, OW), the columns, kept for backward)."""
    n, o = x.shape[0], weight.shape[0]
    cols = im2col(x, tuple(weight.shape[2:]), stride, padding, dilation, out_hw)
    k, length = cols.shape[1], cols.shape[2]
    w = dev.ascontiguous(weight) if weight.dtype == x.dtype else dev.astype(weight, x.dtype)
    if groups == 1:
        out = dev.matmul(w.reshape(o, k), cols)
    else:
        out = dev.matmul(w.reshape(groups, o // groups, k // groups), cols.reshape(n, groups, k // groups, length))
        out = out.reshape(n, o, length)
    if bias is not None:
        out = dev.elementwise(dev.ROWS["add"], [out, bias.reshape(o, 1)], (), np.dtype(x.dtype))
    return out.reshape(n, o, *out_hw), cols


def conv2d_backward(g, cols, x_shape: tuple, weight, stride: tuple, padding: tuple, dilation: tuple, groups: int,
                    need_x: bool, need_w: bool, need_b: bool) -> tuple:  # fmt: skip
    """(grad of x, of weight, of bias), each None where not needed, from the output gradient and the columns."""
    n, o = g.shape[:2]
    k, length = cols.shape[1], cols.shape[2]
    g3 = dev.ascontiguous(g).reshape(n, o, length)
    w = dev.ascontiguous(weight) if weight.dtype == g.dtype else dev.astype(weight, g.dtype)
    gx = gw = gb = None
    if need_b:
        gb = dev.reduce(g3, "sum", (0, 2), False)
    kg, og = k // groups, o // groups
    g4 = g3.reshape(n, groups, og, length)
    c4 = cols.reshape(n, groups, kg, length)
    if need_w:
        gw = dev.reduce(dev.matmul(g4, _t(c4, (0, 1, 3, 2))), "sum", (0,), False).reshape(tuple(weight.shape))
    if need_x:
        gcols = dev.matmul(_t(w.reshape(groups, og, kg), (0, 2, 1)), g4).reshape(n, k, length)
        gx = col2im(gcols, tuple(x_shape), tuple(weight.shape[2:]), stride, padding, dilation, tuple(g.shape[2:]))
    return gx, gw, gb


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
        h1 = min(h0 + (kh - 1) * dh + 1, height)
        while h0 < 0:
            h0 += dh
        w0 = z * sw - pw
        w1 = min(w0 + (kw - 1) * dw + 1, width)
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


def max_pool2d(x, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple):
    """Max over windows of the (P, H, W) planes: (values, int64 indices ``h * W + w`` into each plane)."""
    half = x.dtype == _HALF
    x = dev.ascontiguous(_single(x))
    out = dev.empty((x.shape[0], *out_hw), x.dtype)
    idx = dev.empty((x.shape[0], *out_hw), np.int64)
    _launch(_max_pool_kernel, out.size, x, *kernel, *stride, *padding, *dilation, out, idx)
    return _half_back((out, idx), half)


def max_pool2d_backward(g, indices, in_hw: tuple):
    half = g.dtype == _HALF
    g = dev.ascontiguous(_single(g))
    gx = dev.zeros((g.shape[0], *in_hw), g.dtype)
    _launch(_max_pool_backward_kernel, g.size, g, dev.ascontiguous(indices), gx)
    return _half_back(gx, half)


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
        h1 = min(h0 + kh, height + ph)
        w1 = min(w0 + kw, width + pw)
        pool = (h1 - h0) * (w1 - w0)
        h0, w0 = max(h0, 0), max(w0, 0)
        h1, w1 = min(h1, height), min(w1, width)
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
        h1 = min(h0 + kh, height + ph)
        w1 = min(w0 + kw, width + pw)
        pool = (h1 - h0) * (w1 - w0)
        h0, w0 = max(h0, 0), max(w0, 0)
        h1, w1 = min(h1, height), min(w1, width)
        factor = divisor if divisor > 0 else (pool if count_include_pad else (h1 - h0) * (w1 - w0))
        share = g[p, y, z] / max(factor, 1)  # (an empty window, over padding only, adds nothing)
        for h in range(h0, h1):
            for w in range(w0, w1):
                cuda.atomic.add(gx, (p, h, w), share)
        i += cuda.gridsize(1)


def avg_pool2d(x, kernel: tuple, stride: tuple, padding: tuple, count_include_pad: bool, divisor: int,
               out_hw: tuple):  # fmt: skip
    """Mean over windows of the (P, H, W) planes; ``divisor`` > 0 replaces the window size."""
    half = x.dtype == _HALF
    x = dev.ascontiguous(_single(x))
    out = dev.empty((x.shape[0], *out_hw), x.dtype)
    _launch(_avg_pool_kernel, out.size, x, *kernel, *stride, *padding, bool(count_include_pad), int(divisor), out)
    return _half_back(out, half)


def avg_pool2d_backward(g, kernel: tuple, stride: tuple, padding: tuple, count_include_pad: bool, divisor: int,
                        in_hw: tuple):  # fmt: skip
    half = g.dtype == _HALF
    g = dev.ascontiguous(_single(g))
    gx = dev.zeros((g.shape[0], *in_hw), g.dtype)
    _launch(_avg_pool_backward_kernel, g.size, g, *kernel, *stride, *padding, bool(count_include_pad), int(divisor),
            gx)  # fmt: skip
    return _half_back(gx, half)


@cuda.jit(cache=True)
def _adaptive_avg_kernel(x, out):
    """Output (y, z) averages input rows ``[floor(y*H/OH), ceil((y+1)*H/OH))`` and the same for columns."""
    height, width = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    i = cuda.grid(1)
    while i < out.size:
        z = i % ow
        y = (i // ow) % oh
        p = i // (ow * oh)
        h0, h1 = (y * height) // oh, -((-(y + 1) * height) // oh)
        w0, w1 = (z * width) // ow, -((-(z + 1) * width) // ow)
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
        h0, h1 = (y * height) // oh, -((-(y + 1) * height) // oh)
        w0, w1 = (z * width) // ow, -((-(z + 1) * width) // ow)
        share = g[p, y, z] / ((h1 - h0) * (w1 - w0))
        for h in range(h0, h1):
            for w in range(w0, w1):
                cuda.atomic.add(gx, (p, h, w), share)
        i += cuda.gridsize(1)


def adaptive_avg_pool2d(x, out_hw: tuple):
    half = x.dtype == _HALF
    x = dev.ascontiguous(_single(x))
    out = dev.empty((x.shape[0], *out_hw), x.dtype)
    _launch(_adaptive_avg_kernel, out.size, x, out)
    return _half_back(out, half)


def adaptive_avg_pool2d_backward(g, in_hw: tuple):
    half = g.dtype == _HALF
    g = dev.ascontiguous(_single(g))
    gx = dev.zeros((g.shape[0], *in_hw), g.dtype)
    _launch(_adaptive_avg_backward_kernel, g.size, g, gx)
    return _half_back(gx, half)


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


def layer_norm(x, weight, bias, eps: float, n: int) -> tuple:
    """Normalize ``x`` over its trailing ``n`` elements (then ``* weight + bias`` when given): (out in ``x``'s
    shape, mean and rstd per row)."""
    half = x.dtype == _HALF
    x = dev.ascontiguous(_single(x))
    rows = x.size // n if n else 0
    dtype = np.dtype(x.dtype)
    out = dev.empty(tuple(x.shape), dtype)
    mean, rstd = dev.empty((rows,), dtype), dev.empty((rows,), dtype)
    affine = weight is not None or bias is not None
    w = dev.astype(weight, dtype).reshape(n) if weight is not None else dev.full((n,), 1, dtype)
    b = dev.astype(bias, dtype).reshape(n) if bias is not None else dev.zeros((n,), dtype)
    if rows and n:
        _launch(_layer_norm_kernel, rows, x.reshape(rows, n), w, b, float(eps), affine, out.reshape(rows, n), mean,
                rstd)  # fmt: skip
    return _half_back((out, mean, rstd), half)


def layer_norm_backward(g, x, mean, rstd, weight, param_shape: tuple, need_x: bool, need_wb: bool) -> tuple:
    """(grad of x in its shape, or None; the sums over rows of ``g * xhat`` and of ``g`` in ``param_shape``, for
    weight and bias, or None)."""
    half = x.dtype == _HALF
    x, mean, rstd = dev.ascontiguous(_single(x)), _single(mean), _single(rstd)
    dtype = np.dtype(x.dtype)
    rows = mean.shape[0]
    n = x.size // rows if rows else 0
    x2 = x.reshape(rows, n)
    g2 = dev.astype(g, dtype).reshape(rows, n)
    gx = gw = gb = None
    if need_x:
        w = dev.astype(weight, dtype).reshape(n) if weight is not None else dev.full((n,), 1, dtype)
        gx = dev.empty(tuple(x.shape), dtype)
        _launch(_layer_norm_backward_x_kernel, rows, g2, x2, mean, rstd, w, gx.reshape(rows, n))
    if need_wb:
        gw, gb = dev.zeros(tuple(param_shape), dtype), dev.zeros(tuple(param_shape), dtype)
        _launch(_layer_norm_backward_wb_kernel, n, g2, x2, mean, rstd, gw.reshape(n), gb.reshape(n))
    return _half_back((gx, gw, gb), half)


# --- cross entropy ------------------------------------------------------------------------------------------------
@cuda.jit(cache=True)
def _cross_entropy_kernel(x, target, weight, weighted, smoothing, ignore_index, probs, losses, counts):
    """One thread per row: the softmax into ``probs``; ``(1 - s) * w[t] * (lse - x_t) + s / C * sum_c w[c] * (lse -
    x_c)`` (0 when ignored) into ``losses`` and ``w[t]`` (0 when ignored) into ``counts``."""
    c = x.shape[1]
    i = cuda.grid(1)
    while i < x.shape[0]:
        m = x[i, 0]
        for k in range(1, c):
            if x[i, k] > m:
                m = x[i, k]
        total = 0.0
        for k in range(c):
            total += math.exp(x[i, k] - m)
        for k in range(c):
            probs[i, k] = math.exp(x[i, k] - m) / total
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
                    xs += wk * x[i, k]
                smooth = wsum * lse - xs
            wt = weight[t] if weighted else 1.0
            counts[i] = wt
            losses[i] = (1.0 - smoothing) * wt * (lse - x[i, t]) + smoothing / c * smooth
        i += cuda.gridsize(1)


@cuda.jit(cache=True)
def _cross_entropy_backward_kernel(probs, target, weight, weighted, smoothing, ignore_index, g, total, out):
    """``out[i] = g[i] / total * d loss_i / d x_i`` (``g`` of one element or one per row; ``total`` one element)."""
    n, c = probs.shape
    i = cuda.grid(1)
    while i < n:
        t = target[i]
        if t == ignore_index or t < 0 or t >= c:
            for k in range(c):
                out[i, k] = 0.0
        else:
            sc = (g[i] if g.size == n and n != 1 else g[0]) / total[0]
            wsum = 0.0
            for k in range(c):
                wsum += weight[k] if weighted else 1.0
            wt = weight[t] if weighted else 1.0
            coef = sc * ((1.0 - smoothing) * wt + smoothing / c * wsum)
            shift = sc * smoothing / c
            for k in range(c):
                out[i, k] = coef * probs[i, k] - shift * (weight[k] if weighted else 1.0)
            out[i, t] -= sc * (1.0 - smoothing) * wt
        i += cuda.gridsize(1)


def cross_entropy(x, target, weight, smoothing: float, ignore_index: int, reduction: str):
    """Cross entropy of (N, C) logits with class indices (a device int64 array), label smoothing and class
    weights, reduced: (softmax probabilities, the loss (0-d, or per sample for ``reduction='none'``), the mean's
    denominator: a 1-element device array for ``'mean'``, else 1.0). Nothing is read back to the host."""
    half = x.dtype == _HALF
    x = dev.ascontiguous(_single(x))
    dtype = np.dtype(x.dtype)
    n = x.shape[0]
    weighted = weight is not None
    w = dev.astype(weight, dtype) if weighted else dev.full((1,), 1, dtype)
    t = dev.astype(target, np.int64).reshape(n) if dev.is_device_array(target) else dev.from_host(target)
    probs, losses, counts = dev.empty(tuple(x.shape), dtype), dev.empty((n,), dtype), dev.empty((n,), dtype)
    if x.size:
        _launch(_cross_entropy_kernel, n, x, t, w, weighted, float(smoothing), int(ignore_index), probs, losses,
                counts)  # fmt: skip
    else:
        dev.assign(losses, 0)
        dev.assign(counts, 0)
    if reduction == "none":
        return _half_back((probs, losses, 1.0), half)
    loss = dev.reduce(losses, "sum", None, False, np.float64)
    total = dev.reduce(counts, "sum", None, False, np.float64).reshape(1) if reduction == "mean" else 1.0
    if reduction == "mean":
        loss = dev.elementwise(dev.ROWS["div"], [loss, total.reshape(())], (), np.dtype(np.float64))
    return _half_back((probs, dev.astype(loss, dtype), total), half)


def cross_entropy_backward(probs, target, weight, smoothing: float, ignore_index: int, g, total) -> object:
    """The gradient of ``cross_entropy``'s loss for the incoming gradient ``g`` (0-d, or per sample)."""
    half = probs.dtype == _HALF
    probs = dev.ascontiguous(_single(probs))
    dtype = np.dtype(probs.dtype)
    n = probs.shape[0]
    weighted = weight is not None
    w = dev.astype(weight, dtype) if weighted else dev.full((1,), 1, dtype)
    t = dev.astype(target, np.int64).reshape(n) if dev.is_device_array(target) else dev.from_host(target)
    g1 = dev.astype(g, np.float64).reshape(-1) if dev.is_device_array(g) else dev.full((1,), g, np.float64)
    tot = total if dev.is_device_array(total) else dev.full((1,), total, np.float64)
    out = dev.empty(tuple(probs.shape), dtype)
    _launch(_cross_entropy_backward_kernel, n, probs, t, w, weighted, float(smoothing), int(ignore_index), g1, tot,
            out)  # fmt: skip
    return _half_back(out, half)


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


def _index_device(index):
    """An index array on the device as contiguous int64 (a host one is uploaded)."""
    if not dev.is_device_array(index):
        index = dev.from_host(np.asarray(index, np.int64))
    return dev.ascontiguous(index) if index.dtype == np.int64 else dev.astype(index, np.int64)


def _region(a, shape: tuple, dim: int):
    """The basic view of ``a`` cut to ``shape`` on every dim but ``dim``."""
    return dev._basic_view(a, tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(shape)))


def gather(a, dim: int, index):
    """``out[i][j] = a[index[i][j]][j]`` (for ``dim = 0``): torch's gather; ``index`` may be smaller than ``a``."""
    index = _index_device(index)
    src = _three_d(dev.copy(_region(a, tuple(index.shape), dim)), dim)
    out = dev.empty(tuple(index.shape), a.dtype)
    _launch(_gather_kernel, out.size, src, _three_d(index, dim), _three_d(out, dim))
    return out


def take_along_axis(a, idx, dim: int):
    """``np.take_along_axis`` (the index's shape equal to ``a``'s but along ``dim``, or broadcast to it)."""
    idx = _index_device(idx)
    shape = tuple(a.shape[d] if d != dim else idx.shape[d] for d in range(a.ndim))
    if tuple(idx.shape) != shape:
        idx = dev._materialize(idx, shape, np.int64)
    return gather(a, dim, idx)


def _scatter_into(out, dim: int, index, src, add: bool) -> None:
    """``out`` (contiguous) with ``src`` written or added at ``index`` along ``dim``."""
    index = _index_device(index)
    shape = tuple(index.shape)
    full = all(shape[d] == out.shape[d] for d in range(out.ndim) if d != dim)
    region = out if full else dev.copy(_region(out, shape, dim))
    if dev.is_device_array(src):
        src = dev._materialize(dev._basic_view(src, tuple(slice(0, s) for s in shape)), shape, out.dtype)
    else:
        src = dev.full(shape, src, out.dtype)
    i3 = _three_d(index, dim)
    _launch(_scatter_kernel, i3.shape[0] * i3.shape[2], _three_d(region, dim), i3, _three_d(src, dim), add)
    if not full:
        dev.assign(_region(out, shape, dim), region)


def scatter(a, dim: int, index, src, reduce: str | None = None):
    """A copy of ``a`` with ``src`` written (``reduce=None``) or added (``"add"``) at ``index`` along ``dim``
    (``"multiply"`` on the host)."""
    if reduce not in (None, "add"):
        return dev._host_op("scatter")(a, dim, index, src, reduce)
    out = dev.copy(a)
    _scatter_into(out, dim, index, src, reduce == "add")
    return out


def put_along_axis_zeros(shape: tuple, idx, values, dim: int):
    """Zeros of ``shape`` with ``values`` added at ``idx`` along ``dim`` (repeated indices add up)."""
    dtype = np.dtype(values.dtype)
    half = dtype == _HALF
    out = dev.zeros(tuple(shape), _SINGLE if half else dtype)
    _scatter_into(out, dim, idx, _single(values), True)
    return _half_back(out, half)


def index_select(a, dim: int, index):
    """The slices of ``a`` at the 1-d ``index`` along ``dim``."""
    index = _index_device(index).reshape(-1)
    shape = tuple(a.shape)
    out = dev.empty(shape[:dim] + (index.size,) + shape[dim + 1 :], a.dtype)
    _launch(_select_kernel, out.size, _three_d(a, dim), index, _three_d(out, dim))
    return out


def _add_rows_into(out, dim: int, index, src) -> None:
    """``out[..., index, ...] += src`` along ``dim`` (contiguous ``out``; repeated indices add up)."""
    index = _index_device(index).reshape(-1)
    shape = tuple(out.shape)
    block = shape[:dim] + (index.size,) + shape[dim + 1 :]
    src = dev._materialize(src, block, out.dtype) if dev.is_device_array(src) else dev.full(block, src, out.dtype)
    s3 = _three_d(src, dim)
    _launch(_put_rows_kernel, s3.shape[0] * s3.shape[2], _three_d(out, dim), index, s3, True)


def index_add(a, dim: int, index, src):
    """A copy of ``a`` with ``src`` added at ``index`` along ``dim`` (repeated indices add up)."""
    out = dev.copy(a)
    _add_rows_into(out, dim, index, src)
    return out


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


def _leading_rows(shape: tuple, index):
    """For an index of integer arrays on the leading dims (then only full slices): (flat int64 row numbers in the
    arrays' broadcast shape, how many dims they index). None for any other index."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = []
    for item in items:
        if isinstance(item, np.ndarray) or dev.is_device_array(item):
            if np.dtype(item.dtype).kind not in "iu":
                return None
            arrays.append(item)
        elif isinstance(item, list):
            return None
    lead = len(arrays)
    if not lead or lead > len(shape):
        return None
    if any(not (isinstance(i, np.ndarray) or dev.is_device_array(i)) for i in items[:lead]):
        return None
    if any(not (i is Ellipsis or (isinstance(i, slice) and i == slice(None))) for i in items[lead:]):
        return None
    batch = np.broadcast_shapes(*[tuple(a.shape) for a in arrays])
    rows = dev.zeros(batch, np.int64)
    for d, a in enumerate(arrays):
        idx = _index_device(a)
        idx = idx if tuple(idx.shape) == batch else dev._materialize(idx, batch, np.int64)
        _launch(_row_of_kernel, rows.size, rows.reshape(-1), idx.reshape(-1), np.int64(shape[d]))
    return rows, lead


def getitem(a, index):
    """``a[index]``: a device view for a basic index; integer arrays on the leading dims gather rows on the
    device; any other advanced index round-trips through the host."""
    if not dev._is_advanced(index):
        return dev._basic_view(a, index)
    found = _leading_rows(tuple(a.shape), index)
    if found is None:
        return dev.from_host(dev.cpu.getitem(dev.to_host(a), dev._host_index(index)))
    rows, lead = found
    shape = tuple(a.shape)
    table = dev.ascontiguous(a).reshape(math.prod(shape[:lead]), math.prod(shape[lead:]))
    return index_select(table, 0, rows.reshape(-1)).reshape(tuple(rows.shape) + shape[lead:])


def _put(out, index, values, accumulate: bool) -> bool:
    """``out[index] = values`` (added with ``accumulate``) into contiguous ``out`` on the device when ``index`` is
    integer arrays on the leading dims; False (nothing done) otherwise."""
    found = _leading_rows(tuple(out.shape), index)
    if found is None:
        return False
    rows, lead = found
    shape = tuple(out.shape)
    block = tuple(rows.shape) + shape[lead:]
    if dev.is_device_array(values):
        src = dev._materialize(values, block, out.dtype)
    else:
        src = dev.full(block, values, out.dtype)
    table = out.reshape(1, math.prod(shape[:lead]), math.prod(shape[lead:]))
    inner = math.prod(shape[lead:])
    _launch(_put_rows_kernel, inner, table, rows.reshape(-1), src.reshape(1, rows.size, inner), accumulate)
    return True


def setitem(dst, index, value) -> None:
    """``dst[index] = value``: basic indices write through a device view, integer arrays on the leading dims by a
    kernel (repeated indices: one of the writes wins, as on torch's GPU); other advanced indices on the host."""
    if dev.is_device_array(value):
        value = dev.copy(value)  # (it may overlap dst)
    if not dev._is_advanced(index):
        dev.assign(dev._basic_view(dst, index), value)
        return
    target = dst if dev.is_contiguous(dst) else dev.copy(dst)
    if _put(target, index, value, False):
        if target is not dst:
            dev.assign(dst, target)
        return
    host = dst.copy_to_host()
    host[dev._host_index(index)] = value.copy_to_host() if dev.is_device_array(value) else value
    dev.assign(dst, dev.from_host(host))


def index_put(a, index: tuple, values, accumulate: bool):
    """A copy of ``a`` with ``values`` written at ``a[index]`` (added, repeated indices included, if
    ``accumulate``)."""
    out = dev.copy(a)
    if _put(out, index, values, accumulate):
        return out
    return dev._host_op("index_put")(a, index, values, accumulate)


def index_add_zeros(shape: tuple, dtype, index, values):
    """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up); a basic index, which
    cannot repeat, is a plain assignment."""
    dtype = np.dtype(dtype)
    if not dev._is_advanced(index):
        out = dev.zeros(tuple(shape), dtype)
        dev.assign(dev._basic_view(out, index), values)
        return out
    out = dev.zeros(tuple(shape), dtype)
    if _put(out, index, values, True):
        return out
    host_values = dev.to_host(values) if dev.is_device_array(values) else values
    return dev.from_host(dev.cpu.index_add_zeros(tuple(shape), dtype, dev._host_index(index), host_values))


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


def arg_reduce(a, op: str, axis: int | None, keepdim: bool):
    """``argmax``/``argmin`` as int64 (``axis`` None flattens)."""
    if a.ndim == 0:
        return dev.zeros((), np.int64)
    src = dev.ascontiguous(_single(a))
    if axis is None:
        out = dev.empty((1, 1), np.int64)
        _launch(_arg_kernel, 1, src.reshape(1, src.size, 1), op == "argmax", out)
        return out.reshape((1,) * a.ndim if keepdim else ())
    axis = axis % a.ndim
    shape = tuple(a.shape)
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    out = dev.empty((outer, inner), np.int64)
    _launch(_arg_kernel, out.size, _three_d(src, axis), op == "argmax", out)
    kept = shape[:axis] + ((1,) if keepdim else ()) + shape[axis + 1 :]
    return out.reshape(kept)


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


def cumulative(a, op: str, dim: int, dtype):
    """``cumsum`` or ``cumprod`` along ``dim`` in ``dtype``; floats accumulate in float64, as torch's CPU kernel."""
    dtype = np.dtype(dtype)
    if a.ndim == 0:
        return dev.astype(a, dtype)
    work = np.dtype(np.float64) if dtype.kind == "f" else dtype
    src = dev.astype(a, work)
    out = dev.empty(tuple(a.shape), work)
    if a.size:
        s3 = _three_d(src, dim)
        _launch(_scan_kernel, s3.shape[0] * s3.shape[2], s3, op == "cumprod", _three_d(out, dim))
    return out if work == dtype else dev.astype(out, dtype)


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


def sort(a, dim: int, descending: bool):
    """Stable sort along ``dim``: (values, int64 indices); NaN sorts as the largest value."""
    if a.ndim == 0:
        return dev.copy(a), dev.zeros((), np.int64)
    half = a.dtype == _HALF
    src = dev.ascontiguous(_single(a))
    values = dev.empty(tuple(a.shape), src.dtype)
    indices = dev.empty(tuple(a.shape), np.int64)
    if a.size:
        s3 = _three_d(src, dim)
        _launch(_sort_kernel, s3.shape[0] * s3.shape[2], s3, bool(descending), _three_d(values, dim),
                _three_d(indices, dim))  # fmt: skip
    return _half_back(values, half), indices


def topk(a, k: int, dim: int, largest: bool):
    """The first ``k`` of a stable sort along ``dim`` (descending for ``largest``): (values, int64 indices)."""
    values, indices = sort(a, dim, largest)
    cut = tuple(slice(0, k) if d == dim else slice(None) for d in range(a.ndim))
    return dev.copy(dev._basic_view(values, cut)), dev.copy(dev._basic_view(indices, cut))


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


def triangle(a, upper: bool, diagonal: int):
    """``triu``/``tril`` of the last two dims: the other triangle zeroed."""
    shape = tuple(a.shape)
    src = dev.ascontiguous(a).reshape(math.prod(shape[:-2]), shape[-2], shape[-1])
    out = dev.empty(shape, a.dtype)
    _launch(_triangle_kernel, a.size, src, bool(upper), int(diagonal), out.reshape(src.shape))
    return out


def flip(a, dims: tuple):
    """A contiguous copy of ``a`` reversed along ``dims`` (a negative-stride view, copied by the strided copy)."""
    return dev.copy(dev._view(a, lambda v: np.flip(v, tuple(dims))))
