"""A fusion group at run time: one generated forward kernel, one backward kernel, one node in the eager graph.

``Group.run(*inputs)`` computes the group's outputs (its materialized values, then the closing reduction's result).
With grad mode on and an input that requires grad the group becomes ONE node of its own Function class
(``CompiledFunctionBackward``), made directly by ``run`` (``Function.apply`` in anomaly and inference mode): hooks,
``retain_grad``, version counters, anomaly mode and ``.grad`` accumulation are the eager graph's own. Otherwise it
launches the forward kernel directly.

The backward kernel computes every needed input gradient in one pass; values the gradient formulas read are
recomputed from the inputs, or saved by the forward when that moves no more bytes (``_strategy``). With
``create_graph=True`` the backward recomputes the group with its eager ops and differentiates those
(``autograd.grad``), so double backward works.
"""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..autograd import grad as autograd_grad
from ..autograd.engine import accumulator_of
from ..autograd.function import (
    _NO_EDGE,
    ERR_BACKWARD_TWICE,
    Function,
    SavedTensor,
    _save_tensors,
    make_node,
    saved_input,
    saved_output,
)
from ..autograd.grad_mode import enable_grad, no_grad, state
from ..backend import codegen, cpu, cuda_backend
from ..backend.layout import collapse, compact_index
from ._kernels import BackwardPlan, KNode, Reduction, backward_analysis, backward_source, forward_source

_PARALLEL_THRESHOLD = None


def _parallel_threshold() -> int:
    """The backend's switch-over size to ``prange`` kernels (read once, lazily: it imports Numba)."""
    global _PARALLEL_THRESHOLD
    if _PARALLEL_THRESHOLD is None:
        _PARALLEL_THRESHOLD = cpu.PARALLEL_THRESHOLD
    return _PARALLEL_THRESHOLD


def _cuda():
    return cuda_backend()


