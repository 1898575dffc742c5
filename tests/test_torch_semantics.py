"""Tensor ops give torch's values, dtypes and shapes: each row runs one program with ``m = torch`` and with
``m = numbagrad`` and requires the same answer (tensors, tuples of them, or plain Python values)."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad


def _answer(out):
    """A comparable form of a program's result: tensors become (dtype name, shape, values)."""
    if isinstance(out, (tuple, list)):
        return [_answer(o) for o in out]
    if hasattr(out, "detach") and hasattr(out, "dtype"):
        return ("tensor", str(out.dtype).split(".")[-1], tuple(out.shape), out.detach().numpy().copy())
    if not isinstance(out, (bool, int, float, str, type(None))):
        return str(out).split(".")[-1]  # dtypes, memory formats
    return out


def _assert_same(got, want) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
    elif isinstance(want, tuple) and want and want[0] == "tensor":
        assert got[:3] == want[:3]
        np.testing.assert_allclose(got[3], want[3], rtol=1e-6, atol=1e-12, equal_nan=True)
    else:
        assert got == want


def check(torch, program) -> None:
    """``program(m)`` gives the same answer with numbagrad as with torch."""
    _assert_same(_answer(program(numbagrad)), _answer(program(torch)))


def _grad(m, x, f):
    """The gradient of ``f(x).sum()`` with respect to the float tensor ``x``."""
    x = x.detach().requires_grad_(True)
    f(x).sum().backward()
    return x.grad


def _F(m):
    return m.nn.functional


