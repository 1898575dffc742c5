"""Forward-mode AD (``autograd.forward_ad``): dual tensors' tangents through the table rows (every row, against
central differences of its numpy reference, and against torch where torch has the function), through shape,
reduction, linear-algebra and nn ops and a small MLP (against torch), views and in-place ops, the level rules and
their errors, and the forward-mode transforms built on it (``func.jvp``/``jacfwd``/``hessian``,
``autograd.functional.jacobian(strategy="forward-mode")``/``hvp``, ``gradcheck(check_forward_ad=True)``)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import numbagrad
import numbagrad.autograd.forward_ad as fwad
from numbagrad.ops.elementwise import function_for
from numbagrad.scalar_math import ROWS, example_params

FLOAT_ROWS = [r for r in ROWS.values() if r.differentiable and not r.integral_only and not r.out_bool]
#: rows with an input torch has no derivative for: torch has no forward rule for them at all
UNSUPPORTED_ROWS = [r for r in FLOAT_ROWS if r.no_formula]
FLOAT_ROWS = [r for r in FLOAT_ROWS if not r.no_formula]
TORCH_ROWS = [r for r in FLOAT_ROWS if not r.params]


def _draw(row, shape, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lo, hi = row.domain
    return [rng.uniform(lo, hi, shape) for _ in range(row.arity)]


def _tangent_of(fn, primals: list, tangents: list):
    """``fn``'s output and tangent with ``primals`` made dual with ``tangents`` (numbagrad)."""
    with fwad.dual_level():
        duals = [fwad.make_dual(p, t) for p, t in zip(primals, tangents)]
        out = fn(*duals)
        primal, tangent = fwad.unpack_dual(out)
        return primal, tangent


def _both(torch, fn, arrays: list, tangent_arrays: list, **kwargs):
    """The tangent of ``fn(lib, *duals)`` in numbagrad and in torch, as numpy arrays."""
    results = []
    for lib in (numbagrad, torch):
        fw = numbagrad.autograd.forward_ad if lib is numbagrad else torch.autograd.forward_ad
        with fw.dual_level():
            duals = [fw.make_dual(lib.tensor(a), lib.tensor(t)) for a, t in zip(arrays, tangent_arrays)]
            tangent = fw.unpack_dual(fn(lib, *duals)).tangent
            results.append(tangent.detach().numpy().copy())
    return results


# --- table rows ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", UNSUPPORTED_ROWS, ids=lambda r: r.name)
def test_a_row_without_a_derivative_for_an_input_has_no_forward_rule(row):
    arrays = _draw(row, (2, 3), seed=1)
    cls = function_for(row.name)
    with pytest.raises(NotImplementedError, match="Trying to use forward AD with"):
        _tangent_of(
            lambda *xs: cls.apply(*xs, *example_params(row)),
            [numbagrad.tensor(a) for a in arrays],
            [numbagrad.tensor(np.ones((2, 3))) for _ in arrays],
        )


