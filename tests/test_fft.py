"""numbagrad.fft's real-valued members against torch.fft: frequencies (values, dtypes, errors) and shifts
(values and gradients)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numbagrad
import numbagrad.autograd.forward_ad
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


# --- the transforms --------------------------------------------------------------------------------------------------

ONE_DIM = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
MANY_DIMS = [
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft2",
    "ihfft2",
    "hfftn",
    "ihfftn",
]
REAL_ONLY = {"rfft", "ihfft", "rfft2", "rfftn", "ihfft2", "ihfftn"}
ONE_DIM_ARGS = [{}, {"n": 3}, {"n": 8, "dim": 1, "norm": "ortho"}, {"dim": 0, "norm": "forward"}, {"norm": "backward"}]
MANY_DIM_ARGS = [{}, {"s": (3, 6)}, {"s": (2, -1), "dim": (2, 0), "norm": "ortho"}, {"dim": (0,), "norm": "forward"}]
CASES = [(name, kw) for name in ONE_DIM for kw in ONE_DIM_ARGS] + [(n, kw) for n in MANY_DIMS for kw in MANY_DIM_ARGS]
CASES = [
    (name, kw, kind) for name, kw in CASES for kind in ("real", "complex") if kind == "real" or name not in REAL_ONLY
]


def _signal(kind: str, shape=(3, 4, 5)) -> np.ndarray:
    rng = np.random.default_rng(1)
    data = rng.standard_normal(shape)
    return data + 1j * rng.standard_normal(shape) if kind == "complex" else data


def _resolved(t):
    """A torch tensor's values as numpy (torch marks some results as lazily conjugated)."""
    return t.detach().resolve_conj().numpy()


def _weighted_sum(module, y, weights: np.ndarray):
    """A real loss reading every real and imaginary part with its own weight."""
    if y.dtype.is_complex:
        both = np.stack([weights, -2 * weights], -1)
        return (module.view_as_real(y.resolve_conj()) * module.tensor(both)).sum()
    return (y * module.tensor(weights)).sum()


@pytest.mark.parametrize("name, kwargs, kind", CASES)
def test_transform_matches_torch_with_gradients(torch, name, kwargs, kind):
    data = _signal(kind)
    x, tx = numbagrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    ours, theirs = getattr(nfft, name)(x, **kwargs), getattr(torch.fft, name)(tx, **kwargs)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch", "numbagrad")
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.is_conj() == theirs.is_conj()
    np.testing.assert_allclose(_resolved(ours), _resolved(theirs), rtol=1e-10, atol=1e-12)
    weights = np.random.default_rng(2).standard_normal(tuple(ours.shape))
    _weighted_sum(numbagrad, ours, weights).backward()
    _weighted_sum(torch, theirs, weights).backward()
    np.testing.assert_allclose(x.grad.numpy(), _resolved(tx.grad), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "name, node",
    [("fft", "FftR2CBackward0"), ("ifft", "ConjBackward0"), ("fftn", "FftC2CBackward0"), ("rfft", "FftR2CBackward0"),
     ("irfft", "FftC2RBackward0"), ("hfft", "FftC2RBackward0"), ("ihfft", "ConjBackward0"),
     ("ihfft2", "FftC2CBackward0")],
)  # fmt: skip
def test_node_names_match_torch(name, node):
    assert type(getattr(nfft, name)(numbagrad.randn(4, 6, requires_grad=True)).grad_fn).__name__ == node


@pytest.mark.parametrize("name", ["fft", "rfft", "fft2", "ihfftn"])
def test_float32_gives_complex64_and_integers_the_default_dtype(name):
    transform = getattr(nfft, name)
    assert transform(numbagrad.ones(4, 4)).dtype == numbagrad.complex64
    assert transform(numbagrad.ones(4, 4, dtype=numbagrad.float64)).dtype == numbagrad.complex128
    assert transform(numbagrad.ones(4, 4, dtype=numbagrad.int64)).dtype == numbagrad.complex64
    numbagrad.set_default_dtype(numbagrad.float64)
    try:
        assert transform(numbagrad.ones(4, 4, dtype=numbagrad.bool)).dtype == numbagrad.complex128
    finally:
        numbagrad.set_default_dtype(numbagrad.float32)


@pytest.mark.parametrize("name", ["irfft", "hfft", "irfftn"])
def test_complex_to_real_of_float32_is_float32(name):
    assert getattr(nfft, name)(numbagrad.ones(3, 4)).dtype == numbagrad.float32


