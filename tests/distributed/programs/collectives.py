"""Every collective on float32, float64 and int64 (every reduce op where there is one), in place, synchronous and
asynchronous; subgroups; the errors. Run by test_distributed_collectives.py under ``mpiexec -n 2``."""

import os
import warnings
from datetime import timedelta

import numpy as np
from mpi_common import DTYPES, OPS, Recorder, rank_values

import numbagrad as torch
import numbagrad.distributed as dist


def t(values):
    return torch.from_numpy(np.array(values))


before = Recorder(-1)  # errors before init_process_group (recorded under the rank once it is known)
before.error("all_reduce", lambda: dist.all_reduce(torch.ones(2)))
before.error("get_rank", lambda: dist.get_rank())
before.error("new_group", lambda: dist.new_group([0]))
initialized_before = dist.is_initialized()

dist.init_process_group(backend="mpi")
rank, world = dist.get_rank(), dist.get_world_size()
rec = Recorder(rank)
rec["before"] = dict(before)
rec["initialized_before"] = initialized_before
rec["initialized"] = dist.is_initialized()
rec["world"] = world
rec["backend"] = dist.get_backend()

for dtype in DTYPES:
    for op in OPS:
        x = t(rank_values(rank, dtype))
        storage = x._data
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
        rec[f"all_reduce/{op}/{dtype}"] = x.tolist()
        rec[f"all_reduce/{op}/{dtype}/in_place"] = x._data is storage

        x = t(rank_values(rank, dtype))
        work = dist.all_reduce(x, op=getattr(dist.ReduceOp, op), async_op=True)
        rec[f"all_reduce_async/{op}/{dtype}"] = [work.wait(), x.tolist(), work.is_completed()]

        big = t(np.concatenate([rank_values(rank, dtype), rank_values(rank, dtype) * 2]))  # 2 chunks of 5
        out = torch.zeros(5, dtype=getattr(torch, dtype))
        dist.reduce_scatter_tensor(out, big, op=getattr(dist.ReduceOp, op))
        rec[f"reduce_scatter_tensor/{op}/{dtype}"] = out.tolist()

        x = t(rank_values(rank, dtype))
        dist.reduce(x, dst=1, op=getattr(dist.ReduceOp, op))
        rec[f"reduce/{op}/{dtype}"] = x.tolist()

    x = t(rank_values(rank, dtype))
    storage = x._data
    dist.broadcast(x, src=1)
    rec[f"broadcast/{dtype}"] = [x.tolist(), x._data is storage]

    x = t(rank_values(rank, dtype))
    work = dist.broadcast(x, src=0, async_op=True)
    work.wait()
    rec[f"broadcast_async/{dtype}"] = x.tolist()

    outs = [torch.zeros(5, dtype=getattr(torch, dtype)) for _ in range(world)]
    dist.all_gather(outs, t(rank_values(rank, dtype)))
    rec[f"all_gather/{dtype}"] = [o.tolist() for o in outs]

    out = torch.zeros(world, 5, dtype=getattr(torch, dtype))
    storage = out._data
    work = dist.all_gather_into_tensor(out, t(rank_values(rank, dtype)), async_op=True)
    work.wait()
    rec[f"all_gather_into_tensor/{dtype}"] = [out.tolist(), out._data is storage]

    outs = [torch.zeros(5, dtype=getattr(torch, dtype)) for _ in range(world)] if rank == 0 else None
    dist.gather(t(rank_values(rank, dtype)), outs, dst=0)
    rec[f"gather/{dtype}"] = None if outs is None else [o.tolist() for o in outs]

    x = torch.zeros(5, dtype=getattr(torch, dtype))
    pieces = [t(rank_values(r, dtype) * 10) for r in range(world)] if rank == 1 else None
    dist.scatter(x, pieces, src=1)
    rec[f"scatter/{dtype}"] = x.tolist()

    x = t(rank_values(rank, dtype))
    if rank == 0:
        dist.send(x, dst=1, tag=7)
        sender = None
    else:
        sender = dist.recv(x, tag=7)  # from any rank
    rec[f"send_recv/{dtype}"] = [x.tolist(), sender]

    x = t(rank_values(rank, dtype))
    work = dist.isend(x, dst=1) if rank == 0 else dist.irecv(x, src=0)
    work.wait()
    rec[f"isend_irecv/{dtype}"] = x.tolist()

