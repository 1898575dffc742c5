"""Process groups and collectives on MPI through mpi4py, with ``torch.distributed``'s API, errors and semantics.

Every collective works in place on the tensors' own storage: a CPU tensor's numpy array is handed to MPI as it is
(never copied), so the tensor must be contiguous, as with torch's MPI backend. A cuda tensor's device array goes to
MPI through ``__cuda_array_interface__`` when the MPI library is CUDA-aware; otherwise it is staged through host
memory, with one warning per process.

Nothing here imports mpi4py until a process group is created: importing ``mpi4py.MPI`` initialises MPI, which
``import numbagrad`` (and ``import numbagrad.distributed``) must not do.
"""

from __future__ import annotations

import enum
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable

import numpy as np

from .. import cuda, ops
from .._tensor import Tensor

_MPI = None
ABORT_GRACE_SECONDS = 0.3  # an aborting rank's wait for its traceback to reach the launcher (see below)


def _mpi():
    """mpi4py's ``MPI`` module, imported (and MPI initialised) on first use."""
    global _MPI
    if _MPI is None:
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


def is_available() -> bool:
    """True when mpi4py can be imported (checked without importing it, so MPI is not initialised)."""
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


is_mpi_available = is_available


def is_gloo_available() -> bool:
    return False


def is_nccl_available() -> bool:
    return False


def is_torchelastic_launched() -> bool:
    return False


# --- reduce operations -----------------------------------------------------------------------------------------
class RedOpType(enum.IntEnum):
    """torch's ``ReduceOp.RedOpType``: the values ``ReduceOp.SUM`` etc. are members of it."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8

    def __str__(self) -> str:
        return f"RedOpType.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class ReduceOp:
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter_tensor`` combine the ranks' values.

    ``AVG`` is ``SUM`` followed by a division by the group size (integer tensors truncate toward zero, as NCCL's
    ``ncclAvg`` does); ``BAND``/``BOR``/``BXOR`` take integer or bool tensors. On bool tensors ``SUM``/``MAX`` are a
    logical or and ``PRODUCT``/``MIN`` a logical and.
    """

    RedOpType = RedOpType
    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM


def _mpi_op(op, t: Tensor):
    """The MPI operation for ``op`` on ``t``'s dtype, and whether the result must then be divided (AVG)."""
    MPI = _mpi()
    try:
        op = RedOpType(op)
    except ValueError:
        raise ValueError(f"Invalid reduce op: {op!r}") from None
    kind = t._data.dtype.kind
    if op is RedOpType.PREMUL_SUM:
        raise ValueError("ReduceOp.PREMUL_SUM is not supported by numbagrad's MPI backend")
    if op in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR) and kind not in "iub":
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if kind == "b":
        if op is RedOpType.AVG:
            raise RuntimeError("Cannot use ReduceOp.AVG with boolean inputs")
        return {
            RedOpType.SUM: MPI.LOR,
            RedOpType.MAX: MPI.LOR,
            RedOpType.BOR: MPI.LOR,
            RedOpType.PRODUCT: MPI.LAND,
            RedOpType.MIN: MPI.LAND,
            RedOpType.BAND: MPI.LAND,
            RedOpType.BXOR: MPI.LXOR,
        }[op], False
    return {
        RedOpType.SUM: MPI.SUM,
        RedOpType.AVG: MPI.SUM,
        RedOpType.PRODUCT: MPI.PROD,
        RedOpType.MIN: MPI.MIN,
        RedOpType.MAX: MPI.MAX,
        RedOpType.BAND: MPI.BAND,
        RedOpType.BOR: MPI.BOR,
        RedOpType.BXOR: MPI.BXOR,
    }[op], op is RedOpType.AVG


def _divide(array, n: int) -> None:
    """``array /= n`` in place; integers truncate toward zero. A device array makes a host round trip."""
    if not isinstance(array, np.ndarray):
        host = array.copy_to_host()
        _divide(host, n)
        array.copy_to_device(host)
        return
    if array.dtype.kind == "f":
        np.divide(array, n, out=array)
    else:
        np.subtract(array, np.fmod(array, n), out=array)  # now an exact multiple of n
        np.floor_divide(array, n, out=array)


# --- process groups --------------------------------------------------------------------------------------------
class Backend(str):
    """torch's backend names; numbagrad runs every group on MPI."""

    MPI = "mpi"
    GLOO = "gloo"
    NCCL = "nccl"
    UNDEFINED = "undefined"


