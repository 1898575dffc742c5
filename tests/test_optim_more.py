"""optim: Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop, Adafactor and LBFGS against torch (30 steps of a small
regression with the same start and data, parameters and state within 1e-6 in float64 and 1e-5 in float32; LBFGS
on the Rosenbrock function in both line-search modes), their param groups and state_dict, torch's errors; and for
every optimizer the ``foreach``/``fused``/``capturable``/``differentiable`` options, a Tensor ``lr``, named
parameters and the step and state_dict hooks, each compared with torch."""

import importlib

import numpy as np
import pytest

import numbagrad

OPTIMIZERS = {
    "adadelta": lambda o, p: o.Adadelta(p),
    "adadelta-rho-weight-decay-maximize": lambda o, p: o.Adadelta(p, lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1,
                                                                 maximize=True),
    "adamax": lambda o, p: o.Adamax(p, lr=0.05),
    "adamax-low-beta1-weight-decay-maximize": lambda o, p: o.Adamax(p, lr=0.05, betas=(0.3, 0.9), weight_decay=0.1,
                                                                     maximize=True),
    "nadam": lambda o, p: o.NAdam(p, lr=0.05),
    "nadam-weight-decay-maximize": lambda o, p: o.NAdam(p, lr=0.05, weight_decay=0.1, maximize=True),
    "nadam-decoupled-momentum-decay": lambda o, p: o.NAdam(p, lr=0.05, weight_decay=0.1, momentum_decay=0.01,
                                                           decoupled_weight_decay=True),
    "radam": lambda o, p: o.RAdam(p, lr=0.05),
    "radam-weight-decay-maximize": lambda o, p: o.RAdam(p, lr=0.05, weight_decay=0.1, maximize=True),
    "radam-decoupled-low-betas": lambda o, p: o.RAdam(p, lr=0.05, betas=(0.4, 0.9), weight_decay=0.1,
                                                      decoupled_weight_decay=True),
    "asgd": lambda o, p: o.ASGD(p, lr=0.1),
    "asgd-averaging-from-t0-weight-decay-maximize": lambda o, p: o.ASGD(p, lr=0.1, lambd=0.01, alpha=0.5, t0=10,
                                                                         weight_decay=0.1, maximize=True),
    "adafactor": lambda o, p: o.Adafactor(p),
    "adafactor-weight-decay-maximize": lambda o, p: o.Adafactor(p, lr=0.05, weight_decay=0.1, maximize=True),
    "adafactor-decay-eps-clip": lambda o, p: o.Adafactor(p, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5),
    "rprop": lambda o, p: o.Rprop(p, lr=0.01),
    "rprop-etas-bounds-maximize": lambda o, p: o.Rprop(p, lr=0.01, etas=(0.3, 1.5), step_sizes=(1e-3, 0.05),
                                                       maximize=True),
}  # fmt: skip


def _train(lib, make_optimizer, dtype="float64", steps=30):
    """A tanh regression: the same start, data and therefore (while the parameters agree) gradients each step."""
    rng = np.random.default_rng(0)
    w0, b0 = rng.standard_normal((5, 4)), rng.standard_normal(5)
    xs, ys = rng.standard_normal((steps, 8, 4)), rng.standard_normal((steps, 8, 5))
    dt = getattr(lib, dtype)
    w = lib.nn.Parameter(lib.tensor(w0, dtype=dt))
    b = lib.nn.Parameter(lib.tensor(b0, dtype=dt))
    opt = make_optimizer(lib.optim, [w, b])
    for x, y in zip(xs, ys):
        opt.zero_grad()
        out = lib.tanh(lib.tensor(x, dtype=dt) @ w.t() + b)
        ((out - lib.tensor(y, dtype=dt)) ** 2).mean().backward()
        opt.step()
    return [w, b], opt


