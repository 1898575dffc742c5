"""The demo, ``python -m numbagrad``: it runs, shows its parts, trains to a high accuracy and exits 0; it reports
progress with tqdm's bar when tqdm is installed and with plain lines when it is not, and ``--plot FILE`` saves the
decision boundary as a PNG (with matplotlib) or says how to get matplotlib."""

import re
import subprocess
import sys

import pytest

# Runs the demo as ``python -m numbagrad`` would, with the named modules made unimportable (as if not installed).
_BLOCKED_RUN = """
import runpy, sys
blocked, args = sys.argv[1].split(","), sys.argv[2:]
for name in filter(None, blocked):
    sys.modules[name] = None  # "import name" now raises ImportError
sys.argv = ["python -m numbagrad", *args]
runpy.run_module("numbagrad", run_name="__main__", alter_sys=True)
"""


def _demo(*args: str, blocked: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, ",".join(blocked), *args], capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def demo_run():
    return subprocess.run(
        [sys.executable, "-m", "numbagrad", "--epochs", "40", "--seed", "0"],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_demo_exits_zero(demo_run):
    assert demo_run.returncode == 0, demo_run.stderr


def test_demo_shows_a_custom_function_with_grad_fn_and_gradients(demo_run):
    out = demo_run.stdout
    assert "Cube.apply(x) = tensor([ 1.,  8., 27.], grad_fn=<CubeBackward>)" in out
    assert "x.grad        = tensor([ 3., 12., 27.])" in out
    assert "grad_fn=<SwishBackward>" in out


def test_demo_prints_the_model(demo_run):
    assert "Linear(in_features=2, out_features=64, bias=True)" in demo_run.stdout


def test_demo_shows_tqdms_bar_with_the_loss_when_tqdm_is_installed(demo_run):
    pytest.importorskip("tqdm")
    assert re.search(r"training: 100%.*40/40.*loss=\d\.\d{4}", demo_run.stderr)


def test_demo_training_reaches_its_accuracy(demo_run):
    accuracy = float(re.search(r"final accuracy: ([\d.]+)%", demo_run.stdout).group(1))
    assert accuracy >= 95.0


def test_demo_without_tqdm_prints_plain_progress_lines():
    run = _demo("--epochs", "20", blocked=("tqdm",))
    assert run.returncode == 0, run.stderr
    lines = re.findall(r"^   epoch +(\d+)/20  loss (\d\.\d{4})$", run.stdout, flags=re.MULTILINE)
    assert [int(epoch) for epoch, _ in lines] == list(range(2, 21, 2))
    assert "training:" not in run.stderr and "%|" not in run.stderr
    assert re.search(r"final accuracy: [\d.]+%", run.stdout)


def test_demo_plot_saves_the_decision_boundary_and_says_where(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    target = tmp_path / "boundary.png"
    run = _demo("--epochs", "5", "--plot", str(target))
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip().splitlines()[-1] == f"decision boundary saved to {target}"
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(str(target))
    assert image.shape[0] > 300 and image.shape[1] > 300
    red, blue = image[..., 0], image[..., 2]
    assert (red > blue + 0.2).mean() > 0.05 and (blue > red + 0.2).mean() > 0.05  # both classes' regions drawn


def test_demo_plot_without_matplotlib_says_how_to_get_it_before_training(tmp_path):
    target = tmp_path / "boundary.png"
    run = _demo("--plot", str(target), blocked=("matplotlib",))
    assert run.returncode == 2
    assert "--plot needs matplotlib, which is not installed: pip install 'numbagrad[plot]'" in run.stderr
    assert run.stdout == "" and not target.exists()


def test_demo_two_spirals_are_balanced_and_on_the_unit_disk():
    import numpy as np

    from numbagrad.__main__ import two_spirals

    x, y = two_spirals(100, np.random.default_rng(0))
    assert x.shape == (200, 2) and (y == 0).sum() == (y == 1).sum() == 100
    assert np.abs(x).max() < 1.1
