"""The backward walk: iterative (no recursion limit), in torch's order, summing gradients per node input.

A node runs once every edge into it from the part of the graph being differentiated has delivered; among ready
nodes the most recently created runs first (leaf accumulators before everything). Gradients that reach the same
node input from several paths are summed before it runs; leaf gradients accumulate into ``.grad`` in place.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import warnings

import numpy as np

from .. import _tensor
from .._tensor import Tensor
from .function import AccumulateGrad, accumulator_of, engine_owns
from .grad_mode import state


def _make_grads(outputs: tuple, grad_outputs) -> list:
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    else:
        grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grad_outputs)} gradients")
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if out.requires_grad:  # else the engine reports "element i of tensors does not require grad"
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if out._data.dtype.kind != "f":
                    raise RuntimeError(
                        f"grad can be implicitly created only for real scalar outputs but got {out.dtype}"
                    )
            g = _tensor._ops.ones_like(out)
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        elif g.shape != out.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a shape of "
                f"{out.shape}."
            )
        grads.append(g)
    return grads


def _as_tuple(x) -> tuple:
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def backward(
    tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, grad_variables=None, inputs=None
) -> None:
    """Sum the gradients of ``tensors`` with respect to graph leaves into their ``.grad``."""
    tensors = _as_tuple(tensors)
    if grad_tensors is None:
        grad_tensors = grad_variables
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if len(inputs) == 0:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    grads = _make_grads(tensors, grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    captured = run_backward(tensors, grads, retain_graph, create_graph, inputs, accumulate=True)
    for t, g in zip(inputs or (), captured):
        if t.grad_fn is not None and g is not None:  # a non-leaf in ``inputs`` gets its .grad, as in torch
            _store_non_leaf_grad(t, g, create_graph)


def _store_non_leaf_grad(t: Tensor, g: Tensor, create_graph: bool) -> None:
    """``.grad`` of a non-leaf (retain_grad, or named in ``inputs=``): a copy first, then sums."""
    g = g if create_graph else g.detach()
    t._grad = _tensor._ops.clone(g) if t._grad is None else t._grad + g


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused=None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
):
    """The gradients of ``outputs`` with respect to ``inputs``, returned (``.grad`` is not touched)."""
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported by numbagrad")
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _make_grads(outputs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    captured = run_backward(outputs, grads, retain_graph, create_graph, inputs, accumulate=False)
    result = []
    for t, g in zip(inputs, captured):
        if g is None:
            if materialize_grads:
                g = _tensor._ops.zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. Set "
                    "allow_unused=True if this is the desired behavior."
                )
        result.append(g)
    return tuple(result)


def _root_edge(t: Tensor, i: int):
    if t.grad_fn is not None:
        return t.grad_fn, t._output_nr
    if t._requires_grad:
        return accumulator_of(t), 0
    raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")


def _dependencies(roots) -> dict:
    """How many edges lead into each node reachable from the roots."""
    deps: dict = {}
    seen = set(roots)
    stack = list(seen)
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is not None:
                deps[nxt] = deps.get(nxt, 0) + 1
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    return deps


def _needed(roots, targets: set) -> set:
    """Nodes from which some target node is reachable (only those need to run)."""
    needed: set = set()
    done: set = set()
    for root in roots:
        if root in done:
            continue
        stack = [(root, iter(root.next_functions))]
        done.add(root)
        while stack:
            node, children = stack[-1]
            for nxt, _ in children:
                if nxt is not None and nxt not in done:
                    done.add(nxt)
                    stack.append((nxt, iter(nxt.next_functions)))
                    break
            else:
                stack.pop()
                if node in targets or any(n in needed for n, _ in node.next_functions if n is not None):
                    needed.add(node)
    return needed


def _add(a, b):
    return b if a is None else (a if b is None else a + b)


def _call_hooks(hooks: dict, grad):
    for hook in list(hooks.values()):
        r = hook(grad)
        if r is not None:
            grad = r
    return grad


def _check_nan(node, grads: list) -> None:
    for i, g in enumerate(grads):
        if g is not None and np.isnan(g._host()).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


_callbacks = threading.local()  # .pending: the callbacks queued during this thread's running backward, or None


def queue_callback(callback) -> None:
    """Run ``callback()`` once the backward pass now running in this thread has finished (torch's
    ``Variable._execution_engine.queue_callback``; DistributedDataParallel waits for its all-reduces there)."""
    pending = getattr(_callbacks, "pending", None)
    if pending is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    pending.append(callback)


def run_backward(outputs, grads, retain_graph: bool, create_graph: bool, inputs=None, accumulate: bool = True):
    """Walk the graph from ``outputs``; accumulate into leaves, or capture the gradients of ``inputs``; then run
    the callbacks queued during the walk."""
    outer = getattr(_callbacks, "pending", None)
    _callbacks.pending = []
    try:
        captured = _walk(outputs, grads, retain_graph, create_graph, inputs, accumulate)
        pending = _callbacks.pending
        while pending:  # a callback may queue another
            pending.pop(0)()
    finally:
        _callbacks.pending = outer
    return captured


def _walk(outputs, grads, retain_graph: bool, create_graph: bool, inputs, accumulate: bool):
    roots = [_root_edge(t, i) for i, t in enumerate(outputs)]
    targets = None
    if inputs is not None:
        targets = [(t.grad_fn, t._output_nr) if t.grad_fn is not None else (accumulator_of(t), 0) for t in inputs]
    captured = [None] * (len(targets) if targets else 0)
    target_slots: dict = {}
    for k, (node, nr) in enumerate(targets or ()):
        target_slots.setdefault(node, []).append((nr, k))

    root_nodes = list(dict.fromkeys(node for node, _ in roots))
    deps = _dependencies(root_nodes)
    needed = _needed(root_nodes, set(target_slots)) if targets is not None else None

    buffers: dict = {}
    for (node, nr), g in zip(roots, grads):
        buf = buffers.setdefault(node, [None] * node._num_outputs)
        buf[nr] = _add(buf[nr], g)

    counter = itertools.count()
    heap = [(-node._sequence_nr, next(counter), node) for node in root_nodes if deps.get(node, 0) == 0]
    heapq.heapify(heap)
    prev_mode = state.enabled
    state.enabled = create_graph
    try:
        while heap:
            node = heapq.heappop(heap)[2]
            grads_in = buffers.pop(node, None) or [None] * node._num_outputs
            if node._tensor_hooks:
                for nr, hooks in node._tensor_hooks.items():
                    if grads_in[nr] is not None and hooks:
                        grads_in[nr] = _call_hooks(hooks, grads_in[nr])
            if node._retained:
                for nr, ref in node._retained.items():
                    t = ref()
                    if t is not None and grads_in[nr] is not None:
                        _store_non_leaf_grad(t, grads_in[nr], create_graph)
            pre = node.__dict__.get("_pre_hooks")
            if pre:
                for hook in list(pre.values()):
                    r = hook(tuple(grads_in))
                    if r is not None:
                        grads_in = list(r)

            if isinstance(node, AccumulateGrad):
                g = grads_in[0]
                grads_in = None  # drop the list's reference, so accumulate() can tell if g is shared
                leaf = node.variable
                if g is not None and leaf._hooks:
                    g = _call_hooks(leaf._hooks, g)
                if node in target_slots:
                    for _, k in target_slots[node]:
                        captured[k] = g
                if g is not None and accumulate and (targets is None or node in target_slots):
                    owned = engine_owns(g)  # before the call below puts g on the stack once more
                    node.accumulate(g, create_graph, owned)
                    post = leaf.__dict__.get("_post_accumulate_hooks")
                    if post:
                        for hook in list(post.values()):
                            hook(leaf)
                g = None  # (see engine_owns: no stale reference may outlive this step)
                continue

            if node in target_slots:
                for nr, k in target_slots[node]:
                    captured[k] = grads_in[nr]
            run = needed is None or any(n in needed for n, _ in node.next_functions if n is not None)
            if run and any(g is not None for g in grads_in):
                node._grads_owned = tuple(engine_owns(grads_in[i]) for i in range(len(grads_in)))
                try:
                    grads_out = node._apply(grads_in)
                    if state.anomaly and state.anomaly_check_nan:
                        _check_nan(node, grads_out)
                except Exception:
                    if state.anomaly and node._traceback:
                        warnings.warn(
                            f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                            f"{node._traceback}",
                            UserWarning,
                            stacklevel=2,
                        )
                    raise
                post = node.__dict__.get("_post_hooks")
                if post:
                    for hook in list(post.values()):
                        r = hook(tuple(grads_out), tuple(grads_in))
                        if r is not None:
                            grads_out = list(r)
                node._grads_owned = ()
                if not retain_graph:
                    node._release()
            else:  # not run (not needed for ``inputs``, or no gradient reached it): keeps its saved tensors
                grads_out = [None] * len(node.next_functions)
            for (nxt, nr), g in zip(node.next_functions, grads_out):
                if nxt is None:
                    continue
                if g is not None:
                    buf = buffers.get(nxt)
                    if buf is None:
                        buf = buffers[nxt] = [None] * nxt._num_outputs
                    buf[nr] = _add(buf[nr], g)
                remaining = deps[nxt] - 1
                deps[nxt] = remaining
                if remaining == 0:
                    heapq.heappush(heap, (-nxt._sequence_nr, next(counter), nxt))
            grads_out = g = buf = None  # only the buffers hold the gradients now: keeps reference counts exact
    finally:
        state.enabled = prev_mode
    return captured
