"""Activation checkpointing (``torch.utils.checkpoint``): keep a segment's inputs, drop the activations it saves
for backward, and recompute them when backward needs them: memory traded for a second forward.

Two forms, as in torch. The non-reentrant one (``use_reentrant=False``) runs the segment under
``saved_tensors_hooks`` whose pack keeps only a position; the first unpack reruns the segment (with the forward's
RNG state) under hooks that collect what it saves, and hands back the tensor saved at that position. The
reentrant one is a ``Function`` whose forward runs the segment without a graph and whose backward reruns it with
one and differentiates it.
"""

from __future__ import annotations

import contextlib
import copy
import warnings

from .._tensor import Tensor
from ..autograd.engine import backward as autograd_backward
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks
from ..autograd.profiler import _OpRecorder
from ..ops import creation

__all__ = [
    "CheckpointError",
    "checkpoint",
    "checkpoint_sequential",
    "noop_context_fn",
    "set_checkpoint_debug_enabled",
    "set_checkpoint_early_stop",
]

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


class CheckpointError(RuntimeError):
    """A recomputation that does not match the forward it replays (torch's class of the same name)."""


_DEBUG_TIP = (
    "\nTip: To see a more detailed error message, either pass `debug=True` to\n"
    "`torch.utils.checkpoint.checkpoint(...)` or wrap the code block\n"
    "with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to\n"
    "enable checkpoint\u2011debug mode globally.\n"
)

_early_stop_override: bool | None = None
_debug_override: bool | None = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Within the block, non-reentrant checkpoints made stop (or not) recomputing once every tensor backward
    needs is back, whatever their ``early_stop`` says (only the forward needs to run inside)."""
    global _early_stop_override
    previous, _early_stop_override = _early_stop_override, enable
    try:
        yield
    finally:
        _early_stop_override = previous


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None):
    """Within the block, non-reentrant checkpoints run as with ``debug=enabled`` (None: as each one says)."""
    global _debug_override
    previous, _debug_override = _debug_override, enabled
    try:
        yield
    finally:
        _debug_override = previous


def noop_context_fn():
    """The default ``context_fn``: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def _metadata(t: Tensor) -> dict:
    """What ``determinism_check="default"`` compares between a saved tensor and its recomputed one."""
    return {"shape": t.shape, "dtype": t.dtype, "device": t.device}


_DETERMINISM_CHECKS = {"default": _metadata, "none": lambda t: None}


def checkpoint(
    function,
    *args,
    use_reentrant: bool | None = None,
    context_fn=noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    **kwargs,
):
    """``function(*args, **kwargs)``, keeping none of the tensors it saves for backward: backward recomputes
    them by running ``function`` again (with the same RNG state when ``preserve_rng_state``).

    Non-reentrant only: ``context_fn`` gives the contexts the forward and the recomputation run in;
    ``determinism_check`` ("default" or "none") compares the recomputed tensors' shapes, dtypes and devices with
    the saved ones; ``debug`` adds the ops each run made to those errors; ``early_stop`` ends the recomputation
    once every saved tensor is back."""
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if use_reentrant:
        _unexpected(kwargs)
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return _CheckpointFunction.apply(function, preserve_rng_state, *args)
    if determinism_check not in _DETERMINISM_CHECKS:
        raise ValueError(f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, but got {determinism_check}")
    debug = _debug_override if _debug_override is not None else debug
    if debug and context_fn is not noop_context_fn:
        raise ValueError("debug=True is incompatible with non-default context_fn")
    frame = _Recomputation(
        function,
        args,
        kwargs,
        _rng_state() if preserve_rng_state else None,
        _early_stop_override if _early_stop_override is not None else early_stop,
        _DETERMINISM_CHECKS[determinism_check],
        debug,
    )
    forward_context, frame.recompute_context = context_fn()
    with forward_context, saved_tensors_hooks(frame.pack, frame.unpack), _op_log(frame.forward_ops if debug else None):
        return function(*args, **kwargs)


class _StopRecomputation(Exception):
    """Raised inside the recomputation once it has saved every tensor backward needs (``early_stop``)."""


class _Recomputation:
    """One non-reentrant checkpointed call: what it needs to run again, and what the rerun saved."""

    def __init__(self, function, args: tuple, kwargs: dict, rng, early_stop: bool, metadata_fn, debug: bool) -> None:
        self.function, self.args, self.kwargs, self.rng = function, args, kwargs, rng
        self.early_stop, self.metadata_fn, self.debug = early_stop, metadata_fn, debug
        self.recompute_context = contextlib.nullcontext()
        self.metadata: list = []  # per tensor the forward saved (its position is its index)
        self.recomputed: list | None = None
        self.forward_ops: list = []
        self.recompute_ops: list = []

    def pack(self, t: Tensor) -> int:
        self.metadata.append(self.metadata_fn(t))
        return len(self.metadata) - 1

    def unpack(self, position: int) -> Tensor:
        if self.recomputed is None:
            self.recomputed = []
            self._recompute()
        return self.recomputed[position]

    def _recompute(self) -> None:
        try:
            with (
                self.recompute_context,
                _rng_replay(self.rng),
                enable_grad(),
                saved_tensors_hooks(self._collect, _unpack_error),
                _op_log(self.recompute_ops if self.debug else None),
            ):
                self.function(*self.args, **self.kwargs)
        except _StopRecomputation:
            pass
        if len(self.recomputed) != len(self.metadata):
            self._fail(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.metadata)}\nNumber of tensors "
                f"saved during recomputation: {len(self.recomputed)}."
            )
        different = ""
        for i, (saved, again) in enumerate(zip(self.metadata, self.recomputed)):
            recomputed = self.metadata_fn(again)
            if saved != recomputed:
                different += f"tensor at position {i}:\nsaved metadata: {saved}\nrecomputed metadata: {recomputed}\n"
        if different:
            self._fail(
                "torch.utils.checkpoint: Recomputed values for the following tensors have different metadata "
                f"than during the forward pass.\n{different}."
            )

    def _collect(self, t: Tensor) -> None:
        if len(self.recomputed) == len(self.metadata):  # (more than the forward saved: only without early stop)
            self._fail(
                "torch.utils.checkpoint: trying to save more tensors during recomputation than during the "
                "original forward pass."
            )
        self.recomputed.append(t.detach())
        if self.early_stop and len(self.recomputed) == len(self.metadata):
            raise _StopRecomputation

    def _fail(self, message: str) -> None:
        if not self.debug:
            raise CheckpointError(message + "\n" + _DEBUG_TIP)
        raise CheckpointError(
            message
            + "\n\nOperations executed during the original forward:\n\n"
            + "\n".join(self.forward_ops)
            + "\n\nOperations executed during recomputation:\n\n"
            + "\n".join(self.recompute_ops)
        )


def _unpack_error(packed):
    raise RuntimeError("torch.utils.checkpoint: a tensor saved during recomputation was read back")


class _op_log:  # noqa: N801
    """Append the name of every op run in the block to ``ops`` (nothing when ``ops`` is None)."""

    def __init__(self, ops: list | None) -> None:
        self.ops = ops
        self.recorder = None

    def __enter__(self) -> None:
        if self.ops is not None:
            self.recorder = _OpRecorder(lambda name, seconds: self.ops.append(name))
            self.recorder.__enter__()

    def __exit__(self, *exc) -> None:
        if self.recorder is not None:
            self.recorder.__exit__(*exc)


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
