"""Misuse raises torch's exception type with torch's wording (SPEC §4, TORCH_CONTRACT §2), and leaves data intact.

Each case is a small program written against a library module (``numbagrad`` or ``torch``): it runs under
numbagrad and, where PyTorch is installed, under torch too, and both must raise the same type with the same phrase.
PyTorch 2.13 rewords three messages that TORCH_CONTRACT quotes from older source (the saved-tensor hint, the unused
input of ``grad``, empty ``inputs=``): here the phrase is the part both share; ``test_function.py`` and
``test_engine.py`` check numbagrad's full TORCH_CONTRACT wording.
"""

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import numbagrad


def custom(lib, backward, forward=lambda ctx, *args: args[0] * 1, name="Fn"):
    """A Function class named ``name`` with the given forward and backward."""
    return type(name, (lib.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def leaf(lib, values=(1.0, 2.0, 3.0)):
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=True)


def wrong_number_of_gradients(lib):
    fn = custom(lib, lambda ctx, g: g, forward=lambda ctx, a, b: a + b, name="Two")
    fn.apply(leaf(lib), leaf(lib)).sum().backward()


def invalid_gradient_shape(lib):
    fn = custom(lib, lambda ctx, g: g.sum(0))
    fn.apply(lib.ones(2, 3, dtype=lib.float64, requires_grad=True)).sum().backward()


def backward_twice(lib):
    x = leaf(lib)
    y = (x * x).sum()
    y.backward()
    y.backward()


def saved_tensors_after_backward(lib):
    x = leaf(lib)
    y = x.exp()
    y.sum().backward()
    fn = custom(lib, lambda ctx, g: g, forward=lambda ctx, x: (ctx.save_for_backward(x), x * 2)[1])
    z = fn.apply(x)
    z.sum().backward()
    _ = z.grad_fn.saved_tensors


def implicit_grad_of_non_scalar(lib):
    (leaf(lib) * 2).backward()


def saved_tensor_modified_in_place(lib):
    x = leaf(lib)
    y = x.exp()
    z = y * y
    y.add_(1)
    z.sum().backward()


def backward_without_graph(lib):
    lib.ones(3).sum().backward()


def unused_input_in_grad(lib):
    x, unused = leaf(lib), leaf(lib)
    lib.autograd.grad((x * 2).sum(), [x, unused])


def input_not_requiring_grad_in_grad(lib):
    x = leaf(lib)
    lib.autograd.grad((x * 2).sum(), [x, lib.ones(1)])


def save_non_tensor(lib):
    fn = custom(lib, lambda ctx, g: g, forward=lambda ctx, x: (ctx.save_for_backward(x, "label"), x * 2)[1])
    fn.apply(leaf(lib))


def in_place_on_leaf(lib):
    leaf(lib).mul_(2)


def in_place_on_view_of_leaf(lib):
    leaf(lib)[1:].mul_(2)


def mark_dirty_on_leaf(lib):
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x

    custom(lib, lambda ctx, g: g, forward=forward).apply(leaf(lib))


def apply_on_tensor_requiring_grad(lib):
    leaf(lib).apply_(lambda v: v + 1)


def requires_grad_on_integer_tensor(lib):
    lib.tensor([1, 2, 3]).requires_grad_()


def requires_grad_flag_of_non_leaf(lib):
    (leaf(lib) * 2).requires_grad = False


def retain_grad_without_requires_grad(lib):
    lib.ones(3).retain_grad()


def hook_without_requires_grad(lib):
    lib.ones(3).register_hook(lambda g: g)


def gradient_of_wrong_shape(lib):
    (leaf(lib) * 2).backward(lib.ones(2, dtype=lib.float64))


def gradient_of_wrong_type(lib):
    lib.autograd.backward([leaf(lib) * 2], ["not a tensor"])


def gradients_of_wrong_count(lib):
    x = leaf(lib)
    lib.autograd.backward([x * 2, x * 3], [lib.ones(3, dtype=lib.float64)])


def empty_inputs(lib):
    (leaf(lib) * 2).sum().backward(inputs=[])


def broadcast_shape_mismatch(lib):
    lib.ones(2, 3) + lib.ones(4)


def matmul_shape_mismatch(lib):
    lib.ones(2, 3).mm(lib.ones(4, 5))


def linear_input_of_another_dtype(lib):
    lib.nn.functional.linear(lib.ones(2, 3, dtype=lib.float64), lib.ones(4, 3), lib.ones(4))


def linear_bias_of_another_dtype(lib):
    lib.nn.functional.linear(lib.ones(2, 3), lib.ones(4, 3), lib.ones(4, dtype=lib.float64))


def linear_of_a_0d_input(lib):
    lib.nn.functional.linear(lib.tensor(1.0), lib.ones(1, 1), lib.ones(1))


def linear_of_a_1d_weight_with_bias(lib):
    lib.nn.functional.linear(lib.ones(2, 3), lib.ones(3), lib.ones(1))


def linear_bias_of_the_wrong_size(lib):
    lib.nn.functional.linear(lib.ones(2, 3), lib.ones(4, 3), lib.ones(5))


def linear_of_a_numpy_array(lib):
    lib.nn.functional.linear(np.ones((2, 3), np.float32), lib.ones(4, 3))


def exp_of_a_numpy_array(lib):
    lib.exp(np.ones(2))


def in_place_broadcast_mismatch(lib):
    lib.ones(3).add_(lib.ones(2, 3))


def optimizer_given_non_leaf(lib):
    lib.optim.SGD([leaf(lib) * 2], lr=0.1)


def inference_tensor_saved(lib):
    with lib.inference_mode():
        frozen = lib.ones(3, dtype=lib.float64)
    leaf(lib) * frozen


NOT_VARIABLE = "but the corresponding forward input was not a Variable"

CASES = {
    wrong_number_of_gradients: (
        RuntimeError,
        "function TwoBackward returned an incorrect number of gradients (expected 2, got 1)",
    ),
    invalid_gradient_shape: (
        RuntimeError,
        "Function FnBackward returned an invalid gradient at index 0 - got [3] but expected shape compatible with "
        "[2, 3]",
    ),
    backward_twice: (RuntimeError, "Trying to backward through the graph a second time"),
    saved_tensors_after_backward: (RuntimeError, "Specify retain_graph=True if you need to backward through the graph"),
    implicit_grad_of_non_scalar: (RuntimeError, "grad can be implicitly created only for scalar outputs"),
    saved_tensor_modified_in_place: (
        RuntimeError,
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[numbagrad.DoubleTensor [3]], which is output 0 of ",
    ),
    backward_without_graph: (RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn"),
    unused_input_in_grad: (
        RuntimeError,
        "appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.",
    ),
    input_not_requiring_grad_in_grad: (RuntimeError, "One of the differentiated Tensors does not require grad"),
    save_non_tensor: (TypeError, "save_for_backward can only save variables, but argument 1 is of type str"),
    in_place_on_leaf: (RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation."),
    in_place_on_view_of_leaf: (
        RuntimeError,
        "a view of a leaf Variable that requires grad is being used in an in-place operation.",
    ),
    mark_dirty_on_leaf: (RuntimeError, "a leaf Variable that requires grad has been used in an in-place operation."),
    apply_on_tensor_requiring_grad: (
        RuntimeError,
        "Can't call apply_() on Variable that requires grad. Use var.detach().apply_() instead.",
    ),
    requires_grad_on_integer_tensor: (RuntimeError, "Tensors of floating point"),
    requires_grad_flag_of_non_leaf: (
        RuntimeError,
        "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a "
        "subgraph that doesn't require differentiation use var_no_grad = var.detach().",
    ),
    retain_grad_without_requires_grad: (RuntimeError, "can't retain_grad on Tensor that has requires_grad=False"),
    hook_without_requires_grad: (RuntimeError, "cannot register a hook on a tensor that doesn't require gradient"),
    gradient_of_wrong_shape: (
        RuntimeError,
        "Mismatch in shape: grad_output[0] has a shape of numbagrad.Size([2]) and output[0] has a shape of "
        "numbagrad.Size([3]).",
    ),
    gradient_of_wrong_type: (TypeError, "gradients can be either Tensors or None, but got str"),
    gradients_of_wrong_count: (RuntimeError, "got 2 tensors and 1 gradients"),
    empty_inputs: (RuntimeError, "cannot be empty."),
    broadcast_shape_mismatch: (
        RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
    ),
    matmul_shape_mismatch: (RuntimeError, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    linear_input_of_another_dtype: (RuntimeError, "mat1 and mat2 must have the same dtype, but got Double and Float"),
    linear_bias_of_another_dtype: (RuntimeError, "self and mat2 must have the same dtype, but got Double and Float"),
    linear_of_a_0d_input: (RuntimeError, "both arguments to linear need to be at least 1D, but they are 0D and 2D"),
    linear_of_a_1d_weight_with_bias: (RuntimeError, "mat2 must be a matrix, got 1-D tensor"),
    linear_bias_of_the_wrong_size: (
        RuntimeError,
        "The expanded size of the tensor (4) must match the existing size (5) at non-singleton dimension 1.  "
        "Target sizes: [2, 4].  Tensor sizes: [5]",
    ),
    linear_of_a_numpy_array: (TypeError, "linear(): argument 'input' (position 1) must be Tensor, not numpy.ndarray"),
    exp_of_a_numpy_array: (TypeError, "exp(): argument 'input' (position 1) must be Tensor, not numpy.ndarray"),
    in_place_broadcast_mismatch: (RuntimeError, "output with shape [3] doesn't match the broadcast shape [2, 3]"),
    optimizer_given_non_leaf: (ValueError, "can't optimize a non-leaf Tensor"),
    inference_tensor_saved: (RuntimeError, "Inference tensors cannot be saved for backward."),
}


def _params():
    optim_missing = not hasattr(numbagrad.optim, "SGD")
    for program, (exc, phrase) in CASES.items():
        marks = []
        if program is optimizer_given_non_leaf:
            marks.append(pytest.mark.skipif(optim_missing, reason="numbagrad.optim has no SGD yet"))
        yield pytest.param(program, exc, phrase, id=program.__name__, marks=marks)


@pytest.mark.parametrize(("program", "exc", "phrase"), list(_params()))
def test_numbagrad_raises_torchs_error(program, exc, phrase):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=re.escape(phrase)):
            program(numbagrad)


@pytest.mark.parametrize(("program", "exc", "phrase"), list(_params()))
def test_torch_raises_the_same_error(program, exc, phrase):
    torch = pytest.importorskip("torch")
    with pytest.raises(exc, match=re.escape(phrase.replace("numbagrad.", "torch."))):
        program(torch)


def test_grad_of_non_leaf_warns():
    y = leaf(numbagrad) * 2
    with pytest.warns(
        UserWarning, match=re.escape("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed.")
    ):
        assert y.grad is None
    y.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad is None  # retaining: no warning


def test_mixing_devices_is_an_error():
    program = (
        "import numbagrad\n"
        "try:\n"
        "    numbagrad.ones(2) + numbagrad.ones(2, device='cuda')\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip() == (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    ), proc.stderr


# --- a failing op leaves its tensor as it was ------------------------------------------------------------------
def _failing_in_place_ops():
    def add_broadcast(t):
        t.add_(numbagrad.ones(2, 3, dtype=numbagrad.float64))

    def copy_wrong_shape(t):
        t.copy_(numbagrad.ones(4, dtype=numbagrad.float64))

    def setitem_wrong_shape(t):
        t[0:2] = numbagrad.tensor([7.0, 8.0, 9.0], dtype=numbagrad.float64)

    def setitem_mask_wrong_count(t):
        t[t > 1] = numbagrad.tensor([7.0, 8.0, 9.0], dtype=numbagrad.float64)

    def mul_on_leaf(t):
        t.requires_grad_()
        t.mul_(2)

    def div_by_mismatched(t):
        t /= numbagrad.ones(2, dtype=numbagrad.float64)

    return [
        add_broadcast,
        copy_wrong_shape,
        setitem_wrong_shape,
        setitem_mask_wrong_count,
        mul_on_leaf,
        div_by_mismatched,
    ]


@pytest.mark.parametrize("op", _failing_in_place_ops(), ids=lambda f: f.__name__)
def test_failing_in_place_op_leaves_data_unchanged(op):
    t = numbagrad.tensor([1.0, 2.0, 3.0], dtype=numbagrad.float64)
    version = t._version
    with pytest.raises((RuntimeError, ValueError, IndexError)):
        op(t)
    np.testing.assert_array_equal(t.detach().numpy(), [1.0, 2.0, 3.0])
    assert t._version == version


@pytest.mark.parametrize(
    "op",
    [
        f
        for f in _failing_in_place_ops()
        if f.__name__ in ("copy_wrong_shape", "setitem_wrong_shape", "setitem_mask_wrong_count")
    ],
    ids=lambda f: f.__name__,
)
def test_shape_errors_in_writes_are_runtime_errors_like_torch(op):
    t = numbagrad.tensor([1.0, 2.0, 3.0], dtype=numbagrad.float64)
    with pytest.raises(RuntimeError):
        op(t)
