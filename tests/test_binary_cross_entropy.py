"""F.binary_cross_entropy against torch: values, dtypes, nodes and gradients over reductions and weights, and the
input's range check (the backend's ``all_within``), which refuses values outside [0, 1] and NaN with torch's
error."""

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import cpu
from torch_oracle import raises_like


def _pair(lib, dtype="float32", shape=(4, 8)):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, shape).astype(dtype)
    if p.size:
        p.reshape(-1)[0] = 0.0  # (the log clamped at -100)
    return lib.tensor(p, requires_grad=True), lib.tensor(rng.uniform(0, 1, shape).astype(dtype), requires_grad=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("weighted", [False, True])
def test_values_node_and_gradients_match_torch(torch, reduction, dtype, weighted):
    results = []
    for lib in (torch, numbagrad):
        p, t = _pair(lib, dtype)
        w = lib.tensor(np.linspace(0.5, 2.0, 8).astype(dtype)) if weighted else None
        out = lib.nn.functional.binary_cross_entropy(p, t, weight=w, reduction=reduction)
        out.backward(lib.ones_like(out))
        results.append((out.detach().numpy(), str(out.dtype), out.grad_fn.name(), p.grad.numpy(), t.grad.numpy()))
    theirs, ours = results
    assert ours[1].split(".")[1] == theirs[1].split(".")[1] and ours[2] == theirs[2]
    for mine, expected in zip((ours[0], ours[3], ours[4]), (theirs[0], theirs[3], theirs[4])):
        np.testing.assert_allclose(mine, expected, rtol=1e-5, atol=1e-6)


def test_no_elements_match_torch(torch):
    ours, theirs = (lib.nn.functional.binary_cross_entropy(*_pair(lib, shape=(0, 3))) for lib in (numbagrad, torch))
    assert np.isnan(ours.item()) and np.isnan(theirs.item())


@pytest.mark.parametrize("bad", [1.5, -0.25, float("nan"), float("inf")])
def test_input_outside_unit_interval_raises_torch_error(torch, bad):
    raises_like(
        torch, lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([0.5, bad]), lib.tensor([0.0, 1.0]))
    )


def test_all_within_is_what_the_tensor_ops_give():
    a = np.array([[0.0, 1.0, 0.5], [np.nan, -0.0, 1.0]], np.float32)
    for block, expected in [(a[:1], True), (a, False), (a[1:, 1:], True), (np.array([1.0000001], np.float32), False)]:
        got = cpu.all_within(block, 0, 1)
        tensor = numbagrad.tensor(block)
        assert got.shape == () and got.dtype == np.bool_
        assert bool(got) is expected is bool(((tensor >= 0) & (tensor <= 1)).all())
