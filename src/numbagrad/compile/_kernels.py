"""Source of a fusion group's kernels: one forward, one backward (plus a tie count for ``amax``, and a finishing
kernel for reductions on CUDA), generated for one target by ``backend.codegen``.

The iteration space is the group's broadcast shape, collapsed by ``backend.layout.collapse`` (as the eager
kernels' is): size-1 dims dropped and adjacent dims merged where every operand is either full in both or broadcast
in both. Each array operand then has a *mask*, one
flag per collapsed dim (full or broadcast), baked into the source; the sizes ``d0, d1, ...`` are arguments, so one
kernel serves every shape with the same broadcast pattern. Operands are C-contiguous, so an operand's stride in a
collapsed dim is the product of the later sizes it is full in, and broadcast operands are read unconditionally at
stride 0 (a branch on a stride-0 operand once cost 40x).

CPU kernels loop over dim 0 (``prange`` for the parallel target) with the other dims as nested loops in the body;
CUDA kernels run a grid-stride loop over all elements and split the flat index with ``%`` and ``//``.

Names in generated code: inputs ``a<k>``, scalar arguments ``s<k>``, outputs ``o<m>``, saved values ``sv<j>``,
reduction result or accumulator ``r`` (with ``rn``, the NaN count of ``amax``), incoming gradients ``go<m>`` and
``gr``, the forward maximum and its tie count ``rm``/``rc``, input gradients ``ga<k>``; locals start with ``_``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backend import codegen
from ..scalar_math import select

NUMBA_TYPES = {
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
    np.dtype(np.int64): "int64",
    np.dtype(np.int32): "int32",
    np.dtype(np.int16): "int16",
    np.dtype(np.int8): "int8",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.bool_): "bool",
}


@dataclass(frozen=True)
class KNode:
    """What the generator needs of one row in a group."""

    row: object  # scalar_math.Row
    args: tuple  # per tensor input then per param: ("i", k) input, ("s", k) scalar, ("v", j) node
    dtype: np.dtype

    @property
    def arity(self) -> int:
        return self.row.arity


@dataclass(frozen=True)
class Reduction:
    kind: str  # "sum", "mean" or "amax"
    node: int  # the node reduced
    axes: tuple  # reduced dims of the group's (uncollapsed) shape
    full: bool  # all dims reduced


# --- iteration space ----------------------------------------------------------------------------------------
class _Space:
    """Offsets of each operand inside the loop nest of one target, over the collapsed dims of
    ``backend.layout.collapse`` (CUDA's flat loop reads operands as the eager CUDA kernels do: ``codegen.unravel``
    and ``codegen.flat_offset``)."""

    def __init__(self, target: str, masks: dict) -> None:
        self.target = target
        self.masks = masks
        self.rank = len(next(iter(masks.values()))) if masks else 1

    def offset(self, name: str) -> str:
        mask = self.masks[name]
        if self.rank == 1:
            return "i" if mask[0] else "0"
        if self.target == "cuda":
            return codegen.flat_offset(mask)
        last = self.rank - 1
        return f"_o{name}_{last - 1}" + (f" + _j{last}" if mask[last] else "")

    def wrap(self, statements: list[str]) -> tuple[str, str]:
        """(body, n) for ``loop_source``: the statements inside the target's loop nest."""
        if self.rank == 1:
            return "\n".join(statements), ("_n" if self.target == "cuda" else "d0")
        if self.target == "cuda":
            return "\n".join(codegen.unravel(self.rank) + statements), "_n"
        lines, indent = [], ""
        names = sorted(self.masks)
        for k in range(self.rank - 1):
            index = "i" if k == 0 else f"_j{k}"
            if k > 0:
                lines.append(f"{indent}for _j{k} in range(d{k}):")
                indent += "    "
            for name in names:
                mask = self.masks[name]
                base = f"_o{name}_{k - 1} + " if k > 0 else ""
                step = f"{index}*{codegen.dim_stride(mask, k)}" if mask[k] else ""
                expr = (base + step) if step else (f"_o{name}_{k - 1}" if k > 0 else "0")
                lines.append(f"{indent}_o{name}_{k} = {expr}")
        last = self.rank - 1
        lines.append(f"{indent}for _j{last} in range(d{last}):")
        indent += "    "
        lines += [indent + s for s in statements]
        return "\n".join(lines), "d0"


def _size_args(rank: int, target: str) -> list[str]:
    return [f"d{k}" for k in range(rank)] + (["_n"] if target == "cuda" else [])


