"""Tests generated from the op declarations (``numbagrad.ops._registry.OPS``): adding ``samples=`` to an op's
``@declare`` adds its tests.

For every sample: the op runs; a differentiable op passes ``gradcheck`` in float64; and, where torch is installed,
numbagrad and torch agree on the values, the dtype, the gradients of every float input and the printed node name.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck
from numbagrad.ops._registry import OPS, T

CASES = [
    pytest.param(decl, sample, id=f"{decl.name}-{k}") for decl in OPS.values() for k, sample in enumerate(decl.samples)
]


def _draw(spec: T, rng: np.random.Generator) -> np.ndarray:
    if spec.dtype == "bool":
        return rng.random(spec.shape) < 0.5
    if spec.dtype.startswith("int"):
        return rng.integers(0, spec.high, spec.shape).astype(spec.dtype)
    lo, hi = spec.domain
    return rng.uniform(lo, hi, spec.shape).astype(spec.dtype)


def _materialize(value, lib, arrays: list, requires_grad: bool):
    """Replace every ``T`` in a sample by a tensor of ``lib`` (numbagrad or torch) made from the next array."""
    if isinstance(value, T):
        data = arrays.pop(0)
        t = lib.tensor(data)
        if requires_grad and data.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    if isinstance(value, list):
        return [_materialize(v, lib, arrays, requires_grad) for v in value]
    if isinstance(value, tuple):
        return tuple(_materialize(v, lib, arrays, requires_grad) for v in value)
    return value


def _specs(value) -> list:
    if isinstance(value, T):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _specs(v)]
    return []


def _arrays(sample) -> list:
    rng = np.random.default_rng(0)
    return [_draw(spec, rng) for spec in _specs((sample.args, tuple(sample.kwargs.values())))]


def _call(decl, lib, sample, requires_grad: bool):
    arrays = _arrays(sample)
    args = _materialize(sample.args, lib, arrays, requires_grad)
    kwargs = {k: _materialize(v, lib, arrays, requires_grad) for k, v in sample.kwargs.items()}
    name = decl.torch_name or decl.name
    if lib is numbagrad:
        return decl.function(*args, **kwargs), args, kwargs
    if not hasattr(lib, name):  # a method-only op in torch (Tensor.expand)
        return getattr(args[0], name)(*args[1:], **kwargs), args, kwargs
    return getattr(lib, name)(*args, **kwargs), args, kwargs


def _leaves(value) -> list:
    if hasattr(value, "requires_grad") and hasattr(value, "grad_fn"):
        return [value] if value.requires_grad and value.grad_fn is None else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _leaves(v)]
    return []


def _tensors(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return [out] if hasattr(out, "grad_fn") else []


@pytest.mark.parametrize(("decl", "sample"), CASES)
def test_declared_op_passes_gradcheck(decl, sample):
    out, args, kwargs = _call(decl, numbagrad, sample, requires_grad=decl.differentiable)
    inputs = _leaves((args, tuple(kwargs.values())))
    if not decl.differentiable or not inputs:
        assert _tensors(out), f"{decl.name} returned no tensor"
        return

    def fn(*leaves):
        replace = dict(zip(map(id, inputs), leaves))
        a = _swap(args, replace)
        k = {key: _swap(v, replace) for key, v in kwargs.items()}
        result = decl.function(*a, **k)
        return tuple(t for t in _tensors(result) if t.is_floating_point())

    assert gradcheck(fn, tuple(inputs))


def _swap(value, replace: dict):
    if id(value) in replace:
        return replace[id(value)]
    if isinstance(value, list):
        return [_swap(v, replace) for v in value]
    if isinstance(value, tuple):
        return tuple(_swap(v, replace) for v in value)
    return value


@pytest.mark.torch
@pytest.mark.parametrize(("decl", "sample"), CASES)
def test_declared_op_matches_torch(decl, sample):
    torch = pytest.importorskip("torch")
    ours, our_args, our_kwargs = _call(decl, numbagrad, sample, requires_grad=decl.differentiable)
    theirs, their_args, their_kwargs = _call(decl, torch, sample, requires_grad=decl.differentiable)
    our_out, their_out = _tensors(ours), _tensors(theirs)
    assert len(our_out) == len(their_out)
    for a, b in zip(our_out, their_out):
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
        name = type(b.grad_fn).__name__ if b.grad_fn is not None else None
        assert (type(a.grad_fn).__name__ if a.grad_fn is not None else None) == name
    float_pairs = [(a, b) for a, b in zip(our_out, their_out) if b.requires_grad]
    if not float_pairs:
        return
    sum(a.sum() for a, _ in float_pairs).backward()
    sum(b.sum() for _, b in float_pairs).backward()
    for x, y in zip(
        _leaves((our_args, tuple(our_kwargs.values()))), _leaves((their_args, tuple(their_kwargs.values())))
    ):
        if y.grad is None:
            assert x.grad is None
        else:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)
