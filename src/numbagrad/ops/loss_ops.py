"""The loss Functions behind ``nn.functional``: fused cross entropy (class indices, label smoothing, class weights,
``ignore_index``), ``nll_loss``, and the pointwise losses torch computes in one node (smooth L1, Huber, binary
cross entropy with and without logits).

Cross entropy is one node whatever the options (a Numba kernel computes the softmax, the loss and, in backward,
``(coef * softmax - target weights) * scale`` per sample); it carries the name of torch's last node:
``NllLossBackward0`` (``NllLoss2DBackward0`` for inputs with extra dims), or ``AddBackward0`` with label smoothing,
where torch adds the smoothing term last. Its backward kernel's gradient is a ``fused_grads`` node whose own
backward differentiates the same gradient written with tensor ops (the softmax recomputed), so double backward
works.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._tensor import Tensor
from ..autograd.function import NOT_A_TENSOR_INPUT, Function, edge_of, make_node, saved_input_unhooked
from ..autograd.fused import fused_grads
from ..autograd.grad_mode import nothing_records, state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for
from ..scalar_math import ROWS, Row, log, select
from ._common import new_shell as _new
from .elementwise import FUNCTIONS, make_function
from .indexing import where
from .nn_ops import linear_map
from .reduction import softmax

#: torch's composite losses divide by numbers in C++ (``DivBackward1``); from Python that is ``DivBackward0``.
#: This gives the probability-target cross entropy torch's last node name.
ScalarDiv = make_function(ROWS["div"], "DivBackward1", "ScalarDiv")


def _t(data) -> Tensor:
    return Tensor._make(data)


class ClassTargets:
    """Class-index targets (int64 storage on the input's device), flattened to one per row of the (rows, C)
    logits, with what the other losses need, computed on the host on first use: the class weights (host copy),
    each row's weight (0 where ``target == ignore_index``) and their sum. The fused cross entropy needs none of
    them, so its targets stay on the device."""

    def __init__(self, target, weight, ignore_index: int, dtype: np.dtype) -> None:
        self.target, self.weight, self.ignore_index, self.dtype = target, weight, ignore_index, dtype
        self._derived = self._stored = None

    def stored(self) -> tuple:
        """(the targets with ignored ones replaced by class 0, each row's weight in ``dtype``, their float64 sum
        (0-d)), as storage on the targets' device, computed there by backend ops (nothing read back)."""
        if self._stored is None:
            b, t = backend_for(self.target), self.target
            counted = b.elementwise(ROWS["ne"], [t, self.ignore_index], (), t.dtype, out_dtype=np.bool_)
            index = b.where(counted, t, 0, np.int64)
            row_weight = b.astype(counted, self.dtype)
            if self.weight is not None:
                picked = b.getitem(b.astype(self.weight._data, self.dtype), (index,))
                row_weight = b.elementwise(ROWS["mul"], [picked, row_weight], (), self.dtype)
            self._stored = index, row_weight, b.reduce(row_weight, "sum", None, False, np.float64)
        return self._stored

    @property
    def host_target(self) -> np.ndarray:
        return backend_for(self.target).to_host(self.target)

    def _derive(self) -> tuple:
        if self._derived is None:
            target = self.host_target
            counted = target != self.ignore_index
            index = np.where(counted, target, 0)
            if self.weight is None:
                weight_host, row_weight = None, counted.astype(self.dtype)
            else:
                weight_host = self.weight._host().astype(self.dtype)
                row_weight = (weight_host[index] * counted).astype(self.dtype)
            self._derived = (index, weight_host, row_weight, float(row_weight.sum(dtype=np.float64)), counted)
        return self._derived

    @property
    def index(self) -> np.ndarray:
        """The targets with ignored ones replaced by class 0 (safe to index with)."""
        return self._derive()[0]

    @property
    def weight_host(self):
        return self._derive()[1]

    @property
    def row_weight(self) -> np.ndarray:
        return self._derive()[2]

    @property
    def total(self) -> float:
        return self._derive()[3]

    @property
    def counted(self) -> np.ndarray:
        """Whether each row counts (its target is not ``ignore_index``)."""
        return self._derive()[4]


def class_targets(target: Tensor, weight, ignore_index: int, dtype: np.dtype, classes: int) -> ClassTargets:
    """The ``ClassTargets`` of the integer tensor ``target`` for ``classes`` classes, its range checked (torch's
    IndexError for the first target outside ``[0, classes)`` other than ``ignore_index``). The losses call it in
    their forward, so a compiled replay checks and reads each call's targets."""
    backend = target._backend
    t = backend.reshape(target._data, (-1,))
    t = t if t.dtype == np.int64 else backend.astype(t, np.int64)
    backend.check_index(t, 0, classes, ignore_index, _target_out_of_bounds)
    return ClassTargets(t, weight, ignore_index, dtype)


def _target_out_of_bounds(bad: int) -> IndexError:
    return IndexError(f"Target {bad} is out of bounds.")


_ONE = (True,)  # (one gradient wanted)
_CE_GRAD_NODE = "CrossEntropyBackwardBackward0"


class CrossEntropy(Function):
    """Cross entropy of logits with class indices in one node: an (N, C, d1...) input is seen as (N, C, S)
    planes by the caller's ``layout``, (N, C) and (C,) ones with S = 1."""

    node_name = "NllLossBackward0"
    _trusted = True
    _simple = True  # (the forward is backend calls only: apply's simple path)

    @staticmethod
    def forward(ctx, x: Tensor, weight, target: Tensor, reduction: str, smoothing: float, layout, ignore_index: int):
        backend = x._backend
        x3 = layout.planes(backend, x._data)
        targets = class_targets(target, weight, ignore_index, x3.dtype, layout.c)
        w = None if weight is None else weight._data
        probs, loss, total = backend.cross_entropy(x3, targets.target, w, smoothing, targets.ignore_index, reduction)
        ctx.probs, ctx.total, ctx.targets = probs, total, targets
        ctx.reduction, ctx.smoothing, ctx.layout = reduction, smoothing, layout
        ctx.save_for_backward(x, weight)
        return _t(layout.loss_shape(loss, reduction))

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        if nothing_records(state):  # the kernel alone (what fused_grads would call)
            return _cross_entropy_grad(ctx, weight, g), None, None, None, None, None, None
        kernel = functools.partial(_cross_entropy_grad_kernel, ctx, weight)
        formula = functools.partial(_cross_entropy_grad_formula, ctx, weight)
        (gx,) = fused_grads(_CE_GRAD_NODE, kernel, formula, (g, x), _ONE)
        return gx, None, None, None, None, None, None


def _cross_entropy_grad(ctx, weight, g: Tensor) -> Tensor:
    """Cross entropy's input gradient from the kernel, on the forward's softmax (``ctx.probs``)."""
    backend = g._backend
    gd = g._data if ctx.reduction != "none" else backend.reshape(g._data, (-1,))
    targets, w = ctx.targets, None if weight is None else weight._data
    grad = backend.cross_entropy_backward(
        ctx.probs, targets.target, w, ctx.smoothing, targets.ignore_index, gd, ctx.total
    )
    return _t(backend.reshape(grad, ctx.layout.shape))


def _cross_entropy_grad_kernel(ctx, weight, g: Tensor, x: Tensor) -> tuple:
    return (_cross_entropy_grad(ctx, weight, g),)


def _cross_entropy_grad_formula(ctx, weight, g: Tensor, x: Tensor) -> tuple:
    return (_cross_entropy_grad_graph(ctx, x, weight, g),)


class CrossEntropy2d(CrossEntropy):
    node_name = "NllLoss2DBackward0"


class SmoothedCrossEntropy(CrossEntropy):
    node_name = "AddBackward0"


def _cross_entropy_grad_graph(ctx, x: Tensor, weight, g: Tensor) -> Tensor:
    """Cross entropy's input gradient with differentiable ops: per row ``coef * p - (1 - s) * w[t] * onehot(t) -
    s / C * w``, times the incoming gradient over the mean's denominator (0 for ignored rows)."""
    layout, targets, s = ctx.layout, ctx.targets, ctx.smoothing
    rows = layout.rows_of(x)
    c = rows.shape[1]
    dtype = rows._data.dtype
    backend = rows._backend
    p = softmax(rows, 1)
    w = _t(backend.from_host(targets.weight_host)) if targets.weight_host is not None else None
    wsum = float(targets.weight_host.sum()) if w is not None else float(c)
    row_w = _t(backend.from_host(targets.row_weight.reshape(-1, 1)))
    counted = _t(backend.from_host(targets.counted.astype(dtype).reshape(-1, 1)))
    onehot = np.zeros((len(targets.index), c), dtype)
    onehot[np.arange(len(targets.index)), targets.index] = 1
    onehot = _t(backend.from_host(onehot))
    d = p * (row_w * (1 - s) + counted * (s / c * wsum)) - onehot * row_w * (1 - s)
    if s:
        d = d - counted * (w.reshape(1, c) if w is not None else 1.0) * (s / c)
    scale = g.reshape(-1, 1) if ctx.reduction == "none" else g / (targets.total if ctx.reduction == "mean" else 1.0)
    return layout.from_rows_tensor(d * scale, x)


class RowLayout:
    """How an (N, C, d1, ...) or (C,) input maps to (rows, C) and back (class dim last, then flattened)."""

    def __init__(self, shape: tuple) -> None:
        self.shape = tuple(shape)
        self.ndim = len(shape)
        c = shape[1] if self.ndim >= 2 else shape[0]
        self.c = c
        self.perm = (0, *range(2, self.ndim), 1) if self.ndim > 2 else None
        self.loss_none_shape = (shape[0], *shape[2:]) if self.ndim >= 2 else ()

    def planes(self, backend, data):
        """The input as (N, C, S): S positions per sample (an image's pixels), 1 for (N, C) and (C,) inputs; a
        view of a contiguous input. Row ``n * S + s`` of ``to_rows`` is position s of sample n."""
        n = self.shape[0] if self.ndim >= 2 else 1
        return backend.reshape(data, (n, self.c, math.prod(self.shape[2:])))

    def to_rows(self, data):
        if self.ndim == 1:
            return data.reshape(1, self.c)
        if self.perm is None:
            return data
        return data.transpose(self.perm).reshape(-1, self.c)

    def from_rows(self, grad):
        if self.ndim == 1:
            return grad.reshape(self.shape)
        if self.perm is None:
            return grad
        moved = grad.reshape(self.shape[0], *self.shape[2:], self.c)
        inverse = (0, self.ndim - 1, *range(1, self.ndim - 1))
        return moved.transpose(inverse).copy()

    def rows_of(self, x: Tensor) -> Tensor:
        if self.ndim == 1:
            return x.reshape(1, self.c)
        if self.perm is None:
            return x
        return x.permute(*self.perm).reshape(-1, self.c)

    def from_rows_tensor(self, grad: Tensor, x: Tensor) -> Tensor:
        if self.ndim == 1:
            return grad.reshape(self.shape)
        if self.perm is None:
            return grad
        inverse = (0, self.ndim - 1, *range(1, self.ndim - 1))
        return grad.reshape(self.shape[0], *self.shape[2:], self.c).permute(*inverse)

    def loss_shape(self, loss, reduction: str):
        if reduction != "none":
            return loss
        return loss.reshape(self.loss_none_shape)


class NllLoss(Function):
    """``-input[row, target] * weight[target]`` reduced, over (rows, C) log-probabilities."""

    node_name = "NllLossBackward0"
    _trusted = True
    _unlisted_inputs = (2,)  # (the class weights, which torch does not differentiate)

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, weight, reduction: str, layout: RowLayout, ignore_index: int):
        backend = x._backend
        rows = layout.to_rows(x._data)
        targets = class_targets(target, weight, ignore_index, rows.dtype, layout.c)
        index, row_weight, total = targets.stored()
        picked = backend.reshape(backend.take_along_axis(rows, backend.reshape(index, (-1, 1)), 1), (-1,))
        losses = backend.elementwise(ROWS["mul"], [picked, row_weight], (), rows.dtype)
        losses = backend.elementwise(ROWS["neg"], [losses], (), rows.dtype)
        ctx.targets, ctx.reduction, ctx.layout = targets, reduction, layout
        ctx.rows_shape = rows.shape
        if reduction == "none":
            return _t(layout.loss_shape(losses, reduction))
        summed = backend.reduce(losses, "sum", None, False)
        if reduction == "mean":
            with np.errstate(divide="ignore", invalid="ignore"):  # (all ignored: 0 / 0, nan as torch's)
                summed = backend.elementwise(ROWS["div"], [summed, total], (), rows.dtype)
        return _t(summed)

    @staticmethod
    def backward(ctx, g: Tensor):
        targets, layout = ctx.targets, ctx.layout
        backend = g._backend
        dtype = g._data.dtype
        index, row_weight, total = targets.stored()
        index = backend.reshape(index, (-1, 1))
        weights = -_t(backend.reshape(backend.astype(row_weight, dtype), (-1, 1)))
        if ctx.reduction == "none":
            scale = g.reshape(-1, 1)
        elif ctx.reduction == "mean":
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = g / _t(backend.astype(total, dtype))
        else:
            scale = g
        rows = weights * scale  # (rows, 1): the gradient of each picked entry

        def scatter(r):
            return layout.from_rows(backend.put_along_axis_zeros(ctx.rows_shape, index, r, 1))

        def gather(gx):
            b = backend_for(gx)
            picked = b.take_along_axis(b.ascontiguous(layout.to_rows(gx)), index, 1)
            return b.reshape(picked, rows.shape)

        return linear_map(rows, scatter, gather), None, None, None, None, None


