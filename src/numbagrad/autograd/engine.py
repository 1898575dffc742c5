"""The backward walk: iterative (no recursion limit), in torch's order, summing gradients per node input.

A node runs once every edge into it from the part of the graph being differentiated has delivered; among ready
nodes the most recently created runs first, and a leaf's ``AccumulateGrad`` runs as soon as it is ready (torch
gives leaves the highest priority). Gradients that reach the same node input from several paths are summed before
it runs; leaf gradients accumulate into ``.grad`` in place, taking over a buffer that only the engine holds.

``run_backward`` is a few named steps: find the roots and what to capture (``_Task``), count dependencies, seed the
buffers, then repeatedly run a ready node (``_before_node`` for hooks, ``_run_node`` for the node and anomaly
checks) and hand its gradients on to the next nodes' buffers. Nothing here is global: grad mode is per thread,
and each backward keeps its state in locals.
"""

from __future__ import annotations

import heapq
import time
import warnings
import weakref

import numpy as np

from .. import _tensor, _upward
from .._tensor import Tensor
from ..backend import layout
from .grad_mode import state
from .graph import GraphNode

_new = object.__new__  # (a Tensor with only its storage set: ``Tensor._make`` without the call)


# --- leaves -------------------------------------------------------------------------------------------------
class AccumulateGrad(GraphNode):
    """The node behind a leaf that requires grad: adds incoming gradients into ``variable.grad``."""

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {hex(id(self))}>"

    def accumulate(self, grad: Tensor, create_graph: bool, owned: bool = False) -> None:
        """Add ``grad`` into the leaf's ``.grad``; ``owned`` (the engine's buffer, held nowhere else: see
        ``owns``) lets the first one be kept without a copy. (A backward without create_graph stores a first
        gradient itself, the same way: ``_Task._accumulate_leaf``.)"""
        t = self.variable
        if t._grad is None:
            if create_graph:
                t._grad = _upward.ops.copy_grad(grad)  # torch: a differentiable copy, grad_fn=<CopyBackwards>
            elif owned:  # take it, as torch does: no copy (nothing else can see the tensor or its storage)
                t._grad = grad if type(grad) is Tensor and not grad._requires_grad else Tensor._make(grad._data)
            else:  # (``Tensor._make(grad._backend.copy(...))`` without the two calls: every step of a user Function's)
                data = grad._data
                copied = _new(Tensor)
                copied._data = (_tensor._BACKENDS.get(type(data)) or _tensor.backend_for(data)).copy(data)
                t._grad = copied
            data = t._data
            if data.ndim > 1 and not data.flags.c_contiguous:  # torch's layout contract: a dense leaf's gradient
                _lay_out_like(t._grad, data)  # has its strides (a dense array of fewer dims is row-major)
        elif create_graph or t._grad.requires_grad:
            t._grad = t._grad + grad
        else:
            t._grad._backend.accumulate_(t._grad._data, grad._data)


def _lay_out_like(grad: Tensor, data) -> None:
    """Give a leaf's new gradient the leaf's own layout when the leaf is dense but not row-major (a
    channels-last weight), as torch's ``AccumulateGrad`` does."""
    order = layout.dense_order(data)
    if order is not None and layout.element_strides(grad._data) != layout.element_strides(data):
        grad._data = layout.in_order(grad._data, order, grad._backend.copy)


#: From this many elements a leaf's shared first gradient waits for its other reader instead of being copied
#: (``_Task._accumulate_leaf``): a float32 copy of 1e5 elements took 9 us of a 150 us step, while at 1e3 the
#: waiting's bookkeeping (a check after each node) cost more than the 0.5 us copy.
WAIT_MIN_SIZE = 16384


def accumulator_of(t: Tensor) -> AccumulateGrad:
    """The (cached, weakly held) AccumulateGrad node of a leaf."""
    ref = t._accumulator
    node = ref() if ref is not None else None
    if node is None:
        node = AccumulateGrad(t)
        t._accumulator = weakref.ref(node)
    return node


# --- buffer ownership ---------------------------------------------------------------------------------------
# The backward running in a thread owns the gradient buffers its built-in backwards allocate, from then until the
# buffer leaves the engine: handed to a hook, retained, captured for ``autograd.grad``, kept as a leaf's
# ``.grad``, read or returned by a user Function (which may keep it). The mark is on the gradient tensor itself:
# ``Tensor._grad_slots``, how many of the pass's slots (a node's buffer entry, or a waiting leaf) hold it; 0 when
# the engine does not own it. A tensor handed out is unmarked first, so nothing outside the engine ever sees a
# mark. Under ``create_graph`` nothing is owned (a gradient there has a graph of its own).


