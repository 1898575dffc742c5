"""The call forms of the declared ops and elementwise rows (``Call``s: operators, reflected operators, methods,
index reads and writes, in-place forms; collected by ``tests/samples.py``): ``gradcheck`` in float64, and the
graph node torch names the result with. ``test_first_vs_second_order.py`` runs ``gradgradcheck`` on the same
calls, and ``test_torch_compare.py`` runs them under PyTorch, checking there that torch gives the node names
written in the samples, and the same values.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck
from samples import call_inputs, call_params, op_calls, run

CASES = call_params(op_calls())


def test_case_ids_are_unique():
    ids = [call.id for call in op_calls()]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", CASES)
def test_gradcheck(case):
    inputs = call_inputs(case, numbagrad)
    assert gradcheck(lambda *xs: run(case, numbagrad, *xs), inputs)


@pytest.mark.parametrize("case", CASES)
def test_node_name_is_torchs(case):
    out = run(case, numbagrad, *call_inputs(case, numbagrad))
    assert type(out.grad_fn).__name__ == case.node


def test_rsub_with_alpha_free_scalar_matches_subtraction():
    x = numbagrad.tensor([1.0, 2.0])
    assert (2 - x).tolist() == [1.0, 0.0]
    assert numbagrad.rsub(x, 2).tolist() == [1.0, 0.0]


def test_max_with_dim_returns_values_and_indices():
    x = numbagrad.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 0.0]])
    values, indices = x.max(dim=1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert indices.dtype is numbagrad.int64


def test_max_of_ties_shares_the_gradient_evenly_like_torch():
    x = numbagrad.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]


def test_sort_returns_values_and_indices():
    values, indices = numbagrad.tensor([3.0, 1.0, 2.0]).sort()
    assert values.tolist() == [1.0, 2.0, 3.0] and indices.tolist() == [1, 2, 0]


def test_prod_gradient_with_a_zero_is_the_product_of_the_others():
    x = numbagrad.tensor([2.0, 0.0, 3.0], requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 6.0, 0.0]


def test_relu_gradient_at_zero_is_zero_like_torch():
    x = numbagrad.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    x.relu().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]


def test_shape_mismatch_names_both_sizes():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"):
        numbagrad.ones(2, 3) @ numbagrad.ones(2, 3)


def test_matmul_1d_2d_gradient_values():
    a = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    b = numbagrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    (a @ b).sum().backward()
    assert a.grad.tolist() == [6.0, 15.0]
    assert b.grad.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]


def test_to_another_dtype_is_differentiable_and_casts_the_gradient_back():
    x = numbagrad.tensor([1.0, 2.0], dtype=numbagrad.float64, requires_grad=True)
    y = x.to(numbagrad.float32)
    assert type(y.grad_fn).__name__ == "ToCopyBackward0" and y.dtype is numbagrad.float32
    (y * numbagrad.tensor([3.0, 4.0])).sum().backward()
    assert x.grad.dtype is numbagrad.float64 and x.grad.tolist() == [3.0, 4.0]


def test_zeros_made_by_relu_clamp_and_maximum_are_positive_like_torch():
    """``0 * x`` would give -0. for negative x (printed as ``-0.``); torch gives +0. here."""
    x = numbagrad.tensor([-1.0, -2.0], requires_grad=True)
    y = x.relu()
    assert not np.signbit(y.detach().numpy()).any()
    for out in (y, x.clamp(0.0, 1.0), numbagrad.maximum(x, numbagrad.zeros(2))):
        x.grad = None
        out.backward(numbagrad.tensor([-1.0, -1.0]))
        assert x.grad.tolist() == [0.0, 0.0] and not np.signbit(x.grad.numpy()).any()
