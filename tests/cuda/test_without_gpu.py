"""Without a GPU (and without the simulator): importing is free of numba.cuda, and cuda tensors fail clearly."""

import os
import subprocess
import sys

import pytest


def run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_import_does_not_import_numba_cuda():
    result = run("import sys, numbagrad, numbagrad.cuda; print('numba.cuda' in sys.modules)")
    assert result.stdout.strip() == "False", result.stderr


def test_cuda_tensor_without_cuda_names_the_cause_and_the_simulator():
    code = "import numbagrad\ntry:\n    numbagrad.ones(2, device='cuda')\nexcept RuntimeError as e:\n    print(e)\n"
    result = run(code + "print(numbagrad.cuda.is_available())")
    from numba import cuda

    if cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert "CUDA is not available" in result.stdout and "NUMBA_ENABLE_CUDASIM=1" in result.stdout, result.stderr
    assert result.stdout.strip().endswith("False")
