"""Rank 1 raises while rank 0 waits in a collective: the job must end (through MPI Abort), not hang."""

import numbagrad as torch
import numbagrad.distributed as dist

dist.init_process_group("mpi")
if dist.get_rank() == 1:
    raise ValueError("boom on rank 1")
dist.all_reduce(torch.ones(3))  # never completes: rank 1 is gone
print("rank 0 finished", flush=True)
