"""``optim.swa_utils``: AveragedModel (equal-weight, EMA, custom ``avg_fn``/``multi_avg_fn``, ``use_buffers``),
SWALR and update_bn against torch, with the same model, data and training steps."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.optim import swa_utils


def _model(lib, seed: int = 0):
    """Linear, BatchNorm1d, Linear in float64, with the same weights in either library."""
    rng = np.random.default_rng(seed)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(), lib.nn.Linear(4, 2)).double()
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    return model


def _averaged_run(lib, steps: int = 6, fn: str | None = None, fn_args=(), **options):
    """Train with SGD, folding the model into an AveragedModel after every step; the averaged state_dict."""
    if fn is not None:
        kind = "multi_avg_fn" if "multi" in fn else "avg_fn"
        options[kind] = getattr(lib.optim.swa_utils, fn)(*fn_args)
    model = _model(lib)
    averaged = lib.optim.swa_utils.AveragedModel(model, **options)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        x = lib.tensor(rng.standard_normal((5, 3)))
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        averaged.update_parameters(model)
    return averaged


AVERAGES = {
    "swa-default": {},
    "swa-use-buffers": {"use_buffers": True},
    "ema-multi": {"fn": "get_ema_multi_avg_fn", "fn_args": (0.9,)},
    "ema-multi-use-buffers": {"fn": "get_ema_multi_avg_fn", "fn_args": (0.8,), "use_buffers": True},
    "swa-multi": {"fn": "get_swa_multi_avg_fn"},
    "ema-avg-fn": {"fn": "get_ema_avg_fn", "fn_args": (0.7,)},
    "swa-avg-fn": {"fn": "get_swa_avg_fn"},
}


@pytest.mark.parametrize("name", AVERAGES)
def test_averaged_model_matches_torch(torch, name):
    ours = _averaged_run(ng, **AVERAGES[name]).state_dict()
    theirs = _averaged_run(torch, **AVERAGES[name]).state_dict()
    assert list(ours) == list(theirs)
    for key in theirs:
        assert str(ours[key].dtype).split(".")[1] == str(theirs[key].dtype).split(".")[1], key
        np.testing.assert_allclose(ours[key].numpy(), theirs[key].numpy(), rtol=0, atol=1e-12, err_msg=key)
    assert ours["n_averaged"].item() == 6


def test_equal_weight_average_is_the_mean_of_the_models():
    snapshots, model = [], _model(ng)
    averaged = swa_utils.AveragedModel(model)
    for k in range(4):
        with ng.no_grad():
            for p in model.parameters():
                p.add_(float(k + 1))
        snapshots.append([p.detach().numpy().copy() for p in model.parameters()])
        averaged.update_parameters(model)
    for p, values in zip(averaged.module.parameters(), zip(*snapshots)):
        np.testing.assert_allclose(p.detach().numpy(), np.mean(values, axis=0), rtol=1e-14)


def test_averaged_model_copies_the_model_and_forwards_through_the_copy():
    model = _model(ng).eval()
    averaged = swa_utils.AveragedModel(model)
    assert averaged.module is not model and averaged.module[0].weight is not model[0].weight
    x = ng.tensor(np.random.default_rng(2).standard_normal((3, 3)))
    np.testing.assert_array_equal(averaged(x).detach().numpy(), model(x).detach().numpy())
    assert averaged.n_averaged.dtype == ng.int64 and averaged.n_averaged.item() == 0
    with ng.no_grad():
        model[0].weight.add_(1.0)
    assert not np.array_equal(averaged(x).detach().numpy(), model(x).detach().numpy())


def test_buffers_are_copied_unless_averaged():
    model = _model(ng)
    averaged = swa_utils.AveragedModel(model)
    model.train()
    model(ng.tensor(np.random.default_rng(3).standard_normal((6, 3))))
    averaged.update_parameters(model)
    np.testing.assert_array_equal(averaged.module[1].running_mean.numpy(), model[1].running_mean.numpy())


def test_averaged_model_errors_and_decay_checks_match_torch(torch):
    for lib in (ng, torch):
        utils = lib.optim.swa_utils
        with pytest.raises(AssertionError, match="^Only one of avg_fn and multi_avg_fn should be provided$"):
            utils.AveragedModel(_model(lib), avg_fn=utils.get_swa_avg_fn(), multi_avg_fn=utils.get_swa_multi_avg_fn())
        for make in (utils.get_ema_multi_avg_fn, utils.get_ema_avg_fn):
            with pytest.raises(
                ValueError, match=r"^Invalid decay value 1.5 provided. Please provide a value in \[0,1\]"
            ):
                make(1.5)


# --- update_bn ------------------------------------------------------------------------------------------------------
def test_update_bn_recomputes_the_running_statistics_like_torch(torch):
    rng = np.random.default_rng(4)
    batches = [rng.standard_normal((5, 3)) for _ in range(4)]
    stats = []
    for lib in (ng, torch):
        model = _model(lib).eval()
        momentum = model[1].momentum
        loader = [(lib.tensor(b), lib.zeros(5)) for b in batches]  # (input, target) pairs: the input is used
        lib.optim.swa_utils.update_bn(loader, model)
        assert not model.training and model[1].momentum == momentum
        bn = model[1]
        stats.append([bn.running_mean.numpy(), bn.running_var.numpy(), bn.num_batches_tracked.item()])
    np.testing.assert_allclose(stats[0][0], stats[1][0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(stats[0][1], stats[1][1], rtol=0, atol=1e-12)
    assert stats[0][2] == stats[1][2] == 4


def test_update_bn_is_a_cumulative_average_over_the_loader():
    rng = np.random.default_rng(5)
    batches = [rng.standard_normal((8, 3)) for _ in range(3)]
    model = ng.nn.Sequential(ng.nn.BatchNorm1d(3)).double()
    swa_utils.update_bn([ng.tensor(b) for b in batches], model)
    np.testing.assert_allclose(model[0].running_mean.numpy(), np.mean([b.mean(0) for b in batches], 0), rtol=1e-12)


def test_update_bn_without_batch_norm_leaves_the_model_alone():
    model = ng.nn.Linear(3, 2)
    model.eval()
    swa_utils.update_bn([ng.ones(2, 3)], model)
    assert not model.training


# --- SWALR --------------------------------------------------------------------------------------------------------
SWALR_CONFIGS = {
    "cos": lambda m, o: m.SWALR(o, swa_lr=0.05),
    "linear-groups": lambda m, o: m.SWALR(o, swa_lr=[0.01, 0.2], anneal_epochs=7, anneal_strategy="linear"),
    "no-annealing": lambda m, o: m.SWALR(o, swa_lr=0.03, anneal_epochs=0),
}


def _swalr_run(lib, build, steps: int = 50):
    params = [lib.nn.Parameter(lib.zeros(2)), lib.nn.Parameter(lib.zeros(2))]
    opt = lib.optim.SGD([{"params": [params[0]], "lr": 0.1}, {"params": [params[1]], "lr": 0.5}], lr=0.1)
    scheduler = build(lib.optim.swa_utils, opt)
    lrs = [scheduler.get_last_lr()]
    for _ in range(steps):
        opt.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr())
    return lrs, scheduler


@pytest.mark.parametrize("name", SWALR_CONFIGS)
def test_swalr_matches_torch(torch, name):
    ours, _ = _swalr_run(ng, SWALR_CONFIGS[name])
    theirs, _ = _swalr_run(torch, SWALR_CONFIGS[name])
    assert ours == theirs


@pytest.mark.parametrize("name", SWALR_CONFIGS)
def test_swalr_state_dict_resumes_the_same_schedule(name):
    whole, _ = _swalr_run(ng, SWALR_CONFIGS[name], steps=20)
    first, scheduler = _swalr_run(ng, SWALR_CONFIGS[name], steps=8)
    state = copy.deepcopy(scheduler.state_dict())
    assert "anneal_func" not in state and "optimizer" not in state
    opt_state = copy.deepcopy(scheduler.optimizer.state_dict())
    _, resumed = _swalr_run(ng, lambda m, o: m.SWALR(o, swa_lr=0.9, anneal_strategy="linear"), steps=0)
    resumed.optimizer.load_state_dict(opt_state)
    resumed.load_state_dict(state)
    rest = []
    for _ in range(12):
        resumed.optimizer.step()
        resumed.step()
        rest.append(resumed.get_last_lr())
    assert first + rest == whole


def test_swalr_errors_match_torch(torch):
    for lib in (ng, torch):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
        with pytest.raises(ValueError, match="^anneal_strategy must be one of 'cos' or 'linear', instead got exp$"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_strategy="exp")
        with pytest.raises(ValueError, match="^anneal_epochs must be equal or greater than 0, got -1$"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=-1)
        with pytest.raises(ValueError, match="swa_lr must have the same length as optimizer.param_groups"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.1])


@pytest.mark.parametrize("name", ["swa-default", "ema-multi-use-buffers", "swa-multi"])
def test_averaged_model_on_device_matches_cpu(device, name):
    options = dict(AVERAGES[name])
    fn = options.pop("fn", None)
    if fn is not None:
        options["multi_avg_fn"] = getattr(swa_utils, fn)(*options.pop("fn_args", ()))
    results = []
    for dev in ("cpu", device):
        model = _model(ng).to(dev)
        averaged = swa_utils.AveragedModel(model, device=dev, **options)
        for k in range(3):
            with ng.no_grad():
                for p in model.parameters():
                    p.mul_(0.5).add_(float(k))
            model(ng.tensor(np.random.default_rng(k).standard_normal((4, 3))).to(dev))
            averaged.update_parameters(model)
        assert averaged.n_averaged.device.type == dev
        results.append([v.cpu().numpy() for v in averaged.state_dict().values()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12)
