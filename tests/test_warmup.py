"""``numbagrad.warmup``: a step run once, or a saved manifest replayed, leaves nothing to compile on the first real
step of a process; the manifest's parts (the record, the type codes, the generated text) behave as that needs."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from numba.core import types as nt

import numbagrad
from numbagrad.backend import codegen

MLP_STEP = """
    import logging, sys
    import numbagrad as torch

    class Collect(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    log = logging.getLogger("numbagrad")
    log.setLevel(logging.DEBUG)
    collect = Collect()
    log.addHandler(collect)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(5, 4), torch.randn(5, 1)

    def step():
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss
"""


def run_python(code: str, cache: str, hash_seed: str) -> list[str]:
    """Run ``code`` in a new process with its own kernel cache directory; the lines it printed."""
    env = {**os.environ, "NUMBAGRAD_CACHE_DIR": cache, "PYTHONHASHSEED": hash_seed}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MLP_STEP) + textwrap.dedent(code)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_a_process_warmed_up_from_a_manifest_compiles_nothing_on_its_first_step(tmp_path):
    manifest = tmp_path / "kernels.json"
    run_python(f"torch.warmup(step, save={str(manifest)!r})", str(tmp_path / "recording"), "1")
    lines = run_python(
        f"""
        count = torch.warmup(manifest={str(manifest)!r})
        replayed, collect.lines = collect.lines, []
        step()
        generated = sum("compiled kernel" in line for line in replayed)
        importable = sum("loaded kernel" in line and "nn_kernels" in line for line in replayed)
        print(count, generated, importable)
        print(*collect.lines, sep="\\n")
        """,
        str(tmp_path / "empty"),  # an empty cache: the replay compiles, from the manifest's own source text
        "2",  # another string hashing than the recording process's
    )
    # every kernel the manifest names is made ready: a generated one compiled from its text; a hand-written one
    # (``nn_kernels``: the bias gradient's row sums) compiled, or loaded from Numba's cache beside its module,
    # which the recording process filled
    count, generated, importable = map(int, lines[0].split())
    assert count > 0 and generated + importable == count
    assert [line for line in lines[1:] if "compiled" in line] == []


def test_warmup_runs_the_step_once_with_its_arguments_and_returns_its_result():
    calls = []

    def step(a, *, b):
        calls.append((a, b))
        return (numbagrad.tensor([a]) * b).sum()

    assert numbagrad.warmup(step, 2.0, b=3.0).item() == 6.0
    assert calls == [(2.0, 3.0)]


def test_the_manifest_lists_what_the_process_compiled_with_its_source(tmp_path):
    (numbagrad.tensor([1.0, 2.0], dtype=numbagrad.float64) * 3).sum()
    numbagrad.warmup_manifest(tmp_path / "m.json")
    saved = json.loads((tmp_path / "m.json").read_text())
    entries = [e for e in saved["kernels"] if e.get("tag") == "mul_forward_as"]
    assert entries and all("def kernel(" in e["source"] for e in entries)
    assert {"array": "float64", "ndim": 1, "layout": "C", "readonly": False} in [a for e in entries for a in e["args"]]


def test_replaying_a_manifest_compiles_its_kernels_in_this_process():
    name = "user_twice_" + os.urandom(4).hex()
    source = codegen.module_source("serial", codegen.loop_source("serial", "kernel", "res, x", "res[i] = 2 * x[i]",
                                                                 "res.shape[0]"))  # fmt: skip
    entry = {"tag": name, "source": source, "function": "kernel", "args": [codegen._encode_type(nt.float32[::1])] * 2}
    assert codegen.replay({"format": codegen.MANIFEST_FORMAT, "kernels": [entry]}) == 1
    kernel = codegen.load_module(name, source).kernel
    assert kernel.signatures == [(nt.float32[::1], nt.float32[::1])]


@pytest.mark.parametrize(
    "numba_type",
    [nt.float32[::1], nt.Array(nt.float64, 2, "A", readonly=True), nt.int64, nt.boolean, nt.none,
     nt.UniTuple(nt.int64, 2), nt.Tuple((nt.float32, nt.int32))],
)  # fmt: skip
def test_argument_types_survive_the_manifest(numba_type):
    code = json.loads(json.dumps(codegen._encode_type(numba_type)))
    assert codegen._decode_type(code) == numba_type


def test_a_file_that_is_not_a_manifest_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"kernels": []}))
    with pytest.raises(ValueError, match="not a numbagrad warm-up manifest"):
        numbagrad.warmup(manifest=path)


def test_a_manifest_with_a_step_is_refused(tmp_path):
    with pytest.raises(TypeError, match="takes no step"):
        numbagrad.warmup(lambda: None, manifest=tmp_path / "m.json")


def test_the_row_based_form_keeps_its_signature():
    numbagrad.warmup(["neg"], ("float64",))
    assert ("neg", "forward", "a", "serial") in codegen.KERNELS


# Six helpers read by one function: their copies are written in name order, whatever the string hashing of the
# process (a set's order would give another generated text, and so another cached file, in each process).
def _h_a(x):
    return x


def _h_b(x):
    return x


def _h_c(x):
    return x


def _h_d(x):
    return x


def _h_e(x):
    return x


def _h_f(x):
    return x


def _uses_helpers(x):
    return _h_f(x) + _h_d(x) + _h_b(x) + _h_e(x) + _h_a(x) + _h_c(x)


def test_copied_helpers_come_in_name_order():
    copied = codegen.copyable([_uses_helpers])
    assert [f.__name__ for f in copied] == ["_uses_helpers", "_h_a", "_h_b", "_h_c", "_h_d", "_h_e", "_h_f"]
