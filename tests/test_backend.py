"""One backend interface: ``backend.cpu`` and ``backend.cuda`` export the same functions, and each gives numpy's
result on small inputs. The cuda cases run where CUDA or Numba's simulator is available, in their own process:

    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/test_backend.py
"""

import inspect
import math

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import codegen, cpu, cuda
from numbagrad.scalar_math import ROWS

F64 = np.dtype(np.float64)  # the backends take numpy dtype objects
BACKENDS = ["cpu"] + (["cuda"] if numbagrad.cuda.is_available() else [])


@pytest.fixture(params=BACKENDS)
def b(request):
    return cpu if request.param == "cpu" else cuda


def put(b, x, dtype=None):
    """Storage of ``b`` holding ``x``."""
    return b.from_host(np.asarray(x, dtype=dtype))


def get(b, a) -> np.ndarray:
    out = b.to_host(a)
    assert isinstance(out, np.ndarray)
    return out


# --- the interface ------------------------------------------------------------------------------------------
def test_both_backends_export_the_same_functions():
    assert cpu.__all__ == cuda.__all__
    for module in (cpu, cuda):
        assert all(inspect.isfunction(getattr(module, name)) for name in module.__all__)
    public = {n for n, f in vars(cpu).items() if inspect.isfunction(f) and f.__module__ == cpu.__name__}
    assert {n for n in public if not n.startswith("_")} == set(cpu.__all__)


def test_same_parameters_in_both_backends():
    for name in cpu.__all__:
        ours, theirs = inspect.signature(getattr(cpu, name)), inspect.signature(getattr(cuda, name))
        assert list(ours.parameters) == list(theirs.parameters), name


# --- storage ------------------------------------------------------------------------------------------------
def test_empty_zeros_full(b):
    assert get(b, b.empty((2, 3), np.float32)).shape == (2, 3)
    assert get(b, b.empty((2, 3), np.float32)).dtype == np.float32
    np.testing.assert_array_equal(get(b, b.zeros((2, 2), np.int64)), np.zeros((2, 2), np.int64))
    full = get(b, b.full((3,), 2.5, np.float64))
    assert full.dtype == np.float64 and full.tolist() == [2.5, 2.5, 2.5]
    assert get(b, b.full((), 7, np.int32)).shape == ()


def test_from_host_and_to_host_round_trip_zero_dim_and_dtype(b):
    for x in (np.arange(6.0).reshape(2, 3), np.array(3.5), np.array([True, False]), np.arange(4, dtype=np.int32)):
        back = get(b, put(b, x))
        assert back.shape == x.shape and back.dtype == x.dtype
        np.testing.assert_array_equal(back, x)


