"""A char-GPT transformer block, forward+backward, numbagrad vs torch in one process on one thread.

The block is nanoGPT's: ``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``, the attention a packed ``c_attn`` Linear
split into 4 heads and ``F.scaled_dot_product_attention(..., is_causal=True)``, the MLP ``Linear(128, 512)``, GELU,
``Linear(512, 128)``. Sizes: n_embd 128, 4 heads, block 64, batch 12, float32. Both libraries get the same weights
and input; each timed call resets the gradients and runs one forward and one backward. Timings alternate between
the libraries (both see the same machine load); the report is each library's median and best time, and their
ratios.

    python benchmarks/bench_attention.py [--repeats 30]
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # one thread each, set before numba, BLAS and torch start (not when merely imported)
    for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

N_EMBD, N_HEAD, BLOCK, BATCH = 128, 4, 64, 12


def make_block(lib, weights: dict):
    """nanoGPT's ``Block`` in ``lib`` (numbagrad or torch), its parameters set from ``weights``."""
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
            self.c_proj = nn.Linear(N_EMBD, N_EMBD)

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
            q = q.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
            k = k.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
            v = v.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(N_EMBD)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(N_EMBD)
            self.fc = nn.Linear(N_EMBD, 4 * N_EMBD)
            self.gelu = nn.GELU()
            self.proj = nn.Linear(4 * N_EMBD, N_EMBD)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.proj(self.gelu(self.fc(self.ln_2(x))))

    block = Block()
    if not weights:
        weights.update({name: p.detach().numpy().copy() for name, p in block.named_parameters()})
    block.load_state_dict({name: lib.tensor(w) for name, w in weights.items()})
    return block


def make_step(lib, weights: dict, x: np.ndarray, g: np.ndarray):
    """One training step's forward and backward of the block (gradients reset to None first)."""
    block = make_block(lib, weights)
    params = list(block.parameters())
    inp, grad = lib.tensor(x, requires_grad=True), lib.tensor(g)

    def step():
        for p in params:
            p.grad = None
        inp.grad = None
        block(inp).backward(grad)

    return step, block, inp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    import torch

    import numbagrad

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, BLOCK, N_EMBD)).astype(np.float32)
    g = rng.standard_normal((BATCH, BLOCK, N_EMBD)).astype(np.float32)
    weights: dict = {}
    torch_step, torch_block, torch_x = make_step(torch, weights, x, g)
    ours_step, ours_block, ours_x = make_step(numbagrad, weights, x, g)
    torch_step()
    ours_step()  # compiles (or loads) the kernels
    np.testing.assert_allclose(ours_x.grad.numpy(), torch_x.grad.numpy(), rtol=1e-3, atol=1e-4)
    times: dict = {"numbagrad": [], "torch": []}
    for _ in range(args.repeats):
        for name, step in (("numbagrad", ours_step), ("torch", torch_step)):
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    print(f"char-GPT block fwd+bwd (n_embd {N_EMBD}, {N_HEAD} heads, block {BLOCK}, batch {BATCH}), 1 thread:")
    for label, stat in (("median", statistics.median), ("best", min)):  # best: the least disturbed by other load
        ours, theirs = stat(times["numbagrad"]), stat(times["torch"])
        print(f"  {label:6} numbagrad {ours * 1e3:.2f} ms   torch {theirs * 1e3:.2f} ms   ratio {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
