"""``autograd.Function``, its ctx, and the graph node they are (torch's design: the ctx *is* the node).

``Function.apply`` runs ``forward`` under no-grad, then (when some input requires grad and grad mode is on)
links the outputs to a node of class ``<Name>Backward`` whose ``next_functions`` point at the inputs' nodes.
Built-in ops are ordinary subclasses; they set ``node_name`` to torch's names (``MulBackward0``).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import sys
import traceback
import warnings
import weakref

import numpy as np

from .. import _tensor
from .._tensor import Tensor
from .._types import shape_str
from .grad_mode import no_grad, state

ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
    "you need to access saved tensors after calling backward."
)

_sequence = itertools.count()


class Node:
    """A node of the backward graph. ``next_functions`` holds one ``(node, output_nr)`` edge per input."""

    next_functions: tuple = ()
    _sequence_nr: float = 0
    _num_outputs: int = 1
    _tensor_hooks: dict | None = None  # output_nr -> {handle id: hook}: tensor.register_hook on non-leaves
    _retained: dict | None = None  # output_nr -> weakref of a tensor that called retain_grad()
    _traceback: str | None = None  # forward stack, kept in anomaly mode
    _grads_owned: tuple = ()  # per output, while backward runs: may the gradient's buffer be reused?

    def name(self) -> str:
        return type(self).__name__

    @property
    def metadata(self) -> dict:
        if "_metadata" not in self.__dict__:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after this node runs; a returned tuple replaces grad_inputs."""
        hooks = self.__dict__.setdefault("_post_hooks", {})
        handle = _tensor.RemovableHandle(hooks)
        hooks[handle.id] = fn
        return handle

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before this node runs; a returned tuple replaces grad_outputs."""
        hooks = self.__dict__.setdefault("_pre_hooks", {})
        handle = _tensor.RemovableHandle(hooks)
        hooks[handle.id] = fn
        return handle

    def _tensor_hooks_for(self, output_nr: int) -> dict:
        """The hooks of the non-leaf tensor that is output ``output_nr`` of this node (created on first use)."""
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        return self._tensor_hooks.setdefault(output_nr, {})

    def _retain_grad_of(self, t: Tensor) -> None:
        """Make backward store the gradient of output ``t._output_nr`` into ``t.grad`` (held weakly: no cycle)."""
        if self._retained is None:
            self._retained = {}
        self._retained[t._output_nr] = weakref.ref(t)

    def _release(self) -> None:
        """Free what backward needed (saved tensors); called after running unless ``retain_graph``."""

    def __call__(self, *grads):
        return self._apply(list(grads))


class AccumulateGrad(Node):
    """The node behind a leaf that requires grad: adds incoming gradients into ``variable.grad``."""

    _sequence_nr = math.inf  # ready leaves run first, as in torch

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {hex(id(self))}>"

    def accumulate(self, grad: Tensor, create_graph: bool, owned: bool = False) -> None:
        """Add ``grad`` into the leaf's ``.grad``; ``owned`` (see ``engine_owns``) lets the first one be kept
        without a copy."""
        from ..backend import backend_for

        t = self.variable
        if t._grad is None:
            if create_graph:
                t._grad = _CopyGrad.apply(grad)  # torch: a differentiable copy, grad_fn=<CopyBackwards>
            elif owned:
                t._grad = Tensor._make(grad._data)  # take the storage, as torch does: no copy
            else:
                t._grad = Tensor._make(backend_for(grad._data).copy(grad._data))
        elif create_graph or t._grad.requires_grad:
            t._grad = t._grad + grad
        else:
            backend_for(t._grad._data).accumulate_(t._grad._data, grad._data)


def _reference_counts() -> tuple[int, int] | None:
    """What ``engine_owns`` counts for an object held in exactly one place (as the engine holds a gradient), and
    for an array held only by one object's attribute. Measured on this interpreter rather than assumed, because
    interpreters count temporaries differently; ``None`` where there are no exact reference counts (not
    CPython, or free-threaded), and then buffers are never reused."""
    if not hasattr(sys, "getrefcount") or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None

    class Holder:
        __slots__ = ("_data",)

    def counts(obj) -> tuple[int, int]:
        data = obj._data  # the same two steps as ``engine_owns``
        return sys.getrefcount(data), sys.getrefcount(obj)

    probe = Holder()
    probe._data = object()
    return counts(probe)  # ``probe`` is its one holder, as a buffer slot is for the engine


_SOLE_REFS = _reference_counts()


def engine_owns(grad: Tensor | None) -> bool:
    """True when nothing outside the engine can see ``grad`` or its storage: then its buffer may be reused (a
    leaf keeps it as ``.grad``, an elementwise backward writes its result into it) instead of allocating.

    A gradient held anywhere else (another node's buffer, a hook, the user's ``backward(gradient)`` argument,
    ``autograd.grad``'s results, a view of it) has more references and is left alone. The engine calls this
    with the gradient in exactly one place of its own (a buffer slot or a local), right before handing it on.
    """
    if grad is None or _SOLE_REFS is None:
        return False
    data_refs, grad_refs = _SOLE_REFS
    data = grad._data
    return (
        isinstance(data, np.ndarray)
        and data.base is None
        and data.flags.writeable
        and data.flags.c_contiguous
        and grad.grad_fn is None
        and sys.getrefcount(data) <= data_refs
        and sys.getrefcount(grad) <= grad_refs
    )


def accumulator_of(t: Tensor) -> AccumulateGrad:
    """The (cached, weakly held) AccumulateGrad node of a leaf."""
    node = t._accumulator() if t._accumulator is not None else None
    if node is None:
        node = AccumulateGrad(t)
        t._accumulator = weakref.ref(node)
    return node


def edge_of(t: Tensor):
    """The graph edge a tensor's gradient flows along: its grad_fn slot, or its leaf accumulator."""
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    if t._requires_grad:
        return (accumulator_of(t), 0)
    return (None, 0)


class SavedTensor:
    """A tensor saved for backward, with its version at save time.

    An output of the node that saves it is stored without its grad_fn (that would be a reference cycle
    node -> saved -> tensor -> node) and re-linked to the node when unpacked.
    """

    __slots__ = ("tensor", "version", "is_output", "output_nr", "requires_grad", "grad_fn")

    def __init__(self, t: Tensor, node: Node) -> None:
        self.version = t._version_counter.value
        self.is_output = t.grad_fn is node
        if self.is_output:
            self.tensor = t.detach()
            self.output_nr = t._output_nr
            self.grad_fn = None
        else:
            self.tensor = t
            self.output_nr = t._output_nr
            self.grad_fn = t.grad_fn
        self.requires_grad = t.requires_grad

    def unpack(self, node: Node) -> Tensor:
        t = self.tensor
        if t._version_counter.value != self.version:
            owner = node if self.is_output else self.grad_fn
            which = f", which is output {self.output_nr} of {owner.name()}," if owner is not None else ""
            hint = (
                "Hint: the backtrace further above shows the operation that failed to compute its gradient. "
                "The variable in question was changed in there or anywhere later. Good luck!"
                if state.anomaly
                else "Hint: enable anomaly detection to find the operation that failed to compute its gradient, "
                "with torch.autograd.set_detect_anomaly(True)."
            )
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[numbagrad.{t.dtype.scalar_name}Tensor {shape_str(t.shape)}]{which} is at version "
                f"{t._version_counter.value}; expected version {self.version} instead. {hint}"
            )
        if not self.is_output:
            return t
        out = Tensor._make(t._data)
        out._version_counter = t._version_counter
        out.grad_fn = node
        out._output_nr = self.output_nr
        return out


