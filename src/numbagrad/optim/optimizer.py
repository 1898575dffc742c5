"""``optim.Optimizer``: parameter groups, per-parameter state, ``zero_grad`` and ``state_dict``, as torch has them.

Subclasses implement ``_update(group, param, grad, state, p)``, which runs one fused kernel over a parameter, its
gradient and its state, on the parameter's device: ``_foreach`` hands a per-element update function from
``optim._updates`` to the parameter's backend (``backend.foreach``). Storage is handed to the kernel flat.

torch's ``foreach`` and ``fused`` choose between its implementations of the same update (a loop of tensor ops, one
multi-tensor launch, one fused kernel); here every update is already one fused kernel per parameter, so they are
kept in the param groups, validated as torch validates them, and select nothing.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np

from .._tensor import RemovableHandle, Tensor
from .._types import get_default_dtype
from ..autograd.grad_mode import enable_grad, no_grad
from ..backend import backend_for
from ..nn.module import typename, zero_grads


class _RequiredParameter:
    """Marks a hyper-parameter with no default (torch's ``optim.optimizer.required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj) -> str:
    return typename(obj)


# Step hooks of every optimizer (``register_optimizer_step_pre_hook``/``..._post_hook``), run around each step.
_global_optimizer_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_optimizer_post_hooks: OrderedDict[int, Callable] = OrderedDict()


def _register(hooks: OrderedDict, hook: Callable, prepend: bool = False) -> RemovableHandle:
    """Add ``hook`` to ``hooks`` (first with ``prepend``); the handle removes it."""
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """Run ``hook(optimizer, args, kwargs)`` before every optimizer's ``step``; it may return ``(new_args,
    new_kwargs)`` for the step to take instead."""
    return _register(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """Run ``hook(optimizer, args, kwargs)`` after every optimizer's ``step``."""
    return _register(_global_optimizer_post_hooks, hook)


def _with_step_hooks(step: Callable) -> Callable:
    """``step`` wrapped to run the global and the optimizer's own step hooks around it (torch's
    ``profile_hook_step``): pre hooks may replace the arguments, post hooks see the ones the step took."""

    @functools.wraps(step)
    def hooked_step(*args, **kwargs):
        self = args[0]
        if _global_optimizer_pre_hooks or self._optimizer_step_pre_hooks:  # (no chain built when there is none)
            for pre_hook in chain(_global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
                result = pre_hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}."
                        )
                    args, kwargs = result
        out = step(*args, **kwargs)
        if self._optimizer_step_post_hooks or _global_optimizer_post_hooks:
            for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()):
                post_hook(self, args, kwargs)
        return out

    hooked_step.hooked = True  # type: ignore[attr-defined]
    return hooked_step


