"""``DistributedDataParallel``: each rank runs the whole model on its share of the batch; during backward the
gradients are averaged across ranks, bucket by bucket, while the rest of backward still runs.

The reducer hooks every parameter with ``register_post_accumulate_grad_hook``. Parameters are grouped into
buckets in reverse order (the order backward produces their gradients). When a bucket's last gradient has
accumulated, its gradients are packed (divided by the world size) into one contiguous array and a non-blocking
``Iallreduce`` starts on it; buckets start in order, so every rank issues the same sequence of collectives. The
first hook of a backward queues a callback (``autograd.engine.queue_callback``) that runs when backward ends: it
waits for every all-reduce and writes the averaged gradients back into each ``.grad`` in place.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import warnings
import weakref
from contextlib import contextmanager

import numpy as np

from ... import ops
from ..._tensor import Tensor
from ...autograd.engine import queue_callback
from ...autograd.grad_mode import is_grad_enabled
from ...distributed import distributed_c10d as c10d
from ..module import Module

_MB = 1024 * 1024
_DEFAULT_BUCKET_CAP_MB = 25
_DEFAULT_FIRST_BUCKET_BYTES = _MB  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES


def _find_tensors(obj) -> list[Tensor]:
    """The tensors in a forward's output (nested tuples, lists and dicts), as torch's ``_find_tensors``."""
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _find_tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _find_tensors(o)]
    return []


def _reachable_leaves(outputs: list[Tensor]) -> set[int]:
    """ids of the leaf tensors whose gradient accumulators the outputs' graphs reach (``next_functions``)."""
    found: set[int] = set()
    seen: set[int] = set()
    stack = []
    for t in outputs:
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t.requires_grad:
            found.add(id(t))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        leaf = getattr(node, "variable", None)
        if leaf is not None:
            found.add(id(leaf))
        for nxt, _ in node._edges:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return found


def _assign_buckets(params: list, limits: list[int]) -> list[list[int]]:
    """torch's bucket assignment, over the parameters in reverse order: a bucket (one per dtype and device) closes
    once it holds at least its limit of bytes; the first closes at ``limits[0]``, later ones at ``limits[-1]``."""
    open_buckets: dict = {}
    closed = []
    for i in reversed(range(len(params))):
        p = params[i]
        key = (p.dtype.name, p.device.type)
        indices, nbytes, which = open_buckets.get(key, ([], 0, 0))
        indices.append(i)
        nbytes += p.numel() * p.element_size()
        if nbytes >= limits[which]:
            closed.append(indices)
            indices, nbytes, which = [], 0, min(which + 1, len(limits) - 1)
        open_buckets[key] = (indices, nbytes, which)
    closed += [indices for indices, _, _ in open_buckets.values() if indices]
    closed.sort(key=lambda b: -b[0])  # the bucket whose gradients come first starts first
    return closed


_MARKED_TWICE = (
    "Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a "
    "module parameter outside the `forward` function. Please make sure model parameters are not shared across "
    "multiple concurrent forward-backward passes. or try to use _set_static_graph() as a workaround if this module "
    "graph does not change during training loop.2) Reused parameters in multiple reentrant backward passes. For "
    "example, if you use multiple `checkpoint` functions to wrap the same part of your model, it would result in "
    "the same set of parameters been used by different reentrant backward passes multiple times, and hence marking "
    "a variable ready multiple times. DDP does not support such use cases in default. You can try to use "
    "_set_static_graph() as a workaround if your module graph does not change over iterations."
)
_MARKED_TWICE_UNUSED = (
    "3) Incorrect unused parameter detection. The return value of the `forward` function is inspected by the "
    "distributed data parallel wrapper to figure out if any of the module's parameters went unused. For unused "
    "parameters, DDP would not expect gradients from then. However, if an unused parameter becomes part of the "
    "autograd graph at a later point in time (e.g., in a reentrant backward when using `checkpoint`), the gradient "
    "will show up unexpectedly. If all parameters in the model participate in the backward pass, you can disable "
    "unused parameter detection by passing the keyword argument `find_unused_parameters=False` to "
    "`torch.nn.parallel.DistributedDataParallel`. If unused parameters in the model do not change over iterations, "
    "You can try to use _set_static_graph() as a workaround if this module graph does not change during training "
    "loop."
)


