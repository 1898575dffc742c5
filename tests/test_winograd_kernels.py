"""``winograd_kernels``: a stride-1 3x3 convolution, its input gradient and its weight gradient by Winograd's
F(2x2, 3x3). Each equals the columns' products (im2col and BLAS) at every padding, odd and even output sizes and
channel counts, gives the same bits on any thread count, runs ``F.conv2d`` where it pays, matching torch, and
is as precise as the direct product."""

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import conv_kernels, cpu, row_products, winograd_kernels

pytestmark = pytest.mark.skipif(not row_products.measured_host(), reason="the kernels run on AVX-512 hosts")

#: (batch, channels, outputs, (H, W), (top, left) padding): odd output sizes (a last tile half outside), output
#: channels in 4-row and 5-row blocks and past four SIMD vectors (70: two panels), one output position, rows of
#: tiles longer than a vector, asymmetric padding, one sample of several blocks of tiles (the weight gradient's
#: spans then parts of it).
CASES = [
    (2, 5, 8, (9, 13), (1, 1)),
    (1, 32, 64, (18, 18), (0, 0)),
    (2, 7, 70, (10, 21), (2, 1)),
    (3, 3, 9, (3, 3), (0, 0)),
    (2, 4, 6, (5, 40), (1, 3)),
    (1, 3, 5, (40, 30), (1, 1)),
]


def _operands(case, dtype, seed=0):
    batch, channels, outputs, (h, w), padding = case
    out_hw = (h + 2 * padding[0] - 2, w + 2 * padding[1] - 2)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, h, w)).astype(dtype)
    weight = rng.standard_normal((outputs, channels, 3, 3)).astype(dtype)
    bias = rng.standard_normal(outputs).astype(dtype)
    g = rng.standard_normal((batch, outputs, *out_hw)).astype(dtype)
    return x, weight, bias, g, out_hw


def _close(ours, expected, dtype):
    """Within a few units of the precision's rounding of the largest value: the sums run in another order."""
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(ours, expected, rtol=0, atol=scale * (2e-6 if dtype == np.float32 else 1e-13))


def test_the_transforms_are_winograds_minimal_filtering():
    """For any 4x4 input tile ``d`` and 3x3 kernel ``w``, ``A^T [(G w G^T) * (B^T d B)] A`` is the tile's 2x2
    correlation with ``w``; and the kernels' transformed kernel is ``G w G^T``, laid out (16, output rows, input
    channels)."""
    rng = np.random.default_rng(7)
    d, w = rng.standard_normal((4, 4)), rng.standard_normal((3, 3))
    b_t, g, a_t = winograd_kernels.INPUT_TRANSFORM, winograd_kernels.KERNEL_TRANSFORM, winograd_kernels.OUTPUT_TRANSFORM
    tile = a_t @ ((g @ w @ g.T) * (b_t @ d @ b_t.T)) @ a_t.T
    direct = [[(d[i : i + 3, j : j + 3] * w).sum() for j in range(2)] for i in range(2)]
    np.testing.assert_allclose(tile, direct, rtol=1e-13, atol=1e-13)
    weights = rng.standard_normal((6, 2, 3, 3))
    expected = np.einsum("ai,ocij,bj->aboc", g, weights, g).reshape(16, 6, 2)
    u = winograd_kernels.transformed_kernel(weights)
    assert u.shape == (16, 10, 2)  # (6 output channels: two blocks of 5)
    np.testing.assert_allclose(u[:, :6], expected, rtol=1e-15, atol=1e-15)
    assert not u[:, 6:].any()


