"""Complex tensors in the autograd checks and in forward mode: ``gradcheck`` in fast mode checks both parts of a
complex derivative (a backward that forgets a conjugate fails it), forward-mode tangents of complex functions
equal torch's (``J t``, the derivative applied to the tangent without conjugation, through table rows, matmul,
abs, real/imag and view_as_real), ``gradcheck(check_forward_ad=True)`` checks complex inputs' real and imaginary
perturbations, and complex pow has a differentiable gradient in both operands (``gradgradcheck``)."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import Function, gradcheck, gradgradcheck
from numbagrad.autograd.gradcheck import GradcheckError

Z = np.array([[1 + 2j, 0.5 - 1j], [-0.7 + 0.3j, 1.2 + 0.4j]])
W = np.array([[0.3 - 0.2j, 1.1 + 0.5j], [-0.4 + 0.9j, 0.8 - 0.6j]])


def _z(values=Z, requires_grad: bool = True):
    return numbagrad.tensor(values, dtype=numbagrad.complex128, requires_grad=requires_grad)


class _Square(Function):
    """``z * z`` with a backward given as ``conj_grad``: torch's convention is ``g * conj(2 z)``."""

    conj_grad = True

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z

    @classmethod
    def backward(cls, ctx, g):
        (z,) = ctx.saved_tensors
        derivative = 2 * z
        return g * (derivative.conj() if cls.conj_grad else derivative)


class _ForgetsConj(_Square):
    conj_grad = False


class _AbsSquared(Function):
    """``|z|^2`` (complex to real): torch's gradient is ``2 g z``; ``wrong`` gives ``2 g conj(z)``."""

    wrong = False

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return (z * z.conj()).real.clone()

    @classmethod
    def backward(cls, ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * (z.conj() if cls.wrong else z)


class _AbsSquaredWrong(_AbsSquared):
    wrong = True


@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_passes_a_correct_complex_backward(fast_mode):
    assert gradcheck(_Square.apply, (_z(),), fast_mode=fast_mode)
    assert gradcheck(_AbsSquared.apply, (_z(),), fast_mode=fast_mode)


@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_fails_a_backward_that_forgets_the_conjugate(fast_mode):
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(_ForgetsConj.apply, (_z(),), fast_mode=fast_mode)
    assert not gradcheck(_ForgetsConj.apply, (_z(),), fast_mode=fast_mode, raise_exception=False)


def test_fast_gradcheck_checks_the_gradient_of_a_complex_to_real_function():
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(_AbsSquaredWrong.apply, (_z(),), fast_mode=True)


@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_names_the_part_of_a_complex_output_that_failed(fast_mode):
    """torch checks a complex output's imaginary part first (a forgotten conjugate flips that part's sign)."""
    with pytest.raises(GradcheckError, match="^While considering the imaginary part of complex outputs only, "):
        gradcheck(_ForgetsConj.apply, (_z(),), fast_mode=fast_mode)


def test_fast_gradcheck_checks_a_real_input_with_a_complex_output():
    x = numbagrad.tensor([0.5, -1.5, 2.0], dtype=numbagrad.float64, requires_grad=True)
    assert gradcheck(lambda a: (a * (1 + 2j)).exp(), (x,), fast_mode=True)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: (a * a).exp(),
        lambda a, b: a * b + a.sin(),
        lambda a, b: a / b - b.log(),
        lambda a, b: a**b,
        lambda a, b: a.sqrt().tanh(),
        lambda a, b: a @ b,
        lambda a, b: a.abs(),
        lambda a, b: a.real * b.imag,
        lambda a, b: a.conj() * b,
    ],
    ids=["exp", "mul_sin", "div_log", "pow", "sqrt_tanh", "matmul", "abs", "real_imag", "conj"],
)
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_of_complex_functions_in_both_modes(fn, fast_mode):
    assert gradcheck(fn, (_z(), _z(W)), fast_mode=fast_mode, check_forward_ad=True)


