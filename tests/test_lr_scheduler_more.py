"""``optim.lr_scheduler``: ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts, CyclicLR, MultiplicativeLR
and PolynomialLR follow torch's learning rates (and CyclicLR its momenta) over 50 steps exactly, resume from
``state_dict`` onto the same trajectory, and raise torch's errors."""

from __future__ import annotations

import copy
import importlib
import warnings

import pytest

import numbagrad as ng

STEPS = 50


def _optimizer(lib, kind: str = "sgd", lrs=(0.1,)):
    """An optimizer over one small parameter per group, with one learning rate per group."""
    groups = [{"params": [lib.nn.Parameter(lib.zeros(2))], "lr": lr} for lr in lrs]
    if kind == "sgd":
        return lib.optim.SGD(groups, lr=lrs[0], momentum=0.9)
    if kind == "rmsprop":
        return lib.optim.RMSprop(groups, lr=lrs[0], momentum=0.5)
    return lib.optim.Adam(groups, lr=lrs[0])


def _trajectory(optimizer, scheduler, steps: int = STEPS, key: str = "lr") -> list:
    """``get_last_lr()`` (or each group's ``key``) after construction and after each (optimizer step, scheduler
    step) pair."""

    def seen():
        return list(scheduler.get_last_lr()) if key == "lr" else [g[key] for g in optimizer.param_groups]

    out = [seen()]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        out.append(seen())
    return out


class _Decay:
    """A callable object: its ``__dict__`` (the calls it counted) goes into the scheduler's state_dict."""

    def __init__(self, rate: float) -> None:
        self.rate, self.calls = rate, 0

    def __call__(self, epoch: int) -> float:
        self.calls += 1
        return self.rate


# (id, optimizer kind, group lrs, builder(lr_scheduler module, optimizer) -> scheduler)
CONFIGS = [
    ("multiplicative", "sgd", (0.1,), lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95)),
    ("multiplicative-per-group", "adam", (0.1, 0.02),
     lambda m, o: m.MultiplicativeLR(o, [lambda e: 0.9 if e % 5 == 0 else 1.0, lambda e: 1.0 - 0.01 * e])),
    ("constant-default", "sgd", (0.1,), lambda m, o: m.ConstantLR(o)),
    ("constant-factor", "adam", (0.1, 0.3), lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=12)),
    ("polynomial-default", "sgd", (0.1,), lambda m, o: m.PolynomialLR(o)),
    ("polynomial-power", "sgd", (0.1, 0.5), lambda m, o: m.PolynomialLR(o, total_iters=40, power=2.0)),
    ("polynomial-sqrt", "adam", (0.1,), lambda m, o: m.PolynomialLR(o, total_iters=30, power=0.5)),
    ("warm-restarts", "sgd", (0.1,), lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=10)),
    ("warm-restarts-mult", "sgd", (0.1, 0.05),
     lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001)),
    ("cyclic-triangular", "sgd", (0.1,), lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5)),
    ("cyclic-triangular2-asymmetric", "sgd", (0.1, 0.1),
     lambda m, o: m.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=4, step_size_down=7,
                             mode="triangular2")),
    ("cyclic-exp-range-adam", "adam", (0.1,),
     lambda m, o: m.CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=6, mode="exp_range", gamma=0.97)),
    ("cyclic-scale-fn-iterations", "sgd", (0.1,),
     lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=lambda x: 1 / (1 + 0.05 * x),
                             scale_mode="iterations", base_momentum=0.7, max_momentum=0.95)),
    ("cyclic-no-momentum", "rmsprop", (0.1,),
     lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.05, step_size_up=8, cycle_momentum=False)),
    ("chained", "sgd", (0.1, 0.3),
     lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=4), m.ExponentialLR(o, gamma=0.9)])),
    ("chained-warmup-restarts", "adam", (0.1,),
     lambda m, o: m.ChainedScheduler([m.LinearLR(o, start_factor=0.1, total_iters=5),
                                      m.MultiplicativeLR(o, lambda e: 0.99)], optimizer=o)),
]  # fmt: skip


