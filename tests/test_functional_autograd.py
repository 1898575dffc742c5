"""``autograd.functional``: jacobian, hessian, vjp, jvp, hvp and vhp with torch's signatures and semantics.

In float64 every result matches torch 2.13 to 1e-10 on several functions (skipped without torch), including the
tuple structure of results, ``create_graph`` (results that can be differentiated again) and the strict-mode errors.
A quadratic, whose derivatives are known in closed form, checks everything without torch.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.autograd import functional as F

TOL = {"rtol": 1e-10, "atol": 1e-10}


def _np(x):
    """Nested tuples of tensors -> nested tuples of float64 arrays."""
    if isinstance(x, tuple):
        return tuple(_np(e) for e in x)
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def _assert_close(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_close(a, b)
    else:
        assert not isinstance(ours, tuple)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(_np(ours), _np(theirs), **TOL)


# --- the functions (methods only, so the same code runs on numbagrad and torch tensors) ----------------------------


def elementwise(x):
    return x.tanh() * x.exp() + x.sin() * x


def two_in_two_out(x, y):
    return x.mm(y).sigmoid(), (x**2).sum(1) * y.sum()


def one_in_two_out(x):
    return x.cos(), (x * x).sum()


def scalar_one(x):
    return (x.sigmoid() * x.tanh()).sum() / (x * x).sum().sqrt()


def scalar_two(x, y):
    return (x.exp() * y).sum() + (x**3).sum() * y.sum() - (x.mm(y.t()) ** 2).sum()


def scalar_matrix(w):
    return (w.mm(w.t()).tanh() * w.sum(1).unsqueeze(1)).sum()


_RNG = np.random.default_rng(7)
_X3 = _RNG.uniform(-1, 1, 3)
_X23 = _RNG.uniform(-1, 1, (2, 3))
_Y32 = _RNG.uniform(-1, 1, (3, 2))
_Y23 = _RNG.uniform(-1, 1, (2, 3))
_V2 = _RNG.uniform(-1, 1, 2)
_V22 = _RNG.uniform(-1, 1, (2, 2))

# (id, function, inputs (arrays; a tuple means tuple inputs), output-shaped v, input-shaped v)
VECTOR_CASES = [
    ("elementwise", elementwise, _X3, _RNG.uniform(-1, 1, 3), _RNG.uniform(-1, 1, 3)),
    ("two-in-two-out", two_in_two_out, (_X23, _Y32), (_V22, _V2), (_Y23, _Y32.copy())),
    ("one-in-two-out", one_in_two_out, _X3, (_RNG.uniform(-1, 1, 3), np.array(0.7)), _RNG.uniform(-1, 1, 3)),
]
SCALAR_CASES = [
    ("scalar-one", scalar_one, _X3, _RNG.uniform(-1, 1, 3)),
    ("scalar-two", scalar_two, (_X23, _Y23), (_RNG.uniform(-1, 1, (2, 3)), _RNG.uniform(-1, 1, (2, 3)))),
    ("scalar-matrix", scalar_matrix, _X23, _Y23),
]


def _t(lib, a, requires_grad=False):
    if isinstance(a, tuple):
        return tuple(_t(lib, e, requires_grad) for e in a)
    return lib.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def _both(call):
    """``call(lib, functional)`` on numbagrad and on torch."""
    torch = pytest.importorskip("torch")
    return call(ng, F), call(torch, torch.autograd.functional)


@pytest.mark.torch
@pytest.mark.parametrize("name,func,inputs,v_out,v_in", VECTOR_CASES, ids=[c[0] for c in VECTOR_CASES])
@pytest.mark.parametrize("create_graph", [False, True])
def test_jacobian_matches_torch(name, func, inputs, v_out, v_in, create_graph):
    ours, theirs = _both(lambda lib, f: f.jacobian(func, _t(lib, inputs), create_graph=create_graph))
    _assert_close(ours, theirs)


@pytest.mark.torch
@pytest.mark.parametrize("name,func,inputs,v_out,v_in", VECTOR_CASES, ids=[c[0] for c in VECTOR_CASES])
def test_vjp_matches_torch(name, func, inputs, v_out, v_in):
    ours, theirs = _both(lambda lib, f: f.vjp(func, _t(lib, inputs), _t(lib, v_out)))
    _assert_close(ours, theirs)


@pytest.mark.torch
@pytest.mark.parametrize("name,func,inputs,v_out,v_in", VECTOR_CASES, ids=[c[0] for c in VECTOR_CASES])
def test_jvp_matches_torch(name, func, inputs, v_out, v_in):
    ours, theirs = _both(lambda lib, f: f.jvp(func, _t(lib, inputs), _t(lib, v_in)))
    _assert_close(ours, theirs)


@pytest.mark.torch
@pytest.mark.parametrize("name,func,inputs,v", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
@pytest.mark.parametrize("create_graph", [False, True])
def test_hessian_matches_torch(name, func, inputs, v, create_graph):
    ours, theirs = _both(lambda lib, f: f.hessian(func, _t(lib, inputs), create_graph=create_graph))
    _assert_close(ours, theirs)


@pytest.mark.torch
@pytest.mark.parametrize("name,func,inputs,v", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
@pytest.mark.parametrize("product", ["hvp", "vhp"])
def test_hessian_vector_products_match_torch(name, func, inputs, v, product):
    ours, theirs = _both(lambda lib, f: getattr(f, product)(func, _t(lib, inputs), _t(lib, v)))
    _assert_close(ours, theirs)


@pytest.mark.torch
@pytest.mark.parametrize("name,func,inputs,v", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
def test_scalar_functions_gradients_by_vjp_without_v_match_torch(name, func, inputs, v):
    ours, theirs = _both(lambda lib, f: f.vjp(func, _t(lib, inputs)))
    _assert_close(ours, theirs)


@pytest.mark.torch
@pytest.mark.parametrize("fn_name", ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"])
def test_create_graph_results_differentiate_again_like_torch(fn_name):
    """With ``create_graph=True`` the result is a function of the caller's inputs: its gradient matches torch's."""

    def call(lib, f):
        x = _t(lib, _X3, requires_grad=True)
        v = _t(lib, _RNG_V)
        if fn_name == "jacobian":
            res = f.jacobian(elementwise, x, create_graph=True)
        elif fn_name == "hessian":
            res = f.hessian(scalar_one, x, create_graph=True)
        elif fn_name in ("vjp", "jvp"):
            res = getattr(f, fn_name)(elementwise, x, v, create_graph=True)[1]
        else:
            res = getattr(f, fn_name)(scalar_one, x, v, create_graph=True)[1]
        assert res.requires_grad
        (g,) = lib.autograd.grad((res * res).sum(), x)
        return g

    ours, theirs = _both(call)
    _assert_close(ours, theirs)


_RNG_V = np.array([0.3, -1.2, 0.8])


@pytest.mark.torch
@pytest.mark.parametrize("fn_name", ["jacobian", "hessian"])
def test_vectorize_and_forward_mode_give_torchs_values(fn_name):
    func = elementwise if fn_name == "jacobian" else scalar_two
    inputs = _X3 if fn_name == "jacobian" else (_X23, _Y23)
    key = "strategy" if fn_name == "jacobian" else "outer_jacobian_strategy"
    for kwargs in ({"vectorize": True}, {"vectorize": True, key: "forward-mode"}):
        ours, theirs = _both(lambda lib, f: getattr(f, fn_name)(func, _t(lib, inputs), **kwargs))  # noqa: B023
        _assert_close(ours, theirs)


# --- strict mode and argument errors: the same exception and text as torch ---------------------------------------


def _const(x):
    return x.detach() * 2


def _linear(x):
    return x * 3


def _ignores_second(x, y):
    return x.exp()


def _scalar_ignores_second(x, y):
    return (x**3).sum()


def _scalar_linear(x):
    return (x * 2).sum()


ERROR_CASES = [
    ("vjp-output-needs-no-grad", lambda f, t: f.vjp(_const, t(_X3), t(_X3), strict=True)),
    ("vjp-independent-input", lambda f, t: f.vjp(_ignores_second, (t(_X3), t(_X3)), t(_X3), strict=True)),
    ("jvp-independent-input", lambda f, t: f.jvp(_ignores_second, (t(_X3), t(_X3)), (t(_X3), t(_X3)), strict=True)),
    ("jacobian-independent", lambda f, t: f.jacobian(_ignores_second, (t(_X3), t(_X3)), strict=True)),
    ("jacobian-linear-create-graph", lambda f, t: f.jacobian(_linear, t(_X3), strict=True, create_graph=True)),
    ("hessian-linear", lambda f, t: f.hessian(_scalar_linear, t(_X3), strict=True)),
    ("hessian-independent", lambda f, t: f.hessian(_scalar_ignores_second, (t(_X3), t(_X3)), strict=True)),
    ("hessian-not-scalar", lambda f, t: f.hessian(elementwise, t(_X3))),
    ("hessian-tuple-out", lambda f, t: f.hessian(one_in_two_out, t(_X3))),
    ("vhp-linear", lambda f, t: f.vhp(_scalar_linear, t(_X3), t(_X3), strict=True)),
    ("hvp-linear", lambda f, t: f.hvp(_scalar_linear, t(_X3), t(_X3), strict=True)),
    ("hvp-not-scalar", lambda f, t: f.hvp(elementwise, t(_X3), t(_X3))),
    ("vhp-tuple-out", lambda f, t: f.vhp(one_in_two_out, t(_X3), t(_X3))),
    ("vjp-v-none", lambda f, t: f.vjp(elementwise, t(_X3))),
    ("jvp-v-none", lambda f, t: f.jvp(elementwise, t(_X3))),
    ("hvp-v-none", lambda f, t: f.hvp(scalar_one, t(_X3))),
    ("vjp-v-wrong-size", lambda f, t: f.vjp(elementwise, t(_X3), t(_V2))),
    ("jvp-v-wrong-size-tuple", lambda f, t: f.jvp(two_in_two_out, (t(_X23), t(_Y32)), (t(_X23), t(_X23)))),
    ("jvp-v-wrong-length", lambda f, t: f.jvp(two_in_two_out, (t(_X23), t(_Y32)), (t(_X23),))),
    ("vjp-v-two-for-one", lambda f, t: f.vjp(elementwise, t(_X3), (t(_X3), t(_X3)))),
    ("inputs-not-tensors", lambda f, t: f.vjp(elementwise, [1.0, 2.0])),
    ("tuple-with-non-tensor", lambda f, t: f.jacobian(_ignores_second, (t(_X3), 2.0))),
    ("output-not-tensor", lambda f, t: f.jacobian(lambda x: 1.0, t(_X3))),
    ("vectorize-strict", lambda f, t: f.jacobian(elementwise, t(_X3), vectorize=True, strict=True)),
    ("forward-mode-needs-vectorize", lambda f, t: f.jacobian(elementwise, t(_X3), strategy="forward-mode")),
    ("forward-mode-strict", lambda f, t: f.jacobian(elementwise, t(_X3), strategy="forward-mode", strict=True)),
    (
        "forward-mode-create-graph",
        lambda f, t: f.jacobian(elementwise, t(_X3), strategy="forward-mode", create_graph=True),
    ),
    ("unknown-strategy", lambda f, t: f.jacobian(elementwise, t(_X3), strategy="sideways")),
    ("hessian-unknown-strategy", lambda f, t: f.hessian(scalar_one, t(_X3), outer_jacobian_strategy="sideways")),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,call", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_torch(name, call):
    def run(lib, f):
        with pytest.raises(Exception) as info:
            call(f, lambda a: _t(lib, a))
        return type(info.value), str(info.value).replace("torch.Size", "Size").replace("numbagrad.Size", "Size")

    ours, theirs = _both(run)
    assert ours == theirs


# --- by hand, without torch: a quadratic ------------------------------------------------------------------------

A = np.array([[2.0, -1.0, 0.5], [0.0, 3.0, 1.0], [1.5, 0.25, -2.0]])
B = np.array([0.5, -1.0, 2.0])
X = np.array([1.0, -2.0, 0.5])
V = np.array([0.25, 1.0, -3.0])


def quadratic(x):
    """x^T A x + b.x: gradient (A + A^T) x + b, Hessian A + A^T."""
    a, b = ng.tensor(A), ng.tensor(B)
    return (x * ng.mv(a, x)).sum() + (b * x).sum()


def linear_map(x):
    return ng.mv(ng.tensor(A), x)


def test_jacobian_of_a_linear_map_is_its_matrix():
    np.testing.assert_allclose(_np(F.jacobian(linear_map, ng.tensor(X))), A, rtol=1e-15)


def test_jacobian_of_a_scalar_is_the_gradient():
    np.testing.assert_allclose(_np(F.jacobian(quadratic, ng.tensor(X))), (A + A.T) @ X + B, rtol=1e-14)


def test_vjp_and_jvp_of_a_linear_map():
    out, vjp = F.vjp(linear_map, ng.tensor(X), ng.tensor(V))
    np.testing.assert_allclose(_np(out), A @ X, rtol=1e-15)
    np.testing.assert_allclose(_np(vjp), A.T @ V, rtol=1e-15)
    out, jvp = F.jvp(linear_map, ng.tensor(X), ng.tensor(V))
    np.testing.assert_allclose(_np(out), A @ X, rtol=1e-15)
    np.testing.assert_allclose(_np(jvp), A @ V, rtol=1e-15)


def test_hessian_of_the_quadratic():
    np.testing.assert_allclose(_np(F.hessian(quadratic, ng.tensor(X))), A + A.T, rtol=1e-15)


def test_hvp_and_vhp_of_the_quadratic():
    value = X @ A @ X + B @ X
    for product, expected in ((F.hvp, (A + A.T) @ V), (F.vhp, V @ (A + A.T))):
        out, hv = product(quadratic, ng.tensor(X), ng.tensor(V))
        np.testing.assert_allclose(out.item(), value, rtol=1e-15)
        np.testing.assert_allclose(_np(hv), expected, rtol=1e-14)


def test_tuple_inputs_give_tuple_blocks():
    """f(x, y) = x.A y: the Hessian blocks are [[0, A], [A^T, 0]]."""

    def bilinear(x, y):
        return (x * ng.mv(ng.tensor(A), y)).sum()

    ((hxx, hxy), (hyx, hyy)) = F.hessian(bilinear, (ng.tensor(X), ng.tensor(V)))
    np.testing.assert_array_equal(_np(hxx), np.zeros((3, 3)))
    np.testing.assert_allclose(_np(hxy), A, rtol=1e-15)
    np.testing.assert_allclose(_np(hyx), A.T, rtol=1e-15)
    np.testing.assert_array_equal(_np(hyy), np.zeros((3, 3)))
    (gx, gy) = F.vjp(bilinear, (ng.tensor(X), ng.tensor(V)))[1]
    np.testing.assert_allclose(_np(gx), A @ V, rtol=1e-15)
    np.testing.assert_allclose(_np(gy), A.T @ X, rtol=1e-15)


def test_tuple_outputs_give_one_jacobian_per_output():
    def two(x):
        return linear_map(x), quadratic(x)

    j_map, j_quad = F.jacobian(two, ng.tensor(X))
    np.testing.assert_allclose(_np(j_map), A, rtol=1e-15)
    np.testing.assert_allclose(_np(j_quad), (A + A.T) @ X + B, rtol=1e-14)
    _, (jv_map, jv_quad) = F.jvp(two, ng.tensor(X), ng.tensor(V))
    np.testing.assert_allclose(_np(jv_map), A @ V, rtol=1e-14)
    np.testing.assert_allclose(jv_quad.item(), ((A + A.T) @ X + B) @ V, rtol=1e-14)


def test_jacobian_shape_is_output_shape_then_input_shape():
    x = ng.tensor(np.arange(6.0).reshape(2, 3))
    jac = F.jacobian(lambda x: x.sum(0), x)
    assert jac.shape == (3, 2, 3)
    expected = np.zeros((3, 2, 3))
    for j in range(3):
        expected[j, :, j] = 1.0
    np.testing.assert_array_equal(_np(jac), expected)


def test_an_unused_input_gets_zeros_outside_strict_mode():
    jac = F.jacobian(lambda x, y: x * 2, (ng.tensor(X), ng.tensor(V)))
    np.testing.assert_array_equal(_np(jac[1]), np.zeros((3, 3)))
    with pytest.raises(RuntimeError, match="^Output 0 of the user-provided function is independent of input 1. "):
        F.jacobian(lambda x, y: x * 2, (ng.tensor(X), ng.tensor(V)), strict=True)


def test_results_are_detached_and_inputs_untouched_without_create_graph():
    x = ng.tensor(X, requires_grad=True)
    out, hv = F.hvp(quadratic, x, ng.tensor(V))
    assert not out.requires_grad and not hv.requires_grad
    assert x.grad is None and x.is_leaf
    jac = F.jacobian(linear_map, x)
    assert jac.grad_fn is None


def test_create_graph_keeps_the_result_differentiable_by_hand():
    """The gradient (A + A^T) x + b, differentiated again through vjp(create_graph=True), gives A + A^T."""
    x = ng.tensor(X, requires_grad=True)
    _, g = F.vjp(quadratic, x, create_graph=True)
    assert g.requires_grad
    (h_v,) = ng.autograd.grad(g, x, ng.tensor(V))
    np.testing.assert_allclose(_np(h_v), (A + A.T).T @ V, rtol=1e-14)


def test_vectorize_true_gives_the_same_values():
    np.testing.assert_allclose(_np(F.jacobian(linear_map, ng.tensor(X), vectorize=True)), A, rtol=1e-15)
    np.testing.assert_allclose(
        _np(F.hessian(quadratic, ng.tensor(X), vectorize=True, outer_jacobian_strategy="forward-mode")),
        A + A.T,
        rtol=1e-15,
    )


def test_strict_mode_refuses_a_linear_function_in_hessian():
    with pytest.raises(RuntimeError, match="found that the jacobian of the user-provided function with respect to"):
        F.hessian(lambda x: (x * 2).sum(), ng.tensor(X), strict=True)


def test_grad_mode_is_respected_outside_the_computation():
    with ng.no_grad():
        _, vjp = F.vjp(linear_map, ng.tensor(X), ng.tensor(V))
    np.testing.assert_allclose(_np(vjp), A.T @ V, rtol=1e-15)
    assert ng.is_grad_enabled()
