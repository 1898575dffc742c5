"""numbagrad fixes glibc's malloc thresholds at import, so same-size temporaries are not faulted in every step.

Each test runs a fresh Python: the settings are process-wide and are made once, at import.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from numbagrad.backend import malloc

pytestmark = pytest.mark.skipif(not malloc._is_glibc(), reason="the tuning is for glibc's malloc")

# Four 400 KB temporaries made and freed together, as a step's forward and backward do; minor page faults over
# 100 such steps, counted after 5 to warm up.
PROBE = textwrap.dedent(
    """
    import resource
    import numpy as np
    import numbagrad
    from numbagrad.backend import cpu

    def step():
        arrays = [np.ones(100_000, np.float32) for _ in range(4)]
        del arrays

    for _ in range(5):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        step()
    print(cpu.MALLOC_TUNED, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def probe(**env: str) -> tuple[bool, int]:
    """(whether numbagrad tuned malloc, page faults of the 100 steps) in a fresh process with ``env`` added.

    The package's bytecode is written first: compiling its sources at import allocates and frees blocks of a few
    MB, and glibc then raises its mmap threshold on its own, which would hide the policy being measured."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "NUMBAGRAD_TUNE_MALLOC"}
    clean.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", "import numbagrad"], env=clean, check=True)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0] == "True", int(out[1])


def test_steps_of_same_size_temporaries_reuse_the_heap():
    tuned, faults = probe()
    assert tuned
    assert faults < 100  # (each step would fault in about 300 pages again if the heap's top were trimmed)


def test_opting_out_leaves_glibc_as_it_was():
    tuned, faults = probe(NUMBAGRAD_TUNE_MALLOC="0")
    assert not tuned
    assert faults > 100 * 50  # glibc's own policy: trimmed and faulted in again each step


def test_a_users_own_malloc_setting_is_kept():
    tuned, _ = probe(MALLOC_TOP_PAD_="0")
    assert not tuned


def test_glibc_tunables_for_malloc_are_kept(monkeypatch):
    monkeypatch.delenv("NUMBAGRAD_TUNE_MALLOC", raising=False)
    for name in malloc._USER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")
    assert not malloc.wanted()
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F")
    assert malloc.wanted()
