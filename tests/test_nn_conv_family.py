"""The convolution family of torch.nn against torch: ``conv3d``, ``conv_transpose1d/2d/3d`` and their modules,
``F.pad``'s reflect/replicate/circular modes and the padding modules, and the Conv modules' ``padding_mode`` and
string paddings. Values and input/weight/bias gradients are compared with torch (tiny shapes, float64), each new
differentiable function is gradchecked, and bad arguments raise torch's exception with torch's message."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF
from torch_oracle import raises_like

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")


def _arrays(seed: int, *shapes) -> list:
    rng = np.random.default_rng(seed)
    return [None if s is None else rng.standard_normal(s) for s in shapes]


def _run(lib, fn, arrays):
    """``fn(*tensors)`` in ``lib`` on float64 leaves that require grad, backward with a fixed output gradient:
    (output, gradients of the inputs)."""
    ts = [None if a is None else lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *ts)
    seed = np.random.default_rng(99).standard_normal(tuple(out.shape))
    out.backward(lib.tensor(seed))
    return out, [None if t is None else t.grad.numpy() for t in ts]


def _same_as_torch(torch, fn, arrays):
    ours, our_grads = _run(numbagrad, fn, arrays)
    theirs, their_grads = _run(torch, fn, arrays)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(our_grads, their_grads):
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__


def _same_error(torch, fn, arrays):
    """``fn``, given each library's tensors of ``arrays``, raises the same exception type and message in both."""
    raises_like(torch, lambda lib: fn(lib, *[lib.tensor(a) for a in arrays]))


# --- conv3d and the transposed convolutions ---------------------------------------------------------------------
CONV_CASES = {
    "conv3d": ("conv3d", (2, 4, 4, 5, 3), (6, 2, 2, 3, 2), (6,), dict(stride=(2, 1, 1), padding=(1, 0, 1), groups=2)),
    "conv3d_dilated_unbatched": ("conv3d", (2, 5, 4, 4), (3, 2, 2, 2, 2), None, dict(dilation=(2, 1, 2))),
    "conv3d_same": ("conv3d", (1, 2, 3, 4, 4), (2, 2, 2, 3, 2), (2,), dict(padding="same")),
    "conv3d_valid": ("conv3d", (1, 2, 3, 4, 4), (2, 2, 1, 3, 2), (2,), dict(padding="valid")),
    "conv_transpose1d": ("conv_transpose1d", (2, 4, 5), (4, 3, 3), (3,), dict(stride=2, padding=1, output_padding=1)),
    "conv_transpose1d_dilated": (
        "conv_transpose1d",
        (2, 4, 3),
        (4, 1, 3),
        (2,),
        dict(stride=3, padding=2, output_padding=1, groups=2, dilation=2),
    ),  # fmt: skip
    "conv_transpose1d_unbatched": ("conv_transpose1d", (2, 4), (2, 3, 2), None, {}),
    "conv_transpose2d": (
        "conv_transpose2d",
        (2, 4, 3, 4),
        (4, 3, 3, 2),
        (6,),
        dict(stride=2, padding=1, groups=2, output_padding=1),
    ),  # fmt: skip
    "conv_transpose2d_rect": (
        "conv_transpose2d",
        (1, 2, 3, 2),
        (2, 2, 2, 3),
        (2,),
        dict(stride=(1, 3), padding=(0, 1), output_padding=(0, 2), dilation=(2, 1)),
    ),  # fmt: skip
    "conv_transpose2d_unbatched": ("conv_transpose2d", (3, 2, 3), (3, 2, 2, 2), (2,), dict(stride=2)),
    "conv_transpose3d": (
        "conv_transpose3d",
        (2, 4, 3, 2, 3),
        (4, 3, 3, 2, 2),
        (6,),
        dict(stride=(2, 1, 2), padding=(1, 0, 0), groups=2, output_padding=(1, 0, 1), dilation=(1, 2, 1)),
    ),  # fmt: skip
    "conv_transpose3d_unbatched": ("conv_transpose3d", (2, 2, 2, 2), (2, 1, 2, 2, 2), None, dict(stride=2)),
}


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution_values_and_gradients_match_torch(torch, case):
    name, x, w, b, kw = CONV_CASES[case]
    _same_as_torch(torch, lambda lib, *t: getattr(lib.nn.functional, name)(*t, **kw), _arrays(0, x, w, b))


