"""cat against torch on its direct path (plain tensors of one rank, dtype and device) and beside it (mixed dtypes,
empty 1-d parts, views, integers, complex): values, dtypes, node names, gradients to each part, second-order
gradients and error texts."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like


def _part(lib, shape, dtype="float32", seed=0, grad=True):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    if dtype.startswith("int"):
        return lib.tensor(data)
    return lib.tensor(data, requires_grad=grad)


CASES = [
    ("dim 1", [((4, 8), "float32"), ((4, 3), "float32")], 1, lambda t: t),
    ("negative dim", [((2, 3, 4), "float64"), ((2, 3, 1), "float64")], -1, lambda t: t),
    ("three parts, tuple", [((1, 3), "float32"), ((2, 3), "float32"), ((0, 3), "float32")], 0, tuple),
    ("transposed parts", [((3, 2), "float32"), ((3, 4), "float32")], 0, lambda t: [p.t() for p in t]),
    ("mixed dtypes", [((2, 2), "float32"), ((2, 2), "float64")], 0, lambda t: t),
    ("1-d", [((3,), "float32"), ((2,), "float32")], 0, lambda t: t),
    ("complex", [((2, 2), "complex64"), ((1, 2), "complex64")], 0, lambda t: t),
]


@pytest.mark.parametrize("name, parts, dim, arrange", CASES, ids=[c[0] for c in CASES])
def test_values_dtype_node_and_gradients_match_torch(torch, name, parts, dim, arrange):
    results = []
    for lib in (torch, numbagrad):
        tensors = [_part(lib, shape, dtype, i) for i, (shape, dtype) in enumerate(parts)]
        out = lib.cat(arrange(tensors), dim)
        g = lib.tensor(np.arange(out.numel()).reshape(tuple(out.shape)).astype(str(out.dtype).split(".")[1]))
        out.backward(g)
        grads = [(p.grad.numpy(), str(p.grad.dtype)) for p in tensors]
        results.append((out.detach().numpy(), str(out.dtype).split(".")[1], out.grad_fn.name(), grads))
    theirs, ours = results
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1:3] == theirs[1:3]
    for (mine, my_dtype), (expected, their_dtype) in zip(ours[3], theirs[3]):
        np.testing.assert_array_equal(mine, expected)
        assert my_dtype.split(".")[1] == their_dtype.split(".")[1]


def test_an_empty_1d_part_is_skipped_as_torch_skips_it(torch):
    ours, theirs = (lib.cat([_part(lib, (2, 3), seed=1), lib.zeros(0)]) for lib in (numbagrad, torch))
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


EMPTY_1D = [
    ("before, dim 0", ["empty", (2, 3)], 0),
    ("between, dim 1", [(2, 3), "empty", (2, 1)], 1),
    ("first, negative dim", ["empty", (2, 3)], -1),
    ("promotes to float64", ["empty64", (2, 3)], 0),
    ("every part empty, dim out of range", ["empty", "empty"], 5),
]


def _parts(lib, spec):
    made = {"empty": lambda: lib.empty(0, requires_grad=True)}
    made["empty64"] = lambda: lib.empty(0, dtype=lib.float64, requires_grad=True)
    return [made[s]() if isinstance(s, str) else _part(lib, s, seed=i) for i, s in enumerate(spec)]


@pytest.mark.parametrize("name, spec, dim", EMPTY_1D, ids=[c[0] for c in EMPTY_1D])
def test_a_skipped_empty_1d_part_still_gets_torch_gradient(torch, name, spec, dim):
    results = []
    for lib in (torch, numbagrad):
        parts = _parts(lib, spec)
        out = lib.cat(parts, dim)
        out.exp().sum().backward()
        grads = [(tuple(p.grad.shape), str(p.grad.dtype).split(".")[1], p.grad.numpy()) for p in parts]
        results.append((tuple(out.shape), str(out.dtype).split(".")[1], out.grad_fn.name(), grads))
    theirs, ours = results
    assert ours[:3] == theirs[:3]
    for mine, expected in zip(ours[3], theirs[3]):
        assert mine[:2] == expected[:2]
        np.testing.assert_allclose(mine[2], expected[2], rtol=1e-6)


def test_a_skipped_empty_1d_part_passes_gradgradcheck():
    empty = numbagrad.empty(0, dtype=numbagrad.float64, requires_grad=True)
    b = _part(numbagrad, (2, 3), "float64")
    assert numbagrad.autograd.gradgradcheck(lambda x, y: numbagrad.cat([y * y, x], 1), (empty, b))


def test_checks_after_a_skipped_part_number_the_parts_as_given(torch):
    raises_like(torch, lambda lib: lib.cat([lib.zeros(0), lib.ones(2, 3), lib.ones(3, 4)]))


def test_integer_parts_join_without_a_node(torch):
    ours, theirs = (
        lib.cat([_part(lib, (2, 2), "int64"), _part(lib, (1, 2), "int64", 1)]) for lib in (numbagrad, torch)
    )
    assert ours.grad_fn is None and str(ours.dtype).split(".")[1] == "int64"
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_only_the_parts_that_require_grad_get_one(torch):
    for lib in (torch, numbagrad):
        a, b = _part(lib, (2, 3)), _part(lib, (2, 3), grad=False)
        lib.cat([a, b]).sum().backward()
        assert a.grad is not None and b.grad is None


def test_gradient_without_and_with_create_graph_agree():
    a, b = _part(numbagrad, (2, 3), "float64"), _part(numbagrad, (2, 1), "float64", 1)
    plain = numbagrad.autograd.grad(numbagrad.cat([a, b], 1).exp().sum(), (a, b))
    graphed = numbagrad.autograd.grad(numbagrad.cat([a, b], 1).exp().sum(), (a, b), create_graph=True)
    for p, q in zip(plain, graphed):
        assert q.grad_fn is not None
        np.testing.assert_array_equal(p.numpy(), q.detach().numpy())


def test_double_backward_passes_gradgradcheck():
    a, b = _part(numbagrad, (2, 3), "float64"), _part(numbagrad, (2, 2), "float64", 1)
    assert numbagrad.autograd.gradgradcheck(lambda x, y: numbagrad.cat([x * x, y], 1), (a, b))


def test_the_result_is_a_new_tensor_not_a_view_of_a_part():
    a = _part(numbagrad, (2, 3), grad=False)
    out = numbagrad.cat([a], 0)
    out.add_(1)
    assert out._base is None and not np.array_equal(out.numpy(), a.numpy())


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 4)], 0),  # sizes differ off the dim
        lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 3, 1)], 0),  # ranks differ
        lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 3)], 2),  # dim out of range
        lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 3)], -3),
        lambda lib: lib.cat([lib.ones(()), lib.ones(())]),  # 0-dim parts
        lambda lib: lib.cat([]),
    ],
)
def test_bad_parts_raise_torch_error(torch, make):
    raises_like(torch, make)