class NllLoss2d(NllLoss):
    node_name = "NllLoss2DBackward0"


# --- pointwise losses: forward and backward with tensor ops (device-agnostic, differentiable) ------------------------
def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _reduced_grad(g: Tensor, numel: int, reduction: str):
    return g / numel if reduction == "mean" else g


class SmoothL1Loss(Function):
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta`` (``d = input - target``)."""

    node_name = "SmoothL1LossBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, reduction: str, beta: float) -> Tensor:
        d = x - target
        a = d.abs()
        loss = where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)
        ctx.reduction, ctx.beta = reduction, beta
        ctx.save_for_backward(x, target)
        return _reduce(loss, reduction)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, target = ctx.saved_tensors
        d = x - target
        beta = ctx.beta
        grad = (d / beta).clamp(-1.0, 1.0) * _reduced_grad(g, d.numel(), ctx.reduction)
        return grad, -grad, None, None


class HuberLoss(Function):
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``."""

    node_name = "HuberLossBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, reduction: str, delta: float) -> Tensor:
        d = x - target
        a = d.abs()
        loss = where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta)
        ctx.reduction, ctx.delta = reduction, delta
        ctx.save_for_backward(x, target)
        return _reduce(loss, reduction)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, target = ctx.saved_tensors
        if x.dtype != target.dtype:  # torch's backward kernel takes one dtype (its forward promotes)
            raise RuntimeError(f"Found dtype {target.dtype.scalar_name} but expected {x.dtype.scalar_name}")
        d = x - target
        grad = d.clamp(-ctx.delta, ctx.delta) * _reduced_grad(g, d.numel(), ctx.reduction)
        return grad, -grad, None, None


