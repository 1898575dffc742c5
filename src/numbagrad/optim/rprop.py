"""Resilient backpropagation (Riedmiller & Braun): per-element step sizes driven by the gradient's sign (torch's
``Rprop``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import rprop_update
from .optimizer import Optimizer, _check_tensor_lr, _foreach, _scalar_state, _scalar_type


class Rprop(Optimizer):
    """Each element's step size (starting at ``lr``) grows by ``etas[1]`` while its gradient keeps its sign and
    shrinks by ``etas[0]`` when it flips, within ``step_sizes``; only the gradient's sign is used. One fused kernel
    per parameter."""

    def __init__(self, params, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        if "prev" not in state:
            state["step"] = _scalar_state(0.0)
            state["prev"] = self._zeros_like(p)
            state["step_size"] = self._full_like(p, group["lr"])
        self._next_step(state)
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        s = _scalar_type(param)
        scalars = (s(etaminus), s(etaplus), s(1), s(step_size_min), s(step_size_max), group["maximize"])
        arrays = [param, grad, state["prev"]._data.reshape(-1), state["step_size"]._data.reshape(-1)]
        _foreach(rprop_update, arrays, scalars)
