"""From a trace to a plan: fusion groups, and a replay function that runs the plan without Python tracing.

A group is a maximal run of consecutive recorded table rows (same grad mode and device, portable scalar functions,
broadcast-compatible shapes), closed by an optional ``sum``/``mean``/``amax`` of one of its values. Within a run,
a value smaller than the run's iteration shape that is needed outside it is computed by its own group first (rows
have no side effects, so they may move up within their run). Every other recorded op (matmul, shape, indexing)
replays with its own ``apply``, between groups; a user's custom Function replays its compiled twin (given as
``function_class``: ``_function.compiled_twin``), whose forward and backward run their own plans.

The replay function is generated Python: one line per group or op, guard checks done by the caller. Building it
and the groups is the whole compile step in Python; kernels compile (or load from Numba's disk cache) on their
first launch.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..autograd.grad_mode import state
from ..backend import codegen
from ..scalar_math import Row
from ._group import Group
from ._kernels import NUMBA_TYPES, KNode, Reduction
from ._neighbours import fuse_neighbours
from ._trace import MethodStep, OpStep, Trace

_SUM = ("SumBackward0", "SumBackward1")
_MEAN = ("MeanBackward0", "MeanBackward1")
_AMAX = ("AmaxBackward0", "MaxBackward1")


_NOT_LITERAL = object()


def _literal(t):
    """The Python value of a template made of constants only (``_NOT_LITERAL`` if it holds a traced value)."""
    if t[0] == "const":
        return t[1]
    if t[0] in ("tuple", "list"):
        items = [_literal(x) for x in t[1]]
        if any(i is _NOT_LITERAL for i in items):
            return _NOT_LITERAL
        return tuple(items) if t[0] == "tuple" else items
    return _NOT_LITERAL


def _is_number(t) -> bool:
    return t[0] == "const" and isinstance(t[1], numbers.Real) and not isinstance(t[1], np.ndarray)


def _portable(row: Row) -> bool:
    """Whether the row's scalar functions, with the module-level helpers they call (``power``), can be copied
    into a fused kernel's source."""
    return codegen.copyable([row.forward, *row.grads]) is not None


class _Row:
    """A recorded op step that is a table row (with the facts fusion needs)."""

    def __init__(self, index: int, step: OpStep, row: Row, out: int) -> None:
        self.index, self.step, self.row, self.out = index, step, row, out
        self.inputs = step.args[1][: row.arity]
        self.params = step.args[1][row.arity :]


def _classify(index: int, step, values) -> object:
    """A ``_Row``, ``("red", kind, x, axes, keepdim, out)`` for a closing-reduction candidate, or None."""
    if not isinstance(step, OpStep) or step.kwargs or step.out[0] != "val":
        return None
    out = step.out[1]
    info = values[out]
    if np.dtype(info.dtype) not in NUMBA_TYPES:
        return None
    cls, args = step.cls, step.args[1]
    row = getattr(cls, "row", None)
    if isinstance(row, Row):
        if not row.differentiable or row.out_bool or row.integral_only:  # fused groups carry gradients: rows
            return None  # without one (comparisons, predicates, bitwise ops) run eagerly between groups
        if len(args) != row.arity + len(row.params) or not _portable(row):
            return None
        for a in args[: row.arity]:
            if a[0] == "val":
                v = values[a[1]]
                if v.is_cuda != info.is_cuda or np.dtype(v.dtype) not in NUMBA_TYPES:
                    return None
            elif a[0] == "const" and hasattr(a[1], "_data"):
                data = a[1]._data
                if (not isinstance(data, np.ndarray)) != info.is_cuda or np.dtype(data.dtype) not in NUMBA_TYPES:
                    return None
            elif not _is_number(a):
                return None
        if not all(_is_number(p) for p in args[row.arity :]):
            return None
        return _Row(index, step, row, out)
    name = getattr(cls, "node_name", None)
    if name in _SUM + _MEAN + _AMAX and len(args) >= 3 and args[0][0] == "val":
        x = values[args[0][1]]
        axes, keepdim = _literal(args[1]), _literal(args[2])
        if not isinstance(keepdim, bool):
            return None
        if axes is not None and not (isinstance(axes, tuple) and all(isinstance(a, int) for a in axes)):
            return None
        if np.dtype(x.dtype).kind != "f" or np.dtype(info.dtype) != np.dtype(x.dtype) or x.is_cuda != info.is_cuda:
            return None
        if name in _SUM:
            if len(args) != 4 or _literal(args[3]) is _NOT_LITERAL or np.dtype(args[3][1]) != np.dtype(x.dtype):
                return None
            kind = "sum"
        elif len(args) != 3:
            return None
        else:
            kind = "mean" if name in _MEAN else "amax"
        return ("red", kind, args[0][1], axes, keepdim, out)
    return None