def _input_not_probabilities(_bad: int) -> RuntimeError:
    return RuntimeError("all elements of input should be between 0 and 1")


# Binary cross entropy's elementwise terms and their two gradients as one row: the forward one kernel (it was
# twelve tensor ops: two logs, two clamps, the products and sums) and the backward one kernel for both gradients.
# Module-level, so their generated kernels are served from Numba's disk cache. No ``math.log`` of 0 or of a
# negative number is taken: it raises in a kernel run by Numba's CUDA simulator.
def _bce_terms(x, t):
    # torch's: each log clamped at -100 (a probability of 0 or 1 costs 100, not infinity). The logs' arguments are
    # raised to 1e-44 first (its log is -101.3: the clamp gives the same -100), so no log of 0 or of a negative
    # number is taken: an input outside [0, 1] is refused anyway, and the loop stays one the compiler vectorizes.
    rest = 1.0 - x
    log_x = math.log(select(x < 1e-44, 1e-44, x))
    log_rest = math.log(select(rest < 1e-44, 1e-44, rest))
    return -(t * select(log_x < -100.0, -100.0, log_x) + (1.0 - t) * select(log_rest < -100.0, -100.0, log_rest))


def _bce_terms_grad_x(g, out, x, t):
    # torch's: (x - t) / max((1 - x) * x, 1e-12), its 1e-12 a float32 constant in float64 too
    spread = (1.0 - x) * x
    return g * (x - t) / select(spread < 9.999999960041972e-13, 9.999999960041972e-13, spread)


