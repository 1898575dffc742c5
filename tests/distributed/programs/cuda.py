"""cuda tensors under Numba's simulator (run with NUMBA_ENABLE_CUDASIM=1): collectives staged through host memory
(one warning), then handed to MPI through ``__cuda_array_interface__`` (NUMBAGRAD_MPI_CUDA_AWARE=1; the simulator's
device memory is host memory, so this MPI can read it); DistributedDataParallel on cuda parameters."""

import os
import warnings

import numpy as np
from mpi_common import Recorder, rank_values

import numbagrad as torch
import numbagrad.distributed as dist
from numbagrad import nn
from numbagrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
rec = Recorder(rank)


def cuda(values) -> torch.Tensor:
    return torch.tensor(np.asarray(values), device="cuda")


def collectives(mode: str) -> None:
    x = cuda(rank_values(rank, "float32"))
    dist.all_reduce(x)
    rec[f"{mode}/all_reduce"] = [x.device.type, x.cpu().tolist()]
    x = cuda(rank_values(rank, "int64"))
    dist.all_reduce(x, op=dist.ReduceOp.AVG, async_op=True).wait()
    rec[f"{mode}/all_reduce_avg_int64"] = x.cpu().tolist()
    x = cuda(rank_values(rank, "float64"))
    dist.broadcast(x, src=1)
    rec[f"{mode}/broadcast"] = x.cpu().tolist()
    outs = [cuda(np.zeros(5, np.float32)) for _ in range(world)]
    dist.all_gather(outs, cuda(rank_values(rank, "float32")))
    rec[f"{mode}/all_gather"] = [o.cpu().tolist() for o in outs]
    out = cuda(np.zeros((world, 5), np.float32))
    dist.all_gather_into_tensor(out, cuda(rank_values(rank, "float32")))
    rec[f"{mode}/all_gather_into_tensor"] = out.cpu().tolist()
    x = cuda(np.zeros(5, np.float32))
    dist.scatter(x, [cuda(rank_values(r, "float32") * 10) for r in range(world)] if rank == 0 else None, src=0)
    rec[f"{mode}/scatter"] = x.cpu().tolist()


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    os.environ["NUMBAGRAD_MPI_CUDA_AWARE"] = "0"
    collectives("staged")
    os.environ["NUMBAGRAD_MPI_CUDA_AWARE"] = "1"
    collectives("aware")
rec["warnings"] = [str(w.message) for w in caught if "CUDA-aware" in str(w.message)]

# DDP: cuda parameters, 3 SGD steps on each rank's half batch == one CPU process on the whole batch
rng = np.random.default_rng(5)
X, Y = torch.from_numpy(rng.standard_normal((3 * 8, 3))), torch.from_numpy(rng.integers(0, 2, 3 * 8))


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()


def train(model, device: str, share: slice) -> list:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x, y = X[step * 8 : (step + 1) * 8][share], Y[step * 8 : (step + 1) * 8][share]
        optimizer.zero_grad()
        nn.CrossEntropyLoss()(model(x.to(device)), y.to(device)).backward()
        optimizer.step()
    return [p.detach().cpu().tolist() for p in model.parameters()]


os.environ["NUMBAGRAD_MPI_CUDA_AWARE"] = "0"
rec["ddp/cuda"] = train(DDP(mlp().to("cuda")), "cuda", slice(rank * 4, rank * 4 + 4))
if rank == 0:
    rec["ddp/reference"] = train(mlp(), "cpu", slice(0, 8))
dist.destroy_process_group()
rec.save()
