"""The elementwise ops, generated from the table (``scalar_math.ROWS``).

For each row this module makes one Function class per node name, the public function(s), the Tensor methods,
operators and in-place forms, and registers them as declarations. Nothing here names a particular op, except the
few rows whose torch signature needs more than the table says (``frontend=False``): ``clamp``, ``pow`` and
``bitwise_not``, written by hand at the end.

Forward and backward run generated Numba kernels (``backend.elementwise`` / ``elementwise_grad``), with
``create_graph`` or without. The backward's gradients are a ``fused_grads`` node (``autograd.fused``): under
``create_graph`` its own backward differentiates the row's gradient formula run on Tensors (``Row.tensor_grad``),
so double backward works for every row while the first derivative is the kernel's alone.
"""

from __future__ import annotations

import cmath
import itertools
import math
import types

import numpy as np

from .. import _upward
from .._tensor import Tensor
from .._typeinfo import CPP_NAMES, finfo
from .._types import from_numpy_dtype as _scalar_dtype
from .._types import get_default_dtype
from ..autograd.engine import accumulator_of, owns
from ..autograd.engine import grad as autograd_grad
from ..autograd.function import (
    _NO_EDGE,
    Function,
    SavedTensor,
    _sequence,
    edges_of,
    make_node,
    may_skip_apply,
    saved_input,
    saved_input_unhooked,
    saved_output,
    saved_output_unhooked,
)
from ..autograd.fused import fused_grads
from ..autograd.grad_mode import enable_grad, no_grad, nothing_records, state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for, layout
from ..scalar_math import COMPLEX_ROWS, ROWS, Row
from . import complex_ops
from ._common import (
    as_operand,
    broadcast_shapes,
    checked_scalar,
    invalid_arguments,
    not_a_tensor,
    result_np_dtype,
    result_type,
    same_backend,
)
from ._common import new_shell as _new
from ._registry import BATCHING as batching
from ._registry import Declaration, batchable, register
from .inplace import check_inplace, check_result, check_written, needs_graph, rebase, write_result

_BOOL = np.dtype(np.bool_)
_ONE_NEEDED = (True,)
_BOTH_NEEDED = (True, True)

_BOOL_ERRORS = {
    "sub": "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
    "use the `~` or `logical_not()` operator instead.",
    "rsub": "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
    "use the `~` or `logical_not()` operator instead.",
    "neg": "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use "
    "the `~` or `logical_not()` operator instead.",
    "relu": "Boolean inputs not supported for relu",
}


#: rows whose torch kernels take tensors of one dtype only (no promotion), with torch's message
_SAME_DTYPE_ERRORS = {"heaviside": "heaviside is not yet implemented for tensors with different dtypes."}


def _compute_dtype(row: Row, inputs: tuple) -> np.dtype:
    """The dtype the kernel computes in (torch's promotion, then the row's rules), checking what torch refuses."""
    dt = result_np_dtype(inputs)
    if row.name in _SAME_DTYPE_ERRORS and len({a._data.dtype for a in inputs if isinstance(a, Tensor)}) > 1:
        raise RuntimeError(_SAME_DTYPE_ERRORS[row.name])
    if row.name in _BOOL_ERRORS and any(
        type(a) is bool or (isinstance(a, Tensor) and a._data.dtype == _BOOL) for a in inputs
    ):
        if row.name in ("sub", "rsub") and all(isinstance(a, Tensor) and a._data.dtype == _BOOL for a in inputs):
            raise RuntimeError(
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                "`logical_xor()` operator instead."
            )
        raise RuntimeError(_BOOL_ERRORS[row.name])
    kind = dt.kind
    if kind == "c":
        if row.name not in COMPLEX_ROWS:
            raise _complex_refused(row, dt)
        return dt
    if kind in "fV":  # ("V": bfloat16)
        if row.integral_only:
            raise NotImplementedError(f"\"{row.name}_cpu\" not implemented for '{_torch_name(dt)}'")
        return dt
    if row.floating_only:
        raise NotImplementedError(f"\"{row.name}_cpu\" not implemented for '{_torch_name(dt)}'")
    if kind == "b" and row.no_bool:
        raise NotImplementedError(f"\"{row.no_bool}\" not implemented for 'Bool'")
    if row.float_only:
        return get_default_dtype().numpy
    if row.integer_division and _has_zero(inputs[1]):
        raise RuntimeError("ZeroDivisionError")
    return dt


#: torch's own errors for rows it refuses on complex input (others: ``"<row>_cpu" not implemented for ...``)
_COMPLEX_ERRORS = {
    "relu": (NotImplementedError, "clamp is not supported for complex types"),
    "clamp": (NotImplementedError, "clamp is not supported for complex types"),
    "clamp_tensor": (NotImplementedError, "clamp is not supported for complex types"),
    "clamp_min": (NotImplementedError, "\"maximum_cpu\" not implemented for '{}'"),
    "clamp_max": (NotImplementedError, "\"minimum_cpu\" not implemented for '{}'"),
    "sign": (NotImplementedError, "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
             "torch.sgn instead."),
    "floor": (NotImplementedError, "floor is not supported for complex inputs"),
    "ceil": (NotImplementedError, "ceil is not supported for complex inputs"),
    "trunc": (NotImplementedError, "trunc is not supported for complex inputs"),
    "round": (NotImplementedError, "\"round_vml_cpu\" not implemented for '{}'"),
    "erf": (NotImplementedError, "\"erf_vml_cpu\" not implemented for '{}'"),
    "erfc": (NotImplementedError, "\"erfc_vml_cpu\" not implemented for '{}'"),
    "erfinv": (NotImplementedError, "\"erfinv_vml_cpu\" not implemented for '{}'"),
    "lgamma": (NotImplementedError, "\"lgamma_vml_cpu\" not implemented for '{}'"),
    "i0": (NotImplementedError, "\"i0_vml_cpu\" not implemented for '{}'"),
    "digamma": (NotImplementedError, "\"digamma\" not implemented for '{}'"),
    "maximum": (RuntimeError, "maximum not implemented for complex tensors."),
    "minimum": (RuntimeError, "minimum not implemented for complex tensors."),
    "fmax": (RuntimeError, "fmax not implemented for complex tensors."),
    "fmin": (RuntimeError, "fmin not implemented for complex tensors."),
    "deg2rad": (RuntimeError, "deg2rad is not supported for complex tensors."),
    "rad2deg": (RuntimeError, "rad2deg is not supported for complex tensors."),
    "signbit": (NotImplementedError, "signbit is not implemented for complex tensors."),
    "isneginf": (RuntimeError, "isneginf does not support complex inputs."),
    "isposinf": (RuntimeError, "isposinf does not support complex inputs."),
    "heaviside": (RuntimeError, "heaviside is not yet implemented for complex tensors."),
    "floor_divide": (NotImplementedError, "\"div_floor_cpu\" not implemented for '{}'"),
}  # fmt: skip


def _complex_refused(row: Row, dt: np.dtype) -> Exception:
    """torch's error for a row it does not compute on complex numbers."""
    kind, message = _COMPLEX_ERRORS.get(
        row.name, (NotImplementedError, f"\"{row.name}_cpu\" not implemented for '{{}}'")
    )
    return kind(message.format(_torch_name(dt)))


def _torch_name(dt: np.dtype) -> str:
    return _scalar_dtype(dt).scalar_name


def _has_zero(divisor) -> bool:
    if isinstance(divisor, Tensor):
        return bool((divisor == 0).any())
    return divisor == 0


def _keep_layout(result: Tensor, inputs: tuple) -> None:
    """Lay a new result out as its first full-shape tensor operand is (its own layout when dense, channels-last
    when its strides are channels-last-like), as torch's TensorIterator does: ``relu`` of a channels-last tensor
    is channels-last. (The CPU backend allocates its results so already.) A row-ordered operand (``_row_ordered``:
    ``chunk``'s parts) lays a result out row-major, as it was made, without working out the order."""
    for a in inputs:
        if isinstance(a, Tensor) and a._data.shape == result._data.shape:
            data = a._data
            if data.flags.c_contiguous or result._data.strides == data.strides or _row_ordered(data):
                return
            order = layout.preserved_order(data)
            if order != tuple(range(data.ndim)) and layout.dense_order(result._data) != order:
                result._data = layout.in_order(result._data, order, result._backend.copy)
            return


def _row_ordered(data) -> bool:
    """Whether ``data``'s strides decrease from its first dim to its last (size-1 dims aside), all positive: a
    slice of rows, columns or channels (``chunk``'s parts, ``x[:, 16:]``). A result laid out as such an operand
    (torch's TensorIterator) is row-major, as a new array is."""
    last = None
    for n, st in zip(data.shape, data.strides):
        if n != 1:
            if st <= 0 or (last is not None and st > last):
                return False
            last = st
    return True


