"""A derivative is written once: generated from the sample registry (``tests/samples.py``: the declared ops'
argument samples, the elementwise table's rows, and the call forms of the ops, rows and ``nn.functional``), the
first gradient computed without ``create_graph`` equals, bit for bit, the one computed with it, and
``gradgradcheck`` differentiates that same gradient.

A backward that runs a fused kernel returns its gradients through ``autograd.fused.fused_grads``: the kernel runs
in both modes, and under ``create_graph`` its node's backward differentiates the op's tensor formula. So the first
comparison holds by construction unless a backward forks on grad mode again, and the second catches a tensor
formula that disagrees with its kernel (its numerical side differentiates the kernel's gradient).
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradgradcheck
from numbagrad.ops.elementwise import function_for
from numbagrad.scalar_math import ROWS, example_params
from samples import call_function, call_inputs, declared_function, declared_samples, nn_calls, op_calls


def _declared():
    for param in declared_samples():
        decl, sample = param.values
        if decl.differentiable:
            yield pytest.param(("declared", decl, sample), id=param.id)


def _rows():
    for row in ROWS.values():
        if row.differentiable and not row.integral_only and not row.out_bool:
            yield pytest.param(("row", row, None), id=f"row-{row.name}")


def _calls():
    for prefix, calls in (("call", op_calls()), ("nn", nn_calls())):
        for call in calls:
            if call.true_gradient:
                yield pytest.param(("call", call, None), id=f"{prefix}-{call.id}")


CASES = [*_declared(), *_rows(), *_calls()]


def _function(kind, what, sample):
    """``(fn, inputs)``: a function of the float inputs that require grad, returning its float outputs."""
    if kind == "declared":
        return declared_function(what, sample)
    if kind == "call":
        return call_function(what, call_inputs(what, numbagrad))
    rng = np.random.default_rng(0)
    lo, hi = what.domain
    # (an operand torch has no derivative formula for, as zeta's ``x``, is a constant)
    arrays = [
        numbagrad.tensor(rng.uniform(lo, hi, (2, 3)), requires_grad=i not in what.no_formula) for i in range(what.arity)
    ]
    inputs = [a for a in arrays if a.requires_grad]
    cls, params = function_for(what.name), example_params(what)

    def row_fn(*leaves):
        it = iter(leaves)
        return (cls.apply(*[next(it) if a.requires_grad else a for a in arrays], *params),)

    return row_fn, inputs


def _first_gradients(fn, inputs, create_graph: bool) -> list:
    outs = [o for o in fn(*inputs) if o.requires_grad]
    rng = np.random.default_rng(1)
    seeds = [numbagrad.tensor(rng.standard_normal(tuple(o.shape))) for o in outs]
    grads = numbagrad.autograd.grad(outs, inputs, seeds, create_graph=create_graph, allow_unused=True)
    return [None if g is None else g.detach().numpy() for g in grads]


@pytest.mark.parametrize("case", CASES)
def test_first_gradient_is_the_same_with_and_without_create_graph(case):
    fn, inputs = _function(*case)
    if not inputs or not any(o.requires_grad for o in fn(*inputs)):
        pytest.skip("no differentiable output")
    without = _first_gradients(fn, inputs, create_graph=False)
    with_graph = _first_gradients(fn, inputs, create_graph=True)
    for a, b in zip(without, with_graph):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", CASES)
def test_second_derivative_passes_gradgradcheck(case):
    fn, inputs = _function(*case)
    if not inputs or not any(o.requires_grad for o in fn(*inputs)):
        pytest.skip("no differentiable output")
    assert gradgradcheck(fn, tuple(inputs))
