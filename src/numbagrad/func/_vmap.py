"""``vmap``: a function run once over a whole batch, as torch.func's.

A tensor mapped over is a ``BatchedTensor``: a Tensor whose storage is another tensor (its *value*) with the batch
dim moved to the front, tagged with the vmap *level* it belongs to. It shows the user its per-sample (logical)
shape. Nested vmaps nest the wrappers: the value of a level-2 tensor may itself be batched at level 1.

While a vmap runs, every declared op, every ``nn.functional`` function, ``Function.apply`` and ``autograd.grad``
hand calls that carry batched tensors here (``ops._registry.BATCHING`` and its twins). An op with a batching rule
runs once on the values (elementwise ops align the batch dims and broadcast, reductions and view ops shift their
dims by one, matmul and linear broadcast over the batch); any other op runs once per sample on slices of the values
and its results are stacked, which is slower but right for every op. Gradients inside vmap (``vmap(grad(f))``)
are taken through the values: samples never mix, so the gradient of the summed batch is each sample's gradient.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import math
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from .. import ops
from .._tensor import Tensor
from .._types import Size, wrap_dim
from ..autograd import engine as _engine
from ..autograd import forward_ad
from ..autograd import function as _function
from ..autograd.gradcheck import BATCHED_VJPS
from ..nn import functional as F
from ..ops import _registry
from ..ops.creation import _rng
from ..ops.elementwise import CLASSES
from ..scalar_math import ROWS
from . import _depth

__all__ = [
    "BatchedTensor",
    "VmapInfo",
    "batched_alias",
    "forward_mode",
    "only_vmaps_running",
    "reaches_user_leaf",
    "spread",
    "transform_leaf",
    "unwrap_levels",
    "vmap",
    "wrap_levels",
]


class VmapInfo(NamedTuple):
    """What a Function's ``vmap`` staticmethod is told about the vmap it runs under."""

    batch_size: int
    randomness: str


class _Level:
    """One running vmap: its batch size and randomness mode; ``id`` orders nested levels (outer first)."""

    _ids = itertools.count(1)

    def __init__(self, size: int, randomness: str) -> None:
        self.id = next(_Level._ids)
        self.size = size
        self.randomness = randomness


class _Stack(threading.local):
    def __init__(self) -> None:
        self.levels: list[_Level] = []
        #: how many levels ran when ``numbagrad.func``'s forward mode (jvp, jacfwd) began; None outside it
        self.forward_mode_from: int | None = None


_stack = _Stack()
_hooks_lock = threading.Lock()
_running = [0]  # vmaps running in all threads: the hooks stay installed while any runs


def _install() -> None:
    with _hooks_lock:
        _running[0] += 1
        if _running[0] == 1:
            _registry.BATCHING[0] = _dispatch
            _function.BATCHING[0] = _dispatch_function
            _engine.BATCHING[0] = _dispatch_grad


def _uninstall() -> None:
    with _hooks_lock:
        _running[0] -= 1
        if _running[0] == 0:
            _registry.BATCHING[0] = _function.BATCHING[0] = _engine.BATCHING[0] = None


# --- errors --------------------------------------------------------------------------------------------------
_RANDOM_ERROR = (
    "vmap: called random operation while in randomness error mode. Please either use the 'same' or 'different' "
    "randomness flags on vmap or perform the randomness operation out of vmap"
)
_ITEM_ERROR = (
    "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() on a "
    "Tensor, please try to rewrite what you're doing with other operations. If error is occurring somewhere "
    "inside PyTorch internals, please file a bug report."
)
_CONTROL_FLOW_ERROR = (
    "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. We don't support "
    "that yet, please file an issue at https://github.com/pytorch/pytorch/issues ."
)
_INPLACE_ERROR = (
    "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other` in "
    "extra_args that has more elements than `self`. This happened due to `other` being vmapped over but `self` not "
    "being vmapped over in a vmap. Please try to use out-of-place operators instead of inplace arithmetic. If said "
    "operator is being called inside the PyTorch framework, please file a bug report instead."
)
_STORAGE_ERROR = (
    "vmap: this operation reads the storage of a batched tensor directly and cannot run under vmap; please run it "
    "outside vmap"
)


