"""The CPU kernels of an LSTM or GRU layer's time step (``nn.LSTM``'s and ``nn.GRU``'s layer loop): the gate
nonlinearities and the state update as one kernel forward, and all the gate gradients as one kernel backward.

A step made of table rows took four kernel calls and two layout copies forward (the gates gathered gate-major,
then one kernel per new state) and six calls, a concatenation and an add backward; at ``nn.LSTM``'s usual sizes
(batch 20, hidden 256) each call costs more than its arithmetic. These loops read the gates in the layout the
matrix product writes them, ``(n, G*H)`` rows in torch's gate order (LSTM: i, f, g, o; GRU: r, z, n), and write
straight into the layer's buffers. Inside, each row runs short loops that each write one array and read
another's elements only at the index they write: LLVM vectorizes a loop only where it can check at run time that
its arrays do not overlap. At batch 20, hidden 256, float32, one thread, the LSTM forward kernel takes 20 us and
the backward 11 us (loops writing several arrays: 36 and 53 us); GRU's forward 13 us (43 us).

The loops are source text built like the table's kernels (``codegen.load_module``): ``math.tanh`` becomes
``vector_math``'s vectorizable tanh, and float32 data runs the float32 twin (``vector_math.single_precision``), as
the table's ``float32_math`` rows do (torch's float32 cells compute in float32). The logistic function is written
``0.5 * tanh(0.5 * x) + 0.5``, as in ``nn/rnn.py``'s rows: it never overflows. The loop text has no integer
literals (the float32 twin makes every literal a float32 constant). Float16 and bfloat16 steps compute in float32
and round once on the write, as torch's CPU does.

An LSTM layer whose every step runs the whole batch also runs as one loop over all its steps, each way
(``lstm_layer_<kind>``, ``lstm_layer_backward_<kind>``): each step's recurrent product on ``row_products``'
kernel (``product_kernel``; this module's text holds its digest, so its cache entry changes with it), then the
cell above. On several threads each runs every step for its own register blocks of the batch's rows
(``share_<kind>``, ``cpu_threads.run_compiled``): rows never meet, so the threads never wait for each other, and
a thread's rows stay in its core's cache. A product shared by columns instead left each step's result half in
the other core's cache (the cell after it took 23-29 us at batch 20, hidden 256, against 14 alone) and made a
hand-off per product. Its compiled code is built on first use, not when ``backend/cpu.py`` imports this module.
"""

from __future__ import annotations

import numpy as np

from . import codegen, cpu_threads, row_products, vector_math

_LOOPS = """
@njit(cache=CACHE, nogil=True, error_model='numpy')
def lstm_cell(xi, hh, c, acts, h_out, c_out):
    n, size = c.shape
    s2 = size + size
    s3 = s2 + size
    for b in range(n):
        for j in range(s2):
            acts[b, j] = 0.5 * math.tanh(0.5 * (xi[b, j] + hh[b, j])) + 0.5
        for j in range(size):
            acts[b, s2 + j] = math.tanh(xi[b, s2 + j] + hh[b, s2 + j])
        for j in range(size):
            acts[b, s3 + j] = 0.5 * math.tanh(0.5 * (xi[b, s3 + j] + hh[b, s3 + j])) + 0.5
        for j in range(size):
            c_out[b, j] = acts[b, size + j] * c[b, j] + acts[b, j] * acts[b, s2 + j]
        for j in range(size):
            h_out[b, j] = acts[b, s3 + j] * math.tanh(c_out[b, j])


@njit(cache=CACHE, nogil=True, error_model='numpy')
def lstm_cell_backward(g_out, g_rec, g_c, acts, c_prev, c_new, d_gates, g_c_prev):
    n, size = c_new.shape
    s2 = size + size
    s3 = s2 + size
    for b in range(n):
        for j in range(size):
            tc = math.tanh(c_new[b, j])
            o = acts[b, s3 + j]
            d_gates[b, s3 + j] = (g_out[b, j] + g_rec[b, j]) * tc * o * (1 - o)
        for j in range(size):
            tc = math.tanh(c_new[b, j])
            o = acts[b, s3 + j]
            g_c_prev[b, j] = g_c[b, j] + (g_out[b, j] + g_rec[b, j]) * o * (1 - tc * tc)
        for j in range(size):
            i = acts[b, j]
            d_gates[b, j] = g_c_prev[b, j] * acts[b, s2 + j] * i * (1 - i)
        for j in range(size):
            f = acts[b, size + j]
            d_gates[b, size + j] = g_c_prev[b, j] * c_prev[b, j] * f * (1 - f)
        for j in range(size):
            g = acts[b, s2 + j]
            d_gates[b, s2 + j] = g_c_prev[b, j] * acts[b, j] * (1 - g * g)
        for j in range(size):
            g_c_prev[b, j] = g_c_prev[b, j] * acts[b, size + j]


@njit(cache=CACHE, nogil=True, error_model='numpy')
def gru_cell(xi, gh, h, acts, h_out):
    n, size = h.shape
    s2 = size + size
    s3 = s2 + size
    for b in range(n):
        for j in range(s2):
            acts[b, j] = 0.5 * math.tanh(0.5 * (xi[b, j] + gh[b, j])) + 0.5
        for j in range(size):
            acts[b, s3 + j] = gh[b, s2 + j]
        for j in range(size):
            h_out[b, j] = math.tanh(xi[b, s2 + j] + acts[b, j] * gh[b, s2 + j])
        for j in range(size):
            acts[b, s2 + j] = h_out[b, j]
        for j in range(size):
            h_out[b, j] = h_out[b, j] + acts[b, size + j] * (h[b, j] - h_out[b, j])


@njit(cache=CACHE, nogil=True, error_model='numpy')
def gru_cell_backward(g_out, g_rec, acts, h, d_xi, d_gh, g_h):
    n, size = h.shape
    s2 = size + size
    s3 = s2 + size
    for b in range(n):
        for j in range(size):
            g_h[b, j] = g_out[b, j] + g_rec[b, j]
        for j in range(size):
            g = g_h[b, j]
            r = acts[b, j]
            z = acts[b, size + j]
            nn = acts[b, s2 + j]
            dn = g * (1 - z) * (1 - nn * nn)
            d_xi[b, j] = dn * acts[b, s3 + j] * r * (1 - r)
            d_xi[b, size + j] = g * (h[b, j] - nn) * z * (1 - z)
            d_xi[b, s2 + j] = dn
        for j in range(s2):
            d_gh[b, j] = d_xi[b, j]
        for j in range(size):
            d_gh[b, s2 + j] = d_xi[b, s2 + j] * acts[b, j]
        for j in range(size):
            g_h[b, j] = g_h[b, j] * acts[b, size + j]
"""

