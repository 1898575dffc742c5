"""Tracing: run the function once, eagerly and on real data, and record every ``Function.apply`` it makes.

While a ``Recorder`` sits in ``grad_mode.state.tracer``, ``Function.apply(cls, *args)`` hands the call here: the
recorder notes which traced values the call reads and which it makes, runs it with the tracer unset (so applies
nested inside a forward are not recorded), and returns its result. The first call's result is the eager result,
with the eager graph.

Tensors the trace follows (its inputs and every recorded output) temporarily get a subclass of their own class
(``__class__`` swapped back when the trace ends) whose methods notice data-dependent use: ``.item()``,
``.numpy()``, ``bool()``, ``float()``, ``print``, comparisons and other ops computed from the storage outside
``Function.apply`` (they read ``_host()``), ``backward()``. Such a use is a *graph break*: the recorder stops,
the rest of the function runs eagerly (so the result is still right) and this guard key always runs eagerly;
with ``fullgraph=True`` it is an error naming the user's line.

A tensor that an op reads but the trace did not make is a constant, read again at each replay (a parameter, a
buffer, a captured tensor) when it is reachable from the function (its closure, the globals it names, the module
or object it is bound to); otherwise it was made inside the function by code that is not traced (a creation
function, an in-place update, ``.data``) and the trace breaks rather than replay a stale value. A constant written
in place other than by a recorded op (``self.num_batches_tracked.add_(1)`` in a module's forward) breaks the trace
too, since a replay would skip the write: its version counter is compared before each op that reads it and when
the trace ends. Writes a recorded op makes (batch norm's running statistics) are replayed with the op.
"""

from __future__ import annotations

import dis
import linecache
import os
import sys
import sysconfig
import types
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .._tensor import Tensor
from ..autograd.function import Function
from ..autograd.grad_mode import break_trace, state
from ..nn.module import Module
from ..ops.inplace import rebase