class ProcessGroup:
    """A set of ranks and the MPI communicator (a private duplicate) their collectives run on."""

    def __init__(self, comm, ranks: list[int], name: str) -> None:
        self._comm = comm
        self._ranks = list(ranks)  # the global rank of each group rank
        self._group_rank = {g: i for i, g in enumerate(self._ranks)}
        self._name = name
        self._seq = 0  # collectives run so far (the debug fingerprints carry it)

    def rank(self) -> int:
        return self._comm.Get_rank()

    def size(self) -> int:
        return len(self._ranks)

    def name(self) -> str:
        return self._name

    @property
    def group_name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<numbagrad.distributed.ProcessGroup {self._name!r} ranks={self._ranks}>"


class GroupMember:
    """``GroupMember.WORLD`` is the default group once ``init_process_group`` ran; ``new_group`` returns
    ``NON_GROUP_MEMBER`` on ranks outside the new group."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = -100


group = GroupMember  # torch spells it both ways: dist.group.WORLD


class _World:
    default: ProcessGroup | None = None
    groups: dict = {}  # name -> ProcessGroup, every group this rank belongs to (the default one included)
    counter = 0
    previous_excepthook = None


_world = _World()

_NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."


def _get_default_group() -> ProcessGroup:
    if _world.default is None:
        raise ValueError(_NOT_INITIALIZED)
    return _world.default


def is_initialized() -> bool:
    return _world.default is not None


def _resolve(group) -> ProcessGroup:
    if group is None or group is GroupMember.WORLD:
        return _get_default_group()
    _get_default_group()
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"expected a ProcessGroup, got {type(group).__name__}")
    return group


def _rank_not_in_group(group) -> bool:
    return group is not None and not isinstance(group, ProcessGroup) and group == GroupMember.NON_GROUP_MEMBER


def _warn_not_in_group(op_name: str) -> None:
    global_rank = -1 if _world.default is None else _world.default.rank()
    warnings.warn(f"Running {op_name} on global rank {global_rank} which does not belong to the given group.",
                  stacklevel=3)  # fmt: skip


def _check_backend(backend) -> None:
    if backend is None:
        return
    names = {part.split(":")[-1].strip().lower() for part in str(backend).split(",")}
    if not names <= {"mpi", "gloo", "nccl", "cpu", "cuda"}:
        raise ValueError(f"Invalid backend: '{backend}'")
    if names - {"mpi"}:
        warnings.warn(
            f"numbagrad.distributed runs every process group on MPI; backend '{backend}' uses MPI",
            UserWarning,
            stacklevel=3,
        )


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout=None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Create the default group over every process of the MPI job (``mpiexec -n N``, ``srun``).

    MPI already knows the job's size and each process's rank, so ``init_method``, ``store`` and the ``MASTER_*``
    variables are not needed; ``world_size`` and ``rank``, when given, must agree with MPI's. It also installs an
    excepthook: an uncaught exception on any rank prints that rank's traceback and ends the whole job through
    ``MPI.COMM_WORLD.Abort``, instead of leaving the other ranks waiting in a collective.
    """
    if _world.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    _check_backend(backend)
    MPI = _mpi()
    size, me = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()
    if world_size not in (None, -1) and world_size != size:
        raise ValueError(
            f"world_size={world_size} does not match the MPI job's {size} processes (launch with mpiexec -n "
            f"{world_size})"
        )
    if rank not in (None, -1) and rank != me:
        raise ValueError(f"rank={rank} does not match this process's MPI rank {me}")
    pg = ProcessGroup(MPI.COMM_WORLD.Dup(), list(range(size)), group_name or "0")
    _world.default = pg
    _world.groups = {pg.name(): pg}
    GroupMember.WORLD = pg
    _install_excepthook()


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Free a group's communicator; without an argument, every group (the package is then uninitialised)."""
    if _rank_not_in_group(group):
        return
    pg = GroupMember.WORLD if group is None else group
    if pg is None:
        raise AssertionError("Process group cannot be None")
    if not isinstance(pg, ProcessGroup) or _world.groups.get(pg.name()) is not pg:
        raise ValueError("Invalid process group specified")
    if pg is _world.default:
        for g in _world.groups.values():
            g._comm.Free()
        _world.groups = {}
        _world.default = None
        GroupMember.WORLD = None
        _restore_excepthook()
    else:
        pg._comm.Free()
        del _world.groups[pg.name()]


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization: bool = False,
              group_desc=None, device_id=None):  # fmt: skip
    """A group of some ranks (all by default). Every rank of the job must call it, members or not; a rank outside
    ``ranks`` gets ``GroupMember.NON_GROUP_MEMBER``, on which collectives warn and do nothing."""
    world = _get_default_group()
    _check_backend(backend)
    if use_local_synchronization:
        raise ValueError("MPI backend doesn't support use_local_synchronization=True")
    size = world.size()
    if ranks is None:
        ranks = list(range(size))
    ranks = sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"ranks list must not contain duplicate entries, got {ranks}")
    if len(ranks) > size:
        raise ValueError(
            "the new group's world size should be less or equal to the world size set by init_process_group"
        )
    for r in ranks:
        if r < 0 or r >= size:
            raise ValueError(f"Rank {r} is out of range. Valid ranks are 0 to {size - 1} (world_size={size})")
    _world.counter += 1
    name = str(_world.counter)
    everyone = world._comm.Get_group()
    members = everyone.Incl(ranks)
    comm = world._comm.Create(members)  # collective over the whole job
    members.Free()
    everyone.Free()
    if comm == _mpi().COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, ranks, name)
    _world.groups[name] = pg
    return pg


