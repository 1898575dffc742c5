"""numbagrad.fft's real-valued members against torch.fft: frequencies (values, dtypes, errors) and shifts
(values and gradients)."""

import numpy as np
import pytest

import numbagrad
import numbagrad.fft as nfft


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n, d", [(1, 1.0), (4, 1.0), (5, 0.1), (8, -2.0), (7, 0.3), (0, 1.0), (3, 0.0)])
@pytest.mark.parametrize("dtype", [None, "float64", "float16"])
def test_frequencies_match_torch(torch, name, n, d, dtype):
    ours = getattr(nfft, name)(n, d, dtype=dtype and getattr(numbagrad, dtype))
    theirs = getattr(torch.fft, name)(n, d, dtype=dtype and getattr(torch, dtype))
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_frequencies_requires_grad():
    assert nfft.fftfreq(3, requires_grad=True).requires_grad


@pytest.mark.parametrize(
    "call",
    [
        lambda m, fft: fft.fftfreq(-1),
        lambda m, fft: fft.fftfreq(3, dtype=m.int64),
        lambda m, fft: fft.rfftfreq(2.5),
        lambda m, fft: fft.fftshift(m.zeros(3), dim=2),
    ],
)
def test_errors_match_torch(torch, call):
    def raised(m, fft):
        with pytest.raises(Exception) as info:
            call(m, fft)
        return type(info.value), str(info.value)

    assert raised(numbagrad, nfft) == raised(torch, torch.fft)


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize(
    "shape, dim", [((5,), None), ((2, 3), None), ((2, 3), 1), ((3, 4), (0,)), ((2, 5, 3), (-1, 0))]
)
def test_shifts_match_torch_with_gradients(torch, name, shape, dim):
    data = np.random.default_rng(0).standard_normal(shape)
    x, tx = numbagrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    ours, theirs = getattr(nfft, name)(x, dim), getattr(torch.fft, name)(tx, dim)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    weights = np.arange(data.size, dtype=np.float64).reshape(shape)
    (ours * numbagrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_ifftshift_undoes_fftshift():
    x = numbagrad.arange(15.0).reshape(3, 5)
    np.testing.assert_array_equal(nfft.ifftshift(nfft.fftshift(x)).numpy(), x.numpy())
