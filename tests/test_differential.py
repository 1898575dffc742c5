"""Differential testing against torch: random chains of ops on random broadcastable shapes (0-dim and
empty ones included), with in-place steps, must give torch's values, dtypes and input gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numbagrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

UNARY = ["exp", "tanh", "sigmoid", "relu", "abs", "neg", "sin", "square_", "clamp_", "sum_keep", "mean_last"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow_scalar", "add_scalar", "rsub_scalar", "where"]
INPLACE = ["add_", "mul_", "sub_"]


def _apply_unary(lib, name: str, t):
    if name == "square_":
        return t * t
    if name == "clamp_":
        return t.clamp(-0.5, 0.7)
    if name == "sum_keep":
        return t.sum(dim=-1, keepdim=True) if t.dim() else t.sum()
    if name == "mean_last":
        return t.mean(dim=-1) if t.dim() and t.shape[-1] else t * 1.0
    return getattr(lib, name)(t)


def _apply_binary(lib, name: str, a, b):
    if name == "div":
        return a / (b.abs() + 1.0)
    if name == "pow_scalar":
        return (a.abs() + 0.5) ** 1.5
    if name == "add_scalar":
        return a + 2.5
    if name == "rsub_scalar":
        return 1.0 - a
    if name == "where":
        return lib.where(a > b, a, b * 2.0)
    return getattr(lib, name)(a, b)


def _broadcasts_into(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _run(lib, arrays: list, program: list):
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    values = list(leaves)
    for step in program:
        kind, name, i, j = step
        if kind == "unary":
            values.append(_apply_unary(lib, name, values[i % len(values)]))
        elif kind == "binary":
            values.append(_apply_binary(lib, name, values[i % len(values)], values[j % len(values)]))
        else:  # in-place on a fresh non-leaf copy, with a tensor that broadcasts into it
            target = values[i % len(values)] * 1.0
            other = values[j % len(values)]
            if _broadcasts_into(tuple(other.shape), tuple(target.shape)):
                getattr(target, name)(other)
            values.append(target)
    out = values[-1]
    loss = (out * out).sum() if out.numel() else out.sum()
    loss.backward()
    return out, leaves


@st.composite
def programs(draw):
    base = draw(st.lists(st.integers(0, 3), min_size=0, max_size=3))  # the broadcast shape; 0 makes it empty
    n_inputs = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_inputs):
        keep = draw(st.integers(0, len(base)))  # trailing dims kept, some set to 1
        tail = base[len(base) - keep :]
        shapes.append(tuple(draw(st.sampled_from([d, 1])) for d in tail))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    arrays = [rng.uniform(-2, 2, s) for s in shapes]
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "inplace"]))
        names = {"unary": UNARY, "binary": BINARY, "inplace": INPLACE}[kind]
        steps.append((kind, draw(st.sampled_from(names)), draw(st.integers(0, 7)), draw(st.integers(0, 7))))
    return arrays, steps


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_op_chains_match_torch(case):
    arrays, program = case
    try:
        theirs, their_leaves = _run(torch, arrays, program)
    except RuntimeError as error:  # shapes that do not broadcast: numbagrad must refuse them with torch's text
        with pytest.raises(RuntimeError) as ours:
            _run(numbagrad, arrays, program)
        assert str(ours.value) == str(error)
        return
    ours, our_leaves = _run(numbagrad, arrays, program)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    for x, y in zip(our_leaves, their_leaves):
        if y.grad is None:
            assert x.grad is None
        else:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)
