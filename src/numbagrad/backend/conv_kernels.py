"""The CPU kernels of a stride-1 single-group convolution (``cpu.conv2d``, and ``cpu.conv2d_backward``'s input
gradient, itself such a convolution, and its weight gradient): the products read each sample's zero-padded input
in place, with no columns (im2col) made.

im2col writes each input value ``kh * kw`` times, and then a product reads them all again: at the U-Net's (4, 48,
16, 16) by (16, 48, 3, 3), float32, one thread, about 25 us of columns per sample against 45 of product; and
OpenBLAS multiplies a few output channels' rows slowly (30 GF/s at 8 channels). Here the output is computed on
the padded input's grid: output position ``(y, z)`` is ``l = y * Wp + z``, ``Wp`` the padded width, and the value
of tap ``k = (c, i, j)`` it needs is ``padded[c, y + i*dh, z + j*dw]``, which is ``padded_flat[offset[k] + l]``.
So for each tap, consecutive positions are consecutive in memory: ``row_products``' register block runs with a
table of the taps' offsets (``block_intrinsic(row_table=True)``) in place of ``b``'s row stride, over the grid's
positions in panels of its width, for blocks of output channels. Grid columns past the output's width (``z >=
OW``: ``dw * (kw - 1)`` of each ``Wp``) are computed and dropped: 6-13% more products at the U-Net's and the
cnn's sizes. Valid outputs read only the padded copy's own values; the dropped ones may read its zeroed tail.

Per sample: the padded copy (its border zeroed once per thread), the products into a grid buffer, then the
valid positions into ``out`` with the bias added. The samples are shared among threads (``share_<kind>``,
``cpu_threads.run_compiled``); each output is the same bits on any thread count. Sums run in the operands'
precision along the taps in order, as BLAS does. Output channels run in blocks of 4 where they are a multiple of
4, else of 5 (the weight zero-padded to a multiple).

The weight's gradient (``weight_grad``) is, per tap ``(i, j)``, ``g_grid @ x_shifted``: ``g`` laid on the same
grid (zeros at the dropped positions, so they add nothing), the samples' grids one after another as the shared
dimension, and the input channels-last on its padded grid, shifted by the tap's ``i*dh*Wp + j*dw`` positions: its
rows are consecutive in memory at a stride of the channels, so the register block reads it in place, the input
channels its columns (padded to whole SIMD vectors), the output channels its rows. The (tap, block of rows) units
are shared among threads. It runs where a tap's operands fit a core's cache (``weight_grad_pays``).

This module's text holds ``row_products``' digest: its intrinsics are compiled into these loops.
"""

from __future__ import annotations

import numpy as np

from . import codegen, cpu_threads, row_products

#: The fields of a call (one ``int64`` row): the operands' addresses (every array C-contiguous; a zero address
#: for no bias), the sizes, and the range of samples a thread runs.
NAMES = ("x", "weight", "bias", "out", "offsets", "batch", "channels", "height", "width", "outputs", "rows", "depth",
         "top", "left", "padded_height", "padded_width", "out_height", "out_width", "first", "count")  # fmt: skip
(X, WEIGHT, BIAS, OUT, OFFSETS, BATCH, CHANNELS, HEIGHT, WIDTH, OUTPUTS, ROWS, DEPTH, TOP, LEFT, PADDED_HEIGHT,
 PADDED_WIDTH, OUT_HEIGHT, OUT_WIDTH, FIRST, COUNT) = range(len(NAMES))  # fmt: skip
SIZE = len(NAMES)

#: The fields of a weight gradient's call: the addresses of ``g`` on the padded grid (rows, N*Hp*Wp), the input
#: channels-last on that grid (N*Hp*Wp + tail, Cp) and the taps' products (kh*kw, rows, Cp); the sizes; the range
#: of (tap, block of rows) units a thread runs.
GRAD_NAMES = ("grid", "channels_last", "result", "grad_rows", "block_rows", "grad_depth", "columns", "kw",
              "row_step", "column_step", "units_first", "units_count")  # fmt: skip
(GRID, CHANNELS_LAST, RESULT, GRAD_ROWS, BLOCK_ROWS, GRAD_DEPTH, COLUMNS, KW, ROW_STEP, COLUMN_STEP, UNITS_FIRST,
 UNITS_COUNT) = range(len(GRAD_NAMES))  # fmt: skip
GRAD_SIZE = len(GRAD_NAMES)

