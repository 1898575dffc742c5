"""Muon (Keller Jordan's orthogonalized momentum) as torch 2.13 has it (``torch.optim.Muon``), for 2-d parameters.

Each step the (Nesterov) momentum of the gradient is orthogonalized by a few Newton-Schulz iterations, in bfloat16
as torch runs them, and the parameter moves along the result. The iterations are matrix products whose results
scale the whole update, so the step is written with tensor ops on the parameter's device (as ``Adafactor``'s)
rather than as one per-element kernel.
"""

from __future__ import annotations

import math

from .._tensor import Tensor
from .._types import bfloat16
from ..ops import addmm
from .optimizer import Optimizer, _check_tensor_lr

#: torch's defaults: the quintic iteration's coefficients (the steepest slope at zero that still converges) and
#: the floor of the norm that scales the momentum into the iteration's domain.
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
EPS = 1e-7
NS_STEPS = 5


def orthogonalize(grad: Tensor, ns_coefficients: tuple, ns_steps: int, eps: float) -> Tensor:
    """The Newton-Schulz approximation of ``U V^T`` for ``grad = U S V^T`` (singular values pushed towards 1, not
    onto it), in bfloat16: ``X <- a X + (b A + c A^2) X`` with ``A = X X^T``, on the wide orientation of ``grad``
    scaled to a spectral norm of at most 1."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.dim() != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    x = grad.to(bfloat16)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = addmm(x, addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def adjusted_lr(lr: float, adjust_lr_fn: str | None, shape: tuple) -> float:
    """The learning rate for a parameter of ``shape``, scaled so that orthogonalized updates of rectangular
    matrices have comparable RMS: ``sqrt(max(1, rows / cols))`` ("original", Keller Jordan's), or ``0.2 *
    sqrt(max(rows, cols))`` ("match_rms_adamw", Moonshot's: AdamW's learning rate carries over)."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    """``B <- momentum * B + g``; the update orthogonalizes ``g + momentum * B`` (Nesterov) or ``B``; decoupled
    weight decay ``p *= 1 - lr * weight_decay``, then ``p -= adjusted_lr * update``. Only 2-d parameters: biases,
    embeddings and the like belong to another optimizer (AdamW), as torch's documentation says."""

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
                 eps: float = EPS, ns_steps: int = NS_STEPS, adjust_lr_fn: str | None = None) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)  # fmt: skip
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a parameter with size: {p.size()}"
                    )

    def _step_parameter(self, group: dict, p: Tensor) -> None:
        """One Muon update of ``p`` (the base class's ``step`` runs it, under no_grad, for each parameter that has
        a gradient)."""
        if p.is_complex():
            raise RuntimeError("Muon does not support complex parameters")
        grad = p.grad
        if grad.is_sparse:
            raise RuntimeError("Muon does not support sparse gradients")
        if grad.dim() != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = grad.new_zeros(grad.shape)
        buf = state["momentum_buffer"]
        momentum = group["momentum"]
        buf.lerp_(grad, 1 - momentum)
        update = grad.lerp(buf, momentum) if group["nesterov"] else buf
        update = orthogonalize(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
        lr = float(group["lr"])
        p.mul_(1 - lr * group["weight_decay"])
        p.add_(update, alpha=-adjusted_lr(lr, group["adjust_lr_fn"], tuple(p.shape)))
