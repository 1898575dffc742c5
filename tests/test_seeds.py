"""The seed documents' example programs (``/work/shared/seeds``) run under numbagrad and print what they show.

Each program is saved in ``examples/seeds/<name>.py`` exactly as in its document except for the first line,
``import numbagrad as torch``; ``<name>.out`` holds the printed output and ``<name>.err`` the last line of an
expected traceback. They are the examples users run (``python examples/seeds/<name>.py`` from the repository
root), and they run here the same way: from the repository root, by that relative path.

The Chinese document's code was collapsed onto single lines: it was re-indented faithfully, and its collapsed
outputs restored to torch's layout (checked against PyTorch 2.13). The Russian documents lost torch's column
padding (``tensor([7., 9., 11.])``): the ``.out`` files have it (``tensor([ 7.,  9., 11.])``).

Deliberate differences from the documents:
- ``torch.Size([1, 3])`` prints as ``numbagrad.Size([1, 3])``: numbagrad names itself (SPEC §1).
- ``backward_add_and_multiply``: the document shows ``tensor([6.]) tensor([5.])``, but d(a+b+ab)/da = 1+b = 4 and
  d/db = 1+a = 3 (SPEC §8); ``backward_multiply_by_two``: the document shows ``tensor([6.])``, but the backward
  returns ``grad_output * 2`` = 2 (PyTorch 2.13 prints ``tensor([2.])`` too).
- ``function_add_constant_backward`` returns a gradient for the float ``5.0``: torch fails, numbagrad warns and
  drops it (SPEC §2).
- ``tensor_apply_cuda``: the document shows torch's ``TypeError: apply_ is only implemented on CPU tensors``;
  numbagrad runs ``apply_`` on CUDA tensors too (SPEC §5), so the program succeeds (run under Numba's simulator).
- ``linear_function`` (the one the README points newcomers at) ends with a few lines that call
  ``LinearFunction.apply`` and print the result and gradients: the document says so in prose but shows no call.
- Programs that draw random numbers (``RANDOM``) print other digits than the document (numbagrad's generator is
  not torch's): their output is compared with numbers and addresses masked, and the relationship the program
  demonstrates is checked on its variables.
"""

import contextlib
import functools
import importlib.util
import io
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import numbagrad

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
SEEDS = EXAMPLES / "seeds"
NAMES = sorted(p.stem for p in SEEDS.glob("*.py"))
RANDOM = {"custom_relu", "tensor_apply_add", "vjp_cube", "backward_norm"}
NEEDS_NN = {"backward_custom_linear", "modulelist_apply_init_weights"}
NEEDS_CUDA = {"tensor_apply_cuda"}

_NN_MISSING = not hasattr(numbagrad.nn, "Module")
_CUDA_BACKEND_MISSING = importlib.util.find_spec("numbagrad.backend.cuda") is None


def _marks(name: str) -> list:
    marks = []
    if name in NEEDS_NN:
        marks.append(pytest.mark.skipif(_NN_MISSING, reason="numbagrad.nn has no Module yet"))
    if name in NEEDS_CUDA:
        marks.append(pytest.mark.skipif(_CUDA_BACKEND_MISSING, reason="numbagrad.backend.cuda is not written yet"))
    return marks


# Runs seeds one after another in one fresh interpreter (Numba's start-up is paid once, not per seed); each
# seed gets fresh globals and its own captured stdout and stderr.
_RUNNER = """
import contextlib, io, json, runpy, sys, traceback
import numbagrad
from numbagrad.autograd.grad_mode import state
results = {}
for path in sys.argv[1:]:
    out, err = io.StringIO(), io.StringIO()
    ok = True
    state.enabled, state.inference, state.anomaly = True, False, False
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(path, run_name="__main__")
        except Exception:
            ok = False
            traceback.print_exc()
    results[path] = [ok, out.getvalue(), err.getvalue()]
print(json.dumps(results))
"""


def _as_typed(name: str) -> str:
    """The seed's path as a user types it from the repository root."""
    return str((SEEDS / f"{name}.py").relative_to(ROOT))


def _run_alone(name: str) -> subprocess.CompletedProcess:
    """A seed in its own interpreter: for expected tracebacks (as Python itself prints them) and the CUDA one."""
    env = dict(os.environ)
    if name in NEEDS_CUDA:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return subprocess.run(
        [sys.executable, _as_typed(name)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120
    )


def _runs_alone(name: str) -> bool:
    return name in NEEDS_CUDA or (SEEDS / f"{name}.err").exists()


@functools.cache
def _shared_run() -> dict:
    """{name: (succeeded, stdout, stderr)} for every seed that does not run alone."""
    paths = [_as_typed(n) for n in NAMES if not _runs_alone(n)]
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, *paths], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return {Path(p).stem: tuple(r) for p, r in json.loads(proc.stdout.splitlines()[-1]).items()}


def _run(name: str) -> tuple[bool, str, str]:
    if _runs_alone(name):
        proc = _run_alone(name)
        return proc.returncode == 0, proc.stdout, proc.stderr
    return _shared_run()[name]