@pytest.mark.parametrize("row", FLOAT_ROWS, ids=lambda r: r.name)
def test_row_tangent_matches_central_differences(row):
    arrays = _draw(row, (2, 3), seed=1)
    tangents = [np.random.default_rng(2 + i).standard_normal((2, 3)) for i in range(row.arity)]
    params = example_params(row)
    cls = function_for(row.name)
    _, tangent = _tangent_of(
        lambda *xs: cls.apply(*xs, *params),
        [numbagrad.tensor(a) for a in arrays],
        [numbagrad.tensor(t) for t in tangents],
    )
    eps = 1e-6
    plus = row.reference(*[a + eps * t for a, t in zip(arrays, tangents)], *params)
    minus = row.reference(*[a - eps * t for a, t in zip(arrays, tangents)], *params)
    np.testing.assert_allclose(tangent.numpy(), (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("row", [r for r in TORCH_ROWS if r.names[0] not in ("floor_divide",)], ids=lambda r: r.name)
def test_row_tangent_matches_torch(torch, row):
    if not hasattr(torch, row.names[0]):
        pytest.skip(f"torch has no {row.names[0]}")
    arrays = _draw(row, (2, 3), seed=3)
    tangents = [np.random.default_rng(4 + i).standard_normal((2, 3)) for i in range(row.arity)]
    ours, theirs = _both(torch, lambda lib, *xs: getattr(lib, row.names[0])(*xs), arrays, tangents)
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-12)  # (special functions: a few ulp of 1e-9)


def test_binary_row_tangent_broadcasts(torch):
    rng = np.random.default_rng(0)
    arrays, tangents = (
        [rng.standard_normal((2, 3)), rng.standard_normal(3)],
        [rng.standard_normal((2, 3)), rng.standard_normal(3)],
    )
    ours, theirs = _both(torch, lambda lib, a, b: a * b + b.exp(), arrays, tangents)
    assert ours.shape == (2, 3)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_tensor_and_number_operands(torch):
    rng = np.random.default_rng(0)
    ours, theirs = _both(torch, lambda lib, a: 2.0 / a - a**3 + 3 * a, [rng.uniform(1, 2, 4)], [rng.standard_normal(4)])
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


# --- other ops, against torch --------------------------------------------------------------------------------------
OPS = {
    "matmul": (lambda lib, a, b: a @ b, [(2, 3), (3, 4)]),
    "mm_vector": (lambda lib, a, b: lib.matmul(a, b[:, 0]), [(2, 3), (3, 4)]),
    "matmul_same_operand": (lambda lib, a: a @ a, [(3, 3)]),
    "sum_all": (lambda lib, a: a.sum(), [(2, 3)]),
    "sum_dim": (lambda lib, a: a.sum(1), [(2, 3)]),
    "sum_dims_keepdim": (lambda lib, a: a.sum((0, 2), keepdim=True), [(2, 3, 2)]),
    "mean_dim": (lambda lib, a: a.mean(0), [(2, 3)]),
    "view": (lambda lib, a: a.view(3, 2), [(2, 3)]),
    "reshape": (lambda lib, a: a.t().reshape(-1), [(2, 3)]),
    "transpose": (lambda lib, a: a.transpose(0, 1), [(2, 3)]),
    "permute": (lambda lib, a: a.permute(2, 0, 1), [(2, 3, 2)]),
    "index_slice": (lambda lib, a: a[1:, ::2], [(3, 4)]),
    "index_tensor": (lambda lib, a: a[lib.tensor([2, 0, 2])], [(3, 4)]),
    "select": (lambda lib, a: a[1], [(3, 4)]),
    "cat": (lambda lib, a, b: lib.cat([a, b], 0), [(2, 3), (1, 3)]),
    "stack": (lambda lib, a, b: lib.stack([a, b], 1), [(2, 3), (2, 3)]),
    "where": (lambda lib, a, b: lib.where(a > 0, a, b), [(2, 3), (2, 3)]),
    "where_number": (lambda lib, a: lib.where(a > 0, a, 0.5), [(2, 3)]),
    "matmul_batched": (lambda lib, a, b: a @ b, [(2, 3, 4), (4, 2)]),
    "matmul_vector_batched": (lambda lib, a, b: a @ b, [(4,), (2, 4, 3)]),
    "einsum": (lambda lib, a, b: lib.einsum("ij,jk->ik", a, b), [(2, 3), (3, 4)]),
    "logcumsumexp": (lambda lib, a: a.logcumsumexp(0), [(5,)]),
    "expand": (lambda lib, a: a.expand(2, 3), [(1, 3)]),
    "softmax": (lambda lib, a: lib.softmax(a, 1), [(2, 3)]),
    "log_softmax": (lambda lib, a: lib.log_softmax(a, 0), [(2, 3)]),
    "layer_norm": (lambda lib, a, w, b: lib.nn.functional.layer_norm(a, (3,), w[0], b[0]), [(2, 3), (1, 3), (1, 3)]),
    "max_dim": (lambda lib, a: a.max(1)[0], [(2, 3)]),
    "norm": (lambda lib, a: a.norm(), [(2, 3)]),
    "var": (lambda lib, a: a.var(0), [(3, 2)]),
    "cumsum": (lambda lib, a: a.cumsum(1), [(2, 3)]),
    "prod": (lambda lib, a: a.prod(1), [(2, 3)]),
    "logsumexp": (lambda lib, a: a.logsumexp(1), [(2, 3)]),
    "gather": (lambda lib, a: a.gather(1, lib.tensor([[0, 2], [1, 1]])), [(2, 3)]),
    "mse_loss": (lambda lib, a, b: lib.nn.functional.mse_loss(a, b), [(2, 3), (2, 3)]),
    "cross_entropy": (lambda lib, a: lib.nn.functional.cross_entropy(a, lib.tensor([0, 2])), [(2, 3)]),
    "linear": (lambda lib, x, w, b: lib.nn.functional.linear(x, w, b[0]), [(2, 3), (4, 3), (1, 4)]),
    "conv2d": (lambda lib, a, w: lib.nn.functional.conv2d(a, w, padding=1), [(1, 2, 4, 4), (3, 2, 3, 3)]),
    "max_pool2d": (lambda lib, a: lib.nn.functional.max_pool2d(a, 2), [(1, 2, 4, 4)]),
    "batch_norm_training": (lambda lib, a: lib.nn.functional.batch_norm(a, None, None, training=True), [(4, 3)]),
    "embedding": (lambda lib, w: lib.nn.functional.embedding(lib.tensor([[0, 2], [1, 1]]), w), [(3, 4)]),
    "gelu": (lambda lib, a: lib.nn.functional.gelu(a), [(2, 3)]),
    "cosine_similarity": (lambda lib, a, b: lib.nn.functional.cosine_similarity(a, b), [(2, 3), (2, 3)]),
    "interpolate": (lambda lib, a: lib.nn.functional.interpolate(a, scale_factor=2, mode="bilinear"), [(1, 1, 2, 3)]),
    "mlp": (
        lambda lib, x, w1, w2: lib.tanh(lib.relu(x @ w1.t()) @ w2.t()).sum(1),
        [(4, 3), (5, 3), (2, 5)],
    ),
}


@pytest.mark.parametrize("name", OPS)
def test_op_tangent_matches_torch(torch, name):
    fn, shapes = OPS[name]
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(s) for s in shapes]
    tangents = [rng.standard_normal(s) for s in shapes]
    ours, theirs = _both(torch, fn, arrays, tangents)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_mlp_module_tangent_matches_torch(torch):
    rng = np.random.default_rng(0)
    w1, b1, w2, x, t = (
        rng.standard_normal((4, 3)),
        rng.standard_normal(4),
        rng.standard_normal((2, 4)),
        rng.standard_normal((5, 3)),
        rng.standard_normal((5, 3)),
    )
    results = []
    for lib in (numbagrad, torch):
        fw = lib.autograd.forward_ad
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Sigmoid(), lib.nn.Linear(4, 2, bias=False)).double()
        with lib.no_grad():
            model[0].weight.copy_(lib.tensor(w1))
            model[0].bias.copy_(lib.tensor(b1))
            model[2].weight.copy_(lib.tensor(w2))
        with fw.dual_level():
            out = model(fw.make_dual(lib.tensor(x), lib.tensor(t)))
            results.append(fw.unpack_dual(out).tangent.detach().numpy().copy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10)


