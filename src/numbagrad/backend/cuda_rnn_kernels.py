"""The ``numba.cuda`` kernels of an LSTM or GRU layer's time step: the device twins of ``rnn_kernels``' loops
(their launchers, under the CPU backend's names ``lstm_cell``, ``gru_cell`` and their backwards, are in
``backend.cuda``). One
thread per element of the ``(n, H)`` state, grid-stride; the same arithmetic as the CPU loops. Imported by
``backend.cuda`` on first use only (importing it imports numba.cuda)."""

from __future__ import annotations

import math

from numba import cuda


@cuda.jit(cache=True)
def lstm_cell_kernel(xi, hh, c, acts, h_out, c_out):
    n, size = c.shape
    k = cuda.grid(1)
    while k < n * size:
        b, j = k // size, k % size
        i = 0.5 * math.tanh(0.5 * (xi[b, j] + hh[b, j])) + 0.5
        f = 0.5 * math.tanh(0.5 * (xi[b, size + j] + hh[b, size + j])) + 0.5
        g = math.tanh(xi[b, 2 * size + j] + hh[b, 2 * size + j])
        o = 0.5 * math.tanh(0.5 * (xi[b, 3 * size + j] + hh[b, 3 * size + j])) + 0.5
        cn = f * c[b, j] + i * g
        acts[b, j] = i
        acts[b, size + j] = f
        acts[b, 2 * size + j] = g
        acts[b, 3 * size + j] = o
        c_out[b, j] = cn
        h_out[b, j] = o * math.tanh(cn)
        k += cuda.gridsize(1)


@cuda.jit(cache=True)
def lstm_cell_backward_kernel(g_out, g_rec, g_c, acts, c_prev, c_new, d_gates, g_c_prev):
    n, size = c_new.shape
    k = cuda.grid(1)
    while k < n * size:
        b, j = k // size, k % size
        gh = g_out[b, j] + g_rec[b, j]
        i = acts[b, j]
        f = acts[b, size + j]
        g = acts[b, 2 * size + j]
        o = acts[b, 3 * size + j]
        tc = math.tanh(c_new[b, j])
        gc = g_c[b, j] + gh * o * (1 - tc * tc)
        d_gates[b, j] = gc * g * i * (1 - i)
        d_gates[b, size + j] = gc * c_prev[b, j] * f * (1 - f)
        d_gates[b, 2 * size + j] = gc * i * (1 - g * g)
        d_gates[b, 3 * size + j] = gh * tc * o * (1 - o)
        g_c_prev[b, j] = gc * f
        k += cuda.gridsize(1)


@cuda.jit(cache=True)
def gru_cell_kernel(xi, gh, h, acts, h_out):
    n, size = h.shape
    k = cuda.grid(1)
    while k < n * size:
        b, j = k // size, k % size
        r = 0.5 * math.tanh(0.5 * (xi[b, j] + gh[b, j])) + 0.5
        z = 0.5 * math.tanh(0.5 * (xi[b, size + j] + gh[b, size + j])) + 0.5
        hn = gh[b, 2 * size + j]
        nn = math.tanh(xi[b, 2 * size + j] + r * hn)
        acts[b, j] = r
        acts[b, size + j] = z
        acts[b, 2 * size + j] = nn
        acts[b, 3 * size + j] = hn
        h_out[b, j] = nn + z * (h[b, j] - nn)
        k += cuda.gridsize(1)


@cuda.jit(cache=True)
def gru_cell_backward_kernel(g_out, g_rec, acts, h, d_xi, d_gh, g_h):
    n, size = h.shape
    k = cuda.grid(1)
    while k < n * size:
        b, j = k // size, k % size
        g = g_out[b, j] + g_rec[b, j]
        r = acts[b, j]
        z = acts[b, size + j]
        nn = acts[b, 2 * size + j]
        dn = g * (1 - z) * (1 - nn * nn)
        dr = dn * acts[b, 3 * size + j] * r * (1 - r)
        dz = g * (h[b, j] - nn) * z * (1 - z)
        d_xi[b, j] = dr
        d_xi[b, size + j] = dz
        d_xi[b, 2 * size + j] = dn
        d_gh[b, j] = dr
        d_gh[b, size + j] = dz
        d_gh[b, 2 * size + j] = dn * r
        g_h[b, j] = g * z
        k += cuda.gridsize(1)
