"""The CPU primitives' tasks (``backend/cpu_threads.py``): every task runs once, on the caller's thread and OpenBLAS's
workers, with OpenBLAS on one thread meanwhile and its count restored after; a task's error reaches the caller;
tasks started inside a task run where they are. The convolution and max pool split into tasks give torch's
values and gradients, the same bits from run to run."""

import threading

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import blas, cpu, cpu_threads
from numbagrad.nn import functional as F

needs_blas = pytest.mark.skipif(blas.openblas() is None, reason="numpy links a BLAS other than OpenBLAS")


@pytest.fixture
def threads():
    """A function setting numbagrad's thread count; the count from before is restored after the test."""
    before = numbagrad.get_num_threads()
    yield numbagrad.set_num_threads
    numbagrad.set_num_threads(before)


@pytest.fixture
def small_tasks(monkeypatch):
    """Chunks and pools small enough that tiny shapes make many tasks."""
    monkeypatch.setattr(cpu, "_CHUNK_BYTES", 1 << 12)
    monkeypatch.setattr(cpu, "_SPAN_BYTES", 1 << 12)
    monkeypatch.setattr(cpu, "_PLANE_TASK_ELEMENTS", 16)


@needs_blas
def test_every_task_runs_once_on_the_threads(threads):
    threads(2)
    ran, names = [], set()
    barrier = threading.Barrier(2, timeout=10)

    def task(i):
        if i < 2:  # (the first two wait for each other: they run on two threads at once)
            barrier.wait()
        ran.append(i)
        names.add(threading.current_thread().name)

    cpu_threads.run_tasks(task, 9)
    assert sorted(ran) == list(range(9))
    assert len(names) == 2


@needs_blas
def test_openblas_runs_on_one_thread_during_tasks_and_its_count_comes_back(threads):
    threads(2)
    seen = []
    cpu_threads.run_tasks(lambda i: seen.append(blas.openblas().get_num_threads()), 4)
    assert seen == [1, 1, 1, 1]
    assert blas.openblas().get_num_threads() == 2


@needs_blas
def test_a_tasks_error_reaches_the_caller(threads):
    threads(2)

    def task(i):
        if i == 3:
            raise ValueError("task 3")

    with pytest.raises(ValueError, match="task 3"):
        cpu_threads.run_tasks(task, 8)
    assert blas.openblas().get_num_threads() == 2
    ran = []
    cpu_threads.run_tasks(ran.append, 4)  # (and tasks run again after it)
    assert sorted(ran) == [0, 1, 2, 3]


@needs_blas
def test_tasks_started_in_a_task_run_on_its_thread(threads):
    threads(2)
    inner = []

    def task(i):
        here = threading.current_thread().name
        cpu_threads.run_tasks(lambda j: inner.append(threading.current_thread().name == here), 3)

    cpu_threads.run_tasks(task, 2)
    assert inner == [True] * 6


def test_one_thread_runs_the_tasks_in_order_on_the_caller(threads):
    threads(1)
    ran = []
    cpu_threads.run_tasks(lambda i: ran.append((i, threading.current_thread().name)), 5)
    assert ran == [(i, threading.current_thread().name) for i in range(5)]