def test_tangents_flow_under_no_grad():
    x, t = numbagrad.tensor([1.0, 2.0]), numbagrad.tensor([1.0, -1.0])
    with numbagrad.no_grad():
        _, tangent = _tangent_of(lambda a: (a * a).sum(), [x], [t])
    assert tangent.item() == -2.0


def test_detach_and_integer_outputs_have_no_tangent():
    x, t = numbagrad.tensor([1.0, 3.0, 2.0]), numbagrad.ones(3)
    assert _tangent_of(lambda a: a.detach(), [x], [t])[1] is None
    assert _tangent_of(lambda a: a.argmax(), [x], [t])[1] is None


def test_input_without_tangent_contributes_nothing():
    x, y = numbagrad.tensor([1.0, 2.0]), numbagrad.tensor([3.0, 4.0])
    with fwad.dual_level():
        out = fwad.make_dual(x, numbagrad.ones(2)) * y
        assert fwad.unpack_dual(out).tangent.tolist() == [3.0, 4.0]


# --- views and in-place ops ----------------------------------------------------------------------------------------
def test_view_tangent_is_a_view_of_the_tangent():
    t = numbagrad.ones(2, 3)
    with fwad.dual_level():
        v = fwad.make_dual(numbagrad.zeros(2, 3), t)[:, 1]
        tangent = fwad.unpack_dual(v).tangent
        assert tangent._base is t
        t[0, 1] = 5.0
        assert tangent.tolist() == [5.0, 1.0]