class Optimizer:
    """Base class: holds ``param_groups`` (dicts of params and their hyper-parameters) and ``state``.

    Hooks run as torch's do: step pre/post hooks around ``step`` (each class's ``step`` is wrapped when its first
    instance is made, as torch patches it), and pre/post hooks of ``state_dict`` and ``load_state_dict``.
    """

    def __init__(self, params, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        self._optimizer_step_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        cls = type(self)
        if not getattr(cls.step, "hooked", False):
            cls.step = _with_step_hooks(cls.step)  # type: ignore[method-assign]
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
                + _typename(params)
            )
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for key in sorted(group):
                if key != "params":
                    s += f"\n    {key}: {group[key]}"
        return s + "\n)"

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (with its own hyper-parameters; missing ones come from ``defaults``). The
        parameters may be ``(name, tensor)`` pairs, as ``named_parameters()`` gives: the names are kept in the
        group's ``param_names``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of tensors in "
                "sets will change between runs. Please use a list instead."
            )
        else:
            param_group["params"] = list(params)
        names = [p[0] for p in param_group["params"] if isinstance(p, tuple)]
        param_group["params"] = [p[1] if isinstance(p, tuple) else p for p in param_group["params"]]
        if names:
            if len(names) != len(param_group["params"]):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            # a differentiable optimizer may update non-leaf tensors (its step refuses them here, see _check_step_flags)
            if not self.defaults.get("differentiable") and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this will cause an error; "
                "see github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3,
            )
        existing = {id(p) for group in self.param_groups for p in group["params"]}
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                kind = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {kind} to the optimizer"
                )
        if not existing.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(optimizer, args, kwargs)`` before each ``step``; it may return ``(new_args, new_kwargs)``."""
        return _register(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(optimizer, args, kwargs)`` after each ``step``."""
        return _register(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(optimizer)`` before ``state_dict`` builds its dict (first of all with ``prepend``)."""
        return _register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(optimizer, state_dict)`` on the dict ``state_dict`` built; a dict it returns replaces it."""
        return _register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(optimizer, state_dict)`` before ``load_state_dict`` reads the dict (a shallow copy of the
        caller's); a dict it returns is loaded instead."""
        return _register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(optimizer)`` after ``load_state_dict`` has restored the state."""
        return _register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to ``None`` by default, to zeros with ``set_to_none=False``."""
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable | None = None):
        """Update every parameter that has a gradient; ``closure`` (re-evaluating the loss) runs first."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._check_step_flags()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p._grad is not None:
                        self._step_parameter(group, p)
        return loss

    # The tensors torch names in its error for ``capturable=True`` off a capturable device, and those devices.
    _capturable_tensors = "params and state_steps"
    _capturable_devices = "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla']"

    def _check_step_flags(self) -> None:
        """Before any parameter moves, torch's errors for the options this step cannot honour: ``capturable``
        (kept step counts on the device, for CUDA graphs) off CUDA, and ``differentiable`` (an update recorded by
        autograd) of a parameter that requires grad: torch's in-place update of such a leaf fails, and the update
        here is not recorded, so a non-leaf one is refused too."""
        for group in self.param_groups:
            if not (group.get("capturable") or group.get("differentiable")):
                continue
            for p in group["params"]:
                if p._grad is None:
                    continue
                if group.get("capturable") and p.device.type != "cuda":
                    raise AssertionError(
                        f"If capturable=True, {self._capturable_tensors} must be on supported devices: "
                        f"{self._capturable_devices}."
                    )
                if group.get("differentiable") and p.requires_grad:
                    if p.is_leaf:
                        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
                    raise NotImplementedError(
                        f"{type(self).__name__}(differentiable=True): updates of non-leaf parameters that require "
                        "grad are not recorded by autograd here"
                    )

    def _step_parameter(self, group: dict, p: Tensor) -> None:
        """Run ``_update`` in place on the parameter's flat storage (a contiguous copy, written back, if needed)."""
        grad_tensor = p._grad
        if grad_tensor.is_sparse:
            raise RuntimeError(self._sparse_error())
        data = p._data
        backend = backend_for(data)
        grad = grad_tensor._data
        if not backend.is_contiguous(grad):
            grad = backend.copy(grad)
        work = data if backend.is_contiguous(data) else backend.copy(data)
        self._update(group, work.reshape(-1), grad.reshape(-1), self.state[p], p)
        if work is not data:
            data[...] = work
        p._bump_version()

    #: torch's refusal of a sparse gradient (``embedding(sparse=True)``); None: "<Name> does not support ..."
    _sparse_message: str | None = None

    def _sparse_error(self) -> str:
        return self._sparse_message or f"{type(self).__name__} does not support sparse gradients"

    @staticmethod
    def _zeros_like(p: Tensor) -> Tensor:
        """New optimizer state: zeros shaped, typed and placed like the parameter."""
        return Tensor._make(backend_for(p._data).zeros(p.shape, p._data.dtype))

    @staticmethod
    def _full_like(p: Tensor, value: float) -> Tensor:
        """New optimizer state filled with ``value``, shaped, typed and placed like the parameter."""
        return Tensor._make(backend_for(p._data).full(p.shape, value, p._data.dtype))

    @staticmethod
    def _next_step(state: dict) -> float:
        """Count one more step in ``state["step"]`` (a 0-d cpu tensor of the default dtype, as torch keeps it);
        its value."""
        if "step" not in state:
            state["step"] = _scalar_state(0.0)
        step = state["step"]._data
        step.fill(float(step) + 1)  # (the exact sum, rounded once to the state's dtype: 0.2 us, ``+= 1`` 1.4)
        return float(step)

    def _update(self, group: dict, param, grad, state: dict, p: Tensor) -> None:
        """One fused update of the flat, contiguous storage ``param`` given ``grad`` (numpy or CUDA arrays);
        ``state`` holds Tensors shaped and placed like the parameter ``p``, created here on the first step."""
        raise NotImplementedError

    # --- state_dict ------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``, parameters numbered in
        group order (torch's format)."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        state_dict = {"state": state, "param_groups": groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore hyper-parameters and state saved by ``state_dict`` (state tensors are copied, cast to each
        parameter's dtype and device, except ``step``)."""
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups, saved_groups = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )
        id_map = {
            old: p for g, s in zip(groups, saved_groups) for old, p in zip(s["params"], g["params"])
        }  # fmt: skip
        self.state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                p = id_map[key]
                self.state[p] = {k: _cast_state(k, v, p) for k, v in value.items()}
        self.param_groups = [_restored_group(g, s) for g, s in zip(groups, saved_groups)]
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)


