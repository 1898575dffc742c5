"""``optim.Muon``: torch's orthogonalized-momentum optimizer for 2-d parameters, compared with torch step by step,
and its Newton-Schulz iteration with torch's to the bit (bfloat16 products summed in float32, rounded once)."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.optim.muon import NS_COEFFICIENTS, orthogonalize


def _grads(steps: int, shapes: list) -> list:
    rng = np.random.default_rng(1)
    return [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]


def _run(lib, starts: list, grads: list, **options) -> list:
    """``len(grads)`` Muon steps from ``starts`` with the given gradients; the parameters after each step."""
    params = [lib.nn.Parameter(lib.tensor(w.copy())) for w in starts]
    opt = lib.optim.Muon(params, **options)
    after = []
    for step in grads:
        for p, g in zip(params, step):
            p.grad = lib.tensor(g)
        opt.step()
        after.append([p.detach().numpy().copy() for p in params])
    return after


OPTIONS = [
    {},
    {"lr": 0.02, "nesterov": False},
    {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.0, "adjust_lr_fn": "match_rms_adamw"},
    {"ns_steps": 3, "eps": 1e-5, "ns_coefficients": (2.0, -1.5, 0.5)},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults")
def test_steps_match_torch(options):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    shapes = [(6, 4), (3, 6), (8, 8)]
    starts = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = _grads(3, shapes)
    ours, theirs = _run(ng, starts, grads, **options), _run(torch, starts, grads, **options)
    for step_ours, step_theirs in zip(ours, theirs):
        for a, b in zip(step_ours, step_theirs):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (33, 17)])
def test_newton_schulz_matches_torch_bit_for_bit(shape):
    torch = pytest.importorskip("torch")
    from torch.optim._muon import _zeropower_via_newtonschulz

    g = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    ours = orthogonalize(ng.tensor(g), NS_COEFFICIENTS, 5, 1e-7)
    theirs = _zeropower_via_newtonschulz(torch.tensor(g), NS_COEFFICIENTS, 5, 1e-7)
    assert ours.dtype == ng.bfloat16
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


def test_orthogonalized_update_has_singular_values_near_one():
    g = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)
    s = np.linalg.svd(orthogonalize(ng.tensor(g), NS_COEFFICIENTS, 5, 1e-7).float().numpy(), compute_uv=False)
    assert s.min() > 0.5 and s.max() < 1.3  # (the quintic's fixed band, not exactly 1)


def test_step_without_grad_leaves_the_parameter():
    p = ng.nn.Parameter(ng.ones(2, 3))
    ng.optim.Muon([p]).step()
    np.testing.assert_array_equal(p.detach().numpy(), np.ones((2, 3)))


def test_state_holds_the_momentum_buffer():
    p = ng.nn.Parameter(ng.ones(2, 3))
    opt = ng.optim.Muon([p], momentum=0.5)
    p.grad = ng.full((2, 3), 2.0)
    opt.step()
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), np.full((2, 3), 1.0))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lr": -1.0}, "Learning rate should be >= 0 but is: -1.0"),
        ({"momentum": -0.1}, "momentum should be >= 0 but is: -0.1"),
        ({"weight_decay": -0.1}, "weight decay should be >= 0 but is: -0.1"),
        ({"adjust_lr_fn": "other"}, "Adjust learning rate function other is not supported"),
        ({"lr": ng.tensor([1e-3, 1e-3])}, "Tensor lr must be 1-element"),
    ],
)
def test_bad_options_raise_torchs_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ng.optim.Muon([ng.nn.Parameter(ng.ones(2, 2))], **kwargs)


def test_only_2d_parameters():
    with pytest.raises(ValueError, match=r"Muon only supports 2D parameters whereas we found a parameter with size: "):
        ng.optim.Muon([ng.nn.Parameter(ng.ones(3))])


def test_too_many_newton_schulz_steps():
    p = ng.nn.Parameter(ng.ones(2, 2))
    p.grad = ng.ones(2, 2)
    with pytest.raises(ValueError, match="Number of steps must be less than 100 for computational efficiency"):
        ng.optim.Muon([p], ns_steps=100).step()


def test_narrow_addmm_sums_in_float32_and_rounds_once():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    c, a, b = (rng.standard_normal(s).astype(np.float32) for s in ((5, 3), (5, 7), (7, 3)))
    for name in ("bfloat16", "float16"):
        ours = ng.addmm(*(ng.tensor(x).to(getattr(ng, name)) for x in (c, a, b)), beta=0.7, alpha=-1.3)
        theirs = torch.addmm(*(torch.tensor(x).to(getattr(torch, name)) for x in (c, a, b)), beta=0.7, alpha=-1.3)
        np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