#: The fields of a whole-layer call (one ``int64`` row): the operands' addresses (every array C-contiguous; a
#: zero address for an output gradient not given), then the sizes and the share of batch rows a thread runs.
FIELDS = ("xi", "h0", "c0", "panels", "acts", "output", "cells", "g_out", "g_h", "g_c", "d_gates", "g_h0", "g_c0")
XI, H0, C0, PANELS, ACTS, OUTPUT, CELLS, G_OUT, G_H, G_C, D_GATES, G_H0, G_C0 = range(len(FIELDS))
STEPS, BATCH, HIDDEN, REVERSE, FIRST, COUNT, BACKWARD = range(len(FIELDS), len(FIELDS) + 7)
SIZE = BACKWARD + 1

_LAYER = """
AT_KIND = codegen.address_intrinsic()
PRODUCT_KIND = row_products.product_kernel("KIND")


@njit(cache=CACHE, nogil=True)
def rows_KIND(f, operand, first, count, width):
    # rows ``first`` to ``first + count`` of a C-contiguous operand ``width`` wide, as a C-contiguous array
    return carray(AT_KIND(f[operand] + BYTES * first * width), (count, width), np.DTYPE)


@njit(cache=CACHE, nogil=True, error_model='numpy')
def lstm_layer_KIND(f, first, count):
    steps, batch, size, reverse = f[STEPS], f[BATCH], f[HIDDEN], f[REVERSE]
    gates = 4 * size
    panels = carray(AT_KIND(f[PANELS]), (-(-gates // WIDTH), size, WIDTH), np.DTYPE)
    hh = np.empty((count, gates), np.DTYPE)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        r = t * batch + first
        if s == 0:
            h, c = rows_KIND(f, H0, first, count, size), rows_KIND(f, C0, first, count, size)
        else:
            p = r + batch if reverse else r - batch
            h, c = rows_KIND(f, OUTPUT, p, count, size), rows_KIND(f, CELLS, p, count, size)
        PRODUCT_KIND(h, panels, hh)
        CELL(rows_KIND(f, XI, r, count, gates), hh, c, rows_KIND(f, ACTS, r, count, gates),
             rows_KIND(f, OUTPUT, r, count, size), rows_KIND(f, CELLS, r, count, size))


@njit(cache=CACHE, nogil=True, error_model='numpy')
def lstm_layer_backward_KIND(f, first, count):
    steps, batch, size, reverse = f[STEPS], f[BATCH], f[HIDDEN], f[REVERSE]
    gates = 4 * size
    panels = carray(AT_KIND(f[PANELS]), (-(-size // WIDTH), gates, WIDTH), np.DTYPE)
    g_h = rows_KIND(f, G_H, first, count, size).copy()
    g_c = rows_KIND(f, G_C, first, count, size).copy()
    g_c_prev = np.empty((count, size), np.DTYPE)
    no_output_grad = np.zeros((count if f[G_OUT] == 0 else 0, size), np.DTYPE)
    for s in range(steps):
        t = s if reverse else steps - 1 - s  # (the steps back, the last one run first)
        r = t * batch + first
        if s == steps - 1:
            c_prev = rows_KIND(f, C0, first, count, size)
        else:
            c_prev = rows_KIND(f, CELLS, r + batch if reverse else r - batch, count, size)
        g_out = no_output_grad if f[G_OUT] == 0 else rows_KIND(f, G_OUT, r, count, size)
        d_gates = rows_KIND(f, D_GATES, r, count, gates)
        CELL_BACKWARD(g_out, g_h, g_c, rows_KIND(f, ACTS, r, count, gates), c_prev, rows_KIND(f, CELLS, r, count, size),
                      d_gates, g_c_prev)
        PRODUCT_KIND(d_gates, panels, g_h)
        g_c, g_c_prev = g_c_prev, g_c
    rows_KIND(f, G_H0, first, count, size)[:] = g_h
    rows_KIND(f, G_C0, first, count, size)[:] = g_c


@cfunc(types.void(types.voidptr), cache=CACHE, nopython=True)
def share_KIND(args):
    f = carray(args, (SIZE,), np.int64)
    if f[BACKWARD]:
        lstm_layer_backward_KIND(f, f[FIRST], f[COUNT])
    else:
        lstm_layer_KIND(f, f[FIRST], f[COUNT])
"""