def _check_tensor_lr(lr) -> None:
    """torch's error for a Tensor learning rate of more than one element (a one-element one works as a float)."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")


def _check_fused(fused: bool | None, foreach: bool | None, differentiable: bool) -> None:
    """torch's errors for ``fused=True`` with options it excludes (the update is one fused kernel either way)."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _foreach(update, arrays: list, scalars: tuple, static: tuple = ()) -> None:
    """One fused pass of the per-element ``update`` over flat ``arrays`` on their backend (CPU loop or CUDA);
    ``static`` flags are compiled into the kernel (those that decide which arrays are written)."""
    backend_for(arrays[0]).foreach(update, arrays, scalars, static)


def _scalar_state_type() -> type:
    """The numpy type of optimizer scalars kept as tensors (``step``, NAdam's ``mu_product``, ASGD's ``eta``):
    the default dtype, float32 unless ``set_default_dtype(float64)``, as torch's ``_get_scalar_dtype``."""
    return get_default_dtype().numpy.type


def _scalar_state(value: float) -> Tensor:
    """A 0-d cpu tensor of ``value`` in the scalar state's dtype (``_scalar_state_type``)."""
    return Tensor._make(np.array(value, _scalar_state_type()))


#: (scalar type, the group's numbers) -> an update's scalars: every parameter of a group, step after step until a
#: scheduler moves the learning rate, converts the same numbers (a dozen numpy scalars cost Adam 2.5 us of the
#: 5 us of Python a parameter's update takes). Cleared when it grows large (a schedule makes one entry a step).
_SCALARS: dict = {}

#: The types of the numbers a key may hold to be kept: a tensor learning rate may change in place.
_PLAIN = frozenset((float, int, bool))


def _scalars(s, key: tuple, make: Callable[[], tuple]) -> tuple:
    """``make()``, the update's scalars of type ``s`` computed from the plain numbers ``key``, made once per key.
    A key with a zero learning rate first (-0.0 equals 0.0, and the sign reaches a zero parameter) or anything
    but plain numbers is not kept."""
    scalars = _SCALARS.get((s, key))
    if scalars is None:
        scalars = make()
        if key[0] and all(type(v) in _PLAIN for v in key):
            if len(_SCALARS) >= 256:
                _SCALARS.clear()
            _SCALARS[s, key] = scalars
    return scalars


def _scalar_type(param: np.ndarray):
    """The type of an update's hyperparameters: the dtype the update computes in (float16 and bfloat16 parameters,
    numpy kinds "f" and "V" of 2 bytes, are updated in float32: Numba has neither, so the backends run their update
    on float32 copies)."""
    return np.float32 if param.dtype.itemsize == 2 and param.dtype.kind in "fV" else param.dtype.type


def _restored_group(group: dict, saved: dict) -> dict:
    """A saved group's options with this optimizer's parameters (and their names, where the save has none)."""
    restored = {**saved, "params": group["params"]}
    if "param_names" in group and "param_names" not in saved:
        restored["param_names"] = group["param_names"]
    return restored


def _cast_state(key: str, value, p: Tensor):
    if not isinstance(value, Tensor):
        return value
    if key == "step":
        return value.clone()
    value = value.to(p.device)
    return (value.to(p.dtype) if p.is_floating_point() else value).clone()
