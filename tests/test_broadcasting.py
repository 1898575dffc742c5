"""Property tests: broadcasting binary ops and random chains of ops agree with numpy in the forward pass, and
their gradients agree with central finite differences of the numpy version.

Values come from a seeded numpy generator (continuous draws: no ties at the kinks of relu/abs/maximum), shapes
and op chains from Hypothesis. Example counts stay small: each new kernel pattern compiles once.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import numbagrad

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)


def _div(a, b):
    """Division with a denominator kept away from zero (the quotient is smooth)."""
    return a / (b * b + 1)


#: name -> (numbagrad function, numpy function); both take the same operands.
BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (_div, _div),
    "maximum": (numbagrad.maximum, np.maximum),
    "minimum": (numbagrad.minimum, np.minimum),
    "pow": (lambda a, b: (a * a + 0.5) ** b, lambda a, b: (a * a + 0.5) ** b),
}
UNARY = {
    "neg": (lambda a: -a, np.negative),
    "tanh": (numbagrad.tanh, np.tanh),
    "sigmoid": (numbagrad.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "sin": (numbagrad.sin, np.sin),
    "exp_bounded": (lambda a: numbagrad.exp(numbagrad.tanh(a)), lambda a: np.exp(np.tanh(a))),
    "relu": (numbagrad.relu, lambda a: np.maximum(a, 0)),
    "abs": (numbagrad.abs, np.abs),
    "scale": (lambda a: 2.5 * a - 1, lambda a: 2.5 * a - 1),
}

shape_pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3)
seeds = st.integers(0, 2**32 - 1)


def _values(seed: int, shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.5, 1.5, s) for s in shapes]


def _finite_difference(f, arrays: list[np.ndarray], g: np.ndarray, eps: float = 1e-6) -> list[np.ndarray]:
    """Gradients of ``sum(g * f(*arrays))`` by central differences."""
    grads = []
    for i, a in enumerate(arrays):
        grad = np.zeros_like(a)
        for k in range(a.size):
            values = []
            for sign in (1, -1):
                moved = [x.copy() for x in arrays]
                moved[i].reshape(-1)[k] += sign * eps
                values.append(np.sum(g * f(*moved)))
            grad.reshape(-1)[k] = (values[0] - values[1]) / (2 * eps)
        grads.append(grad)
    return grads


def _check(ours, reference, arrays: list[np.ndarray], seed: int) -> None:
    """Forward and gradients of ``ours`` (on tensors) against ``reference`` (on numpy arrays)."""
    inputs = [numbagrad.tensor(a, dtype=numbagrad.float64, requires_grad=True) for a in arrays]
    out = ours(*inputs)
    expected = reference(*arrays)
    assert tuple(out.shape) == np.shape(expected)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(seed + 1).standard_normal(np.shape(expected))
    out.backward(numbagrad.tensor(g, dtype=numbagrad.float64))
    for x, fd in zip(inputs, _finite_difference(reference, arrays, g)):
        assert x.grad.shape == x.shape
        np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-5, atol=1e-6)


@SETTINGS
@given(shapes=shape_pairs, op=st.sampled_from(sorted(BINARY)), seed=seeds)
def test_binary_op_broadcasts_forward_and_backward(shapes, op, seed):
    ours, reference = BINARY[op]
    _check(ours, reference, _values(seed, shapes.input_shapes), seed)


# A chain step: ("unary", name) applies to the running value; ("binary", name, operand) combines it with x or y.
steps = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY))),
    st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), st.sampled_from([0, 1])),
)


def _run_chain(chain, table_index: int, x, y):
    """Evaluate ``chain`` starting from ``x * y``; ``table_index`` picks numbagrad (0) or numpy (1)."""
    value = BINARY["mul"][table_index](x, y)
    for step in chain:
        if step[0] == "unary":
            value = UNARY[step[1]][table_index](value)
        else:
            value = BINARY[step[1]][table_index](value, (x, y)[step[2]])
    return value


@SETTINGS
@given(shapes=shape_pairs, chain=st.lists(steps, min_size=1, max_size=5), seed=seeds)
def test_random_op_chains_match_numpy_and_finite_differences(shapes, chain, seed):
    _check(
        lambda x, y: _run_chain(chain, 0, x, y),
        lambda x, y: _run_chain(chain, 1, x, y),
        _values(seed, shapes.input_shapes),
        seed,
    )


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    shapes=shape_pairs,
    op=st.sampled_from(["add", "sub", "mul", "maximum", "minimum"]),
    dtype=st.sampled_from(["float32", "float64"]),
    seed=seeds,
)
def test_float32_and_float64_forward_broadcasts_like_numpy(shapes, op, dtype, seed):
    arrays = [a.astype(dtype) for a in _values(seed, shapes.input_shapes)]
    out = BINARY[op][0](*[numbagrad.from_numpy(a) for a in arrays])
    expected = BINARY[op][1](*arrays)
    assert out.dtype.name == dtype
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(shapes=shape_pairs, seed=seeds, scalar=st.sampled_from([-2, 0.5, 3.0, True]))
def test_python_scalars_broadcast_without_changing_the_tensor_dtype(shapes, seed, scalar):
    a = _values(seed, shapes.input_shapes[:1])[0].astype(np.float32)
    out = numbagrad.from_numpy(a) * scalar + scalar
    assert out.dtype is numbagrad.float32 and tuple(out.shape) == a.shape
    np.testing.assert_allclose(out.numpy(), a * np.float32(scalar) + np.float32(scalar), rtol=1e-6)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ((2,), (3,), r"The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton dimension 0"),
        (
            (2, 3),
            (4,),
            r"The size of tensor a \(3\) must match the size of tensor b \(4\) at non-singleton dimension 1",
        ),
    ],
)
def test_incompatible_shapes_raise_torchs_error(a, b, message):
    with pytest.raises(RuntimeError, match=message):
        numbagrad.ones(*a) + numbagrad.ones(*b)


@pytest.mark.parametrize("shapes", [((4, 3), (3, 4)), ((2, 3, 4), (3, 3, 5)), ((5, 2), (3, 1, 4))])
def test_a_broadcast_error_names_the_last_clashing_dim_as_torch(torch, shapes):
    messages = []
    for lib in (numbagrad, torch):
        with pytest.raises(RuntimeError) as info:
            lib.zeros(shapes[0]) + lib.zeros(shapes[1])
        messages.append(str(info.value))
    assert messages[0] == messages[1]