def _conv_step(x, w, b, g, **kw):
    """Output and the input, weight and bias gradients of numbagrad's conv2d, as arrays."""
    ours = [numbagrad.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = F.conv2d(*ours, **kw)
    out.backward(numbagrad.tensor(g))
    return [out.detach().numpy()] + [a.grad.numpy() for a in ours]


@needs_blas
@pytest.mark.parametrize(
    ("shape", "out_channels", "kw"),
    [
        ((7, 3, 9, 9), 5, {}),  # more output channels than input ones: col2im of w.T @ g
        ((6, 8, 8, 8), 4, {"padding": 1}),  # fewer: the flipped-weight convolution of g
        ((5, 4, 9, 9), 6, {"stride": 2, "padding": 1}),
    ],
)
def test_conv2d_in_tasks_matches_torch_and_is_the_same_from_run_to_run(torch, threads, small_tasks, shape,
                                                                        out_channels, kw):  # fmt: skip
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1], 3, 3)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32)
    t = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = torch.nn.functional.conv2d(*t, **kw)
    g = rng.standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(torch.tensor(g))
    expected = [out.detach().numpy()] + [a.grad.numpy() for a in t]
    threads(1)
    one = _conv_step(x, w, b, g, **kw)
    threads(2)
    two, again = _conv_step(x, w, b, g, **kw), _conv_step(x, w, b, g, **kw)
    for a, b_, c, e in zip(one, two, again, expected):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(b_, e, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(b_, c)


@needs_blas
def test_max_pool2d_in_tasks_matches_torch(torch, threads, small_tasks):
    threads(2)
    x = np.random.default_rng(0).standard_normal((3, 5, 8, 9)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan  # (NaN wins its window, in every task)
    ours, theirs = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, idx = F.max_pool2d(ours, 3, 2, 1, return_indices=True)
    t_out, t_idx = torch.nn.functional.max_pool2d(theirs, 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
    np.testing.assert_array_equal(idx.numpy(), t_idx.numpy())
    g = np.random.default_rng(1).standard_normal(tuple(t_out.shape)).astype(np.float32)
    out.backward(numbagrad.tensor(g))
    t_out.backward(torch.tensor(g))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-6)


@needs_blas
def test_more_threads_run_more_tasks_at_once(threads):
    threads(2)
    cpu_threads.run_tasks(lambda i: None, 4)
    threads(3)
    names = set()
    barrier = threading.Barrier(3, timeout=10)

    def task(i):
        if i < 3:  # (the first three wait for each other: three threads at once)
            barrier.wait()
        names.add(threading.current_thread().name)

    cpu_threads.run_tasks(task, 6)
    assert len(names) == 3


@needs_blas
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
def test_a_forked_child_runs_tasks_on_threads(threads):
    """A forked child has none of its parent's threads (OpenBLAS makes its workers again there)."""
    import multiprocessing

    threads(2)
    cpu_threads.run_tasks(lambda i: None, 4)  # (the parent's workers exist)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        ran = pool.apply_async(_tasks_on_threads).get(timeout=60)
    assert ran == (list(range(6)), 2)


def _tasks_on_threads():
    ran, names = [], set()
    barrier = threading.Barrier(2, timeout=10)

    def task(i):
        if i < 2:
            barrier.wait()
        ran.append(i)
        names.add(threading.current_thread().name)

    cpu_threads.run_tasks(task, 6)
    return sorted(ran), len(names)


@needs_blas
def test_a_compiled_function_runs_once_per_row_of_arguments_each_on_its_own_thread(threads):
    """``run_compiled``: no Python on the workers; each call gets a pointer to its own row."""
    from numba import carray, cfunc, types

    @cfunc(types.void(types.voidptr))
    def double_into_next(args):
        row = carray(args, (2,), np.int64)
        row[1] = 2 * row[0] + 1

    threads(2)
    rows = np.array([[3, 0], [10, 0]], np.int64)
    cpu_threads.run_compiled(double_into_next.address, rows)
    np.testing.assert_array_equal(rows[:, 1], [7, 21])


@pytest.mark.parametrize(
    "total, threads_, unit, expected",
    [
        (5, 2, 1, [(0, 2), (2, 3)]),
        (13, 2, 5, [(0, 5), (5, 8)]),
        (20, 2, 5, [(0, 10), (10, 10)]),
        (9, 3, 1, [(0, 3), (3, 3), (6, 3)]),
    ],
)
def test_compiled_shares_are_contiguous_runs_of_whole_units(monkeypatch, total, threads_, unit, expected):
    """``run_compiled_shares``: each share's row is the fields with its first item and count written in; the
    shares cover the items once, in order, as even as whole units allow (13 rows in blocks of 5: one block, then
    two, the second ragged)."""
    rows = []
    monkeypatch.setattr(cpu_threads, "run_compiled", lambda function, shares: rows.append((function, shares.copy())))
    fields = np.array([7, -1, -1, 9], np.int64)
    cpu_threads.run_compiled_shares(1234, fields, 1, 2, total, threads_, unit)
    ((function, shares),) = rows
    assert function == 1234
    assert [tuple(share[1:3]) for share in shares] == expected
    assert (shares[:, 0] == 7).all() and (shares[:, 3] == 9).all()


@needs_blas
def test_inside_a_task_no_threads_are_free(threads):
    threads(2)
    seen = []
    assert cpu_threads.free_threads() == 2
    cpu_threads.run_tasks(lambda i: seen.append(cpu_threads.free_threads()), 2)
    assert seen == [1, 1]


@needs_blas
def test_a_worker_keeps_its_python_thread_state_from_one_run_to_the_next(threads):
    threads(2)
    kept = threading.local()
    barrier = threading.Barrier(2, timeout=10)
    seen = {}

    def task(i):
        barrier.wait()  # (each thread takes one task)
        kept.runs = getattr(kept, "runs", 0) + 1
        seen[threading.get_ident()] = kept.runs

    for _ in range(3):
        cpu_threads.run_tasks(task, 2)
    worker = [ident for ident in seen if ident != threading.main_thread().ident]
    assert len(seen) == 2 and seen[worker[0]] == 3


@pytest.fixture
def task_counts(monkeypatch):
    """The thread counts ``cpu_threads.run_tasks`` was called with, in order."""
    counts = []
    real = cpu_threads.run_tasks
    monkeypatch.setattr(cpu_threads, "run_tasks", lambda task, count: counts.append(count) or real(task, count))
    return counts


def _gelu_and_its_gradient(x):
    y = F.gelu(x)
    y.backward(numbagrad.ones_like(y))
    return y, x.grad


def _product_and_both_gradients(x):
    w = (x * 0.5).detach().requires_grad_()
    y = x * w
    y.backward(numbagrad.ones_like(y))
    return y, x.grad, w.grad


def _in_place_tanh(x):
    y = x.detach().clone()
    return (y.tanh_(),)


def _a_row_broadcast_add(x):
    return (x.detach().reshape(-1, 7) + numbagrad.arange(7, dtype=x.dtype),)


def _softmax_and_log_softmax(x):
    return F.softmax(x.detach().reshape(-1, 7), dim=1), F.log_softmax(x.detach().reshape(7, -1), dim=0)


def _cross_entropy_and_its_gradient(x):
    logits = x.reshape(-1, 7)
    target = numbagrad.tensor(np.arange(len(logits)) % 7)
    loss = F.cross_entropy(logits, target, label_smoothing=0.1)
    loss.backward()
    return loss, x.grad


@needs_blas
@pytest.mark.parametrize("dtype", [numbagrad.float32, numbagrad.float64])
@pytest.mark.parametrize(
    "run, shared",
    [
        (_gelu_and_its_gradient, True),
        (_product_and_both_gradients, True),
        (_in_place_tanh, True),
        (_softmax_and_log_softmax, True),
        (_cross_entropy_and_its_gradient, True),
        (_a_row_broadcast_add, False),
    ],
)
def test_kernels_shared_among_threads_give_the_bits_of_one_thread(
    monkeypatch, on_one_and_two_threads, task_counts, dtype, run, shared
):
    """From ``SHARED_ELEMENTS`` on, a flat elementwise loop (forward, one gradient, two, in place) runs on each
    thread's contiguous part, and softmax's and cross entropy's row loops (maxima, exponentials, sums, the
    gradient) on each thread's rows; a row-broadcast loop, and the loss's sum over the rows, stay whole. Either
    way, the bits of one thread."""
    monkeypatch.setattr(cpu, "SHARED_ELEMENTS", 1000)
    monkeypatch.setattr(cpu, "SHARED_CHEAP_ELEMENTS", 1000)
    data = np.random.default_rng(0).standard_normal(7 * 1001) * 5

    def step():
        x = numbagrad.tensor(data, dtype=dtype, requires_grad=True)
        return [r.detach().numpy().copy() for r in run(x)]

    one, two = on_one_and_two_threads(step)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    assert (2 in task_counts) == shared


@needs_blas
def test_an_arithmetic_loop_is_shared_from_more_elements_than_a_transcendental_one(monkeypatch, threads, task_counts):
    """A row whose kernels evaluate transcendental functions (``Row.costly``: GELU) is shared from
    ``SHARED_ELEMENTS``, plain arithmetic (a product) only from ``SHARED_CHEAP_ELEMENTS``."""
    threads(2)
    monkeypatch.setattr(cpu, "SHARED_ELEMENTS", 1000)
    monkeypatch.setattr(cpu, "SHARED_CHEAP_ELEMENTS", 100_000)
    x = numbagrad.randn(5000)
    x * x
    assert task_counts == []
    F.gelu(x)
    assert task_counts == [2]
    numbagrad.randn(100_000) * 2.0
    assert task_counts == [2, 2]
