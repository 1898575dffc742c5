"""``nn.Module``: the base of every layer, with torch's attribute registration, traversal, state_dict and repr."""

from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from .._tensor import RemovableHandle, Tensor
from .._types import bfloat16, float16, float32, float64
from .._types import dtype as _dtype
from ..autograd.grad_mode import break_trace, no_grad, state
from ._backward_hooks import BackwardHooks
from .parameter import Buffer, Parameter, UninitializedTensorMixin

T = TypeVar("T", bound="Module")


def typename(obj) -> str:
    """torch.typename: ``numbagrad.FloatTensor`` for tensors, the qualified class name otherwise."""
    if isinstance(obj, Tensor) and not isinstance(obj, Parameter):
        return f"numbagrad.{obj.dtype.scalar_name}Tensor"
    module = type(obj).__module__
    prefix = "" if module in ("builtins", "__main__") else module + "."
    return prefix + type(obj).__qualname__


def zero_grads(params: Iterable[Tensor], set_to_none: bool = True) -> None:
    """torch's ``zero_grad``: drop each ``.grad`` (the default), or zero it in place, detached."""
    for p in params:
        g = p._grad
        if g is None:
            continue
        if set_to_none:
            p._grad = None
        elif g.is_sparse:  # (``embedding(sparse=True)``'s gradient: it keeps no entries)
            g.zero_()
        else:
            if g.grad_fn is not None:
                g.detach_()
            else:
                g.requires_grad_(False)
            g.zero_()


def _addindent(s: str, num_spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * num_spaces + line for line in lines[1:])


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns; prints ``<All keys matched successfully>`` when both lists are empty."""

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _check_name(kind: str, name, owner: Module) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."' + (f", got: {name}" if kind == "module" else ""))
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


class _Generation:
    """A count of the changes made to any module's attributes, parameters, buffers or children (an assignment of
    another object, a deletion, a store's entry set or removed). A compiled module reads its constants and Python
    attributes as the trace found them: it traces again after such a change."""

    value = 0

    @classmethod
    def bump(cls) -> None:
        cls.value += 1


def module_generation() -> int:
    """The current count of module changes (see ``_Generation``)."""
    return _Generation.value


class _CountsWrites:
    """Mixed into a dict class: every write (an entry set or removed) counts as a module change."""

    __slots__ = ()

    def __setitem__(self, key, value) -> None:
        _Generation.bump()
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        _Generation.bump()
        super().__delitem__(key)

    def pop(self, *args):
        _Generation.bump()
        return super().pop(*args)

    def popitem(self, *args):
        _Generation.bump()
        return super().popitem(*args)

    def clear(self) -> None:
        _Generation.bump()
        super().clear()

    def update(self, *args, **kwargs) -> None:
        _Generation.bump()
        super().update(*args, **kwargs)

    def setdefault(self, key, default=None):
        _Generation.bump()
        return super().setdefault(key, default)


class _Store(_CountsWrites, dict):
    """A module's ``_parameters``, ``_buffers`` or ``_modules``, whose writes count as module changes."""

    __slots__ = ()

    def __reduce__(self):
        return (_Store, (dict(self),))


class _HookTable(_CountsWrites, OrderedDict):
    """A module's hooks, by handle id: registering or removing one counts as a module change (a compiled module
    that calls this one traces again, so that its replays run the hooks as they are now)."""


_HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def module_state(module: Module) -> tuple:
    """What a compiled function may have read of ``module``: the keys, and the objects themselves, of its
    attributes and of its parameters, buffers, children and hooks (a changed number is a new object). Compared by
    identity (``same_state``) when the module changes count moved, to tell whether this module was among the
    changes; holding the objects keeps their identities from being reused meanwhile."""
    keys, objects = [], []
    for key, value in module.__dict__.items():
        if isinstance(value, dict):
            keys.append((key, tuple(value)))
            objects.extend(value.values())
        else:
            keys.append(key)
            objects.append(value)
    return tuple(keys), tuple(objects)


def same_state(a: tuple, b: tuple) -> bool:
    """Whether two ``module_state`` results name the same keys and hold the same objects."""
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(x is y for x, y in zip(a[1], b[1]))


def _changing(module: Module, name: str, value) -> None:
    """Count the assignment of ``value`` to ``module.name`` as a module change unless the attribute already holds
    that object; inside code being compiled, such a change breaks the trace (a replay would not make it)."""
    d = module.__dict__
    current = d.get(name, _MISSING)
    if current is _MISSING:
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                current = d[store][name]
                break
    if current is value:
        return
    _Generation.bump()
    if state.tracer is not None and current is not _MISSING:
        break_trace(f"sets the attribute {name!r} of a {type(module).__name__}, which a replay would not do")


_MISSING = object()


def _add_hook(hooks: OrderedDict, hook: Callable, prepend: bool) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


