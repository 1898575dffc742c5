"""``python -m numbagrad``: the three ``apply``s in one run.

1. A custom ``autograd.Function`` (``Function.apply``): its output, ``grad_fn`` and gradients.
2. A custom activation compiled by Numba from two scalar functions (``numbagrad.elementwise``).
3. A small MLP (``nn.Module``, initialised with ``Module.apply``) trained with Adam on two generated spirals,
   with a tqdm progress bar (the ``demo`` extra) and the final accuracy.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import numbagrad as torch
from numbagrad import nn


class Cube(torch.autograd.Function):
    """``x ** 3`` with a hand-written backward, for the Function showcase."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad_output


def swish(x):
    return x / (1.0 + math.exp(-x))


def swish_grad(g, out, x):
    # d/dx x*sigmoid(x) = out + sigmoid(x) * (1 - out), fused with the incoming gradient g
    return g * (out + (1.0 - out) / (1.0 + math.exp(-x)))


#: The custom activation: forward and gradient kernels generated from the scalar functions above.
activation = torch.elementwise(swish, grads=[swish_grad], name="Swish")


class MLP(nn.Module):
    def __init__(self, sizes: tuple[int, ...]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = activation(layer(x))
        return self.layers[-1](x)


def init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        nn.init.zeros_(module.bias)


def two_spirals(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points per class on two interleaved spirals, with a little noise."""
    t = np.sqrt(rng.uniform(0, 1, n)) * 3 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * np.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0, 0.02, (2 * n, 2))
    y = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    return x.astype(np.float32), y


def showcase() -> None:
    print("1. Function.apply: a custom autograd.Function")
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = Cube.apply(x)
    print("   Cube.apply(x) =", y)
    y.sum().backward()
    print("   x.grad        =", x.grad, " (3 * x ** 2)")
    z = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    out = activation(z)
    print("2. numbagrad.elementwise: swish(z) =", out)
    out.sum().backward()
    print("   z.grad        =", z.grad)


def train(epochs: int, seed: int, batch_size: int = 64) -> float:
    """Train on two spirals; return the accuracy on the whole data set."""
    from tqdm import tqdm

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_np, y_np = two_spirals(500, rng)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    model = MLP((2, 64, 64, 2)).apply(init_weights)
    print("3. Module.apply(init_weights) on", model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    n = len(y_np)
    with tqdm(range(epochs), desc="training", unit="epoch") as bar:
        for _ in bar:
            order = rng.permutation(n)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = torch.from_numpy(order[start : start + batch_size])
                optimizer.zero_grad()
                loss = loss_fn(model(x[idx]), y[idx])
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
            bar.set_postfix(loss=f"{total / n:.4f}")
    with torch.no_grad():
        predicted = model(x).argmax(dim=1)
    return (predicted == y).float().mean().item()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numbagrad", description="Train a small MLP with a custom activation on two spirals."
    )
    parser.add_argument("--epochs", type=int, default=60, help="passes over the data set (default: 60)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for data and weights (default: 0)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    showcase()
    accuracy = train(args.epochs, args.seed)
    print(f"final accuracy: {accuracy:.1%} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
