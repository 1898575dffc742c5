"""``backend.repeated_product``: the recurrent layers' per-step product ``x @ w.T (+ bias)``, its operand prepared
once, through ``row_products``' register-blocked kernel on packed panels (few rows, deep) or BLAS on an aligned
copy of ``w.T``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numbagrad.backend import cpu, cpu_threads, row_products

SHAPES = st.tuples(st.integers(0, 9), st.integers(0, 11), st.integers(0, 13))


def _product(a, b, out=None):
    return row_products.product(a, row_products.pack(b), b.shape[1], out)


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, double=st.booleans())
def test_the_row_kernel_equals_the_float64_product_at_every_ragged_shape(shape, double):
    """Every block shape the kernel runs (whole 5-row blocks and whole panels, the padded last rows and panel,
    empty and zero-deep)."""
    rows, depth, columns = shape
    dtype = np.float64 if double else np.float32
    rng = np.random.default_rng(sum(shape))
    a, b = rng.standard_normal((rows, depth)).astype(dtype), rng.standard_normal((depth, columns)).astype(dtype)
    out = _product(a, b)
    assert out.dtype == dtype and out.shape == (rows, columns)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, depth, columns", [(20, 256, 1024), (7, 300, 70), (64, 128, 33), (11, 1, 129)])
def test_the_row_kernel_equals_the_product_over_whole_and_ragged_blocks(dtype, rows, depth, columns):
    """Shapes past a block of rows and a panel of columns (a panel is 64 float32 or 32 float64 columns with
    AVX-512), and a's rows strided (every other row of a larger array)."""
    rng = np.random.default_rng(rows + columns)
    a = rng.standard_normal((2 * rows, depth)).astype(dtype)[::2]
    b = rng.standard_normal((depth, columns)).astype(dtype)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(_product(a, b), a.astype(np.float64) @ b, rtol=tolerance, atol=tolerance * depth)


@settings(max_examples=30, deadline=None)
@given(shape=SHAPES, double=st.booleans())
def test_a_product_with_a_bias_rounds_as_the_product_and_then_the_add(shape, double):
    """The bias is added to each rounded sum as its block is stored: the bits of ``product`` and then ``+ bias``,
    at every ragged shape (the last panel's bias zero-padded), zero-deep included (the bias alone)."""
    rows, depth, columns = shape
    dtype = np.float64 if double else np.float32
    rng = np.random.default_rng(sum(shape) + 7)
    a, b = rng.standard_normal((rows, depth)).astype(dtype), rng.standard_normal((depth, columns)).astype(dtype)
    bias = rng.standard_normal(columns).astype(dtype)
    panels = row_products.pack(b)
    expected = row_products.product(a, panels, columns) + bias
    np.testing.assert_array_equal(row_products.product(a, panels, columns, bias=bias), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, depth, columns", [(487, 300, 70), (243, 257, 129), (241, 129, 64)])
def test_a_product_over_several_chunks_of_depth_and_rows_adds_its_bias_once(dtype, rows, depth, columns):
    """Past ``CHUNK_DEPTH`` steps and ``CHUNK_ROWS`` rows, ragged in both and in the columns: the product's
    values, and the bias added once to the finished sums (the bits of the product and then the add)."""
    assert depth > row_products.CHUNK_DEPTH and rows > row_products.CHUNK_ROWS
    rng = np.random.default_rng(rows)
    a, b = rng.standard_normal((rows, depth)).astype(dtype), rng.standard_normal((depth, columns)).astype(dtype)
    bias = rng.standard_normal(columns).astype(dtype)
    panels = row_products.pack(b)
    out = row_products.product(a, panels, columns)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=tolerance, atol=tolerance * depth)
    np.testing.assert_array_equal(row_products.product(a, panels, columns, bias=bias), out + bias)


@pytest.mark.parametrize("bias", [np.ones(5, np.float32), np.ones(6, np.float64), np.ones((1, 6), np.float32)])
def test_a_product_refuses_a_bias_of_another_dtype_or_shape(bias):
    a, panels = np.ones((4, 8), np.float32), row_products.pack(np.ones((8, 6), np.float32))
    with pytest.raises(ValueError, match="bias"):
        row_products.product(a, panels, 6, bias=bias)


def test_pack_lays_each_panel_of_columns_row_after_row_zero_padded():
    b = np.arange(6 * 70, dtype=np.float32).reshape(6, 70)
    panels = row_products.pack(b)
    width = panels.shape[2]
    assert panels.shape == (-(-70 // width), 6, width) and panels.flags.c_contiguous
    for panel in range(panels.shape[0]):
        columns = b[:, panel * width : (panel + 1) * width]
        np.testing.assert_array_equal(panels[panel, :, : columns.shape[1]], columns)
        assert not panels[panel, :, columns.shape[1] :].any()


def test_the_row_kernel_sums_float32_in_float32():
    """BLAS's float32 product sums in float32: 2**24 + 1 + 1 is 2**24 there, not 2**24 + 2."""
    a = np.array([[2.0**24, 1.0, 1.0]], np.float32)
    b = np.ones((3, 1), np.float32)
    assert _product(a, b)[0, 0] == np.float32(2.0**24)


def test_the_row_kernel_propagates_infinities_and_nans_as_blas():
    a = np.array([[np.inf, 1.0, 0.0], [1.0, 2.0, 3.0]], np.float32)
    b = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, np.nan, 1.0], [-1.0, 0.0, 0.0]], np.float32).T
    with np.errstate(invalid="ignore"):
        expected = a @ b
    np.testing.assert_array_equal(_product(a, b), expected)