@pytest.fixture
def columns_only(monkeypatch):
    """``cpu.conv2d`` and ``conv2d_backward`` on the columns' products: the reference."""
    monkeypatch.setattr(winograd_kernels, "pays", lambda *args, **kwargs: False)
    monkeypatch.setattr(conv_kernels, "forward_pays", lambda *args: False)
    monkeypatch.setattr(conv_kernels, "weight_grad_pays", lambda *args: False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_the_forward_equals_the_columns_product(columns_only, case, with_bias, dtype):
    x, weight, bias, _, out_hw = _operands(case, dtype)
    bias = bias if with_bias else None
    expected, _ = cpu.conv2d(x, weight, bias, (1, 1), case[4], (1, 1), 1, out_hw)
    out = np.empty((len(x), weight.shape[0], *out_hw), dtype)
    winograd_kernels.forward(x, weight, bias, case[4], out)
    _close(out, expected, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES + [(2, 6, 5, (8, 19), (3, 2))])
def test_the_backward_through_the_kernels_equals_the_columns_gradients(monkeypatch, case, dtype):
    """``cpu.conv2d_backward`` with the kernels forced on and off: the input's gradient (the flipped kernel's
    convolution of ``g``, padded by ``2 - padding``: cropped where the padding is wider than 2), the weight's and
    the bias's."""
    x, weight, _, g, _ = _operands(case, dtype)
    args = (g, x, x.shape, weight, (1, 1), case[4], (1, 1), 1, True, True, True)
    monkeypatch.setattr(conv_kernels, "forward_pays", lambda *args: False)
    monkeypatch.setattr(conv_kernels, "weight_grad_pays", lambda *args: False)
    monkeypatch.setattr(winograd_kernels, "pays", lambda *args, **kwargs: False)
    expected = cpu.conv2d_backward(*args)
    ran, real, real_grad = [], winograd_kernels.forward, winograd_kernels.weight_grad
    monkeypatch.setattr(winograd_kernels, "pays", lambda *args, **kwargs: True)
    monkeypatch.setattr(winograd_kernels, "forward", lambda *args: ran.append("input") or real(*args))
    monkeypatch.setattr(winograd_kernels, "weight_grad", lambda *args: ran.append("weight") or real_grad(*args))
    ours = cpu.conv2d_backward(*args)
    assert ran == ["input", "weight"]
    for a, e in zip(ours, expected):
        _close(a, e, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES + [(9, 12, 20, (6, 7), (1, 1))])
def test_the_weight_gradient_equals_the_columns_products(columns_only, case, dtype):
    """Summed over spans of samples (nine samples: four spans of two or three), input channels in 4- and 5-row
    blocks, output channels past a vector."""
    x, weight, _, g, _ = _operands(case, dtype)
    _, expected, _ = cpu.conv2d_backward(g, x, x.shape, weight, (1, 1), case[4], (1, 1), 1, False, True, False)
    _close(winograd_kernels.weight_grad(x, g, case[4]), expected, dtype)


@pytest.mark.parametrize("batch", [4, 1])
def test_units_shared_among_threads_give_the_bits_of_one_thread(batch, on_one_and_two_threads):
    """Whole samples per thread, or (one sample) blocks of its tiles."""
    x, weight, bias, g, out_hw = _operands((batch, 16, 16, (40, 40), (1, 1)), np.float32)

    def run():
        out = np.empty((batch, 16, *out_hw), np.float32)
        winograd_kernels.forward(x, weight, bias, (1, 1), out)
        return out

    one, two = on_one_and_two_threads(run)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("batch", [5, 1])
def test_the_weight_gradients_spans_shared_among_threads_give_the_bits_of_one_thread(batch, on_one_and_two_threads):
    """The spans (of whole samples, or of one sample's blocks of tiles) depend on the shapes alone, and their sums
    are added in order."""
    x, _, _, g, _ = _operands((batch, 16, 16, (40, 40), (1, 1)), np.float32)
    one, two = on_one_and_two_threads(lambda: winograd_kernels.weight_grad(x, g, (1, 1)))
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize(
    "dtype, kernel, stride, dilation, groups, channels, out_width, gradient, runs",
    [
        (np.float32, (3, 3), (1, 1), (1, 1), 1, 32, 24, False, True),  # the cnn's second convolution
        (np.float32, (3, 3), (1, 1), (1, 1), 1, 32, 24, True, True),  # and its weight gradient
        (np.float64, (3, 3), (1, 1), (1, 1), 1, 8, 8, True, True),  # a float64 vector is 8 values
        (np.float32, (3, 3), (1, 1), (1, 1), 1, 16, 8, False, False),  # 8x8 outputs: a third of each vector
        (np.float32, (3, 3), (1, 1), (1, 1), 1, 3, 32, False, True),  # the U-Net's first convolution
        (np.float32, (3, 3), (1, 1), (1, 1), 1, 3, 32, True, False),  # whose weight gradient does not pay
        (np.float32, (3, 3), (1, 1), (1, 1), 1, 0, 32, False, False),  # no input channels: no product to run
        (np.float16, (3, 3), (1, 1), (1, 1), 1, 32, 24, False, False),  # (float16 runs in float32 elsewhere)
        (np.int64, (3, 3), (1, 1), (1, 1), 1, 32, 24, False, False),
        (np.float32, (5, 5), (1, 1), (1, 1), 1, 32, 24, False, False),
        (np.float32, (3, 3), (2, 2), (1, 1), 1, 32, 24, False, False),
        (np.float32, (3, 3), (1, 1), (2, 2), 1, 32, 24, False, False),
        (np.float32, (3, 3), (1, 1), (1, 1), 2, 32, 24, False, False),
    ],
)
def test_the_kernels_run_where_they_were_measured_faster(
    dtype, kernel, stride, dilation, groups, channels, out_width, gradient, runs
):
    assert winograd_kernels.pays(dtype, kernel, stride, dilation, groups, channels, out_width, gradient) is runs


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_through_the_kernels_matches_torch(conv2d_on_spied_kernels, dtype):
    """A 3x3 convolution with padding whose forward, input gradient and weight gradient all run here (spied);
    values and all three gradients as torch's."""
    ran, pairs = conv2d_on_spied_kernels(winograd_kernels, (2, 16, 16, 20), (24, 16, 3, 3), dtype)
    assert ran == [(2, 16, 16, 20), (2, 24, 16, 20), "weight"]
    for ours, theirs in pairs:
        _close(ours, theirs, np.dtype(dtype))


def test_float32_is_as_precise_as_the_direct_product(columns_only):
    """Against a float64 reference, the transforms (coefficients 0, +-1 and 1/2) add no error beyond the direct
    product's own order of rounding: the forward's and the weight gradient's largest errors within twice the
    columns' product's."""
    x, weight, _, g, out_hw = _operands((2, 32, 64, (26, 26), (0, 0)), np.float32)
    weight = weight / 17
    exact, _ = cpu.conv2d(x.astype(np.float64), weight.astype(np.float64), None, (1, 1), (0, 0), (1, 1), 1, out_hw)
    direct, _ = cpu.conv2d(x, weight, None, (1, 1), (0, 0), (1, 1), 1, out_hw)
    out = np.empty(exact.shape, np.float32)
    winograd_kernels.forward(x, weight, None, (0, 0), out)
    assert np.abs(out - exact).max() <= 2 * np.abs(direct - exact).max()
    args = (x.shape, weight, (1, 1), (0, 0), (1, 1), 1, False, True, False)
    exact_grad = cpu.conv2d_backward(g.astype(np.float64), x.astype(np.float64), *args)[1]
    direct_grad = cpu.conv2d_backward(g, x, *args)[1]
    ours = winograd_kernels.weight_grad(x, g, (0, 0))
    assert np.abs(ours - exact_grad).max() <= 2 * np.abs(direct_grad - exact_grad).max()


@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_a_non_finite_input_reaches_the_outputs_whose_windows_hold_it(torch, value):
    """An infinity or NaN makes exactly torch's outputs non-finite (Winograd's sums along one window's paths
    may meet an infinity with both signs: NaN where torch has an infinity); the others keep their values."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 4, 20, 20)).astype(np.float32), rng.standard_normal((5, 4, 3, 3)) * 0.3
    x[0, 2, 7, 11] = value
    x[0, 0, 0, 19] = value
    w = w.astype(np.float32)
    ours = numbagrad.nn.functional.conv2d(numbagrad.tensor(x), numbagrad.tensor(w), padding=1).numpy()
    theirs = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
    finite = np.isfinite(theirs)
    _close(ours[finite], theirs[finite], np.float32)
