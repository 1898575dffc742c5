"""``autograd.functional``: ``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``hvp`` and ``vhp`` of a Python function.

Everything is built on ``autograd.grad``, as torch's ``torch/autograd/functional.py`` is, with torch's signatures,
return structure (a Tensor or tuple following the inputs and outputs), ``create_graph`` and ``strict`` semantics
and error messages. numbagrad has no ``vmap``, so:

- ``jvp`` uses the double-vjp trick (as torch's does): the vjp ``u -> J^T u`` is linear in ``u``, so
  differentiating it with respect to ``u`` in the direction ``v`` gives ``J v``. ``hvp`` is forward-over-reverse
  (``autograd.forward_ad``), except with ``strict`` or ``create_graph`` where it does what torch's does.
- ``vectorize=True`` is accepted and computes the same values row by row; it keeps torch's rule that it cannot be
  combined with ``strict=True``.
- ``strategy="forward-mode"`` (``outer_jacobian_strategy`` for ``hessian``) runs forward mode, one pass per input
  element, where torch accepts it (with ``vectorize=True``); elsewhere it raises torch's errors.

``ops`` (which imports ``autograd``) is never imported here: its functions are reached through ``_upward.ops``, as
the engine reaches them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from .. import _upward
from .._tensor import Tensor
from . import forward_ad
from .engine import grad as _grad
from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _ops():
    """``numbagrad.ops``, as registered in ``_upward`` when it loaded (autograd never imports ops)."""
    return _upward.ops


def _as_tuple(inp, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    """``(was it a tuple, the tuple)``; anything but Tensors inside raises torch's TypeError."""
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_inp_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the"
                    f" value at index {i} has type {type(el)}."
                )
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the"
                f" given {arg_name} has type {type(el)}."
            )
    return is_inp_tuple, inp


def _tuple_postprocess(res, to_unpack):
    """Undo ``_as_tuple``: unwrap one level per ``False`` in ``to_unpack`` (outputs, inputs)."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """Fresh Tensor objects for the inputs: differentiable views with ``create_graph`` (so gradients flow back to
    the caller's tensors), detached leaves otherwise. Always new objects, so the inputs given as arguments are told
    apart from the same tensors captured by the function."""
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs: tuple, create_graph: bool) -> tuple:
    """Detach results unless the caller asked for a graph (nested tuples for jacobian and hessian)."""
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.size()} but got {el_v.size()}.")


def _check_requires_grad(inputs: tuple, input_type: str, strict: bool) -> None:
    """In strict mode, refuse outputs (or gradients, jacobians, hessians) that cannot depend on the inputs."""
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}."
                " This is not allowed in strict mode."
            )
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(
                    f"The hessian of the user-provided function with respect to input {i}"
                    " is independent of the input. This is not allowed in strict mode."
                    " You should ensure that your function is thrice differentiable and that"
                    " the hessian depends on the inputs."
                )
            if input_type == "jacobian":
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided"
                    f" function with respect to input {i} is independent of the input. This is not"
                    " allowed in strict mode. You should ensure that your function is twice"
                    " differentiable and that the jacobian depends on the inputs (this would be"
                    " violated by a linear function for example)."
                )
            if input_type == "grad_inputs":
                raise RuntimeError(
                    f"The gradient with respect to input {i} is independent of the inputs of the"
                    " user-provided function. This is not allowed in strict mode."
                )
            raise RuntimeError(
                f"Output {i} of the user-provided function does not require gradients."
                " The outputs must be computed in a differentiable manner from the input"
                " when running in strict mode."
            )


def _autograd_grad(outputs: tuple, inputs: tuple, grad_outputs=None, create_graph: bool = False,
                   retain_graph: bool | None = None) -> tuple:  # fmt: skip
    """``autograd.grad`` that skips outputs which are None or do not require grad (None for unreached inputs)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = [], []
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs.append(out)
            new_grad_outputs.append(grad_out)
    if not new_outputs:
        return (None,) * len(inputs)
    return _grad(new_outputs, inputs, new_grad_outputs, allow_unused=True, create_graph=create_graph,
                 retain_graph=retain_graph)  # fmt: skip


def _fill_in_zeros(grads: tuple, refs: tuple, strict: bool, create_graph: bool, stage: str) -> tuple:
    """Zeros (shaped like ``refs``) for gradients that never arrived, or torch's strict-mode error for them."""
    res = []
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                if stage == "back":
                    raise RuntimeError(
                        f"The output of the user-provided function is independent of input {i}. This is not "
                        "allowed in strict mode."
                    )
                if stage == "back_trick":
                    raise RuntimeError(
                        f"The gradient with respect to the input is independent of entry {i}"
                        " in the grad_outputs when using the double backward trick to compute"
                        " forward mode gradients. This is not allowed in strict mode."
                    )
                if stage == "double_back":
                    raise RuntimeError(
                        f"The jacobian of the user-provided function is independent of input {i}. This is not "
                        "allowed in strict mode."
                    )
                raise RuntimeError(
                    "The hessian of the user-provided function is independent of "
                    f"entry {i} in the grad_jacobian. This is not allowed in strict "
                    "mode as it prevents from using the double backward trick to "
                    "replace forward mode AD."
                )
            grads_i = _ops().zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError(
                    f"The jacobian of the user-provided function is independent of input {i}. This is not allowed "
                    "in strict mode when create_graph=True."
                )
            raise RuntimeError(
                f"The hessian of the user-provided function is independent of input {i}. This is not allowed in "
                "strict mode when create_graph=True."
            )
        res.append(grads_i)
    return tuple(res)


def _prepare_v(v, refs: tuple, is_refs_tuple: bool, create_graph: bool, fn_name: str, none_message: str):
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, refs, is_refs_tuple)
        return v
    if len(refs) != 1 or refs[0].nelement() != 1:
        raise RuntimeError(none_message)
    return None


