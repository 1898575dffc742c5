"""optim: SGD, Adam, AdamW, RMSprop and Adagrad against hand-computed steps and against torch over 30 steps (float64,
to 1e-9), param groups, state_dict and torch's errors."""

import math

import numpy as np
import pytest

import numbagrad
from numbagrad import nn, optim


def _param(values, dtype=numbagrad.float64):
    return nn.Parameter(numbagrad.tensor(values, dtype=dtype))


def _step_with_grad(opt, p, grad):
    p.grad = numbagrad.tensor(grad, dtype=p.dtype)
    opt.step()


# --- hand-computed steps (no torch needed) ----------------------------------------------------------------------
def test_sgd_plain_step():
    p = _param([1.0, -2.0])
    _step_with_grad(optim.SGD([p], lr=0.1), p, [0.5, 1.0])
    np.testing.assert_allclose(p.detach().numpy(), [0.95, -2.1])


def test_sgd_momentum_weight_decay_and_nesterov_by_hand():
    p = _param([1.0])
    opt = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.5, nesterov=True)
    # step 1: d = g + wd*p = 1 + 0.5 = 1.5; buf = 1.5; nesterov d = 1.5 + 0.9*1.5 = 2.85; p = 1 - 0.285
    _step_with_grad(opt, p, [1.0])
    np.testing.assert_allclose(p.detach().numpy(), [0.715])
    # step 2: d = 1 + 0.5*0.715 = 1.3575; buf = 0.9*1.5 + 1.3575 = 2.7075; d = 1.3575 + 0.9*2.7075 = 3.79425
    _step_with_grad(opt, p, [1.0])
    np.testing.assert_allclose(p.detach().numpy(), [0.715 - 0.379425])
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), [2.7075])


def test_sgd_dampening_and_maximize_by_hand():
    p = _param([0.0])
    opt = optim.SGD([p], lr=1.0, momentum=0.5, dampening=0.5, maximize=True)
    _step_with_grad(opt, p, [2.0])  # first step: buf = d = -2 (no dampening on the first step); p = 0 + 2
    _step_with_grad(opt, p, [2.0])  # buf = 0.5*(-2) + 0.5*(-2) = -2; p = 2 + 2
    np.testing.assert_allclose(p.detach().numpy(), [4.0])


def test_adam_first_two_steps_by_hand():
    p = _param([1.0, -1.0])
    opt = optim.Adam([p], lr=0.1, betas=(0.9, 0.99), eps=1e-8)
    # step 1: m = 0.1 g, v = 0.01 g^2; m_hat = g, v_hat = g^2; p -= lr * g/(|g| + eps)
    g1, g2 = np.array([2.0, -0.5]), np.array([1.0, 1.0])
    _step_with_grad(opt, p, g1)
    p1 = np.array([1.0, -1.0]) - 0.1 * g1 / (np.abs(g1) + 1e-8)
    np.testing.assert_allclose(p.detach().numpy(), p1, rtol=1e-15)
    # step 2: m = 0.9*0.1*g1 + 0.1*g2, v = 0.99*0.01*g1^2 + 0.01*g2^2, then bias-corrected
    m = 0.09 * g1 + 0.1 * g2
    v = 0.0099 * g1**2 + 0.01 * g2**2
    expected = p1 - 0.1 / (1 - 0.9**2) * m / (np.sqrt(v) / math.sqrt(1 - 0.99**2) + 1e-8)
    _step_with_grad(opt, p, g2)
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-12)
    assert opt.state[p]["step"].item() == 2.0


def test_adam_amsgrad_keeps_the_maximum_second_moment():
    p = _param([0.0])
    opt = optim.Adam([p], lr=0.1, amsgrad=True)
    _step_with_grad(opt, p, [10.0])
    _step_with_grad(opt, p, [0.0])
    state = opt.state[p]
    assert state["max_exp_avg_sq"].item() == pytest.approx(0.001 * 100)
    assert state["exp_avg_sq"].item() == pytest.approx(0.999 * 0.001 * 100)


