"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their one-step cells (torch's ``nn/modules/rnn.py``).

Each layer and direction first projects its whole input sequence at once (``x @ W_ih.T + b_ih``, one matmul for
all time steps), then walks the steps, adding ``h @ W_hh.T + b_hh`` and applying the gate math. An RNN step is made
of ops. An LSTM (without projection) or GRU layer-direction is one Function (``_LSTMLayer``, ``_GRULayer``) whose
steps run the recurrent matmul and one fused step kernel of the backend (``lstm_cell``, ``gru_cell``), and record
nothing per step; its backward walks the steps back with one fused gradient kernel and one matmul each, and gives
``W_ih``, ``W_hh`` and the biases their gradients in one matmul each. The cells, and LSTM layers with a
projection, run one Function per step (``_LSTMStep``, ``_GRUStep``, whose gate kernels the elementwise table's
machinery generates from scalar functions; ``_RecurrentWeights`` then gives ``W_hh`` and ``b_hh`` their
gradients once per layer). Every backward computes the first gradients with ``create_graph`` or without, as a
``fused_grads`` node whose own backward differentiates the same gradients written with ops (a layer's: its steps),
so double backward works. The parameters carry torch's names and layout, so state_dicts move between torch and
numbagrad unchanged.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings

from .. import ops
from .._tensor import Tensor
from ..autograd.engine import grad as autograd_grad
from ..autograd.function import ERR_BACKWARD_TWICE, Function, releasing
from ..autograd.fused import fused_grads
from ..autograd.grad_mode import break_trace
from ..autograd.grad_mode import state as grad_state
from ..ops._common import same_backend
from ..ops.elementwise import ROWS, make_function
from ..scalar_math import Row
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNBase", "RNNCell", "RNNCellBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


# --- the gate math of one step: one elementwise row per new state (forward and gradient kernels) -----------------
# Module-level scalar functions, so their generated kernels are served from Numba's disk cache. The logistic
# function is written ``0.5 * tanh(0.5 * x) + 0.5``: it never overflows, and its tensor form (math.tanh) keeps
# double backward available.
def _lstm_c(i, f, g, c):
    return (0.5 * math.tanh(0.5 * f) + 0.5) * c + (0.5 * math.tanh(0.5 * i) + 0.5) * math.tanh(g)


def _lstm_c_grad_i(gr, out, i, f, g, c):
    si = 0.5 * math.tanh(0.5 * i) + 0.5
    return gr * math.tanh(g) * si * (1 - si)


def _lstm_c_grad_f(gr, out, i, f, g, c):
    sf = 0.5 * math.tanh(0.5 * f) + 0.5
    return gr * c * sf * (1 - sf)


def _lstm_c_grad_g(gr, out, i, f, g, c):
    tg = math.tanh(g)
    return gr * (0.5 * math.tanh(0.5 * i) + 0.5) * (1 - tg * tg)


def _lstm_c_grad_c(gr, out, i, f, g, c):
    return gr * (0.5 * math.tanh(0.5 * f) + 0.5)


def _lstm_h(o, c):
    return (0.5 * math.tanh(0.5 * o) + 0.5) * math.tanh(c)


def _lstm_h_grad_o(gr, out, o, c):
    so = 0.5 * math.tanh(0.5 * o) + 0.5
    return gr * math.tanh(c) * so * (1 - so)


def _lstm_h_grad_c(gr, out, o, c):
    tc = math.tanh(c)
    return gr * (0.5 * math.tanh(0.5 * o) + 0.5) * (1 - tc * tc)


def _gru_h(xr, xz, xn, hr, hz, hn, h):
    r = 0.5 * math.tanh(0.5 * (xr + hr)) + 0.5
    z = 0.5 * math.tanh(0.5 * (xz + hz)) + 0.5
    n = math.tanh(xn + r * hn)
    return n + z * (h - n)


def _gru_grad_r(gr, out, xr, xz, xn, hr, hz, hn, h):
    r = 0.5 * math.tanh(0.5 * (xr + hr)) + 0.5
    z = 0.5 * math.tanh(0.5 * (xz + hz)) + 0.5
    n = math.tanh(xn + r * hn)
    return gr * (1 - z) * (1 - n * n) * hn * r * (1 - r)


def _gru_grad_z(gr, out, xr, xz, xn, hr, hz, hn, h):
    r = 0.5 * math.tanh(0.5 * (xr + hr)) + 0.5
    z = 0.5 * math.tanh(0.5 * (xz + hz)) + 0.5
    n = math.tanh(xn + r * hn)
    return gr * (h - n) * z * (1 - z)


def _gru_grad_xn(gr, out, xr, xz, xn, hr, hz, hn, h):
    r = 0.5 * math.tanh(0.5 * (xr + hr)) + 0.5
    z = 0.5 * math.tanh(0.5 * (xz + hz)) + 0.5
    n = math.tanh(xn + r * hn)
    return gr * (1 - z) * (1 - n * n)


def _gru_grad_hn(gr, out, xr, xz, xn, hr, hz, hn, h):
    r = 0.5 * math.tanh(0.5 * (xr + hr)) + 0.5
    z = 0.5 * math.tanh(0.5 * (xz + hz)) + 0.5
    n = math.tanh(xn + r * hn)
    return gr * (1 - z) * (1 - n * n) * r


def _gru_grad_h(gr, out, xr, xz, xn, hr, hz, hn, h):
    return gr * (0.5 * math.tanh(0.5 * (xz + hz)) + 0.5)


@functools.cache
def _gate_functions() -> tuple[type, type, type]:
    """The fused gate Functions (LSTM's ``c'`` and ``h'``, GRU's ``h'``), made on first use so that importing
    numbagrad does not read their bytecode; their fixed row names keep their generated kernels in the disk cache.

    ``float32_math``: float32 data runs float32 arithmetic (the vectorized tanh), as torch's float32 cells do."""

    def make(name: str, forward, grads, node: str) -> type:
        return make_function(Row(name, forward, tuple(grads), None, float_only=True, float32_math=True), node)

    lstm_c = make(
        "rnn_lstm_cell_state",
        _lstm_c,
        [_lstm_c_grad_i, _lstm_c_grad_f, _lstm_c_grad_g, _lstm_c_grad_c],
        "LstmCellStateBackward",
    )
    lstm_h = make("rnn_lstm_cell_hidden", _lstm_h, [_lstm_h_grad_o, _lstm_h_grad_c], "LstmCellHiddenBackward")
    gru_grads = [_gru_grad_r, _gru_grad_z, _gru_grad_xn, _gru_grad_r, _gru_grad_z, _gru_grad_hn, _gru_grad_h]
    gru_h = make("rnn_gru_cell_hidden", _gru_h, gru_grads, "GruCellBackward")
    return lstm_c, lstm_h, gru_h


# --- one time step of each kind of cell: ``xi`` is the input's projection ``x @ W_ih.T + b_ih`` -----------------
def _rnn_tanh_step(xi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None, w_hr=None) -> tuple:
    return (ops.tanh(xi + F.linear(state[0], w_hh, b_hh)),)


def _rnn_relu_step(xi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None, w_hr=None) -> tuple:
    return (ops.relu(xi + F.linear(state[0], w_hh, b_hh)),)


def _plain(backend, row: Row, operands: list, dtype, shape: tuple, pattern: str):
    """The backend's fast path for contiguous operands of one shape, which float16 (computed in float32 by the
    general path) does not take."""
    if dtype.itemsize >= 4:
        return backend.elementwise_plain(row, operands, dtype, shape, pattern=pattern)
    return backend.elementwise(row, operands, (), dtype, shape=shape)


def _release_follows() -> bool:
    """Whether the backward pass now running releases each node's saved values right after the node ran: no
    ``retain_graph``, and no ``create_graph`` (whose gradients may still read them). Nor inside a forward-AD
    level (a tracer: ``grad_state.tracer``), whose tangent of the gradients runs the kernel a second time."""
    task = grad_state.task
    return task is not None and not task.retain_graph and not task.create_graph and grad_state.tracer is None


class _LSTMStep(Function):
    """One LSTM time step as one graph node: ``gates = xi + h @ W_hh.T + b_hh``, then the fused ``c'`` and ``h'``
    kernels. A step made of ops costs five nodes (linear, add, chunk and the two gate ops); over a long sequence
    their bookkeeping, not the arithmetic, was most of the time. The gates are copied gate-major, ``(4, B, H)``,
    so each gate is one contiguous block and every kernel of the step takes the backend's contiguous fast path;
    the backward computes the gradients two per kernel, in every grad mode. Their formula (for their own
    derivatives only) is the step made of ops, differentiated by the engine: the gates' gradient, and from it
    those of ``h``, ``W_hh`` and ``b_hh`` as a linear's."""

    node_name = "LstmStepBackward"
    _trusted = True
    _node_defaults = releasing("arrays")

    @staticmethod
    def forward(ctx, xi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None, offset: Tensor | None):
        backend = same_backend((xi, h, c, w_hh, b_hh))
        lstm_c, lstm_h, _ = _gate_functions()
        x, hd, w = xi._data, h._data, w_hh._data
        dtype = x.dtype
        batch, size = c.shape
        gates = backend.linear(hd, w, b_hh._data) if b_hh is not None else backend.matmul(hd, w.T)
        gates = _plain(backend, ROWS["add"], [gates, backend.ascontiguous(x)], dtype, gates.shape, "aa")
        blocks = backend.ascontiguous(backend.reshape(gates, (batch, 4, size)).transpose(1, 0, 2))
        flat = backend.reshape(blocks, (4, batch * size))
        i, f, g, o = flat[0], flat[1], flat[2], flat[3]
        c_flat = backend.reshape(backend.ascontiguous(c._data), (batch * size,))
        c_new = _plain(backend, lstm_c.row, [i, f, g, c_flat], dtype, (batch * size,), pattern="aaaa")
        h_new = _plain(backend, lstm_h.row, [o, c_new], dtype, (batch * size,), pattern="aa")
        ctx.save_for_backward(xi, h, c, w_hh, b_hh)
        ctx.arrays = (i, f, g, o, c_flat, c_new, h_new)
        ctx.weights_elsewhere = offset is not None
        return Tensor._make(backend.reshape(h_new, (batch, size))), Tensor._make(backend.reshape(c_new, (batch, size)))

    @staticmethod
    def backward(ctx, gh: Tensor | None, gc: Tensor | None):
        xi, h, c, w_hh, b_hh = ctx.saved_tensors
        needs = ctx.needs_input_grad
        need_w, need_b = (False, False) if ctx.weights_elsewhere else (needs[3], needs[4])
        wanted = (needs[0], needs[1], needs[2], need_w, need_b, ctx.weights_elsewhere and needs[5])
        arrays = ctx.arrays

        def kernel(gh, gc, xi, h, c, w_hh, b_hh):
            lstm_c, lstm_h, _ = _gate_functions()
            i, f, g, o, c_flat, c_new, h_new = arrays
            backend = c._backend
            dtype = c_new.dtype
            batch, size = c.shape
            flat = (batch * size,)
            gc_flat = None if gc is None else backend.reshape(backend.ascontiguous(gc._data), flat)
            if gh is None:  # (a step whose h' reaches the loss by no path: only c' carries a gradient)
                d_o, gct = backend.zeros(flat, dtype), gc_flat
            else:
                gh_flat = backend.reshape(backend.ascontiguous(gh._data), flat)
                d_o, gct = backend.elementwise_grads(lstm_h.row, (0, 1), gh_flat, h_new, [o, c_new], (), dtype)
                if gc_flat is not None:
                    gct = _plain(backend, ROWS["add"], [gct, gc_flat], dtype, flat, pattern="aa")
            inputs = [i, f, g, c_flat]
            d_i, d_f = backend.elementwise_grads(lstm_c.row, (0, 1), gct, c_new, inputs, (), dtype)
            d_g, d_c = backend.elementwise_grads(lstm_c.row, (2, 3), gct, c_new, inputs, (), dtype)
            rows = (batch, 1, size)
            parts = [backend.reshape(d, rows) for d in (d_i, d_f, d_g, d_o)]
            dgates = backend.reshape(backend.concatenate(parts, 1, dtype), (batch, 4 * size))
            gh_prev, gw, gb = backend.linear_backward(dgates, h._data, w_hh._data, (wanted[1], need_w, need_b))
            return (
                Tensor._make(dgates) if wanted[0] else None,
                None if gh_prev is None else Tensor._make(gh_prev),
                Tensor._make(backend.reshape(d_c, (batch, size))) if wanted[2] else None,
                None if gw is None else Tensor._make(gw),
                None if gb is None else Tensor._make(gb),
                Tensor._make(dgates) if wanted[5] else None,
            )

        def formula(gh, gc, xi, h, c, w_hh, b_hh):
            lstm_c, lstm_h, _ = _gate_functions()
            gates = xi + F.linear(h, w_hh, b_hh)
            i, f, g, o = gates.chunk(4, 1)
            c_new = lstm_c.apply(i, f, g, c)
            pairs = [(out, s) for out, s in zip((lstm_h.apply(o, c_new), c_new), (gh, gc)) if s is not None]
            need_gates = any(wanted[k] for k in (0, 1, 3, 4, 5))
            wrt = [t for t, need in ((gates, need_gates), (c, wanted[2])) if need]
            found = iter(autograd_grad([p[0] for p in pairs], wrt, [p[1] for p in pairs], create_graph=True))
            dgates = next(found) if need_gates else None
            return (
                dgates,
                dgates.mm(w_hh) if wanted[1] else None,
                next(found) if wanted[2] else None,
                dgates.t().mm(h) if need_w else None,
                dgates.sum(0) if need_b else None,
                dgates,
            )

        grads = fused_grads("LstmStepBackwardBackward", kernel, formula, (gh, gc, xi, h, c, w_hh, b_hh), wanted)
        return tuple(grads)


class _RecurrentWeights(Function):
    """Gives ``W_hh`` and ``b_hh`` their gradients for a whole layer in one matmul: ``d W_hh = sum_t d(hh_t).T @
    h_{t-1}``, where ``hh_t = h_{t-1} @ W_hh.T + b_hh``, as one ``(G, T*B) @ (T*B, H)`` product instead of T small
    products and T accumulations of a ``(G, H)`` gradient. Its output is a zero ``offset`` with ``xi``'s shape, one
    slice per step: a step adds nothing with it, but hands it ``d(hh_t)`` (LSTM: its gates' gradient; GRU: that of
    ``gh``) and skips its own weight gradients. (``xi``'s gradient cannot serve: in a double backward, ``xi`` also
    feeds the first backward's graph.) The layer loop stores the states that fed each step in ``h_prev`` (rows in
    ``xi``'s order) once it has run; they are also the inputs of its gradients' formula (with ``d(hh_t)``), so a
    double backward reaches them."""

    node_name = "RecurrentWeightsBackward"
    _trusted = True

    @staticmethod
    def forward(ctx, w_hh: Tensor, b_hh: Tensor | None, shape: tuple):
        ctx.h_prev = None
        ctx.save_for_backward(w_hh)
        return Tensor._make(w_hh._backend.zeros(shape, w_hh._data.dtype))

    @staticmethod
    def backward(ctx, g: Tensor):
        needs = ctx.needs_input_grad
        (w_hh,) = ctx.saved_tensors
        wanted = (needs[0], needs[1])

        def kernel(g, *h_prev):
            backend = g._backend
            gd = g._data
            g2 = backend.reshape(backend.ascontiguous(gd), (-1, gd.shape[-1]))
            h_all = backend.concatenate([h._data for h in h_prev], 0, gd.dtype)
            _, gw, gb = backend.linear_backward(g2, h_all, w_hh._data, (False, *wanted))
            return None if gw is None else Tensor._make(gw), None if gb is None else Tensor._make(gb)

        def formula(g, *h_prev):
            g2 = g.reshape(-1, g.shape[-1])
            return g2.t().mm(ops.cat(list(h_prev), 0)), g2.sum(0)

        return (*fused_grads("RecurrentWeightsBackwardBackward", kernel, formula, (g, *ctx.h_prev), wanted), None)


def _lstm_step(
    xi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None, w_hr: Tensor | None = None, offset=None
) -> tuple:
    """One LSTM step (``offset``: this step's slice of a ``_RecurrentWeights`` output, which then gives ``W_hh``
    and ``b_hh`` their gradients)."""
    h, c = _LSTMStep.apply(xi, state[0], state[1], w_hh, b_hh, offset)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gate_major(backend, a, gates: int, batch: int, size: int):
    """``(B, G*H)`` as ``(G, B*H)``: each gate's block contiguous (what the fused kernels' fast path takes)."""
    blocks = backend.ascontiguous(backend.reshape(a, (batch, gates, size)).transpose(1, 0, 2))
    return backend.reshape(blocks, (gates, batch * size))


class _GRUStep(Function):
    """One GRU time step as one graph node (as ``_LSTMStep``): ``gh = h @ W_hh.T + b_hh``, both ``xi`` and ``gh``
    laid out gate-major, then the fused ``h'`` kernel. Its backward computes the seven gradients in three kernels
    (those of ``xr``/``hr`` and ``xz``/``hz`` are equal), in every grad mode; their formula is the step made of
    ops, differentiated by the engine. ``offset`` (a ``_RecurrentWeights`` slice) receives ``gh``'s gradient
    instead of the step computing ``W_hh``'s and ``b_hh``'s."""

    node_name = "GruStepBackward"
    _trusted = True
    _node_defaults = releasing("arrays")

    @staticmethod
    def forward(ctx, xi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, offset: Tensor | None):
        backend = same_backend((xi, h, w_hh, b_hh))
        gru_h = _gate_functions()[2]
        hd, w = h._data, w_hh._data
        dtype = hd.dtype
        batch, size = h.shape
        gh = backend.linear(hd, w, b_hh._data) if b_hh is not None else backend.matmul(hd, w.T)
        x3 = _gate_major(backend, xi._data, 3, batch, size)
        h3 = _gate_major(backend, gh, 3, batch, size)
        h_flat = backend.reshape(backend.ascontiguous(hd), (batch * size,))
        operands = [x3[0], x3[1], x3[2], h3[0], h3[1], h3[2], h_flat]
        h_new = _plain(backend, gru_h.row, operands, dtype, (batch * size,), "a" * 7)
        ctx.save_for_backward(xi, h, w_hh, b_hh)
        ctx.arrays = (operands, h_new)
        ctx.weights_elsewhere = offset is not None
        return Tensor._make(backend.reshape(h_new, (batch, size)))

    @staticmethod
    def backward(ctx, g: Tensor):
        xi, h, w_hh, b_hh = ctx.saved_tensors
        needs = ctx.needs_input_grad
        need_w, need_b = (False, False) if ctx.weights_elsewhere else (needs[2], needs[3])
        wanted = (needs[0], needs[1], need_w, need_b, ctx.weights_elsewhere and needs[4])
        operands, h_new = ctx.arrays

        def kernel(g, xi, h, w_hh, b_hh):
            gru_h = _gate_functions()[2]
            backend = h._backend
            dtype = h_new.dtype
            batch, size = h.shape
            gd = backend.reshape(backend.ascontiguous(g._data), (batch * size,))
            d_r, d_z = backend.elementwise_grads(gru_h.row, (0, 1), gd, h_new, operands, (), dtype)
            d_xn, d_hn = backend.elementwise_grads(gru_h.row, (2, 5), gd, h_new, operands, (), dtype)
            d_h = backend.elementwise_grad(gru_h.row, 6, gd, h_new, operands, (), dtype)
            rows = (batch, 1, size)

            def by_row(parts):
                joined = backend.concatenate([backend.reshape(p, rows) for p in parts], 1, dtype)
                return backend.reshape(joined, (batch, 3 * size))

            d_gh = by_row([d_r, d_z, d_hn])
            gh_prev, gw, gb = backend.linear_backward(d_gh, h._data, w_hh._data, (wanted[1], need_w, need_b))
            if gh_prev is not None:
                gh_prev = _plain(backend, ROWS["add"], [gh_prev, backend.reshape(d_h, (batch, size))], dtype,
                                 (batch, size), "aa")  # fmt: skip
            return (
                Tensor._make(by_row([d_r, d_z, d_xn])) if wanted[0] else None,
                None if gh_prev is None else Tensor._make(gh_prev),
                None if gw is None else Tensor._make(gw),
                None if gb is None else Tensor._make(gb),
                Tensor._make(d_gh) if wanted[4] else None,
            )

        def formula(g, xi, h, w_hh, b_hh):
            # (``h`` feeds the gate kernel directly and through ``gh``: the direct use is a view of its own, so the
            # gradient with respect to it is the direct part alone)
            gh = F.linear(h, w_hh, b_hh)
            h_direct = h.view_as(h)
            out = _gate_functions()[2].apply(*xi.chunk(3, 1), *gh.chunk(3, 1), h_direct)
            need_gh = any(wanted[1:])
            wrt = [t for t, need in ((xi, wanted[0]), (gh, need_gh), (h_direct, wanted[1])) if need]
            found = iter(autograd_grad([out], wrt, [g], create_graph=True))
            d_xi = next(found) if wanted[0] else None
            d_gh = next(found) if need_gh else None
            d_h = d_gh.mm(w_hh) + next(found) if wanted[1] else None
            return d_xi, d_h, d_gh.t().mm(h) if need_w else None, d_gh.sum(0) if need_b else None, d_gh

        return (*fused_grads("GruStepBackwardBackward", kernel, formula, (g, xi, h, w_hh, b_hh), wanted), None)


def _gru_step(xi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None, w_hr=None, offset=None) -> tuple:
    return (_GRUStep.apply(xi, state[0], w_hh, b_hh, offset),)


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step, "GRU": _gru_step}