class GraphBreakError(RuntimeError):
    """``numbagrad.compile(..., fullgraph=True)`` met something it cannot trace (the message names the line)."""


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_location() -> str:
    """``file:line: source`` of the innermost frame outside numbagrad (the user's line that broke the trace)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"{filename}:{frame.f_lineno}: {line}" if line else f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown location>"


# --- values and steps ---------------------------------------------------------------------------------------
@dataclass
class Value:
    """A tensor the trace follows, as it was at trace time."""

    shape: tuple
    dtype: np.dtype
    is_cuda: bool


@dataclass
class OpStep:
    """One recorded ``cls.apply(*args, **kwargs)``; ``args``/``kwargs``/``out`` are templates (see ``template``)."""

    cls: type
    args: tuple
    kwargs: dict | None
    out: tuple
    grad_mode: bool


@dataclass
class MethodStep:
    """A recorded tensor method with graph effects: ``detach`` (a new value), ``retain_grad``, ``register_hook``."""

    name: str
    target: int
    args: tuple
    out: tuple | None
    grad_mode: bool


@dataclass
class Trace:
    """What a finished trace hands to the planner."""

    values: list
    inputs: list  # value index of each flattened input
    steps: list
    out: tuple  # template of the function's result
    grad_mode: bool  # grad mode when the function was called
    external: set = field(default_factory=set)  # values used by method steps (must be materialized)


# --- the traced tensor class --------------------------------------------------------------------------------
def _shape_read() -> None:
    rec = state.tracer
    if isinstance(rec, Recorder):
        rec.shape_reads = True


def _base(t):
    """``t`` seen as its own class: past the traced subclass, or as it is once a graph break restored it."""
    return super(_TracedMixin, t) if isinstance(t, _TracedMixin) else t


class _TracedMixin:
    """Methods of traced tensors: data-dependent uses break the trace, graph effects are recorded."""

    # (no __slots__: a Tensor keeps its attributes in a managed __dict__, which __class__ assignment must match)

    def _host(self):
        break_trace("reads the tensor's values outside a traced op")
        return _base(self)._host()

    def item(self):
        break_trace("calls .item()")
        return _base(self).item()

    def tolist(self):
        break_trace("calls .tolist()")
        return _base(self).tolist()

    def numpy(self, *, force: bool = False):
        break_trace("calls .numpy()")
        return _base(self).numpy(force=force)

    def __array__(self, dtype=None, copy=None):
        break_trace("converts the tensor to a numpy array")
        return _base(self).__array__(dtype, copy)

    def __bool__(self) -> bool:
        break_trace("uses a tensor's value in Python control flow (bool())")
        return _base(self).__bool__()

    def __float__(self) -> float:
        break_trace("converts a tensor to a Python float")
        return _base(self).__float__()

    def __int__(self) -> int:
        break_trace("converts a tensor to a Python int")
        return _base(self).__int__()

    def __index__(self) -> int:
        break_trace("uses a tensor as a Python index")
        return _base(self).__index__()

    def __repr__(self, *args, **kwargs) -> str:
        break_trace("prints a tensor")
        return _base(self).__repr__(*args, **kwargs)

    def __str__(self) -> str:
        break_trace("prints a tensor")
        return _base(self).__str__()

    def __format__(self, spec: str) -> str:
        break_trace("formats a tensor")
        return _base(self).__format__(spec)

    @property
    def data(self):
        return _base(self).data

    @data.setter
    def data(self, value) -> None:
        break_trace("replaces a tensor's storage (.data = ...)")
        Tensor.data.fset(self, value)

    def backward(self, *args, **kwargs):
        break_trace("calls backward()")
        return _base(self).backward(*args, **kwargs)

    def detach(self):
        out = _base(self).detach()
        rec = state.tracer
        if isinstance(rec, Recorder):
            rec.method("detach", self, (), out)
        return out

    def retain_grad(self) -> None:
        rec = state.tracer
        if isinstance(rec, Recorder):
            rec.method("retain_grad", self, (), None)
        return _base(self).retain_grad()

    def register_hook(self, hook):
        rec = state.tracer
        if isinstance(rec, Recorder):
            rec.method("register_hook", self, (hook,), None)
        return _base(self).register_hook(hook)

    @property
    def shape(self):
        _shape_read()
        return _base(self).shape

    def size(self, dim=None):
        _shape_read()
        return _base(self).size(dim)

    def numel(self) -> int:
        _shape_read()
        return _base(self).numel()

    def __len__(self) -> int:
        _shape_read()
        return _base(self).__len__()


_TRACED: dict = {}
_INPLACE_DUNDERS = ("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__", "__ifloordiv__")


def _inplace(name: str):
    """An in-place method (``add_``, ``x[i] = v``, ``+=``): it may write the storage outside ``Function.apply``,
    so the trace stops there (the eager rest of the function does it right)."""

    def method(self, *args, **kwargs):
        break_trace(f"modifies a tensor in place ({name})")
        return getattr(_base(self), name)(*args, **kwargs)

    method.__name__ = name
    return method


def traced_class(cls: type) -> type:
    """The traced subclass of a tensor class (``Parameter`` stays a ``Parameter`` while traced)."""
    sub = _TRACED.get(cls)
    if sub is None:
        attrs = {}
        for name in dir(cls):
            inplace = (name.endswith("_") and not name.startswith("_")) or name in _INPLACE_DUNDERS
            method = getattr(cls, name, None)
            if getattr(method, "traces_inplace", False):  # a row's in-place form: see Recorder.rewrite_inplace
                continue
            if inplace and callable(method) and name not in vars(_TracedMixin):
                attrs[name] = _inplace(name)
        sub = _TRACED[cls] = type(f"Traced{cls.__name__}", (_TracedMixin, cls), attrs)
    return sub


_MODULE_STORES = ("_parameters", "_buffers", "_modules")


# --- constants reachable from the function --------------------------------------------------------------------
def _code_names(code, out: set) -> None:
    out.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_names(const, out)


#: Where library code lives (numbagrad's package, the standard library, installed packages): the Python values its
#: functions read are not the user's settings, and are not guarded.
_LIBRARY_DIRS = tuple(
    {_PACKAGE_DIR + os.sep}
    | {os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items() if k in ("stdlib", "purelib", "platlib")}
)
_MISSING = object()
_SCALARS = (int, float, complex, bool, str, bytes, type(None), np.generic)
_NOT_SETTINGS = (Tensor, Module, np.ndarray, type, types.FunctionType, types.MethodType, types.ModuleType)


def _guardable(value, depth: int = 0) -> bool:
    """A Python value a trace may read as a constant, cheap to compare at each call: a number, string or None, or
    a short tuple, list or dict of them."""
    if isinstance(value, _SCALARS):
        return True
    if depth >= 2:
        return False
    if type(value) in (tuple, list):
        return len(value) <= 32 and all(_guardable(v, depth + 1) for v in value)
    if type(value) is dict:
        return len(value) <= 32 and all(_guardable(v, depth + 1) for v in value.values())
    return False


class _Fields:
    """A settings object as a trace read it: the object, and a copy of its attribute dict."""

    __slots__ = ("obj", "fields")

    def __init__(self, obj) -> None:
        self.obj, self.fields = obj, dict(vars(obj))

    def holds(self, now) -> bool:
        return now is self.obj and vars(now) == self.fields


def _settings(value) -> bool:
    """An object whose attributes are all ``_guardable`` (a config: ``argparse.Namespace``, a dataclass of
    numbers), at most 32 of them."""
    if isinstance(value, _NOT_SETTINGS) or not hasattr(value, "__dict__"):
        return False
    fields = vars(value)
    return 0 < len(fields) <= 32 and all(_guardable(v, 1) for v in fields.values())


def _snapshot(value):
    """What ``values_changed`` compares a read value with later, or ``_MISSING`` for a value it does not guard: the
    value itself, a copy of a list or dict (its items may change in place), a settings object's fields."""
    if _guardable(value):
        return list(value) if type(value) is list else dict(value) if type(value) is dict else value
    return _Fields(value) if _settings(value) else _MISSING