# --- the batched tensor --------------------------------------------------------------------------------------
class BatchedTensor(Tensor):
    """A tensor inside ``vmap``: per-sample (logical) shape outside, the whole batch in ``_value`` (batch dim 0)."""

    _value: Tensor
    _level: _Level

    @property
    def _data(self):
        """The storage holds the whole batch: code that reads it directly would see the wrong shape."""
        raise RuntimeError(_STORAGE_ERROR)

    @property
    def shape(self) -> Size:
        return Size(self._value.shape[1:])

    def size(self, dim: int | None = None):
        shape = self.shape
        return shape if dim is None else shape[wrap_dim(dim, len(shape))]

    def dim(self) -> int:
        return self._value.dim() - 1

    def stride(self, dim: int | None = None):
        """Per-sample strides: the batch's, less its batch dim (what a layout rule, such as which path torch's
        matmul or attention takes, reads of a sample)."""
        strides = self._value.stride()[1:]
        return strides if dim is None else strides[wrap_dim(dim, len(strides))]

    @property
    def ndim(self) -> int:
        return self._value.dim() - 1

    def numel(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(ops.unbind(self, 0))

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def device(self):
        return self._value.device

    @property
    def is_cuda(self) -> bool:
        return self._value.is_cuda

    @property
    def is_cpu(self) -> bool:
        return self._value.is_cpu

    def is_floating_point(self) -> bool:
        return self._value.is_floating_point()

    def element_size(self) -> int:
        return self._value.element_size()

    @property
    def _backend(self):
        return self._value._backend

    @property
    def _version(self) -> int:
        return self._value._version

    # autograd metadata lives on the value: the graph is recorded there
    @property
    def requires_grad(self) -> bool:
        return self._value.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._value.requires_grad = value

    @property
    def _requires_grad(self) -> bool:
        return self._value._requires_grad

    @property
    def grad_fn(self):
        return self._value.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._value.is_leaf

    @property
    def grad(self):
        return None

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self._value.requires_grad_(requires_grad)
        return self

    def detach(self) -> Tensor:
        return _wrap(self._value.detach(), self._level)

    def detach_(self) -> Tensor:
        self._value.detach_()
        return self

    @property
    def data(self) -> Tensor:
        return _wrap(self._value.data, self._level)

    # values that would leave the batch
    def item(self):
        raise RuntimeError(_ITEM_ERROR)

    def tolist(self):
        raise RuntimeError(_ITEM_ERROR)

    def numpy(self, *, force: bool = False):
        raise RuntimeError(_STORAGE_ERROR)

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError(_STORAGE_ERROR)

    def __bool__(self) -> bool:
        raise RuntimeError(_CONTROL_FLOW_ERROR)

    def __float__(self) -> float:
        raise RuntimeError(_ITEM_ERROR)

    def __int__(self) -> int:
        raise RuntimeError(_ITEM_ERROR)

    def __index__(self) -> int:
        raise RuntimeError(_ITEM_ERROR)

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        inner = "\n".join("    " + line for line in repr(self._value).splitlines())
        return f"BatchedTensor(lvl={self._level.id}, bdim=0, value=\n{inner}\n)"

    # the properties the ops module attaches to Tensor, on logical dims
    @property
    def T(self) -> Tensor:
        return ops.permute(self, tuple(reversed(range(self.dim()))))

    @property
    def mT(self) -> Tensor:
        return ops.transpose(self, -2, -1)

    @property
    def H(self) -> Tensor:
        return ops.permute(self, tuple(reversed(range(self.dim())))).conj()

    @property
    def mH(self) -> Tensor:
        return ops.transpose(self, -2, -1).conj()


def _wrap(value: Tensor, level: _Level) -> BatchedTensor:
    t = object.__new__(BatchedTensor)
    t._value = value
    t._level = level
    return t


def _is_at(t, level: _Level) -> bool:
    return type(t) is BatchedTensor and t._level is level


def _value(t, level: _Level):
    """The batch of ``t`` at ``level`` (batch dim 0), or ``t`` itself when it is not batched there."""
    return t._value if type(t) is BatchedTensor and t._level is level else t


def _top_level(tree, best: _Level | None = None) -> _Level | None:
    """The innermost level any tensor in ``tree`` (tuples, lists, dicts) is batched at."""
    if type(tree) is BatchedTensor:
        return tree._level if best is None or tree._level.id > best.id else best
    if isinstance(tree, (tuple, list)):
        for item in tree:
            best = _top_level(item, best)
    elif isinstance(tree, dict):
        for item in tree.values():
            best = _top_level(item, best)
    return best


def _map_tree(fn, tree):
    """``tree`` with ``fn`` applied to each tensor (tuples, namedtuples, lists and dicts rebuilt)."""
    if isinstance(tree, Tensor):
        return fn(tree)
    if isinstance(tree, tuple):
        items = [_map_tree(fn, x) for x in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if isinstance(tree, list):
        return [_map_tree(fn, x) for x in tree]
    if isinstance(tree, dict):
        return {k: _map_tree(fn, v) for k, v in tree.items()}
    return tree


def _wrap_tree(tree, level: _Level):
    return _map_tree(lambda t: _wrap(t, level), tree)


def _expand_to(t: Tensor, level: _Level) -> Tensor:
    """A batch at ``level`` of ``t``: its value, or ``t`` broadcast over the batch."""
    if _is_at(t, level):
        return t._value
    return t.unsqueeze(0).expand(level.size, *t.shape)


# --- dispatch --------------------------------------------------------------------------------------------------
def _dispatch(name: str, op: Callable, fn: Callable, args: tuple, kwargs: dict):
    """A declared op (or ``nn.functional`` function) called while a vmap runs."""
    if name in _RANDOM:
        return _random_call(op, fn, args, kwargs)
    level = _top_level(args)
    if kwargs:
        level = _top_level(kwargs, level)
    if level is None:
        return fn(*args, **kwargs)
    rule = _RULES.get(name)
    if rule is not None:
        result = rule(level, op, args, kwargs)
        if result is not NotImplemented:
            return result
    if name.endswith("_") and not name.endswith("__") or name.startswith("__i") or name in _INPLACE_NAMES:
        if not args or not _is_at(args[0], level):
            raise RuntimeError(_INPLACE_ERROR)
    return _per_sample(level, op, args, kwargs)


def _slice(tree, level: _Level, b: int):
    return _map_tree(lambda t: t._value[b] if _is_at(t, level) else t, tree)


def _per_sample(level: _Level, op: Callable, args: tuple, kwargs: dict):
    """The fallback: ``op`` once per sample on slices of the batches, the results stacked into a batch again."""
    if level.size == 0:
        raise RuntimeError("vmap: this operation has no batching rule and cannot run over a batch of size 0")
    outs, firsts = [], []
    for b in range(level.size):
        sample_args = _slice(args, level, b)
        firsts.append(sample_args[0] if sample_args else None)
        outs.append(op(*sample_args, **_slice(kwargs, level, b)))
    if args and all(o is f for o, f in zip(outs, firsts)) and isinstance(outs[0], Tensor):
        return args[0]  # an in-place op: the slices were written, the batch is the result
    return _stack_samples(outs, level)


def _stack_samples(outs: list, level: _Level):
    first = outs[0]
    if isinstance(first, Tensor):
        return _wrap(ops.stack(outs), level)
    if first is None:
        return None
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*[_stack_samples([o[i] for o in outs], level) for i in range(len(first))])
    if isinstance(first, (tuple, list)) and any(isinstance(x, Tensor) for x in first):
        return type(first)(_stack_samples([o[i] for o in outs], level) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _stack_samples([o[k] for o in outs], level) for k in first}
    if any(o != first for o in outs[1:]):
        raise RuntimeError(_CONTROL_FLOW_ERROR)
    return first


# --- randomness ------------------------------------------------------------------------------------------------
def _random_call(op: Callable, fn: Callable, args: tuple, kwargs: dict):
    """A random op under vmap: 'error' refuses draws; 'different' draws per sample; 'same' one draw for all."""
    levels = list(_stack.levels)
    if any(level.randomness == "error" for level in levels):
        before = _rng[0].bit_generator.state
        result = _random_at(levels, op, fn, args, kwargs)
        if _rng[0].bit_generator.state != before:
            _rng[0].bit_generator.state = before
            raise RuntimeError(_RANDOM_ERROR)
        return result
    return _random_at(levels, op, fn, args, kwargs)


def _random_at(levels: list, op: Callable, fn: Callable, args: tuple, kwargs: dict):
    """Run a random op over the active ``levels``, innermost first."""
    if not levels:  # every level sliced away: the op draws for one sample, and the random ops it calls with it
        saved, _stack.levels = _stack.levels, []
        try:
            return fn(*args, **kwargs)
        finally:
            _stack.levels = saved
    level, outer = levels[-1], levels[:-1]
    batched = any(_is_at(t, level) for t in _flat_tensors((args, kwargs)))
    if level.randomness != "different" and not batched:
        return _random_at(outer, op, fn, args, kwargs)
    state = _rng[0].bit_generator.state
    outs, firsts = [], []
    for b in range(level.size):
        if level.randomness == "same":
            _rng[0].bit_generator.state = state
        sample_args = _slice(args, level, b)
        firsts.append(sample_args[0] if sample_args else None)
        outs.append(_random_at(outer, op, fn, sample_args, _slice(kwargs, level, b)))
    if args and isinstance(outs[0], Tensor) and all(o is f for o, f in zip(outs, firsts)):
        return args[0]  # an in-place draw into the batch
    return _stack_samples(outs, level)


def _flat_tensors(tree) -> list:
    found: list = []
    _map_tree(lambda t: found.append(t) or t, tree)
    return found


# --- Functions and autograd.grad -----------------------------------------------------------------------------
def _dispatch_function(cls, args: tuple, kwargs: dict):
    """``cls.apply`` called while a vmap runs (NotImplemented when no argument is batched)."""
    level = _top_level(args)
    if kwargs:
        level = _top_level(kwargs, level)
    if level is None:
        return NotImplemented
    if cls.__module__.startswith("numbagrad."):  # a built-in op's Function
        if cls in _ELEMENTWISE_CLASSES and not kwargs:
            return _elementwise(level, cls.apply, args, kwargs)
        return _per_sample(level, cls.apply, args, kwargs)
    if not cls._new_style:
        raise RuntimeError(
            "In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, jacrev, ...), it must "
            "override the setup_context staticmethod. For more details, please see "
            "https://pytorch.org/docs/main/notes/extending.func.html"
        )
    has_rule = cls.vmap is not _function.Function.vmap
    if cls.generate_vmap_rule:
        if has_rule:
            raise RuntimeError(
                f"You tried to vmap over {cls.__name__}, but it has both generate_vmap_rule=True and an overridden "
                "vmap staticmethod. Please set generate_vmap_rule=False or delete the overridden vmap staticmethod "
                "to avoid ambiguity. For more details, please see "
                "https://pytorch.org/docs/main/notes/extending.func.html"
            )
        if kwargs or cls._binds_defaults:
            args = cls._bind(args, kwargs)
        flags = tuple(_is_at(a, level) for a in args)
        return _wrap_tree(_generated_rule(cls).apply(level, flags, *[_value(a, level) for a in args]), level)
    if not has_rule:
        raise RuntimeError(
            f"You tried to vmap over {cls.__name__}, but it does not have vmap support. Please override and "
            "implement the vmap staticmethod or set generate_vmap_rule=True. For more details, please see "
            "https://pytorch.org/docs/main/notes/extending.func.html"
        )
    if any(isinstance(t, Tensor) for t in _flat_tensors(kwargs)):
        raise NotImplementedError(
            "Run vmap on autograd.Function with kwarg-only Tensor args. Please do not pass kwarg-only Tensors to "
            f"autograd.Function. Got: {kwargs}"
        )
    if _forward_mode_inside(level) and any(
        isinstance(a, Tensor) and unwrap_levels(a)[0]._fw_grad is not None for a in args
    ):  # jvp inside this vmap: as torch, the Function's jvp gives the tangents, its vmap rule the outputs
        if kwargs or cls._binds_defaults:
            args = cls._bind(args, kwargs)
        flags = tuple(_is_at(a, level) for a in args)
        return _wrap_tree(_generated_rule(cls, True).apply(level, flags, *[_value(a, level) for a in args]), level)
    return _by_vmap_rule(cls, level, args, kwargs)


def _forward_mode_inside(level: _Level) -> bool:
    """Whether ``numbagrad.func``'s forward mode began inside ``level`` (``vmap(jvp(f))``, not ``jvp(vmap(f))``)."""
    start = _stack.forward_mode_from
    return start is not None and any(running is level for running in _stack.levels[:start])


@contextlib.contextmanager
def forward_mode():
    """Marks the block as ``numbagrad.func``'s forward mode, begun inside the vmaps running now."""
    outer, _stack.forward_mode_from = _stack.forward_mode_from, len(_stack.levels)
    try:
        yield
    finally:
        _stack.forward_mode_from = outer


def _by_vmap_rule(cls, level: _Level, args: tuple, kwargs: dict):
    """``cls.apply`` by the Function's own ``vmap`` staticmethod: its outputs batched at ``level``."""
    in_dims = tuple(0 if _is_at(a, level) else None for a in args)
    result = cls.vmap(VmapInfo(level.size, level.randomness), in_dims, *[_value(a, level) for a in args], **kwargs)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(
            f"{cls.__name__}.vmap must return a tuple of (outputs, out_dims); got {type(result).__name__}"
        )
    outputs, out_dims = result
    leaves, spec = _flatten(outputs)
    dims = _broadcast_dims(out_dims, spec, len(leaves))
    if dims is None:
        raise RuntimeError(
            f"{cls.__name__}.vmap: expected out_dims to be compatible with the structure of the outputs; got "
            f"out_dims={out_dims}"
        )
    moved = [
        _wrap(t.movedim(d, 0), level) if isinstance(t, Tensor) and d is not None else t for t, d in zip(leaves, dims)
    ]
    return _unflatten(moved, spec)


# --- generate_vmap_rule -------------------------------------------------------------------------------------------
# A Function with ``generate_vmap_rule = True`` runs once over the batch, as in torch: its staticmethods are called
# with batched tensors, so the ops inside batch by their own rules (and only an op without one loops over the
# samples). Autograd records one node of a generated Function on the values (batch dim 0), whose backward calls
# the user's backward on batched gradients with the level entered again (it may run after the vmap returned).


@contextlib.contextmanager
def _entered(level: _Level):
    """``level`` running (its batched tensors dispatched to the batching rules), re-entered if it has returned."""
    if any(running is level for running in _stack.levels):
        yield
        return
    _install()
    _stack.levels.append(level)
    try:
        yield
    finally:
        _stack.levels.remove(level)
        _uninstall()


def _wrap_inputs(level: _Level, flags: tuple, args: tuple) -> list:
    return [_wrap(a, level) if flag else a for a, flag in zip(args, flags)]


def _batch_of(t, level: _Level):
    """The value at ``level`` of a tensor the user's code returned: a batch for every sample (an unbatched tensor
    is the same for all of them)."""
    return _expand_to(t, level) if isinstance(t, Tensor) else t


def _generated_rule(cls, by_vmap_rule: bool = False) -> type:
    """The Function that runs ``cls`` on the values of its batched inputs (its arguments are the level, which
    inputs are batched at it, then the inputs' values); made once per class and kept on it. ``by_vmap_rule``: its
    forward is ``cls``'s own ``vmap`` staticmethod (a ``jvp`` inside vmap of a Function that has one)."""
    key = "_jvp_vmap_rule" if by_vmap_rule else "_generated_vmap_rule"
    generated = cls.__dict__.get(key)
    if generated is not None:
        return generated

    def forward(level, flags, *args):
        inputs = _wrap_inputs(level, flags, args)
        outputs = _by_vmap_rule(cls, level, tuple(inputs), {}) if by_vmap_rule else cls.forward(*inputs)
        return _map_tree(lambda t: _batch_of(t, level), outputs)

    def setup_context(ctx, inputs, output):
        level, flags, *args = inputs
        batched_inputs = _wrap_inputs(level, flags, tuple(args))
        by_value = {id(a): w for a, w, flag in zip(args, batched_inputs, flags) if flag}
        outputs = [
            (by_value[id(o)] if id(o) in by_value else _wrap(o, level)) if isinstance(o, Tensor) else o
            for o in _outputs(output)
        ]
        inner = _function.FunctionCtx()
        inner.needs_input_grad = ctx.needs_input_grad[2:]
        cls.setup_context(inner, tuple(batched_inputs), tuple(outputs) if isinstance(output, tuple) else outputs[0])
        ctx.save_for_backward(*[_value(t, level) for t in inner.to_save])
        ctx._vmap_saved_batched = tuple(_is_at(t, level) for t in inner.to_save)
        inner.to_save = ()
        ctx.save_for_forward(*[_value(t, level) for t in inner.saved_for_forward])
        ctx._vmap_forward_batched = tuple(_is_at(t, level) for t in inner.saved_for_forward)
        inner.saved_for_forward = ()
        ctx.mark_non_differentiable(*[_value(t, level) for t in inner.non_differentiable])
        ctx.mark_dirty(*[_value(t, level) for t in inner.dirty_tensors])
        ctx.set_materialize_grads(inner.materialize_grads)
        ctx._vmap_inner, ctx._vmap_level, ctx._vmap_flags = inner, level, flags

    def backward(ctx, *grads):
        level, inner = ctx._vmap_level, ctx._vmap_inner
        saved = ctx.saved_tensors
        inner.to_save = tuple(_wrap(t, level) if flag else t for t, flag in zip(saved, ctx._vmap_saved_batched))
        with _entered(level):
            result = cls._backward_fn()(inner, *[None if g is None else _wrap(g, level) for g in grads])
        result = result if isinstance(result, tuple) else (result,)
        out: list = [None, None]
        for g, flag in zip(result, ctx._vmap_flags):
            if not isinstance(g, Tensor):
                out.append(g)
            elif flag:
                out.append(_batch_of(g, level))
            else:  # an input shared by the samples: its gradient is the sum of theirs
                out.append(g._value.sum(0) if _is_at(g, level) else g * level.size)
        return tuple(out)

    def jvp(ctx, _level, _flags, *tangents):
        level, inner = ctx._vmap_level, ctx._vmap_inner
        saved = ctx.saved_tensors  # (inside jvp: what setup_context saved for forward)
        inner.saved_for_forward = tuple(
            _wrap(t, level) if flag else t for t, flag in zip(saved, ctx._vmap_forward_batched)
        )
        batched = [None if t is None else _wrap(t, level) if flag else t for t, flag in zip(tangents, ctx._vmap_flags)]
        inner._in_jvp = True
        try:
            with _entered(level):
                result = cls.jvp(inner, *batched)
        finally:
            inner._in_jvp = False
        return _map_tree(lambda t: _batch_of(t, level), result)

    methods = {"forward": forward, "setup_context": setup_context, "backward": backward}
    if "jvp" in _function._overridden(cls):  # (without one, forward mode raises torch's error for the Function)
        methods["jvp"] = jvp
    attrs: dict[str, Any] = {name: staticmethod(fn) for name, fn in methods.items()}
    attrs.update(__module__=cls.__module__, __qualname__=f"{cls.__qualname__}.generated_vmap", generate_vmap_rule=True)
    generated = _function.FunctionMeta(f"{cls.__name__}GeneratedVmap", (_function.Function,), attrs)
    setattr(cls, key, generated)
    return generated


def _outputs(output) -> tuple:
    return output if isinstance(output, tuple) else (output,)


def _dispatch_grad(grad: Callable, outputs, inputs, grad_outputs, options: tuple):
    """``autograd.grad`` called while a vmap runs: batched outputs and inputs are differentiated through their
    values (samples never mix, so the summed batch's gradient is each sample's); plain outputs with batched
    ``grad_outputs`` are vector-Jacobian products for each grad_output in the batch."""
    outs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    ins = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    gouts = None if grad_outputs is None else (
        (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    )  # fmt: skip
    level = _top_level((outs, ins, gouts))
    if level is None:
        return NotImplemented
    retain_graph, create_graph, only_inputs, allow_unused, is_grads_batched, materialize = options
    if not any(_is_at(o, level) for o in outs):
        if any(_is_at(i, level) for i in ins):  # made inside this vmap, after the outputs: none of them is used
            if not all(_is_at(i, level) for i in ins) or not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. Set "
                    "allow_unused=True if this is the desired behavior."
                )
            return (None,) * len(ins)
        if is_grads_batched or gouts is None:
            return NotImplemented
        batch = [_expand_to(g, level) if isinstance(g, Tensor) else g for g in gouts]
        result = grad(outs, ins, batch, retain_graph, create_graph, only_inputs, allow_unused, True, materialize)
        return tuple(None if r is None else _wrap(r, level) for r in result)
    for t in ins:
        if not _is_at(t, level):
            raise RuntimeError(
                "vmap: autograd.grad of batched outputs with respect to an input that is not batched; differentiate "
                "with numbagrad.func.grad or vjp, which batch their inputs"
            )
    new_gouts = []
    for k, o in enumerate(outs):
        g = gouts[k] if gouts is not None and k < len(gouts) else None
        if not _is_at(o, level):
            if _is_at(g, level):
                raise RuntimeError("vmap: autograd.grad with a batched grad_output for an unbatched output")
        elif g is None:
            if o.dim() == 0:
                g = ops.ones_like(o._value)
        elif isinstance(g, Tensor):
            g = _expand_to(g, level)
        new_gouts.append(g)
    result = grad(
        tuple(_value(o, level) for o in outs), tuple(t._value for t in ins), new_gouts, retain_graph, create_graph,
        only_inputs, allow_unused, is_grads_batched, materialize,
    )  # fmt: skip
    return tuple(None if r is None else _wrap(r, level) for r in result)


def batched_alias(t: Tensor) -> Tensor | None:
    """For a transform (grad, vjp, jacrev) inside vmap: the fresh input to differentiate, batched at every running
    level (a tensor shared by all samples is broadcast over the batch, so each sample gets its own gradient);
    None outside vmap, or when ``t`` is batched at every level already."""
    value, have = unwrap_levels(t)
    if not _stack.levels or all(level in have for level in _stack.levels):
        return None
    base = value.view_as(value) if value.requires_grad else transform_leaf(value)
    return wrap_levels(*spread(wrap_levels(base, have)))


def unwrap_levels(t: Tensor) -> tuple[Tensor, list]:
    """``t``'s innermost value (a plain tensor, one leading dim per level) and the levels it is batched at, outer
    first as those dims are ordered."""
    have, value = [], t
    while type(value) is BatchedTensor:
        have.append(value._level)
        value = value._value
    have.reverse()
    return value, have


def spread(t: Tensor) -> tuple[Tensor, list]:
    """``t`` as a plain tensor batched at every running level: its innermost value broadcast over the levels it is
    not batched at (a view), and those levels, outer first; ``wrap_levels`` turns the pair back into ``t``'s
    per-sample view. Outside vmap: ``(t, [])``."""
    value, have = unwrap_levels(t)
    missing = [level for level in _stack.levels if level not in have]
    if not missing:
        return value, have
    order = sorted(have + missing, key=lambda level: level.id)
    for pos, level in enumerate(order):
        if level in missing:
            value = value.unsqueeze(pos)
    return value.expand(*[level.size for level in order], *t.shape), order


def wrap_levels(value: Tensor, levels: list) -> Tensor:
    """A plain tensor whose leading dims are ``levels``' batches (outer first), as a tensor batched at them."""
    for level in levels:
        value = _wrap(value, level)
    return value


def only_vmaps_running() -> bool:
    """Whether every ``numbagrad.func`` transform running in this thread is a vmap (each counts one depth)."""
    return _depth.depth.value == len(_stack.levels)


def transform_leaf(t: Tensor) -> Tensor:
    """A new leaf requiring grad with ``t``'s data, made by a transform to differentiate with respect to (marked,
    so that ``reaches_user_leaf`` can tell the user's leaves from it). Under forward mode it keeps ``t``'s tangent
    (as a dual view of the leaf), so that ``jvp(grad(f))`` differentiates the gradient along it."""
    value, levels = unwrap_levels(t)  # (the graph's leaf is the innermost value)
    leaf = value.detach().requires_grad_(True)
    leaf._made_by_transform = True
    if value._fw_grad is not None:
        leaf = forward_ad.make_dual(leaf, value._fw_grad)
    return wrap_levels(leaf, levels)


def reaches_user_leaf(t: Tensor) -> bool:
    """Whether ``t``'s graph reaches a leaf requiring grad that no transform made: what decides if an outermost
    vmap's result keeps its graph."""
    if not t.requires_grad:
        return False
    if t.grad_fn is None:
        return not getattr(t, "_made_by_transform", False)
    stack, seen = [t.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            if not getattr(variable, "_made_by_transform", False):
                return True
            continue
        stack.extend(nxt for nxt, _ in node._edges)
    return False


def batched_vjps(output_of: Callable, inputs: tuple, grad_outputs: Tensor) -> tuple:
    """For gradcheck's ``check_batched_grad``: the gradients of ``output_of(*inputs)`` against each grad_output in
    the batch ``grad_outputs`` (dim 0), one per input that requires grad, computed in one vmap in which the
    function runs on those inputs batched over the grad_outputs."""
    diff = [k for k, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]

    def vjp(g):
        ins = list(inputs)
        for k in diff:
            ins[k] = batched_alias(inputs[k])
        aliases = [ins[k] for k in diff]
        grads = _engine.grad([output_of(*ins)], aliases, [g], retain_graph=True, allow_unused=True)
        return tuple(ops.zeros_like(a) if r is None else r for r, a in zip(grads, aliases))

    return vmap(vjp)(grad_outputs)


BATCHED_VJPS[0] = batched_vjps


# --- batching rules ----------------------------------------------------------------------------------------------
def _elementwise(level: _Level, op: Callable, args: tuple, kwargs: dict):
    """Ops that broadcast their tensors elementwise: each batch gets size-1 dims after its batch dim up to the
    widest operand, so broadcasting lines the samples up, and the op runs once."""
    if op.__name__ == "where" and len(args) + len(kwargs) == 1:
        return NotImplemented  # where(condition) is nonzero: its size depends on each sample's values
    tensors = [a for a in itertools.chain(args, kwargs.values()) if isinstance(a, Tensor)]
    n = max(t.dim() for t in tensors)
    if len({t.dtype for t in tensors}) > 1 and any(_is_at(t, level) and t.dim() == 0 for t in tensors):
        return NotImplemented  # a 0-dim sample promotes below dimensioned tensors: let each sample decide

    def align(a):
        if not _is_at(a, level):
            return a
        v, k = a._value, n - a.dim()
        return v.reshape(v.shape[0], *([1] * k), *v.shape[1:]) if k else v

    out = op(*[align(a) for a in args], **{k: align(v) for k, v in kwargs.items()})
    return _wrap_tree(out, level)


def _inplace_elementwise(name: str) -> Callable:
    """An in-place elementwise method of a batched tensor: the op writes into its value, the others aligned."""
    plain = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        level = _top_level((self, args, kwargs))
        if not _is_at(self, level):
            raise RuntimeError(_INPLACE_ERROR)
        for a in itertools.chain(args, kwargs.values()):
            if isinstance(a, Tensor) and a.dim() > self.dim():
                return _per_sample(level, plain, (self, *args), kwargs)
        n = self.dim()

        def align(a):
            if not _is_at(a, level):
                return a
            v, k = a._value, n - a.dim()
            return v.reshape(v.shape[0], *([1] * k), *v.shape[1:]) if k else v

        plain(self._value, *[align(a) for a in args], **{k: align(v) for k, v in kwargs.items()})
        return self

    method.__name__ = name
    return method


def _matmul(level: _Level, op: Callable, args: tuple, kwargs: dict, dims: tuple | None = None):
    """matmul (and mm, bmm, mv, dot once their ranks are checked): a batch of matrices is a batched matmul."""
    if kwargs or len(args) != 2 or not all(isinstance(a, Tensor) for a in args):
        return NotImplemented
    a, b = args
    na, nb = a.dim(), b.dim()
    if na == 0 or nb == 0 or (dims is not None and (na, nb) != dims):
        return NotImplemented
    ba, bb = _is_at(a, level), _is_at(b, level)
    if ba and not bb and nb <= 2:
        return _wrap(ops.matmul(a._value, b), level)
    if bb and not ba and na <= 2:
        if nb >= 2:
            return _wrap(ops.matmul(a, b._value), level)
        return _wrap(ops.matmul(a, b._value.unsqueeze(-1)).squeeze(-1), level)
    x = a._value if ba else a.unsqueeze(0)
    y = b._value if bb else b.unsqueeze(0)
    if na == 1:
        x = x.unsqueeze(-2)
    if nb == 1:
        y = y.unsqueeze(-1)
    rank = max(x.dim(), y.dim())
    x = x.reshape(x.shape[0], *([1] * (rank - x.dim())), *x.shape[1:])
    y = y.reshape(y.shape[0], *([1] * (rank - y.dim())), *y.shape[1:])
    out = ops.matmul(x, y)
    if na == 1:
        out = out.squeeze(-2)
    if nb == 1:
        out = out.squeeze(-1)
    return _wrap(out, level)


def _linear(level: _Level, op: Callable, args: tuple, kwargs: dict):
    """``F.linear``: a batch of inputs through shared weights is one linear over more leading dims."""
    bound = _bind("F.linear", op, args, kwargs)
    if bound is None:
        return NotImplemented
    x, w, bias = bound.arguments["input"], bound.arguments["weight"], bound.arguments.get("bias")
    if not isinstance(x, Tensor) or not isinstance(w, Tensor) or x.dim() == 0 or w.dim() != 2:
        return NotImplemented
    if _is_at(x, level) and not _is_at(w, level) and not _is_at(bias, level):
        return _wrap(op(x._value, w, bias), level)
    out = ops.matmul(x, w.transpose(0, 1))
    return out if bias is None else out + bias


_SIGNATURES: dict[str, inspect.Signature] = {}


def _bind(name: str, op: Callable, args: tuple, kwargs: dict):
    sig = _SIGNATURES.get(name)
    if sig is None:
        try:
            sig = _SIGNATURES[name] = inspect.signature(op)
        except (TypeError, ValueError):
            return None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound


def _shift(dim, n: int):
    """A logical dim (or dims) of an ``n``-dim sample as dims of the batch."""
    if isinstance(dim, int) and not isinstance(dim, bool):
        return wrap_dim(dim, n) + 1
    if isinstance(dim, (tuple, list)) and all(isinstance(d, int) for d in dim):
        return type(dim)(wrap_dim(d, n) + 1 for d in dim)
    return NotImplemented


def _dim_rule(*params: str, extra: int = 0, reduce_all: bool = False) -> Callable:
    """Ops of one batched tensor (the first argument) whose ``params`` name dims: the dims shift by one.
    ``extra``: how many dims the op may add (unsqueeze's range is one wider); ``reduce_all``: a reduction whose
    ``dim=None`` means every dim (run over the flattened sample instead)."""

    def rule(level: _Level, op: Callable, args: tuple, kwargs: dict):
        if not args or not _is_at(args[0], level):
            return NotImplemented
        if _flat_tensors((args[1:], kwargs)):  # other tensors (diff's prepend, max's other) must match the batch
            return NotImplemented
        bound = _bind(op.__name__ + str(id(op)), op, args, kwargs)
        if bound is None:
            return NotImplemented
        names = list(bound.signature.parameters)
        self = args[0]
        n = self.dim()
        for p in params:
            if p not in bound.arguments:
                continue
            d = bound.arguments[p]
            if reduce_all and isinstance(d, (tuple, list)) and not d:
                d = None  # torch's reductions read an empty dim list as every dim
            if d is None:
                if not reduce_all or bound.arguments.get("keepdim"):
                    return NotImplemented
                bound.arguments[names[0]] = self._value.reshape(level.size, -1)
                bound.arguments[p] = 1
                out = op(*bound.args, **bound.kwargs)
                if isinstance(out, tuple) and hasattr(out, "_fields"):
                    out = out[0]  # max/min over everything return values only
                return _wrap_tree(out, level)
            shifted = _shift(d, n + extra)
            if shifted is NotImplemented:
                return NotImplemented
            bound.arguments[p] = shifted
        bound.arguments[names[0]] = self._value
        return _wrap_tree(op(*bound.args, **bound.kwargs), level)

    return rule


def _shape_arg(args: tuple, kwargs: dict, key: str = "shape"):
    rest = args[1:] or ((kwargs[key],) if key in kwargs else ())
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        rest = tuple(rest[0])
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in rest):
        return None
    return tuple(rest)


def _reshape_rule(view: bool) -> Callable:
    def rule(level: _Level, op: Callable, args: tuple, kwargs: dict):
        shape = _shape_arg(args, kwargs, "shape" if "shape" in kwargs else "size")
        if shape is None or not _is_at(args[0], level) or (kwargs and set(kwargs) - {"shape", "size"}):
            return NotImplemented
        value = args[0]._value
        if view:
            try:
                return _wrap(value.view(level.size, *shape), level)
            except RuntimeError:
                if math.prod(s for s in shape if s != -1) == 0 or shape.count(-1) > 1:
                    raise
        return _wrap(value.reshape(level.size, *shape), level)

    return rule


def _as_rule(target: str) -> Callable:
    """view_as / reshape_as / expand_as: the other tensor's logical shape."""

    def rule(level: _Level, op: Callable, args: tuple, kwargs: dict):
        if kwargs or len(args) != 2 or not isinstance(args[1], Tensor):
            return NotImplemented
        return getattr(ops, target)(args[0], tuple(args[1].shape))

    return rule


def _expand(level: _Level, op: Callable, args: tuple, kwargs: dict):
    sizes = _shape_arg(args, kwargs, "size")
    if sizes is None or not _is_at(args[0], level) or set(kwargs) - {"size", "implicit"}:
        return NotImplemented
    value, n = args[0]._value, args[0].dim()
    if len(sizes) < n:
        return NotImplemented
    value = value.reshape(level.size, *([1] * (len(sizes) - n)), *value.shape[1:])
    return _wrap(value.expand(level.size, *sizes), level)


def _permute(level: _Level, op: Callable, args: tuple, kwargs: dict):
    dims = _shape_arg(args, kwargs, "dims")
    if dims is None or not _is_at(args[0], level):
        return NotImplemented
    n = args[0].dim()
    if len(dims) != n:
        return NotImplemented
    return _wrap(args[0]._value.permute(0, *[wrap_dim(d, n) + 1 for d in dims]), level)


def _t(level: _Level, op: Callable, args: tuple, kwargs: dict):
    if kwargs or len(args) != 1 or args[0].dim() > 2:
        return NotImplemented
    value = args[0]._value
    return _wrap(value.transpose(1, 2) if args[0].dim() == 2 else value.view_as(value), level)


_squeeze_dims = _dim_rule("dim")


def _squeeze(level: _Level, op: Callable, args: tuple, kwargs: dict):
    if len(args) > 1 or kwargs or not _is_at(args[0], level):
        return _squeeze_dims(level, op, args, kwargs)
    value = args[0]._value
    for d in reversed([i + 1 for i, s in enumerate(args[0].shape) if s == 1]):
        value = value.squeeze(d)
    return _wrap(value if value is not args[0]._value else value.view_as(value), level)


def _cat_rule(stack: bool) -> Callable:
    def rule(level: _Level, op: Callable, args: tuple, kwargs: dict):
        bound = _bind("stack" if stack else "cat", op, args, kwargs)
        if bound is None:
            return NotImplemented
        names = list(bound.signature.parameters)
        tensors, dim = bound.arguments[names[0]], bound.arguments.get("dim", 0)
        if not isinstance(tensors, (tuple, list)) or not tensors or not isinstance(dim, int):
            return NotImplemented
        if any(not isinstance(t, Tensor) for t in tensors) or bound.arguments.get("out") is not None:
            return NotImplemented
        n = tensors[0].dim()
        if any(t.dim() != n for t in tensors) or (n == 0 and not stack):
            return NotImplemented
        bound.arguments[names[0]] = [_expand_to(t, level) for t in tensors]
        bound.arguments["dim"] = wrap_dim(dim, n + stack) + 1
        return _wrap(op(*bound.args, **bound.kwargs), level)

    return rule


def _getitem(level: _Level, op: Callable, args: tuple, kwargs: dict):
    """Indexing with ints, slices, None, Ellipsis and one block of unbatched integer index tensors."""
    if kwargs or len(args) != 2 or not _is_at(args[0], level):
        return NotImplemented
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    advanced = []
    for k, item in enumerate(index):
        if isinstance(item, Tensor):
            if _is_at(item, level) or item.dtype.is_floating_point or item.dtype.scalar_name == "bool":
                return NotImplemented
            advanced.append(k)
        elif isinstance(item, list):
            advanced.append(k)
        elif isinstance(item, bool) or not (item is None or item is Ellipsis or isinstance(item, (int, slice))):
            return NotImplemented
    if advanced and advanced != list(range(advanced[0], advanced[-1] + 1)):
        return NotImplemented
    return _wrap(args[0]._value[(slice(None), *index)], level)


def _gather(level: _Level, op: Callable, args: tuple, kwargs: dict):
    bound = _bind("gather", op, args, kwargs)
    if bound is None:
        return NotImplemented
    x, dim, index = bound.arguments["input"], bound.arguments["dim"], bound.arguments["index"]
    if not isinstance(index, Tensor) or not isinstance(dim, int) or x.dim() != index.dim() or x.dim() == 0:
        return NotImplemented
    bound.arguments["input"] = _expand_to(x, level)
    bound.arguments["index"] = _expand_to(index, level)
    bound.arguments["dim"] = wrap_dim(dim, x.dim()) + 1
    return _wrap(op(*bound.args, **bound.kwargs), level)


def _index_select(level: _Level, op: Callable, args: tuple, kwargs: dict):
    bound = _bind("index_select", op, args, kwargs)
    if bound is None:
        return NotImplemented
    x, dim, index = bound.arguments["input"], bound.arguments["dim"], bound.arguments["index"]
    if not _is_at(x, level) or _is_at(index, level) or not isinstance(dim, int) or x.dim() == 0:
        return NotImplemented
    bound.arguments["input"], bound.arguments["dim"] = x._value, wrap_dim(dim, x.dim()) + 1
    return _wrap(op(*bound.args, **bound.kwargs), level)


def _same_on_value(level: _Level, op: Callable, args: tuple, kwargs: dict):
    """Ops that treat every element alike and keep the shape (clone, zeros_like, to, ...): run on the batch."""
    if not args or not _is_at(args[0], level) or any(_is_at(t, level) for t in _flat_tensors((args[1:], kwargs))):
        return NotImplemented
    return _wrap_tree(op(args[0]._value, *args[1:], **kwargs), level)


def _layer_norm(level: _Level, op: Callable, args: tuple, kwargs: dict):
    bound = _bind("F.layer_norm", op, args, kwargs)
    if bound is None:
        return NotImplemented
    x, shape = bound.arguments["input"], bound.arguments["normalized_shape"]
    if not _is_at(x, level) or not isinstance(shape, (tuple, list, Size)):
        return NotImplemented
    if any(_is_at(bound.arguments[k], level) for k in ("weight", "bias")) or len(shape) > x.dim():
        return NotImplemented
    if tuple(x.shape[x.dim() - len(shape) :]) != tuple(shape):
        return NotImplemented
    bound.arguments["input"] = x._value
    return _wrap(op(*bound.args, **bound.kwargs), level)


def _cross_entropy(level: _Level, op: Callable, args: tuple, kwargs: dict):
    """Class-index cross entropy without weights or smoothing: every sample's losses in one call, then each
    sample's reduction."""
    bound = _bind("F.cross_entropy", op, args, kwargs)
    if bound is None:
        return NotImplemented
    a = bound.arguments
    x, target, reduction = a["input"], a["target"], a["reduction"]
    if a["weight"] is not None or a["label_smoothing"] or a["size_average"] is not None or a["reduce"] is not None:
        return NotImplemented
    if not isinstance(target, Tensor) or target.is_floating_point() or reduction not in ("none", "mean", "sum"):
        return NotImplemented
    if x.dim() not in (1, 2) or target.dim() != x.dim() - 1:
        return NotImplemented
    if x.dim() == 2 and target.shape[0] != x.shape[0]:
        return NotImplemented
    xs, ts = _expand_to(x, level), _expand_to(target, level)
    classes = x.shape[-1]
    losses = op(xs.reshape(-1, classes), ts.reshape(-1), reduction="none", ignore_index=a["ignore_index"])
    losses = losses.reshape(level.size, -1)
    if reduction == "none":
        return _wrap(losses.reshape(level.size, *target.shape), level)
    total = losses.sum(1)
    if reduction == "sum":
        return _wrap(total, level)
    counted = (ts.reshape(level.size, -1) != a["ignore_index"]).sum(1).to(total.dtype)
    return _wrap(total / counted, level)


def _matmul_of(dims: tuple) -> Callable:
    return lambda level, op, args, kwargs: _matmul(level, ops.matmul, args, kwargs, dims)


_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "std", "var", "logsumexp", "argmax", "argmin", "max", "min",
               "all", "any", "nansum", "nanmean", "norm", "count_nonzero", "median",
               "std_mean", "var_mean")  # fmt: skip
_ALONG_DIM = {  # ops whose named parameters are dims, with the extra dims they may add
    "softmax": ("dim",), "log_softmax": ("dim",), "cumsum": ("dim",), "cumprod": ("dim",), "logcumsumexp": ("dim",),
    "cummax": ("dim",), "cummin": ("dim",), "transpose": ("dim0", "dim1"), "swapaxes": ("axis0", "axis1"),
    "swapdims": ("dim0", "dim1"), "select": ("dim",), "narrow": ("dim",), "flatten": ("start_dim", "end_dim"),
    "unflatten": ("dim",), "movedim": ("source", "destination"), "moveaxis": ("source", "destination"),
    "split": ("dim",), "chunk": ("dim",), "unbind": ("dim",), "tensor_split": ("dim",), "diagonal": ("dim1", "dim2"),
    "_flip_method": ("dims",), "flip": ("dims",), "roll": ("dims",), "sort": ("dim",), "argsort": ("dim",),
    "topk": ("dim",), "kthvalue": ("dim",), "repeat_interleave": ("dim",), "diff": ("dim",),
    "F.softmax": ("dim",), "F.log_softmax": ("dim",), "F.normalize": ("dim",),
}  # fmt: skip
_SAME_ON_VALUE = ("clone", "contiguous", "zeros_like", "ones_like", "empty_like", "full_like", "_to", "type_as",
                  "detach", "nan_to_num", "isnan", "isinf", "isfinite", "sign", "F.relu", "F.gelu", "F.silu",
                  "F.sigmoid", "F.tanh", "F.mish", "F.softplus", "F.elu", "F.leaky_relu")  # fmt: skip
