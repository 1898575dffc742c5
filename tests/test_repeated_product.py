"""``backend.repeated_product``: the recurrent layers' per-step product ``x @ w.T (+ bias)``, its operand prepared
once, through ``row_products``' register-blocked kernel (few rows, deep) or BLAS on an aligned copy of ``w.T``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numbagrad.backend import cpu, row_products

SHAPES = st.tuples(st.integers(0, 9), st.integers(0, 11), st.integers(0, 13))


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, double=st.booleans())
def test_the_row_kernel_equals_the_float64_product_at_every_ragged_shape(shape, double):
    """Every block shape the kernel runs (whole 3 x 4 blocks, the edge rows and columns, empty and zero-deep)."""
    rows, depth, columns = shape
    dtype = np.float64 if double else np.float32
    rng = np.random.default_rng(sum(shape))
    a, b = rng.standard_normal((rows, depth)).astype(dtype), rng.standard_normal((columns, depth)).astype(dtype)
    out = row_products.product_nt(a, b)
    assert out.dtype == dtype and out.shape == (rows, columns)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-5, atol=1e-5)


def test_the_row_kernel_sums_float32_in_float32():
    """BLAS's float32 product sums in float32: 2**24 + 1 + 1 is 2**24 there, not 2**24 + 2."""
    a = np.array([[2.0**24, 1.0, 1.0]], np.float32)
    b = np.ones((1, 3), np.float32)
    assert row_products.product_nt(a, b)[0, 0] == np.float32(2.0**24)


def test_the_row_kernel_propagates_infinities_and_nans_as_blas():
    a = np.array([[np.inf, 1.0, 0.0], [1.0, 2.0, 3.0]], np.float32)
    b = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, np.nan, 1.0], [-1.0, 0.0, 0.0]], np.float32)
    with np.errstate(invalid="ignore"):
        expected = a @ b.T
    np.testing.assert_array_equal(row_products.product_nt(a, b), expected)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize(
    "rows, depth, columns", [(20, 256, 1024), (20, 1024, 256), (5, 300, 7), (16, 64, 192), (80, 256, 64)]
)
@pytest.mark.parametrize("with_bias", [False, True])
def test_repeated_product_is_x_times_w_transposed_plus_bias(dtype, rows, depth, columns, with_bias):
    """Both ways it runs (the kernel where it pays, else BLAS on the aligned copy; 2-byte floats through BLAS in
    float32), for each ``x`` of up to ``rows`` rows."""
    rng = np.random.default_rng(rows + depth)
    w = rng.standard_normal((columns, depth)).astype(dtype)
    bias = rng.standard_normal(columns).astype(dtype) if with_bias else None
    product = cpu.repeated_product(w, rows)
    for n in (rows, rows // 2 + 1):
        x = rng.standard_normal((n, depth)).astype(dtype)
        out = product(x, bias)
        expected = x.astype(np.float64) @ w.astype(np.float64).T + (0 if bias is None else bias.astype(np.float64))
        assert out.dtype == np.dtype(dtype) and out.shape == (n, columns)
        tolerance = 2e-2 if dtype == "float16" else 1e-4
        np.testing.assert_allclose(out.astype(np.float64), expected, rtol=tolerance, atol=tolerance * depth**0.5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(12, 3), (1024, 256), (7, 5)])
def test_the_blas_operand_copy_starts_on_a_64_byte_boundary(dtype, shape):
    """A C-contiguous copy with the same values, its first element on a 64-byte boundary (OpenBLAS reads it
    faster), whatever the source's own alignment and layout."""
    w = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    for source in (w, w.T):
        for offset in range(4):
            shifted = np.empty(source.size + offset, dtype)[offset:].reshape(source.shape)
            shifted[...] = source
            copy = cpu._aligned_copy(shifted)
            assert copy.flags.c_contiguous and copy.dtype == source.dtype
            assert cpu.data_ptr(copy) % 64 == 0 and not np.shares_memory(copy, shifted)
            np.testing.assert_array_equal(copy, source)


@pytest.mark.parametrize("threads, kernel_runs", [(1, True), (2, False)])
def test_the_row_kernel_runs_only_where_blas_runs_one_thread(monkeypatch, threads, kernel_runs):
    """With more threads BLAS shares the product among them and beats the one-thread kernel; the result is the
    same either way."""
    import numbagrad
    from numbagrad.backend import blas

    if blas.openblas() is None:
        pytest.skip("numpy links a BLAS other than its bundled OpenBLAS")
    calls = []
    monkeypatch.setattr(row_products, "product_nt", lambda a, b: calls.append(1) or a @ b.T)
    before = numbagrad.get_num_threads()
    w = np.ones((64, 256), np.float32)
    try:
        numbagrad.set_num_threads(threads)
        out = cpu.repeated_product(w, 20)(np.ones((20, 256), np.float32))
    finally:
        numbagrad.set_num_threads(before)
    assert bool(calls) == kernel_runs
    np.testing.assert_array_equal(out, np.full((20, 64), 256.0, np.float32))


def test_the_row_kernel_writes_into_a_block_of_a_larger_results_columns():
    """``out`` may be a strided view: two column blocks of one result, the columns around them untouched."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((7, 300)).astype(np.float32), rng.standard_normal((10, 300)).astype(np.float32)
    out = np.zeros((7, 14), np.float32)
    row_products.product_nt(a, b[:6], out[:, 2:8])
    row_products.product_nt(a, b[6:], out[:, 8:12])
    np.testing.assert_allclose(out[:, 2:12], a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-5, atol=1e-4)
    assert not out[:, :2].any() and not out[:, 12:].any()
