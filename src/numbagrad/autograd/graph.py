"""The backward graph's node (``torch.autograd.graph.Node``): edges to the next nodes, and hook registration."""

from __future__ import annotations

import abc
import weakref

from .._tensor import RemovableHandle


class GraphNode:
    """What every node of the backward graph is built on. ``next_functions`` holds one ``(node, output_nr)`` edge
    per input. (The public ``Node`` is the abstract interface it satisfies.)

    ``_hooked`` is True once any hook (tensor hook, retain_grad, pre or post hook) is registered on this node, so
    the engine tests one attribute per node instead of four.
    """

    next_functions: tuple = ()
    _sequence_nr: int = 0
    _num_outputs: int = 1
    _hooked = False
    _tensor_hooks: dict | None = None  # output_nr -> {handle id: hook}: tensor.register_hook on non-leaves
    _retained: dict | None = None  # output_nr -> weakref of a tensor that called retain_grad()
    _pre_hooks: dict | None = None
    _post_hooks: dict | None = None
    _traceback: str | None = None  # forward stack, kept in anomaly mode
    _grads_owned: tuple = ()  # per output, while backward runs: may the gradient's buffer be reused?
    _reuses_grad_buffers = False  # a node that writes into gradient buffers it owns (elementwise backward)
    _saved_owned = False  # while such a node runs: are its saved tensors freed right after it (may it write there)?
    _runs_without_grads = False  # a custom Function's node runs (with zeros or Nones) even when no gradient came
    _saved = None  # what _release frees (a Function's saved tensors)

    def name(self) -> str:
        return type(self).__name__

    @property
    def metadata(self) -> dict:
        if "_metadata" not in self.__dict__:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` after this node runs; a returned tuple replaces grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = {}
        self._hooked = True
        return _add_hook(self._post_hooks, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)`` before this node runs; a returned tuple replaces grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        self._hooked = True
        return _add_hook(self._pre_hooks, fn)

    def _tensor_hooks_for(self, output_nr: int) -> dict:
        """The hooks of the non-leaf tensor that is output ``output_nr`` of this node (created on first use)."""
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        self._hooked = True
        return self._tensor_hooks.setdefault(output_nr, {})

    def _retain_grad_of(self, t) -> None:
        """Make backward store the gradient of output ``t._output_nr`` into ``t.grad`` (held weakly: no cycle)."""
        if self._retained is None:
            self._retained = {}
        self._hooked = True
        self._retained[t._output_nr] = weakref.ref(t)

    def _release(self) -> None:
        """Free what backward needed (saved tensors); called after running unless ``retain_graph``."""

    def __call__(self, *grads):
        return self._apply(list(grads))


class Node(abc.ABC):
    """``torch.autograd.graph.Node``: the abstract interface of backward-graph nodes. As in torch, the node classes
    are not subclasses of it: they are its virtual subclasses (``isinstance(y.grad_fn, Node)`` is True while
    ``Node`` is not in their MRO), so user code can test for nodes without the library's base class showing."""

    @abc.abstractmethod
    def name(self) -> str:
        """The node's class name, as torch prints it (``MulBackward0``)."""

    @property
    @abc.abstractmethod
    def next_functions(self) -> tuple:
        """One ``(node, output_nr)`` edge per input of the forward op."""

    @property
    @abc.abstractmethod
    def metadata(self) -> dict:
        """A dict the user may fill (kept with the node)."""

    @abc.abstractmethod
    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` after the node runs."""

    @abc.abstractmethod
    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)`` before the node runs."""

    @classmethod
    def __subclasshook__(cls, subclass):
        if cls is Node and issubclass(subclass, GraphNode):
            return True
        return NotImplemented


def _add_hook(hooks: dict, fn) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle
