"""One training step of a 2-layer LSTM language model, numbagrad vs torch, in one process on one thread.

The model is the word-level LM of torch's examples at a small size: ``Embedding(1000, 256)``, ``LSTM(256, 256,
num_layers=2)``, ``Linear(256, 1000)``, a batch of 20 sequences of 35 tokens, cross-entropy over every position,
backward and an SGD step. Both libraries start from the same weights and the same tokens. The steps of the two
libraries alternate (so both see the same machine load); the script prints each one's median step time and the
ratio numbagrad / torch.

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_rnn.py [--steps N]

The thread variables are set here too when absent (they must be set before numpy, numba and torch load).
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # one thread each, set before numba, BLAS and torch start (not when merely imported)
    for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

VOCAB, HIDDEN, LAYERS, SEQ, BATCH = 1000, 256, 2, 35, 20


def make_step(lib, state: dict | None = None):
    """A closure running one training step of the LM in ``lib`` (numbagrad or torch); its loss comes back.

    ``state`` (a dict of numpy arrays by parameter name) gives both libraries the same weights."""
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, HIDDEN)
            self.lstm = nn.LSTM(HIDDEN, HIDDEN, LAYERS)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, tokens):
            out, _ = self.lstm(self.embed(tokens))
            return self.head(out)

    model = LM()
    if state is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    rng = np.random.default_rng(0)
    tokens = lib.tensor(rng.integers(0, VOCAB, (SEQ, BATCH)))
    targets = lib.tensor(rng.integers(0, VOCAB, (SEQ * BATCH,)))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> float:
        optimizer.zero_grad()
        loss = loss_fn(model(tokens).reshape(SEQ * BATCH, VOCAB), targets)
        loss.backward()
        optimizer.step()
        return float(loss.item())

    return model, step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps per library (after 2 warm-up steps)")
    args = parser.parse_args()

    import torch

    import numbagrad

    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch_model, torch_step = make_step(torch)
    state = {k: v.detach().numpy().copy() for k, v in torch_model.state_dict().items()}
    _, ours_step = make_step(numbagrad, state)
    first = (ours_step(), torch_step())
    print(f"first step's loss: numbagrad {first[0]:.6f}, torch {first[1]:.6f}")
    ours_step(), torch_step()
    times: dict[str, list[float]] = {"numbagrad": [], "torch": []}
    for _ in range(args.steps):
        for name, step in (("numbagrad", ours_step), ("torch", torch_step)):
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    ours, theirs = statistics.median(times["numbagrad"]), statistics.median(times["torch"])
    print(
        f"2-layer LSTM LM step (hidden {HIDDEN}, seq {SEQ}, batch {BATCH}, vocab {VOCAB}, 1 thread): "
        f"numbagrad {ours * 1e3:.1f} ms, torch {theirs * 1e3:.1f} ms, ratio {ours / theirs:.2f}"
    )


if __name__ == "__main__":
    main()
