"""numbagrad.func against torch.func: gradients, vjps, jvps, Jacobians and Hessians of the same functions, their
nesting, per-sample gradients through vmap(grad), functional_call and ensembles, and torch's errors."""

import numpy as np
import pytest

import numbagrad
from numbagrad import func, nn


def _pair(torch, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal(s) for s in shapes]
    return [numbagrad.tensor(d) for d in data], [torch.tensor(d) for d in data]


def _close(a, b, rtol=1e-10):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, rtol)
        return
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k], rtol)
        return
    assert tuple(a.shape) == tuple(b.shape)
    assert not a.requires_grad
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=rtol, atol=1e-12)


def f_scalar(m, x, y):
    return (m.sin(x) * y).sum() + (x * x).sum() * y.sum()


def f_vector(m, x, y):
    return m.tanh(x * y) + x.exp()


@pytest.mark.torch
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_grad_and_grad_and_value_match_torch(argnums, torch):
    (a, b), (ta, tb) = _pair(torch, (3,), (3,))
    _close(func.grad(lambda x, y: f_scalar(numbagrad, x, y), argnums)(a, b),
           torch.func.grad(lambda x, y: f_scalar(torch, x, y), argnums)(ta, tb))  # fmt: skip
    ours = func.grad_and_value(lambda x, y: f_scalar(numbagrad, x, y), argnums)(a, b)
    theirs = torch.func.grad_and_value(lambda x, y: f_scalar(torch, x, y), argnums)(ta, tb)
    _close(ours, theirs)


@pytest.mark.torch
def test_grad_with_aux_and_pytree_inputs(torch):
    (a, b), (ta, tb) = _pair(torch, (2, 2), (2,))

    def f(m, p):
        loss = (p["w"] @ p["b"]).square().sum()
        return loss, loss.detach() * 2

    ours = func.grad(lambda p: f(numbagrad, p), has_aux=True)({"w": a, "b": b})
    theirs = torch.func.grad(lambda p: f(torch, p), has_aux=True)({"w": ta, "b": tb})
    _close(ours, theirs)


@pytest.mark.torch
def test_nested_grad_gives_second_derivatives(torch):
    (a,), (ta,) = _pair(torch, ())
    ours = func.grad(func.grad(lambda x: numbagrad.sin(x) * x**3))(a)
    theirs = torch.func.grad(torch.func.grad(lambda x: torch.sin(x) * x**3))(ta)
    _close(ours, theirs)


@pytest.mark.torch
def test_vjp_matches_torch_and_can_be_called_twice(torch):
    (a, b, c), (ta, tb, tc) = _pair(torch, (3,), (3,), (3,))
    out, fn = func.vjp(lambda x, y: f_vector(numbagrad, x, y), a, b)
    tout, tfn = torch.func.vjp(lambda x, y: f_vector(torch, x, y), ta, tb)
    _close(out, tout)
    _close(fn(c), tfn(tc))
    _close(fn(c * 2), tfn(tc * 2))


@pytest.mark.torch
def test_jvp_matches_torch(torch):
    (a, b, u, v), (ta, tb, tu, tv) = _pair(torch, (3,), (3,), (3,), (3,))
    ours = func.jvp(lambda x, y: f_vector(numbagrad, x, y), (a, b), (u, v))
    theirs = torch.func.jvp(lambda x, y: f_vector(torch, x, y), (ta, tb), (tu, tv))
    _close(ours, theirs)


@pytest.mark.torch
@pytest.mark.parametrize("mapped", [False, True], ids=["alone", "under-vmap"])
def test_jvp_of_grad_differentiates_the_gradient_along_the_tangent(torch, mapped):
    """Forward over reverse: the fresh input ``grad`` differentiates keeps the tangent ``jvp`` gave it."""
    (x, t), (tx, tt) = _pair(torch, (4, 3), (4, 3))

    def run(m, x, t):
        per_sample = lambda a, v: m.func.jvp(m.func.grad(lambda b: (b.sin() * b).sum()), (a,), (v,))  # noqa: E731
        return m.func.vmap(per_sample)(x, t) if mapped else per_sample(x, t)

    _close(run(numbagrad, x, t), run(torch, tx, tt))


