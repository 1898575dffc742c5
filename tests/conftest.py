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


@pytest.fixture(autouse=True)
def _reset_state():
    """Each test starts with grad mode on, anomaly mode off, and a fixed seed."""
    from numbagrad.autograd.grad_mode import state

    state.enabled, state.inference, state.anomaly = True, False, False
    numbagrad.manual_seed(0)
    np.random.seed(0)
    yield
    state.enabled, state.inference, state.anomaly = True, False, False