#: Smaller cases for finite differences: (function, input, weight, bias shapes, keyword arguments).
GRADCHECK_CASES = {
    "conv3d": ("conv3d", (1, 2, 3, 3, 3), (2, 1, 2, 2, 1), (2,), dict(stride=(1, 2, 1), padding=1, groups=2)),
    "conv3d_same": ("conv3d", (1, 2, 2, 3, 3), (1, 2, 2, 1, 2), (1,), dict(padding="same", dilation=(1, 1, 2))),
    "conv_transpose1d": (
        "conv_transpose1d",
        (1, 4, 3),
        (4, 1, 3),
        (2,),
        dict(stride=3, padding=2, output_padding=1, groups=2, dilation=2),
    ),  # fmt: skip
    "conv_transpose2d": (
        "conv_transpose2d",
        (1, 4, 2, 2),
        (4, 1, 2, 2),
        (2,),
        dict(stride=2, padding=1, output_padding=1, groups=2),
    ),  # fmt: skip
    "conv_transpose3d": (
        "conv_transpose3d",
        (1, 2, 2, 1, 2),
        (2, 1, 2, 2, 2),
        (1,),
        dict(stride=(2, 1, 1), output_padding=(1, 0, 0)),
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", GRADCHECK_CASES)
def test_convolution_gradcheck(case):
    name, *shapes, kw = GRADCHECK_CASES[case]
    inputs = [numbagrad.tensor(a, requires_grad=True) for a in _arrays(1, *shapes)]
    assert gradcheck(lambda *t: getattr(NF, name)(*t, **kw), inputs)


@pytest.mark.parametrize("case", ["conv3d", "conv_transpose2d"])
def test_convolution_second_derivatives_gradgradcheck(case):
    """The backward of each is made of the other, so its own backward exists (double backward)."""
    name, *shapes, kw = GRADCHECK_CASES[case]
    inputs = [numbagrad.tensor(a, requires_grad=True) for a in _arrays(2, *shapes)]
    assert gradgradcheck(lambda *t: getattr(NF, name)(*t, **kw), inputs)


def test_conv2d_backward_with_create_graph_matches_the_fused_backward():
    """The fused 2-d backward kernels and the differentiable one (create_graph) give the same gradients."""
    arrays = _arrays(3, (2, 4, 5, 5), (6, 2, 3, 2), (6,))
    grads = []
    for create_graph in (False, True):
        ts = [numbagrad.tensor(a, requires_grad=True) for a in arrays]
        out = NF.conv2d(*ts, stride=2, padding=1, dilation=(1, 2), groups=2)
        grads.append(numbagrad.autograd.grad(out.sum(), ts, create_graph=create_graph))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


CONV_ERRORS = {
    "output_padding_too_big": ("conv_transpose2d", (1, 2, 3, 3), (2, 3, 2, 2), dict(stride=2, output_padding=2)),
    "output_padding_1d": ("conv_transpose1d", (1, 2, 3), (2, 3, 2), dict(output_padding=1)),
    "output_padding_3d": (
        "conv_transpose3d",
        (1, 2, 2, 2, 2),
        (2, 1, 1, 1, 1),
        dict(stride=2, output_padding=(0, 0, 2)),
    ),
    "negative_output_padding": ("conv_transpose2d", (1, 2, 3, 3), (2, 3, 2, 2), dict(output_padding=-1)),
    "output_too_small": ("conv_transpose2d", (1, 2, 3, 3), (2, 3, 2, 2), dict(padding=3)),
    "output_too_small_1d": ("conv_transpose1d", (2, 1, 1), (1, 2, 1), dict(stride=2, padding=1, output_padding=1)),
    "groups_at_least": ("conv_transpose2d", (1, 2, 3, 3), (2, 3, 2, 2), dict(groups=3)),
    "groups_divisible": ("conv_transpose2d", (1, 4, 3, 3), (4, 3, 2, 2), dict(groups=3)),
    "no_output_channels": ("conv2d", (1, 4, 3, 3), (0, 4, 2, 2), {}),
    "fewer_output_channels_than_groups": ("conv2d", (1, 4, 3, 3), (1, 2, 2, 2), dict(groups=2)),
    "conv_groups_divisible": ("conv2d", (1, 4, 3, 3), (3, 2, 2, 2), dict(groups=2)),
    "transposed_channels": ("conv_transpose2d", (1, 3, 3, 3), (2, 3, 2, 2), {}),
    "transposed_rank": ("conv_transpose2d", (3, 3), (2, 3, 2, 2), {}),
    "negative_padding": ("conv_transpose2d", (1, 2, 3, 3), (2, 3, 2, 2), dict(padding=-1)),
    "zero_stride": ("conv_transpose2d", (1, 2, 3, 3), (2, 3, 2, 2), dict(stride=0)),
    "stride_length": ("conv_transpose2d", (1, 2, 3, 3), (2, 3, 2, 2), dict(stride=(1, 2, 3))),
    "empty_kernel": ("conv_transpose2d", (1, 4, 3, 3), (4, 3, 0, 2), {}),
    "conv3d_channels": ("conv3d", (1, 2, 3, 3, 3), (2, 3, 2, 2, 2), {}),
    "conv3d_unbatched_channels": ("conv3d", (1, 2, 3, 3), (2, 3, 2, 2, 2), {}),
    "conv3d_kernel_too_big": ("conv3d", (1, 1, 3, 3, 1), (1, 1, 2, 2, 2), {}),
    "conv3d_strided_same": ("conv3d", (1, 1, 3, 3, 3), (1, 1, 2, 2, 2), dict(padding="same", stride=2)),
}


@pytest.mark.parametrize("case", CONV_ERRORS)
def test_convolution_errors_match_torch(torch, case):
    name, x, w, kw = CONV_ERRORS[case]
    _same_error(torch, lambda lib, x, w: getattr(lib.nn.functional, name)(x, w, **kw), _arrays(4, x, w))


def test_transposed_bias_of_the_wrong_size_is_torchs_error(torch):
    fn = lambda lib, x, w, b: lib.nn.functional.conv_transpose2d(x, w, b)  # noqa: E731
    _same_error(torch, fn, _arrays(5, (1, 2, 3, 3), (2, 3, 2, 2), (2,)))


# --- modules -------------------------------------------------------------------------------------------------------
MODULE_CASES = {
    "Conv3d": ("Conv3d", (4, 6, (2, 3, 1)), dict(stride=(1, 2, 1), padding=1, groups=2), (2, 4, 3, 4, 3)),
    "Conv3d_no_bias": ("Conv3d", (2, 2, 2), dict(bias=False, dilation=2), (2, 5, 5, 4)),
    "ConvTranspose1d": ("ConvTranspose1d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5)),
    "ConvTranspose2d": (
        "ConvTranspose2d",
        (3, 2, (2, 3)),
        dict(stride=(2, 1), dilation=(1, 2), bias=False),
        (2, 3, 3, 2),
    ),
    "ConvTranspose3d": (
        "ConvTranspose3d",
        (2, 4, 2),
        dict(stride=2, padding=(0, 1, 0), output_padding=1),
        (1, 2, 2, 2, 3),
    ),
}

for _mode in ("reflect", "replicate", "circular"):
    MODULE_CASES[f"Conv1d_{_mode}"] = ("Conv1d", (2, 3, 3), dict(padding=2, padding_mode=_mode), (2, 2, 5))
    MODULE_CASES[f"Conv2d_{_mode}_same"] = ("Conv2d", (2, 3, (2, 3)), dict(padding="same", padding_mode=_mode),
                                             (1, 2, 4, 5))  # fmt: skip
    MODULE_CASES[f"Conv3d_{_mode}"] = ("Conv3d", (2, 2, 2), dict(padding=(1, 0, 1), stride=2, padding_mode=_mode),
                                       (1, 2, 3, 3, 4))  # fmt: skip
MODULE_CASES["Conv2d_valid"] = ("Conv2d", (2, 3, 2), dict(padding="valid", padding_mode="reflect"), (1, 2, 4, 5))
MODULE_CASES["Conv2d_zeros_same_even"] = ("Conv2d", (2, 3, (2, 4)), dict(padding="same", dilation=(1, 2)), (1, 2, 4, 5))


def _pair_of_modules(torch, name, args, kw):
    """The module in both libraries, ours holding torch's float64 weights."""
    theirs = getattr(torch.nn, name)(*args, **kw).double()
    ours = getattr(nn, name)(*args, **kw, dtype=numbagrad.float64)
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("case", MODULE_CASES)
def test_module_forward_and_gradients_match_torch(torch, case):
    name, args, kw, shape = MODULE_CASES[case]
    ours, theirs = _pair_of_modules(torch, name, args, kw)
    assert repr(ours) == repr(theirs)
    (x,) = _arrays(6, shape)
    ya, yb = ours(numbagrad.tensor(x, requires_grad=True)), theirs(torch.tensor(x, requires_grad=True))
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-10, atol=1e-12)
    (g,) = _arrays(7, tuple(yb.shape))
    ya.backward(numbagrad.tensor(g))
    yb.backward(torch.tensor(g))
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


@pytest.mark.parametrize("name", ["Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"])
def test_module_parameters_have_torchs_names_shapes_and_init_bounds(torch, name):
    ours, theirs = getattr(nn, name)(4, 6, 3, groups=2), getattr(torch.nn, name)(4, 6, 3, groups=2)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()
    }
    fan_in = ours.weight.shape[1] * ours.weight[0, 0].numel()
    assert float(ours.bias.abs().max()) <= 1 / np.sqrt(fan_in)
    assert float(ours.weight.abs().max()) <= 1 / np.sqrt(fan_in)


@pytest.mark.parametrize("output_size", [[7, 5], [1, 3, 6, 5], [6, 4]])
def test_conv_transpose_output_size_picks_the_output_padding(torch, output_size):
    ours, theirs = _pair_of_modules(torch, "ConvTranspose2d", (3, 2, 2), dict(stride=(2, 2), padding=(0, 1)))
    (x,) = _arrays(8, (1, 3, 3, 3))
    ya, yb = ours(numbagrad.tensor(x), output_size=output_size), theirs(torch.tensor(x), output_size=output_size)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("output_size", [[9, 5], [7], [1, 1, 3, 7, 5]])
def test_conv_transpose_bad_output_size_is_torchs_error(torch, output_size):
    ours, theirs = _pair_of_modules(torch, "ConvTranspose2d", (3, 2, 2), dict(stride=2, padding=(0, 1)))
    (x,) = _arrays(8, (1, 3, 3, 3))
    with pytest.raises(ValueError) as expected:
        theirs(torch.tensor(x), output_size=output_size)
    with pytest.raises(ValueError) as got:
        ours(numbagrad.tensor(x), output_size=output_size)
    assert str(got.value) == str(expected.value).replace("torch.Size", "numbagrad.Size")


def test_conv_transpose_modules_refuse_other_padding_modes(torch):
    with pytest.raises(ValueError) as expected:
        torch.nn.ConvTranspose2d(1, 1, 2, padding_mode="reflect")
    with pytest.raises(ValueError, match="^" + str(expected.value) + "$"):
        nn.ConvTranspose2d(1, 1, 2, padding_mode="reflect")


def test_modules_load_from_torchs_module_paths():
    from numbagrad.nn.modules.conv import Conv3d, ConvTranspose2d
    from numbagrad.nn.modules.padding import ReflectionPad2d, ZeroPad1d

    assert (Conv3d, ConvTranspose2d, ReflectionPad2d, ZeroPad1d) == (
        nn.Conv3d,
        nn.ConvTranspose2d,
        nn.ReflectionPad2d,
        nn.ZeroPad1d,
    )


# --- F.pad's copying modes and the padding modules ---------------------------------------------------------------
PAD_CASES = [
    ((2, 3, 5), (2, 1)),
    ((2, 3, 4), (-1, 2)),
    ((1, 3, 3, 3), (2, 2, -1, 2, 0, 0)),
    ((3, 5), (1, 3)),
    ((1, 2, 4, 5), (1, 2, 3, 0)),
    ((2, 4, 5), (-1, 2, 1, -2)),
    ((1, 2, 3, 4, 5), (1, 2, 0, 1, 2, 2)),
    ((2, 3, 4, 5), (1, 1, 2, 1, 0, 1)),
]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pads", PAD_CASES, ids=str)
def test_pad_modes_match_torch(torch, mode, shape, pads):
    _same_as_torch(torch, lambda lib, x: lib.nn.functional.pad(x, pads, mode=mode), _arrays(9, shape))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "shape,pads", [((1, 4), (2, 1)), ((1, 3, 3), (1, 2, 2, 0)), ((1, 2, 2, 3), (1, 1, 0, 1, 1, 0))]
)
def test_pad_modes_gradcheck_and_gradgradcheck(mode, shape, pads):
    (x,) = _arrays(10, shape)
    x = numbagrad.tensor(x, requires_grad=True)
    assert gradcheck(lambda t: NF.pad(t, pads, mode=mode), (x,))
    assert gradgradcheck(lambda t: NF.pad(t, pads, mode=mode) ** 2, (x,))


