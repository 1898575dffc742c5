"""float16 through the nn primitives whose loops are Numba kernels (Numba has no float16): they compute in
float32 and give float16 results and gradients, as torch's CPU kernels do. Each of these raised Numba's
``NotImplementedError: float16`` before."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad

rng = np.random.default_rng(0)
IMAGES = rng.standard_normal((2, 3, 8, 8)).astype(np.float16)
SEQUENCES = rng.standard_normal((2, 3, 16)).astype(np.float16)
LOGITS = rng.standard_normal((4, 10)).astype(np.float16)
TARGETS = np.array([1, 0, 3, 9])
KERNEL_2D = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
KERNEL_1D = rng.standard_normal((4, 3, 3)).astype(np.float16)

# name -> (input, the call written once for either library)
CASES = {
    "conv2d": (IMAGES, lambda lib, x: lib.nn.functional.conv2d(x, lib.tensor(KERNEL_2D, dtype=x.dtype), padding=1)),
    "conv1d": (SEQUENCES, lambda lib, x: lib.nn.functional.conv1d(x, lib.tensor(KERNEL_1D, dtype=x.dtype))),
    "max_pool2d": (IMAGES, lambda lib, x: lib.nn.functional.max_pool2d(x, 2)),
    "avg_pool2d": (IMAGES, lambda lib, x: lib.nn.functional.avg_pool2d(x, 3, stride=2, padding=1)),
    "adaptive_avg_pool2d": (IMAGES, lambda lib, x: lib.nn.functional.adaptive_avg_pool2d(x, 3)),
    "layer_norm": (LOGITS, lambda lib, x: lib.nn.functional.layer_norm(x, (10,))),
    "group_norm": (IMAGES, lambda lib, x: lib.nn.functional.group_norm(x, 3)),
    "cross_entropy": (LOGITS, lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor(TARGETS))),
    "cross_entropy_smoothed": (
        LOGITS,
        lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor(TARGETS), label_smoothing=0.1, reduction="none"),
    ),
}


def run(lib, name: str):
    """(result, input gradient) of one case, the backward through ``result.float().sum()``."""
    data, call = CASES[name]
    x = lib.tensor(data, requires_grad=True)
    out = call(lib, x)
    out.float().sum().backward()
    return out, x.grad


@pytest.mark.parametrize("name", CASES)
def test_float16_gives_float16_results_and_gradients(name):
    out, grad = run(numbagrad, name)
    assert out.dtype == numbagrad.float16 and grad.dtype == numbagrad.float16
    assert np.isfinite(out.detach().numpy()).all() and np.isfinite(grad.numpy()).all()


@pytest.mark.parametrize("name", CASES)
def test_float16_is_the_float32_computation_rounded(name):
    """What the float32 call gives, rounded to float16 (to a float16 rounding of each intermediate)."""
    out, grad = run(numbagrad, name)
    data, call = CASES[name]
    x = numbagrad.tensor(data.astype(np.float32), requires_grad=True)
    wide = call(numbagrad, x)
    wide.sum().backward()
    np.testing.assert_allclose(out.detach().numpy().astype(np.float32), wide.detach().numpy(), rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(grad.numpy().astype(np.float32), x.grad.numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", CASES)
def test_float16_matches_torch(name):
    torch = pytest.importorskip("torch")
    out, grad = run(numbagrad, name)
    t_out, t_grad = run(torch, name)
    assert str(out.dtype).split(".")[-1] == str(t_out.dtype).split(".")[-1]
    np.testing.assert_allclose(
        out.detach().numpy().astype(np.float32), t_out.detach().numpy().astype(np.float32), rtol=2e-2, atol=2e-2
    )
    np.testing.assert_allclose(grad.numpy().astype(np.float32), t_grad.numpy().astype(np.float32), rtol=3e-2, atol=3e-2)