def test_inplace_op_updates_the_tangent_in_place(torch):
    results = []
    for lib in (numbagrad, torch):
        fw = lib.autograd.forward_ad
        t = lib.tensor([1.0, 2.0, 3.0])
        with fw.dual_level():
            d = fw.make_dual(lib.tensor([2.0, 3.0, 4.0]), t)
            d.mul_(lib.tensor([2.0, 3.0, 4.0]))
            results.append((fw.unpack_dual(d).tangent.tolist(), t.tolist()))
    assert results[0] == results[1] == ([2.0, 6.0, 12.0], [2.0, 6.0, 12.0])


def test_inplace_op_with_a_dual_operand_makes_the_destination_dual(torch):
    results = []
    for lib in (numbagrad, torch):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            y = lib.tensor([1.0, 1.0, 1.0])
            y.add_(fw.make_dual(lib.tensor([2.0, 3.0, 4.0]), lib.tensor([1.0, 2.0, 3.0])), alpha=2)
            z = lib.zeros(3)
            z[1:] = fw.make_dual(lib.tensor([5.0, 6.0]), lib.tensor([7.0, 8.0]))
            results.append((fw.unpack_dual(y).tangent.tolist(), fw.unpack_dual(z).tangent.tolist()))
    assert results[0] == results[1]


# --- levels ----------------------------------------------------------------------------------------------------------
def test_make_and_unpack_dual():
    x, t = numbagrad.tensor([1.0, 2.0]), numbagrad.tensor([3.0, 4.0])
    with fwad.dual_level() as level:
        assert level == 0
        d = fwad.make_dual(x, t)
        assert d._base is x and d.tolist() == [1.0, 2.0]
        unpacked = fwad.unpack_dual(d)
        assert isinstance(unpacked, fwad.UnpackedDualTensor)
        assert unpacked.tangent is t
        assert unpacked.primal._base is x and fwad.unpack_dual(unpacked.primal).tangent is None
        assert fwad.unpack_dual(x).tangent is None