def test_the_row_kernel_refuses_an_output_without_unit_column_stride():
    out = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match="unit column stride"):
        row_products.product(np.ones((4, 8), np.float32), row_products.pack(np.ones((8, 3), np.float32)), 3,
                             out[:, ::2])  # fmt: skip
    assert not out.any()


@pytest.mark.parametrize(
    "case",
    ["float64_panels_for_float32_rows", "strided_panels", "shallower_panels", "more_columns_than_panels", "out_shape"],
)
def test_the_row_kernel_refuses_operands_it_would_read_out_of_bounds(case):
    """The kernel reads and writes through raw addresses: operands that disagree are refused before it runs."""
    a = np.ones((6, 8), np.float32)
    panels = row_products.pack(np.ones((8, 70), np.float32))
    out = np.zeros((6, 70), np.float32)
    args = {
        "float64_panels_for_float32_rows": (a, row_products.pack(np.ones((8, 70))), 70, out),
        "strided_panels": (a, np.concatenate([panels, panels], axis=2)[:, :, ::2], 70, out),
        "shallower_panels": (a, row_products.pack(np.ones((7, 70), np.float32)), 70, out),
        "more_columns_than_panels": (a, row_products.pack(np.ones((8, 3), np.float32)), 70, out),
        "out_shape": (a, panels, 70, np.zeros((5, 70), np.float32)),
    }[case]
    with pytest.raises(ValueError, match="row_products.product"):
        row_products.product(*args)
    assert not out.any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["transposed", "every_other_column", "reversed_rows", "broadcast_row"])
def test_the_row_kernels_matmul_reads_operands_strided_in_any_way(dtype, layout):
    """Weight gradients multiply transposed operands (``g.T @ x``), a linear layer's forward ``x @ W.T``: ``a``
    is read through its strides, ``b`` packed from its layout."""
    rng = np.random.default_rng(3)
    base_a, base_b = rng.standard_normal((23, 40)).astype(dtype), rng.standard_normal((40, 70)).astype(dtype)
    a, b = {
        "transposed": (np.ascontiguousarray(base_a.T).T, np.ascontiguousarray(base_b.T).T),
        "every_other_column": (rng.standard_normal((23, 80)).astype(dtype)[:, ::2], base_b),
        "reversed_rows": (base_a[::-1], base_b[::-1]),
        "broadcast_row": (np.broadcast_to(base_a[:1], (23, 40)), base_b),
    }[layout]
    expected = a.astype(np.float64) @ b.astype(np.float64)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(row_products.matmul(a, b), expected, rtol=tolerance, atol=tolerance * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1024, 256), (130, 9), (37, 21), (7, 100), (64, 64)])
@pytest.mark.parametrize("view", ["transposed", "transposed_every_other_column", "transposed_reversed", "strided"])
def test_pack_of_any_layout_equals_pack_of_a_contiguous_copy(dtype, shape, view):
    """Whole tiles go through the transposing shuffles, the edges through the scalar loop."""
    w = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    b = {
        "transposed": w.T,
        "transposed_every_other_column": w[:, ::2].T,
        "transposed_reversed": w[::-1].T,
        "strided": w[::2, ::3],
    }[view]
    np.testing.assert_array_equal(row_products.pack(b), row_products.pack(np.ascontiguousarray(b)))


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


@pytest.mark.parametrize(
    "rows, depth, kernel_runs", [(20, 256, True), (64, 128, True), (20, 64, False), (65, 256, False)]
)
def test_the_row_kernel_runs_where_it_beats_blas(monkeypatch, rows, depth, kernel_runs):
    """Few rows and a deep product: the kernel; shallow or many rows: BLAS. The result is the same either way."""
    calls = []
    real = row_products.product
    monkeypatch.setattr(row_products, "product", lambda *args: calls.append(1) or real(*args))
    w = np.ones((64, depth), np.float32)
    out = cpu.repeated_product(w, rows)(np.ones((rows, depth), np.float32))
    assert bool(calls) == kernel_runs
    np.testing.assert_array_equal(out, np.full((rows, 64), depth, np.float32))


