"""Mixed precision: autocast's casts against torch's (matmul-like ops to the region's dtype, losses to float32,
nothing else), nesting and threads; GradScaler's scale, unscale, skipped steps and scale updates against torch's
on the CPU, its disabled form, and the deprecated cuda spellings."""

import threading
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad import amp, nn
from numbagrad.nn import functional as F

CASTS = {
    "linear": lambda m, a, w: m.nn.functional.linear(a, w),
    "linear_bias": lambda m, a, w: m.nn.functional.linear(a, w, w[:, 0]),
    "matmul": lambda m, a, w: a @ w.T,
    "mm": lambda m, a, w: m.mm(a, w.T),
    "bmm": lambda m, a, w: m.bmm(a.unsqueeze(0), w.T.unsqueeze(0)),
    "addmm": lambda m, a, w: m.addmm(w[:, 0], a, w.T),
    "conv2d": lambda m, a, w: m.nn.functional.conv2d(a.reshape(1, 1, 2, 3), w[:2, :2].reshape(1, 1, 2, 2)),
    "conv_transpose2d": lambda m, a, w: m.nn.functional.conv_transpose2d(
        a.reshape(1, 1, 2, 3), w[:2, :2].reshape(1, 1, 2, 2)
    ),
    "mse_loss": lambda m, a, w: m.nn.functional.mse_loss(a.half(), a.half()),
    "cross_entropy": lambda m, a, w: m.nn.functional.cross_entropy(a.half(), m.tensor([0, 1])),
    "add": lambda m, a, w: a + 1,
    "relu": lambda m, a, w: a.relu(),
    "sum": lambda m, a, w: a.sum(),
}


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", CASTS)
def test_autocast_casts_what_torch_casts(op, dtype, torch):
    data_a = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    data_w = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    with torch.autocast("cpu", dtype=getattr(torch, dtype)):
        theirs = CASTS[op](torch, torch.tensor(data_a), torch.tensor(data_w))
    with numbagrad.autocast("cpu", dtype=getattr(numbagrad, dtype)):
        ours = CASTS[op](numbagrad, numbagrad.tensor(data_a), numbagrad.tensor(data_w))
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    tol = 2e-3 if dtype == "float16" else 2e-2
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=tol, atol=tol)


def test_autocast_gradients_come_back_in_the_parameters_dtype():
    layer = nn.Linear(3, 2)
    with numbagrad.autocast("cpu", dtype=numbagrad.float16):
        out = layer(numbagrad.randn(4, 3))
    assert out.dtype is numbagrad.float16
    out.float().sum().backward()
    assert layer.weight.grad.dtype is numbagrad.float32 and layer.bias.grad.dtype is numbagrad.float32


def test_autocast_nests_a_disabled_region_and_restores_on_exit():
    a = numbagrad.randn(2, 2)
    with numbagrad.autocast("cpu", dtype=numbagrad.float16):
        assert numbagrad.is_autocast_enabled() and numbagrad.is_autocast_enabled("cpu")
        assert not numbagrad.is_autocast_enabled("cuda")
        with numbagrad.autocast("cpu", enabled=False):
            assert (a @ a).dtype is numbagrad.float32
        assert (a @ a).dtype is numbagrad.float16
    assert not numbagrad.is_autocast_enabled() and (a @ a).dtype is numbagrad.float32


def test_autocast_is_per_thread():
    seen = []
    with numbagrad.autocast("cpu", dtype=numbagrad.float16):
        thread = threading.Thread(target=lambda: seen.append(numbagrad.is_autocast_enabled()))
        thread.start()
        thread.join()
    assert seen == [False]


def test_autocast_decorates_functions():
    @numbagrad.autocast("cpu", dtype=numbagrad.float16)
    def product(a, b):
        return a @ b

    assert product(numbagrad.randn(2, 2), numbagrad.randn(2, 2)).dtype is numbagrad.float16


def test_cpu_autocast_defaults_to_bfloat16():
    assert numbagrad.amp.get_autocast_dtype("cpu") is numbagrad.bfloat16
    with numbagrad.autocast("cpu"):
        assert numbagrad.is_autocast_enabled()
        assert (numbagrad.randn(2, 2) @ numbagrad.randn(2, 2)).dtype is numbagrad.bfloat16


