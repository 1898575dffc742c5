"""Whole training steps of real model shapes, numbagrad against torch, side by side in one process.

    python benchmarks/bench_models.py                 # every model, 1 and 2 threads, eager and compiled
    python benchmarks/bench_models.py --models gpt,mlp --threads 1 --quick
    python benchmarks/bench_models.py --memory --threads 1   # peak resident memory of the steps instead
    python benchmarks/bench_models.py --memory-trace cnn     # where numbagrad's step memory goes, by line
    python benchmarks/bench_models.py --floor                # the time a step's products alone need, 1 thread

Each model is written once for either library (``lib`` is ``numbagrad`` or ``torch``); numbagrad's copy loads
torch's initial ``state_dict``, both see the same batches, and the first step's losses are compared (a whole-model
correctness check: a mismatch is printed). A step is zero_grad, forward, loss, backward, (clip,) optimizer step.
Timings alternate between the libraries batch by batch (the machine is shared: both see the same load), in
``ROUNDS`` rounds; the table gives the median step times and the median of the rounds' ratios with their range.
Thread counts are fixed per child process (``NUMBA_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``,
``torch.set_num_threads``). "compiled" runs numbagrad's step with the model wrapped in ``numbagrad.compile``
(torch stays eager in that column).

The models, with the sizes the issues fix:
- gpt: a char-level GPT (nanoGPT): 4 layers, 4 heads, n_embd 128, block 64, batch 12, vocab 65, tied embedding
  and head, attention through ``F.scaled_dot_product_attention``, AdamW with two param groups, ``clip_grad_norm_``.
- mlp: makemore's MLP: embedding 10, context 3, hidden 200, batch 32, SGD.
- wavenet: makemore's hierarchical WaveNet-style MLP with BatchNorm1d: embedding 24, hidden 128, context 8, batch
  32, SGD.
- vae: the PyTorch example's VAE, 784-400-20, batch 64, Adam.
- cnn: the PyTorch MNIST example's CNN (two convs, max-pool, dropout in eval mode, two linears), batch 64.
- lstm: a 2-layer LSTM language model, hidden 256, seq 35, batch 20, vocab 1000, SGD with clipping.
- seq2seq: a GRU encoder-decoder with dot-product attention, vocab 50, hidden 64, batch 16, Adam.
- dcgan: a DCGAN-style generator (transposed convolutions) and discriminator on 16x16 images, batch 16, Adam.
- unet: a two-level U-Net with bilinear upsampling (align_corners=True) and skip connections, 32x32, batch 4.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import interleaved_medians, settle_time  # noqa: E402

ROUNDS = 3


def _load_from_torch(ours, theirs) -> None:
    import numbagrad

    ours.load_state_dict({k: numbagrad.tensor(v.detach().cpu().numpy()) for k, v in theirs.state_dict().items()})


# --- the models, each written once for either library -----------------------------------------------------------
def gpt(lib, rng, n_layer=4, n_embd=128, block=64, batch=12):
    """The sizes are keywords so that gpu_check.py can run a tiny one under Numba's simulator."""
    nn, F = lib.nn, lib.nn.functional
    n_head, vocab = 4, 65

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q = q.view(b, t, n_head, c // n_head).transpose(1, 2)
            k = k.view(b, t, n_head, c // n_head).transpose(1, 2)
            v = v.view(b, t, n_head, c // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(n_embd), Attention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            pos = lib.arange(0, idx.size(1), dtype=lib.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def optimizer(model):
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip
        return lib.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95))

    def batch_data():
        x = rng.integers(0, vocab, (batch, block))
        return x, np.roll(x, -1, axis=1)

    return GPT, optimizer, batch_data, 1.0


def mlp(lib, rng):
    nn, F = lib.nn, lib.nn.functional
    vocab, context, emb, hidden, batch = 27, 3, 10, 200, 32

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.Embedding(vocab, emb)
            self.hidden = nn.Linear(context * emb, hidden)
            self.out = nn.Linear(hidden, vocab)

        def forward(self, x, y):
            h = lib.tanh(self.hidden(self.C(x).view(x.shape[0], -1)))
            return F.cross_entropy(self.out(h), y)

    def batch_data():
        return rng.integers(0, vocab, (batch, context)), rng.integers(0, vocab, (batch,))

    return MLP, (lambda model: lib.optim.SGD(model.parameters(), lr=0.1)), batch_data, None


def wavenet(lib, rng):
    nn, F = lib.nn, lib.nn.functional
    vocab, context, emb, hidden, batch = 27, 8, 24, 128, 32

    class Level(nn.Module):
        """FlattenConsecutive(2) -> Linear(no bias) -> BatchNorm1d over the channels -> Tanh."""

        def __init__(self, fan_in):
            super().__init__()
            self.linear = nn.Linear(2 * fan_in, hidden, bias=False)
            self.bn = nn.BatchNorm1d(hidden)

        def forward(self, x):
            b, t, c = x.shape
            x = self.linear(x.reshape(b, t // 2, 2 * c))
            x = self.bn(x.transpose(1, 2)).transpose(1, 2) if x.shape[1] > 1 else self.bn(x.squeeze(1)).unsqueeze(1)
            return lib.tanh(x)

    class WaveNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.Embedding(vocab, emb)
            self.levels = nn.Sequential(Level(emb), Level(hidden), Level(hidden))
            self.out = nn.Linear(hidden, vocab)

        def forward(self, x, y):
            return F.cross_entropy(self.out(self.levels(self.C(x)).squeeze(1)), y)

    def batch_data():
        return rng.integers(0, vocab, (batch, context)), rng.integers(0, vocab, (batch,))

    return WaveNet, (lambda model: lib.optim.SGD(model.parameters(), lr=0.1)), batch_data, None


def vae(lib, rng):
    nn, F = lib.nn, lib.nn.functional
    batch = 64

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc21, self.fc22 = nn.Linear(784, 400), nn.Linear(400, 20), nn.Linear(400, 20)
            self.fc3, self.fc4 = nn.Linear(20, 400), nn.Linear(400, 784)

        def forward(self, x, eps):
            h1 = F.relu(self.fc1(x))
            mu, logvar = self.fc21(h1), self.fc22(h1)
            z = mu + eps * lib.exp(0.5 * logvar)
            recon = lib.sigmoid(self.fc4(F.relu(self.fc3(z))))
            bce = F.binary_cross_entropy(recon, x, reduction="sum")
            return bce - 0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())

    def batch_data():
        return rng.uniform(0, 1, (batch, 784)).astype(np.float32), rng.standard_normal((batch, 20)).astype(np.float32)

    return VAE, (lambda model: lib.optim.Adam(model.parameters(), lr=1e-3)), batch_data, None


def cnn(lib, rng, batch=64, image=28, channels=(32, 64), hidden=128):
    """``image`` is the side of the square input (28 for MNIST); gpu_check.py runs a tiny one under the simulator."""
    nn, F = lib.nn, lib.nn.functional
    flat = channels[1] * ((image - 4) // 2) ** 2

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, channels[0], 3, 1), nn.Conv2d(channels[0], channels[1], 3, 1)
            self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
            self.fc1, self.fc2 = nn.Linear(flat, hidden), nn.Linear(hidden, 10)

        def forward(self, x, y):
            x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
            x = self.dropout1(lib.flatten(x, 1))
            x = self.fc2(self.dropout2(F.relu(self.fc1(x))))
            return F.nll_loss(F.log_softmax(x, dim=1), y)

    def batch_data():
        return rng.standard_normal((batch, 1, image, image)).astype(np.float32), rng.integers(0, 10, (batch,))

    return Net, (lambda model: lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)), batch_data, None


def lstm(lib, rng):
    nn, F = lib.nn, lib.nn.functional
    vocab, emb, hidden, seq, batch = 1000, 256, 256, 35, 20

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, emb)
            self.rnn = nn.LSTM(emb, hidden, 2, dropout=0.0)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, x, y):
            out, _ = self.rnn(self.encoder(x))
            return F.cross_entropy(self.decoder(out).view(-1, vocab), y.view(-1))

    def batch_data():
        x = rng.integers(0, vocab, (seq, batch))
        return x, np.roll(x, -1, axis=0)

    return RNNModel, (lambda model: lib.optim.SGD(model.parameters(), lr=20.0)), batch_data, 0.25