def _numpy(value):
    return np.asarray(value.detach().cpu().numpy(), dtype=np.float64) if hasattr(value, "numpy") else value


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-6), ("float32", 1e-5)])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_thirty_steps_match_torch_in_parameters_and_state(torch, name, dtype, tol):
    ours, ours_opt = _train(numbagrad, OPTIMIZERS[name], dtype)
    theirs, theirs_opt = _train(torch, OPTIMIZERS[name], dtype)
    for a, b in zip(ours, theirs):
        assert a.dtype == getattr(numbagrad, dtype)
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=0, atol=tol)
    for i in range(2):
        state, expected = ours_opt.state_dict()["state"][i], theirs_opt.state_dict()["state"][i]
        assert list(state) == list(expected)
        for key in expected:
            assert state[key].dtype == getattr(numbagrad, str(expected[key].dtype).split(".")[1]), key
            np.testing.assert_allclose(_numpy(state[key]), _numpy(expected[key]), rtol=0, atol=tol, err_msg=key)
    start, _ = _train(numbagrad, OPTIMIZERS[name], dtype, steps=0)
    assert not np.allclose(_numpy(ours[0]), _numpy(start[0]))  # it moved


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_param_groups_match_torch(torch, name):
    groups = []
    for lib in (numbagrad, torch):
        opt = OPTIMIZERS[name](lib.optim, [lib.nn.Parameter(lib.ones(2))])
        groups.append(opt.state_dict()["param_groups"])
    assert groups[0] == groups[1]
    assert [list(g) for g in groups[0]] == [list(g) for g in groups[1]]  # and their keys in torch's order


def _resume(lib, name, steps=3):
    """Three steps, a state_dict loaded into a new optimizer over copies of the parameters, three more steps."""
    params, opt = _train(lib, OPTIMIZERS[name], steps=steps)
    copies = [lib.nn.Parameter(p.detach().clone()) for p in params]
    resumed = OPTIMIZERS[name](lib.optim, copies)
    resumed.load_state_dict(opt.state_dict())
    rng = np.random.default_rng(1)
    for _ in range(steps):
        for p in copies:
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype)
        resumed.step()
    return copies, resumed


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_state_dict_round_trip_resumes_as_torch_does(torch, name):
    """torch casts floating state (not ``step``) to the parameter's dtype on load: NAdam's float32 ``mu_product``
    and ASGD's ``eta`` and ``mu`` continue in float64, here as there."""
    ours, ours_opt = _resume(numbagrad, name)
    theirs, theirs_opt = _resume(torch, name)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=0, atol=1e-12)
    for key, value in theirs_opt.state_dict()["state"][0].items():
        assert str(ours_opt.state_dict()["state"][0][key].dtype) == str(value.dtype).replace("torch", "numbagrad")


# --- torch's errors ----------------------------------------------------------------------------------------------
INVALID = {
    "Invalid learning rate: -1": lambda o, p: o.Adadelta(p, lr=-1),
    "Invalid rho value: 1.5": lambda o, p: o.Adadelta(p, rho=1.5),
    "Invalid epsilon value: -1": lambda o, p: o.Adadelta(p, eps=-1),
    "Invalid beta parameter at index 0: 1.0": lambda o, p: o.Adamax(p, betas=(1.0, 0.9)),
    "Invalid weight_decay value: -0.1": lambda o, p: o.Adamax(p, weight_decay=-0.1),
    "Invalid beta parameter at index 1: -0.1": lambda o, p: o.NAdam(p, betas=(0.9, -0.1)),
    "Invalid momentum_decay value: -1": lambda o, p: o.NAdam(p, momentum_decay=-1),
    "Invalid epsilon value: -1e-08": lambda o, p: o.RAdam(p, eps=-1e-8),
    "Invalid learning rate: -0.5": lambda o, p: o.ASGD(p, lr=-0.5),
    "Invalid weight_decay value: -2": lambda o, p: o.ASGD(p, weight_decay=-2),
    "Invalid eta values: 1.5, 1.2": lambda o, p: o.Rprop(p, etas=(1.5, 1.2)),
    "Invalid learning rate: -3": lambda o, p: o.Rprop(p, lr=-3),
    "Learning rate should be >= 0 but is: -1": lambda o, p: o.Adafactor(p, lr=-1),
    "beta2_decay should be <= 0 but is: 0.5": lambda o, p: o.Adafactor(p, beta2_decay=0.5),
    "epsilon1 should be >= 0 but is: -1": lambda o, p: o.Adafactor(p, eps=(-1, 1e-3)),
    "epsilon2 should be >= 0 but is: -1": lambda o, p: o.Adafactor(p, eps=(None, -1)),
    "Clipping threshold d should be >= 1 but is: 0.5": lambda o, p: o.Adafactor(p, d=0.5),
    "weight_decay should be >= 0 but is: -1": lambda o, p: o.Adafactor(p, weight_decay=-1),
}