class FunctionCtx:
    """What ``forward``/``setup_context`` use to stash state for ``backward``."""

    needs_input_grad: tuple = ()
    materialize_grads = True
    _saved = None
    _freed = False
    to_save = ()
    dirty_tensors = ()
    non_differentiable = ()

    def save_for_backward(self, *tensors) -> None:
        """Save tensors (inputs or outputs) for backward; version-checked when read back."""
        self.to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        for t in tensors:
            assert isinstance(t, Tensor) or t is None, (
                "save_for_forward expects all arguments to be tensors; you should save non-tensors as "
                "attributes on ctx."
            )
        self.saved_for_forward = tensors

    def mark_dirty(self, *args) -> None:
        """Declare inputs that forward modified in place (they must be returned)."""
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args) -> None:
        """Declare outputs that get no gradient (backward still receives zeros for them)."""
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        """If False, backward receives ``None`` (not zeros) for outputs that got no gradient."""
        if not isinstance(value, bool):
            raise TypeError(f"set_materialize_grads expects a bool, but got {type(value).__name__}")
        self.materialize_grads = value

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        if self._saved is None:
            return tuple(self.to_save)
        return tuple(None if s is None else s.unpack(self) for s in self._saved)

    @property
    def saved_variables(self) -> tuple:
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2)
        return self.saved_tensors


