"""The CPU backend's 2-D products (``matmul``, ``linear``, ``linear_backward``) run through ``row_products``'
register-blocked kernel where it beats OpenBLAS (one thread, at least 256 x 128 x 64 or 128 x 512 x 64; two, 256
x 256 x 256; on an AVX-512 host), and
through BLAS elsewhere: the same products either way, within float32's rounding."""

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import conv_kernels, cpu, row_products, winograd_kernels

needs_measured_host = pytest.mark.skipif(not row_products.measured_host(), reason="the kernel runs on AVX-512 hosts")


@pytest.fixture
def kernel_calls(monkeypatch):
    calls = []
    real = row_products.matmul
    monkeypatch.setattr(
        row_products, "matmul", lambda a, b, bias=None: calls.append((a.shape, b.shape)) or real(a, b, bias)
    )
    return calls


def _one_thread(monkeypatch, threads=1):
    monkeypatch.setattr(cpu.cpu_threads, "thread_count", lambda: threads)


def _close(actual, expected, depth):
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * depth)


@needs_measured_host
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, depth, columns", [(300, 130, 256), (128, 512, 64)])  # (128 rows: 512 deep)
def test_a_large_matmul_runs_the_kernel_and_equals_the_product(monkeypatch, kernel_calls, dtype, rows, depth, columns):
    _one_thread(monkeypatch)
    rng = np.random.default_rng(rows)
    a, b = rng.standard_normal((rows, depth)).astype(dtype), rng.standard_normal((depth, columns)).astype(dtype)
    out = cpu.matmul(a, b)
    assert kernel_calls == [((rows, depth), (depth, columns))] and out.dtype == dtype
    _close(out, a.astype(np.float64) @ b, depth)


@needs_measured_host
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_linears_bias_is_added_as_the_kernel_stores_its_product(monkeypatch, kernel_calls, dtype):
    """The bits of the kernel's product and then the add: the output is written once."""
    _one_thread(monkeypatch)
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((300, 130)).astype(dtype), rng.standard_normal((128, 130)).astype(dtype)
    bias = rng.standard_normal(128).astype(dtype)
    out = cpu.linear(x, w, bias)
    assert kernel_calls == [((300, 130), (130, 128))] and out.dtype == dtype
    np.testing.assert_array_equal(out, row_products.matmul(x, w.T) + bias)


@needs_measured_host
def test_a_stack_times_a_matrix_is_folded_into_one_kernel_product(monkeypatch, kernel_calls):
    _one_thread(monkeypatch)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 80, 128)).astype(np.float32), rng.standard_normal((128, 192)).astype(np.float32)
    out = cpu.matmul(a, b)
    assert kernel_calls == [((320, 128), (128, 192))] and out.shape == (4, 80, 192)
    _close(out, a.astype(np.float64) @ b, 128)


@needs_measured_host
def test_linear_and_its_backward_run_the_kernel_on_transposed_operands(monkeypatch, kernel_calls):
    """``x @ W.T`` (a transposed right operand, packed), ``g @ W`` and ``g.T @ x`` (a transposed left operand)."""
    _one_thread(monkeypatch)
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((256, 192)).astype(np.float32), rng.standard_normal((256, 192)).astype(np.float32)
    bias, g = rng.standard_normal(256).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32)
    x64, w64, g64 = x.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
    _close(cpu.linear(x, w, bias), x64 @ w64.T + bias, 192)
    gx, gw, gb = cpu.linear_backward(g, x, w, (True, True, True))
    _close(gx, g64 @ w64, 256)
    _close(gw, g64.T @ x64, 256)
    _close(gb, g64.sum(0), 256)
    assert len(kernel_calls) == 3


@pytest.mark.parametrize(
    "shape, threads, host",
    [
        ((255, 128, 128), 1, True),  # too few rows for its depth
        ((255, 511, 128), 1, True),  # too few rows for its depth
        ((127, 512, 128), 1, True),  # too few rows at any depth
        ((256, 127, 128), 1, True),  # too shallow
        ((256, 128, 63), 1, True),  # too narrow
        ((256, 128, 130), 1, True),  # a last panel of 2 columns in 64 wastes too much
        ((256, 128, 256), 2, True),  # two threads: too shallow to share
        ((256, 256, 192), 2, True),  # two threads: three panels of 64 columns are too few to share
        ((255, 256, 256), 2, True),  # two threads: too few rows to share
        ((256, 256, 256), 3, True),  # more threads: BLAS shares the product
        ((256, 128, 128), 1, False),  # a host the kernel was not measured on
    ],
)
def test_other_products_stay_with_blas(monkeypatch, kernel_calls, shape, threads, host):
    _one_thread(monkeypatch, threads)
    monkeypatch.setattr(row_products, "measured_host", lambda: host)
    rows, depth, columns = shape
    rng = np.random.default_rng(3)
    a = rng.standard_normal((rows, depth)).astype(np.float32)
    b = rng.standard_normal((depth, columns)).astype(np.float32)
    np.testing.assert_array_equal(cpu.matmul(a, b), a @ b)
    assert kernel_calls == []