PAD_ERRORS = [
    ((1, 2, 3, 3), (3, 0, 0, 0), "reflect"),
    ((1, 2, 3, 3), (0, 0, 3, 0), "reflect"),
    ((1, 2, 3, 3), (3, 0), "reflect"),
    ((3,), (1, 1), "replicate"),
    ((1, 2, 3, 3), (1, 1, 1, 1, 1, 1, 1, 1), "replicate"),
    ((1, 2, 3, 3), (4, 0, 0, 0), "circular"),
    ((1, 2, 3, 3), (-4, 0, 0, 0), "replicate"),
    ((2, 0, 3), (1, 1), "reflect"),
    ((2, 3), (1, 1), "wrap"),
    ((2, 3), (1,), "reflect"),
    ((1, 2, 2), (-1, -1), "reflect"),
    ((1, 2, 2), (-1, -1), "replicate"),
    ((1, 3, 3), (-2, -1, -2, -1), "replicate"),
    ((2, 2, 3), (-4, 0), "circular"),
    ((2, 2, 3), (0, 0, -3, 0), "circular"),
    ((2, 2, 2, 2), (-1, -2, 1, 3, 2, 1), "replicate"),
    ((4, 1), (-2, 1), "reflect"),
    ((1, 1, 2), (0, -2, -2, 0), "constant"),
]


