"""numbagrad.elementwise: a differentiable op from scalar functions, checked against finite differences."""

import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import codegen


def swish_forward(x):
    return x / (1 + math.exp(-x))


def swish_grad(g, out, x):
    return g * (out + (1 - out) / (1 + math.exp(-x)))


swish = ng.elementwise(swish_forward, grads=[swish_grad])


@ng.elementwise(grads=[lambda g, out, a, b: g * b * math.cos(a * b), lambda g, out, a, b: g * a * math.cos(a * b)])
def sin_prod(a, b):
    return math.sin(a * b)


def central_difference(fn, values, i, h=1e-6):
    up, down = list(values), list(values)
    up[i] += h
    down[i] -= h
    return (fn(*up) - fn(*down)) / (2 * h)


def test_forward_matches_the_scalar_function():
    x = np.array([-2.0, -0.5, 0.0, 1.5])
    got = swish(ng.tensor(x))
    np.testing.assert_allclose(got.numpy(), [swish_forward(v) for v in x], rtol=1e-12)


def test_unary_gradient_matches_finite_differences():
    values = [-2.0, -0.5, 0.3, 1.5]
    x = ng.tensor(values, dtype=ng.float64, requires_grad=True)
    swish(x).sum().backward()
    expected = [central_difference(swish_forward, [v], 0) for v in values]
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_binary_gradients_broadcast_and_match_finite_differences():
    a = ng.tensor([[0.5], [-1.0]], dtype=ng.float64, requires_grad=True)  # (2, 1)
    b = ng.tensor([0.25, 2.0, -0.75], dtype=ng.float64, requires_grad=True)  # (3,)
    out = sin_prod(a, b)
    assert out.shape == (2, 3)
    out.sum().backward()
    fn = sin_prod.__wrapped__
    av, bv = a.detach().numpy()[:, 0], b.detach().numpy()
    expected_a = [sum(central_difference(fn, [av[i], bv[j]], 0) for j in range(3)) for i in range(2)]
    expected_b = [sum(central_difference(fn, [av[i], bv[j]], 1) for i in range(2)) for j in range(3)]
    np.testing.assert_allclose(a.grad.numpy()[:, 0], expected_a, rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), expected_b, rtol=1e-6)


@pytest.mark.parametrize("dtype", [ng.float32, ng.float64])
def test_runs_in_float32_and_float64(dtype):
    x = ng.tensor([0.5, -1.0], dtype=dtype, requires_grad=True)
    y = swish(x)
    y.sum().backward()
    assert y.dtype is dtype and x.grad.dtype is dtype
    np.testing.assert_allclose(x.grad.numpy(), [swish_grad(1.0, swish_forward(v), v) for v in (0.5, -1.0)], rtol=1e-6)


def test_integer_inputs_promote_to_default_float():
    assert swish(ng.tensor([0, 1])).dtype is ng.float32


def test_python_scalar_operand_broadcasts():
    out = sin_prod(ng.tensor([1.0, 2.0], dtype=ng.float64), 0.5)
    np.testing.assert_allclose(out.numpy(), np.sin(np.array([0.5, 1.0])))


def test_node_is_named_after_the_function():
    y = swish(ng.tensor([1.0], requires_grad=True))
    assert type(y.grad_fn).__name__ == "Swish_forwardBackward"


def test_double_backward_matches_finite_differences_of_the_gradient():
    values = [-1.0, 0.5, 2.0]
    x = ng.tensor(values, dtype=ng.float64, requires_grad=True)
    (g,) = ng.autograd.grad(swish(x).sum(), x, create_graph=True)
    g.sum().backward()
    expected = [central_difference(lambda v: swish_grad(1.0, swish_forward(v), v), [v], 0) for v in values]
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


def test_double_backward_through_unsupported_math_raises_clearly():
    def erf_like(x):
        return math.erf(x)

    def erf_like_grad(g, out, x):
        return g * 2 / math.sqrt(math.pi) * math.exp(-x * x) * math.fabs(1.0)

    op = ng.elementwise(erf_like, grads=[erf_like_grad])
    x = ng.tensor([0.5], dtype=ng.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"double backward .*erf_like.*math\.fabs"):
        ng.autograd.grad(op(x).sum(), x, create_graph=True)


def test_wrong_number_of_gradients_is_a_type_error():
    with pytest.raises(TypeError, match="takes 1 input"):
        ng.elementwise(swish_forward, grads=[swish_grad, swish_grad])


def test_module_level_defs_go_through_cached_files_and_lambdas_do_not():
    assert codegen.is_portable(swish_forward) and codegen.is_portable(swish_grad)
    assert not codegen.is_portable(sin_prod.row.grads[0])  # a lambda: compiled per process


def test_same_path_as_builtins_matches_torch():
    torch = pytest.importorskip("torch")
    data = [-1.5, 0.25, 3.0]
    tx = torch.tensor(data, requires_grad=True)
    (tx * torch.sigmoid(tx)).sum().backward()
    x = ng.tensor(data, requires_grad=True)
    swish(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
