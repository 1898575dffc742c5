"""Table rows with parameters (leaky_relu's slope, elu's alpha, hardtanh's bounds, softplus's beta) on the elementwise
fast path and off it, against torch: values, dtypes, node names, gradients with and without create_graph, second
order, saved-tensor hooks and error texts."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like

CALLS = [
    ("leaky_relu", lambda F, x: F.leaky_relu(x, 0.2)),
    ("leaky_relu int slope", lambda F, x: F.leaky_relu(x, 2)),
    ("elu", lambda F, x: F.elu(x, 0.7)),
    ("hardtanh", lambda F, x: F.hardtanh(x, -0.5, 0.25)),
    ("softplus", lambda F, x: F.softplus(x, 2.0, 1.5)),
    ("celu", lambda F, x: F.celu(x, 1.3)),
]
VIEWS = [("contiguous", lambda x: x), ("transposed", lambda x: x.t()), ("expanded row", lambda x: x[:1].expand(3, 4))]


def _input(lib, dtype="float32"):
    data = np.random.default_rng(0).standard_normal((3, 4)).astype(dtype)
    data[0, 0] = 0.25  # (inside every row's bounds and kinks)
    return lib.tensor(data, requires_grad=True)


@pytest.mark.parametrize("name, call", CALLS, ids=[c[0] for c in CALLS])
@pytest.mark.parametrize("view_name, view", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_node_and_gradient_match_torch(torch, name, call, view_name, view, dtype):
    results = []
    for lib in (torch, numbagrad):
        x = _input(lib, dtype)
        out = call(lib.nn.functional, view(x))
        out.backward(lib.tensor(np.arange(out.numel(), dtype=dtype).reshape(tuple(out.shape))))
        results.append((out.detach().numpy(), str(out.dtype).split(".")[1], out.grad_fn.name(), x.grad.numpy()))
    theirs, ours = results
    assert ours[1:3] == theirs[1:3]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, call", CALLS, ids=[c[0] for c in CALLS])
def test_gradient_without_and_with_create_graph_agree(name, call):
    x = _input(numbagrad, "float64")
    (plain,) = numbagrad.autograd.grad(call(numbagrad.nn.functional, x).pow(2).sum(), x)
    (graphed,) = numbagrad.autograd.grad(call(numbagrad.nn.functional, x).pow(2).sum(), x, create_graph=True)
    assert graphed.grad_fn is not None
    np.testing.assert_allclose(plain.numpy(), graphed.detach().numpy(), rtol=1e-15)


@pytest.mark.parametrize("name, call", [c for c in CALLS if c[0] in ("elu", "softplus", "celu")])
def test_double_backward_passes_gradgradcheck(name, call):
    x = _input(numbagrad, "float64")
    assert numbagrad.autograd.gradgradcheck(lambda t: call(numbagrad.nn.functional, t), (x,))


@pytest.mark.parametrize("lib_name", ["torch", "numbagrad"])
def test_saved_tensor_hooks_see_the_saved_input(torch, lib_name):
    lib = torch if lib_name == "torch" else numbagrad
    x = _input(lib)
    packed = []
    with lib.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        out = lib.nn.functional.leaky_relu(x, 0.2)
    out.sum().backward()
    assert len(packed) == 1 and tuple(packed[0].shape) == (3, 4)


def test_changing_the_saved_input_in_place_is_refused(torch):
    for lib in (torch, numbagrad):
        y = _input(lib) * 1
        out = lib.nn.functional.elu(y, 0.5)
        y.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected version 0"):
            out.sum().backward()


def test_float16_takes_the_general_path_with_torch_values(torch):
    ours, theirs = (lib.nn.functional.leaky_relu(_input(lib, "float16"), 0.2) for lib in (numbagrad, torch))
    assert str(ours.dtype).split(".")[1] == "float16"
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.nn.functional.leaky_relu(lib.ones(2, 3, dtype=lib.int64), 0.2),
        lambda lib: lib.nn.functional.elu(lib.ones(2, dtype=lib.int32), 1.0),
        lambda lib: lib.nn.functional.hardtanh(lib.ones(2), 1.0, -1.0),
    ],
)
def test_bad_input_raises_torch_error(torch, make):
    raises_like(torch, make)