def _run(lib, kind, lrs, build, steps: int = STEPS, key: str = "lr"):
    optimizer = _optimizer(lib, kind, lrs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stepping in the right order raises no warning
        scheduler = build(lib.optim.lr_scheduler, optimizer)
        return _trajectory(optimizer, scheduler, steps, key)


@pytest.mark.parametrize("name,kind,lrs,build", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_trajectory_matches_torch(torch, name, kind, lrs, build):
    ours = _run(ng, kind, lrs, build)
    assert ours == _run(torch, kind, lrs, build)
    assert len({tuple(lr) for lr in ours}) > 1  # the schedule moved


@pytest.mark.parametrize("name", [c[0] for c in CONFIGS if c[0].startswith("cyclic") and "no-momentum" not in c[0]])
def test_cyclic_lr_cycles_momentum_like_torch(torch, name):
    _, kind, lrs, build = next(c for c in CONFIGS if c[0] == name)
    key = "betas" if kind == "adam" else "momentum"
    ours = _run(ng, kind, lrs, build, key=key)
    assert ours == _run(torch, kind, lrs, build, key=key)
    assert len({str(m) for m in ours}) > 2


def test_cyclic_lr_records_the_momentum_range_in_the_groups(torch):
    groups = []
    for lib in (ng, torch):
        optimizer = _optimizer(lib, "sgd", (0.1, 0.2))
        lib.optim.lr_scheduler.CyclicLR(optimizer, 0.01, 0.1, base_momentum=[0.6, 0.7], max_momentum=0.95)
        groups.append([{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups])
    assert groups[0] == groups[1]


@pytest.mark.parametrize("T_mult", [1, 2])
def test_warm_restarts_with_fractional_epochs_match_torch(torch, T_mult):
    """``step(epoch)`` with epochs within batches (``epoch + i / iters``), as torch documents, and jumps back."""
    runs = []
    for lib in (ng, torch):
        optimizer = _optimizer(lib, "sgd", (0.1,))
        scheduler = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=4, T_mult=T_mult, eta_min=0.01)
        lrs = []
        for epoch in [0.5, 1.25, 3.9, 4.0, 7.5, 12.2, 27.0, 2.0]:
            optimizer.step()
            scheduler.step(epoch)
            lrs.append((scheduler.get_last_lr(), scheduler.T_cur, scheduler.T_i, scheduler.last_epoch))
        runs.append(lrs)
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    "build",
    [
        lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=6),
        lambda m, o: m.PolynomialLR(o, total_iters=10, power=1.5),
    ],
    ids=["constant", "polynomial"],
)
def test_step_with_epoch_uses_the_closed_form_like_torch(torch, build):
    runs = []
    for lib in (ng, torch):
        optimizer = _optimizer(lib, "sgd", (0.1,))
        scheduler = build(lib.optim.lr_scheduler, optimizer)
        lrs = []
        for epoch in (3, 7, 2, 12, 5):
            optimizer.step()
            with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
                scheduler.step(epoch)
            lrs.append(scheduler.get_last_lr())
        runs.append(lrs)
    assert runs[0] == runs[1]


# --- resuming from state_dict ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,kind,lrs,build", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_state_dict_resumes_the_same_trajectory(name, kind, lrs, build):
    steps = 49
    whole = _run(ng, kind, lrs, build, steps)
    optimizer = _optimizer(ng, kind, lrs)
    scheduler = build(ng.optim.lr_scheduler, optimizer)
    first = _trajectory(optimizer, scheduler, 20)
    saved_sched, saved_opt = copy.deepcopy(scheduler.state_dict()), copy.deepcopy(optimizer.state_dict())
    optimizer = _optimizer(ng, kind, (0.5,) * len(lrs))  # a fresh run with other settings, then restored
    scheduler = build(ng.optim.lr_scheduler, optimizer)
    optimizer.load_state_dict(saved_opt)
    scheduler.load_state_dict(saved_sched)
    rest = _trajectory(optimizer, scheduler, steps - 20)
    assert first + rest[1:] == whole


def test_state_dict_keys_match_torch(torch):
    for build in [c[3] for c in CONFIGS]:
        keys = []
        for lib in (ng, torch):
            scheduler = build(lib.optim.lr_scheduler, _optimizer(lib, "sgd", (0.1, 0.3)))
            keys.append(set(scheduler.state_dict()))
        assert keys[0] == keys[1]