class Module:
    """Base class for all neural network modules; subclasses define ``forward`` and assign submodules and
    parameters as attributes, which registers them."""

    training: bool
    _version: int = 1

    def __init__(self, *args, **kwargs) -> None:
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'"
            )
        if args:
            raise TypeError(
                f"{type(self).__name__}.__init__() takes 1 positional argument but {len(args) + 1} were given"
            )
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = _Store()
        d["_buffers"] = _Store()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = _Store()
        for table in _HOOK_TABLES:
            d[table] = _HookTable()

    def __setstate__(self, saved: dict) -> None:
        """Unpickling a whole module: its attributes as saved, and empty backward-hook tables where the module was
        saved before it had them."""
        self.__dict__.update(saved)
        for table in _HOOK_TABLES:
            self.__dict__.setdefault(table, _HookTable())

    def forward(self, *args, **kwargs):
        """The module's computation; subclasses override it. Call the module (``m(x)``), not this, so hooks run."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks:
            return self._call_with_hooks(self.forward, args, kwargs)
        return self.forward(*args, **kwargs)  # (no hook: what ``_call_with_hooks`` would do, one frame less)

    def _call_with_hooks(self, forward: Callable, args: tuple, kwargs: dict):
        """``forward(*args, **kwargs)`` between this module's forward pre-hooks and forward hooks, with its backward
        hooks set up around it (torch's order): what calling the module does (a compiled module runs its
        original's hooks around the compiled forward with it)."""
        backward = self._backward_hooks or self._backward_pre_hooks
        if state.tracer is not None and (self._forward_pre_hooks or self._forward_hooks or backward):
            # inside code being compiled: a replay would not run the hooks (a feature grabber's list would stop
            # growing), so that call runs eagerly
            kind = "forward" if self._forward_pre_hooks or self._forward_hooks else "backward"
            break_trace(f"calls a {type(self).__name__} that has {kind} hooks")
        for hook in self._forward_pre_hooks.values():
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        if backward:
            hooks = BackwardHooks(self, list(self._backward_hooks.values()), list(self._backward_pre_hooks.values()))
            args = hooks.setup_inputs(args)
        output = forward(*args, **kwargs)
        for hook in self._forward_hooks.values():
            result = hook(self, args, output)
            if result is not None:
                output = result
        if backward:
            if not isinstance(output, (Tensor, tuple)):
                warnings.warn(
                    "For backward hooks to be called, module output should be a Tensor or a tuple of Tensors but "
                    f"received {type(output)}",
                    stacklevel=2,
                )
            output = hooks.setup_outputs(output)
        return output

    def register_forward_hook(self, hook: Callable):
        """``hook(module, args, output)`` after every forward; a returned value replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False):
        """``hook(module, grad_input, grad_output)`` when the gradients with respect to the module's inputs are
        computed: one entry per positional argument and per output (None where not a tensor); a returned tuple
        replaces ``grad_input``. ``prepend`` runs it before the hooks already registered."""
        return _add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False):
        """``hook(module, grad_output)`` when the gradients with respect to the module's outputs are computed; a
        returned tuple replaces ``grad_output`` (before the module's own backward and its backward hooks)."""
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def register_forward_pre_hook(self, hook: Callable):
        """``hook(module, args)`` before every forward; a returned value replaces the arguments."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    # --- registration ----------------------------------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (a ``Parameter`` or ``None``) under ``name``, as assigning the attribute does."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name, self)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{typename(param)}' object to parameter '{name}' (torch.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created explicitly. "
                f"To express '{name}' as a function of another Tensor, compute the value in the forward() method."
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state but not a parameter (moved by ``to``, saved in ``state_dict`` if persistent)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name, self)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{typename(tensor)}' object to buffer '{name}' (torch Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` (or ``None``) as a child under ``name``; ``register_module`` is an alias."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{typename(module)} is not a Module subclass")
        _check_name("module", name, self)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        _changing(self, name, value)
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_attr(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{typename(value)}' as parameter '{name}' (torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if "_modules" not in d:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_attr(name, keep="_modules")
            d["_modules"][name] = value
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{typename(value)}' as child module '{name}' (torch.nn.Module or None expected)"
                )
            d["_modules"][name] = value
        elif isinstance(value, Buffer) or "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{typename(value)}' as buffer '{name}' (torch.nn.Buffer, torch.Tensor or None "
                    "expected)"
                )
            if isinstance(value, Buffer):  # (a marked tensor brings its persistence; a plain one keeps the slot's)
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    def _remove_attr(self, name: str, keep: str) -> None:
        """Forget ``name`` everywhere except the ``keep`` store (so a replaced entry keeps its position)."""
        self.__dict__.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                self.__dict__[store].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name: str) -> None:
        _Generation.bump()
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[store]:
                del self.__dict__[store][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # --- traversal -------------------------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        """Every module in the tree, depth first, self first, each once (by identity)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """Every module in the tree, depth first, self first, each once."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for each direct child, each once."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        """Each direct child module, once."""
        for _, module in self.named_children():
            yield module

    def _named_members(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in module.__dict__[store].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """``(name, parameter)`` in registration order, depth first; shared parameters once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter of this module (and of its submodules when ``recurse``), each once."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """``(name, buffer)`` in registration order, depth first; shared buffers once."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every buffer of this module (and of its submodules when ``recurse``), each once."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path ``target`` (``''`` is this module)."""
        module = self
        for item in target.split(".") if target else []:
            if not hasattr(module, item):
                raise AttributeError(module._get_name() + " has no attribute `" + item + "`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def apply(self: T, fn: Callable[[Module], None]) -> T:
        """Call ``fn`` on every submodule (children first, recursively) and then on self; return self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # --- modes and gradients ---------------------------------------------------------------------------------
    def train(self: T, mode: bool = True) -> T:
        """Set training mode (``mode=True``) or eval mode on this module and every submodule; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self: T) -> T:
        """Set eval mode (``train(False)``): dropout off, batch norm uses its running statistics."""
        return self.train(False)

    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        """Set ``requires_grad`` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to ``None`` (the default), or to zeros in place."""
        zero_grads(self.parameters(), set_to_none)

    # --- conversion ------------------------------------------------------------------------------------------
    def _apply(self: T, fn: Callable[[Tensor], Tensor]) -> T:
        """Convert every parameter, gradient and buffer in place (the Parameter objects are kept)."""
        for module in self.modules():
            with no_grad():
                for p in module._parameters.values():
                    if p is None:
                        continue
                    p._data = fn(p)._data
                    if p._grad is not None:
                        p._grad = Tensor._make(fn(p._grad)._data)
                for name, b in module._buffers.items():
                    if b is not None:
                        module._buffers[name] = fn(b)
        return self

    def to(self: T, *args, **kwargs) -> T:
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(tensor)``; dtype changes floats only;
        ``memory_format=`` lays out the 4-d and 5-d parameters and buffers so (``channels_last``)."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        memory_format = kwargs.pop("memory_format", None)
        kwargs.pop("non_blocking", None)
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, _dtype):
                dtype = a
            elif isinstance(a, bool):
                continue
            else:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
            )

        def convert(t: Tensor) -> Tensor:
            if device is not None:
                t = t.to(device)
            if dtype is not None and t.is_floating_point():
                t = t.to(dtype)
            if memory_format is not None and t.dim() in (4, 5):
                t = t.to(memory_format=memory_format)
            return t

        return self._apply(convert)

    def cuda(self: T, device=None) -> T:
        """Move every parameter and buffer to the GPU, in place; returns self."""
        return self.to("cuda" if device is None else device)

    def cpu(self: T) -> T:
        """Move every parameter and buffer to host memory, in place; returns self."""
        return self.to("cpu")

    def float(self: T) -> T:
        """Cast every float parameter and buffer to float32, in place; returns self."""
        return self.to(float32)

    def double(self: T) -> T:
        """Cast every float parameter and buffer to float64, in place; returns self."""
        return self.to(float64)

    def half(self: T) -> T:
        """Cast every float parameter and buffer to float16, in place; returns self."""
        return self.to(float16)

    def bfloat16(self: T) -> T:
        """Cast every float parameter and buffer to bfloat16, in place; returns self."""
        return self.to(bfloat16)

    # --- state_dict ------------------------------------------------------------------------------------------
    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        """Parameters and persistent buffers by dotted name, detached unless ``keep_vars``."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy values into this module's parameters and buffers; mismatches raise torch's error."""
        missing, errors = [], []
        own = self.state_dict(keep_vars=True)
        with no_grad():
            for key, target in own.items():
                if key not in state_dict:
                    missing.append(key)
                    continue
                value = state_dict[key]
                if not isinstance(value, Tensor):
                    errors.append(
                        f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like object from '
                        f"checkpoint but received {type(value)}"
                    )
                elif isinstance(target, UninitializedTensorMixin):
                    target.materialize(tuple(value.shape))
                    target.copy_(value)
                elif value.shape != target.shape:
                    errors.append(
                        f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                        f"the shape in current model is {target.shape}."
                    )
                else:
                    target.copy_(value)
        unexpected = [k for k in state_dict if k not in own]
        if strict:
            if unexpected:
                errors.insert(
                    0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected))
                )
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__, "\n\t".join(errors))
            )
        return _IncompatibleKeys(missing, unexpected)

    # --- printing --------------------------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses, before its children (override in subclasses)."""
        return ""

    def __repr__(self) -> str:
        extra_lines = self.extra_repr().split("\n") if self.extra_repr() else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"
