"""The CPU kernels of causal attention (``cpu.causal_attention`` and its backward): each (batch, head) slice's
products, softmax and gradients in one compiled loop, and the slices shared among threads with no Python on them.

The numpy form made 8 calls forward and 12 backward, each looping over the slices, its products OpenBLAS calls
per slice: at the char GPT's (12, 4, 64, 32) float32, 520 us forward and 620 backward on one thread and about the
same on two (each call too small to share; as Python tasks on two threads, 430 and 560 us: the GIL). Here, per
slice:

* forward: the scores ``q @ k^T`` (the keys transposed into a buffer once), each row's softmax over its visible
  keys (scaled, less its maximum, ``exp``, the float64 sum's reciprocal) into the slice's buffer, then
  ``probs @ v``. Each row's maximum and reciprocal are kept (``STATS``: two numbers a row), not the
  probabilities, as torch's flash attention keeps only their log-sum-exp: the char GPT's (12, 4, 64, 64)
  probabilities are 768 KiB a layer in float32, its statistics 24;
* backward: the scores again and, from the statistics, the same probabilities bit for bit
  (``probabilities_row``); then ``g_v = probs^T @ g``, ``g @ v^T``, softmax's backward per row (float64 sums),
  ``g_q = g_s @ k`` and ``g_k = g_s^T @ q``, each times ``scale``.

The products run on ``row_products``' register blocks (``blocks``): the causal structure skips whole blocks (the
scores' panels right of a block of rows, the depth below or above it), and the few rows and columns past a
multiple of a block run through zero-padded copies. A masked score never reaches a softmax (its row's keys past
``i`` are selected away, never summed), so a nan or inf key does not reach the queries before it, as in torch.
Float32 slices compute in float32 with ``vector_math``'s float32 ``exp`` (torch's CPU flash attention computes in
float32 too); the products sum along the shared dimension in order with fused multiply-adds, as BLAS does.

The (12, 4, 64, 32) float32 attention, one thread: forward 570 us, backward 630 (the softmax passes, about 70 ns
a row of 64, are a third of the forward); two threads: 380 and 440 us, and in the GPT's step on two threads 1.9
and 2.5 ms a step for its four layers, where the numpy form took 2.7 and 4.4.

Operands are passed as addresses and element strides, the last dimension unit-stride (``cpu.causal_attention``
copies any other): a ``(batch, heads, rows, width)`` layout of any strides, the GPT's heads split from one
projection included, is read in place. ``share_<kind>`` runs either loop as a C function over a range of slices
(``cpu_threads.run_compiled``). Imported lazily by ``backend/cpu.py`` (it starts Numba).
"""

from __future__ import annotations

import numpy as np

from . import codegen, cpu_threads, row_products, vector_math

#: The fields of an attention call (one ``int64`` row; ``scale`` is stored as its float64 bits): four per
#: operand (address; element strides between batches, heads and rows), a zero address for a gradient not wanted.
FIELDS = ("q", "k", "v", "out", "g", "g_q", "g_k", "g_v")
Q, K, V, OUT, G, G_Q, G_K, G_V = range(len(FIELDS))
STATS, HEADS, LENGTH, WIDTH, VALUE_WIDTH, SCALE, FIRST, COUNT, BACKWARD = range(4 * len(FIELDS), 4 * len(FIELDS) + 9)
SIZE = BACKWARD + 1

#: The fewest multiply-adds (over all slices, forward) worth sharing among threads: the GPT's attention has 3.1
#: million, and a hand-off costs a few microseconds.
_SHARED_WORK = 1 << 18