VALUES = {
    # indexing: ints are applied first (as views), so only tensors, lists and bools are advanced indices
    "index int between slice and list": lambda m: m.arange(8.0).reshape(2, 2, 2)[0, :, [0, 1]],
    "index int, slice, list shape": lambda m: m.arange(24.0).reshape(2, 3, 4)[0, :, [0, 1]],
    "index lists around ellipsis": lambda m: m.arange(24.0).reshape(2, 3, 4)[[0, 1], ..., [0, 1]],
    "index gradient with int between": lambda m: _grad(m, m.arange(24.0).reshape(2, 3, 4), lambda x: x[0, :, [0, 2]]),
    "index int, list, int": lambda m: m.arange(24.0).reshape(2, 3, 4)[1, [0, 2], 3],
    "index bool scalar": lambda m: m.arange(6).reshape(2, 3)[True],
    "index False scalar": lambda m: m.arange(6).reshape(2, 3)[False],
    "index bool scalar after slice": lambda m: m.arange(6).reshape(2, 3)[:, True],
    "index bool scalar, list, int": lambda m: m.arange(12).reshape(3, 4)[True, [0, 2], 1],
    "index mask after ellipsis, then int": lambda m: m.arange(24).reshape(2, 3, 4)[
        ..., m.tensor([True, False, True]), 1
    ],
    "index lists adjacent across an empty ellipsis": lambda m: m.arange(6.0).reshape(1, 2, 3)[:, [0], ..., [1, 2]],
    "index two ellipses": lambda m: m.arange(24).reshape(2, 3, 4)[..., 0, ...],
    "index empty list": lambda m: m.arange(3)[[]],
    "index list of tensors is a tuple": lambda m: m.arange(6).reshape(2, 3)[[m.tensor([0, 1]), m.tensor([1, 2])]],
    "setitem int, slice, list": lambda m: (
        lambda x: (x.__setitem__((0, slice(None), [0, 1]), m.arange(6.0).reshape(3, 2)), x)[1]
    )(m.zeros(2, 3, 4)),
    "setitem value with leading 1-dims": lambda m: (lambda x: (x.__setitem__(0, m.ones(1, 2)), x)[1])(m.zeros(2, 2)),
    "setitem [1, 10] into [10]": lambda m: (
        lambda x: (x.__setitem__(slice(None), m.arange(10.0).reshape(1, 10)), x)[1]
    )(m.zeros(10)),
    "setitem gradient of a value with leading 1-dims": lambda m: _grad(
        m, m.ones(1, 3), lambda v: (lambda x: (x.__setitem__(1, v), x * m.arange(6.0).reshape(2, 3))[1])(m.zeros(2, 3))
    ),
    # narrow
    "narrow negative start": lambda m: m.arange(5).narrow(0, -2, 2),
    "narrow to the end": lambda m: m.arange(5).narrow(0, 5, 0),
    # reductions
    "var fractional correction": lambda m: m.arange(5.0).var(correction=0.5),
    "std fractional correction over a dim": lambda m: m.arange(6.0).reshape(2, 3).std(1, correction=1.5),
    "var_mean fractional correction": lambda m: m.var_mean(m.arange(5.0), correction=0.5),
    "std_mean fractional correction": lambda m: m.std_mean(m.arange(5.0), correction=0.5),
    "sum over an empty dim list": lambda m: m.arange(6.0).reshape(2, 3).sum(dim=[]),
    "mean over an empty dim tuple": lambda m: m.arange(6.0).reshape(2, 3).mean(dim=()),
    "amax over an empty dim list": lambda m: m.arange(6.0).reshape(2, 3).amax(dim=[]),
    "amin over an empty dim list keepdim": lambda m: m.arange(6.0).reshape(2, 3).amin(dim=[], keepdim=True),
    "std over an empty dim list": lambda m: m.arange(6.0).reshape(2, 3).std(dim=[]),
    "var over an empty dim list": lambda m: m.arange(6.0).reshape(2, 3).var(dim=[]),
    "any over an empty dim tuple reduces nothing": lambda m: m.tensor([[0, 1], [0, 0]]).any(dim=()),
    "all over an empty dim list reduces nothing": lambda m: m.tensor([[0.0, 1.0], [2.0, 0.0]]).all(dim=[]),
    "std gradient where std is 0": lambda m: _grad(m, m.ones(3), lambda x: x.std()),
    "std gradient over a dim where std is 0": lambda m: _grad(m, m.ones(2, 3), lambda x: x.std(1)),
    "var gradient without degrees of freedom": lambda m: _grad(
        m, m.tensor([1.0, 2.0, 4.0]), lambda x: x.var(correction=3)
    ),
    "var gradient of one element": lambda m: _grad(m, m.ones(1), lambda x: x.var()),
    "var gradient over a dim without degrees of freedom": lambda m: _grad(m, m.ones(2, 1), lambda x: x.var(1)),
    "std gradient over a size-0 dim": lambda m: _grad(m, m.ones(0, 2), lambda x: x.std(0, correction=0)),
    "std_mean gradient where std is 0": lambda m: _grad(m, m.ones(2, 3), lambda x: m.std_mean(x, 1)[0]),
    "var_mean gradient without degrees of freedom": lambda m: _grad(
        m, m.ones(2), lambda x: m.var_mean(x, correction=2)[0]
    ),
    "sum with axis and keepdims": lambda m: m.ones(2, 3).sum(axis=1, keepdims=True),
    "argmax with axis": lambda m: m.tensor([[1.0, 3.0, 2.0], [4.0, 0.0, 5.0]]).argmax(axis=1),
    "mean with axis tuple": lambda m: m.mean(m.arange(6.0).reshape(2, 3), axis=(0, 1)),
    "cat with axis": lambda m: m.cat([m.ones(2, 1), m.zeros(2, 1)], axis=1),
    "argmax of an empty dim that is not reduced": lambda m: m.zeros(0, 2).argmax(1),
    # elementwise and index ops
    "clamp of bool is int64": lambda m: m.tensor([True, False]).clamp(0, 1),
    "clamp of bool with a float bound": lambda m: m.tensor([True, False]).clamp(0.5),
    "index_add truncates a fractional alpha on ints": lambda m: m.zeros(3, dtype=m.int64).index_add(
        0, m.tensor([0, 1]), m.tensor([3, 4]), alpha=1.5
    ),
    "index_add truncates a negative alpha toward 0": lambda m: m.zeros(3, dtype=m.int64).index_add(
        0, m.tensor([0, 1]), m.tensor([3, 4]), alpha=-1.5
    ),
    "index_add keeps a float alpha on floats": lambda m: m.zeros(3).index_add(
        0, m.tensor([0, 2]), m.ones(2), alpha=1.5
    ),
    "index_add on 0-d": lambda m: m.tensor(1.0).index_add(0, m.tensor([0]), m.tensor(2.0)),
    "index_add gradient on 0-d": lambda m: _grad(m, m.tensor(1.0), lambda x: x.index_add(0, m.tensor([0]), x * 3)),
    "index_fill on 0-d": lambda m: m.tensor(1.0).index_fill(0, m.tensor([0]), 2.0),
    "integer pow with negative tensor exponents": lambda m: m.tensor([2, 3, 1, -1]) ** m.tensor([-1, -2, -3, -3]),
    "integer 0 to negative tensor exponents": lambda m: m.tensor([0, 0, 0]) ** m.tensor([-1, -2, 2]),
    "integer number 0 to negative tensor exponents": lambda m: 0 ** m.tensor([-1, 2]),
    "pow saves its input, not its output": lambda m: _grad(m, m.tensor([1.5, 2.0]), lambda x: (x**2).add_(1)),
    "cube saves its input, not its output": lambda m: _grad(m, m.tensor([1.5, 2.0]), lambda x: (x**3).mul_(2)),
    # dtypes
    "addmm on ints truncates alpha and beta": lambda m: m.addmm(
        *(m.arange(4).reshape(2, 2) for _ in range(3)), alpha=2.7, beta=-1.5
    ),
    "baddbmm on ints truncates alpha": lambda m: m.baddbmm(
        *(m.ones(1, 2, 2, dtype=m.int64) for _ in range(3)), alpha=1.5
    ),
    "cat promotes with an empty 1-d tensor": lambda m: m.cat([m.tensor([]), m.tensor([1, 2])]),
    "cat promotes with an empty float64 tensor": lambda m: m.cat([m.zeros(0, dtype=m.float64), m.ones(2, 3)]),
    "in-place comparison keeps requires_grad": lambda m: (lambda y: [y.lt_(1.5), y.requires_grad])(
        m.ones(2, requires_grad=True) * 1
    ),
    "in-place comparison gradient is zero": lambda m: _grad(m, m.tensor([1.0, 2.0]), lambda x: (x * 1).ge_(1.5)),
    "in-place comparison with a tensor gives zero to it": lambda m: _grad(
        m, m.tensor([1.0, 2.0]), lambda w: (w * 0 + 1).eq_(w)
    ),
    "einsum outer product promotes": lambda m: m.einsum("i,j->ij", m.ones(2), m.ones(2, dtype=m.int64)),
    "einsum elementwise product promotes": lambda m: m.einsum("i,i->i", m.ones(2), m.ones(2, dtype=m.float64)),
    "squeeze of 0-d with dim 0": lambda m: m.tensor(1.0).squeeze(0),
    "squeeze of 0-d with dim -1": lambda m: m.tensor(1.0).squeeze(-1),
    "legacy_contiguous_format is contiguous_format": lambda m: [m.legacy_contiguous_format, m.contiguous_format],
    "rsub scales input by alpha": lambda m: m.rsub(m.ones(2), m.ones(2) * 3, alpha=2),
    "rsub of a number scales input by alpha": lambda m: m.rsub(m.ones(2), 1.0, alpha=2),
    "fractions into an int tensor are truncated": lambda m: m.tensor([1.5, -2.7], dtype=m.int64),
    "heaviside of one dtype": lambda m: m.heaviside(m.tensor([-1.0, 0.0, 2.0]), m.tensor(0.5)),
    # nn.functional
    "mse_loss of empty input": lambda m: _F(m).mse_loss(m.zeros(0), m.zeros(0)),
    "mse_loss gradient of empty input": lambda m: _grad(m, m.zeros(0), lambda x: _F(m).mse_loss(x, m.zeros(0))),
    "linear with zero in-features": lambda m: _F(m).linear(m.ones(2, 0), m.ones(3, 0), m.ones(3)),
    "linear with zero out-features": lambda m: _F(m).linear(m.ones(2, 4), m.ones(0, 4), m.ones(0)),
    "linear of a 1-d input with zero in-features": lambda m: _F(m).linear(m.ones(0), m.ones(3, 0), m.ones(3)),
    "linear gradient of a batched input with zero in-features": lambda m: _grad(
        m, m.ones(4, 2, 0), lambda x: _F(m).linear(x, m.ones(3, 0), m.ones(3))
    ),
    "linear gradient of an empty batch": lambda m: _grad(
        m, m.ones(0, 2, 3), lambda x: _F(m).linear(x, m.ones(4, 3), m.ones(4))
    ),
    "group_norm with two values per group": lambda m: _F(m).group_norm(m.arange(4.0).reshape(1, 2, 2), 2),
    # writes into expanded tensors
    "fill_ a row of an expanded tensor": lambda m: (lambda x: (x.expand(2, 3)[0].fill_(1.0), x)[1])(m.zeros(3)),
    "setitem a row of an expanded tensor": lambda m: (lambda x: (x.expand(2, 3).__setitem__(0, 2.0), x)[1])(m.zeros(3)),
    "fill_ an expanded tensor": lambda m: (lambda x: (x.expand(2, 3).fill_(1.0), x)[1])(m.zeros(3)),
    "mul_ a row of an expanded tensor": lambda m: (lambda x: (x.expand(2, 3)[1].mul_(2.0), x)[1])(m.ones(3)),
    "atan2 gradient at the origin is zero": lambda m: _grad(m, m.tensor([0.0, 1.0]), lambda y: m.atan2(y, y * 0)),
    "flip of 0-d": lambda m: m.tensor(2.0).flip(0),
    "bool ** True is the tensor": lambda m: m.tensor([True, False]) ** True,
    "bool ** False is ones": lambda m: m.tensor([True, False]) ** False,
    "bool ** 2 promotes to int64": lambda m: m.tensor([True, False]) ** 2,
    # operators
    "invert leaves its input alone": lambda m: (lambda x: [~x, x])(m.tensor([1, 2])),
    "invert of bool": lambda m: ~m.tensor([True, False]),
    # normalization
    "layer_norm bias without weight": lambda m: _F(m).layer_norm(
        m.arange(6.0).reshape(3, 2), [2], None, m.tensor([1.0, 2.0])
    ),
}


@pytest.mark.parametrize("name", list(VALUES))
def test_values(torch, name):
    check(torch, VALUES[name])


def test_setitem_grad_fn_after_an_int_is_copyslices(torch):
    """ints index first (a view), so torch records the write as CopySlices, not IndexPutBackward0."""
    for m in (torch, numbagrad):
        x = m.zeros(2, 3, 4, requires_grad=True) * 1
        x[0, :, [0, 1]] = 1.0
        assert type(x.grad_fn).__name__ == "CopySlices"


@pytest.mark.parametrize("columns", [3, 4, 6])
def test_print_wraps_suffixes_where_torch_does(torch, columns):
    """``dtype=`` and ``grad_fn=`` stay on the last line unless torch's own spelling would pass its print width."""
    data = (np.arange(3 * columns).reshape(3, columns) * 0.7318 + 1.0314).tolist()
    shown = []
    for m in (torch, numbagrad):
        x = m.tensor(data, dtype=m.float64, requires_grad=True)
        shown.append(repr(x - 1))
    assert shown[1] == shown[0].replace("torch.", "numbagrad.")
