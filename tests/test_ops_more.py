"""The tensor functions of ``ops/more.py`` against torch 2.13: values and dtypes on integer, boolean, empty and NaN
inputs (the float64 gradients are covered by the declarations' generated tests), in-place forms, and torch's
exceptions with their messages."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.torch

A = np.arange(12).reshape(3, 4)
F = np.array([[1.5, np.nan, -2.0], [np.nan, np.nan, np.nan]])


def _outs(value) -> list:
    if isinstance(value, (list, tuple)) and type(value).__name__ != "Size":
        return [t for v in value for t in _outs(v)]
    return [value]


def _check_same(ours, theirs) -> None:
    ours, theirs = _outs(ours), _outs(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if not hasattr(b, "dtype"):  # a Size
            assert tuple(a) == tuple(b)
            continue
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, equal_nan=True)


VALUES = {
    "movedim int": lambda lib: lib.movedim(lib.tensor(A).reshape(3, 2, 2), (0, 2), (1, 0)),
    "moveaxis method": lambda lib: lib.tensor(A).moveaxis(-1, 0),
    "select negative index": lambda lib: lib.tensor(A).select(1, -1),
    "unflatten -1": lambda lib: lib.tensor(A).unflatten(1, (-1, 2)),
    "ravel of a transpose": lambda lib: lib.tensor(A).t().ravel(),
    "take negative indices": lambda lib: lib.take(lib.tensor(A), lib.tensor([[-1, 0], [5, -12]])),
    "take empty index": lambda lib: lib.take(lib.tensor(A), lib.tensor([], dtype=lib.int64)),
    "take_along_dim broadcast": lambda lib: lib.take_along_dim(lib.tensor(A), lib.tensor([[0], [3], [1]]), 1),
    "take_along_dim flat": lambda lib: lib.take_along_dim(lib.tensor(A), lib.tensor([11, 0])),
    "index_copy int": lambda lib: lib.tensor(A).index_copy(1, lib.tensor([3, 0]), lib.tensor(-A[:, :2])),
    "tensor_split sections": lambda lib: lib.tensor_split(lib.arange(7), 3),
    "tensor_split more sections than elements": lambda lib: lib.tensor_split(lib.arange(2), 4),
    "tensor_split indices past the end": lambda lib: lib.tensor_split(lib.arange(5), [2, 9, 3]),
    "tensor_split index tensor": lambda lib: lib.tensor_split(lib.tensor(A), lib.tensor([1, 3]), 1),
    "hsplit 1-D": lambda lib: lib.hsplit(lib.arange(6), 3),
    "vsplit list": lambda lib: lib.tensor(A).vsplit([1]),
    "dsplit": lambda lib: lib.tensor(A).reshape(1, 3, 4).dsplit(2),
    "hstack ints and 0-d": lambda lib: lib.hstack([lib.tensor(3), lib.tensor([1, 2])]),
    "vstack promotes": lambda lib: lib.vstack([lib.tensor([1, 2]), lib.tensor([0.5, 1.5])]),
    "row_stack": lambda lib: lib.row_stack((lib.tensor([1, 2]), lib.tensor([[3, 4]]))),
    "dstack": lambda lib: lib.dstack([lib.tensor([1, 2]), lib.tensor([3, 4])]),
    "column_stack": lambda lib: lib.column_stack(
        [lib.tensor([1, 2]), lib.tensor([[3, 4], [5, 6]]), lib.tensor([7, 8])]
    ),
    "atleast_3d several": lambda lib: lib.atleast_3d(lib.tensor(1), lib.tensor([1, 2]), lib.tensor(A)),
    "atleast_2d list": lambda lib: lib.atleast_2d([lib.tensor(1.0), lib.tensor([True])]),
    "tile longer dims": lambda lib: lib.tensor([1, 2]).tile((2, 2)),
    "rot90 int each k": lambda lib: [lib.rot90(lib.tensor(A), k) for k in range(-1, 6)],
    "rot90 reversed dims": lambda lib: lib.tensor(A).reshape(3, 2, 2).rot90(1, [2, 0]),
    "fliplr flipud": lambda lib: (lib.tensor(A).fliplr(), lib.tensor(A).flipud()),
    "diff bool": lambda lib: lib.diff(lib.tensor([True, False, False, True])),
    "diff int order 2 prepend": lambda lib: lib.diff(lib.tensor(A), 2, 0, prepend=lib.tensor([[1, 1, 1, 1]])),
    "diff order past the size": lambda lib: lib.tensor([1.0, 4.0]).diff(n=3),
    "kron int": lambda lib: lib.kron(lib.tensor([[1, 2], [3, 4]]), lib.tensor([1, -1])),
    "inner 0-d": lambda lib: lib.inner(lib.tensor(2), lib.tensor(A)),
    "inner int": lambda lib: lib.inner(lib.tensor(A), lib.tensor(A)),
    "vdot int": lambda lib: lib.vdot(lib.tensor([1, 2]), lib.tensor([3, 4])),
    "tensordot 0": lambda lib: lib.tensordot(lib.tensor([1, 2]), lib.tensor([3, 4, 5]), 0),
    "tensordot pairs": lambda lib: lib.tensordot(lib.tensor(A), lib.tensor(A).t(), ([0, 1], [1, 0])),
    "addmv beta 0 ignores nan": lambda lib: lib.addmv(
        lib.full((2,), float("nan")), lib.ones(2, 3), lib.ones(3), beta=0
    ),
    "addr int": lambda lib: lib.addr(lib.tensor([[1, 2], [3, 4]]), lib.tensor([1, 2]), lib.tensor([3, 4]), alpha=2),
    "addbmm": lambda lib: lib.addbmm(lib.ones(2, 2), lib.ones(3, 2, 4), lib.ones(3, 4, 2), beta=0.5, alpha=2),
    "block_diag promotes": lambda lib: lib.block_diag(lib.tensor(2), lib.tensor([1.5, 2.5]), lib.tensor([[1], [2]])),
    "block_diag empty": lambda lib: lib.block_diag(),
    "cartesian_prod int": lambda lib: lib.cartesian_prod(lib.tensor([1, 2]), lib.tensor([3, 4, 5])),
    "diag_embed int offset": lambda lib: lib.diag_embed(lib.tensor(A), -1, 0, 2),
    "diagflat int": lambda lib: lib.tensor([[1, 2], [3, 4]]).diagflat(2),
    "tril_indices": lambda lib: [
        lib.tril_indices(r, c, o) for r, c, o in [(3, 3, 0), (2, 4, 5), (4, 2, -3), (0, 3, 0)]
    ],
    "triu_indices int32": lambda lib: lib.triu_indices(3, 4, 1, dtype=lib.int32),
    "broadcast_tensors": lambda lib: lib.broadcast_tensors(lib.tensor([[1], [2]]), lib.tensor([1, 2, 3])),
    "broadcast_shapes": lambda lib: lib.broadcast_shapes((2, 1), 3, (1, 1, 1)),
    "logspace": lambda lib: (lib.logspace(-2, 2, 5), lib.logspace(0, 3, 4, base=2, dtype=lib.float64)),
    "logspace int": lambda lib: lib.logspace(0, 3, 4, dtype=lib.int64),
    "nansum": lambda lib: (lib.nansum(lib.tensor(F)), lib.tensor(F).nansum(1), lib.nansum(lib.tensor(A), 0)),
    "nanmean all nan row": lambda lib: (lib.nanmean(lib.tensor(F), 1), lib.tensor(F).nanmean()),
    "count_nonzero": lambda lib: (lib.count_nonzero(lib.tensor(A % 3)), lib.tensor(A % 3).count_nonzero((0, 1))),
    "argwhere": lambda lib: (lib.argwhere(lib.tensor(A % 5 == 0)), lib.argwhere(lib.tensor(3.0))),
    "float_power int": lambda lib: (lib.float_power(lib.tensor([2, 3]), 2), lib.tensor([4.0]).float_power(-0.5)),
    "float_power number base": lambda lib: lib.float_power(2, lib.tensor([1, -1], dtype=lib.int32)),
    "ldexp int input": lambda lib: lib.ldexp(lib.tensor([1, 3]), lib.tensor([2, -1])),
    "ldexp float32": lambda lib: lib.tensor([1.5], dtype=lib.float32).ldexp(lib.tensor([3])),
    "gcd signs and zeros": lambda lib: lib.gcd(lib.tensor([12, -18, 0, 7]), lib.tensor([8, 12, 0, 0])),
    "gcd broadcast int32": lambda lib: lib.tensor([[4], [9]], dtype=lib.int32).gcd(lib.tensor([6, 3], dtype=lib.int32)),
    "lcm": lambda lib: lib.lcm(lib.tensor([4, -6, 0, 3]), lib.tensor([6, 4, 5, -7])),
    "isin": lambda lib: (
        lib.isin(lib.tensor([[1, 2], [3, 2]]), lib.tensor([2, 5])),
        lib.isin(lib.tensor([1.5]), lib.tensor([1.5]), invert=True),
    ),
    "bucketize": lambda lib: [
        lib.bucketize(lib.tensor([1, 5, 9, 0]), lib.tensor([1, 3, 5, 7]), right=r) for r in (False, True)
    ],
    "bucketize int32 out": lambda lib: lib.bucketize(lib.tensor([[0.5, 3.5]]), lib.tensor([1.0, 3.0]), out_int32=True),
    "searchsorted": lambda lib: [
        lib.searchsorted(lib.tensor([1, 3, 5, 7]), lib.tensor([1, 5, 9]), side=s) for s in ("left", "right")
    ],
    "searchsorted rows": lambda lib: lib.searchsorted(lib.tensor([[1, 3], [2, 4]]), lib.tensor([[3], [3]]), right=True),
    "searchsorted sorter": lambda lib: lib.searchsorted(
        lib.tensor([5, 1, 3]), lib.tensor([2, 5]), sorter=lib.tensor([1, 2, 0])
    ),
    "select_scatter casts src": lambda lib: lib.select_scatter(lib.zeros(2, 3), lib.arange(3), 0, -1),
    "slice_scatter steps": lambda lib: [
        lib.slice_scatter(lib.zeros(8, dtype=lib.int64), lib.ones(n, dtype=lib.int64), 0, s, e, st)
        for n, s, e, st in [(2, 6, None, 1), (3, 1, None, 3), (2, -2, None, 1), (0, 9, 12, 1)]
    ],
    "diagonal_scatter offset": lambda lib: lib.tensor(A).diagonal_scatter(lib.tensor([7, 8, 9]), 1),
    "aminmax int": lambda lib: (lib.aminmax(lib.tensor(A)), lib.tensor(A).aminmax(dim=0, keepdim=True)),
    "aminmax 0-d keepdim": lambda lib: lib.aminmax(lib.tensor(2.5), keepdim=True),
    "kthvalue int ties": lambda lib: lib.kthvalue(lib.tensor([[4, 1, 1, 0], [5, 2, 7, 3]]), 2),
    "kthvalue 0-d": lambda lib: lib.tensor(3.0).kthvalue(1),
    "median nan rows": lambda lib: lib.median(lib.tensor(F), 1),
    "median all with nan": lambda lib: (lib.median(lib.tensor(F)), lib.median(lib.tensor(A))),
    "median even count": lambda lib: lib.tensor([[4, 1, 1, 0]]).median(1, keepdim=True),
    "nanmedian rows": lambda lib: lib.nanmedian(lib.tensor(F), 1),
    "nanmedian all": lambda lib: (lib.nanmedian(lib.tensor(F)), lib.tensor([float("nan")]).nanmedian()),
    "median empty": lambda lib: lib.median(lib.zeros(0)),
    "combinations": lambda lib: [
        lib.combinations(lib.tensor([1, 2, 3]), r, w) for r in (0, 1, 2, 4) for w in (False, True)
    ],
    "bincount": lambda lib: (lib.bincount(lib.tensor([0, 2, 2])), lib.tensor([1, 1]).bincount(minlength=4)),
    "bincount weights": lambda lib: (
        lib.bincount(lib.tensor([0, 2, 2]), lib.tensor([0.5, 1.0, 1.5])),
        lib.bincount(lib.tensor([1, 1]), lib.tensor([2, 3])),
    ),
    "bincount empty": lambda lib: lib.bincount(lib.tensor([], dtype=lib.int64)),
    "histc": lambda lib: (lib.histc(lib.tensor([1.0, 2, 1, 5]), 4, 0, 3), lib.tensor([1.0, 2, 1]).histc(4)),
    "histc constant": lambda lib: lib.histc(lib.tensor([2.0, 2.0]), 3),
    "cummax ties and nan": lambda lib: lib.cummax(lib.tensor([1.0, 3, 3, float("nan"), 2, float("nan")]), 0),
    "cummin int": lambda lib: lib.tensor([[3, 1, 2, 1, 0], [0, 0, 5, -1, -1]]).cummin(1),
    "cummax 0-d and empty": lambda lib: (lib.cummax(lib.tensor(2.0), 0), lib.cummax(lib.zeros(2, 0), 1)),
    "trapezoid": lambda lib: (
        lib.trapezoid(lib.tensor([1, 2, 4])),
        lib.trapezoid(lib.tensor([1.0, 2, 4]), dx=2),
        lib.trapezoid(lib.tensor(A, dtype=lib.float64), lib.tensor([0.0, 1.0, 3.0]), dim=0),
        lib.trapezoid(lib.zeros(2, 0)),
    ),
    "cumulative_trapezoid": lambda lib: (
        lib.cumulative_trapezoid(lib.tensor([1, 2, 4])),
        lib.cumulative_trapezoid(lib.tensor(A, dtype=lib.float64), lib.tensor(A, dtype=lib.float64) ** 2),
        lib.cumulative_trapezoid(lib.zeros(2, 0)),
    ),
    "frexp edges": lambda lib: lib.frexp(
        lib.tensor([1.5, -3.0, 0.0, float("inf"), float("nan"), 1e-310, 8.0, 0.9999999999999999, 1.7e308])
    ),
    "frexp float32 and half": lambda lib: (
        lib.tensor([1.0, 0.375, -1e-40], dtype=lib.float32).frexp(),
        lib.frexp(lib.tensor([1.0, 3.0], dtype=lib.float16)),
    ),
    "logcumsumexp spread": lambda lib: lib.logcumsumexp(lib.tensor([-1000.0, 0, float("-inf"), 5, 800, 1]), 0),
    "logcumsumexp all -inf": lambda lib: lib.tensor([[float("-inf")] * 3], dtype=lib.float64).logcumsumexp(1),
    "quantile every interpolation": lambda lib: [
        lib.quantile(lib.tensor(A, dtype=lib.float32), q, 1, interpolation=i)
        for q in (0.0, 0.25, 0.5, 0.7, 1.0)
        for i in ("linear", "lower", "higher", "midpoint", "nearest")
    ],
    "quantile q tensor keepdim": lambda lib: lib.quantile(
        lib.tensor(A, dtype=lib.float64), lib.tensor([0.1, 0.9], dtype=lib.float64), 0, True
    ),
    "quantile all keepdim": lambda lib: lib.tensor(A, dtype=lib.float64).quantile(0.4, keepdim=True),
    "quantile nan rows": lambda lib: (lib.quantile(lib.tensor(F), 0.5, 1), lib.nanquantile(lib.tensor(F), 0.5, 1)),
    "nanquantile all": lambda lib: lib.tensor(F).nanquantile(lib.tensor([0.0, 0.5, 1.0], dtype=lib.float64)),
    "mode ties take the smallest, last index": lambda lib: lib.mode(lib.tensor([[1, 2, 2, 3, 3], [0, 0, 1, 1, 1]]), 1),
    "mode float keepdim dim 0": lambda lib: lib.tensor([[1.5, 2.0], [1.5, 0.0], [0.0, 0.0]]).mode(0, True),
    "mode 0-d": lambda lib: lib.mode(lib.tensor(3.0)),
    "unique_consecutive flat": lambda lib: lib.unique_consecutive(
        lib.tensor([[1, 1, 2], [2, 3, 1]]), return_inverse=True, return_counts=True
    ),
    "unique_consecutive dim": lambda lib: lib.tensor([[1, 1], [1, 1], [2, 3]]).unique_consecutive(
        return_inverse=True, return_counts=True, dim=0
    ),
    "unique_consecutive counts only": lambda lib: lib.unique_consecutive(
        lib.tensor([5.0, 5.0, 1.0]), return_counts=True
    ),
    "unique_consecutive empty": lambda lib: lib.unique_consecutive(
        lib.tensor([], dtype=lib.int64), return_inverse=True, return_counts=True
    ),
    "renorm float32": lambda lib: lib.renorm(lib.tensor(A, dtype=lib.float32), 2, 1, 5.0),
    "renorm zero maxnorm and small slices": lambda lib: (
        lib.tensor(A, dtype=lib.float64).renorm(1, 0, 0.0),
        lib.tensor(A, dtype=lib.float64).renorm(2, 0, 100.0),
    ),
}


@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
@pytest.mark.parametrize("name", list(VALUES))
def test_values_and_dtypes_match_torch(torch, name):
    _check_same(VALUES[name](numbagrad), VALUES[name](torch))


ERRORS = {
    "movedim count": lambda lib: lib.movedim(lib.zeros(2, 3), (0, 1), (0,)),
    "movedim repeated": lambda lib: lib.movedim(lib.zeros(2, 3), (0, 0), (0, 1)),
    "select range": lambda lib: lib.zeros(3, 4).select(0, 3),
    "select 0-d": lambda lib: lib.zeros(()).select(0, 0),
    "unflatten sizes": lambda lib: lib.zeros(2, 6).unflatten(1, (4, 2)),
    "take range": lambda lib: lib.take(lib.zeros(2, 3), lib.tensor([6])),
    "take dtype": lambda lib: lib.take(lib.zeros(2, 3), lib.tensor([1.0])),
    "take_along_dim dims": lambda lib: lib.take_along_dim(lib.zeros(2, 3), lib.tensor([0]), 1),
    "take_along_dim dtype": lambda lib: lib.take_along_dim(lib.zeros(2, 3), lib.tensor([[0.0]]), 1),
    "index_copy dtype": lambda lib: lib.zeros(2, 3).index_copy(0, lib.tensor([0]), lib.zeros(1, 3, dtype=lib.float64)),
    "index_copy range": lambda lib: lib.zeros(2, 3).index_copy(0, lib.tensor([2]), lib.zeros(1, 3)),
    "tensor_split 0-d": lambda lib: lib.tensor_split(lib.tensor(1.0), 2),
    "tensor_split zero sections": lambda lib: lib.tensor_split(lib.zeros(3), 0),
    "hsplit divisible": lambda lib: lib.hsplit(lib.zeros(2, 4), 3),
    "hsplit 0-d": lambda lib: lib.hsplit(lib.tensor(1.0), 1),
    "vsplit 1-D": lambda lib: lib.vsplit(lib.zeros(4), 2),
    "dsplit 2-D": lambda lib: lib.dsplit(lib.zeros(2, 4), 2),
    "hstack empty": lambda lib: lib.hstack([]),
    "column_stack empty": lambda lib: lib.column_stack([]),
    "rot90 one dim": lambda lib: lib.rot90(lib.zeros(2, 2), 1, (0,)),
    "rot90 same dims": lambda lib: lib.rot90(lib.zeros(2, 2), 1, (1, -1)),
    "rot90 1-D": lambda lib: lib.rot90(lib.zeros(2)),
    "fliplr 1-D": lambda lib: lib.fliplr(lib.zeros(2)),
    "flipud 0-d": lambda lib: lib.flipud(lib.tensor(1.0)),
    "diff 0-d": lambda lib: lib.diff(lib.tensor(1.0)),
    "diff negative order": lambda lib: lib.diff(lib.zeros(3), -1),
    "inner sizes": lambda lib: lib.inner(lib.zeros(2, 3), lib.zeros(2)),
    "vdot sizes": lambda lib: lib.vdot(lib.zeros(2), lib.zeros(3)),
    "tensordot mismatch": lambda lib: lib.tensordot(lib.zeros(2, 3), lib.zeros(2, 3), 1),
    "tensordot negative": lambda lib: lib.tensordot(lib.zeros(2), lib.zeros(2), -1),
    "addmv sizes": lambda lib: lib.addmv(lib.zeros(2), lib.zeros(2, 3), lib.zeros(4)),
    "addr 2-D vec": lambda lib: lib.addr(lib.zeros(2, 2), lib.zeros(2, 1), lib.zeros(2)),
    "addbmm batches": lambda lib: lib.addbmm(lib.zeros(2, 2), lib.zeros(3, 2, 4), lib.zeros(2, 4, 2)),
    "block_diag 3-D": lambda lib: lib.block_diag(lib.zeros(2), lib.zeros(1, 1, 1)),
    "cartesian_prod 2-D": lambda lib: lib.cartesian_prod(lib.zeros(2, 2)),
    "diag_embed same dims": lambda lib: lib.diag_embed(lib.zeros(2, 2), 0, 1, -2),
    "tril_indices negative": lambda lib: lib.tril_indices(-1, 2),
    "triu_indices negative col": lambda lib: lib.triu_indices(2, -2),
    "broadcast_shapes clash": lambda lib: lib.broadcast_shapes((2,), (3,)),
    "nanmean int": lambda lib: lib.nanmean(lib.tensor([1, 2])),
    "nansum dim": lambda lib: lib.nansum(lib.zeros(2), 1),
    "select_scatter size": lambda lib: lib.select_scatter(lib.zeros(2, 3), lib.zeros(4), 0, 0),
    "select_scatter index": lambda lib: lib.select_scatter(lib.zeros(2, 3), lib.zeros(3), 0, 5),
    "slice_scatter size": lambda lib: lib.slice_scatter(lib.zeros(2, 3), lib.zeros(2, 2), 1, 0, 1),
    "diagonal_scatter size": lambda lib: lib.diagonal_scatter(lib.zeros(2, 3), lib.zeros(3)),
    "aminmax empty": lambda lib: lib.aminmax(lib.zeros(0)),
    "aminmax empty dim": lambda lib: lib.aminmax(lib.zeros(2, 0), dim=1),
    "kthvalue k": lambda lib: lib.kthvalue(lib.zeros(2, 3), 4),
    "median empty dim": lambda lib: lib.median(lib.zeros(2, 0), 1),
    "combinations 2-D": lambda lib: lib.combinations(lib.zeros(2, 2)),
    "bincount negative": lambda lib: lib.bincount(lib.tensor([-1])),
    "bincount float": lambda lib: lib.bincount(lib.tensor([1.0])),
    "histc int": lambda lib: lib.histc(lib.tensor([1, 2])),
    "trapezoid x count": lambda lib: lib.trapezoid(lib.zeros(3), lib.zeros(2)),
    "cumulative_trapezoid x count": lambda lib: lib.cumulative_trapezoid(lib.zeros(3), lib.zeros(2)),
    "trapezoid x and dx": lambda lib: lib.trapezoid(lib.zeros(3), lib.zeros(3), dx=1),
    "frexp int": lambda lib: lib.frexp(lib.tensor([1])),
    "logcumsumexp int": lambda lib: lib.logcumsumexp(lib.tensor([1, 2]), 0),
    "quantile empty": lambda lib: lib.quantile(lib.zeros(0), 0.5),
    "quantile q range": lambda lib: lib.quantile(lib.zeros(3), 1.5),
    "quantile q tensor range": lambda lib: lib.quantile(lib.zeros(3), lib.tensor([0.5, 1.5])),
    "quantile q 2-D": lambda lib: lib.quantile(lib.zeros(3), lib.tensor([[0.5]])),
    "quantile int": lambda lib: lib.quantile(lib.tensor([1, 2]), 0.5),
    "quantile q dtype": lambda lib: lib.quantile(lib.zeros(3), lib.tensor([0.5], dtype=lib.float64)),
    "quantile interpolation": lambda lib: lib.quantile(lib.zeros(3), 0.5, interpolation="foo"),
    "nanquantile q range": lambda lib: lib.nanquantile(lib.zeros(3), 2.0),
    "mode empty dim": lambda lib: lib.mode(lib.zeros(2, 0), 1),
    "renorm p": lambda lib: lib.renorm(lib.zeros(3, 4), 0, 0, 1),
    "renorm maxnorm": lambda lib: lib.renorm(lib.zeros(3, 4), 2, 0, -1),
    "renorm dim": lambda lib: lib.renorm(lib.zeros(3, 4), 2, 2, 1),
    "renorm int": lambda lib: lib.renorm(lib.zeros(3, 4, dtype=lib.int64), 2, 0, 1),
    "renorm 0-d": lambda lib: lib.renorm(lib.tensor(1.0), 2, 0, 1),
    "poisson negative rate": lambda lib: lib.poisson(lib.tensor([-1.0])),
    "poisson int": lambda lib: lib.poisson(lib.tensor([1])),
    "gcd float": lambda lib: lib.gcd(lib.tensor([1.0]), lib.tensor([2])),
    "bucketize 2-D boundaries": lambda lib: lib.bucketize(lib.tensor([1]), lib.tensor([[1, 2]])),
    "searchsorted side": lambda lib: lib.searchsorted(lib.tensor([1, 2]), lib.tensor([1]), side="middle"),
    "searchsorted opposite": lambda lib: lib.searchsorted(lib.tensor([1, 2]), lib.tensor([1]), right=True, side="left"),
    "searchsorted leading dims": lambda lib: lib.searchsorted(lib.tensor([[1, 2]]), lib.tensor([[1], [2]])),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(torch, name):
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch)
    with pytest.raises(type(theirs.value)) as ours:
        ERRORS[name](numbagrad)
    assert str(ours.value) == str(theirs.value)


def test_index_copy_in_place_writes_and_keeps_the_gradient_of_the_source(torch):
    results = []
    for lib in (numbagrad, torch):
        x = lib.zeros(3, 2, dtype=lib.float64)
        src = lib.tensor([[1.0, 2.0]], dtype=lib.float64, requires_grad=True)
        y = x.index_copy_(0, lib.tensor([1]), src)
        (y * lib.arange(6, dtype=lib.float64).reshape(3, 2)).sum().backward()
        results.append((y is x, x.detach().numpy().tolist(), src.grad.numpy().tolist()))
    assert results[0] == results[1]


def test_take_error_leaves_the_input_untouched():
    x = numbagrad.tensor([1.0, 2.0])
    with pytest.raises(IndexError):
        x.take(numbagrad.tensor([2]))
    assert x.tolist() == [1.0, 2.0]


def test_select_is_a_view_sharing_storage():
    x = numbagrad.zeros(2, 3)
    x.select(1, 2).fill_(5.0)
    assert x.tolist() == [[0.0, 0.0, 5.0], [0.0, 0.0, 5.0]]


def test_chain_matmul_warns_as_deprecated(torch):
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        numbagrad.chain_matmul(numbagrad.ones(2, 2), numbagrad.ones(2, 2))


def test_nan_to_num_in_place_and_randint_like(torch):
    x = numbagrad.tensor([float("nan"), float("inf"), 1.0])
    assert numbagrad.nan_to_num_(x, 2.0, 5.0) is x
    assert x.tolist() == [2.0, 5.0, 1.0]
    r = numbagrad.randint_like(numbagrad.zeros(50, dtype=numbagrad.int32), 3, 6)
    assert r.dtype == numbagrad.int32 and r.shape == (50,)
    assert 3 <= int(r.min()) and int(r.max()) < 6
    assert int(numbagrad.randint_like(numbagrad.zeros(20), 2).max()) < 2


def test_ldexp_gradient_of_a_float_exponent_matches_torch(torch):
    grads = []
    for lib in (numbagrad, torch):
        x = lib.tensor([1.5, -2.0], dtype=lib.float64, requires_grad=True)
        e = lib.tensor([2.0, -1.0], dtype=lib.float64, requires_grad=True)
        lib.ldexp(x, e).sum().backward()
        grads.append((x.grad.numpy().tolist(), e.grad.numpy().tolist()))
    np.testing.assert_allclose(np.array(grads[0], dtype=float), np.array(grads[1], dtype=float), rtol=1e-12)


def test_median_gradient_is_shared_by_ties_as_torch(torch):
    grads = []
    for lib in (numbagrad, torch):
        x = lib.tensor([3.0, 1.0, 3.0, 5.0, 0.0, 3.0], dtype=lib.float64, requires_grad=True)
        (lib.median(x) + lib.aminmax(x).max * 2).backward()
        grads.append(x.grad.numpy().tolist())
    assert grads[0] == grads[1]


@pytest.mark.parametrize(
    "fn",
    [
        lambda y, x: numbagrad.trapezoid(y, x, dim=0),
        lambda y, x: numbagrad.trapezoid(y, dx=0.5),
        lambda y, x: numbagrad.cumulative_trapezoid(y, x, dim=0),
        lambda y, x: numbagrad.cumulative_trapezoid(y, dx=2.0, dim=1),
    ],
)
def test_trapezoid_gradients_pass_gradcheck(fn):
    assert gradcheck(fn, (_f64(3, 2), numbagrad.tensor([0.0, 0.5, 2.0], dtype=numbagrad.float64, requires_grad=True)))


def test_cummax_gradient_goes_to_the_running_maxima(torch):
    grads = []
    for lib in (numbagrad, torch):
        x = lib.tensor([1.0, 3.0, 2.0, 3.0, 0.0], dtype=lib.float64, requires_grad=True)
        (lib.cummax(x, 0).values * lib.arange(5)).sum().backward()
        grads.append(x.grad.numpy().tolist())
    assert grads[0] == grads[1]


def test_mode_gradient_goes_to_the_returned_index(torch):
    grads = []
    for lib in (numbagrad, torch):
        x = lib.tensor([[1.0, 2.0, 2.0, 0.5], [3.0, 3.0, 1.0, 1.0]], dtype=lib.float64, requires_grad=True)
        (lib.mode(x, 1).values * lib.tensor([2.0, 5.0], dtype=lib.float64)).sum().backward()
        grads.append(x.grad.numpy().tolist())
    assert grads[0] == grads[1]


def test_poisson_draws_have_the_rates_as_means_and_a_zero_gradient():
    numbagrad.manual_seed(0)
    rates = numbagrad.tensor([0.0, 0.5, 4.0, 30.0], dtype=numbagrad.float64, requires_grad=True)
    draws = numbagrad.poisson(rates.expand(4000, 4).t()).mean(1)
    assert draws.dtype == numbagrad.float64 and type(draws.grad_fn).__name__ == "MeanBackward1"
    np.testing.assert_allclose(draws.detach().numpy(), [0.0, 0.5, 4.0, 30.0], atol=0.4)
    numbagrad.poisson(rates).sum().backward()
    assert rates.grad.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_nansum_gradient_is_zero_at_nans():
    x = numbagrad.tensor([1.0, float("nan"), 3.0], requires_grad=True)
    numbagrad.nansum(x * 2).backward()
    assert x.grad.tolist() == [2.0, 0.0, 2.0]


def _f64(*shape):
    return numbagrad.tensor(np.random.default_rng(1).uniform(-1, 1, shape), requires_grad=True)


SECOND_ORDER = {
    "take": lambda x: numbagrad.take(x, numbagrad.tensor([[0, 5], [5, 2]])) ** 2,
    "index_copy": lambda x: x.index_copy(0, numbagrad.tensor([1]), x[:1] * x[1:2]) ** 2,
    "rot90": lambda x: x.rot90(3) ** 2,
    "addmv": lambda x: numbagrad.addmv(x[0, :2], x, x[1], beta=0.5, alpha=2.0) ** 2,
    "addr": lambda x: numbagrad.addr(x, x[:, 0], x[0], alpha=-1.0) ** 2,
    "addbmm": lambda x: numbagrad.addbmm(x[:, :2], x.reshape(1, 2, 3), x.t().reshape(1, 3, 2)) ** 2,
    "vdot": lambda x: numbagrad.vdot(x[0], x[1] ** 2),
    "block_diag": lambda x: numbagrad.block_diag(x, x[0]) ** 2,
    "diag_embed": lambda x: numbagrad.diag_embed(x, 1) ** 2,
    "nansum": lambda x: numbagrad.nansum(x**2, 1),
    "ldexp": lambda x: numbagrad.ldexp(x**2, numbagrad.tensor([1, 0, -1])),
    "select_scatter": lambda x: numbagrad.select_scatter(x, x[1] ** 2, 0, 0) ** 2,
    "slice_scatter": lambda x: numbagrad.slice_scatter(x, x[:, :1] ** 2, 1, 2) ** 2,
    "frexp": lambda x: numbagrad.frexp(x * 7).mantissa ** 2,
    "logcumsumexp": lambda x: numbagrad.logcumsumexp(x * 3, 1) ** 2,
    "renorm": lambda x: numbagrad.renorm(x * 2, 2, 0, 1.0) ** 2,
    "renorm p=3": lambda x: numbagrad.renorm(x * 2 + 3, 3.0, 1, 2.0) ** 2,
    "diagonal_scatter": lambda x: numbagrad.diagonal_scatter(x, x[0, :2] ** 2, 1) ** 2,
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_derivatives_pass_gradgradcheck(name):
    assert gradgradcheck(SECOND_ORDER[name], (_f64(2, 3),))


def test_movedim_of_a_0_dim_tensor_is_a_view_of_it(torch):
    for lib in (numbagrad, torch):
        x = lib.tensor(2.0, requires_grad=True)
        y = x.movedim(0, -1)
        assert y.shape == () and y._base is x
        y.backward()
        assert x.grad.item() == 1.0