_SOURCE = """
BLOCK_WIDE_KIND = row_products.block_intrinsic("KIND", WIDE_ROWS, WIDE_VECTORS, VECTOR_BYTES)
BLOCK_NARROW_KIND = row_products.block_intrinsic("KIND", NARROW_ROWS, NARROW_VECTORS, VECTOR_BYTES)
AT_KIND = codegen.address_intrinsic()


@njit(cache=CACHE, nogil=True, boundscheck=False)
def padded_KIND(n):
    if n <= NARROW_WIDTH:
        return NARROW_WIDTH
    return -(-n // WIDE_WIDTH) * WIDE_WIDTH


@njit(cache=CACHE, nogil=True, boundscheck=False)
def blocks_KIND(a, a_row, a_step, b, ldb, out, ldo, rows, depth, columns, causal):
    # out[:rows, :columns] = a[:rows, :depth] @ b[:depth, :columns] by register blocks (addresses; strides in
    # elements; rows a multiple of ROW_MULTIPLE, columns of the panel width padded_KIND gives). causal 0: every
    # depth, only the panels that start before the block's last row (scores); 1: depth below the block's end
    # (a causal matrix's rows times another); 2: depth from the block's first row (its transpose's rows).
    narrow = columns <= NARROW_WIDTH
    block_rows = NARROW_ROWS if narrow else WIDE_ROWS
    width = NARROW_WIDTH if narrow else WIDE_WIDTH
    for i0 in range(0, rows, block_rows):
        start, stop = 0, depth
        if causal == 1:
            stop = min(depth, i0 + block_rows)
        elif causal == 2:
            start = min(i0, depth)
        for j0 in range(0, columns, width):
            if causal == 0 and j0 >= i0 + block_rows:
                break
            target = out + BYTES * (i0 * ldo + j0)
            if stop <= start:
                for r in range(block_rows):
                    row = carray(AT_KIND(target + BYTES * r * ldo), (width,), np.DTYPE)
                    row[:] = 0
            elif narrow:
                BLOCK_NARROW_KIND(a + BYTES * (i0 * a_row + start * a_step), a_row, a_step,
                                  b + BYTES * (start * ldb + j0), ldb, target, ldo, stop - start)
            else:
                BLOCK_WIDE_KIND(a + BYTES * (i0 * a_row + start * a_step), a_row, a_step,
                                b + BYTES * (start * ldb + j0), ldb, target, ldo, stop - start)


@njit(cache=CACHE, nogil=True, boundscheck=False)
def rows_in_KIND(f, operand, b, h, target, length, width):
    # operand's (b, h) slice rows into target's first rows (its other columns and rows left as they are)
    base = f[4 * operand] + BYTES * (b * f[4 * operand + 1] + h * f[4 * operand + 2])
    for i in range(length):
        row = carray(AT_KIND(base + BYTES * i * f[4 * operand + 3]), (width,), np.DTYPE)
        for d in range(width):
            target[i, d] = row[d]


@njit(cache=CACHE, nogil=True, boundscheck=False)
def rows_out_KIND(f, operand, b, h, source, length, width, scale):
    base = f[4 * operand] + BYTES * (b * f[4 * operand + 1] + h * f[4 * operand + 2])
    for i in range(length):
        row = carray(AT_KIND(base + BYTES * i * f[4 * operand + 3]), (width,), np.DTYPE)
        for d in range(width):
            row[d] = source[i, d] * scale


@njit(cache=CACHE, nogil=True, boundscheck=False)
def columns_in_KIND(f, operand, b, h, target, length, width):
    # operand's (b, h) slice transposed into target's first columns
    base = f[4 * operand] + BYTES * (b * f[4 * operand + 1] + h * f[4 * operand + 2])
    step = f[4 * operand + 3]
    for d in range(width):
        column = carray(AT_KIND(base + BYTES * d), (length * step,), np.DTYPE)
        for j in range(length):
            target[d, j] = column[j * step]


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False, fastmath={'reassoc', 'nsz'})
def softmax_row_KIND(p, visible, scale, probs):
    # Whole rows (``len(p)``, a panel's width: a multiple of 4), the keys past ``visible`` selected away: loops of
    # a fixed length vectorize, the visible prefix's would mostly run their scalar remainder. The maximum by four
    # running maxima (a max reduction is not vectorized; four chains pipeline); the float64 sum's reciprocal
    # multiplies. Returns the maximum and the reciprocal, from which ``probabilities_row`` makes the row again.
    keys = len(p)
    for j in range(keys):
        p[j] = p[j] * scale if j < visible else -math.inf
    m0 = m1 = m2 = m3 = p[0]
    for j in range(0, keys, 4):
        v0, v1, v2, v3 = p[j], p[j + 1], p[j + 2], p[j + 3]
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
    m01 = m1 if m1 > m0 else m0
    m23 = m3 if m3 > m2 else m2
    m = m23 if m23 > m01 else m01
    total = 0.0
    for j in range(keys):
        e = EXP(p[j] - m)
        p[j] = e
        total += e
    inverse = np.DTYPE(1.0 / total)
    for j in range(len(probs)):
        probs[j] = p[j] * inverse
    return m, inverse


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False, fastmath={'reassoc', 'nsz'})
def probabilities_row_KIND(p, visible, scale, m, inverse, probs):
    # ``softmax_row``'s probabilities again, from the row's scores ``p`` (the same products, overwritten) and the
    # maximum and reciprocal it returned: its steps, each rounded in the dtype as there, so the same bits
    keys = len(p)
    for j in range(keys):
        p[j] = p[j] * scale if j < visible else -math.inf
    for j in range(keys):
        p[j] = EXP(p[j] - m)
    for j in range(keys):
        probs[j] = p[j] * inverse


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False, fastmath={'reassoc', 'nsz'})
def softmax_backward_row_KIND(p, gp, visible):
    # (whole rows: ``p`` is 0 past ``visible``, and ``gp``'s values there, never computed, are selected away)
    keys = len(gp)
    total = 0.0
    for j in range(keys):
        total += p[j] * gp[j] if j < visible else 0.0
    for j in range(keys):
        gp[j] = p[j] * (gp[j] - total) if j < visible else 0


@njit(cache=CACHE, nogil=True, boundscheck=False)
def sizes_KIND(f):
    # the slices' sizes: heads, rows (length), widths of q/k and v; the padded buffers' rows and columns
    length, width, vwidth = f[LENGTH], f[WIDTH], f[VALUE_WIDTH]
    rows = -(-length // ROW_MULTIPLE) * ROW_MULTIPLE
    return f[HEADS], length, width, vwidth, rows, padded_KIND(length), padded_KIND(width), padded_KIND(vwidth)


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False)
def forward_KIND(f, scale, first, count):
    heads, length, width, vwidth, rows, keys, _, values = sizes_KIND(f)
    # (the copies' padding stays zero: only their first rows and columns are written)
    queries, kt = np.zeros((rows, width), np.DTYPE), np.zeros((width, keys), np.DTYPE)
    vp, s = np.zeros((length, values), np.DTYPE), np.empty((rows, keys), np.DTYPE)
    o, probs = np.empty((rows, values), np.DTYPE), np.zeros((rows, keys), np.DTYPE)
    scaled = np.DTYPE(scale)
    for n in range(first, first + count):
        b, h = divmod(n, heads)
        rows_in_KIND(f, Q, b, h, queries, length, width)
        columns_in_KIND(f, K, b, h, kt, length, width)
        rows_in_KIND(f, V, b, h, vp, length, vwidth)
        blocks_KIND(queries.ctypes.data, width, 1, kt.ctypes.data, keys, s.ctypes.data, keys, rows, width, keys, 0)
        stats = carray(AT_KIND(f[STATS] + BYTES * n * length * 2), (length, 2), np.DTYPE)
        for i in range(length):
            stats[i, 0], stats[i, 1] = softmax_row_KIND(s[i], i + 1, scaled, probs[i])
        blocks_KIND(probs.ctypes.data, keys, 1, vp.ctypes.data, values, o.ctypes.data, values, rows, length,
                    values, 1)
        rows_out_KIND(f, OUT, b, h, o, length, vwidth, np.DTYPE(1))


@njit(cache=CACHE, nogil=True, error_model='numpy', boundscheck=False)
def backward_KIND(f, scale, first, count):
    heads, length, width, vwidth, rows, keys, columns, values = sizes_KIND(f)
    need_q, need_k, need_v = f[4 * G_Q] != 0, f[4 * G_K] != 0, f[4 * G_V] != 0
    # (the copies' padding stays zero: only their first rows and columns are written)
    p, grads = np.zeros((rows, keys), np.DTYPE), np.zeros((rows, values), np.DTYPE)
    vt, queries = np.zeros((vwidth, keys), np.DTYPE), np.zeros((rows, columns), np.DTYPE)
    kp, s = np.zeros((length, columns), np.DTYPE), np.empty((rows, keys), np.DTYPE)
    ov, oc = np.empty((rows, values), np.DTYPE), np.empty((rows, columns), np.DTYPE)
    kt = np.zeros((width, keys), np.DTYPE)
    scaled = np.DTYPE(scale)
    for n in range(first, first + count):
        b, h = divmod(n, heads)
        # the forward's scores again (each summed along the width in the same order: the same bits)
        rows_in_KIND(f, Q, b, h, queries, length, width)
        columns_in_KIND(f, K, b, h, kt, length, width)
        blocks_KIND(queries.ctypes.data, columns, 1, kt.ctypes.data, keys, s.ctypes.data, keys, rows, width, keys, 0)
        stats = carray(AT_KIND(f[STATS] + BYTES * n * length * 2), (length, 2), np.DTYPE)
        for i in range(length):
            probabilities_row_KIND(s[i], i + 1, scaled, stats[i, 0], stats[i, 1], p[i])
        rows_in_KIND(f, G, b, h, grads, length, vwidth)
        if need_v:
            blocks_KIND(p.ctypes.data, 1, keys, grads.ctypes.data, values, ov.ctypes.data, values, rows, length,
                        values, 2)
            rows_out_KIND(f, G_V, b, h, ov, length, vwidth, np.DTYPE(1))
        if not (need_q or need_k):
            continue
        columns_in_KIND(f, V, b, h, vt, length, vwidth)
        blocks_KIND(grads.ctypes.data, values, 1, vt.ctypes.data, keys, s.ctypes.data, keys, rows, vwidth, keys, 0)
        for i in range(length):
            softmax_backward_row_KIND(p[i], s[i], i + 1)
        if need_q:
            rows_in_KIND(f, K, b, h, kp, length, width)
            blocks_KIND(s.ctypes.data, keys, 1, kp.ctypes.data, columns, oc.ctypes.data, columns, rows, length,
                        columns, 1)
            rows_out_KIND(f, G_Q, b, h, oc, length, width, scaled)
        if need_k:
            blocks_KIND(s.ctypes.data, 1, keys, queries.ctypes.data, columns, oc.ctypes.data, columns, rows, length,
                        columns, 2)
            rows_out_KIND(f, G_K, b, h, oc, length, width, scaled)


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True, boundscheck=False)
def share_KIND(args):
    f = carray(args, (SIZE,), np.int64)
    scale = carray(args, (SIZE,), np.float64)[SCALE]
    if f[BACKWARD]:
        backward_KIND(f, scale, f[FIRST], f[COUNT])
    else:
        forward_KIND(f, scale, f[FIRST], f[COUNT])
"""