def owns(grad: Tensor | None) -> bool:
    """True when the running backward owns ``grad``'s buffer and only the node now reading it holds it: that node
    may write its result there instead of allocating, and then returns ``grad`` itself (so the engine counts it
    in the slot it goes to)."""
    return grad is not None and grad._grad_slots == 1


def _disown(grad: Tensor | None) -> None:
    """``grad`` leaves the engine (a hook, retain_grad, a user Function, ``autograd.grad``'s result...): its buffer
    is never written again by this pass, whichever slots still hold it."""
    if grad is not None and grad._grad_slots:
        grad._grad_slots = 0


def _claim(grad: Tensor, data: np.ndarray, grads_in: list, saved) -> None:
    """A dense gradient (``data``: its array, not a view) that a built-in node returned and the engine does not
    own yet: owned from now (one slot) when it is a buffer its backward kernel allocated: a writable row-major
    array of its own, not the storage of the node's incoming gradients or ``saved`` tensors (what a backward may
    hand on; ``None`` for a node that never returns a saved one)."""
    if not data.flags.carray or grad.grad_fn is not None:  # (carray: writeable, aligned and C-contiguous in one
        return  # read; an incoming gradient the engine owns is all three, so it is caught below only past here)
    for g in grads_in:
        if type(g) is Tensor and g._data is data:  # (passed on in another tensor: neither may be written in place)
            if g._grad_slots:
                g._grad_slots = 0
            return
    if saved:
        for s in saved:
            if s is not None and type(s.tensor) is Tensor and s.tensor._data is data:
                return
    grad._grad_slots = 1


def _aliased(grad: Tensor, grads_out) -> bool:
    """Whether a node that handed on views handed on one of ``grad``, an owned gradient it read that other slots
    still hold: then ``grad`` is no longer owned, or a later node could write into it while the view is still to
    be read. (Only asked then: a gradient in one slot is freed with the node.)"""
    data = grad._data
    for h in grads_out:
        if h is not None and h is not grad:
            d = getattr(h, "_data", None)  # (a sparse gradient has none)
            root = getattr(d, "base", None)
            while root is not None and root is not data:  # (a view of a view may keep a chain of bases: as_strided)
                root = getattr(root, "base", None)
            if d is data or root is data:
                return True
    return False


# --- entry points -------------------------------------------------------------------------------------------
def _make_grads(outputs: tuple, grad_outputs) -> list:
    """The seed gradient of each output: ones for an implicit scalar, else the given tensor (shape-checked)."""
    if grad_outputs is None and len(outputs) == 1:  # loss.backward(): one float scalar that requires grad
        out = outputs[0]
        data = out._data
        if data.size == 1 and data.dtype.kind in "fV" and (out._requires_grad or out.grad_fn is not None):
            backend = _tensor._BACKENDS.get(type(data)) or _tensor.backend_for(data)  # (out._backend's lookup)
            seed = _new(Tensor)  # (``Tensor._make`` without its call)
            seed._data = backend.full(data.shape, 1, data.dtype)
            return [seed]
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
        data = out._data
        if g is None:
            if out.requires_grad:  # else the engine reports "element i of tensors does not require grad"
                if data.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if data.dtype.kind not in "fV":
                    raise RuntimeError(
                        f"grad can be implicitly created only for real scalar outputs but got {out.dtype}"
                    )
            g = Tensor._make(out._backend.full(data.shape, 1, data.dtype))
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        elif g._data.shape != data.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a shape of "
                f"{out.shape}."
            )
        elif g._data.dtype != data.dtype and data.dtype.kind in "fcV":
            g = g.to(out.dtype)  # torch's validate_outputs: a gradient takes its tensor's dtype
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
    tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)  # (_as_tuple, without its frame)
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
    t._grad = g.clone() if t._grad is None else t._grad + g


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
    if BATCHING[0] is not None:  # a vmap is running: batched tensors are differentiated through their storage
        result = BATCHING[0](grad, outputs, inputs, grad_outputs, (retain_graph, create_graph, only_inputs,
                             allow_unused, is_grads_batched, materialize_grads))  # fmt: skip
        if result is not NotImplemented:
            return result
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
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads)
    grads = _make_grads(outputs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    captured = run_backward(outputs, grads, retain_graph, create_graph, inputs, accumulate=False)
    result = []
    for t, g in zip(inputs, captured):
        if g is None:
            if materialize_grads:
                g = Tensor._make(t._backend.zeros(t._data.shape, t._data.dtype))
            elif not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. Set "
                    "allow_unused=True if this is the desired behavior."
                )
        result.append(g)
    return tuple(result)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """``grad(..., is_grads_batched=True)``: the first dim of each grad_output is a batch; each input's result
    stacks one vector-Jacobian product per batch entry (torch vectorizes them with vmap; here they run one
    after another, keeping the graph until the last)."""
    grad_outputs = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if g.shape[1:] != out.shape:
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch "
                "dimension. The sizes of the remaining dimensions are expected to match the shape of corresponding "
                f"output, but a mismatch was detected: grad_output[{i}] has a shape of {g.shape[1:]} and output[{i}] "
                f"has a shape of {out.shape}. If you only want some tensors in `grad_output` to be considered "
                "batched, consider using vmap."
            )
    n = grad_outputs[0].shape[0]
    rows = []
    for b in range(n):
        keep = retain_graph if b == n - 1 else True
        rows.append(
            grad(outputs, inputs, [g[b] for g in grad_outputs], keep, create_graph, True, allow_unused, False,
                 materialize_grads)
        )  # fmt: skip
    result = []
    for k in range(len(inputs)):
        column = [row[k] for row in rows]
        result.append(None if column[0] is None else _upward.ops.stack(column))
    return tuple(result)


