"""Activation checkpointing (``torch.utils.checkpoint``): keep a segment's inputs, drop the activations it saves
for backward, and recompute them when backward needs them: memory traded for a second forward.

Two forms, as in torch. The non-reentrant one (``use_reentrant=False``) runs the segment under
``saved_tensors_hooks`` whose pack keeps only a position; the first unpack reruns the segment (with the forward's
RNG state) under hooks that collect what it saves, and hands back the tensor saved at that position. The
reentrant one is a ``Function`` whose forward runs the segment without a graph and whose backward reruns it with
one and differentiates it.
"""

from __future__ import annotations

import copy
import warnings

from .._tensor import Tensor
from ..autograd.engine import backward as autograd_backward
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks
from ..ops import creation

__all__ = ["checkpoint", "checkpoint_sequential"]

_USE_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in PyTorch 2.9, "
    "calling checkpoint without use_reentrant will raise an exception. use_reentrant=False is recommended, but if "
    "you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more "
    "details on the differences between the two variants."
)


def _rng_state():
    """The global generator's state (what dropout draws from), to replay the same draws when recomputing."""
    return copy.deepcopy(creation._generator().bit_generator.state)


class _rng_replay:  # noqa: N801
    """Run a block with the generator in a stashed state, then put back the state it had before the block."""

    def __init__(self, stashed) -> None:
        self.stashed = stashed
        self.current = None

    def __enter__(self) -> None:
        if self.stashed is not None:
            self.current = _rng_state()
            creation._generator().bit_generator.state = copy.deepcopy(self.stashed)

    def __exit__(self, *exc) -> None:
        if self.stashed is not None:
            creation._generator().bit_generator.state = self.current


def _unexpected(kwargs: dict) -> None:
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))


def checkpoint(function, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True, **kwargs):
    """``function(*args, **kwargs)``, keeping none of the tensors it saves for backward: backward recomputes
    them by running ``function`` again (with the same RNG state when ``preserve_rng_state``)."""
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    if use_reentrant:
        _unexpected(kwargs)
        return _CheckpointFunction.apply(function, preserve_rng_state, *args)
    return _checkpoint_without_reentrant(function, preserve_rng_state, args, kwargs)


class _Recomputation:
    """One non-reentrant checkpointed call: what it needs to run again, and what the rerun saved."""

    def __init__(self, function, args: tuple, kwargs: dict, rng) -> None:
        self.function, self.args, self.kwargs, self.rng = function, args, kwargs, rng
        self.count = 0  # tensors the forward saved (each keeps its position)
        self.recomputed: list | None = None

    def pack(self, t: Tensor) -> int:
        self.count += 1
        return self.count - 1

    def unpack(self, position: int) -> Tensor:
        if self.recomputed is None:
            self.recomputed = []
            with _rng_replay(self.rng), enable_grad(), saved_tensors_hooks(self._collect, _unpack_error):
                self.function(*self.args, **self.kwargs)
            if len(self.recomputed) < self.count:
                raise RuntimeError(
                    "torch.utils.checkpoint: A different number of tensors was saved during the original forward "
                    f"and recomputation.\nNumber of tensors saved during forward: {self.count}\nNumber of tensors "
                    f"saved during recomputation: {len(self.recomputed)}."
                )
        return self.recomputed[position]

    def _collect(self, t: Tensor) -> None:
        self.recomputed.append(t.detach())


def _unpack_error(packed):
    raise RuntimeError("torch.utils.checkpoint: a tensor saved during recomputation was read back")


def _checkpoint_without_reentrant(function, preserve_rng_state: bool, args: tuple, kwargs: dict):
    frame = _Recomputation(function, args, kwargs, _rng_state() if preserve_rng_state else None)
    with saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


class _CheckpointFunction(Function):
    """The reentrant form: forward without a graph, backward reruns the segment with one and differentiates it."""

    node_name = "CheckpointFunctionBackward"

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        if not any(a.requires_grad for a in args if isinstance(a, Tensor)):
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None", UserWarning, stacklevel=4
            )
        ctx.run_function = run_function
        ctx.rng = _rng_state() if preserve_rng_state else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t.detach().requires_grad_(t.requires_grad)
        with _rng_replay(ctx.rng), enable_grad():
            outputs = ctx.run_function(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        autograd_backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(x.grad if isinstance(x, Tensor) else None for x in inputs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs):
    """Run ``functions`` (a list or an ``nn.Sequential``) in order, checkpointing all but the last of
    ``segments`` equal runs of them."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed explicitly. "
            "In version 2.9 we will raise an exception if use_reentrant is not passed. use_reentrant=False is "
            "recommended, but if you need to preserve the current default behavior, you can pass "
            "use_reentrant=True. Refer to docs for more details on the differences between the two variants.",
            UserWarning,
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    _unexpected(kwargs)
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())

    def run(start: int, end: int):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