@pytest.mark.parametrize("message", INVALID)
def test_invalid_options_are_torchs_value_errors(torch, message):
    for lib in (numbagrad, torch):
        with pytest.raises(ValueError) as info:
            INVALID[message](lib.optim, [lib.nn.Parameter(lib.ones(2))])
        assert str(info.value) == message


# --- foreach, fused, capturable, differentiable ---------------------------------------------------------------------
ALL = {
    "SGD": lambda o, p, **kw: o.SGD(p, **{"lr": 0.1, "momentum": 0.9, **kw}),
    "Adam": lambda o, p, **kw: o.Adam(p, **{"lr": 0.1, **kw}),
    "AdamW": lambda o, p, **kw: o.AdamW(p, **{"lr": 0.1, **kw}),
    "RMSprop": lambda o, p, **kw: o.RMSprop(p, **{"lr": 0.1, **kw}),
    "Adagrad": lambda o, p, **kw: o.Adagrad(p, **{"lr": 0.1, **kw}),
    "Adadelta": lambda o, p, **kw: o.Adadelta(p, **kw),
    "Adamax": lambda o, p, **kw: o.Adamax(p, **kw),
    "NAdam": lambda o, p, **kw: o.NAdam(p, **kw),
    "RAdam": lambda o, p, **kw: o.RAdam(p, **kw),
    "ASGD": lambda o, p, **kw: o.ASGD(p, **kw),
    "Rprop": lambda o, p, **kw: o.Rprop(p, **kw),
    "Adafactor": lambda o, p, **kw: o.Adafactor(p, **kw),
}
OPTIONS = [
    {"foreach": True},
    {"foreach": False},
    {"fused": True},
    {"fused": False},
    {"fused": True, "foreach": True},
    {"fused": True, "differentiable": True},
    {"capturable": True},
    {"differentiable": True},
]


def _outcome(lib, name, options):
    """The parameter after two steps, or the type and text of the error that construction or stepping raised."""
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64))
    try:
        opt = ALL[name](lib.optim, [p], **options)
        for g in ([0.5, 1.0, -1.0], [1.0, -0.25, 2.0]):
            p.grad = lib.tensor(g, dtype=lib.float64)
            opt.step()
    except (TypeError, ValueError, RuntimeError, AssertionError) as error:
        return type(error).__name__, str(error)
    return p.detach().numpy().copy(), opt.param_groups[0]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("name", ALL)
def test_implementation_options_are_accepted_or_refused_as_torch_does(torch, name, options):
    """``foreach``/``fused`` select nothing here (each update is one fused kernel) but must be accepted where torch
    accepts them, giving the same step; torch's own errors otherwise (an unknown keyword, the exclusive pairs,
    ``capturable`` off CUDA, ``differentiable`` in-place updates of a leaf that requires grad)."""
    ours, theirs = _outcome(numbagrad, name, options), _outcome(torch, name, options)
    if isinstance(theirs[0], str):
        assert ours == theirs
    else:
        np.testing.assert_allclose(ours[0], theirs[0], rtol=0, atol=1e-12)
        assert {k: v for k, v in ours[1].items() if k != "params"} == {
            k: v for k, v in theirs[1].items() if k != "params"
        }


@pytest.mark.parametrize("name", ALL)
def test_a_one_element_tensor_lr_steps_as_torch_does(torch, name):
    """A Tensor learning rate (one element) is used as its value; a longer one is torch's error."""
    ours, theirs = (_outcome(lib, name, {"lr": lib.tensor([0.05], dtype=lib.float64)}) for lib in (numbagrad, torch))
    np.testing.assert_allclose(ours[0], theirs[0], rtol=0, atol=1e-12)
    for lib in (numbagrad, torch):
        with pytest.raises(ValueError, match="^Tensor lr must be 1-element$"):
            ALL[name](lib.optim, [lib.nn.Parameter(lib.ones(2))], lr=lib.tensor([0.1, 0.2]))


def test_adam_tensor_lr_with_foreach_is_torchs_error(torch):
    for lib in (numbagrad, torch):
        with pytest.raises(ValueError, match="^lr as a Tensor is not supported for capturable=False and foreach=True$"):
            lib.optim.Adam([lib.nn.Parameter(lib.ones(2))], lr=lib.tensor(0.1), foreach=True)


