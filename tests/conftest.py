"""Shared fixtures. ``device`` runs a test on cpu, and on cuda when CUDA (or Numba's simulator) is available."""

import os

import numpy as np
import pytest

import numbagrad


def _cuda_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        try:
            from numba import cuda

            return cuda.is_available()
        except Exception:
            return False
    return True


CUDA = _cuda_available() and os.environ.get("NUMBAGRAD_TEST_CUDA", "1") == "1"


@pytest.fixture(scope="session")
def torch():
    """torch, the oracle of the comparisons: a test that takes it skips where torch is not installed."""
    return pytest.importorskip("torch")


@pytest.fixture(params=["cpu"] + (["cuda"] if CUDA else []))
def device(request):
    return request.param


@pytest.fixture
def on_one_and_two_threads():
    """``run()``'s result on one thread, then on two, as a list (the test skipped where numpy's BLAS cannot run
    tasks): for the compiled kernels whose shares of work must give the bits of one thread."""
    from numbagrad.backend import blas

    if blas.openblas() is None or not blas.openblas().runs_tasks:
        pytest.skip("numpy links a BLAS whose threads cannot run tasks")

    def results(run) -> list:
        before = numbagrad.get_num_threads()
        try:
            out = []
            for threads in (1, 2):
                numbagrad.set_num_threads(threads)
                out.append(run())
            return out
        finally:
            numbagrad.set_num_threads(before)

    return results


@pytest.fixture
def conv2d_on_spied_kernels(torch, monkeypatch):
    """``run(module, x_shape, w_shape, dtype) -> (ran, pairs)``: a padded 3x3 ``F.conv2d`` and its backward, in
    numbagrad and torch, from the same random operands, with ``module.forward`` and ``module.weight_grad`` spied:
    ``ran`` lists the forwards' input shapes and ``"weight"``, in order; ``pairs`` the (ours, torch's) output and
    the gradients of the input, weight and bias, as arrays."""

    def run(module, x_shape, w_shape, dtype):
        ran, real, real_grad = [], module.forward, module.weight_grad
        monkeypatch.setattr(module, "forward", lambda *args: ran.append(args[0].shape) or real(*args))
        monkeypatch.setattr(module, "weight_grad", lambda *args: ran.append("weight") or real_grad(*args))
        rng = np.random.default_rng(3)
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape) * 0.1
        b, g = rng.standard_normal(w_shape[0]), rng.standard_normal((x_shape[0], w_shape[0], *x_shape[2:]))
        ours = [numbagrad.tensor(a.astype(dtype), requires_grad=True) for a in (x, w, b)]
        theirs = [torch.tensor(a.astype(dtype), requires_grad=True) for a in (x, w, b)]
        out = numbagrad.nn.functional.conv2d(*ours, padding=1)
        expected = torch.nn.functional.conv2d(*theirs, padding=1)
        out.backward(numbagrad.tensor(g.astype(dtype)))
        expected.backward(torch.tensor(g.astype(dtype)))
        pairs = [(out.detach().numpy(), expected.detach().numpy())]
        return ran, pairs + [(a.grad.numpy(), e.grad.numpy()) for a, e in zip(ours, theirs)]

    return run


@pytest.fixture(autouse=True)
def _reset_state():
    """Each test starts with grad mode on, anomaly mode off, and a fixed seed."""
    from numbagrad.autograd.grad_mode import state

    state.enabled, state.inference, state.anomaly = True, False, False
    numbagrad.manual_seed(0)
    np.random.seed(0)
    yield
    state.enabled, state.inference, state.anomaly = True, False, False
