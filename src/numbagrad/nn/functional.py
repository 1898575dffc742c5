"""``nn.functional``: activations, ``linear`` and the losses, as functions of tensors.

``linear`` and ``cross_entropy``/``nll_loss`` are fused Functions (one graph node each, as a training step's hot
path). Their backward computes in numpy during an ordinary backward, and with differentiable tensor ops when
``create_graph=True`` (grad mode is then on), so double backward still works.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from .._tensor import Tensor
from ..autograd.function import Function
from ..autograd.grad_mode import state

_REDUCTIONS = ("none", "mean", "sum")


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return input.relu_() if inplace else ops.relu(input)


def tanh(input: Tensor) -> Tensor:
    return ops.tanh(input)


def sigmoid(input: Tensor) -> Tensor:
    return ops.sigmoid(input)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    return ops.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    return ops.log_softmax(input, dim, dtype)


def _names(t: Tensor) -> str:
    return {"float32": "Float", "float64": "Double"}.get(t.dtype.name, t.dtype.name)


class _Linear(Function):
    """``x @ W.t() + b`` in one node (torch's ``addmm`` for 2-D input)."""

    node_name = "AddmmBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        ctx.save_for_backward(x, weight)
        out = np.matmul(x._data, weight._data.T)
        out += bias._data
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        if state.enabled:  # create_graph: differentiable ops
            g2 = g.reshape(-1, g.shape[-1])
            gx = g.matmul(weight) if need_x else None
            gw = g2.t().mm(x.reshape(-1, x.shape[-1])) if need_w else None
            gb = g2.sum(0) if need_b else None
            return gx, gw, gb
        gd = g._data.reshape(-1, g._data.shape[-1])
        gx = Tensor._make(np.matmul(g._data, weight._data)) if need_x else None
        gw = Tensor._make(gd.T @ x._data.reshape(-1, x._data.shape[-1])) if need_w else None
        gb = Tensor._make(gd.sum(0)) if need_b else None
        return gx, gw, gb


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.t() + bias``: one fused node on CPU, built-in ops elsewhere or without bias."""
    if input.shape[-1] != weight.shape[-1]:
        rows = int(np.prod(input.shape[:-1])) if input.dim() > 1 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1]} and "
            f"{weight.shape[-1]}x{weight.shape[0]})"
        )
    if input.dtype != weight.dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_names(input)} and {_names(weight)}")
    fused = bias is not None and all(isinstance(t._data, np.ndarray) for t in (input, weight, bias))
    if fused:
        return _Linear.apply(input, weight, bias)
    out = input.matmul(weight.t())
    return out if bias is None else out + bias


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "mean":
        return np.asarray(loss.mean(), loss.dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(), loss.dtype)
    return loss


def _check_target(input: Tensor, target: Tensor) -> np.ndarray:
    """Class-index targets: int64 of shape ``(N,)`` for input ``(N, C)`` (or 0-d for ``(C,)``), in range."""
    if not isinstance(target, Tensor) or target.dtype.name not in ("int64", "int32"):
        found = target.dtype.name if isinstance(target, Tensor) else type(target).__name__
        raise RuntimeError(f"expected scalar type Long but found {found}")
    if input.dim() not in (1, 2):
        raise ValueError(f"Expected 1D or 2D input (got {input.dim()}D input)")
    expected = input.shape[:1] if input.dim() == 2 else ()
    if tuple(target.shape) != tuple(expected):
        raise ValueError(
            f"Expected input batch_size ({input.shape[0] if input.dim() == 2 else 1}) to match target batch_size "
            f"({target.shape[0] if target.dim() else 1})."
        )
    t = target._host().reshape(-1)
    bad = (t < 0) | (t >= input.shape[-1])
    if bad.any():
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    return t


def _grad_scale(g, n: int, reduction: str, ndim: int):
    """The incoming gradient per sample (a Tensor or an array), as a column to broadcast over classes."""
    if reduction == "none":
        return g.reshape(-1, 1) if ndim == 2 else g
    return g / n if reduction == "mean" else g


class _CrossEntropy(Function):
    """log_softmax + nll_loss in one node; its gradient is ``(softmax(x) - onehot(target)) * g``."""

    node_name = "NllLossBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, target: np.ndarray, reduction: str) -> Tensor:
        data = x._data.reshape(-1, x._data.shape[-1])
        shifted = data - data.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        sums = exp.sum(axis=1, keepdims=True)
        rows = np.arange(len(target))
        loss = np.log(sums[:, 0]) - shifted[rows, target]
        ctx.probs = exp / sums
        ctx.target, ctx.reduction = target, reduction
        ctx.save_for_backward(x)
        return Tensor._make(_reduce(loss if x.dim() == 2 else loss.reshape(()), reduction))

    @staticmethod
    def backward(ctx, g: Tensor):
        (x,) = ctx.saved_tensors
        n = len(ctx.target)
        onehot = np.zeros_like(ctx.probs)
        onehot[np.arange(n), ctx.target] = 1
        if state.enabled:  # create_graph: recompute softmax with tensor ops so its own gradient exists
            diff = ops.softmax(x, -1) - Tensor._make(onehot.reshape(x.shape))
            return diff * _grad_scale(g, n, ctx.reduction, x.dim()), None, None
        scale = _grad_scale(g._data, n, ctx.reduction, x.dim())
        return Tensor._make(((ctx.probs - onehot) * scale).reshape(x._data.shape).astype(x._data.dtype)), None, None


class _NllLoss(Function):
    """``-input[i, target[i]]``, reduced; its gradient scatters ``-g`` to the target positions."""

    node_name = "NllLossBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, target: np.ndarray, reduction: str) -> Tensor:
        data = x._host().reshape(-1, x.shape[-1])
        loss = -data[np.arange(len(target)), target]
        ctx.target, ctx.reduction, ctx.shape = target, reduction, x.shape
        out = Tensor._make(_reduce(loss if x.dim() == 2 else loss.reshape(()), reduction))
        return out.to(x.device) if x.is_cuda else out

    @staticmethod
    def backward(ctx, g: Tensor):
        n = len(ctx.target)
        onehot = np.zeros((n, ctx.shape[-1]), g._data.dtype)
        onehot[np.arange(n), ctx.target] = -1
        onehot = Tensor._make(onehot.reshape(ctx.shape)).to(g.device)
        return onehot * _grad_scale(g, n, ctx.reduction, len(ctx.shape)), None, None


def _loss_input(input: Tensor, target: Tensor, reduction: str):
    _check_reduction(reduction)
    return _check_target(input, target)


def cross_entropy(input: Tensor, target: Tensor, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:  # fmt: skip
    """Mean (or sum, or per-sample) negative log-likelihood of the target classes under softmax(input)."""
    if weight is not None or label_smoothing != 0.0:
        raise NotImplementedError("numbagrad's cross_entropy supports class-index targets without weight/smoothing")
    t = _loss_input(input, target, reduction)
    if not isinstance(input._data, np.ndarray):
        return nll_loss(log_softmax(input, -1), target, reduction=reduction)
    return _CrossEntropy.apply(input, t, reduction)


def nll_loss(input: Tensor, target: Tensor, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """Negative log-likelihood given log-probabilities ``input`` and class-index ``target``."""
    if weight is not None:
        raise NotImplementedError("numbagrad's nll_loss does not support class weights")
    t = _loss_input(input, target, reduction)
    return _NllLoss.apply(input, t, reduction)


class _MseLoss(Function):
    """``(input - target) ** 2``, reduced, in one node (torch's ``MseLossBackward0``)."""

    node_name = "MseLossBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, reduction: str) -> Tensor:
        ctx.save_for_backward(x, target)
        ctx.reduction = reduction
        sq = (x - target) ** 2
        return sq.mean() if reduction == "mean" else (sq.sum() if reduction == "sum" else sq)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, target = ctx.saved_tensors
        diff = x - target
        scale = g * (2.0 / diff.numel()) if ctx.reduction == "mean" else g * 2.0
        grad = diff * scale
        return grad, -grad, None


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Mean (or sum, or elementwise) squared error."""
    _check_reduction(reduction)
    if input.shape != target.shape:
        import warnings

        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). This will "
            "likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=2,
        )
    return _MseLoss.apply(input, target, reduction)
