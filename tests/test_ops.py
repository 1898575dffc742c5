"""Every differentiable op of SPEC §1: ``gradcheck`` in float64, and the graph node torch names it with.

``CASES`` is written against a module argument ``T`` so that the same expressions also run under PyTorch:
``test_torch_compare.py`` checks there that torch gives the node names written here, and the same values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck, gradgradcheck


@dataclass(frozen=True)
class Case:
    """``fn(T, *inputs)`` on float64 inputs of ``shapes`` (drawn from a standard normal); ``node`` is torch's."""

    id: str
    fn: Callable
    shapes: tuple
    node: str


def _positive(x):
    return x.abs() + 0.5


def _setitem_row(T, a, b):
    c = a.clone()
    c[0] = b
    return c


def _setitem_slice(T, a, b):
    c = a * 1
    c[1:] = b
    return c


def _setitem_scalar(T, a):
    c = a.clone()
    c[:, 1] = 5.0
    return c


def _setitem_mask(T, a):
    c = a.clone()
    c[c > 0] = 0.0
    return c


def _setitem_index_tensor(T, a, b):
    c = a.clone()
    c[T.tensor([0, 1])] = b
    return c


def _mul_inplace(T, a):
    c = a * 2
    c.mul_(a)
    return c


def _iadd(T, a):
    c = a * 2
    c += 1
    return c


