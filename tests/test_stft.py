"""``stft`` and ``istft`` against torch: values, dtypes, gradients (through the signal and the window), the
round trip, and torch's errors and warnings."""

import warnings

import numpy as np
import pytest

import numbagrad


def _pair(torch, data, requires_grad=True):
    return numbagrad.tensor(data, requires_grad=requires_grad), torch.tensor(data, requires_grad=requires_grad)


def _close(ours, theirs, tol=1e-10):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().resolve_conj().numpy(), rtol=tol, atol=tol)


def _loss(module, y, weights):
    """A real loss reading every real and imaginary part with its own weight."""
    if y.dtype.is_complex:
        return (module.view_as_real(y) * module.tensor(np.stack([weights, 3 * weights], -1))).sum()
    return (y * module.tensor(weights)).sum()


STFT_CASES = [
    dict(n_fft=8, hop_length=2),
    dict(n_fft=8, hop_length=3, win_length=6),
    dict(n_fft=7, hop_length=2, normalized=True),
    dict(n_fft=8, hop_length=4, onesided=False),
    dict(n_fft=8, hop_length=2, center=False),
    dict(n_fft=8, hop_length=2, win_length=5, center=False, align_to_window=True),
    dict(n_fft=6, hop_length=2, pad_mode="constant"),
    dict(n_fft=6, hop_length=1, pad_mode="replicate"),
    dict(n_fft=6, pad_mode="circular"),
    dict(n_fft=4, hop_length=5, center=False),
]


#: (torch's align_to_window framing of a batch reads past the signal's end, so that case is compared unbatched)
STFT_SHAPES = [
    (kw, shape) for kw in STFT_CASES for shape in [(20,), (2, 17)] if len(shape) == 1 or "align_to_window" not in kw
]


@pytest.mark.parametrize("kwargs, shape", STFT_SHAPES)
def test_stft_matches_torch_with_gradients(torch, kwargs, shape):
    rng = np.random.default_rng(0)
    x, tx = _pair(torch, rng.standard_normal(shape))
    win = kwargs.get("win_length", kwargs["n_fft"])
    w, tw = _pair(torch, rng.random(win) + 0.5)
    ours = numbagrad.stft(x, window=w, return_complex=True, **kwargs)
    theirs = torch.stft(tx, window=tw, return_complex=True, **kwargs)
    assert ours.dtype == numbagrad.complex128 and tuple(ours.shape) == tuple(theirs.shape)
    _close(ours, theirs)
    weights = rng.standard_normal(tuple(ours.shape))
    _loss(numbagrad, ours, weights).backward()
    _loss(torch, theirs, weights).backward()
    _close(x.grad, tx.grad)
    _close(w.grad, tw.grad)


