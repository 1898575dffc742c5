"""Linear algebra beyond the generated declaration tests: einsum's equation forms, node names and errors,
addmm/baddbmm scalars, diag/diagonal/trace/triu/tril edge cases, compared with torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck, gradgradcheck
from torch_same import same

pytestmark = pytest.mark.torch


def _r(*shape, seed=0):
    return np.random.default_rng(seed + len(shape) + sum(shape)).standard_normal(shape)


EINSUMS = [
    ("ij,jk->ik", (2, 3), (3, 4)),
    ("ij,jk", (2, 3), (3, 4)),
    ("ij->ji", (2, 3)),
    ("ii->i", (3, 3)),
    ("ii", (3, 3)),
    ("ij->", (2, 3)),
    ("ij->i", (2, 3)),
    ("i,j->ij", (2,), (3,)),
    ("i,j->ji", (2,), (3,)),
    ("i,i->", (3,), (3,)),
    ("ij,ij->ij", (2, 3), (2, 3)),
    ("ij,ij->i", (2, 3), (2, 3)),
    ("bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)),
    ("ij,jk,kl->il", (2, 3), (3, 4), (4, 5)),
    ("...ij,...jk->...ik", (2, 2, 3), (2, 3, 4)),
    ("...ij,...jk", (1, 2, 3), (3, 3, 4)),
    ("bn,anm,bm->ba", (2, 3), (4, 3, 5), (2, 5)),
    ("ijk->kji", (2, 3, 4)),
    ("ijk->ki", (2, 3, 4)),
    ("iij->j", (3, 3, 2)),
    ("ij,kl->", (2, 3), (4, 5)),
    ("ij,kl->lj", (2, 3), (4, 5)),
    ("ij,jk->kij", (2, 3), (3, 4)),
    ("ii,ij->j", (3, 3), (3, 2)),
    ("i j , j k -> i k", (2, 3), (3, 4)),
    ("Aa,aB->AB", (2, 3), (3, 4)),
    ("ij,jk->ik", (2, 1), (3, 4)),
]


@pytest.mark.parametrize(("equation", "shapes"), [pytest.param(e[0], e[1:], id=e[0]) for e in EINSUMS])
def test_einsum_matches_torch_values_gradients_and_node(torch, equation, shapes):
    same(torch, lambda lib, *ops: lib.einsum(equation, *ops), *[_r(*s, seed=k) for k, s in enumerate(shapes)])


def test_einsum_takes_a_list_of_operands_and_torchs_sublist_form(torch):
    a, b = _r(2, 3), _r(3, 4)
    same(torch, lambda lib, x, y: lib.einsum("ij,jk->ik", [x, y]), a, b)
    same(torch, lambda lib, x, y: lib.einsum(x, [0, 1], y, [1, 2], [0, 2]), a, b)
    same(torch, lambda lib, x, y: lib.einsum(x, [0, 1], y, [1, 2]), a, b)
    same(torch, lambda lib, x, y: lib.einsum(x, [Ellipsis, 1], y, [1, 2]), a, b)


def test_einsum_has_second_derivatives():
    a = numbagrad.tensor(_r(2, 3), requires_grad=True)
    b = numbagrad.tensor(_r(3, 3), requires_grad=True)
    assert gradgradcheck(lambda x, y: numbagrad.einsum("ij,jj->ij", x, y), (a, b))
    assert gradcheck(lambda x, y: numbagrad.einsum("ij,jk->", x, y), (a, b))


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(2, 3), (4, 5)]),
        ("ij,jk", [(2, 3)]),
        ("ij", [(2, 3), (3, 2)]),
        ("ij->k", [(2, 3)]),
        ("ijk", [(2, 3)]),
        ("ij->ii", [(2, 2)]),
        ("ii->i", [(2, 3)]),
        ("i1->i", [(2, 3)]),
        ("...ijk", [(2, 3)]),
    ],
)
def test_einsum_errors_match_torch(torch, equation, shapes):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises(RuntimeError) as info:
            lib.einsum(equation, *[lib.zeros(*s) for s in shapes])
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_einsum_of_mixed_dtypes_is_refused_like_torch(torch):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises(RuntimeError) as info:
            lib.einsum("ij,jk", lib.zeros(2, 3, dtype=lib.float64), lib.zeros(3, 4))
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, i, a, b: lib.addmm(i, a, b), id="addmm"),
        pytest.param(lambda lib, i, a, b: lib.addmm(i[0], a, b, beta=0.5, alpha=-2), id="addmm-broadcast-scaled"),
        pytest.param(lambda lib, i, a, b: i.addmm(a, b, alpha=3), id="addmm-method"),
        pytest.param(
            lambda lib, i, a, b: lib.baddbmm(i.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), beta=2), id="baddbmm"
        ),  # fmt: skip
        pytest.param(lambda lib, i, a, b: (i * 1).addmm_(a, b, beta=0.5), id="addmm_"),
        pytest.param(lambda lib, i, a, b: lib.outer(a[0], b[:, 0]), id="outer"),
        pytest.param(lambda lib, i, a, b: lib.ger(a[0], b[:, 0]), id="ger"),
    ],
)
def test_addmm_family_matches_torch(torch, fn):
    same(torch, fn, _r(2, 4), _r(2, 3), _r(3, 4))


def test_addmm_with_beta_zero_ignores_nan_and_inf_in_input(torch):
    inp = np.array([[np.nan, np.inf], [1.0, -np.inf]])
    same(torch, lambda lib, i, a, b: lib.addmm(i, a, b, beta=0), inp, _r(2, 3), _r(3, 2))


def test_addmm_errors_match_torch(torch):
    for call in (
        lambda lib: lib.addmm(lib.zeros(3, 4), lib.zeros(2, 3), lib.zeros(3, 4)),
        lambda lib: lib.addmm(lib.zeros(2, 4, dtype=lib.float64), lib.zeros(2, 3, dtype=lib.float64), lib.zeros(3, 4)),
        lambda lib: lib.outer(lib.zeros(2, 2), lib.zeros(2)),
    ):
        errors = []
        for lib in (numbagrad, torch):
            with pytest.raises(RuntimeError) as info:
                call(lib)
            errors.append(str(info.value))
        assert errors[0] == errors[1]


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, m: lib.trace(m), id="trace"),
        pytest.param(lambda lib, m: lib.trace(m[:, :3]), id="trace-wide"),
        pytest.param(lambda lib, m: lib.diag(m), id="diag-of-matrix"),
        pytest.param(lambda lib, m: lib.diag(m, -2), id="diag-of-matrix-below"),
        pytest.param(lambda lib, m: lib.diag(m[0]), id="diag-of-vector"),
        pytest.param(lambda lib, m: lib.diag(m[0], 2), id="diag-of-vector-above"),
        pytest.param(lambda lib, m: lib.diagonal(m, 1), id="diagonal"),
        pytest.param(lambda lib, m: m.diagonal(offset=-1, dim1=1, dim2=0), id="diagonal-swapped-dims"),
        pytest.param(lambda lib, m: lib.diagonal(m.reshape(2, 2, 4), 0, -1, 0), id="diagonal-3d"),
        pytest.param(lambda lib, m: lib.triu(m, 1), id="triu"),
        pytest.param(lambda lib, m: lib.tril(m, -1), id="tril"),
        pytest.param(lambda lib, m: (m * 1).triu_(), id="triu_"),
        pytest.param(lambda lib, m: (m * 1).tril_(2), id="tril_"),
    ],
)
def test_diagonals_and_triangles_match_torch(torch, fn):
    same(torch, fn, _r(4, 4))


def test_trace_of_integers_is_int64_and_diag_of_integers_keeps_the_dtype(torch):
    same(torch, lambda lib, m: lib.trace(m.to(lib.int32)), np.arange(9).reshape(3, 3))
    same(torch, lambda lib, m: lib.diag(m.to(lib.int32), 1), np.arange(9).reshape(3, 3))


def test_diagonal_is_a_view_that_writes_through():
    m = numbagrad.zeros(3, 3)
    d = m.diagonal()
    d.fill_(2.0)
    assert m.tolist() == [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
    assert m.diagonal(1)._base is m


def test_diag_trace_triu_errors_match_torch(torch):
    for call in (
        lambda lib: lib.trace(lib.zeros(3)),
        lambda lib: lib.diag(lib.zeros(2, 2, 2)),
        lambda lib: lib.diagonal(lib.zeros(2, 3), 0, 1, 1),
        lambda lib: lib.triu(lib.zeros(3)),
        lambda lib: lib.tril(lib.zeros(3)),
    ):
        errors = []
        for lib in (numbagrad, torch):
            with pytest.raises(RuntimeError) as info:
                call(lib)
            errors.append(str(info.value))
        assert errors[0] == errors[1]
