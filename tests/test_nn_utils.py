"""``nn.utils``: gradient clipping and parameter vectors behave as torch's (values, returned norm, errors).

Compared with torch where it is installed (skipped otherwise) and with numpy by hand; the ``device`` fixture runs
the by-hand tests on cuda too when a GPU (or Numba's simulator) is available.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.nn.utils import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
    parameters_to_vector,
    vector_to_parameters,
)

SHAPES = [(3, 4), (5,), (2, 1, 3)]


def _grads(dtype, scale: float = 1.0, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * scale).astype(dtype) for s in SHAPES]


def _params(lib, grads: list[np.ndarray], device: str = "cpu", with_grad=None) -> list:
    """One parameter per gradient (zeros), with ``.grad`` set unless ``with_grad[i]`` is False."""
    params = []
    for i, g in enumerate(grads):
        p = lib.nn.Parameter(lib.zeros(g.shape, dtype=getattr(lib, str(g.dtype)), device=device))
        if with_grad is None or with_grad[i]:
            p.grad = lib.tensor(g, device=device)
        params.append(p)
    return params


def _host(t) -> np.ndarray:
    return t.detach().cpu().numpy()


def _np_norm(arrays: list[np.ndarray], p: float) -> float:
    flat = np.concatenate([a.ravel() for a in arrays]).astype(np.float64)
    if p == np.inf:
        return np.abs(flat).max()
    if p == -np.inf:
        return np.abs(flat).min()
    if p == 0:
        return float((flat != 0).sum())
    return (np.abs(flat) ** p).sum() ** (1 / p)


# --- against torch -----------------------------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("norm_type", [2.0, 1, float("inf"), -float("inf"), 0, 3.5, 0.5])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(dtype, norm_type, max_norm):
    torch = pytest.importorskip("torch")
    grads = _grads(dtype)
    ours, theirs = _params(ng, grads), _params(torch, grads)
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    rtol = 1e-12 if dtype == "float64" else 2e-6
    assert total.dtype == getattr(ng, dtype) and total.shape == ()
    np.testing.assert_allclose(_host(total), expected.numpy(), rtol=rtol)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(_host(p.grad), q.grad.numpy(), rtol=rtol, atol=1e-12)


@pytest.mark.torch
def test_clip_grad_norm_of_mixed_dtypes_matches_torch():
    """float16, float32 and float64 gradients in one call: one norm per dtype group, promoted to float64."""
    torch = pytest.importorskip("torch")
    grads = [g.astype(d) for g, d in zip(_grads("float64"), ("float16", "float32", "float64"))]
    ours, theirs = _params(ng, grads), _params(torch, grads)
    total = clip_grad_norm_(ours, 0.5)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 0.5)
    assert total.dtype == ng.float64
    np.testing.assert_allclose(_host(total), expected.numpy(), rtol=1e-6)
    for p, q in zip(ours, theirs):
        assert str(p.grad.dtype) == str(q.grad.dtype).replace("torch", "numbagrad")
        np.testing.assert_allclose(_host(p.grad), q.grad.numpy(), rtol=1e-3)


@pytest.mark.torch
def test_clip_grad_norm_scales_a_strided_gradient_in_place_like_torch():
    torch = pytest.importorskip("torch")
    grads = _grads("float32")
    ours, theirs = _params(ng, grads), _params(torch, grads)
    for lib, params in ((ng, ours), (torch, theirs)):
        params[0].grad = lib.tensor(grads[0].T.copy()).t()  # a transposed (non-contiguous) gradient
    before = [(p.grad, p.grad._version) for p in ours]
    clip_grad_norm_(ours, 0.5)
    torch.nn.utils.clip_grad_norm_(theirs, 0.5)
    for (grad, version), p, q in zip(before, ours, theirs):
        assert p.grad is grad and grad._version == version + 1  # written in place, as mul_ writes it
        np.testing.assert_allclose(_host(p.grad), q.grad.numpy(), rtol=2e-6)


@pytest.mark.torch
def test_clip_grad_norm_skips_parameters_without_gradients_like_torch():
    torch = pytest.importorskip("torch")
    grads = _grads("float64", scale=3.0)
    ours, theirs = (
        _params(ng, grads, with_grad=[True, False, True]),
        _params(torch, grads, with_grad=[True, False, True]),
    )
    total = clip_grad_norm_(ours, 1.0)
    np.testing.assert_allclose(_host(total), torch.nn.utils.clip_grad_norm_(theirs, 1.0).numpy(), rtol=1e-12)
    assert ours[1].grad is None
    np.testing.assert_allclose(_host(ours[2].grad), theirs[2].grad.numpy(), rtol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_of_one_gradient_matches_torch(dtype):
    """One gradient: a group of one norm (nothing to join)."""
    torch = pytest.importorskip("torch")
    grads = _grads(dtype)[:1]
    ours, theirs = _params(ng, grads), _params(torch, grads)
    total = clip_grad_norm_(ours, 0.5)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 0.5)
    assert total.dtype == getattr(ng, dtype) and total.shape == ()
    np.testing.assert_allclose(_host(total), expected.numpy(), rtol=2e-6)
    np.testing.assert_allclose(_host(ours[0].grad), theirs[0].grad.numpy(), rtol=2e-6)


@pytest.mark.torch
def test_clip_grad_norm_with_an_empty_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    grads = [np.zeros((0, 3), np.float32), *_grads("float32")]
    ours, theirs = _params(ng, grads), _params(torch, grads)
    total = clip_grad_norm_(ours, 0.5)
    np.testing.assert_allclose(_host(total), torch.nn.utils.clip_grad_norm_(theirs, 0.5).numpy(), rtol=2e-6)
    assert tuple(ours[0].grad.shape) == (0, 3)
    for p, q in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(_host(p.grad), q.grad.numpy(), rtol=2e-6)


@pytest.mark.torch
def test_clip_grad_norm_of_float32_gradients_overflowing_the_sum_is_inf_like_torch():
    """The squares are summed in float32, as torch sums them: 1e20 squared overflows, the norm is inf and the
    gradients become ``g * 0``."""
    torch = pytest.importorskip("torch")
    grads = [np.array([1e20, 1.0], np.float32), np.array([[3.0]], np.float32)]
    ours, theirs = _params(ng, grads), _params(torch, grads)
    total = clip_grad_norm_(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert _host(total) == expected.numpy() == np.inf
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(_host(p.grad), q.grad.numpy())
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        clip_grad_norm_(_params(ng, grads), 1.0, error_if_nonfinite=True)


@pytest.mark.torch
@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_norm_and_value_take_foreach_on_cpu_like_torch(foreach):
    """torch 2.13 has foreach kernels for cpu tensors: ``foreach=True`` is accepted there, with the same values."""
    torch = pytest.importorskip("torch")
    grads = _grads("float32", scale=3.0)
    ours, theirs = _params(ng, grads), _params(torch, grads)
    total = clip_grad_norm_(ours, 1.0, foreach=foreach)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0, foreach=foreach)
    np.testing.assert_allclose(_host(total), expected.numpy(), rtol=2e-6)
    clip_grad_value_(ours, 0.1, foreach=foreach)
    torch.nn.utils.clip_grad_value_(theirs, 0.1, foreach=foreach)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(_host(p.grad), q.grad.numpy(), rtol=2e-6)


@pytest.mark.torch
@pytest.mark.parametrize("clip_value", [0.1, 0.75, 10])
def test_clip_grad_value_matches_torch(clip_value):
    torch = pytest.importorskip("torch")
    grads = _grads("float32")
    ours, theirs = _params(ng, grads), _params(torch, grads)
    assert clip_grad_value_(ours, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(_host(p.grad), q.grad.numpy())


@pytest.mark.torch
def test_non_finite_norm_error_matches_torch():
    torch = pytest.importorskip("torch")
    grads = _grads("float64")
    grads[1][2] = np.inf
    messages = []
    for lib, clip in ((ng, clip_grad_norm_), (torch, torch.nn.utils.clip_grad_norm_)):
        with pytest.raises(RuntimeError) as info:
            clip(_params(lib, grads), 1.0, error_if_nonfinite=True)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(
        "The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be clipped."
    )


@pytest.mark.torch
def test_parameters_to_vector_and_back_match_torch():
    torch = pytest.importorskip("torch")
    grads = _grads("float64")
    ours = [ng.nn.Parameter(ng.tensor(g)) for g in grads]
    theirs = [torch.nn.Parameter(torch.tensor(g)) for g in grads]
    vec = parameters_to_vector(ours)
    np.testing.assert_array_equal(_host(vec), torch.nn.utils.parameters_to_vector(theirs).detach().numpy())
    new = np.arange(vec.numel(), dtype=np.float64)
    vector_to_parameters(ng.tensor(new), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(_host(p), q.detach().numpy())


# --- by hand, on every device --------------------------------------------------------------------------------------


def test_clip_grad_norm_scales_to_max_norm(device):
    grads = _grads("float64", scale=5.0)
    params = _params(ng, grads, device)
    total = clip_grad_norm_(params, max_norm=2.0)
    norm = _np_norm(grads, 2)
    assert total.device.type == device
    np.testing.assert_allclose(_host(total), norm, rtol=1e-12)
    coef = 2.0 / (norm + 1e-6)
    for p, g in zip(params, grads):
        assert p.grad.device.type == device
        np.testing.assert_allclose(_host(p.grad), g * coef, rtol=1e-12)
    np.testing.assert_allclose(_np_norm([_host(p.grad) for p in params], 2), 2.0, rtol=1e-6)


def test_clip_grad_norm_leaves_small_gradients_unchanged(device):
    grads = _grads("float64", scale=0.01)
    params = _params(ng, grads, device)
    total = clip_grad_norm_(params, max_norm=10.0, norm_type="inf")
    np.testing.assert_allclose(_host(total), _np_norm(grads, np.inf), rtol=1e-15)
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(_host(p.grad), g)


def test_clip_grad_value_clamps_in_place(device):
    grads = _grads("float64")
    params = _params(ng, grads, device)
    before = [p.grad for p in params]
    clip_grad_value_(params, 0.5)
    for p, g, b in zip(params, grads, before):
        assert p.grad is b  # in place
        np.testing.assert_array_equal(_host(p.grad), np.clip(g, -0.5, 0.5))


def test_one_tensor_may_be_passed_instead_of_a_list(device):
    (p,) = _params(ng, [np.array([3.0, 4.0])], device)
    total = clip_grad_norm_(p, 1.0)
    assert total.item() == 5.0
    np.testing.assert_allclose(_host(p.grad), [3 / (5 + 1e-6), 4 / (5 + 1e-6)], rtol=1e-15)
    clip_grad_value_(p, 0.7)
    np.testing.assert_allclose(_host(p.grad), [3 / (5 + 1e-6), 0.7], rtol=1e-15)


def test_get_total_norm_and_clip_grads_with_norm_split_the_work(device):
    grads = _grads("float64", scale=2.0)
    params = _params(ng, grads, device)
    total = get_total_norm([p.grad for p in params], norm_type=1.0)
    np.testing.assert_allclose(_host(total), _np_norm(grads, 1), rtol=1e-12)
    clip_grads_with_norm_(params, 1.0, total)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(_host(p.grad), g / (_np_norm(grads, 1) + 1e-6), rtol=1e-12)


def test_clipping_is_not_recorded_by_autograd(device):
    (p,) = _params(ng, [np.array([3.0, 4.0])], device)
    p.grad.requires_grad_(True)
    total = clip_grad_norm_(p, 1.0)
    assert total.grad_fn is None and not total.requires_grad


def test_non_finite_norm_without_the_check_is_returned_and_propagated():
    params = _params(ng, [np.array([1.0, np.nan])])
    total = clip_grad_norm_(params, 1.0)
    assert np.isnan(total.item())
    assert np.isnan(_host(params[0].grad)).all()


def test_no_gradients_gives_a_zero_norm():
    params = _params(ng, _grads("float64"), with_grad=[False, False, False])
    total = clip_grad_norm_(params, 1.0)
    assert total.item() == 0.0 and total.dtype == ng.float32


def test_an_empty_generator_warns():
    with pytest.warns(UserWarning, match="`parameters` is an empty generator, no gradient clipping will occur."):
        clip_grad_norm_((p for p in []), 1.0)


def test_clip_grad_norm_without_underscore_is_deprecated():
    params = _params(ng, [np.array([3.0, 4.0])])
    with pytest.warns(FutureWarning, match="`torch.nn.utils.clip_grad_norm` is now deprecated"):
        assert clip_grad_norm(params, 1.0).item() == 5.0


def test_parameters_to_vector_is_differentiable(device):
    a = ng.nn.Parameter(ng.tensor([[1.0, 2.0], [3.0, 4.0]], device=device))
    b = ng.nn.Parameter(ng.tensor([5.0], device=device))
    vec = parameters_to_vector([a, b])
    assert vec.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    (vec * ng.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=device)).sum().backward()
    assert a.grad.tolist() == [[1.0, 2.0], [3.0, 4.0]] and b.grad.tolist() == [5.0]


def test_vector_to_parameters_makes_parameters_views_of_the_vector(device):
    a = ng.nn.Parameter(ng.zeros(2, 2, device=device))
    b = ng.nn.Parameter(ng.zeros(3, device=device))
    vec = ng.arange(7, dtype=ng.float32).to(device)
    vector_to_parameters(vec, [a, b])
    assert a.tolist() == [[0.0, 1.0], [2.0, 3.0]] and b.tolist() == [4.0, 5.0, 6.0]
    assert isinstance(a, ng.nn.Parameter) and a.requires_grad
    vec.fill_(1.0)
    assert a.tolist() == [[1.0, 1.0], [1.0, 1.0]]  # shares vec's storage, as in torch


def test_vector_to_parameters_needs_a_tensor():
    with pytest.raises(TypeError, match="^expected numbagrad.Tensor, but got: list$"):
        vector_to_parameters([1.0, 2.0], [ng.nn.Parameter(ng.zeros(2))])


@pytest.mark.skipif(not ng.cuda.is_available(), reason="needs a cuda device (or NUMBA_ENABLE_CUDASIM=1)")
def test_parameters_on_two_devices_are_refused():
    a = ng.nn.Parameter(ng.zeros(2))
    b = ng.nn.Parameter(ng.zeros(2, device="cuda"))
    with pytest.raises(
        TypeError, match="^Found two parameters on different devices, this is currently not supported.$"
    ):
        parameters_to_vector([a, b])