def _mask(text: str) -> str:
    """The output's structure: numbers and addresses replaced by ``#``, whitespace (column padding) removed."""
    text = re.sub(r"0x[0-9a-f]+", "0x#", text)
    text = re.sub(r"-?\d+\.\d*(?:e[+-]?\d+)?", "#", text)
    return "".join(text.split())


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in NAMES])
def test_seed_prints_the_documented_output(name):
    succeeded, stdout, stderr = _run(name)
    expected = (SEEDS / f"{name}.out").read_text() if (SEEDS / f"{name}.out").exists() else ""
    err_file = SEEDS / f"{name}.err"
    if err_file.exists():
        assert not succeeded
        assert stderr.strip().splitlines()[-1] == err_file.read_text().strip()
    else:
        assert succeeded, stderr
    if name in RANDOM:
        assert _mask(stdout) == _mask(expected)
    else:
        assert stdout == expected


def test_every_seed_has_its_expected_output():
    for name in NAMES:
        assert (SEEDS / f"{name}.out").exists() or (SEEDS / f"{name}.err").exists(), name


def test_every_example_is_a_seed_checked_here():
    """An example outside ``examples/seeds/`` would run nowhere: put it there with its ``.out`` (or test it)."""
    assert len(NAMES) >= 24
    tested_elsewhere = {EXAMPLES / "ddp_spirals.py"}  # run under mpiexec by tests/distributed/test_distributed_launch
    assert sorted(set(EXAMPLES.rglob("*.py")) - tested_elsewhere) == sorted(SEEDS.glob("*.py"))


def _run_here(name: str) -> tuple[dict, str]:
    """Run a seed in this process; return its variables and what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        namespace = runpy.run_path(str(SEEDS / f"{name}.py"))
    return namespace, out.getvalue()


def _numbers(line: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(r"-?\d+\.\d*(?:e[+-]?\d+)?", line)])


def test_add_constant_warns_and_drops_the_gradient_of_the_float():
    _, _, stderr = _run("function_add_constant_backward")
    assert (
        "function AddConstantBackward returned a gradient different than None at position 2, but the "
        "corresponding forward input was not a Tensor; it is ignored"
    ) in stderr
    assert "UserWarning" in stderr
    with pytest.warns(UserWarning, match="at position 2, but the corresponding forward input was not a Tensor"):
        namespace, _ = _run_here("function_add_constant_backward")
    assert namespace["t"].grad.tolist() == [1.0, 1.0, 1.0]


def test_custom_relu_gradient_is_the_positive_mask():
    namespace, _ = _run_here("custom_relu")
    a, output = namespace["a"], namespace["output"]
    x = a.detach().numpy()
    np.testing.assert_array_equal(output.detach().numpy(), np.maximum(x, 0))
    np.testing.assert_array_equal(a.grad.numpy(), (x > 0).astype(np.float32))
    assert type(output.grad_fn).__name__ == "CustomReLUFunctionBackward"


def test_tensor_apply_adds_one_in_place():
    namespace, printed = _run_here("tensor_apply_add")
    lines = printed.splitlines()
    before, after = _numbers(" ".join(lines[0:2])), _numbers(" ".join(lines[2:4]))
    np.testing.assert_allclose(after, before + 1, atol=1e-4)
    assert namespace["b"] is namespace["a"]
    assert lines[-1] == "True"


def test_vjp_cube_gradient_is_three_x_squared():
    namespace, _ = _run_here("vjp_cube")
    x = namespace["x"].detach().numpy()
    np.testing.assert_allclose(namespace["x"].grad.numpy(), 3 * x**2, rtol=1e-6)


def test_backward_norm_gradients():
    namespace, printed = _run_here("backward_norm")
    lines = printed.splitlines()
    assert lines[0] == lines[2]  # y.grad is the gradient passed to y.backward
    x = namespace["x"].detach().numpy().astype(np.float64)
    np.testing.assert_allclose(namespace["x"].grad.numpy(), x / np.linalg.norm(x), rtol=1e-5)
    assert namespace["z"].grad.item() == 1.0


def test_mul_constant_seeds_scale_the_gradient():
    for name in ("mul_constant", "mul_constant_no_materialize"):
        mul_constant = _run_here(name)[0]["MulConstant"]
        x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
        mul_constant.apply(x, 3.0).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]


def test_linear_function_matches_the_formula():
    linear = _run_here("linear_function")[0]["LinearFunction"]
    dtype = numbagrad.float64
    inp = numbagrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=dtype, requires_grad=True)
    weight = numbagrad.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], dtype=dtype, requires_grad=True)
    bias = numbagrad.tensor([0.25, -0.75], dtype=dtype, requires_grad=True)
    out = linear.apply(inp, weight, bias)
    np.testing.assert_allclose(out.detach().numpy(), inp.detach().numpy() @ weight.detach().numpy().T + [0.25, -0.75])
    assert numbagrad.autograd.gradcheck(linear.apply, (inp, weight, bias))