@needs_measured_host
@pytest.mark.parametrize("transposed", [False, True])
def test_on_two_threads_a_product_of_four_panels_256_rows_and_256_deep_runs_the_kernel(monkeypatch, transposed):
    """``row_products.product`` shares its panels between the threads; ``a`` may be a weight gradient's ``g.T``."""
    _one_thread(monkeypatch, 2)
    monkeypatch.setattr(row_products, "shares_measured_faster", lambda: True)
    a = np.ones((256, 256), np.float32)
    assert cpu._blocked_product_pays(a.T if transposed else a, np.ones((256, 256), np.float32))


@needs_measured_host
def test_on_two_threads_a_host_where_blas_threads_were_faster_keeps_blas(monkeypatch, kernel_calls):
    _one_thread(monkeypatch, 2)
    monkeypatch.setattr(row_products, "shares_measured_faster", lambda: False)
    a, b = np.ones((256, 256), np.float32), np.ones((256, 256), np.float32)
    np.testing.assert_array_equal(cpu.matmul(a, b), a @ b)
    assert kernel_calls == []


@needs_measured_host
def test_a_transposed_left_operand_deeper_than_768_stays_with_blas(monkeypatch, kernel_calls):
    """Its elements along the shared dimension lie a row apart; at 1024 deep, a page apart, and the kernel lost."""
    _one_thread(monkeypatch)
    g = np.ones((1024, 256), np.float32)
    cpu.matmul(g.T, np.ones((1024, 128), np.float32))
    assert kernel_calls == []
    cpu.matmul(g[:768].T, np.ones((768, 128), np.float32))
    assert kernel_calls == [((256, 768), (768, 128))]


@needs_measured_host
def test_the_kernel_products_propagate_infinities_and_nans_as_blas(monkeypatch):
    _one_thread(monkeypatch)
    a = np.ones((256, 128), np.float32)
    a[3, 7], a[10, 0] = np.inf, np.nan
    b = np.ones((128, 128), np.float32)
    b[7, 5] = 0.0
    with np.errstate(invalid="ignore"):
        expected = a @ b
    np.testing.assert_array_equal(cpu.matmul(a, b), expected)


@pytest.mark.parametrize("with_bias", [False, True])
def test_a_short_float32_linear_multiplies_as_w_times_x_transposed_and_returns_rows(with_bias):
    """Fewer rows than output features (up to 64K outputs): OpenBLAS runs ``W @ x.T`` faster; the result is still
    ``x @ W.T (+ bias)``, C-contiguous."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((32, 256)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32)
    bias = rng.standard_normal(128).astype(np.float32) if with_bias else None
    out = cpu.linear(x, w, bias)
    assert out.flags.c_contiguous and out.dtype == np.float32
    _close(out, x.astype(np.float64) @ w.T + (0 if bias is None else bias), 256)


@needs_measured_host
def test_a_short_float32_linears_w_times_x_transposed_runs_the_kernel_where_it_pays(monkeypatch, kernel_calls):
    """A VAE's (64, 784) x (400, 784): ``W @ x.T`` is 400 rows, 784 deep and one panel of 64 columns."""
    _one_thread(monkeypatch)
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((64, 784)).astype(np.float32), rng.standard_normal((400, 784)).astype(np.float32)
    bias = rng.standard_normal(400).astype(np.float32)
    out = cpu.linear(x, w, bias)
    assert kernel_calls == [((400, 784), (784, 64))] and out.flags.c_contiguous
    _close(out, x.astype(np.float64) @ w.T + bias, 784)


@needs_measured_host
def test_a_convolutions_weight_gradient_runs_one_panel_of_64_columns_through_the_kernel(
    monkeypatch, kernel_calls, torch
):
    """The cnn's (64, 32, 26, 26) -> 64 3x3 convolution: each sample's ``columns @ g.T``, (288, 576) x (576, 64), is
    one panel wide (0.86 of OpenBLAS's time); its weight gradient is torch's. (Two samples here, whose taps'
    operands would fit the cache for ``conv_kernels.weight_grad``; the cnn's 64 do not. Winograd's kernels, which
    run the cnn's, are off here.)"""
    _one_thread(monkeypatch)
    monkeypatch.setattr(conv_kernels, "weight_grad_pays", lambda *args: False)
    monkeypatch.setattr(winograd_kernels, "pays", lambda *args, **kwargs: False)
    rng = np.random.default_rng(4)
    x, w = (
        rng.standard_normal((2, 32, 26, 26)).astype(np.float32),
        rng.standard_normal((64, 32, 3, 3)).astype(np.float32),
    )
    g = rng.standard_normal((2, 64, 24, 24)).astype(np.float32)
    ours = numbagrad.tensor(w, requires_grad=True)
    numbagrad.nn.functional.conv2d(numbagrad.tensor(x), ours).backward(numbagrad.tensor(g))
    assert kernel_calls == [((288, 576), (576, 64))] * 2
    theirs = torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(torch.tensor(x), theirs).backward(torch.tensor(g))
    _close(ours.grad.numpy(), theirs.grad.numpy(), 2 * 576)
