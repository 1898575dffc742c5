"""Fusions across op boundaries in ``numbagrad.compile``: a linear layer's bias joins the elementwise rows after it,
and a residual add joins the layer norm after it (``ResidualLayerNorm``). Each is taken only where nothing outside
can tell, and gives eager mode's values and gradients."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as F
from numbagrad.ops.nn_ops import ResidualLayerNorm


def _arrays(*shapes, dtype=np.float64, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _leaves(arrays):
    return [ng.tensor(a, requires_grad=True) for a in arrays]


def _residual_norm(a, v, c, w, b):
    return ResidualLayerNorm.apply(a, v, c, w, b, (4,), 4, 1e-5)


# --- the fused op -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_bias", [True, False])
def test_residual_layer_norm_gives_the_sum_and_its_norm_with_their_gradients(with_bias):
    arrays = _arrays((2, 3, 4), (2, 3, 4), (4,), (4,), (4,))
    grads = _arrays((2, 3, 4), (2, 3, 4), seed=1)
    fused, plain = _leaves(arrays), _leaves(arrays)
    s, y = _residual_norm(*fused[:2], fused[2] if with_bias else None, *fused[3:])
    a, v, c, w, b = plain
    s2 = a + (v + c if with_bias else v)
    y2 = F.layer_norm(s2, (4,), w, b)
    for one, two in ((s, y), (s2, y2)):
        ((one * ng.tensor(grads[0])).sum() + (two * ng.tensor(grads[1])).sum()).backward()
    np.testing.assert_allclose(s.detach().numpy(), s2.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(y.detach().numpy(), y2.detach().numpy(), rtol=1e-12, atol=1e-14)
    for got, expected in zip(fused, plain, strict=True):
        if got is fused[2] and not with_bias:
            assert got.grad is None
        else:
            np.testing.assert_allclose(got.grad.numpy(), expected.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_residual_layer_norm_passes_gradcheck_and_gradgradcheck():
    inputs = _leaves(_arrays((2, 3, 4), (2, 3, 4), (4,), (4,), (4,)))
    assert gradcheck(_residual_norm, inputs)
    assert gradgradcheck(_residual_norm, inputs)


def test_residual_layer_norm_with_only_the_sum_used_passes_its_gradient_through():
    a, v, c, w, b = _leaves(_arrays((2, 3, 4), (2, 3, 4), (4,), (4,), (4,)))
    s, _ = _residual_norm(a, v, c, w, b)
    (s * 2).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3, 4), 2.0))
    np.testing.assert_array_equal(v.grad.numpy(), np.full((2, 3, 4), 2.0))
    np.testing.assert_array_equal(c.grad.numpy(), np.full(4, 12.0))
    assert w.grad is None and b.grad is None


# --- where compile uses them --------------------------------------------------------------------------------------
class _Block(nn.Module):
    """A pre-norm transformer block's residual half and MLP: norm, linear, GELU, linear, residual add, norm."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.fc, self.proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.proj(F.gelu(self.fc(self.ln_1(x))))
        return self.ln_2(x)


def _fused_classes(compiled) -> list:
    """The op classes of the compiled function's plan, in order."""
    (plan,) = compiled._compiled.plans
    return [getattr(step, "cls", None) for step in plan.trace.steps]


def _train_both(make, x, **kwargs):
    """Output and gradients (of the input and every parameter) eagerly and compiled, over two calls."""
    results = []
    for compiled in (False, True):
        ng.manual_seed(0)
        model = make()
        run = ng.compile(model, fullgraph=True, **kwargs) if compiled else model
        for _ in range(2):
            model.zero_grad()
            xi = x.detach().requires_grad_()
            out = run(xi)
            weights = ng.linspace(-1.0, 1.0, out.numel()).reshape(out.shape)  # (a norm's sum of squares is constant)
            (out * weights).sum().backward()
        results.append((out.detach().numpy(), xi.grad.numpy(), [p.grad.numpy() for p in model.parameters()], run))
    return results


