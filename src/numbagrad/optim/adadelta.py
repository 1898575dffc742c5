"""Adadelta (Zeiler) with weight decay and maximize (torch's ``Adadelta``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import adadelta_update
from .optimizer import Optimizer, _check_tensor_lr, _foreach, _scalar_state, _scalar_type


class Adadelta(Optimizer):
    """Scales each step by the ratio of running root mean squares of past steps and of gradients, so the step has
    the parameter's units; ``lr`` only rescales it. One fused kernel per parameter."""

    _capturable_devices = "['cuda', 'xpu', 'hpu', 'privateuseone']"

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach: bool | None = None, *, capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        if "square_avg" not in state:
            state["step"] = _scalar_state(0.0)
            state["square_avg"] = self._zeros_like(p)
            state["acc_delta"] = self._zeros_like(p)
        self._next_step(state)
        s = _scalar_type(param)
        rho = group["rho"]
        scalars = (s(-group["lr"]), s(rho), s(1 - rho), s(group["eps"]), s(group["weight_decay"]), group["maximize"])
        arrays = [param, grad, state["square_avg"]._data.reshape(-1), state["acc_delta"]._data.reshape(-1)]
        _foreach(adadelta_update, arrays, scalars)