def test_stft_without_window_warns_and_uses_a_rectangular_one(torch):
    data = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    with pytest.warns(UserWarning, match="A window was not provided"):
        ours = numbagrad.stft(numbagrad.tensor(data), 4, win_length=3, return_complex=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.stft(torch.tensor(data), 4, win_length=3, return_complex=True)
    assert ours.dtype == numbagrad.complex64
    _close(ours, theirs, 1e-5)


def test_stft_of_complex_input_is_two_sided_with_torchs_gradients(torch):
    rng = np.random.default_rng(2)
    x, tx = _pair(torch, rng.standard_normal(12) + 1j * rng.standard_normal(12))
    w, tw = _pair(torch, np.hanning(6) + 0.1)
    ours, theirs = numbagrad.stft(x, 6, window=w), torch.stft(tx, 6, window=tw)
    assert tuple(ours.shape) == tuple(theirs.shape) == (6, 13)
    _close(ours, theirs)
    weights = rng.standard_normal(tuple(ours.shape))
    _loss(numbagrad, ours, weights).backward()
    _loss(torch, theirs, weights).backward()
    _close(x.grad, tx.grad)
    _close(w.grad, tw.grad)


def test_stft_return_complex_false_is_the_real_view_with_a_deprecation_warning(torch):
    data = np.random.default_rng(3).standard_normal(16)
    window = np.hanning(8)
    with pytest.warns(UserWarning, match="stft with return_complex=False is deprecated"):
        ours = numbagrad.stft(numbagrad.tensor(data), 8, window=numbagrad.tensor(window), return_complex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.stft(torch.tensor(data), 8, window=torch.tensor(window), return_complex=False)
    assert ours.dtype == numbagrad.float64
    _close(ours, theirs)


def test_stft_is_a_tensor_method():
    x, window = numbagrad.randn(16), numbagrad.hann_window(8)
    np.testing.assert_array_equal(
        x.stft(8, window=window, return_complex=True).numpy(),
        numbagrad.stft(x, 8, window=window, return_complex=True).numpy(),
    )


_STFT_ERRORS = [
    lambda m: m.stft(m.randn(20), 8, window=m.ones(8)),
    lambda m: m.stft(m.arange(20), 8, window=m.ones(8), return_complex=True),
    lambda m: m.stft(m.ones(2, 2, 20), 8, window=m.ones(8), return_complex=True),
    lambda m: m.stft(m.ones(20), 30, center=False, window=m.ones(30), return_complex=True),
    lambda m: m.stft(m.ones(20), 8, hop_length=0, window=m.ones(8), return_complex=True),
    lambda m: m.stft(m.ones(20), 8, win_length=9, return_complex=True),
    lambda m: m.stft(m.ones(20), 8, window=m.ones(5), return_complex=True),
    lambda m: m.stft(m.ones(20, dtype=m.float64), 8, window=m.ones(1, 8), return_complex=True),
    lambda m: m.stft(m.ones(20), 8, window=m.ones(8), align_to_window=True, return_complex=True),
    lambda m: m.stft(m.ones(20), 8, window=m.ones(8), pad_mode="bad", return_complex=True),
    lambda m: m.stft(m.ones(3), 8, window=m.ones(8), return_complex=True),
    lambda m: m.stft(m.ones(3), 8, window=m.ones(8), pad_mode="circular", return_complex=True),
    lambda m: m.stft(m.ones(1, 1, 2, 20), 8, window=m.ones(8), return_complex=True),
    lambda m: m.stft(m.ones(2, 0), 8, window=m.ones(8), pad_mode="replicate", return_complex=True),
    lambda m: m.stft(m.ones(20, dtype=m.complex64), 8, window=m.ones(8), onesided=True),
    lambda m: m.stft(m.ones(20, dtype=m.float16), 8, window=m.ones(8, dtype=m.float16), return_complex=True),
]


@pytest.mark.parametrize("call", _STFT_ERRORS)
def test_stft_errors_match_torch(torch, call):
    def raised(m):
        with pytest.raises(Exception) as info:
            call(m)
        return type(info.value).__name__, str(info.value)

    assert raised(numbagrad) == raised(torch)


# --- istft -----------------------------------------------------------------------------------------------------------

ISTFT_CASES = [
    dict(n_fft=8, hop_length=2),
    dict(n_fft=8, hop_length=3, win_length=6),
    dict(n_fft=7, hop_length=2, normalized=True),
    dict(n_fft=8, hop_length=2, onesided=False),
    dict(n_fft=8, hop_length=2, center=False),
    dict(n_fft=8, hop_length=2, length=15),
    dict(n_fft=8, hop_length=2, onesided=False, return_complex=True),
]


@pytest.mark.parametrize("kwargs", ISTFT_CASES)
@pytest.mark.parametrize("batched", [False, True])
def test_istft_matches_torch_with_gradients(torch, kwargs, batched):
    rng = np.random.default_rng(4)
    n_fft, win = kwargs["n_fft"], kwargs.get("win_length", kwargs["n_fft"])
    onesided = kwargs.get("onesided", True)
    bins = n_fft // 2 + 1 if onesided else n_fft
    shape = (2, bins, 6) if batched else (bins, 6)
    spectrum = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    z, tz = _pair(torch, spectrum)
    w, tw = _pair(torch, rng.random(win) + 0.5)
    ours, theirs = numbagrad.istft(z, window=w, **kwargs), torch.istft(tz, window=tw, **kwargs)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch", "numbagrad")
    assert tuple(ours.shape) == tuple(theirs.shape)
    _close(ours, theirs)
    weights = rng.standard_normal(tuple(ours.shape))
    _loss(numbagrad, ours, weights).backward()
    _loss(torch, theirs, weights).backward()
    _close(z.grad, tz.grad)
    _close(w.grad, tw.grad)


def test_istft_inverts_stft():
    signal = numbagrad.randn(2, 40, dtype=numbagrad.float64)
    window = numbagrad.hann_window(16, dtype=numbagrad.float64)
    spectrum = numbagrad.stft(signal, 16, hop_length=4, window=window, return_complex=True)
    back = numbagrad.istft(spectrum, 16, hop_length=4, window=window, length=40)
    np.testing.assert_allclose(back.numpy(), signal.numpy(), atol=1e-12)


def test_istft_pads_to_a_longer_length_with_torchs_warning(torch):
    spectrum = np.ones((5, 3), np.complex64)
    with pytest.warns(UserWarning, match="The length of signal is shorter than the length parameter"):
        ours = numbagrad.istft(numbagrad.tensor(spectrum), 8, window=numbagrad.ones(8), length=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.istft(torch.tensor(spectrum), 8, window=torch.ones(8), length=20)
    _close(ours, theirs, 1e-6)


def test_istft_gradcheck_through_spectrum_and_window():
    parts = numbagrad.randn(3, 9, 2, dtype=numbagrad.float64, requires_grad=True)
    window = (numbagrad.rand(4, dtype=numbagrad.float64) + 0.5).requires_grad_()

    def fn(parts, window):
        return numbagrad.istft(numbagrad.view_as_complex(parts), 4, hop_length=1, window=window)

    assert numbagrad.autograd.gradcheck(fn, (parts, window))


_ISTFT_ERRORS = [
    lambda m: m.istft(m.ones(5, 11), 8),
    lambda m: m.istft(m.ones(5, 0, dtype=m.complex64), 8),
    lambda m: m.istft(m.ones(5, dtype=m.complex64), 8),
    lambda m: m.istft(m.ones(1, 1, 5, 3, dtype=m.complex64), 8),
    lambda m: m.istft(m.ones(6, 11, dtype=m.complex64), 8, onesided=True),
    lambda m: m.istft(m.ones(6, 11, dtype=m.complex64), 8, onesided=False),
    lambda m: m.istft(m.ones(5, 11, dtype=m.complex64), 8, hop_length=9, window=m.ones(8)),
    lambda m: m.istft(m.ones(5, 11, dtype=m.complex64), 8, win_length=9),
    lambda m: m.istft(m.ones(5, 11, dtype=m.complex64), 8, window=m.ones(5)),
    lambda m: m.istft(m.ones(5, 11, dtype=m.complex64), 8, window=m.zeros(8)),
    lambda m: m.istft(m.ones(5, 11, dtype=m.complex64), 8, window=m.ones(8), return_complex=True),
]


@pytest.mark.parametrize("call", _ISTFT_ERRORS)
def test_istft_errors_match_torch(torch, call):
    def raised(m):
        with pytest.raises(Exception) as info, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(m)
        return type(info.value).__name__, str(info.value)

    assert raised(numbagrad) == raised(torch)


def test_stft_and_istft_run_on_the_inputs_device(device):
    signal = numbagrad.randn(30, dtype=numbagrad.float64, device=device, requires_grad=True)
    window = numbagrad.hann_window(8, dtype=numbagrad.float64, device=device)
    spectrum = numbagrad.stft(signal, 8, hop_length=2, window=window, return_complex=True)
    back = numbagrad.istft(spectrum, 8, hop_length=2, window=window, length=30)
    assert spectrum.device.type == back.device.type == device
    np.testing.assert_allclose(back.detach().cpu().numpy(), signal.detach().cpu().numpy(), atol=1e-12)
    back.sum().backward()
    np.testing.assert_allclose(signal.grad.cpu().numpy(), np.ones(30), atol=1e-12)


def test_stft_gradcheck_and_gradgradcheck_through_signal_and_window():
    signal = numbagrad.randn(10, dtype=numbagrad.float64, requires_grad=True)
    window = (numbagrad.rand(3, dtype=numbagrad.float64) + 0.5).requires_grad_()

    def fn(signal, window):
        spectrum = numbagrad.stft(signal, 4, hop_length=2, win_length=3, window=window, return_complex=True)
        return numbagrad.view_as_real(spectrum)

    assert numbagrad.autograd.gradcheck(fn, (signal, window))
    assert numbagrad.autograd.gradgradcheck(fn, (signal, window))
