"""Complex dtypes (complex64/complex128) against torch: creation, printing, promotion, parts as views,
conjugation, kernels and gradients (torch's conjugate Wirtinger convention)."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from torch_oracle import raises_like


def _same(a: ng.Tensor, b, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Values and dtype equal to torch's tensor ``b``."""
    assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().resolve_conj().numpy(), b.detach().resolve_conj().numpy(), rtol, atol)


# --- dtypes ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["complex64", "cfloat", "complex128", "cdouble"])
def test_dtype_names_and_flags_match_torch(torch, name):
    ours, theirs = getattr(ng, name), getattr(torch, name)
    assert repr(ours).replace("numbagrad", "torch") == repr(theirs)
    assert ours.is_complex == theirs.is_complex
    assert ours.is_floating_point == theirs.is_floating_point
    assert ours.is_signed == theirs.is_signed
    assert ours.itemsize == theirs.itemsize


@pytest.mark.parametrize("name", ["complex64", "complex128"])
def test_finfo_of_complex_is_that_of_its_parts(torch, name):
    assert repr(ng.finfo(getattr(ng, name))) == repr(torch.finfo(getattr(torch, name)))


@pytest.mark.parametrize(
    ("a", "b"),
    [("complex64", "float64"), ("complex64", "int64"), ("float16", "complex64"), ("bool", "complex128"),
     ("complex64", "complex128"), ("bfloat16", "complex64")],
)  # fmt: skip
def test_promote_types_with_complex(torch, a, b):
    assert ng.promote_types(getattr(ng, a), getattr(ng, b)).name == str(torch.promote_types(
        getattr(torch, a), getattr(torch, b))).split(".")[1]  # fmt: skip


# --- creation -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data", [1 + 2j, [1 + 2j, 3 - 1j], [[1, 2j], [0.5, -1]], [1.0, 2j]])
def test_tensor_from_python_complex(torch, data):
    _same(ng.tensor(data), torch.tensor(data))


def test_default_complex_follows_default_float(torch):
    old = ng.get_default_dtype()
    try:
        ng.set_default_dtype(ng.float64)
        torch.set_default_dtype(torch.float64)
        assert ng.tensor([1j]).dtype == ng.complex128
        assert repr(ng.tensor([1j])) == repr(torch.tensor([1j]))
    finally:
        ng.set_default_dtype(old)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("factory", ["zeros", "ones"])
@pytest.mark.parametrize("dtype", ["cfloat", "cdouble"])
def test_factories_take_complex_dtypes(torch, factory, dtype):
    _same(
        getattr(ng, factory)(2, 3, dtype=getattr(ng, dtype)), getattr(torch, factory)(2, 3, dtype=getattr(torch, dtype))
    )


def test_full_with_a_complex_value(torch):
    _same(ng.full((2,), 1 + 1j), torch.full((2,), 1 + 1j))


def test_randn_complex_has_parts_of_variance_one_half():
    ng.manual_seed(0)
    z = ng.randn(20000, dtype=ng.cfloat)
    assert z.dtype == ng.complex64
    assert abs(float(z.real.var()) - 0.5) < 0.03 and abs(float(z.imag.var()) - 0.5) < 0.03


def test_complex_and_polar(torch):
    re, im = [0.5, -1.0, 2.0], [1.0, 0.0, -3.0]
    _same(ng.complex(ng.tensor(re), ng.tensor(im)), torch.complex(torch.tensor(re), torch.tensor(im)))
    _same(ng.polar(ng.tensor(re).abs(), ng.tensor(im)), torch.polar(torch.tensor(re).abs(), torch.tensor(im)))


@pytest.mark.parametrize(
    ("a", "b"), [("float32", "float64"), ("int32", "int32")],
)  # fmt: skip
@pytest.mark.parametrize("op", ["complex", "polar"])
def test_complex_and_polar_errors(torch, op, a, b):
    with pytest.raises(RuntimeError) as theirs:
        getattr(torch, op)(torch.zeros(2, dtype=getattr(torch, a)), torch.zeros(2, dtype=getattr(torch, b)))
    with pytest.raises(RuntimeError, match=str(theirs.value).split(" for ")[0].replace(".", r"\.")):
        getattr(ng, op)(ng.zeros(2, dtype=getattr(ng, a)), ng.zeros(2, dtype=getattr(ng, b)))


