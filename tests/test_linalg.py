"""numbagrad.linalg against torch.linalg: values (float32 and float64, batched and not), gradients by finite
differences (gauge-invariant functions of svd/eigh outputs), gradients compared with torch, and torch's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck
from numbagrad.autograd.gradcheck import gradgradcheck

L = numbagrad.linalg


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def _wellcond(*shape, seed=0):
    """Random square matrices plus a multiple of the identity: far from singular."""
    n = shape[-1]
    return _rand(*shape, seed=seed) + 3 * np.eye(n)


def _spd(*shape, seed=0):
    x = _rand(*shape, seed=seed)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _tri(*shape, upper, seed=0):
    a = _wellcond(*shape, seed=seed)
    return np.triu(a) if upper else np.tril(a)


def _tensors(torch, dtype, *arrays):
    ours = [numbagrad.tensor(a.astype(dtype)) for a in arrays]
    theirs = [torch.tensor(a.astype(dtype)) for a in arrays]
    return ours, theirs


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _assert_same(ours, theirs, dtype):
    tol = 1e-4 if dtype == "float32" else 1e-10
    ours, theirs = _flat(ours), _flat(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


VALUE_CASES = {
    "det": (lambda m, A: m.linalg.det(A), [_wellcond]),
    "det_top": (lambda m, A: m.det(A), [_wellcond]),
    "slogdet": (lambda m, A: tuple(m.linalg.slogdet(A)), [_wellcond]),
    "logdet": (lambda m, A: m.logdet(A), [_spd]),
    "inv": (lambda m, A: m.linalg.inv(A), [_wellcond]),
    "inverse": (lambda m, A: m.inverse(A), [_wellcond]),
    "inv_ex": (lambda m, A: tuple(m.linalg.inv_ex(A)), [_wellcond]),
    "solve": (lambda m, A, B: m.linalg.solve(A, B), [_wellcond, _rand]),
    "solve_right": (lambda m, A, B: m.linalg.solve(A, B, left=False), [_wellcond, _rand]),
    "solve_upper": (lambda m, A, B: m.linalg.solve_triangular(A, B, upper=True), [_wellcond, _rand]),
    "solve_lower_right_unit": (
        lambda m, A, B: m.linalg.solve_triangular(A, B, upper=False, left=False, unitriangular=True),
        [_wellcond, _rand],
    ),
    "cholesky": (lambda m, A: m.linalg.cholesky(A), [_spd]),
    "cholesky_upper": (lambda m, A: m.linalg.cholesky(A, upper=True), [_spd]),
    "cholesky_ex": (lambda m, A: tuple(m.linalg.cholesky_ex(A)), [_spd]),
    "qr": (lambda m, A: tuple(m.linalg.qr(A)), [_rand]),
    "svdvals": (lambda m, A: m.linalg.svdvals(A), [_rand]),
    "eigvalsh": (lambda m, A: m.linalg.eigvalsh(A), [_spd]),
    "eigvalsh_upper": (lambda m, A: m.linalg.eigvalsh(A, UPLO="U"), [_rand]),
    "pinv": (lambda m, A: m.linalg.pinv(A), [_rand]),
    "pinv_hermitian": (lambda m, A: m.linalg.pinv(A, hermitian=True), [_spd]),
    "pinverse": (lambda m, A: m.pinverse(A), [_rand]),
    "matrix_rank": (lambda m, A: m.linalg.matrix_rank(A), [_rand]),
    "matrix_power_3": (lambda m, A: m.linalg.matrix_power(A, 3), [_wellcond]),
    "matrix_power_0": (lambda m, A: m.linalg.matrix_power(A, 0), [_wellcond]),
    "matrix_power_neg": (lambda m, A: m.linalg.matrix_power(A, -2), [_wellcond]),
    "matrix_exp": (lambda m, A: m.linalg.matrix_exp(A), [_rand]),
    "matrix_exp_large": (lambda m, A: m.linalg.matrix_exp(4 * A), [_rand]),
    "cross": (lambda m, a, b: m.linalg.cross(a[..., :3], b[..., :3]), [_rand, _rand]),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b), [_rand, _rand]),
    "diagonal": (lambda m, A: m.linalg.diagonal(A, offset=1), [_rand]),
    "vander": (lambda m, A: m.linalg.vander(A[..., 0]), [_rand]),
    "lstsq": (lambda m, A, B: m.linalg.lstsq(A, B)[0], [_wellcond, _rand]),
    "vector_norm": (lambda m, A: m.linalg.vector_norm(A), [_rand]),
    "vector_norm_1_dim": (lambda m, A: m.linalg.vector_norm(A, 1, dim=-1), [_rand]),
    "vector_norm_inf": (lambda m, A: m.linalg.vector_norm(A, math.inf, dim=(-2, -1), keepdim=True), [_rand]),
    "vector_norm_neg_inf": (lambda m, A: m.linalg.vector_norm(A, -math.inf), [_rand]),
    "vector_norm_0": (lambda m, A: m.linalg.vector_norm(A, 0), [_rand]),
    "vector_norm_3": (lambda m, A: m.linalg.vector_norm(A, 3, dim=0), [_rand]),
    "vector_norm_half": (lambda m, A: m.linalg.vector_norm(A, 0.5), [_rand]),
    "norm_default": (lambda m, A: m.linalg.norm(A), [_rand]),
    "norm_nuc": (lambda m, A: m.linalg.norm(A, "nuc", dim=(-2, -1)), [_rand]),
    **{
        f"matrix_norm_{o}": (lambda m, A, o=o: m.linalg.matrix_norm(A, o), [_rand])
        for o in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)
    },
    "matrix_norm_dims_keepdim": (lambda m, A: m.linalg.matrix_norm(A, 1, dim=(-1, 0), keepdim=True), [_rand]),
    "matrix_norm_nuc_dims_keepdim": (lambda m, A: m.linalg.matrix_norm(A, "nuc", dim=(-1, 0), keepdim=True), [_rand]),
    "matrix_norm_2_dims": (lambda m, A: m.linalg.matrix_norm(A, 2, dim=(0, -1)), [_rand]),
    "norm_vector_ord_dim": (lambda m, A: m.linalg.norm(A, 3, dim=-1), [_rand]),
    "norm_matrix_ord_dim": (lambda m, A: m.linalg.norm(A, -1, dim=(-2, -1), keepdim=True), [_rand]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [(), (2,)], ids=["single", "batched"])
@pytest.mark.parametrize("name", list(VALUE_CASES))
def test_values_match_torch(torch, name, batch, dtype):
    fn, makers = VALUE_CASES[name]
    arrays = [make(*batch, 4, 4, seed=k) for k, make in enumerate(makers)]
    if name in ("vander", "diagonal", "vector_norm_3", "matrix_norm_dims_keepdim") or "norm" in name:
        arrays = [_rand(*batch, 3, 4, seed=k) for k in range(len(arrays))]
    ours, theirs = _tensors(torch, dtype, *arrays)
    _assert_same(fn(numbagrad, *ours), fn(torch, *theirs), dtype)


def test_norm_of_a_matrix_with_ord_is_a_matrix_norm(torch):
    a = _rand(3, 4)
    assert np.isclose(L.norm(numbagrad.tensor(a), 2).item(), torch.linalg.norm(torch.tensor(a), 2).item())


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 4, 4)])
def test_qr_complete_and_r_modes_match_torch(torch, shape):
    a = _rand(*shape)
    for mode in ("complete", "r"):
        ours = L.qr(numbagrad.tensor(a), mode=mode)
        theirs = torch.linalg.qr(torch.tensor(a), mode=mode)
        _assert_same(tuple(ours), tuple(theirs), "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_reconstructs_and_matches_torch_up_to_signs(torch, shape, full, dtype):
    a = _rand(*shape).astype(dtype)
    u, s, vh = L.svd(numbagrad.tensor(a), full_matrices=full)
    tu, ts, tvh = torch.linalg.svd(torch.tensor(a), full_matrices=full)
    assert tuple(u.shape) == tuple(tu.shape) and tuple(vh.shape) == tuple(tvh.shape)
    k = min(shape[-2:])
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(s.numpy(), ts.numpy(), rtol=tol)
    rebuilt = (u.numpy()[..., :, :k] * s.numpy()[..., None, :]) @ vh.numpy()[..., :k, :]
    np.testing.assert_allclose(rebuilt, a, atol=tol)
    np.testing.assert_allclose(np.abs(u.numpy()[..., :k]), np.abs(tu.numpy()[..., :k]), atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eigh_reconstructs_and_matches_torch_up_to_signs(torch, dtype):
    a = _spd(2, 4, 4).astype(dtype)
    w, v = L.eigh(numbagrad.tensor(a))
    tw, tv = torch.linalg.eigh(torch.tensor(a))
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(w.numpy(), tw.numpy(), rtol=tol)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), atol=tol)
    rebuilt = (v.numpy() * w.numpy()[..., None, :]) @ np.swapaxes(v.numpy(), -1, -2)
    np.testing.assert_allclose(rebuilt, a, rtol=tol, atol=tol * 10)


def test_multi_dot_matches_torch_with_vector_ends(torch):
    arrays = [_rand(5), _rand(5, 2, seed=1), _rand(2, 7, seed=2), _rand(7, seed=3)]
    ours, theirs = _tensors(torch, "float64", *arrays)
    _assert_same(L.multi_dot(ours), torch.linalg.multi_dot(theirs), "float64")
    _assert_same(L.multi_dot(ours[1:3]), torch.linalg.multi_dot(theirs[1:3]), "float64")


def test_solve_with_a_batch_of_vectors_matches_torch(torch):
    ours, theirs = _tensors(torch, "float64", _wellcond(2, 3, 3), _rand(2, 3))
    _assert_same(L.solve(*ours), torch.linalg.solve(*theirs), "float64")
    _assert_same(L.solve(ours[0], ours[1][0]), torch.linalg.solve(theirs[0], theirs[1][0]), "float64")
    _assert_same(
        L.solve(ours[0], ours[1][:1], left=False),
        torch.linalg.solve(theirs[0], theirs[1][:1], left=False),
        "float64",
    )


def test_solve_broadcasts_batch_dims(torch):
    ours, theirs = _tensors(torch, "float64", _wellcond(3, 3), _rand(2, 3, 2))
    _assert_same(L.solve(*ours), torch.linalg.solve(*theirs), "float64")


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5)])
def test_lstsq_returns_each_drivers_outputs_as_torch(torch, driver, shape):
    ours, theirs = _tensors(torch, "float64", _rand(*shape), _rand(*shape[:-1], 2, seed=1))
    _assert_same(tuple(L.lstsq(*ours, driver=driver)), tuple(torch.linalg.lstsq(*theirs, driver=driver)), "float64")


def test_matrix_rank_of_a_rank_deficient_matrix(torch):
    a = _rand(4, 2) @ _rand(2, 5, seed=1)
    ours, theirs = _tensors(torch, "float64", a)
    _assert_same(L.matrix_rank(ours[0]), torch.linalg.matrix_rank(theirs[0]), "float64")
    _assert_same(L.matrix_rank(ours[0], atol=100.0), torch.linalg.matrix_rank(theirs[0], atol=100.0), "float64")
    _assert_same(L.pinv(ours[0]), torch.linalg.pinv(theirs[0]), "float64")


def test_matrix_exp_of_non_finite_and_mixed_scale_batches_matches_torch(torch):
    a = np.stack([_rand(3, 3), 50 * _rand(3, 3, seed=1), np.full((3, 3), np.nan), np.where(np.eye(3) > 0, np.inf, 0.0)])
    ours, theirs = _tensors(torch, "float64", a)
    _assert_same(L.matrix_exp(ours[0]), torch.linalg.matrix_exp(theirs[0]), "float64")


def test_singular_slogdet_and_det(torch):
    ours, theirs = _tensors(torch, "float64", np.array([[1.0, 2.0], [2.0, 4.0]]))
    _assert_same(tuple(L.slogdet(ours[0])), tuple(torch.linalg.slogdet(theirs[0])), "float64")
    _assert_same(L.det(ours[0]), torch.linalg.det(theirs[0]), "float64")


def test_grad_fn_names_match_torch(torch):
    a = numbagrad.tensor(_wellcond(3, 3), requires_grad=True)
    ta = torch.tensor(_wellcond(3, 3), requires_grad=True)
    for fn in (
        lambda m, x: m.linalg.det(x),
        lambda m, x: m.linalg.inv(x),
        lambda m, x: m.linalg.solve(x, x),
        lambda m, x: m.linalg.svd(x)[1],
        lambda m, x: m.linalg.qr(x)[0],
        lambda m, x: m.linalg.eigh(x)[0],
        lambda m, x: m.linalg.matrix_exp(x),
        lambda m, x: m.linalg.vector_norm(x),
        lambda m, x: m.linalg.pinv(x),
        lambda m, x: m.linalg.cholesky(x @ x.mT),
    ):
        assert type(fn(numbagrad, a).grad_fn).__name__ == type(fn(torch, ta).grad_fn).__name__


# --- gradients -----------------------------------------------------------------------------------------------


def _leaf(a):
    return numbagrad.tensor(a, requires_grad=True)


GRAD_CASES = {
    "det": (lambda A: L.det(A), [_wellcond(2, 3, 3)]),
    "slogdet": (lambda A: L.slogdet(A)[1], [_wellcond(3, 3)]),
    "logdet": (lambda A: numbagrad.logdet(A @ A.mT), [_wellcond(3, 3)]),
    "inv": (lambda A: L.inv(A), [_wellcond(2, 3, 3)]),
    "solve": (lambda A, B: L.solve(A, B), [_wellcond(2, 3, 3), _rand(2, 3, 2, seed=1)]),
    "solve_right_broadcast": (lambda A, B: L.solve(A, B, left=False), [_wellcond(3, 3), _rand(2, 2, 3, seed=1)]),
    "solve_vector": (lambda A, B: L.solve(A, B), [_wellcond(3, 3), _rand(3, seed=1)]),
    "solve_triangular": (
        lambda A, B: L.solve_triangular(A, B, upper=True),
        [_tri(3, 3, upper=True), _rand(3, 2, seed=1)],
    ),
    "solve_triangular_left_unit": (
        lambda A, B: L.solve_triangular(A, B, upper=False, left=False, unitriangular=True),
        [_tri(3, 3, upper=False), _rand(2, 3, seed=1)],
    ),
    "cholesky": (lambda X: L.cholesky(X @ X.mT + numbagrad.eye(3, dtype=numbagrad.float64)), [_rand(2, 3, 3)]),
    "cholesky_upper": (
        lambda X: L.cholesky(X @ X.mT + 3 * numbagrad.eye(3, dtype=numbagrad.float64), upper=True),
        [_rand(3, 3)],
    ),
    "qr_square": (lambda A: L.qr(A), [_rand(3, 3)]),
    "qr_tall": (lambda A: L.qr(A), [_rand(2, 4, 3)]),
    "qr_wide": (lambda A: L.qr(A), [_rand(3, 5)]),
    "svdvals": (lambda A: L.svdvals(A), [_rand(2, 4, 3)]),
    "svd_gauge_invariant": (lambda A: _svd_invariant(A, False), [_rand(4, 3)]),
    "svd_gauge_invariant_wide_full": (lambda A: _svd_invariant(A, True), [_rand(2, 3, 4)]),
    "eigh": (lambda X: _eigh_invariant(X + X.mT), [_rand(2, 3, 3)]),
    "eigvalsh": (lambda X: L.eigvalsh(X + X.mT), [_rand(4, 4)]),
    "pinv_tall": (lambda A: L.pinv(A), [_rand(4, 3)]),
    "pinv_wide": (lambda A: L.pinv(A), [_rand(2, 3, 4)]),
    "lstsq": (lambda A, B: L.lstsq(A, B)[0], [_rand(4, 3), _rand(4, 2, seed=1)]),
    "matrix_power_neg": (lambda A: L.matrix_power(A, -3), [_wellcond(3, 3)]),
    "matrix_exp": (lambda A: L.matrix_exp(A), [_rand(2, 3, 3)]),
    "cross": (lambda a, b: L.cross(a, b, dim=0), [_rand(3, 2), _rand(3, 2, seed=1)]),
    "vecdot": (lambda a, b: L.vecdot(a, b), [_rand(2, 3), _rand(3, seed=1)]),
    "multi_dot": (lambda a, b, c: L.multi_dot([a, b, c]), [_rand(2, 3), _rand(3, 4, seed=1), _rand(4, seed=2)]),
    "vander": (lambda x: L.vander(x, N=4), [_rand(3)]),
    **{
        f"vector_norm_{o}": (lambda A, o=o: L.vector_norm(A, o, dim=-1), [_rand(2, 4)])
        for o in (2, 1, 3, 0.5, math.inf, -math.inf)
    },
    **{
        f"matrix_norm_{o}": (lambda A, o=o: L.matrix_norm(A, o), [_rand(2, 3, 4)])
        for o in ("fro", "nuc", 2, -2, 1, math.inf)
    },
}


def _svd_invariant(A, full):
    u, s, vh = L.svd(A, full_matrices=full)
    k = s.shape[-1]
    return s, u[..., :, :k] @ vh[..., :k, :]


def _eigh_invariant(A):
    w, v = L.eigh(A)
    return w, (v * v.sum(-2, keepdim=True)) @ v.mT


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradcheck(name):
    fn, arrays = GRAD_CASES[name]
    assert gradcheck(fn, tuple(_leaf(a) for a in arrays))


@pytest.mark.parametrize(
    "name",
    [
        "det",
        "inv",
        "solve",
        "solve_triangular",
        "cholesky",
        "qr_tall",
        "qr_wide",
        "matrix_exp",
        "eigh",
        "svd_gauge_invariant",
        "pinv_wide",
    ],
)
def test_gradgradcheck(name):
    fn, arrays = GRAD_CASES[name]
    assert gradgradcheck(fn, tuple(_leaf(a) for a in arrays))


@pytest.mark.parametrize(
    "name",
    ["det", "slogdet", "inv", "solve", "solve_triangular", "cholesky", "qr_tall", "qr_wide", "svdvals", "pinv_wide"],
)
def test_gradients_match_torch(torch, name):
    fn, arrays = GRAD_CASES[name]
    ours = [_leaf(a) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    torch_fn = _torch_version(torch, name)
    outs, touts = _flat(fn(*ours)), _flat(torch_fn(*theirs))
    weights = [_rand(*o.shape, seed=9 + i) for i, o in enumerate(outs)]
    sum((o * numbagrad.tensor(w)).sum() for o, w in zip(outs, weights)).backward()
    sum((o * torch.tensor(w)).sum() for o, w in zip(touts, weights)).backward()
    for x, y in zip(ours, theirs):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-8, atol=1e-10)


def _torch_version(torch, name):
    tl = torch.linalg
    eye = torch.eye(3, dtype=torch.float64)
    return {
        "det": tl.det,
        "slogdet": lambda A: tl.slogdet(A)[1],
        "inv": tl.inv,
        "solve": tl.solve,
        "solve_triangular": lambda A, B: tl.solve_triangular(A, B, upper=True),
        "cholesky": lambda X: tl.cholesky(X @ X.mT + eye),
        "qr_tall": tl.qr,
        "qr_wide": tl.qr,
        "svdvals": tl.svdvals,
        "pinv_wide": tl.pinv,
    }[name]


def test_eigh_gradient_of_symmetric_input_matches_torch(torch):
    a = _spd(3, 3)
    x, tx = _leaf(a), torch.tensor(a, requires_grad=True)
    w, v = L.eigh(x)
    tw, tv = torch.linalg.eigh(tx)
    ((w * numbagrad.tensor([1.0, 2.0, 3.0])).sum() + (v * v).sum(-1)[0]).backward()
    ((tw * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum() + (tv * tv).sum(-1)[0]).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-10)


# --- errors --------------------------------------------------------------------------------------------------


def _errors_match(torch, fn, *arrays, dtype="float32"):
    ours, theirs = _tensors(torch, dtype, *arrays)
    with pytest.raises(Exception) as expected:
        fn(torch, *theirs)
    with pytest.raises(Exception) as got:
        fn(numbagrad, *ours)
    assert str(got.value) == str(expected.value)
    assert isinstance(got.value, RuntimeError)
    return got.value


SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
BATCH_SINGULAR = np.stack([np.eye(2), SINGULAR])
NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])


@pytest.mark.parametrize(
    ("fn", "array"),
    [
        (lambda m, A: m.linalg.inv(A), SINGULAR),
        (lambda m, A: m.linalg.inv(A), BATCH_SINGULAR),
        (lambda m, A: m.linalg.inv_ex(A, check_errors=True), SINGULAR),
        (lambda m, A: m.linalg.solve(A, A), SINGULAR),
        (lambda m, A: m.linalg.solve(A, A), BATCH_SINGULAR),
        (lambda m, A: m.linalg.cholesky(A), NOT_PD),
        (lambda m, A: m.linalg.cholesky(A), np.stack([np.eye(2), NOT_PD])),
    ],
)
def test_singular_input_raises_linalg_error(torch, fn, array):
    err = _errors_match(torch, fn, array)
    assert isinstance(err, L.LinAlgError)


@pytest.mark.parametrize("n", [3, 6])
def test_cholesky_ex_of_indefinite_matrix_returns_torch_partial_factor(torch, n):
    a = _spd(n, n)
    a[n - 2, n - 2] = -1.0
    ours, theirs = _tensors(torch, "float64", np.stack([a, _spd(n, n, seed=1)]))
    _assert_same(tuple(L.cholesky_ex(ours[0])), tuple(torch.linalg.cholesky_ex(theirs[0])), "float64")


def test_ex_variants_report_info_without_raising(torch):
    ours, theirs = _tensors(torch, "float64", BATCH_SINGULAR, np.stack([np.eye(2), NOT_PD]))
    _assert_same(L.inv_ex(ours[0])[1], torch.linalg.inv_ex(theirs[0])[1], "float64")
    _assert_same(L.cholesky_ex(ours[1])[1], torch.linalg.cholesky_ex(theirs[1])[1], "float64")


@pytest.mark.parametrize(
    ("fn", "array"),
    [
        (lambda m, A: m.linalg.inv(A), np.ones((2, 3))),
        (lambda m, A: m.linalg.det(A), np.ones((2, 3))),
        (lambda m, A: m.linalg.inv(A), np.ones(3)),
        (lambda m, A: m.linalg.det(A), np.ones(3)),
        (lambda m, A: m.linalg.cholesky(A), np.ones((2, 3))),
        (lambda m, A: m.linalg.eigh(A), np.ones((2, 3))),
        (lambda m, A: m.linalg.svd(A), np.ones(3)),
        (lambda m, A: m.linalg.qr(A), np.ones(3)),
        (lambda m, A: m.linalg.qr(A, mode="x"), np.ones((3, 3))),
        (lambda m, A: m.linalg.cross(A, A), np.ones(2)),
        (lambda m, A: m.linalg.matrix_norm(A), np.ones(3)),
        (lambda m, A: m.linalg.matrix_norm(A, 3), np.ones((3, 3))),
        (lambda m, A: m.linalg.matrix_power(A, 2), np.ones((2, 3))),
        (lambda m, A: m.linalg.multi_dot([A]), np.ones((2, 2))),
        (lambda m, A: m.linalg.multi_dot([A, A[:, :1].mT]), np.ones((2, 3))),
        (lambda m, A: m.linalg.multi_dot([A[0, :2], A.mT]), np.ones((3, 3))),
        (lambda m, A: m.linalg.cross(A, A[0]), np.ones((2, 3))),
        (lambda m, A: m.linalg.vecdot(A[0], A[0, :2]), np.ones((2, 3))),
        (lambda m, A: m.linalg.solve_triangular(A, A[:1], upper=True), np.eye(2)),
        (lambda m, A: m.linalg.solve_triangular(A, A[:, :1], upper=True, left=False), np.eye(2)),
        (lambda m, A: m.linalg.matrix_norm(A, dim=(0, 1, 2)), np.ones((2, 2, 2))),
        (lambda m, A: m.linalg.norm(A, "fro", dim=0), np.ones((2, 2))),
        (lambda m, A: m.linalg.vector_norm(A[:0], math.inf), np.ones(2)),
        (lambda m, A: m.linalg.vector_norm(A[:, :0], -1.0, dim=1), np.ones((2, 2))),
        (lambda m, A: m.linalg.eigh(A, UPLO="X"), np.ones((2, 2))),
        (lambda m, A: m.linalg.solve(A, A[:1]), np.eye(2)),
        (lambda m, A: m.linalg.lstsq(A, A[:1]), np.ones((3, 2))),
        (lambda m, A: m.linalg.lstsq(A, A, driver="foo"), np.ones((3, 2))),
        (lambda m, A: m.linalg.solve(A, m.ones(2, 3), left=False), np.eye(2)),
        (lambda m, A: m.linalg.solve(A, m.ones(3), left=False), np.eye(2)),
        (lambda m, A: m.linalg.norm(A, "fro"), np.ones((2, 2, 2))),
        (lambda m, A: m.linalg.norm(A, 2), np.ones((2, 2, 2))),
        (lambda m, A: m.linalg.vander(A), np.ones(1)),
        (lambda m, A: m.linalg.vander(A[0]), np.ones(2)),
        (lambda m, A: m.linalg.svd(A, driver="gesvd"), np.ones((2, 2))),
        (lambda m, A: m.linalg.solve(A, A.double()), np.eye(2)),
        (lambda m, A: m.linalg.lu_solve(A, A[0].int(), A[0]), np.eye(2)),
        (lambda m, A: m.linalg.tensorinv(A), np.ones((2, 3))),
        (lambda m, A: m.linalg.tensorinv(A, 0), np.ones((2, 2))),
        (lambda m, A: m.linalg.tensorsolve(A, A[:, 0]), np.ones((2, 3))),
        (lambda m, A: m.linalg.householder_product(A, A[0, :1]), np.ones((2, 3))),
        (lambda m, A: m.linalg.householder_product(A, A[:, 0]), np.ones((3, 2))),
    ],
)
def test_bad_input_raises_torch_error(torch, fn, array):
    _errors_match(torch, fn, array)


@pytest.mark.parametrize("mode", ["r", "complete"])
def test_qr_backward_without_a_usable_q_raises_torch_error(torch, mode):
    messages = []
    for lib in (torch, numbagrad):
        x = lib.tensor(_rand(4, 3), requires_grad=True)
        with pytest.raises(RuntimeError) as err:
            lib.linalg.qr(x, mode=mode)[1].sum().backward()
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_matrix_power_of_a_float_power_raises_torch_type_error(torch):
    with pytest.raises(TypeError) as expected:
        torch.linalg.matrix_power(torch.eye(2), 1.5)
    with pytest.raises(TypeError, match=str(expected.value).replace("(", r"\(").replace(")", r"\)")):
        L.matrix_power(numbagrad.eye(2), 1.5)


def test_integer_input_raises_torch_error(torch):
    for fn in (lambda m, A: m.linalg.inv(A), lambda m, A: m.linalg.vector_norm(A)):
        with pytest.raises(RuntimeError) as expected:
            fn(torch, torch.ones(3, 3, dtype=torch.int64))
        with pytest.raises(RuntimeError, match=str(expected.value).replace(".", r"\.")):
            fn(numbagrad, numbagrad.ones(3, 3, dtype=numbagrad.int64))


def test_linalg_error_is_a_runtime_error():
    assert issubclass(L.LinAlgError, RuntimeError)


def test_singular_input_is_left_unchanged():
    a = numbagrad.tensor(SINGULAR)
    with pytest.raises(L.LinAlgError):
        L.inv(a)
    np.testing.assert_array_equal(a.numpy(), SINGULAR)


# --- LU, householder, tensor solvers, condition number -------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (4, 3), (3, 5)])
def test_lu_factor_and_lu_match_torch(torch, shape, dtype):
    ours, theirs = _tensors(torch, dtype, _rand(*shape))
    _assert_same(tuple(L.lu_factor_ex(ours[0])), tuple(torch.linalg.lu_factor_ex(theirs[0])), dtype)
    _assert_same(tuple(L.lu(ours[0])), tuple(torch.linalg.lu(theirs[0])), dtype)


@pytest.mark.parametrize(("left", "adjoint"), [(True, False), (False, False), (True, True), (False, True)])
def test_lu_solve_matches_torch(torch, left, adjoint):
    ours, theirs = _tensors(torch, "float64", _rand(2, 3, 3), _rand(2, 3, 3, seed=1))
    lu_, piv = L.lu_factor(ours[0])
    tlu, tpiv = torch.linalg.lu_factor(theirs[0])
    _assert_same(
        L.lu_solve(lu_, piv, ours[1], left=left, adjoint=adjoint),
        torch.linalg.lu_solve(tlu, tpiv, theirs[1], left=left, adjoint=adjoint),
        "float64",
    )


def test_solve_ex_reports_singular_info(torch):
    ours, theirs = _tensors(torch, "float64", BATCH_SINGULAR)
    _assert_same(tuple(L.solve_ex(ours[0], ours[0])), tuple(torch.linalg.solve_ex(theirs[0], theirs[0])), "float64")
    ours, theirs = _tensors(torch, "float64", _wellcond(3, 3))
    _assert_same(tuple(L.solve_ex(ours[0], ours[0])), tuple(torch.linalg.solve_ex(theirs[0], theirs[0])), "float64")


def test_lu_factor_of_singular_matrix_raises_torch_error(torch):
    _errors_match(torch, lambda m, A: m.linalg.lu_factor(A), SINGULAR)
    _errors_match(torch, lambda m, A: m.linalg.lu_factor_ex(A, check_errors=True), BATCH_SINGULAR)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_householder_product_matches_torch(torch, dtype):
    ours, theirs = _tensors(torch, dtype, _rand(2, 4, 3), _rand(2, 2, seed=1))
    _assert_same(L.householder_product(*ours), torch.linalg.householder_product(*theirs), dtype)


def test_geqrf_matches_torch_and_orgqr_rebuilds_q(torch):
    ours, theirs = _tensors(torch, "float64", _rand(2, 4, 3))
    h, tau = numbagrad.geqrf(ours[0])
    _assert_same((h, tau), tuple(torch.geqrf(theirs[0])), "float64")
    _assert_same(numbagrad.orgqr(h, tau), torch.linalg.qr(theirs[0])[0], "float64")
    _assert_same(h.orgqr(tau), torch.orgqr(*torch.geqrf(theirs[0])), "float64")


def test_geqrf_backward_raises_torch_error(torch):
    x = _leaf(_rand(3, 3))
    with pytest.raises(RuntimeError, match="the derivative for 'geqrf' is not implemented."):
        numbagrad.geqrf(x)[0].sum().backward()


def test_tensorinv_and_tensorsolve_match_torch(torch):
    ours, theirs = _tensors(torch, "float64", _wellcond(6, 6).reshape(2, 3, 6), _rand(2, 3, seed=1))
    _assert_same(L.tensorinv(ours[0]), torch.linalg.tensorinv(theirs[0]), "float64")
    _assert_same(L.tensorsolve(*ours), torch.linalg.tensorsolve(*theirs), "float64")
    a4, ta4 = ours[0].reshape(6, 2, 3), theirs[0].reshape(6, 2, 3)
    _assert_same(L.tensorsolve(a4, ours[1], dims=(0,)), torch.linalg.tensorsolve(ta4, theirs[1], dims=(0,)), "float64")


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc"])
def test_cond_matches_torch(torch, p):
    ours, theirs = _tensors(torch, "float64", _wellcond(2, 3, 3))
    _assert_same(L.cond(ours[0], p), torch.linalg.cond(theirs[0], p), "float64")


@pytest.mark.parametrize(
    ("fn", "arrays"),
    [
        (lambda A: L.lu_factor(A)[0], [_wellcond(2, 3, 3)]),
        (lambda A: L.lu_factor(A)[0], [_rand(2, 4, 3)]),
        (lambda A: L.lu_factor(A)[0], [_rand(3, 5)]),
        (lambda A: L.lu(A)[1:], [_wellcond(3, 3)]),
        (lambda A, B: L.lu_solve(*L.lu_factor(A), B), [_wellcond(3, 3), _rand(3, 2, seed=1)]),
        (lambda A, B: L.lu_solve(*L.lu_factor(A), B, left=False, adjoint=True), [_wellcond(3, 3), _rand(2, 3)]),
        (lambda A, tau: L.householder_product(A, tau), [_rand(4, 3), _rand(2, seed=1)]),
        (lambda A: L.tensorinv(A, 1), [_wellcond(4, 4).reshape(4, 2, 2)]),
        (lambda A: L.cond(A), [_wellcond(3, 3)]),
        (lambda A: L.cond(A, 1), [_wellcond(3, 3)]),
    ],
    ids=[
        "lu_factor",
        "lu_factor_tall",
        "lu_factor_wide",
        "lu",
        "lu_solve",
        "lu_solve_right_adjoint",
        "householder",
        "tensorinv",
        "cond",
        "cond_1",
    ],
)
def test_gradcheck_of_lu_family(fn, arrays):
    assert gradcheck(fn, tuple(_leaf(a) for a in arrays))


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 3), (3, 5)])
def test_lu_factor_gradient_matches_torch(torch, shape):
    a = _rand(*shape)
    x, tx = _leaf(a), torch.tensor(a, requires_grad=True)
    w = _rand(*shape, seed=5)
    (L.lu_factor(x)[0] * numbagrad.tensor(w)).sum().backward()
    (torch.linalg.lu_factor(tx)[0] * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)


# --- torch's top-level forms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("some", "compute_uv"), [(True, True), (False, True), (True, False)])
def test_torch_svd_returns_v_and_zero_vectors_without_compute_uv(torch, some, compute_uv):
    a = _rand(2, 4, 3)
    u, s, v = numbagrad.svd(numbagrad.tensor(a), some=some, compute_uv=compute_uv)
    tu, ts, tv = torch.svd(torch.tensor(a), some=some, compute_uv=compute_uv)
    assert (tuple(u.shape), tuple(v.shape)) == (tuple(tu.shape), tuple(tv.shape))
    np.testing.assert_allclose(s.numpy(), ts.numpy(), rtol=1e-10)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), atol=1e-10)
    if not compute_uv:
        assert not u.numpy().any() and not v.numpy().any()


def test_torch_cholesky_family_matches_torch(torch):
    ours, theirs = _tensors(torch, "float64", _spd(2, 3, 3), _rand(2, 3, 2, seed=1))
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        low = numbagrad.cholesky(ours[0])
    tlow = torch.linalg.cholesky(theirs[0])
    _assert_same(low, tlow, "float64")
    for upper in (False, True):
        f, tf = (low.mT, tlow.mT) if upper else (low, tlow)
        _assert_same(numbagrad.cholesky_solve(ours[1], f, upper), torch.cholesky_solve(theirs[1], tf, upper), "float64")
        _assert_same(numbagrad.cholesky_inverse(f, upper), torch.cholesky_inverse(tf, upper), "float64")


def test_torch_vander_and_lu_unpack_match_torch(torch):
    ours, theirs = _tensors(torch, "float64", _rand(4), _rand(3, 3, seed=1))
    _assert_same(numbagrad.vander(ours[0]), torch.vander(theirs[0]), "float64")
    _assert_same(numbagrad.vander(ours[0], 3, True), torch.vander(theirs[0], 3, True), "float64")
    lu_, piv = L.lu_factor(ours[1])
    tlu, tpiv = torch.linalg.lu_factor(theirs[1])
    for flags in ((True, True), (False, True), (True, False)):
        _assert_same(tuple(numbagrad.lu_unpack(lu_, piv, *flags)), tuple(torch.lu_unpack(tlu, tpiv, *flags)), "float64")


@pytest.mark.parametrize(
    ("fn", "arrays"),
    [
        (
            lambda A, B: numbagrad.cholesky_solve(B, L.cholesky(A @ A.mT + numbagrad.eye(3, dtype=numbagrad.float64))),
            [_rand(3, 3), _rand(3, 2, seed=1)],
        ),
        (
            lambda A: numbagrad.cholesky_inverse(L.cholesky(A @ A.mT + numbagrad.eye(3, dtype=numbagrad.float64))),
            [_rand(3, 3)],
        ),
        (lambda x: numbagrad.vander(x), [_rand(3)]),
        (lambda A: numbagrad.svd(A)[0] @ numbagrad.svd(A)[2].mT, [_rand(4, 3)]),
    ],
    ids=["cholesky_solve", "cholesky_inverse", "vander", "svd"],
)
def test_gradcheck_of_top_level_forms(fn, arrays):
    assert gradcheck(fn, tuple(_leaf(a) for a in arrays))


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x: m.linalg.det(x),
        lambda m, x: m.linalg.inv(x),
        lambda m, x: m.linalg.solve(x, x[..., :1]),
        lambda m, x: m.linalg.cholesky(x @ x.mT),
        lambda m, x: m.linalg.svdvals(x),
        lambda m, x: m.linalg.eigvalsh(x + x.mT),
        lambda m, x: m.linalg.matrix_exp(x),
        lambda m, x: m.linalg.vector_norm(x, dim=-1),
    ],
    ids=["det", "inv", "solve", "cholesky", "svdvals", "eigvalsh", "matrix_exp", "vector_norm"],
)
def test_values_and_gradients_on_each_device_match_torch(torch, device, fn):
    a = _wellcond(2, 3, 3)
    x = numbagrad.tensor(a, device=device, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    out, tout = fn(numbagrad, x), fn(torch, tx)
    assert out.device.type == device
    np.testing.assert_allclose(out.detach().cpu().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-10)
    out.sum().backward()
    tout.sum().backward()
    assert x.grad.device.type == device
    np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_svd_and_eigh_gauge_invariant_gradients_match_torch(torch):
    a = _rand(4, 3)
    x, tx = _leaf(a), torch.tensor(a, requires_grad=True)
    u, s, vh = L.svd(x, full_matrices=False)
    tu, ts, tvh = torch.linalg.svd(tx, full_matrices=False)
    ((u @ vh).sum() + (s * s).sum()).backward()
    ((tu @ tvh).sum() + (ts * ts).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_lu_factor_gradgradcheck():
    assert gradgradcheck(lambda A: L.lu_factor(A)[0], (_leaf(_wellcond(3, 3)),))


@pytest.mark.parametrize("dtype", ["float16"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda m, A: m.linalg.inv(A),
        lambda m, A: m.linalg.inv_ex(A),
        lambda m, A: m.linalg.slogdet(A),
        lambda m, A: m.linalg.det(A),
        lambda m, A: m.linalg.solve(A, A),
        lambda m, A: m.linalg.lu_factor(A),
        lambda m, A: m.linalg.svdvals(A),
        lambda m, A: m.linalg.eigvalsh(A),
        lambda m, A: m.linalg.cholesky(A),
        lambda m, A: m.linalg.qr(A),
        lambda m, A: m.linalg.solve_triangular(A, A, upper=True),
        lambda m, A: m.linalg.pinv(A),
        lambda m, A: m.linalg.matrix_rank(A),
        lambda m, A: m.linalg.lstsq(A, A),
        lambda m, A: m.linalg.matrix_norm(A, 2),
    ],
)
def test_low_precision_input_raises_torch_error(torch, fn, dtype):
    with pytest.raises(Exception) as expected:
        fn(torch, torch.ones(2, 2, dtype=getattr(torch, dtype)))
    with pytest.raises(Exception) as got:
        fn(numbagrad, numbagrad.ones(2, 2, dtype=getattr(numbagrad, dtype)))
    assert (type(got.value), str(got.value)) == (type(expected.value), str(expected.value))


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, A: m.linalg.det(A),
        lambda m, A: m.linalg.inv(A),
        lambda m, A: m.linalg.svdvals(A),
        lambda m, A: m.linalg.cholesky(A),
        lambda m, A: m.linalg.eigvalsh(A),
        lambda m, A: m.linalg.matrix_exp(A),
        lambda m, A: m.linalg.pinv(A),
        lambda m, A: m.linalg.matrix_rank(A),
        lambda m, A: tuple(m.linalg.slogdet(A)),
        lambda m, A: m.linalg.matrix_norm(A, 2),
        lambda m, A: m.linalg.matrix_norm(A, "nuc"),
    ],
)
@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_empty_matrices_match_torch(torch, fn, shape):
    ours, theirs = _tensors(torch, "float32", np.zeros(shape))
    _assert_same(fn(numbagrad, ours[0]), fn(torch, theirs[0]), "float32")


BATCHED_SHAPES = [
    ((2, 2, 4, 8), (2, 2, 8, 4)),
    ((3, 5), (2, 5, 4)),
    ((2, 3, 5), (5, 4)),
    ((5,), (2, 5, 3)),
    ((2, 4, 5), (5,)),
    ((1, 4, 5), (3, 5, 2)),
    ((3, 1, 4, 5), (2, 5, 6)),
]


@pytest.mark.parametrize("shapes", BATCHED_SHAPES)
@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_batched_matmul_gradients_are_torchs_with_broadcast_batches(torch, shapes, needs):
    """The backward that records no graph computes on the arrays; each needed gradient is torch's, summed over
    broadcast batch dims and shaped as its operand (a 1-d operand's added dim removed)."""
    rng = np.random.default_rng(len(shapes[0]) + 3 * len(shapes[1]))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = []
    for lib in (numbagrad, torch):
        a, b = (lib.tensor(x, requires_grad=need) for x, need in zip(arrays, needs))
        out = a @ b
        out.backward(lib.ones_like(out))
        grads.append([None if t.grad is None else t.grad.numpy() for t in (a, b)])
    for ours, theirs in zip(*grads):
        if theirs is None:
            assert ours is None
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
