"""RMSprop (Hinton) with momentum, the centered variant, weight decay and maximize (torch's ``RMSprop``)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import rmsprop_update
from .optimizer import Optimizer, _check_tensor_lr, _foreach, _scalar_state, _scalar_type


class RMSprop(Optimizer):
    """Divides the gradient by a running root mean square (``alpha`` its smoothing); ``centered`` subtracts the
    squared running mean gradient first; one fused kernel per parameter."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0,
                 momentum: float = 0, centered: bool = False, capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)  # fmt: skip
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        momentum, centered = group["momentum"], group["centered"]
        if "square_avg" not in state:
            state["step"] = _scalar_state(0.0)
            state["square_avg"] = self._zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = self._zeros_like(p)
            if centered:
                state["grad_avg"] = self._zeros_like(p)
        self._next_step(state)
        grad_avg = state["grad_avg"]._data.reshape(-1) if centered else param
        buf = state["momentum_buffer"]._data.reshape(-1) if momentum > 0 else param
        s = _scalar_type(param)
        alpha = group["alpha"]
        scalars = (s(-group["lr"]), s(alpha), s(1 - alpha), s(group["eps"]), s(group["weight_decay"]), s(momentum),
                   group["maximize"])  # fmt: skip
        arrays = [param, grad, state["square_avg"]._data.reshape(-1), grad_avg, buf]
        _foreach(rmsprop_update, arrays, scalars, (bool(centered), momentum > 0))
