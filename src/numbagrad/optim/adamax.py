"""Adamax (Kingma & Ba): Adam with the infinity norm in place of the second moment (torch's ``Adamax``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import adamax_update
from .optimizer import Optimizer, _check_tensor_lr, _foreach, _scalar_state, _scalar_type


class Adamax(Optimizer):
    """Divides the bias-corrected first moment by a decayed running maximum of ``|grad|``; one fused kernel per
    parameter."""

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        if "exp_avg" not in state:
            state["step"] = _scalar_state(0.0)
            state["exp_avg"] = self._zeros_like(p)
            state["exp_inf"] = self._zeros_like(p)
        step = self._next_step(state)
        beta1, beta2 = group["betas"]
        s = _scalar_type(param)
        one_minus_beta1 = s(1 - beta1)
        clr = group["lr"] / (1 - beta1**step)
        scalars = (s(-clr), one_minus_beta1, s(1) - one_minus_beta1, s(beta2), s(group["eps"]),
                   s(group["weight_decay"]), group["maximize"])  # fmt: skip
        arrays = [param, grad, state["exp_avg"]._data.reshape(-1), state["exp_inf"]._data.reshape(-1)]
        _foreach(adamax_update, arrays, scalars)