def test_conversions(torch):
    z, t = ng.tensor([1 + 2j, 3 - 1j]), torch.tensor([1 + 2j, 3 - 1j])
    assert z.item() if z.numel() == 1 else z[0].item() == t[0].item()
    assert isinstance(z[0].item(), complex)
    assert z.tolist() == t.tolist()
    assert z.numpy().dtype == np.complex64
    _same(ng.tensor([1.0, 2.0]).cfloat(), torch.tensor([1.0, 2.0]).cfloat())
    _same(ng.tensor([1.0, 2.0]).cdouble(), torch.tensor([1.0, 2.0]).cdouble())
    _same(z.to(ng.complex128), t.to(torch.complex128))


def test_complex_to_real_warns_and_keeps_the_real_part(torch):
    with pytest.warns(UserWarning, match="Casting complex values to real discards the imaginary part"):
        r = ng.tensor([1 + 2j]).to(ng.float32)
    assert r.tolist() == [1.0]


# --- printing -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda T: T.tensor(1 + 2j),
        lambda T: T.tensor([1 + 2j, 3 - 1j]),
        lambda T: T.tensor([1e-5 + 2j, 3e5 - 1j]),
        lambda T: T.tensor([1 + 2j], dtype=T.complex128),
        lambda T: T.tensor([1.5 + 2j], requires_grad=True),
        lambda T: T.tensor([[1 + 2j, 3 - 1j], [0.5j, -2]]),
        lambda T: T.tensor([float("nan") + 1j, complex(float("inf"), -1)]),
        lambda T: T.tensor([1.123456 + 2j, -3.1 - 1.25j]),
        lambda T: T.zeros(0, dtype=T.cfloat),
        lambda T: T.tensor([1 + 2j, 3 - 1j]).conj(),
        lambda T: T.arange(2000.0).reshape(40, 50).to(T.cfloat) * (1 - 0.5j),
    ],
)
def test_repr_matches_torch(torch, make):
    assert repr(make(ng)).replace("numbagrad", "torch") == repr(make(torch))


# --- promotion ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool"])
def test_python_complex_scalar_promotes_like_torch(torch, dtype):
    _same(ng.ones(2, dtype=getattr(ng, dtype)) * 1j, torch.ones(2, dtype=getattr(torch, dtype)) * 1j)


def test_zero_dim_complex_against_a_float_tensor_keeps_the_float_precision(torch):
    z64 = ng.tensor(1j, dtype=ng.complex128)
    assert (torch.tensor(1j, dtype=torch.complex128) * torch.ones(2)).dtype == torch.complex64
    assert (z64 * ng.ones(2)).dtype == ng.complex64


def test_result_type_with_complex(torch):
    assert ng.result_type(ng.ones(2), 1j) == ng.complex64
    assert ng.result_type(ng.ones(2, dtype=ng.float64), ng.ones(2, dtype=ng.cfloat)) == ng.complex128


def test_inplace_complex_result_into_a_float_tensor_is_refused(torch):
    x = ng.ones(2)
    with pytest.raises(RuntimeError, match="result type ComplexFloat can't be cast to the desired output type Float"):
        x.add_(1j)
    assert x.tolist() == [1.0, 1.0]


# --- parts as views -------------------------------------------------------------------------------------------
def test_real_and_imag_are_writable_views():
    x = ng.tensor([1 + 2j, 3 - 1j])
    x.real.mul_(2)
    x.imag.add_(1)
    assert x.tolist() == [2 + 3j, 6 + 0j]


def test_imag_of_a_real_tensor_is_refused(torch):
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes."):
        _ = ng.ones(2).imag
    assert ng.ones(2).real.tolist() == [1.0, 1.0]


def test_view_as_real_and_view_as_complex_share_storage(torch):
    z = ng.tensor([[1 + 2j, 3 - 1j], [5j, 2]])
    r = ng.view_as_real(z)
    _same(r, torch.view_as_real(torch.tensor([[1 + 2j, 3 - 1j], [5j, 2]])))
    r[0, 1, 1] = 7.0
    assert z[0, 1].item() == 3 + 7j
    x = ng.arange(8.0).reshape(2, 2, 2)
    c = ng.view_as_complex(x)
    _same(c, torch.view_as_complex(torch.arange(8.0).reshape(2, 2, 2)))
    c[1, 0] = 9j
    assert x[1, 0].tolist() == [0.0, 9.0]
    assert ng.view_as_real(z[:, ::2]).shape == (2, 1, 2)  # (any strides)