CASES = [
    # arithmetic operators, their reflected forms, and the named functions
    Case("add", lambda T, a, b: a + b, ((2, 3), (3,)), "AddBackward0"),
    Case("radd", lambda T, a: 2 + a, ((3,),), "AddBackward0"),
    Case("sub", lambda T, a, b: a - b, ((2, 3), (2, 1)), "SubBackward0"),
    Case("rsub", lambda T, a: 2 - a, ((3,),), "RsubBackward1"),
    Case("rsub_tensor", lambda T, a, b: T.rsub(a, b), ((3,), (3,)), "RsubBackward0"),
    Case("mul", lambda T, a, b: a * b, ((2, 3), (3,)), "MulBackward0"),
    Case("rmul", lambda T, a: 3 * a, ((3,),), "MulBackward0"),
    Case("div", lambda T, a, b: a / _positive(b), ((2, 3), (3,)), "DivBackward0"),
    Case("div_scalar", lambda T, a: a / 2, ((3,),), "DivBackward0"),
    Case("rdiv", lambda T, a: 2 / _positive(a), ((3,),), "MulBackward0"),
    Case("pow_scalar", lambda T, a: a**3, ((3,),), "PowBackward0"),
    Case("pow_tensor", lambda T, a, b: _positive(a) ** b, ((3,), (3,)), "PowBackward1"),
    Case("rpow", lambda T, a: 2**a, ((3,),), "PowBackward2"),
    Case("pow_fn", lambda T, a: T.pow(_positive(a), 0.5), ((3,),), "PowBackward0"),
    Case("neg", lambda T, a: -a, ((3,),), "NegBackward0"),
    Case("matmul_op", lambda T, a, b: a @ b, ((2, 3), (3, 4)), "MmBackward0"),
    # unary math
    Case("exp", lambda T, a: T.exp(a), ((3,),), "ExpBackward0"),
    Case("log", lambda T, a: T.log(_positive(a)), ((3,),), "LogBackward0"),
    Case("sqrt", lambda T, a: T.sqrt(_positive(a)), ((3,),), "SqrtBackward0"),
    Case("rsqrt", lambda T, a: T.rsqrt(_positive(a)), ((3,),), "RsqrtBackward0"),
    Case("abs", lambda T, a: T.abs(a), ((3,),), "AbsBackward0"),
    Case("sin", lambda T, a: T.sin(a), ((3,),), "SinBackward0"),
    Case("cos", lambda T, a: a.cos(), ((3,),), "CosBackward0"),
    Case("tan", lambda T, a: T.tan(a * 0.5), ((3,),), "TanBackward0"),
    Case("tanh", lambda T, a: a.tanh(), ((3,),), "TanhBackward0"),
    Case("sigmoid", lambda T, a: T.sigmoid(a), ((3,),), "SigmoidBackward0"),
    Case("relu", lambda T, a: T.relu(a), ((5,),), "ReluBackward0"),
    Case("clamp", lambda T, a: T.clamp(a, -0.5, 0.5), ((6,),), "ClampBackward1"),
    Case("clamp_min", lambda T, a: a.clamp(min=0.1), ((6,),), "ClampBackward1"),
    Case("clamp_max", lambda T, a: a.clamp(max=0.1), ((6,),), "ClampBackward1"),
    Case("maximum", lambda T, a, b: T.maximum(a, b), ((2, 3), (3,)), "MaximumBackward0"),
    Case("minimum", lambda T, a, b: T.minimum(a, b), ((2, 3), (3,)), "MinimumBackward0"),
    Case("where", lambda T, a, b: T.where(a > 0, a, b), ((2, 3), (3,)), "WhereBackward0"),
    Case("where_scalar", lambda T, a: T.where(a > 0, a, 0.0), ((2, 3),), "WhereBackward0"),
    # reductions
    Case("sum", lambda T, a: a.sum(), ((2, 3),), "SumBackward0"),
    Case("sum_dim", lambda T, a: a.sum(1), ((2, 3),), "SumBackward1"),
    Case("sum_keepdim", lambda T, a: a.sum(dim=0, keepdim=True), ((2, 3),), "SumBackward1"),
    Case("sum_dims", lambda T, a: T.sum(a, (0, 2)), ((2, 3, 2),), "SumBackward1"),
    Case("mean", lambda T, a: a.mean(), ((2, 3),), "MeanBackward0"),
    Case("mean_dim", lambda T, a: a.mean(-1), ((2, 3),), "MeanBackward1"),
    Case("mean_keepdim", lambda T, a: T.mean(a, 0, keepdim=True), ((2, 3),), "MeanBackward1"),
    Case("max", lambda T, a: a.max(), ((2, 3),), "MaxBackward1"),
    Case("max_dim", lambda T, a: a.max(1)[0], ((2, 3),), "MaxBackward0"),
    Case("max_keepdim", lambda T, a: T.max(a, 1, keepdim=True).values, ((2, 3),), "MaxBackward0"),
    Case("min", lambda T, a: a.min(), ((2, 3),), "MinBackward1"),
    Case("min_dim", lambda T, a: a.min(0).values, ((2, 3),), "MinBackward0"),
    Case("amax", lambda T, a: a.amax(1), ((2, 3),), "AmaxBackward0"),
    Case("amax_all", lambda T, a: T.amax(a), ((2, 3),), "AmaxBackward0"),
    Case("amin", lambda T, a: a.amin(0, keepdim=True), ((2, 3),), "AminBackward0"),
    Case("prod", lambda T, a: a.prod(), ((2, 3),), "ProdBackward0"),
    Case("prod_dim", lambda T, a: a.prod(1), ((2, 3),), "ProdBackward1"),
    Case("prod_keepdim", lambda T, a: T.prod(a, 0, keepdim=True), ((2, 3),), "ProdBackward1"),
    Case("norm", lambda T, a: a.norm(), ((2, 3),), "LinalgVectorNormBackward0"),
    Case("norm_dim", lambda T, a: a.norm(dim=1), ((2, 3),), "LinalgVectorNormBackward0"),
    Case("norm_p1", lambda T, a: a.norm(p=1), ((2, 3),), "LinalgVectorNormBackward0"),
    Case("norm_p3_keepdim", lambda T, a: T.norm(a, p=3, dim=0, keepdim=True), ((2, 3),), "LinalgVectorNormBackward0"),
    Case("var", lambda T, a: a.var(), ((2, 3),), "VarBackward0"),
    Case("var_dim", lambda T, a: a.var(1), ((2, 3),), "VarBackward0"),
    Case("var_biased_keepdim", lambda T, a: a.var(1, keepdim=True, unbiased=False), ((2, 3),), "VarBackward0"),
    Case("std", lambda T, a: a.std(), ((2, 3),), "StdBackward0"),
    Case("std_dim", lambda T, a: T.std(a, 0), ((2, 3),), "StdBackward0"),
    Case("std_keepdim", lambda T, a: a.std(1, keepdim=True), ((2, 3),), "StdBackward0"),
    Case("softmax", lambda T, a: T.softmax(a, dim=1), ((2, 3),), "SoftmaxBackward0"),
    Case("softmax_method", lambda T, a: a.softmax(-1), ((2, 3),), "SoftmaxBackward0"),
    Case("log_softmax", lambda T, a: T.log_softmax(a, dim=0), ((2, 3),), "LogSoftmaxBackward0"),
    # matrix products
    Case("mm", lambda T, a, b: T.mm(a, b), ((2, 3), (3, 4)), "MmBackward0"),
    Case("matmul_1d_1d", lambda T, a, b: T.matmul(a, b), ((3,), (3,)), "DotBackward0"),
    Case("matmul_2d_1d", lambda T, a, b: T.matmul(a, b), ((2, 3), (3,)), "MvBackward0"),
    Case("matmul_1d_2d", lambda T, a, b: T.matmul(a, b), ((3,), (3, 2)), "SqueezeBackward4"),
    Case("matmul_batched", lambda T, a, b: T.matmul(a, b), ((2, 2, 3), (2, 3, 2)), "UnsafeViewBackward0"),
    Case("matmul_3d_2d", lambda T, a, b: T.matmul(a, b), ((2, 2, 3), (3, 2)), "UnsafeViewBackward0"),
    Case("matmul_2d_3d", lambda T, a, b: T.matmul(a, b), ((2, 3), (2, 3, 2)), "CloneBackward0"),
    Case("matmul_3d_1d", lambda T, a, b: T.matmul(a, b), ((2, 2, 3), (3,)), "UnsafeViewBackward0"),
    Case("matmul_1d_3d", lambda T, a, b: T.matmul(a, b), ((3,), (2, 3, 2)), "UnsafeViewBackward0"),
    Case("matmul_broadcast_4d", lambda T, a, b: T.matmul(a, b), ((2, 1, 2, 3), (2, 3, 2)), "UnsafeViewBackward0"),
    Case("matmul_row_3d", lambda T, a, b: T.matmul(a, b), ((1, 3), (2, 3, 2)), "TransposeBackward0"),
    Case("matmul_squeezed_batch", lambda T, a, b: T.matmul(a, b), ((1, 2, 3), (2, 3, 2)), "CloneBackward0"),
    # shape ops
    Case("t", lambda T, a: a.t(), ((2, 3),), "TBackward0"),
    Case("transpose", lambda T, a: a.transpose(0, 2), ((2, 3, 2),), "TransposeBackward0"),
    Case("permute", lambda T, a: a.permute(2, 0, 1), ((2, 3, 2),), "PermuteBackward0"),
    Case("view", lambda T, a: a.view(3, 2), ((2, 3),), "ViewBackward0"),
    Case("view_infer", lambda T, a: a.view(-1), ((2, 3),), "ViewBackward0"),
    Case("reshape", lambda T, a: a.reshape(6), ((2, 3),), "ViewBackward0"),
    Case("reshape_copy", lambda T, a: a.t().reshape(6), ((2, 3),), "UnsafeViewBackward0"),
    Case("flatten", lambda T, a: a.flatten(), ((2, 3),), "ViewBackward0"),
    Case("flatten_start", lambda T, a: T.flatten(a, 1), ((2, 3, 2),), "ViewBackward0"),
    Case("squeeze", lambda T, a: a.squeeze(), ((2, 1, 3),), "SqueezeBackward0"),
    Case("squeeze_dim", lambda T, a: a.squeeze(1), ((2, 1, 3),), "SqueezeBackward1"),
    Case("unsqueeze", lambda T, a: a.unsqueeze(0), ((2, 3),), "UnsqueezeBackward0"),
    Case("unsqueeze_neg", lambda T, a: T.unsqueeze(a, -1), ((2, 3),), "UnsqueezeBackward0"),
    Case("expand", lambda T, a: a.expand(2, 3), ((1, 3),), "ExpandBackward0"),
    Case("expand_new_dim", lambda T, a: a.expand(4, -1), ((3,),), "ExpandBackward0"),
    Case("expand_as", lambda T, a, b: a.expand_as(b), ((3,), (2, 3)), "ExpandBackward0"),
    Case("view_as", lambda T, a, b: a.view_as(b), ((6,), (2, 3)), "ViewBackward0"),
    Case("cat", lambda T, a, b: T.cat([a, b], 0), ((2, 3), (1, 3)), "CatBackward0"),
    Case("cat_dim1", lambda T, a, b: T.cat((a, b), dim=1), ((2, 3), (2, 1)), "CatBackward0"),
    Case("stack", lambda T, a, b: T.stack([a, b]), ((2, 3), (2, 3)), "StackBackward0"),
    Case("stack_dim1", lambda T, a, b: T.stack([a, b], 1), ((2, 3), (2, 3)), "StackBackward0"),
    Case("sort", lambda T, a: a.sort()[0], ((2, 3),), "SortBackward0"),
    Case("sort_descending", lambda T, a: T.sort(a, dim=0, descending=True).values, ((3, 2),), "SortBackward0"),
    # indexing (read)
    Case("index_int", lambda T, a: a[1], ((2, 3),), "SelectBackward0"),
    Case("index_int_int", lambda T, a: a[1, 2], ((2, 3),), "SelectBackward0"),
    Case("index_negative", lambda T, a: a[-1], ((2, 3),), "SelectBackward0"),
    Case("index_slice", lambda T, a: a[:, 1:], ((2, 3),), "SliceBackward0"),
    Case("index_full_slice", lambda T, a: a[:], ((2, 3),), "SliceBackward0"),
    Case("index_step", lambda T, a: a[::2], ((5,),), "SliceBackward0"),
    Case("index_int_slice", lambda T, a: a[1, 1:], ((2, 3),), "SliceBackward0"),
    Case("index_slice_int", lambda T, a: a[1:, 1], ((2, 3),), "SelectBackward0"),
    Case("index_none", lambda T, a: a[None], ((2, 3),), "UnsqueezeBackward0"),
    Case("index_slice_none", lambda T, a: a[:, None], ((2, 3),), "UnsqueezeBackward0"),
    Case("index_ellipsis_int", lambda T, a: a[..., 1], ((2, 3),), "SelectBackward0"),
    Case("index_ellipsis", lambda T, a: a[...], ((2, 3),), "AliasBackward0"),
    Case("index_bool_mask", lambda T, a: a[a > 0], ((2, 3),), "IndexBackward0"),
    Case("index_int_tensor", lambda T, a: a[T.tensor([0, 2, 0])], ((3, 2),), "IndexBackward0"),
    Case("index_int_list", lambda T, a: a[[0, 2]], ((3, 2),), "IndexBackward0"),
    Case("index_slice_int_tensor", lambda T, a: a[:, T.tensor([1, 0])], ((3, 2),), "IndexBackward0"),
    # indexing (write) and in-place ops on non-leaves
    Case("setitem_row", _setitem_row, ((2, 3), (3,)), "CopySlices"),
    Case("setitem_slice", _setitem_slice, ((3,), (2,)), "CopySlices"),
    Case("setitem_scalar", _setitem_scalar, ((2, 3),), "CopySlices"),
    Case("setitem_mask", _setitem_mask, ((2, 3),), "IndexPutBackward0"),
    Case("setitem_index_tensor", _setitem_index_tensor, ((3, 2), (2,)), "IndexPutBackward0"),
    Case("mul_inplace", _mul_inplace, ((3,),), "MulBackward0"),
    Case("iadd", _iadd, ((3,),), "AddBackward0"),
    # copies
    Case("clone", lambda T, a: a.clone(), ((3,),), "CloneBackward0"),
]
CASE_IDS = [c.id for c in CASES]


def make_inputs(T, case: Case, seed: int = 0) -> list:
    """float64 leaves for ``case`` under module ``T`` (numbagrad or torch), the same values for both."""
    rng = np.random.default_rng(seed)
    return [T.tensor(rng.standard_normal(s), dtype=T.float64, requires_grad=True) for s in case.shapes]


def test_case_ids_are_unique():
    assert len(set(CASE_IDS)) == len(CASE_IDS)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_gradcheck(case):
    inputs = make_inputs(numbagrad, case)
    assert gradcheck(lambda *xs: case.fn(numbagrad, *xs), inputs)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_node_name_is_torchs(case):
    out = case.fn(numbagrad, *make_inputs(numbagrad, case))
    assert type(out.grad_fn).__name__ == case.node


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_gradgradcheck(case):
    inputs = make_inputs(numbagrad, case)
    assert gradgradcheck(lambda *xs: case.fn(numbagrad, *xs), inputs)


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