def test_copy_is_fresh_and_contiguous(b):
    a = put(b, np.arange(6.0).reshape(2, 3))
    t = b.getitem(a, (slice(None), slice(None, None, 2)))  # a strided view
    c = b.copy(t)
    assert b.is_contiguous(c) and not b.is_contiguous(t)
    b.setitem(c, (0, 0), -1.0)
    np.testing.assert_array_equal(get(b, a), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(get(b, c), [[-1.0, 2.0], [3.0, 5.0]])


def test_astype_copies_in_the_new_dtype(b):
    a = put(b, [1.7, -2.2, 0.0])
    for dtype, expected in ((np.int64, [1, -2, 0]), (np.bool_, [True, True, False]), (np.float32, [1.7, -2.2, 0.0])):
        out = get(b, b.astype(a, dtype))
        assert out.dtype == dtype
        np.testing.assert_allclose(out, np.array(expected, dtype))


def test_ascontiguous_keeps_contiguous_storage_and_copies_views(b):
    a = put(b, np.arange(6.0).reshape(2, 3))
    assert b.ascontiguous(a) is a
    t = b.getitem(a, (slice(None), 1))
    c = b.ascontiguous(t)
    assert b.is_contiguous(c)
    np.testing.assert_array_equal(get(b, c), [1.0, 4.0])


def test_broadcast_to_is_a_view(b):
    a = put(b, [1.0, 2.0, 3.0])
    v = b.broadcast_to(a, (2, 3))
    assert v.strides[0] == 0
    np.testing.assert_array_equal(get(b, v), [[1.0, 2.0, 3.0]] * 2)


# --- elementwise, where, accumulation -----------------------------------------------------------------------
def test_elementwise_broadcasts_and_writes_into_out(b):
    x, y = np.arange(6.0).reshape(2, 3), np.array([1.0, -1.0, 2.0])
    np.testing.assert_array_equal(get(b, b.elementwise(ROWS["mul"], [put(b, x), put(b, y)], (), F64)), x * y)
    out = b.zeros((2, 3), np.float64)
    assert b.elementwise(ROWS["add"], [put(b, x), 1.5], (), F64, out=out) is out
    np.testing.assert_array_equal(get(b, out), x + 1.5)


def test_elementwise_grad_into_a_result_buffer(b):
    x, y, g = np.array([1.0, 2.0]), np.array([3.0, -4.0]), np.array([0.5, 2.0])
    res = b.empty((2,), np.float64)
    got = b.elementwise_grad(ROWS["mul"], 0, put(b, g), 0, [put(b, x), put(b, y)], (), F64, result=res)
    assert got is res
    np.testing.assert_array_equal(get(b, res), g * y)


def test_elementwise_grad_written_into_g_itself(b):
    """The engine lets a node write a gradient into its own incoming buffer: each element is read first."""
    x, y, g = np.array([1.0, 2.0, -3.0]), np.array([3.0, -4.0, 0.5]), np.array([0.5, 2.0, -1.0])
    buf = put(b, g.copy())
    got = b.elementwise_grad(ROWS["mul"], 1, buf, 0, [put(b, x), put(b, y)], (), F64, result=buf)
    assert got is buf
    np.testing.assert_array_equal(get(b, buf), g * x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_elementwise_into_one_of_its_own_inputs(b, dtype):
    """An in-place op hands the backend its own storage as input and ``out``: every element is read first."""
    x, y = np.arange(-6, 6).reshape(3, 4).astype(dtype), np.arange(12).reshape(3, 4).astype(dtype) % 5 + 1
    buf = put(b, x.copy())
    assert b.elementwise(ROWS["mul"], [buf, put(b, y)], (), np.dtype(dtype), out=buf) is buf
    np.testing.assert_array_equal(get(b, buf), x * y)
    assert b.elementwise(ROWS["sub"], [buf, buf], (), np.dtype(dtype), out=buf) is buf  # both operands too
    np.testing.assert_array_equal(get(b, buf), np.zeros_like(x))


@pytest.mark.parametrize(
    ("out_shape", "operand_shape"),
    [((4, 4), (4,)), ((4, 4), (4, 1)), ((3, 5), (1, 5)), ((2, 3, 4), (3, 4)), ((2, 3, 4), (2, 3, 1)),
     ((2, 3, 4), (2, 1, 1)), ((2, 3, 4), (1, 3, 1)), ((5, 1, 3), (4, 1))],
)  # fmt: skip
def test_elementwise_broadcasts_rows_and_columns_in_either_operand(b, out_shape, operand_shape):
    """A bias row or a column is read in place by a loop over rows (a 4x4 column is not taken for a row); shapes
    that split nowhere (a middle dim, or both sides) are expanded first. Each is numpy's result."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(out_shape), rng.standard_normal(operand_shape)
    for first, second in ((x, y), (y, x)):
        got = b.elementwise(ROWS["sub"], [put(b, first), put(b, second)], (), F64)
        np.testing.assert_array_equal(get(b, got), first - second)


def test_broadcast_rows_and_columns_are_kernel_operands_not_copies():
    x, bias, column = np.ones((3, 4)), np.arange(4.0), np.arange(3.0).reshape(3, 1)
    _, flat, pattern, tail = cpu._flatten([x, bias, column], 12, F64, (np.empty((3, 4)),))
    assert (pattern, tail) == ("arc", (3, 4))
    assert np.shares_memory(flat[1], bias) and np.shares_memory(flat[2], column)
    middle = np.ones((1, 3, 1))  # broadcast in a middle dim: a loop nest reads it through stride-0 dims
    _, flat, pattern, tail = cpu._flatten([np.ones((2, 3, 4)), middle], 24, F64, (np.empty((2, 3, 4)),))
    assert (pattern, tail) == (codegen.strided_pattern("nn", 3), ())
    assert np.shares_memory(flat[1], middle)


def test_an_in_place_op_writes_through_a_kernel_with_no_separate_result_argument():
    """A result argument that aliases an operand fails LLVM's run-time overlap check and the kernel runs its
    scalar loop (3-7x slower); the in-place kernel writes into the operand itself."""
    x = numbagrad.arange(8.0)
    x.mul_(numbagrad.full((8,), 3.0))
    np.testing.assert_array_equal(x.numpy(), np.arange(8.0) * 3)
    assert ("mul", "forward", "aa", "serial", "x0") in codegen.KERNELS
    assert cpu._written_operand("forward", [1.0, x._data], x._data, "sa") == "x1"
    assert cpu._written_operand("forward", [x._data.copy(), 1.0], x._data, "as") is None  # equal is not the same
    assert cpu._written_operand("grad0", [np.ones(2), 0, x._data], x._data, "saa") == "x0"


def test_where_with_scalars_and_broadcasting(b):
    cond = np.array([[True, False, True]])
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(get(b, b.where(put(b, cond), put(b, a), 0.0, np.float64)), np.where(cond, a, 0.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("branches", ["arrays", "number then array", "array then number", "0-d array", "broadcast",
                                      "column-major"])  # fmt: skip
def test_where_gives_numpys_values_and_dtype(b, dtype, branches):
    rng = np.random.default_rng(0)
    x, y = ((rng.standard_normal((7, 9)) * 10).astype(dtype) for _ in range(2))
    x[0, 0] = np.nan if x.dtype.kind == "f" else x[0, 0]
    cond = rng.random((7, 9)) > 0.5
    cond[0, 0] = True
    a, c = {
        "arrays": (x, y),
        "number then array": (0.5, y),
        "array then number": (x, 2),
        "0-d array": (x, np.array(3.0)),
        "broadcast": (x[:, :1], y),
        "column-major": (np.asfortranarray(x), y),
    }[branches]
    put_ = lambda v: put(b, v) if type(v) is np.ndarray else v  # noqa: E731
    got = get(b, b.where(put(b, cond), put_(a), put_(c), np.dtype(dtype)))
    expected = np.asarray(np.where(cond, a, c), dtype=dtype)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_accumulate_adds_in_place_including_views_and_broadcasts(b):
    dst = put(b, np.ones((2, 3)))
    b.accumulate_(dst, put(b, np.arange(6.0).reshape(2, 3)))
    b.accumulate_(dst, b.broadcast_to(put(b, [1.0, 2.0, 3.0]), (2, 3)))
    np.testing.assert_array_equal(get(b, dst), 1 + np.arange(6.0).reshape(2, 3) + [1.0, 2.0, 3.0])


def test_sum_to_shape_reduces_broadcast_dims(b):
    a = np.arange(24.0).reshape(2, 3, 4)
    for shape in [(3, 4), (3, 1), (1, 4), (2, 1, 4), ()]:
        expected = a.sum(axis=tuple(range(3 - len(shape))), keepdims=False)
        expected = expected.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1), keepdims=True).reshape(shape)
        np.testing.assert_array_equal(get(b, b.sum_to_shape(put(b, a), shape)), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0, 5), (1, 7), (33, 27), (4, 3, 130), (9, 1), (40, 2)])
def test_sum_to_shape_of_leading_dims_has_numpys_bits(dtype, shape):
    """A bias's gradient (the leading dims summed) through the row-sum kernel: the bits of numpy's sum, negative
    zeros, infinities and a one-column sum (numpy's is pairwise there) included."""
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    a = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e7], shape)).astype(dtype)
    a[rng.random(shape) < 0.2] = -0.0
    if a.size:
        a.flat[-1] = np.inf
    expected = a.sum(axis=0)
    got = cpu.sum_to_shape(a, shape[1:])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


