"""``autograd.Function``, its ctx, and the graph node they are (torch's design: the ctx *is* the node).

``Function.apply`` runs ``forward`` under no-grad, then (when some input requires grad and grad mode is on)
links the outputs to a node of class ``<Name>Backward`` whose ``next_functions`` point at the inputs' nodes.
Built-in ops are ordinary subclasses; they set ``node_name`` to torch's names (``MulBackward0``).

The hot path pays only for what a call uses: ``apply`` runs forward with grad mode off, then either links the
outputs to a node (``_link_outputs``) or returns them unlinked (a fresh tensor directly, else
``_unlinked_outputs``); each step decides the rare cases (dirty and non-differentiable outputs, inputs returned
as-is, several outputs, anomaly mode) with one cheap check before paying for them.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import re
import sys
import traceback
import warnings
import weakref

import numpy as np

from .. import _upward
from .._tensor import _BACKENDS, Tensor, _Version
from .._types import broadcast_shapes_or_none, shape_str
from .engine import accumulator_of
from .grad_mode import no_grad, state
from .graph import NOT_A_TENSOR_INPUT, GraphNode

ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
    "you need to access saved tensors after calling backward."
)

#: ``Tensor._creation_meta`` of a view made in no-grad mode (see ``_mark_no_grad_view``)
NO_GRAD_VIEW = "no_grad"

_sequence = itertools.count()  # node creation order (torch runs later nodes first among the ready)


class FunctionCtx:
    """What ``forward``/``setup_context`` use to stash state for ``backward``."""

    needs_input_grad: tuple = ()
    materialize_grads = True
    _saved = None
    _freed = False
    to_save = ()
    dirty_tensors = ()
    non_differentiable = ()
    saved_for_forward = ()
    _in_jvp = False  # while ``jvp`` runs, ``saved_tensors`` returns what ``save_for_forward`` saved

    def save_for_backward(self, *tensors) -> None:
        """Save tensors (inputs or outputs) for backward; version-checked when read back."""
        self.to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        """Save tensors for ``jvp``: inside ``jvp``, ``saved_tensors`` returns them."""
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
        """The tensors given to ``save_for_backward``, checked against in-place changes since."""
        if self._in_jvp:
            return tuple(self.saved_for_forward)
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        saved = self._saved
        if saved is None:
            return tuple(self.to_save)
        tensors = []
        for s in saved:
            if s is None:
                tensors.append(None)
                continue
            t = s.tensor
            counter = t._version_counter
            if (
                s.output_nr < 0
                and (0 if counter is None else counter.value) == s.version
                and type(t) is not PackedTensor
            ):
                tensors.append(t)  # an unchanged input: ``unpack``'s common case, inline
            else:
                tensors.append(s.unpack(self))
        return tuple(tensors)

    @property
    def saved_variables(self) -> tuple:
        """Deprecated alias of ``saved_tensors`` (warns)."""
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2)
        return self.saved_tensors


# --- saved tensors ---------------------------------------------------------------------------------------------
class SavedTensor:
    """One tensor saved for backward (made by ``saved_input``/``saved_output``): the tensor (or the
    ``PackedTensor`` standing for it under ``saved_tensors_hooks``), its version when saved, which output of the
    saving node it is (-1 for an input), and an input's own grad_fn (named in the version error).

    An output of the node that saves it is stored without its grad_fn (that would be a reference cycle
    node -> saved -> tensor -> node) and re-linked to the node when unpacked.

    ``output_ref``, for a large new output of a fast path (``saved_output_unhooked``), in host memory of its own:
    a weak reference to the output tensor. Once that tensor is gone and its storage was never handed out
    (``_tensor.expose``: numpy, ``detach()``...), the node is the storage's only reader, so a backward freeing the
    node after it ran may write a gradient there (``ops.elementwise``) instead of into new memory: at 1e5 float32
    elements, ``relu``'s gradient written over its output reads and writes one array, in half the time of writing
    a second one. A view of the output keeps it alive (``_base``), and so does a node that saved it as an input.
    An explicit rule, not a reference count: ``tests/test_view_aliasing.py`` checks that every op's result sharing
    an input's memory is such a view, ``tests/test_saved_output_reuse.py`` each way a storage is handed out."""

    __slots__ = ("tensor", "version", "output_nr", "grad_fn", "output_ref")

    def __init__(self, tensor, version: int, output_nr: int, grad_fn) -> None:
        self.tensor = tensor
        self.version = version
        self.output_nr = output_nr
        self.grad_fn = grad_fn
        self.output_ref = None

    def unchanged(self) -> bool:
        """Whether the tensor is at the version it was saved at (torch's check before backward reads it)."""
        counter = self.tensor._version_counter
        return (0 if counter is None else counter.value) == self.version

    def data(self, node):
        """The saved storage, after the version check (which raises torch's error)."""
        if self.unchanged():
            return self.tensor._data
        return self.unpack(node)._data

    def unpack(self, node) -> Tensor:
        """The tensor as backward sees it: unpacked by the saved-tensor hooks, version-checked (torch's
        "modified by an inplace operation" error), and re-linked to ``node`` when it is the node's output."""
        t = self.tensor
        if type(t) is PackedTensor:
            t = t.unpack()
            counter = None
        else:
            counter = t._version_counter
        current = 0 if counter is None else counter.value
        if current != self.version:
            # (torch names the saving node for an output, an unpacked input's grad_fn when packed, else the input's
            # grad_fn now: an in-place change may have given it a new one)
            owner = node if self.output_nr >= 0 else self.grad_fn if type(self.tensor) is PackedTensor else t.grad_fn
            _raise_modified(t, current, self.version, owner, self.output_nr)
        if self.output_nr < 0:
            return t
        node._output_exposed = True  # (the storage is read back as a tensor the caller may keep: see output_ref)
        out = Tensor._make(t._data)
        out._version_counter = counter
        out.grad_fn = node
        out._output_nr = self.output_nr
        if t._fw_grad is not None:  # an output saved inside a forward-AD level keeps its tangent (forward-over-reverse)
            out._fw_grad = t._fw_grad
        return out