#: The fewest multiply-adds (over all samples) worth sharing among threads: a hand-off costs a few microseconds.
_SHARED_WORK = 1 << 18

_SOURCE = """
BLOCK4_KIND = row_products.block_intrinsic("KIND", 4, VECTORS, VECTOR_BYTES, True)
BLOCK5_KIND = row_products.block_intrinsic("KIND", 5, VECTORS, VECTOR_BYTES, True)
AT_KIND = codegen.address_intrinsic()


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False)
def forward_KIND(f, first, count):
    channels, height, width, outputs = f[CHANNELS], f[HEIGHT], f[WIDTH], f[OUTPUTS]
    rows, depth, top, left = f[ROWS], f[DEPTH], f[TOP], f[LEFT]
    padded_height, padded_width, out_height, out_width = f[PADDED_HEIGHT], f[PADDED_WIDTH], f[OUT_HEIGHT], f[OUT_WIDTH]
    x = carray(AT_KIND(f[X]), (f[BATCH], channels, height, width), np.DTYPE)
    out = carray(AT_KIND(f[OUT]), (f[BATCH], outputs, out_height, out_width), np.DTYPE)
    plane = padded_height * padded_width
    grid_size = out_height * padded_width
    panels = -(-grid_size // PANEL)
    # (a tail past the planes: the last panel's dropped positions read it)
    padded = np.zeros(channels * plane + PANEL + padded_width, np.DTYPE)
    grid = np.empty((rows, panels * PANEL), np.DTYPE)
    # the input rows and columns inside the padded grid (negative padding crops)
    h0, h1 = max(0, -top), min(height, padded_height - top)
    w0, w1 = max(0, -left), min(width, padded_width - left)
    weight, offsets = f[WEIGHT], f[OFFSETS]
    for n in range(first, first + count):
        for c in range(channels):
            for h in range(h0, h1):
                start = c * plane + (h + top) * padded_width + left
                for w in range(w0, w1):
                    padded[start + w] = x[n, c, h, w]
        for p in range(panels):
            source = padded.ctypes.data + BYTES * p * PANEL
            for r in range(0, rows, 4 if rows % 4 == 0 else 5):
                target = grid.ctypes.data + BYTES * (r * panels * PANEL + p * PANEL)
                if rows % 4 == 0:
                    BLOCK4_KIND(weight + BYTES * r * depth, depth, 1, source, offsets, target, panels * PANEL, depth)
                else:
                    BLOCK5_KIND(weight + BYTES * r * depth, depth, 1, source, offsets, target, panels * PANEL, depth)
        for o in range(outputs):
            shift = carray(AT_KIND(f[BIAS]), (outputs,), np.DTYPE)[o] if f[BIAS] != 0 else np.DTYPE(0)
            for y in range(out_height):
                for z in range(out_width):
                    out[n, o, y, z] = grid[o, y * padded_width + z] + shift


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True)
def share_KIND(args):
    f = carray(args, (SIZE,), np.int64)
    forward_KIND(f, f[FIRST], f[COUNT])


PLAIN4_1_KIND = row_products.block_intrinsic("KIND", 4, 1, VECTOR_BYTES)
PLAIN4_2_KIND = row_products.block_intrinsic("KIND", 4, 2, VECTOR_BYTES)
PLAIN4_3_KIND = row_products.block_intrinsic("KIND", 4, 3, VECTOR_BYTES)
PLAIN4_4_KIND = row_products.block_intrinsic("KIND", 4, 4, VECTOR_BYTES)
PLAIN8_1_KIND = row_products.block_intrinsic("KIND", 8, 1, VECTOR_BYTES)
PLAIN8_2_KIND = row_products.block_intrinsic("KIND", 8, 2, VECTOR_BYTES)


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False)
def weight_grad_KIND(f, first, count):
    rows, step, depth, columns, kw = f[GRAD_ROWS], f[BLOCK_ROWS], f[GRAD_DEPTH], f[COLUMNS], f[KW]
    vectors, blocks = columns // LANES, rows // step
    for unit in range(first, first + count):
        tap, block = unit // blocks, unit - (unit // blocks) * blocks
        i, j = tap // kw, tap - (tap // kw) * kw
        r = block * step
        a = f[GRID] + BYTES * r * depth
        for v in range(0, vectors, 4):  # (four vectors of columns at a time: a block's most)
            width = min(4, vectors - v)
            b = f[CHANNELS_LAST] + BYTES * ((i * f[ROW_STEP] + j * f[COLUMN_STEP]) * columns + v * LANES)
            out = f[RESULT] + BYTES * ((tap * rows + r) * columns + v * LANES)
            if step == 8:
                if width == 1:
                    PLAIN8_1_KIND(a, depth, 1, b, columns, out, columns, depth)
                else:
                    PLAIN8_2_KIND(a, depth, 1, b, columns, out, columns, depth)
            elif width == 1:
                PLAIN4_1_KIND(a, depth, 1, b, columns, out, columns, depth)
            elif width == 2:
                PLAIN4_2_KIND(a, depth, 1, b, columns, out, columns, depth)
            elif width == 3:
                PLAIN4_3_KIND(a, depth, 1, b, columns, out, columns, depth)
            else:
                PLAIN4_4_KIND(a, depth, 1, b, columns, out, columns, depth)


@njit(cache=CACHE, nogil=True, boundscheck=False)
def grad_operands_KIND(x, g, top, left, grid, channels_last):
    # g onto the padded grid (rows, N, Hp, Wp), and x channels-last on it ((N * Hp * Wp + tail, Cp)); both
    # zeroed by the caller
    batch, channels, height, width = x.shape
    outputs, out_height, out_width = g.shape[1], g.shape[2], g.shape[3]
    padded_height, padded_width = grid.shape[2], grid.shape[3]
    for o in range(outputs):
        for n in range(batch):
            for y in range(out_height):
                copy_row_KIND(g[n, o, y], grid[o, n, y, :out_width])
    h0, h1 = max(0, -top), min(height, padded_height - top)
    w0, w1 = max(0, -left), min(width, padded_width - left)
    for n in range(batch):
        for h in range(h0, h1):
            row = (n * padded_height + h + top) * padded_width + left
            transpose_KIND(x[n, :, h, w0:w1], channels_last[row + w0 : row + w1, :channels])


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True)
def share_grad_KIND(args):
    f = carray(args, (GRAD_SIZE,), np.int64)
    weight_grad_KIND(f, f[UNITS_FIRST], f[UNITS_COUNT])
"""

