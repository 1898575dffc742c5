"""``optim.swa_utils``: weight averaging (torch's ``torch.optim.swa_utils``).

``AveragedModel`` keeps a copy of a model whose parameters (and, with ``use_buffers``, buffers) are a running
average of the model's: equal-weight (stochastic weight averaging, Izmailov et al.) by default, or any update such
as an exponential moving average from ``get_ema_multi_avg_fn``. ``SWALR`` anneals the learning rate to a constant
SWA rate, and ``update_bn`` recomputes batch-norm statistics for the averaged weights.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any, Literal

from .._tensor import Tensor
from .._types import int64
from ..autograd.grad_mode import no_grad
from ..nn.batchnorm import _BatchNorm
from ..nn.module import Module
from ..ops import tensor
from .lr_scheduler import LRScheduler, _format_param
from .optimizer import Optimizer

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]

ParamList = list[Tensor] | tuple[Tensor, ...]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[[ParamList, ParamList, Any], None]:
    """An in-place exponential moving average over lists of tensors, ``ema = decay ema + (1 - decay) current``
    (a ``lerp`` for floating tensors), for ``AveragedModel(multi_avg_fn=...)``."""
    _check_decay(decay)

    def ema_update(ema_param_list: ParamList, current_param_list: ParamList, _) -> None:
        with no_grad():
            if ema_param_list[0].is_floating_point():
                for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[[ParamList, ParamList, Any], None]:
    """An in-place equal-weight running average over lists of tensors: with ``n`` models averaged so far, each
    average moves ``1 / (n + 1)`` of the way to the current value."""

    def swa_update(averaged_param_list: ParamList, current_param_list: ParamList, num_averaged: Tensor | int) -> None:
        with no_grad():
            if averaged_param_list[0].is_floating_point():
                # torch computes the weight as a tensor of the default dtype (float32) when n is a tensor
                weight = float((num_averaged + 1).reciprocal()) if isinstance(num_averaged, Tensor) else None
                for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                    p_avg.lerp_(p_model, weight if weight is not None else 1 / (num_averaged + 1))
            else:
                for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                    p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The exponential moving average of one tensor, ``decay ema + (1 - decay) current``, for
    ``AveragedModel(avg_fn=...)``."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The equal-weight running average of one tensor after ``num_averaged`` models: ``avg + (cur - avg) / (n + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Tensor | int) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` whose parameters ``update_parameters(model)`` averages with the model's.

    The first update copies the model; later ones apply ``avg_fn`` (one tensor at a time, returning the new
    average) or ``multi_avg_fn`` (in place over the tensors of one device and dtype), by default the equal-weight
    average. ``n_averaged`` (an int64 buffer) counts the updates. Buffers are copied from the model, or averaged too
    with ``use_buffers=True``. ``forward`` runs the averaged copy.
    """

    n_averaged: Tensor

    def __init__(
        self,
        model: Module,
        device=None,
        avg_fn: Callable[[Tensor, Tensor, Tensor | int], Tensor] | None = None,
        multi_avg_fn: Callable[[ParamList, ParamList, Tensor | int], None] | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters (and buffers, with ``use_buffers``) into the average."""
        if self.use_buffers:
            ours: Iterable[Tensor] = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs: Iterable[Tensor] = itertools.chain(model.parameters(), model.buffers())
        else:
            ours, theirs = self.parameters(), model.parameters()
        first = int(self.n_averaged) == 0
        averaged, current = [], []
        with no_grad():
            for p_avg, p_model in zip(ours, theirs):
                p_model = p_model.detach().to(p_avg.device)
                averaged.append(p_avg.detach())
                current.append(p_model)
                if first:
                    p_avg.detach().copy_(p_model)
            if not first:
                if self.avg_fn is None:
                    self._average_in_groups(averaged, current)
                else:
                    for p_avg, p_model in zip(averaged, current, strict=True):
                        p_avg.copy_(self.avg_fn(p_avg, p_model, self.n_averaged.to(p_avg.device)))
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1

    def _average_in_groups(self, averaged: list[Tensor], current: list[Tensor]) -> None:
        """``multi_avg_fn`` (or the equal-weight average) over the tensors of each device and dtype in turn."""
        groups: dict[tuple, tuple[list[Tensor], list[Tensor]]] = {}
        for p_avg, p_model in zip(averaged, current):
            group = groups.setdefault((str(p_avg.device), p_avg.dtype), ([], []))
            group[0].append(p_avg)
            group[1].append(p_model)
        for (device, _), (avg_list, model_list) in groups.items():
            n_averaged = self.n_averaged.to(device)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(avg_list, model_list, n_averaged)
            else:
                swa = get_swa_avg_fn()
                for p_avg, p_model in zip(avg_list, model_list, strict=True):
                    p_avg.copy_(swa(p_avg, p_model, n_averaged))


def update_bn(loader: Iterable[Any], model: Module, device=None) -> None:
    """Recompute the running statistics of every batch-norm layer of ``model`` by one pass over ``loader`` (as a
    cumulative average: momentum ``None`` for the pass), for weights averaged after training. An item of the
    loader that is a list or tuple contributes its first element."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to its ``swa_lr`` over ``anneal_epochs`` steps (``"cos"`` or
    ``"linear"``), then hold it there: the schedule of the SWA phase."""

    def __init__(self, optimizer: Optimizer, swa_lr: float | list[float], anneal_epochs: int = 10,
                 anneal_strategy: Literal["cos", "linear"] = "cos", last_epoch: int = -1) -> None:  # fmt: skip
        for lr, group in zip(_format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        """The rate the annealing started from, recovered from the current ``lr = alpha swa_lr + (1 - alpha)
        lr0``: the schedule stays chainable with changes made to ``lr`` in between."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                UserWarning,
                stacklevel=2,
            )
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def _set_anneal_func(self, anneal_strategy: Literal["cos", "linear"]) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self) -> dict[str, Any]:
        """As the base class, without the annealing function (restored from ``_anneal_strategy``)."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
