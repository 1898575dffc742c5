"""``nn.utils.prune``: zero parts of a parameter through a mask, as torch's pruning does.

Pruning ``module.<name>`` moves the parameter to ``<name>_orig``, keeps the mask in the buffer ``<name>_mask``
and sets ``<name> = <name>_orig * <name>_mask`` before every forward (a forward pre-hook), so gradients reach
only the kept entries. Pruning again combines the masks: the new method only picks among entries still kept.
``remove`` makes the pruned tensor a plain parameter again.
"""

from __future__ import annotations

import numbers

import numpy as np

from ... import ops
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..module import Module


def _validate_amount_init(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
        not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)
    ):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_amount(amount, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _count(amount, tensor_size: int) -> int:
    return int(amount) if isinstance(amount, numbers.Integral) else round(amount * tensor_size)


class BasePruningMethod:
    """A way to choose which entries to zero: ``compute_mask(t, default_mask)``; ``apply`` hooks it onto a module.
    ``PRUNING_TYPE`` says how a second pruning combines with the first (``unstructured``: among the kept entries,
    ``structured``: among the kept channels, ``global``: over the whole tensor)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self) -> None:
        self._tensor_name = ""

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask (ones kept, zeros pruned) this method gives ``t``, starting from ``default_mask``."""
        raise NotImplementedError

    def apply_mask(self, module: Module) -> Tensor:
        """``<name>_orig * <name>_mask``: the pruned tensor the module computes with."""
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return orig * mask

    def _combined_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The new mask, chosen among the entries (or channels) ``default_mask`` still keeps."""
        if self.PRUNING_TYPE == "unstructured":
            kept = default_mask._host() == 1
            new = default_mask._host().copy()
            chosen = self.compute_mask(
                Tensor._make(t._host()[kept]), Tensor._make(np.ones(int(kept.sum()), t._data.dtype))
            )
            new[kept] = chosen._host()
            return Tensor._make(new)
        if self.PRUNING_TYPE == "structured":
            dim = self.dim if self.dim >= 0 else self.dim + t.dim()
            others = tuple(d for d in range(t.dim()) if d != dim)
            channels = np.flatnonzero(default_mask._host().sum(axis=others) != 0)
            new = default_mask._host().copy()
            index = [slice(None)] * t.dim()
            index[dim] = channels
            sub = Tensor._make(np.ascontiguousarray(t._host()[tuple(index)]))
            chosen = self.compute_mask(sub, ops.ones_like(sub))._host()
            new[tuple(index)] = new[tuple(index)] * chosen
            return Tensor._make(new)
        return self.compute_mask(t, default_mask) * default_mask

    @classmethod
    def apply(cls, module: Module, name: str, *args, importance_scores: Tensor | None = None, **kwargs):
        """Prune ``module.<name>`` with this method (combined with an earlier pruning of it)."""
        method = cls(*args, **kwargs)
        method._tensor_name = name
        earlier = None
        for key, hook in module._forward_pre_hooks.items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                earlier = key
        if earlier is None:
            orig = getattr(module, name)
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ops.ones_like(orig)
        else:
            orig = getattr(module, name + "_orig")
            default_mask = getattr(module, name + "_mask").detach().clone()
        scores = importance_scores if importance_scores is not None else orig
        if tuple(scores.shape) != tuple(orig.shape):
            raise AssertionError(
                f"importance_scores should have the same shape as parameter                 {name} of {module}"
            )
        with no_grad():
            mask = (
                method.compute_mask(scores, default_mask)
                if earlier is None
                else method._combined_mask(scores, default_mask)
            )
        module.register_buffer(name + "_mask", mask.to(orig.dtype))
        setattr(module, name, method.apply_mask(module))
        if earlier is not None:
            del module._forward_pre_hooks[earlier]
        module.register_forward_pre_hook(method)
        return method

    def remove(self, module: Module) -> None:
        """Make the pruned tensor a plain parameter again (its zeros kept), dropping the original and the mask."""
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        with no_grad():
            orig.copy_(weight)
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        module.register_parameter(self._tensor_name, orig)


class Identity(BasePruningMethod):
    """Prunes nothing: a mask of ones."""

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask of this method (see the class docstring), within ``default_mask``."""
        return default_mask


class RandomUnstructured(BasePruningMethod):
    """Zero ``amount`` entries chosen at random."""

    def __init__(self, amount) -> None:
        super().__init__()
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask of this method (see the class docstring), within ``default_mask``."""
        size = t.numel()
        _validate_amount(self.amount, size)
        mask = default_mask._host().copy().reshape(-1)
        k = _count(self.amount, size)
        if k:
            scores = ops.rand(size)._host()
            mask[np.argsort(-scores, kind="stable")[:k]] = 0
        return Tensor._make(mask.reshape(tuple(t.shape)))


class L1Unstructured(BasePruningMethod):
    """Zero the ``amount`` entries of smallest absolute value."""

    def __init__(self, amount) -> None:
        super().__init__()
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask of this method (see the class docstring), within ``default_mask``."""
        size = t.numel()
        _validate_amount(self.amount, size)
        mask = default_mask._host().copy().reshape(-1)
        k = _count(self.amount, size)
        if k:
            mask[np.argsort(np.abs(t._host().reshape(-1)), kind="stable")[:k]] = 0
        return Tensor._make(mask.reshape(tuple(t.shape)))


def _channel_mask(t: Tensor, default_mask: Tensor, dim: int, keep: np.ndarray) -> Tensor:
    mask = np.zeros(tuple(t.shape), dtype=default_mask._data.dtype)
    index = [slice(None)] * t.dim()
    index[dim] = keep
    mask[tuple(index)] = 1
    return Tensor._make(mask * default_mask._host())


class LnStructured(BasePruningMethod):
    """Zero the ``amount`` channels along ``dim`` of smallest ``n``-norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim: int = -1) -> None:
        super().__init__()
        _validate_amount_init(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask of this method (see the class docstring), within ``default_mask``."""
        dim = self.dim if self.dim >= 0 else self.dim + t.dim()
        channels = t.shape[dim]
        _validate_amount(self.amount, channels)
        keep_count = channels - _count(self.amount, channels)
        others = tuple(d for d in range(t.dim()) if d != dim)
        norms = t.norm(self.n, others)._host() if others else np.abs(t._host())
        keep = np.sort(np.argsort(-norms, kind="stable")[:keep_count])
        return _channel_mask(t, default_mask, dim, keep)


class RandomStructured(BasePruningMethod):
    """Zero ``amount`` channels along ``dim`` chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1) -> None:
        super().__init__()
        _validate_amount_init(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask of this method (see the class docstring), within ``default_mask``."""
        dim = self.dim if self.dim >= 0 else self.dim + t.dim()
        channels = t.shape[dim]
        _validate_amount(self.amount, channels)
        keep_count = channels - _count(self.amount, channels)
        keep = np.sort(np.argsort(-ops.rand(channels)._host(), kind="stable")[:keep_count])
        return _channel_mask(t, default_mask, dim, keep)


class CustomFromMask(BasePruningMethod):
    """Prune with a given mask."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        super().__init__()
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask of this method (see the class docstring), within ``default_mask``."""
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError("default_mask and self.mask must have the same shape")
        return default_mask * self.mask.to(default_mask.dtype)


def identity(module: Module, name: str) -> Module:
    """Set up ``module.<name>`` for pruning with a mask of ones."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount) -> Module:
    """Zero ``amount`` (a count, or a fraction) entries of ``module.<name>`` at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount, importance_scores: Tensor | None = None) -> Module:
    """Zero the ``amount`` entries of ``module.<name>`` of smallest absolute value (or importance score)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount, dim: int) -> Module:
    """Zero ``amount`` random channels of ``module.<name>`` along ``dim``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount, n, dim: int, importance_scores: Tensor | None = None) -> Module:
    """Zero the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest ``n``-norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune ``module.<name>`` with the given mask."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores: dict | None = None, **kwargs) -> None:
    """Prune the (module, name) pairs together: ``pruning_method`` ranks all their entries at once (the smallest
    across every tensor go first), and each gets its share of the global mask."""
    parameters = list(parameters)
    scores = importance_scores or {}
    flat, masks = [], []
    for module, name in parameters:
        score = scores.get((module, name), getattr(module, name))
        flat.append(score.detach().reshape(-1))
        mask = getattr(module, name + "_mask", None)
        masks.append(ops.ones_like(flat[-1]) if mask is None else mask.reshape(-1))
    relevant, default_mask = ops.cat(flat), ops.cat(masks)
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")  # fmt: skip
    final = (
        method._combined_mask(relevant, default_mask)
        if bool((default_mask == 0).any())
        else method.compute_mask(relevant, default_mask)
    )
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        n = param.numel()
        custom_from_mask(module, name, final[start : start + n].reshape(*param.shape))
        start += n


def remove(module: Module, name: str) -> Module:
    """Make the pruned ``module.<name>`` a plain parameter (zeros kept) and forget the mask and the hook."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or any submodule carries a pruning hook."""
    return any(isinstance(hook, BasePruningMethod) for m in module.modules() for hook in m._forward_pre_hooks.values())


__all__ = [
    "BasePruningMethod",
    "CustomFromMask",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "RandomStructured",
    "RandomUnstructured",
    "custom_from_mask",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "random_structured",
    "random_unstructured",
    "remove",
]
