"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay (torch's ``SGD``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import sgd_update
from .optimizer import Optimizer, _check_fused, _check_tensor_lr, _foreach, _scalar_type, _scalars


class SGD(Optimizer):
    """``p -= lr * d`` where ``d`` is the (decayed, momentum-averaged) gradient; one fused kernel per parameter."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0, weight_decay: float = 0,
                 nesterov: bool = False, *, maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)  # fmt: skip
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        momentum = group["momentum"]
        buf, first = param, False  # without momentum the kernel never touches the buffer
        if momentum != 0:
            first = "momentum_buffer" not in state
            if first:
                state["momentum_buffer"] = self._zeros_like(p)
            buf = state["momentum_buffer"]._data.reshape(-1)
        s = _scalar_type(param)
        lr, dampening, weight_decay = group["lr"], group["dampening"], group["weight_decay"]
        scalars = _scalars(s, (lr, momentum, dampening, weight_decay),
                           lambda: (s(lr), s(momentum), s(1 - dampening), s(weight_decay)))  # fmt: skip
        _foreach(sgd_update, [param, grad, buf], (*scalars, group["nesterov"], group["maximize"], first))