_module = None
_FLOAT32 = np.dtype(np.float32)


def _kind_source(kind: str) -> str:
    """The loops for ``kind`` (``"f32"`` or ``"f64"``): its dtype, element size and panel width."""
    words = row_products.kind_words(kind)
    words.update(PANEL=str(row_products.panel_width(np.dtype(words["DTYPE"]))))
    return codegen.kind_source(row_products.ROW_COPIES + _SOURCE, kind, words)


def _loops():
    """The compiled module (built once per process; its kernels come from Numba's disk cache)."""
    global _module
    if _module is None:
        constants = {"VECTORS": row_products.VECTORS, "VECTOR_BYTES": row_products.vector_bytes(), "SIZE": SIZE}
        constants.update({name.upper(): index for index, name in enumerate(NAMES)})
        constants.update({name.upper(): index for index, name in enumerate(GRAD_NAMES)}, GRAD_SIZE=GRAD_SIZE)
        header = row_products.kernel_header(constants)
        _module = codegen.load_module("conv_stride1", "\n\n".join([header, _kind_source("f32"), _kind_source("f64")]))
    return _module


def forward_pays(dtype: np.dtype, batch: int, channels: int, outputs: int, kernel: tuple, dilation: tuple,
                 out_hw: tuple, columns: int | None = None) -> bool:  # fmt: skip
    """Does this kernel beat im2col and BLAS on a stride-1 convolution of ``batch`` samples of ``channels`` into
    ``outputs`` channels of ``out_hw`` positions? Measured (float32, 1 and 2 threads, interleaved): where the taps
    are many (at least 64), the work large enough for its setup (2 million multiply-adds), the grid's panels mostly
    outputs (three quarters), the output channels few (at most 64) and the grid's extra products few against the
    columns' (at most 1.15x): the U-Net's (4, 48, 16, 16) by (16, 48, 3, 3) forward 0.64-0.72 of the old time, its
    (4, 24, 32, 32) by (8, 24, 3, 3) 0.39-0.42 and their input gradients 0.68-0.99 and 0.54-0.66, the cnn's (64,
    32, 26, 26) by (64, 32, 3, 3) forward 0.93-0.94; at 9 taps (the cnn's first convolution) 1.2-1.8x, at (4, 16,
    8, 8) by (32, 16, 3, 3) (80 grid positions in two panels of 64) 1.3-1.6x, and the cnn's input gradient (26 x 28
    grid positions against 24 x 24 columns) 1.1-1.2x. Float32 or float64, on a host with AVX-512
    (``row_products.measured_host``). ``columns``: the positions the columns' product it replaces runs over (for
    an input gradient, the output's; by default ``out_hw``'s)."""
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)) or not row_products.measured_host():
        return False
    (kh, kw), (_, dw), (out_height, out_width) = kernel, dilation, out_hw
    depth, grid = channels * kh * kw, out_height * (out_width + dw * (kw - 1))
    rows = -(-outputs // (4 if outputs % 4 == 0 else 5)) * (4 if outputs % 4 == 0 else 5)
    panel = row_products.panel_width(np.dtype(dtype))
    work = batch * rows * depth * grid
    return (
        depth >= 64
        and outputs <= 64
        and work >= 1 << 21
        and grid >= 0.75 * (-(-grid // panel) * panel)
        and work <= 1.15 * batch * outputs * depth * (out_height * out_width if columns is None else columns)
    )


def forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, padding: tuple, dilation: tuple,
            out: np.ndarray) -> None:  # fmt: skip
    """``out`` (N, O, OH, OW) = the stride-1 convolution of the (N, C, H, W) ``x`` by ``weight`` (O, C, kh, kw),
    plus ``bias`` (O,) or None, ``padding`` the (top, left) offset (negative: cropped), ``dilation`` (dh, dw).
    ``x`` and ``out`` C-contiguous, all of one dtype, float32 or float64."""
    outputs, channels, kh, kw = weight.shape
    (top, left), (dh, dw) = padding, dilation
    out_height, out_width = out.shape[2:]
    padded_height, padded_width = out_height + dh * (kh - 1), out_width + dw * (kw - 1)
    step = 4 if outputs % 4 == 0 else 5
    rows, depth = -(-outputs // step) * step, channels * kh * kw
    blocks = np.zeros((rows, depth), x.dtype)  # (the rows past the output channels' stay zero)
    blocks[:outputs] = weight.reshape(outputs, depth)
    taps = np.arange(channels)[:, None, None] * (padded_height * padded_width)
    taps = taps + np.arange(kh)[:, None] * (dh * padded_width) + np.arange(kw) * dw
    offsets = np.ascontiguousarray(taps.reshape(-1), np.int64)
    f = np.zeros(SIZE, np.int64)
    f[X], f[WEIGHT], f[OUT], f[OFFSETS] = x.ctypes.data, blocks.ctypes.data, out.ctypes.data, offsets.ctypes.data
    shift = None if bias is None else np.ascontiguousarray(bias, x.dtype)  # (alive until the loop ends)
    f[BIAS] = 0 if shift is None else shift.ctypes.data
    f[BATCH : OUTPUTS + 1] = (*x.shape, outputs)
    f[ROWS : COUNT + 1] = (rows, depth, top, left, padded_height, padded_width, out_height, out_width, 0, len(x))
    kind = "f32" if x.dtype == _FLOAT32 else "f64"
    module = _loops()
    work = len(x) * rows * depth * out_height * padded_width
    threads = min(cpu_threads.free_threads(), len(x)) if work >= _SHARED_WORK else 1
    if threads <= 1:
        getattr(module, "forward_" + kind)(f, 0, len(x))
        return
    cpu_threads.run_compiled_shares(getattr(module, "share_" + kind).address, f, FIRST, COUNT, len(x), threads)


def _grid(dtype: np.dtype, channels: int, out_hw: tuple, kernel: tuple, dilation: tuple) -> tuple:
    """The padded grid's (Hp, Wp), and the channels padded to whole SIMD vectors with their vectors."""
    lanes = row_products.vector_bytes() // np.dtype(dtype).itemsize
    padded = -(-channels // lanes) * lanes
    sizes = tuple(size + d * (k - 1) for size, d, k in zip(out_hw, dilation, kernel))
    return sizes, padded, padded // lanes


def _grad_rows(outputs: int, vectors: int) -> tuple:
    """The weight gradient's rows (the output channels, zero-padded to a whole block) and its block's rows: 8
    where the block is at most two vectors wide (16 sums) and they are a multiple of 8, else 4."""
    step = 8 if vectors <= 2 and outputs % 8 == 0 else 4
    return -(-outputs // step) * step, step


def weight_grad_pays(dtype: np.dtype, batch: int, channels: int, outputs: int, kernel: tuple, dilation: tuple,
                     out_hw: tuple) -> bool:  # fmt: skip
    """Does ``weight_grad`` beat the columns' products on this stride-1 convolution? Where the input channels
    fill whole SIMD vectors (three quarters of their lanes, at most four vectors), the work is large enough for
    its setup (a million multiply-adds), and a tap's operands (its grid rows of ``g`` and the input channels-last)
    stay in a core's second-level cache (1 MiB). Measured (float32, interleaved, 1 and 2 threads): the U-Net's
    (4, 48, 16, 16) by (16, 48, 3, 3) 0.64-0.69 of the columns' time, (4, 24, 32, 32) by (8, 24, 3, 3) 0.61-0.88,
    (4, 16, 8, 8) by (32, 16, 3, 3) 0.71-0.73; the cnn's (64, 32, 26, 26) by (64, 32, 3, 3), whose taps' operands
    are 6.9 MiB, 1.2-1.6x."""
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)) or not row_products.measured_host():
        return False
    (height, width), padded, vectors = _grid(dtype, channels, out_hw, kernel, dilation)
    rows, step = _grad_rows(outputs, vectors)
    work = rows * padded * batch * height * width * kernel[0] * kernel[1]
    tap_bytes = batch * height * width * (step + padded) * np.dtype(dtype).itemsize
    return vectors <= 4 and channels >= 0.75 * padded and work >= 1 << 20 and tap_bytes <= 1 << 20


def weight_grad(x: np.ndarray, g: np.ndarray, kernel: tuple, padding: tuple, dilation: tuple) -> np.ndarray:
    """The weight's gradient (O, C, kh, kw) of the stride-1 convolution of the (N, C, H, W) ``x`` whose output's
    gradient is ``g`` (N, O, OH, OW), ``padding`` the (top, left) offset: for each tap ``(i, j)``,
    ``g_grid @ x_shifted``, ``g`` laid on the padded input's grid (zeros past the output) and the input
    channels-last on it, shifted by the tap (``i*dh*Wp + j*dw`` positions): a product as deep as the samples'
    grids, whose rows are the output channels and whose columns are the input channels, ``row_products``'
    register block reading both in place. (N, C, H, W) and (N, O, OH, OW) of one dtype, C-contiguous or made so
    (their rows are copied onto the grid in whole vectors)."""
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    batch, channels, height, width = x.shape
    outputs, out_hw = g.shape[1], g.shape[2:]
    (padded_height, padded_width), columns, _ = _grid(x.dtype, channels, out_hw, kernel, dilation)
    plane, (top, left), (dh, dw) = padded_height * padded_width, padding, dilation
    rows, step = _grad_rows(outputs, columns // (row_products.vector_bytes() // x.itemsize))
    grid = np.zeros((rows, batch, padded_height, padded_width), x.dtype)
    tail = dh * (kernel[0] - 1) * padded_width + dw * (kernel[1] - 1)  # (the last tap reads this far past)
    channels_last = np.zeros((batch * plane + tail, columns), x.dtype)
    kind = "f32" if x.dtype == _FLOAT32 else "f64"
    module = _loops()
    getattr(module, "grad_operands_" + kind)(x, g, top, left, grid, channels_last)
    taps = kernel[0] * kernel[1]
    result = np.empty((taps, rows, columns), x.dtype)
    f = np.zeros(GRAD_SIZE, np.int64)
    f[GRID], f[CHANNELS_LAST], f[RESULT] = grid.ctypes.data, channels_last.ctypes.data, result.ctypes.data
    f[GRAD_ROWS : COLUMN_STEP + 1] = (rows, step, batch * plane, columns, kernel[1], dh * padded_width, dw)
    units = taps * (rows // step)
    threads = min(cpu_threads.free_threads(), units) if rows * columns * batch * plane * taps >= _SHARED_WORK else 1
    if threads <= 1:
        getattr(module, "weight_grad_" + kind)(f, 0, units)
    else:
        share = getattr(module, "share_grad_" + kind).address
        cpu_threads.run_compiled_shares(share, f, UNITS_FIRST, UNITS_COUNT, units, threads)
    return np.ascontiguousarray(result[:, :outputs, :channels].transpose(1, 2, 0)).reshape(outputs, channels, *kernel)