def _user_code(fn: types.FunctionType) -> bool:
    return not os.path.abspath(fn.__code__.co_filename).startswith(_LIBRARY_DIRS)


def _global_names(code) -> set:
    """The names ``code`` reads as globals (``LOAD_GLOBAL``/``LOAD_NAME``), its nested code's included: not the
    attribute names that share ``co_names`` with them (``self.step`` is no read of a global ``step``)."""
    found = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _global_names(const)
    return found


def _read_values(fn: types.FunctionType, reads: list) -> None:
    """Append to ``reads`` a ``(holder, name, snapshot)`` for each global ``fn`` reads and each of its closure
    cells (name None) whose value ``_snapshot`` guards."""
    g = fn.__globals__
    for n in _global_names(fn.__code__):
        snapshot = _snapshot(g.get(n, _MISSING))
        if snapshot is not _MISSING:
            reads.append((g, n, snapshot))
    for cell in fn.__closure__ or ():
        try:
            snapshot = _snapshot(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
        if snapshot is not _MISSING:
            reads.append((cell, None, snapshot))


def values_changed(reads) -> bool:
    """Whether a value ``_read_values`` recorded is not what its global, closure cell or module attribute holds
    now (by identity, else by type and equality: a settings object's fields compare equal while they are)."""
    for holder, name, value in reads:
        if name is None:
            try:
                now = holder.cell_contents
            except ValueError:
                return True
        else:
            now = holder.get(name, _MISSING)
        if type(value) is _Fields:
            if not value.holds(now):
                return True
        elif now is not value and (type(now) is not type(value) or now != value):
            return True
    return False


def reachable_tensors(roots, limit: int = 20000, modules: list | None = None, reads: list | None = None) -> dict:
    """The tensors reachable from ``roots`` through closures, referenced globals, defaults, bound objects, modules
    (and the methods of their classes), containers and object attributes (a few levels deep), by id; the modules
    met are appended to ``modules``, and the Python values user code reads from globals and closures to ``reads``
    (``_read_values``)."""
    found: dict = {}
    seen: set = set()
    queue = deque((r, 0) for r in roots)
    while queue and len(seen) < limit:
        obj, depth = queue.popleft()
        if id(obj) in seen or obj is None:
            continue
        seen.add(id(obj))
        if isinstance(obj, Tensor):
            found[id(obj)] = obj
            continue
        if depth > 6 or isinstance(obj, (str, bytes, int, float, complex, bool, types.ModuleType, np.ndarray)):
            continue
        nxt = depth + 1
        if isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                try:
                    queue.append((cell.cell_contents, nxt))
                except ValueError:  # an empty cell
                    pass
            queue.extend((d, nxt) for d in obj.__defaults__ or ())
            queue.extend((d, nxt) for d in (obj.__kwdefaults__ or {}).values())
            names: set = set()
            _code_names(obj.__code__, names)
            g = obj.__globals__
            queue.extend((g[n], nxt) for n in names if n in g)
            if reads is not None and _user_code(obj):
                _read_values(obj, reads)
        elif isinstance(obj, types.MethodType):
            queue.append((obj.__self__, nxt))
            queue.append((obj.__func__, nxt))
        elif isinstance(obj, dict):
            queue.extend((v, nxt) for v in obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            queue.extend((v, nxt) for v in obj)
        elif isinstance(obj, type):
            if issubclass(obj, Function):
                queue.extend((v, nxt) for v in vars(obj).values() if isinstance(v, (staticmethod, classmethod)))
            continue
        elif isinstance(obj, (staticmethod, classmethod)):
            queue.append((obj.__func__, nxt))
        elif isinstance(obj, Module):
            if modules is not None:
                modules.append(obj)
            for cls in type(obj).__mro__:  # (its methods, which forward may call: the globals they read)
                if cls.__module__ != "builtins" and not cls.__module__.startswith("numbagrad."):
                    queue.extend(
                        (v, nxt)
                        for k, v in vars(cls).items()
                        if isinstance(v, types.FunctionType) and (k == "__call__" or not k.startswith("__"))
                    )
            # a module's parameters, buffers and children are as near as the module itself, however deeply
            # models nest (a block in a ModuleList in a Sequential): only its other attributes count a level
            for key, v in vars(obj).items():
                if key in _MODULE_STORES:
                    queue.extend((item, depth) for item in v.values())
                else:
                    queue.append((v, nxt))
                    if reads is not None and (type(v) is dict and _guardable(v) or _settings(v)):
                        reads.append((vars(obj), key, _snapshot(v)))  # (a config's items, compared at each call)
        elif hasattr(obj, "__dict__") and not callable(getattr(obj, "__func__", None)):
            queue.extend((v, nxt) for v in vars(obj).values())
    return found


class _Creation:
    """A creation function as a plan step: ``apply`` calls it (a fresh tensor at every replay)."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.__name__ = fn.__name__

    def apply(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class _InPlaceWithoutGrad:
    """An in-place row applied under ``no_grad`` to a value that requires grad, as a plan step: eagerly its values
    change and it keeps its node (``norm.clamp_(min=eps)`` in ``cosine_similarity``, whose gradient is the
    unclamped norm's), so a replay makes the same in-place call rather than a new, graph-less value."""

    __name__ = "in-place without grad"

    def __init__(self, write) -> None:
        self.write = write  # write(t, *args, **kwargs): the in-place call on t

    def apply(self, t, *args, **kwargs):
        return self.write(t, *args, **kwargs)


def _constants(template) -> list:
    """The constant tensors in a template (see ``Recorder.template``)."""
    found: list = []
    stack = [template]
    while stack:
        t = stack.pop()
        kind = t[0]
        if kind == "const":
            if isinstance(t[1], Tensor):
                found.append(t[1])
        elif kind in ("tuple", "list"):
            stack.extend(t[1])
        elif kind == "named":
            stack.extend(t[2])
        elif kind == "dict":
            stack.extend(v for _, v in t[1])
    return found


def _is_array(obj) -> bool:
    return isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__")


def _overlap(a, b) -> bool:
    """Whether the arrays ``a`` and ``b`` (host or device) may share memory."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.may_share_memory(a, b)
    spans = []
    for x in (a, b):
        interface = x.__cuda_array_interface__
        start = interface["data"][0]
        size = max(int(np.prod(interface["shape"])), 1) * np.dtype(interface["typestr"]).itemsize
        spans.append((start, start + size))
    return spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]


# --- the recorder ---------------------------------------------------------------------------------------------
class Recorder:
    """The tracer in ``state.tracer`` while a function is traced."""

    def __init__(self, roots, fullgraph: bool) -> None:
        self.roots = roots
        self.fullgraph = fullgraph
        self.values: list[Value] = []
        self.value_of: dict = {}  # id(tensor) -> value index (its latest version)
        self.keep: list = []  # every tensor seen, alive until the end (ids stay unique)
        self.original: dict = {}  # id(tensor) -> (tensor, its class before tracing)
        self.steps: list = []
        self.shared_ids: set = set()  # id() of the inputs and of detached tensors: storage the caller can see
        self.external: set = set()
        self.broken: tuple | None = None  # (reason, location)
        self.shape_reads = False
        self.grad_mode = state.enabled
        # the constants a replay may read (parameters, buffers, captured tensors), and the version each had when
        # the trace last saw it: one written in place other than by a recorded op breaks the trace (see _check)
        self.modules: list = []  # the modules reachable from the roots (what a replay reads of them may change)
        self.reads: list = []  # the Python values user code may read from globals and closures (``_read_values``)
        self._known: dict = reachable_tensors(roots, modules=self.modules, reads=self.reads)
        self._versions: dict = {key: t._version for key, t in self._known.items()}

    # values
    def _new_value(self, t: Tensor) -> int:
        data = t._data
        self.values.append(Value(tuple(data.shape), np.dtype(data.dtype), not isinstance(data, np.ndarray)))
        index = len(self.values) - 1
        self.value_of[id(t)] = index
        self.keep.append(t)
        if id(t) not in self.original:
            cls = type(t)
            self.original[id(t)] = (t, cls)
            t.__class__ = traced_class(cls)
        return index

    def input(self, t: Tensor) -> int:
        self.shared_ids.add(id(t))
        return self._new_value(t)

    def constant(self, t: Tensor) -> None:
        """Take ``t`` (a library's cached tensor, never written: ``grad_mode.trace_constant``) as a constant."""
        if id(t) not in self.value_of:
            self._known[id(t)] = t
            self._versions[id(t)] = t._version

    def _known_constant(self, t: Tensor) -> bool:
        return id(t) in self._known

    def _written_constants(self, tensors) -> list:
        """Those of ``tensors`` that are constants written in place since the trace last saw them."""
        versions = self._versions
        return [t for t in tensors if versions.get(id(t), t._version) != t._version]

    def _check(self, tensors) -> None:
        """Break the trace if a constant was updated in place by untraced code (``buf.add_(1)`` on a buffer): the
        replay would skip that update. Writes made inside a recorded op (batch norm's running statistics) are
        replayed with the op, and the op's constants are seen again after it (``_seen``)."""
        written = self._written_constants(tensors)
        if written:
            t = written[0]
            self.graph_break(
                "updates a parameter, buffer or captured tensor in place outside a traced op (one of shape "
                f"{tuple(t.shape)} and dtype {t.dtype})"
            )

    def _stores_traced(self) -> bool:
        """Whether a tensor the trace follows became reachable from the roots while it ran (``self.last = h``,
        ``cache.append(h)``): a side effect each call makes, that a replay would skip."""
        known, traced = self._known, self.value_of
        return any(key in traced and key not in known for key in reachable_tensors(self.roots))

    def _seen(self, tensors) -> None:
        versions = self._versions
        for t in tensors:
            if id(t) in versions:
                versions[id(t)] = t._version

    def template(self, obj, where: str):
        """A template of ``obj``: ``("val", i)`` for a traced tensor, ``("const", obj)`` for anything read as it
        is, ``("tuple"|"list", [...])``, ``("dict", [(key, t), ...])``, ``("named", cls, [...])``; None (after a
        graph break) when ``obj`` holds a tensor that is neither traced nor a reachable constant."""
        if isinstance(obj, Tensor):
            index = self.value_of.get(id(obj))
            if index is not None:
                return ("val", index)
            if self._known_constant(obj):
                self.keep.append(obj)
                return ("const", obj)
            self.graph_break(f"{where} reads a tensor made inside the compiled function by code that is not traced")
            return None
        if type(obj) in (tuple, list):
            items = [self.template(o, where) for o in obj]
            return None if None in items else ("tuple" if type(obj) is tuple else "list", items)
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            items = [self.template(o, where) for o in obj]
            return None if None in items else ("named", type(obj), items)
        if type(obj) is dict:
            items = [(k, self.template(v, where)) for k, v in obj.items()]
            return None if any(t is None for _, t in items) else ("dict", items)
        if self._holds_traced_storage(obj):
            self.graph_break(
                f"{where} reads the storage of a tensor the trace follows outside the tensor (a replay would read "
                "the first call's values)"
            )
            return None
        return ("const", obj)

    def _holds_traced_storage(self, obj) -> bool:
        """Whether ``obj``, an argument that is not a tensor, is or holds (as an attribute) an array sharing memory
        with a tensor the trace follows: an op handed ``x._data`` would replay with the first call's values."""
        arrays = [obj] if _is_array(obj) else [v for v in getattr(obj, "__dict__", {}).values() if _is_array(v)]
        if not arrays:
            return False
        traced = [t._data for t, _ in self.original.values() if id(t) in self.value_of]
        return any(_overlap(a, d) for a in arrays for d in traced)

    def output(self, obj, where: str):
        """Register an op's result: each tensor becomes a new value (a new version, if it was traced already)."""
        if isinstance(obj, Tensor):
            return ("val", self._new_value(obj))
        if obj is None:
            return ("const", None)
        if type(obj) is tuple:
            items = [self.output(o, where) for o in obj]
            return None if None in items else ("tuple", items)
        self.graph_break(f"{where} returned a {type(obj).__name__}, which numbagrad.compile cannot follow")
        return None

    # the hooks Function.apply and the creation functions call
    def creation(self, fn, args: tuple, kwargs: dict):
        """``zeros``, ``arange``, ``randn``... called by traced code: recorded as a step that calls it again."""
        return self(_Creation(fn), args, kwargs)

    def __call__(self, cls, args, kwargs):
        where = f"{cls.__name__}.apply"
        args_t = self.template(tuple(args), where)
        kwargs_t = self.template(dict(kwargs), where) if kwargs else None
        if self.broken is not None:
            return cls.apply(*args, **kwargs)
        constants = _constants(args_t) + (_constants(kwargs_t) if kwargs_t is not None else [])
        if constants:
            self._check(constants)
            if self.broken is not None:
                return cls.apply(*args, **kwargs)
        mode = state.enabled
        plain = self._unmark(args)
        state.tracer = None
        try:
            out = cls.apply(*args, **kwargs)
        finally:
            state.tracer = self
            self._remark(plain)
        if constants:
            self._seen(constants)
        out_t = self.output(out, where)
        if out_t is not None:
            self.steps.append(OpStep(cls, args_t, kwargs_t, out_t, mode))
        return out

    def rewrite_inplace(self, t: Tensor, compute, redo=None) -> Tensor | None:
        """A table row applied in place (``relu_``, ``nn.ReLU(inplace=True)``) to a value the trace made: recorded
        as ``compute(t)``, the row out of place, whose result is the value's new version; ``t`` is written as
        eagerly. None (nothing done) for a tensor the trace does not follow. An input, a view or a tensor with
        views shares its storage with tensors a replay would not update, so changing one breaks the trace, as
        does an in-place comparison (``compute`` None). Under ``no_grad``, on a value that requires grad, the
        in-place call itself is recorded (``redo``: ``(write, args, kwargs)``) and None returned: the eager path
        writes ``t``, which keeps its node."""
        index = self.value_of.get(id(t))
        if index is None or self.broken is not None:
            return None
        if not state.enabled and (t._requires_grad or t.grad_fn is not None):
            if redo is None:
                self.graph_break("modifies in place, under no_grad, a tensor that requires grad")
                return None
            write, args, kwargs = redo
            where = "an in-place call under no_grad"
            args_t = self.template(tuple(args), where)
            kwargs_t = self.template(dict(kwargs), where) if kwargs else None
            if self.broken is None:
                step_args = ("tuple", [("val", index), *args_t[1]])
                self.steps.append(OpStep(_InPlaceWithoutGrad(write), step_args, kwargs_t, ("val", index), False))
            return None
        data = t._data
        shared = (
            id(t) in self.shared_ids
            or t._base is not None
            or any(r() is not None for r in t._views or ())
            or (isinstance(data, np.ndarray) and self._aliased(t))
        )
        if compute is None or shared:
            self.graph_break("modifies in place a tensor whose storage other tensors share (an input or a view)")
            return None
        # the row reads a copy standing for the same value, as eagerly (what it saves for backward is not the
        # tensor written next)
        old = Tensor._make(t._backend.copy(t._data))
        old.grad_fn, old._output_nr, old._requires_grad = t.grad_fn, t._output_nr, t._requires_grad
        self.value_of[id(old)] = index
        self.keep.append(old)
        out = compute(old)
        new = self.value_of.get(id(out)) if self.broken is None else None
        if new is None:  # (the op itself broke the trace: the eager in-place path does the write)
            return None
        state.tracer = None
        try:
            rebase(t, lambda old: out)
        finally:
            state.tracer = self
        self.value_of[id(t)] = new
        return t

    def _aliased(self, t: Tensor) -> bool:
        """Whether another tensor the trace saw, or a constant, may share ``t``'s (host) memory."""
        data = t._data
        others = [*self.keep, *self._known.values()]
        return any(
            o is not t and isinstance(o._data, np.ndarray) and np.may_share_memory(data, o._data) for o in others
        )

    def method(self, name: str, t: Tensor, args: tuple, out) -> None:
        index = self.value_of.get(id(t))
        if index is None or self.broken is not None:
            return
        out_t = None
        if out is not None:
            state.tracer = None
            try:
                out_t = ("val", self._new_value(out))
            finally:
                state.tracer = self
            self.shared_ids.add(id(out))
        self.external.add(index)
        self.steps.append(MethodStep(name, index, tuple(("const", a) for a in args), out_t, state.enabled))

    def _unmark(self, args) -> list:
        """Traced tensors passed to an op get their own class back while it runs (ops may test ``type(x)``)."""
        plain = []
        for a in args:
            items = a if type(a) in (list, tuple) else (a,)
            for t in items:
                entry = self.original.get(id(t)) if isinstance(t, Tensor) else None
                if entry is not None and entry[0] is t and type(t) is not entry[1]:
                    t.__class__ = entry[1]
                    plain.append(t)
        return plain

    def _remark(self, plain: list) -> None:
        if self.broken is None:
            for t in plain:
                t.__class__ = traced_class(type(t))

    def graph_break(self, reason: str) -> None:
        """Stop tracing: the rest of the function runs eagerly (or, with fullgraph=True, raise)."""
        if self.broken is not None:
            return
        location = user_location()
        self.broken = (reason, location)
        state.tracer = None
        self.restore()
        if self.fullgraph:
            raise GraphBreakError(
                f"numbagrad.compile(fullgraph=True): cannot trace the function: it {reason}, at {location}"
            )

    def restore(self) -> None:
        """Every traced tensor gets its own class back."""
        for t, cls in self.original.values():
            if type(t) is not cls:
                t.__class__ = cls
        self.original = {}

    def finish(self, inputs: list, out) -> Trace | None:
        """The trace, or None after a graph break."""
        if self.broken is None:
            self._check(self._known.values())  # (a write after the last read of it)
        if self.broken is None and self._stores_traced():
            self.graph_break(
                "keeps a tensor it computed where a later call could read it (a module attribute, a list or a dict "
                "outside the function), which a replay would not update"
            )
        if self.broken is not None:
            return None
        out_t = self.template(out, "the function's result")
        if out_t is None:
            return None
        return Trace(self.values, inputs, self.steps, out_t, self.grad_mode, self.external)