def seq2seq(lib, rng):
    nn, F = lib.nn, lib.nn.functional
    vocab, emb, hidden, src_len, tgt_len, batch = 50, 32, 64, 10, 9, 16

    class Seq2Seq(nn.Module):
        """A GRU encoder and a GRU decoder with dot-product attention over the encoder's states."""

        def __init__(self):
            super().__init__()
            self.src_emb, self.tgt_emb = nn.Embedding(vocab, emb), nn.Embedding(vocab, emb)
            self.encoder = nn.GRU(emb, hidden, batch_first=True)
            self.decoder = nn.GRU(emb, hidden, batch_first=True)
            self.combine = nn.Linear(2 * hidden, hidden)
            self.out = nn.Linear(hidden, vocab)

        def forward(self, src, tgt_in, tgt_out):
            enc, h = self.encoder(self.src_emb(src))
            dec, _ = self.decoder(self.tgt_emb(tgt_in), h)
            weights = F.softmax(dec @ enc.transpose(1, 2), dim=-1)
            mixed = lib.tanh(self.combine(lib.cat([dec, weights @ enc], dim=-1)))
            return F.cross_entropy(self.out(mixed).reshape(-1, vocab), tgt_out.reshape(-1))

    def batch_data():
        tgt = rng.integers(0, vocab, (batch, tgt_len + 1))
        return rng.integers(0, vocab, (batch, src_len)), tgt[:, :-1], tgt[:, 1:]

    return Seq2Seq, (lambda model: lib.optim.Adam(model.parameters(), lr=1e-3)), batch_data, 1.0