def get_backend(group: ProcessGroup | None = None) -> str:
    if _rank_not_in_group(group):
        raise ValueError("Invalid process group specified")
    _resolve(group)
    return Backend.MPI


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (the default group if None); -1 if it is not a member."""
    if _rank_not_in_group(group):
        return -1
    return _resolve(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of processes in ``group``; -1 if this process is not a member."""
    if _rank_not_in_group(group):
        return -1
    return _resolve(group).size()


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    pg = _resolve(group)
    if global_rank not in pg._group_rank:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
    return pg._group_rank[global_rank]


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    pg = _resolve(group)
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
    return pg._ranks[group_rank]


def get_process_group_ranks(group: ProcessGroup | None) -> list[int]:
    return list(_resolve(group)._ranks)


def _group_rank(pg: ProcessGroup, global_rank, group_rank, default=None) -> int:
    """torch's ``_canonicalize_group_rank``: ``src``/``dst`` are global ranks, ``group_src``/``group_dst`` are
    ranks in the group."""
    if group_rank is not None:
        if global_rank is not None:
            raise ValueError("Can't specify both group_rank and global_rank")
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
        return group_rank
    if global_rank is None:
        if default is None:
            raise ValueError("Must specify global_rank or group_rank")
        global_rank = default
    return get_group_rank(pg, global_rank)


# --- failure: one rank's exception ends the job ----------------------------------------------------------------
def _abort_on_exception(exc_type, exc, tb) -> None:
    """Print this rank's traceback, each line marked with the rank, then abort every process of the job."""
    MPI = _MPI
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized() or MPI.COMM_WORLD.Get_size() == 1:
        (_world.previous_excepthook or sys.__excepthook__)(exc_type, exc, tb)
        return
    rank = MPI.COMM_WORLD.Get_rank()
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stdout.flush()
    sys.stderr.write("".join(f"[rank{rank}]: {line}" for line in text.splitlines(True)))
    sys.stderr.write(f"[rank{rank}]: numbagrad.distributed: uncaught exception, aborting the job (MPI Abort)\n")
    sys.stderr.flush()
    # the launcher forwards a rank's output from a pipe, and tearing the job down can beat it there: once in a full
    # test run the whole traceback was lost (an empty output); a moment's wait lets it through first
    time.sleep(ABORT_GRACE_SECONDS)
    MPI.COMM_WORLD.Abort(1)


def _install_excepthook() -> None:
    if sys.excepthook is not _abort_on_exception:
        _world.previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_exception


def _restore_excepthook() -> None:
    if sys.excepthook is _abort_on_exception:
        sys.excepthook = _world.previous_excepthook or sys.__excepthook__
    _world.previous_excepthook = None


# --- tensors as MPI buffers ------------------------------------------------------------------------------------
_cuda_aware_flag: list = []
_staging_warned: list = []