_new_saved = object.__new__  # (saved_input: a SavedTensor, or an alias Tensor, without the __init__ call)


def _raise_modified(t: Tensor, current: int, version: int, owner, output_nr: int) -> None:
    which = f", which is output {max(output_nr, 0)} of {_op_name(owner.name())}," if owner is not None else ""
    hint = (
        "Hint: the backtrace further above shows the operation that failed to compute its gradient. "
        "The variable in question was changed in there or anywhere later. Good luck!"
        if state.anomaly
        else "Hint: enable anomaly detection to find the operation that failed to compute its gradient, "
        "with torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )
    # (torch names a bool tensor by its C++ type, which has no legacy tensor class: ``CPUBoolType``)
    name = t.dtype.scalar_name
    kind = f"{t.device.type.upper()}BoolType" if name == "Bool" else f"numbagrad.{name}Tensor"
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{kind} {shape_str(t.shape)}]{which} is at version {current}; expected version {version} instead. {hint}"
    )


_GENERATED_NODE = re.compile(r"(.+)Backward(\d+)")


def _op_name(node_name: str) -> str:
    """The op a node stands for, as torch's in-place version error names it: a generated node ``<Op>Backward<N>``
    by ``<Op>`` and its overload number unless 0 (``Sigmoid``, ``Sum1``), a Function's node ``<Name>Backward``
    by the Function's name, any other node by its C++ class (``torch::autograd::CopySlices``)."""
    generated = _GENERATED_NODE.fullmatch(node_name)
    if generated:
        return generated[1] if generated[2] == "0" else generated[1] + generated[2]
    if node_name.endswith("Backward"):
        return node_name[: -len("Backward")]
    return f"torch::autograd::{node_name}"


class BackwardCFunction(GraphNode, FunctionCtx):
    """Base of every ``<Name>Backward`` class: the ctx during forward, the graph node afterwards.

    As in torch, a custom Function's backward runs once its node is reached even when every incoming gradient is
    None (a downstream backward returned None): it then gets zeros (``materialize_grads``) or Nones."""

    _forward_cls: type
    _builtin = False  # built-in ops print like torch's C++ nodes: <MulBackward0 object at 0x...>
    _input_meta: tuple = ()
    _output_meta: tuple | None = None
    _runs_without_grads = True
    _output_exposed = False  # an output's storage was handed out (``_tensor.expose``; see SavedTensor.output_ref)
    requires_grad = True

    def __repr__(self) -> str:
        if self._builtin:
            return f"<{self.name()} object at {hex(id(self))}>"
        return object.__repr__(self)  # <numbagrad.autograd.function.SquareBackward object at 0x...>, as torch

    def _release(self) -> None:
        """Free the saved tensors; a node that saved none can run again (as in torch)."""
        if self._saved:
            self._saved = None
            self._freed = True

    def apply(self, *grads):
        return self._forward_cls._backward_fn()(self, *grads)

    def _apply(self, grads: list) -> list:
        """Run the user's backward on one gradient per output; return one checked gradient per input."""
        if self.materialize_grads and self._output_meta is not None:
            for i in range(len(grads)):
                if grads[i] is None and self._output_meta[i] is not None:
                    grads[i] = _zeros_for(*self._output_meta[i])
        cls = self._forward_cls
        backward = cls.__dict__.get("_resolved_backward") or cls._backward_fn()
        result = backward(self, *grads)
        return _check_grads(self, result if type(result) is tuple else (result,))