@pytest.mark.parametrize(
    "make",
    [
        lambda T: T.view_as_complex(T.zeros(3)),
        lambda T: T.view_as_complex(T.zeros(3, 2).int()),
        lambda T: T.view_as_complex(T.zeros(2, 3)[:, :2]),
        lambda T: T.view_as_complex(T.zeros(2, 2).t()),
        lambda T: T.view_as_real(T.zeros(3)),
        lambda T: T.view_as_real(T.tensor([1 + 2j]).conj()),
    ],
)
def test_view_errors_match_torch(torch, make):
    with pytest.raises(RuntimeError) as theirs:
        make(torch)
    with pytest.raises(RuntimeError) as ours:
        make(ng)
    assert str(ours.value) == str(theirs.value)


# --- conjugation ----------------------------------------------------------------------------------------------
def test_conj_is_a_lazy_view_that_sees_writes():
    x = ng.tensor([1 + 2j, 3 - 1j])
    c = x.conj()
    assert c.is_conj() and not x.is_conj()
    x.mul_(2)
    assert c.tolist() == [2 - 4j, 6 + 2j]
    assert c.conj().tolist() == x.tolist() and not c.conj().is_conj()


def test_resolve_conj_and_conj_physical_are_not_lazy():
    x = ng.tensor([1 + 2j])
    r, p = x.conj().resolve_conj(), x.conj_physical()
    assert not r.is_conj() and not p.is_conj()
    x.mul_(2)
    assert r.tolist() == p.tolist() == [1 - 2j]
    x.conj_physical_()
    assert x.tolist() == [2 - 4j]


def test_conj_of_a_real_tensor_is_itself():
    x = ng.ones(2)
    assert x.conj() is x and not x.conj().is_conj()


def test_abs_angle_sgn_of_complex(torch):
    data = [1 + 2j, 3 - 1j, 0j, -2 + 0j]
    z, t = ng.tensor(data), torch.tensor(data)
    _same(z.abs(), t.abs())
    _same(z.angle(), t.angle())
    _same(z.sgn(), t.sgn())
    assert z.is_complex() and not z.is_floating_point()


# --- kernels --------------------------------------------------------------------------------------------------
_Z = [0.3 + 0.4j, -0.5 + 0.2j, 0.7 - 0.6j]
_W = [1.1 - 0.3j, 0.4 + 0.9j, -0.8 + 0.5j]
_UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh", "sigmoid", "sinh", "cosh",
          "asin", "acos", "atan", "asinh", "acosh", "atanh", "log1p", "expm1", "log2", "log10", "exp2", "square",
          "abs", "sgn", "angle", "sinc", "isnan", "isinf", "isfinite", "logical_not"]  # fmt: skip
_BINARY = ["add", "sub", "mul", "div", "pow", "logaddexp", "eq", "ne", "logical_and", "logical_or", "logical_xor"]


def _real_loss(T, out):
    """A real number of ``out`` whose gradient reaches every element: ``sum |out|^2`` (``sum out`` if real)."""
    return (out.abs() ** 2).sum() if out.is_complex() else out.sum()