def _cuda_aware() -> bool:
    """Whether the MPI library reads device memory: ``NUMBAGRAD_MPI_CUDA_AWARE=0/1`` decides if set, else MPICH's
    and Open MPI's ``MPIX_Query_cuda_support()`` (looked up in the loaded libmpi)."""
    env = os.environ.get("NUMBAGRAD_MPI_CUDA_AWARE")
    if env in ("0", "1"):
        return env == "1"
    if not _cuda_aware_flag:
        _cuda_aware_flag.append(_query_cuda_support())
    return _cuda_aware_flag[0]


def _query_cuda_support() -> bool:
    import ctypes

    _mpi()  # loads libmpi
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if len(line.split()) >= 6}
    except OSError:
        paths = set()
    for path in sorted(p for p in paths if os.path.basename(p).startswith("libmpi") and ".so" in p):
        try:
            query = ctypes.CDLL(path).MPIX_Query_cuda_support  # MPICH and Open MPI extension
        except (OSError, AttributeError):
            continue
        query.restype = ctypes.c_int
        return bool(query())
    return False


def _warn_staging() -> None:
    if not _staging_warned:
        _staging_warned.append(True)
        warnings.warn(
            "numbagrad.distributed: the MPI library is not CUDA-aware, so cuda tensors are staged through host "
            "memory for collectives (set NUMBAGRAD_MPI_CUDA_AWARE=1 if it is)",
            UserWarning,
            stacklevel=4,
        )


def _sync_cuda() -> None:
    cuda.synchronize()


class _Buf:
    """One tensor's storage as MPI reads or writes it: the array itself (CPU, or cuda with a CUDA-aware MPI), or a
    host copy (cuda otherwise) that ``finish`` writes back when ``write``."""

    __slots__ = ("array", "_device")

    def __init__(self, t: Tensor, read: bool = True, write: bool = True) -> None:
        data = t._data
        self._device = None
        if isinstance(data, np.ndarray):
            self.array = data
        elif _cuda_aware():
            _sync_cuda()  # kernels that produced the data must have finished before MPI reads it
            self.array = data
        else:
            _warn_staging()
            self.array = data.copy_to_host() if read else np.empty(data.shape, data.dtype)
            if write:
                self._device = data

    def finish(self) -> None:
        if self._device is not None:
            self._device.copy_to_device(self.array)


def _check_single_tensor(param, name: str) -> None:
    if not isinstance(param, Tensor):
        raise TypeError(
            f"""Invalid function argument. Expected parameter `{name}` of type torch.Tensor
             but got {type(param)} instead."""
        )


def _check_tensor_list(param, name: str) -> None:
    if not isinstance(param, list):
        raise TypeError(
            f"""Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor]
             but got {type(param)} instead."""
        )
    if not all(isinstance(p, Tensor) for p in param):
        raise TypeError(
            f"""Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor]
             but got {type(param)} with elements of type {[type(p) for p in param]}."""
        )


def _check_contiguous(*tensors: Tensor) -> None:
    for t in tensors:
        if not t.is_contiguous():
            raise RuntimeError("input tensor has to be contiguous")


def _check_same(t_in: Tensor, tensors: list) -> None:
    for t in tensors:
        if t.numel() != t_in.numel() or t.dtype != t_in.dtype:
            raise RuntimeError("Tensors are not equal in size or data type")
    _check_contiguous(*tensors)


def _check_same_dtype(*tensors: Tensor) -> None:
    last = None
    for t in tensors:
        if last is None:
            last = t.dtype
        elif t.dtype != last:
            raise ValueError(f"Invalid usage of tensors with different dtypesFound {last!r} and  {t.dtype!r}")


def _flat(t: Tensor, n: int):
    """A contiguous scratch array of ``n`` slots shaped like ``t``, where MPI will see it (host or device)."""
    if isinstance(t._data, np.ndarray) or not _cuda_aware():
        return np.empty((n, *t.shape), t._data.dtype)
    return ops.empty((n, *t.shape), dtype=t.dtype, device="cuda")._data


def _store(t: Tensor, src) -> None:
    """Write ``src`` (an array of ``t``'s numel, host or device) into ``t``'s storage."""
    data = t._data
    if isinstance(data, np.ndarray):
        if not isinstance(src, np.ndarray):
            src = src.copy_to_host()
        np.copyto(data, src.reshape(data.shape))
    else:
        data.copy_to_device(src.reshape(data.shape))