def test_rmsprop_foreach_steps_as_the_default_does():
    results = []
    for foreach in (None, True):
        p = _train(numbagrad, lambda o, p, f=foreach: o.RMSprop(p, lr=0.01, momentum=0.5, foreach=f), steps=5)[0][0]
        results.append(p.detach().numpy())
    np.testing.assert_array_equal(results[0], results[1])


# --- LBFGS --------------------------------------------------------------------------------------------------------
def _rosenbrock_run(lib, steps=8, dtype="float64", start=(-1.2, 1.0), **options):
    """``steps`` LBFGS steps on the Rosenbrock function from ``start`` (its classic start: from some others the
    iterates amplify last-bit differences of the backend's ``dot`` and ``add_(alpha=)`` roundings, which torch
    fuses, to 1e-5 within a few steps): the point, each step's returned loss, and the optimizer."""
    x = lib.nn.Parameter(lib.tensor(start, dtype=getattr(lib, dtype)))
    opt = lib.optim.LBFGS([x], **options)

    def closure():
        opt.zero_grad()
        loss = ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(steps)]
    return x.detach().numpy().copy(), losses, opt


LBFGS_OPTIONS = {
    "default": {},
    "strong-wolfe": {"line_search_fn": "strong_wolfe"},
    "short-history-lr": {"history_size": 3, "max_iter": 7, "lr": 0.5},
    "strong-wolfe-short-history": {"line_search_fn": "strong_wolfe", "history_size": 2, "max_iter": 5},
    "strong-wolfe-few-evaluations": {"line_search_fn": "strong_wolfe", "max_iter": 10, "max_eval": 12},
    "tolerances": {"tolerance_grad": 1e-3, "tolerance_change": 1e-4},
}