#: Register blocks (rows by SIMD vectors of columns): the wide one for panels of more columns than the narrow one
#: holds; the narrow one for a head's width of one or two vectors (32 float32 columns: the wide block would
#: multiply as many zeros). Both keep 16 sums in registers, and their rows divide the GPT's 64.
WIDE_ROWS, WIDE_VECTORS = 4, 4
NARROW_ROWS, NARROW_VECTORS = 8, 2
ROW_MULTIPLE = 8  # (a multiple of both blocks' rows: the padded buffers' rows)

_module = None
_FLOAT32 = np.dtype(np.float32)


def _kind_source(kind: str, vector_bytes: int) -> str:
    """The loops for ``kind`` (``"f32"`` or ``"f64"``): its dtype, element size, ``exp`` and panel widths."""
    single = kind == "f32"
    lanes = vector_bytes // (4 if single else 8)
    words = row_products.kind_words(kind)
    words.update(EXP="_vexpf" if single else "_vexp", WIDE_WIDTH=str(WIDE_VECTORS * lanes))
    words.update(NARROW_WIDTH=str(NARROW_VECTORS * lanes))
    return codegen.kind_source(_SOURCE, kind, words)


def _loops():
    """The compiled module (built once per process; its kernels come from Numba's disk cache)."""
    global _module
    if _module is None:
        constants = {"STATS": STATS, "HEADS": HEADS, "LENGTH": LENGTH, "WIDTH": WIDTH, "VALUE_WIDTH": VALUE_WIDTH}
        constants.update(SCALE=SCALE, FIRST=FIRST, COUNT=COUNT, BACKWARD=BACKWARD, SIZE=SIZE)
        constants.update(Q=Q, K=K, V=V, OUT=OUT, G=G, G_Q=G_Q, G_K=G_K, G_V=G_V, ROW_MULTIPLE=ROW_MULTIPLE)
        constants.update(WIDE_ROWS=WIDE_ROWS, WIDE_VECTORS=WIDE_VECTORS, NARROW_ROWS=NARROW_ROWS)
        constants.update(NARROW_VECTORS=NARROW_VECTORS, VECTOR_BYTES=row_products.vector_bytes())
        header = row_products.kernel_header(constants)
        parts = [header, vector_math.SOURCE.strip("\n"), vector_math.SINGLE_SOURCE.strip("\n")]
        parts += [_kind_source("f32", row_products.vector_bytes()), _kind_source("f64", row_products.vector_bytes())]
        _module = codegen.load_module("causal_attention", "\n\n\n".join(parts) + "\n")
    return _module


