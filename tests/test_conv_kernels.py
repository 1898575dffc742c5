"""``conv_kernels``: a stride-1 single-group convolution computed on its zero-padded input's grid, the taps read
in place through a table of offsets (no columns made). It equals the columns' product at every padding, dilation
and block shape, gives the same bits on any thread count, and runs ``F.conv2d``'s forward and input gradient
where it pays, matching torch."""

import numpy as np
import pytest

from numbagrad.backend import conv_kernels, cpu, cpu_threads, row_products, winograd_kernels

pytestmark = pytest.mark.skipif(not row_products.measured_host(), reason="the kernel runs on AVX-512 hosts")


@pytest.fixture(autouse=True)
def _no_winograd(monkeypatch):
    """These are this kernel's cases: the 3x3 convolutions that ``winograd_kernels`` takes stay here."""
    monkeypatch.setattr(winograd_kernels, "pays", lambda *args, **kwargs: False)


#: (batch, channels, outputs, (H, W), (kh, kw), (top, left) padding, dilation): 4-row blocks of output channels
#: and 5-row ones (7, 9, 6 channels), rectangular kernels and inputs, dilation, no padding, padding past the
#: kernel, and grids of fewer positions than a panel.
CASES = [
    (3, 5, 8, (9, 13), (3, 3), (1, 1), (1, 1)),
    (2, 6, 7, (12, 10), (3, 5), (1, 2), (1, 1)),
    (2, 4, 9, (11, 11), (3, 3), (2, 2), (2, 2)),
    (1, 3, 6, (7, 20), (2, 3), (0, 0), (1, 3)),
    (2, 2, 4, (5, 6), (3, 3), (3, 4), (1, 1)),
    (1, 16, 12, (4, 4), (1, 1), (0, 0), (1, 1)),
]


def _operands(case, dtype, seed=0):
    batch, channels, outputs, (h, w), kernel, padding, dilation = case
    out_hw = tuple(size + 2 * p - d * (k - 1) for size, p, d, k in zip((h, w), padding, dilation, kernel))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, h, w)).astype(dtype)
    weight = rng.standard_normal((outputs, channels, *kernel)).astype(dtype)
    bias = rng.standard_normal(outputs).astype(dtype)
    g = rng.standard_normal((batch, outputs, *out_hw)).astype(dtype)
    return x, weight, bias, g, out_hw


def _tolerance(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_the_forward_equals_the_columns_product(monkeypatch, case, with_bias, dtype):
    x, weight, bias, _, out_hw = _operands(case, dtype)
    bias = bias if with_bias else None
    monkeypatch.setattr(conv_kernels, "forward_pays", lambda *args: False)
    expected, _ = cpu.conv2d(x, weight, bias, (1, 1), case[5], case[6], 1, out_hw)
    out = np.empty((len(x), weight.shape[0], *out_hw), dtype)
    conv_kernels.forward(x, weight, bias, case[5], case[6], out)
    np.testing.assert_allclose(out, expected, **_tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_the_backward_through_the_kernels_equals_the_columns_gradients(monkeypatch, case, dtype):
    """``cpu.conv2d_backward`` with the kernels forced on and off: the input's gradient (the kernel flipped, its
    channels swapped, the padding ``dilation * (k - 1) - padding``, negative where the padding is wider: cropped),
    the weight's (per tap) and the bias's."""
    x, weight, _, g, _ = _operands(case, dtype)
    args = (g, x, x.shape, weight, (1, 1), case[5], case[6], 1, True, True, True)
    monkeypatch.setattr(conv_kernels, "forward_pays", lambda *args: False)
    expected = cpu.conv2d_backward(*args)
    monkeypatch.setattr(conv_kernels, "forward_pays", lambda *args: True)
    monkeypatch.setattr(conv_kernels, "weight_grad_pays", lambda *args: True)
    for ours, theirs in zip(cpu.conv2d_backward(*args), expected):
        np.testing.assert_allclose(ours, theirs, **_tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES + [(2, 48, 5, (6, 7), (3, 3), (1, 1), (1, 1))])
def test_the_weight_gradient_equals_the_columns_products(monkeypatch, case, dtype):
    """Per tap, ``g`` on the padded grid times the input channels-last shifted by the tap: at every padding and
    dilation, 8- and 4-row blocks (output channels padded to them), and channels past four SIMD vectors (48
    float64 ones: six)."""
    x, weight, _, g, _ = _operands(case, dtype)
    monkeypatch.setattr(conv_kernels, "weight_grad_pays", lambda *args: False)
    _, expected, _ = cpu.conv2d_backward(g, x, x.shape, weight, (1, 1), case[5], case[6], 1, False, True, False)
    ours = conv_kernels.weight_grad(x, g, weight.shape[2:], case[5], case[6])
    np.testing.assert_allclose(ours, expected, **_tolerance(dtype))


def test_the_weight_gradient_reads_operands_strided_in_any_way(monkeypatch):
    """``x`` channels-last in memory and ``g`` a transposed view: their rows are copied in whole vectors, so
    they are made C-contiguous first."""
    case = (2, 20, 6, (9, 18), (3, 3), (1, 1), (1, 1))
    x, weight, _, g, _ = _operands(case, np.float32)
    monkeypatch.setattr(conv_kernels, "weight_grad_pays", lambda *args: False)
    _, expected, _ = cpu.conv2d_backward(g, x, x.shape, weight, (1, 1), case[5], case[6], 1, False, True, False)
    x_strided = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    g_strided = np.ascontiguousarray(g.transpose(1, 0, 3, 2)).transpose(1, 0, 3, 2)
    ours = conv_kernels.weight_grad(x_strided, g_strided, (3, 3), case[5], case[6])
    np.testing.assert_allclose(ours, expected, **_tolerance(np.float32))


def test_the_weight_gradients_taps_shared_among_threads_give_the_bits_of_one_thread(on_one_and_two_threads):
    """The (tap, block of rows) units are split among the threads; each unit is summed as on one thread."""
    x, weight, _, g, _ = _operands((4, 24, 8, (32, 32), (3, 3), (1, 1), (1, 1)), np.float32)
    one, two = on_one_and_two_threads(lambda: conv_kernels.weight_grad(x, g, (3, 3), (1, 1), (1, 1)))
    np.testing.assert_array_equal(one, two)


def test_samples_shared_among_threads_give_the_bits_of_one_thread(on_one_and_two_threads):
    """Five samples on two threads: two and three."""
    x, weight, bias, _, out_hw = _operands((5, 24, 8, (32, 32), (3, 3), (1, 1), (1, 1)), np.float32)
    calls = []

    def spy(function, args, real=cpu_threads.run_compiled):
        calls.append(args[:, conv_kernels.FIRST : conv_kernels.COUNT + 1].tolist())
        real(function, args)

    def run():
        out = np.empty((5, 8, *out_hw), np.float32)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cpu_threads, "run_compiled", spy)
            conv_kernels.forward(x, weight, bias, (1, 1), (1, 1), out)
        return out

    one, two = on_one_and_two_threads(run)
    assert calls == [[[0, 2], [2, 3]]]  # (none on one thread)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize(
    "shape, runs",
    [
        ((4, 48, 16, (16, 16), (3, 3)), True),  # a U-Net decoder's: 432 taps, 288 grid positions in 5 panels
        ((4, 24, 8, (32, 32), (3, 3)), True),
        ((64, 32, 64, (24, 24), (3, 3)), True),  # the cnn's second convolution
        ((64, 1, 32, (26, 26), (3, 3)), False),  # 9 taps
        ((4, 16, 32, (8, 8), (3, 3)), False),  # 80 grid positions in two panels of 64
        ((4, 8, 16, (16, 16), (3, 3)), False),  # 72 taps, 1.3 million multiply-adds
        ((4, 48, 128, (16, 16), (3, 3)), False),  # many output channels: BLAS's packing pays
    ],
)
def test_the_kernel_runs_where_it_was_measured_faster(shape, runs):
    batch, channels, outputs, out_hw, kernel = shape
    assert conv_kernels.forward_pays(np.float32, batch, channels, outputs, kernel, (1, 1), out_hw) is runs