def _run_direction(step, xs: list, state: tuple, weights: tuple, sizes: list[int], reverse: bool, offsets=None):
    """Run one direction of one layer over the projected steps ``xs``; returns the outputs per step, the final
    state, and the hidden state each step read. ``offsets``: LSTM's per-step ``_RecurrentWeights`` slices.

    ``sizes[t]`` is how many sequences are still running at step ``t`` (packed input; all equal otherwise).
    Forward, the rows of sequences that have ended are set aside as their final state; in reverse, a sequence
    joins (from its initial state) at its last step.
    """
    w_hh, b_hh, w_hr = weights
    outputs: list = [None] * len(xs)
    fed: list = [None] * len(xs)  # the state each step read (what _RecurrentWeights multiplies by)
    if not reverse:
        ended: list[tuple] = []
        current = sizes[0] if sizes else 0
        for t, x in enumerate(xs):
            if sizes[t] < current:
                ended.append(tuple(s[sizes[t] : current] for s in state))
                state = tuple(s[: sizes[t]] for s in state)
                current = sizes[t]
            fed[t] = state[0]
            state = step(x, state, w_hh, b_hh, w_hr, offsets[t]) if offsets else step(x, state, w_hh, b_hh, w_hr)
            outputs[t] = state[0]
        if ended:
            state = tuple(ops.cat([s] + [piece[k] for piece in reversed(ended)], 0) for k, s in enumerate(state))
        return outputs, state, fed
    initial = state
    current = sizes[-1]
    if current < initial[0].shape[0]:
        state = tuple(s[:current] for s in initial)
    for t in range(len(xs) - 1, -1, -1):
        if sizes[t] > current:
            state = tuple(ops.cat([s, s0[current : sizes[t]]], 0) for s, s0 in zip(state, initial))
            current = sizes[t]
        fed[t] = state[0]
        x = xs[t]
        state = step(x, state, w_hh, b_hh, w_hr, offsets[t]) if offsets else step(x, state, w_hh, b_hh, w_hr)
        outputs[t] = state[0]
    return outputs, state, fed