def _bce_terms_grad_t(g, out, x, t):
    # torch's: -logit(x) = -log(x / (1 - x)), unclamped: an infinity at 0 and at 1 (there without dividing by
    # zero, which a kernel run by Numba's CUDA simulator would raise)
    rest = 1.0 - x
    return -g * select(rest == 0.0, math.inf, log(x / select(rest == 0.0, 1.0, rest)))


@functools.cache
def _bce_row() -> Row:
    """Made on first use, so that importing numbagrad does not read the functions' bytecode."""
    return Row(
        "binary_cross_entropy_terms",
        _bce_terms,
        (_bce_terms_grad_x, _bce_terms_grad_t),
        None,
        float_only=True,
        float32_math=True,
    )


class BinaryCrossEntropy(Function):
    """``-weight * (t * log(x) + (1 - t) * log(1 - x))`` with each log clamped at -100, as torch: the terms one
    kernel (``_bce_row``), then the weight and the reduction."""

    node_name = "BinaryCrossEntropyBackward0"

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` without a weight for plain float32 or float64 Tensors of one shape, dtype and device, outside
        anomaly and inference mode, with no tracer or saved-tensor hooks (``st.fast``): the checked, reduced loss
        on the storage (the kernels ``forward`` and its reduction's fast path call) and the node
        ``_link_outputs`` builds; anything else returns None."""
        x, target, weight, reduction = args
        if weight is not None or type(x) is not Tensor or type(target) is not Tensor or not st.fast:
            return None
        xd, td = x._data, target._data
        dt = xd.dtype
        if td.dtype is not dt or dt.kind != "f" or dt.itemsize < 4 or type(td) is not type(xd) or td.shape != xd.shape:
            return None
        if x._is_inference or target._is_inference:
            return None
        backend = _BACKENDS.get(type(xd)) or backend_for(xd)
        loss = _checked_bce_terms(xd, td, backend)
        if reduction != "none":
            total = backend.reduce(loss, "sum", None, False, dt)
            loss = backend.divide_by(total, loss.size) if reduction == "mean" else total
        result = _new(Tensor)
        result._data = loss
        need_x = x._requires_grad or x.grad_fn is not None
        need_t = target._requires_grad or target.grad_fn is not None
        if st.enabled and (need_x or need_t):
            ctx = cls._backward_cls()
            ctx.needs_input_grad = (need_x, need_t, False, False)
            ctx.reduction = reduction
            make_node(ctx, (edge_of(x), edge_of(target), NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT), result)
            ctx._input_meta = ((xd.shape, dt, backend), (td.shape, dt, backend), False, False)
            ctx._output_meta = ((loss.shape, dt, backend),)
            ctx._saved = [saved_input_unhooked(x), saved_input_unhooked(target), None]
        return result

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, weight, reduction: str) -> Tensor:
        loss = Tensor._make(_checked_bce_terms(x._data, target._data, x._backend))
        if weight is not None:
            loss = loss * weight
        ctx.reduction = reduction
        ctx.save_for_backward(x, target, weight)
        return _reduce(loss, reduction)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, target, weight = ctx.saved_tensors
        scale = _reduced_grad(g, x.numel(), ctx.reduction)
        if weight is not None:
            scale = scale * weight
        wanted = ctx.needs_input_grad[:2]
        gx, gt = fused_grads(_BCE_GRAD_NODE, functools.partial(_bce_grad_kernel, wanted), _bce_grad_formula,
                             (scale, x, target), wanted)  # fmt: skip
        return gx, gt, None, None


_BCE_GRAD_NODE = "BinaryCrossEntropyBackwardBackward0"


def _checked_bce_terms(xd, td, backend):
    """The unreduced, unweighted loss terms of the probabilities ``xd`` against ``td``, after torch's check that
    every probability lies in [0, 1] (in the forward, so that a compiled replay checks each call's input too;
    checked where the input lives: a cuda input's error comes with the next read). A NaN fails it, as in torch."""
    if xd.size:
        inside = backend.all_within(xd, 0, 1)
        backend.check_index(backend.astype(inside, np.int64), 1, 2, None, _input_not_probabilities)
    return backend.elementwise(_bce_row(), [xd, td], (), xd.dtype, shape=xd.shape)


def _bce_grad_kernel(wanted: tuple, scale: Tensor, x: Tensor, target: Tensor) -> tuple:
    """Both gradients of the terms in one pass (or the one wanted), ``scale`` (the incoming gradient, reduced and
    weighted) broadcast to ``x``'s shape."""
    backend, data = x._backend, x._data
    dtype, shape = data.dtype, data.shape
    g = scale._data if scale._data.shape == shape else backend.expand(scale._data, shape)
    row, inputs = _bce_row(), [data, target._data]
    if wanted[0] and wanted[1]:
        gx, gt = backend.elementwise_grads(row, (0, 1), g, 0, inputs, (), dtype)
        return Tensor._make(gx), Tensor._make(gt)
    i = 0 if wanted[0] else 1
    grad = Tensor._make(backend.elementwise_grad(row, i, g, 0, inputs, (), dtype))
    return (grad, None) if i == 0 else (None, grad)


def _bce_grad_formula(scale: Tensor, x: Tensor, target: Tensor) -> tuple:
    """The same gradients from differentiable ops (their own derivatives, under ``create_graph``)."""
    gx = (x - target) / ((1 - x) * x).clamp(min=9.999999960041972e-13) * scale
    gt = -(x / (1 - x)).log() * scale
    return gx, gt


class BinaryCrossEntropyWithLogits(Function):
    """``(1 - t) * x - log_weight * logsigmoid(x)``, ``log_weight = 1 + (pos_weight - 1) * t``, times ``weight``."""

    node_name = "BinaryCrossEntropyWithLogitsBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, weight, pos_weight, reduction: str) -> Tensor:
        log_sig = _logsigmoid(x)
        if pos_weight is not None:
            log_sig = log_sig * ((pos_weight - 1) * target + 1)
        loss = (1 - target) * x - log_sig
        if weight is not None:
            loss = loss * weight
        ctx.reduction = reduction
        ctx.save_for_backward(x, target, weight, pos_weight)
        return _reduce(loss, reduction)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, target, weight, pos_weight = ctx.saved_tensors
        scale = _reduced_grad(g, x.numel(), ctx.reduction)
        if weight is not None:
            scale = scale * weight
        gx = gt = None
        if ctx.needs_input_grad[0]:
            if pos_weight is not None:
                pt = pos_weight * target
                gx = ((pt + 1 - target) * x.sigmoid() - pt) * scale
            else:
                gx = (x.sigmoid() - target) * scale
        if ctx.needs_input_grad[1]:
            if pos_weight is not None:
                gt = (_logsigmoid(-x) - _logsigmoid(x) * pos_weight) * scale
            else:
                gt = -x * scale
        return gx, gt, None, None, None


def _logsigmoid(x: Tensor) -> Tensor:
    return FUNCTIONS["logsigmoid"].apply(x)