_OTHER_ELEMENTWISE = ("where", "_where_method", "clamp", "clip", "masked_fill", "_masked_fill_method", "lerp",
                      "addcmul", "addcdiv", "maximum", "minimum", "fmax", "fmin", "copysign", "float_power", "xlogy",
                      "hypot", "atan2", "isclose", "eq", "ne", "lt", "le", "gt", "ge")  # fmt: skip


def _build_rules() -> dict:
    rules: dict[str, Callable] = {}
    for row in ROWS.values():
        if row.names:
            rules[row.names[0]] = _elementwise
        if row.methods and not row.names:
            rules[f"_{row.name}_methods"] = _elementwise
        for operator in row.operators:
            rules[f"_{row.name}{operator}"] = _elementwise
    for name in ("_pow_operators", "_rpow_operator", "_rsub_operator", "_rtruediv_operator", *_OTHER_ELEMENTWISE):
        rules[name] = _elementwise
    for name in _REDUCTIONS:
        rules[name] = _dim_rule("dim", reduce_all=True)
    for name, params in _ALONG_DIM.items():
        rules[name] = _dim_rule(*params)
    rules["unsqueeze"] = _dim_rule("dim", extra=1)
    rules.update(
        matmul=_matmul, _rmatmul_operator=lambda level, op, args, kwargs: _matmul(level, ops.matmul, args[::-1], {}),
        mm=_matmul_of((2, 2)), bmm=_matmul_of((3, 3)), mv=_matmul_of((2, 1)), dot=_matmul_of((1, 1)),
        inner=_matmul_of((1, 1)), view=_reshape_rule(True), reshape=_reshape_rule(False), expand=_expand,
        view_as=_as_rule("view"), reshape_as=_as_rule("reshape"), expand_as=_as_rule("expand"), permute=_permute,
        t=_t, squeeze=_squeeze, cat=_cat_rule(False), concat=_cat_rule(False), concatenate=_cat_rule(False),
        stack=_cat_rule(True), _getitem=_getitem, gather=_gather, index_select=_index_select,
        **{"F.linear": _linear, "F.layer_norm": _layer_norm, "F.cross_entropy": _cross_entropy},
    )  # fmt: skip
    for name in _SAME_ON_VALUE:
        rules[name] = _same_on_value
    return {name: rule for name, rule in rules.items() if name in _registry.OPS or name.startswith("F.")}