# --- reductions ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "any", "all"])
@pytest.mark.parametrize("axes", [None, (0,), (1, 2), (0, 2), (-1,)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reduce_matches_numpy(b, op, axes, keepdim):
    a = np.random.default_rng(0).uniform(-1, 1, (2, 3, 4)).round(1)
    ref = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any, "all": np.all}[op]
    expected = np.asarray(ref(a, axis=axes, keepdims=keepdim))
    got = get(b, b.reduce(put(b, a), op, axes, keepdim))
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 1), (1, 2), (0, 1, 2), (2, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_float_sum_over_some_axes_matches_a_float64_sum(axes, dtype):
    """From 4096 elements a float sum over consecutive axes runs a compiled loop (blocks added in the input's dtype,
    their totals in float64; the 70 rows of axis 1 are two blocks of ``SUM_ROWS`` and a part): the float64 sum up to
    float32 rounding of sums of up to 1120 normal values (numpy's float32 pairwise sum, which the other axes take,
    differs from it by a few ulps of the largest partial sum)."""
    a = np.random.default_rng(2).standard_normal((16, 70, 20)).astype(dtype)
    for keepdim in (False, True):
        expected = a.sum(axis=axes, keepdims=keepdim, dtype=np.float64).astype(dtype)
        got = cpu.reduce(a, "sum", axes, keepdim)  # (the CPU's loop; 28 of these took 5 minutes in the simulator)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        tolerance = {"rtol": 1e-6, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-13, "atol": 1e-12}
        np.testing.assert_allclose(got, expected, **tolerance)


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_and_log_softmax_along_a_dim_match_numpy(b, dim, log):
    a = np.random.default_rng(3).standard_normal((3, 4, 5)) * 4
    a[0, 0, 0] = -np.inf  # one -inf: probability 0 (log: -inf)
    shifted = a - a.max(axis=dim, keepdims=True)
    total = np.exp(shifted).sum(axis=dim, keepdims=True)
    expected = shifted - np.log(total) if log else np.exp(shifted) / total
    np.testing.assert_allclose(get(b, b.softmax(put(b, a), dim, log)), expected, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("dim", [0, 2])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_matches_the_formula(b, dim, log):
    rng = np.random.default_rng(6)
    a, g = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    y = get(b, b.softmax(put(b, a), dim, log))
    if log:
        expected = g - np.exp(y) * g.sum(axis=dim, keepdims=True)
    else:
        expected = y * (g - (g * y).sum(axis=dim, keepdims=True))
    np.testing.assert_allclose(get(b, b.softmax_backward(put(b, y), put(b, g), dim, log)), expected, rtol=1e-12,
                               atol=1e-15)  # fmt: skip


def test_residual_layer_norm_and_the_norm_backward_with_a_carried_gradient_match_numpy(b):
    rng = np.random.default_rng(0)
    shapes = ((5, 8), (5, 8), (8,), (8,), (8,), (5, 8), (5, 8))
    a, v, c, w, bias, g, carry = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    s, y, mean, rstd = b.residual_layer_norm(*(put(b, t) for t in (a, v, c, w, bias)), 1e-5, 8)
    total = a + (v + c)
    np.testing.assert_allclose(get(b, s), total, rtol=1e-6)
    xhat = (total - total.mean(1, keepdims=True)) / np.sqrt(total.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(get(b, y), xhat * w + bias, rtol=1e-5, atol=1e-5)
    gx, gw, gb = b.layer_norm_backward(put(b, g), s, mean, rstd, put(b, w), (8,), True, True)
    gx2, gw2, gb2, gc = b.layer_norm_backward(put(b, g), s, mean, rstd, put(b, w), (8,), True, True, put(b, carry),
                                              True)  # fmt: skip
    np.testing.assert_allclose(get(b, gx2), get(b, gx) + carry, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(get(b, gw2), get(b, gw), rtol=1e-6)
    np.testing.assert_allclose(get(b, gb2), get(b, gb), rtol=1e-6)
    np.testing.assert_allclose(get(b, gc), (get(b, gx) + carry).sum(0), rtol=1e-5, atol=1e-5)


def test_softmax_of_a_row_with_nan_is_nan_and_of_a_zero_dim_array_is_one(b):
    a = np.array([[1.0, np.nan, 2.0], [0.5, 1.5, -1.0]])
    got = get(b, b.softmax(put(b, a), 1, False))
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()
    assert get(b, b.softmax(put(b, np.array(3.0)), 0, False)).tolist() == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_is_the_head_of_the_stable_sort_with_ties_and_nans(b, dtype, largest):
    """A small k selects in one pass per row (CPU); the result is exactly the first k of the stable sort: equal
    values in index order, nan the largest."""
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (3, 5, 40)).astype(dtype)
    if a.dtype.kind == "f":
        a[rng.random(a.shape) < 0.2] = np.nan
    for dim, k in ((2, 3), (2, 5), (1, 1), (0, 2), (2, 40)):
        values, indices = b.topk(put(b, a), k, dim, largest)
        want_values, want_indices = cpu.sort(a, dim, largest)
        cut = (slice(None),) * dim + (slice(0, k),)
        np.testing.assert_array_equal(get(b, values), want_values[cut])
        np.testing.assert_array_equal(get(b, indices), want_indices[cut])


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_cumulative_along_a_dim_accumulates_in_float64_for_float32(b, op, dim):
    a = np.random.default_rng(5).uniform(0.5, 1.5, (3, 4, 6)).astype(np.float32)
    fn = np.cumsum if op == "cumsum" else np.cumprod
    expected = fn(a.astype(np.float64), axis=dim).astype(np.float32)  # rounded once, as torch's CPU kernel
    got = get(b, b.cumulative(put(b, a), op, dim, np.dtype(np.float32)))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_add_of_rows_adds_repeated_indices_up(b, dim):
    """A 1-d index along a dim adds whole slices (one compiled loop on the CPU): as ``np.add.at``."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    index = np.array([0, 3, 0, 1, 3, 3])
    src = rng.standard_normal(a.shape[:dim] + (6,) + a.shape[dim + 1 :]).astype(np.float32)
    expected = a.copy()
    np.add.at(expected, (slice(None),) * dim + (index,), src)
    np.testing.assert_allclose(get(b, b.index_add(put(b, a), dim, put(b, index), put(b, src))), expected, rtol=1e-6)
    if dim == 0:  # an embedding's backward: zeros, rows added
        zeros = np.zeros_like(a)
        np.add.at(zeros, (index,), src)
        got = b.index_add_zeros(a.shape, np.dtype(np.float32), (put(b, index),), put(b, src))
        np.testing.assert_allclose(get(b, got), zeros, rtol=1e-6)


def test_reduce_in_a_dtype_and_of_zero_dim_and_empty_arrays(b):
    ints = put(b, np.array([[1, 2], [3, 4]], np.int32))
    s = get(b, b.reduce(ints, "sum", None, False, np.int64))
    assert s.dtype == np.int64 and s.shape == () and s == 10
    assert get(b, b.reduce(put(b, np.array(2.5)), "max", None, False)) == 2.5
    np.testing.assert_array_equal(get(b, b.reduce(put(b, np.zeros((0, 3))), "sum", (0,), False)), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(get(b, b.reduce(put(b, np.zeros((0, 2))), "all", (0,), False)), [True, True])


def test_max_propagates_nan(b):
    a = np.array([[1.0, np.nan], [3.0, 2.0]])
    np.testing.assert_array_equal(get(b, b.reduce(put(b, a), "max", (1,), False)), [np.nan, 3.0])


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize(("axis", "keepdim"), [(None, False), (None, True), (0, False), (1, True)])
def test_arg_reduce_first_occurrence_as_int64(b, op, axis, keepdim):
    a = np.array([[1.0, 5.0, 5.0], [-2.0, -2.0, 0.0]])
    expected = getattr(np, op)(a, axis=axis, keepdims=keepdim)
    got = get(b, b.arg_reduce(put(b, a), op, axis, keepdim))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)


# --- matmul, concatenate, sort ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sa", "sb"),
    [
        ((2, 3), (3, 4)),
        ((3,), (3, 2)),
        ((2, 3), (3,)),
        ((2, 2, 3), (3, 2)),
        ((2, 0), (0, 3)),
        ((5, 9), (9, 7)),  # no dimension a multiple of the kernel's tile or depth
        ((2, 1, 5, 6), (3, 6, 5)),  # broadcast batch dims
    ],
)
def test_matmul_matches_numpy(b, sa, sb):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=sa), rng.normal(size=sb)
    np.testing.assert_allclose(get(b, b.matmul(put(b, x), put(b, y))), x @ y, rtol=1e-12, atol=1e-12)


def test_matmul_of_integers_is_exact_in_their_dtype(b):
    x, y = np.arange(15, dtype=np.int64).reshape(3, 5), np.arange(10, dtype=np.int64).reshape(5, 2)
    got = get(b, b.matmul(put(b, x), put(b, y)))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, x @ y)


def test_concatenate_casts_to_the_dtype(b):
    x, y = np.arange(4).reshape(2, 2), np.full((2, 1), 0.5)
    got = get(b, b.concatenate([put(b, x), put(b, y)], 1, np.float64))
    np.testing.assert_array_equal(got, np.concatenate([x, y], axis=1))
    assert got.dtype == np.float64


@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_with_nan_largest(b, descending):
    torch = pytest.importorskip("torch")
    a = np.array([[3.0, 1.0, np.nan, 1.0, 3.0, -1.0], [0.0, 0.0, 2.0, np.nan, 0.0, 2.0]])
    values, indices = b.sort(put(b, a), 1, descending)
    tv, ti = torch.sort(torch.tensor(a), dim=1, descending=descending, stable=True)
    np.testing.assert_array_equal(get(b, values), tv.numpy())
    np.testing.assert_array_equal(get(b, indices), ti.numpy())
    assert get(b, indices).dtype == np.int64


def test_sort_of_zero_dim_and_along_the_first_dim(b):
    values, indices = b.sort(put(b, np.array(4.0)), 0, False)
    assert get(b, values) == 4.0 and get(b, indices) == 0 and get(b, indices).shape == ()
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    values, indices = b.sort(put(b, a), 0, True)
    np.testing.assert_array_equal(get(b, values), [[2.0, 3.0], [1.0, 1.0]])
    np.testing.assert_array_equal(get(b, indices), [[0, 1], [1, 0]])


# --- indexing -----------------------------------------------------------------------------------------------
def test_getitem_basic_is_a_view_and_an_integer_index_gives_zero_dim(b):
    a = put(b, np.arange(6.0).reshape(2, 3))
    row = b.getitem(a, 1)
    b.setitem(row, 0, -1.0)
    np.testing.assert_array_equal(get(b, a), [[0.0, 1.0, 2.0], [-1.0, 4.0, 5.0]])
    element = b.getitem(a, (0, 2))
    assert get(b, element).shape == () and get(b, element) == 2.0
    np.testing.assert_array_equal(get(b, b.getitem(a, (Ellipsis, None, slice(1, None)))), [[[1.0, 2.0]], [[4.0, 5.0]]])


def test_getitem_advanced_is_a_copy(b):
    x = np.arange(6.0).reshape(2, 3)
    a = put(b, x)
    idx = put(b, [2, 0, 2])
    np.testing.assert_array_equal(get(b, b.getitem(a, (slice(None), idx))), x[:, [2, 0, 2]])
    np.testing.assert_array_equal(get(b, b.getitem(a, put(b, x > 2))), x[x > 2])
    picked = b.getitem(a, np.array([1]))
    b.setitem(picked, Ellipsis, 0.0)
    np.testing.assert_array_equal(get(b, a), x)


def test_setitem_scalar_array_advanced_and_overlapping(b):
    x = np.zeros((3, 4))
    a = put(b, x)
    b.setitem(a, 0, 5.0)
    b.setitem(a, (slice(None), 1), put(b, [1.0, 2.0, 3.0]))
    b.setitem(a, np.array([2]), -1.0)
    x[0], x[:, 1], x[[2]] = 5.0, [1.0, 2.0, 3.0], -1.0
    np.testing.assert_array_equal(get(b, a), x)
    row = put(b, [1.0, 2.0, 3.0, 4.0])
    b.setitem(row, slice(1, None), b.getitem(row, slice(None, -1)))  # the value overlaps the destination
    np.testing.assert_array_equal(get(b, row), [1.0, 1.0, 2.0, 3.0])


def test_index_add_zeros_adds_repeated_indices(b):
    idx = np.array([0, 2, 0])
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    got = get(b, b.index_add_zeros((3, 2), np.float64, put(b, idx), put(b, values)))
    np.testing.assert_array_equal(got, [[6.0, 8.0], [0.0, 0.0], [3.0, 4.0]])


def test_take_along_axis_and_its_adjoint(b):
    a = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]])
    idx = np.array([[2, 2], [0, 1]])
    np.testing.assert_array_equal(get(b, b.take_along_axis(put(b, a), put(b, idx), 1)), [[30.0, 30.0], [40.0, 50.0]])
    g = np.array([[1.0, 2.0], [3.0, 4.0]])
    got = get(b, b.put_along_axis_zeros((2, 3), put(b, idx), put(b, g), 1))
    np.testing.assert_array_equal(got, [[0.0, 0.0, 3.0], [3.0, 4.0, 0.0]])


# --- foreach and apply --------------------------------------------------------------------------------------
def axpy_update(i, y, x, alpha, negate, keep_x):
    v = alpha * x[i]
    y[i] = y[i] - v if negate else y[i] + v
    if not keep_x:
        x[i] = 0.0


def test_foreach_runs_a_module_level_update_in_place(b):
    y, x = put(b, [1.0, 2.0, 3.0]), put(b, [1.0, 0.5, -1.0])
    b.foreach(axpy_update, [y, x], (2.0, False), (True,))
    np.testing.assert_array_equal(get(b, y), [3.0, 3.0, 1.0])
    b.foreach(axpy_update, [y, x], (2.0, True), (False,))  # a static flag: compiled into the loop
    np.testing.assert_array_equal(get(b, y), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(get(b, x), [0.0, 0.0, 0.0])


def square_plus(v, w):
    return v * v + w


def test_apply_kernel_with_one_and_two_operands(b):
    variant = b.loop_variant(3)
    assert variant in (("serial", "parallel") if b is cpu else ("cuda",))
    a = put(b, [1.0, 2.0, 3.0])
    b.apply_kernel(lambda v: v * 10, np.float64, variant)(a)
    np.testing.assert_array_equal(get(b, a), [10.0, 20.0, 30.0])
    b.apply_kernel(square_plus, np.float64, variant, 2)(a, put(b, [1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(get(b, a), [101.0, 400.0, 899.0])


def test_cpu_loop_variant_follows_the_threshold(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 100)
    assert (cpu.loop_variant(99), cpu.loop_variant(100)) == ("serial", "parallel")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_whole_array_float_sum_adds_blocks_and_totals_them_in_float64(dtype):
    """Blocks of ``SUM_BLOCK`` elements add in the input's dtype, their totals in float64: a third or less of the
    error of a running total (``cumsum``'s last element; float32: 1.1e-5 against 1.1e-4), as torch's cascade sum."""
    a = np.random.default_rng(0).standard_normal(100_000).astype(dtype)
    total = cpu.reduce(a, "sum", None, False, None)
    assert total.dtype == dtype and total.shape == ()
    exact = math.fsum(a.astype(np.float64))
    assert abs(float(total) - exact) <= abs(float(np.cumsum(a)[-1]) - exact) / 3
    kept = cpu.reduce(a.reshape(100, 1000), "sum", None, True, None)
    assert kept.shape == (1, 1) and kept.dtype == dtype


def test_whole_array_float32_sum_of_integers_is_the_exact_sum_rounded_once():
    """Each block's float32 total of integers below 1000 is exact (below 2**24) and the float64 total of the blocks
    too, so the result is the exact sum rounded once, though the sum (5e7) is far past 2**24 (a running float32
    total would round at each step)."""
    a = np.random.default_rng(1).integers(0, 1000, 100_003).astype(np.float32)
    exact = int(a.astype(np.int64).sum())
    assert float(cpu.reduce(a, "sum", None, False, None)) == float(np.float32(exact))


@pytest.mark.parametrize("axes", [None, (1,), (0,), (2,)])
def test_float32_sums_in_prange_kernels_equal_the_serial_ones(monkeypatch, axes):
    """Above ``PARALLEL_THRESHOLD`` the whole-array, row and middle-axis sums run ``prange`` loops (each outer index
    its own row of scratch): the serial loops' blocks, so their values up to the order of the float64 totals."""
    a = np.random.default_rng(4).standard_normal((6, 70, 20)).astype(np.float32)
    serial = cpu.reduce(a, "sum", axes, False, None)
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 1000)
    assert cpu.loop_variant(a.size) == "parallel"
    np.testing.assert_allclose(cpu.reduce(a, "sum", axes, False, None), serial, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("size", [2**24 + 4096, 2**20 + 1])
def test_whole_array_float32_sum_counts_past_float32s_integers(size):
    """Ones past 2**24 still count (a float32 running total stops at 16777216). The larger size runs the prange
    kernel."""
    a = np.ones(size, np.float32)
    assert float(cpu.reduce(a, "sum", None, False, None)) == size


def test_whole_array_float16_sum_does_not_add_in_float16():
    a = np.full(100_000, 0.1, np.float16)
    total = cpu.reduce(a, "sum", None, False, None)
    assert total.dtype == np.float16
    assert float(total) == 10000.0  # as torch (float16 adds would stop at 256)


_PAIRED = [n for n, r in ROWS.items() if r.arity == 2 and len(r.grads) == 2 and not r.integral_only and not r.params]


@pytest.mark.parametrize("name", _PAIRED)
def test_two_gradients_in_one_pass_equal_two_kernels(name):
    """``elementwise_grads`` (a binary op's backward, one pass) gives what the two single-gradient kernels give,
    also when the second is written into the incoming gradient's own buffer."""
    row = ROWS[name]
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.5, 2.0, 50), rng.uniform(0.5, 2.0, 50)
    g = rng.standard_normal(50)
    out = cpu.elementwise(row, [x, y], (), x.dtype)
    dtype = np.dtype(np.float64)
    expected = [cpu.elementwise_grad(row, i, g, out, [x, y], (), dtype) for i in (0, 1)]
    got = cpu.elementwise_grads(row, (0, 1), g.copy(), out, [x, y], (), dtype)
    owned = g.copy()
    into = cpu.elementwise_grads(row, (0, 1), owned, out, [x, y], (), dtype, True)
    assert into[1] is owned
    for a, b, c in zip(expected, got, into):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("make", [lambda: np.arange(6.0).reshape(2, 3, 1), lambda: np.arange(12.0).reshape(3, 4)[1:]])
def test_expand_is_a_writable_stride_zero_view_of_the_array(make):
    """``cpu.expand`` views ``a``'s own memory (writes reach it, as torch's through an expanded tensor), whichever
    way it builds the view (numpy's constructor over a contiguous array, ``as_strided`` otherwise)."""
    a = make()
    shape = (2, *a.shape[:-1], 5) if a.shape[-1] == 1 else (2, *a.shape)
    out = cpu.expand(a, shape)
    np.testing.assert_array_equal(out, np.broadcast_to(a, shape))
    assert out.flags.writeable and np.shares_memory(out, a)
    out[(0,) * out.ndim] = -1.0
    assert a.flat[0] == -1.0


def test_expand_of_a_read_only_array_is_read_only():
    a = np.arange(3.0)
    a.flags.writeable = False
    assert not cpu.expand(a, (2, 3)).flags.writeable
