"""Adam (Kingma & Ba) with L2 weight decay, AMSGrad and maximize (torch's ``Adam``)."""

from __future__ import annotations

import math

import numpy as np

from .._tensor import Tensor
from .optimizer import Optimizer


class Adam(Optimizer):
    """Bias-corrected moment estimates; one fused kernel per parameter updates the parameter and its moments."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, maximize: bool = False) -> None:  # fmt: skip
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
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize)
        super().__init__(params, defaults)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        from ._kernels import adam_step

        amsgrad = group["amsgrad"]
        if not state:
            state["step"] = Tensor._make(np.array(0.0, np.float32))
            state["exp_avg"] = self._zeros_like(p)
            state["exp_avg_sq"] = self._zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = self._zeros_like(p)
        state["step"]._data[...] += 1
        step = float(state["step"]._data)
        beta1, beta2 = group["betas"]
        v = state["exp_avg_sq"]._data.reshape(-1)
        vmax = state["max_exp_avg_sq"]._data.reshape(-1) if amsgrad else v
        adam_step(param, grad, state["exp_avg"]._data.reshape(-1), v, vmax, group["lr"] / (1 - beta1**step), beta1,
                  beta2, group["eps"], group["weight_decay"], math.sqrt(1 - beta2**step), amsgrad,
                  group["maximize"])  # fmt: skip