class BackwardCFunction(Node, FunctionCtx):
    """Base of every ``<Name>Backward`` class: the ctx during forward, the graph node afterwards."""

    _forward_cls: type
    _builtin = False  # built-in ops print like torch's C++ nodes: <MulBackward0 object at 0x...>
    requires_grad = True

    def __repr__(self) -> str:
        if self._builtin:
            return f"<{self.name()} object at {hex(id(self))}>"
        return object.__repr__(self)  # <numbagrad.autograd.function.SquareBackward object at 0x...>, as torch

    def _release(self) -> None:
        self._saved = None
        self._freed = True

    def apply(self, *grads):
        return self._forward_cls._backward_fn()(self, *grads)

    def _apply(self, grads: list) -> list:
        """Run the user's backward on one gradient per output; return one checked gradient per input."""
        if self.materialize_grads:
            for i in range(len(grads)):  # (no loop variable bound to a gradient: see engine_owns)
                if grads[i] is None and self._output_meta[i] is not None:
                    grads[i] = _tensor._ops.zeros_like_meta(*self._output_meta[i])
        cls = self._forward_cls
        result = cls._backward_fn()(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self.next_functions)
        if len(result) != n:
            if len(result) > n and all(r is None for r in result[n:]):
                result = result[:n]
            else:
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of gradients "
                    f"(expected {n}, got {len(result)})"
                )
        out = []
        for i, r in enumerate(result):
            meta = self._input_meta[i]
            if r is None:
                out.append(None)
            elif meta is False:
                warnings.warn(
                    f"function {self.name()} returned a gradient different than None at position {i + 1}, but the "
                    "corresponding forward input was not a Tensor; it is ignored",
                    UserWarning,
                    stacklevel=2,
                )
                out.append(None)
            elif not isinstance(r, Tensor):
                raise TypeError(f"expected Variable or None (got {type(r).__name__})")
            elif self.next_functions[i][0] is None:
                out.append(None)
            else:
                out.append(validate_grad(self, i, r, meta))
        return out


def validate_grad(node: Node, i: int, grad: Tensor, meta) -> Tensor:
    """torch's ``validate_outputs``: reduce broadcast gradients, cast dtype, check shape and device."""
    shape, dtype, is_cuda = meta
    if grad._data.shape != shape:
        try:
            expandable = np.broadcast_shapes(shape, grad._data.shape) == grad._data.shape
        except ValueError:
            expandable = False
        if not expandable:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {i} - got "
                f"{shape_str(grad._data.shape)} but expected shape compatible with {shape_str(shape)}"
            )
        grad = _tensor._ops.sum_to_shape(grad, shape)
    if grad._data.dtype != dtype:
        grad = grad.to(_tensor.from_numpy_dtype(dtype))
    if grad.is_cuda != is_cuda:
        if grad.dim() == 0:
            grad = grad.to("cuda" if is_cuda else "cpu")
        else:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {i} - expected device "
                f"{'cuda:0' if is_cuda else 'cpu'} but got {grad.device}"
            )
    return grad


class FunctionMeta(type):
    """Gives every Function subclass its own backward-node class, named ``<Name>Backward``."""

    def __init__(cls, name, bases, attrs) -> None:
        node_name = attrs.get("node_name") or name + "Backward"
        builtin = bool(attrs.get("node_name"))
        cls._backward_cls = type(node_name, (BackwardCFunction,), {"_forward_cls": cls, "_builtin": builtin})
        cls._new_style = "setup_context" in _overridden(cls)
        super().__init__(name, bases, attrs)


