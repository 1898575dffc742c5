"""Disagreements with torch that tests/test_fuzz_torch.py found, each pinned by the smallest program that showed
it (values, dtypes or exception types compared with torch)."""

import pytest

import numbagrad


def _error(lib, program):
    with pytest.raises(Exception) as info:
        program(lib)
    return type(info.value).__name__, str(info.value)


def test_functional_batch_norm_takes_a_float_momentum_only(torch):
    def program(m):
        return m.nn.functional.batch_norm(m.zeros(2, 1), m.zeros(1), m.ones(1), training=True, momentum=None)

    assert _error(numbagrad, program) == _error(torch, program)
