"""Tests generated from the declared ops' argument samples (``Sample``s in ``@declare(samples=...)``, collected by
``tests/samples.py``): adding a sample to an op's declaration adds its tests.

For every sample: the op runs; a differentiable op passes ``gradcheck`` in float64; and, where torch is installed,
numbagrad and torch agree on the values, the dtype, the gradients of every float input and the printed node name.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad._samples import Call
from numbagrad.autograd import gradcheck
from samples import call_declared, declared_function, declared_samples, every_sample, leaves, tensors

CASES = declared_samples()


@pytest.mark.parametrize(("decl", "sample"), CASES)
def test_declared_op_passes_gradcheck(decl, sample):
    out, args, kwargs = call_declared(decl, numbagrad, sample, requires_grad=decl.differentiable)
    if not decl.differentiable or not leaves((args, tuple(kwargs.values()))):
        assert tensors(out), f"{decl.name} returned no tensor"
        return
    fn, inputs = declared_function(decl, sample)
    assert gradcheck(fn, tuple(inputs))


@pytest.mark.torch
@pytest.mark.parametrize(("decl", "sample"), CASES)
def test_declared_op_matches_torch(decl, sample):
    torch = pytest.importorskip("torch")
    ours, our_args, our_kwargs = call_declared(decl, numbagrad, sample, requires_grad=decl.differentiable)
    theirs, their_args, their_kwargs = call_declared(decl, torch, sample, requires_grad=decl.differentiable)
    our_out, their_out = tensors(ours), tensors(theirs)
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
    for x, y in zip(leaves((our_args, tuple(our_kwargs.values()))), leaves((their_args, tuple(their_kwargs.values())))):
        if y.grad is None:
            assert x.grad is None
        else:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_call_ids_are_unique_across_the_registry():
    """A call's id names its tests (``test_ops.py[<id>]``, ``test_nn_functional.py[<id>]``), so two may not share
    one, wherever in the registry they are written."""
    ids = [sample.id for _, sample in every_sample() if isinstance(sample, Call)]
    assert sorted({i for i in ids if ids.count(i) > 1}) == []