@pytest.mark.parametrize("name", LBFGS_OPTIONS)
def test_lbfgs_on_rosenbrock_matches_torch(torch, name):
    ours, our_losses, our_opt = _rosenbrock_run(numbagrad, **LBFGS_OPTIONS[name])
    theirs, their_losses, their_opt = _rosenbrock_run(torch, **LBFGS_OPTIONS[name])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    np.testing.assert_allclose(our_losses, their_losses, rtol=0, atol=1e-6)
    state, expected = our_opt.state_dict()["state"][0], their_opt.state_dict()["state"][0]
    assert list(state) == list(expected)
    assert (state["func_evals"], state["n_iter"]) == (expected["func_evals"], expected["n_iter"])
    for key in ("d", "prev_flat_grad"):
        np.testing.assert_allclose(_numpy(state[key]), _numpy(expected[key]), rtol=0, atol=1e-6)
    assert len(state["old_dirs"]) == len(expected["old_dirs"])
    # ro = 1 / (y.s): near the minimum y.s is a difference of nearly equal gradients, known to a few digits only
    np.testing.assert_allclose(state["ro"], [float(r) for r in expected["ro"]], rtol=1e-4)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_finds_the_rosenbrock_minimum(line_search_fn):
    x, losses, _ = _rosenbrock_run(numbagrad, steps=10, start=(0.0, 0.0), line_search_fn=line_search_fn)
    np.testing.assert_allclose(x, [1.0, 1.0], atol=1e-4)  # the valley is flat: a loss of 1e-10 is 1e-5 away
    assert losses[-1] < 1e-9


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_in_float32_matches_torch(torch, line_search_fn):
    ours, _, _ = _rosenbrock_run(numbagrad, steps=2, dtype="float32", line_search_fn=line_search_fn, max_iter=8)
    theirs, _, _ = _rosenbrock_run(torch, steps=2, dtype="float32", line_search_fn=line_search_fn, max_iter=8)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_over_several_parameters_matches_torch(torch, line_search_fn):
    """A least-squares fit of a linear layer: the flat vectors are split back into a weight and a bias; a
    parameter without a gradient counts as a zero gradient and stays put."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((10, 3)), rng.standard_normal((10, 2))
    w0, b0, unused0 = rng.standard_normal((2, 3)), rng.standard_normal(2), rng.standard_normal(4)
    results = []
    for lib in (numbagrad, torch):
        w, b, unused = (lib.nn.Parameter(lib.tensor(v, dtype=lib.float64)) for v in (w0, b0, unused0))
        opt = lib.optim.LBFGS([w, b, unused], history_size=4, max_iter=6, line_search_fn=line_search_fn)

        def closure(lib=lib, w=w, b=b, opt=opt):
            opt.zero_grad()
            loss = ((lib.tensor(x, dtype=lib.float64) @ w.t() + b - lib.tensor(y, dtype=lib.float64)) ** 2).mean()
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        results.append([_numpy(p) for p in (w, b, unused)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(results[0][2], unused0)


def test_lbfgs_errors_are_torchs(torch):
    for lib in (numbagrad, torch):
        a, b = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(2))
        with pytest.raises(ValueError, match=r"^LBFGS doesn't support per-parameter options \(parameter groups\)$"):
            lib.optim.LBFGS([{"params": [a]}, {"params": [b]}])
        with pytest.raises(ValueError, match="^Invalid learning rate: -1$"):
            lib.optim.LBFGS([a], lr=-1)
        opt = lib.optim.LBFGS([a], line_search_fn="backtracking")

        def closure(a=a, opt=opt):
            opt.zero_grad()
            loss = (a**2).sum()
            loss.backward()
            return loss

        with pytest.raises(RuntimeError, match="^only 'strong_wolfe' is supported$"):
            opt.step(closure)


def test_lbfgs_defaults_match_torch(torch):
    groups = [
        lib.optim.LBFGS([lib.nn.Parameter(lib.ones(2))], max_iter=8).param_groups[0] for lib in (numbagrad, torch)
    ]
    assert {k: v for k, v in groups[0].items() if k != "params"} == {
        k: v for k, v in groups[1].items() if k != "params"
    }


@pytest.mark.parametrize(
    "name",
    ["adadelta-rho-weight-decay-maximize", "adamax-low-beta1-weight-decay-maximize", "nadam-decoupled-momentum-decay",
     "radam-weight-decay-maximize", "asgd-averaging-from-t0-weight-decay-maximize", "rprop-etas-bounds-maximize",
     "adafactor-weight-decay-maximize"],
)  # fmt: skip
def test_step_on_device_matches_cpu(device, name):
    results = []
    for dev in ("cpu", device):
        p = numbagrad.nn.Parameter(numbagrad.tensor([1.0, -2.0, 3.0], dtype=numbagrad.float64).to(dev))
        opt = OPTIMIZERS[name](numbagrad.optim, [p])
        for g in ([0.5, 1.0, -1.0], [1.0, 1.0, 1.0], [-0.5, 2.0, 0.0]):
            p.grad = numbagrad.tensor(g, dtype=numbagrad.float64).to(dev)
            opt.step()
        assert p.device.type == dev and all(s.device.type == dev for s in opt.state[p].values() if s.dim())
        results.append(p.detach().cpu().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_on_device_matches_cpu(device, line_search_fn):
    results = []
    for dev in ("cpu", device):
        x = numbagrad.nn.Parameter(numbagrad.tensor([-1.2, 1.0], dtype=numbagrad.float64).to(dev))
        opt = numbagrad.optim.LBFGS([x], max_iter=5, line_search_fn=line_search_fn)

        def closure(x=x, opt=opt):
            opt.zero_grad()
            loss = ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        assert x.device.type == dev
        results.append(x.detach().cpu().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-9)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_adafactor_factors_a_batch_of_matrices_as_torch_does(torch, dtype):
    """A 3-d parameter: one row and one column statistic per matrix of the batch; a group's ``eps[0]`` defaults
    to its first parameter's dtype epsilon."""
    rng = np.random.default_rng(3)
    start, grads = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 2, 3, 4))
    results = []
    for lib in (numbagrad, torch):
        p = lib.nn.Parameter(lib.tensor(start, dtype=getattr(lib, dtype)))
        opt = lib.optim.Adafactor([p], lr=0.1)
        for g in grads:
            p.grad = lib.tensor(g, dtype=getattr(lib, dtype))
            opt.step()
        state = opt.state[p]
        assert tuple(state["row_var"].shape) == (2, 3, 1) and tuple(state["col_var"].shape) == (2, 1, 4)
        results.append([_numpy(p), _numpy(state["row_var"]), _numpy(state["col_var"])])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 if dtype == "float64" else 1e-5)


