"""The in-place activations whose torch nodes save only their result (``LeakyReluBackward1``, ``EluBackward1``,
``CeluBackward1``): gradients from the result, a write through ``.data`` after the op reaching backward, torch's
refusal of a negative slope at backward, and second derivatives, each against torch."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.autograd import gradgradcheck

DATA = [[1.0, -2.0, 0.5], [-0.25, 3.0, -1.5]]

OPS = {
    "leaky_relu_0.2": lambda F, y: F.leaky_relu_(y, 0.2),
    "leaky_relu_0": lambda F, y: F.leaky_relu_(y, 0.0),
    "elu": lambda F, y: F.elu_(y),
    "elu_0.5": lambda F, y: F.elu_(y, 0.5),
    "celu_2": lambda F, y: F.celu_(y, 2.0),
    "selu": lambda F, y: F.selu_(y),
    "leaky_relu_inplace_flag": lambda F, y: F.leaky_relu(y, 0.1, inplace=True),
}


def _grad(lib, op, on_view: bool, write: float | None):
    x = lib.tensor(DATA, dtype=lib.float64, requires_grad=True)
    y = x * 1
    target = y[1] if on_view else y
    op(lib.nn.functional, target)
    if write is not None:
        target.data.fill_(write)
    name = type(target.grad_fn).__name__
    y.sum().backward()
    return x.grad.numpy(), name


@pytest.mark.parametrize("on_view", [False, True])
@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_gradient_and_node_match_torch(torch, op, on_view):
    ours, theirs = _grad(ng, op, on_view, None), _grad(torch, op, on_view, None)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1] == theirs[1]


@pytest.mark.parametrize("write", [-0.5, 0.75])
@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_a_write_through_data_after_the_op_reaches_backward_as_in_torch(torch, op, write):
    np.testing.assert_allclose(_grad(ng, op, False, write)[0], _grad(torch, op, False, write)[0], rtol=1e-12)


NEGATIVE = {
    "leaky_relu": lambda F, y: F.leaky_relu_(y, -0.1),
    "elu": lambda F, y: F.elu_(y, -0.5),
}


@pytest.mark.parametrize("op", NEGATIVE.values(), ids=NEGATIVE.keys())
def test_a_negative_slope_is_refused_at_backward_as_torch(torch, op):
    def message(lib):
        x = lib.tensor(DATA, requires_grad=True)
        y = x * 1
        op(lib.nn.functional, y)  # (the forward runs)
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
        return str(info.value)

    assert message(ng) == message(torch)


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_second_derivatives_pass_gradgradcheck(op):
    x = ng.tensor([[1.0, -2.0, 0.5], [-0.25, 3.0, -1.5]], dtype=ng.float64, requires_grad=True)

    def f(x):
        y = x * 1.5
        op(ng.nn.functional, y)
        return y * y

    assert gradgradcheck(f, (x,))
