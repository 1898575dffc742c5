"""optim: an update's scalars are made once per group's numbers and reused; a step must still follow every change of
those numbers (a new learning rate, another dtype, a parameter whose step count lags), as torch's steps do."""

import numpy as np

import numbagrad
from numbagrad import nn, optim


def _run(torch, make, dtypes, steps):
    """Run ``make(lib, params)``'s optimizer over ``steps`` (a list of per-parameter gradients, None for no
    gradient, and an optional new learning rate) in both libraries; the parameters afterwards."""
    rng = np.random.default_rng(0)
    start = [rng.standard_normal(3).astype(d) for d in dtypes]
    ours = [nn.Parameter(numbagrad.tensor(v)) for v in start]
    theirs = [torch.nn.Parameter(torch.tensor(v)) for v in start]
    opt_ours, opt_theirs = make(optim, ours), make(torch.optim, theirs)
    for grads, lr in steps:
        for group in (opt_ours.param_groups[0], opt_theirs.param_groups[0]):
            if lr is not None:
                group["lr"] = lr
        for p, q, g in zip(ours, theirs, grads):
            p.grad = None if g is None else numbagrad.tensor(np.array(g, p.detach().numpy().dtype))
            q.grad = None if g is None else torch.tensor(np.array(g, q.detach().numpy().dtype))
        opt_ours.step()
        opt_theirs.step()
    return [p.detach().numpy() for p in ours], [q.detach().numpy() for q in theirs]


def _assert_same(ours, theirs) -> None:
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=0)


def test_sgd_follows_a_changing_learning_rate(torch):
    g = [0.5, -1.0, 2.0]
    steps = [([g], None), ([g], 0.05), ([g], 0.2), ([g], 0.05)]
    _assert_same(*_run(torch, lambda o, ps: o.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01), ["float32"], steps))


def test_sgd_scalars_per_dtype_in_one_group(torch):
    g = [0.1, 0.2, 0.3]
    steps = [([g, g], None), ([g, g], None)]
    ours, theirs = _run(torch, lambda o, ps: o.SGD(ps, lr=0.1 + 1e-9, momentum=0.5), ["float64", "float32"], steps)
    _assert_same(ours, theirs)
    assert ours[0].dtype == np.float64 and ours[1].dtype == np.float32


def test_sgd_negative_zero_learning_rate_keeps_torch_sign_of_zero(torch):
    """``lr=-0.0`` equals ``0.0`` (and hashes alike), but a zero parameter takes its sign: torch's ``-0.0 + 0.0``."""
    ours = [nn.Parameter(numbagrad.tensor([-0.0], dtype=numbagrad.float32))]
    theirs = [torch.nn.Parameter(torch.tensor([-0.0]))]
    opt_ours, opt_theirs = optim.SGD(ours, lr=0.0), torch.optim.SGD(theirs, lr=0.0)
    for lr in (0.0, -0.0, 0.0):
        for opt, ps, lib in ((opt_ours, ours, numbagrad), (opt_theirs, theirs, torch)):
            opt.param_groups[0]["lr"] = lr
            ps[0].grad = lib.tensor([1.0])
            opt.step()
        assert np.signbit(ours[0].detach().numpy()[0]) == np.signbit(theirs[0].detach().numpy()[0])


def test_adam_parameters_at_different_step_counts(torch):
    """The second parameter first has a gradient at step 2: its bias corrections lag the first one's."""
    g = [0.3, -0.2, 0.1]
    steps = [([g, None], None), ([g, g], None), ([g, g], 1e-2), ([g, g], None)]
    _assert_same(*_run(torch, lambda o, ps: o.Adam(ps, lr=1e-3), ["float32", "float32"], steps))


def test_adamw_follows_a_changing_learning_rate_and_dtypes(torch):
    g = [1.0, -0.5, 0.25]
    steps = [([g, g], None), ([g, g], 3e-3), ([g, g], 3e-4)]
    make = lambda o, ps: o.AdamW(ps, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)  # noqa: E731
    _assert_same(*_run(torch, make, ["float32", "float64"], steps))


def test_step_count_rounds_in_its_dtype_as_torch(torch):
    """The step count is a float32 tensor: past 2**24 adding one rounds back (torch's ``step_t += 1``), and the
    bias corrections read the rounded count."""
    ours = [nn.Parameter(numbagrad.tensor([1.0, -2.0]))]
    theirs = [torch.nn.Parameter(torch.tensor([1.0, -2.0]))]
    opt_ours, opt_theirs = optim.Adam(ours, lr=0.1), torch.optim.Adam(theirs, lr=0.1)
    for opt, ps, lib in ((opt_ours, ours, numbagrad), (opt_theirs, theirs, torch)):
        ps[0].grad = lib.tensor([0.5, 0.25])
        opt.step()
        opt.state[ps[0]]["step"].fill_(2.0**24 - 1)
        for _ in range(2):
            opt.step()
    assert opt_ours.state[ours[0]]["step"].dtype == numbagrad.float32
    assert float(opt_ours.state[ours[0]]["step"]) == float(opt_theirs.state[theirs[0]]["step"]) == 2.0**24
    np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(), rtol=1e-6)