def _overridden(cls) -> set:
    """Attribute names defined by user subclasses (above the library's own base classes)."""
    names = set()
    for klass in cls.__mro__:
        if klass.__dict__.get("_is_library_base", False) or klass is object:
            break
        names.update(klass.__dict__)
    return names


class _SingleLevelFunction(metaclass=FunctionMeta):
    _is_library_base = True

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function to use it "
            "with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with forward mode AD."
        )


class Function(_SingleLevelFunction):
    """Base class for custom differentiable operations; call them with ``MyFunction.apply(...)``.

    Subclass and define ``forward`` (old style ``forward(ctx, *args)``, or new style ``forward(*args)`` plus
    ``setup_context(ctx, inputs, output)``) and ``backward(ctx, *grad_outputs)`` (or its alias ``vjp``).
    """

    _is_library_base = True

    def __init__(self, *args, **kwargs) -> None:
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functionsare all static, so you "
            "should invoke them on the class itself. Instantiating an autograd function will raise an error in a "
            "future version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-style autograd "
            "function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @classmethod
    def _backward_fn(cls):
        """``vjp`` if overridden, else ``backward``; both overridden is torch's error (raised at backward)."""
        fn = cls.__dict__.get("_resolved_backward")
        if fn is None:
            names = _overridden(cls)
            has_vjp = "vjp" in names and cls.vjp is not cls.backward
            if "backward" in names and has_vjp:
                raise RuntimeError(
                    "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should only "
                    "implement one of them."
                )
            fn = cls.vjp if has_vjp else cls.backward
            cls._resolved_backward = fn
        return fn

    @classmethod
    def _bind(cls, args: tuple, kwargs: dict) -> tuple:
        sig = cls.__dict__.get("_signature_cache")
        if sig is None:
            sig = inspect.signature(cls.forward)
            if not cls._new_style:
                params = list(sig.parameters.values())[1:]
                sig = sig.replace(parameters=params)
            cls._signature_cache = sig
        bound = sig.bind(*args, **kwargs)
        if cls._new_style:
            bound.apply_defaults()
        if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()) and not kwargs:
            return args
        return tuple(bound.args) + tuple(bound.kwargs.values())

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` (under no-grad) and record a graph node when an input requires grad."""
        if state.tracer is not None:
            return state.tracer(cls, args, kwargs)
        if kwargs:
            args = cls._bind(args, kwargs)
        ctx = cls._backward_cls()
        needs = tuple([isinstance(a, Tensor) and a.requires_grad for a in args])
        ctx.needs_input_grad = needs
        executable = state.enabled and True in needs
        prev = state.enabled
        state.enabled = False
        try:
            if cls._new_style:
                output = cls.forward(*args)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args)
        finally:
            state.enabled = prev
        return _wrap_outputs(cls, ctx, args, output, executable)


def _contains(items, t) -> bool:
    """Identity membership (tensors compare elementwise, so ``in`` cannot be used)."""
    for item in items:
        if item is t:
            return True
    return False


def _wrap_outputs(cls, ctx, args: tuple, output, executable: bool):
    if not executable and not ctx.dirty_tensors and not ctx.non_differentiable and not isinstance(output, tuple):
        if not (isinstance(output, Tensor) and _contains(args, output)):
            return output  # the common no-graph case: nothing to link, check or wrap
    is_tuple = isinstance(output, tuple)
    outputs = list(output) if is_tuple else [output]
    dirty = ctx.dirty_tensors
    for i, d in enumerate(dirty):
        if not isinstance(d, Tensor):
            raise RuntimeError(f"mark_dirty can only accept variables, but argument {i} is of type {type(d).__name__}")
        d._bump_version()
    for nd in ctx.non_differentiable:
        if not isinstance(nd, Tensor):
            raise RuntimeError(f"mark_non_differentiable only accepts variable arguments, but got {type(nd).__name__}")
    returned_as_is = []

    if not executable:
        for i, o in enumerate(outputs):
            if isinstance(o, Tensor) and _contains(args, o) and not _contains(dirty, o):
                outputs[i] = o._view_of(o._data)
                returned_as_is.append(o)
        return tuple(outputs) if is_tuple else outputs[0]

    ctx.next_functions = tuple(edge_of(a) if isinstance(a, Tensor) else (None, 0) for a in args)
    ctx._input_meta = tuple(
        (a._data.shape, a._data.dtype, not isinstance(a._data, np.ndarray)) if isinstance(a, Tensor) else False
        for a in args
    )
    ctx._sequence_nr = next(_sequence)
    ctx._num_outputs = len(outputs)
    if state.anomaly:
        ctx._traceback = "".join(traceback.format_stack()[:-3])
    non_diff = ctx.non_differentiable
    output_meta = []
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            output_meta.append(None)
            continue
        original = o
        is_dirty = bool(dirty) and _contains(dirty, o)
        if is_dirty:
            if o.grad_fn is None and o._requires_grad:
                raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
        elif _contains(args, o):
            # "Return it as a view so that we can attach a new grad_fn" (torch)
            o = outputs[i] = o._view_of(o._data)
            returned_as_is.append(original)
        if (non_diff and _contains(non_diff, original)) or o._data.dtype.kind != "f":
            o._requires_grad = False
            if o is original and not is_dirty:
                o.grad_fn = None
        else:
            o.grad_fn = ctx
            o._output_nr = i
            o._requires_grad = False
        output_meta.append((o._data.shape, o._data.dtype, not isinstance(o._data, np.ndarray)))
    ctx._output_meta = output_meta
    for d in dirty:
        if not _contains(outputs, d):
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as output. The inputs "
                "that are modified inplace must all be outputs of the Function."
            )
    if ctx.to_save:
        saved = []
        for i, t in enumerate(ctx.to_save):
            if t is None:
                saved.append(None)
                continue
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} is of type {type(t).__name__}"
                )
            if t._is_inference:
                raise RuntimeError(
                    "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference "
                    "mode in computation tracked by autograd. To work around this, you can make a clone to get a "
                    "normal tensor and use it in autograd."
                )
            if cls._new_style and _contains(returned_as_is, t):
                raise RuntimeError(
                    "A input that has been returned as-is as output is being saved for backward. This is not "
                    "supported if you override setup_context. You should return and save a view of the input "
                    "instead, e.g. with x.view_as(x) or setup ctx inside the forward function itself."
                )
            saved.append(SavedTensor(t, ctx))
        ctx._saved = saved
        ctx.to_save = ()
    return tuple(outputs) if is_tuple else outputs[0]


class _CopyGrad(Function):
    """The copy a leaf's first gradient is stored as under ``create_graph`` (so ``.grad`` has its own storage)."""

    node_name = "CopyBackwards"

    @staticmethod
    def forward(ctx, grad):
        from ..backend import backend_for

        return Tensor._make(backend_for(grad._data).copy(grad._data))

    @staticmethod
    def backward(ctx, grad):
        return grad


class _DelayedError(Function):
    """Attached by ``once_differentiable`` when grad mode is on: differentiating again raises."""

    node_name = "Error"  # torch prints grad_fn=<Error>

    @staticmethod
    def forward(ctx, output, *grad_args):
        return output

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")


def once_differentiable(fn):
    """Decorate a ``backward`` whose body is not differentiable: it runs under no-grad, and a second
    differentiation through its outputs raises instead of giving silently wrong results."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not state.enabled:
            return outputs
        grad_args = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        if not grad_args:
            return outputs
        is_tuple = isinstance(outputs, tuple)
        wrapped = tuple(
            _DelayedError.apply(o.detach(), *grad_args) if isinstance(o, Tensor) else o
            for o in (outputs if is_tuple else (outputs,))
        )
        return wrapped if is_tuple else wrapped[0]

    return wrapper


class InplaceFunction(Function):
    """Kept for torch compatibility: a Function with an ``inplace`` flag."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class NestedIOFunction(Function):
    pass
