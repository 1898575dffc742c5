"""``var_mean`` and ``std_mean`` against torch: 2-byte floats computed in float32 and rounded once (as ``var`` and
``std``), complex input giving a real spread beside the complex mean, and their gradients."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng

DATA = np.array([[1.0, 2.0, 4.0, 7.3], [0.1, 0.7, 3.3, 9.9], [-2.5, 0.25, 1.75, 6.0]])
ARGS = [{}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"dim": 0, "correction": 0}]


def _pair(lib, name, data, dtype, kwargs):
    x = lib.tensor(data).to(getattr(lib, dtype))
    spread, mean = getattr(lib, name)(x, **kwargs)
    return spread, mean


@pytest.mark.parametrize("kwargs", ARGS, ids=str)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_values_and_dtypes_match_torch(torch, name, dtype, kwargs):
    ours, theirs = _pair(ng, name, DATA, dtype, kwargs), _pair(torch, name, DATA, dtype, kwargs)
    for a, b in zip(ours, theirs):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        assert tuple(a.shape) == tuple(b.shape)
        tol = 1e-6 if dtype == "float32" else 0
        np.testing.assert_allclose(a.float().numpy(), b.float().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("kwargs", ARGS, ids=str)
@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_complex_input_matches_torch(torch, name, kwargs):
    data = DATA + 1j * DATA[::-1]
    ours, theirs = _pair(ng, name, data, "complex128", kwargs), _pair(torch, name, data, "complex128", kwargs)
    for a, b in zip(ours, theirs):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


@pytest.mark.parametrize("kwargs", ARGS, ids=str)
@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_gradients_match_torch(torch, name, kwargs):
    grads = []
    for lib in (ng, torch):
        x = lib.tensor(DATA, requires_grad=True)
        spread, mean = getattr(lib, name)(x, **kwargs)
        (spread * 3 + mean * mean).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)