def _load(slot, t: Tensor) -> None:
    """Copy ``t``'s values into ``slot`` (a contiguous slot of a scratch array from ``_flat``)."""
    data = t._data
    if isinstance(slot, np.ndarray):
        if isinstance(data, np.ndarray):
            np.copyto(slot, data.reshape(slot.shape))
        else:
            slot[...] = data.copy_to_host().reshape(slot.shape)
    else:
        slot.copy_to_device(data.reshape(slot.shape))


# --- debug mode: fingerprints of every collective compared across ranks ----------------------------------------
def _debug_enabled() -> bool:
    return os.environ.get("NUMBAGRAD_DISTRIBUTED_DEBUG", "0") not in ("", "0")


def _fingerprint_str(fp: tuple) -> str:
    seq, op, shapes, dtypes, extra = fp
    parts = [f"SequenceNumber={seq}", f"OpType={op}"]
    if shapes:
        parts.append("TensorShape=" + ", ".join(f"[{', '.join(map(str, s))}]" for s in shapes))
        parts.append("TensorDtypes=" + ", ".join(dtypes))
    parts += [f"{k}={v}" for k, v in extra]
    return f"CollectiveFingerPrint({', '.join(parts)})"


def _debug_check(pg: ProcessGroup, kind: str, tensors=(), **extra) -> None:
    """In debug mode (``NUMBAGRAD_DISTRIBUTED_DEBUG=1``) exchange each collective's kind, shapes and dtypes before it
    runs, and raise on every rank when they differ. Off by default: the exchange is one more collective per call."""
    if not _debug_enabled():
        return
    pg._seq += 1
    fp = (
        pg._seq,
        kind,
        [list(t.shape) for t in tensors],
        [t.dtype.scalar_name for t in tensors],
        sorted(extra.items()),
    )
    everyone = pg._comm.allgather(fp)
    for r, other in enumerate(everyone):
        if other != fp:
            raise RuntimeError(
                f"Detected mismatch between collectives on ranks. Rank {pg.rank()} is running collective: "
                f"{_fingerprint_str(fp)}, but Rank {r} is running collective: {_fingerprint_str(tuple(other))}."
            )


# --- work handles ----------------------------------------------------------------------------------------------
class Work:
    """What a collective returns with ``async_op=True`` (and ``isend``/``irecv``): ``wait()`` blocks until it has
    finished, after which the output tensors hold the result."""

    def __init__(self, requests: list, finish: Callable[[], None] | None = None, result=(), pg=None, keep=()) -> None:
        self._requests = requests
        self._keep = keep  # the arrays MPI reads or writes (host copies, scratch arrays) stay alive until done
        self._finish = finish
        self._result = list(result)
        self._done = False
        self._status = None
        self._pg = pg

    def _complete(self) -> None:
        self._done = True
        self._keep = ()
        finish, self._finish = self._finish, None
        if finish is not None:
            finish()

    def is_completed(self) -> bool:
        if not self._done:
            MPI = _mpi()
            status = MPI.Status()
            if MPI.Request.Testall(self._requests, [status] if len(self._requests) == 1 else None):
                self._status = status
                self._complete()
        return self._done

    def wait(self, timeout=None) -> bool:
        """Block until the operation has finished; ``timeout`` (seconds or a timedelta) raises if it has not."""
        if self._done:
            return True
        if timeout is not None:
            seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
            deadline = time.monotonic() + seconds
            while not self.is_completed():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Work timed out after {seconds * 1000:.0f} ms")
            return True
        MPI = _mpi()
        status = MPI.Status()
        MPI.Request.Waitall(self._requests, [status] if len(self._requests) == 1 else None)
        self._status = status
        self._complete()
        return True

    def is_success(self) -> bool:
        if not self._done:
            raise RuntimeError("Invalid call to AsyncWork::isSuccess before work has completed")
        return True

    def exception(self):
        return None

    def result(self) -> list:
        return list(self._result)

    def _source_rank(self) -> int:
        """The group rank a finished receive came from."""
        return self._status.Get_source()


def _issue(async_op: bool, call: Callable, finish: Callable | None, result=(), pg=None, keep=()):
    """Run one MPI operation: ``call(False)`` blocks, ``call(True)`` starts it and returns its request (in a Work
    that keeps ``keep`` alive until it has finished)."""
    if async_op:
        return Work([call(True)], finish, result, pg, keep)
    call(False)
    if finish is not None:
        finish()
    return None