def _cuda_grid(n: int) -> tuple[int, int]:
    """(blocks, threads): a power-of-two block (the reductions' tree needs one); one small block on the simulator,
    which runs every thread in Python."""
    if _cuda().simulator():
        return 1, 16
    threads = codegen.CUDA_THREADS
    return max(1, min((n + threads - 1) // threads, 4096)), threads


def _device_fill():
    """A grid-stride kernel ``fill(out, value, n)`` (accumulators start on the device, not uploaded)."""
    global _FILL
    if _FILL is None:
        source = codegen.header("cuda") + codegen.loop_source(
            "cuda", "fill", ["out", "value", "n"], "out[i] = value", "n"
        )
        _FILL = codegen.load_module("fill_cuda", source).fill
    return _FILL


_FILL = None


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _compact(g):
    """An incoming gradient as a C-contiguous operand: a broadcast (stride-0) view is passed as the array it
    expands (``layout.compact_index``, on the host or the device), so the kernel reads it at stride 0 instead of
    materializing it."""
    if isinstance(g, np.ndarray):
        if g.flags.c_contiguous:
            return g
        base = g.base  # a sum's gradient: a stride-0 view of one element, made directly (0.3 us, not 1.5)
        if isinstance(base, np.ndarray) and base.size == 1 and g.size and base.dtype == g.dtype and not any(g.strides):
            return base.reshape((1,) * g.ndim)
        index = compact_index(g.shape, g.strides)
        small = g if index is None else g[index]
        return small if small.flags.c_contiguous else np.ascontiguousarray(small)
    if g.is_c_contiguous():
        return g
    index = compact_index(tuple(g.shape), tuple(g.strides))
    small = g if index is None else _cuda().getitem(g, index)
    return small if small.is_c_contiguous() else small.copy()


def _sum_to_shape(a, shape):
    return np.ascontiguousarray(cpu.sum_to_shape(a, shape))


def _vo_arrays(saved, strategy) -> list | tuple:
    """The arrays of the outputs a backward reads (saved after the inputs it reads)."""
    if not strategy[1]:
        return ()
    nk = len(strategy[2])
    return [s.tensor._data for s in saved[nk : nk + len(strategy[1])]]


class _Layout:
    """One shape configuration of a group: the iteration shape, its collapse, and the kernels for it."""

    __slots__ = ("shape", "n", "dims", "masks", "kernels", "target", "red_shape", "red_keep", "input_ndims")

    def __init__(self, shape, dims, masks, target, red_shape, red_keep) -> None:
        self.shape, self.dims, self.masks, self.target = shape, dims, masks, target
        self.n = _numel(shape)
        self.kernels: dict = {}
        self.red_shape, self.red_keep = red_shape, red_keep


class Group:
    """One fusion group: rows over one broadcast iteration space, plus an optional closing reduction.

    ``nodes`` are ``KNode``s in program order; their args refer to group inputs ``("i", k)``, scalar constants
    ``("s", k)`` and earlier nodes ``("v", j)``. ``outputs`` are the nodes whose values leave the group.
    ``eager`` recomputes the group with its original ops (the create_graph fallback): one ``(cls, args)`` per node,
    and for the reduction ``(cls, args)`` with ``("v", j)`` in place of the reduced tensor.
    """

    def __init__(
        self,
        nodes: list[KNode],
        input_dtypes: list,
        scalars: list,
        outputs: tuple,
        reduction: Reduction | None,
        red_info: tuple | None,
        eager: list,
        is_cuda: bool,
        label: str,
    ) -> None:
        self.nodes = nodes
        self.input_dtypes = [np.dtype(d) for d in input_dtypes]
        self.n_inputs = len(input_dtypes)
        self.scalar_dtypes = [np.dtype(type(s)) for s in scalars]
        self.scalars = list(scalars)
        self.outputs = tuple(outputs)
        self.reduction = reduction
        self.red_dtype, self.red_keepdim = red_info if red_info else (None, False)
        self.eager = eager
        self.is_cuda = is_cuda
        self.label = label
        self.n_outputs = len(self.outputs) + (1 if reduction is not None else 0)
        self._layouts: dict = {}
        self._strategies: dict = {}
        self.fn_cls = type(
            "CompiledFunction",
            (_GroupFunction,),
            {"group": self, "node_name": "CompiledFunctionBackward", "__module__": __name__},
        )
        self._node_cls = self.fn_cls._backward_cls
        self.is_amax = reduction is not None and reduction.kind == "amax"

    def __repr__(self) -> str:
        rows = " -> ".join(n.row.name for n in self.nodes)
        red = f" -> {self.reduction.kind}" if self.reduction else ""
        return f"<fused group {self.label}: {rows}{red}>"

    # --- running -------------------------------------------------------------------------------------------
    def run(self, *inputs) -> tuple:
        """The group's outputs for ``inputs`` (tensors, in the group's input order).

        With grad mode on and an input that requires grad, the group's node is made here directly (what
        ``fn_cls.apply(*inputs)`` makes, as a built-in op's ``_fast_apply`` makes its node): the forward launches
        kernels only (no Function runs under it), so grad mode needs no switching; the node is a ``TrustedBackward``
        (its backward returns each input's gradient in the input's shape and dtype), and what the backward reads is
        saved directly. Anomaly and inference mode, and a group that could not be compiled, take ``apply``."""
        st = state
        if not st.enabled:
            return self._run_plain(inputs)
        needs, datas, shapes, edges = [], [], [], []
        grad = False
        plain = True  # every input C-contiguous: the inputs are the kernel operands
        for t in inputs:
            d = t._data
            datas.append(d)
            shapes.append(d.shape)
            if plain and not d.flags.c_contiguous:
                plain = False
            fn = t.grad_fn
            if fn is not None:
                needs.append(True)
                edges.append((fn, t._output_nr))
                grad = True
            elif t._requires_grad:
                needs.append(True)
                edges.append((accumulator_of(t), 0))
                grad = True
            else:
                needs.append(False)
                edges.append(_NO_EDGE)
        if not grad:
            return self._run_plain(inputs)
        if st.anomaly or st.inference or self.failed:
            out = self.fn_cls.apply(*inputs)
            return out if isinstance(out, tuple) else (out,)
        needs = tuple(needs)
        ctx = self._node_cls()
        ctx.needs_input_grad = needs
        strategy = self._strategies.get(needs) or self._strategy(needs)
        ctx._strat = strategy
        ctx._inputs = inputs  # for the create_graph fallback (plain references, like eager's recomputation)
        if plain:
            key = tuple(shapes)
            lay = self._layouts.get(key)
            if lay is not None and lay.n:
                launch = lay.kernels.get(strategy[0])
                if launch is not None:
                    arrays, ctx._saved_values = launch(datas)
                    ctx._lay, ctx._ops = lay, datas
                else:
                    arrays = self.forward_arrays(datas, needs, strategy[0], ctx)
            else:
                arrays = self.forward_arrays(datas, needs, strategy[0], ctx)
        else:
            arrays = self.forward_arrays(datas, needs, strategy[0], ctx)
        outs = [Tensor._make(a) for a in arrays]
        make_node(ctx, tuple(edges), outs)
        saved = []
        for k in strategy[2]:
            t = inputs[k]
            if t._is_inference:  # torch's error, raised by the general path
                ctx.to_save = tuple(inputs[k] for k in strategy[2])
                _save_tensors(self.fn_cls, ctx, ())
            counter = t._version_counter  # saved_input(t), inline
            saved.append(SavedTensor(t, 0 if counter is None else counter.value, -1, t.grad_fn))
        for m in strategy[1]:
            o = outs[m]
            saved.append(saved_output(o) if o.grad_fn is ctx else saved_input(o))
        if self.is_amax:
            o = outs[-1]
            saved.append(saved_output(o) if o.grad_fn is ctx else saved_input(o))
        if saved:
            ctx._saved = saved
        return tuple(outs)

    def _run_plain(self, inputs: tuple) -> tuple:
        """No node: the forward kernel only. Inputs of a known layout launch it at once: C-contiguous ones as they
        are, others (a sum's stride-0 gradient) as ``operands`` makes them."""
        datas, shapes = [], []
        contiguous = True
        for t in inputs:
            d = t._data
            datas.append(d)
            shapes.append(d.shape)
            if contiguous and not d.flags.c_contiguous:
                contiguous = False
        ops, key = (datas, tuple(shapes)) if contiguous else self.operands(datas, None)
        lay = self._layouts.get(key)
        launch = lay.kernels.get(()) if lay is not None and lay.n else None
        arrays = launch(ops)[0] if launch is not None else self.forward_arrays(datas, None)
        outs = []
        for a in arrays:
            outs.append(Tensor._make(a))
        return tuple(outs)

    def operands(self, datas, needs) -> tuple:
        """(the inputs as C-contiguous kernel operands, the layout key). An input that is a broadcast view
        (stride 0, as the gradient ``sum`` hands back) and needs no gradient is passed as the array it expands,
        read at stride 0; any other non-contiguous input is copied."""
        ops = None
        for k, d in enumerate(datas):
            if d.flags.c_contiguous:
                continue
            if ops is None:
                ops = list(datas)
            if needs is None or not needs[k]:
                ops[k] = _compact(d)
            else:
                ops[k] = np.ascontiguousarray(d) if isinstance(d, np.ndarray) else d.copy()
        key = []
        for d in datas:
            key.append(d.shape)
        key = tuple(key)
        if ops is None:
            return datas, key
        return ops, (key, tuple(o.shape for o in ops))

    def layout(self, datas, ops, key) -> _Layout:
        lay = self._layouts.get(key)
        if lay is None:
            lay = self._layouts[key] = self._make_layout(datas, ops)
        return lay

    def _make_layout(self, datas, ops) -> _Layout:
        shape = tuple(np.broadcast_shapes(*[tuple(d.shape) for d in datas])) if datas else ()
        operands = {f"a{k}": tuple(d.shape) for k, d in enumerate(ops)}
        red_shape = red_keep = None
        if self.reduction is not None:
            axes = self.reduction.axes if not self.reduction.full else tuple(range(len(shape)))
            red_keep = tuple(1 if k in axes else s for k, s in enumerate(shape))
            red_shape = red_keep if self.red_keepdim else tuple(s for k, s in enumerate(shape) if k not in axes)
            operands["r"] = red_keep
        names = list(operands)
        dims, masks = collapse(shape, [operands[n] for n in names])
        n = _numel(shape)
        if self.is_cuda:
            target = "cuda"
        else:
            target = "parallel" if n >= _parallel_threshold() else "serial"
        lay = _Layout(shape, dims, dict(zip(names, masks)), target, red_shape, red_keep)
        lay.input_ndims = tuple(len(d.shape) for d in ops)
        return lay

    # --- forward -------------------------------------------------------------------------------------------
    def forward_arrays(self, datas, needs, saved: tuple = (), ctx=None) -> list:
        """Run the forward kernel on the input arrays: the output arrays (the materialized values, then the
        reduction's result). The values in ``saved`` (node indices) go to ``ctx._saved_values``."""
        ops, key = self.operands(datas, needs)
        lay = self.layout(datas, ops, key)
        if lay.n == 0 or self.failed:
            return self._forward_eager_arrays(datas)
        launch = lay.kernels.get(saved)
        if launch is None:
            try:
                launch = self._forward_launcher(lay, saved)
                outs, saved_arrays = launch(ops)  # the first launch compiles (or loads) the kernel
            except Exception as err:  # a generator bug must not cost the user a result: the eager ops give it
                self._fail(err)
                return self._forward_eager_arrays(datas)
            lay.kernels[saved] = launch
        else:
            outs, saved_arrays = launch(ops)
        if ctx is not None:
            ctx._lay, ctx._ops, ctx._saved_values = lay, ops, saved_arrays
        return outs

    @staticmethod
    def _filled(m: int, value: float, cuda: bool):
        """A float64 array of ``m`` elements set to ``value`` (accumulators), on the host or the device."""
        if not cuda:
            return np.full(m, value, np.float64)
        out = _cuda().empty((m,), np.float64)
        _device_fill()[_cuda_grid(m)](out, value, m)
        return out

    def _forward_launcher(self, lay: _Layout, saved: tuple):
        """Generated Python that allocates the outputs, launches the forward kernel (and the reduction's finishing
        kernel) for this layout: ``launch(input_arrays) -> (outputs, saved buffers)``."""
        rank = len(lay.dims)
        full = (True,) * rank
        masks = dict(lay.masks)
        for m in range(len(self.outputs)):
            masks[f"o{m}"] = full
        for j in saved:
            masks[f"sv{j}"] = full
        target = lay.target
        red = self.reduction
        if target == "parallel" and red is not None and not red.full and not masks["r"][0]:
            target = "serial"  # dim 0 is reduced: threads would add into the same outputs
        source, arg_names = forward_source(
            self.nodes, self.input_dtypes, self.scalar_dtypes, self.outputs, saved, red, masks, target
        )
        module = codegen.load_module(f"fused_fwd_{target}", source)
        cuda = target == "cuda"
        ns = {"np": np, "K": module.fwd, "alloc": _cuda().empty if cuda else np.empty, "full": self._filled}
        flat = "" if len(lay.shape) == 1 else ".reshape(-1)"
        lines = []
        expr = {}
        for k in range(self.n_inputs):
            expr[f"a{k}"] = f"d[{k}]" + ("" if lay.input_ndims[k] == 1 and not cuda else ".reshape(-1)")
        for k, value in enumerate(self.scalars):
            ns[f"S{k}"] = value
            expr[f"s{k}"] = f"S{k}"
        outs = []
        for m, j in enumerate(self.outputs):
            ns[f"T{j}"] = self.nodes[j].dtype
            lines.append(f"o{m} = alloc({lay.shape!r}, T{j})")
            expr[f"o{m}"] = f"o{m}{flat}"
            outs.append(f"o{m}")
        for j in saved:
            ns[f"T{j}"] = self.nodes[j].dtype
            lines.append(f"sv{j} = alloc({lay.shape!r}, T{j})")
            expr[f"sv{j}"] = f"sv{j}{flat}"
        finish = []
        if red is not None:
            ns["TR"] = self.red_dtype
            m = _numel(lay.red_shape)
            count = float(lay.n // max(m, 1))
            if red.full and not cuda:
                lines.append(f"res = np.empty({lay.red_shape!r}, TR)")
                expr["r"] = "res.reshape(1)"
                expr["cnt"] = repr(count)
            else:
                init = "-np.inf" if red.kind == "amax" else "0.0"
                lines += [f"acc = full({m}, {init}, {cuda})", f"nan = full({m}, 0.0, {cuda})"]
                lines.append(f"res = alloc({lay.red_shape!r}, TR)")
                expr.update(r="acc", rn="nan", _acc_out="acc", _nan_out="nan")
                ns["F"] = module.fin
                res_flat = "res.reshape(-1)" if lay.red_shape != (m,) else "res"
                grid = f"[{_cuda_grid(m)[0]}, {_cuda_grid(m)[1]}]" if cuda else ""
                finish.append(f"F{grid}({res_flat}, acc, nan, {count!r}, {m})")
            outs.append("res")
        for k, dim in enumerate(lay.dims):
            expr[f"d{k}"] = str(dim)
        expr["_n"] = str(lay.n)
        grid = "[{}, {}]".format(*_cuda_grid(lay.n)) if cuda else ""
        lines.append(f"K{grid}(" + ", ".join(expr[a] for a in arg_names) + ")")
        lines += finish
        lines.append(f"return [{', '.join(outs)}], [{', '.join(f'sv{j}' for j in saved)}]")
        code = "def launch(d):\n" + "".join(f"    {line}\n" for line in lines)
        exec(code, ns)  # noqa: S102 - generated here
        return ns["launch"]

    def _forward_eager_arrays(self, datas) -> list:
        """Empty iteration space: the eager ops give the right shapes (and errors, as amax of nothing)."""
        with no_grad():
            outs = self._eager_outputs([Tensor._make(d) for d in datas])
        return [t._data for t in outs]

    def _eager_outputs(self, inputs) -> list:
        values = []

        def resolve(ref):
            kind, k = ref[0], ref[1]
            if kind == "i":
                return inputs[k]
            if kind == "v":
                return values[k]
            return ref[1]  # ("lit", value): the op's own Python argument

        for cls, args in self.eager[: len(self.nodes)]:
            values.append(cls.apply(*[resolve(a) for a in args]))
        outs = [values[j] for j in self.outputs]
        if self.reduction is not None:
            cls, args = self.eager[-1]
            outs.append(cls.apply(*[resolve(a) for a in args]))
        return outs

    # --- node ----------------------------------------------------------------------------------------------
    def forward_node(self, ctx, inputs) -> tuple:
        needs = ctx.needs_input_grad
        strategy = ctx._strat = self._strategy(needs)
        sv_nodes, vo_ms, kernel_inputs = strategy[:3]
        arrays = self.forward_arrays([t._data for t in inputs], needs, sv_nodes, ctx)
        outs = [Tensor._make(a) for a in arrays]
        keep = [inputs[k] for k in kernel_inputs] + [outs[m] for m in vo_ms]
        if self.is_amax:
            keep.append(outs[-1])  # the maximum: its gradient goes to the elements equal to it
        ctx.save_for_backward(*keep)
        ctx._inputs = inputs  # for the create_graph fallback (plain references, like eager's recomputation)
        return tuple(outs) if len(outs) > 1 else outs[0]

    def _strategy(self, needs: tuple) -> tuple:
        """(nodes the forward saves in buffers, outputs kept for backward, inputs the backward reads, the backward
        launchers' key part, the launcher key when only a full reduction's result gets a gradient): the values
        the gradient formulas read are recomputed from the inputs, or saved, whichever moves fewer full-size
        arrays (a saved value is written once and read once; an output is written anyway). A tie is saved: it
        reads as many bytes and skips the recomputation (the makemore MLP's ``tanh(x @ W + b)`` group, (32, 200)
        float32: its backward node took 12.0 us reading the tanh output, 18.5 recomputing tanh)."""
        entry = self._strategies.get(needs)
        if entry is not None:
            return entry
        needed = tuple(needs[: self.n_inputs])
        gouts = tuple(range(len(self.outputs)))
        _, reads = backward_analysis(self.nodes, self.n_inputs, self.outputs, self.reduction, needed, gouts, True)
        read_nodes = {k for kind, k in reads if kind == "v"}
        direct = {k for kind, k in reads if kind == "i"}
        recompute_inputs, stack, seen = set(direct), list(read_nodes), set()
        while stack:
            j = stack.pop()
            if j not in seen:
                seen.add(j)
                recompute_inputs |= {k for kind, k in self.nodes[j].args if kind == "i"}
                stack += [k for kind, k in self.nodes[j].args if kind == "v"]
        big = {k for k in range(self.n_inputs) if self.input_full[k]}
        cost_recompute = len(recompute_inputs & big)
        cost_save = len(direct & big) + sum(1 if j in self.outputs else 2 for j in read_nodes)
        if read_nodes and cost_save <= cost_recompute:
            sv = tuple(sorted(j for j in read_nodes if j not in self.outputs))
            vo = tuple(m for m, j in enumerate(self.outputs) if j in read_nodes)
            entry = (sv, vo, tuple(sorted(direct)))
        else:
            entry = ((), (), tuple(sorted(recompute_inputs)))
        bkey = (needs, entry[0], entry[1])
        entry += (bkey, (bkey, (), True))  # the backward launchers' key part, and the key of a loss's backward
        self._strategies[needs] = entry
        return entry

    input_full: tuple = ()  # per input: as large as the iteration space (at trace time)

    # --- backward ------------------------------------------------------------------------------------------
    def backward_node(self, ctx, grads) -> tuple:
        if state.enabled:
            return self._backward_eager(ctx, grads)
        n_out = len(self.outputs)
        red = self.reduction
        gouts = tuple([m for m in range(n_out) if grads[m] is not None]) if n_out else ()
        gred = red is not None and grads[n_out] is not None
        if not gouts and not gred:
            return (None,) * self.n_inputs
        if ctx._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        saved = ctx._saved or ()
        for s in saved:  # the version check of what the kernel reads (``saved_tensors`` without unpacking)
            if not s.unchanged():
                s.unpack(ctx)  # raises torch's error
        lay = ctx._lay
        if lay is None or self.failed:
            return self._backward_eager(ctx, grads)
        strategy = ctx._strat
        if gred and not gouts and red.full:  # the common case (a loss): the key made with the strategy
            launch = lay.kernels.get(strategy[4])
            if launch is not None:
                rm = saved[-1].tensor._data if self.is_amax else None
                return launch(ctx._ops, (), grads[n_out]._data, ctx._saved_values, _vo_arrays(saved, strategy), rm)
        key = (strategy[3], gouts, gred)
        go = ()
        if gouts:
            go = [_compact(grads[m]._data) for m in gouts]
            key += tuple(g.shape for g in go)
        gr = None
        if gred:
            gr = grads[n_out]._data
            if not red.full:
                gr = _compact(gr.reshape(lay.red_keep))
                key += (gr.shape,)
        vo = _vo_arrays(saved, strategy)
        rm = saved[-1].tensor._data if self.is_amax else None
        launch = lay.kernels.get(key)
        if launch is None:
            try:
                launch = self._backward_launcher(ctx, lay, gouts, gred, go, gr)
                arrays = launch(ctx._ops, go, gr, ctx._saved_values, vo, rm)
            except Exception as err:
                self._fail(err)
                return self._backward_eager(ctx, grads)
            lay.kernels[key] = launch
            return arrays
        return launch(ctx._ops, go, gr, ctx._saved_values, vo, rm)

    failed: str | None = None  # why this group's kernels could not be built: it runs its eager ops

    def _fail(self, err: Exception) -> None:
        import warnings

        self.failed = f"{type(err).__name__}: {err}"
        warnings.warn(
            f"numbagrad.compile: {self!r} could not be compiled ({self.failed}); it runs its eager ops instead. "
            "Please report this.",
            RuntimeWarning,
            stacklevel=3,
        )

    def _backward_launcher(self, ctx, lay, gouts, gred, go, gr):
        """Generated Python that allocates the input gradients, launches the backward kernel (after the tie count
        of ``amax``) and finishes broadcast gradients: ``launch(inputs, go, gr, sv, vo, rm) -> gradients`` (tensors,
        None for an input that needs none)."""
        needs = tuple(ctx.needs_input_grad[: self.n_inputs])
        sv_nodes, vo_ms = ctx._strat[0], ctx._strat[1]
        datas = ctx._ops
        shapes = {f"go{m}": tuple(g.shape) for m, g in zip(gouts, go)}
        if gred:
            shapes["gr"] = lay.red_keep if self.reduction.full else tuple(gr.shape)
        names = [f"a{k}" for k in range(self.n_inputs)] + list(shapes)
        operand_shapes = [tuple(d.shape) for d in datas] + list(shapes.values())
        if self.reduction is not None:
            names.append("r")
            operand_shapes.append(lay.red_keep)
        dims, mask_list = collapse(lay.shape, operand_shapes)
        masks = dict(zip(names, mask_list))
        rank = len(dims)
        full = (True,) * rank
        target = lay.target
        cuda = target == "cuda"
        modes = []
        for k in range(self.n_inputs):
            if not needs[k]:
                modes.append(None)
                continue
            mask = masks[f"a{k}"]
            if all(mask):
                mode = "full"
            elif not any(mask):
                mode = "acc"
            elif target == "parallel" and not mask[0]:
                mode = "after"  # threads over dim 0 would add into the same elements: reduce afterwards
            else:
                mode = "inner"
            modes.append(mode)
            masks[f"ga{k}"] = full if mode == "after" else mask
        for j in sv_nodes:
            masks[f"sv{j}"] = full
        for m in vo_ms:
            masks[f"vo{m}"] = full
        if self.reduction is not None:
            masks["rm"] = masks["rc"] = masks["r"]
        plan = BackwardPlan(tuple(modes), gouts, gred, frozenset(sv_nodes) | {self.outputs[m] for m in vo_ms})
        source, arg_names, count_names = backward_source(
            self.nodes, self.input_dtypes, self.scalar_dtypes, self.outputs, self.reduction, plan, masks, target
        )
        module = codegen.load_module(f"fused_bwd_{target}", source)
        ns = {"np": np, "K": module.bwd, "alloc": _cuda().empty if cuda else np.empty, "full": self._filled}
        ns["W"] = Tensor._make
        flat = "" if len(lay.shape) == 1 else ".reshape(-1)"
        expr = {}
        for k in range(self.n_inputs):
            expr[f"a{k}"] = f"d[{k}]" + ("" if lay.input_ndims[k] == 1 and not cuda else ".reshape(-1)")
        for k, value in enumerate(self.scalars):
            ns[f"S{k}"] = value
            expr[f"s{k}"] = f"S{k}"
        for i, j in enumerate(sv_nodes):
            expr[f"sv{j}"] = f"sv[{i}]{flat}"
        for i, m in enumerate(vo_ms):
            expr[f"vo{m}"] = f"vo[{i}]{flat}"
        for i, m in enumerate(gouts):
            expr[f"go{m}"] = f"go[{i}].reshape(-1)"
        expr.update(gr="gr.reshape(-1)", rm="rm.reshape(-1)", rc="rc", _n=str(lay.n))
        if gred and self.reduction.kind == "mean":
            ns["CNT"] = self.nodes[self.reduction.node].dtype.type(lay.n // max(_numel(lay.red_shape), 1))
            expr["cnt"] = "CNT"
        for k, dim in enumerate(dims):
            expr[f"d{k}"] = str(dim)
        lines, results = [], []
        for k, mode in enumerate(modes):
            if mode is None:
                results.append("None")
                continue
            ns[f"T{k}"] = self.input_dtypes[k]
            shape = tuple(datas[k].shape)
            if mode == "full":
                lines.append(f"ga{k} = alloc({shape!r}, T{k})")
                expr[f"ga{k}"] = f"ga{k}" + ("" if len(shape) == 1 else ".reshape(-1)")
                results.append(f"ga{k}")
            elif mode == "after":
                lines.append(f"ga{k} = alloc({lay.shape!r}, T{k})")
                expr[f"ga{k}"] = f"ga{k}{flat}"
                ns["sum_to_shape"] = _sum_to_shape
                results.append(f"sum_to_shape(ga{k}, {shape!r})")
            elif mode == "inner":
                lines.append(f"ga{k} = full({_numel(shape)}, 0.0, {cuda})")
                expr[f"ga{k}"] = f"ga{k}"
                results.append(f"ga{k}.astype(T{k}).reshape({shape!r})")
            elif cuda:  # acc: a float64 accumulator on the device
                lines.append(f"ga{k} = full(1, 0.0, True)")
                expr[f"ga{k}"] = expr[f"_h{k}_out"] = f"ga{k}"
                results.append(f"ga{k}.astype(T{k}).reshape({shape!r})")
            else:
                lines.append(f"ga{k} = np.empty(1, T{k})")
                expr[f"ga{k}"] = f"ga{k}"
                results.append(f"ga{k}.reshape({shape!r})")
        if count_names is not None:
            ns["C"] = module.cnt
            lines.append(f"rc = full({_numel(lay.red_shape)}, 0.0, {cuda})")
            grid = "[{}, {}]".format(*_cuda_grid(lay.n)) if cuda else ""
            lines.append(f"C{grid}(" + ", ".join(expr[a] for a in count_names) + ")")
        grid = "[{}, {}]".format(*_cuda_grid(lay.n)) if cuda else ""
        lines.append(f"K{grid}(" + ", ".join(expr[a] for a in arg_names) + ")")
        lines.append("return (" + "".join(f"{r}, " if r == "None" else f"W({r}), " for r in results) + ")")
        code = "def launch(d, go, gr, sv, vo, rm):\n" + "".join(f"    {line}\n" for line in lines)
        exec(code, ns)  # noqa: S102 - generated here
        return ns["launch"]

    def _backward_eager(self, ctx, grads) -> tuple:
        """create_graph=True (or an empty space): the group's eager ops, differentiated by the engine."""
        inputs = ctx._inputs
        needs = ctx.needs_input_grad
        wanted = [k for k in range(self.n_inputs) if needs[k]]
        with enable_grad():
            outs = self._eager_outputs(list(inputs))
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        if not pairs or not wanted:
            return (None,) * self.n_inputs
        got = autograd_grad(
            [o for o, _ in pairs],
            [inputs[k] for k in wanted],
            [g for _, g in pairs],
            create_graph=state.enabled,
            allow_unused=True,
        )
        out = [None] * self.n_inputs
        for k, g in zip(wanted, got):
            out[k] = g
        return tuple(out)


def _group_backward(node, grads: list):
    """The group node's ``_apply``: the group's backward, its result unchecked (see ``_GroupFunction``)."""
    return node._forward_cls.group.backward_node(node, grads)


class _GroupFunction(Function):
    """The node a fusion group puts in the eager graph (one per group class: ``group`` is set on the class).

    Trusted, as the built-in ops' nodes: the backward returns one gradient per input in the input's shape and
    dtype (the launchers allocate each in its input's shape and traced dtype, which the guard key fixes; broadcast
    inputs get theirs summed down; the create_graph fallback returns the engine's gradients of the inputs, checked
    by the eager nodes), so the engine checks nothing, and a node no gradient reached does not run."""

    group: Group
    _trusted = True
    _node_defaults = {  # noqa: RUF012 - read once, by FunctionMeta
        "_apply": _group_backward,
        "materialize_grads": False,
        "_lay": None,
        "_ops": None,
        "_saved_values": (),
        "_strat": None,
    }

    @staticmethod
    def forward(ctx, *inputs):
        return ctx._forward_cls.group.forward_node(ctx, inputs)

    @staticmethod
    def backward(ctx, *grads):
        return ctx._forward_cls.group.backward_node(ctx, grads)
