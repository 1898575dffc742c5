"""Custom ``autograd.Function`` in forward mode: the ``jvp`` staticmethod (old-style ``forward(ctx, ...)`` and new
style with ``setup_context``), ``ctx.save_for_forward`` read back as ``ctx.saved_tensors`` inside ``jvp``, the
tangents ``jvp`` receives for inputs without one, in-place Functions, torch's errors, and
``gradcheck(check_forward_ad=True)`` catching a wrong ``jvp`` or a missing one, each compared with torch."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad


def _functions(lib):
    """The same custom Functions, defined against ``lib`` (numbagrad or torch)."""

    class Scale(lib.autograd.Function):  # old style: y = x * k * w
        @staticmethod
        def forward(ctx, x, w, k):
            ctx.save_for_forward(x, w)
            ctx.k = k
            return x * w * k

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("forward mode never calls backward")

        @staticmethod
        def jvp(ctx, x_t, w_t, k_t):
            x, w = ctx.saved_tensors
            ctx.seen = (k_t, x_t.tolist(), w_t.tolist())
            return (x_t * w + x * w_t) * ctx.k

    class Cube(lib.autograd.Function):  # new style, two outputs
        @staticmethod
        def forward(x):
            return x**3, x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_forward(x)

        @staticmethod
        def jvp(ctx, x_t):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * x_t, 2 * x_t

    class Double_(lib.autograd.Function):  # in place
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x.mul_(2)

        @staticmethod
        def jvp(ctx, x_t):
            return x_t.mul_(2)

    class NoJvp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class TwoTangents(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def jvp(ctx, x_t):
            return x_t, x_t

    class NotATensor(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def jvp(ctx, x_t):
            return 3

    class WrongShape(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def jvp(ctx, x_t):
            return x_t[:1]

    class WrongJvp(lib.autograd.Function):  # jvp off by a factor of 2 (backward is right)
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x**2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def jvp(ctx, x_t):
            (x,) = ctx.saved_tensors
            return 4 * x * x_t

    class WithIndex(lib.autograd.Function):  # a non-differentiable and an integer output
        @staticmethod
        def forward(ctx, x):
            y, z = x * 2, x * 3
            ctx.mark_non_differentiable(z)
            return y, z, x.argmax()

        @staticmethod
        def jvp(ctx, x_t):
            return x_t * 2, None, None

    class TangentForIndex(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x.argmax()

        @staticmethod
        def jvp(ctx, x_t):
            return x_t * 2, x_t.sum()

    class AsIs(lib.autograd.Function):  # returns its input: the jvp must return a view
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def jvp(ctx, x_t):
            return x_t * 5

    return {k: v for k, v in locals().items() if isinstance(v, type)}


X, XT = [0.5, -1.0, 2.0], [1.0, 2.0, 3.0]


def _run(lib, scenario):
    """``scenario(lib, fw, functions)``'s result as plain Python values, or the exception's type and text."""
    fw = lib.autograd.forward_ad
    try:
        result = scenario(lib, fw, _functions(lib))
    except Exception as e:
        return type(e).__name__, str(e).replace("numbagrad.", "torch.")  # (dtypes print as numbagrad.float64)
    finally:
        if fw._current_level >= 0:
            fw.exit_dual_level()
    return result


def _same(torch, scenario):
    ours, theirs = _run(numbagrad, scenario), _run(torch, scenario)
    assert ours == theirs
    return ours


def _dual(lib, fw, values=X, tangent=XT):
    return fw.make_dual(lib.tensor(values, dtype=lib.float64), lib.tensor(tangent, dtype=lib.float64))


def test_old_style_jvp_gets_saved_tensors_and_zeros_for_a_missing_tangent(torch):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            w = lib.tensor([2.0, 3.0, 4.0], dtype=lib.float64)
            out = fns["Scale"].apply(_dual(lib, fw), w, 3)
            return fw.unpack_dual(out).tangent.tolist()

    assert _same(torch, scenario) == [6.0, 18.0, 36.0]


def test_jvp_receives_none_for_a_non_tensor_and_zeros_for_a_plain_tensor():
    fns = _functions(numbagrad)
    with numbagrad.autograd.forward_ad.dual_level():
        ctx_holder = []
        scale = fns["Scale"]
        original = scale.jvp

        def spy(ctx, *tangents):
            ctx_holder.append(ctx)
            return original(ctx, *tangents)

        scale.jvp = staticmethod(spy)
        scale.apply(_dual(numbagrad, numbagrad.autograd.forward_ad), numbagrad.ones(3, dtype=numbagrad.float64), 2)
    assert ctx_holder[0].seen == (None, XT, [0.0, 0.0, 0.0])


def test_new_style_jvp_with_two_outputs(torch):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            a, b = fns["Cube"].apply(_dual(lib, fw))
            return fw.unpack_dual(a).tangent.tolist(), fw.unpack_dual(b).tangent.tolist()

    assert _same(torch, scenario) == ([0.75, 6.0, 36.0], [2.0, 4.0, 6.0])


def test_custom_jvp_composes_with_builtin_ops(torch):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            a, _ = fns["Cube"].apply(_dual(lib, fw).sin())
            return [round(v, 12) for v in fw.unpack_dual(a.exp().sum()).tangent.reshape(1).tolist()]

    _same(torch, scenario)


def test_inplace_function_updates_the_tangent(torch):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            t = lib.tensor(XT, dtype=lib.float64)
            x = fw.make_dual(lib.tensor(X, dtype=lib.float64), t)
            out = fns["Double_"].apply(x)
            return out is x, x.tolist(), fw.unpack_dual(x).tangent.tolist(), t.tolist()

    assert _same(torch, scenario) == (True, [1.0, -2.0, 4.0], [2.0, 4.0, 6.0], [2.0, 4.0, 6.0])


def test_function_without_jvp_is_refused_for_a_dual_input(torch):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            return fns["NoJvp"].apply(_dual(lib, fw)).tolist()

    kind, message = _same(torch, scenario)
    assert kind == "NotImplementedError" and "jvp" in message


def test_function_without_jvp_still_runs_without_a_dual_input(torch):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            return fns["NoJvp"].apply(lib.tensor(X)).tolist()

    assert _same(torch, scenario) == [1.0, -2.0, 4.0]


def test_non_differentiable_outputs_get_no_tangent(torch):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            return [fw.unpack_dual(o).tangent is None for o in fns["WithIndex"].apply(_dual(lib, fw))]

    assert _same(torch, scenario) == [False, True, True]


@pytest.mark.parametrize("name", ["TwoTangents", "NotATensor", "WrongShape", "TangentForIndex", "AsIs"])
def test_bad_jvp_results_raise_torchs_errors(torch, name):
    def scenario(lib, fw, fns):
        with fw.dual_level():
            return fns[name].apply(_dual(lib, fw)).tolist()

    kind, _ = _same(torch, scenario)  # (the same type and text)
    assert kind == "RuntimeError"


def test_gradcheck_forward_mode_catches_a_wrong_jvp(torch):
    def scenario(lib, fw, fns):
        x = lib.tensor(X, dtype=lib.float64, requires_grad=True)
        ok_backward = lib.autograd.gradcheck(fns["WrongJvp"].apply, (x,))
        ok_forward = lib.autograd.gradcheck(fns["WrongJvp"].apply, (x,), check_forward_ad=True, raise_exception=False)
        return ok_backward, ok_forward

    assert _same(torch, scenario) == (True, False)


def test_gradcheck_forward_mode_error_text(torch):
    def scenario(lib, fw, fns):
        x = lib.tensor(X, dtype=lib.float64, requires_grad=True)
        lib.autograd.gradcheck(fns["WrongJvp"].apply, (x,), check_forward_ad=True, check_backward_ad=False)

    kind, message = _same(torch, scenario)
    assert kind == "GradcheckError" and message.startswith(
        "Jacobian computed with forward mode mismatch for output 0 with respect to input 0"
    )


def test_gradcheck_forward_mode_raises_for_a_missing_jvp(torch):
    def scenario(lib, fw, fns):
        x = lib.tensor(X, dtype=lib.float64, requires_grad=True)
        lib.autograd.gradcheck(fns["NoJvp"].apply, (x,), check_forward_ad=True, raise_exception=False)

    kind, _ = _same(torch, scenario)
    assert kind == "NotImplementedError"


def test_gradcheck_forward_mode_passes_a_right_jvp():
    fns = _functions(numbagrad)
    x = numbagrad.tensor(X, dtype=numbagrad.float64, requires_grad=True)
    assert numbagrad.autograd.gradcheck(fns["Cube"].apply, (x,), check_forward_ad=True, check_backward_ad=False)
    np.testing.assert_allclose(x.detach().numpy(), X)
