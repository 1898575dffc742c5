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


_SHAPES = {1: (4,), 2: (3, 4), 3: (2, 3, 4), 4: (2, 2, 3, 4)}  # left operands; the right ones are made to fit
_FAULTS = {
    "inner size": lambda rb, rows: (5,) if rb == 1 else (*rows[rb], 5, 6),
    "mixed dtypes": lambda rb, rows: (4,) if rb == 1 else (*rows[rb], 4, 6),
    "both": lambda rb, rows: (5,) if rb == 1 else (*rows[rb], 5, 6),
    "batch": lambda rb, rows: (4,) if rb == 1 else ((3,) * (rb - 2) + (4, 6)),
    "broadcast batch": lambda rb, rows: (4,) if rb == 1 else ((1,) * (rb - 2) + (5, 6)),
}
_ROWS = {2: (), 3: (2,), 4: (2, 2)}


def _operand(lib, shape, dtype, grad, transposed):
    """ones of ``shape``; ``transposed``: laid out in the reverse order (no batch folds into a matrix as a view)."""
    t = (
        lib.ones(*shape[::-1], dtype=dtype).permute(*range(len(shape) - 1, -1, -1))
        if transposed
        else lib.ones(*shape, dtype=dtype)
    )
    return t.requires_grad_() if grad and t.is_floating_point() else t


def _outcome(lib, sa, sb, dtypes, grads, layout):
    """``a @ b``'s shape, or the type and text of its exception."""
    try:
        a = _operand(lib, sa, getattr(lib, dtypes[0]), grads[0], layout[0])
        b = _operand(lib, sb, getattr(lib, dtypes[1]), grads[1], layout[1])
        return ("ok", tuple((a @ b).shape))
    except Exception as e:  # the exception's type and text are what is compared
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("fault", list(_FAULTS))
@pytest.mark.parametrize("ra, rb", [(ra, rb) for ra in range(1, 5) for rb in range(1, 5)])
def test_every_rank_pair_raises_torch_error(torch, ra, rb, fault):
    """Each rank pair's path (dot, mv, mm, a folded mm or mv, bmm) by which operand needs grad and whether the
    larger one folds as a view: the same outcome as torch's, its exception type and text when one is raised."""
    sb = _FAULTS[fault](rb, _ROWS)
    dtypes = ("float32", "float64" if fault in ("mixed dtypes", "both") else "float32")
    for grads in ((False, False), (True, False), (False, True)):
        for layout in ((False, False), (True, False), (False, True)):
            ours, theirs = (_outcome(lib, _SHAPES[ra], sb, dtypes, grads, layout) for lib in (numbagrad, torch))
            assert ours == theirs, (grads, layout)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.ones(2, 3, 4, dtype=lib.bool) @ lib.ones(2, 4, 5, dtype=lib.bool),
        lambda lib: lib.ones(2, 3, 4, dtype=lib.bool) @ lib.ones(4, 5, dtype=lib.bool),
        lambda lib: lib.ones(2, 3, 4, dtype=lib.bool) @ lib.ones(4, dtype=lib.bool),
        lambda lib: lib.ones(2, 3, 4) @ lib.ones(2, 4, 5, dtype=lib.int64),
        lambda lib: lib.ones(2, 3, 4, dtype=lib.float64) @ lib.ones(2, 4, 5, dtype=lib.float16),
        lambda lib: lib.ones(4) @ lib.ones(4, dtype=lib.float64),  # dot names both dtypes
        lambda lib: lib.ones(4).dot(lib.ones(5, dtype=lib.float64)),  # dot checks the dtypes first
        lambda lib: lib.ones(2, 3, 4).bmm(lib.ones(2, 5, 6, dtype=lib.float64)),  # bmm the sizes first
        lambda lib: lib.ones(1, 3, 4, requires_grad=True) @ lib.ones(2, 5, 6),  # a single batch needing grad
        lambda lib: lib.ones(2, 3, 4) @ lib.ones(1, 5, 6, requires_grad=True),
    ],
)
def test_stack_operands_of_wrong_types_raise_torch_error(torch, make):
    raises_like(torch, make)