class TrustedBackward(BackwardCFunction):
    """Node of a built-in op whose backward already returns one gradient per input in the input's shape, dtype
    and device (the elementwise ops reduce broadcast gradients themselves): nothing is re-checked, and without
    any incoming gradient it does not run (its gradients would all be None)."""

    _builtin = True
    _runs_without_grads = False

    def _apply(self, grads: list) -> list:
        result = self._forward_cls.backward(self, *grads)
        return result if type(result) is tuple else (result,)


def _zeros_for(shape: tuple, np_dtype, backend) -> Tensor:
    """Zeros for a gradient that never arrived (what ``materialize_grads`` hands to backward)."""
    return Tensor._make(backend.zeros(shape, np_dtype))


def _check_grads(node: BackwardCFunction, result: tuple) -> list:
    """torch's ``validate_outputs``: one gradient per input, each a Tensor (or None) of the input's metadata."""
    n = len(node._edges)
    if len(result) != n:
        if len(result) > n and all(r is None for r in result[n:]):
            result = result[:n]
        else:
            raise RuntimeError(
                f"function {node.name()} returned an incorrect number of gradients (expected {n}, got {len(result)})"
            )
    out = []
    metas, edges = node._input_meta, node._edges
    for i, r in enumerate(result):
        meta = metas[i]
        if r is None:
            out.append(None)
        elif type(r) is Tensor and meta and edges[i][0] is not None:  # the common case: nothing to fix
            data = r._data
            if data.shape == meta[0] and data.dtype == meta[1] and _BACKENDS.get(type(data)) is meta[2]:
                out.append(r)
            else:
                out.append(validate_grad(node, i, r, meta))
        elif meta is False:
            warnings.warn(
                f"function {node.name()} returned a gradient different than None at position {i + 1}, but the "
                "corresponding forward input was not a Tensor; it is ignored",
                UserWarning,
                stacklevel=2,
            )
            out.append(None)
        elif not isinstance(r, Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
        elif node._edges[i][0] is None:  # (an input that needs no gradient: kept unchecked, as torch does, for
            out.append(r)  # the post-hooks to see; the engine sends nothing along an edge without a node)
        else:
            out.append(validate_grad(node, i, r, meta))
    return out


def _listed(node: GraphNode, i: int) -> int:
    """Argument ``i``'s position among the node's listed inputs (``next_functions``), which torch's errors name."""
    return sum(1 for e in node._edges[:i] if e is not NOT_A_TENSOR_INPUT)


def validate_grad(node: GraphNode, i: int, grad: Tensor, meta) -> Tensor:
    """Reduce a broadcast gradient to the input's shape, cast its dtype, check shape and device."""
    shape, dtype, backend = meta
    data = grad._data
    if data.shape != shape:
        if broadcast_shapes_or_none(shape, data.shape) != data.shape:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {_listed(node, i)} - got "
                f"{shape_str(data.shape)} "
                f"but expected shape compatible with {shape_str(shape)}"
            )
        grad = grad.sum_to_size(shape)
    if grad._data.dtype != dtype:
        if grad._data.dtype.kind == "c" and dtype.kind != "c":  # a real input's gradient is the real part
            grad = grad.real
        grad = grad.to(dtype)
    if grad._backend is not backend:
        if grad.dim() == 0:
            grad = grad.to(backend.DEVICE)
        else:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {_listed(node, i)} - expected device "
                f"{backend.DEVICE} but got {grad.device}"
            )
    return grad


# --- Function -----------------------------------------------------------------------------------------------
#: While a ``numbagrad.func.vmap`` runs: ``batch(cls, args, kwargs)``, which runs a Function applied to batched
#: tensors (NotImplemented when none is batched); None otherwise.
BATCHING: list = [None]