class Elementwise(Function):
    """Base of the generated classes: ``row`` says what to compute; inputs come first, then ``row.params``.

    Backward returns gradients already reduced to each input's shape and dtype (``_trusted``), so the engine
    checks nothing; ``ctx.in_meta`` records the inputs' shapes and dtypes only when they differ from the output's.
    """

    _trusted = True
    _lists_integral_inputs = True  # (torch lists ``mask`` in ``x * mask``)
    # what backward reads when forward saved nothing; its gradients are kernel results or g itself, never a saved
    # tensor (so the engine need not compare them with the saved ones)
    _node_defaults = {"values": (), "params": (), "in_meta": None, "_returns_saved": False}
    row: Row
    arity = 1
    _saves: tuple = ()  # per input: does some gradient read it?
    _save_idx: tuple = ()  # the inputs some gradient reads
    _read_by: tuple = ()  # per input: the inputs whose gradients read it
    _reads: dict = {}  # needs_input_grad -> per input: does a needed gradient read it
    _no_values: tuple = ()  # one None per input: the values of inputs that are all tensors
    _saves_out = False
    _passthrough: tuple = ()  # per input: is its gradient g itself?
    _only_passthrough = False
    _tensor_grads = None
    _kernel_pairs: dict = {}  # needs_input_grad -> the two inputs whose gradients one fused kernel computes
    _array_pattern = "a"  # elementwise_plain's pattern when every operand is a whole array: "a" per input

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """The whole call for the common case: tensors of one float dtype on one device, of one shape or
        broadcasting, contiguous or expanded from one element (maybe with Python numbers), with the row's params
        as Python numbers (``leaky_relu(x, 0.2)``), outside anomaly and inference mode, with no tracer. It
        computes what ``forward`` computes and builds the node ``_link_outputs`` would build; anything else
        returns None for the general path. Saved-tensor hooks are honoured here (``hooked``), so an input no
        gradient reads is not packed (torch saves none), as in the general path it would be.
        """
        params = ()
        inputs = args
        if len(args) != cls.arity:
            params = args[cls.arity :]
            if len(params) != len(cls.row.params):
                return None
            for p in params:
                if type(p) is not float and type(p) is not int:
                    return None
            inputs = args[: cls.arity]
        hooked = not st.fast  # (st.fast: no tracer, anomaly, inference or saved-tensor hooks)
        if hooked and (st.tracer is not None or st.anomaly or st.inference):
            return None
        row = cls.row
        arrays, needs, first, scalars, grad, mixed = [], [], None, False, False, False
        strided = False  # an operand that is a strided view (``chunk``'s parts, a transpose): the general loops
        pattern = cls._array_pattern  # the kernel's operand kinds, while every operand is a whole array
        for a in inputs:
            if isinstance(a, Tensor):
                d = a._data
                if first is None:
                    first = d
                elif type(d) is not type(first) or d.dtype is not first.dtype:
                    return None
                elif d.shape != first.shape:
                    mixed = True  # broadcast: the backend's general elementwise, and shapes for the backward
                if d.flags.c_contiguous:
                    arrays.append(d)
                elif d.size and not any(d.strides):  # expanded from one element (sum's gradient): a number
                    arrays.append(d[(0,) * d.ndim])
                    pattern = None
                else:
                    arrays.append(d)
                    pattern = None
                    strided = True
                if a._requires_grad or a.grad_fn is not None:
                    needs.append(True)
                    grad = True
                else:
                    needs.append(False)
            elif type(a) is float or type(a) is int:
                arrays.append(a)
                needs.append(False)
                scalars = True
                pattern = None
            else:
                return None
        if first is None or first.dtype.kind != "f" or first.dtype.itemsize < 4 or row.integral_only:
            return None  # (float16 is computed in float32: the general path)
        linked = grad and st.enabled
        if linked and not cls.differentiable:
            if not row.out_bool:
                return None  # the NotImplemented node: the general path makes it
            linked = False  # a comparison's bool result: no node on any path (``x > 0`` of a ``requires_grad`` x)
        result = _new(Tensor)
        backend = _BACKENDS.get(type(first)) or backend_for(first)
        if mixed or params or strided:
            shape = (
                broadcast_shapes(*[a._data.shape for a in inputs if isinstance(a, Tensor)]) if mixed else first.shape
            )
            result._data = backend.elementwise(row, arrays, params, first.dtype, shape=shape, out_dtype=row.out_dtype)
            if strided:  # (laid out as the general path lays it)
                _keep_layout(result, inputs)
        else:
            result._data = backend.elementwise_plain(row, arrays, first.dtype, first.shape, row.out_dtype, pattern)
        if not linked:
            return result
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(needs) if not params else (*needs, *[False] * len(params))
        saved = []
        for j in cls._save_idx:
            a = inputs[j]
            if isinstance(a, Tensor):
                if a._is_inference:
                    return None
                if not _read(cls, needs, j):
                    saved.append(_unread(a))
                else:
                    saved.append(saved_input(a) if hooked else saved_input_unhooked(a))
        make_node(ctx, edges_of(args, cls), result)
        if cls._saves_out:
            saved.append(saved_output(result) if hooked else saved_output_unhooked(result))
        if saved:
            ctx._saved = saved
        if scalars:
            ctx.values = [None if isinstance(a, Tensor) else a for a in inputs]
        if mixed:
            ctx.in_meta = [(a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None for a in inputs]
        if params:
            ctx.params = params
        return result

    @classmethod
    def _fast_one(cls, a: Tensor, st):
        """``_fast_apply`` for one contiguous float tensor (``relu(x)``), unrolled: no per-operand loop or lists
        (0.4 us less a call without a graph, 0.7 us with one, at 16 elements); anything else goes there."""
        if not st.fast:
            return cls._fast_apply((a,), st)
        d = a._data
        dt = d.dtype
        row = cls.row
        if dt.kind != "f" or dt.itemsize < 4 or row.integral_only or not d.flags.c_contiguous:
            return cls._fast_apply((a,), st)
        fa = a.grad_fn
        linked = st.enabled and (fa is not None or a._requires_grad)
        if linked and not cls.differentiable:
            if not row.out_bool:
                return None  # the NotImplemented node: the general path makes it
            linked = False  # a comparison's bool result: no node on any path (``x > 0`` of a ``requires_grad`` x)
        result = _new(Tensor)
        result._data = (_BACKENDS.get(type(d)) or backend_for(d)).elementwise_plain(
            row, [d], dt, d.shape, row.out_dtype, "a"
        )
        if not linked:
            return result
        if cls._saves[0] and a._is_inference:
            return None  # (the general path raises torch's error)
        ctx = cls._backward_cls()
        ctx.needs_input_grad = _ONE_NEEDED
        # ``make_node``'s stores for one output, inline: this and ``_fast_pair`` are the hottest node builders (a
        # call costs as much as the stores; tests/test_layout.py lists the two, tests/test_fast_paths.py checks
        # their nodes carry every field ``make_node`` gives)
        ctx._edges = ((fa, a._output_nr) if fa is not None else (accumulator_of(a), 0),)
        ctx._sequence_nr = next(_sequence)
        result.grad_fn = ctx
        if cls._saves[0]:
            ctx._saved = (
                [saved_input_unhooked(a), saved_output_unhooked(result)]
                if cls._saves_out
                else [saved_input_unhooked(a)]
            )
        elif cls._saves_out:
            ctx._saved = [saved_output_unhooked(result)]
        return result

    @classmethod
    def _fast_pair(cls, a: Tensor, b: Tensor, st):
        """``_fast_apply`` for two contiguous float tensors of one shape, dtype and storage (``x * w``), unrolled
        as ``_fast_one`` is; anything else goes there."""
        if not st.fast:
            return cls._fast_apply((a, b), st)
        d = a._data
        e = b._data
        dt = d.dtype
        row = cls.row
        if (
            d.shape != e.shape
            or dt is not e.dtype
            or type(d) is not type(e)
            or dt.kind != "f"
            or dt.itemsize < 4
            or row.integral_only
            or not d.flags.c_contiguous
            or not e.flags.c_contiguous
        ):
            return cls._fast_apply((a, b), st)
        fa = a.grad_fn
        fb = b.grad_fn
        linked = st.enabled and (fa is not None or fb is not None or a._requires_grad or b._requires_grad)
        if linked and not cls.differentiable:
            if not row.out_bool:
                return None  # the NotImplemented node: the general path makes it
            linked = False  # a comparison's bool result: no node on any path (``x > 0`` of a ``requires_grad`` x)
        result = _new(Tensor)
        result._data = (_BACKENDS.get(type(d)) or backend_for(d)).elementwise_plain(
            row, [d, e], dt, d.shape, row.out_dtype, "aa"
        )
        if not linked:
            return result
        saves = cls._saves
        if (saves[0] and a._is_inference) or (saves[1] and b._is_inference):
            return None  # (the general path raises torch's error)
        ctx = cls._backward_cls()
        ctx.needs_input_grad = (fa is not None or a._requires_grad, fb is not None or b._requires_grad)
        ctx._edges = (  # ``make_node``'s stores for one output, inline (see ``_fast_one``)
            (fa, a._output_nr) if fa is not None else (accumulator_of(a), 0) if a._requires_grad else _NO_EDGE,
            (fb, b._output_nr) if fb is not None else (accumulator_of(b), 0) if b._requires_grad else _NO_EDGE,
        )
        ctx._sequence_nr = next(_sequence)
        result.grad_fn = ctx
        if saves[0] or saves[1] or cls._saves_out:
            saved = []
            read = cls._reads[ctx.needs_input_grad]
            if saves[0]:
                saved.append(saved_input_unhooked(a) if read[0] else _unread(a))
            if saves[1]:
                saved.append(saved_input_unhooked(b) if read[1] else _unread(b))
            if cls._saves_out:
                saved.append(saved_output_unhooked(result))
            ctx._saved = saved
        return result

    @staticmethod
    def forward(ctx, *args):
        cls = ctx._forward_cls
        row = cls.row
        n = cls.arity
        if len(args) == n:
            inputs, params = args, ()
        else:
            inputs, params = args[:n], args[n:]
        arrays, backend, dt, shape, plain = _plan(row, inputs)
        result = _new(Tensor)
        result._data = backend.elementwise(row, arrays, params, dt, shape=shape, out_dtype=row.out_dtype)
        if not plain or not inputs[0]._data.flags.c_contiguous:
            _keep_layout(result, inputs)
        if cls.differentiable and True in ctx.needs_input_grad:
            # what backward needs: the saved tensors, the scalar inputs, the params, and (only when an input's
            # shape or dtype differs from the output's) each input's shape and dtype, to reduce its gradient to
            if plain:  # every input a tensor of the output's shape and dtype
                if cls._save_idx:
                    needs = ctx.needs_input_grad
                    kept = [inputs[j] if _read(cls, needs, j) else _alias(inputs[j]) for j in cls._save_idx]
                    ctx.to_save = kept if not cls._saves_out else [*kept, result]
                elif cls._saves_out:
                    ctx.to_save = (result,)
            else:
                _record_mixed(ctx, cls, inputs, shape, dt, result)
            if params:
                ctx.params = params
        return result

    @staticmethod
    def _backward_one(ctx, g):
        """``backward`` of a one-input row (relu, exp, sigmoid...) in the common case, unrolled as ``_fast_one``
        is: no create_graph, no scalars, the input of the output's shape and dtype, its saved tensors
        unmodified. Each saved tensor is read once and the gradient goes where the general path would put it
        (1.5-2 us less a node at 16 elements); anything else goes to ``backward``."""
        cls = ctx._forward_cls
        saved = ctx._saved
        if not nothing_records(state) or ctx.in_meta is not None or ctx.values or not _unmodified(saved):
            return Elementwise.backward(ctx, g)  # (which raises torch's error for a modified saved tensor)
        gd = g._data
        dt = gd.dtype
        into = gd if g._grad_slots == 1 else None  # (``owns(g)``, inline) the engine owns g: the gradient overwrites it
        x_data = saved[0].tensor._data if cls._save_idx else 0  # (0: an operand no gradient reads)
        out_data = 0
        if cls._saves_out:
            out_entry = saved[-1]
            out_data = out_entry.tensor._data
            if into is None and out_entry.output_ref is not None:
                into = _spare_output(ctx, out_entry, out_data, gd)
        backend = _BACKENDS.get(type(gd)) or backend_for(gd)
        params = ctx.params
        data = backend.elementwise_grad(cls.row, 0, gd, out_data, [x_data], params, dt, result=into)
        if data is gd:  # written into g: g itself goes on (the engine counts it where it goes)
            return (g, *[None] * len(params)) if params else (g,)
        grad = _new(Tensor)
        grad._data = data
        return (grad, *[None] * len(params)) if params else (grad,)

    @staticmethod
    def _backward_pair(ctx, g):
        """``backward`` of a two-input row whose two gradients one kernel computes (mul, div...), in the common
        case, unrolled as ``_backward_one`` is: both gradients needed, two tensor inputs of the output's shape
        and dtype, no create_graph or params, the saved tensors unmodified; anything else goes to
        ``backward``."""
        cls = ctx._forward_cls
        saved = ctx._saved
        if (
            not nothing_records(state)
            or cls.row.no_formula
            or ctx.needs_input_grad != _BOTH_NEEDED
            or ctx.in_meta is not None
            or ctx.params
            or ctx.values
            or not _unmodified(saved)
        ):
            return Elementwise.backward(ctx, g)
        operands = [0, 0]  # (0: an operand no gradient reads)
        k = 0
        for j in cls._save_idx:
            operands[j] = saved[k].tensor._data
            k += 1
        out_data = saved[k].tensor._data if cls._saves_out else 0
        gd = g._data
        backend = _BACKENDS.get(type(gd)) or backend_for(gd)
        first, second = backend.elementwise_grads(
            cls.row,
            (0, 1),
            gd,
            out_data,
            operands,
            (),
            gd.dtype,
            g._grad_slots == 1,  # (``owns(g)``, inline)
        )
        grad0 = _new(Tensor)
        grad0._data = first
        if second is gd:  # written into g: g itself goes on (see _backward_one)
            return grad0, g
        grad1 = _new(Tensor)
        grad1._data = second
        return grad0, grad1

    @staticmethod
    def backward(ctx, g):
        cls = ctx._forward_cls
        row = cls.row
        if not cls.differentiable:
            raise RuntimeError(f"derivative for aten::{row.name} is not implemented")
        needed = ctx.needs_input_grad
        for i, message in row.no_formula.items():  # (an input torch has no derivative formula for)
            if needed[i]:
                raise NotImplementedError(message)
        n = cls.arity
        if cls._only_passthrough and ctx.in_meta is None:  # (add): each gradient is g itself, no kernel
            grads = []
            for i in range(n):
                grads.append(g if needed[i] else None)
            return (*grads, *([None] * len(ctx.params)))
        saved = ctx.saved_tensors if ctx._saved or ctx._freed else ()  # (torch's errors: freed, or modified)
        # the engine's buffer of g may take a gradient when it owns g and no graph node is to keep g
        reuse = _reusable_input(cls, needed) if nothing_records(state) and owns(g) else None
        wanted = needed[:n]

        def kernel(g, *saved):
            return _kernel_grads(ctx, cls, g, saved, wanted, reuse)

        def formula(g, *saved):
            return _tensor_backward(ctx, cls, g, saved, wanted)

        name = cls._grad_node
        if state.enabled and saved:  # a node may be recorded: its inputs are what the formula differentiates
            saved, name = _differentiated(ctx, cls, g, saved, wanted)
        zeros = row.name in ZERO_SECOND_ORDER
        grads = fused_grads(name, kernel, formula, (g, *saved), wanted, zeros)
        if ctx.params:
            grads.extend([None] * len(ctx.params))
        return tuple(grads)


#: Rows whose gradient torch computes with a native kernel (``threshold_backward``, ``hardtanh_backward``...) or
#: through ``sgn``: the derivative of that gradient with respect to the input is zeros there, not missing. By row:
#: the node torch's gradient shows.
ZERO_SECOND_ORDER = {
    "relu": "ThresholdBackwardBackward0",
    "threshold": "ThresholdBackwardBackward0",
    "abs": "MulBackward0",
    "copysign": "MulBackward0",
    "hardtanh": "HardtanhBackwardBackward0",
    "hardshrink": "HardshrinkBackwardBackward0",
    "softshrink": "SoftshrinkBackwardBackward0",
    "leaky_relu": "LeakyReluBackwardBackward0",
}


def _differentiated(ctx, cls, g: Tensor, saved: tuple, wanted: tuple) -> tuple:
    """(``saved`` with each tensor that the row's gradient formula reads only where nothing differentiates it (a
    comparison, as clamp's ``g * (lo <= x <= hi)``) detached, as torch's gradient is then no function of it; the
    node name the gradient shows: the formula's last op, as torch's composite formulas show). Found once per row,
    operand kinds, parameters, operands requiring grad and real or complex, by running the formula on stand-ins."""
    zero_node = ZERO_SECOND_ORDER.get(cls.row.name)
    if zero_node is not None:
        return saved, zero_node
    key = (wanted, tuple(v is None for v in ctx.values or cls._no_values), tuple(ctx.params))
    key += (g.requires_grad, g._data.dtype.kind, *(s.requires_grad for s in saved))
    found = cls._differentiated.get(key)
    if found is None:
        with enable_grad():
            probes = [s.detach().requires_grad_(s.requires_grad and s._data.dtype.kind in "fcV") for s in saved]
            g_probe = g.detach().requires_grad_(g.requires_grad)
            outs = [o for o in _tensor_backward(ctx, cls, g_probe, probes, wanted) if o is not None]
            outs = [o for o in outs if o.requires_grad]
            targets = [p for p in probes if p.requires_grad]
            grads = iter(
                autograd_grad(outs, targets, [o.detach() * 0 + 1 for o in outs], allow_unused=True)
                if outs and targets
                else [None] * len(targets)
            )
        keep = tuple(next(grads) is not None if p.requires_grad else False for p in probes)
        name = type(outs[0].grad_fn).__name__ if outs else cls._grad_node
        found = cls._differentiated[key] = (keep, name)
    keep, name = found
    return tuple(s if k else s.detach() for s, k in zip(saved, keep)), name


def _operands(ctx, cls, saved: tuple) -> tuple:
    """(each input's value: a saved tensor, a scalar, or None where no gradient reads it; the saved output)."""
    values = list(ctx.values or cls._no_values)
    k = 0
    for j in cls._save_idx:
        if values[j] is None:
            values[j] = saved[k]
            k += 1
    return values, (saved[k] if cls._saves_out else None)


def _kernel_grads(ctx, cls, g: Tensor, saved: tuple, wanted: tuple, reuse: int | None) -> list:
    """The wanted gradients by the row's fused gradient kernels (``reuse``: the input whose gradient may overwrite
    ``g``'s buffer), each reduced to its input's shape and dtype."""
    row = cls.row
    values, out = _operands(ctx, cls, saved)
    operands = [0 if v is None else v._data if isinstance(v, Tensor) else v for v in values]
    out_data = 0 if out is None else out._data
    gd = g._data
    backend = _BACKENDS.get(type(gd)) or backend_for(gd)
    meta = ctx.in_meta
    pair = cls._kernel_pairs.get(ctx.needs_input_grad)  # two gradients from kernels: one pass computes both
    if pair is not None:
        both = backend.elementwise_grads(row, pair, gd, out_data, operands, ctx.params, gd.dtype, reuse is not None)
    grads = []
    for i, want in enumerate(wanted):
        if not want:
            grads.append(None)
            continue
        if cls._passthrough[i]:
            gi = g
        else:
            if pair is not None:
                data = both[0] if i == pair[0] else both[1]
            else:
                into = gd if i == reuse else None
                data = backend.elementwise_grad(row, i, gd, out_data, operands, ctx.params, gd.dtype, result=into)
            if data is gd:  # written into g: g itself goes on (see _backward_one)
                gi = g
            else:
                gi = _new(Tensor)
                gi._data = data
        if meta is not None:
            gi = _to_input(gi, meta[i], False)
        grads.append(gi)
    return grads


def _spare_output(ctx, entry, out_data, gd):
    """The node's saved output storage, when its gradient may be written there (``SavedTensor.output_ref``): the
    output tensor is gone, its storage was never handed out, the gradient has its shape and dtype, and this
    backward frees the node once it has run (no ``retain_graph``); else None."""
    if entry.output_ref() is not None or ctx._output_exposed:
        return None
    if out_data.shape != gd.shape or out_data.dtype != gd.dtype:
        return None
    task = state.task
    if task is None or task.retain_graph:
        return None
    return out_data


def _unmodified(saved: list | None) -> bool:
    """Whether ``saved`` holds saved tensors (``None`` or empty: nothing saved, or freed) none of which was
    modified in place since it was saved (torch's version check)."""
    if not saved:
        return False
    for s in saved:
        counter = s.tensor._version_counter
        if (0 if counter is None else counter.value) != s.version:
            return False
    return True


def _tensor_backward(ctx, cls, g: Tensor, saved: tuple, wanted: tuple) -> list:
    """The wanted gradients with each row formula re-bound to tensor ops: what differentiates the kernels'.
    For complex numbers the (real) formula ``g * f'(z)`` gives torch's ``g * conj(f'(z))`` as
    ``conj(formula(conj(g)))``."""
    complex_grad = g._data.dtype.kind == "c"
    if complex_grad:
        g = complex_ops.conj_physical(g)
    values, out = _operands(ctx, cls, saved)
    grads = []
    for i, want in enumerate(wanted):
        if not want:
            grads.append(None)
            continue
        if cls._passthrough[i]:
            gi = g
        else:
            gi = cls._tensor_grads[i](g, out, *values, *ctx.params)
            if not isinstance(gi, Tensor):
                gi = Tensor._make(g._backend.full(g._data.shape, gi, g._data.dtype))
        if complex_grad:
            gi = complex_ops.conj_physical(gi)
        if ctx.in_meta is not None:
            gi = _to_input(gi, ctx.in_meta[i], True)
        grads.append(gi)
    return grads


def _plan(row: Row, inputs: tuple) -> tuple:
    """(storage arrays, backend, compute dtype, output shape, plain). The common case (tensors of one float dtype
    and shape on one device, maybe with Python numbers) is decided in one pass; anything else goes through torch's
    full promotion and broadcasting rules, with torch's errors. ``plain``: every input is such a tensor."""
    arrays = []
    first = None
    uniform = plain = True
    for a in inputs:
        if isinstance(a, Tensor):
            d = a._data
            if first is None:
                first = d
            elif type(d) is not type(first) or d.dtype != first.dtype or d.shape != first.shape:
                uniform = False
            arrays.append(d)
        else:
            if type(a) is bool or type(a) is complex:  # (a number that may change the dtype)
                uniform = False
            plain = False
            arrays.append(a)
    if uniform and first.dtype.kind == "f" and not row.integral_only:
        return arrays, _BACKENDS.get(type(first)) or backend_for(first), first.dtype, first.shape, plain
    shapes = [a.shape for a in arrays if hasattr(a, "shape")]
    shape = broadcast_shapes(*shapes) if len(set(shapes)) > 1 else shapes[0]
    return arrays, same_backend(inputs), _compute_dtype(row, inputs), shape, False


def _read(cls, needs: tuple, j: int) -> bool:
    """Whether a gradient this call computes reads input ``j`` (torch saves an input only then: ``x * 2`` keeps
    nothing of ``x``, and an in-place change of ``x`` afterwards does not stop backward)."""
    for i in cls._read_by[j]:
        if needs[i]:
            return True
    return False


def _alias(a: Tensor) -> Tensor:
    """What stands for an input that no gradient of this call reads: its storage without its version counter,
    so no in-place change of ``a`` is reported (its values are never used)."""
    return Tensor._make(a._data)


def _unread(a: Tensor) -> SavedTensor:
    """The saved entry of an input no gradient of this call reads (``_alias``; see ``saved_input``)."""
    s = _new(SavedTensor)  # (filled in as ``saved_input`` fills one: no ``__init__`` call on the hot path)
    s.tensor = _alias(a)
    s.version = 0
    s.output_nr = -1
    s.grad_fn = None
    return s


def _record_mixed(ctx, cls, inputs: tuple, shape: tuple, dt, result: Tensor) -> None:
    """What backward needs when some input is a number, or differs from the output in shape or dtype: the scalar
    values, the saved tensors, and each input's shape and dtype to reduce its gradient to."""
    values, to_save, differs = [], [], False
    for j, a in enumerate(inputs):
        if isinstance(a, Tensor):
            values.append(None)
            if cls._saves[j]:
                to_save.append(a if _read(cls, ctx.needs_input_grad, j) else _alias(a))
            data = a._data
            if data.shape != shape or data.dtype != dt:
                differs = True
        else:
            values.append(a)
    if cls._saves_out:
        to_save.append(result)
    ctx.values = values
    if to_save:
        ctx.to_save = to_save
    if differs:
        ctx.in_meta = [(a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None for a in inputs]


def _to_input(g: Tensor, meta, create_graph: bool) -> Tensor:
    """A gradient in the output's shape and dtype, reduced to one input's."""
    if meta is None:
        return g
    shape, dtype = meta
    if g._data.shape != shape:
        g = g.sum_to_size(shape) if create_graph else Tensor._make(g._backend.sum_to_shape(g._data, shape))
    if g._data.dtype != dtype:
        if create_graph and g._data.dtype.kind == "c" and dtype.kind != "c":  # a real input's: the real part
            g = complex_ops.real(g)
        g = g.to(dtype) if create_graph else Tensor._make(g._backend.astype(g._data, dtype))
    return g


def _reusable_input(cls, needed: tuple) -> int | None:
    """The input whose gradient may be written into ``g``'s own buffer (no allocation; the engine owns ``g``):
    the last one computed by a kernel, when no gradient returns ``g`` itself."""
    last = None
    for i in range(cls.arity):
        if needed[i]:
            if cls._passthrough[i]:
                return None
            last = i
    return last


def _tensor_math() -> types.SimpleNamespace:
    """``math`` and ``select`` for tensors: what ``Row.tensor_grad`` binds when gradients run on Tensors."""

    def select(cond, a, b):
        if isinstance(cond, Tensor):
            return _upward.ops.where(cond, a, b)
        return a if cond else b

    def unary(name):
        return lambda x: FUNCTIONS[name].apply(x) if isinstance(x, Tensor) else getattr(math, name)(x)

    def row_op(name):
        return lambda *args: FUNCTIONS[name].apply(*args)

    ns = types.SimpleNamespace(select=select, inf=math.inf, nan=math.nan, pi=math.pi, e=math.e)
    for name, row in ROWS.items():  # math.<f> is the row <f> wherever the table has one (exp, erf, log1p...)
        if hasattr(math, name) and row.arity == 1 and row.differentiable:
            setattr(ns, name, unary(name))
    # a gradient that calls another row's forward by name (lgamma's digamma, digamma's polygamma) calls that row
    ns.rows = {row.forward.__name__: row_op(name) for name, row in ROWS.items() if row.differentiable}
    return ns


class _LazyTensorGrads:
    """Tensor versions of a row's gradients, built on first double backward."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.fns = None

    def __getitem__(self, i: int):
        if self.fns is None:
            ns = _tensor_math()
            self.fns = [
                _TENSOR_GRADS.get((self.row.name, j)) or self.row.tensor_grad(j, ns) for j in range(len(self.row.grads))
            ]
        return self.fns[i]


def _pow_grad_exponent(g, out, x, y):
    """pow's exponent gradient on tensors, ``g * x**y * log(x)`` and zero where ``x`` is 0 and ``y`` a
    non-negative real (torch's condition). The row's own formula tests ``y >= 0``, which complex numbers do not
    have; this one also runs on complex operands (double backward and forward tangents of complex pow)."""
    complex_y = isinstance(y, complex) or (isinstance(y, Tensor) and y.is_complex())
    nonnegative = ((y.imag == 0) & (y.real >= 0)) if complex_y else (y >= 0)
    if isinstance(x, Tensor):
        # (a real base with a complex exponent: its log taken as a complex number, so a negative base has one)
        log_x = FUNCTIONS["log"].apply(x * (1 + 0j) if complex_y and not x.is_complex() else x)
        at_zero = (x == 0) & nonnegative if isinstance(nonnegative, Tensor) else (x == 0) & bool(nonnegative)
    else:
        log_x = cmath.log(x) if isinstance(x, complex) or complex_y else math.log(x)
        at_zero = nonnegative if x == 0 else False
    derivative = g * out * log_x
    if isinstance(at_zero, Tensor):
        return _upward.ops.where(at_zero, 0.0, derivative)
    return 0.0 * derivative if at_zero else derivative


#: Gradients on tensors that replace a row's formula rebound to tensors (``Row.tensor_grad``), by (row, input).
_TENSOR_GRADS = {("pow", 1): _pow_grad_exponent}


#: The rows whose torch op takes a Python number operand as a tensor (a wrapped number), which its node lists in
#: ``next_functions`` (``x * 2``: two edges); torch's ops with a scalar overload (``x ** 2``, ``fmod``) list none.
_WRAPPED_NUMBER_ROWS = frozenset({"add", "sub", "mul", "div"})


def make_function(row: Row, node_name: str | None, class_name: str | None = None, kinds: str = "") -> type:
    """One Function class for a table row (or a user's ``Row``), shown in graphs as ``node_name``; ``kinds``
    (``"ts"``: tensor and number) says which operands are tensors, so a gradient that a number never needs
    does not make the node keep the output alive (``x ** 2`` saves ``x`` alone, as torch's node does)."""
    class_name = class_name or (node_name or row.name.title().replace("_", "")).replace("Backward", "_")
    attrs = {"row": row, "arity": row.arity, "_array_pattern": "a" * row.arity, "__module__": __name__}
    # torch's NotImplemented node: no gradient formula, or none for these operand kinds (remainder(3.0, t))
    attrs["differentiable"] = bool(row.grads) and node_name != "NotImplemented"
    if node_name:
        attrs["node_name"] = node_name
    # the node of its gradients under ``create_graph`` (torch's ``<Op>BackwardBackward0``)
    attrs["_grad_node"] = (node_name or class_name).replace("Backward0", "") + "BackwardBackward0"
    attrs["_differentiated"] = {}  # (see ``_differentiated``)
    if row.name in _WRAPPED_NUMBER_ROWS:
        attrs["_listed_inputs"] = tuple(range(row.arity))
    cls = types.new_class(class_name, (Elementwise,), exec_body=lambda ns: ns.update(attrs))
    if row.grads:
        uses = [row.uses(i) for i in range(len(row.grads))]
        names = [f.__code__.co_varnames[: f.__code__.co_argcount] for f in row.grads]  # (g, out, inputs, params)
        cls._saves = tuple(any(n[2 + j] in u for n, u in zip(names, uses)) for j in range(row.arity))
        cls._save_idx = tuple(j for j in range(row.arity) if cls._saves[j])
        cls._read_by = tuple(
            tuple(i for i, (n, u) in enumerate(zip(names, uses)) if n[2 + j] in u) for j in range(row.arity)
        )
        cls._reads = {  # needs_input_grad -> per input: does a needed gradient read it (``_read``, precomputed)
            needs: tuple(any(needs[i] for i in cls._read_by[j]) for j in range(row.arity))
            for needs in itertools.product((False, True), repeat=row.arity)
        }
        cls._no_values = (None,) * row.arity
        tensors = [i for i in range(len(row.grads)) if not kinds or kinds[i] == "t"]
        cls._saves_out = any(names[i][1] in uses[i] for i in tensors)
        cls._passthrough = tuple(row.is_passthrough(i) for i in range(len(row.grads)))
        cls._only_passthrough = all(cls._passthrough)
        cls._tensor_grads = _LazyTensorGrads(row)
        if row.arity == 1 and attrs["differentiable"] and not cls._passthrough[0] and (cls._saves[0] or cls._saves_out):
            cls.backward = staticmethod(Elementwise._backward_one)  # (it hands anything uncommon to backward)
        if row.arity == 2 and not any(cls._passthrough):  # both gradients needed: one kernel computes the two
            cls._kernel_pairs = {(True, True) + (False,) * k: (0, 1) for k in range(len(row.params) + 1)}
        if row.arity == 2 and not any(cls._passthrough) and (any(cls._saves) or cls._saves_out):
            cls.backward = staticmethod(Elementwise._backward_pair)  # (it hands anything uncommon to backward)
    return cls


# --- the generated namespace --------------------------------------------------------------------------------
def _classes(row: Row) -> dict:
    """The row's Function classes by operand kinds (``"tt"``, ``"ts"``, ``"st"``; ``""`` for the only one)."""
    if isinstance(row.node, dict):
        return {kinds: make_function(row, node, kinds=kinds) for kinds, node in row.node.items()}
    return {"": make_function(row, row.node)}


CLASSES = {name: _classes(row) for name, row in ROWS.items()}
FUNCTIONS = {name: next(iter(classes.values())) for name, classes in CLASSES.items()}


def function_for(name: str) -> type:
    """The Function class of a row (the tensor-tensor one when the row has several node names)."""
    classes = CLASSES[name]
    return classes.get("tt") or next(iter(classes.values()))


#: rows whose complex form is not the row's formula on complex numbers (a real result, or z / |z|)
_COMPLEX_ROUTES = {"abs": complex_ops.abs_complex, "sgn": complex_ops.sgn_complex}


def _make_frontend(row: Row, public: str):
    """The public function of a row with torch's signature: ``op(input)``, ``op(input, other)`` (with
    ``alpha=`` where the row says), checking argument types as torch's parser does."""
    classes = CLASSES[row.name]
    if row.arity == 1:
        cls = classes[""]
        of_complex = _COMPLEX_ROUTES.get(row.name)

        def general(input):  # noqa: A002 - torch's name
            if not isinstance(input, Tensor):
                raise not_a_tensor(public, "input", 1, input)
            if of_complex is not None and input._data.dtype.kind == "c":
                return of_complex(input)
            return cls.apply(input)

        general = batchable(public, general)  # (what vmap intercepts)

        def unary(input):  # noqa: A002
            if batching[0] is None and isinstance(input, Tensor):
                # no vmap running: what ``apply`` would try first, without its frame or the vmap wrapper's (as
                # the operators do); it refuses to run while a tracer records calls through ``apply`` (``state.fast``)
                result = cls._fast_one(input, state)
                if result is not None:
                    return result
            return general(input)

        unary.checks_batching = True  # (``batchable``: it hands every call but the fast path's to ``general``)
        fn = unary
    elif row.arity == 2:
        single = classes.get("")
        if row.number_operands != (0, 1):  # torch's parser wants a Tensor where the row takes no number
            checked = _tensor_operands_checked(row, public)
            return checked

        def binary(input, other, *, alpha=1):  # noqa: A002
            a = as_operand(input, public, 1, "input")
            b = as_operand(other, public, 2, "other")
            if alpha != 1:
                b = _scaled(b, alpha, a)  # (``add(x, 2, alpha=3)``: x + 6)
            return (single or _by_operands(classes, a, b)).apply(a, b)

        if not row.alpha:

            def binary(input, other):  # noqa: A002, F811 - the same without alpha
                a = as_operand(input, public, 1, "input")
                b = as_operand(other, public, 2, "other")
                return (single or _by_operands(classes, a, b)).apply(a, b)

        fn = binary
    else:
        cls = classes[""]

        def nary(*args):
            return cls.apply(
                *[as_operand(a, public, k + 1) for k, a in enumerate(args[: row.arity])], *args[row.arity :]
            )

        fn = nary
    fn.__name__ = fn.__qualname__ = public
    fn.__doc__ = f"{_describe(row)}\n\nGenerated from row ``{row.name}`` of ``scalar_math.ROWS``."
    return fn


def _scaled(operand, alpha, other):
    """``alpha * operand`` for a binary row's ``alpha=``, in the dtype the op computes in: a tensor operand of
    another dtype than the result (a bfloat16 ``other`` added to a float32 ``input``) is cast up first, so the
    product is not rounded to the narrower type (torch scales inside the kernel, in the common dtype)."""
    if not isinstance(operand, Tensor):
        return operand * alpha
    if isinstance(other, Tensor) and other.dtype != operand.dtype:
        common = result_type(operand, other)
        if common != operand.dtype:
            operand = operand.to(common)
    return mul(operand, alpha)


def _tensor_operands_checked(row: Row, public: str):
    """The public function of a binary row whose torch signature takes a Python number at ``row.number_operands``
    only (``maximum(t, 1.5)`` is torch's TypeError)."""
    classes = CLASSES[row.name]
    single = classes.get("")

    def run(input, other, alpha):  # noqa: A002
        for k, (value, name) in enumerate(((input, "input"), (other, "other"))):
            if k not in row.number_operands and not isinstance(value, Tensor):
                raise not_a_tensor(public, name, k + 1, value)
        a = as_operand(input, public, 1, "input")
        b = as_operand(other, public, 2, "other")
        if alpha != 1:  # (rsub, the one such row with alpha: ``other - alpha * input``)
            a = _scaled(a, alpha, b)
        return (single or _by_operands(classes, a, b)).apply(a, b)

    if row.alpha:

        def binary(input, other, *, alpha=1):  # noqa: A002
            return run(input, other, alpha)

    else:

        def binary(input, other):  # noqa: A002
            return run(input, other, 1)

    binary.__name__ = binary.__qualname__ = public
    binary.__doc__ = f"{_describe(row)}\n\nGenerated from row ``{row.name}`` of ``scalar_math.ROWS``."
    return binary


def _describe(row: Row) -> str:
    """The row's ``doc``: what it computes, in one line (a generic line for a row without one)."""
    return row.doc or f"Elementwise ``{row.name}``."


#: Rows whose reflected operator computes ``self op other``, as torch's does (``2 * x`` is ``mul(x, 2)``: its node
#: lists ``x`` first): the same values, as IEEE addition and multiplication commute.
_COMMUTATIVE_ROWS = frozenset({"add", "mul"})


def _make_operator(row: Row, fn, name: str):
    """A Tensor operator: reflected operators (``__rsub__``) swap the operands (but ``_COMMUTATIVE_ROWS``'s); an
    operand type the op does not take gives ``NotImplemented``, so Python raises its ``unsupported operand
    type(s)`` TypeError (as torch).
    A tensor or a Python number goes straight to the row's Function class (the hot path of ``x * w``)."""
    classes = CLASSES[row.name] if row.frontend else {}
    with_tensor = classes.get("tt") or classes.get("")
    with_number = classes.get("ts") or classes.get("")
    number_first = classes.get("st") or with_number  # (``3.0 % t``: torch's NotImplemented node)
    if with_tensor is not None and with_tensor.arity == 2:
        fast_pair = with_tensor._fast_pair
    elif with_tensor is not None:  # (a row of other arity: its fast path checks the operand count)
        fast_pair = lambda a, b, st: with_tensor._fast_apply((a, b), st)  # noqa: E731
    if fn.__code__.co_argcount == 1:

        def unary(self):
            return fn(self)

        op = unary
    elif name.startswith("__r") and row.name not in _COMMUTATIVE_ROWS:

        def reflected(self, other):
            if number_first is not None and (type(other) is float or type(other) is int):
                result = number_first._fast_apply((other, self), state)  # (``unary`` says why it runs first)
                if result is not None:
                    return result
                return number_first.apply(other, self)
            try:
                other = as_operand(other)
            except TypeError:
                return NotImplemented
            return fn(other, self)

        op = reflected
    else:

        def forward(self, other):
            if with_tensor is not None:
                if isinstance(other, Tensor):
                    result = fast_pair(self, other, state)  # (``unary`` says why it runs first)
                    if result is not None:
                        return result
                    return with_tensor.apply(self, other)
                if type(other) is float or type(other) is int:
                    result = with_number._fast_apply((self, other), state)
                    if result is not None:
                        return result
                    return with_number.apply(self, other)
            try:
                other = as_operand(other)
            except TypeError:
                return NotImplemented
            return fn(self, other)

        op = forward  # (and a commutative row's reflected operator: ``2 * x`` is ``x * 2``)
    op.__name__ = op.__qualname__ = name
    return op


def _fast_inplace(t: Tensor, row: Row, args: tuple) -> bool:
    """``t.<row>_(*args)`` for the common case, written straight into ``t`` (True when done): no graph to record,
    ``t`` a contiguous float32/float64 array, each operand a Python number or a tensor of ``t``'s shape, dtype and
    storage type that is ``t`` itself or owns its memory (so it cannot overlap ``t`` in part). It skips the checks
    that cannot fail then (9 us of ``x.add_(y)``'s 10 at 3 elements); anything else returns False for
    ``row_inplace``'s general path."""
    data = t._data
    if row.out_bool or row.integral_only or data.dtype.kind != "f" or data.dtype.itemsize < 4:
        return False
    if not data.flags.c_contiguous or t._is_inference:  # (an inference tensor: check_inplace decides)
        return False
    enabled = state.enabled
    if enabled and (t._requires_grad or t.grad_fn is not None or t._base is not None):
        return False
    arrays = [data]
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            if d is not data and (
                type(d) is not type(data)
                or d.dtype is not data.dtype
                or d.shape != data.shape
                or d.base is not None
                or data.base is not None
                or not d.flags.c_contiguous
            ):
                return False
            if enabled and (a._requires_grad or a.grad_fn is not None):
                return False
            arrays.append(d)
        elif type(a) is float or type(a) is int:
            arrays.append(a)
        else:
            return False
    (_BACKENDS.get(type(data)) or backend_for(data)).elementwise(row, arrays, (), data.dtype, out=data)
    t._bump_version()
    return True


def row_inplace(t: Tensor, row, frontend, args: tuple, kwargs: dict) -> Tensor:
    """``t.<row>_(*args)``: straight into ``t``'s storage without autograd, else rebased."""
    if (
        not kwargs
        and len(args) == row.arity - 1
        and row.frontend
        and may_skip_apply(state)
        and _fast_inplace(t, row, args)
    ):
        return t
    check_inplace(t)
    operands = [as_operand(a, row.names[0] + "_") for a in args[: row.arity - 1]]
    check_written(t, operands)
    rewrite = getattr(state.tracer, "rewrite_inplace", None)  # numbagrad.compile's recorder: a traced value
    if rewrite is not None:  # changed in place is recorded as the out-of-place row (None: not traced)
        compute = None if row.out_bool else (lambda old: frontend(old, *args, **kwargs))
        redo = (lambda x, *a, **k: row_inplace(x, row, frontend, a, k)), args, kwargs
        done = rewrite(t, compute, redo)
        if done is not None:
            return done
    if needs_graph(t, operands):
        if row.out_bool and t._data.dtype.kind == "f":
            return rebase(t, lambda old: _compared_into(row, old, operands[0]))
        return rebase(t, lambda old: frontend(old, *args, **kwargs), bool(FUNCTIONS[row.name]._save_idx))
    if kwargs or not row.frontend or len(args) != row.arity - 1:  # torch's own signature: compute, then write
        with no_grad():
            result = frontend(t, *args, **kwargs)
        return write_result(t, result)
    inputs = (t, *operands)
    dt = _compute_dtype(row, inputs)
    out_dt = np.dtype(np.bool_) if row.out_bool else dt
    shape = broadcast_shapes(*[o._data.shape for o in inputs if isinstance(o, Tensor)])
    check_result(t, out_dt, shape)
    backend = same_backend(inputs)
    arrays = [o._data if isinstance(o, Tensor) else o for o in inputs]
    data = t._data
    if out_dt == data.dtype:
        backend.elementwise(row, arrays, (), dt, out=data)
    else:
        backend.setitem(data, (Ellipsis,), backend.elementwise(row, arrays, (), dt, out=backend.empty(shape, out_dt)))
    t._bump_version()
    return t


class _CompareInto(Function):
    """An in-place comparison (``y.lt_(1.5)``) into a float tensor under autograd: the 0/1 result in the
    tensor's dtype, on a node whose gradients are zero, which torch records (``LtBackward0``) so the tensor
    keeps requiring grad."""

    @staticmethod
    def forward(ctx, old, other, row):
        ctx.other_shape = other.shape if isinstance(other, Tensor) else None
        return FUNCTIONS[row.name].apply(old, other).to(old.dtype)

    @staticmethod
    def backward(ctx, g):
        gother = (g * 0).sum_to_size(ctx.other_shape) if ctx.needs_input_grad[1] else None
        return g * 0, gother, None


_COMPARE_INTO: dict = {}


def _compared_into(row: Row, old: Tensor, other) -> Tensor:
    kind = 1 if isinstance(other, Tensor) else 0  # torch's node for a tensor operand is the second one
    key = (row.name, kind)
    if key not in _COMPARE_INTO:
        node = f"{row.name.title()}Backward{kind}"
        _COMPARE_INTO[key] = type(node.replace("Backward", "_"), (_CompareInto,), {"node_name": node})
    cls = _COMPARE_INTO[key]
    return cls.apply(old, other, row)


def _make_inplace(row: Row, fn, name: str):
    """``t.<name>(...)`` for a row (see ``row_inplace``)."""

    def inplace(self, *args, **kwargs):
        return row_inplace(self, row, fn, args, kwargs)

    inplace.__name__ = inplace.__qualname__ = name
    inplace.__doc__ = f"In-place ``{row.name}``, into this tensor: {_describe(row)}"
    inplace.traces_inplace = True  # numbagrad.compile lets row_inplace record it (see its rewrite_inplace)
    return inplace


def _declare_row(row: Row, frontend) -> None:
    """Register a row's public names, methods, operators and in-place forms."""
    if row.names and frontend is not None:
        register(Declaration(row.names[0], frontend, tuple(row.methods), tuple(row.names[1:]), (), row.differentiable))
    elif row.methods:
        register(Declaration(f"_{row.name}_methods", frontend, tuple(row.methods), (), (), row.differentiable))
    for op_name in row.operators:
        if op_name.startswith("__i"):
            continue
        register(Declaration(f"_{row.name}{op_name}", _make_operator(row, frontend, op_name), (op_name,)))


# --- the rows whose torch signature needs more than the table says ------------------------------------------
def _row_frontend(name: str):
    return _make_frontend(ROWS[name], ROWS[name].names[0])


mul = _row_frontend("mul")


def clamp(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A001, A002 - torch's names
    """Clamp into ``[min, max]``; a missing bound is unbounded. Gradient passes where ``min <= x <= max``."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(input, Tensor) and input._data.dtype.kind == "c":
        raise NotImplementedError("clamp is not supported for complex types")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if not all(b is None or isinstance(b, Tensor) for b in (min, max)):  # a tensor bound and a number bound
            raise _invalid(
                "clamp",
                (input, min, max),
                "Tensor input, Tensor min = None, Tensor max = None",
                "Tensor input, Number min = None, Number max = None",
            )
        return _clamp_tensor(input, min, max)
    dt = input._data.dtype
    if dt.kind not in "fV":
        if isinstance(min, float) or isinstance(max, float):
            input = input.to(get_default_dtype())
        else:  # integer tensor, integer bounds: stay integer (a bool one becomes int64, as the bounds promote it)
            if dt.kind == "b" and not (type(min) is bool or type(max) is bool):
                dt = np.dtype(np.int64)
                input = input.to(_scalar_dtype(dt))
            min, max = (checked_scalar(bound, _scalar_dtype(dt)) for bound in (min, max))
            info = np.iinfo(dt) if dt.kind != "b" else np.iinfo(np.int8)
            min = info.min if min is None else min
            max = info.max if max is None else max
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max
    return CLASSES["clamp"][""].apply(input, lo, hi)


def _by_operands(classes: dict, a, b) -> type:
    """The class of a binary row for its operands: tensor and number (``"ts"``), number and tensor (``"st"``, where
    the row names one: ``xlogy(2.0, t)`` is torch's ``XlogyBackward1``), else two tensors (``"tt"``)."""
    if not isinstance(b, Tensor):
        return classes["ts"]
    if not isinstance(a, Tensor) and "st" in classes:
        return classes["st"]
    return classes["tt"]


def pow(input, exponent) -> Tensor:  # noqa: A001 - torch's name
    """``input ** exponent``: tensor**scalar, tensor**tensor and scalar**tensor are torch's three nodes."""
    x, e = as_operand(input, "pow", 1, "input"), as_operand(exponent, "pow", 2, "exponent")
    classes = CLASSES["pow"]
    if not isinstance(e, Tensor):
        if type(e) is int and e < 0 and isinstance(x, Tensor) and x._data.dtype.kind in "biu":
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        if type(e) is bool and isinstance(x, Tensor) and x._data.dtype == _BOOL:  # torch's shortcuts for 1 and 0
            return x.clone() if e else x.logical_or(x.logical_not())
        return classes["ts"].apply(x, e)
    out = classes["st"].apply(x, e) if not isinstance(x, Tensor) else classes["tt"].apply(x, e)
    if out._data.dtype.kind in "iu" and bool((e < 0).any()):  # torch: 0 ** negative is 0 in integers
        out.masked_fill_((e < 0) & (x == 0), 0)
    return out


def bitwise_not(input: Tensor) -> Tensor:  # noqa: A002
    """``~input``: logical not on bool tensors, two's complement on integers."""
    if input._data.dtype == _BOOL:
        return FUNCTIONS["logical_not"].apply(input)
    return FUNCTIONS["bitwise_not"].apply(input)


def _rpow(self, other):
    try:
        other = as_operand(other)
    except TypeError:
        return NotImplemented
    return pow(other, self)


def _rtruediv(self, other):
    """``other / self`` is ``reciprocal(self) * other`` in torch (node ``MulBackward0``)."""
    try:
        other = as_operand(other)
    except TypeError:
        return NotImplemented
    return mul(FUNCTIONS["reciprocal"].apply(self), other)


# --- more math: rows whose torch signature needs a hand-written frontend -------------------------------------
def _invalid(name: str, args: tuple, *signatures: str) -> TypeError:
    """torch's argument-parser error when no overload of a function with an ``out=`` takes these arguments."""
    return invalid_arguments(name, args, tuple(f"{s}, *, Tensor out = None" for s in signatures))


def _is_number(value) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def _require_tensor(name: str, value, position: int = 1, arg: str = "input") -> None:
    if not isinstance(value, Tensor):
        raise not_a_tensor(name, arg, position, value)


def _tensor_and_tensor_or_number(name: str, input, other, arg: str) -> Tensor:  # noqa: A002
    """``name(Tensor input, Tensor|Number other)``: the row's tensor-tensor or tensor-scalar node."""
    if not isinstance(input, Tensor) or not (isinstance(other, Tensor) or _is_number(other)):
        raise _invalid(name, (input, other), f"Tensor input, Tensor {arg}", f"Tensor input, Number {arg}")
    other = as_operand(other)
    return CLASSES[name]["tt" if isinstance(other, Tensor) else "ts"].apply(input, other)


def fmod(input: Tensor, other) -> Tensor:  # noqa: A002 - torch's names
    """C's ``fmod``: the remainder of ``input / other`` rounded toward zero (the sign of ``input``)."""
    return _tensor_and_tensor_or_number("fmod", input, other, "other")


def clamp_min(input: Tensor, min) -> Tensor:  # noqa: A001, A002
    """``max(input, min)``; the gradient goes to ``input`` where ``input >= min``, else to a tensor ``min``."""
    return _tensor_and_tensor_or_number("clamp_min", input, min, "min")


def clamp_max(input: Tensor, max) -> Tensor:  # noqa: A001, A002
    """``min(input, max)``; the gradient goes to ``input`` where ``input <= max``, else to a tensor ``max``."""
    return _tensor_and_tensor_or_number("clamp_max", input, max, "max")


def atan2(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The angle of the point ``(other, input)``: ``atan(input / other)`` in the right quadrant."""
    _require_tensor("atan2", input)
    _require_tensor("atan2", other, 2, "other")
    return FUNCTIONS["atan2"].apply(input, other)


def square(input: Tensor) -> Tensor:  # noqa: A002
    """``input * input``, torch's ``pow(input, 2)`` (an integer stays integer, a bool becomes int64)."""
    _require_tensor("square", input)
    if input._data.dtype == _BOOL:
        input = input.to(np.int64)
    return FUNCTIONS["square"].apply(input)


def lerp(input: Tensor, end: Tensor, weight) -> Tensor:  # noqa: A002
    """``input + weight * (end - input)``; ``weight`` a number (``LerpBackward0``) or a tensor (``LerpBackward1``)."""
    if not (
        isinstance(input, Tensor) and isinstance(end, Tensor) and (isinstance(weight, Tensor) or _is_number(weight))
    ):
        signatures = ("Tensor input, Tensor end, Tensor weight", "Tensor input, Tensor end, Number weight")
        raise _invalid("lerp", (input, end, weight), *signatures)
    dt = input._data.dtype
    if dt.kind not in "fVc":
        kind = "tensor" if isinstance(weight, Tensor) else "scalar"
        raise NotImplementedError(f"\"lerp_kernel_{kind}\" not implemented for '{_torch_name(dt)}'")
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t._data.dtype != dt and (name == "end" or t.dim()):
            raise RuntimeError(
                f"expected dtype {CPP_NAMES[_scalar_dtype(dt).name]} for `{name}` but got dtype "
                f"{CPP_NAMES[_scalar_dtype(t._data.dtype).name]}"
            )
    if isinstance(weight, Tensor):
        return FUNCTIONS["lerp"].apply(input, end, weight if weight._data.dtype == dt else weight.to(dt))
    return FUNCTIONS["lerp_scalar"].apply(input, end, weight if isinstance(weight, complex) else float(weight))


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:  # noqa: A002
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default the dtype's largest and
    smallest finite values); integer and bool tensors have none and come back as copies."""
    _require_tensor("nan_to_num", input)
    dt = input._data.dtype
    if dt.kind not in "fV":
        return input.clone()
    info = finfo(input.dtype)  # (numbagrad's: numpy's finfo does not know bfloat16)
    nan = 0.0 if nan is None else float(nan)
    posinf = float(info.max) if posinf is None else float(posinf)
    neginf = float(info.min) if neginf is None else float(neginf)
    return FUNCTIONS["nan_to_num"].apply(input, nan, posinf, neginf)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001, A002
    """Round half to even; ``decimals`` rounds to that many decimal places (negative: to tens, hundreds...)."""
    _require_tensor("round", input)
    if decimals == 0:
        return FUNCTIONS["round"].apply(input)
    if input._data.dtype.kind not in "fV":
        raise NotImplementedError(f"\"round_cpu\" not implemented for '{_torch_name(input._data.dtype)}'")
    return FUNCTIONS["round_decimals"].apply(input, int(decimals))


def logit(input: Tensor, eps: float | None = None) -> Tensor:  # noqa: A002
    """``log(input / (1 - input))``; with ``eps``, ``input`` clamped into ``[eps, 1 - eps]`` first (and a zero
    gradient outside it)."""
    _require_tensor("logit", input)
    return FUNCTIONS["logit"].apply(input, -1.0 if eps is None else float(eps))


def polygamma(n: int, input: Tensor) -> Tensor:  # noqa: A002
    """The ``n``-th derivative of the digamma function of each element (``n = 0``: digamma itself)."""
    _require_tensor("polygamma", input, 2)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return FUNCTIONS["polygamma"].apply(input, float(n))


def _clamp_tensor(input: Tensor, min, max) -> Tensor:  # noqa: A001, A002
    """``clamp`` with a tensor bound: one ``ClampBackward0`` node whose bounds get gradients too (as torch)."""
    lo, hi = (None if b is None else as_operand(b, "clamp") for b in (min, max))
    dt = result_np_dtype([b for b in (input, lo, hi) if b is not None])
    if dt.kind in "fV":
        low, high = -math.inf, math.inf
    elif dt.kind == "b":
        low, high = False, True
    else:  # integer tensors stay integer: a missing bound is the dtype's limit
        low, high = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    return FUNCTIONS["clamp_tensor"].apply(input, low if lo is None else lo, high if hi is None else hi)


def _private_frontend(name: str):
    """The function behind a helper row (``lerp``'s scalar form, ``clamp``'s tensor form, ``round(decimals=)``)."""
    cls = FUNCTIONS[name]
    return lambda *args: cls.apply(*args)


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 * tensor2``, broadcast, one node."""
    return _addc("addcmul", input, tensor1, tensor2, value)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 / tensor2``, broadcast, one node (integer division is refused, as torch)."""
    if all(isinstance(t, Tensor) and not t.is_floating_point() for t in (tensor1, tensor2)):
        raise RuntimeError(_ADDCDIV_INTEGER)
    return _addc("addcdiv", input, tensor1, tensor2, value)


_ADDCDIV_INTEGER = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true "
    "division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * "
    "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) "
    "for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
    "tensor2), for all dtypes."
)


def _addc(name: str, input, tensor1, tensor2, value) -> Tensor:  # noqa: A002
    for k, (arg, t) in enumerate((("input", input), ("tensor1", tensor1), ("tensor2", tensor2))):
        _require_tensor(name, t, k + 1, arg)
    if not _is_number(value):
        raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")
    return FUNCTIONS[name].apply(input, tensor1, tensor2, value)


_MORE_MATH = {
    "fmod": fmod,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
    "atan2": atan2,
    "square": square,
    "lerp": lerp,
    "nan_to_num": nan_to_num,
    "round": round,
    "addcmul": addcmul,
    "addcdiv": addcdiv,
    "logit": logit,
    "polygamma": polygamma,
    **{name: _private_frontend(name) for name in ("lerp_scalar", "clamp_tensor", "round_decimals")},
}


def _without_graph(row: Row):
    """The public function of a row torch records no graph for (``graph=False``): torch's signature and checks,
    under the row's own name (``special_bessel_j0``), on detached operands."""
    frontend = _make_frontend(row, row.name)

    def detached(a):
        return a.detach() if isinstance(a, Tensor) else a

    if row.arity == 1:

        def run(input):  # noqa: A002 - torch's name
            return frontend(detached(input))

    else:  # (the orthogonal polynomials: torch names the degree ``n``)

        def run(input, n):  # noqa: A002
            return frontend(detached(input), detached(n))

    run.__name__ = run.__qualname__ = row.name
    run.__doc__ = frontend.__doc__
    return run


_HAND_WRITTEN = {"clamp": clamp, "pow": pow, "bitwise_not": bitwise_not, **_MORE_MATH}
FRONTENDS = {
    name: _HAND_WRITTEN[name] if not row.frontend else _row_frontend(name) if row.graph else _without_graph(row)
    for name, row in ROWS.items()
}


class RoundedDiv(Function):
    """``div(a, b, rounding_mode=...)``: the quotient rounded toward zero (``"trunc"``) or down (``"floor"``), in
    the operands' promoted dtype (integers stay integers). Its gradient is zero, as torch's."""

    node_name = "DivBackward2"

    @staticmethod
    def forward(ctx, a, b, mode):
        ctx.shapes = tuple((o.shape, o.dtype) if isinstance(o, Tensor) else None for o in (a, b))
        if mode == "floor":
            return FRONTENDS["floor_divide"](a, b)
        dt = _compute_dtype(ROWS["mul"], (a, b))
        if dt.kind == "b":
            raise NotImplementedError("\"div_trunc_cpu\" not implemented for 'Bool'")
        if dt.kind == "f":
            return FRONTENDS["trunc"](FRONTENDS["div"](a, b))
        # integers: the remainder toward zero taken off first, so the division is exact and rounds either way
        if not isinstance(a, Tensor):  # (a number first: fmod takes the tensor first)
            a = Tensor._make(b._backend.full((), a, dt))
        return FRONTENDS["floor_divide"](FRONTENDS["sub"](a, FRONTENDS["fmod"](a, b)), b)

    @staticmethod
    def backward(ctx, g):
        backend = g._backend
        zeros = [None if s is None else Tensor._make(backend.zeros(tuple(s[0]), s[1].numpy)) for s in ctx.shapes]
        return zeros[0], zeros[1], None


def _div_with_rounding(true_divide):
    """``div``/``divide`` (and ``Tensor.div``/``div_``) with torch's ``rounding_mode`` keyword: without it the
    table row's true division runs as before."""

    def div(input, other, *, rounding_mode=None):  # noqa: A002
        if rounding_mode is None:
            return true_divide(input, other)
        if rounding_mode not in ("trunc", "floor"):
            raise RuntimeError(
                f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
            )
        a = as_operand(input, "div", 1, "input")
        b = as_operand(other, "div", 2, "other")
        return RoundedDiv.apply(a, b, rounding_mode)

    div.__doc__ = true_divide.__doc__ + (
        '\n\nWith ``rounding_mode`` ``"trunc"`` or ``"floor"`` the quotient is rounded toward zero or down and '
        "keeps the operands' dtype (integers stay integers); its gradient is zero."
    )
    return div


FRONTENDS["div"] = _div_with_rounding(FRONTENDS["div"])

for _row in ROWS.values():
    _declare_row(_row, FRONTENDS[_row.name])


def _rsub(self, other):
    """``other - self``: torch's ``rsub(self, other)`` (node ``RsubBackward1`` for a scalar ``other``)."""
    try:
        other = as_operand(other)
    except TypeError:
        return NotImplemented
    return FRONTENDS["rsub"](self, other)


register(Declaration("_pow_operators", pow, ("__pow__",)))
register(Declaration("_rpow_operator", _rpow, ("__rpow__",)))
register(Declaration("_rsub_operator", _rsub, ("__rsub__",)))
register(Declaration("_rtruediv_operator", _rtruediv, ("__rtruediv__",)))


def _invert(self: Tensor) -> Tensor:
    """``~self``: ``bitwise_not``, which the operator refuses for floats with a TypeError of its own."""
    if self._data.dtype.kind not in "biu":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(self)


register(Declaration("_invert_operator", _invert, ("__invert__",)))
register(Declaration("_pos_operator", lambda self: self, ("__pos__",)))


def register_inplace(tensor_cls: type) -> None:
    """The rows' in-place methods (``add_``, ``mul_``, ``__iadd__``...), bound once ``ops.inplace`` has loaded
    (batchable, as declared ops are: vmap refuses writing a batch into an unbatched tensor)."""
    for row in ROWS.values():
        if not row.inplace:
            continue
        frontend = FRONTENDS[row.name]
        for method in row.methods:
            setattr(tensor_cls, method + "_", batchable(method + "_", _make_inplace(row, frontend, method + "_")))
        for op_name in row.operators:
            if op_name.startswith("__i"):
                setattr(tensor_cls, op_name, batchable(op_name, _make_inplace(row, frontend, op_name)))
    tensor_cls.__ipow__ = batchable("__ipow__", _make_inplace(ROWS["pow"], pow, "__ipow__"))
