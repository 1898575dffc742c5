"""``autograd.Function`` and its ctx: SPEC §2, TORCH_CONTRACT §1."""

import re
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import Function
from numbagrad.autograd.function import ERR_BACKWARD_TWICE, once_differentiable

F64 = numbagrad.float64


def leaf(values, requires_grad=True):
    return numbagrad.tensor(values, dtype=F64, requires_grad=requires_grad)


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class SquareNew(Function):
    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class Identity(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


# --- styles and entry points ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [Square, SquareNew], ids=["old_style", "setup_context"])
def test_forward_and_backward_in_both_styles(fn):
    x = leaf([1.0, -2.0, 3.0])
    y = fn.apply(x)
    assert y.tolist() == [1.0, 4.0, 9.0]
    y.sum().backward()
    assert x.grad.tolist() == [2.0, -4.0, 6.0]


def test_setup_context_receives_inputs_and_output():
    seen = {}

    class Fn(Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen["inputs"], seen["output"] = inputs, output
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.k, None

    x = leaf([1.0, 2.0])
    y = Fn.apply(x, 3.0)
    assert seen["inputs"][0] is x and seen["inputs"][1] == 3.0
    assert seen["output"] is y
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_vjp_is_an_alias_of_backward():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def vjp(ctx, grad):
            return grad * 3

    assert Function.vjp is Function.backward
    x = leaf([1.0, 2.0])
    Fn.apply(x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_defining_both_backward_and_vjp_fails_at_backward_time():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, grad):
            return grad

        @staticmethod
        def vjp(ctx, grad):
            return grad

    y = Fn.apply(leaf([1.0]))  # apply itself is fine, as in torch
    with pytest.raises(
        RuntimeError, match="Implementing both 'backward' and 'vjp' for a custom Function is not allowed"
    ):
        y.backward()


def test_missing_forward_and_backward_raise_torch_errors():
    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    class NoForward(Function):
        pass

    with pytest.raises(NotImplementedError, match="You must implement the forward function"):
        NoForward.apply(leaf([1.0]))
    with pytest.raises(NotImplementedError, match="You must implement either the backward or vjp method"):
        NoBackward.apply(leaf([1.0])).backward()


def test_apply_binds_keyword_arguments_by_forward_signature():
    class Affine(Function):
        @staticmethod
        def forward(ctx, x, scale, shift=0.0):
            ctx.scale = scale
            return x * scale + shift

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.scale, None, None

    x = leaf([1.0, 2.0])
    y = Affine.apply(x, shift=1.0, scale=2.0)
    assert y.tolist() == [3.0, 5.0]
    assert y.grad_fn.needs_input_grad == (True, False, False)
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        Affine.apply(x, 2.0, bogus=1)


def test_new_style_apply_fills_default_arguments():
    class Fn(Function):
        @staticmethod
        def forward(x, power=3):
            return x**power

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.inputs = inputs

        @staticmethod
        def backward(ctx, grad):
            x, power = ctx.inputs
            return grad * power * x ** (power - 1), None

    x = leaf([2.0])
    y = Fn.apply(x, power=2)
    assert y.grad_fn.inputs[1] == 2
    y.backward()
    assert x.grad.tolist() == [4.0]


def test_non_tensor_arguments_get_no_gradient_slot_and_false_needs_input_grad():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x, name, n):
            ctx.name, ctx.n = name, n
            return x * n

        @staticmethod
        def backward(ctx, grad):
            assert ctx.name == "label"
            return grad * ctx.n, None, None

    x = leaf([1.0, 2.0])
    y = Fn.apply(x, "label", 4)
    assert y.grad_fn.needs_input_grad == (True, False, False)
    assert len(y.grad_fn.next_functions) == 1  # (torch lists the tensor inputs only)
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_tuple_outputs_and_non_tensor_outputs():
    class SplitStats(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3, "done", 7

        @staticmethod
        def backward(ctx, g2, g3, g_str, g_int):
            assert g_str is None and g_int is None
            return g2 * 2 + g3 * 3

    x = leaf([1.0, 2.0])
    a, b, text, n = SplitStats.apply(x)
    assert (text, n) == ("done", 7)
    assert a.grad_fn is b.grad_fn and (a._output_nr, b._output_nr) == (0, 1)
    (a.sum() + b.sum()).backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_single_element_tuple_output_stays_a_tuple():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            return (x * 2,)

        @staticmethod
        def backward(ctx, g):
            return g * 2

    out = Fn.apply(leaf([1.0]))
    assert isinstance(out, tuple) and len(out) == 1


# --- save_for_backward ---------------------------------------------------------------------------------------
def test_save_inputs_outputs_and_none():
    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(x, None, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, nothing, y = ctx.saved_tensors
            assert nothing is None
            return grad * y

    x = leaf([0.0, 1.0])
    y = Exp.apply(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0]))


def test_saved_output_is_relinked_to_its_node_and_not_held_with_it():
    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(leaf([1.0]))
    (saved,) = y.grad_fn.saved_tensors
    assert saved is not y
    assert saved.grad_fn is y.grad_fn
    np.testing.assert_array_equal(saved.detach().numpy(), y.detach().numpy())


def test_saved_tensors_is_empty_when_nothing_saved():
    y = Identity.apply(leaf([1.0]))
    assert y.grad_fn.saved_tensors == ()


def test_save_for_backward_rejects_non_tensors():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type int"):
        Fn.apply(leaf([1.0]))


def test_saved_tensor_modified_in_place_is_detected():
    x = leaf([1.0, 2.0])
    a = x * 1  # a non-leaf input of Square, version 0
    y = Square.apply(a)
    a.mul_(2)
    message = (
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[numbagrad.DoubleTensor [2]], which is output 0 of Mul, is at version 1; expected version 0 "
        "instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
        "torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        y.sum().backward()


def test_a_saved_bool_tensor_modified_in_place_is_named_as_torch_names_it(torch):
    messages = []
    for lib in (torch, numbagrad):
        x = lib.tensor([1.0, -2.0], requires_grad=True)
        condition = x.detach() > 0
        y = lib.where(condition, x, x * 2)
        condition.logical_not_()
        with pytest.raises(RuntimeError) as caught:
            y.sum().backward()
        messages.append(str(caught.value).split("]")[0])  # (the text before the shape's closing bracket)
    assert messages[0].endswith("modified by an inplace operation: [CPUBoolType [2")
    assert messages[1] == messages[0]


def test_saved_tensors_are_freed_after_backward():
    x = leaf([1.0, 2.0])
    y = Square.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match=re.escape(ERR_BACKWARD_TWICE)):
        _ = y.grad_fn.saved_tensors
    with pytest.raises(RuntimeError, match=re.escape(ERR_BACKWARD_TWICE)):
        y.sum().backward()


def test_retain_graph_keeps_saved_tensors():
    x = leaf([1.0, 2.0])
    y = Square.apply(x)
    y.sum().backward(retain_graph=True)
    assert y.grad_fn.saved_tensors[0] is x
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 8.0]


