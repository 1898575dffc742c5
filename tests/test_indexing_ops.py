"""Indexing ops and their in-place forms beyond the generated declaration tests: every form's node name,
values and gradients, torch's errors, and in-place forms that leave the tensor untouched when they refuse."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from torch_same import same

pytestmark = pytest.mark.torch


X = np.arange(12.0).reshape(3, 4) / 7 - 0.5
IDX = np.array([[0, 1], [2, 3], [1, 0]])


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x, i: lib.gather(x, 1, i), id="gather"),
        pytest.param(lambda lib, x, i: x.gather(0, i[:2, :1]), id="gather-smaller-index"),
        pytest.param(lambda lib, x, i: lib.gather(x, 1, i.to(lib.int32)), id="gather-int32"),
        pytest.param(lambda lib, x, i: lib.gather(x, 0, lib.tensor([[0], [1], [2], [0]])), id="gather-longer-on-dim"),
        pytest.param(lambda lib, x, i: lib.scatter(x, 1, i[:, :1], x[:, 2:3] * 2), id="scatter-src"),
        pytest.param(lambda lib, x, i: lib.scatter(x, 1, i, 9.0), id="scatter-value"),
        pytest.param(lambda lib, x, i: x.scatter(1, i, value=-1.0), id="scatter-value-keyword"),
        pytest.param(lambda lib, x, i: lib.scatter_add(x, 1, i, x[:, :2] * 3), id="scatter_add"),
        pytest.param(lambda lib, x, i: lib.scatter_add(x, 0, lib.tensor([[0, 0, 0, 0]]), x[:1]), id="scatter_add-dup"),
        pytest.param(lambda lib, x, i: lib.index_select(x, 1, lib.tensor([3, 0, 3])), id="index_select"),
        pytest.param(lambda lib, x, i: x.index_select(0, lib.tensor(1)), id="index_select-0d-index"),
        pytest.param(lambda lib, x, i: lib.index_add(x, 0, lib.tensor([0, 0]), x[1:] * 2, alpha=-1), id="index_add"),
        pytest.param(lambda lib, x, i: lib.index_fill(x, 1, lib.tensor([0, -2]), 4.0), id="index_fill-negative-wraps"),
        pytest.param(lambda lib, x, i: lib.index_fill(x, 1, lib.tensor([0, 2]), x[0, 0] * 2), id="index_fill-tensor"),
        pytest.param(lambda lib, x, i: lib.index_put(x, (lib.tensor([0, 2]),), x[1] * 2), id="index_put"),
        pytest.param(
            lambda lib, x, i: x.index_put((lib.tensor([0, 0]), lib.tensor([1, 1])), x[2, :2], True),
            id="index_put-accumulate",
        ),  # fmt: skip
        pytest.param(
            lambda lib, x, i: lib.index_put(x, (x > 0,), lib.tensor(0.5, dtype=lib.float64)), id="index_put-mask"
        ),
        pytest.param(lambda lib, x, i: lib.masked_fill(x, x > 0.2, 0.0), id="masked_fill"),
        pytest.param(lambda lib, x, i: x.masked_fill(x[0] > 0, x[1, 1] * 3), id="masked_fill-tensor-broadcast-mask"),
        pytest.param(lambda lib, x, i: lib.masked_fill(x[:1], x > 0, 2.0), id="masked_fill-mask-grows-result"),
        pytest.param(lambda lib, x, i: lib.masked_select(x, x > 0), id="masked_select"),
        pytest.param(lambda lib, x, i: lib.masked_select(x[:, :1], x > 0), id="masked_select-broadcast"),
        pytest.param(lambda lib, x, i: lib.masked_scatter(x, x > 0, x.flatten() * -2), id="masked_scatter"),
        pytest.param(lambda lib, x, i: x.masked_scatter(x[0] > 0, (x * 5)[:2]), id="masked_scatter-broadcast-mask"),
        pytest.param(lambda lib, x, i: lib.repeat_interleave(x, 2), id="repeat_interleave-int"),
        pytest.param(lambda lib, x, i: x.repeat_interleave(3, dim=1), id="repeat_interleave-int-dim"),
        pytest.param(lambda lib, x, i: lib.repeat_interleave(x, lib.tensor([1, 0, 2]), dim=0), id="repeat-tensor"),
        pytest.param(lambda lib, x, i: lib.repeat_interleave(x, lib.tensor([2]), dim=1), id="repeat-one-count"),
        pytest.param(lambda lib, x, i: lib.repeat_interleave(lib.tensor([2, 0, 1])), id="repeat-counts-alone"),
    ],
)
def test_indexing_forms_match_torch(torch, fn):
    same(torch, fn, X.copy(), IDX.copy())


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda lib, t, x, i: t.scatter_(1, i, 5.0), id="scatter_-value"),
        pytest.param(lambda lib, t, x, i: t.scatter_(1, i[:, :1], x[:, :1] * 2), id="scatter_-src"),
        pytest.param(lambda lib, t, x, i: t.scatter_add_(1, i, x[:, :2] * 2), id="scatter_add_"),
        pytest.param(lambda lib, t, x, i: t.index_add_(0, lib.tensor([0, 2]), x[:2] * 3, alpha=2), id="index_add_"),
        pytest.param(lambda lib, t, x, i: t.index_fill_(1, lib.tensor([1, 3]), -1.0), id="index_fill_"),
        pytest.param(
            lambda lib, t, x, i: t.index_put_((lib.tensor([0, 2]), lib.tensor([1, 1])), x[0, :2] * 1, True),
            id="index_put_",
        ),  # fmt: skip
        pytest.param(lambda lib, t, x, i: t.masked_scatter_(x > 0.3, x.flatten() * 2), id="masked_scatter_"),
        pytest.param(lambda lib, t, x, i: t.masked_fill_(x > 0.3, 0.5), id="masked_fill_"),
        pytest.param(lambda lib, t, x, i: t.masked_fill_(x > 0.3, x[0, 1]), id="masked_fill_-tensor"),
        pytest.param(lambda lib, t, x, i: t.fill_diagonal_(7.0), id="fill_diagonal_"),
        pytest.param(lambda lib, t, x, i: t.fill_diagonal_(x[0, 0].detach()), id="fill_diagonal_-0d-tensor"),
    ],
)
def test_inplace_forms_match_torch_and_return_the_tensor(torch, op):
    def run(lib, x, i):
        t = x * 1 + 1
        assert op(lib, t, x, i) is t
        return t

    same(torch, run, X.copy(), IDX.copy())


@pytest.mark.parametrize("shape", [(7, 3), (3, 7), (3, 3, 3), (2, 5)])
@pytest.mark.parametrize("wrap", [False, True])
def test_fill_diagonal_fills_the_same_elements_as_torch(torch, shape, wrap):
    ours, theirs = numbagrad.zeros(*shape), torch.zeros(*shape)
    ours.fill_diagonal_(1.0, wrap=wrap)
    theirs.fill_diagonal_(1.0, wrap=wrap)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_inplace_forms_without_autograd_write_the_storage_and_bump_the_version():
    x = numbagrad.zeros(3, 4)
    view = x[1]
    before = x._version
    x.index_fill_(1, numbagrad.tensor([0]), 2.0)
    x.masked_fill_(x == 0, 1.0)
    assert view.tolist() == [2.0, 1.0, 1.0, 1.0] and x._version == before + 2


def _errors_match(torch, call, kinds=(RuntimeError, IndexError, TypeError)):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises(kinds) as info:
            call(lib)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda lib, x: x.masked_fill(x, 1.0), id="masked_fill-float-mask"),
        pytest.param(lambda lib, x: x.masked_fill(lib.tensor([1, 0, 1, 0]), 1.0), id="masked_fill-long-mask"),
        pytest.param(lambda lib, x: x.masked_fill(x > 0, lib.ones(3)), id="masked_fill-1d-value"),
        pytest.param(lambda lib, x: lib.masked_select(x, x), id="masked_select-float-mask"),
        pytest.param(lambda lib, x: lib.gather(x, 1, lib.tensor([[5]])), id="gather-out-of-range"),
        pytest.param(lambda lib, x: lib.gather(x, 1, lib.tensor([0])), id="gather-dims"),
        pytest.param(lambda lib, x: lib.gather(x, 0, lib.tensor([[0.0]])), id="gather-float-index"),
        pytest.param(lambda lib, x: lib.scatter(x, 0, lib.tensor([[3]]), 1.0), id="scatter-out-of-range"),
        pytest.param(lambda lib, x: lib.scatter(x, 0, lib.tensor([[0.0]]), 1.0), id="scatter-float-index"),
        pytest.param(lambda lib, x: lib.scatter(x, 0, lib.tensor([[0, 1, 2]]), lib.ones(1, 3)), id="scatter-src-dtype"),
        pytest.param(lambda lib, x: lib.scatter_add(x, 0, lib.tensor([[0]]), lib.ones(1, 1)), id="scatter_add-dtype"),
        pytest.param(lambda lib, x: lib.index_select(x, 0, lib.tensor([[0]])), id="index_select-2d-index"),
        pytest.param(lambda lib, x: lib.index_select(x, 0, lib.tensor([4])), id="index_select-out-of-range"),
        pytest.param(lambda lib, x: lib.index_select(x, 0, lib.tensor([0.0])), id="index_select-float-index"),
        pytest.param(lambda lib, x: x.index_add(0, lib.tensor([0]), lib.ones(1, 4)), id="index_add-dtype"),
        pytest.param(
            lambda lib, x: x.index_add(0, lib.tensor([0]), lib.ones(2, 4, dtype=lib.float64)), id="index_add-count"
        ),  # fmt: skip
        pytest.param(lambda lib, x: x.index_fill(0, lib.tensor([5]), 1.0), id="index_fill-out-of-range"),
        pytest.param(lambda lib, x: x.index_fill(0, lib.tensor([[0]]), 1.0), id="index_fill-2d-index"),
        pytest.param(lambda lib, x: x.index_put((lib.tensor([5]),), lib.tensor(1.0)), id="index_put-dtype"),
        pytest.param(
            lambda lib, x: x.index_put((lib.tensor([5]),), lib.tensor(1.0, dtype=lib.float64)),
            id="index_put-out-of-range",
        ),  # fmt: skip
        pytest.param(
            lambda lib, x: x.index_add(0, lib.tensor([-1]), lib.ones(1, 4, dtype=lib.float64)), id="index_add-negative"
        ),  # fmt: skip
        pytest.param(lambda lib, x: x.index_select(0, lib.tensor([-1])), id="index_select-negative"),
        pytest.param(lambda lib, x: lib.gather(x, 0, lib.tensor([[-1]])), id="gather-negative"),
        pytest.param(lambda lib, x: x.fill_diagonal_(x[0, 0].requires_grad_()), id="fill_diagonal_-grad-tensor"),
        pytest.param(lambda lib, x: x.masked_scatter(x > 0, lib.ones(1, dtype=lib.float64)), id="masked_scatter-few"),
        pytest.param(lambda lib, x: x.masked_scatter(x > 0, lib.ones(12)), id="masked_scatter-dtype"),
        pytest.param(lambda lib, x: lib.zeros(2, 3, 3).fill_diagonal_(1), id="fill_diagonal_-unequal"),
        pytest.param(lambda lib, x: lib.zeros(3).fill_diagonal_(1), id="fill_diagonal_-1d"),
        pytest.param(lambda lib, x: lib.repeat_interleave(x, -1), id="repeat_interleave-negative"),
        pytest.param(lambda lib, x: lib.repeat_interleave(x, lib.tensor([1, 2]), 0), id="repeat_interleave-sizes"),
    ],
)
def test_indexing_errors_match_torch(torch, call):
    _errors_match(torch, lambda lib: call(lib, lib.tensor(X)))


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda lib, t: t.masked_fill_(lib.ones(2, 3, 4) > 0, 1.0), id="masked_fill_-grows"),
        pytest.param(
            lambda lib, t: t.index_add_(0, lib.tensor([9]), lib.ones(1, 4, dtype=lib.float64)),
            id="index_add_-out-of-range",
        ),  # fmt: skip
        pytest.param(lambda lib, t: t.scatter_(0, lib.tensor([[7]]), 1.0), id="scatter_-out-of-range"),
    ],
)
def test_refused_inplace_forms_leave_the_tensor_untouched(torch, op):
    _errors_match(torch, lambda lib: op(lib, lib.tensor(X)))
    t = numbagrad.tensor(X)
    with pytest.raises((RuntimeError, IndexError)):
        op(numbagrad, t)
    np.testing.assert_array_equal(t.numpy(), X)


def test_inplace_writes_on_a_leaf_that_requires_grad_are_refused():
    x = numbagrad.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        x.masked_fill_(x > 0, 0.0)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        x.fill_diagonal_(0.0)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_records_torchs_node_without_a_derivative(torch, reduce):
    results = []
    for lib in (numbagrad, torch):
        src = lib.tensor([[1.5, 2.0]], requires_grad=True)
        out = lib.ones(2, 3).scatter(1, lib.tensor([[0, 2]]), src, reduce=reduce)
        with pytest.raises(RuntimeError, match="^derivative for aten::scatter is not implemented$"):
            out.sum().backward()
        results.append((type(out.grad_fn).__name__, out.detach().numpy()))
    assert results[0][0] == results[1][0] == "NotImplemented"
    np.testing.assert_array_equal(results[0][1], results[1][1])


@pytest.mark.parametrize(
    "index", [0, slice(None), (slice(1, 1),), [0], (0,), (None, 0), (Ellipsis, 0), True, False, None, Ellipsis]
)
def test_indexing_a_0_dim_tensor_as_torch(torch, index):
    results = []
    for lib in (numbagrad, torch):
        try:
            results.append(lib.tensor(2.0)[index].tolist())
        except IndexError as error:
            results.append(str(error))
    assert results[0] == results[1]


@pytest.mark.parametrize(("shape", "src_shape"), [((2,), (2, 3, 2)), ((3, 1), (3, 4))])
def test_error_copy_from_a_source_that_broadcasts_to_a_larger_shape(torch, shape, src_shape):
    messages = []
    for lib in (numbagrad, torch):
        with pytest.raises(RuntimeError) as info:
            lib.zeros(shape).copy_(lib.ones(src_shape))
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("index", [0, slice(None), (0,), [0], None, Ellipsis])
def test_writing_into_a_0_dim_tensor_through_an_index_as_torch(torch, index):
    results = []
    for lib in (numbagrad, torch):
        t = lib.tensor(2.0)
        try:
            t[index] = 1.0
            results.append(t.tolist())
        except IndexError as error:
            results.append(str(error))
    assert results[0] == results[1]


def test_error_copy_from_an_overlapping_source_comes_before_the_shape_check(torch):
    messages = []
    for lib in (numbagrad, torch):
        c = lib.tensor([1.0, 2.0, 3.0, 4.0])
        with pytest.raises(RuntimeError) as info:
            c.unflatten(0, (2, -1)).copy_(c)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("index", [[0], [0, 1], 0])
def test_error_an_index_into_an_empty_dim_as_torch(torch, index):
    messages = []
    for lib in (numbagrad, torch):
        with pytest.raises(IndexError) as info:
            lib.zeros(0, 3)[index]
        messages.append(str(info.value))
    assert messages[0] == messages[1]


# --- rows picked by one integer tensor (an embedding lookup ``C[X]``) ---------------------------------------------
ROW_INDICES = {
    "2-d with repeats": np.array([[0, 2, 2], [1, 0, 2]]),
    "negative": np.array([-1, 0, -3, 1]),
    "int32": np.array([[2], [0]], np.int32),
    "3-d": np.array([[[1, 1]], [[0, 2]]]),
}


@pytest.mark.parametrize("index", ROW_INDICES.values(), ids=ROW_INDICES.keys())
def test_rows_by_an_integer_tensor_values_gradients_and_node_match_torch(torch, index):
    table = np.arange(15.0).reshape(3, 5) / 4 - 1
    results = []
    for lib in (numbagrad, torch):
        c = lib.tensor(table, requires_grad=True)
        out = c[lib.tensor(index)]
        out.backward(lib.tensor(np.linspace(-1, 2, out.numel()).reshape(tuple(out.shape))))
        results.append((type(out.grad_fn).__name__, out.detach().numpy(), c.grad.numpy()))
    (name, values, grad), (their_name, their_values, their_grad) = results
    assert name == their_name
    np.testing.assert_array_equal(values, their_values)
    np.testing.assert_allclose(grad, their_grad, rtol=1e-12, atol=1e-12)


def test_rows_by_an_integer_tensor_out_of_range_raise_torchs_error(torch):
    messages = []
    for lib in (numbagrad, torch):
        c = lib.zeros(3, 2)
        with pytest.raises(IndexError) as info:
            c[lib.tensor([[0, 3]])]
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_rows_of_a_table_with_an_empty_dim_as_torch(torch):
    shapes = [tuple(lib.zeros(3, 0)[lib.tensor([[5, 1]])].shape) for lib in (numbagrad, torch)]
    assert shapes[0] == shapes[1]