def test_float32_values_match_torch(torch):
    data = _signal("real", (4, 16)).astype(np.float32)
    ours, theirs = nfft.rfft2(numbagrad.tensor(data)), torch.fft.rfft2(torch.tensor(data))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_inverse_transforms_undo_forward_ones():
    data = _signal("complex", (4, 6))
    x = numbagrad.tensor(data)
    np.testing.assert_allclose(nfft.ifftn(nfft.fftn(x)).numpy(), data, atol=1e-12)
    np.testing.assert_allclose(nfft.irfft(nfft.rfft(x.real), n=6).numpy(), data.real, atol=1e-12)
    np.testing.assert_allclose(nfft.hfft(nfft.ihfft(x.real), n=6).numpy(), data.real, atol=1e-12)


def test_fft_of_an_impulse_is_flat():
    x = numbagrad.zeros(8, dtype=numbagrad.float64)
    x[0] = 1.0
    np.testing.assert_array_equal(nfft.fft(x).numpy(), np.ones(8, np.complex128))
    np.testing.assert_allclose(nfft.fft(x, norm="ortho").numpy(), np.full(8, 8**-0.5), rtol=1e-15)
    np.testing.assert_allclose(nfft.fft(x, norm="forward").numpy(), np.full(8, 1 / 8), rtol=1e-15)


_ERRORS = [
    lambda m, f: f.fft(m.ones(4), norm="bad"),
    lambda m, f: f.ifft2(m.ones(4, 4), norm="Ortho"),
    lambda m, f: f.fft(m.ones(4), norm=3),
    lambda m, f: f.fft(m.ones(4), n=0),
    lambda m, f: f.rfft(m.ones(4), n=-1),
    lambda m, f: f.fft(m.ones(4), n=0, norm="bad"),
    lambda m, f: f.irfft(m.ones(1, dtype=m.complex64)),
    lambda m, f: f.hfft(m.ones(3), n=0),
    lambda m, f: f.fft(m.ones(4), n=2.0),
    lambda m, f: f.fft(m.ones(4, 4), dim=(0,)),
    lambda m, f: f.fft([1.0, 2.0]),
    lambda m, f: f.fft(m.ones(4), dim=1),
    lambda m, f: f.fft(m.tensor(1.0)),
    lambda m, f: f.fft2(m.ones(4)),
    lambda m, f: f.fftn(m.ones(4, 4), dim=(0, -2)),
    lambda m, f: f.fftn(m.ones(4, 4), s=(2,), dim=(0, 1)),
    lambda m, f: f.fftn(m.ones(4, 4), s=(2, 2, 2)),
    lambda m, f: f.fftn(m.ones(4, 4), s=(0, 3)),
    lambda m, f: f.fftn(m.ones(4, 4), s=(1,), dim=(0, 0)),
    lambda m, f: f.fft(m.ones(0)),
    lambda m, f: f.fft(m.ones(4, dtype=m.float16)),
    lambda m, f: f.irfft(m.ones(4, dtype=m.float16)),
    lambda m, f: f.rfft(m.ones(4, dtype=m.complex64)),
    lambda m, f: f.ihfft(m.ones(4, dtype=m.complex64)),
    lambda m, f: f.rfft2(m.ones(3, 3, dtype=m.complex64)),
    lambda m, f: f.ihfftn(m.ones(3, dtype=m.complex64)),
    lambda m, f: f.rfftn(m.tensor(1.0)),
    lambda m, f: f.irfftn(m.ones(3, 3), dim=()),
    lambda m, f: f.hfftn(m.tensor(1.0)),
    lambda m, f: f.ihfftn(m.tensor(1.0)),
    lambda m, f: f.irfftn(m.ones(3, 3), s=(3, 0)),
    lambda m, f: f.fftn(m.ones(3, 3), s=(2.0, 3)),
    lambda m, f: f.fftn(m.ones(3, 3), dim=[0, 1.0]),
    lambda m, f: f.fftn(m.ones(3, 3), dim="a"),
    lambda m, f: f.fft(m.ones(3, 3), dim=None),
    lambda m, f: f.fft(m.ones(3, 3), n=True),
    lambda m, f: f.fft(m.ones(4), out=m.empty(0)),
    lambda m, f: f.ifft2(m.ones(2, 2), out=m.empty(0)),
    lambda m, f: f.rfftn(m.ones(4), out=m.empty(0, dtype=m.int64)),
    lambda m, f: f.irfft(m.ones(4), out=m.empty(0, dtype=m.complex64)),
    lambda m, f: f.hfftn(m.ones(4), out=m.empty(0, dtype=m.complex64)),
    lambda m, f: f.fft(m.ones(4, requires_grad=True), out=m.empty(0, dtype=m.complex64)),
    lambda m, f: f.fftn(m.ones(4, dtype=m.complex64, requires_grad=True), out=m.empty(0, dtype=m.complex64)),
]