def test_callable_objects_state_is_saved_and_restored():
    """A callable object's ``__dict__`` is saved (a plain function is not) and loaded back into the object."""
    decay = _Decay(0.9)
    scheduler = ng.optim.lr_scheduler.MultiplicativeLR(_optimizer(ng), decay)
    _trajectory(scheduler.optimizer, scheduler, 3)
    state = scheduler.state_dict()
    assert state["lr_lambdas"] == [{"rate": 0.9, "calls": 3}]
    fresh = _Decay(0.5)
    other = ng.optim.lr_scheduler.MultiplicativeLR(_optimizer(ng), fresh)
    other.load_state_dict(state)
    assert (fresh.rate, fresh.calls) == (0.9, 3)
    cyclic = ng.optim.lr_scheduler.CyclicLR(_optimizer(ng), 0.01, 0.1, scale_fn=_Decay(1.0))
    assert cyclic.state_dict()["_scale_fn_custom"] == {"rate": 1.0, "calls": 1}
    assert "_scale_fn_ref" not in ng.optim.lr_scheduler.CyclicLR(_optimizer(ng), 0.01, 0.1).state_dict()


# --- values by hand ------------------------------------------------------------------------------------------------
def test_constant_lr_scales_then_restores():
    scheduler = ng.optim.lr_scheduler.ConstantLR(_optimizer(ng, lrs=(0.3,)), factor=0.5, total_iters=2)
    assert [lr[0] for lr in _trajectory(scheduler.optimizer, scheduler, 3)] == [0.15, 0.15, 0.3, 0.3]


def test_cyclic_lr_triangle_by_hand():
    scheduler = ng.optim.lr_scheduler.CyclicLR(_optimizer(ng), base_lr=1.0, max_lr=3.0, step_size_up=2)
    lrs = [lr[0] for lr in _trajectory(scheduler.optimizer, scheduler, 5)]
    assert lrs == pytest.approx([1.0, 2.0, 3.0, 2.0, 1.0, 2.0])


# --- errors --------------------------------------------------------------------------------------------------------
ERRORS = [
    (ValueError, lambda m, o: m.ConstantLR(o, factor=1.5)),
    (ValueError, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0)),
    (ValueError, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2.5)),
    (ValueError, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=0)),
    (ValueError, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, eta_min="0")),
    (ValueError, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5).step(-1)),
    (ValueError, lambda m, o: m.CyclicLR(o, 0.01, 0.1, mode="sawtooth")),
    (ValueError, lambda m, o: m.CyclicLR(o, [0.01, 0.02], 0.1)),
    (ValueError, lambda m, o: m.CyclicLR(_no_momentum(o), 0.1, 1)),
    (TypeError, lambda m, o: m.CyclicLR("sgd", 0.01, 0.1)),
    (TypeError, lambda m, o: m.MultiplicativeLR(o, 0.9)),
    (ValueError, lambda m, o: m.MultiplicativeLR(o, [lambda e: 1.0, lambda e: 1.0])),
    (ValueError, lambda m, o: m.ChainedScheduler([])),
    (ValueError, lambda m, o: m.ChainedScheduler([m.ReduceLROnPlateau(o)])),
    (TypeError, lambda m, o: m.ChainedScheduler([object()], optimizer=o)),
    (ValueError, lambda m, o: m.ChainedScheduler([m.ConstantLR(o)], optimizer=_no_momentum(o))),
]


def _no_momentum(optimizer):
    """Another optimizer of the same library, of a kind without momentum or betas, over the same parameters."""
    lib = importlib.import_module(type(optimizer).__module__.split(".")[0])
    return lib.optim.Adagrad(optimizer.param_groups[0]["params"])


@pytest.mark.parametrize("error, build", ERRORS)
def test_errors_match_torch(torch, error, build):
    messages = []
    for lib in (ng, torch):
        with pytest.raises(error) as info:
            build(lib.optim.lr_scheduler, _optimizer(lib))
        messages.append(str(info.value).replace("torch.optim", "numbagrad.optim"))
    assert messages[0] == messages[1]
