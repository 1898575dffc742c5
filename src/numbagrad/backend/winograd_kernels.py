"""Winograd's minimal filtering F(2x2, 3x3) on the CPU: a stride-1, undilated, single-group 3x3 convolution
(``cpu.conv2d``), its input gradient (the same convolution of the output's gradient by the flipped kernel) and
its weight gradient, in 16 multiply-adds per 2x2 block of outputs and pair of channels where the direct product
(``conv_kernels``, or im2col and BLAS) needs 36.

The output is cut into 2x2 tiles, each read from a 4x4 tile of the zero-padded input. With ``B^T``, ``G`` and
``A^T`` the transforms below, a tile's output is ``A^T [(G w G^T) * (B^T d B)] A`` summed over the input
channels: for each of the 16 positions ``k`` of the transformed 4x4 tiles, a product ``U_k @ V_k`` of the
transformed kernel (output channels x input channels) by the tiles' transformed inputs (input channels x tiles),
run by ``row_products``' register block (rows: 4 or 5 output channels; columns: 4 SIMD vectors of tiles). Per
sample, a block of 4 vectors' tiles at a time: their inputs transformed, the 16 products, their outputs
transformed back into ``out`` with the bias; the block's operands stay in the first two levels of cache. The
(sample, block) units are shared among threads, whole samples each where there are as many as threads (a thread
running part of a sample pads only the input rows its blocks read); each output is the same bits on any thread
count.

The weight's gradient is that product's transpose: ``G^T [sum over tiles of (A g A^T) * (B^T d B)] G``, for each
``k`` a product of the tiles' transformed inputs (input channels x tiles) by their transformed output gradients
(tiles x output channels), summed along the tiles chunk by chunk into 16 (input, output) matrices
(``block_intrinsic(accumulate=True)``). The (sample, block) units are cut into spans fixed by the shapes (whole
samples from ``_WHOLE_SAMPLES`` on), each summed on its own (the spans shared among threads) and the spans' sums
added in order, so the result is the same bits on any thread count too.

Precision: the transforms' coefficients are 0, 1 and 1/2, exact in binary. Compared with a float64 reference,
float32 results are as close as the direct product's (max error 3-4e-7 of the largest output, the direct
7e-7, at the cnn's (8, 32, 26, 26) by (64, 32, 3, 3)); the larger F(4x4, 3x3), 4x fewer products, was 10x
further (6e-6) and is not used.

This module's text holds ``row_products``' digest: its intrinsics are compiled into these loops.
"""

from __future__ import annotations

import numpy as np

from . import codegen, cpu_threads, row_products

#: ``B^T``: a 4x4 input tile ``d`` to ``B^T d B``.
INPUT_TRANSFORM = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
#: ``G``: a 3x3 kernel ``w`` to ``G w G^T``.
KERNEL_TRANSFORM = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
#: ``A^T``: the 4x4 product ``m`` back to the 2x2 outputs ``A^T m A``.
OUTPUT_TRANSFORM = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)

#: The fields of a forward call (one ``int64`` row): the operands' addresses (every array C-contiguous; a zero
#: address for no bias), the sizes (``rows``: the output channels zero-padded to whole register blocks in the
#: transformed kernel), the (top, left) padding, and the range of (sample, block of tiles) units a thread runs.
NAMES = ("x", "kernel", "bias", "out", "batch", "channels", "height", "width", "outputs", "rows", "top", "left",
         "out_height", "out_width", "first", "count")  # fmt: skip
(X, KERNEL, BIAS, OUT, BATCH, CHANNELS, HEIGHT, WIDTH, OUTPUTS, ROWS, TOP, LEFT, OUT_HEIGHT, OUT_WIDTH, FIRST,
 COUNT) = range(len(NAMES))  # fmt: skip
SIZE = len(NAMES)

#: The fields of a weight gradient's call: as the forward's (``g`` in place of ``x``'s output, the spans' sums
#: (spans, 16, rows, columns) in place of the kernel), ``rows`` the input channels zero-padded to whole register
#: blocks and ``columns`` the output channels to whole SIMD vectors, the number of spans, the units their bounds
#: are multiples of (a sample's blocks, or 1), and the range of spans a thread runs.
GRAD_NAMES = ("x", "g", "sums", "batch", "channels", "height", "width", "outputs", "rows", "columns", "top", "left",
              "out_height", "out_width", "spans", "whole", "first", "count")  # fmt: skip
(GRAD_X, GRAD_G, GRAD_SUMS, GRAD_BATCH, GRAD_CHANNELS, GRAD_HEIGHT, GRAD_WIDTH, GRAD_OUTPUTS, GRAD_ROWS,
 GRAD_COLUMNS, GRAD_TOP, GRAD_LEFT, GRAD_OUT_HEIGHT, GRAD_OUT_WIDTH, GRAD_SPANS, GRAD_WHOLE, GRAD_FIRST,
 GRAD_COUNT) = range(len(GRAD_NAMES))  # fmt: skip
