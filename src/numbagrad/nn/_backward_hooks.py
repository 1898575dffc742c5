"""Module backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook``), as torch builds
them: the module's tensor arguments and its tensor outputs each pass through an identity node
(``BackwardHookFunction``). A hook on the outputs' node captures the gradients arriving at the module's outputs
(``grad_output``) and runs the pre-hooks, which may replace them; a hook on the inputs' node sees the gradients
leaving for the module's inputs (``grad_input``) and runs the hooks with both, which may replace ``grad_input``.
Positions that are not tensors are ``None`` in both tuples."""

from __future__ import annotations

import warnings

from .._tensor import Tensor
from ..autograd.function import Function
from ..autograd.grad_mode import state


class BackwardHookFunction(Function):
    """The identity on a module's tensor arguments or outputs: a node to hang the module's backward hooks on."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *grads):
        return grads


def _pack(indices, values, size: int) -> tuple:
    """One entry per position, ``values`` at ``indices``, None elsewhere."""
    packed = [None] * size
    for i, v in zip(indices, values, strict=True):
        packed[i] = v
    return tuple(packed)


class BackwardHooks:
    """One forward call's backward hooks: ``setup_inputs`` before the forward, ``setup_outputs`` after it."""

    def __init__(self, module, hooks: list, pre_hooks: list) -> None:
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_index = self.output_index = None

    @staticmethod
    def _through_identity(args: tuple, on_node):
        """``args`` with its tensors passed through ``BackwardHookFunction`` (``on_node`` given its node), and the
        tensors' positions; unchanged, with None, when no tensor requires grad or grad mode is off."""
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (state.enabled and any(t.requires_grad for t in tensors)):
            return args, None
        passed = BackwardHookFunction.apply(*tensors)
        passed = passed if isinstance(passed, tuple) else (passed,)
        on_node(next(t.grad_fn for t in passed if t.grad_fn is not None))
        out = list(args)
        for i, t in zip(index, passed, strict=True):
            out[i] = t
        return (tuple(out) if type(args) is tuple else type(args)(*out)), index

    def setup_inputs(self, args: tuple) -> tuple:
        args, self.input_index = self._through_identity(args, lambda node: node.register_hook(self._on_inputs))
        self.n_inputs = len(args)
        return args

    def setup_outputs(self, output):
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        outputs, self.output_index = self._through_identity(outputs, lambda n: n.register_hook(self._on_outputs))
        self.n_outputs = len(outputs)
        return outputs[0] if single else outputs

    def _on_outputs(self, _, grad_outputs):
        """The gradients reaching the module's outputs: kept for the hooks (after the pre-hooks), and, when no
        input requires grad, the hooks called here with ``grad_input`` all None."""
        self.grad_outputs = _pack(self.output_index, grad_outputs, self.n_outputs)
        for pre_hook in self.pre_hooks:
            replaced = pre_hook(self.module, self.grad_outputs)
            if replaced is None:
                continue
            if len(replaced) != len(self.grad_outputs):
                raise RuntimeError(
                    "Backward pre hook returned an invalid number of grad_output, got "
                    f"{len(replaced)}, but expected {len(self.grad_outputs)}"
                )
            self.grad_outputs = replaced
        grad_outputs = self.grad_outputs
        if self.input_index is None:
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to module outputs since no "
                "inputs require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                "#torch.nn.Module.register_full_backward_hook for more details.",
                stacklevel=5,
            )
            none = _pack([], [], self.n_inputs)
            for hook in self.hooks:
                result = hook(self.module, none, self.grad_outputs)
                if result is not None and not (isinstance(result, tuple) and all(r is None for r in result)):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should always return None or "
                        "None for all gradients."
                    )
            self.grad_outputs = None
        return tuple(grad_outputs[i] for i in self.output_index)

    def _on_inputs(self, grad_inputs, _):
        """The gradients leaving for the module's inputs: the hooks, with the kept ``grad_output``. None reached
        the outputs first when the gradient comes round another way (double backward): then no hook runs."""
        if self.grad_outputs is None:
            return None
        grads = _pack(self.input_index, grad_inputs, self.n_inputs)
        for hook in self.hooks:
            replaced = hook(self.module, grads, self.grad_outputs)
            if replaced is None:
                continue
            if len(replaced) != len(grads):
                raise RuntimeError(
                    f"Backward hook returned an invalid number of grad_input, got {len(replaced)}, but expected "
                    f"{len(grads)}"
                )
            grads = replaced
        self.grad_outputs = None
        return tuple(grads[i] for i in self.input_index)