# --- a whole layer-direction as one Function: per step one matmul and the gate kernels, nothing else ---------
def _step_rows(sizes: tuple, reverse: bool) -> list[tuple[int, int, int]]:
    """``(time step, first row, rows)`` of each step's slice of the time-major data, in the order the steps run."""
    steps, start = [], 0
    for t, n in enumerate(sizes):
        steps.append((t, start, n))
        start += n
    return steps[::-1] if reverse else steps


def _step_record(fed: list, k: int, frees: bool):
    """Step ``k``'s forward record for its backward, released once read when ``frees``; torch's error where an
    earlier backward that failed part way released it already."""
    record = fed[k]
    if record is None:
        raise RuntimeError(ERR_BACKWARD_TWICE)
    if frees:
        fed[k] = None
    return record


def _joined(backend, new, old, n: int, dtype):
    """The running state after a step that updated its first ``n`` rows: the rows past ``n`` (sequences that have
    ended, or in reverse have not begun) keep theirs."""
    return new if n == old.shape[0] else backend.concatenate([new, old[n:]], 0, dtype)


def _stacked(backend, arrays: list, dtype):
    return backend.concatenate(arrays, 0, dtype) if len(arrays) > 1 else arrays[0]


class _Layer(Function):
    """One direction of one LSTM (without projection) or GRU layer over the whole sequence, as one graph node.

    ``x`` is the layer's input, time-major rows (``(T*B, input_size)``, or a packed sequence's data); ``sizes`` how
    many sequences run at each step. The forward projects all steps at once (``x @ W_ih.T``, its output written
    contiguously, and the biases added in one pass), then per step runs the recurrent matmul and the fused step
    kernel, writing into whole-layer buffers, and records nothing: no node, view or stack per step. The recurrent
    product's operand is prepared once per layer (``backend.repeated_product``). The backward walks the steps
    back with the fused gradient kernel and one matmul each (``d h_{t-1} = d(hh_t) @ W_hh``, where
    ``hh_t = h_{t-1} @ W_hh.T + b_hh``), then gives the weights their gradients in one ``(G*H, T*B) @ (T*B, *)``
    product each. (An LSTM layer whose steps all run the whole batch may run all its steps, each way, in one
    backend call: ``backend.lstm_layer``.) With or without
    ``create_graph`` the gradients are one ``fused_grads`` node, whose formula (for their own derivatives) runs the
    layer step by step with ``F.linear`` and ``_LSTMStep``/``_GRUStep``, themselves twice differentiable. Subclasses
    give the bias folding and the steps' forward and backward loops (``_steps_forward``, ``_steps_backward``).

    The forward keeps whole-layer buffers (LSTM: the gates' activations and the cell states; GRU: its gates and
    ``gh``'s n part) and the state that fed each step (a view). A backward without ``retain_graph`` marks each
    step used as it goes (a second backward through it raises torch's error) and the engine's release then drops
    the buffers; it writes the steps' gradients straight into the whole layer's: its peak is the forward's
    arrays, not them and all the gradients."""

    _trusted = True
    _node_defaults = releasing("saved")
    _step = None  # the step of the formula (``_lstm_step`` or ``_gru_step``)
    _gates_take_hh_grad = False  # is ``d(hh_t)`` the gradient of the step's input projection (LSTM) or its own?

    @classmethod
    def forward(cls, ctx, x, w_ih, b_ih, w_hh, b_hh, sizes: tuple, reverse: bool, *state):
        backend = same_backend((x, w_ih, b_ih, w_hh, b_hh, *state))
        xi = cls._projected(backend, backend.matmul(backend.ascontiguous(x._data), w_ih._data.T), b_ih, b_hh)
        current = [backend.ascontiguous(s._data) for s in state]
        steps = _step_rows(sizes, reverse)
        output, final, saved = cls._steps_forward(backend, xi, current, w_hh._data, b_hh, steps, reverse)
        ctx.save_for_backward(x, w_ih, b_ih, w_hh, b_hh, *state)
        ctx.saved, ctx.sizes, ctx.reverse = saved, sizes, reverse
        # (the final states are copies: a view of the output would change with it)
        return (Tensor._make(output), *(Tensor._make(backend.copy(s)) for s in final))

    @classmethod
    def backward(cls, ctx, g_out: Tensor | None, *g_state):
        x, w_ih, b_ih, w_hh, b_hh, *state = ctx.saved_tensors
        needs = ctx.needs_input_grad
        wanted = (*needs[:5], *needs[7:])
        saved, sizes, reverse = ctx.saved, ctx.sizes, ctx.reverse
        frees = _release_follows()  # the engine releases this node right after: each step's arrays go once used
        count = len(state)

        def kernel(g_out, *rest):
            g_state, (x, w_ih, _, w_hh, _, *state) = rest[:count], rest[count:]
            backend = x._backend
            dtype = x._data.dtype
            go = None if g_out is None else backend.ascontiguous(g_out._data)
            carry = [
                backend.zeros(s._data.shape, dtype) if g is None else backend.ascontiguous(g._data)
                for g, s in zip(g_state, state)
            ]
            steps = _step_rows(sizes, reverse)
            # each step's gradients are written into the whole layer's, not kept per step and stacked afterwards
            rows, gate_size = x.shape[0], w_ih.shape[0]
            d_x = backend.empty((rows, gate_size), dtype)
            need_hh = wanted[3] or wanted[4]
            d_h = d_x if cls._gates_take_hh_grad or not need_hh else backend.empty((rows, gate_size), dtype)
            h_prev, carry = cls._steps_backward(backend, go, carry, saved, steps, w_hh._data, reverse, d_x, d_h, frees)
            gx, gw_ih, gb_ih = backend.linear_backward(d_x, x._data, w_ih._data, wanted[:3])
            gw_hh = gb_hh = None
            if need_hh:
                shared = d_h is d_x and gb_ih is not None  # (LSTM: both biases get the gates' gradient)
                needs_wb = (False, wanted[3], wanted[4] and not shared)
                _, gw_hh, gb_hh = backend.linear_backward(d_h, _stacked(backend, h_prev, dtype), w_hh._data, needs_wb)
                if wanted[4] and shared:
                    gb_hh = backend.copy(gb_ih)
            made = (gx, gw_ih, gb_ih, gw_hh, gb_hh, *(c if need else None for c, need in zip(carry, wanted[5:])))
            return tuple(None if a is None else Tensor._make(a) for a in made)

        def formula(g_out, *rest):
            g_state, (x, w_ih, b_ih, w_hh, b_hh, *state) = rest[:count], rest[count:]
            xs = list(F.linear(x, w_ih, b_ih).split(list(sizes), 0))
            outputs, final, _ = _run_direction(cls._step, xs, tuple(state), (w_hh, b_hh, None), list(sizes), reverse)
            pairs = [(t, g) for t, g in zip((ops.cat(outputs, 0), *final), (g_out, *g_state)) if g is not None]
            wrt = [t for t, need in zip((x, w_ih, b_ih, w_hh, b_hh, *state), wanted) if need]
            found = iter(autograd_grad([p[0] for p in pairs], wrt, [p[1] for p in pairs], create_graph=True,
                                       allow_unused=True))  # fmt: skip
            return tuple(next(found) if need else None for need in wanted)

        inputs = (g_out, *g_state, x, w_ih, b_ih, w_hh, b_hh, *state)
        grads = fused_grads(cls.node_name + "Backward", kernel, formula, inputs, wanted)
        return (*grads[:5], None, None, *grads[5:])