# --- collectives -----------------------------------------------------------------------------------------------
def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids=None):
    """Wait until every rank of the group has reached the barrier."""
    if _rank_not_in_group(group):
        _warn_not_in_group("barrier")
        return None
    pg = _resolve(group)
    _debug_check(pg, "BARRIER")
    comm = pg._comm
    return _issue(async_op, lambda nb: comm.Ibarrier() if nb else comm.Barrier(), None)


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False):
    """Reduce ``tensor`` across the group in place: afterwards every rank holds the same result."""
    _check_single_tensor(tensor, "tensor")
    if _rank_not_in_group(group):
        _warn_not_in_group("all_reduce")
        return None
    pg = _resolve(group)
    _check_contiguous(tensor)
    mpi_op, average = _mpi_op(op, tensor)
    _debug_check(pg, "ALLREDUCE", [tensor], op=RedOpType(op).name)
    buf, comm, IN_PLACE = _Buf(tensor), pg._comm, _mpi().IN_PLACE

    def finish() -> None:
        if average:
            _divide(buf.array, pg.size())
        buf.finish()

    def call(nb: bool):
        return (comm.Iallreduce if nb else comm.Allreduce)(IN_PLACE, buf.array, mpi_op)

    return _issue(async_op, call, finish, [tensor], pg)


def reduce(tensor: Tensor, dst: int | None = None, op=ReduceOp.SUM, group: ProcessGroup | None = None,
           async_op: bool = False, group_dst: int | None = None):  # fmt: skip
    """Reduce ``tensor`` across the group into rank ``dst``'s tensor (the others' are left as they were)."""
    _check_single_tensor(tensor, "tensor")
    if _rank_not_in_group(group):
        _warn_not_in_group("reduce")
        return None
    pg = _resolve(group)
    root = _group_rank(pg, dst, group_dst, default=None if group_dst is not None else 0)
    _check_contiguous(tensor)
    mpi_op, average = _mpi_op(op, tensor)
    _debug_check(pg, "REDUCE", [tensor], op=RedOpType(op).name, root=root)
    is_root = pg.rank() == root
    buf, comm, IN_PLACE = _Buf(tensor, write=is_root), pg._comm, _mpi().IN_PLACE

    def finish() -> None:
        if average and is_root:
            _divide(buf.array, pg.size())
        buf.finish()

    def call(nb: bool):
        fn = comm.Ireduce if nb else comm.Reduce
        return fn(IN_PLACE, buf.array, mpi_op, root) if is_root else fn(buf.array, None, mpi_op, root)

    return _issue(async_op, call, finish, [tensor], pg)


def broadcast(tensor: Tensor, src: int | None = None, group: ProcessGroup | None = None, async_op: bool = False,
              group_src: int | None = None):  # fmt: skip
    """Copy rank ``src``'s tensor into every other rank's tensor, in place."""
    _check_single_tensor(tensor, "tensor")
    if _rank_not_in_group(group):
        _warn_not_in_group("broadcast")
        return None
    pg = _resolve(group)
    root = _group_rank(pg, src, group_src)
    _check_contiguous(tensor)
    _debug_check(pg, "BROADCAST", [tensor], root=root)
    is_root = pg.rank() == root
    buf, comm = _Buf(tensor, read=is_root, write=not is_root), pg._comm
    return _issue(async_op, lambda nb: (comm.Ibcast if nb else comm.Bcast)(buf.array, root), buf.finish, [tensor], pg)