# --- scalar functions -----------------------------------------------------------------------------------------
def _own_functions(nodes) -> list:
    """The scalar functions the group's rows declare, each once."""
    fns, seen = [], set()
    for node in nodes:
        for fn in (node.row.forward, *node.row.grads):
            if id(fn) not in seen:
                seen.add(id(fn))
                fns.append(fn)
    return fns


def row_functions(nodes) -> list:
    """The scalar functions the group's rows use (``select`` first), each once, and the module-level helpers they
    call (``power``)."""
    fns = [select, *_own_functions(nodes)]
    return codegen.copyable(fns) or fns


_SINGLE = np.dtype(np.float32)


def single_functions(nodes, target: str) -> list:
    """The scalar functions of float32 rows, which CPU kernels call as float32 twins (``<name>_f32``, all
    arithmetic in float32: 16 lanes, and the float32 exp)."""
    if target == "cuda":
        return []
    return _own_functions([node for node in nodes if node.dtype == _SINGLE])


def functions_source(fns, target: str, single=()) -> str:
    """The module-level functions ``fns`` as source, each decorated for ``target`` (an ``@njit`` inlined into its
    callers on the CPU, with the vectorizable ``exp``/``tanh``, and float32 twins of ``single``; a
    ``@cuda.jit(device=True)`` function on CUDA)."""
    # inline='always' inlines at Numba's IR level: the scalar functions are not compiled on their own, which
    # halves a fused kernel's cold compile (0.4 s on the CPU against 0.75) and lets LLVM if-convert and vectorize
    # the body
    if target == "cuda":
        return codegen.functions_source(fns, target) + "\n"
    return codegen.functions_source(fns, target, inline="always", vector=True, single=single) + "\n"


def header(target: str) -> str:
    """The imports a generated module for ``target`` starts with (the generator's, plus the casts)."""
    return codegen.header(target) + "from numba import float32, float64, int32, int64, int8, int16, uint8\n\n"


def _functions(nodes, target: str) -> str:
    return functions_source(row_functions(nodes), target, single=single_functions(nodes, target))


def call_name(fn, dtype: np.dtype, target: str) -> str:
    """The name a kernel calls a row's scalar function by: its float32 twin in float32 CPU rows."""
    return f"{fn.__name__}_f32" if dtype == _SINGLE and target != "cuda" else fn.__name__


def _cast(expr: str, dtype: np.dtype) -> str:
    return f"{NUMBA_TYPES[np.dtype(dtype)]}({expr})"


class _Values:
    """How to name values in the generated body: inputs, scalars, nodes."""

    def __init__(self, nodes, input_dtypes, scalar_dtypes, target: str) -> None:
        self.nodes = nodes
        self.input_dtypes = input_dtypes
        self.scalar_dtypes = scalar_dtypes
        self.target = target

    def name(self, ref) -> str:
        kind, k = ref
        return {"i": f"_x{k}", "s": f"s{k}", "v": f"_v{k}"}[kind]

    def dtype(self, ref) -> np.dtype:
        kind, k = ref
        if kind == "i":
            return self.input_dtypes[k]
        if kind == "s":
            return self.scalar_dtypes[k]
        return self.nodes[k].dtype

    def arg(self, ref, dtype) -> str:
        """``ref`` as an argument of a row computing in ``dtype`` (cast as the eager op casts its operands)."""
        name = self.name(ref)
        return name if self.dtype(ref) == dtype else _cast(name, dtype)

    def compute(self, j: int) -> str:
        node = self.nodes[j]
        args = ", ".join(self.arg(a, node.dtype) for a in node.args)
        call = call_name(node.row.forward, node.dtype, self.target)
        return f"_v{j} = {_cast(f'{call}({args})', node.dtype)}"


def _ancestors(nodes, wanted: set) -> set:
    """``wanted`` nodes and every node they are computed from."""
    out, stack = set(), list(wanted)
    while stack:
        j = stack.pop()
        if j in out:
            continue
        out.add(j)
        stack += [k for kind, k in nodes[j].args if kind == "v"]
    return out


def _inputs_read(nodes, computed: set) -> set:
    return {k for j in computed for kind, k in nodes[j].args if kind == "i"}