@pytest.mark.parametrize(
    "shape, runs",
    [
        ((4, 48, 16, (16, 16)), True),  # the U-Net's decoders: three and two float32 vectors of input channels
        ((4, 24, 8, (32, 32)), True),
        ((4, 16, 32, (8, 8)), True),
        ((4, 8, 16, (16, 16)), False),  # 8 input channels: half a vector
        ((64, 32, 64, (24, 24)), False),  # the cnn's: a tap's operands (6.9 MiB) outgrow the cache
        ((1, 16, 8, (4, 4)), False),  # 0.1 million multiply-adds
    ],
)
def test_the_weight_gradient_runs_where_it_was_measured_faster(shape, runs):
    batch, channels, outputs, out_hw = shape
    assert conv_kernels.weight_grad_pays(np.float32, batch, channels, outputs, (3, 3), (1, 1), out_hw) is runs
    assert not conv_kernels.weight_grad_pays(np.float16, batch, channels, outputs, (3, 3), (1, 1), out_hw)


def test_the_kernel_leaves_other_dtypes_and_more_grid_than_columns_to_the_columns():
    """float16 runs in float32 elsewhere; the cnn's input gradient (a 26 x 28 grid for 24 x 24 columns) is cheaper
    as the columns' product and col2im."""
    assert not conv_kernels.forward_pays(np.float16, 4, 48, 16, (3, 3), (1, 1), (16, 16))
    assert not conv_kernels.forward_pays(np.int64, 4, 48, 16, (3, 3), (1, 1), (16, 16))
    assert not conv_kernels.forward_pays(np.float32, 64, 64, 32, (3, 3), (1, 1), (26, 26), 24 * 24)


@pytest.mark.parametrize("dtype, atol, per_tap", [("float32", 2e-4, True), ("float64", 1e-10, False)])
def test_conv2d_through_the_kernel_matches_torch(conv2d_on_spied_kernels, dtype, atol, per_tap):
    """A U-Net decoder's convolution: its forward, input gradient and (float32: its 48 input channels are three
    vectors; float64's six are more than a block holds) weight gradient run on the kernels (spied); values and
    all three gradients as torch's."""
    ran, pairs = conv2d_on_spied_kernels(conv_kernels, (4, 48, 16, 16), (16, 48, 3, 3), dtype)
    assert ran == [(4, 48, 16, 16), (4, 16, 16, 16)] + (["weight"] if per_tap else [])
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=atol)
