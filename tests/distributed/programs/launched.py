"""Started by ``python -m numbagrad.distributed.run``: records the job's size, the thread settings and its
arguments."""

import os
import sys

from mpi_common import Recorder

import numbagrad.distributed as dist

dist.init_process_group()
rec = Recorder(dist.get_rank())
rec["world"] = dist.get_world_size()
rec["threads"] = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")}
rec["argv"] = sys.argv[2:]
dist.destroy_process_group()
rec.save()