@pytest.mark.parametrize(
    "name",
    ["adadelta-rho-weight-decay-maximize", "adamax-low-beta1-weight-decay-maximize", "nadam-decoupled-momentum-decay",
     "radam-weight-decay-maximize", "asgd-averaging-from-t0-weight-decay-maximize", "rprop-etas-bounds-maximize",
     "adafactor-weight-decay-maximize"],
)  # fmt: skip
def test_float16_parameters_step_as_float32_does(name):
    """Numba has no float16: the update runs in float32 and the parameter and its state stay float16."""
    start = np.linspace(-1, 1, 9).astype(np.float16)
    grads = [np.linspace(0.5, -2, 9), np.linspace(-1, 1, 9) ** 2, np.full(9, 0.25)]
    results = []
    for dtype in (numbagrad.float16, numbagrad.float32):
        p = numbagrad.nn.Parameter(numbagrad.tensor(start, dtype=dtype))
        opt = OPTIMIZERS[name](numbagrad.optim, [p])
        for g in grads:
            p.grad = numbagrad.tensor(g.astype(np.float16), dtype=dtype)
            opt.step()
        assert p.dtype == dtype and all(s.dtype == dtype for s in opt.state[p].values() if s.dim())
        results.append(p.detach().numpy().astype(np.float32))
    half, single = results
    assert not np.array_equal(half, start)  # it moved
    np.testing.assert_allclose(half, single, rtol=0, atol=4e-3)


def test_lbfgs_takes_a_one_element_tensor_lr():
    as_float, _, _ = _rosenbrock_run(numbagrad, steps=2, lr=0.5)
    as_tensor, _, _ = _rosenbrock_run(numbagrad, steps=2, lr=numbagrad.tensor(0.5, dtype=numbagrad.float64))
    np.testing.assert_array_equal(as_float, as_tensor)
    with pytest.raises(ValueError, match="^Tensor lr must be 1-element$"):
        numbagrad.optim.LBFGS([numbagrad.nn.Parameter(numbagrad.ones(2))], lr=numbagrad.tensor([0.1, 0.2]))


# --- hooks ----------------------------------------------------------------------------------------------------------
def _hook_log(lib):
    """An SGD step with instance and global step hooks, state_dict and load_state_dict hooks; what they saw."""
    seen = []
    p = lib.nn.Parameter(lib.tensor([1.0, 2.0], dtype=lib.float64))
    opt = lib.optim.SGD([p], lr=0.5)
    module = importlib.import_module(f"{lib.__name__}.optim.optimizer")

    def closure():
        seen.append("closure")
        return lib.tensor(3.0)

    def pre(o, args, kwargs):
        seen.append(("pre", type(o).__name__, len(args), sorted(kwargs)))
        return (args[0],), {"closure": closure}  # run the step with a closure

    handles = [
        module.register_optimizer_step_pre_hook(lambda o, a, k: seen.append("global pre")),
        module.register_optimizer_step_post_hook(lambda o, a, k: seen.append(("global post", sorted(k)))),
        opt.register_step_pre_hook(pre),
        opt.register_step_post_hook(lambda o, a, k: seen.append(("post", len(a), sorted(k)))),
        opt.register_state_dict_pre_hook(lambda o: seen.append("sd pre")),
        opt.register_state_dict_pre_hook(lambda o: seen.append("sd pre first"), prepend=True),
        opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1}),
        opt.register_load_state_dict_pre_hook(lambda o, sd: seen.append(("load pre", "extra" in sd))),
        opt.register_load_state_dict_post_hook(lambda o: seen.append("load post")),
    ]
    try:
        p.grad = lib.tensor([1.0, 1.0], dtype=lib.float64)
        loss = opt.step()
        seen.append(("loss", float(loss)))
        state = opt.state_dict()
        seen.append(sorted(state))
        opt.load_state_dict(state)
        handles[2].remove()
        opt.step()
    finally:
        for handle in handles:
            handle.remove()
    opt.step()  # no hook runs
    seen.append(p.detach().numpy().tolist())
    return seen


def test_hooks_run_as_torchs_do(torch):
    assert _hook_log(numbagrad) == _hook_log(torch)


def test_a_step_pre_hook_returning_something_else_is_torchs_error(torch):
    for lib in (numbagrad, torch):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.Adam([p])
        opt.register_step_pre_hook(lambda o, a, k: "args")
        with pytest.raises(
            RuntimeError, match="must return None or a tuple of \\(new_args, new_kwargs\\), but got args"
        ):
            opt.step()