class _Bucket:
    """Some parameters' gradients, packed into one contiguous host array for one all-reduce."""

    __slots__ = ("indices", "flat", "views", "pending", "device")

    def __init__(self, indices: list[int], params: list) -> None:
        self.indices = indices
        first = params[indices[0]]
        self.device = first.device.type
        total = sum(params[i].numel() for i in indices)
        self.flat = np.empty(total, first._data.dtype)
        self.views, offset = [], 0
        for i in indices:
            n = params[i].numel()
            self.views.append(self.flat[offset : offset + n].reshape(params[i].shape))
            offset += n
        self.pending = len(indices)


class _Progress:
    """One thread per process that enters MPI's progress engine every 100 us while some bucket is in flight
    (opt-in: ``NUMBAGRAD_DDP_PROGRESS_THREAD=1`` on every rank).

    MPI advances non-blocking collectives only inside MPI calls, and between two gradient hooks backward computes
    for milliseconds without making any. Measured with MPICH on 2 ranks (784-512-512-512-10 MLP, 3 buckets):
    without this thread none of the early buckets had finished when backward ended; with it 1.8 of 2 had. It
    calls ``Iprobe`` on a duplicate of each active reducer's communicator, on which nothing is ever sent (so it
    completes none of the reducers' requests; one on ``COMM_SELF`` progressed nothing), and sleeps in between.
    It is off by default because its GIL hand-offs cost the training thread more than it saved there: 1-2 ms of
    an 18-22 ms step, against 0.3-0.5 ms less waiting. It pays where an all-reduce takes long against that (slow
    networks, large buckets). It needs ``MPI_THREAD_MULTIPLE``.
    """

    INTERVAL = 1e-4
    _instance: _Progress | None = None

    @classmethod
    def get(cls) -> _Progress | None:
        MPI = c10d._mpi()
        if os.environ.get("NUMBAGRAD_DDP_PROGRESS_THREAD", "0") != "1" or MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            return None
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self) -> None:
        self.comms: tuple = ()
        self.users = 0
        self.lock = threading.Lock()
        self.active = threading.Event()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="numbagrad-ddp-progress", daemon=True)
        self.thread.start()
        atexit.register(self._stop)  # runs before mpi4py's MPI_Finalize (registered earlier, so it runs later)

    def _run(self) -> None:
        MPI = c10d._mpi()
        while True:
            self.active.wait()
            if self.stopped:
                return
            for comm in self.comms:
                comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
            time.sleep(self.INTERVAL)

    def start(self, comm) -> None:
        with self.lock:
            self.users += 1
            if all(c is not comm for c in self.comms):
                self.comms = (*self.comms, comm)
            self.active.set()

    def finish(self, comm) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self.active.clear()
                self.comms = ()

    def _stop(self) -> None:
        self.stopped = True
        self.active.set()
        self.thread.join()