dist.barrier()
dist.barrier(async_op=True).wait()

x = torch.ones(4)
work = dist.all_reduce(x, async_op=True)
rec["wait_with_timeout"] = [work.wait(timeout=timedelta(seconds=30)), work.is_success(), x.tolist()]
x = torch.ones(4)
work = dist.reduce_scatter_tensor(torch.zeros(2), x, async_op=True)
while not work.is_completed():  # polling until done, as torch's Work allows
    pass
rec["poll_until_completed"] = [o.tolist() for o in work.result()]

# bool tensors: SUM is a logical or, PRODUCT a logical and
flags = torch.tensor([rank == 0, True, False])
dist.all_reduce(flags)
rec["all_reduce/SUM/bool"] = flags.tolist()
flags = torch.tensor([rank == 0, True, False])
dist.all_reduce(flags, op=dist.ReduceOp.PRODUCT)
rec["all_reduce/PRODUCT/bool"] = flags.tolist()

objects = [None] * world
dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
rec["all_gather_object"] = objects
objects = [f"from {rank}", rank] if rank == 1 else [None, None]
dist.broadcast_object_list(objects, src=1)
rec["broadcast_object_list"] = objects

# a group of rank 1 alone: rank 0 is not a member
solo = dist.new_group([1])
x = t(rank_values(rank, "float64"))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    returned = dist.all_reduce(x, group=solo)
rec["solo/rank"] = dist.get_rank(solo)
rec["solo/size"] = dist.get_world_size(solo)
rec["solo/all_reduce"] = [x.tolist(), returned is None]
rec["solo/warnings"] = [str(w.message) for w in caught]
everyone = dist.new_group()
x = t(rank_values(rank, "float64"))
dist.all_reduce(x, group=everyone)
rec["everyone/all_reduce"] = x.tolist()
rec["everyone/ranks"] = dist.get_process_group_ranks(everyone)

# errors once initialised
rec.error("non_contiguous", lambda: dist.all_reduce(torch.ones(3, 4).t()))
rec.error("non_contiguous_broadcast", lambda: dist.broadcast(torch.ones(3, 4).t(), src=0))
rec.error("not_a_tensor", lambda: dist.all_reduce([torch.ones(2)]))
rec.error("init_twice", lambda: dist.init_process_group("mpi"))
rec.error("send_to_self", lambda: dist.send(torch.ones(2), dst=rank))
rec.error("all_gather_into_tensor_size", lambda: dist.all_gather_into_tensor(torch.ones(3), torch.ones(2)))
rec.error("reduce_scatter_tensor_size", lambda: dist.reduce_scatter_tensor(torch.ones(3), torch.ones(2)))
rec.error("all_gather_list_size", lambda: dist.all_gather([torch.ones(2)], torch.ones(2)))
rec.error("band_float", lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND))
rec.error("bad_rank", lambda: dist.broadcast(torch.ones(2), src=5))

# debug mode: shapes and dtypes are exchanged, and a mismatch raises on every rank
os.environ["NUMBAGRAD_DISTRIBUTED_DEBUG"] = "1"
x = torch.ones(3 + rank)
rec.error("debug_mismatch", lambda: dist.all_reduce(x))
x = torch.ones(3)
dist.all_reduce(x)
rec["debug_match"] = x.tolist()
os.environ["NUMBAGRAD_DISTRIBUTED_DEBUG"] = "0"

dist.destroy_process_group()
rec["initialized_after_destroy"] = dist.is_initialized()
rec.error("after_destroy", lambda: dist.all_reduce(torch.ones(2)))
rec.save()
