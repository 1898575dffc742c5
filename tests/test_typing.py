"""The type stubs: they are current, and mypy accepts typed user code with them (and still finds real errors)."""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import numbagrad
from numbagrad import Tensor
from numbagrad._stubs import _Writer

SRC = Path(numbagrad.__file__).resolve().parent.parent

USER_PROGRAM = """
import numbagrad
import numbagrad.nn as nn
from numbagrad import Tensor


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x).relu()


def loss_of(t: Tensor) -> Tensor:
    return (t * 2).relu().sum()


t = numbagrad.zeros(2, 3, requires_grad=True)
u = numbagrad.ones(6).view(2, 3)
s = -(1.0 - t + u * 2) / 2 @ u.T
loss_of(t).backward()
row = t[0, 1:]
shape: tuple[int, ...] = t.shape
n: int = t.dim() + t.numel()
net = Net()
opt = numbagrad.optim.SGD(net.parameters(), lr=0.1)
net(numbagrad.randn(4, 3)).mean().backward()
opt.step()
opt.zero_grad()
with numbagrad.no_grad():
    y = t.exp().float()
dtype: numbagrad.dtype = y.dtype
reveal_type(s)
reveal_type(row)
reveal_type(y)
"""

WRONG_PROGRAM = """
import numbagrad

numbagrad.zeros(2).nonexistent_method()
"""

# numbagrad's own modules are read but not judged (as for an installed package); the stubs themselves are.
MYPY_CONFIG = """
[mypy]
ignore_missing_imports = True
[mypy-numbagrad.*]
ignore_errors = True
[mypy-numbagrad]
ignore_errors = False
[mypy-numbagrad._tensor]
ignore_errors = False
"""


def test_committed_stubs_are_the_generators_output():
    """A fresh process (so nothing a test registered leaks in) regenerates the stubs and compares."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    result = subprocess.run(
        [sys.executable, "-m", "numbagrad._stubs", "--check"], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"stale stubs: run `python -m numbagrad._stubs`\n{result.stdout}{result.stderr}"


def _defined_names(body: list[ast.stmt]) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def test_tensor_stub_has_every_tensor_attribute():
    """Each method, operator and property the live Tensor has (bound by the ops or written in the class)."""
    tree = ast.parse((SRC / "numbagrad" / "_tensor.pyi").read_text())
    (tensor,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor"]
    expected = set(vars(Tensor)) - {"__module__", "__doc__", "__dict__", "__weakref__", "__annotations__"}
    assert expected - _defined_names(tensor.body) == set()


def test_package_stub_has_every_public_name():
    tree = ast.parse((SRC / "numbagrad" / "__init__.pyi").read_text())
    assert set(numbagrad.__all__) | {"nn", "optim", "no_grad"} <= _defined_names(tree.body)


def test_a_bound_op_becomes_a_method_without_its_tensor_argument():
    def op(input: Tensor, dim: int | None = None, *, keepdim: bool = False) -> Tensor:
        return input

    (line,) = _Writer("numbagrad._tensor", frozenset()).function("op", op, method="bound")
    assert line == "def op(self, dim: builtins.int | None = ..., *, keepdim: builtins.bool = ...) -> Tensor: ..."


def test_an_unannotated_function_returns_any_unless_a_table_row_makes_it():
    def sin(input):
        return input

    assert _Writer("numbagrad", frozenset()).function("sin", sin) == ["def sin(input: typing.Any) -> typing.Any: ..."]
    row_made = _Writer("numbagrad", frozenset({"sin"})).function("sin", sin)
    assert row_made == ["def sin(input: typing.Any) -> numbagrad._tensor.Tensor: ..."]


def test_mypy_accepts_typed_user_code_and_rejects_a_missing_method(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "user_program.py").write_text(textwrap.dedent(USER_PROGRAM))
    (tmp_path / "wrong_program.py").write_text(textwrap.dedent(WRONG_PROGRAM))
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    env = dict(os.environ)
    if "site-packages" not in SRC.parts:  # (a source checkout: point mypy at it; an installed copy it finds itself)
        env["MYPYPATH"] = str(SRC)
    command = [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini")]
    command += ["--cache-dir", str(tmp_path / "cache"), "user_program.py", "wrong_program.py"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    lines = result.stdout.splitlines()
    errors = [line for line in lines if ": error:" in line]
    assert errors == ['wrong_program.py:4: error: "Tensor" has no attribute "nonexistent_method"  [attr-defined]'], (
        result.stdout + result.stderr
    )
    revealed = [line.split("Revealed type is ")[1] for line in lines if "Revealed type is" in line]
    assert revealed == ['"numbagrad._tensor.Tensor"'] * 3
