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
and round once on the write, as torch's CPU does. Imported lazily by ``backend/cpu.py`` (it starts Numba).
"""

from __future__ import annotations

import numpy as np

from . import codegen, vector_math

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

_module = None
_FLOAT32 = np.dtype(np.float32)


def _loops():
    """The compiled module (built once per process; its kernels come from Numba's disk cache)."""
    global _module
    if _module is None:
        parts = [
            codegen.header("serial").rstrip("\n"),
            vector_math.SOURCE.strip("\n"),
            vector_math.SINGLE_SOURCE.strip("\n"),
            vector_math.vectorized(_LOOPS).strip("\n"),
            vector_math.single_precision(_LOOPS).strip("\n"),
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