def test_the_row_kernel_writes_into_a_block_of_a_larger_results_columns():
    """``out`` may be a strided view: two column blocks of one result, the columns around them untouched."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((7, 300)).astype(np.float32), rng.standard_normal((300, 10)).astype(np.float32)
    out = np.zeros((7, 14), np.float32)
    _product(a, b[:, :6], out[:, 2:8])
    _product(a, b[:, 6:], out[:, 8:12])
    np.testing.assert_allclose(out[:, 2:12], a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)
    assert not out[:, :2].any() and not out[:, 12:].any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, depth, columns", [(20, 256, 1024), (7, 300, 1000), (20, 1024, 256), (64, 128, 200)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "reversed_rows", "every_other_column"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_a_product_shared_among_threads_gives_the_bits_of_one_thread(dtype, rows, depth, columns, layout, with_bias):
    """Each thread runs the same kernel on its own panels of columns (``share_<kind>``, compiled, no Python on the
    workers), reading ``a`` through its strides (a weight gradient's ``g.T``): every output is summed as on one
    thread."""
    import numbagrad
    from numbagrad.backend import blas

    if blas.openblas() is None or not blas.openblas().runs_tasks:
        pytest.skip("numpy links a BLAS whose threads cannot run tasks")
    rng = np.random.default_rng(rows + columns)
    a = _laid_out(rng, (rows, depth), dtype, layout)
    b = rng.standard_normal((depth, columns)).astype(dtype)
    bias = rng.standard_normal(columns).astype(dtype) if with_bias else None
    panels = row_products.pack(b)
    before = numbagrad.get_num_threads()
    try:
        numbagrad.set_num_threads(1)
        one = row_products.product(a, panels, columns, bias=bias)
        numbagrad.set_num_threads(2)
        calls = []
        real = cpu_threads.run_compiled
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cpu_threads, "run_compiled", lambda f, args: calls.append(len(args)) or real(f, args))
            shared = row_products.product(a, panels, columns, bias=bias)
    finally:
        numbagrad.set_num_threads(before)
    assert calls == [2]
    np.testing.assert_array_equal(shared, one)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    expected = a.astype(np.float64) @ b + (0 if bias is None else bias)
    np.testing.assert_allclose(shared, expected, rtol=tolerance, atol=tolerance * depth)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("depth, columns", [(256, 1000), (300, 256)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "reversed_rows", "every_other_column"])
def test_a_shared_matmul_packs_each_threads_panels_in_its_share_as_pack_would(
    monkeypatch, on_one_and_two_threads, dtype, depth, columns, layout
):
    """``matmul`` on two threads hands ``b`` itself to the shares, each packing its own panels from ``b``'s strides
    before it multiplies: the bits of packing first on one thread."""
    rng = np.random.default_rng(depth + columns)
    a = rng.standard_normal((64, depth)).astype(dtype)
    b = _laid_out(rng, (depth, columns), dtype, layout)
    bias = rng.standard_normal(columns).astype(dtype)
    calls = []
    real = cpu_threads.run_compiled
    monkeypatch.setattr(cpu_threads, "run_compiled", lambda f, args: calls.append(len(args)) or real(f, args))
    one, two = on_one_and_two_threads(lambda: row_products.matmul(a, b, bias))
    assert calls == [2]
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, row_products.product(a, row_products.pack(b), columns, bias=bias))


def test_a_product_refuses_an_unpacked_b_of_another_shape():
    a, b = np.ones((4, 8), np.float32), np.ones((8, 6), np.float32)
    with pytest.raises(ValueError, match="unpacked b"):
        row_products.product(a, row_products.pack(b), 6, unpacked=np.ones((8, 5), np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "every_other_column"])
def test_a_large_pack_shared_among_threads_lays_out_the_panels_of_one_thread(
    monkeypatch, on_one_and_two_threads, dtype, layout
):
    """From ``SHARED_PACK_BYTES`` on, each thread packs its own panels (``pack_share_<kind>``)."""
    rng = np.random.default_rng(5)
    depth, columns = 256, 1000
    b = _laid_out(rng, (depth, columns), dtype, layout)
    calls = []
    real = cpu_threads.run_compiled
    monkeypatch.setattr(cpu_threads, "run_compiled", lambda f, args: calls.append(len(args)) or real(f, args))
    one, two = on_one_and_two_threads(lambda: row_products.pack(b))
    assert calls == [2]
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, row_products.pack(np.ascontiguousarray(b)))


def _laid_out(rng, shape: tuple, dtype, layout: str) -> np.ndarray:
    """Random values of ``shape`` and ``dtype`` in ``layout``: a C-contiguous array, the transpose of one, one with
    its rows reversed (a negative stride) or every other column of a wider one."""
    rows, columns = shape
    return {
        "contiguous": lambda: rng.standard_normal((rows, columns)).astype(dtype),
        "transposed": lambda: rng.standard_normal((columns, rows)).astype(dtype).T,
        "reversed_rows": lambda: rng.standard_normal((rows, columns)).astype(dtype)[::-1],
        "every_other_column": lambda: rng.standard_normal((rows, 2 * columns)).astype(dtype)[:, ::2],
    }[layout]()
