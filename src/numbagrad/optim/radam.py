"""RAdam (Liu et al.): Adam with the variance of its adaptive rate rectified (torch's ``RAdam``, with
``decoupled_weight_decay``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import radam_update
from .optimizer import Optimizer, _check_tensor_lr, _foreach, _scalar_state, _scalar_type


class RAdam(Optimizer):
    """Plain momentum SGD for the first steps, while the adaptive rate's variance is intractable (``rho_t <= 5``),
    then Adam scaled by the rectification term; one fused kernel per parameter."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False) -> None:  # fmt: skip
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
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        if "exp_avg" not in state:
            state["step"] = _scalar_state(0.0)
            state["exp_avg"] = self._zeros_like(p)
            state["exp_avg_sq"] = self._zeros_like(p)
        step = self._next_step(state)
        beta1, beta2 = group["betas"]
        lr, weight_decay = group["lr"], group["weight_decay"]
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        rectified = rho_t > 5.0
        rect = (
            ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5 if rectified else 0
        )
        s = _scalar_type(param)
        one_minus_beta1 = s(1 - beta1)
        scalars = (
            one_minus_beta1,
            s(1) - one_minus_beta1,
            s(beta2),
            s(1 - beta2),
            s(bias_correction1),
            s(lr),
            s(bias_correction2**0.5),
            s(rect),
            s(group["eps"]),
            s(weight_decay),
            s(1 - lr * weight_decay),
            bool(group["decoupled_weight_decay"]),
            rectified,
            group["maximize"],
        )
        arrays = [param, grad, state["exp_avg"]._data.reshape(-1), state["exp_avg_sq"]._data.reshape(-1)]
        _foreach(radam_update, arrays, scalars)