_module = None
_FLOAT32 = np.dtype(np.float32)


def _layer_source(kind: str) -> str:
    """The whole-layer loops for ``kind`` (``"f32"`` or ``"f64"``): its dtype, element size, panel width and
    cell kernels."""
    single = kind == "f32"
    words = row_products.kind_words(kind)
    words.update(WIDTH=str(row_products.panel_width(np.dtype(words["DTYPE"]))))
    words.update(CELL="lstm_cell_f32" if single else "lstm_cell")
    words.update(CELL_BACKWARD="lstm_cell_backward_f32" if single else "lstm_cell_backward")
    return codegen.kind_source(_LAYER, kind, words)


def _loops():
    """The compiled module (built once per process; its kernels come from Numba's disk cache). Its text holds
    ``row_products``' digest: the layer loops have its product compiled into them."""
    global _module
    if _module is None:
        constants = {name.upper(): index for index, name in enumerate(FIELDS)}
        constants.update(STEPS=STEPS, BATCH=BATCH, HIDDEN=HIDDEN, REVERSE=REVERSE, FIRST=FIRST, COUNT=COUNT)
        constants.update(BACKWARD=BACKWARD, SIZE=SIZE)
        header = row_products.kernel_header(constants)
        parts = [
            header.rstrip("\n"),
            vector_math.SOURCE.strip("\n"),
            vector_math.SINGLE_SOURCE.strip("\n"),
            vector_math.vectorized(_LOOPS).strip("\n"),
            vector_math.single_precision(_LOOPS).strip("\n"),
            _layer_source("f32").strip("\n"),
            _layer_source("f64").strip("\n"),
        ]
        _module = codegen.load_module("rnn_lstm_step", "\n\n\n".join(parts) + "\n")
    return _module


def _kernel(name: str, dtype: np.dtype):
    module = _loops()
    return getattr(module, name + "_f32") if dtype == _FLOAT32 else getattr(module, name)


def run(name: str, inputs: list, outputs: list, widen, store) -> None:
    """Run the loop ``name`` on C-contiguous 2-D ``inputs``, writing ``outputs``. Float32 and float64 arrays go
    straight in; 2-byte floats (``widen``: their float32 copy; ``store(out, a)``: ``a`` rounded into ``out``) run
    on float32 copies whose results are rounded into ``outputs``."""
    dtype = outputs[0].dtype
    if dtype.itemsize >= 4:
        _kernel(name, dtype)(*inputs, *outputs)
        return
    wide = [np.empty(a.shape, _FLOAT32) for a in outputs]
    _kernel(name, _FLOAT32)(*(widen(a) for a in inputs), *wide)
    for out, a in zip(outputs, wide):
        store(out, a)


def run_layer(fields: np.ndarray, dtype: np.dtype, batch: int, threads: int) -> None:
    """An LSTM layer's steps forward or backward (``fields``: ``SIZE`` int64s, the operands and sizes filled in),
    the batch's rows shared among up to ``threads`` threads: whole register blocks of rows each, every thread
    running all the steps for its rows (rows are independent, so the threads never wait for each other, and each
    keeps its rows' states in its own core's cache)."""
    module = _loops()
    kind = "f32" if dtype == _FLOAT32 else "f64"
    threads = min(threads, -(-batch // row_products.ROWS))
    if threads <= 1:
        function = getattr(module, ("lstm_layer_backward_" if fields[BACKWARD] else "lstm_layer_") + kind)
        function(fields, 0, batch)
        return
    share = getattr(module, "share_" + kind).address
    cpu_threads.run_compiled_shares(share, fields, FIRST, COUNT, batch, threads, row_products.ROWS)