def operand(fields: np.ndarray, index: int, a: np.ndarray | None) -> None:
    """Fill operand ``index``'s four fields from a ``(batch, heads, rows, width)`` array with a unit last stride
    (or zeros for None)."""
    if a is None:
        fields[4 * index : 4 * index + 4] = 0
        return
    size = a.itemsize
    fields[4 * index] = a.ctypes.data
    fields[4 * index + 1 : 4 * index + 4] = (a.strides[0] // size, a.strides[1] // size, a.strides[2] // size)


def run(name: str, fields: np.ndarray, dtype: np.dtype, scale: float, slices: int, work: int) -> None:
    """``forward`` or ``backward`` (``name``) over ``slices`` slices described by ``fields`` (``SIZE`` int64s,
    the operands, probabilities and sizes filled in): shared among the free threads when ``work`` (multiply-adds)
    is worth it, else on this one."""
    module = _loops()
    kind = "f32" if dtype == _FLOAT32 else "f64"
    threads = min(cpu_threads.free_threads(), slices)
    if threads <= 1 or work < _SHARED_WORK:
        getattr(module, f"{name}_{kind}")(fields, scale, 0, slices)
        return
    fields.view(np.float64)[SCALE] = scale
    fields[BACKWARD] = name == "backward"
    cpu_threads.run_compiled_shares(getattr(module, f"share_{kind}").address, fields, FIRST, COUNT, slices, threads)
