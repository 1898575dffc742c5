"""Adagrad (Duchi et al.) with learning-rate decay, weight decay, an initial accumulator and maximize (torch's
``Adagrad``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import adagrad_update
from .optimizer import Optimizer, _check_fused, _check_tensor_lr, _foreach, _scalar_state, _scalar_type


class Adagrad(Optimizer):
    """Divides by the root of the summed squared gradients; the state is created with the optimizer, as torch's
    is; one fused kernel per parameter."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)  # fmt: skip
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(group, p)

    def _init_state(self, group: dict, p: Tensor) -> None:
        state = self.state[p]
        state["step"] = _scalar_state(0.0)
        state["sum"] = self._full_like(p, group["initial_accumulator_value"])

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        if "sum" not in state:  # a parameter group added after construction
            self._init_state(group, p)
        step = self._next_step(state)
        lr = group["lr"]
        clr = lr / (1 + (step - 1) * group["lr_decay"])
        s = _scalar_type(param)
        scalars = (s(-clr), s(group["eps"]), s(group["weight_decay"]), group["maximize"])
        _foreach(adagrad_update, [param, grad, state["sum"]._data.reshape(-1)], scalars)