# --- ctx flags -----------------------------------------------------------------------------------------------
def test_needs_input_grad_follows_requires_grad():
    class Mul(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            ga = grad * b if ctx.needs_input_grad[0] else None
            gb = grad * a if ctx.needs_input_grad[1] else None
            return ga, gb

    a, b = leaf([2.0]), leaf([5.0], requires_grad=False)
    y = Mul.apply(a, b)
    assert y.grad_fn.needs_input_grad == (True, False)
    y.backward()
    assert a.grad.tolist() == [5.0] and b.grad is None


def test_mark_dirty_returns_the_modified_input_with_the_new_node():
    class AddOneInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    base = leaf([1.0, 2.0])
    a = base * 2
    version = a._version
    out = AddOneInPlace.apply(a)
    assert out is a
    assert a.tolist() == [3.0, 5.0]
    assert a._version > version
    assert type(a.grad_fn).__name__ == "AddOneInPlaceBackward"
    a.sum().backward()
    assert base.grad.tolist() == [2.0, 2.0]


def test_mark_dirty_on_a_leaf_that_requires_grad_fails():
    class InPlace(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(
        RuntimeError, match="a leaf Variable that requires grad has been used in an in-place operation."
    ):
        InPlace.apply(leaf([1.0]))


def test_mark_dirty_of_a_tensor_not_returned_fails():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x, buf):
            buf.add_(1)
            ctx.mark_dirty(buf)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2, None

    with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward method were not returned"):
        Fn.apply(leaf([1.0]), numbagrad.zeros(1, dtype=F64))


@pytest.mark.parametrize(
    ("mark", "message"),
    [
        ("mark_dirty", "mark_dirty can only accept variables, but argument 0 is of type int"),
        ("mark_non_differentiable", "mark_non_differentiable only accepts variable arguments, but got int"),
    ],
)
def test_marking_a_non_tensor_fails(mark, message):
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            getattr(ctx, mark)(3)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match=message):  # PyTorch 2.13 raises RuntimeError here
        Fn.apply(leaf([1.0]))


