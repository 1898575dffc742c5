"""``optim.lr_scheduler``: every scheduler follows torch 2.13's learning-rate trajectory step for step, resumes from
``state_dict`` onto the same trajectory, and keeps torch's warnings and errors.

Trajectories are compared with torch (skipped without it) over 50 steps, in several configurations each, with the
optimizer stepped before the scheduler as torch asks. The same float arithmetic in the same order gives the same
bits, so the comparison is exact. Hand-computed values check the schedules without torch.
"""

from __future__ import annotations

import copy
import math
import warnings

import pytest

import numbagrad as ng
from numbagrad.optim import lr_scheduler

STEPS = 50


def _optimizer(lib, kind: str = "sgd", lrs=(0.1,)):
    """An optimizer over one small parameter per group, with one learning rate per group."""
    groups = [{"params": [lib.nn.Parameter(lib.zeros(2))], "lr": lr} for lr in lrs]
    if kind == "sgd":
        return lib.optim.SGD(groups, lr=lrs[0], momentum=0.9)
    return lib.optim.Adam(groups, lr=lrs[0])


def _trajectory(optimizer, scheduler, steps: int = STEPS, metrics=None) -> list[list[float]]:
    """``get_last_lr()`` after construction and after each of ``steps`` (optimizer step, scheduler step) pairs."""
    out = [list(scheduler.get_last_lr())]
    for i in range(steps):
        optimizer.step()
        if metrics is None:
            scheduler.step()
        else:
            scheduler.step(metrics[i])
        out.append(list(scheduler.get_last_lr()))
    return out


def _plateau_metrics() -> list[float]:
    """A loss that falls, stalls with small wiggles, falls a little, then rises: exercises patience and thresholds."""
    values = [1.0 / (i + 1) for i in range(10)]
    values += [0.1 + 1e-6 * (i % 3) for i in range(15)]
    values += [0.0999 - 0.00001 * i for i in range(10)]
    values += [0.1 + 0.01 * i for i in range(15)]
    return values


# (id, optimizer kind, group lrs, builder(lib, optimizer) -> scheduler)
CONFIGS = [
    ("lambda-linear", "sgd", (0.1,), lambda m, o: m.LambdaLR(o, lambda e: 1.0 / (e + 1))),
    ("lambda-per-group", "sgd", (0.1, 0.01), lambda m, o: m.LambdaLR(o, [lambda e: 0.95**e, lambda e: e // 7 + 1])),
    ("step-default", "sgd", (0.1,), lambda m, o: m.StepLR(o, step_size=7)),
    ("step-gamma", "adam", (0.05, 0.2), lambda m, o: m.StepLR(o, step_size=3, gamma=0.7)),
    ("multistep", "sgd", (0.1,), lambda m, o: m.MultiStepLR(o, milestones=[5, 12, 30], gamma=0.5)),
    ("multistep-repeated", "sgd", (0.1, 0.3), lambda m, o: m.MultiStepLR(o, milestones=[10, 10, 25], gamma=0.3)),
    ("exponential", "sgd", (0.1,), lambda m, o: m.ExponentialLR(o, gamma=0.9)),
    ("exponential-groups", "adam", (0.01, 1.0), lambda m, o: m.ExponentialLR(o, gamma=0.97)),
    ("cosine", "sgd", (0.1,), lambda m, o: m.CosineAnnealingLR(o, T_max=50)),
    ("cosine-short-eta-min", "sgd", (0.1, 0.02), lambda m, o: m.CosineAnnealingLR(o, T_max=12, eta_min=0.001)),
    ("cosine-wraps", "adam", (0.1,), lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.01)),
    ("linear-default", "sgd", (0.1,), lambda m, o: m.LinearLR(o)),
    ("linear-decay", "sgd", (0.1, 0.5), lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=30)),
    ("linear-warmup", "adam", (0.1,), lambda m, o: m.LinearLR(o, start_factor=0.01, total_iters=60)),
    ("onecycle-cos-sgd", "sgd", (0.1,), lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=50)),
    (
        "onecycle-linear-adam",
        "adam",
        (0.1, 0.1),
        lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.05], epochs=5, steps_per_epoch=10, anneal_strategy="linear"),
    ),
    (
        "onecycle-three-phase",
        "sgd",
        (0.1,),
        lambda m, o: m.OneCycleLR(o, max_lr=0.3, total_steps=60, pct_start=0.25, three_phase=True, div_factor=10.0),
    ),
    (
        "onecycle-no-momentum",
        "adam",
        (0.1,),
        lambda m, o: m.OneCycleLR(o, max_lr=0.01, total_steps=55, cycle_momentum=False, final_div_factor=100.0),
    ),
    (
        "sequential-warmup-cosine",
        "sgd",
        (0.1,),
        lambda m, o: m.SequentialLR(
            o, [m.LinearLR(o, start_factor=0.1, total_iters=10), m.CosineAnnealingLR(o, T_max=40)], milestones=[10]
        ),
    ),
    (
        "sequential-three",
        "adam",
        (0.1, 0.02),
        lambda m, o: m.SequentialLR(
            o,
            [m.LambdaLR(o, lambda e: 0.5), m.ExponentialLR(o, gamma=0.9), m.StepLR(o, step_size=4, gamma=0.5)],
            milestones=[5, 20],
        ),
    ),
]