@pytest.mark.parametrize("name", _UNARY)
def test_unary_rows_on_complex_match_torch_values_and_grads(torch, name):
    z, t = (
        ng.tensor(_Z, dtype=ng.cdouble, requires_grad=True),
        torch.tensor(_Z, dtype=torch.cdouble, requires_grad=True),
    )
    a, b = getattr(ng, name)(z), getattr(torch, name)(t)
    _same(a, b, rtol=1e-10, atol=1e-12)
    if b.requires_grad:
        _real_loss(ng, a).backward()
        _real_loss(torch, b).backward()
        _same(z.grad, t.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", _BINARY)
def test_binary_rows_on_complex_match_torch_values_and_grads(torch, name):
    zs = [ng.tensor(d, dtype=ng.cdouble, requires_grad=True) for d in (_Z, _W)]
    ts = [torch.tensor(d, dtype=torch.cdouble, requires_grad=True) for d in (_Z, _W)]
    a, b = getattr(ng, name)(*zs), getattr(torch, name)(*ts)
    _same(a, b, rtol=1e-10, atol=1e-12)
    if b.requires_grad:
        _real_loss(ng, a).backward()
        _real_loss(torch, b).backward()
        for z, t in zip(zs, ts):
            _same(z.grad, t.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("weight", [0.3, "tensor"])
def test_lerp_of_complex_tensors(torch, weight):
    def run(T):
        z, w = T.tensor(_Z, requires_grad=True), T.tensor(_W, requires_grad=True)
        wt = T.tensor([0.2 + 0.1j, 0.7j, 1.5], requires_grad=True) if weight == "tensor" else weight
        out = T.lerp(z, w, wt)
        _real_loss(T, out).backward()
        return out, [z.grad, w.grad] + ([wt.grad] if weight == "tensor" else [])

    (a, ours), (b, theirs) = run(ng), run(torch)
    _same(a, b)
    for x, y in zip(ours, theirs):
        _same(x, y)


def test_complex64_kernels_compute_in_single_precision(torch):
    _same(ng.tensor(_Z).exp(), torch.tensor(_Z).exp())
    assert ng.tensor(_Z).exp().dtype == ng.complex64


@pytest.mark.parametrize(
    "make",
    [
        lambda T: T.tensor([1 + 1j]).relu(),
        lambda T: T.tensor([1 + 1j]) < 1,
        lambda T: T.tensor([1 + 1j]).sign(),
        lambda T: T.tensor([1 + 1j]).floor(),
        lambda T: T.tensor([1 + 1j]).erf(),
        lambda T: T.maximum(T.tensor([1 + 1j]), T.tensor([1j])),
        lambda T: T.clamp(T.tensor([1 + 1j]), 0, 1),
        lambda T: T.tensor([1 + 1j, 2j]).max(),
        lambda T: T.tensor([1 + 1j, 2j]).max(0),
    ],
)
def test_ops_torch_refuses_on_complex_raise_its_error(torch, make):
    raises_like(torch, make)


_A = np.array([[1 + 2j, -0.5j, 3], [0.25, 1 - 1j, -2 + 0.5j]])
_B = np.array([[0.5 - 1j, 2j], [1, -1 + 1j], [0.3j, 2]])


@pytest.mark.parametrize(
    "fn",
    [
        lambda T, a, b: a @ b,
        lambda T, a, b: T.mm(a, b),
        lambda T, a, b: T.bmm(a.unsqueeze(0), b.unsqueeze(0)),
        lambda T, a, b: T.nn.functional.linear(a, b.t()),
        lambda T, a, b: a @ b[:, 0],
        lambda T, a, b: T.dot(a[0], b[:, 1]),
        lambda T, a, b: T.vdot(a[0], b[:, 1]),
        lambda T, a, b: T.addmm(b[:2], a, b),
    ],
)
def test_matrix_products_of_complex_tensors_and_their_grads(torch, fn):
    ours = [ng.tensor(d, requires_grad=True) for d in (_A, _B)]
    theirs = [torch.tensor(d, requires_grad=True) for d in (_A, _B)]
    a, b = fn(ng, *ours), fn(torch, *theirs)
    _same(a, b, rtol=1e-10, atol=1e-12)
    _real_loss(ng, a).backward()
    _real_loss(torch, b).backward()
    for x, y in zip(ours, theirs):
        _same(x.grad, y.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "fn",
    [
        lambda T, a: a.sum(),
        lambda T, a: a.sum(0),
        lambda T, a: a.mean(1),
        lambda T, a: a.prod(1),
        lambda T, a: a.cumsum(1),
        lambda T, a: a.norm(),
        lambda T, a: a.var(1),
        lambda T, a: a.std(),
        lambda T, a: T.cat([a, a * 2]),
        lambda T, a: T.stack([a, a]),
        lambda T, a: a[0, 1:],
        lambda T, a: a[[1, 0, 1]],
        lambda T, a: a.t().reshape(3, 2),
        lambda T, a: T.where(a.real > 0, a, a * 2),
        lambda T, a: a.mH,
    ],
)
def test_reductions_and_shape_ops_of_complex_tensors_and_their_grads(torch, fn):
    x, y = ng.tensor(_A, requires_grad=True), torch.tensor(_A, requires_grad=True)
    a, b = fn(ng, x), fn(torch, y)
    _same(a, b, rtol=1e-10, atol=1e-12)
    _real_loss(ng, a).backward()
    _real_loss(torch, b).backward()
    _same(x.grad, y.grad, rtol=1e-10, atol=1e-12)


def test_isclose_allclose_eq_of_complex(torch):
    a, b = [1 + 1j, 2j], [1 + 1.0000001j, 2j + 1e-3]
    assert ng.isclose(ng.tensor(a), ng.tensor(b)).tolist() == torch.isclose(torch.tensor(a), torch.tensor(b)).tolist()
    assert ng.allclose(ng.tensor(a), ng.tensor(a)) and not ng.allclose(ng.tensor(a), ng.tensor(b))
    assert (ng.tensor(a) == ng.tensor(a)).tolist() == [True, True]


# --- autograd -------------------------------------------------------------------------------------------------
def test_a_real_leaf_that_became_complex_gets_the_real_part(torch):
    x, t = ng.tensor([1.0, -2.0], requires_grad=True), torch.tensor([1.0, -2.0], requires_grad=True)
    (x * (1 + 2j)).exp().abs().sum().backward()
    (t * (1 + 2j)).exp().abs().sum().backward()
    assert x.grad.dtype == ng.float32
    _same(x.grad, t.grad)


def test_parts_views_grads_match_torch(torch):
    for fn in (lambda T, z: z.real, lambda T, z: z.imag, lambda T, z: T.view_as_real(z), lambda T, z: z.conj().imag):
        z, t = ng.tensor(_Z, requires_grad=True), torch.tensor(_Z, requires_grad=True)
        (fn(ng, z) * 3).sum().backward()
        (fn(torch, t) * 3).sum().backward()
        _same(z.grad, t.grad)


def test_graph_node_names_match_torch(torch):
    z, t = ng.tensor(_Z, requires_grad=True), torch.tensor(_Z, requires_grad=True)
    x, y = ng.tensor([1.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)
    for fn in (lambda T, z, x: z.conj(), lambda T, z, x: z.abs(), lambda T, z, x: T.view_as_real(z),
               lambda T, z, x: T.complex(x, x), lambda T, z, x: z.real, lambda T, z, x: z * z,
               lambda T, z, x: T.polar(x, x)):  # fmt: skip
        assert type(fn(ng, z, x).grad_fn).__name__ == type(fn(torch, t, y).grad_fn).__name__


@pytest.mark.parametrize(
    "fn",
    [
        lambda z, w: z * w,
        lambda z, w: z / w,
        lambda z, w: (z.exp() + w.sin()).sigmoid(),
        lambda z, w: z.abs() * w.angle(),
        lambda z, w: z.sgn() + w.conj(),
        lambda z, w: ng.view_as_real(z * w),
        lambda z, w: z @ w.unsqueeze(1),
        lambda z, w: (z**w).sum(),
    ],
)
def test_gradcheck_with_complex_inputs_and_outputs(fn):
    ng.manual_seed(1)
    z = ng.randn(3, dtype=ng.cdouble, requires_grad=True)
    w = ng.randn(3, dtype=ng.cdouble, requires_grad=True)
    assert ng.autograd.gradcheck(fn, (z, w))


@pytest.mark.parametrize(
    "fn",
    [
        lambda z, x: z * x,
        lambda z, x: ng.complex(x, x * 2) * z,
        lambda z, x: (z.exp() * x).abs(),
        lambda z, x: z.tan(),
        lambda z, x: ng.polar(x.abs() + 0.5, x) * z,
    ],
)
def test_gradgradcheck_with_complex_and_real_inputs(fn):
    ng.manual_seed(2)
    z = ng.randn(2, dtype=ng.cdouble, requires_grad=True)
    x = ng.randn(2, dtype=ng.float64, requires_grad=True)
    assert ng.autograd.gradgradcheck(fn, (z, x))


def test_gradcheck_catches_a_wrong_complex_gradient():
    class NotConjugated(ng.autograd.Function):
        """``z * w`` whose backward forgets torch's conjugation."""

        @staticmethod
        def forward(ctx, z, w):
            ctx.save_for_backward(z, w)
            return z * w

        @staticmethod
        def backward(ctx, g):
            z, w = ctx.saved_tensors
            return g * w.conj_physical().conj_physical(), g * z.conj()

    z = ng.tensor([1 + 2j], dtype=ng.cdouble, requires_grad=True)
    w = ng.tensor([0.5 - 1j], dtype=ng.cdouble, requires_grad=True)
    assert not ng.autograd.gradcheck(NotConjugated.apply, (z, w), raise_exception=False)


# --- helpers that meet complex dtypes -------------------------------------------------------------------------
@pytest.mark.parametrize(("a", "b"), [("complex64", "int64"), ("float32", "complex64"), ("complex64", "float64")])
def test_can_cast_with_complex(torch, a, b):
    assert ng.can_cast(getattr(ng, a), getattr(ng, b)) == torch.can_cast(getattr(torch, a), getattr(torch, b))


def test_assert_close_compares_complex_with_tolerances(torch):
    ng.testing.assert_close(ng.tensor([1 + 2j]), ng.tensor([1 + 2.000001j]))
    with pytest.raises(AssertionError, match="Tensor-likes are not close!"):
        ng.testing.assert_close(ng.tensor([1 + 2j]), ng.tensor([1 + 2.01j]))


def test_save_and_load_keep_complex_values(tmp_path):
    z = ng.tensor([1 + 2j, 3j], dtype=ng.cdouble)
    ng.save(z, tmp_path / "z.pt")
    loaded = ng.load(tmp_path / "z.pt")
    assert loaded.dtype == ng.complex128 and loaded.tolist() == z.tolist()