def test_a_compiled_block_fuses_the_bias_into_gelu_and_the_residual_add_into_the_norm():
    (x,) = [ng.tensor(a) for a in _arrays((3, 5, 8), dtype=np.float32)]
    (out, gx, grads, _), (cout, cgx, cgrads, compiled) = _train_both(_Block, x)
    classes = _fused_classes(compiled)
    assert ResidualLayerNorm in classes
    assert F._Linear not in classes  # (both linears: the first's bias joins GELU, the second's the residual sum)
    np.testing.assert_allclose(cout, out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cgx, gx, rtol=1e-5, atol=1e-6)
    for got, expected in zip(cgrads, grads, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_a_compiled_linear_then_relu_gives_eager_gradients_for_the_bias():
    (x,) = [ng.tensor(a) for a in _arrays((6, 5), dtype=np.float32)]
    make = lambda: nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3), nn.Tanh())  # noqa: E731
    (out, gx, grads, _), (cout, cgx, cgrads, compiled) = _train_both(make, x)
    assert F._Linear not in _fused_classes(compiled)
    np.testing.assert_allclose(cout, out, rtol=1e-6)
    np.testing.assert_allclose(cgx, gx, rtol=1e-5, atol=1e-7)
    for got, expected in zip(cgrads, grads, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_a_linear_output_read_elsewhere_keeps_its_bias():
    linear = nn.Linear(4, 4)

    def f(x):
        y = linear(x)
        return y.relu() + y.sum()

    compiled = ng.compile(f, fullgraph=True)
    (x,) = [ng.tensor(a) for a in _arrays((3, 4), dtype=np.float32)]
    np.testing.assert_allclose(compiled(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(compiled(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-6)
    (plan,) = compiled.plans
    assert F._Linear in [getattr(step, "cls", None) for step in plan.trace.steps]


def test_a_residual_sum_with_a_hook_is_not_fused_and_the_hook_sees_its_whole_gradient():
    ln, proj = nn.LayerNorm(4), nn.Linear(4, 4)
    seen = []

    def f(x):
        s = x + proj(x)
        y = ln(s)
        s.register_hook(lambda g: seen.append(g.numpy()))
        return y

    compiled = ng.compile(f, fullgraph=True)
    (x,) = [ng.tensor(a) for a in _arrays((3, 4), dtype=np.float32)]
    weights = ng.linspace(-1.0, 1.0, 12).reshape(3, 4)
    for run in (f, compiled, compiled):
        (run(x) * weights).sum().backward()
    eager_grad, *compiled_grads = seen
    for got in compiled_grads:
        np.testing.assert_allclose(got, eager_grad, rtol=1e-5, atol=1e-7)
    (plan,) = compiled.plans
    assert ResidualLayerNorm not in [getattr(step, "cls", None) for step in plan.trace.steps]


def test_a_residual_sum_returned_by_the_function_is_not_fused():
    ln = nn.LayerNorm(4)

    def f(x, r):
        s = x + r
        return s, ln(s)

    compiled = ng.compile(f)
    x, r = [ng.tensor(a, requires_grad=True) for a in _arrays((3, 4), (3, 4), dtype=np.float32)]
    for _ in range(2):
        s, y = compiled(x, r)
    (plan,) = compiled.plans
    assert ResidualLayerNorm not in [getattr(step, "cls", None) for step in plan.trace.steps]


def test_a_compiled_block_under_no_grad_fuses_and_matches_eager():
    block = _Block()
    (x,) = [ng.tensor(a) for a in _arrays((2, 3, 8), dtype=np.float32)]
    compiled = ng.compile(block)
    with ng.no_grad():
        expected = block(x).numpy()
        for _ in range(2):
            got = compiled(x)
    assert got.grad_fn is None
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert ResidualLayerNorm in _fused_classes(compiled)


def test_a_residual_sum_of_two_dtypes_is_not_fused_and_keeps_the_wider_values():
    ln = nn.LayerNorm(4).double()

    def f(x, r):
        return ln(x + r)

    compiled = ng.compile(f, fullgraph=True)
    x = ng.tensor(_arrays((3, 4), dtype=np.float32)[0])
    r = ng.tensor(_arrays((3, 4), seed=1)[0])  # float64: the sum is float64
    expected = f(x, r).detach().numpy()
    for _ in range(2):
        got = compiled(x, r)
    assert got.dtype == ng.float64
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-12)
    (plan,) = compiled.plans
    assert ResidualLayerNorm not in [getattr(step, "cls", None) for step in plan.trace.steps]
