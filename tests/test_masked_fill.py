"""masked_fill against torch: the direct path (a float tensor, a bool mask of its shape, a number) and the general
one (broadcast masks, tensor values, integers, views) give the same values, dtypes, gradients, nodes and errors;
and a comparison of a tensor that requires grad has no node on any path."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like


def _inputs(lib, shape, mask_shape, dtype="float32", seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    mask = np.random.default_rng(seed + 1).standard_normal(mask_shape) > 0
    return lib.tensor(data, requires_grad=data.dtype.kind == "f"), lib.tensor(mask)


CASES = [
    ("same shape", (4, 8), (4, 8), "float32", lambda x: x),
    ("float64", (3, 5), (3, 5), "float64", lambda x: x),
    ("broadcast mask", (3, 4), (4,), "float32", lambda x: x),
    ("broadcast input", (1, 4), (3, 4), "float32", lambda x: x),
    ("transposed input", (4, 3), (3, 4), "float32", lambda x: x.t()),
    ("no elements", (0, 4), (0, 4), "float32", lambda x: x),
    ("0-dim", (), (), "float32", lambda x: x),
]


@pytest.mark.parametrize("name, shape, mask_shape, dtype, view", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("value", [0.0, -float("inf"), 3])
def test_values_dtype_node_and_gradient_match_torch(torch, name, shape, mask_shape, dtype, view, value):
    results = []
    for lib in (torch, numbagrad):
        x, mask = _inputs(lib, shape, mask_shape, dtype)
        out = view(x).masked_fill(mask, value)
        g = lib.tensor(np.arange(out.numel(), dtype=dtype).reshape(tuple(out.shape)))
        out.backward(g)
        results.append((out.detach().numpy(), str(out.dtype).split(".")[1], out.grad_fn.name(), x.grad.numpy()))
    (v1, d1, n1, g1), (v2, d2, n2, g2) = results
    assert (d1, n1) == (d2, n2)
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(g1, g2)


def test_integer_input_matches_torch(torch):
    ours, theirs = (lib.arange(6).reshape(2, 3).masked_fill(lib.arange(3) > 0, 7) for lib in (numbagrad, torch))
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_float64_tensor_value_gets_its_own_dtype_gradient(torch):
    grads = []
    for lib in (torch, numbagrad):
        x, mask = _inputs(lib, (3, 4), (3, 4))
        value = lib.tensor(2.0, dtype=lib.float64, requires_grad=True)
        out = x.masked_fill(mask, value)
        out.sum().backward()
        grads.append((out.grad_fn.name(), str(value.grad.dtype).split(".")[1], value.grad.item(), x.grad.numpy()))
    assert grads[0][:3] == grads[1][:3]
    np.testing.assert_array_equal(grads[0][3], grads[1][3])


def test_gradient_without_and_with_create_graph_agree():
    x, mask = _inputs(numbagrad, (3, 4), (3, 4), "float64")
    (plain,) = numbagrad.autograd.grad(x.masked_fill(mask, 1.5).exp().sum(), x)
    (graphed,) = numbagrad.autograd.grad(x.masked_fill(mask, 1.5).exp().sum(), x, create_graph=True)
    assert graphed.grad_fn is not None
    np.testing.assert_array_equal(plain.numpy(), graphed.detach().numpy())


def test_double_backward_passes_gradgradcheck():
    x, mask = _inputs(numbagrad, (3, 4), (3, 4), "float64")
    assert numbagrad.autograd.gradgradcheck(lambda t: (t * t).masked_fill(mask, -2.0), (x,))


def test_hook_on_the_result_sees_the_incoming_gradient():
    x, mask = _inputs(numbagrad, (2, 3), (2, 3))
    out = x.masked_fill(mask, 0.0)
    seen = []
    out.register_hook(lambda g: seen.append(g.numpy().copy()))
    out.backward(numbagrad.full((2, 3), 2.0))
    np.testing.assert_array_equal(seen[0], np.full((2, 3), 2.0, np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(mask.numpy(), 0.0, 2.0))


def test_changing_the_saved_mask_in_place_is_refused(torch):
    for lib in (torch, numbagrad):
        x, mask = _inputs(lib, (2, 3), (2, 3))
        out = x.masked_fill(mask, 0.0)
        mask.logical_not_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected version 0"):
            out.sum().backward()


def test_no_grad_result_has_no_node(torch):
    for lib in (torch, numbagrad):
        x, mask = _inputs(lib, (2, 3), (2, 3))
        with lib.no_grad():
            out = x.masked_fill(mask, 1.0)
        assert out.grad_fn is None and not out.requires_grad


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.ones(2, 3).masked_fill(lib.ones(2, 3), 0.0),  # a float mask
        lambda lib: lib.ones(2, 3).masked_fill(lib.ones(2, 3) > 0, 1e39),  # beyond float32
        lambda lib: lib.ones(2, 3).masked_fill(lib.ones(2, 3) > 0, lib.ones(2)),  # a 1-dim value
        lambda lib: lib.ones(2, 3).masked_fill(lib.ones(4) > 0, 0.0),  # shapes that do not broadcast
    ],
)
def test_bad_input_raises_torch_error(torch, make):
    raises_like(torch, make)


@pytest.mark.parametrize("compare", [lambda x: x > 0, lambda x: x <= 0.5, lambda x: x == x, lambda x: x.isnan()])
def test_comparison_of_a_tensor_requiring_grad_has_no_node(torch, compare):
    for lib in (torch, numbagrad):
        x = lib.tensor([[0.25, -1.0], [2.0, 0.5]], requires_grad=True)
        out = compare(x)
        assert out.grad_fn is None and not out.requires_grad and out.dtype == lib.bool


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.ones(3).masked_fill([True, False, True], 0.0),  # a list mask
        lambda lib: lib.ones(3).masked_fill((True,), 0.0),  # a 1-tuple mask
        lambda lib: lib.ones(3).masked_fill(np.array([True, False, True]), 1),  # a numpy mask
        lambda lib: lib.ones(3).masked_fill(None, 1),
        lambda lib: lib.ones(3).masked_fill(lib.ones(3) > 0, "a"),  # a string value
        lambda lib: lib.ones(3).masked_fill(lib.ones(3) > 0, np.array(1.0)),  # a numpy array value
        lambda lib: lib.ones(3).masked_fill(lib.ones(3) > 0, [1]),  # a list value
        lambda lib: lib.ones(3).masked_fill_([True], 1),  # in place
        lambda lib: lib.masked_fill(lib.ones(3), [True, False, True], 0.0),  # the function
        lambda lib: lib.masked_fill([1.0], lib.ones(1) > 0, 0.0),
    ],
)
def test_arguments_of_wrong_types_raise_torch_overload_error(torch, make):
    raises_like(torch, make)


def test_a_refused_in_place_fill_leaves_the_tensor_intact():
    x = numbagrad.ones(3)
    with pytest.raises(TypeError):
        x.masked_fill_([True, False, True], 0.0)
    np.testing.assert_array_equal(x.numpy(), np.ones(3, np.float32))


def test_numpy_scalar_and_complex_values_are_numbers(torch):
    for value in (np.float32(2.5), np.int64(2), np.bool_(True)):
        ours, theirs = (lib.zeros(3).masked_fill(lib.arange(3) > 0, value) for lib in (numbagrad, torch))
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    ours, theirs = (lib.zeros(2, dtype=lib.complex64).masked_fill(lib.ones(2) > 0, 1j) for lib in (numbagrad, torch))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