def all_gather(tensor_list: list, tensor: Tensor, group: ProcessGroup | None = None, async_op: bool = False):
    """Every rank's ``tensor`` into ``tensor_list[rank]``, on every rank (through one contiguous scratch buffer, as
    torch's MPI backend does; ``all_gather_into_tensor`` writes straight into its output)."""
    _check_tensor_list(tensor_list, "tensor_list")
    _check_single_tensor(tensor, "tensor")
    _check_same_dtype(tensor, *tensor_list)
    if _rank_not_in_group(group):
        _warn_not_in_group("all_gather")
        return None
    pg = _resolve(group)
    _check_contiguous(tensor)
    if len(tensor_list) != pg.size():
        raise RuntimeError("All gather: number of output tensors should equal to the world size")
    _check_same(tensor, tensor_list)
    _debug_check(pg, "ALLGATHER", [tensor])
    buf, flat, comm = _Buf(tensor, write=False), _flat(tensor, pg.size()), pg._comm

    def finish() -> None:
        for i, out in enumerate(tensor_list):
            _store(out, flat[i])

    def call(nb: bool):
        return (comm.Iallgather if nb else comm.Allgather)(buf.array, flat)

    return _issue(async_op, call, finish, tensor_list, pg, (buf, flat))


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: ProcessGroup | None = None,
                           async_op: bool = False):  # fmt: skip
    """Every rank's ``input_tensor``, concatenated (or stacked) in rank order, into ``output_tensor`` directly."""
    _check_single_tensor(input_tensor, "input_tensor")
    _check_single_tensor(output_tensor, "output_tensor")
    _check_same_dtype(input_tensor, output_tensor)
    if _rank_not_in_group(group):
        _warn_not_in_group("all_gather_into_tensor")
        return None
    pg = _resolve(group)
    _check_contiguous(input_tensor, output_tensor)
    if output_tensor.numel() != pg.size() * input_tensor.numel():
        raise ValueError("output tensor size must be equal to world_size times input tensor size")
    _debug_check(pg, "_ALLGATHER_BASE", [input_tensor, output_tensor])
    src, dst, comm = _Buf(input_tensor, write=False), _Buf(output_tensor, read=False), pg._comm

    def call(nb: bool):
        return (comm.Iallgather if nb else comm.Allgather)(src.array, dst.array)

    return _issue(async_op, call, dst.finish, [output_tensor], pg, (src, dst))


def reduce_scatter_tensor(output: Tensor, input: Tensor, op=ReduceOp.SUM, group: ProcessGroup | None = None,  # noqa: A002
                          async_op: bool = False):  # fmt: skip
    """Reduce ``input`` across the group, then give rank ``r`` the ``r``-th of ``world_size`` equal chunks."""
    _check_single_tensor(output, "output")
    _check_single_tensor(input, "input")
    _check_same_dtype(input, output)
    if _rank_not_in_group(group):
        _warn_not_in_group("reduce_scatter_tensor")
        return None
    pg = _resolve(group)
    _check_contiguous(input, output)
    if input.numel() != pg.size() * output.numel():
        raise ValueError("input tensor must be the same size as output size times world size")
    mpi_op, average = _mpi_op(op, input)
    _debug_check(pg, "_REDUCE_SCATTER_BASE", [input, output], op=RedOpType(op).name)
    src, dst, comm = _Buf(input, write=False), _Buf(output, read=False), pg._comm

    def finish() -> None:
        if average:
            _divide(dst.array, pg.size())
        dst.finish()

    def call(nb: bool):
        return (comm.Ireduce_scatter_block if nb else comm.Reduce_scatter_block)(src.array, dst.array, mpi_op)

    return _issue(async_op, call, finish, [output], pg, (src, dst))


def gather(tensor: Tensor, gather_list: list | None = None, dst: int | None = None,
           group: ProcessGroup | None = None, async_op: bool = False, group_dst: int | None = None):  # fmt: skip
    """Every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (the list is given there only)."""
    _check_single_tensor(tensor, "tensor")
    if gather_list:
        _check_tensor_list(gather_list, "gather_list")
    else:
        gather_list = []
    _check_same_dtype(tensor, *gather_list)
    if _rank_not_in_group(group):
        _warn_not_in_group("gather")
        return None
    pg = _resolve(group)
    root = _group_rank(pg, dst, group_dst, default=None if group_dst is not None else 0)
    is_root = pg.rank() == root
    if is_root and not gather_list:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    if not is_root and gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    _check_contiguous(tensor)
    if is_root:
        if len(gather_list) != pg.size():
            raise RuntimeError("Gather: number of output tensors should equal to the world size")
        _check_same(tensor, gather_list)
    _debug_check(pg, "GATHER", [tensor], root=root)
    buf, comm = _Buf(tensor, write=False), pg._comm
    flat = _flat(tensor, pg.size()) if is_root else None

    def finish() -> None:
        for i, out in enumerate(gather_list):
            _store(out, flat[i])

    def call(nb: bool):
        return (comm.Igather if nb else comm.Gather)(buf.array, flat, root)

    return _issue(async_op, call, finish, gather_list, pg, (buf, flat))


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int | None = None,
            group: ProcessGroup | None = None, async_op: bool = False, group_src: int | None = None):  # fmt: skip
    """Rank ``src``'s ``scatter_list[r]`` into rank ``r``'s ``tensor`` (the list is given on ``src`` only)."""
    _check_single_tensor(tensor, "tensor")
    if scatter_list:
        _check_tensor_list(scatter_list, "scatter_list")
    else:
        scatter_list = []
    _check_same_dtype(tensor, *scatter_list)
    if _rank_not_in_group(group):
        _warn_not_in_group("scatter")
        return None
    pg = _resolve(group)
    root = _group_rank(pg, src, group_src, default=None if group_src is not None else 0)
    is_root = pg.rank() == root
    if is_root and not scatter_list:
        raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
    if not is_root and scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    _check_contiguous(tensor)
    flat = None
    if is_root:
        if len(scatter_list) != pg.size():
            raise RuntimeError("Scatter: number of input tensors should equal to the world size")
        _check_same(tensor, scatter_list)
        flat = _flat(tensor, pg.size())
        for i, t in enumerate(scatter_list):
            _load(flat[i], t)
    _debug_check(pg, "SCATTER", [tensor], root=root)
    buf, comm = _Buf(tensor, read=False), pg._comm

    def call(nb: bool):
        return (comm.Iscatter if nb else comm.Scatter)(flat, buf.array, root)

    return _issue(async_op, call, buf.finish, [tensor], pg, (buf, flat))