def values_in(t, found: set) -> set:
    """``found`` with the value of every ``("val", i)`` inside the template ``t`` added."""
    if t is None:
        return found
    kind = t[0]
    if kind == "val":
        found.add(t[1])
    elif kind in ("tuple", "list"):
        for item in t[1]:
            values_in(item, found)
    elif kind == "named":
        for item in t[2]:
            values_in(item, found)
    elif kind == "dict":
        for _, item in t[1]:
            values_in(item, found)
    return found


def _uses(trace: Trace) -> dict:
    """value -> indices of the steps reading it (-1: the function's result or a method step's effect)."""
    uses: dict = {}

    def walk(t, who):
        for v in values_in(t, set()):
            uses.setdefault(v, set()).add(who)

    for i, step in enumerate(trace.steps):
        if isinstance(step, OpStep):
            walk(step.args, i)
            if step.kwargs:
                walk(step.kwargs, i)
        else:
            uses.setdefault(step.target, set()).add(i)
    walk(trace.out, -1)
    for v in trace.external:
        uses.setdefault(v, set()).add(-1)
    return uses


def _without_unused_rows(trace: Trace) -> list:
    """The trace's steps less the table rows whose result nothing reads (the range check ``binary_cross_entropy``
    computes on the side): rows have no side effects, so a replay need not run them."""
    uses = _uses(trace)
    steps = list(trace.steps)
    dead: set = set()
    for i in range(len(steps) - 1, -1, -1):
        step = steps[i]
        if (
            isinstance(step, OpStep)
            and isinstance(getattr(step.cls, "row", None), Row)
            and step.out[0] == "val"
            and uses.get(step.out[1], set()) <= dead
        ):
            dead.add(i)
    return [s for i, s in enumerate(steps) if i not in dead]


def _split(rows: list, values, uses) -> list:
    """Partition one run of rows into groups that each iterate over one shape (see the module docstring)."""
    if not rows:
        return []
    shape = None
    for k, r in enumerate(rows):
        out_shape = values[r.out].shape
        try:
            shape = out_shape if shape is None else tuple(np.broadcast_shapes(shape, out_shape))
        except ValueError:
            return _split(rows[:k], values, uses) + _split(rows[k:], values, uses)
    members = {r.index for r in rows}
    produced = {r.out: r for r in rows}
    leaving = {r.out for r in rows if any(u not in members for u in uses.get(r.out, ()))}
    for k, r in enumerate(rows):
        if r.step.grad_mode and any(a[0] == "val" and a[1] in leaving and a[1] in produced for a in r.inputs):
            # a value that leaves the group is read again by a later row: cut there, so that the gradient
            # reaching the value (what its hooks and retain_grad see) includes what flows back from that row
            # (without grad mode, as in a custom Function's forward, no gradient flows: no cut)
            return _split(rows[:k], values, uses) + _split(rows[k:], values, uses)
    small = [r for r in rows if values[r.out].shape != shape and any(u not in members for u in uses.get(r.out, ()))]
    if not small:
        return [(rows, shape)]
    moved, stack = set(), list(small)
    while stack:
        r = stack.pop()
        if r.index in moved:
            continue
        moved.add(r.index)
        for a in r.inputs:
            if a[0] == "val" and a[1] in produced:
                stack.append(produced[a[1]])
    first = [r for r in rows if r.index in moved]
    rest = [r for r in rows if r.index not in moved]
    return _split(first, values, uses) + _split(rest, values, uses)


