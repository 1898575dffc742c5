"""The error backward raises when a tensor it saved was changed in place since, against torch: the op it names
(the node that saved an output; a saved input's grad_fn now, which the in-place change may have replaced), spelled
as torch spells it for generated nodes (``Sigmoid``, ``Sum1``), other C++ nodes (``torch::autograd::CopySlices``)
and custom Functions (the Function's name), and the hint with and without anomaly detection."""

import warnings

import pytest

from torch_oracle import raises_like


def _normalize(message: str) -> str:
    return message.replace("[numbagrad.", "[torch.")


def _custom(lib, name: str, saves: str):
    """A Function ``name`` computing ``3 * x`` that saves its input or its output."""

    def forward(ctx, x):
        y = x * 3
        ctx.save_for_backward(y if saves == "output" else x)
        return y

    def backward(ctx, g):
        _ = ctx.saved_tensors  # (reading them runs the version check)
        return g * 3

    return type(name, (lib.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def _output_changed(op):
    def make(lib):
        out = op(lib, lib.ones(3, requires_grad=True) * 2)
        out.mul_(2)
        out.sum().backward()

    return make


def _input_changed_through_an_alias(op):
    """The saved input changed through ``detach()`` (same version counter), so it keeps its grad_fn."""

    def make(lib):
        x = op(lib, lib.ones(2, 3, requires_grad=True))
        out = x * x
        x.detach().add_(1)
        out.sum().backward()

    return make


def _copy_slices(lib, a):
    x = a * 2
    x[0, 0] = 5.0
    return x


CASES = {
    "sigmoid's output": _output_changed(lambda lib, x: x.sigmoid()),
    "exp's output": _output_changed(lambda lib, x: x.exp()),
    "tanh's output": _output_changed(lambda lib, x: x.tanh()),
    "a custom Function's output": _output_changed(lambda lib, x: _custom(lib, "MyFn", "output").apply(x)),
    "a Function named ...Backward": _output_changed(lambda lib, x: _custom(lib, "StepBackward", "output").apply(x)),
    "mul's input": _input_changed_through_an_alias(lambda lib, a: a * 2),
    "an overload's node": _input_changed_through_an_alias(lambda lib, a: a.sum(0)),
    "pow's second overload": _input_changed_through_an_alias(lambda lib, a: a**a),
    "addmm's output": _input_changed_through_an_alias(lambda lib, a: lib.addmm(a, a, a.t() * 1)),
    "CopySlices": _input_changed_through_an_alias(_copy_slices),
    "a custom Function's result": _input_changed_through_an_alias(
        lambda lib, a: _custom(lib, "Scale", "input").apply(a)
    ),
}


@pytest.mark.parametrize("make", CASES.values(), ids=CASES.keys())
def test_the_error_names_the_op_as_torch(torch, make):
    raises_like(torch, make, _normalize)


def test_an_input_changed_in_place_is_named_by_its_new_grad_fn(torch):
    def make(lib):
        x = lib.ones(3, requires_grad=True) * 2
        out = _custom(lib, "MyFn", "input").apply(x)
        x.add_(1)  # x's grad_fn is now AddBackward0
        out.sum().backward()

    raises_like(torch, make, _normalize)


def test_a_view_of_a_changed_base_is_named_as_torch(torch):
    def make(lib):
        base = lib.ones(2, 3, requires_grad=True) * 2
        view = base.view(6)
        out = view * view
        base.add_(1)
        out.sum().backward()

    raises_like(torch, make, _normalize)


def test_under_anomaly_detection_the_hint_points_at_the_backtrace(torch):
    def make(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (anomaly mode's own warnings)
            with lib.autograd.set_detect_anomaly(True):
                _output_changed(lambda lib, x: x.sigmoid())(lib)

    raises_like(torch, make, _normalize)