@pytest.mark.parametrize("shape,pads,mode", PAD_ERRORS, ids=str)
def test_pad_errors_match_torch(torch, shape, pads, mode):
    _same_error(torch, lambda lib, x: lib.nn.functional.pad(x, pads, mode=mode), _arrays(11, shape))


def test_pad_modes_refuse_a_fill_value(torch):
    _same_error(torch, lambda lib, x: lib.nn.functional.pad(x, (1, 1), mode="reflect", value=1.0), _arrays(12, (2, 3)))


PAD_MODULES = [
    ("ZeroPad1d", (2,), (2, 3)),
    ("ZeroPad2d", ((1, 0, 2, 1),), (1, 2, 3)),
    ("ZeroPad3d", (1,), (1, 2, 2, 2)),
    ("ConstantPad1d", ((1, 2), 3.5), (2, 3, 2)),
    ("ConstantPad2d", (1, -1.0), (2, 2)),
    ("ConstantPad3d", ((1, 0, 0, 1, 1, 0), 2.0), (1, 2, 2, 2)),
    ("ReflectionPad1d", (2,), (2, 3)),
    ("ReflectionPad2d", ((1, 0, 2, 1),), (1, 3, 3)),
    ("ReflectionPad3d", (1,), (1, 1, 2, 2, 3)),
    ("ReplicationPad1d", ((0, 3),), (2, 2, 3)),
    ("ReplicationPad2d", (2,), (1, 2, 2)),
    ("ReplicationPad3d", ((1, 0, 0, 1, 2, 0),), (1, 2, 2, 2)),
    ("CircularPad1d", (2,), (2, 3)),
    ("CircularPad2d", ((1, 0, 2, 1),), (1, 1, 3, 3)),
    ("CircularPad3d", (1,), (1, 2, 2, 2)),
]