class _GroupItem:
    """A group in the plan: the group, its input templates, and the values it defines."""

    def __init__(self, group: Group, inputs: list, outs: list, grad_mode: bool) -> None:
        self.group, self.inputs, self.outs, self.grad_mode = group, inputs, outs, grad_mode


def _build_group(rows: list, shape: tuple, red, values, uses, label: str) -> _GroupItem:
    """The ``Group`` for ``rows`` (and the closing reduction ``red``, or None)."""
    members = {r.index for r in rows} | ({red[0]} if red else set())
    node_of: dict = {}
    inputs: list = []  # templates
    input_key: dict = {}
    scalars: list = []
    nodes, eager = [], []
    is_cuda = values[rows[0].out].is_cuda

    def input_ref(t):
        key = ("v", t[1]) if t[0] == "val" else ("c", id(t[1]))
        if key not in input_key:
            input_key[key] = len(inputs)
            inputs.append(t)
        return ("i", input_key[key])

    for r in rows:
        dtype = np.dtype(values[r.out].dtype)
        refs, lits = [], []
        for a in list(r.inputs) + list(r.params):
            if a[0] == "val" and a[1] in node_of:
                refs.append(("v", node_of[a[1]]))
                lits.append(("v", node_of[a[1]]))
            elif a[0] == "val" or (a[0] == "const" and hasattr(a[1], "_data")):
                ref = input_ref(a)
                refs.append(ref)
                lits.append(ref)
            else:
                scalars.append(dtype.type(a[1]))
                refs.append(("s", len(scalars) - 1))
                lits.append(("lit", a[1]))
        node_of[r.out] = len(nodes)
        nodes.append(KNode(r.row, tuple(refs), dtype))
        eager.append((r.step.cls, lits))
    outputs = tuple(node_of[r.out] for r in rows if any(u not in members for u in uses.get(r.out, ())))
    reduction = red_info = None
    outs = [rows[j].out for j in outputs]  # node j is rows[j]
    if red is not None:
        step_index, kind, x, axes, keepdim, out, step = red
        ndim = len(shape)
        full = axes is None or len(set(axes)) == ndim
        reduction = Reduction(kind, node_of[x], tuple(range(ndim)) if axes is None else tuple(axes), full)
        red_info = (np.dtype(values[out].dtype), keepdim)
        eager.append((step.cls, [("v", node_of[x])] + [("lit", _literal(a)) for a in step.args[1][1:]]))
        outs.append(out)
    input_dtypes = []
    input_full = []
    numel = int(np.prod(shape)) if shape else 1
    for t in inputs:
        if t[0] == "val":
            v = values[t[1]]
            input_dtypes.append(v.dtype)
            input_full.append(int(np.prod(v.shape)) == numel and numel > 1)
        else:
            input_dtypes.append(t[1]._data.dtype)
            input_full.append(int(np.prod(t[1]._data.shape)) == numel and numel > 1)
    group = Group(nodes, input_dtypes, scalars, outputs, reduction, red_info, eager, is_cuda, label)
    group.input_full = tuple(input_full)
    return _GroupItem(group, inputs, outs, rows[0].step.grad_mode)