@pytest.mark.torch
def test_cpu_autocast_to_an_unsupported_dtype_warns_as_torch_and_stays_off(torch):
    with pytest.warns(UserWarning) as theirs:
        torch.autocast("cpu", dtype=torch.float64)
    with pytest.warns(UserWarning) as ours:
        region = numbagrad.autocast("cpu", dtype=numbagrad.float64)
    assert str(ours[0].message).replace("numbagrad.", "torch.") == str(theirs[0].message)
    with region:
        assert not numbagrad.is_autocast_enabled()
        assert (numbagrad.randn(2, 2) @ numbagrad.randn(2, 2)).dtype is numbagrad.float32


@pytest.mark.torch
def test_autocast_errors_match_torch(torch):
    cases = [
        (lambda m: m.autocast("tpu"), RuntimeError),
        (lambda m: m.autocast(1), ValueError),
    ]
    for call, error in cases:
        with pytest.raises(error) as theirs:
            call(torch)
        with pytest.raises(error) as ours:
            call(numbagrad)
        assert str(ours.value) == str(theirs.value)


def _train(lib, scaler, grads_scale: list[float]):
    """Three steps of SGD on one parameter whose gradient is scaled by the given factors (inf makes one
    overflow); returns the parameter, the scales and the state after each update."""
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
    opt = lib.optim.SGD([p], lr=0.1)
    history = []
    for factor in grads_scale:
        opt.zero_grad()
        loss = (p * p).sum() * factor
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        history.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"], p.detach().numpy().tolist()))
    return history


@pytest.mark.torch
def test_grad_scaler_matches_torch_through_overflow_backoff_and_growth(torch):
    factors = [1.0, float("inf"), 1.0, 1.0, 1.0]
    ours = _train(numbagrad, amp.GradScaler("cpu", init_scale=4.0, growth_interval=2), factors)
    theirs = _train(torch, torch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2), factors)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a[0] == b[0] and a[1] == b[1]
        np.testing.assert_allclose(a[2], b[2], rtol=1e-6)


@pytest.mark.torch
def test_grad_scaler_state_dict_and_unscale_errors_match_torch(torch):
    ours, theirs = amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    assert ours.state_dict() == theirs.state_dict()
    for lib, scaler in ((numbagrad, ours), (torch, theirs)):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1)
        scaler.scale(p.sum()).backward()
        scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
            scaler.unscale_(opt)
        np.testing.assert_array_equal(p.grad.numpy(), [1.0, 1.0])
        scaler.step(opt)
        with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
            scaler.step(opt)
    restored = amp.GradScaler("cpu")
    restored.load_state_dict({**theirs.state_dict(), "scale": 8.0})
    assert restored.get_scale() == 8.0


def test_disabled_grad_scaler_is_a_pass_through():
    scaler = amp.GradScaler("cpu", enabled=False)
    loss = numbagrad.tensor(2.0)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    p = nn.Parameter(numbagrad.ones(1))
    opt = numbagrad.optim.SGD([p], lr=1.0)
    p.sum().backward()
    scaler.step(opt)
    scaler.update()
    assert p.item() == 0.0


@pytest.mark.torch
def test_cuda_spellings_warn_and_disable_without_cuda_as_torch(torch):
    if numbagrad.cuda.is_available():
        pytest.skip("these warnings are for machines without CUDA")
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        their_scaler = torch.cuda.amp.GradScaler()
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        our_scaler = numbagrad.cuda.amp.GradScaler()
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    assert our_scaler.is_enabled() is their_scaler.is_enabled() is False


def test_losses_of_half_inputs_compute_in_float32_under_autocast():
    x = numbagrad.randn(3, 4).half()
    with numbagrad.autocast("cpu", dtype=numbagrad.float16):
        assert F.l1_loss(x, x).dtype is numbagrad.float32
        assert F.smooth_l1_loss(x, x).dtype is numbagrad.float32
    assert F.l1_loss(x, x).dtype is numbagrad.float16
