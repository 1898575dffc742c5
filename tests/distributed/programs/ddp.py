"""DistributedDataParallel on 2 ranks: training equals one process on the whole batch, buckets, overlap, no_sync,
unused parameters, buffers, state_dict and the errors. Run by test_distributed_ddp.py under ``mpiexec -n 2``."""

import os

import numpy as np
from mpi_common import Recorder

import numbagrad as torch
import numbagrad.distributed as dist
from numbagrad import nn
from numbagrad.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
rec = Recorder(rank)
loss_fn = nn.CrossEntropyLoss()


def mlp(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)).double()


def values(params) -> list:
    return [p.detach().numpy().tolist() for p in params]


def grads(params) -> list:
    return [None if p.grad is None else p.grad.numpy().tolist() for p in params]


rng = np.random.default_rng(1234)  # the same data on every rank
STEPS, BATCH = 20, 32
X = torch.from_numpy(rng.standard_normal((STEPS * BATCH, 3)))
Y = torch.from_numpy(rng.integers(0, 4, STEPS * BATCH))
half = BATCH // world


def train(model, optimizer, share: slice | None) -> None:
    for step in range(STEPS):
        x, y = X[step * BATCH : (step + 1) * BATCH], Y[step * BATCH : (step + 1) * BATCH]
        if share is not None:
            x, y = x[share], y[share]
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
}
CASES = [("sgd", "sgd", None), ("sgd_small_buckets", "sgd", 0.0005), ("adam", "adam", None),
         ("sgd_progress_thread", "sgd", 0.0005)]  # fmt: skip
for name, make, cap in CASES:
    os.environ["NUMBAGRAD_DDP_PROGRESS_THREAD"] = "1" if name == "sgd_progress_thread" else "0"
    if rank == 0:  # the reference: one process, the whole batch, rank 0's initial weights
        reference = mlp(0)
        train(reference, OPTIMIZERS[make](reference.parameters()), None)
        rec[f"{name}/reference"] = values(reference.parameters())
    local = mlp(seed=rank)  # each rank starts from different weights
    rec[f"{name}/initial"] = values(local.parameters())
    model = DDP(local, bucket_cap_mb=cap)
    rec[f"{name}/after_construction"] = values(local.parameters())
    rec[f"{name}/bucket_sizes"] = model._get_ddp_logging_data()["bucket_sizes"]
    train(model, OPTIMIZERS[make](model.parameters()), slice(rank * half, (rank + 1) * half))
    rec[f"{name}/trained"] = values(local.parameters())
    rec[f"{name}/progress_thread"] = model.reducer.progress is not None
os.environ["NUMBAGRAD_DDP_PROGRESS_THREAD"] = "0"

# overlap: when the first layer's gradients arrive (the last ones backward computes), the earlier buckets' all-reduces
# have already started
local = mlp(0)
first_layer = local[0]
started: list = []
for p in (first_layer.weight, first_layer.bias):  # registered before DDP's hooks, so these run first
    p.register_post_accumulate_grad_hook(lambda p: started.append(model.reducer.next_bucket))
model = DDP(local, bucket_cap_mb=0.0005)
loss_fn(model(X[:half]), Y[:half]).backward()
rec["overlap/buckets"] = len(model._get_ddp_logging_data()["bucket_sizes"])
rec["overlap/started_when_first_layer_grads_arrive"] = started

# no_sync: two local backwards, then a synchronised one averages the accumulated gradients
plain = mlp(0)
model = DDP(mlp(0))
mine = [(X[start : start + 8], Y[start : start + 8]) for start in range(rank * 24, rank * 24 + 24, 8)]
with model.no_sync():
    for x, y in mine[:2]:
        loss_fn(model(x), y).backward()
rec["no_sync/inside"] = grads(model.parameters())
for x, y in mine[:2]:
    loss_fn(plain(x), y).backward()
rec["no_sync/local_reference_inside"] = grads(plain.parameters())
loss_fn(model(mine[2][0]), mine[2][1]).backward()
rec["no_sync/after"] = grads(model.parameters())
loss_fn(plain(mine[2][0]), mine[2][1]).backward()
rec["no_sync/local_reference_all"] = grads(plain.parameters())


class Branchy(nn.Module):
    """``a`` always runs, ``b`` only when asked, ``never`` never."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.a = nn.Linear(3, 2).double()
        self.b = nn.Linear(3, 2).double()
        self.never = nn.Linear(3, 2).double()

    def forward(self, x, use_b: bool):
        out = self.a(x)
        return out + self.b(x) if use_b else out


x = X[rank * 4 : rank * 4 + 4]

# without find_unused_parameters: the next forward raises torch's error, naming the parameters
model = DDP(Branchy())
model(x, False).sum().backward()
rec.error("unused/next_forward", lambda: model(x, False))

# with it: a parameter used on rank 0 only is averaged with rank 1's zero; one used nowhere keeps grad None
model = DDP(Branchy(), find_unused_parameters=True)
model(x, rank == 0).sum().backward()
rec["find_unused/grads"] = grads(model.parameters())
plain = Branchy()
plain(x, rank == 0).sum().backward()
rec["find_unused/local_reference"] = grads(plain.parameters())
model.zero_grad()
model(x, False).sum().backward()  # a second iteration works
rec["find_unused/second_iteration_a_grad"] = model.module.a.weight.grad is not None

# a parameter marked unused (not reached from the forward's output) whose gradient then arrives
model = DDP(Branchy(), find_unused_parameters=True)
out = model(x, False)
rec.error("marked_twice", lambda: (out.sum() + model.module.b(x).sum()).backward())

# buffers: rank 0's at construction, and again before every synchronised forward
holder = nn.Linear(3, 2).double()
holder.register_buffer("running", torch.full((2,), float(rank)))
model = DDP(holder)
rec["buffers/after_construction"] = holder.running.tolist()
if rank == 1:
    holder.running.fill_(5.0)
model(X[:2]).sum().backward()
rec["buffers/after_forward"] = holder.running.tolist()

# the parameters must have the same shapes on every rank
rec.error("shape_mismatch", lambda: DDP(nn.Linear(3, 4 + rank).double()))
rec.error("count_mismatch", lambda: DDP(nn.Linear(3, 4, bias=rank == 0).double()))
rec.error("no_parameters", lambda: DDP(nn.Linear(3, 4).requires_grad_(False)))

model = DDP(nn.Sequential(nn.Linear(3, 2)))
rec["state_dict_keys"] = list(model.state_dict())
rec["load_state_dict"] = str(model.load_state_dict(model.state_dict()))

dist.destroy_process_group()
rec.save()