PLATEAU_CONFIGS = [
    ("min-rel", {}),
    ("min-abs-patience", {"threshold_mode": "abs", "threshold": 1e-3, "patience": 2}),
    ("min-cooldown-minlr", {"patience": 1, "cooldown": 3, "factor": 0.5, "min_lr": 0.01}),
    ("max-rel", {"mode": "max", "patience": 3, "factor": 0.3}),
    (
        "max-abs-groups",
        {"mode": "max", "threshold_mode": "abs", "threshold": 0.005, "patience": 0, "min_lr": [0.0, 0.05]},
    ),
    ("min-big-eps", {"patience": 0, "factor": 0.9, "eps": 0.005}),
]


def _torch():
    return pytest.importorskip("torch")


def _run(lib, kind, lrs, build, steps: int = STEPS):
    optimizer = _optimizer(lib, kind, lrs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stepping in the right order raises no warning
        scheduler = build(lib.optim.lr_scheduler, optimizer)
        return optimizer, _trajectory(optimizer, scheduler, steps)


@pytest.mark.torch
@pytest.mark.parametrize("name,kind,lrs,build", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_trajectory_matches_torch(name, kind, lrs, build):
    torch = _torch()
    _, ours = _run(ng, kind, lrs, build)
    _, theirs = _run(torch, kind, lrs, build)
    assert ours == theirs


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("three_phase", [False, True])
def test_onecycle_cycles_momentum_like_torch(kind, three_phase):
    torch = _torch()
    key = "momentum" if kind == "sgd" else "betas"
    runs = []
    for lib in (ng, torch):
        optimizer = _optimizer(lib, kind, (0.1, 0.1))
        scheduler = lib.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=[0.4, 0.2], total_steps=50, base_momentum=[0.8, 0.7], max_momentum=0.9,
            three_phase=three_phase,
        )  # fmt: skip
        seen = []
        for _ in range(49):
            optimizer.step()
            scheduler.step()
            seen.append([g[key] for g in optimizer.param_groups])
        runs.append(seen)
    assert runs[0] == runs[1]


@pytest.mark.torch
@pytest.mark.parametrize("name,kwargs", PLATEAU_CONFIGS, ids=[c[0] for c in PLATEAU_CONFIGS])
def test_reduce_lr_on_plateau_matches_torch(name, kwargs):
    torch = _torch()
    metrics = _plateau_metrics()
    runs = []
    for lib in (ng, torch):
        optimizer = _optimizer(lib, "sgd", (0.1, 0.2))
        scheduler = lib.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **kwargs)
        runs.append(_trajectory(optimizer, scheduler, STEPS, metrics))
    assert runs[0] == runs[1]
    assert runs[0][-1] != runs[0][0]  # the configuration did reduce


@pytest.mark.torch
def test_chained_schedulers_compose_like_torch():
    torch = _torch()
    runs = []
    for lib in (ng, torch):
        optimizer = _optimizer(lib, "sgd", (0.1, 0.3))
        m = lib.optim.lr_scheduler
        schedulers = [m.StepLR(optimizer, step_size=5, gamma=0.5), m.ExponentialLR(optimizer, gamma=0.95)]
        lrs = []
        for _ in range(STEPS):
            optimizer.step()
            for s in schedulers:
                s.step()
            lrs.append([g["lr"] for g in optimizer.param_groups])
        runs.append(lrs)
    assert runs[0] == runs[1]


