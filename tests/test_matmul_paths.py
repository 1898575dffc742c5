"""matmul, mm and @ against torch on the direct paths (two float matrices; two float stacks of one batch shape) and
beside them (transposed, broadcast, empty, integer, mixed-dtype and complex operands): values, dtypes, node names,
gradients with and without create_graph, second-order gradients and error texts."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like


def _tensor(lib, shape, dtype="float32", seed=0, grad=True):
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        return lib.tensor(rng.integers(-3, 4, shape).astype(dtype))
    if dtype.startswith("complex"):
        return lib.tensor(
            (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype), requires_grad=grad
        )
    return lib.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=grad)


CASES = [
    ("2-d", (4, 8), (8, 3), "float32", "float32", lambda a, b: a @ b),
    ("2-d float64 mm", (3, 5), (5, 2), "float64", "float64", lambda a, b: a.mm(b)),
    ("2-d transposed", (8, 4), (3, 8), "float32", "float32", lambda a, b: a.t() @ b.t()),
    ("2-d empty", (0, 4), (4, 3), "float32", "float32", lambda a, b: a @ b),
    ("2-d empty inner", (2, 0), (0, 3), "float32", "float32", lambda a, b: a @ b),
    ("4-d stacks", (2, 2, 4, 8), (2, 2, 8, 4), "float32", "float32", lambda a, b: a @ b),
    ("4-d by its transpose", (2, 2, 4, 8), (2, 2, 4, 8), "float32", "float32", lambda a, b: a @ b.transpose(-2, -1)),
    ("3-d float64", (3, 2, 4), (3, 4, 5), "float64", "float64", lambda a, b: a.matmul(b)),
    ("3-d broadcast batch", (1, 2, 4), (3, 4, 5), "float32", "float32", lambda a, b: a @ b),
    ("3-d by 2-d", (2, 3, 4), (4, 5), "float32", "float32", lambda a, b: a @ b),
    ("2-d by 3-d", (3, 4), (2, 4, 5), "float32", "float32", lambda a, b: a @ b),
    ("complex 2-d", (2, 3), (3, 2), "complex64", "complex64", lambda a, b: a @ b),
]


@pytest.mark.parametrize("name, sa, sb, da, db, op", CASES, ids=[c[0] for c in CASES])
def test_values_dtype_node_and_gradients_match_torch(torch, name, sa, sb, da, db, op):
    results = []
    for lib in (torch, numbagrad):
        a, b = _tensor(lib, sa, da, 0), _tensor(lib, sb, db, 1)
        out = op(a, b)
        g = _tensor(lib, tuple(out.shape), str(out.dtype).split(".")[1], 2, grad=False)
        out.backward(g)
        results.append((out.detach().numpy(), str(out.dtype).split(".")[1], out.grad_fn.name(), a.grad, b.grad))
    theirs, ours = results
    assert ours[1:3] == theirs[1:3]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5)
    for mine, expected in zip(ours[3:], theirs[3:]):
        assert (
            mine.shape == tuple(expected.shape) and str(mine.dtype).split(".")[1] == str(expected.dtype).split(".")[1]
        )
        np.testing.assert_allclose(mine.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes", [((2, 3), (3, 4)), ((2, 2, 3, 4), (2, 2, 4, 3))])
def test_gradient_without_and_with_create_graph_agree(shapes):
    a, b = _tensor(numbagrad, shapes[0], "float64", 0), _tensor(numbagrad, shapes[1], "float64", 1)
    plain = numbagrad.autograd.grad((a @ b).exp().sum(), (a, b))
    graphed = numbagrad.autograd.grad((a @ b).exp().sum(), (a, b), create_graph=True)
    for p, q in zip(plain, graphed):
        assert q.grad_fn is not None
        np.testing.assert_array_equal(p.numpy(), q.detach().numpy())


@pytest.mark.parametrize("shapes", [((2, 3), (3, 2)), ((2, 2, 3), (2, 3, 2))])
def test_double_backward_passes_gradgradcheck(shapes):
    a, b = _tensor(numbagrad, shapes[0], "float64", 0), _tensor(numbagrad, shapes[1], "float64", 1)
    assert numbagrad.autograd.gradgradcheck(lambda x, y: x @ y, (a, b))


def test_only_the_operand_that_requires_grad_gets_one(torch):
    for lib in (torch, numbagrad):
        a, b = _tensor(lib, (2, 3)), _tensor(lib, (3, 2), grad=False)
        (a @ b).sum().backward()
        assert a.grad is not None and b.grad is None


def test_integer_matrices_multiply_as_torch(torch):
    ours, theirs = (_tensor(lib, (2, 3), "int64", 0) @ _tensor(lib, (3, 2), "int64", 1) for lib in (numbagrad, torch))
    assert str(ours.dtype).split(".")[1] == "int64"
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_changing_a_saved_operand_in_place_is_refused(torch):
    for lib in (torch, numbagrad):
        a, b = _tensor(lib, (2, 3)), _tensor(lib, (3, 2))
        c = a * 1
        out = c @ b
        c.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected version 0"):
            out.sum().backward()


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.ones(2, 3) @ lib.ones(2, 3),  # inner sizes differ
        lambda lib: lib.ones(2, 3).mm(lib.ones(2, 3)),
        lambda lib: lib.ones(2, 3) @ lib.ones(3, 2, dtype=lib.float64),  # mixed dtypes
        lambda lib: lib.ones(2, 3).mm(lib.ones(3, 2, dtype=lib.float64)),
        lambda lib: lib.ones(2, 2, 3) @ lib.ones(3, 3, 2),  # batch sizes that do not broadcast
    ],
)
def test_bad_operands_raise_torch_error(torch, make):
    raises_like(torch, make)