def dcgan(lib, rng):
    nn, F = lib.nn, lib.nn.functional
    nz, batch = 16, 16

    class GAN(nn.Module):
        """A DCGAN-style generator (transposed convolutions) and discriminator on 16x16 images; the step's loss is
        the discriminator's on real and generated images plus the generator's."""

        def __init__(self):
            super().__init__()
            self.generator = nn.Sequential(
                nn.ConvTranspose2d(nz, 32, 4, 1, 0, bias=False), nn.BatchNorm2d(32), nn.ReLU(True),
                nn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
                nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False), nn.Tanh(),
            )  # fmt: skip
            self.discriminator = nn.Sequential(
                nn.Conv2d(1, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(32, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
            )  # fmt: skip

        def forward(self, real, noise):
            fake = self.generator(noise)
            ones, zeros = lib.ones(real.shape[0]), lib.zeros(real.shape[0])
            d_real = F.binary_cross_entropy(self.discriminator(real).view(-1), ones)
            d_fake = F.binary_cross_entropy(self.discriminator(fake.detach()).view(-1), zeros)
            g_loss = F.binary_cross_entropy(self.discriminator(fake).view(-1), ones)
            return d_real + d_fake + g_loss

    def batch_data():
        real = rng.uniform(-1, 1, (batch, 1, 16, 16)).astype(np.float32)
        return real, rng.standard_normal((batch, nz, 1, 1)).astype(np.float32)

    return GAN, (lambda model: lib.optim.Adam(model.parameters(), lr=2e-4, betas=(0.5, 0.999))), batch_data, None


def unet(lib, rng):
    nn, F = lib.nn, lib.nn.functional
    batch, size, classes = 4, 32, 3

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        """A two-level U-Net: max-pool down, bilinear upsampling (align_corners=True) back, skip concatenation."""

        def __init__(self):
            super().__init__()
            self.down1, self.down2, self.bottom = block(3, 8), block(8, 16), block(16, 32)
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.dec2, self.dec1 = block(32 + 16, 16), block(16 + 8, 8)
            self.head = nn.Conv2d(8, classes, 1)

        def forward(self, x, target):
            d1 = self.down1(x)
            d2 = self.down2(F.max_pool2d(d1, 2))
            b = self.bottom(F.max_pool2d(d2, 2))
            u2 = self.dec2(lib.cat([self.up(b), d2], dim=1))
            u1 = self.dec1(lib.cat([self.up(u2), d1], dim=1))
            return F.cross_entropy(self.head(u1), target)

    def batch_data():
        x = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
        return x, rng.integers(0, classes, (batch, size, size))

    return UNet, (lambda model: lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)), batch_data, None


MODELS = {"gpt": gpt, "mlp": mlp, "wavenet": wavenet, "vae": vae, "cnn": cnn, "lstm": lstm, "seq2seq": seq2seq,
          "dcgan": dcgan, "unet": unet}  # fmt: skip


def _available(name: str) -> str | None:
    """Why a model cannot run here yet (a missing module), or None."""
    import numbagrad

    needs = {"lstm": "LSTM", "seq2seq": "GRU", "dcgan": "ConvTranspose2d", "unet": "Upsample"}
    if name in needs and not hasattr(numbagrad.nn, needs[name]):
        return f"numbagrad.nn.{needs[name]} does not exist yet"
    return None


def _stepper(lib, model, optimizer, batches, clip):
    data = [tuple(lib.tensor(a) for a in b) for b in batches]
    state = {"i": 0}
    params = list(model.parameters())

    def step():
        args = data[state["i"] % len(data)]
        state["i"] += 1
        optimizer.zero_grad()
        loss = model(*args)
        loss.backward()
        if clip:
            lib.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return loss

    return step


def measure(names: list[str], threads: int, compiled: bool) -> dict:
    """In a child process with its thread counts set: the model -> timings, ratios and the first-step losses."""
    import torch

    import numbagrad

    torch.set_num_threads(threads)
    results = {}
    for name in names:
        why = _available(name)
        if why:
            results[name] = {"skipped": why}
            continue
        rng = np.random.default_rng(0)
        torch.manual_seed(0)
        numbagrad.manual_seed(0)
        t_cls, t_opt, t_batch, clip = MODELS[name](torch, rng)
        n_cls, n_opt, _, _ = MODELS[name](numbagrad, rng)
        batches = [t_batch() for _ in range(4)]
        theirs, ours = t_cls(), n_cls()
        _load_from_torch(ours, theirs)
        if name == "cnn":  # the example's dropout, switched off so both libraries compute the same step
            ours.eval(), theirs.eval()
        model_ours = numbagrad.compile(ours) if compiled else ours
        step_ours = _stepper(numbagrad, model_ours, n_opt(ours), batches, clip)
        step_theirs = _stepper(torch, theirs, t_opt(theirs), batches, clip)
        try:
            first = (float(step_ours().item()), float(step_theirs().item()))
        except Exception as error:  # a model numbagrad cannot run yet (in this column) is reported, not fatal
            results[name] = {"skipped": f"{type(error).__name__}: {error}"[:50]}
            continue
        settle = settle_time(threads)
        rounds = [
            interleaved_medians([step_ours, step_theirs], min_time=1.0, repeats=5, settle=settle) for _ in range(ROUNDS)
        ]
        results[name] = {
            "ours": float(np.median([r[0] for r in rounds])),
            "torch": float(np.median([r[1] for r in rounds])),
            "ratios": sorted(r[0] / r[1] for r in rounds),
            "first_loss": first,
        }
    return results


def _child(names: list[str], threads: int, compiled: bool) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    env["OMP_NUM_THREADS"] = str(threads)
    env.pop("OPENBLAS_CORETYPE", None)
    args = [sys.executable, os.path.abspath(__file__), "--child", str(threads), "--models", ",".join(names)]
    args += ["--compiled"] if compiled else []
    out = subprocess.run(args, check=True, env=env, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def table(names: list[str], thread_counts: list[int], with_compiled: bool) -> None:
    columns = [(t, False) for t in thread_counts] + ([(thread_counts[0], True)] if with_compiled else [])
    results = {col: _child(names, *col) for col in columns}
    header = f"{'model':<9}" + "".join(
        f"| {('compiled' if c else 'eager') + f', {t} thr':<16}{'ng ms':>9}{'torch ms':>10}{'ratio':>7}{'rounds':>13} "
        for t, c in columns
    )
    print(header)
    print("-" * len(header))
    for name in names:
        line = f"{name:<9}"
        for col in columns:
            r = results[col][name]
            if "skipped" in r:
                line += f"| {'skipped: ' + r['skipped']:<55} "
                continue
            ratios = r["ratios"]
            line += (f"| {'':<16}{r['ours'] * 1e3:9.2f}{r['torch'] * 1e3:10.2f}{ratios[len(ratios) // 2]:7.2f}"
                     f"{f'{ratios[0]:.2f}-{ratios[-1]:.2f}':>13} ")  # fmt: skip
        print(line)
    line = f"{'geomean':<9}"  # (of the models' median ratios: the target is on this for eager at 1 thread)
    for col in columns:
        medians = [r["ratios"][len(r["ratios"]) // 2] for r in (results[col][n] for n in names) if "ratios" in r]
        mean = math.exp(sum(math.log(m) for m in medians) / len(medians)) if medians else float("nan")
        line += f"| {f'of {len(medians)} models':<35}{mean:7.2f}{'':>13} "
    print(line)
    print("\nFirst-step losses (numbagrad, torch), from torch's initial weights and the same batch:")
    for name in names:
        r = results[columns[0]][name]
        if "first_loss" in r:
            a, b = r["first_loss"]
            flag = "" if math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5) else "   <-- MISMATCH"
            print(f"  {name:<9} {a:.6f}  {b:.6f}{flag}")
    import numba
    import torch

    print(f"\nnumba {numba.__version__}, numpy {np.__version__}, torch {torch.__version__}; ratio = numbagrad / "
          f"torch step time, the median of {ROUNDS} interleaved rounds ('rounds': their range)")  # fmt: skip


# --- the products' floor -----------------------------------------------------------------------------------------
def _torch_step(name: str, batches: int):
    """torch's training step of ``name`` over ``batches`` batches, its model from seed 0 (the cnn in eval mode, as
    ``measure`` runs it)."""
    import torch

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    cls, optimizer, batch_data, clip = MODELS[name](torch, rng)
    model = cls()
    if name == "cnn":
        model.eval()
    return _stepper(torch, model, optimizer(model), [batch_data() for _ in range(batches)], clip)


def _step_flops(name: str) -> int:
    """Floating-point operations of the products (matmul, bmm, convolution, attention) in one training step of
    ``name``, as torch's ``FlopCounterMode`` counts them. Counted with oneDNN off and attention on its math path, so
    that the LSTM's and the attention's products are counted as the matmuls they are (torch's fused kernels are not
    counted otherwise)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    step = _torch_step(name, 1)
    with torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH):
        step()
        with FlopCounterMode(display=False) as counter:
            step()
    return int(counter.get_total_flops())


def _product_rate(lib, n: int = 1024, repeats: int = 5) -> float:
    """Floating-point operations a second of ``lib``'s float32 ``(n, n) @ (n, n)`` on this thread count, the
    best of ``repeats`` (the machine's attainable rate for products, not a typical one)."""
    import time

    rng = np.random.default_rng(0)
    a, b = (lib.tensor(rng.standard_normal((n, n)).astype(np.float32)) for _ in range(2))
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def floor_table(names: list[str]) -> None:
    """For each model: its products' work per step, and the time they need at the best product rate measured
    here on one thread (numbagrad's or torch's, whichever is faster), against torch's step time. A compiled
    target below that ratio cannot be met by any implementation of the rest of the step on this machine that
    multiplies as the direct products do; a 3x3 convolution by Winograd's F(2x2, 3x3) (``winograd_kernels``)
    multiplies 16/36 as often, so the cnn's and the U-Net's floors are upper bounds."""
    import torch

    import numbagrad

    torch.set_num_threads(1)
    ours, theirs = _product_rate(numbagrad), _product_rate(torch)
    rate = max(ours, theirs)
    print(f"float32 (1024, 1024) @ (1024, 1024), 1 thread: numbagrad {ours / 1e9:.1f}, torch {theirs / 1e9:.1f} "
          f"GFLOP/s; the floor uses {rate / 1e9:.1f}\n")  # fmt: skip
    print(f"{'model':<9}{'GFLOP':>8}{'floor ms':>10}{'torch ms':>10}{'floor/torch':>13}")
    for name in names:
        flops = _step_flops(name)
        (seconds,) = interleaved_medians([_torch_step(name, 4)], min_time=1.0, repeats=5)
        print(
            f"{name:<9}{flops / 1e9:8.3f}{flops / rate * 1e3:10.2f}{seconds * 1e3:10.2f}{flops / rate / seconds:13.2f}"
        )


# --- peak memory of the steps ------------------------------------------------------------------------------------
MEMORY_WARMUP, MEMORY_STEPS = 3, 3


def _proc_status_kib(field: str) -> int:
    """A ``VmRSS``/``VmHWM`` line of /proc/self/status, in KiB (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _numpy_state(model, seed: int = 0) -> dict:
    """A state dict for ``model`` drawn from numpy, the same for either library (their modules name and shape
    their parameters alike), so that neither child needs the other library: weights uniform in +-1/sqrt(fan_in),
    biases in +-0.1; other 1-D entries (norm weights, running statistics) keep their deterministic defaults."""
    rng = np.random.default_rng(seed)
    state = {}
    for key, value in model.state_dict().items():
        array = value.detach().cpu().numpy()
        if array.dtype.kind != "f":
            continue
        if array.ndim >= 2:
            bound = 1 / math.sqrt(math.prod(array.shape[1:]))
        elif key.rsplit(".", 1)[-1].startswith("bias"):
            bound = 0.1
        else:
            continue
        state[key] = rng.uniform(-bound, bound, array.shape).astype(array.dtype)
    return state


def _release_free_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``), so that the resident size before
    the steps counts live data only: otherwise memory the warm-up steps freed stays resident, the steps reuse it and
    their peak reads as zero for either library."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the steps' peak then counts growth beyond the warm-up's pool
        pass


def _memory_model(name: str, lib) -> tuple:
    """The model (from ``_numpy_state``), its optimizer, four batches and the clipping norm, for ``lib``."""
    rng = np.random.default_rng(0)
    lib.manual_seed(0)
    make, make_optimizer, batch_data, clip = MODELS[name](lib, rng)
    batches = [batch_data() for _ in range(4)]
    model = make()
    model.load_state_dict({k: lib.tensor(v) for k, v in _numpy_state(model).items()}, strict=False)
    if name == "cnn":  # as in the timings: dropout off
        model.eval()
    return model, make_optimizer(model), batches, clip


def trace_memory(name: str, lines: int = 8) -> None:
    """Where numbagrad's step memory goes (numpy's allocations, as tracemalloc sees them; Numba's own are not
    traced): the peak of each phase of one step after warm-up, and the source lines holding the most memory once
    the forward has run and once the backward has (the loss still referenced, as in a training loop's step)."""
    import gc
    import tracemalloc

    import numbagrad as lib

    model, optimizer, batches, clip = _memory_model(name, lib)
    data = [tuple(lib.tensor(a) for a in b) for b in batches]
    params = list(model.parameters())
    snapshots = {}

    def step(args, traced: bool):
        def mark(phase: str) -> None:
            if traced:
                now, peak = tracemalloc.get_traced_memory()
                print(f"{phase:<10} live {(now - start) / 2**20:+8.2f} MiB   peak {(peak - start) / 2**20:+8.2f} MiB")
                snapshots[phase] = tracemalloc.take_snapshot()
                tracemalloc.reset_peak()

        optimizer.zero_grad()
        start = tracemalloc.get_traced_memory()[0] if traced else 0
        loss = model(*args)
        mark("forward")
        loss.backward()
        mark("backward")
        if clip:
            lib.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        mark("optimizer")

    for i in range(MEMORY_WARMUP):
        step(data[i % len(data)], False)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    tracemalloc.reset_peak()
    print(f"{name}: one numbagrad step after {MEMORY_WARMUP} warm-up steps, relative to the memory before it")
    step(data[MEMORY_WARMUP % len(data)], True)
    tracemalloc.stop()
    for phase in ("forward", "backward"):
        print(f"\nlive after the {phase}, by line:")
        for stat in snapshots[phase].compare_to(before, "lineno")[:lines]:
            if stat.size_diff >= 2**14:  # (the rest is bookkeeping)
                print(f"  {stat.size_diff / 2**20:8.2f} MiB in {stat.count_diff:4d} blocks  {stat.traceback}")


def measure_memory(name: str, library: str) -> dict:
    """In a fresh child process: build ``name`` with ``library`` alone (numbagrad's child never imports torch), run
    ``MEMORY_WARMUP`` steps (compilation, optimizer state, allocator pools), then ``MEMORY_STEPS`` steps with the
    resident high-water mark reset before them (``/proc/self/clear_refs``); the steps' peak is that mark minus the
    resident size just before them (the free heap released first). Sizes in KiB."""
    import gc

    if library == "torch":
        import torch as lib
    else:
        import numbagrad as lib
    why = _available(name) if library == "numbagrad" else None
    if why:
        return {"skipped": why}
    model, optimizer, batches, clip = _memory_model(name, lib)
    step = _stepper(lib, model, optimizer, batches, clip)
    first = float(step().item())
    for _ in range(MEMORY_WARMUP - 1):
        step()
    gc.collect()
    _release_free_heap()
    peak_before = _proc_status_kib("VmHWM")
    rss_before = _proc_status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident size
    for _ in range(MEMORY_STEPS):
        step()
    peak = _proc_status_kib("VmHWM")
    if library == "numbagrad" and "torch" in sys.modules:
        raise RuntimeError("numbagrad's memory child imported torch")
    return {"step": peak - rss_before, "process": max(peak_before, peak), "rss": rss_before, "first_loss": first}


def _memory_child(name: str, library: str, threads: int) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    env["OMP_NUM_THREADS"] = str(threads)
    args = [sys.executable, os.path.abspath(__file__), "--memory-child", library, "--models", name]
    out = subprocess.run(args, env=env, capture_output=True, text=True)
    if out.returncode:
        return {"skipped": (out.stderr.strip().splitlines() or ["failed"])[-1][:60]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_table(names: list[str], threads: int) -> dict:
    """Each model's step peak and whole-process peak, numbagrad against torch, each from its own fresh process."""
    results = {name: {lib: _memory_child(name, lib, threads) for lib in ("numbagrad", "torch")} for name in names}
    header = (f"{'model':<9}{'ng step MiB':>12}{'torch step':>11}{'ratio':>7}  |{'ng process MiB':>15}"
              f"{'torch process':>14}{'ratio':>7}  |{'ng RSS before':>14}{'torch RSS':>10}  first losses")  # fmt: skip
    print(header)
    print("-" * len(header))
    for name in names:
        ours, theirs = results[name]["numbagrad"], results[name]["torch"]
        if "skipped" in ours or "skipped" in theirs:
            print(f"{name:<9}skipped: {ours.get('skipped') or theirs.get('skipped')}")
            continue
        mib = {k: (ours[k] / 1024, theirs[k] / 1024) for k in ("step", "process", "rss")}
        a, b = ours["first_loss"], theirs["first_loss"]
        flag = "" if math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5) else "  <-- MISMATCH"
        print(f"{name:<9}{mib['step'][0]:12.2f}{mib['step'][1]:11.2f}{mib['step'][0] / max(mib['step'][1], 1e-3):7.2f}"
              f"  |{mib['process'][0]:15.1f}{mib['process'][1]:14.1f}{mib['process'][0] / mib['process'][1]:7.2f}"
              f"  |{mib['rss'][0]:14.1f}{mib['rss'][1]:10.1f}  {a:.5f} {b:.5f}{flag}")  # fmt: skip
    print(f"\nstep = the peak resident size during {MEMORY_STEPS} steps (after {MEMORY_WARMUP} warm-up steps) minus "
          f"the resident size before them; process = the whole process's peak; {threads} thread(s), a fresh process "
          "per model and library, each initialised from the same numpy state")  # fmt: skip
    return results


class ModelStepMemory:
    """asv: the peak resident memory of a numbagrad training step of each model, from a fresh process (MiB)."""

    params = list(MODELS)
    param_names = ["model"]
    unit = "MiB"
    timeout = 600

    def track_step_peak(self, name: str) -> float:
        result = _memory_child(name, "numbagrad", 1)
        if "skipped" in result:
            raise NotImplementedError(result["skipped"])
        return result["step"] / 1024

    def track_process_peak(self, name: str) -> float:
        result = _memory_child(name, "numbagrad", 1)
        if "skipped" in result:
            raise NotImplementedError(result["skipped"])
        return result["process"] / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--quick", action="store_true", help="one thread count, no compiled column")
    parser.add_argument("--no-compiled", action="store_true")
    parser.add_argument("--floor", action="store_true", help="the products' time at the best rate measured, 1 thread")
    parser.add_argument("--floor-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", type=int)
    parser.add_argument("--compiled", action="store_true")
    parser.add_argument("--memory", action="store_true", help="peak resident memory of the steps, not their times")
    parser.add_argument("--memory-child", choices=["numbagrad", "torch"])
    parser.add_argument("--memory-trace", metavar="MODEL", help="where numbagrad's step memory goes (tracemalloc)")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    if args.floor_child:
        floor_table(names)
        return
    if args.floor:  # a child with one thread for torch, numpy's OpenBLAS and Numba
        env = dict(os.environ, NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        env.pop("OPENBLAS_CORETYPE", None)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--floor-child", "--models", args.models], env=env)
        return
    if args.memory_child:
        print(json.dumps(measure_memory(names[0], args.memory_child)))
        return
    if args.memory_trace:
        trace_memory(args.memory_trace)
        return
    if args.memory:
        memory_table(names, int(args.threads.split(",")[0]))
        return
    if args.child is not None:
        print(json.dumps(measure(names, args.child, args.compiled)))
        return
    threads = [int(t) for t in args.threads.split(",")]
    if args.quick:
        threads = threads[:1]
    table(names, threads, not (args.quick or args.no_compiled))


if __name__ == "__main__":
    main()