def test_make_dual_is_differentiable_in_reverse_mode():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    with fwad.dual_level():
        (fwad.make_dual(x, numbagrad.ones(2)) * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_leaving_the_level_deletes_the_tangents():
    with fwad.dual_level():
        d = fwad.make_dual(numbagrad.tensor([1.0]), numbagrad.tensor([2.0]))
        out = d * 2
    assert fwad.unpack_dual(d).tangent is None and fwad.unpack_dual(out).tangent is None
    assert (d * 2).tolist() == [2.0]


def test_unpack_dual_outside_a_level_gives_the_tensor_itself():
    x = numbagrad.ones(2)
    assert fwad.unpack_dual(x).primal is x and fwad.unpack_dual(x, level=0) == (x, None)


def test_enter_and_exit_by_hand():
    level = fwad.enter_dual_level()
    try:
        d = fwad.make_dual(numbagrad.tensor([1.0]), numbagrad.tensor([2.0]))
        assert fwad.unpack_dual(d.exp()).tangent is not None
    finally:
        fwad.exit_dual_level(level=level)
    assert fwad.unpack_dual(d).tangent is None


LEVEL_ERRORS = {
    "nested": lambda fw, lib: _nested(fw),
    "exit_wrong_level": lambda fw, lib: _exit_other(fw),
    "exit_without_level": lambda fw, lib: fw.exit_dual_level(),
    "make_without_level": lambda fw, lib: fw.make_dual(lib.ones(2), lib.ones(2)),
    "integer_primal": lambda fw, lib: _in_level(fw, lambda: fw.make_dual(lib.tensor([1, 2]), lib.ones(2))),
    "integer_tangent": lambda fw, lib: _in_level(fw, lambda: fw.make_dual(lib.ones(2), lib.tensor([1, 2]))),
    "wrong_size": lambda fw, lib: _in_level(fw, lambda: fw.make_dual(lib.ones(2), lib.ones(3))),
    "make_at_a_level_not_entered": lambda fw, lib: fw.make_dual(lib.ones(2), lib.ones(2), level=0),
    "make_at_another_level": lambda fw, lib: _in_level(fw, lambda: fw.make_dual(lib.ones(2), lib.ones(2), level=1)),
    "unpack_at_another_level": lambda fw, lib: _in_level(
        fw, lambda: fw.unpack_dual(fw.make_dual(lib.ones(2), lib.ones(2)), level=1)
    ),
    "already_dual": lambda fw, lib: _in_level(
        fw, lambda: fw.make_dual(fw.make_dual(lib.ones(2), lib.ones(2)), lib.ones(2))
    ),
}


def _in_level(fw, fn):
    with fw.dual_level():
        return fn()


def _nested(fw):
    with fw.dual_level():
        with fw.dual_level():
            pass


def _exit_other(fw):
    with fw.dual_level():
        fw.exit_dual_level(level=3)


@pytest.mark.parametrize("case", LEVEL_ERRORS)
def test_level_errors_match_torch(torch, case):
    outcomes = []
    for lib in (numbagrad, torch):
        try:
            LEVEL_ERRORS[case](lib.autograd.forward_ad, lib)
            outcomes.append(None)
        except Exception as e:
            outcomes.append((type(e).__name__, str(e).replace("numbagrad.", "torch.")))
    assert outcomes[0] is not None and outcomes[0] == outcomes[1]
    assert fwad._current_level == -1


# --- transforms ------------------------------------------------------------------------------------------------------
def _f(lib, x):
    return (lib.sin(x) * x).sum() + (x @ x) * x[0]


def test_func_jvp_matches_torch(torch):
    x, v = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -1.0])
    ours = numbagrad.func.jvp(lambda a: _f(numbagrad, a), (numbagrad.tensor(x),), (numbagrad.tensor(v),))
    theirs = torch.func.jvp(lambda a: _f(torch, a), (torch.tensor(x),), (torch.tensor(v),))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


