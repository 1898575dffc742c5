"""``python -m numbagrad``: the three ``apply``s in one run.

1. A custom ``autograd.Function`` (``Function.apply``): its output, ``grad_fn`` and gradients.
2. A custom activation compiled by Numba from two scalar functions (``numbagrad.elementwise``).
3. A small MLP (``nn.Module``, initialised with ``Module.apply``) trained with Adam on two generated spirals,
   with a tqdm progress bar when tqdm is installed (the ``demo`` extra; plain progress lines otherwise) and the
   final accuracy. ``--plot FILE`` saves the learned decision boundary as a PNG (needs matplotlib: the ``plot``
   extra).
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


class _PlainProgress:
    """Progress as plain lines on stdout, for when tqdm is not installed: about ten lines per run."""

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs
        self.every = max(1, epochs // 10)
        self.width = len(str(epochs))

    def update(self, epoch: int, loss: float) -> None:
        if epoch % self.every == 0 or epoch == self.epochs:
            print(f"   epoch {epoch:{self.width}d}/{self.epochs}  loss {loss:.4f}", flush=True)


def _progress(epochs: int):
    """``(iterable of epochs, report(epoch, loss), close())``: tqdm's bar when tqdm is installed, else plain lines."""
    try:
        from tqdm import tqdm
    except ImportError:
        plain = _PlainProgress(epochs)
        return range(1, epochs + 1), plain.update, lambda: None
    bar = tqdm(range(1, epochs + 1), desc="training", unit="epoch")
    return bar, lambda epoch, loss: bar.set_postfix(loss=f"{loss:.4f}"), bar.close


def train(epochs: int, seed: int, batch_size: int = 64) -> tuple[MLP, np.ndarray, np.ndarray, float]:
    """Train on two spirals; return the model, the data (points, labels) and the accuracy on the whole set."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_np, y_np = two_spirals(500, rng)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    model = MLP((2, 64, 64, 2)).apply(init_weights)
    print("3. Module.apply(init_weights) on", model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    n = len(y_np)
    epochs_iter, report, close = _progress(epochs)
    try:
        for epoch in epochs_iter:
            order = rng.permutation(n)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = torch.from_numpy(order[start : start + batch_size])
                optimizer.zero_grad()
                loss = loss_fn(model(x[idx]), y[idx])
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
            report(epoch, total / n)
    finally:
        close()
    with torch.no_grad():
        predicted = model(x).argmax(dim=1)
    return model, x_np, y_np, (predicted == y).float().mean().item()


def _require_matplotlib() -> str | None:
    """None when matplotlib can be imported, else the message that tells how to get it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return (
            "--plot needs matplotlib, which is not installed: pip install 'numbagrad[plot]' (or pip install matplotlib)"
        )
    return None


def plot_decision_boundary(model: MLP, x: np.ndarray, y: np.ndarray, accuracy: float, path: str) -> str:
    """Save the model's class-1 probability over the plane, with the data on top, as a PNG; return its path."""
    import os

    from matplotlib.figure import Figure  # no pyplot: no GUI backend, works headless

    lo, hi = x.min(axis=0) - 0.1, x.max(axis=0) + 0.1
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 200), np.linspace(lo[1], hi[1], 200))
    grid = torch.from_numpy(np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32))
    with torch.no_grad():
        p1 = model(grid).softmax(dim=1)[:, 1].numpy().reshape(gx.shape)
    fig = Figure(figsize=(5, 5), dpi=100)
    ax = fig.add_subplot()
    ax.contourf(gx, gy, p1, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.6)
    ax.contour(gx, gy, p1, levels=[0.5], colors="k", linewidths=1)
    ax.scatter(x[:, 0], x[:, 1], c=y, cmap="RdBu_r", s=6, edgecolors="none")
    ax.set_title(f"numbagrad MLP on two spirals: {accuracy:.1%} accuracy")
    ax.set_aspect("equal")
    fig.savefig(path, format="png", bbox_inches="tight")
    return os.path.abspath(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numbagrad", description="Train a small MLP with a custom activation on two spirals."
    )
    parser.add_argument("--epochs", type=int, default=60, help="passes over the data set (default: 60)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for data and weights (default: 0)")
    parser.add_argument(
        "--plot", metavar="FILE", help="save the learned decision boundary as a PNG (needs matplotlib: numbagrad[plot])"
    )
    args = parser.parse_args(argv)
    if args.plot is not None and (missing := _require_matplotlib()) is not None:
        parser.error(missing)  # before training, so nobody waits for a plot that cannot be drawn
    start = time.perf_counter()
    showcase()
    model, x, y, accuracy = train(args.epochs, args.seed)
    print(f"final accuracy: {accuracy:.1%} ({time.perf_counter() - start:.1f} s)")
    if args.plot is not None:
        print(f"decision boundary saved to {plot_decision_boundary(model, x, y, accuracy, args.plot)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