@pytest.mark.torch
@pytest.mark.parametrize(
    "build",
    [
        lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
        lambda m, o: m.MultiStepLR(o, milestones=[3, 9], gamma=0.2),
        lambda m, o: m.ExponentialLR(o, gamma=0.9),
        lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.01),
        lambda m, o: m.LinearLR(o, start_factor=0.2, total_iters=8),
    ],
    ids=["step", "multistep", "exponential", "cosine", "linear"],
)
def test_step_with_epoch_uses_the_closed_form_and_warns_like_torch(build):
    torch = _torch()
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


@pytest.mark.torch
@pytest.mark.parametrize(
    "build",
    [
        lambda m, o, e: m.StepLR(o, step_size=4, gamma=0.5, last_epoch=e),
        lambda m, o, e: m.ExponentialLR(o, gamma=0.9, last_epoch=e),
        lambda m, o, e: m.CosineAnnealingLR(o, T_max=20, last_epoch=e),
        lambda m, o, e: m.LinearLR(o, start_factor=0.5, total_iters=20, last_epoch=e),
        lambda m, o, e: m.OneCycleLR(o, max_lr=0.5, total_steps=60, last_epoch=e),
    ],
    ids=["step", "exponential", "cosine", "linear", "onecycle"],
)
def test_constructing_with_last_epoch_resumes_like_torch(build):
    """The constructor's ``last_epoch`` (with ``initial_lr`` already in the groups) continues as torch does."""
    torch = _torch()
    runs = []
    for lib in (ng, torch):
        optimizer = _optimizer(lib, "sgd", (0.1,))
        build(lib.optim.lr_scheduler, optimizer, -1)  # puts initial_lr (and OneCycle's keys) in the groups
        optimizer.param_groups[0]["lr"] = 0.07
        scheduler = build(lib.optim.lr_scheduler, optimizer, 9)
        runs.append(_trajectory(optimizer, scheduler, 30))
    assert runs[0] == runs[1]


# --- resuming from state_dict (no torch needed) ----------------------------------------------------------------------


@pytest.mark.parametrize("name,kind,lrs,build", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_state_dict_resumes_the_same_trajectory(name, kind, lrs, build):
    steps = 49
    _, whole = _run(ng, kind, lrs, build, steps)

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


def test_reduce_lr_on_plateau_resumes_from_state_dict():
    metrics = _plateau_metrics()
    kwargs = {"patience": 1, "cooldown": 2, "factor": 0.5, "mode": "min", "threshold_mode": "abs"}
    optimizer = _optimizer(ng, "sgd", (0.1,))
    whole = _trajectory(optimizer, ng.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **kwargs), STEPS, metrics)

    optimizer = _optimizer(ng, "sgd", (0.1,))
    scheduler = ng.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **kwargs)
    first = _trajectory(optimizer, scheduler, 23, metrics)
    saved_sched, saved_opt = copy.deepcopy(scheduler.state_dict()), copy.deepcopy(optimizer.state_dict())
    optimizer = _optimizer(ng, "sgd", (0.1,))
    scheduler = ng.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max")
    optimizer.load_state_dict(saved_opt)
    scheduler.load_state_dict(saved_sched)
    rest = _trajectory(optimizer, scheduler, STEPS - 23, metrics[23:])
    assert first + rest[1:] == whole


def test_state_dict_leaves_out_the_optimizer_and_plain_lambdas():
    optimizer = _optimizer(ng)

    class Halve:
        def __init__(self):
            self.calls = 0

        def __call__(self, epoch):
            self.calls += 1
            return 0.5**epoch

    halve = Halve()
    scheduler = ng.optim.lr_scheduler.LambdaLR(optimizer, [halve])
    state = scheduler.state_dict()
    assert "optimizer" not in state
    assert state["lr_lambdas"] == [{"calls": 1}]
    plain = ng.optim.lr_scheduler.LambdaLR(_optimizer(ng), lambda e: 1.0).state_dict()
    assert plain["lr_lambdas"] == [None]