def test_a_subclass_step_calling_super_runs_the_hooks_at_each_wrapped_level_as_torch_does(torch):
    """Each class's ``step`` is wrapped when its first instance is made: a subclass's ``step`` calling an already
    wrapped ``SGD.step`` runs the post hook twice, in torch too."""
    counts = []
    for lib in (numbagrad, torch):
        lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=0.1)

        class Counting(lib.optim.SGD):
            def step(self, closure=None):
                return super().step(closure)

        calls = []
        opt = Counting([lib.nn.Parameter(lib.ones(2))], lr=0.1)
        opt.register_step_post_hook(lambda o, a, k, calls=calls: calls.append(1))
        opt.step()
        counts.append(len(calls))
    assert counts[0] == counts[1]


@pytest.mark.parametrize(
    "name", ["radam", "nadam-decoupled-momentum-decay", "asgd-averaging-from-t0-weight-decay-maximize", "adafactor"]
)
def test_scalar_state_follows_the_default_dtype_as_torchs_does(torch, name):
    """With float64 the default dtype, ``step`` (and NAdam's ``mu_product``, ASGD's ``eta`` and ``mu``) are float64
    tensors, and ASGD's step sizes are no longer rounded to float32: float32 parameters follow torch's."""
    results = []
    for lib in (numbagrad, torch):
        lib.set_default_dtype(lib.float64)
        try:
            params, opt = _train(lib, OPTIMIZERS[name], "float32", steps=15)
        finally:
            lib.set_default_dtype(lib.float32)
        state = opt.state_dict()["state"][0]
        results.append(([_numpy(p) for p in params], {k: str(v.dtype).split(".")[1] for k, v in state.items()}))
    (ours, our_dtypes), (theirs, their_dtypes) = results
    assert our_dtypes == their_dtypes and our_dtypes["step"] == "float64"
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


# --- named parameters --------------------------------------------------------------------------------------------
def _named_run(lib):
    """An Adam over ``named_parameters()``: its groups (with ``param_names``) and state_dict, then a load."""
    model = lib.nn.Linear(3, 2)
    opt = lib.optim.Adam(model.named_parameters(), lr=0.1)
    opt.add_param_group({"params": [("extra", lib.nn.Parameter(lib.ones(2)))], "lr": 0.01})
    saved = opt.state_dict()
    fresh = lib.optim.Adam(lib.nn.Linear(3, 2).named_parameters(), lr=0.5)
    fresh.add_param_group({"params": [("extra", lib.nn.Parameter(lib.ones(2)))]})
    fresh.load_state_dict(saved)
    return [
        [{k: v for k, v in g.items() if k != "params"} for g in saved["param_groups"]],
        [{k: v for k, v in g.items() if k != "params"} for g in fresh.param_groups],
        [len(g["params"]) for g in opt.param_groups],
    ]


def test_named_parameters_are_kept_as_param_names_like_torch(torch):
    assert _named_run(numbagrad) == _named_run(torch)


def test_mixing_named_and_unnamed_parameters_is_torchs_error(torch):
    for lib in (numbagrad, torch):
        a, b = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(2))
        with pytest.raises(ValueError, match="^all optimizer params should be with/without names. Some param names"):
            lib.optim.SGD([("a", a), b], lr=0.1)
        opt = lib.optim.SGD([("a", a)], lr=0.1)
        with pytest.raises(ValueError, match="cannot add param group without names to the optimizer$"):
            opt.add_param_group({"params": [b]})


def test_a_differentiable_optimizer_accepts_a_non_leaf_tensor_as_torch_does(torch):
    """torch lets a differentiable optimizer hold non-leaf tensors; its step would record the update, which is
    not done here: the step refuses it rather than updating without the graph."""
    for lib in (numbagrad, torch):
        w = lib.ones(2, requires_grad=True) * 2
        lib.optim.SGD([w], lr=0.1, differentiable=True)
        with pytest.raises(ValueError, match="^can't optimize a non-leaf Tensor$"):
            lib.optim.SGD([w], lr=0.1)
    w = numbagrad.ones(2, requires_grad=True) * 2
    w.retain_grad()
    opt = numbagrad.optim.SGD([w], lr=0.1, differentiable=True)
    w.sum().backward()
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        opt.step()


@pytest.mark.parametrize("name", [*ALL, "LBFGS"])
def test_repr_matches_torch(torch, name):
    reprs = []
    for lib in (numbagrad, torch):
        params = [lib.nn.Parameter(lib.ones(2))]
        reprs.append(repr(getattr(lib.optim, name)(params, lr=0.1)))
    assert reprs[0] == reprs[1]
