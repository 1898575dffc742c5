"""Gradients computed by a fused kernel, as one differentiable graph node (Chainer's ``ReLUGrad2`` pattern).

A backward that runs a kernel (layer norm's, softmax's, cross entropy's, an elementwise row's fused gradient)
returns ``fused_grads(name, kernel, formula, inputs)``. The kernel computes the gradients in every case, with
``create_graph`` or without, so a first derivative is written once (without a graph it is called directly:
``Function.apply`` would only call it too, at a cost per call). Under ``create_graph`` the call is also a graph
node (``name``) whose own backward differentiates ``formula``: the same gradients written with differentiable
ops, used only for the derivatives of the gradients. A formula that disagrees with its kernel shows as a failed
``gradgradcheck``, whose numerical side differentiates the kernel.

An input the formula does not use gets no gradient, or zeros where the caller says torch's double backward gives
zeros (the gradient of relu's or abs's gradient with respect to the input is zero, not missing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._tensor import Tensor
from .engine import grad as autograd_grad
from .function import Function
from .grad_mode import enable_grad, nothing_records, state

__all__ = ["fused_grads"]


class FusedGrad(Function):
    """The node of one ``fused_grads`` call: ``kernel`` forward, ``formula`` differentiated backward."""

    node_name = "FusedGradBackward"
    _trusted = True

    @staticmethod
    def forward(ctx, kernel: Callable, formula: Callable, zeros: bool, *inputs):
        ctx.formula, ctx.zeros = formula, zeros
        ctx.save_for_backward(*inputs)
        outs = kernel(*inputs)
        ctx.present = tuple(o is not None for o in outs)
        kept = tuple(o for o in outs if o is not None)
        return kept[0] if len(kept) == 1 else kept  # (each kernel is asked for one gradient at least)

    @staticmethod
    def backward(ctx, *grads):
        inputs = ctx.saved_tensors
        needs = ctx.needs_input_grad[3:]
        wrt, seen = [], set()
        for i, (t, need) in enumerate(zip(inputs, needs)):
            if need and id(t) not in seen:  # (one tensor given twice gets its gradient once)
                seen.add(id(t))
                wrt.append(i)
        with enable_grad():
            # each input differentiated for stands in the formula as an alias of itself: the gradients are those
            # of the formula alone, not also along the graph that links one input to another (an output saved
            # with the input it was computed from)
            alias_of = {id(inputs[i]): inputs[i].view_as(inputs[i]) for i in wrt}
            aliases = [alias_of.get(id(t), t) for t in inputs]
            outs = [o for o, present in zip(ctx.formula(*aliases), ctx.present) if present]
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and isinstance(o, Tensor) and o.requires_grad]
        found = [None] * len(wrt)
        if pairs and wrt:
            found = autograd_grad(
                [o for o, _ in pairs],
                [aliases[i] for i in wrt],
                [g for _, g in pairs],
                create_graph=state.enabled,
                allow_unused=True,
            )
        result: list = [None] * len(inputs)
        for i, gi in zip(wrt, found):
            if gi is None and ctx.zeros:
                t = inputs[i]
                gi = Tensor._make(t._backend.zeros(t._data.shape, t._data.dtype))
            result[i] = gi
        return None, None, None, *result


_CLASSES: dict[str, type] = {}


def _node_class(name: str) -> type:
    """The ``FusedGrad`` subclass shown as ``name`` in graphs (one per name)."""
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name.replace("Backward", "_"), (FusedGrad,), {"node_name": name})
    return cls


def fused_grads(
    name: str, kernel: Callable, formula: Callable, inputs: Sequence, wanted: Sequence[bool], zeros: bool = False
) -> list:
    """``kernel(*inputs)``: one gradient per ``wanted`` flag (``None`` where the flag is False), recorded as the node
    ``name`` when grad mode is on and an input requires grad. ``formula(*inputs)`` returns the same gradients from
    differentiable ops (where wanted; anything elsewhere): the node's backward differentiates it. ``zeros``: an
    input the formula does not use gets a zero gradient (torch's native backward kernels: relu's, abs's), else
    none (torch's composite formulas)."""
    if nothing_records(state):  # (apply would only call the kernel, at ~8 us more)
        return list(kernel(*inputs))
    outs = _node_class(name).apply(kernel, formula, zeros, *inputs)
    it = iter(outs if type(outs) is tuple else (outs,))
    return [next(it) if w else None for w in wanted]