@pytest.mark.parametrize("call", _ERRORS)
def test_errors_match_torch_for_transforms(torch, call):
    def raised(m, fft):
        with pytest.raises(Exception) as info:
            call(m, fft)
        return type(info.value).__name__, str(info.value)

    assert raised(numbagrad, nfft) == raised(torch, torch.fft)


@pytest.mark.parametrize(
    "call",
    [
        lambda m, f: f.fftn(m.ones(4, 6), s=3),
        lambda m, f: f.fftn(m.ones(4, 6), dim=0),
        lambda m, f: f.fftn(m.ones(4, 6), dim=()),
        lambda m, f: f.fftn(m.tensor(2.0)),
        lambda m, f: f.irfftn(m.ones(4, 6), s=(-1, -1)),
        lambda m, f: f.irfftn(m.ones(4, 6), s=(2, 1)),
        lambda m, f: f.irfft(m.ones(1, dtype=m.complex64), n=1),
        lambda m, f: f.fft(m.ones(3, 3), n=np.int64(2), dim=np.int64(0)),
        lambda m, f: f.fft2(m.ones(3, 3), s=[2, 2]),
    ],
)
def test_edge_arguments_match_torch(torch, call):
    ours, theirs = call(numbagrad, nfft), call(torch, torch.fft)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch", "numbagrad")
    np.testing.assert_allclose(_resolved(ours), _resolved(theirs), atol=1e-6)


def test_out_receives_the_result_in_its_own_dtype(torch):
    data = _signal("real", (4, 6)).astype(np.float32)
    out = numbagrad.empty(0, dtype=numbagrad.complex128)
    assert nfft.fft(numbagrad.tensor(data), out=out) is out
    theirs = torch.fft.fft(torch.tensor(data))
    assert out.dtype == numbagrad.complex128 and tuple(out.shape) == (4, 6)
    np.testing.assert_allclose(out.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_out_of_another_shape_is_resized_with_torchs_warning():
    out = numbagrad.empty(3, dtype=numbagrad.float32)
    with pytest.warns(UserWarning, match=r"had shape \[3\], which does not match the required output shape \[2, 6\]"):
        nfft.irfft(numbagrad.ones(2, 4, dtype=numbagrad.complex64), out=out)
    np.testing.assert_allclose(out.numpy(), nfft.irfft(numbagrad.ones(2, 4, dtype=numbagrad.complex64)).numpy())


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: numbagrad.view_as_real(nfft.fft(nfft.fft(x, n=5), dim=0)),
        lambda x: numbagrad.view_as_real(nfft.ifft2(x, s=(2, 3))),
        lambda x: nfft.irfft(nfft.rfft(x, n=6, norm="ortho"), n=5),
        lambda x: nfft.hfftn(nfft.ihfftn(x), s=(3, 4), norm="forward"),
        lambda x: nfft.irfft2(nfft.fft2(x), s=(2, 5)),
        lambda x: numbagrad.view_as_real(nfft.ihfft2(x)),
    ],
)
def test_gradcheck_and_gradgradcheck(fn):
    x = numbagrad.tensor(_signal("real", (3, 4)), requires_grad=True)
    assert numbagrad.autograd.gradcheck(fn, (x,))
    assert numbagrad.autograd.gradgradcheck(fn, (x,))


def test_scipy_fft_is_used_when_importable(monkeypatch):
    import sys
    import types

    from numbagrad.ops import spectral

    calls = []

    def recording(name):
        def transform(*args, **kwargs):
            calls.append(name)
            return getattr(np.fft, name)(*args, **kwargs)

        return transform

    fake = types.ModuleType("scipy.fft")
    for name in ("fftn", "ifftn", "rfftn", "irfftn"):
        setattr(fake, name, recording(name))
    scipy = types.ModuleType("scipy")
    scipy.fft = fake
    monkeypatch.setitem(sys.modules, "scipy", scipy)
    monkeypatch.setitem(sys.modules, "scipy.fft", fake)
    monkeypatch.setattr(spectral, "_LIBRARY", [])
    x = numbagrad.randn(4, 6)
    np.testing.assert_allclose(nfft.rfft(x).numpy(), np.fft.rfft(x.numpy()), rtol=1e-5, atol=1e-5)
    assert calls == ["rfftn"]