_RULES = _build_rules()
_ELEMENTWISE_CLASSES = frozenset(cls for classes in CLASSES.values() for cls in classes.values())
_INPLACE_NAMES = frozenset({"_setitem"})
_RANDOM_WORDS = ("rand", "normal", "bernoulli", "multinomial", "poisson", "dropout", "uniform", "exponential",
                 "cauchy", "geometric", "random", "rrelu", "gumbel")  # fmt: skip
_RANDOM = frozenset(
    name
    for name in list(_registry.OPS) + [f"F.{n}" for n in dir(F) if not n.startswith("_")]
    if any(word in name for word in _RANDOM_WORDS) and "__rand__" not in name and "normalize" not in name
    and "batch_norm" not in name and "group_norm" not in name and "layer_norm" not in name
    and "instance_norm" not in name and "rms_norm" not in name and "_norm" not in name
)  # fmt: skip

for _row in ROWS.values():
    if _row.inplace:
        for _method in _row.methods:
            setattr(BatchedTensor, _method + "_", _inplace_elementwise(_method + "_"))
        for _operator in _row.operators:
            if _operator.startswith("__i"):
                setattr(BatchedTensor, _operator, _inplace_elementwise(_operator))
del _row


# --- pytrees and the vmap entry point ----------------------------------------------------------------------------
def _flatten(tree) -> tuple[list, Any]:
    """torch's pytree leaves: tuples, namedtuples, lists and dicts are nodes, everything else (None too) a leaf."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for item in tree:
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for key, item in tree.items():
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((key, len(sub), spec))
        return leaves, (dict, specs)
    return [tree], None


def _unflatten(leaves: list, spec):
    if spec is None:
        return leaves[0]
    kind, specs = spec
    if kind is dict:
        out, i = {}, 0
        for key, n, sub in specs:
            out[key] = _unflatten(leaves[i : i + n], sub)
            i += n
        return out
    items, i = [], 0
    for n, sub in specs:
        items.append(_unflatten(leaves[i : i + n], sub))
        i += n
    if hasattr(kind, "_fields"):
        return kind(*items)
    return kind(items)


def _broadcast_dims(dims, spec, n: int) -> list | None:
    """``dims`` (an int/None for a whole subtree, or a tree of them shaped like ``spec``) as one per leaf."""
    if not isinstance(dims, (tuple, list, dict)):
        return [dims] * n
    if spec is None:
        return None
    kind, specs = spec
    if kind is dict:
        if not isinstance(dims, dict) or set(dims) != {key for key, _, _ in specs}:
            return None
        out = []
        for key, k, sub in specs:
            part = _broadcast_dims(dims[key], sub, k)
            if part is None:
                return None
            out += part
        return out
    if not isinstance(dims, (tuple, list)) or len(dims) != len(specs):
        return None
    out = []
    for d, (k, sub) in zip(dims, specs):
        part = _broadcast_dims(d, sub, k)
        if part is None:
            return None
        out += part
    return out


def _name(func) -> str:
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return getattr(func, "__name__", repr(func))


def _structure(tree) -> str:
    leaves, spec = _flatten(tree)
    return f"{_describe(spec)} ({len(leaves)} leaves)"


def _describe(spec) -> str:
    if spec is None:
        return "*"
    kind, specs = spec
    if kind is dict:
        return "{" + ", ".join(f"{key!r}: {_describe(sub)}" for key, _, sub in specs) + "}"
    inner = ", ".join(_describe(sub) for _, sub in specs)
    return f"({inner}{',' if len(specs) == 1 else ''})" if kind is not list else f"[{inner}]"


def _process_inputs(func, in_dims, args: tuple) -> tuple[int, list, list, Any]:
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(
            f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a (potentially "
            f"nested) tuple matching the structure of inputs, got: {type(in_dims)}."
        )
    if not args:
        raise ValueError(
            f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to "
            "vmap over a function with no inputs. The latter is unsupported."
        )
    flat_args, spec = _flatten(args)
    flat_dims = _broadcast_dims(in_dims, spec, len(flat_args))
    if flat_dims is None:
        raise ValueError(
            f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the structure of "
            f"`inputs`. in_dims has structure {_structure(in_dims)} but inputs has structure {_structure(args)}."
        )
    for i, (arg, dim) in enumerate(zip(flat_args, flat_dims)):
        if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool)):
            raise ValueError(
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an input but in_dim "
                "must be either an integer dimension or None."
            )
        if dim is not None and not isinstance(arg, Tensor):
            raise ValueError(
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an input but the input "
                f"is of type {type(arg)}. We cannot vmap over non-Tensor arguments, please use None as the "
                "respective in_dim"
            )
        if dim is not None and not -arg.dim() <= dim < arg.dim():
            raise ValueError(
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for some input, but that "
                f"input is a Tensor of dimensionality {arg.dim()} so expected in_dim to satisfy "
                f"-{arg.dim()} <= in_dim < {arg.dim()}."
            )
        if dim is not None and dim < 0:
            flat_dims[i] = dim % arg.dim()
    sizes = [arg.size(dim) for arg, dim in zip(flat_args, flat_dims) if dim is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(size != sizes[0] for size in sizes):
        raise ValueError(
            f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {sizes} for the "
            "mapped dimension"
        )
    return sizes[0], flat_dims, flat_args, spec


def _run(func, size: int, flat_dims: list, flat_args: list, spec, out_dims, randomness: str, kwargs: dict):
    """One vmap level: batch the inputs, call ``func``, take the batch dim out of its outputs."""
    level = _Level(size, randomness)
    _install()
    _stack.levels.append(level)
    try:
        batched = [
            arg if dim is None else _wrap(ops.movedim(arg, dim, 0) if dim else arg, level)
            for arg, dim in zip(flat_args, flat_dims)
        ]
        with _depth.Level():  # transforms inside a vmap keep their graphs
            out = func(*_unflatten(batched, spec), **kwargs)
        return _unbatch_outputs(func, out, out_dims, level)
    finally:
        _stack.levels.pop()
        _uninstall()


def _flat_out_dims(func, out, out_dims) -> list:
    """One out_dim per output leaf (torch's rules: a single Tensor output also takes a 1-tuple)."""
    leaves, spec = _flatten(out)
    if isinstance(out, Tensor):
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            dims = list(out_dims)
        elif out_dims is None or isinstance(out_dims, int):
            dims = [out_dims]
        else:
            dims = None
    else:
        dims = _broadcast_dims(out_dims, spec, len(leaves))
    if dims is None:
        raise ValueError(
            f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
            f"structure of `outputs`. out_dims has structure {_structure(out_dims)} but outputs has structure "
            f"{_structure(out)}."
        )
    return dims


def _unbatch_outputs(func, out, out_dims, level: _Level):
    leaves, spec = _flatten(out)
    dims = _flat_out_dims(func, out, out_dims)
    result = []
    for t, d in zip(leaves, dims):
        if d is None:
            if _is_at(t, level):
                raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` can not return a BatchedTensor when "
                                 "out_dim is None")  # fmt: skip
            result.append(t)
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(
                f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                "collection of ints representing where in the outputs the vmapped dimension should appear."
            )
        if not isinstance(t, Tensor):
            raise ValueError(
                f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, got type {type(t)}. Did you "
                "mean to set out_dims= to None for output?"
            )
        value = _expand_to(t, level)
        n = value.dim()
        d = wrap_dim(d, n)
        result.append(ops.movedim(value, 0, d) if d else value)
    return _unflatten(result, spec)


def vmap(func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size: int | None = None
         ) -> Callable:  # fmt: skip
    """``func`` mapped over a dim of its inputs, as ``torch.func.vmap``: ``in_dims`` (an int, None, or a tree
    matching the arguments) says which dim of each input is the batch, ``out_dims`` where the batch goes in each
    output; ``randomness`` is 'error' (random ops refused), 'different' (each sample its own draws) or 'same' (one
    draw for all); ``chunk_size`` runs the batch that many samples at a time."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        size, flat_dims, flat_args, spec = _process_inputs(func, in_dims, args)
        if chunk_size is None or chunk_size >= size:
            return _run(func, size, flat_dims, flat_args, spec, out_dims, randomness, kwargs)
        state = _rng[0].bit_generator.state if randomness == "same" else None
        pieces = []
        for start in range(0, size, chunk_size):
            stop = min(start + chunk_size, size)
            chunk = [
                arg if d is None else ops.narrow(arg, d, start, stop - start) for arg, d in zip(flat_args, flat_dims)
            ]
            if state is not None:
                _rng[0].bit_generator.state = state
            pieces.append(_run(func, stop - start, flat_dims, chunk, spec, out_dims, randomness, kwargs))
        leaves = [_flatten(piece)[0] for piece in pieces]
        out_spec = _flatten(pieces[0])[1]
        dims = _flat_out_dims(func, pieces[0], out_dims)
        joined = [
            ops.cat([piece[k] for piece in leaves], dim=dims[k]) if dims[k] is not None else leaves[0][k]
            for k in range(len(leaves[0]))
        ]
        return _unflatten(joined, out_spec)

    return wrapped


def _give_batched_tensors_their_operators() -> None:
    """Tensor's arithmetic and comparison operators are unwrapped (the eager hot path has no vmap check), so the
    batched tensor class carries their batchable forms: ``batched * x`` and, Python trying a subclass's reflected
    operator first, ``x * batched`` run by the batching rules."""
    for name, op in _registry.BATCHED_OPERATORS.items():
        if name not in BatchedTensor.__dict__:
            setattr(BatchedTensor, name, op)


_give_batched_tensors_their_operators()
