"""Train the demo's MLP (``python -m numbagrad``) on two spirals, data-parallel across MPI ranks.

    mpiexec -n 2 python examples/ddp_spirals.py
    python -m numbagrad.distributed.run --nproc 2 examples/ddp_spirals.py --epochs 30

Every rank builds the same data set and the same model (DistributedDataParallel copies rank 0's initial weights
to the others). A ``DistributedSampler`` gives each rank its own shard of each epoch's shuffled order (the same
order on every rank, seeded and advanced with ``set_epoch``). Each rank's batch is the demo's batch divided among
the ranks, and DDP averages the gradients, so the ranks take the demo's optimisation steps together and keep equal
weights.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import numbagrad as torch
import numbagrad.distributed as dist
from numbagrad import nn
from numbagrad.__main__ import MLP, init_weights, two_spirals
from numbagrad.nn.parallel import DistributedDataParallel
from numbagrad.utils.data import DataLoader, TensorDataset
from numbagrad.utils.data.distributed import DistributedSampler


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description="Data-parallel training of the demo's MLP on two spirals.")
    parser.add_argument("--epochs", type=int, default=60, help="passes over the data set (default: 60)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for data and order (default: 0)")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch, split among the ranks")
    args = parser.parse_args(argv)

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(args.seed)  # the same data and epoch orders on every rank
    x_np, y_np = two_spirals(500, rng)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    torch.manual_seed(args.seed + rank)  # different initial weights per rank: DDP replaces them with rank 0's
    model = DistributedDataParallel(MLP((2, 64, 64, 2)).apply(init_weights))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    sampler = DistributedSampler(TensorDataset(x, y), seed=args.seed)  # rank and world size from the process group
    loader = DataLoader(TensorDataset(x, y), batch_size=max(1, args.batch_size // world), sampler=sampler)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffled order each epoch, the same on every rank
        total = torch.zeros(2, dtype=torch.float64)  # [sum of losses, samples], summed over the ranks below
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(yb), len(yb)], dtype=torch.float64)
        dist.all_reduce(total)
        if rank == 0 and (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1:3d}: loss {total[0].item() / total[1].item():.4f}")
    with torch.no_grad():
        accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    checksums = [None] * world
    dist.all_gather_object(checksums, [float(p.detach().double().sum().item()) for p in model.parameters()])
    if rank == 0:
        print(f"weights identical on {world} ranks: {all(c == checksums[0] for c in checksums)}")
        print(f"final accuracy: {accuracy:.1%} ({time.perf_counter() - start:.1f} s)")
    dist.destroy_process_group()
    return accuracy


if __name__ == "__main__":
    main()