# --- values by hand ----------------------------------------------------------------------------------------------


def test_step_lr_values_by_hand():
    optimizer = _optimizer(ng, lrs=(1.0,))
    lrs = [lr for (lr,) in _trajectory(optimizer, ng.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5), 9)]
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125]
    assert optimizer.param_groups[0]["lr"] == 0.125
    assert optimizer.param_groups[0]["initial_lr"] == 1.0


def test_cosine_annealing_follows_the_closed_form():
    optimizer = _optimizer(ng, lrs=(0.1,))
    lrs = _trajectory(optimizer, ng.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10, eta_min=0.01), 10)
    expected = [0.01 + 0.09 * (1 + math.cos(math.pi * t / 10)) / 2 for t in range(11)]
    assert [lr for (lr,) in lrs] == pytest.approx(expected, rel=1e-12)


def test_linear_lr_warms_up_linearly():
    optimizer = _optimizer(ng, lrs=(0.2,))
    lrs = _trajectory(optimizer, ng.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.25, total_iters=3), 5)
    assert [lr for (lr,) in lrs] == pytest.approx([0.05, 0.1, 0.15, 0.2, 0.2, 0.2], rel=1e-12)


def test_onecycle_peaks_at_max_lr_and_ends_at_min_lr():
    optimizer = _optimizer(ng, "adam", lrs=(0.1,))
    scheduler = ng.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1.0, total_steps=11, pct_start=0.5,
                                                 anneal_strategy="linear")  # fmt: skip
    lrs = [lr for (lr,) in _trajectory(optimizer, scheduler, 10)]
    # warm-up over steps 0..4.5 from 1/25 to 1, then down to min_lr = 1/25/1e4 over steps 4.5..10
    assert lrs[0] == pytest.approx(0.04)
    assert lrs[4] == pytest.approx(0.04 + 0.96 * 4 / 4.5)
    assert lrs[5] == pytest.approx(1.0 - (1.0 - 4e-6) * 0.5 / 5.5)
    assert lrs[-1] == pytest.approx(0.04 / 1e4)
    assert optimizer.param_groups[0]["betas"][0] == pytest.approx(0.95)
    scheduler.step()  # last_epoch == total_steps is still allowed, as in torch
    with pytest.raises(ValueError, match="Tried to step 12 times. The specified number of total steps is 11"):
        scheduler.step()


def test_reduce_lr_on_plateau_waits_for_patience_then_cools_down():
    optimizer = _optimizer(ng, lrs=(1.0,))
    scheduler = ng.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=2, cooldown=1, factor=0.5, min_lr=0.3)
    seen = []
    for loss in [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]:
        scheduler.step(ng.tensor(loss))
        seen.append(scheduler.get_last_lr()[0])
    # epoch 1 sets best; bad epochs 2, 3, 4 -> reduce at 4; cooldown swallows 5; bad 6, 7, 8 -> reduce at 8 (floor)
    assert seen == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.3, 0.3]


def test_sequential_lr_switches_at_the_milestone():
    optimizer = _optimizer(ng, lrs=(1.0,))
    m = ng.optim.lr_scheduler
    scheduler = m.SequentialLR(optimizer, [m.LambdaLR(optimizer, lambda e: 0.1), m.ExponentialLR(optimizer, 0.5)],
                               milestones=[3])  # fmt: skip
    assert [lr for (lr,) in _trajectory(optimizer, scheduler, 6)] == [0.1, 0.1, 0.1, 1.0, 0.5, 0.25, 0.125]


# --- warnings and errors -----------------------------------------------------------------------------------------


def test_stepping_the_scheduler_before_the_optimizer_warns():
    optimizer = _optimizer(ng)
    scheduler = ng.optim.lr_scheduler.StepLR(optimizer, step_size=2)
    with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        scheduler.step()


def test_replacing_optimizer_step_after_construction_warns():
    optimizer = _optimizer(ng)
    scheduler = ng.optim.lr_scheduler.StepLR(optimizer, step_size=2)
    optimizer.step = lambda closure=None: None
    with pytest.warns(UserWarning, match=r"Seems like `optimizer.step\(\)` has been overridden"):
        scheduler.step()