class _LSTMLayer(_Layer):
    """``_Layer`` for LSTM: ``b_hh`` is added to all steps' projections at once; a step is the recurrent matmul
    and one fused kernel (``backend.lstm_cell``: the gates' activations and the new states, the hidden one straight
    into the output's rows); its backward one fused kernel
    (``backend.lstm_cell_backward``, writing the gates' gradient into the layer's) and a matmul."""

    node_name = "LstmLayerBackward"
    _step = staticmethod(_lstm_step)
    _gates_take_hh_grad = True

    @staticmethod
    def _projected(backend, xi, b_ih, b_hh):
        """``xi + b_ih + b_hh`` in place: a step then adds only its matmul."""
        if b_ih is not None:
            bias = backend.elementwise(ROWS["add"], [b_ih._data, b_hh._data], (), xi.dtype)
            backend.elementwise(ROWS["add"], [xi, bias], (), xi.dtype, out=xi)
        return xi

    @staticmethod
    def _steps_forward(backend, xi, current: list, w_hh, b_hh, steps: list, reverse: bool) -> tuple:
        """Per step: ``hh = h @ W_hh.T`` (``backend.repeated_product``), then the fused kernel; or, where every
        step runs the whole batch, all the steps in the backend's one call (``backend.lstm_layer``, where it has
        one). ``acts`` keeps every step's gate activations (not written over ``xi``: the kernel's loops vectorize
        only where their arrays do not overlap), ``cells`` every step's new cell state; each step's record is the
        ``(h, c)`` that fed it (views)."""
        dtype = xi.dtype
        rows, size = xi.shape[0], current[1].shape[1]
        acts = backend.empty(xi.shape, dtype)
        output, cells = backend.empty((rows, size), dtype), backend.empty((rows, size), dtype)
        batch = current[0].shape[0]
        whole = all(n == batch for _, _, n in steps)
        steps_back = backend.lstm_layer(xi, *current, w_hh, reverse, acts, output, cells) if whole else None
        if steps_back is not None:
            fed = [(current[0], current[1])]
            fed += [(output[start : start + batch], cells[start : start + batch]) for _, start, _ in steps[:-1]]
            last = slice(steps[-1][1], steps[-1][1] + batch)
            return output, [output[last], cells[last]], (acts, output, cells, fed, steps_back)
        product = backend.repeated_product(w_hh, max((n for _, _, n in steps), default=0))
        fed = []
        for _, start, n in steps:
            h, c = current[0][:n], current[1][:n]
            fed.append((h, c))
            rows_t = slice(start, start + n)
            h_new, c_new = output[rows_t], cells[rows_t]
            backend.lstm_cell(xi[rows_t], product(h), c, acts[rows_t], h_new, c_new)
            current = [_joined(backend, h_new, current[0], n, dtype), _joined(backend, c_new, current[1], n, dtype)]
        return output, current, (acts, output, cells, fed, None)

    @staticmethod
    def _steps_backward(backend, go, carry: list, saved: tuple, steps: list, w_hh, reverse: bool, d_x, d_h,
                        frees: bool) -> tuple:  # fmt: skip
        """Per step back: the fused gradient kernel (the output's gradient added in it), writing the gates'
        gradient into ``d_x``'s rows, then ``d h_{t-1} = d(gates) @ W_hh`` (``backend.repeated_product``); or, after
        a forward in one ``backend.lstm_layer`` call, all the steps back in the one call it returned."""
        acts, output, cells, fed, steps_back = saved
        dtype = d_x.dtype
        size = output.shape[1]
        h_prev = [None] * len(steps)
        if steps_back is not None:
            for k, (t, _, _) in enumerate(steps):
                h_prev[t] = _step_record(fed, k, frees)[0]
            return h_prev, list(steps_back(go, *carry, w_hh, d_x))
        product = backend.repeated_product(w_hh.T, max((n for _, _, n in steps), default=0))
        no_output_grad = backend.zeros(carry[0].shape, dtype) if go is None else None  # (all the state's rows)
        for k in range(len(steps) - 1, -1, -1):
            t, start, n = steps[k]
            h, c = _step_record(fed, k, frees)
            rows = slice(start, start + n)
            g_out = go[rows] if go is not None else no_output_grad[:n]
            d_gates, g_c = d_x[rows], backend.empty((n, size), dtype)
            backend.lstm_cell_backward(g_out, carry[0][:n], carry[1][:n], acts[rows], c, cells[rows], d_gates, g_c)
            g_h = product(d_gates)
            h_prev[t] = h
            carry = [_joined(backend, g_h, carry[0], n, dtype), _joined(backend, g_c, carry[1], n, dtype)]
        return h_prev, carry


