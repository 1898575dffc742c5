"""F.max_pool2d against torch on the direct path (a float32 or float64 tensor) and around it: values, indices,
dtypes, layout, the node and its gradients (first order with and without create_graph, second order), and errors."""

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F
from torch_oracle import raises_like


def _image(lib, shape, dtype="float32", seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return lib.tensor(data, requires_grad=True)


CASES = [
    ("4-d float32", (2, 3, 8, 8), "float32", {"kernel_size": 2}, lambda x: x),
    ("float64 padded", (1, 2, 7, 6), "float64", {"kernel_size": 3, "stride": 2, "padding": 1}, lambda x: x),
    ("3-d input", (3, 6, 6), "float32", {"kernel_size": 2, "stride": 1}, lambda x: x),
    ("ceil mode", (1, 1, 5, 5), "float32", {"kernel_size": 2, "ceil_mode": True}, lambda x: x),
    ("transposed input", (1, 2, 6, 4), "float32", {"kernel_size": 2}, lambda x: x.transpose(2, 3)),
    ("channels last", (2, 3, 4, 4), "float32", {"kernel_size": 2}, "channels_last"),
    ("no batch items", (0, 2, 4, 4), "float32", {"kernel_size": 2}, lambda x: x),
]


@pytest.mark.parametrize("name, shape, dtype, kw, view", CASES, ids=[c[0] for c in CASES])
def test_values_indices_layout_node_and_gradient_match_torch(torch, name, shape, dtype, kw, view):
    results = []
    for lib in (torch, numbagrad):
        x = _image(lib, shape, dtype)
        seen = x.to(memory_format=lib.channels_last) if view == "channels_last" else view(x)
        values, indices = lib.nn.functional.max_pool2d(seen, return_indices=True, **kw)
        g = lib.tensor(np.arange(values.numel(), dtype=dtype).reshape(tuple(values.shape)))
        values.backward(g)
        results.append(
            (
                values.detach().numpy(),
                indices.numpy(),
                str(values.dtype).split(".")[1],
                str(indices.dtype).split(".")[1],
                values.stride(),
                values.grad_fn.name(),
                indices.requires_grad,
                indices.grad_fn,
                x.grad.numpy(),
            )
        )
    theirs, ours = results
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])
    assert ours[2:8] == theirs[2:8]
    np.testing.assert_array_equal(ours[8], theirs[8])


def test_gradient_without_and_with_create_graph_agree():
    x = _image(numbagrad, (1, 2, 6, 6), "float64")
    (plain,) = numbagrad.autograd.grad(F.max_pool2d(x, 2).pow(2).sum(), x)
    (graphed,) = numbagrad.autograd.grad(F.max_pool2d(x, 2).pow(2).sum(), x, create_graph=True)
    assert graphed.grad_fn is not None
    np.testing.assert_array_equal(plain.numpy(), graphed.detach().numpy())


def test_double_backward_passes_gradgradcheck():
    x = _image(numbagrad, (1, 1, 4, 4), "float64")
    assert numbagrad.autograd.gradgradcheck(lambda t: F.max_pool2d(t * t, 2), (x,))


def test_hook_on_the_values_sees_the_incoming_gradient():
    x = _image(numbagrad, (1, 1, 4, 4))
    out = F.max_pool2d(x, 2)
    seen = []
    out.register_hook(lambda g: seen.append(g.numpy().copy()))
    out.backward(numbagrad.full((1, 1, 2, 2), 3.0))
    np.testing.assert_array_equal(seen[0], np.full((1, 1, 2, 2), 3.0, np.float32))
    assert x.grad.sum().item() == 12.0


def test_no_grad_and_inference_results_have_no_node(torch):
    for lib in (torch, numbagrad):
        x = _image(lib, (1, 1, 4, 4))
        with lib.no_grad():
            out = lib.nn.functional.max_pool2d(x, 2)
        assert out.grad_fn is None and not out.requires_grad
        with lib.inference_mode():
            inner = lib.ones(1, 1, 4, 4)
            out = lib.nn.functional.max_pool2d(inner, 2)
        assert out.is_inference()


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 4, 4), 2, padding=2),  # beyond half the kernel
        lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 4, 4), 3, padding=2, dilation=2),
        lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 1, 1), 2),  # an output too small
        lambda lib: lib.nn.functional.max_pool2d(lib.ones(4, 4), 2),  # 2-d input
    ],
)
def test_bad_input_raises_torch_error(torch, make):
    raises_like(torch, make)