@pytest.mark.torch
@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_jacobians_match_torch(transform, argnums, torch):
    (a, b), (ta, tb) = _pair(torch, (2, 3), (3,))
    ours = getattr(func, transform)(lambda x, y: f_vector(numbagrad, x, y), argnums)(a, b)
    theirs = getattr(torch.func, transform)(lambda x, y: f_vector(torch, x, y), argnums)(ta, tb)
    _close(ours, theirs)


@pytest.mark.torch
def test_hessian_matches_torch(torch):
    (a,), (ta,) = _pair(torch, (4,))
    _close(func.hessian(lambda x: (x.sin() * x.cos().sum()).sum())(a),
           torch.func.hessian(lambda x: (x.sin() * x.cos().sum()).sum())(ta))  # fmt: skip


@pytest.mark.torch
@pytest.mark.parametrize("in_dims, out_dims", [(0, 0), ((1, None), 0), ((0, 0), 1)])
def test_vmap_matches_torch(in_dims, out_dims, torch):
    (a, b), (ta, tb) = _pair(torch, (4, 3), (4, 3))
    if in_dims == (1, None):
        a, ta, b, tb = a.t().contiguous(), ta.t().contiguous(), b[0], tb[0]
    ours = func.vmap(lambda x, y: (x * y).sum() + x, in_dims, out_dims)(a, b)
    theirs = torch.func.vmap(lambda x, y: (x * y).sum() + x, in_dims, out_dims)(ta, tb)
    _close(ours, theirs)


def test_per_sample_gradients_by_vmap_of_grad_equal_a_loop_of_backwards():
    numbagrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = numbagrad.randn(5, 4), numbagrad.tensor([0, 1, 1, 0, 1])

    def loss(p, xi, yi):
        out = func.functional_call(model, p, (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(out, yi.unsqueeze(0))

    per_sample = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(5):
        model.zero_grad()
        nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        for name, p in model.named_parameters():
            np.testing.assert_allclose(per_sample[name][i].numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_vmap_randomness_modes():
    def draw(x):
        return x + numbagrad.rand(())

    x = numbagrad.zeros(3)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        func.vmap(draw)(x)
    same = func.vmap(draw, randomness="same")(x).numpy()
    assert same[0] == same[1] == same[2]
    different = func.vmap(draw, randomness="different")(x).numpy()
    assert len(set(different.tolist())) == 3


@pytest.mark.torch
def test_functional_call_swaps_weights_and_restores_them(torch):
    ours, theirs = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    original = ours.weight
    rng = np.random.default_rng(0)
    w, b, x = rng.standard_normal((2, 3)), rng.standard_normal(2), rng.standard_normal((4, 3))
    out = func.functional_call(ours, {"weight": numbagrad.tensor(w), "bias": numbagrad.tensor(b)},
                               (numbagrad.tensor(x),))  # fmt: skip
    tout = torch.func.functional_call(theirs, {"weight": torch.tensor(w), "bias": torch.tensor(b)}, (torch.tensor(x),))
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-12)
    assert ours.weight is original


def test_stack_module_state_and_an_ensemble_through_vmap():
    models = [nn.Linear(3, 2) for _ in range(4)]
    params, buffers = func.stack_module_state(models)
    assert tuple(params["weight"].shape) == (4, 2, 3) and params["weight"].requires_grad
    x = numbagrad.randn(5, 3)
    out = func.vmap(lambda p, b: func.functional_call(models[0], (p, b), (x,)))(params, buffers)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-6)


@pytest.mark.torch
def test_errors_match_torch(torch):
    cases = [
        lambda m, x: m.func.grad(lambda v: v * 2)(x),
        lambda m, x: m.func.grad(lambda v: v.sum(), has_aux=True)(x),
    ]
    for call in cases:
        with pytest.raises(RuntimeError) as theirs:
            call(torch, torch.ones(3))
        with pytest.raises(RuntimeError) as ours:
            call(numbagrad, numbagrad.ones(3))
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="Expected all tensors to have the same size in the mapped dimension"):
        func.vmap(lambda a, b: a + b)(numbagrad.ones(2), numbagrad.ones(3))


def test_top_level_vmap_is_funcs():
    assert numbagrad.vmap is func.vmap