@pytest.mark.parametrize("transform", ["jacfwd", "hessian"])
def test_func_jacobians_match_torch(torch, transform):
    x = np.array([0.5, -1.0, 2.0])
    ours = getattr(numbagrad.func, transform)(
        lambda a: _f(numbagrad, a) * a if transform == "jacfwd" else _f(numbagrad, a)
    )
    theirs = getattr(torch.func, transform)(lambda a: _f(torch, a) * a if transform == "jacfwd" else _f(torch, a))
    np.testing.assert_allclose(ours(numbagrad.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-12)


def test_functional_forward_mode_jacobian_matches_torch(torch):
    x, y = np.array([0.5, -1.0, 2.0]), np.array([[1.0, 2.0], [3.0, -1.0]])
    results = []
    for lib in (numbagrad, torch):
        jac = lib.autograd.functional.jacobian(
            lambda a, b: (a.sum() * b, a.exp()), (lib.tensor(x), lib.tensor(y)), vectorize=True, strategy="forward-mode"
        )
        results.append([[t.numpy() for t in row] for row in jac])
        assert type(jac) is list and type(jac[0]) is list  # torch's containers on this path
    for row_a, row_b in zip(*results):
        for a, b in zip(row_a, row_b):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_functional_hvp_and_forward_hessian_match_torch(torch):
    x, v = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -1.0])
    results = []
    for lib in (numbagrad, torch):
        F = lib.autograd.functional
        f = functools.partial(_f, lib)
        _, hv = F.hvp(f, lib.tensor(x), lib.tensor(v))
        h = F.hessian(f, lib.tensor(x), vectorize=True, outer_jacobian_strategy="forward-mode")
        results.append((hv.numpy(), h.detach().numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_forward_over_reverse_in_a_level():
    x = numbagrad.tensor([0.5, -1.0], requires_grad=True)
    with fwad.dual_level():
        d = fwad.make_dual(x, numbagrad.tensor([1.0, 0.0]))
        (g,) = numbagrad.autograd.grad((d**3).sum(), d, create_graph=True)
        assert fwad.unpack_dual(g).tangent.tolist() == [3.0, 0.0]


def test_gradcheck_checks_forward_mode():
    x = numbagrad.tensor([0.5, -1.0, 2.0], dtype=numbagrad.float64, requires_grad=True)
    w = numbagrad.tensor([[1.0, 2.0, 0.5]], dtype=numbagrad.float64, requires_grad=True)
    fn = lambda a, b: (numbagrad.softmax(a * b, 1) @ a.exp(), a.cumsum(0))  # noqa: E731
    assert numbagrad.autograd.gradcheck(fn, (x, w), check_forward_ad=True, check_backward_ad=False)


@pytest.mark.parametrize("name", ["floor_divide", "heaviside"])
def test_op_without_forward_derivative_raises_torchs_error(torch, name):
    outcomes = []
    for lib in (numbagrad, torch):
        with lib.autograd.forward_ad.dual_level():
            d = lib.autograd.forward_ad.make_dual(lib.tensor([1.5, 2.5]), lib.ones(2))
            with pytest.raises(NotImplementedError) as info:
                getattr(lib, name)(d, d)
            outcomes.append(str(info.value))
    assert outcomes[0] == outcomes[1] == f"Trying to use forward AD with aten::{name} that does not support it."


def test_op_with_a_once_differentiable_backward_raises():
    class Twice(numbagrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @numbagrad.autograd.function.once_differentiable
        def backward(ctx, g):
            return g * 2

    Twice.__module__ = "numbagrad.ops.example"  # a built-in op's rule: the double-vjp identity, which cannot run here
    with fwad.dual_level():
        d = fwad.make_dual(numbagrad.ones(2), numbagrad.ones(2))
        with pytest.raises(NotImplementedError, match="Trying to use forward AD with aten::twice that does not"):
            Twice.apply(d)


# --- every declared op ---------------------------------------------------------------------------------------------
def _first_samples() -> list:
    from samples import declared_samples

    firsts = [p.values for p in declared_samples() if p.values[1] is p.values[0].samples[0]]
    return [pytest.param(d, sample, id=d.name) for d, sample in firsts if d.differentiable]


@pytest.mark.parametrize(("decl", "sample"), _first_samples())
def test_declared_op_forward_mode_passes_gradcheck(decl, sample):
    """Each declared op's first sample: the forward-mode Jacobian against central differences."""
    from samples import declared_function

    fn, inputs = declared_function(decl, sample)
    if not inputs:
        pytest.skip("no floating-point input")
    assert numbagrad.autograd.gradcheck(fn, tuple(inputs), check_forward_ad=True, check_backward_ad=False)


def test_dual_tensor_prints_its_tangent(torch):
    texts = []
    for lib in (numbagrad, torch):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            d = fw.make_dual(lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor([0.5, 1.0], dtype=lib.float64))
            texts.append(repr(d * 2).replace("numbagrad.", "torch."))
    assert texts[0] == texts[1]


def test_inplace_op_on_a_view_updates_the_base_tangent(torch):
    results = []
    for lib in (numbagrad, torch):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            d = fw.make_dual(lib.tensor([1.0, 2.0, 3.0]), lib.tensor([1.0, 1.0, 1.0]))
            v = d[1:]
            v.mul_(lib.tensor([2.0, 5.0]))
            results.append((d.tolist(), fw.unpack_dual(d).tangent.tolist(), fw.unpack_dual(v).tangent.tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize("name", ["softmax", "matmul_batched", "layer_norm", "logcumsumexp", "mlp"])
def test_reverse_over_forward_passes_gradcheck(name):
    """The tangent, as a function of the primals and the tangents, differentiated in reverse mode."""
    fn, shapes = OPS[name]
    rng = np.random.default_rng(3)
    primals = [numbagrad.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    tangents = [numbagrad.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]

    def tangent_of(*values):
        n = len(values) // 2
        with fwad.dual_level():
            duals = [fwad.make_dual(p, t) for p, t in zip(values[:n], values[n:])]
            return fwad.unpack_dual(fn(numbagrad, *duals)).tangent

    assert numbagrad.autograd.gradcheck(tangent_of, (*primals, *tangents))


def test_lstm_tangent_matches_torch(torch):
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3))
    results = []
    for lib in (numbagrad, torch):
        fw = lib.autograd.forward_ad
        lstm = lib.nn.LSTM(3, 2, batch_first=True).double()
        with lib.no_grad():
            for k, (_, p) in enumerate(sorted(lstm.named_parameters())):
                p.copy_(lib.tensor(np.random.default_rng(k).standard_normal(tuple(p.shape)) * 0.5))
        with fw.dual_level():
            out, _ = lstm(fw.make_dual(lib.tensor(x), lib.tensor(t)))
            results.append(fw.unpack_dual(out).tangent.detach().numpy().copy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10, atol=1e-14)


def _gradient_tangents(lib, name: str, arrays: list, tangent_arrays: list, create_graph: bool) -> list:
    """The tangents of the gradients of ``(OPS[name] * weights).sum()`` with respect to its inputs, taken inside a
    level whose duals are made from those inputs: forward-over-reverse, a Hessian-vector product per input."""
    fn, _ = OPS[name]
    fw = lib.autograd.forward_ad
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    with fw.dual_level():
        duals = [fw.make_dual(p, lib.tensor(t)) for p, t in zip(leaves, tangent_arrays)]
        out = fn(lib, *duals)
        weights = lib.tensor(np.random.default_rng(11).standard_normal(tuple(out.shape)))
        grads = lib.autograd.grad((out * weights).sum(), leaves, create_graph=create_graph, allow_unused=True)
        tangents = [None if g is None else fw.unpack_dual(g).tangent for g in grads]
        return [None if t is None else t.detach().numpy().copy() for t in tangents]


@pytest.mark.parametrize("create_graph", [False, True], ids=["no_graph", "create_graph"])
@pytest.mark.parametrize("name", list(OPS))
def test_forward_over_reverse_matches_torch(torch, name, create_graph):
    """``autograd.grad`` inside a level: the gradient's tangent is torch's, whether or not the backward records a
    graph (without one, the backward's ops still carry tangents, as torch's do). A missing tangent stands for
    zeros: where the gradient does not depend on the inputs (a linear op, max pooling's routing), torch may give
    a zero tensor."""
    _, shapes = OPS[name]
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in shapes]
    tangent_arrays = [rng.standard_normal(s) for s in shapes]
    ours = _gradient_tangents(numbagrad, name, arrays, tangent_arrays, create_graph)
    theirs = _gradient_tangents(torch, name, arrays, tangent_arrays, create_graph)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(0.0 if a is None else a, 0.0 if b is None else b, rtol=1e-9, atol=1e-12)


def test_inplace_op_under_no_grad_in_a_level_keeps_the_history(torch):
    """An in-place op in no-grad mode inside a level changes the value and the tangent (of a view's base too) but
    records nothing: the tensor and its views keep their grad_fns, and a gradient taken afterwards is torch's."""
    results = []
    for lib in (numbagrad, torch):
        fw = lib.autograd.forward_ad
        leaf = lib.tensor([[1.0, 2.0, 3.0], [0.5, 0.1, 2.0]], dtype=lib.float64, requires_grad=True)
        with fw.dual_level():
            x = fw.make_dual(leaf, lib.ones(2, 3, dtype=lib.float64)) * 1.0
            v = x[0]
            with lib.no_grad():
                v.mul_(2)
                x.clamp_(min=1.5)
            names = (x.grad_fn.name(), v.grad_fn.name())
            (g,) = lib.autograd.grad((x * x).sum(), leaf)
            results.append((names, x.tolist(), fw.unpack_dual(x).tangent.tolist(), fw.unpack_dual(g).tangent.tolist()))
    assert results[0] == results[1]


def _calls_of_every_op() -> list:
    """A ``pytest.param`` per call form of every declared op, table row and ``nn.functional`` function that has an
    input requiring grad."""
    from samples import call_params, nn_calls, op_calls

    return call_params([c for c in [*op_calls(), *nn_calls()] if any(s.grad and s.dtype.startswith("float")
                                                                      for s in c.specs)])  # fmt: skip


def _weighted_sum(outs: tuple, weights: list):
    return sum((o * w).sum() for o, w in zip(outs, weights))


@pytest.mark.parametrize("call", _calls_of_every_op())
def test_forward_over_reverse_is_reverse_over_reverse(call):
    """Every op call: the tangent of the gradient of ``sum(out * w)`` taken inside a level without
    ``create_graph`` (forward-over-reverse) is the Hessian-vector product that differentiating ``grad . t`` gives
    (reverse-over-reverse): zero for an op linear in its inputs. In-place calls included (their node keeps the
    old value's tangent)."""
    from samples import call_function, call_inputs

    fn, inputs = call_function(call, call_inputs(call, numbagrad))
    rng = np.random.default_rng(0)
    tangents = [numbagrad.tensor(rng.standard_normal(tuple(x.shape))).to(x.dtype) for x in inputs]
    outs = fn(*inputs)
    weights = [numbagrad.tensor(rng.standard_normal(tuple(o.shape))).to(o.dtype) for o in outs]
    grads = numbagrad.autograd.grad(_weighted_sum(outs, weights), inputs, create_graph=True, allow_unused=True)
    linked = [(g * t).sum() for g, t in zip(grads, tangents) if g is not None and g.requires_grad]
    hvp = numbagrad.autograd.grad(sum(linked), inputs, allow_unused=True) if linked else [None] * len(inputs)
    with fwad.dual_level():
        outs = fn(*[fwad.make_dual(x, t) for x, t in zip(inputs, tangents)])
        grads = numbagrad.autograd.grad(_weighted_sum(outs, weights), inputs, allow_unused=True)
        found = [None if g is None else fwad.unpack_dual(g).tangent for g in grads]
    for ours, expected in zip(found, hvp):
        ours = 0.0 if ours is None else ours.detach().double().numpy()
        expected = 0.0 if expected is None else expected.detach().double().numpy()
        np.testing.assert_allclose(ours, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_forward_over_reverse_through_a_recurrent_layer(mode):
    """A recurrent layer's gradient taken inside a level without ``create_graph`` carries the Hessian-vector
    product: its backward kernel, run again for the tangent, still finds the steps' records (a backward without
    ``retain_graph`` outside a level releases each step's as it goes)."""
    numbagrad.manual_seed(0)
    layer = getattr(numbagrad.nn, mode)(3, 4, 2).double()
    rng = np.random.default_rng(0)
    x = numbagrad.tensor(rng.standard_normal((5, 2, 3)), requires_grad=True)
    t, w = numbagrad.tensor(rng.standard_normal((5, 2, 3))), numbagrad.tensor(rng.standard_normal((5, 2, 4)))
    (g,) = numbagrad.autograd.grad((layer(x)[0] * w).sum(), x, create_graph=True)
    (hvp,) = numbagrad.autograd.grad((g * t).sum(), x)
    with fwad.dual_level():
        (g,) = numbagrad.autograd.grad((layer(fwad.make_dual(x, t))[0] * w).sum(), x)
        np.testing.assert_allclose(fwad.unpack_dual(g).tangent.numpy(), hvp.numpy(), rtol=1e-9, atol=1e-12)