#: While a ``numbagrad.func.vmap`` runs: ``batch(grad, outputs, inputs, grad_outputs, options)``, which
#: differentiates batched tensors (NotImplemented when none is batched); None otherwise.
BATCHING: list = [None]


# --- the walk -----------------------------------------------------------------------------------------------
def queue_callback(callback) -> None:
    """Run ``callback()`` once the backward pass now running in this thread has finished (torch's
    ``Variable._execution_engine.queue_callback``; DistributedDataParallel waits for its all-reduces there)."""
    task = state.task  # (the innermost backward running in this thread)
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    if task.callbacks is None:
        task.callbacks = []
    task.callbacks.append(callback)


def run_backward(outputs, grads, retain_graph: bool, create_graph: bool, inputs=None, accumulate: bool = True):
    """Walk the graph from ``outputs``; accumulate into leaves, or capture the gradients of ``inputs``; then run
    the callbacks queued during the walk. Grad mode is ``create_graph`` while nodes run (in this thread only)."""
    if len(outputs) == 1:
        fn = outputs[0].grad_fn  # loss.backward(): its node, without _root_edge's frame
        roots = [(fn, outputs[0]._output_nr) if fn is not None else _root_edge(outputs[0], 0)]
    else:
        roots = [_root_edge(t, i) for i, t in enumerate(outputs)]
    task = _Task(retain_graph, create_graph, accumulate, inputs)
    st = state
    outer_task = st.task
    st.task = task
    prev_mode = st.enabled
    st.enabled = create_graph
    try:
        task.execute(roots, grads)
        pending = task.callbacks
        while pending:  # a callback may queue another (into this list: it exists once the first was queued)
            pending.pop(0)()
    finally:
        st.enabled = prev_mode
        st.task = outer_task
    return task.captured


def _root_edge(t: Tensor, i: int):
    if t.grad_fn is not None:
        return t.grad_fn, t._output_nr
    if t._requires_grad:
        return accumulator_of(t), 0
    raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")


def _dependencies(roots) -> dict:
    """How many edges lead into each node reachable from the (distinct) roots."""
    deps: dict = {}
    # walked from the start; every other node is walked when first reached (one root is never reached again:
    # the graph has no cycles)
    rooted = set(roots) if len(roots) > 1 else ()
    stack = list(roots)
    while stack:
        for nxt, _ in stack.pop()._edges:
            if nxt is not None:
                if nxt in deps:
                    deps[nxt] += 1
                else:
                    deps[nxt] = 1
                    if nxt not in rooted:
                        stack.append(nxt)
    return deps