class _Reducer:
    """The bucket bookkeeping of one DistributedDataParallel (torch's ``Reducer``)."""

    def __init__(self, params: list, names: list[str], comm, world_size: int, rank: int, limits: list[int],
                 find_unused: bool) -> None:  # fmt: skip
        self.params = params
        self.names = names
        self.comm = comm
        self.world_size = world_size
        self.rank = rank
        self.find_unused = find_unused
        self.buckets = [_Bucket(indices, params) for indices in _assign_buckets(params, limits)]
        self.locator = [None] * len(params)
        for b in self.buckets:
            for k, i in enumerate(b.indices):
                self.locator[i] = (b, k)
        self.ready = bytearray(len(params))
        self.expect_hooks = False
        self.require_finalize = False
        self.callback_queued = False
        self.next_bucket = 0
        self.requests: list = []
        self.unused: list[int] = []
        self.marked_unused = False
        self.local_used = np.zeros(len(params), np.int32)
        self.used_request = None
        self.warned_no_unused = False
        self.iterations = 0
        self.last_wait_s = 0.0  # the last backward's wait for its all-reduces, and when it began
        self.last_wait_start = 0.0
        self.last_done_early = 0
        if any(p.is_cuda for p in params) and not c10d._cuda_aware():
            c10d._warn_staging()
        # nothing is in flight during backward with a single bucket: it starts when the last gradient arrives
        self.progress = _Progress.get() if world_size > 1 and len(self.buckets) > 1 else None
        self.probe_comm = comm.Dup() if self.progress is not None else None  # (collective: same choice on all ranks)
        self.polling = False
        ref = weakref.ref(self)
        self.handles = [p.register_post_accumulate_grad_hook(_make_hook(ref, i)) for i, p in enumerate(params)]

    # --- one iteration -------------------------------------------------------------------------------------------
    def prepare_for_backward(self, outputs: list[Tensor] | None) -> None:
        """Called at the end of a forward that will be synchronised: reset the counts, find unused parameters."""
        self.expect_hooks = True
        self.next_bucket = 0
        if self.polling:  # the previous backward raised before its callback ran
            self.polling = False
            self.progress.finish(self.probe_comm)
        self.ready[:] = bytes(len(self.params))
        for b in self.buckets:
            b.pending = len(b.indices)
        self.marked_unused = False
        self.unused = []
        if self.find_unused:
            self.local_used[:] = 0
            reached = _reachable_leaves(outputs or [])
            self.unused = [i for i, p in enumerate(self.params) if id(p) not in reached]
            if not self.unused and self.iterations == 0 and not self.warned_no_unused:
                self.warned_no_unused = True
                warnings.warn(
                    "find_unused_parameters=True was specified in DDP constructor, but did not find any unused "
                    "parameters in the forward pass. This flag results in an extra traversal of the autograd graph "
                    "every iteration,  which can adversely affect performance. If your model indeed never has any "
                    "unused parameters in the forward pass, consider turning this flag off. Note that this warning "
                    "may be a false positive if your model has flow control causing later iterations to have unused "
                    "parameters.",
                    UserWarning,
                    stacklevel=4,
                )

    def autograd_hook(self, index: int) -> None:
        if not self.expect_hooks:
            return  # a backward not prepared by a synchronising forward (no_sync, or a second backward)
        if not self.callback_queued:
            self.callback_queued = True
            queue_callback(self.finalize_backward)
        if self.find_unused:
            self.local_used[index] = 1
            if not self.marked_unused:
                self.marked_unused = True
                for i in self.unused:
                    self.mark_ready(i)
        self.mark_ready(index)

    def mark_ready(self, index: int) -> None:
        if self.ready[index]:
            info = (
                f"Parameter at index {index}"
                + (f" with name {self.names[index]}" if c10d._debug_enabled() else "")
                + " has been marked as ready twice. This means that multiple autograd engine  hooks have fired for "
                "this particular parameter during this iteration."
            )
            if not c10d._debug_enabled():
                info += (
                    " You can set the environment variable NUMBAGRAD_DISTRIBUTED_DEBUG to 1 to print parameter "
                    "names for further debugging."
                )
            msg = _MARKED_TWICE + "\n" + info
            raise RuntimeError(msg + _MARKED_TWICE_UNUSED if self.marked_unused else msg)
        self.ready[index] = 1
        self.require_finalize = True
        bucket, k = self.locator[index]
        self.pack(self.params[index], bucket.views[k])
        bucket.pending -= 1
        if bucket.pending == 0:
            MPI = c10d._mpi()
            while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
                flat = self.buckets[self.next_bucket].flat
                self.requests.append(self.comm.Iallreduce(MPI.IN_PLACE, flat, MPI.SUM))
                self.next_bucket += 1
            if self.progress is not None and not self.polling:
                self.polling = True
                self.progress.start(self.probe_comm)
            if self.next_bucket == len(self.buckets) and self.find_unused:
                self.used_request = self.comm.Iallreduce(MPI.IN_PLACE, self.local_used, MPI.MAX)
        elif self.requests and self.progress is None:
            c10d._mpi().Request.Testall(self.requests)  # MPI progresses in-flight all-reduces inside MPI calls only

    def pack(self, param, view: np.ndarray) -> None:
        """The parameter's gradient, divided by the world size, into its slot of the bucket (zeros if it has none:
        an unused parameter contributes nothing)."""
        grad = param.grad
        if grad is None:
            view[...] = 0
            return
        data = grad._data
        if not isinstance(data, np.ndarray):
            c10d._sync_cuda()
            data.copy_to_host(view)
            data = view
        if self.world_size == 1:
            if data is not view:
                np.copyto(view, data)
        else:
            np.multiply(data, 1.0 / self.world_size, out=view)

    def finalize_backward(self) -> None:
        """Runs when backward has finished: wait for every all-reduce, then write the averages into ``.grad``."""
        self.callback_queued = False
        MPI = c10d._mpi()
        if self.polling:
            self.polling = False
            self.progress.finish(self.probe_comm)
        start = self.last_wait_start = time.perf_counter()
        self.last_done_early = sum(1 for r in self.requests if r.Test())  # all-reduces already over: hidden
        MPI.Request.Waitall(self.requests)
        self.requests = []
        if self.next_bucket < len(self.buckets):
            # Some parameters got no gradient: the next forward raises torch's "Expected to have finished reduction"
            # (the buckets that did start were started on every rank, so waiting for them above is safe).
            self.last_wait_s = time.perf_counter() - start
            return
        globally_used = None
        if self.find_unused:
            self.used_request.Wait()
            self.used_request = None
            globally_used = self.local_used
        self.last_wait_s = time.perf_counter() - start
        for b in self.buckets:
            for k, i in enumerate(b.indices):
                if globally_used is not None and not globally_used[i]:
                    continue  # unused on every rank: its .grad is left as it was, as torch does
                self.unpack(self.params[i], b.views[k])
        self.expect_hooks = False
        self.require_finalize = False
        self.iterations += 1

    @staticmethod
    def unpack(param, view: np.ndarray) -> None:
        grad = param.grad
        if grad is None:
            param.grad = Tensor._make(view.copy()) if isinstance(param._data, np.ndarray) else _to_device(view)
            return
        data = grad._data
        if isinstance(data, np.ndarray):
            if data.flags.writeable:
                np.copyto(data, view)
            else:  # a read-only gradient (a broadcast view): replace it
                param.grad = Tensor._make(view.copy())
        else:
            data.copy_to_device(view)

    def ensure_prior_reduction_finished(self) -> None:
        """torch's check at the start of a forward: the previous synchronised backward must have reduced every
        bucket, which fails when some parameter got no gradient."""
        if not self.require_finalize:
            return
        missing = [i for i in range(len(self.params)) if not self.ready[i]]
        msg = (
            "Expected to have finished reduction in the prior iteration before starting a new one. This error "
            "indicates that your module has parameters that were not used in producing loss. "
        )
        outputs_hint = "making sure all `forward` function outputs participate in calculating loss. "
        bug_hint = (
            "\nIf you already have done the above, then the distributed data parallel module wasn't able to locate "
            "the output tensors in the return value of your module's `forward` function. Please include the loss "
            "function and the structure of the return value of `forward` of your module when reporting this issue "
            "(e.g. list, dict, iterable)."
        )
        if not self.find_unused:
            msg += (
                "You can enable unused parameter detection by passing the keyword argument "
                "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by \n"
            )
        else:
            msg += (
                "Since `find_unused_parameters=True` is enabled, this likely  means that not all `forward` outputs "
                "participate in computing loss. You can fix this by "
            )
        msg += outputs_hint + bug_hint
        indices = f"\nParameter indices which did not receive grad for rank {self.rank}: {' '.join(map(str, missing))}"
        if c10d._debug_enabled():
            names = ", ".join(self.names[i] for i in missing)
            msg += f"\nParameters which did not receive grad for rank {self.rank}: {names}" + indices
        else:
            msg += (
                indices + "\n In addition, you can set the environment variable NUMBAGRAD_DISTRIBUTED_DEBUG to 1 to "
                "print out information about which particular parameters did not receive gradient on this rank as "
                "part of this error"
            )
        raise RuntimeError(msg)