# --- forward --------------------------------------------------------------------------------------------------
def forward_source(
    nodes,
    input_dtypes,
    scalar_dtypes,
    outputs: tuple,
    saved: tuple,
    reduction: Reduction | None,
    masks: dict,
    target: str,
) -> tuple[str, list[str]]:
    """The forward kernel ``fwd`` (and ``fin``, which finishes a reduction on CUDA or over some dims) as module
    source, and ``fwd``'s argument names. ``masks`` holds the mask of every array operand by name (``a<k>``,
    ``o<m>``, ``sv<j>``, ``r``)."""
    space = _Space(target, masks)
    values = _Values(nodes, input_dtypes, scalar_dtypes, target)
    wanted = set(outputs) | set(saved) | ({reduction.node} if reduction else set())
    computed = sorted(_ancestors(nodes, wanted))
    reads = sorted(_inputs_read(nodes, computed))
    body = [f"_x{k} = a{k}[{space.offset(f'a{k}')}]" for k in reads]
    body += [values.compute(j) for j in computed]
    body += [f"o{m}[{space.offset(f'o{m}')}] = _v{j}" for m, j in enumerate(outputs)]
    body += [f"sv{j}[{space.offset(f'sv{j}')}] = _v{j}" for j in saved]
    reduce, epilogue, extra = (), "", []
    if reduction is not None:
        v = f"_v{reduction.node}"
        if reduction.full:
            if reduction.kind == "amax":
                reduce = (("_acc", "max"), ("_nan", "+"))
                body += [f"_acc = max(_acc, {v})", f"_nan += {v} != {v}"]
                epilogue = "r[0] = math.nan if _nan > 0 else _acc"
            else:
                reduce = (("_acc", "+"),)
                body.append(f"_acc += {v}")
                epilogue = "r[0] = _acc / cnt" if reduction.kind == "mean" else "r[0] = _acc"
            if target == "cuda":
                epilogue = ""
            else:
                extra = ["r"] + (["cnt"] if reduction.kind == "mean" else [])
        else:
            off = space.offset("r")
            if reduction.kind == "amax":
                if target == "cuda":
                    body += [f"cuda.atomic.max(r, {off}, {v})", f"cuda.atomic.add(rn, {off}, {v} != {v})"]
                else:
                    body += [f"r[{off}] = max(r[{off}], {v})", f"rn[{off}] += {v} != {v}"]
                extra = ["r", "rn"]
            else:
                body.append(f"cuda.atomic.add(r, {off}, {v})" if target == "cuda" else f"r[{off}] += {v}")
                extra = ["r"]
    args = [f"a{k}" for k in reads] + [f"s{k}" for k in range(len(scalar_dtypes))]
    args += [f"o{m}" for m in range(len(outputs))] + [f"sv{j}" for j in saved] + extra
    args += _size_args(space.rank, target)
    loop_body, n = space.wrap(body)
    source = codegen.loop_source(target, "fwd", args, loop_body, n, reduce=reduce, epilogue=epilogue)
    if reduction is not None and (target == "cuda" or not reduction.full):
        source += "\n\n" + _finish_source(reduction, target)
    if target == "cuda" and reduction is not None and reduction.full:
        args = args + [f"{var}_out" for var, _ in reduce]
    return header(target) + _functions(nodes, target) + "\n\n" + source, args


def _finish_source(reduction: Reduction, target: str) -> str:
    """``fin(out, acc, nan, cnt, m)``: the reduction's float64 accumulator into the output dtype, divided by the
    count for ``mean``, NaN where ``amax`` met one."""
    if reduction.kind == "amax":
        body = "out[i] = math.nan if nan[i] > 0 else acc[i]"
    elif reduction.kind == "mean":
        body = "out[i] = acc[i] / cnt"
    else:
        body = "out[i] = acc[i]"
    return codegen.loop_source(
        "cuda" if target == "cuda" else "serial", "fin", ["out", "acc", "nan", "cnt", "m"], body, "m"
    )


# --- backward -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BackwardPlan:
    """What one backward variant computes. ``modes[k]`` says how input ``k``'s gradient is written: ``"full"``
    (one element per iteration), ``"acc"`` (a one-element input: a scalar accumulator), ``"inner"`` (added into
    a float64 buffer of the input's shape, in place), ``"after"`` (a full-size buffer, reduced afterwards), or
    None when not needed."""

    modes: tuple
    gouts: tuple  # output positions m whose incoming gradient is present
    gred: bool  # the reduction's output has an incoming gradient
    saved: frozenset  # node values read from saved buffers (``sv<j>``) or outputs (``vo<m>``) instead of recomputed


def _grad_arg_names(fn) -> tuple:
    code = fn.__code__
    return code.co_varnames[: code.co_argcount]


