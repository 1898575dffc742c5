"""A backward pass given ``inputs`` (``autograd.grad``, ``backward(inputs=...)``) computes only the gradients that
lead to them: a built-in node's backward sees ``needs_input_grad`` narrowed to those inputs for the pass, as torch's
native nodes ask ``task_should_compute_output``. A node's post-hook shows which gradients it computed (None for the
others), in torch and here alike."""

import numpy as np
import pytest

import numbagrad

BUILDERS = {
    "mul": lambda lib, x, w: x * w,
    "div": lambda lib, x, w: x / w,
    "mm": lambda lib, x, w: x @ w.t(),
    "bmm": lambda lib, x, w: lib.bmm(x.unsqueeze(0), w.t().unsqueeze(0)),
    "atan2": lambda lib, x, w: lib.atan2(x, w),
    "maximum": lambda lib, x, w: lib.maximum(x, w),
}


def _computed(lib, build, wrt: str) -> tuple:
    """Which of the op's node's gradients a pass for ``wrt`` ("x" or "w") computed, and the gradient it returned."""
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    w = lib.tensor(rng.standard_normal((3, 3)) + 3, requires_grad=True)
    y = build(lib, x, w)
    seen = []
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(tuple(g is not None for g in grad_inputs)))
    (grad,) = lib.autograd.grad(y.sum(), x if wrt == "x" else w)
    return seen, grad.detach().numpy()


@pytest.mark.parametrize("wrt", ["x", "w"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_only_the_gradients_leading_to_the_inputs_are_computed(torch, name, wrt):
    ours, our_grad = _computed(numbagrad, BUILDERS[name], wrt)
    theirs, their_grad = _computed(torch, BUILDERS[name], wrt)
    assert ours == theirs
    np.testing.assert_allclose(our_grad, their_grad, rtol=1e-12)


def test_linear_grad_of_its_input_leaves_the_weight_product_out():
    x = numbagrad.randn(4, 3, requires_grad=True)
    w = numbagrad.randn(5, 3, requires_grad=True)
    b = numbagrad.randn(5, requires_grad=True)
    y = numbagrad.nn.functional.linear(x, w, b)
    seen = {}
    y.grad_fn.register_hook(lambda gi, go: seen.update(zip((x, w, b), (g is not None for g in gi))))
    (gx,) = numbagrad.autograd.grad(y.sum(), x)
    assert [seen[x], seen[w], seen[b]] == [True, False, False]
    np.testing.assert_allclose(gx.numpy(), np.broadcast_to(w.detach().numpy().sum(0), (4, 3)), rtol=1e-6)


def test_backward_with_inputs_accumulates_into_those_only():
    x = numbagrad.randn(4, 3, requires_grad=True)
    w = numbagrad.randn(5, 3, requires_grad=True)
    (numbagrad.nn.functional.linear(x, w) ** 2).sum().backward(inputs=[w])
    assert x.grad is None
    expected = 2 * (x.detach().numpy() @ w.detach().numpy().T).T @ x.detach().numpy()
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-5)


def test_a_retained_graph_computes_the_other_gradient_in_a_later_pass():
    x = numbagrad.randn(4, 3, requires_grad=True)
    w = numbagrad.randn(5, 3, requires_grad=True)
    loss = (x @ w.t()).tanh().sum()
    (gx,) = numbagrad.autograd.grad(loss, x, retain_graph=True)
    (gw,) = numbagrad.autograd.grad(loss, w)
    both = numbagrad.autograd.grad((x @ w.t()).tanh().sum(), (x, w))
    np.testing.assert_array_equal(gx.numpy(), both[0].numpy())
    np.testing.assert_array_equal(gw.numpy(), both[1].numpy())


def test_a_custom_function_sees_needs_input_grad_as_recorded(torch):
    def needs_seen(lib) -> list:
        seen = []

        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b

            @staticmethod
            def backward(ctx, g):
                seen.append(tuple(ctx.needs_input_grad))
                a, b = ctx.saved_tensors
                return g * b, g * a

        a, b = lib.ones(2, requires_grad=True), lib.ones(2, requires_grad=True)
        lib.autograd.grad(Mul.apply(a, b).sum(), a)
        return seen

    assert needs_seen(numbagrad) == needs_seen(torch) == [(True, True)]


def test_a_double_backward_through_a_narrowed_pass(torch):
    def grads(lib):
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        w = lib.tensor([1.5, 0.25, -0.75], requires_grad=True)
        (gx,) = lib.autograd.grad((x * w).sin().sum(), x, create_graph=True)
        return [g.detach().numpy() for g in lib.autograd.grad(gx.sum(), (x, w))]

    for ours, theirs in zip(grads(numbagrad), grads(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