def test_optimizer_step_is_wrapped_once_and_still_steps():
    p = ng.nn.Parameter(ng.tensor([1.0]))
    optimizer = ng.optim.SGD([p], lr=0.5)
    ng.optim.lr_scheduler.StepLR(optimizer, step_size=2)
    wrapped = optimizer.step
    ng.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)
    assert optimizer.step is wrapped
    p.grad = ng.tensor([2.0])
    optimizer.step()
    assert p.tolist() == [0.0]
    assert optimizer._opt_called


def test_calling_get_lr_outside_step_warns():
    scheduler = ng.optim.lr_scheduler.StepLR(_optimizer(ng), step_size=2)
    with pytest.warns(UserWarning, match=r"please use `get_last_lr\(\)`"):
        scheduler.get_lr()


def test_errors_match_torch():
    m = ng.optim.lr_scheduler
    with pytest.raises(TypeError, match="^list is not an Optimizer$"):
        m.StepLR([], step_size=1)
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\] when resuming"):
        m.StepLR(_optimizer(ng), step_size=1, last_epoch=3)
    with pytest.raises(ValueError, match="^Expected 2 lr_lambdas, but got 1$"):
        m.LambdaLR(_optimizer(ng, lrs=(0.1, 0.2)), [lambda e: 1.0])
    with pytest.raises(ValueError, match="Starting multiplicative factor expected to be greater than 0"):
        m.LinearLR(_optimizer(ng), start_factor=0)
    with pytest.raises(ValueError, match="^Factor should be < 1.0.$"):
        m.ReduceLROnPlateau(_optimizer(ng), factor=1.0)
    with pytest.raises(ValueError, match="^mode avg is unknown!$"):
        m.ReduceLROnPlateau(_optimizer(ng), mode="avg")
    with pytest.raises(ValueError, match="^threshold mode x is unknown!$"):
        m.ReduceLROnPlateau(_optimizer(ng), threshold_mode="x")
    with pytest.raises(ValueError, match="^expected 1 min_lrs, got 2$"):
        m.ReduceLROnPlateau(_optimizer(ng), min_lr=[0.0, 0.1])
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        m.OneCycleLR(_optimizer(ng), max_lr=0.1)
    with pytest.raises(ValueError, match="^Expected float between 0 and 1 pct_start, but got 1$"):
        m.OneCycleLR(_optimizer(ng), max_lr=0.1, total_steps=10, pct_start=1)
    with pytest.raises(ValueError, match="max_lr must have the same length as optimizer.param_groups"):
        m.OneCycleLR(_optimizer(ng), max_lr=[0.1, 0.2], total_steps=10)


def test_onecycle_needs_momentum_to_cycle_it():
    class Plain(ng.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

    opt = Plain([ng.nn.Parameter(ng.zeros(1))])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1 with `cycle_momentum` option"):
        ng.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    ng.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10, cycle_momentum=False)


def test_sequential_lr_errors():
    m = ng.optim.lr_scheduler
    a, b = _optimizer(ng), _optimizer(ng)
    with pytest.raises(ValueError, match="SequentialLR expects at least one scheduler, but got no scheduler."):
        m.SequentialLR(a, [], milestones=[])
    with pytest.raises(ValueError, match="SequentialLR does not support `ReduceLROnPlateau`"):
        m.SequentialLR(a, [m.ReduceLROnPlateau(a)], milestones=[])
    with pytest.raises(ValueError, match="SequentialLR expects all schedulers to belong to the same optimizer"):
        m.SequentialLR(a, [m.StepLR(b, 2)], milestones=[])
    with pytest.raises(ValueError, match="expects number of schedulers provided to be one more than the number"):
        m.SequentialLR(a, [m.StepLR(a, 2), m.StepLR(a, 3)], milestones=[])


def test_the_old_base_class_name_still_works():
    class Halving(lr_scheduler._LRScheduler):
        def get_lr(self):
            return [base * 0.5**self.last_epoch for base in self.base_lrs]

    optimizer = _optimizer(ng, lrs=(1.0,))
    assert [lr for (lr,) in _trajectory(optimizer, Halving(optimizer), 3)] == [1.0, 0.5, 0.25, 0.125]
    assert issubclass(lr_scheduler._LRScheduler, lr_scheduler.LRScheduler)