def _needed(roots, targets) -> set:
    """Nodes from which some target node is reachable through their edges (only those need to run when
    ``inputs`` are given: a target itself runs only when another target lies below it, as in torch)."""
    needed: set = set()
    done: set = set()
    for root in roots:
        if root in done:
            continue
        stack = [(root, iter(root._edges))]
        done.add(root)
        while stack:
            node, children = stack[-1]
            for nxt, _ in children:
                if nxt is not None and nxt not in done:
                    done.add(nxt)
                    stack.append((nxt, iter(nxt._edges)))
                    break
            else:
                stack.pop()
                if any(n in needed or n in targets for n, _ in node._edges if n is not None):
                    needed.add(node)
    return needed


def _narrow_needs(node, needed: set, targets: dict) -> tuple | None:
    """When a pass computes the gradients of given ``inputs`` only: set the built-in ``node``'s
    ``needs_input_grad`` to the inputs whose edges lead to one of them, and return the tuple it replaced (None when
    every input it needs does). Built-in backwards read ``needs_input_grad`` to skip a gradient, so
    ``autograd.grad(out, hidden)`` through a linear layer does not also multiply for the weight's gradient, as
    torch's native nodes ask ``task_should_compute_output``. A custom Function's stays as it was recorded, as in
    torch."""
    needs = node.needs_input_grad
    edges = node._edges
    if len(needs) != len(edges):
        return None
    narrowed = []
    changed = False
    for need, (nxt, _) in zip(needs, edges):
        keep = need and nxt is not None and (nxt in needed or nxt in targets)
        narrowed.append(keep)
        changed = changed or keep != need
    if not changed:
        return None
    node.needs_input_grad = tuple(narrowed)
    return needs


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return b + a if b.is_sparse else a + b  # a sparse gradient (``embedding(sparse=True)``) adds itself


def _sum(a: Tensor, b: Tensor, tracks: bool) -> Tensor:
    """``a + b`` for a buffer slot that held ``a`` and now gets ``b``: when ``tracks`` (no ``create_graph``) the sum
    is a new owned buffer, and ``a`` and ``b`` each leave the slot."""
    total = _add(a, b)
    if tracks:
        for g in (a, b):
            n = g._grad_slots
            if n:
                g._grad_slots = n - 1
        if type(total) is Tensor:  # (a new tensor: the sum; a sparse one is never owned)
            data = total._data
            if type(data) is np.ndarray and data.base is None:
                _claim(total, data, (), None)
    return total


def _call_hooks(hooks: dict, grad):
    for hook in list(hooks.values()):
        r = hook(grad)
        if r is not None:
            grad = r
    return grad


