"""Containers: ``Sequential``, ``ModuleList`` and ``ModuleDict``, with torch's list/dict APIs."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain

from .module import Module, _addindent


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
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]):
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
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
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