def _tangents(lib, fn, primals, tangents):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        out = fn(*[fw.make_dual(p, t) for p, t in zip(primals, tangents)])
        return fw.unpack_dual(out).tangent


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, a, b: (a * b).exp(),
        lambda lib, a, b: a**b,
        lambda lib, a, b: a.reciprocal() + b.cos(),
        lambda lib, a, b: lib.matmul(a, b),
        lambda lib, a, b: a.abs(),
        lambda lib, a, b: a.real - 2 * b.imag,
        lambda lib, a, b: lib.view_as_real(a * b),
    ],
    ids=["exp_mul", "pow", "reciprocal_cos", "matmul", "abs", "real_imag", "view_as_real"],
)
def test_forward_tangents_of_complex_functions_match_torch(torch, fn):
    primals = [Z, W]
    tangents = [np.array([[0.2 - 1j, 1.5 + 0.1j], [0.3 + 0.3j, -0.8j]]), np.array([[1j, 0.5], [-1 + 1j, 0.25j]])]
    ours = _tangents(numbagrad, lambda a, b: fn(numbagrad, a, b), [_z(p, False) for p in primals],
                     [_z(t, False) for t in tangents])  # fmt: skip
    theirs = _tangents(torch, lambda a, b: fn(torch, a, b), [torch.tensor(p) for p in primals],
                       [torch.tensor(t) for t in tangents])  # fmt: skip
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)


class _SquareJvp(Function):
    """``z * z`` with a forward derivative given as ``conj_tangent``: correct is ``2 z t`` (no conjugate)."""

    conj_tangent = False

    @staticmethod
    def forward(ctx, z):
        ctx.z = z.detach()
        return z * z

    @classmethod
    def jvp(cls, ctx, t):
        return 2 * ctx.z * (t.conj() if cls.conj_tangent else t)


class _SquareJvpWrong(_SquareJvp):
    conj_tangent = True


def test_forward_gradcheck_passes_a_correct_complex_jvp():
    assert gradcheck(_SquareJvp.apply, (_z(),), check_forward_ad=True, check_backward_ad=False)


def test_forward_gradcheck_fails_a_jvp_that_conjugates_the_tangent():
    expected = (
        "^While considering the imaginary part of complex inputs only, Jacobian computed with forward mode mismatch"
    )
    with pytest.raises(GradcheckError, match=expected):
        gradcheck(_SquareJvpWrong.apply, (_z(),), check_forward_ad=True, check_backward_ad=False)


@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradgradcheck_of_complex_pow_in_both_operands(fast_mode):
    a = _z(np.array([1 + 2j, 0.5 - 1j, -0.8 + 0.6j]))
    b = _z(np.array([1.5 + 0.2j, 2.0 - 0.5j, 0.7 + 1j]))
    assert gradgradcheck(lambda x, y: x**y, (a, b), fast_mode=fast_mode)


def test_gradgradcheck_of_complex_pow_with_a_real_exponent_and_a_real_base():
    z = _z(np.array([1 + 2j, 0.5 - 1j]))
    r = numbagrad.tensor([1.5, -2.5], dtype=numbagrad.float64, requires_grad=True)
    assert gradgradcheck(lambda x, y: x**y, (z, r))
    assert gradgradcheck(lambda x, y: x**y, (r, z))


def test_complex_pow_exponent_gradient_is_zero_at_a_zero_base_with_a_nonnegative_real_exponent(torch):
    base = [0j, 0j, 2 + 1j]
    exponent = [2 + 0j, 1 + 1j, 1.5 - 0.5j]
    ours_b = numbagrad.tensor(exponent, dtype=numbagrad.complex128, requires_grad=True)
    theirs_b = torch.tensor(exponent, dtype=torch.complex128, requires_grad=True)
    (g_ours,) = numbagrad.autograd.grad((numbagrad.tensor(base) ** ours_b).abs().sum(), ours_b, create_graph=True)
    (g_theirs,) = torch.autograd.grad((torch.tensor(base) ** theirs_b).abs().sum(), theirs_b, create_graph=True)
    np.testing.assert_allclose(g_ours.detach().numpy(), g_theirs.detach().numpy(), rtol=1e-6, atol=1e-12)