def backward_analysis(nodes, n_inputs: int, outputs: tuple, reduction, needed: tuple, gouts, gred: bool):
    """Which nodes carry gradient (``active``) and which values the gradient formulas read (``reads``: refs)."""
    depends = [False] * len(nodes)
    for j, node in enumerate(nodes):
        depends[j] = any(
            (kind == "i" and needed[k]) or (kind == "v" and depends[k]) for kind, k in node.args[: node.arity]
        )
    flows = [False] * len(nodes)
    for m, j in enumerate(outputs):
        if m in gouts:
            flows[j] = True
    if reduction is not None and gred:
        flows[reduction.node] = True
    for j in range(len(nodes) - 1, -1, -1):
        if not (flows[j] and depends[j]):
            continue
        for kind, k in nodes[j].args[: nodes[j].arity]:
            if kind == "v":
                flows[k] = True
    active = [flows[j] and depends[j] for j in range(len(nodes))]
    reads = set()
    for j, node in enumerate(nodes):
        if not active[j]:
            continue
        for p, (kind, k) in enumerate(node.args[: node.arity]):
            if not ((kind == "i" and needed[k]) or (kind == "v" and active[k])):
                continue
            if node.row.is_passthrough(p):
                continue
            names = _grad_arg_names(node.row.grads[p])
            uses = node.row.uses(p)
            if names[1] in uses:
                reads.add(("v", j))
            for q, ref in enumerate(node.args):
                if names[2 + q] in uses and ref[0] != "s":
                    reads.add(ref)
    if reduction is not None and gred and reduction.kind == "amax" and active[reduction.node]:
        reads.add(("v", reduction.node))
    return active, reads