def _make_hook(ref, index: int):
    """The post-accumulate-grad hook of parameter ``index``; it holds the reducer weakly, so a discarded
    DistributedDataParallel leaves hooks that do nothing."""

    def hook(param) -> None:
        reducer = ref()
        if reducer is not None:
            reducer.autograd_hook(index)

    return hook


def _to_device(view: np.ndarray) -> Tensor:
    return ops.tensor(view.copy(), device="cuda")


class DistributedDataParallel(Module):
    """Data parallelism across processes (torch's ``nn.parallel.DistributedDataParallel``), on MPI.

    At construction it checks that every rank has the same parameter shapes and copies rank 0's parameters and
    buffers to all ranks. Each forward runs the wrapped module; the backward that follows averages the
    gradients across the group. ``no_sync()`` skips that averaging (gradients accumulate locally until the next
    synchronised backward). Parameters that get no gradient raise torch's error at the next forward unless
    ``find_unused_parameters=True``. ``state_dict`` keys carry the ``module.`` prefix, as torch's do.
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        process_group=None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
    ) -> None:
        super().__init__()
        if gradient_as_bucket_view:
            raise NotImplementedError("numbagrad's DistributedDataParallel does not support gradient_as_bucket_view")
        if static_graph:
            raise NotImplementedError("numbagrad's DistributedDataParallel does not support static_graph")
        pg = c10d._resolve(process_group)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError(
                "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                "gradient."
            )
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError("device_ids can only be None or contain a single element.")
        device_types = {p.device.type for _, p in named}
        if len(device_types) != 1:
            raise ValueError(
                "DistributedDataParallel's input module must be on the same type of devices, but input module "
                f"parameters locate in {device_types}."
            )
        if check_reduction:
            warnings.warn(
                "The `check_reduction` argument in `DistributedDataParallel` module is deprecated. Please avoid "
                "using it.",
                FutureWarning,
                stacklevel=2,
            )
        self.module = module
        self.process_group = pg
        self.device_ids = None if device_types == {"cpu"} else device_ids
        self.output_device = None if device_types == {"cpu"} else output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((bucket_cap_mb if bucket_cap_mb is not None else _DEFAULT_BUCKET_CAP_MB) * _MB)
        first = _DEFAULT_FIRST_BUCKET_BYTES if bucket_cap_mb is None else self.bucket_bytes_cap
        params = [p for _, p in named]
        _verify_param_shape_across_processes(pg, params)
        self._module_buffers = [b for _, b in module.named_buffers()]
        _broadcast_from_first(pg, params + (self._module_buffers if broadcast_buffers else []))
        # A private communicator: the bucket all-reduces can never be matched with the user's own collectives.
        self.reducer = _Reducer(
            params, [n for n, _ in named], pg._comm.Dup(), pg.size(), pg.rank(), [first, self.bucket_bytes_cap],
            find_unused_parameters,
        )  # fmt: skip

    def forward(self, *inputs, **kwargs):
        grad_enabled = is_grad_enabled()
        if grad_enabled:
            self.reducer.ensure_prior_reduction_finished()
        if self.require_forward_param_sync and self.broadcast_buffers and self._module_buffers:
            _broadcast_from_first(self.process_group, self._module_buffers)
        output = self.module(*inputs, **kwargs)
        if grad_enabled and self.require_backward_grad_sync:
            self.require_forward_param_sync = True
            self.reducer.prepare_for_backward(_find_tensors(output) if self.find_unused_parameters else None)
        else:
            self.require_forward_param_sync = False
        return output

    @contextmanager
    def no_sync(self):
        """Inside, forwards don't synchronise their backward: gradients accumulate locally, and the first
        synchronised backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _get_ddp_logging_data(self) -> dict:
        """What the reducer did (torch has a method of this name): its buckets and the last backward's wait."""
        r = self.reducer
        sizes = [int(b.flat.nbytes) for b in r.buckets]
        return {
            "world_size": r.world_size,
            "bucket_sizes": sizes,
            "comm_bytes_per_iteration": sum(sizes),
            "find_unused_parameters": r.find_unused,
            "num_iterations": r.iterations,
            "last_backward_comm_wait_s": r.last_wait_s,
            "last_backward_comm_wait_start": r.last_wait_start,
            "last_buckets_done_before_backward_ended": r.last_done_early,
        }