GRAD_SIZE = len(GRAD_NAMES)

#: The fewest multiply-adds (over all samples) worth sharing among threads: a hand-off costs a few microseconds.
_SHARED_WORK = 1 << 18

#: The most spans the weight gradient's units are cut into, and the most bytes all their sums take: each span's
#: sums are zeroed, summed into and added up (at a single (64, 56, 56) sample, 8 spans took 3.1 ms, 4 2.4).
_SPANS = 4
_SUMS_BYTES = 1 << 22

#: The fewest samples the weight gradient's spans are whole samples of (below, blocks of tiles).
_WHOLE_SAMPLES = 4


def input_intrinsic(kind: str, vector_bytes: int):
    """A Numba intrinsic ``tiles_in(rows, row_stride, out, k_stride)`` (addresses as integers, strides in
    elements): ``B^T d B`` of one SIMD vector's ``lanes`` consecutive tiles of a row of tiles, tile ``s`` reading
    columns ``2s .. 2s + 3`` of the four rows at ``rows + i * row_stride``, written as 16 vectors at ``out + k *
    k_stride``. It reads ``2 * lanes + 2`` values of each row. Each row's four columns per tile are two vectors'
    even and odd lanes, at offsets 0 and 2: where LLVM's own vectorizer leaves this loop scalar (its 16 stores
    and stride-2 loads), 2 ns a transformed value at the cnn's sizes."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    _, size, lanes, vector, pointer = row_products.ir_types(kind, vector_bytes)
    i64, i32 = ir.IntType(64), ir.IntType(32)
    evens = ir.Constant(ir.VectorType(i32, lanes), [2 * i for i in range(lanes)])
    odds = ir.Constant(ir.VectorType(i32, lanes), [2 * i + 1 for i in range(lanes)])

    def codegen_tiles(context, builder, signature, args):
        rows_address, row_stride, out_address, k_stride = args
        rows, out = builder.inttoptr(rows_address, pointer), builder.inttoptr(out_address, pointer)

        def at(start, offset):
            return builder.bitcast(builder.gep(start, [offset]), vector.as_pointer())

        columns = []  # columns[i][j]: column j of each tile's row i
        for i in range(4):
            row = builder.gep(rows, [builder.mul(ir.Constant(i64, i), row_stride)])
            low, high = (builder.load(at(row, ir.Constant(i64, offset)), align=size) for offset in (0, lanes))
            low2, high2 = (builder.load(at(row, ir.Constant(i64, offset)), align=size) for offset in (2, 2 + lanes))
            pairs = ((low, high, evens), (low, high, odds), (low2, high2, evens), (low2, high2, odds))
            columns.append([builder.shuffle_vector(first, second, mask) for first, second, mask in pairs])
        d0, d1, d2, d3 = columns
        mixed = [  # B^T d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3
            [builder.fsub(d0[j], d2[j]) for j in range(4)],
            [builder.fadd(d1[j], d2[j]) for j in range(4)],
            [builder.fsub(d2[j], d1[j]) for j in range(4)],
            [builder.fsub(d1[j], d3[j]) for j in range(4)],
        ]
        for i, (e0, e1, e2, e3) in enumerate(mixed):  # (B^T d) B: the same along each row
            for j, value in enumerate((builder.fsub(e0, e2), builder.fadd(e1, e2), builder.fsub(e2, e1),
                                       builder.fsub(e1, e3))):  # fmt: skip
                builder.store(value, at(out, builder.mul(ir.Constant(i64, 4 * i + j), k_stride)), align=size)
        return context.get_dummy_value()

    def typer(typingctx, rows, row_stride, out, k_stride):
        return types.void(*([types.intp] * 4)), codegen_tiles

    return intrinsic(typer)


def output_intrinsic(kind: str, vector_bytes: int):
    """A Numba intrinsic ``tiles_out(m, k_stride, shift, out, out_row)`` (addresses as integers, strides in
    elements, ``shift`` a scalar of the kind): ``A^T m A + shift`` of one SIMD vector's ``lanes`` consecutive
    tiles, their 16 products read as vectors at ``m + k * k_stride``, their 2x2 outputs written as two rows of
    ``2 * lanes`` values at ``out`` and ``out + out_row`` (the left and right columns interleaved)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    element, size, lanes, vector, pointer = row_products.ir_types(kind, vector_bytes)
    i64, i32 = ir.IntType(64), ir.IntType(32)
    interleaved = [ir.Constant(ir.VectorType(i32, lanes), [i // 2 + (i % 2) * lanes for i in range(h, h + lanes)])
                   for h in (0, lanes)]  # fmt: skip

    def codegen_tiles(context, builder, signature, args):
        m_address, k_stride, shift, out_address, out_row = args
        m, out = builder.inttoptr(m_address, pointer), builder.inttoptr(out_address, pointer)

        def at(start, offset):
            return builder.bitcast(builder.gep(start, [offset]), vector.as_pointer())

        p = [builder.load(at(m, builder.mul(ir.Constant(i64, k), k_stride)), align=size) for k in range(16)]
        undefined = ir.Constant(vector, ir.Undefined)
        splat = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
        shifts = builder.shuffle_vector(builder.insert_element(undefined, shift, ir.Constant(i32, 0)), undefined, splat)
        top = [builder.fadd(builder.fadd(p[j], p[4 + j]), p[8 + j]) for j in range(4)]  # A^T m: rows 0+1+2,
        bottom = [builder.fsub(builder.fsub(p[4 + j], p[8 + j]), p[12 + j]) for j in range(4)]  # 1-2-3
        for r, (s0, s1, s2, s3) in enumerate((top, bottom)):  # (A^T m) A, the same along each row
            left = builder.fadd(builder.fadd(builder.fadd(s0, s1), s2), shifts)
            right = builder.fadd(builder.fsub(builder.fsub(s1, s2), s3), shifts)
            row = builder.gep(out, [builder.mul(ir.Constant(i64, r), out_row)])
            for h, mask in enumerate(interleaved):
                value = builder.shuffle_vector(left, right, mask)
                builder.store(value, at(row, ir.Constant(i64, h * lanes)), align=size)
        return context.get_dummy_value()

    def typer(typingctx, m, k_stride, shift, out, out_row):
        scalar = types.float32 if kind == "f32" else types.float64
        return types.void(types.intp, types.intp, scalar, types.intp, types.intp), codegen_tiles

    return intrinsic(typer)


def gradient_intrinsic(kind: str, vector_bytes: int):
    """A Numba intrinsic ``tile_grad(g, column_stride, row_stride, out, k_stride)`` (addresses as integers,
    strides in elements): ``A g A^T`` of one tile's 2x2 output gradients for a SIMD vector of channels, ``g``
    channels-last (the tile's four values a column and a row stride apart), written as 16 vectors at ``out + k *
    k_stride``."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    _, size, lanes, vector, pointer = row_products.ir_types(kind, vector_bytes)
    i64 = ir.IntType(64)

    def codegen_tile(context, builder, signature, args):
        g_address, column_stride, row_stride, out_address, k_stride = args
        g, out = builder.inttoptr(g_address, pointer), builder.inttoptr(out_address, pointer)

        def at(start, offset):
            return builder.bitcast(builder.gep(start, [offset]), vector.as_pointer())

        lower = builder.gep(g, [row_stride])
        g00, g01 = builder.load(at(g, ir.Constant(i64, 0)), align=size), builder.load(at(g, column_stride), align=size)
        g10 = builder.load(at(lower, ir.Constant(i64, 0)), align=size)
        g11 = builder.load(at(lower, column_stride), align=size)
        negated = [builder.fneg(g10), builder.fneg(g11)]
        rows = [  # A g: rows g0, g0 + g1, g0 - g1, -g1
            (g00, g01),
            (builder.fadd(g00, g10), builder.fadd(g01, g11)),
            (builder.fsub(g00, g10), builder.fsub(g01, g11)),
            tuple(negated),
        ]
        for i, (a0, a1) in enumerate(rows):  # (A g) A^T: the same along each row
            for j, value in enumerate((a0, builder.fadd(a0, a1), builder.fsub(a0, a1), builder.fneg(a1))):
                builder.store(value, at(out, builder.mul(ir.Constant(i64, 4 * i + j), k_stride)), align=size)
        return context.get_dummy_value()

    def typer(typingctx, g, column_stride, row_stride, out, k_stride):
        return types.void(*([types.intp] * 5)), codegen_tile

    return intrinsic(typer)


def intrinsics_digest() -> str:
    """The digest of this module's intrinsics' code, for its compiled module's text (see
    ``row_products.intrinsics_digest``)."""
    import hashlib
    import inspect

    intrinsics = (input_intrinsic, output_intrinsic, gradient_intrinsic)
    code = "".join(inspect.getsource(f) for f in intrinsics)
    return hashlib.sha1(code.encode()).hexdigest()[:16]


_SOURCE = """
AT_KIND = codegen.address_intrinsic()
TILES_IN_KIND = winograd_kernels.input_intrinsic("KIND", VECTOR_BYTES)
TILES_OUT_KIND = winograd_kernels.output_intrinsic("KIND", VECTOR_BYTES)
TILE_GRAD_KIND = winograd_kernels.gradient_intrinsic("KIND", VECTOR_BYTES)


@njit(inline='always')
def padded_planes_KIND(channels, tile_rows, tile_columns):
    # zeroed (channels, 2 * tile_rows + 2, 2 * tile_columns + 2) planes, with a tail the last tiles' vectors read
    height, width = 2 * tile_rows + 2, 2 * tile_columns + 2
    flat = np.zeros(channels * height * width + 2 * LANES + 2, np.DTYPE)
    return flat[: channels * height * width].reshape((channels, height, width))


@njit(inline='always')
def pad_sample_KIND(x, n, top, left, padded, first_row, end_row):
    # rows first_row:end_row of sample n of x on the zero-bordered padded planes (negative padding crops; the
    # border is never written)
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    h0, h1 = max(0, -top, first_row - top), min(height, padded.shape[1] - top, end_row - top)
    w0, w1 = max(0, -left), min(width, padded.shape[2] - left)
    for c in range(channels):
        for h in range(h0, h1):
            copy_row_KIND(x[n, c, h, w0:w1], padded[c, h + top, w0 + left : w1 + left])


@njit(inline='always')
def tile_rows_of_KIND(unit, end, blocks, tiles, tile_columns):
    # the rows of tiles that units unit..end (within unit's sample) cover: (first, end)
    last = min(end, (unit // blocks + 1) * blocks) - 1
    first_tile, last_tile = (unit % blocks) * TILES, min(tiles, (last % blocks + 1) * TILES) - 1
    return first_tile // tile_columns, last_tile // tile_columns + 1


@njit(inline='always')
def tile_run_KIND(tile, tile_columns, left):
    # the run of tiles from `tile` (row-major) along its row, at most `left` of them: the row's first output row,
    # the run's first tile column and its length
    z0 = tile % tile_columns
    return 2 * (tile // tile_columns), z0, min(tile_columns - z0, left)


@njit(inline='always')
def input_tiles_KIND(padded, first_tile, tile_columns, count, v, width):
    # B^T d B of `count` tiles from tile `first_tile` (row-major) into v[k, c * width + t], a vector of tiles of a
    # row at a time (the last vector of a row computes tiles past it, overwritten by the next row's or unused)
    channels, padded_height, padded_width = padded.shape
    t = 0
    while t < count:
        y, z0, run = tile_run_KIND(first_tile + t, tile_columns, count - t)
        for c in range(channels):
            rows = padded.ctypes.data + BYTES * ((c * padded_height + y) * padded_width + 2 * z0)
            for s in range(0, run, LANES):
                out = v.ctypes.data + BYTES * (c * width + t + s)
                TILES_IN_KIND(rows + BYTES * 2 * s, padded_width, out, v.shape[1])
        t += run


@njit(inline='always')
def output_tiles_KIND(m, width, first_tile, tile_columns, count, bias, has_bias, grid):
    # A^T m A (+ bias) of `count` tiles' products m[k, o * width + t] into grid[o] (2 * tile_rows, 2 *
    # tile_columns plus a vector's slack), a vector of tiles of a row at a time
    outputs, grid_height, grid_width = grid.shape
    t = 0
    while t < count:
        y, z0, run = tile_run_KIND(first_tile + t, tile_columns, count - t)
        for o in range(outputs):
            shift = bias[o] if has_bias else np.DTYPE(0)
            for s in range(0, run, LANES):
                target = grid.ctypes.data + BYTES * ((o * grid_height + y) * grid_width + 2 * (z0 + s))
                TILES_OUT_KIND(m.ctypes.data + BYTES * (o * width + t + s), m.shape[1], shift, target, grid_width)
        t += run


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False)
def forward_KIND(f, first, count):
    channels, height, width, outputs, rows = f[CHANNELS], f[HEIGHT], f[WIDTH], f[OUTPUTS], f[ROWS]
    top, left, out_height, out_width = f[TOP], f[LEFT], f[OUT_HEIGHT], f[OUT_WIDTH]
    x = carray(AT_KIND(f[X]), (f[BATCH], channels, height, width), np.DTYPE)
    out = carray(AT_KIND(f[OUT]), (f[BATCH], outputs, out_height, out_width), np.DTYPE)
    bias = carray(AT_KIND(f[BIAS] if f[BIAS] != 0 else f[KERNEL]), (outputs,), np.DTYPE)
    tile_rows, tile_columns = (out_height + 1) // 2, (out_width + 1) // 2
    tiles = tile_rows * tile_columns
    step = 4 if rows % 4 == 0 else 5
    padded = padded_planes_KIND(channels, tile_rows, tile_columns)
    grid = np.empty((outputs, 2 * tile_rows, 2 * tile_columns + 2 * LANES), np.DTYPE)
    # each k's slab a cache line past a multiple of its rows: the 16 loads of a tile's values fall in different
    # cache sets (a 4 KiB multiple apart, they missed: the output transform took 3 ms of the cnn's 12)
    v = np.zeros((16, channels * TILE_LINE + LANES), np.DTYPE)  # (columns past the tiles stay finite)
    m = np.zeros((16, rows * TILE_LINE + LANES), np.DTYPE)
    blocks = -(-tiles // TILES)
    for unit in range(first, first + count):  # (sample, block of tiles) units
        n, t0 = unit // blocks, (unit % blocks) * TILES
        if unit == first or t0 == 0:  # (the input rows its units read: a thread may run part of a sample)
            row0, row1 = tile_rows_of_KIND(unit, first + count, blocks, tiles, tile_columns)
            pad_sample_KIND(x, n, top, left, padded, 2 * row0, 2 * row1 + 2)
            whole = t0 == 0 and (n + 1) * blocks <= first + count
        block = min(TILES, tiles - t0)
        input_tiles_KIND(padded, t0, tile_columns, block, v, TILE_LINE)
        vectors = min(4, -(-block // LANES))
        for k in range(16):
            for r in range(0, rows, step):
                a = f[KERNEL] + BYTES * (k * rows + r) * channels
                b = v.ctypes.data + BYTES * k * v.shape[1]
                target = m.ctypes.data + BYTES * (k * m.shape[1] + r * TILE_LINE)
                if step == 4:
                    block4_KIND(vectors, a, channels, 1, b, TILE_LINE, target, TILE_LINE, channels)
                else:
                    block5_KIND(vectors, a, channels, 1, b, TILE_LINE, target, TILE_LINE, channels)
        output_tiles_KIND(m, TILE_LINE, t0, tile_columns, block, bias, f[BIAS] != 0, grid)
        if whole and t0 + block == tiles:  # the sample's outputs into out[n], a row at a time
            for o in range(outputs):
                for y in range(out_height):
                    copy_row_KIND(grid[o, y, :out_width], out[n, o, y])
        t = 0
        while t < block and not whole:  # part of a sample: the block's rows of tiles (the first and last maybe
            y, z0, run = tile_run_KIND(t0 + t, tile_columns, block - t)  # partial), not another thread's
            z1 = min(out_width, 2 * (z0 + run))
            for o in range(outputs):
                for row in range(y, min(y + 2, out_height)):
                    copy_row_KIND(grid[o, row, 2 * z0 : z1], out[n, o, row, 2 * z0 : z1])
            t += run


@njit(cache=CACHE, nogil=True, boundscheck=False)
def kernel_transform_KIND(weight, out):
    # G w G^T of each (output, input) channel pair's 3x3 kernel into out[k, o, c], in float64
    mixed = np.empty((4, 3))
    for o in range(weight.shape[0]):
        for c in range(weight.shape[1]):
            for j in range(3):
                w0, w1, w2 = np.float64(weight[o, c, 0, j]), np.float64(weight[o, c, 1, j]), 0.0
                w2 = np.float64(weight[o, c, 2, j])
                mixed[0, j], mixed[1, j], mixed[2, j], mixed[3, j] = w0, 0.5 * (w0 + w1 + w2), 0.5 * (w0 - w1 + w2), w2
            for i in range(4):
                w0, w1, w2 = mixed[i, 0], mixed[i, 1], mixed[i, 2]
                out[4 * i, o, c] = w0
                out[4 * i + 1, o, c] = 0.5 * (w0 + w1 + w2)
                out[4 * i + 2, o, c] = 0.5 * (w0 - w1 + w2)
                out[4 * i + 3, o, c] = w2


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True)
def share_KIND(args):
    f = carray(args, (SIZE,), np.int64)
    forward_KIND(f, f[FIRST], f[COUNT])


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False)
def weight_grad_KIND(f, first, count):
    batch, channels, height, width = f[GRAD_BATCH], f[GRAD_CHANNELS], f[GRAD_HEIGHT], f[GRAD_WIDTH]
    outputs, rows, columns = f[GRAD_OUTPUTS], f[GRAD_ROWS], f[GRAD_COLUMNS]
    top, left, out_height, out_width = f[GRAD_TOP], f[GRAD_LEFT], f[GRAD_OUT_HEIGHT], f[GRAD_OUT_WIDTH]
    spans = f[GRAD_SPANS]
    x = carray(AT_KIND(f[GRAD_X]), (batch, channels, height, width), np.DTYPE)
    g = carray(AT_KIND(f[GRAD_G]), (batch, outputs, out_height, out_width), np.DTYPE)
    sums = carray(AT_KIND(f[GRAD_SUMS]), (spans, 16, rows, columns), np.DTYPE)
    tile_rows, tile_columns = (out_height + 1) // 2, (out_width + 1) // 2
    tiles = tile_rows * tile_columns
    step = 4 if rows % 4 == 0 else 5
    padded = padded_planes_KIND(channels, tile_rows, tile_columns)
    # g channels-last on the tiles' grid (zeros past the output and past the output channels)
    grid = np.zeros((2 * tile_rows, 2 * tile_columns, columns), np.DTYPE)
    v = np.zeros((16, rows * TILE_LINE + LANES), np.DTYPE)  # (input channels past the last stay zero)
    e = np.zeros((16, TILES * columns + LANES), np.DTYPE)  # (a cache line past: see forward_KIND)
    vectors = columns // LANES
    blocks, whole = -(-tiles // TILES), f[GRAD_WHOLE]
    groups = batch * blocks // whole
    for span in range(first, first + count):  # each span: a range of (sample, block of tiles) units
        sums[span] = 0
        start, end = groups * span // spans * whole, groups * (span + 1) // spans * whole
        for unit in range(start, end):
            n, t0 = unit // blocks, (unit % blocks) * TILES
            if unit == start or t0 == 0:  # (the rows its units read: a span may be part of a sample)
                row0, row1 = tile_rows_of_KIND(unit, end, blocks, tiles, tile_columns)
                pad_sample_KIND(x, n, top, left, padded, 2 * row0, 2 * row1 + 2)
                for y in range(2 * row0, min(out_height, 2 * row1)):
                    transpose_KIND(g[n, :, y, :], grid[y, :out_width, :outputs])
            block = min(TILES, tiles - t0)
            input_tiles_KIND(padded, t0, tile_columns, block, v, TILE_LINE)
            for t in range(block):  # A g A^T of the output gradients: e[k, t * columns + o]
                y, z = 2 * ((t0 + t) // tile_columns), 2 * ((t0 + t) % tile_columns)
                for o in range(0, columns, LANES):
                    source = grid.ctypes.data + BYTES * ((y * grid.shape[1] + z) * columns + o)
                    target = e.ctypes.data + BYTES * (t * columns + o)
                    TILE_GRAD_KIND(source, columns, grid.shape[1] * columns, target, e.shape[1])
            for k in range(16):
                for r in range(0, rows, step):
                    a = v.ctypes.data + BYTES * (k * v.shape[1] + r * TILE_LINE)
                    for p in range(0, vectors, 4):
                        b = e.ctypes.data + BYTES * (k * e.shape[1] + p * LANES)
                        target = sums.ctypes.data + BYTES * (((span * 16 + k) * rows + r) * columns + p * LANES)
                        if step == 4:
                            add4_KIND(min(4, vectors - p), a, TILE_LINE, 1, b, columns, target, columns, block)
                        else:
                            add5_KIND(min(4, vectors - p), a, TILE_LINE, 1, b, columns, target, columns, block)


@njit(cache=CACHE, nogil=True, boundscheck=False)
def gradient_transform_KIND(sums, out):
    # G^T W G of the spans' sums W[k, c, o] (added in float64, in order) into out[o, c] (3x3 each)
    total = np.empty(16)
    mixed = np.empty((3, 4))
    for c in range(out.shape[1]):
        for o in range(out.shape[0]):
            for k in range(16):
                total[k] = 0.0
                for span in range(sums.shape[0]):
                    total[k] += sums[span, k, c, o]
            for j in range(4):  # G^T W: rows W0 + (W1 + W2) / 2, (W1 - W2) / 2, (W1 + W2) / 2 + W3
                w0, w1, w2, w3 = total[j], total[4 + j], total[8 + j], total[12 + j]
                mixed[0, j], mixed[1, j], mixed[2, j] = w0 + 0.5 * (w1 + w2), 0.5 * (w1 - w2), 0.5 * (w1 + w2) + w3
            for i in range(3):  # (G^T W) G: the same along each row
                w0, w1, w2, w3 = mixed[i, 0], mixed[i, 1], mixed[i, 2], mixed[i, 3]
                out[o, c, i, 0] = w0 + 0.5 * (w1 + w2)
                out[o, c, i, 1] = 0.5 * (w1 - w2)
                out[o, c, i, 2] = 0.5 * (w1 + w2) + w3


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True)
def share_grad_KIND(args):
    f = carray(args, (GRAD_SIZE,), np.int64)
    weight_grad_KIND(f, f[GRAD_FIRST], f[GRAD_COUNT])
"""


_BLOCK_ARGS = "a, a_row, a_step, b, ldb, out, ldo, depth"


def _blocks_source() -> str:
    """The register blocks the loops run: ``block<rows>_KIND(width, ...)`` writing ``out`` and ``add<rows>_KIND``
    adding to it, for blocks of 4 and 5 rows, each choosing the intrinsic of ``width`` (1 to 4) SIMD vectors (a
    compile-time constant per shape: Numba compiles one intrinsic per call site)."""
    text = ""
    for name, accumulate in (("block", False), ("add", True)):
        for rows in (4, 5):
            intrinsics = [f"{name.upper()}{rows}_{width}_KIND" for width in (1, 2, 3, 4)]
            for width, intrinsic in enumerate(intrinsics, 1):
                text += f'{intrinsic} = row_products.block_intrinsic("KIND", {rows}, {width}, VECTOR_BYTES, False, '
                text += f"{accumulate})\n"
            text += f"\n\n@njit(inline='always')\ndef {name}{rows}_KIND(width, {_BLOCK_ARGS}):\n"
            for width in (4, 3, 2):
                text += f"    {'if' if width == 4 else 'elif'} width == {width}:\n"
                text += f"        {intrinsics[width - 1]}({_BLOCK_ARGS})\n"
            text += f"    else:\n        {intrinsics[0]}({_BLOCK_ARGS})\n\n\n"
    return text


_module = None
_FLOAT32 = np.dtype(np.float32)


def _kind_source(kind: str) -> str:
    """The loops for ``kind`` (``"f32"`` or ``"f64"``): its dtype, element size and SIMD lanes."""
    words = row_products.kind_words(kind)
    lanes = int(words["LANES"])
    words.update(TILES=str(4 * lanes), TILE_LINE=str(5 * lanes))
    return codegen.kind_source(row_products.ROW_COPIES + _blocks_source() + _SOURCE, kind, words)


def _loops():
    """The compiled module (built once per process; its kernels come from Numba's disk cache)."""
    global _module
    if _module is None:
        constants = {"VECTOR_BYTES": row_products.vector_bytes(), "SIZE": SIZE, "GRAD_SIZE": GRAD_SIZE}
        constants.update({name.upper(): index for index, name in enumerate(NAMES)})
        constants.update({"GRAD_" + name.upper(): index for index, name in enumerate(GRAD_NAMES)})
        header = row_products.kernel_header(constants)
        header += f'TILES_CODE = "{intrinsics_digest()}"\nfrom numbagrad.backend import winograd_kernels\n'
        _module = codegen.load_module("winograd", "\n\n".join([header, _kind_source("f32"), _kind_source("f64")]))
    return _module


def _padded(count: int, lanes: int | None = None) -> int:
    """``count`` zero-padded to whole SIMD vectors of ``lanes``, or else to whole register blocks: of 4 rows where
    it is a multiple of 4, else of 5."""
    step = lanes or (4 if count % 4 == 0 else 5)
    return -(-count // step) * step


def _lanes(dtype: np.dtype) -> int:
    return row_products.vector_bytes() // np.dtype(dtype).itemsize


def transformed_kernel(weight: np.ndarray) -> np.ndarray:
    """``G w G^T`` of an (O, C, 3, 3) kernel as (16, rows, C), its output channels zero-padded to whole register
    blocks (computed in float64, rounded once to the kernel's dtype)."""
    outputs, channels = weight.shape[:2]
    out = np.zeros((16, _padded(outputs), channels), weight.dtype)
    getattr(_loops(), "kernel_transform_" + ("f32" if weight.dtype == _FLOAT32 else "f64"))(weight, out)
    return out


def pays(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple, groups: int, channels: int,
         out_width: int, gradient: bool = False) -> bool:  # fmt: skip
    """Does this module run a convolution (or its input gradient, a convolution too), or with ``gradient`` its
    weight's gradient, faster than ``conv_kernels`` or im2col and BLAS? A stride-1, undilated, single-group 3x3
    kernel, float32 or float64, on a host with AVX-512 (``row_products.measured_host``), whose output rows hold
    at least a vector of values (half a vector of tiles: each row of tiles is transformed a vector at a time);
    the weight's gradient from at least 8 input channels. Measured (float32, 1 thread, interleaved), the time
    against the direct kernels': the cnn's (64, 32, 26, 26) by (64, 32, 3, 3) forward 0.52, input gradient 0.62,
    weight gradient 0.61; the U-Net's (4, 48, 16, 16) by (16, 48, 3, 3) 0.55, 0.53, 0.87 and (4, 24, 32, 32) by
    (8, 24, 3, 3) 0.50, 0.48, 0.84; (8, 128, 28, 28) by (128, 128, 3, 3) 0.47, 0.47, 0.64. On 8x8 outputs
    (a third of each vector of tiles used) 1.0-1.7x; at 3 input channels the weight gradient 1.1-1.3x."""
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)) or not row_products.measured_host():
        return False
    shape = (tuple(kernel), tuple(stride), tuple(dilation), groups)
    wide_enough = out_width >= _lanes(dtype) and channels >= (8 if gradient else 1)  # (a product is 1 deep at least)
    return shape == ((3, 3), (1, 1), (1, 1), 1) and wide_enough


def forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, padding: tuple, out: np.ndarray) -> None:
    """``out`` (N, O, OH, OW) = the stride-1 convolution of the (N, C, H, W) ``x`` by the 3x3 ``weight`` (O, C, 3,
    3), plus ``bias`` (O,) or None, ``padding`` the (top, left) offset (negative: cropped). ``x`` and ``out``
    C-contiguous, all of one dtype, float32 or float64."""
    outputs, channels = weight.shape[:2]
    kernel = transformed_kernel(weight)
    f = np.zeros(SIZE, np.int64)
    f[X], f[KERNEL], f[OUT] = x.ctypes.data, kernel.ctypes.data, out.ctypes.data
    shift = None if bias is None else np.ascontiguousarray(bias, x.dtype)  # (alive until the loop ends)
    f[BIAS] = 0 if shift is None else shift.ctypes.data
    f[BATCH : OUTPUTS + 1] = (*x.shape, outputs)
    f[ROWS : OUT_WIDTH + 1] = (kernel.shape[1], padding[0], padding[1], out.shape[2], out.shape[3])
    kind = "f32" if x.dtype == _FLOAT32 else "f64"
    module = _loops()
    units = len(x) * _blocks(x.dtype, out.shape[2:])
    f[FIRST], f[COUNT] = 0, units
    work = len(x) * channels * kernel.shape[1] * 4 * out.shape[2] * out.shape[3]
    threads = min(cpu_threads.free_threads(), units) if work >= _SHARED_WORK else 1
    if threads <= 1:
        getattr(module, "forward_" + kind)(f, 0, units)
        return
    # (whole samples per thread where there are enough; else blocks of one sample's tiles, each thread making the
    # padded copies of the samples it touches)
    whole = units // len(x) if len(x) >= threads else 1
    share = getattr(module, "share_" + kind).address
    cpu_threads.run_compiled_shares(share, f, FIRST, COUNT, units, threads, whole)


def _blocks(dtype: np.dtype, out_hw: tuple) -> int:
    """The blocks of tiles per sample: of four SIMD vectors' tiles each (the kernels' ``TILES``)."""
    tiles = ((out_hw[0] + 1) // 2) * ((out_hw[1] + 1) // 2)
    return -(-tiles // (4 * _lanes(dtype)))


def weight_grad(x: np.ndarray, g: np.ndarray, padding: tuple) -> np.ndarray:
    """The gradient (O, C, 3, 3) of the 3x3 kernel of the stride-1 convolution of the (N, C, H, W) ``x`` whose
    output's gradient is ``g`` (N, O, OH, OW), ``padding`` the (top, left) offset. Both C-contiguous, one dtype,
    float32 or float64."""
    batch, channels = x.shape[:2]
    outputs = g.shape[1]
    rows, columns = _padded(channels), _padded(outputs, _lanes(x.dtype))
    # spans of whole samples where there are enough of them, else of blocks of one sample's tiles (each span making
    # the padded copies of the samples it touches); fixed by the shapes: the same bits on any thread count
    blocks = _blocks(x.dtype, g.shape[2:])
    whole = max(1, blocks) if batch >= _WHOLE_SAMPLES else 1
    spans = max(1, min(batch * blocks // whole, _SPANS, _SUMS_BYTES // (16 * rows * columns * x.itemsize)))
    sums = np.empty((spans, 16, rows, columns), x.dtype)
    f = np.zeros(GRAD_SIZE, np.int64)
    f[GRAD_X], f[GRAD_G], f[GRAD_SUMS] = x.ctypes.data, g.ctypes.data, sums.ctypes.data
    f[GRAD_BATCH : GRAD_OUTPUTS + 1] = (*x.shape, outputs)
    f[GRAD_ROWS : GRAD_COUNT + 1] = (rows, columns, padding[0], padding[1], *g.shape[2:], spans, whole, 0, spans)
    kind = "f32" if x.dtype == _FLOAT32 else "f64"
    module = _loops()
    work = batch * rows * columns * 4 * g.shape[2] * g.shape[3]
    threads = min(cpu_threads.free_threads(), spans) if work >= _SHARED_WORK else 1
    if threads <= 1:
        getattr(module, "weight_grad_" + kind)(f, 0, spans)
    else:
        share = getattr(module, "share_grad_" + kind).address
        cpu_threads.run_compiled_shares(share, f, GRAD_FIRST, GRAD_COUNT, spans, threads)
    out = np.empty((outputs, channels, 3, 3), x.dtype)
    getattr(module, "gradient_transform_" + kind)(sums, out)
    return out