class _Task:
    """One backward pass: its options, its gradient buffers and ready queue, and what it captures."""

    # (class defaults, set per pass only where they differ: a ``loss.backward()`` makes one of these per step)
    targets: dict | None = None  # node -> [(output_nr, k)]: where to capture the gradients of ``inputs``
    captured: list | tuple = ()  # the captured gradients, one per input
    deps: dict | None = None  # (set by ``execute``: what ``will_compute_grad_of`` reads while the pass runs)
    needed: set | None = None
    roots: list | tuple = ()
    callbacks: list | None = None  # what ``queue_callback`` queued during this pass: run once it has finished

    def __init__(self, retain_graph: bool, create_graph: bool, accumulate: bool, inputs) -> None:
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.accumulate = accumulate
        if inputs is not None:
            self.targets = {}
            for k, t in enumerate(inputs):
                node, nr = (t.grad_fn, t._output_nr) if t.grad_fn is not None else (accumulator_of(t), 0)
                self.targets.setdefault(node, []).append((nr, k))
            self.captured = [None] * len(inputs)

    def execute(self, roots: list, grads: list) -> None:
        """Seed the buffers with the root gradients, then run nodes as they become ready (``_walk``)."""
        if len(roots) == 1:  # loss.backward(): one root, its seed straight into its buffer
            node, nr = roots[0]
            root_nodes = [node]
            self.roots = root_nodes
            deps = _dependencies(root_nodes)
            buf = [None] * node._num_outputs
            buf[nr] = grads[0]
            if grads[0]._grad_slots:  # (``_disown``: a gradient given from outside is never the pass's)
                grads[0]._grad_slots = 0
            buffers: dict = {node: buf}
            ready = [] if node in deps else [(-node._sequence_nr, id(node), node)]
        else:
            root_nodes = list(dict.fromkeys(node for node, _ in roots))
            self.roots = root_nodes
            deps = _dependencies(root_nodes)
            buffers = {}
            for (node, nr), g in zip(roots, grads):
                _disown(g)
                buf = buffers.get(node)
                if buf is None:
                    buf = buffers[node] = [None] * node._num_outputs
                buf[nr] = _add(buf[nr], g)
            ready = [(-node._sequence_nr, id(node), node) for node in root_nodes if node not in deps]
            heapq.heapify(ready)
        needed = _needed(root_nodes, self.targets) if self.targets is not None else None
        self.deps, self.needed = deps, needed
        waiting: dict = {}  # leaf -> its first gradient, still shared when it was ready (see _accumulate_leaf)
        try:
            self._walk(ready, buffers, deps, needed, waiting)
        finally:  # after an error too: torch has accumulated them by then
            if waiting:
                self._accumulate_waiting(waiting, True)

    def _walk(self, ready: list, buffers: dict, deps: dict, needed, waiting: dict) -> None:
        """Run the ready nodes, the latest made first, and hand their gradients on to the next nodes' buffers."""
        targets = self.targets
        releases = not self.retain_graph  # each node's saved tensors, right after it ran
        st = state
        profiled = st.profiler is not None  # (then every node runs in _run_node, which records it)
        tracks = not self.create_graph  # (a gradient with a graph of its own is never owned)
        node = None  # the next node to run, when the last one made it the only ready one (it skips the heap)
        while True:
            if node is None:
                if not ready:
                    break
                node = heapq.heappop(ready)[2]
            if type(node) is AccumulateGrad:  # a leaf given as a root
                self._accumulate_leaf(node, buffers.pop(node)[0])
                node = None
                continue
            grads_in = buffers.pop(node, None) or [None] * node._num_outputs
            run = needed is None or node in needed
            if node._hooked and (run or node in targets):  # (nothing runs outside the part that is needed)
                grads_in = self._before_node(node, grads_in, run)
            if targets is not None and node in targets:
                for nr, k in targets[node]:
                    _disown(grads_in[nr])
                    self.captured[k] = grads_in[nr]
            # ``keeps``: may the gradients it hands on be owned, and may it see owned ones? Only a built-in node's,
            # and not those a post-hook was handed
            if run and (grads_in[0] is not None or any(x is not None for x in grads_in) or node._runs_without_grads):
                # (with ``inputs``, a built-in node computes only the gradients that lead to them)
                static_needs = _narrow_needs(node, needed, targets) if needed is not None and node._builtin else None
                try:
                    if not (st.anomaly or node._post_hooks or profiled):  # the common case
                        keeps = tracks and node._builtin
                        if not keeps:  # (a user Function may keep what it reads: ``_disown``, inline)
                            for g in grads_in:
                                if g is not None and g._grad_slots:
                                    g._grad_slots = 0
                        grads_out = node._apply(grads_in)
                        if releases and node._saved:
                            node._release()
                    else:  # _run_node: checks and hooks around it
                        keeps = tracks and node._builtin and not node._post_hooks
                        if not keeps:
                            for g in grads_in:
                                _disown(g)
                        grads_out = self._run_node(node, grads_in)
                finally:
                    if static_needs is not None:
                        node.needs_input_grad = static_needs
            else:  # not needed for ``inputs``, or no gradient reached it: keeps its saved tensors
                grads_out = (None,) * len(node._edges)
                keeps = True
            # hand each gradient to its next node's buffer; queue the nodes that became ready. A gradient handed
            # on is counted in its new slot first, then the node's own slots are freed (below): one the node
            # passes through (add's gradient, or one written in place) stays owned
            leaves = None
            follow = None  # a node that became ready while no other is: it runs next, without the heap
            views = False  # did it hand on a view?
            for (nxt, nr), g in zip(node._edges, grads_out):
                if nxt is None:
                    continue
                if g is not None:
                    if keeps:  # (only ever True with ``tracks``, where a node ran)
                        n = g._grad_slots
                        if n:
                            g._grad_slots = n + 1
                        elif type(g) is Tensor:  # (a sparse gradient is never owned, nor a device one)
                            data = g._data
                            if type(data) is np.ndarray:
                                if data.base is None:
                                    _claim(g, data, grads_in, node._saved if node._returns_saved else None)
                                else:  # (a view is never owned; see ``_aliased`` below)
                                    views = True
                    elif g._grad_slots:
                        g._grad_slots = 0
                    buf = buffers.get(nxt)
                    if buf is None:
                        buf = buffers[nxt] = [None] * nxt._num_outputs
                        buf[nr] = g
                    elif buf[nr] is None:
                        buf[nr] = g
                    else:
                        buf[nr] = _sum(buf[nr], g, tracks)
                remaining = deps[nxt] - 1
                deps[nxt] = remaining
                if remaining == 0:
                    if type(nxt) is AccumulateGrad:
                        if nxt in buffers:
                            if leaves is None:
                                leaves = []
                            leaves.append(nxt)
                    elif follow is None and not ready:
                        follow = nxt
                    else:
                        if follow is not None:
                            heapq.heappush(ready, (-follow._sequence_nr, id(follow), follow))
                            follow = None
                        heapq.heappush(ready, (-nxt._sequence_nr, id(nxt), nxt))
            for g in grads_in:  # the node's slots are free now
                if g is not None:
                    n = g._grad_slots
                    if n:
                        if n > 1 and views and _aliased(g, grads_out):  # (still held elsewhere: see _aliased)
                            n = 1
                        g._grad_slots = n - 1
            node = follow
            # what the node read is freed now, before the leaves' accumulation and the next node allocate (their
            # buffers then take the memory just released, still in the cache)
            grads_in = grads_out = g = None
            if leaves:
                for leaf in leaves:
                    self._accumulate_leaf(leaf, buffers.pop(leaf)[0], waiting)
            if waiting:
                self._accumulate_waiting(waiting, False)

    def will_compute_grad_of(self, t: Tensor) -> bool:
        """Whether this pass computes a gradient for ``t`` (its node is reached, and needed for ``inputs``)."""
        node = t.grad_fn if t.grad_fn is not None else accumulator_of(t)
        if node not in self.deps and node not in self.roots:
            return False
        targets = self.targets
        if targets is not None and node not in targets and node not in self.needed:
            return False
        return True

    def _accumulate_waiting(self, waiting: dict, finish: bool) -> None:
        """Accumulate the waiting leaves (see ``_accumulate_leaf``) whose gradient no other slot holds any more;
        all of them when ``finish``."""
        for leaf in list(waiting):
            if finish or waiting[leaf]._grad_slots == 1:
                self._accumulate_leaf(leaf, waiting.pop(leaf))

    def _before_node(self, node, grads_in: list, run: bool = True) -> list:
        """Tensor hooks of the node's outputs, retain_grad, then the node's pre-hooks (when it is to ``run``)."""
        if node._tensor_hooks:
            for nr, hooks in node._tensor_hooks.items():
                if grads_in[nr] is not None and hooks:
                    _disown(grads_in[nr])
                    grads_in[nr] = _call_hooks(hooks, grads_in[nr])
        if node._retained:
            for nr, ref in node._retained.items():
                t = ref()
                if t is not None and grads_in[nr] is not None:
                    _disown(grads_in[nr])
                    _store_non_leaf_grad(t, grads_in[nr], self.create_graph)
        if run and node._pre_hooks:
            for g in grads_in:
                _disown(g)
            for hook in list(node._pre_hooks.values()):
                r = hook(tuple(grads_in))
                if r is not None:
                    grads_in = list(r)
        return grads_in

    def _run_node(self, node, grads_in: list):
        """The node's backward with anomaly checks, post-hooks and release (what the loop does inline when
        anomaly mode is off and the node has no post-hook)."""
        st = state
        incoming = None
        if node._post_hooks:  # (they are handed the incoming gradients too: the node must leave them unchanged)
            for g in grads_in:
                _disown(g)
            incoming = tuple(grads_in)  # (as they came: None where none arrived, before backward's zeros)
        try:
            grads_out = node._apply(grads_in) if st.profiler is None else _profiled_apply(node, grads_in, st.profiler)
            if st.anomaly and st.anomaly_check_nan:
                _check_nan(node, grads_out)
        except Exception:
            if st.anomaly and node._traceback:
                warnings.warn(
                    f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                    f"{node._traceback}",
                    UserWarning,
                    stacklevel=2,
                )
            raise
        if node._post_hooks:  # (what they are handed leaves the engine: the tensor inputs' gradients, as in torch)
            for g in grads_out:
                _disown(g)
            for hook in list(node._post_hooks.values()):
                r = hook(node._inputs_only(grads_out), incoming)
                if r is not None:
                    grads_out = node._per_argument(r, hook)
        if not self.retain_graph:
            node._release()
        return grads_out

    def _accumulate_leaf(self, node: AccumulateGrad, g, waiting: dict | None = None) -> None:
        """Leaf hooks, capture for ``inputs``, accumulation into ``.grad`` and post-accumulate hooks.

        ``waiting``: where a first gradient still shared with a node yet to run (``x * w + b``: add hands one
        tensor to ``b`` and to mul's backward) may wait until that node has read it; the leaf then keeps it
        without the copy torch makes. Only where nothing could tell the difference (a plain ``backward``, no
        hooks on the leaf, no ``.grad`` yet) and the copy costs more than the waiting (``WAIT_MIN_SIZE``)."""
        targets = self.targets
        leaf = node.variable
        if g is None or (targets is not None and node not in targets) or not leaf._requires_grad:
            return  # (not needed for ``inputs``; or detached in place since: torch's AccumulateGrad skips it)
        if leaf._base is not None and leaf._creation_meta in ("no_grad", "custom_function"):
            return  # a view without history (function._mark_view) has no accumulator in torch: its gradient is dropped
        if g.is_sparse:  # ``embedding(sparse=True)``: kept sparse, added to a sparse or dense ``.grad``
            if targets is not None and node in targets:
                for _, k in targets[node]:
                    self.captured[k] = g
            if self.accumulate:
                leaf._grad = g if leaf._grad is None else g + leaf._grad  # (the new entries first, as torch's)
            return
        if g._data.dtype != leaf._data.dtype:  # torch's validate_outputs: a gradient takes its input's dtype
            g = g.to(leaf.dtype)
        if leaf._hooks:
            _disown(g)
            g = _call_hooks(leaf._hooks, g)
        hooked = node._hooked and self.accumulate  # (a captured leaf's node does not run: nor do its hooks)
        if hooked and node._pre_hooks:
            _disown(g)
            for hook in list(node._pre_hooks.values()):
                r = hook((g,))
                if r is not None:
                    g = r[0]
        if targets is not None and node in targets:
            _disown(g)
            for _, k in targets[node]:
                self.captured[k] = g
        if self.accumulate:
            post = leaf.__dict__.get("_post_accumulate_hooks")
            n = g._grad_slots
            if n > 1:  # in other slots too
                if (
                    waiting is not None
                    and leaf._grad is None
                    and not (leaf._hooks or post or hooked)
                    and g._data.size >= WAIT_MIN_SIZE
                ):
                    waiting[node] = g  # (a slot of its own while it waits: still counted)
                    return
                g._grad_slots = n - 1  # copied (below): one slot less
                n = 0
            elif n:  # in this slot only: kept as ``.grad``, it leaves the engine
                g._grad_slots = 0
            if leaf._grad is None and not self.create_graph:  # the first gradient: ``accumulate``'s own, inline
                if n:  # the engine's: kept
                    first = g if not g._requires_grad else Tensor._make(g._data)
                else:  # not the engine's (or still read elsewhere): a copy
                    data = g._data
                    first = _new(Tensor)
                    first._data = (_tensor._BACKENDS.get(type(data)) or _tensor.backend_for(data)).copy(data)
                leaf._grad = first
                data = leaf._data
                if data.ndim > 1 and not data.flags.c_contiguous:  # (see ``accumulate``)
                    _lay_out_like(first, data)
            else:
                node.accumulate(g, self.create_graph, n == 1)
            if post:
                for hook in list(post.values()):
                    hook(leaf)
            if hooked and node._post_hooks:  # the node's own post-hooks: after it accumulated, as in torch
                _disown(g)  # (handed to them: a copy's source is written no more)
                for hook in list(node._post_hooks.values()):
                    hook((), (g,))


def _profiled_apply(node, grads_in: list, profiler) -> list:
    """``node._apply`` recorded by the active profiler as a range named after the node (the ops it runs are the
    range's children)."""
    event, start = profiler._begin(node.name()), time.perf_counter()
    try:
        return node._apply(grads_in)
    finally:
        profiler._end(event, time.perf_counter() - start)


def _check_nan(node, grads) -> None:
    for i, g in enumerate(grads):
        if g is not None and np.isnan(g._host()).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
