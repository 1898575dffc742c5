"""Averaged SGD (Polyak & Juditsky) with a decaying step size (torch's ``ASGD``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import asgd_update
from .optimizer import Optimizer, _check_tensor_lr, _foreach, _scalar_state, _scalar_state_type, _scalar_type


class ASGD(Optimizer):
    """SGD with step size ``eta = lr / (1 + lambd lr step) ** alpha`` that also keeps ``ax``, the running average
    of the parameter from step ``t0`` on. ``eta`` and ``mu`` (the averaging weight) are 0-d tensors of the default
    dtype in the state, read back rounded, as torch keeps them. One fused kernel per parameter."""

    _capturable_tensors = "params, mus, etas, and state_steps"

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6,
                 weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        if "ax" not in state:
            state["step"] = _scalar_state(0.0)
            state["eta"] = _scalar_state(float(group["lr"]))
            state["mu"] = _scalar_state(1.0)
            state["ax"] = self._zeros_like(p)
        step = self._next_step(state)
        lr, lambd = float(group["lr"]), group["lambd"]  # lr may be a one-element Tensor
        eta, mu = float(state["eta"]._data), float(state["mu"]._data)
        s = _scalar_type(param)
        scalars = (s(1 - lambd * eta), s(-eta), s(mu), s(group["weight_decay"]), group["maximize"])
        _foreach(asgd_update, [param, grad, state["ax"]._data.reshape(-1)], scalars)
        # torch makes each new value a tensor of the default dtype before storing it, even where a loaded state
        # holds them in the parameter's dtype
        state["eta"]._data[...] = _scalar_state_type()(lr / ((1 + lambd * lr * step) ** group["alpha"]))
        state["mu"]._data[...] = _scalar_state_type()(1 / max(1, step - group["t0"]))
