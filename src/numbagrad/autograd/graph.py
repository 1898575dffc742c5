"""The backward graph's node (``torch.autograd.graph.Node``): edges to the next nodes, and hook registration."""

from __future__ import annotations

import abc
import weakref

from .._tensor import RemovableHandle, Tensor
from .grad_mode import state

#: The edge of a forward argument that is not a tensor input (a number, a dim, a tuple; an integer index or target
#: of an op that does not differentiate it): ``(None, 0)`` to the engine, as an input that needs no gradient, but
#: a distinct object, left out of the public ``next_functions`` (torch lists tensor inputs only).
NOT_A_TENSOR_INPUT = tuple([None, 0])


class GraphNode:
    """What every node of the backward graph is built on. ``_edges`` holds one ``(node, output_nr)`` edge per
    argument of the forward op, in order, as its backward returns one gradient per argument; ``next_functions``
    is torch's view of them, the tensor inputs' edges only (``NOT_A_TENSOR_INPUT``). (The public ``Node`` is the
    abstract interface it satisfies.)

    ``_hooked`` is True once any hook (tensor hook, retain_grad, pre or post hook) is registered on this node, so
    the engine tests one attribute per node instead of four.
    """

    _edges: tuple = ()
    _sequence_nr: int = 0
    _num_outputs: int = 1
    _hooked = False
    _tensor_hooks: dict | None = None  # output_nr -> {handle id: hook}: tensor.register_hook on non-leaves
    _retained: dict | None = None  # output_nr -> weakref of a tensor that called retain_grad()
    _pre_hooks: dict | None = None
    _post_hooks: dict | None = None
    _traceback: str | None = None  # forward stack, kept in anomaly mode
    _runs_without_grads = False  # a custom Function's node runs (with zeros or Nones) even when no gradient came
    _saved = None  # what _release frees (a Function's saved tensors)
    #: whether a gradient it returns may be a saved tensor's storage (the engine then checks before owning one);
    #: a backward that only returns its incoming gradients or new arrays says False
    _returns_saved = True

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        """One ``(node, output_nr)`` edge per tensor input of the forward op, as torch lists them."""
        return tuple(e for e in self._edges if e is not NOT_A_TENSOR_INPUT)

    def _inputs_only(self, grads) -> tuple:
        """Of one gradient per argument, those of the tensor inputs: what torch hands a node's post-hooks and
        returns from calling it (one per ``next_functions`` entry)."""
        return tuple(g for g, e in zip(grads, self._edges) if e is not NOT_A_TENSOR_INPUT)

    def _per_argument(self, grads, hook) -> list:
        """``_inputs_only``'s inverse for what post-``hook`` returned: the gradients of the tensor inputs, None for
        the other arguments; a count other than the listed inputs' is torch's error."""
        listed = sum(1 for e in self._edges if e is not NOT_A_TENSOR_INPUT)
        if len(grads) != listed:
            raise RuntimeError(
                f"hook '{getattr(hook, '__name__', hook)}' has returned an incorrect number of values (got "
                f"{len(grads)}, but expected {listed})"
            )
        shown = iter(grads)
        return [None if e is NOT_A_TENSOR_INPUT else next(shown) for e in self._edges]

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
        """The node's backward on ``grads``: one gradient per listed input, a lone one unwrapped (as torch)."""
        result = self._inputs_only(self._apply(list(grads)))
        return result[0] if len(result) == 1 else result


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


# --- saved-tensor hooks -------------------------------------------------------------------------------------
class saved_tensors_hooks:  # noqa: N801 - torch's name
    """Inside, every tensor saved for backward (by ``ctx.save_for_backward`` or a built-in op) is handed to
    ``pack_hook(tensor)`` and only its result is kept; backward gets the tensor back from
    ``unpack_hook(packed)`` whenever it reads it. The innermost pair applies (what activation checkpointing and
    offloading build on)."""

    def __init__(self, pack_hook, unpack_hook) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        if state.saved_hooks_disabled is not None:
            raise RuntimeError(state.saved_hooks_disabled)
        state.saved_hooks = (state.saved_hooks or ()) + ((self.pack_hook, self.unpack_hook),)

    def __exit__(self, *exc) -> None:
        state.saved_hooks = state.saved_hooks[:-1] or None


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Saved tensors are kept on the CPU (copied there from a device) and moved back to their device when
    backward reads them: device memory traded for copies."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack(t: Tensor):
            return t.device, t.to("cpu") if t.is_cuda else t

        def unpack(packed) -> Tensor:
            device, t = packed
            return t.to(device)

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801
    """Inside, entering ``saved_tensors_hooks`` raises ``RuntimeError(error_message)`` (for code whose saves
    must not be intercepted)."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message
        self.prev = None

    def __enter__(self) -> None:
        self.prev = state.saved_hooks_disabled
        state.saved_hooks_disabled = self.error_message

    def __exit__(self, *exc) -> None:
        state.saved_hooks_disabled = self.prev


# --- hooks over several tensors -----------------------------------------------------------------------------
class _MultiHandle:
    """Removes the per-tensor hooks of one ``register_multi_grad_hook``."""

    def __init__(self, handles: list) -> None:
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode: str = "all") -> _MultiHandle:
    """Call ``fn`` once per backward over several tensors: with mode ``"all"``, ``fn(grads)`` once every gradient
    this backward computes for ``tensors`` is known (``None`` for the others); with mode ``"any"``, ``fn(grad)``
    for the first of them to be computed."""
    supported = ("all", "any")
    if mode not in supported:
        raise ValueError(f"Expects mode to be one of {supported} but got {mode}")
    tensors = tuple(tensors)
    passes: dict = weakref.WeakKeyDictionary()  # backward pass -> its state

    def hook_for(i: int):
        def hook(grad):
            task = state.task
            if mode == "any":
                if task not in passes:
                    passes[task] = True
                    fn(grad)
                return None
            if task not in passes:
                expected = sum(1 for t in tensors if task.will_compute_grad_of(t))
                passes[task] = [expected, [None] * len(tensors)]
            entry = passes[task]
            entry[1][i] = grad
            entry[0] -= 1
            if entry[0] == 0:
                fn(tuple(entry[1]))
            return None

        return hook

    return _MultiHandle([t.register_hook(hook_for(i)) for i, t in enumerate(tensors) if t.requires_grad])