def isend(tensor: Tensor, dst: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
          group_dst: int | None = None) -> Work | None:  # fmt: skip
    """Start sending ``tensor`` to rank ``dst``; don't modify it until the returned Work has finished."""
    pg = _resolve(group) if not _rank_not_in_group(group) else None
    _check_single_tensor(tensor, "tensor")
    if pg is None:
        _warn_not_in_group("isend")
        return None
    peer = _group_rank(pg, dst, group_dst)
    _check_contiguous(tensor)
    buf = _Buf(tensor, write=False)
    return Work([pg._comm.Isend(buf.array, peer, tag)], None, [], pg, (buf,))


def irecv(tensor: Tensor, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
          group_src: int | None = None) -> Work | None:  # fmt: skip
    """Start receiving into ``tensor`` from rank ``src`` (any rank if None)."""
    _check_single_tensor(tensor, "tensor")
    if _rank_not_in_group(group):
        _warn_not_in_group("irecv")
        return None
    pg = _resolve(group)
    peer = _mpi().ANY_SOURCE if src is None and group_src is None else _group_rank(pg, src, group_src)
    _check_contiguous(tensor)
    buf = _Buf(tensor, read=False)
    return Work([pg._comm.Irecv(buf.array, peer, tag)], buf.finish, [tensor], pg, (buf,))


def send(tensor: Tensor, dst: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
         group_dst: int | None = None) -> None:  # fmt: skip
    """Send ``tensor`` to rank ``dst`` and wait until it has gone."""
    pg = _resolve(group) if not _rank_not_in_group(group) else None
    if pg is not None and _group_rank(pg, dst, group_dst) == pg.rank():
        raise ValueError(
            "Invalid destination rank: destination rank should not be the same as the rank of the current process."
        )
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor: Tensor, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
         group_src: int | None = None) -> int:  # fmt: skip
    """Receive into ``tensor`` from rank ``src`` (any rank if None); return the sender's global rank, or -1 when
    this process is not in ``group``."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    pg = _resolve(group)
    if src is None and group_src is None:
        return pg._ranks[work._source_rank()]
    return src if src is not None else pg._ranks[group_src]


def all_gather_object(object_list: list, obj, group: ProcessGroup | None = None) -> None:
    """Every rank's picklable ``obj`` into ``object_list[rank]``, on every rank."""
    if _rank_not_in_group(group):
        _warn_not_in_group("all_gather_object")
        return
    pg = _resolve(group)
    for i, value in enumerate(pg._comm.allgather(obj)):
        object_list[i] = value


def broadcast_object_list(object_list: list, src: int | None = None, group: ProcessGroup | None = None,
                          device=None, group_src: int | None = None) -> None:  # fmt: skip
    """Rank ``src``'s picklable objects into ``object_list`` on every rank (the list has the same length on all)."""
    if _rank_not_in_group(group):
        _warn_not_in_group("broadcast_object_list")
        return
    pg = _resolve(group)
    root = _group_rank(pg, src, group_src, default=None if group_src is not None else 0)
    values = pg._comm.bcast(list(object_list) if pg.rank() == root else None, root)
    object_list[:] = values
