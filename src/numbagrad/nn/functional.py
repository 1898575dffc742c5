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
        x2 = x._data.reshape(-1, x._data.shape[-1])
        out = np.empty((x2.shape[0], weight._data.shape[0]), np.result_type(x._data, weight._data))
        # (W @ x.T).T is about 10% faster than x @ W.T with OpenBLAS; the bias add writes it out contiguously
        np.add(np.matmul(weight._data, x2.T).T, bias._data, out=out)
        return Tensor._make(out.reshape(*x._data.shape[:-1], weight._data.shape[0]))

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


def _check_target(input: Tensor, target: Tensor, ignore_index: int) -> np.ndarray:
    """Class-index targets: integers of shape ``(N,)`` for input ``(N, C)`` (or 0-d for ``(C,)``), in range."""
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
    bad = ((t < 0) | (t >= input.shape[-1])) & (t != ignore_index)
    if bad.any():
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    return t


class _Targets:
    """Class-index targets with their per-sample weights: ``weight[target]``, 0 where ``target == ignore_index``
    (``None`` when every sample counts once, the common case, which skips the weighting).

    torch's weighted mean divides by the sum of these weights (the number of counted samples when unweighted).
    """

    def __init__(self, target: np.ndarray, weight: Tensor | None, ignore_index: int, dtype: np.dtype) -> None:
        self.rows = np.arange(len(target))
        counted = target != ignore_index
        if weight is None and counted.all():
            self.index, self.weight, self.total = target, None, len(target)
            return
        self.index = np.where(counted, target, 0)
        w = np.ones(len(target), dtype) if weight is None else weight._host().astype(dtype)[self.index]
        self.weight = (w * counted).astype(dtype)
        self.total = self.weight.sum()

    def onehot(self, num_classes: int, dtype: np.dtype) -> np.ndarray:
        out = np.zeros((len(self.index), num_classes), dtype)
        out[self.rows, self.index] = 1
        return out

    def reduce(self, loss: np.ndarray, reduction: str, ndim: int) -> np.ndarray:
        if self.weight is not None:
            loss = loss * self.weight
        if reduction == "mean":
            return np.asarray(loss.sum() / self.total, loss.dtype)
        if reduction == "sum":
            return np.asarray(loss.sum(), loss.dtype)
        return loss if ndim == 2 else loss.reshape(())

    def grad_scale(self, g, reduction: str, ndim: int):
        """The incoming gradient per sample times its weight (an array or a Tensor, like ``g``), as a column."""
        if reduction == "none" and ndim == 2:
            g = g.reshape(-1)
        if reduction == "mean":
            g = g / self.total
        if self.weight is not None:
            g = g * (Tensor._make(self.weight).to(g.device) if isinstance(g, Tensor) else self.weight)
        return g.reshape(-1, 1)


class _CrossEntropy(Function):
    """log_softmax + nll_loss in one node; its gradient is ``(softmax(x) - onehot(target)) * g``."""

    node_name = "NllLossBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, targets: _Targets, reduction: str) -> Tensor:
        data = x._data.reshape(-1, x._data.shape[-1])
        shifted = data - data.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        sums = exp.sum(axis=1, keepdims=True)
        loss = np.log(sums[:, 0]) - shifted[targets.rows, targets.index]
        ctx.probs = exp / sums
        ctx.targets, ctx.reduction = targets, reduction
        ctx.save_for_backward(x)
        return Tensor._make(targets.reduce(loss, reduction, x.dim()))

    @staticmethod
    def backward(ctx, g: Tensor):
        (x,) = ctx.saved_tensors
        targets = ctx.targets
        if state.enabled:  # create_graph: recompute softmax with tensor ops so its own gradient exists
            onehot = Tensor._make(targets.onehot(x.shape[-1], ctx.probs.dtype)).to(x.device)
            diff = ops.softmax(x.reshape(-1, x.shape[-1]), -1) - onehot
            return (diff * targets.grad_scale(g, ctx.reduction, x.dim())).reshape(x.shape), None, None
        grad = ctx.probs.copy()  # a copy: backward may run again with retain_graph
        grad[targets.rows, targets.index] -= 1
        grad *= targets.grad_scale(g._data, ctx.reduction, x.dim())
        return Tensor._make(grad.reshape(x._data.shape)), None, None


class _NllLoss(Function):
    """``-input[i, target[i]]``, weighted and reduced; its gradient scatters ``-g`` to the target positions."""

    node_name = "NllLossBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, targets: _Targets, reduction: str) -> Tensor:
        data = x._host().reshape(-1, x.shape[-1])
        loss = -data[targets.rows, targets.index]
        ctx.targets, ctx.reduction, ctx.shape = targets, reduction, x.shape
        out = Tensor._make(targets.reduce(loss, reduction, x.dim()))
        return out.to(x.device) if x.is_cuda else out

    @staticmethod
    def backward(ctx, g: Tensor):
        targets = ctx.targets
        onehot = Tensor._make(-targets.onehot(ctx.shape[-1], g._data.dtype)).to(g.device)
        return (onehot * targets.grad_scale(g, ctx.reduction, len(ctx.shape))).reshape(ctx.shape), None, None


def _targets(input: Tensor, target: Tensor, weight, ignore_index: int, reduction: str) -> _Targets:
    _check_reduction(reduction)
    t = _check_target(input, target, ignore_index)
    if weight is not None and tuple(weight.shape) != (input.shape[-1],):
        raise RuntimeError(
            f"weight tensor should be defined either for all {input.shape[-1]} classes or no classes but got weight "
            f"tensor of shape: [{', '.join(map(str, weight.shape))}]"
        )
    return _Targets(t, weight, ignore_index, np.dtype(input.dtype.numpy))


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:  # fmt: skip
    """Negative log-likelihood of the target classes under ``softmax(input)``, weighted per class, samples with
    ``target == ignore_index`` left out, reduced by ``reduction``."""
    if label_smoothing != 0.0:
        raise NotImplementedError("numbagrad's cross_entropy does not support label_smoothing")
    targets = _targets(input, target, weight, ignore_index, reduction)
    if not isinstance(input._data, np.ndarray):
        return _NllLoss.apply(log_softmax(input, -1), targets, reduction)
    return _CrossEntropy.apply(input, targets, reduction)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """Negative log-likelihood given log-probabilities ``input`` and class-index ``target``."""
    return _NllLoss.apply(input, _targets(input, target, weight, ignore_index, reduction), reduction)


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