def _verify_param_shape_across_processes(pg, params: list) -> None:
    """torch's check that every rank wraps the same model (parameter count, then each shape against rank 0's)."""
    rank = pg.rank()
    comm = pg._comm
    for r, count in enumerate(comm.allgather(len(params))):
        if count != len(params):
            raise RuntimeError(
                f"DDP expects same model across all ranks, but Rank {rank} has {len(params)} params, while rank {r} "
                f"has inconsistent {count} params."
            )
    shapes = comm.bcast([tuple(p.shape) for p in params], root=0)
    mismatch = next((i for i, p in enumerate(params) if tuple(p.shape) != tuple(shapes[i])), None)
    # Every rank learns which ranks differ, so all of them raise (torch raises on those ranks only, and the others
    # then wait in the next collective).
    bad = [r for r, m in enumerate(comm.allgather(mismatch)) if m is not None]
    if mismatch is not None:
        raise RuntimeError(
            f"[{rank}]: params[{mismatch}] in this process with sizes {list(params[mismatch].shape)} appears not to "
            "match sizes of the same param in process 0."
        )
    if bad:
        raise RuntimeError(
            f"DDP expects same model across all ranks, but the parameter shapes of rank(s) "
            f"{', '.join(map(str, bad))} do not match process 0's."
        )


def _broadcast_from_first(pg, tensors: list) -> None:
    """Copy the group's first rank's values into these tensors on every rank: one broadcast per dtype."""
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t._data.dtype, []).append(t)
    for dtype, group in by_dtype.items():
        flat = np.empty(sum(t.numel() for t in group), dtype)
        offset = 0
        for t in group:
            n = t.numel()
            flat[offset : offset + n] = t._host().reshape(-1)
            offset += n
        pg._comm.Bcast(flat, root=0)
        offset = 0
        for t in group:
            n = t.numel()
            values = flat[offset : offset + n].reshape(t.shape)
            if isinstance(t._data, np.ndarray):
                np.copyto(t._data, values)
            else:
                t._data.copy_to_device(values)
            offset += n