@pytest.mark.parametrize(
    "loss",
    [
        lambda m, x: m.fft.rfft(x).abs().sum(),
        lambda m, x: m.fft.fft(x, n=10, dim=0).abs().pow(2).sum(),
        lambda m, x: m.fft.ifft2(m.fft.rfft(x), s=(2, 3), norm="ortho").abs().sum(),
        lambda m, x: m.fft.irfft(m.fft.fft(x), n=7).pow(2).sum(),
    ],
)
def test_abs_and_power_losses_have_torchs_gradients(torch, loss):
    data = _signal("real", (3, 8))
    x, tx = numbagrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    loss(numbagrad, x).backward()
    loss(torch, tx).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_transforms_and_gradients_stay_on_the_inputs_device(device):
    data = _signal("real", (2, 6))
    x = numbagrad.tensor(data, device=device, requires_grad=True)
    spectrum = nfft.rfft(x)
    back = nfft.irfft(spectrum, n=6)
    assert spectrum.device.type == back.device.type == device
    np.testing.assert_allclose(back.detach().cpu().numpy(), data, atol=1e-12)
    weights = numbagrad.tensor(data, device=device)
    (back * weights).sum().backward()
    assert x.grad.device.type == device
    np.testing.assert_allclose(x.grad.cpu().numpy(), data, atol=1e-12)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "hfft", "ihfft2", "fftn"])
def test_forward_mode_tangents_match_torch(torch, name):
    fw, torch_fw = numbagrad.autograd.forward_ad, torch.autograd.forward_ad
    primal, tangent = _signal("real", (3, 6)), _signal("real", (3, 6))[::-1].copy()
    with fw.dual_level():
        ours = fw.unpack_dual(getattr(nfft, name)(fw.make_dual(numbagrad.tensor(primal), numbagrad.tensor(tangent))))
    with torch_fw.dual_level():
        dual = torch_fw.make_dual(torch.tensor(primal), torch.tensor(tangent))
        theirs = torch_fw.unpack_dual(getattr(torch.fft, name)(dual))
    np.testing.assert_allclose(ours.tangent.numpy(), _resolved(theirs.tangent), atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]),
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
)
def test_n_dim_arguments_agree_with_torch(name, shape, data):
    torch = pytest.importorskip("torch")
    dims = data.draw(st.none() | st.lists(st.integers(-len(shape), len(shape) - 1), max_size=len(shape)))
    count = len(dims) if dims is not None else data.draw(st.integers(0, len(shape)))
    s = data.draw(st.none() | st.lists(st.integers(-1, 5), min_size=count, max_size=count))
    norm = data.draw(st.sampled_from([None, "forward", "ortho"]))
    values = _signal("real", tuple(shape))

    def run(module):
        try:
            result = getattr(module.fft, name)(module.tensor(values), s=s, dim=dims, norm=norm)
        except Exception as error:
            return type(error).__name__, str(error)
        return result.detach().resolve_conj().numpy()

    ours, theirs = run(numbagrad), run(torch)
    if isinstance(theirs, tuple):
        assert ours == theirs
    else:
        np.testing.assert_allclose(ours, theirs, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(ONE_DIM),
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    complex_input=st.booleans(),
    data=st.data(),
)
def test_one_dim_arguments_agree_with_torch(name, shape, complex_input, data):
    torch = pytest.importorskip("torch")
    n = data.draw(st.none() | st.integers(-1, 6))
    dim = data.draw(st.integers(-len(shape) - 1, len(shape)))
    norm = data.draw(st.sampled_from([None, "backward", "forward", "ortho"]))
    values = _signal("complex" if complex_input else "real", tuple(shape))

    def run(module):
        try:
            result = getattr(module.fft, name)(module.tensor(values), n=n, dim=dim, norm=norm)
        except Exception as error:
            return type(error).__name__, str(error)
        return result.detach().resolve_conj().numpy()

    ours, theirs = run(numbagrad), run(torch)
    if isinstance(theirs, tuple):
        assert ours == theirs
    else:
        np.testing.assert_allclose(ours, theirs, atol=1e-12)


@pytest.mark.parametrize(
    "fn",
    [
        lambda z: nfft.fft(z, n=5),
        lambda z: nfft.ifftn(z, s=(2, 5), norm="ortho"),
        lambda z: nfft.irfft(z, n=7),
        lambda z: nfft.hfft2(z, norm="forward"),
        lambda z: nfft.fft2(z.conj()),
    ],
)
def test_gradcheck_and_gradgradcheck_with_complex_inputs(fn):
    z = numbagrad.tensor(_signal("complex", (3, 4)), requires_grad=True)
    assert numbagrad.autograd.gradcheck(fn, (z,))
    assert numbagrad.autograd.gradgradcheck(fn, (z,))