def test_mark_non_differentiable_outputs_and_zero_grads_for_them():
    received = []

    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x * 2, x * 3
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            received.append(gb)
            return ga * 2

    x = leaf([1.0, -1.0])
    a, b = Fn.apply(x)
    assert a.requires_grad and not b.requires_grad and b.grad_fn is None
    a.sum().backward()
    assert received[0].tolist() == [0.0, 0.0]
    assert x.grad.tolist() == [2.0, 2.0]


def test_integer_outputs_are_not_differentiable():
    class ArgAndValue(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1, (x > 0).long()

        @staticmethod
        def backward(ctx, g, g_idx):
            return g

    v, idx = ArgAndValue.apply(leaf([1.0, -1.0]))
    assert v.requires_grad and not idx.requires_grad


def test_materialize_grads_gives_zeros_by_default_and_none_when_disabled():
    received = {}

    def make(materialize):
        class TwoOut(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                received[materialize] = gb
                return ga * 2 if gb is None else ga * 2 + gb * 3

        return TwoOut

    for materialize in (True, False):
        x = leaf([1.0, 2.0])
        a, _ = make(materialize).apply(x)
        a.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
    assert received[True].tolist() == [0.0, 0.0]
    assert received[False] is None


def test_set_materialize_grads_rejects_non_bool():
    with pytest.raises(TypeError):
        numbagrad.autograd.FunctionCtx().set_materialize_grads(1)


def test_attributes_on_ctx_reach_backward():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.factor = 5.0
            ctx.shape_seen = tuple(x.shape)
            return x * 5.0

        @staticmethod
        def backward(ctx, grad):
            assert ctx.shape_seen == (2,)
            return grad * ctx.factor

    x = leaf([1.0, 2.0])
    y = Fn.apply(x)
    assert y.grad_fn.factor == 5.0
    y.sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


# --- graph construction --------------------------------------------------------------------------------------
def test_grad_fn_is_the_ctx_named_after_the_class():
    seen = {}

    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            seen["ctx"] = ctx
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    y = Fn.apply(leaf([1.0]))
    assert y.grad_fn is seen["ctx"]
    assert type(y.grad_fn).__name__ == "FnBackward" and y.grad_fn.name() == "FnBackward"
    assert repr(y) == "tensor([2.], dtype=numbagrad.float64, grad_fn=<FnBackward>)"
    assert repr(y.grad_fn).startswith("<numbagrad.autograd.function.FnBackward object at 0x")


def test_forward_runs_with_grad_mode_off():
    modes = []

    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            modes.append(numbagrad.is_grad_enabled())
            inner = x * 2
            modes.append(inner.requires_grad)
            return inner

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    y = Fn.apply(leaf([1.0]))
    assert modes == [False, False]
    assert numbagrad.is_grad_enabled()
    assert y.grad_fn.next_functions[0][0].variable is not None  # linked to the leaf, not to the inner MulBackward0


def test_no_graph_when_no_input_requires_grad():
    y = Square.apply(leaf([1.0, 2.0], requires_grad=False))
    assert y.grad_fn is None and not y.requires_grad


def test_no_graph_under_no_grad():
    x = leaf([1.0, 2.0])
    with numbagrad.no_grad():
        y = Square.apply(x)
    assert y.grad_fn is None and not y.requires_grad


def test_input_returned_as_is_becomes_a_view_with_the_new_node():
    x = leaf([1.0, 2.0])
    y = Identity.apply(x)
    assert y is not x
    assert y._base is x
    assert type(y.grad_fn).__name__ == "IdentityBackward"
    assert np.shares_memory(y.detach().numpy(), x.detach().numpy())
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_new_style_saving_an_input_returned_as_is_fails():
    class Fn(Function):
        @staticmethod
        def forward(x):
            return x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match="A input that has been returned as-is as output is being saved"):
        Fn.apply(leaf([1.0]))


# --- what backward returns -----------------------------------------------------------------------------------
class ReturnsGrad(Function):
    """backward returns whatever ``ctx.result`` was told to return."""

    @staticmethod
    def forward(ctx, x, result):
        ctx.result = result
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        return ctx.result, None


def test_broadcast_shaped_gradient_is_summed_to_the_input_shape():
    x = leaf([[1.0, 2.0, 3.0]])  # [1, 3]
    y = ReturnsGrad.apply(x, numbagrad.ones(4, 2, 3, dtype=F64))
    y.sum().backward()
    assert x.grad.tolist() == [[8.0, 8.0, 8.0]]


def test_gradient_of_incompatible_shape_fails():
    x = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = ReturnsGrad.apply(x, numbagrad.ones(3, dtype=F64))
    message = (
        "Function ReturnsGradBackward returned an invalid gradient at index 0 - got [3] but expected shape "
        "compatible with [2, 3]"
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        y.sum().backward()


def test_gradient_dtype_is_cast_to_the_input_dtype():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)  # float32
    y = ReturnsGrad.apply(x, numbagrad.tensor([0.5, 0.25], dtype=F64))
    y.sum().backward()
    assert x.grad.dtype == numbagrad.float32
    assert x.grad.tolist() == [0.5, 0.25]


def test_wrong_number_of_gradients_fails():
    class TwoIn(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad

    y = TwoIn.apply(leaf([1.0]), leaf([2.0]))
    with pytest.raises(
        RuntimeError,
        match=re.escape("function TwoInBackward returned an incorrect number of gradients (expected 2, got 1)"),
    ):
        y.backward()


def test_extra_trailing_none_gradients_are_allowed():
    x = leaf([1.0])
    ReturnsGrad.apply(x, numbagrad.tensor([3.0], dtype=F64)).backward()  # backward returns (grad, None) for 2 inputs
    assert x.grad.tolist() == [3.0]

    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad, None, None

    z = leaf([1.0])
    Extra.apply(z).backward()
    assert z.grad.tolist() == [1.0]


def test_gradient_that_is_not_a_tensor_fails():
    y = ReturnsGrad.apply(leaf([1.0]), 3)
    with pytest.raises(RuntimeError, match=re.escape("expected Variable or None (got int)")):
        y.backward()


def test_gradient_for_a_non_tensor_input_is_dropped_with_a_warning():
    class AddConstant(Function):
        @staticmethod
        def forward(ctx, x, c):
            return x + c

        @staticmethod
        def backward(ctx, grad):
            return grad, grad.sum()

    x = leaf([1.0, 2.0])
    y = AddConstant.apply(x, 5.0)
    with pytest.warns(
        UserWarning,
        match=re.escape(
            "function AddConstantBackward returned a gradient different than None at position 2, but the "
            "corresponding forward input was not a Tensor; it is ignored"
        ),
    ):
        y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


# --- once_differentiable ---------------------------------------------------------------------------------------
class CubeOnce(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        assert not numbagrad.is_grad_enabled()
        return 3 * x**2 * grad


def test_once_differentiable_first_derivative_works():
    x = leaf([2.0])
    (g,) = numbagrad.autograd.grad(CubeOnce.apply(x), x)
    assert g.tolist() == [12.0]


def test_once_differentiable_second_derivative_raises():
    x = leaf([2.0])
    (g,) = numbagrad.autograd.grad(CubeOnce.apply(x), x, create_graph=True)
    assert not g.requires_grad  # torch: the outputs get a graph only when a grad_output requires grad
    (g,) = numbagrad.autograd.grad(CubeOnce.apply(x), x, leaf([1.0]), create_graph=True)
    assert repr(g) == "tensor([12.], dtype=numbagrad.float64, grad_fn=<Error>)"
    with pytest.raises(
        RuntimeError, match="trying to differentiate twice a function that was marked with @once_differentiable"
    ):
        g.backward()


# --- instantiation ---------------------------------------------------------------------------------------------
def test_instantiating_a_function_warns():
    with pytest.warns(
        DeprecationWarning, match="should not be instantiated. Methods on autograd functionsare all static"
    ):
        Square()


def test_calling_an_instance_is_the_legacy_error():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        instance = Square()
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method is deprecated"):
        instance(leaf([1.0]))


def test_calling_forward_directly_records_nothing():
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad

    y = Fn.forward(None, leaf([1.0]))
    assert type(y.grad_fn).__name__ == "MulBackward0"  # just a staticmethod: grad mode untouched


# --- against torch ----------------------------------------------------------------------------------------------
def test_same_custom_function_program_as_torch():
    torch = pytest.importorskip("torch")

    def program(lib):
        class LogSumExp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, scale):
                m = x.max()
                y = (x - m).exp().sum().log() + m
                ctx.save_for_backward(x, y)
                ctx.scale = scale
                return y * scale

            @staticmethod
            def backward(ctx, grad):
                x, y = ctx.saved_tensors
                return grad * ctx.scale * (x - y).exp(), None

        x = lib.tensor([[0.5, -1.0, 2.0], [0.0, 1.5, -0.5]], dtype=lib.float64, requires_grad=True)
        out = LogSumExp.apply(x, 2.0)
        (out * out).backward()
        return repr(out), x.grad.detach().numpy().copy()

    ours, theirs = program(numbagrad), program(torch)
    assert ours[0] == theirs[0].replace("dtype=torch.", "dtype=numbagrad.")
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)


def _doubling_in_place(lib):
    """A custom Function (of ``lib``) that doubles its input in place and says so with ``mark_dirty``."""

    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x.mul_(2)

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Double


@pytest.mark.parametrize("no_grad_view", [False, True])
def test_error_mark_dirty_on_a_view_of_a_leaf_that_requires_grad(torch, no_grad_view):
    messages = []
    for lib in (numbagrad, torch):
        Double = _doubling_in_place(lib)
        a = lib.ones(2, 3, requires_grad=True)
        with lib.set_grad_enabled(not no_grad_view):
            v = a[0]
        with pytest.raises(RuntimeError) as info:
            Double.apply(v)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_mark_dirty_on_a_view_rebases_the_base_as_torch(torch):
    """A custom Function that changes a view in place gives the base torch's CopySlices history."""
    results = []
    for lib in (numbagrad, torch):
        Double = _doubling_in_place(lib)
        a = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        x = a * 1
        y = Double.apply(x[0])
        (x * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        results.append((type(x.grad_fn).__name__, type(y.grad_fn).__name__, a.grad.tolist(), x.tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize("make", ["unbind", "custom"])
def test_error_mark_dirty_on_a_view_that_may_not_change_in_place(torch, make):
    messages = []
    for lib in (numbagrad, torch):
        Double = _doubling_in_place(lib)

        class AsView(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                return g

        x = lib.ones(2, 3, requires_grad=True) * 1.0
        v = x.unbind(0)[0] if make == "unbind" else AsView.apply(x)
        with pytest.raises(RuntimeError) as info:
            Double.apply(v)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_views_of_a_base_marked_dirty_follow_its_new_history(torch):
    results = []
    for lib in (numbagrad, torch):
        Double = _doubling_in_place(lib)
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        x = a * 1
        v = x[0]
        Double.apply(x)
        (v * v).sum().backward()
        results.append((type(v.grad_fn).__name__, a.grad.tolist()))
    assert results[0] == results[1]


def test_a_tensor_marked_dirty_that_retains_grad_reports_its_new_gradient(torch):
    results = []
    for lib in (numbagrad, torch):
        Double = _doubling_in_place(lib)
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        x = a * 1
        x.retain_grad()
        Double.apply(x)
        (x * lib.tensor([3.0, 4.0])).sum().backward()
        results.append((x.grad.tolist(), a.grad.tolist()))
    assert results[0] == results[1]
