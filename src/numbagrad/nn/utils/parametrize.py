"""``nn.utils.parametrize``: a module's tensor computed from an unconstrained original by small modules.

``register_parametrization(module, "weight", P)`` moves ``module.weight`` to ``module.parametrizations.weight.original``
and turns ``weight`` into a property that returns ``P(original)`` on every access (``right_inverse``, where ``P``
has one, maps an assigned value back). As torch does, the module's class is swapped for a generated subclass
(``ParametrizedLinear``) that carries the property, and swapped back when the last parametrization is removed.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..containers import ModuleDict, ModuleList
from ..module import Module
from ..parameter import Parameter

_cache_enabled = 0
_cache: dict = {}


@contextmanager
def cached():
    """Within the block, each parametrized tensor is computed once, on first access, and reused."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register_parameter_or_buffer(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _assign(original: Tensor, value: Tensor) -> None:
    """Put ``value`` into the original, keeping the original's identity (an optimizer holds it)."""
    with no_grad():
        if tuple(original.shape) == tuple(value.shape) and original.dtype == value.dtype:
            original.copy_(value)
        else:
            original.data = value.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to its ``original`` (or ``original0``,
    ``original1``... when the first one's ``right_inverse`` splits it into several tensors)."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        new = original
        with no_grad():
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:  # torch: a parametrization may refuse to invert; keep the value
                        pass
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if not unsafe and (original.dtype != new.dtype or tuple(original.shape) != tuple(new.shape)):
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype or shape.\n"
                    f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}\n"
                    f"original.shape: {original.shape}\nright_inverse(original).shape: {new.shape}"
                )
            _assign(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                     f"Got element {i} of the sequence with type {type(part).__name__}.")  # fmt: skip
                value = Parameter(part.detach(), original.requires_grad) if isinstance(original, Parameter) else part
                _register_parameter_or_buffer(self, f"original{i}", value)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != original.dtype or tuple(z.shape) != tuple(original.shape):
                raise ValueError(
                    "Registering a parametrization may not change the shape or dtype of the tensor, unless the "
                    f"`unsafe` flag is enabled.\nunparametrized dtype: {original.dtype}\nparametrized dtype: "
                    f"{z.dtype}\nunparametrized shape: {original.shape}\nparametrized shape: {z.shape}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Set the original(s) so that the parametrized tensor becomes ``value``."""
        with no_grad():
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                else:
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
            if self.is_tensor:
                _assign(self.original, value)
            else:
                for i, part in enumerate(value):
                    _assign(getattr(self, f"original{i}"), part)

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _inject_new_class(module: Module) -> None:
    """Swap the module's class for a ``Parametrized<Name>`` subclass, to carry the properties."""
    cls = module.__class__

    def getstate(self):
        raise RuntimeError(
            "Serialization of parametrized modules is only supported through state_dict(). See:\n"
            "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
            "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
        )

    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"__getstate__": getstate})


def _inject_property(module: Module, tensor_name: str) -> None:
    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        if key not in _cache:
            _cache[key] = parametrization()
        return _cache[key]

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has any parametrization (on ``tensor_name``, when given)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:  # fmt: skip
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to the current tensor (a second call
    on the same name chains another parametrization after the first)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        chain = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
            if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
                raise ValueError(
                    "Registering a parametrization may not change the shape or dtype of the tensor, unless the "
                    f"`unsafe` flag is enabled.\nunparametrized dtype: {y.dtype}\nparametrized dtype: {x.dtype}\n"
                    f"unparametrized shape: {y.shape}\nparametrized shape: {x.shape}"
                )
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
            f"'{tensor_name}'"
        )
    return module


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo ``register_parametrization``: ``tensor_name`` becomes a plain parameter or buffer again, holding the
    parametrized value (``leave_parametrized``) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            _assign(original, value)
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in terms of a "
                "sequence of tensors."
            )
        with no_grad():
            value = getattr(module, tensor_name)
        original = Parameter(value.detach(), value.requires_grad) if chain.original0.requires_grad else value.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class as it was before any parametrization swapped it."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "type_before_parametrizations",
]