class Plan:
    """A traced function, ready to replay: ``plan(*tensors)`` runs it on new inputs of the same guard key."""

    def __init__(self, trace: Trace, function_class=None) -> None:
        self.trace = trace
        # what a custom Function the traced code called replays as (``_function.compiled_twin``), or itself
        self.function_class = function_class
        self.groups: list[Group] = []
        self.items = self._partition(trace)
        self.source, self.replay = self._generate()

    def __call__(self, *inputs):
        return self.replay(*inputs)

    def _partition(self, trace: Trace) -> list:
        trace.steps = _without_unused_rows(trace)
        values = trace.values
        uses = _uses(trace)
        trace.steps = fuse_neighbours(trace, uses, lambda i: isinstance(_classify(i, trace.steps[i], values), _Row))
        steps = trace.steps
        uses = _uses(trace)
        kinds = [_classify(i, s, values) for i, s in enumerate(steps)]
        items, i = [], 0
        while i < len(steps):
            first = kinds[i]
            if not isinstance(first, _Row):
                items.append(steps[i])
                i += 1
                continue
            mode, cuda = steps[i].grad_mode, values[first.out].is_cuda
            run = []
            while (
                i < len(steps)
                and isinstance(kinds[i], _Row)
                and steps[i].grad_mode == mode
                and values[kinds[i].out].is_cuda == cuda
            ):
                run.append(kinds[i])
                i += 1
            red = None
            k = kinds[i] if i < len(steps) else None
            if isinstance(k, tuple) and steps[i].grad_mode == mode and any(r.out == k[2] for r in run):
                red = (i, k[1], k[2], k[3], k[4], k[5], steps[i])
            groups = _split(run, values, uses)
            closing = None
            if red is not None:
                last_rows, last_shape = groups[-1]
                inside = {r.index for r in last_rows} | {red[0]}
                if (
                    any(r.out == red[2] for r in last_rows)
                    and values[red[2]].shape == last_shape
                    and uses.get(red[2], set()) <= inside
                ):
                    closing = red
                    i += 1
            for n, (rows, shape) in enumerate(groups):
                label = f"g{len(self.groups)}"
                item = _build_group(rows, shape, closing if n == len(groups) - 1 else None, values, uses, label)
                self.groups.append(item.group)
                items.append(item)
        return items

    def _generate(self):
        """Python source of the replay function, and the function."""
        names: dict = {}
        namespace: dict = {"_state": state}

        def const(obj) -> str:
            key = id(obj)
            if key not in names:
                names[key] = f"C{len(names)}"
                namespace[names[key]] = obj
            return names[key]

        def expr(t) -> str:
            kind = t[0]
            if kind == "val":
                return f"v{t[1]}"
            if kind == "const":
                obj = t[1]
                if obj is None or isinstance(obj, (bool, int, str)) and not isinstance(obj, np.generic):
                    return repr(obj)
                return const(obj)
            if kind == "tuple":
                return "(" + "".join(expr(x) + ", " for x in t[1]) + ")"
            if kind == "list":
                return "[" + ", ".join(expr(x) for x in t[1]) + "]"
            if kind == "named":
                return const(t[1]) + "(" + ", ".join(expr(x) for x in t[2]) + ")"
            if kind == "dict":
                return "{" + ", ".join(f"{const(k)}: {expr(v)}" for k, v in t[1]) + "}"
            raise AssertionError(kind)

        def target(t) -> str:
            """Assignment target for an op's output template."""
            kind = t[0]
            if kind == "val":
                return f"v{t[1]}"
            if kind == "const":
                return "_"
            return "(" + "".join(target(x) + ", " for x in t[1]) + ")"

        trace = self.trace
        params = ", ".join(f"v{v}" for v in trace.inputs)
        body = []
        current = trace.grad_mode
        for item in self.items:
            if item.grad_mode != current:  # a no_grad()/enable_grad() block inside the function
                body.append(f"_state.enabled = {item.grad_mode}")
                current = item.grad_mode
            if isinstance(item, _GroupItem):
                outs = "".join(f"v{v}, " for v in item.outs)
                args = ", ".join(expr(t) for t in item.inputs)
                body.append(f"({outs}) = {const(item.group)}.run({args})")
            elif isinstance(item, OpStep):
                call = ", ".join(expr(a) for a in item.args[1])
                if item.kwargs:
                    call += "".join(f", **{{{const(k)}: {expr(v)}}}" for k, v in item.kwargs[1])
                cls = item.cls if self.function_class is None else self.function_class(item.cls)
                body.append(f"{target(item.out)} = {const(cls)}.apply({call})")
            elif isinstance(item, MethodStep):
                call = ", ".join(expr(a) for a in item.args)
                line = f"v{item.target}.{item.name}({call})"
                body.append(f"{target(item.out)} = {line}" if item.out is not None else line)
        body.append(f"return {expr(trace.out)}")
        source = f"def replay({params}):\n"
        modes = [line for line in body if line.startswith("_state.enabled")]
        if modes:
            source += "    _mode = _state.enabled\n    try:\n"
            source += "".join(f"        {line}\n" for line in body)
            source += "    finally:\n        _state.enabled = _mode\n"
        else:
            source += "".join(f"    {line}\n" for line in body)
        exec(compile(source, "<numbagrad.compile replay>", "exec"), namespace)  # noqa: S102 - generated here
        return source, namespace["replay"]
