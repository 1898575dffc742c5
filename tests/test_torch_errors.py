"""Bad input gets torch's exception type (and message): each row runs one program with ``m = torch`` and with
``m = numbagrad`` and requires the same exception, leaving the inputs as they were."""

from __future__ import annotations

import pytest

import numbagrad


def _raised(program, m):
    try:
        program(m)
    except Exception as e:  # noqa: BLE001 - the exception is what is compared
        return type(e), str(e)
    return None, None


def _F(m):
    return m.nn.functional


# name -> (program, compare messages too)
ERRORS = {
    "narrow past the end": (lambda m: m.arange(5).narrow(0, 4, 2), True),
    "narrow start out of range": (lambda m: m.arange(5).narrow(0, -6, 1), True),
    "narrow negative length": (lambda m: m.arange(5).narrow(0, 0, -1), True),
    "narrow of 0-d": (lambda m: m.tensor(1.0).narrow(0, 0, 1), True),
    "negative slice step": (lambda m: m.arange(5)[::-1], True),
    "index put of another dtype": (lambda m: m.zeros(3).__setitem__(m.tensor([0]), m.ones(1, dtype=m.float64)), True),
    "index put after an int of another dtype": (
        lambda m: m.zeros(2, 3).__setitem__((0, [0]), m.ones(1, dtype=m.int64)),
        True,
    ),
    "invert of float": (lambda m: ~m.ones(2), True),
    "integer pow with a negative scalar exponent": (lambda m: m.tensor([2, 3]) ** -1, True),
    "index_add_ with a source of another shape": (
        lambda m: m.zeros(3, 2).index_add_(0, m.tensor([0, 1]), m.ones(2, 3)),
        True,
    ),
    "index_add_ with too many indices": (lambda m: m.zeros(3).index_add_(0, m.tensor([0, 1]), m.ones(3)), True),
    "sum over a repeated dim": (lambda m: m.ones(2, 3).sum((0, 0)), True),
    "sum over a repeated negative dim": (lambda m: m.ones(2, 3).sum((1, -1)), True),
    "argmax of an empty tensor": (lambda m: m.zeros(0).argmax(), True),
    "argmin over an empty dim": (lambda m: m.zeros(2, 0).argmin(1), True),
    "argmax of bool": (lambda m: m.tensor([True, False]).argmax(), True),
    "sum to an integer dtype with autograd": (lambda m: m.ones(2, requires_grad=True).sum(dtype=m.int64), True),
    "cumsum to an integer dtype with autograd": (
        lambda m: m.ones(2, requires_grad=True).cumsum(0, dtype=m.int32),
        True,
    ),
    "var with unbiased and keepdim but no dim": (lambda m: m.ones(2, 3).var(unbiased=True, keepdim=True), False),
    "std with unbiased and keepdim but no dim": (lambda m: m.ones(2, 3).std(unbiased=False, keepdim=True), False),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(torch, name):
    program, messages = ERRORS[name]
    want, got = _raised(program, torch), _raised(program, numbagrad)
    assert want[0] is not None
    assert got[0] is not None and got[0].__name__ == want[0].__name__, got
    if messages:
        assert got[1] == want[1]