class _GRULayer(_Layer):
    """``_Layer`` for GRU: a step is ``gh = h @ W_hh.T + b_hh`` and one fused kernel (``backend.gru_cell``, the new
    hidden state straight into the output's rows); its backward one fused kernel (``backend.gru_cell_backward``),
    a matmul and an add."""

    node_name = "GruLayerBackward"
    _step = staticmethod(_gru_step)

    @staticmethod
    def _projected(backend, xi, b_ih, b_hh):
        """``xi + b_ih`` in place (``b_hh`` stays in the step: ``r`` multiplies its third of it)."""
        if b_ih is not None:
            backend.elementwise(ROWS["add"], [xi, b_ih._data], (), xi.dtype, out=xi)
        return xi

    @staticmethod
    def _steps_forward(backend, xi, current: list, w_hh, b_hh, steps: list, reverse: bool) -> tuple:
        """Per step: ``gh = h @ W_hh.T + b_hh`` (``backend.repeated_product``), then the fused kernel. ``acts``
        keeps every step's ``(r, z, n, gh's n part)``; each step's record is the ``h`` that fed it (a view)."""
        dtype = xi.dtype
        rows, size = xi.shape[0], current[0].shape[1]
        product = backend.repeated_product(w_hh, max((n for _, _, n in steps), default=0))
        acts, output = backend.empty((rows, 4 * size), dtype), backend.empty((rows, size), dtype)
        fed = []
        for _, start, n in steps:
            h = current[0][:n]
            fed.append(h)
            gh = product(h, None if b_hh is None else b_hh._data)
            rows_t = slice(start, start + n)
            backend.gru_cell(xi[rows_t], gh, h, acts[rows_t], output[rows_t])
            current = [_joined(backend, output[rows_t], current[0], n, dtype)]
        return output, current, (acts, fed)

    @staticmethod
    def _steps_backward(backend, go, carry: list, saved: tuple, steps: list, w_hh, reverse: bool, d_x, d_h,
                        frees: bool) -> tuple:  # fmt: skip
        """Per step back: the fused gradient kernel (the output's gradient added in it), writing ``xi``'s gradient
        into ``d_x``'s rows and ``gh``'s into ``d_h``'s (``W_hh`` wants them; else a step's own), then ``d h_{t-1}
        = d(gh) @ W_hh`` (``backend.repeated_product``) plus the part through ``h' = n + z * (h - n)``."""
        acts, fed = saved
        product = backend.repeated_product(w_hh.T, max((n for _, _, n in steps), default=0))
        dtype = d_x.dtype
        size = acts.shape[1] // 4
        h_prev = [None] * len(steps)
        no_output_grad = backend.zeros(carry[0].shape, dtype) if go is None else None  # (all the state's rows)
        for k in range(len(steps) - 1, -1, -1):
            t, start, n = steps[k]
            h = _step_record(fed, k, frees)
            rows = slice(start, start + n)
            g_out = go[rows] if go is not None else no_output_grad[:n]
            d_gh = backend.empty((n, 3 * size), dtype) if d_h is d_x else d_h[rows]
            g_h = backend.empty((n, size), dtype)
            backend.gru_cell_backward(g_out, carry[0][:n], acts[rows], h, d_x[rows], d_gh, g_h)
            g_prev = _plain(backend, ROWS["add"], [product(d_gh), g_h], dtype, (n, size), "aa")
            h_prev[t] = h
            carry = [_joined(backend, g_prev, carry[0], n, dtype)]
        return h_prev, carry