def backward_source(
    nodes,
    input_dtypes,
    scalar_dtypes,
    outputs: tuple,
    reduction: Reduction | None,
    plan: BackwardPlan,
    masks: dict,
    target: str,
) -> tuple[str, list[str], list[str] | None]:
    """The backward kernel ``bwd`` (and ``cnt``, the tie count of ``amax``) as module source, with the argument
    names of ``bwd`` and of ``cnt`` (None without it). ``masks`` names every array operand: ``a<k>``, ``sv<j>``,
    ``vo<m>`` (a saved output), ``go<m>``, ``gr``/``rm``/``rc`` and ``ga<k>``."""
    needed = tuple(mode is not None for mode in plan.modes)
    active, reads = backward_analysis(nodes, len(input_dtypes), outputs, reduction, needed, plan.gouts, plan.gred)
    space = _Space(target, masks)
    values = _Values(nodes, input_dtypes, scalar_dtypes, target)
    out_pos = {j: m for m, j in enumerate(outputs)}

    def load_plan(read_nodes: set):
        """(statements loading saved values, nodes to recompute, names of the saved buffers read) giving the
        values of ``read_nodes``: a saved value is loaded, any other is recomputed from its arguments."""
        loaded, recompute, stack = set(), set(), list(read_nodes)
        while stack:
            j = stack.pop()
            if j in loaded or j in recompute:
                continue
            if j in plan.saved:
                loaded.add(j)
            else:
                recompute.add(j)
                stack += [k for kind, k in nodes[j].args if kind == "v"]
        stmts, used_saved = [], []
        for j in sorted(loaded):
            name = f"vo{out_pos[j]}" if j in out_pos else f"sv{j}"
            stmts.append(f"_v{j} = {name}[{space.offset(name)}]")
            used_saved.append(name)
        return stmts, recompute, used_saved

    read_nodes = {k for kind, k in reads if kind == "v"}
    read_inputs = {k for kind, k in reads if kind == "i"}
    stmts, recompute, used_saved = load_plan(read_nodes)
    read_inputs |= _inputs_read(nodes, recompute)
    body = [f"_x{k} = a{k}[{space.offset(f'a{k}')}]" for k in sorted(read_inputs)]
    body += stmts
    body += [values.compute(j) for j in sorted(recompute)]

    contributions: dict = {}  # ref -> list of expressions
    for m, j in enumerate(outputs):
        if m in plan.gouts and active[j]:
            contributions.setdefault(("v", j), []).append(f"go{m}[{space.offset(f'go{m}')}]")
    count_source, count_args = "", None
    if reduction is not None and plan.gred and active[reduction.node]:
        j = reduction.node
        off = space.offset("gr")
        if reduction.kind == "sum":
            src = f"gr[{off}]"
        elif reduction.kind == "mean":
            src = f"gr[{off}] / cnt"
        else:
            rof = space.offset("rm")
            src = f"gr[{off}] * (_v{j} == rm[{rof}]) / rc[{rof}]"  # eager's g * mask / count (NaN: 0 / 0)
            count_source, count_args = _count_source(nodes, values, reduction, space, target, scalar_dtypes)
        contributions.setdefault(("v", j), []).append(_cast(src, nodes[j].dtype))

    for j in range(len(nodes) - 1, -1, -1):
        if not active[j] or ("v", j) not in contributions:
            continue
        node = nodes[j]
        parts = contributions[("v", j)]
        body.append(f"_g{j} = " + " + ".join(parts))
        for p, ref in enumerate(node.args[: node.arity]):
            kind, k = ref
            if not ((kind == "i" and needed[k]) or (kind == "v" and active[k])):
                continue
            target_dtype = values.dtype(ref)
            if node.row.is_passthrough(p):
                expr = f"_g{j}"
            else:
                names = _grad_arg_names(node.row.grads[p])
                uses = node.row.uses(p)
                call = [f"_g{j}", f"_v{j}" if names[1] in uses else _cast("0", node.dtype)]
                for q, a in enumerate(node.args):
                    call.append(values.arg(a, node.dtype) if names[2 + q] in uses else _cast("0", node.dtype))
                expr = f"{call_name(node.row.grads[p], node.dtype, target)}({', '.join(call)})"
            name = f"_c{j}_{p}"
            body.append(f"{name} = {_cast(expr, target_dtype)}")
            contributions.setdefault(ref, []).append(name)

    reduce, epilogue = [], []
    grad_args = []
    for k, mode in enumerate(plan.modes):
        if mode is None:
            continue
        parts = contributions.get(("i", k))
        grad_args.append(f"ga{k}")
        if not parts:
            if mode == "acc":
                epilogue.append(f"ga{k}[0] = 0")
            continue
        total = " + ".join(parts)
        if mode in ("full", "after"):
            body.append(f"ga{k}[{space.offset(f'ga{k}')}] = {total}")
        elif mode == "inner":
            off = space.offset(f"ga{k}")
            body.append(f"cuda.atomic.add(ga{k}, {off}, {total})" if target == "cuda" else f"ga{k}[{off}] += {total}")
        else:  # acc
            reduce.append((f"_h{k}", "+"))
            body.append(f"_h{k} += {total}")
            epilogue.append(f"ga{k}[0] = _h{k}")
    args = [f"a{k}" for k in sorted(read_inputs)] + [f"s{k}" for k in range(len(scalar_dtypes))]
    args += sorted(set(used_saved))
    args += [f"go{m}" for m in plan.gouts]
    if reduction is not None and plan.gred:
        args.append("gr")
        args += {"amax": ["rm", "rc"], "mean": ["cnt"]}.get(reduction.kind, [])
    args += grad_args
    args += _size_args(space.rank, target)
    if not body:
        body = ["pass"]
    loop_body, n = space.wrap(body)
    if target == "cuda":
        epilogue = []
    source = codegen.loop_source(target, "bwd", args, loop_body, n, reduce=tuple(reduce), epilogue="\n".join(epilogue))
    if target == "cuda":
        args = args + [f"{var}_out" for var, _ in reduce]
    module = header(target) + _functions(nodes, target) + "\n\n" + source
    if count_source:
        module += "\n\n" + count_source
    return module, args, count_args


def _count_source(nodes, values, reduction, space, target, scalar_dtypes):
    """``cnt``: how many elements equal the forward maximum, per output element (``amax``'s gradient is shared
    evenly among ties, as in eager mode)."""
    computed = sorted(_ancestors(nodes, {reduction.node}))
    reads = sorted(_inputs_read(nodes, computed))
    body = [f"_x{k} = a{k}[{space.offset(f'a{k}')}]" for k in reads]
    body += [values.compute(j) for j in computed]
    v = f"_v{reduction.node}"
    off = space.offset("rm")
    if target == "cuda":
        body.append(f"cuda.atomic.add(rc, {off}, 1.0 if {v} == rm[{off}] else 0.0)")
    else:
        body.append(f"rc[{off}] += {v} == rm[{off}]")
    args = [f"a{k}" for k in reads] + [f"s{k}" for k in range(len(scalar_dtypes))] + ["rm", "rc"]
    args += _size_args(space.rank, target)
    loop_body, n = space.wrap(body)
    return codegen.loop_source("cuda" if target == "cuda" else "serial", "cnt", args, loop_body, n), args
