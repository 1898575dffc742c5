"""Every call form of the op registry (``tests/samples.py``: operators, methods, in-place forms, ``nn.functional``)
compiled: over several draws of its inputs, integer and boolean ones included, the replayed values and gradients
equal eager mode's. A replay that read a first call's value, or lost a node, differs at the second draw."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import numbagrad as ng
import samples

SEEDS = (0, 1, 2, 1)  # (the last replays a draw seen before)


def _same(a, b) -> bool:
    a, b = a.detach().numpy(), b.detach().numpy()
    return a.shape == b.shape and a.dtype == b.dtype and np.allclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True)


def _gradients(outputs, inputs):
    """The gradients of a weighted sum of the float outputs that require grad, for the inputs that require grad."""
    outputs = [t for t in outputs if t.is_floating_point() and t.requires_grad]
    inputs = [t for t in inputs if t.requires_grad]
    if not outputs or not inputs:
        return []
    total = sum((t.double() * (k + 1)).sum() for k, t in enumerate(outputs))
    return ng.autograd.grad(total, inputs, allow_unused=True)


@pytest.mark.parametrize("call", samples.call_params(samples.op_calls() + samples.nn_calls()))
def test_a_compiled_call_equals_eager_over_several_draws(call):
    def eager(*tensors):
        return samples.run(call, ng, *tensors)

    compiled = ng.compile(eager)
    for seed in SEEDS:
        inputs = samples.call_inputs(call, ng, seed)
        copies = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ng.manual_seed(seed)
            want = samples.tensors(eager(*inputs))
            ng.manual_seed(seed)
            got = samples.tensors(compiled(*copies))
        assert len(got) == len(want)
        assert all(_same(g, w) for g, w in zip(got, want))
        for g, w in zip(_gradients(got, copies), _gradients(want, inputs), strict=True):
            assert (g is None) == (w is None)
            assert g is None or _same(g, w)
