"""Adafactor (Shazeer & Stern) as torch 2.13 has it (``torch.optim.Adafactor``): no momentum, and for a matrix
(or a batch of them) a factored second moment, one running mean of squares per row and one per column.

Unlike the element-wise optimizers, a step needs reductions (row and column norms, the parameter's and the update's
RMS) whose results scale the whole tensor, so it is written with tensor ops on the parameter's device rather than
as one per-element kernel.
"""

from __future__ import annotations

from collections.abc import Callable

from .._tensor import Tensor
from .._typeinfo import finfo
from ..autograd.grad_mode import enable_grad, no_grad
from ..ops import norm
from .optimizer import Optimizer, _check_tensor_lr, _scalar_state


class Adafactor(Optimizer):
    """Relative step sizes: each step moves a parameter by ``min(lr, 1 / sqrt(step))`` times its own RMS (at
    least ``eps[1]``), along the gradient divided by the root of the (factored) second moment, the update clipped
    to RMS ``d``. The second moment's decay ``1 - step ** beta2_decay`` approaches 1 as training goes on.
    ``eps[0]`` (by default the dtype's epsilon) floors the second moment."""

    def __init__(self, params, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach: bool | None = None, maximize: bool = False) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)

    def step(self, closure: Callable | None = None):
        """Update every parameter that has a gradient; ``closure`` (re-evaluating the loss) runs first."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                eps1, eps2 = group["eps"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if eps1 is None:  # the first parameter's dtype decides for its whole group, as in torch
                        eps1 = finfo(p.dtype).eps
                    self._step_one(group, p, eps1, eps2)
                    p._bump_version()
        return loss

    def _step_one(self, group: dict, p: Tensor, eps1: float, eps2: float) -> None:
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if "step" not in state:
            state["step"] = _scalar_state(0.0)
            if grad.dim() > 1:  # factored: one mean square per row (last dim 1) and per column (second-last 1)
                state["row_var"] = grad.new_zeros((*grad.shape[:-1], 1))
                state["col_var"] = grad.new_zeros((*grad.shape[:-2], 1, grad.shape[-1]))
            else:
                state["variance"] = grad.new_zeros(grad.shape)
        step = self._next_step(state)
        lr, weight_decay = group["lr"], group["weight_decay"]
        weight = step ** group["beta2_decay"]  # the second moment's 1 - beta2 at this step
        relative_step = min(lr, 1 / (step**0.5))
        scale = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * relative_step
        if weight_decay != 0:
            p.mul_(1 - lr * weight_decay)
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(norm(grad, dim=-1, keepdim=True).square_().div_(grad.size(-1)), weight)
            col_var.lerp_(norm(grad, dim=-2, keepdim=True).square_().div_(grad.size(-2)), weight)
            # the rank-one estimate of the second moment: row means times column means over their overall mean
            estimate = (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1)
        else:
            state["variance"].lerp_(grad * grad, weight)
            estimate = state["variance"].clone()
        update = estimate.clamp_(min=eps1 * eps1).rsqrt_() * grad
        clip = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * group["d"]))
        p.add_(update, alpha=-scale / clip)
