"""F.mse_loss against torch on its direct path (contiguous float operands of one shape and dtype) and beside it
(broadcast, transposed, mixed-dtype, empty operands): values, dtypes, node names, both gradients, the same bits
with and without create_graph, second order and error texts."""

import warnings

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like


def _pair(lib, shapes, dtypes=("float32", "float32"), needs=(True, True)):
    rng = np.random.default_rng(0)
    return [
        lib.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=need)
        for shape, dtype, need in zip(shapes, dtypes, needs)
    ]


CASES = [
    ("same shape", [(4, 8), (4, 8)], ("float32", "float32"), lambda t: t),
    ("float64", [(3, 5), (3, 5)], ("float64", "float64"), lambda t: t),
    ("transposed input", [(8, 4), (4, 8)], ("float32", "float32"), lambda t: [t[0].t(), t[1]]),
    ("mixed dtypes", [(3, 4), (3, 4)], ("float32", "float64"), lambda t: t),
    ("empty", [(0, 4), (0, 4)], ("float32", "float32"), lambda t: t),
    ("0-dim", [(), ()], ("float32", "float32"), lambda t: t),
]


@pytest.mark.parametrize("name, shapes, dtypes, arrange", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_values_dtype_node_and_gradients_match_torch(torch, name, shapes, dtypes, arrange, reduction):
    results = []
    for lib in (torch, numbagrad):
        x, y = _pair(lib, shapes, dtypes)
        out = lib.nn.functional.mse_loss(*arrange([x, y]), reduction=reduction)
        out.backward(lib.ones_like(out) * 0.5)
        results.append((out.detach().numpy(), str(out.dtype).split(".")[1], out.grad_fn.name(), x.grad, y.grad))
    theirs, ours = results
    assert ours[1:3] == theirs[1:3]
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-7, equal_nan=True)
    for mine, expected in zip(ours[3:], theirs[3:]):
        assert str(mine.dtype).split(".")[1] == str(expected.dtype).split(".")[1]
        np.testing.assert_allclose(mine.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)


def test_broadcast_target_warns_and_matches_torch(torch):
    results = []
    for lib in (torch, numbagrad):
        x, y = _pair(lib, [(3, 4), (4,)])
        with pytest.warns(UserWarning, match="Using a target size"):
            out = lib.nn.functional.mse_loss(x, y)
        out.backward()
        results.append((out.item(), x.grad.numpy(), y.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    for mine, expected in zip(results[1][1:], results[0][1:]):
        np.testing.assert_allclose(mine, expected, rtol=1e-6)


def test_only_the_operand_that_requires_grad_gets_one(torch):
    for lib in (torch, numbagrad):
        x, y = _pair(lib, [(2, 3), (2, 3)], needs=(True, False))
        lib.nn.functional.mse_loss(x, y).backward()
        assert x.grad is not None and y.grad is None


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradients_without_and_with_create_graph_are_the_same_bits(reduction):
    x, y = _pair(numbagrad, [(3, 4), (3, 4)])
    plain = numbagrad.autograd.grad(numbagrad.nn.functional.mse_loss(x, y, reduction=reduction).sum(), (x, y))
    graphed = numbagrad.autograd.grad(
        numbagrad.nn.functional.mse_loss(x, y, reduction=reduction).sum(), (x, y), create_graph=True
    )
    for p, q in zip(plain, graphed):
        assert q.grad_fn is not None
        np.testing.assert_array_equal(p.numpy(), q.detach().numpy())


def test_forward_is_the_same_bits_as_its_three_ops():
    x, y = _pair(numbagrad, [(5, 7), (5, 7)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = numbagrad.nn.functional.mse_loss(x, y)
    assert loss.item() == ((x - y) ** 2).mean().item()


def test_double_backward_passes_gradgradcheck():
    x, y = _pair(numbagrad, [(2, 3), (2, 3)], ("float64", "float64"))
    assert numbagrad.autograd.gradgradcheck(lambda a, b: numbagrad.nn.functional.mse_loss(a, b), (x, y))


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.nn.functional.mse_loss(lib.ones(2, 3), lib.ones(2, 3), reduction="average"),
        lambda lib: lib.nn.functional.mse_loss(lib.ones(2, 3), lib.ones(4, 3)),
    ],
)
def test_bad_input_raises_torch_error(torch, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raises_like(torch, make)