@pytest.mark.parametrize("name,args,shape", PAD_MODULES, ids=[p[0] for p in PAD_MODULES])
def test_padding_modules_match_torch(torch, name, args, shape):
    assert repr(getattr(nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))
    _same_as_torch(torch, lambda lib, x: getattr(lib.nn, name)(*args)(x), _arrays(13, shape))


@pytest.mark.parametrize("name", ["CircularPad1d", "CircularPad2d", "CircularPad3d"])
def test_circular_pad_modules_check_the_rank_like_torch(torch, name):
    _same_error(torch, lambda lib, x: getattr(lib.nn, name)(1)(x), _arrays(14, (2,)))


# --- whole programs --------------------------------------------------------------------------------------------------
def _dcgan_generator(nn):
    return nn.Sequential(
        nn.ConvTranspose2d(4, 6, 4, 1, 0, bias=False), nn.BatchNorm2d(6), nn.ReLU(),
        nn.ConvTranspose2d(6, 3, 4, 2, 1, bias=False), nn.BatchNorm2d(3), nn.ReLU(),
        nn.ConvTranspose2d(3, 1, 4, 2, 1, bias=False), nn.Tanh(),
    )  # fmt: skip


def _unet_block(nn):
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect"), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 4, 3, padding="same", padding_mode="replicate"), nn.Upsample(scale_factor=2, mode="bilinear"),
        nn.ReflectionPad2d(1), nn.Conv2d(4, 8, 3), nn.PixelShuffle(2), nn.InstanceNorm2d(2, affine=True),
    )  # fmt: skip


