"""SparseAdam: Adam restricted to the entries a sparse gradient stores (torch's ``SparseAdam``), for the sparse
weight gradients of ``nn.Embedding(sparse=True)``: only the looked-up rows' moments and values move."""

from __future__ import annotations

import math
from collections.abc import Callable

from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad, no_grad
from .optimizer import Optimizer, _check_tensor_lr


class SparseAdam(Optimizer):
    """Adam on the stored entries of sparse gradients (repeated indices summed first); dense gradients are
    refused, as torch's."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    def step(self, closure: Callable | None = None):
        """One masked Adam step of every parameter that has a (sparse) gradient."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if not p.grad.is_sparse:
                        raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = self._zeros_like(p)
                        state["exp_avg_sq"] = self._zeros_like(p)
                    state["step"] += 1
                    self._sparse_update(group, p, state)
        return loss

    @staticmethod
    def _sparse_update(group: dict, p: Tensor, state: dict) -> None:
        """torch's update order: each moment moves by ``(1 - beta) * (new - old)`` at the stored positions, the
        parameter by ``-step_size * m / (sqrt(v) + eps)`` there."""
        grad = -p.grad if group["maximize"] else p.grad
        grad = grad.coalesce()
        values = grad._values()
        if values.numel() == 0:
            return
        at = tuple(grad._indices())  # one index tensor per sparse dim
        beta1, beta2 = group["betas"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        old_m = exp_avg[at]
        m_update = (values - old_m) * (1 - beta1)
        exp_avg[at] = old_m + m_update
        old_v = exp_avg_sq[at]
        v_update = (values.pow(2) - old_v) * (1 - beta2)
        exp_avg_sq[at] = old_v + v_update
        numer = m_update + old_m
        denom = (v_update + old_v).sqrt() + group["eps"]
        step = state["step"]
        lr = float(group["lr"])
        step_size = lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
        p[at] = p[at] + (numer / denom) * -step_size