@pytest.mark.parametrize("first", [float("nan"), 1.0])
def test_adam_amsgrad_keeps_a_nan_second_moment_from_either_side_as_torch_maximum_does(first):
    p = _param([0.0, 0.0])
    opt = optim.Adam([p], lr=0.1, amsgrad=True)
    _step_with_grad(opt, p, [first, 1.0])
    _step_with_grad(opt, p, [2.0, float("nan")])
    vmax = opt.state[p]["max_exp_avg_sq"].numpy()
    assert np.isnan(vmax[1])  # the new second moment is nan
    assert np.isnan(vmax[0]) == math.isnan(first)  # the kept maximum was nan
    if not math.isnan(first):
        assert vmax[0] == pytest.approx(0.999 * 0.001 * 1 + 0.001 * 4)


def test_adamw_decays_the_parameter_before_the_adam_step_by_hand():
    p = _param([1.0])
    opt = optim.AdamW([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.5)
    _step_with_grad(opt, p, [2.0])
    # p = 1 * (1 - 0.1 * 0.5) = 0.95; m = 0.2, v = 0.004; m_hat = 2, v_hat = 4: p -= 0.1 * 2 / (2 + 1e-8)
    np.testing.assert_allclose(p.detach().numpy(), [0.95 - 0.1 * 2 / (2 + 1e-8)], rtol=1e-15)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True


def test_rmsprop_plain_step_by_hand():
    p = _param([1.0, -1.0])
    opt = optim.RMSprop([p], lr=0.01, alpha=0.99, eps=1e-8)
    _step_with_grad(opt, p, [2.0, -0.5])
    # square_avg = 0.01 g^2; p -= lr * g / (sqrt(square_avg) + eps) = lr * sign(g) / (0.1 + 1e-8 / |g|)
    g = np.array([2.0, -0.5])
    np.testing.assert_allclose(p.detach().numpy(), [1.0, -1.0] - 0.01 * g / (np.sqrt(0.01 * g * g) + 1e-8), rtol=1e-15)


def test_rmsprop_centered_momentum_two_steps_by_hand():
    p = _param([1.0])
    opt = optim.RMSprop([p], lr=0.01, alpha=0.9, eps=0.0, momentum=0.5, centered=True)
    _step_with_grad(opt, p, [2.0])
    sq, ga = 0.1 * 4, 0.1 * 2  # square_avg and grad_avg after one step
    buf = 2 / math.sqrt(sq - ga * ga)
    p1 = 1.0 - 0.01 * buf
    np.testing.assert_allclose(p.detach().numpy(), [p1], rtol=1e-15)
    _step_with_grad(opt, p, [1.0])
    sq, ga = 0.9 * sq + 0.1 * 1, ga + 0.1 * (1 - ga)
    buf = 0.5 * buf + 1 / math.sqrt(sq - ga * ga)
    np.testing.assert_allclose(p.detach().numpy(), [p1 - 0.01 * buf], rtol=1e-14)
    np.testing.assert_allclose(opt.state[p]["grad_avg"].numpy(), [ga], rtol=1e-15)


def test_adagrad_two_steps_with_lr_decay_and_initial_accumulator_by_hand():
    p = _param([1.0])
    opt = optim.Adagrad([p], lr=0.1, lr_decay=0.5, initial_accumulator_value=1.0, eps=0.0)
    assert opt.state[p]["sum"].item() == 1.0 and opt.state[p]["step"].item() == 0.0  # created with the optimizer
    _step_with_grad(opt, p, [2.0])  # clr = 0.1; sum = 1 + 4
    p1 = 1.0 - 0.1 * 2 / math.sqrt(5)
    np.testing.assert_allclose(p.detach().numpy(), [p1], rtol=1e-15)
    _step_with_grad(opt, p, [1.0])  # clr = 0.1 / (1 + 0.5); sum = 6
    np.testing.assert_allclose(p.detach().numpy(), [p1 - 0.1 / 1.5 / math.sqrt(6)], rtol=1e-15)


@pytest.mark.parametrize("make", [lambda p: optim.RMSprop(p, lr=0.1), lambda p: optim.Adagrad(p, lr=0.1)])
def test_float32_parameters_update_in_float32(make):
    p = _param([1.0, 2.0], numbagrad.float32)
    opt = make([p])
    _step_with_grad(opt, p, [1.0, 1.0])
    assert p.dtype == numbagrad.float32 and all(s.dtype == numbagrad.float32 for s in opt.state[p].values() if s.dim())


def test_parameters_without_grad_are_skipped():
    a, b = _param([1.0]), _param([1.0])
    opt = optim.SGD([a, b], lr=1.0)
    _step_with_grad(opt, a, [1.0])
    assert a.item() == 0.0 and b.item() == 1.0 and b not in opt.state


def test_step_bumps_the_version_and_keeps_the_parameter_a_leaf():
    p = _param([1.0])
    v = p._version
    _step_with_grad(optim.SGD([p], lr=1.0), p, [1.0])
    assert p._version > v and p.is_leaf and p.requires_grad


def test_float32_parameter_updates_in_float32():
    p = _param([1.0, 2.0], numbagrad.float32)
    _step_with_grad(optim.Adam([p], lr=0.1), p, [1.0, 1.0])
    assert p.dtype == numbagrad.float32
    np.testing.assert_allclose(p.detach().numpy(), [0.9, 1.9], rtol=1e-6)


def test_large_parameter_uses_the_parallel_kernel_and_matches():
    from numbagrad.backend.cpu import PARALLEL_THRESHOLD

    n = PARALLEL_THRESHOLD + 3
    p = nn.Parameter(numbagrad.ones(n, dtype=numbagrad.float64))
    p.grad = numbagrad.full((n,), 2.0, dtype=numbagrad.float64)
    optim.SGD([p], lr=0.25, momentum=0.9).step()
    assert (p == 0.5).all()


def test_closure_is_evaluated_with_grad_enabled():
    p = _param([3.0])
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p**2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 9.0
    assert p.item() == pytest.approx(3.0 - 0.1 * 6.0)


# --- zero_grad ---------------------------------------------------------------------------------------------------
def test_zero_grad_sets_none_by_default_and_zeros_otherwise():
    p = _param([1.0])
    opt = optim.SGD([p], lr=0.1)
    p.grad = numbagrad.tensor([3.0], dtype=numbagrad.float64)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and g.item() == 0.0
    opt.zero_grad()
    assert p.grad is None


# --- param groups and state_dict ---------------------------------------------------------------------------------
def test_param_groups_take_missing_options_from_defaults():
    a, b = _param([1.0]), _param([1.0])
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["momentum"] == 0.9
    c = _param([1.0])
    opt.add_param_group({"params": [c], "momentum": 0.0})
    assert opt.param_groups[2]["lr"] == 0.1 and opt.param_groups[2]["momentum"] == 0.0


def test_state_dict_round_trip_continues_identically():
    def make():
        p = _param([1.0, 2.0])
        return p, optim.Adam([p], lr=0.1, amsgrad=True)

    p1, opt1 = make()
    for g in ([1.0, -1.0], [0.5, 2.0]):
        _step_with_grad(opt1, p1, g)
    sd = opt1.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and set(sd["state"][0]) >= {"step", "exp_avg", "exp_avg_sq"}
    p2, opt2 = make()
    p2.data.copy_(p1.detach())
    opt2.load_state_dict(sd)
    for opt, p in ((opt1, p1), (opt2, p2)):
        _step_with_grad(opt, p, [0.3, 0.3])
    np.testing.assert_allclose(p1.detach().numpy(), p2.detach().numpy(), rtol=0, atol=0)
    assert opt2.state[p2]["exp_avg"] is not opt1.state[p1]["exp_avg"]


@pytest.mark.parametrize("name", ["adamw-amsgrad-maximize", "rmsprop-centered-momentum", "adagrad-decay"])
def test_state_dict_round_trip_continues_identically_for(name):
    p1 = _param([1.0, 2.0])
    opt1 = OPTIMIZERS[name](optim, [p1])
    for g in ([1.0, -1.0], [0.5, 2.0]):
        _step_with_grad(opt1, p1, g)
    p2 = _param([1.0, 2.0])
    opt2 = OPTIMIZERS[name](optim, [p2])
    p2.data.copy_(p1.detach())
    opt2.load_state_dict(opt1.state_dict())
    assert opt2.state[p2]["step"].item() == 2.0
    for opt, p in ((opt1, p1), (opt2, p2)):
        _step_with_grad(opt, p, [0.3, 0.3])
    np.testing.assert_array_equal(p1.detach().numpy(), p2.detach().numpy())


def test_adamw_keeps_decoupled_weight_decay_when_loading_an_adam_state():
    p = _param([1.0])
    opt = optim.AdamW([p], lr=0.1)
    opt.load_state_dict(optim.Adam([_param([1.0])], lr=0.2).state_dict())
    assert opt.param_groups[0]["decoupled_weight_decay"] is True and opt.param_groups[0]["lr"] == 0.2


def test_load_state_dict_restores_hyper_parameters():
    p = _param([1.0])
    opt = optim.SGD([p], lr=0.1)
    sd = optim.SGD([_param([1.0])], lr=0.7, momentum=0.5).state_dict()
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.7 and opt.param_groups[0]["params"] == [p]


def test_load_state_dict_with_other_groups_is_torchs_error():
    opt = optim.SGD([_param([1.0])], lr=0.1)
    with pytest.raises(ValueError, match="loaded state dict has a different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="loaded state dict contains a parameter group that doesn't match the size"):
        opt.load_state_dict(optim.SGD([_param([1.0]), _param([2.0])], lr=0.1).state_dict())


# --- errors ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: optim.SGD(p, lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda p: optim.SGD(p, lr=0.1, momentum=-1), "Invalid momentum value: -1"),
        (lambda p: optim.SGD(p, lr=0.1, weight_decay=-1), "Invalid weight_decay value: -1"),
        (lambda p: optim.SGD(p, lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
        (lambda p: optim.Adam(p, lr=-1.0), "Invalid learning rate: -1.0"),
        (lambda p: optim.Adam(p, eps=-1.0), "Invalid epsilon value: -1.0"),
        (lambda p: optim.Adam(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
        (lambda p: optim.Adam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
        (lambda p: optim.Adam(p, weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        (lambda p: optim.AdamW(p, betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
        (lambda p: optim.RMSprop(p, lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda p: optim.RMSprop(p, eps=-1.0), "Invalid epsilon value: -1.0"),
        (lambda p: optim.RMSprop(p, momentum=-1.0), "Invalid momentum value: -1.0"),
        (lambda p: optim.RMSprop(p, weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        (lambda p: optim.RMSprop(p, alpha=-0.5), "Invalid alpha value: -0.5"),
        (lambda p: optim.Adagrad(p, lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda p: optim.Adagrad(p, lr_decay=-1.0), "Invalid lr_decay value: -1.0"),
        (lambda p: optim.Adagrad(p, weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        (lambda p: optim.Adagrad(p, initial_accumulator_value=-1.0), "Invalid initial_accumulator_value value: -1.0"),
        (lambda p: optim.Adagrad(p, eps=-1.0), "Invalid epsilon value: -1.0"),
    ],
)
def test_invalid_options_are_torchs_value_errors(make, message):
    with pytest.raises(ValueError) as info:
        make([_param([1.0])])
    assert str(info.value) == message


def test_non_leaf_parameter_is_rejected():
    x = numbagrad.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([x * 2], lr=0.1)


def test_empty_parameter_list_is_rejected():
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.Adam([])


def test_a_single_tensor_is_not_an_iterable_of_params():
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts, but got numbagrad.FloatTensor"):
        optim.SGD(numbagrad.ones(2, requires_grad=True), lr=0.1)


def test_non_tensor_param_is_rejected():
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is int"):
        optim.SGD([1], lr=0.1)


def test_parameter_in_two_groups_is_rejected():
    p = _param([1.0])
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


# --- float16 parameters: the update runs in float32 (Numba has no float16), the parameter stays float16 -------------
@pytest.mark.parametrize(
    "name", ["sgd-nesterov-weight-decay", "adam", "adam-amsgrad-weight-decay", "adamw", "rmsprop-centered-momentum",
             "adagrad-decay"],
)  # fmt: skip
def test_float16_parameters_step_as_float32_does(name):
    start = np.linspace(-1, 1, 9).astype(np.float16)
    grads = [np.linspace(0.5, -2, 9), np.linspace(-1, 1, 9) ** 2, np.full(9, 0.25)]
    results = []
    for dtype in (numbagrad.float16, numbagrad.float32):
        p = nn.Parameter(numbagrad.tensor(start, dtype=dtype))
        opt = OPTIMIZERS[name](optim, [p])
        for g in grads:
            _step_with_grad(opt, p, g.astype(np.float16))
        assert p.dtype == dtype and all(s.dtype == dtype for s in opt.state[p].values() if s.dim())
        results.append(p.detach().numpy().astype(np.float32))
    half, single = results
    assert not np.array_equal(half, start)  # it moved
    np.testing.assert_allclose(half, single, rtol=0, atol=4e-3)  # a few float16 roundings of the state apart


def test_float16_adam_updates_its_second_moment():
    """The second moment is passed twice (as v and as the unused vmax): it must be updated once, not restored."""
    p = nn.Parameter(numbagrad.tensor([1.0, -1.0], dtype=numbagrad.float16))
    opt = optim.Adam([p], lr=0.1)
    _step_with_grad(opt, p, [2.0, -0.5])
    np.testing.assert_allclose(opt.state[p]["exp_avg_sq"].numpy(), [0.001 * 4.0, 0.001 * 0.25], rtol=1e-3)
    np.testing.assert_allclose(p.detach().numpy(), [0.9, -0.9], rtol=1e-3)  # the first step moves by lr


# --- against torch: 30 steps of a small regression --------------------------------------------------------------
def _train(lib, make_optimizer, steps=30):
    rng = np.random.default_rng(0)
    w0, b0 = rng.standard_normal((5, 4)), rng.standard_normal(5)
    xs, ys = rng.standard_normal((steps, 8, 4)), rng.standard_normal((steps, 8, 5))
    w = lib.nn.Parameter(lib.tensor(w0, dtype=lib.float64))
    b = lib.nn.Parameter(lib.tensor(b0, dtype=lib.float64))
    opt = make_optimizer(lib.optim, [w, b])
    for x, y in zip(xs, ys):
        opt.zero_grad()
        out = lib.tanh(lib.tensor(x, dtype=lib.float64) @ w.t() + b)
        ((out - lib.tensor(y, dtype=lib.float64)) ** 2).mean().backward()
        opt.step()
    return [w.detach().numpy().copy(), b.detach().numpy().copy()]


OPTIMIZERS = {
    "sgd": lambda o, p: o.SGD(p, lr=0.1),
    "sgd-momentum": lambda o, p: o.SGD(p, lr=0.1, momentum=0.9),
    "sgd-momentum-dampening": lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, dampening=0.3),
    "sgd-nesterov-weight-decay": lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd-maximize": lambda o, p: o.SGD(p, lr=0.01, momentum=0.5, maximize=True),
    "adam": lambda o, p: o.Adam(p, lr=0.05),
    "adam-amsgrad-weight-decay": lambda o, p: o.Adam(p, lr=0.05, amsgrad=True, weight_decay=0.1),
    "adam-betas-maximize": lambda o, p: o.Adam(p, lr=0.01, betas=(0.8, 0.95), eps=1e-6, maximize=True),
    "adam-low-beta1": lambda o, p: o.Adam(p, lr=0.02, betas=(0.3, 0.9)),  # lerp's other branch (weight >= 0.5)
    "adamw": lambda o, p: o.AdamW(p, lr=0.05),
    "adamw-amsgrad-maximize": lambda o, p: o.AdamW(p, lr=0.02, weight_decay=0.1, amsgrad=True, maximize=True),
    "adamw-low-beta1": lambda o, p: o.AdamW(p, lr=0.01, betas=(0.4, 0.95), eps=1e-6, weight_decay=0.3),
    "rmsprop": lambda o, p: o.RMSprop(p, lr=0.01),
    "rmsprop-centered-momentum": lambda o, p: o.RMSprop(p, lr=0.01, momentum=0.9, centered=True),
    "rmsprop-momentum-weight-decay": lambda o, p: o.RMSprop(p, lr=0.005, momentum=0.5, weight_decay=0.1, eps=1e-6),
    "rmsprop-low-alpha-centered-maximize": lambda o, p: o.RMSprop(p, lr=0.002, alpha=0.3, centered=True, maximize=True),
    "adagrad": lambda o, p: o.Adagrad(p, lr=0.1),
    "adagrad-decay": lambda o, p: o.Adagrad(
        p, lr=0.1, lr_decay=0.01, weight_decay=0.05, initial_accumulator_value=0.1, eps=1e-6
    ),
    "adagrad-maximize": lambda o, p: o.Adagrad(p, lr=0.05, maximize=True),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_thirty_steps_match_torch(name):
    torch = pytest.importorskip("torch")
    ours = _train(numbagrad, OPTIMIZERS[name])
    theirs = _train(torch, OPTIMIZERS[name])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    assert not np.allclose(ours[0], _train(numbagrad, OPTIMIZERS[name], steps=0)[0])  # it did move


@pytest.mark.torch
@pytest.mark.parametrize("name", ["adam-amsgrad-weight-decay", "adamw", "rmsprop-centered-momentum", "adagrad-decay"])
def test_state_dict_layout_matches_torch(name):
    torch = pytest.importorskip("torch")
    dicts = []
    for lib in (numbagrad, torch):
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        opt = OPTIMIZERS[name](lib.optim, [p])
        p.grad = lib.tensor([1.0, 1.0])
        opt.step()
        dicts.append(opt.state_dict())
    ours, theirs = dicts
    assert list(ours["state"][0]) == list(theirs["state"][0])
    assert ours["state"][0]["step"].item() == theirs["state"][0]["step"].item()
    assert ours["param_groups"][0]["params"] == theirs["param_groups"][0]["params"]
    assert set(ours["param_groups"][0]) <= set(theirs["param_groups"][0])


@pytest.mark.parametrize(
    "name",
    ["sgd-nesterov-weight-decay", "adam-amsgrad-weight-decay", "adamw-low-beta1", "rmsprop-centered-momentum",
     "rmsprop-momentum-weight-decay", "adagrad-decay"],
)  # fmt: skip
def test_step_on_device_matches_cpu(device, name):
    results = []
    for dev in ("cpu", device):
        p = nn.Parameter(numbagrad.tensor([1.0, -2.0, 3.0], dtype=numbagrad.float64).to(dev))
        opt = OPTIMIZERS[name](optim, [p])
        for g in ([0.5, 1.0, -1.0], [1.0, 1.0, 1.0]):
            p.grad = numbagrad.tensor(g, dtype=numbagrad.float64).to(dev)
            opt.step()
        assert p.device.type == dev and all(s.device.type == dev for s in opt.state[p].values() if s.dim())
        results.append(p.detach().cpu().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)