_LAYERS = {"LSTM": _LSTMLayer, "GRU": _GRULayer}


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: torch's parameters (``weight_ih_l{k}[_reverse]``, ...), their
    uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) initialisation, the input checks, and the layer loop."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=2,
            )
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
            for direction in range(num_directions):
                shapes = [(gate_size, layer_input_size), (gate_size, real_hidden_size)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    shapes += [(gate_size,), (gate_size,)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    shapes.append((proj_size, hidden_size))
                    names.append("weight_hr_l{}{}")
                suffix = "_reverse" if direction == 1 else ""
                names = [n.format(layer, suffix) for n in names]
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(ops.empty(*shape, dtype=dtype, device=device)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        """The parameters in torch's flat order, read afresh (so an assigned ``weight_ih_l0`` is seen)."""
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """Each layer-direction's parameters, in torch's order (w_ih, w_hh[, b_ih, b_hh][, w_hr])."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """Nothing to do: as in torch on the CPU, the parameters are used where they are."""

    def reset_parameters(self) -> None:
        """Draw every parameter from uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch does."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # --- checks, with torch's messages ---------------------------------------------------------------------
    def check_input(self, input: Tensor, batch_sizes) -> None:  # noqa: A002
        """The input's dtype, number of dimensions and feature size, with torch's errors."""
        weight_dtype = self._flat_weights[0].dtype
        if input.dtype != weight_dtype:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). Convert input: "
                f"input.to({weight_dtype}), or convert model: model.to({input.dtype})"
            )
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {input.size(-1)}"
            )

    def get_expected_hidden_size(self, input: Tensor, batch_sizes) -> tuple[int, int, int]:  # noqa: A002
        """``(layers * directions, batch, proj_size or hidden_size)``: the shape ``h_0`` must have."""
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(
        self, hx: Tensor, expected_hidden_size: tuple[int, int, int], msg: str = "Expected hidden size {}, got {}"
    ) -> None:
        """Raise torch's RuntimeError (``msg`` filled with both shapes) unless ``hx`` has the expected shape."""
        if tuple(hx.size()) != expected_hidden_size:
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor, batch_sizes) -> None:  # noqa: A002
        """Check the input, then the initial state's shape."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx: Tensor, permutation: Tensor | None) -> Tensor:
        """Reorder the batch of a state to follow a packed sequence's sorting (``None``: unchanged)."""
        return hx if permutation is None else hx.index_select(1, permutation)

    # --- the computation -----------------------------------------------------------------------------------
    def _zeros(self, input: Tensor, batch: int, size: int) -> Tensor:
        num_directions = 2 if self.bidirectional else 1
        return ops.zeros(self.num_layers * num_directions, batch, size, dtype=input.dtype, device=input.device)

    def _layers(self, input: Tensor, hx: tuple, batch_sizes: Tensor | None) -> tuple[Tensor, tuple]:
        """All layers and directions: ``input`` is ``(T, B, input_size)`` (time first), or a packed ``data``
        ``(N, input_size)`` with ``batch_sizes``; ``hx`` holds the initial states ``(layers * directions, B, *)``.
        Returns the last layer's output (same layout as ``input``) and the final states, stacked like ``hx``."""
        step = _STEPS[self.mode]
        num_directions = 2 if self.bidirectional else 1
        if batch_sizes is None:
            if input.shape[0] == 0:
                raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
            sizes = [input.shape[1]] * input.shape[0]
        else:
            sizes = [int(n) for n in batch_sizes.numpy()]
        finals: list[list[Tensor]] = [[] for _ in hx]
        layer_input = input
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                layer_input = F.dropout(layer_input, self.dropout, True)
            directions = []
            for direction in range(num_directions):
                index = layer * num_directions + direction
                params = dict(zip(("w_ih", "w_hh", "b_ih", "b_hh", "w_hr"), self._weights_of(index)))
                state = tuple(h[index] for h in hx)
                whole = _LAYERS.get(self.mode) if params["w_hr"] is None else None
                if whole is not None:  # (LSTM without projection, GRU: the layer is one node)
                    rows = layer_input if batch_sizes is not None else layer_input.reshape(-1, layer_input.shape[-1])
                    weights = (params["w_ih"], params["b_ih"], params["w_hh"], params["b_hh"])
                    output, *state = whole.apply(rows, *weights, tuple(sizes), direction == 1, *state)
                    directions.append(
                        output if batch_sizes is not None else output.view(input.shape[0], -1, output.shape[-1])
                    )
                    for k, s in enumerate(state):
                        finals[k].append(s)
                    continue
                projected = F.linear(layer_input, params["w_ih"], params["b_ih"])
                xs = list(projected.unbind(0) if batch_sizes is None else projected.split(sizes, 0))
                offsets = None
                # (only while a graph is recorded: under no_grad the weight node would not exist to complete)
                if self.mode in ("LSTM", "GRU") and grad_state.enabled and params["w_hh"].requires_grad:
                    # (the node gets the states that fed each step after the steps ran: a replay would not)
                    break_trace(f"runs a {self.mode} layer, whose weight node is completed after its steps")
                    offset = _RecurrentWeights.apply(params["w_hh"], params["b_hh"], tuple(projected.shape))
                    offsets = offset.unbind(0) if batch_sizes is None else offset.split(sizes, 0)
                weights = (params["w_hh"], params["b_hh"], params["w_hr"])
                outputs, state, fed = _run_direction(step, xs, state, weights, sizes, direction == 1, offsets)
                if offsets is not None:
                    offset.grad_fn.h_prev = fed
                directions.append(ops.stack(outputs, 0) if batch_sizes is None else ops.cat(outputs, 0))
                for k, s in enumerate(state):
                    finals[k].append(s)
            layer_input = directions[0] if num_directions == 1 else ops.cat(directions, -1)
        return layer_input, tuple(ops.stack(f, 0) for f in finals)

    def _weights_of(self, index: int) -> tuple:
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of one layer-direction, ``None`` for those this module lacks."""
        names = self._all_weights[index]
        w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
        b_ih = getattr(self, names[2]) if self.bias else None
        b_hh = getattr(self, names[3]) if self.bias else None
        w_hr = getattr(self, names[-1]) if self.proj_size > 0 else None
        return w_ih, w_hh, b_ih, b_hh, w_hr

    def _forward_single_state(self, input, hx):  # noqa: A002
        """forward for RNN and GRU (one state tensor), following torch's checks in torch's order."""
        orig_input = input
        if isinstance(orig_input, PackedSequence):
            input, batch_sizes, sorted_indices, unsorted_indices = orig_input
            if hx is None:
                hx = self._zeros(input, int(batch_sizes[0]), self.hidden_size)
            else:
                hx = self.permute_hidden(hx, sorted_indices)
        else:
            batch_sizes = sorted_indices = unsorted_indices = None
            if input.dim() not in (2, 3):
                tensor_word = " tensor" if self.mode != "GRU" else ""
                name = "GRU" if self.mode == "GRU" else "RNN"
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D{tensor_word} instead")
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
                if hx is not None:
                    if hx.dim() != 2:
                        raise RuntimeError(
                            f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor"
                        )
                    hx = hx.unsqueeze(1)
            elif hx is not None and hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
            if hx is None:
                hx = self._zeros(input, input.size(0) if self.batch_first else input.size(1), self.hidden_size)
        self.check_forward_args(input, hx, batch_sizes)
        if batch_sizes is None and self.batch_first:
            input = input.transpose(0, 1)
        output, (hidden,) = self._layers(input, (hx,), batch_sizes)
        if isinstance(orig_input, PackedSequence):
            return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), self.permute_hidden(
                hidden, unsorted_indices
            )
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            hidden = hidden.squeeze(1)
        return output, hidden


class RNN(RNNBase):
    """Elman RNN, ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (``relu`` with
    ``nonlinearity="relu"``), stacked ``num_layers`` deep, optionally bidirectional."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx: Tensor | None = None):  # noqa: A002
        """``(output, h_n)``; ``input`` is ``(L, N, H_in)``, ``(N, L, H_in)`` with ``batch_first``, ``(L, H_in)``
        unbatched, or a ``PackedSequence`` (then ``output`` is one too)."""
        return self._forward_single_state(input, hx)


