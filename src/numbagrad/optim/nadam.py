"""NAdam (Dozat): Adam with Nesterov momentum and a momentum schedule (torch's ``NAdam``, with
``momentum_decay`` and ``decoupled_weight_decay``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import nadam_update
from .optimizer import Optimizer, _check_tensor_lr, _foreach, _scalar_state, _scalar_type


class NAdam(Optimizer):
    """Adam whose momentum coefficient warms up as ``beta1 (1 - 0.5 * 0.96 ** (step * momentum_decay))``; the
    running product of those coefficients is kept in ``state["mu_product"]`` (a 0-d tensor of the default dtype, as
    torch's, and like torch's cast to the parameter's dtype by ``load_state_dict``). One fused kernel per
    parameter."""

    _capturable_tensors = "params, mu_products and state_steps"

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:  # fmt: skip
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
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        if "exp_avg" not in state:
            state["step"] = _scalar_state(0.0)
            state["mu_product"] = _scalar_state(1.0)
            state["exp_avg"] = self._zeros_like(p)
            state["exp_avg_sq"] = self._zeros_like(p)
        step = self._next_step(state)
        beta1, beta2 = group["betas"]
        lr, weight_decay, momentum_decay = group["lr"], group["weight_decay"], group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        product = state["mu_product"]._data
        product[...] = product * product.dtype.type(mu)  # a tensor times a scalar: the scalar is rounded first
        mu_product = float(product)
        s = _scalar_type(param)
        one_minus_beta1 = s(1 - beta1)
        scalars = (
            one_minus_beta1,
            s(1) - one_minus_beta1,
            s(beta2),
            s(1 - beta2),
            s(1 - beta2**step),  # bias_correction2
            s(group["eps"]),
            s(weight_decay),
            s(1 - lr * weight_decay),
            bool(group["decoupled_weight_decay"]),
            s(-lr * (1.0 - mu) / (1.0 - mu_product)),
            s((-lr * mu_next) / (1.0 - mu_product * mu_next)),
            group["maximize"],
        )
        arrays = [param, grad, state["exp_avg"]._data.reshape(-1), state["exp_avg_sq"]._data.reshape(-1)]
        _foreach(nadam_update, arrays, scalars)
