"""gather, scatter, scatter_add and tril/triu through their row kernels (``nn_kernels.gather_rows``,
``scatter_rows``, ``triangle_rows``): values, gradients and dtypes against torch over dims, ranks, index shapes,
repeated indices and diagonals; the index check (``first_outside``) against torch's error."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numbagrad
from numbagrad.backend import cpu
from torch_oracle import raises_like


@st.composite
def _gathers(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dim = draw(st.integers(0, rank - 1))
    m = draw(st.integers(1, 5))  # (the index may be longer or shorter than the input along dim)
    index_shape = shape[:dim] + (m,) + shape[dim + 1 :]
    seed = draw(st.integers(0, 2**16))
    return shape, dim, index_shape, seed


@settings(max_examples=40, deadline=None)
@given(_gathers())
def test_gather_and_its_gradient_match_torch(torch, case):
    shape, dim, index_shape, seed = case
    rng = np.random.default_rng(seed)
    a, index = rng.standard_normal(shape), rng.integers(0, shape[dim], index_shape)
    g = rng.standard_normal(index_shape)
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor(a, requires_grad=True)
        y = x.gather(dim, lib.tensor(index))
        y.backward(lib.tensor(g))
        results.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(_gathers(), st.sampled_from(["scatter", "scatter_add"]))
def test_scatter_and_scatter_add_match_torch(torch, case, op):
    shape, dim, index_shape, seed = case
    rng = np.random.default_rng(seed)
    index_shape = index_shape[:dim] + (min(index_shape[dim], shape[dim]),) + index_shape[dim + 1 :]
    a = rng.standard_normal(shape)
    if op == "scatter":  # (one source per position: torch leaves the winner of a repeated index unspecified)
        index = np.argsort(rng.random(shape), axis=dim).take(range(index_shape[dim]), axis=dim)
    else:
        index = rng.integers(0, shape[dim], index_shape)
    src = rng.standard_normal(index_shape)
    results = []
    for lib in (numbagrad, torch):
        x, s = lib.tensor(a, requires_grad=True), lib.tensor(src, requires_grad=True)
        y = getattr(x, op)(dim, lib.tensor(index), s)
        (y * lib.tensor(np.arange(y.numel(), dtype=np.float64).reshape(y.shape))).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), s.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_scatter_add_sums_repeated_positions_in_integer_dtypes(torch):
    index = [[0, 0, 1], [2, 2, 2]]
    ours = numbagrad.zeros(3, 3, dtype=numbagrad.int32).scatter_add(
        0, numbagrad.tensor(index), numbagrad.ones(2, 3, dtype=numbagrad.int32)
    )
    theirs = torch.zeros(3, 3, dtype=torch.int32).scatter_add(
        0, torch.tensor(index), torch.ones(2, 3, dtype=torch.int32)
    )
    assert ours.dtype == numbagrad.int32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_the_kernels_run_where_the_index_matches_the_input_in_the_other_dims(monkeypatch):
    calls = []
    kernels = cpu._nn()
    monkeypatch.setattr(cpu, "_nn", lambda: type("K", (), {
        "gather_rows": lambda *a: calls.append("gather") or kernels.gather_rows(*a),
        "scatter_rows": lambda *a: calls.append("scatter") or kernels.scatter_rows(*a),
    }))  # fmt: skip
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(cpu.gather(a, 1, np.array([[3, 0]] * 3)), a[:, [3, 0]])
    cpu.gather(a, 1, np.array([[3, 0]] * 2))  # (fewer rows than the input: numpy's indexing)
    cpu.scatter(a, 0, np.array([[2, 1, 0, 2]]), np.ones((1, 4)), "add")
    assert calls == ["gather", "scatter"]


def test_an_index_out_of_range_raises_torchs_error_and_writes_nothing(torch):
    raises_like(torch, lambda lib: lib.zeros(2, 3).scatter_add(1, lib.tensor([[0, 3, 1]] * 2), lib.ones(2, 3)))
    raises_like(torch, lambda lib: lib.arange(6.0).view(2, 3).gather(0, lib.tensor([[1, -1, 0]])))
    x = numbagrad.zeros(2, 3)
    with pytest.raises(RuntimeError):
        x.scatter_add_(1, numbagrad.tensor([[0, 1, 7]] * 2), numbagrad.ones(2, 3))
    assert not x.any()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "complex64", "bool"])
@pytest.mark.parametrize("diagonal", [-5, -1, 0, 2, 9, 10**18])
@pytest.mark.parametrize("op", ["tril", "triu"])
def test_tril_and_triu_match_torch(torch, op, diagonal, dtype):
    a = np.random.default_rng(0).standard_normal((2, 4, 6)) + 0.5
    ours = getattr(numbagrad.tensor(a).to(getattr(numbagrad, dtype)), op)(diagonal)
    theirs = getattr(torch.tensor(a).to(getattr(torch, dtype)), op)(diagonal)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_tril_gradient_is_the_tril_of_the_incoming_gradient(torch):
    g = np.arange(20.0).reshape(4, 5)
    grads = []
    for lib in (numbagrad, torch):
        x = lib.ones(4, 5, requires_grad=True, dtype=lib.float64)
        x.tril(-1).backward(lib.tensor(g))
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(*grads)


def test_a_source_larger_than_the_index_is_read_in_part_and_its_gradient_refused_as_torch(torch):
    def step(lib):
        x, s = lib.zeros(2, 3, requires_grad=True), lib.arange(12.0).view(3, 4).requires_grad_()
        y = x.scatter_add(0, lib.tensor([[1, 0, 1]]), s)
        assert y.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
        y.sum().backward()

    raises_like(torch, step)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "complex64", "bool"])
def test_gather_scatter_and_tril_in_the_dtypes_numba_does_not_compute_match_torch(torch, dtype):
    a = np.random.default_rng(1).standard_normal((3, 5)) + 0.25
    index = np.array([[4, 0, 2], [1, 1, 3], [0, 4, 4]])

    def results(lib):
        x = lib.tensor(a).to(getattr(lib, dtype))
        i = lib.tensor(index)
        return [x.gather(1, i), x.scatter(1, i[:, :1], x[:, :1]), x.tril(1)]

    for ours, theirs in zip(results(numbagrad), results(torch)):
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_array_equal(ours.float().numpy() if dtype == "bfloat16" else ours.numpy(),
                                      theirs.float().numpy() if dtype == "bfloat16" else theirs.numpy())  # fmt: skip