class GRU(RNNBase):
    """Gated recurrent unit: reset gate ``r``, update gate ``z``, candidate ``n = tanh(W_in x + b_in +
    r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``; gates in torch's order (r, z, n)."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx: Tensor | None = None):  # noqa: A002
        """``(output, h_n)``, as ``RNN.forward``."""
        return self._forward_single_state(input, hx)


class LSTM(RNNBase):
    """Long short-term memory: gates in torch's order (input, forget, cell, output); with ``proj_size > 0`` the
    hidden state is projected by ``weight_hr_l{k}`` to ``proj_size`` features."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes) -> tuple[int, int, int]:  # noqa: A002
        """``(layers * directions, batch, hidden_size)``: the shape ``c_0`` must have."""
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input: Tensor, hidden: tuple, batch_sizes) -> None:  # noqa: A002
        """Check the input, then ``h_0``'s and ``c_0``'s shapes."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(
            hidden[0], self.get_expected_hidden_size(input, batch_sizes), "Expected hidden[0] size {}, got {}"
        )
        self.check_hidden_size(
            hidden[1], self.get_expected_cell_size(input, batch_sizes), "Expected hidden[1] size {}, got {}"
        )

    def permute_hidden(self, hx: tuple, permutation: Tensor | None) -> tuple:
        """Reorder the batch of ``(h, c)`` to follow a packed sequence's sorting (``None``: unchanged)."""
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)

    def forward(self, input, hx: tuple | None = None):  # noqa: A002
        """``(output, (h_n, c_n))``; ``input`` as for ``RNN.forward``, ``hx`` an optional ``(h_0, c_0)``."""
        orig_input = input
        real_hidden_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        if isinstance(orig_input, PackedSequence):
            input, batch_sizes, sorted_indices, unsorted_indices = orig_input
            if hx is None:
                batch = int(batch_sizes[0])
                hx = (self._zeros(input, batch, real_hidden_size), self._zeros(input, batch, self.hidden_size))
            else:
                hx = self.permute_hidden(hx, sorted_indices)
        else:
            batch_sizes = sorted_indices = unsorted_indices = None
            if input.dim() not in (2, 3):
                raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
            batch = input.size(0) if self.batch_first else input.size(1)
            if hx is None:
                hx = (self._zeros(input, batch, real_hidden_size), self._zeros(input, batch, self.hidden_size))
                self.check_forward_args(input, hx, batch_sizes)
            else:
                if is_batched:
                    if hx[0].dim() != 3 or hx[1].dim() != 3:
                        raise RuntimeError(
                            "For batched 3-D input, hx and cx should also be 3-D but got "
                            f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors"
                        )
                else:
                    if hx[0].dim() != 2 or hx[1].dim() != 2:
                        raise RuntimeError(
                            "For unbatched 2-D input, hx and cx should also be 2-D but got "
                            f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors"
                        )
                    hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
                self.check_forward_args(input, hx, batch_sizes)
        if batch_sizes is not None:
            self.check_forward_args(input, hx, batch_sizes)
        elif self.batch_first:
            input = input.transpose(0, 1)
        output, hidden = self._layers(input, tuple(hx), batch_sizes)
        if isinstance(orig_input, PackedSequence):
            return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), self.permute_hidden(
                hidden, unsorted_indices
            )
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            hidden = (hidden[0].squeeze(1), hidden[1].squeeze(1))
        return output, hidden


