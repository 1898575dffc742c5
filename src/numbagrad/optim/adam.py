"""Adam (Kingma & Ba) with L2 weight decay, AMSGrad and maximize (torch's ``Adam``), and ``AdamW`` (decoupled
weight decay, Loshchilov & Hutter)."""

from __future__ import annotations

from .._tensor import Tensor
from ._updates import adam_update
from .optimizer import Optimizer, _check_fused, _check_tensor_lr, _foreach, _scalar_state, _scalar_type, _scalars


class Adam(Optimizer):
    """Bias-corrected moment estimates; one fused kernel per parameter updates the parameter and its moments."""

    _sparse_message = "Adam does not support sparse gradients, please consider SparseAdam instead"

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:  # fmt: skip
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
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
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)  # fmt: skip
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        amsgrad = group["amsgrad"]
        if "exp_avg" not in state:
            state["step"] = _scalar_state(0.0)
            state["exp_avg"] = self._zeros_like(p)
            state["exp_avg_sq"] = self._zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = self._zeros_like(p)
        step = self._next_step(state)
        beta1, beta2 = group["betas"]
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        decoupled, maximize = bool(group.get("decoupled_weight_decay", False)), group["maximize"]
        v = state["exp_avg_sq"]._data.reshape(-1)
        vmax = state["max_exp_avg_sq"]._data.reshape(-1) if amsgrad else v
        s = _scalar_type(param)

        def make() -> tuple:
            one_minus_beta1 = s(1 - beta1)
            return (
                s(-(lr / (1 - beta1**step))),  # -step_size
                one_minus_beta1,  # lerp's weight, and 1 - weight in the parameter's dtype
                s(1) - one_minus_beta1,
                s(beta2),
                s(1 - beta2),
                s(eps),
                s(weight_decay),
                s(1 - lr * weight_decay),
                decoupled,
                s((1 - beta2**step) ** 0.5),  # bias_correction2_sqrt, computed as torch does
                maximize,
            )

        scalars = _scalars(s, (lr, step, beta1, beta2, eps, weight_decay, decoupled, maximize), make)
        _foreach(adam_update, [param, grad, state["exp_avg"]._data.reshape(-1), v, vmax], scalars, (bool(amsgrad),))


class AdamW(Adam):
    """Adam with decoupled weight decay: the parameter shrinks by ``1 - lr * weight_decay`` each step, outside the
    moment estimates (torch's ``AdamW``, whose default ``weight_decay`` is 1e-2)."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:  # fmt: skip
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)  # fmt: skip

    def load_state_dict(self, state_dict: dict) -> None:
        """As ``Optimizer.load_state_dict``; the weight decay stays decoupled whatever the saved groups say (as
        torch's ``AdamW.__setstate__`` keeps it)."""
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