_V_NONE_OUTPUT = (
    "The vector v can only be None if the user-provided function returns a single Tensor with a single element."
)
_V_NONE_INPUT = (
    "The vector v can only be None if the input to the user-provided function is a single Tensor with a single element."
)


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), v^T J)``: the vector-Jacobian product of ``func`` at ``inputs`` (``v`` shaped like the
    outputs; it may be omitted for a one-element output)."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        v = _prepare_v(v, outputs, is_outputs_tuple, create_graph, "vjp", _V_NONE_OUTPUT)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), J v)``: the Jacobian-vector product (``v`` shaped like the inputs), by the double-vjp trick."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, "jvp", _V_NONE_INPUT)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The vjp is linear in grad_outputs, so their value never enters the result: zeros (finite) will do.
        grad_outputs = tuple(_ops().zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True) if create_graph else nullcontext():
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)


def _check_strategy(strategy: str, message: str) -> None:
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(message)


def jacobian(
    func: Callable,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
):
    """The Jacobian of ``func`` at ``inputs``: ``J[i][j]`` has shape ``output_i.shape + input_j.shape`` (a plain
    Tensor, or tuples, following whether outputs and inputs were tuples)."""
    _check_strategy(
        strategy,
        'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
        'function has more outputs than inputs, "forward-mode" tends to be more performant. '
        'Otherwise, prefer to use "reverse-mode".',
    )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` "
                'and `strategy="forward-mode"` are not supported together (yet). '
                "Please either set `create_graph=False` or "
                '`strategy="reverse-mode"`.'
            )
        if strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` "
                'and `strategy="forward-mode"` are not supported together (yet). '
                "Please either set `strict=False` or "
                '`strategy="reverse-mode"`.'
            )
        if not vectorize:
            raise NotImplementedError(
                "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                "only implemented for `vectorize=True`."
            )
        return _jacobian_forward(func, inputs)

    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` "
                "and `vectorized=True` are not supported together. "
                "Please either set `strict=False` or "
                "`vectorize=False`."
            )
        ops = _ops()
        result = []
        for i, out in enumerate(outputs):
            rows: tuple[list, ...] = tuple([] for _ in inputs)
            flat = out.reshape(-1)
            for j in range(out.nelement()):
                vj = _autograd_grad((flat[j],), inputs, retain_graph=True, create_graph=create_graph)
                for el_idx, (rows_el, vj_el, inp_el) in enumerate(zip(rows, vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError(
                                "The jacobian of the user-provided function is "
                                f"independent of input {i}. This is not allowed in "
                                "strict mode when create_graph=True."
                            )
                        rows_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is "
                                f"independent of input {el_idx}. This is not allowed in "
                                "strict mode."
                            )
                        rows_el.append(ops.zeros_like(inp_el))
            result.append(
                tuple(
                    ops.stack(rows_el, dim=0).view(tuple(out.shape) + tuple(inputs[el_idx].shape))
                    for el_idx, rows_el in enumerate(rows)
                )
            )
        result = _grad_postprocess(tuple(result), create_graph)
        return _tuple_postprocess(result, (is_outputs_tuple, is_inputs_tuple))


def _jacobian_forward(func: Callable, inputs):
    """``jacobian(..., strategy="forward-mode")``: one forward-mode pass per input element (a column of every
    output's Jacobian), returned in torch's containers for that path (lists where the inputs were a tuple)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _grad_preprocess(inputs, create_graph=False, need_graph=False)
    ops = _ops()
    columns: list = []  # per (input, element): each output's tangent
    outputs: tuple = ()
    is_outputs_tuple = False
    with forward_ad.dual_level():
        for j, x in enumerate(inputs):
            for k in range(x.nelement()):
                duals = []
                for i, inp in enumerate(inputs):
                    direction = ops.zeros_like(inp)
                    if i == j:
                        direction.view(-1)[k] = 1
                    duals.append(forward_ad.make_dual(inp, direction))
                out = func(*duals)
                is_outputs_tuple, outputs = _as_tuple(out, "outputs of the user-provided function", "jacobian")
                columns.append([_tangent_or_zeros(forward_ad.unpack_dual(o)) for o in outputs])
        if not columns:
            is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
    result = []
    for m, o in enumerate(outputs):
        per_input, start = [], 0
        for inp in inputs:
            cols = [columns[start + k][m] for k in range(inp.nelement())]
            start += inp.nelement()
            if cols:
                jac = ops.stack(cols, dim=-1).reshape(tuple(o.shape) + tuple(inp.shape))
            else:
                jac = ops.zeros(tuple(o.shape) + tuple(inp.shape), dtype=o.dtype, device=o.device)
            per_input.append(jac.detach())
        result.append(per_input if is_inputs_tuple else tuple(per_input))
    if is_inputs_tuple:
        return result if is_outputs_tuple else result[0]
    return _tuple_postprocess(tuple(result), (is_outputs_tuple, is_inputs_tuple))


def _tangent_or_zeros(unpacked) -> Tensor:
    primal, tangent = unpacked
    return tangent if tangent is not None else _ops().zeros_like(primal)


def hessian(
    func: Callable,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
):
    """The Hessian of the scalar function ``func`` at ``inputs``: ``H[i][j]`` has shape
    ``input_i.shape + input_j.shape``, computed as the Jacobian of the gradient."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    _check_strategy(outer_jacobian_strategy, 'Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)  # fmt: skip
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _single_output(outputs: tuple, is_outputs_tuple: bool, fn_name: str) -> None:
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")


def _gradient_of_scalar(func: Callable, inputs, v, create_graph: bool, strict: bool, fn_name: str) -> tuple:
    """What ``vhp`` and ``hvp`` start with (under grad mode): the checked inputs and ``v``, the scalar output of
    ``func``, and its gradient with a graph, ready to be differentiated again. Returns
    ``(is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac)``."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, fn_name, _V_NONE_INPUT)
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    _single_output(outputs, is_outputs_tuple, fn_name)
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), v^T H)``: the vector-Hessian product of the scalar function ``func``."""
    with enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _gradient_of_scalar(
            func, inputs, v, create_graph, strict, "vhp"
        )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """``(func(inputs), H v)``: the Hessian-vector product of the scalar function ``func``: forward-over-reverse (the
    gradient computed on inputs carrying ``v`` as their tangent); with ``strict`` or ``create_graph``, torch's own
    way, the double-vjp trick on top of double backward, whose checks and graph those options are about."""
    if not (strict or create_graph):
        return _hvp_forward_over_reverse(func, inputs, v)
    with enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _gradient_of_scalar(
            func, inputs, v, create_graph, strict, "hvp"
        )
        ops = _ops()
        grad_jac = tuple(ops.zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def _hvp_forward_over_reverse(func: Callable, inputs, v) -> tuple[Any, Any]:
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _grad_preprocess(inputs, create_graph=False, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, False, "hvp", _V_NONE_INPUT)
        if v is None:
            v = tuple(_ops().ones_like(inp) for inp in inputs)
        with forward_ad.dual_level():
            duals = tuple(forward_ad.make_dual(inp, t) for inp, t in zip(inputs, v))
            outputs = func(*duals)
            is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "hvp")
            _check_requires_grad(outputs, "outputs", strict=False)
            _single_output(outputs, is_outputs_tuple, "hvp")
            jac = _autograd_grad(outputs, duals, create_graph=True)
            result = tuple(
                _tangent_or_zeros(forward_ad.unpack_dual(g)) if g is not None else _ops().zeros_like(inp)
                for g, inp in zip(jac, inputs)
            )
            outputs = tuple(forward_ad.unpack_dual(o).primal for o in outputs)
    outputs = _grad_postprocess(outputs, False)
    result = _grad_postprocess(result, False)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)