# --- cells -------------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """What the cells share: ``weight_ih (chunks*hidden, input)``, ``weight_hh (chunks*hidden, hidden)``, the
    optional biases, torch's uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) init, and the size checks."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(ops.empty(num_chunks * hidden_size, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(ops.empty(num_chunks * hidden_size, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(ops.empty(num_chunks * hidden_size, dtype=dtype, device=device))
            self.bias_hh = Parameter(ops.empty(num_chunks * hidden_size, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        """Draw every parameter from uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch does."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _check_sizes(self, input: Tensor, hidden: tuple) -> None:  # noqa: A002
        """torch's checks of a cell's (2-D) input and states, in its order and with its messages."""
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for k, h in enumerate(hidden):
            if input.size(0) != h.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{k} batch size {h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(
                    f"hidden{k} has inconsistent hidden_size: got {h.size(1)}, expected {self.hidden_size}"
                )

    def _one_step(self, step, input: Tensor, state: tuple) -> tuple:  # noqa: A002
        self._check_sizes(input, state)
        xi = F.linear(input, self.weight_ih, self.bias_ih)
        return step(xi, state, self.weight_hh, self.bias_hh)

    def _zeros(self, input: Tensor) -> Tensor:  # noqa: A002
        return ops.zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ``relu``)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        if input.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = self._zeros(input)
        elif not is_batched:
            hx = hx.unsqueeze(0)
        if self.nonlinearity == "tanh":
            step = _rnn_tanh_step
        elif self.nonlinearity == "relu":
            step = _rnn_relu_step
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        (ret,) = self._one_step(step, input, (hx,))
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c')`` from ``input`` and ``(h, c)``, gates in torch's order (i, f, g, o)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = self._zeros(input)
            hx = (zeros, zeros)
        elif not is_batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = self._one_step(_lstm_step, input, tuple(hx))
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``h'`` from ``input`` and ``h``, gates in torch's order (r, z, n)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        if input.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = self._zeros(input)
        elif not is_batched:
            hx = hx.unsqueeze(0)
        (ret,) = self._one_step(_gru_step, input, (hx,))
        return ret if is_batched else ret.squeeze(0)