class FunctionMeta(type):
    """Gives every Function subclass its own backward-node class, named ``<Name>Backward`` (or ``node_name``)."""

    def __init__(cls, name, bases, attrs) -> None:
        super().__init__(name, bases, attrs)
        node_name = attrs.get("node_name") or name + "Backward"
        base = TrustedBackward if getattr(cls, "_trusted", False) else BackwardCFunction
        builtin = bool(attrs.get("node_name")) or base is TrustedBackward
        node_attrs = {"_forward_cls": cls, "_builtin": builtin, **getattr(cls, "_node_defaults", {})}
        cls._backward_cls = type(node_name, (base,), node_attrs)
        cls._new_style = "setup_context" in _overridden(cls)
        # setup_context receives forward's default arguments too, so a new-style forward with defaults binds
        cls._binds_defaults = cls._new_style and any(
            p.default is not p.empty for p in inspect.signature(cls.forward).parameters.values()
        )


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
        """Compute the outputs from the inputs; override it in a subclass.

        Old style ``forward(ctx, *args)``; new style ``forward(*args)`` with ``setup_context``. It runs under no-grad.
        """
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """New-style hook: save what backward needs on ``ctx`` from ``inputs`` and ``output``."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Return one gradient per ``forward`` input (``None`` for non-tensors) given the outputs' gradients.

        Override it (or its alias ``vjp``) in a subclass.
        """
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function to use it "
            "with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Forward-mode derivative: one tangent per ``forward`` input (zeros for a tensor without one, None for a
        non-tensor) in, one tangent per output out. Override it to use the Function with forward-mode AD."""
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with forward mode AD."
        )


class Function(_SingleLevelFunction):
    """Base class for custom differentiable operations; call them with ``MyFunction.apply(...)``.

    Subclass and define ``forward`` (old style ``forward(ctx, *args)``, or new style ``forward(*args)`` plus
    ``setup_context(ctx, inputs, output)``) and ``backward(ctx, *grad_outputs)`` (or its alias ``vjp``).
    Built-in ops set ``_trusted = True`` when their backward returns gradients that need no checking.
    """

    _is_library_base = True
    _trusted = False
    #: A built-in op may set this to a classmethod ``(args, state) -> output or None`` that does the whole call
    #: (forward and the node ``_link_outputs`` would make, identically) for the cases it recognises; ``None``
    #: sends the call down the general path.
    _fast_apply = None
    #: True for a built-in op whose forward applies no other Function, marks nothing dirty or non-differentiable
    #: and returns one new tensor (a reduction, a view): it runs without switching grad mode off and is linked
    #: by ``_apply_simple``.
    _simple = False
    #: Positions of forward arguments that ``next_functions`` lists even when they are not tensors (``edges_of``):
    #: an absent optional tensor (a bias), a Python number that torch wraps as a tensor (``x * 2``).
    _listed_inputs: tuple = ()
    #: Positions of tensor arguments that ``next_functions`` does not list when they need no gradient: tensors
    #: torch's node does not differentiate (batch norm's running statistics).
    _unlisted_inputs: tuple = ()
    #: Whether ``next_functions`` lists a tensor argument of an integral or bool dtype: None (the default) for
    #: yes in a custom Function and no in a built-in op (an index, a class target, a condition); elementwise ops
    #: set True (torch lists ``mask`` in ``x * mask``).
    _lists_integral_inputs: bool | None = None

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
        """Keyword arguments to positions, as forward's signature orders them (defaults filled for new style)."""
        sig = cls.__dict__.get("_signature_cache")
        if sig is None:
            sig = inspect.signature(cls.forward)
            if not cls._new_style:
                sig = sig.replace(parameters=list(sig.parameters.values())[1:])
            cls._signature_cache = sig
        bound = sig.bind(*args, **kwargs)
        if cls._new_style:
            bound.apply_defaults()
        if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()) and not kwargs:
            return args
        return tuple(bound.args) + tuple(bound.kwargs.values())

    #: A Function under ``vmap``: True runs its forward, setup_context and backward as written, once over the batch
    #: on batched tensors (as torch); a ``vmap`` staticmethod ``vmap(info, in_dims, *args) -> (outputs, out_dims)``
    #: batches it instead.
    generate_vmap_rule = False

    @staticmethod
    def vmap(info, in_dims, *args):
        """How this Function runs under ``numbagrad.func.vmap``: override it, or set ``generate_vmap_rule``."""
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap staticmethod or set "
            "generate_vmap_rule=True."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` (under no-grad) and record a graph node when an input requires grad."""
        if BATCHING[0] is not None:  # a vmap is running: a call with batched tensors is batched there
            result = BATCHING[0](cls, args, kwargs)
            if result is not NotImplemented:
                return result
        st = state
        fast = st.fast  # (no tracer, anomaly, inference or saved-tensor hooks: one thread-local read, not three)
        if not fast and st.tracer is not None:
            return st.tracer(cls, args, kwargs)
        if cls._fast_apply is not None and not kwargs:  # a built-in op's common case, decided by cheap checks
            result = cls._fast_apply(args, st)
            if result is not None:
                return result
        if cls._simple and not kwargs and (fast or not (st.anomaly or st.inference)):
            return _apply_simple(cls, args, st)
        if kwargs or cls._binds_defaults:
            args = cls._bind(args, kwargs)
        return _apply_general(cls, cls._backward_cls(), args, st)


def _apply_general(cls, ctx, args: tuple, st):
    """``apply``'s general path with its ctx made by the caller (forward mode reads the ctx afterwards)."""
    needs = []
    for a in args:  # (a loop: a comprehension costs a frame per call)
        needs.append(isinstance(a, Tensor) and (a._requires_grad or a.grad_fn is not None))
    needs = ctx.needs_input_grad = tuple(needs)
    # this thread's fields as a dict: its reads and writes skip the thread-local lookup each attribute access
    # costs (enabled and in_forward are plain fields: no ``_Guarded`` setter to bypass)
    modes = st.__dict__
    if modes["enabled"]:
        outer = modes["in_forward"]
        modes["enabled"] = False
        modes["in_forward"] = True  # (views made inside are not the user's no-grad views)
        try:
            output = cls.forward(ctx, *args) if not cls._new_style else _forward_new_style(cls, ctx, args)
        finally:
            modes["enabled"] = True
            modes["in_forward"] = outer
        if True in needs:
            return _link_outputs(cls, ctx, args, output)
    else:
        output = cls.forward(ctx, *args) if not cls._new_style else _forward_new_style(cls, ctx, args)
        if not (st.inference or st.in_forward) and (type(output) is not Tensor or output._base is not None):
            _mark_views(output, args, NO_GRAD_VIEW)
    if not ctx._builtin:  # torch marks every view a custom Function returns, graph or not
        _mark_views(output, args, "custom_function")
    if type(output) is Tensor and not (ctx.dirty_tensors or ctx.non_differentiable or st.inference):
        for a in args:
            if a is output:  # an input returned as-is comes back as a new view of it
                return output._view_of(output._data)
        return output
    return _unlinked_outputs(ctx, args, output, st)


def _apply_simple(cls, args: tuple, st):
    """``apply`` for a ``_simple`` built-in op: forward, then the node when an input requires grad."""
    ctx = cls._backward_cls()
    needs = []
    grad = False
    for a in args:
        if isinstance(a, Tensor) and (a._requires_grad or a.grad_fn is not None):
            needs.append(True)
            grad = True
        else:
            needs.append(False)
    ctx.needs_input_grad = tuple(needs)
    output = cls.forward(ctx, *args)
    if grad and st.enabled and output._data.dtype.kind in "fcV":
        make_node(ctx, edges_of(args, cls), output)
        if ctx.to_save:
            _save_tensors(cls, ctx, ())
    elif not (st.enabled or st.in_forward) and output._base is not None:
        _mark_view(output, NO_GRAD_VIEW)
    return output


def _mark_view(view: Tensor, meta: str) -> None:
    """Record how a view without history was made (``Tensor._creation_meta``): in no-grad mode, or by a custom
    Function. torch refuses to change such a view in place in a way that needs a graph (``ops.inplace`` checks the
    mark), and it requires grad when its base does; with neither history nor an accumulator of its own, a gradient
    that flows into it is dropped (the engine skips it)."""
    view._creation_meta = meta
    base = view._base
    if base._requires_grad or base.grad_fn is not None:
        view._requires_grad = True


def _mark_views(output, args: tuple, meta: str) -> None:
    """``_mark_view`` for each view among ``output`` that is not one of the inputs."""
    for o in output if type(output) is tuple else (output,):
        if isinstance(o, Tensor) and o._base is not None and o.grad_fn is None and not _contains(args, o):
            _mark_view(o, meta)


def _forward_new_style(cls, ctx, args: tuple):
    output = cls.forward(*args)
    cls.setup_context(ctx, args, output)
    return output


def _contains(items, t) -> bool:
    """Identity membership (tensors compare elementwise, so ``in`` cannot be used)."""
    for item in items:
        if item is t:
            return True
    return False


def _check_marks(ctx) -> None:
    for i, d in enumerate(ctx.dirty_tensors):
        if not isinstance(d, Tensor):
            raise RuntimeError(f"mark_dirty can only accept variables, but argument {i} is of type {type(d).__name__}")
    for nd in ctx.non_differentiable:
        if not isinstance(nd, Tensor):
            raise RuntimeError(f"mark_non_differentiable only accepts variable arguments, but got {type(nd).__name__}")


def _unlinked_outputs(ctx, args: tuple, output, st):
    """No graph node: bump dirty inputs' versions, and return an input returned as-is as a new view of it."""
    if ctx.dirty_tensors or ctx.non_differentiable:
        _check_marks(ctx)
        for d in ctx.dirty_tensors:
            d._bump_version()
    if type(output) is tuple:
        outputs = list(output)
        for i, o in enumerate(outputs):
            outputs[i] = _fresh_output(o, args, ctx, st)
        return tuple(outputs)
    return _fresh_output(output, args, ctx, st)


def _fresh_output(o, args: tuple, ctx, st):
    if isinstance(o, Tensor):
        if _contains(args, o) and not _contains(ctx.dirty_tensors, o):
            return o._view_of(o._data)
        if st.inference:
            o._is_inference = True
    return o


_NO_EDGE = (None, 0)


def edges_of(args, cls) -> tuple:
    """The edge each argument of ``cls``'s forward hands its gradient to: its grad_fn slot, its leaf's accumulator,
    none, or ``NOT_A_TENSOR_INPUT`` where torch lists no input (``next_functions``): an argument that is not a
    tensor (but at one of ``cls._listed_inputs``: an absent bias, a wrapped number), a tensor that needs no
    gradient at one of ``cls._unlisted_inputs``, and one of an integral or bool dtype that ``cls`` does not list
    (``_lists_integral_inputs``: a built-in op lists them only as an elementwise operand, not as an index, a class
    target or a condition; a custom Function lists every tensor)."""
    edges = []
    for a in args:
        if isinstance(a, Tensor):
            fn = a.grad_fn
            if fn is not None:
                edges.append((fn, a._output_nr))
            elif a._requires_grad:
                edges.append((accumulator_of(a), 0))
            elif a._data.dtype.kind in "fcV" or _lists_integral_inputs(cls):
                edges.append(_NO_EDGE)
            else:
                edges.append(NOT_A_TENSOR_INPUT)
        else:
            edges.append(NOT_A_TENSOR_INPUT)
    if cls._listed_inputs or cls._unlisted_inputs:  # (positions the class names: set after the common loop)
        n = len(args)
        for k in cls._listed_inputs:
            if k < n and not isinstance(args[k], Tensor):
                edges[k] = _NO_EDGE
        for k in cls._unlisted_inputs:
            if k < n and edges[k] is _NO_EDGE:
                edges[k] = NOT_A_TENSOR_INPUT
    return tuple(edges)


def _lists_integral_inputs(cls) -> bool:
    """``cls._lists_integral_inputs``, its default (None) read as: a custom Function lists them, a built-in op not."""
    listed = cls._lists_integral_inputs
    return not cls._backward_cls._builtin if listed is None else listed


def edge_of(t: Tensor) -> tuple:
    """``edges_of`` for one tensor (a reduction's single input)."""
    fn = t.grad_fn
    if fn is not None:
        return fn, t._output_nr
    return (accumulator_of(t), 0) if t._requires_grad else _NO_EDGE


def make_node(ctx: GraphNode, edges: tuple, output=None) -> None:
    """Make ``ctx`` a node of the graph: its edges (``edges_of`` its inputs) and its creation order (among ready
    nodes the engine runs the latest first); then link ``output`` to it: one new tensor of a differentiable dtype
    (output 0; the callers know its dtype, the fast paths without a check) or a list of them (output i each,
    those of a differentiable dtype), each getting it as grad_fn. Every node is made here (tests/test_layout.py
    checks that nothing else assigns ``next_functions``), so a fast path cannot skip what the general path
    records. What only the general path records is its own (``_link_outputs``: anomaly mode's forward stack, a
    custom Function's view marks): the fast paths refuse those cases. Kept to a few stores, as it runs once per
    recorded op."""
    ctx._edges = edges
    ctx._sequence_nr = next(_sequence)
    if output is None:
        return
    if type(output) is not list:
        output.grad_fn = ctx
        return
    ctx._num_outputs = len(output)
    for i, o in enumerate(output):
        if o._data.dtype.kind in "fcV":
            o.grad_fn = ctx
            o._output_nr = i


def releasing(attr: str) -> dict:
    """``_node_defaults`` for a Function whose forward keeps arrays on ``ctx.<attr>`` beside its saved tensors: the
    engine's release of the node's saved tensors (after a backward without ``retain_graph``) drops them too. Torch
    frees a node's saved values then; arrays held until the graph dies would outlive the backward (through the
    optimizer step and, while the loss is referenced, the next forward)."""

    def _release(self) -> None:
        BackwardCFunction._release(self)
        if self._freed:
            setattr(self, attr, None)

    return {"_release": _release}


def _forward_stack() -> str:
    """The stack that called into this module (its own frames left out): what anomaly mode shows for a node."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return "".join(traceback.format_stack(frame))


def may_skip_apply(st) -> bool:
    """Whether a frontend may call an op's fast path instead of ``apply``: only while nothing records op calls
    through ``apply`` (a compile tracer, a forward-AD level or the profiler, ``state.tracer``). The elementwise
    fast paths (``_fast_apply``, ``_fast_one``, ``_fast_pair``) need not be asked: they run only under
    ``state.fast``, which is False while a tracer is set."""
    return st.tracer is None


def saved_input(t: Tensor) -> SavedTensor:
    """What saving an input for backward records: the tensor, its version now, and its own grad_fn (packed by the
    innermost saved-tensor hooks when some are active)."""
    if state.saved_hooks is not None:
        return SavedTensor(PackedTensor(t), 0, -1, t.grad_fn)
    return saved_input_unhooked(t)


def saved_input_unhooked(t: Tensor) -> SavedTensor:
    """``saved_input`` for a fast path, which runs only while no saved-tensor hooks are active (``state.fast``):
    the same entry without reading the hooks (a thread-local read costs as much as the four stores). Filled in
    here rather than by ``SavedTensor(...)``: an ``__init__`` call costs more than the four stores."""
    counter = t._version_counter
    s = _new_saved(SavedTensor)
    s.tensor = t
    s.version = 0 if counter is None else counter.value
    s.output_nr = -1
    s.grad_fn = t.grad_fn
    return s


def saved_output_unhooked(t: Tensor) -> SavedTensor:
    """``saved_output`` for a fast path (``state.fast``: no saved-tensor hooks), as ``saved_input_unhooked``; the
    alias and the version counter are made inline (``Tensor._make``, ``_shared_version``), without two calls.
    ``t`` is a new result in storage of its own, so a large one keeps its ``output_ref``."""
    counter = t._version_counter
    if counter is None:
        counter = t._version_counter = _Version()
    data = t._data
    detached = _new_saved(Tensor)
    detached._data = data
    detached._version_counter = counter
    s = _new_saved(SavedTensor)
    s.tensor = detached
    s.version = counter.value
    s.output_nr = t._output_nr
    s.grad_fn = None
    s.output_ref = _output_ref(t) if data.size >= SPARE_OUTPUT_MIN_SIZE else None
    return s


#: the size from which a fast path's output keeps a weak reference to itself (``SavedTensor.output_ref``): below
#: it, a new gradient buffer costs no more than writing over the output
SPARE_OUTPUT_MIN_SIZE = 16384


def _output_ref(t: Tensor):
    """A weak reference to ``t`` when its storage is a whole host array of its own (see SavedTensor.output_ref)."""
    data = t._data
    if type(data) is np.ndarray and data.base is None and t._base is None:
        return weakref.ref(t)
    return None


def saved_output(t: Tensor) -> SavedTensor:
    """What saving the node's own output records: a detached alias (no node -> tensor -> node cycle) sharing its
    version counter, re-linked to the node when unpacked."""
    counter = t._shared_version()
    detached = Tensor._make(t._data)
    detached._version_counter = counter
    if state.saved_hooks is not None:
        return SavedTensor(PackedTensor(detached), 0, t._output_nr, None)
    s = _new_saved(SavedTensor)  # (see saved_input)
    s.tensor = detached
    s.version = counter.value
    s.output_nr = t._output_nr
    s.grad_fn = None
    s.output_ref = None  # (an output of an in-place op may be storage the caller shares: never written over)
    return s


class PackedTensor:
    """A tensor saved for backward while ``saved_tensors_hooks`` are active: the pack hook's result, unpacked
    (by the unpack hook) whenever backward reads it. It stands where the tensor would in a saved entry, so every
    node, built-in or custom, reads it the same way: ``_data`` unpacks. As in torch, what the hooks hand back is
    not version-checked (it has no version counter, and its ``SavedTensor`` records version 0)."""

    __slots__ = ("_packed", "_unpack")
    grad_fn = None
    _version_counter = None

    def __init__(self, t: Tensor) -> None:
        hooks = state.saved_hooks
        pack, self._unpack = hooks[-1]
        state.saved_hooks = None  # what the pack hook itself computes is saved as usual (torch: no recursion)
        try:
            self._packed = pack(t)
        finally:
            state.saved_hooks = hooks

    def unpack(self) -> Tensor:
        t = self._unpack(self._packed)
        if not isinstance(t, Tensor):
            raise TypeError(
                f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type {type(t).__name__}"
            )
        return t

    @property
    def _data(self):
        return self.unpack()._data


def _link_outputs(cls, ctx, args: tuple, output):
    """Make ``ctx`` the outputs' grad_fn: its edges, its sequence number, and what it saved."""
    fresh = type(output) is Tensor and output.grad_fn is None  # the common case: one new tensor
    for a in args:
        if a is output:
            fresh = False
    simple = fresh and not (ctx.dirty_tensors or ctx.non_differentiable)
    linked = simple and output._data.dtype.kind in "fcV"
    make_node(ctx, edges_of(args, cls), output if linked else None)
    if linked and not ctx._builtin and output._base is not None:
        output._creation_meta = "custom_function"  # torch refuses in-place changes of it (ops.inplace)
    if state.anomaly:
        ctx._traceback = _forward_stack()
    if not cls._trusted:  # what ``validate_grad`` checks each returned gradient against
        meta = []
        for a in args:  # (a loop: a comprehension costs a frame per call)
            meta.append((a._data.shape, a._data.dtype, a._backend) if isinstance(a, Tensor) else False)
        ctx._input_meta = tuple(meta)
    if simple:
        if not cls._trusted:  # what materialize_grads makes zeros of
            ctx._output_meta = ((output._data.shape, output._data.dtype, output._backend),)
        returned_as_is = ()
    else:
        output, returned_as_is = _link_general(ctx, args, output)
    if ctx.to_save:
        _save_tensors(cls, ctx, returned_as_is)
    return output


def _link_general(ctx, args: tuple, output) -> tuple:
    """Several outputs, non-tensor outputs, dirty or non-differentiable outputs, inputs returned as-is."""
    _check_marks(ctx)
    dirty, non_diff = ctx.dirty_tensors, ctx.non_differentiable
    for d in dirty:
        if not _contains(args, d):
            warnings.warn(
                "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have been mutated "
                "should be passed to ctx.mark_dirty().",
                UserWarning,
                stacklevel=4,
            )
        d._bump_version()
    is_tuple = type(output) is tuple
    outputs = list(output) if is_tuple else [output]
    ctx._num_outputs = len(outputs)
    returned_as_is = []
    meta = []
    dirty_views = []
    retained = []
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            meta.append(None)
            continue
        original = o
        is_dirty = bool(dirty) and _contains(dirty, o)
        if is_dirty:
            if o.grad_fn is None and o._requires_grad:
                raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
            if o._base is not None and o._creation_meta is not None:
                _upward.ops.inplace.check_view_change(o)  # (how the view was made may forbid changing it)
            base = o._base
            if base is not None and base.grad_fn is None and base._requires_grad:  # (torch's check_inplace)
                raise RuntimeError(
                    "a view of a leaf Variable that requires grad is being used in an in-place operation."
                )
        elif _contains(args, o) or (o.grad_fn is not None and o.grad_fn is not ctx):
            # (a tensor returned twice is the same object twice, as in torch: its last position is its output_nr)
            # "Return it as a view so that we can attach a new grad_fn" (torch)
            o = outputs[i] = o._view_of(o._data)
            returned_as_is.append(original)
        if (non_diff and _contains(non_diff, original)) or o._data.dtype.kind not in "fcV":
            if is_dirty:
                o.grad_fn, o._requires_grad = None, False
        else:
            if is_dirty and o._retains_grad:  # its retained gradient comes from ctx now (ops.inplace)
                retained.append((o, o.grad_fn, o._output_nr))
            o.grad_fn = ctx
            o._output_nr = i
            o._requires_grad = False
            if o._base is not None and not ctx._builtin:
                if is_dirty:  # the base's history must take the change in (torch's CopySlices)
                    dirty_views.append(o)
                else:
                    o._creation_meta = "custom_function"  # torch refuses in-place changes of it (ops.inplace)
        meta.append((o._data.shape, o._data.dtype, o._backend))
    for t, old_fn, old_nr in retained:
        _upward.ops.inplace.move_retained_grad(t, old_fn, old_nr)
    for view in dirty_views:
        _upward.ops.inplace.rebase_onto_view(view)
    for d in dirty:
        if d._base is None and d._views:  # a changed base: its views follow its new history (ops.inplace)
            _upward.ops.inplace.regenerate_after_write(d)
    ctx._output_meta = meta
    for d in dirty:
        if not _contains(outputs, d):
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as output. The inputs "
                "that are modified inplace must all be outputs of the Function."
            )
    return (tuple(outputs) if is_tuple else outputs[0]), returned_as_is


def _save_tensors(cls, ctx, returned_as_is) -> None:
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
                "normal tensor and use it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`."
            )
        if returned_as_is and cls._new_style and _contains(returned_as_is, t):
            raise RuntimeError(
                "A input that has been returned as-is as output is being saved for backward. This is not "
                "supported if you override setup_context. You should return and save a view of the input "
                "instead, e.g. with x.view_as(x) or setup ctx inside the forward function itself."
            )
        saved.append(saved_output(t) if t.grad_fn is ctx else saved_input(t))
    ctx._saved = saved
    ctx.to_save = ()


# --- helpers built on Function ------------------------------------------------------------------------------
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
    """Kept for torch compatibility (a legacy Function base); behaves as ``Function``."""

    pass
