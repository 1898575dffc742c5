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
    "bmm inner dims differ": (lambda m: m.bmm(m.ones(1, 2, 3), m.ones(1, 2, 3)), True),
    "bmm batches differ": (lambda m: m.bmm(m.ones(2, 2, 3), m.ones(1, 3, 3)), True),
    "bmm of two dtypes": (lambda m: m.bmm(m.ones(1, 2, 2), m.ones(1, 2, 2, dtype=m.float64)), True),
    "baddbmm inner dims differ": (lambda m: m.baddbmm(m.ones(1, 2, 2), m.ones(1, 2, 3), m.ones(1, 2, 2)), True),
    "mv of two dtypes": (lambda m: m.mv(m.ones(2, 2), m.ones(2, dtype=m.float64)), True),
    "mv of two dtypes, the other way": (lambda m: m.mv(m.ones(2, 2, dtype=m.float64), m.ones(2)), True),
    "einsum contraction of two dtypes": (lambda m: m.einsum("i,i->", m.ones(2), m.ones(2, dtype=m.int64)), True),
    "cat of 0-d tensors": (lambda m: m.cat([m.tensor(1.0), m.tensor(2.0)]), True),
    "cat of a 0-d tensor after an empty one": (lambda m: m.cat([m.zeros(0), m.tensor(2.0)]), True),
    "isclose shapes that do not broadcast": (lambda m: m.isclose(m.ones(2), m.ones(3)), True),
    "isclose of two dtypes": (lambda m: m.isclose(m.ones(2), m.ones(2, dtype=m.float64)), True),
    "allclose of two dtypes": (lambda m: m.allclose(m.ones(2), m.ones(2, dtype=m.float64)), True),
    "isclose with a number": (lambda m: m.isclose(m.ones(2), 1.0), True),
    "reshape without a shape": (lambda m: m.ones(2).reshape(), True),
    "permute without dims": (lambda m: m.ones(2).permute(), True),
    "view without a shape": (lambda m: m.ones(2).view(), False),
    "maximum with a number": (lambda m: m.maximum(m.ones(2), 1.5), True),
    "minimum of a number": (lambda m: m.minimum(1.5, m.ones(2)), True),
    "fmax with a number": (lambda m: m.fmax(m.ones(2), 1.5), True),
    "lt of a number first": (lambda m: m.lt(1.5, m.ones(2)), False),
    "logical_and with a number": (lambda m: m.logical_and(m.ones(2), 1), True),
    "trunc of bool": (lambda m: m.tensor([True]).trunc(), True),
    "ceil of bool": (lambda m: m.tensor([True]).ceil(), True),
    "floor of bool": (lambda m: m.tensor([True]).floor(), True),
    "abs of bool": (lambda m: m.tensor([True]).abs(), True),
    "relu of bool": (lambda m: m.relu(m.tensor([True])), True),
    "floor division of bools": (lambda m: m.tensor([True]) // m.tensor([True]), True),
    "remainder of bools": (lambda m: m.remainder(m.tensor([True]), m.tensor([True])), True),
    "hypot of ints": (lambda m: m.hypot(m.tensor([3]), m.tensor([4])), True),
    "logaddexp of ints": (lambda m: m.logaddexp(m.tensor([3]), m.tensor([4])), True),
    "logaddexp2 of bools": (lambda m: m.logaddexp2(m.tensor([True]), m.tensor([False])), True),
    "subtraction of two bool tensors": (lambda m: m.tensor([True]) - m.tensor([False]), True),
    "heaviside of two dtypes": (lambda m: m.heaviside(m.ones(2), m.ones(2, dtype=m.float64)), True),
    "norm of ints": (lambda m: m.tensor([3, 4]).norm(), True),
    "norm of ints with a float dtype": (lambda m: m.tensor([3, 4]).norm(dtype=m.float64), True),
    "nan into an int64 tensor": (lambda m: m.tensor([float("nan")], dtype=m.int64), True),
    "inf into an int32 tensor": (lambda m: m.tensor([float("inf")], dtype=m.int32), True),
    "300.0 into a uint8 tensor": (lambda m: m.tensor([300.0], dtype=m.uint8), True),
    "layer_norm with an int shape": (lambda m: _F(m).layer_norm(m.ones(2, 3), 3), True),
    "group_norm with one value per group": (lambda m: _F(m).group_norm(m.ones(1, 2), 2), False),
    "bce weight that requires grad": (
        lambda m: _F(m).binary_cross_entropy(m.full((2,), 0.5), m.ones(2), weight=m.ones(2, requires_grad=True)),
        True,
    ),
    "bce with logits, weight that requires grad": (
        lambda m: _F(m).binary_cross_entropy_with_logits(m.zeros(2), m.ones(2), weight=m.ones(2, requires_grad=True)),
        True,
    ),
    "bce with logits, pos_weight that requires grad": (
        lambda m: _F(m).binary_cross_entropy_with_logits(
            m.zeros(2), m.ones(2), pos_weight=m.ones(2, requires_grad=True)
        ),
        True,
    ),
    "nll_loss weight that requires grad": (
        lambda m: _F(m).nll_loss(m.zeros(3, 2), m.tensor([0, 1, 1]), weight=m.ones(2, requires_grad=True)),
        True,
    ),
    "cross_entropy weight that requires grad": (
        lambda m: _F(m).cross_entropy(m.zeros(3, 2), m.tensor([0, 1, 1]), weight=m.ones(2, requires_grad=True)),
        True,
    ),
    "bce with a target of another dtype": (
        lambda m: _F(m).binary_cross_entropy(m.full((2,), 0.5), m.ones(2, dtype=m.float64)),
        True,
    ),
    "huber_loss backward with a target of another dtype": (
        lambda m: _F(m).huber_loss(m.full((2,), 0.5, requires_grad=True), m.ones(2, dtype=m.float64)).backward(),
        True,
    ),
    "batch_norm float32 input, float64 stats": (
        lambda m: _F(m).batch_norm(m.ones(2, 2), m.zeros(2, dtype=m.float64), m.ones(2, dtype=m.float64)),
        True,
    ),
    "batch_norm float64 input, float32 stats": (
        lambda m: _F(m).batch_norm(m.ones(2, 2, dtype=m.float64), m.zeros(2), m.ones(2)),
        True,
    ),
    "setitem through every element of an expanded tensor": (
        lambda m: m.zeros(3).expand(2, 3).__setitem__(Ellipsis, 2.0),
        True,
    ),
    "setitem a column of an expanded tensor": (
        lambda m: m.zeros(3).expand(2, 3).__setitem__((slice(None), 0), 2.0),
        True,
    ),
    "add_ into an expanded tensor": (lambda m: m.zeros(3).expand(2, 3).add_(1.0), True),
    "dot of bools": (lambda m: m.dot(m.tensor([True]), m.tensor([False])), True),
    "mm of bools": (lambda m: m.mm(m.tensor([[True]]), m.tensor([[False]])), True),
    "mv of bools": (lambda m: m.mv(m.tensor([[True]]), m.tensor([False])), True),
    "bmm of bools": (lambda m: m.bmm(m.tensor([[[True]]]), m.tensor([[[False]]])), True),
    "fmod of bools": (lambda m: m.fmod(m.tensor([True]), m.tensor([True])), True),
    "round of bool": (lambda m: m.tensor([True]).round(), True),
    "bool ** bool tensors": (lambda m: m.tensor([True]) ** m.tensor([False]), True),
    "prod to an integer dtype with autograd": (lambda m: m.ones(2, requires_grad=True).prod(dtype=m.int64), True),
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