def _video_net(nn):
    return nn.Sequential(
        nn.Conv3d(1, 2, 3, padding=1, padding_mode="circular"), nn.MaxPool3d(2), nn.ConvTranspose3d(2, 2, 2, 2),
        nn.AvgPool3d(2), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
    )  # fmt: skip


@pytest.mark.parametrize(
    "build,shape",
    [(_dcgan_generator, (2, 4, 1, 1)), (_unet_block, (2, 2, 8, 8)), (_video_net, (1, 1, 4, 4, 4))],
    ids=["dcgan_generator", "unet_block", "video_net"],
)
def test_small_programs_train_step_for_step_like_torch(torch, build, shape):
    """Two SGD steps of small DCGAN, U-Net and 3-d networks from torch's weights: same outputs, same weights."""
    theirs = build(torch.nn).double()
    ours = build(nn).to(numbagrad.float64)
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    opt_a = numbagrad.optim.SGD(ours.parameters(), lr=0.05)
    opt_b = torch.optim.SGD(theirs.parameters(), lr=0.05)
    (x,) = _arrays(20, shape)
    for _ in range(2):
        ya, yb = ours(numbagrad.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-8, atol=1e-10)
        for opt, y in ((opt_a, ya), (opt_b, yb)):
            opt.zero_grad()
            (y**2).mean().backward()
            opt.step()
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-8, atol=1e-10, err_msg=n)


@pytest.mark.parametrize("name", ["Conv1d", "Conv2d", "Conv3d"])
def test_convolutions_take_no_output_padding_like_torch(torch, name):
    with pytest.raises(TypeError):
        getattr(torch.nn, name)(1, 1, 1, output_padding=1)
    with pytest.raises(TypeError):
        getattr(nn, name)(1, 1, 1, output_padding=1)
