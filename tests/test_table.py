"""Tests generated from the elementwise table (``scalar_math.ROWS``): adding a row adds its tests.

For every row: the compiled forward against the row's numpy ``reference`` (float32 and float64, with tensor and
Python-scalar operands) and each gradient against central finite differences of the reference in float64. The
second derivatives of every row are checked with every other op's, in ``tests/test_first_vs_second_order.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.ops.elementwise import function_for
from numbagrad.scalar_math import EXAMPLE_PARAMS, ROWS, example_params

ROW_LIST = list(ROWS.values())
BINARY_ROWS = [r for r in ROW_LIST if r.arity == 2]
DIFFERENTIABLE_ROWS = [r for r in ROW_LIST if r.differentiable]

#: Values for the rows' non-tensor parameters (by parameter name); inside every row's domain.
DTYPES = {"float32": (numbagrad.float32, 2e-6), "float64": (numbagrad.float64, 1e-12)}


def _draw(row, shape, seed: int = 0) -> list[np.ndarray]:
    """Inputs drawn uniformly inside the row's domain (float64; integers for the integral-only rows)."""
    rng = np.random.default_rng(seed)
    lo, hi = row.domain
    if row.integral_only:
        return [rng.integers(-5, 6, shape) for _ in range(row.arity)]
    return [rng.uniform(lo, hi, shape) for _ in range(row.arity)]


def _expected_dtype(row, dtype):
    if row.out_bool:
        return numbagrad.bool
    return numbagrad.int64 if row.integral_only else dtype


def _params(row) -> tuple:
    return example_params(row)


def _apply(row, *operands):
    return function_for(row.name).apply(*operands, *_params(row))


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("row", ROW_LIST, ids=lambda r: r.name)
def test_forward_matches_reference(row, dtype_name):
    dtype, rtol = DTYPES[dtype_name]
    arrays = [a if row.integral_only else a.astype(dtype.numpy) for a in _draw(row, (2, 5))]
    out = _apply(row, *[numbagrad.from_numpy(a) for a in arrays])
    expected = row.reference(*arrays, *_params(row))
    assert out.dtype is _expected_dtype(row, dtype)
    np.testing.assert_allclose(out.numpy(), expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("scalar_first", [False, True], ids=["tensor_scalar", "scalar_tensor"])
@pytest.mark.parametrize("row", BINARY_ROWS, ids=lambda r: r.name)
def test_forward_with_python_scalar_operand(row, scalar_first):
    x = _draw(row, (4,))[0]
    s = 3 if row.integral_only else float(np.mean(row.domain))
    operands = [s, numbagrad.from_numpy(x)] if scalar_first else [numbagrad.from_numpy(x), s]
    reference = row.reference(s, x, *_params(row)) if scalar_first else row.reference(x, s, *_params(row))
    out = _apply(row, *operands)
    assert out.dtype is _expected_dtype(row, numbagrad.float64)
    np.testing.assert_allclose(out.numpy(), reference, rtol=1e-12)


def _central_difference(row, arrays: list[np.ndarray], i: int, g: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d sum(g * f) / d arrays[i], by central differences of the numpy reference."""
    grad = np.zeros_like(arrays[i])
    for k in range(arrays[i].size):
        shifted = []
        for sign in (1, -1):
            moved = [a.copy() for a in arrays]
            moved[i].reshape(-1)[k] += sign * eps
            shifted.append(np.sum(g * row.reference(*moved, *_params(row))))
        grad.reshape(-1)[k] = (shifted[0] - shifted[1]) / (2 * eps)
    return grad


@pytest.mark.parametrize("row", DIFFERENTIABLE_ROWS, ids=lambda r: r.name)
def test_gradients_match_finite_differences(row):
    arrays = _draw(row, (2, 3), seed=1)
    inputs = [numbagrad.tensor(a, requires_grad=i not in row.no_formula) for i, a in enumerate(arrays)]
    g = np.random.default_rng(2).standard_normal((2, 3))
    _apply(row, *inputs).backward(numbagrad.tensor(g))
    for i, x in enumerate(inputs):
        if x.requires_grad:
            expected = _central_difference(row, arrays, i, g)
            np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("row", [r for r in ROW_LIST if r.float_only], ids=lambda r: r.name)
def test_float_only_rows_promote_integers_to_the_default_float(row):
    x = numbagrad.tensor([1, 2, 3])
    operands = [x] * row.arity
    out = _apply(row, *operands)
    assert out.dtype is numbagrad.float32
    expected = row.reference(*[np.array([1.0, 2.0, 3.0])] * row.arity, *_params(row))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_every_row_names_a_reference_and_one_gradient_per_input():
    for row in ROW_LIST:
        assert callable(row.reference), row.name
        assert len(row.grads) in (0, row.arity), row.name
        assert row.domain[0] < row.domain[1], row.name
        assert set(row.params) <= set(EXAMPLE_PARAMS), f"add test values for {row.name}'s params"


@pytest.mark.parametrize(
    "row", [r for r in ROW_LIST if not (r.differentiable or r.out_bool or r.integral_only)], ids=lambda r: r.name
)
def test_rows_without_a_gradient_refuse_backward(row):
    x = numbagrad.tensor(_draw(row, (3,))[0], requires_grad=True)
    out = _apply(row, *([x] * row.arity))
    with pytest.raises(RuntimeError, match=f"^derivative for aten::{row.name} is not implemented$"):  # torch's text
        out.sum().backward()


@pytest.mark.parametrize("row", [r for r in ROW_LIST if r.out_bool], ids=lambda r: r.name)
def test_bool_rows_record_no_graph(row):
    x = numbagrad.tensor(_draw(row, (3,))[0], requires_grad=True)
    out = _apply(row, *([x] * row.arity))
    assert out.dtype is numbagrad.bool and out.grad_fn is None and not out.requires_grad


@pytest.mark.parametrize("row", [r for r in ROW_LIST if r.no_formula], ids=lambda r: r.name)
def test_inputs_without_a_formula_raise_torchs_error_in_backward(row):
    inputs = [numbagrad.tensor(a, requires_grad=True) for a in _draw(row, (3,))]
    out = _apply(row, *inputs)
    with pytest.raises(NotImplementedError, match=f"^{next(iter(row.no_formula.values()))}$"):
        out.sum().backward()
