"""The demo, ``python -m numbagrad``: it runs, shows its parts, trains to a high accuracy and exits 0."""

import re
import subprocess
import sys

import pytest

pytest.importorskip("tqdm")


@pytest.fixture(scope="module")
def demo_run():
    return subprocess.run(
        [sys.executable, "-m", "numbagrad", "--epochs", "40", "--seed", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_exits_zero(demo_run):
    assert demo_run.returncode == 0, demo_run.stderr


def test_demo_shows_a_custom_function_with_grad_fn_and_gradients(demo_run):
    out = demo_run.stdout
    assert "Cube.apply(x) = tensor([ 1.,  8., 27.], grad_fn=<CubeBackward>)" in out
    assert "x.grad        = tensor([ 3., 12., 27.])" in out
    assert "grad_fn=<SwishBackward>" in out


def test_demo_prints_the_model_and_a_progress_bar_with_the_loss(demo_run):
    assert "Linear(in_features=2, out_features=64, bias=True)" in demo_run.stdout
    assert re.search(r"training: 100%.*40/40.*loss=\d\.\d{4}", demo_run.stderr)


def test_demo_training_reaches_its_accuracy(demo_run):
    accuracy = float(re.search(r"final accuracy: ([\d.]+)%", demo_run.stdout).group(1))
    assert accuracy >= 95.0


def test_demo_two_spirals_are_balanced_and_on_the_unit_disk():
    import numpy as np

    from numbagrad.__main__ import two_spirals

    x, y = two_spirals(100, np.random.default_rng(0))
    assert x.shape == (200, 2) and (y == 0).sum() == (y == 1).sum() == 100
    assert np.abs(x).max() < 1.1
