"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList`` and ``ParameterDict``, with
torch's list/dict APIs."""

from __future__ import annotations

import operator
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain

from .._tensor import Tensor
from .module import Module, _addindent
from .parameter import Parameter


class _IndexedModules(Module):
    """Shared by ModuleList and Sequential: modules stored under the keys ``"0"``, ``"1"``, ..."""

    def _key(self, idx) -> str:
        """The key of the module at position ``idx`` (negative counts from the end)."""
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules)[idx]

    def _slice(self, idx: slice):
        return type(self)(list(self._modules.values())[idx])

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self._slice(idx)
        return self._modules[self._key(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for key in keys[idx] if isinstance(idx, slice) else [self._key(idx)]:
            delattr(self, key)
        self.__dict__["_modules"] = dict(zip(map(str, range(len(self._modules))), self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __dir__(self) -> list:
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, module: Module):
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]):
        """Add each of ``modules`` at the end; returns self."""
        if not isinstance(modules, Iterable):
            raise TypeError(
                f"{type(self).__name__}.extend should be called with an iterable, but got {type(modules).__name__}"
            )
        for module in list(modules):
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before ``index`` (renumbering the ones after it)."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def pop(self, key=-1) -> Module:
        """Remove and return the module at ``key`` (the last by default)."""
        v = self[key]
        del self[key]
        return v

    def __iadd__(self, modules: Iterable[Module]):
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]):
        combined = type(self)()
        for i, module in enumerate(chain(self, other)):
            combined.add_module(str(i), module)
        return combined


class ModuleList(_IndexedModules):
    """A list of modules whose parameters are registered (a plain list would hide them); no ``forward``."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self += modules

    def __repr__(self) -> str:
        """torch's compressed form: consecutive equal reprs print once as ``(i-j): n x <repr>``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks: list[list] = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = [_addindent(f"({s}): {r}" if s == e else f"({s}-{e}): {e - s + 1} x {r}", 2) for s, e, r in blocks]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class Sequential(_IndexedModules):
    """Modules called in order, each on the previous one's output; built from modules or an OrderedDict."""

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _slice(self, idx: slice) -> Sequential:
        return Sequential(OrderedDict(list(self._modules.items())[idx]))

    def forward(self, input):
        """Call each module in order on the previous one's output."""
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleDict(Module):
    """A dict of modules whose parameters are registered, keeping insertion order."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module under ``key``."""
        v = self[key]
        del self[key]
        return v

    def keys(self):
        """The keys, in insertion order."""
        return self._modules.keys()

    def items(self):
        """``(key, module)`` pairs, in insertion order."""
        return self._modules.items()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def update(self, modules) -> None:
        """From a mapping or an iterable of ``(key, module)`` pairs (torch's errors for anything else)."""
        if not isinstance(modules, Iterable):
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, but got "
                + type(modules).__name__
            )
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for j, pair in enumerate(pairs):
            if not isinstance(pair, Iterable) or isinstance(pair, str) or len(pair) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element #{j} should be Iterable; is" + type(pair).__name__
                )
            self[pair[0]] = pair[1]


def _parameter_line(key, p) -> str:
    """One line of ParameterList/ParameterDict's repr: ``  (key): Parameter containing: [<dtype> of size 2x3]``."""
    if not isinstance(p, Tensor):
        return f"  ({key}): Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    device = f" ({p.device})" if p.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{p.dtype} of size {size}{device}]"


class ParameterList(Module):
    """A list whose tensors are registered parameters (plain tensors are wrapped in ``Parameter``)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _get_abs_string_index(self, idx) -> str:
        idx = operator.index(idx)
        if not (-len(self) <= idx < len(self)):
            raise IndexError(f"index {idx} is out of range")
        if idx < 0:
            idx += len(self)
        return str(idx)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._get_abs_string_index(idx))

    def __setitem__(self, idx: int, param) -> None:
        idx = self._get_abs_string_index(idx)
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, idx, param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator:
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable) -> ParameterList:
        return self.extend(parameters)

    def __dir__(self) -> list:
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value) -> ParameterList:
        """Add ``value`` at the end (a plain tensor becomes a ``Parameter``); returns self."""
        new_idx = len(self)
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values: Iterable) -> ParameterList:
        """Add each of ``values`` at the end; returns self."""
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got " + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_parameter_line(k, p) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters (plain tensors are wrapped in ``Parameter``); a plain ``dict`` given to
    ``update`` is taken in sorted key order, as torch does."""

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _key_to_attr(key) -> str:
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                f"'{type(key).__name__}'). Open an issue on github if you need non-string keys."
            )
        return key

    def __getitem__(self, key: str):
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        attr = self._key_to_attr(key)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default=None):
        """The parameter under ``key``, first setting it to ``default`` if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every parameter."""
        for k in self._keys.copy():
            del self[k]

    def pop(self, key: str):
        """Remove and return the parameter under ``key``."""
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> tuple:
        """Remove and return the last inserted ``(key, parameter)`` pair."""
        k, _ = self._keys.popitem()
        self._keys[k] = None
        val = self[k]
        del self[k]
        return k, val

    def get(self, key: str, default=None):
        """The parameter under ``key``, or ``default`` if absent."""
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default=None) -> ParameterDict:
        """A new ParameterDict with each of ``keys`` set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self):
        """``(key, parameter)`` pairs, in insertion order."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The parameters, in insertion order."""
        return (self[k] for k in self._keys)

    def update(self, parameters) -> None:
        """Add the pairs of a mapping or iterable (a plain ``dict`` in sorted key order, as torch)."""
        if not isinstance(parameters, Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, but got "
                + type(parameters).__name__
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for key, parameter in parameters.items():
                self[key] = parameter
        elif isinstance(parameters, Mapping):
            for key, parameter in sorted(parameters.items()):
                self[key] = parameter
        else:
            for j, p in enumerate(parameters):
                if not isinstance(p, Iterable):
                    raise TypeError(
                        f"ParameterDict update sequence element #{j} should be Iterable; is" + type(p).__name__
                    )
                if not len(p) == 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(p)}; 2 is required")
                self[p[0]] = p[1]

    def extra_repr(self) -> str:
        lines = []
        for k, p in self.items():
            line = _parameter_line(k, p)
            if isinstance(p, Tensor):  # ParameterDict prints torch.typename: [numbagrad.FloatTensor of size 2]
                line = line.replace(f"[{p.dtype} of", f"[{p.type()} of")
            lines.append(line)
        return "\n".join(lines)

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: ParameterDict) -> ParameterDict:
        copy = self.copy()
        copy.update(other)
        return copy

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        copy = other.copy()
        copy.update(self)
        return copy

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self


class Container(Module):
    """torch's deprecated ``nn.Container``: a Module whose keyword arguments become its children."""

    def __init__(self, **kwargs) -> None:
        super().__init__()
        warnings.warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. Subclass "
            "that instead.",
            FutureWarning,
            stacklevel=2,
        )
        for key, value in kwargs.items():
            self.add_module(key, value)
