"""Pixel and channel shuffles, ``fold``/``unfold`` and instance normalization against torch (values, input and
parameter gradients, node names, running statistics), with gradcheck in float64 and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF
from torch_oracle import raises_like


def _arrays(seed: int, *shapes) -> list:
    rng = np.random.default_rng(seed)
    return [None if s is None else rng.standard_normal(s) for s in shapes]


def _run(lib, fn, arrays):
    ts = [None if a is None else lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *ts)
    out.backward(lib.tensor(np.random.default_rng(99).standard_normal(tuple(out.shape))))
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
    """``fn``, given each library's tensors of ``arrays``, raises the same exception type and message in both (a
    shape shown as each library's ``Size``)."""
    raises_like(torch, lambda lib: fn(lib, *[lib.tensor(a) for a in arrays]),
                normalize=lambda message: message.replace("torch.Size", "numbagrad.Size"))  # fmt: skip


# --- shuffles ----------------------------------------------------------------------------------------------------
SHUFFLES = [
    ("pixel_shuffle", (2, 8, 2, 3), 2),
    ("pixel_shuffle", (1, 2, 9, 2, 1), 3),
    ("pixel_shuffle", (4, 1, 2), 1),
    ("pixel_unshuffle", (2, 2, 4, 6), 2),
    ("pixel_unshuffle", (3, 3, 6), 3),
    ("channel_shuffle", (2, 6, 2), 3),
    ("channel_shuffle", (2, 6, 2, 2), 2),
    ("channel_shuffle", (1, 4, 1, 2, 1), 4),
]


@pytest.mark.parametrize("name,shape,factor", SHUFFLES, ids=str)
def test_shuffles_match_torch(torch, name, shape, factor):
    _same_as_torch(torch, lambda lib, x: getattr(lib.nn.functional, name)(x, factor), _arrays(0, shape))


@pytest.mark.parametrize("name,shape,factor", SHUFFLES[::2], ids=str)
def test_shuffles_gradcheck_and_gradgradcheck(name, shape, factor):
    x = numbagrad.tensor(*_arrays(1, shape), requires_grad=True)
    fn = lambda t: getattr(NF, name)(t, factor)  # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(lambda t: fn(t) ** 2, (x,))


def test_pixel_unshuffle_undoes_pixel_shuffle():
    x = numbagrad.tensor(*_arrays(2, (2, 18, 2, 3)))
    assert numbagrad.equal(NF.pixel_unshuffle(NF.pixel_shuffle(x, 3), 3), x)


SHUFFLE_ERRORS = [
    ("pixel_shuffle", (3, 4), 2),
    ("pixel_shuffle", (1, 5, 2, 2), 2),
    ("pixel_shuffle", (1, 4, 2, 2), 0),
    ("pixel_unshuffle", (1, 4, 3, 2), 2),
    ("pixel_unshuffle", (1, 4, 4, 3), 2),
    ("pixel_unshuffle", (4, 2), 2),
    ("pixel_unshuffle", (1, 4, 4, 4), 0),
    ("channel_shuffle", (1, 4, 2, 2), 3),
    ("channel_shuffle", (1, 4), 2),
    ("channel_shuffle", (1, 4, 2, 2), 0),
]


@pytest.mark.parametrize("name,shape,factor", SHUFFLE_ERRORS, ids=str)
def test_shuffle_errors_match_torch(torch, name, shape, factor):
    _same_error(torch, lambda lib, x: getattr(lib.nn.functional, name)(x, factor), _arrays(3, shape))


@pytest.mark.parametrize(
    "name,arg,shape",
    [("PixelShuffle", 2, (1, 8, 2, 2)), ("PixelUnshuffle", 2, (1, 2, 4, 4)), ("ChannelShuffle", 2, (1, 4, 3))],
)
def test_shuffle_modules_match_torch(torch, name, arg, shape):
    assert repr(getattr(nn, name)(arg)) == repr(getattr(torch.nn, name)(arg))
    _same_as_torch(torch, lambda lib, x: getattr(lib.nn, name)(arg)(x), _arrays(4, shape))


# --- fold and unfold ---------------------------------------------------------------------------------------------
UNFOLDS = [
    ((2, 3, 4, 5), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))),
    ((3, 4, 5), dict(kernel_size=2)),
    ((1, 2, 5, 5), dict(kernel_size=3, stride=2, padding=(0, 1))),
]
FOLDS = [
    ((2, 12, 6), dict(output_size=(3, 4), kernel_size=2)),
    ((12, 6), dict(output_size=(4, 3), kernel_size=2, padding=1, stride=2)),
    ((1, 8, 4), dict(output_size=5, kernel_size=(2, 2), dilation=(2, 3), stride=(2, 1))),
]


@pytest.mark.parametrize("shape,kw", UNFOLDS, ids=str)
def test_unfold_matches_torch(torch, shape, kw):
    _same_as_torch(torch, lambda lib, x: lib.nn.functional.unfold(x, **kw), _arrays(5, shape))


@pytest.mark.parametrize("shape,kw", FOLDS, ids=str)
def test_fold_matches_torch(torch, shape, kw):
    _same_as_torch(torch, lambda lib, x: lib.nn.functional.fold(x, **kw), _arrays(6, shape))


@pytest.mark.parametrize("name,shape,kw", [("unfold", *UNFOLDS[0]), ("fold", *FOLDS[2])], ids=["unfold", "fold"])
def test_fold_and_unfold_gradcheck_and_gradgradcheck(name, shape, kw):
    x = numbagrad.tensor(*_arrays(7, shape), requires_grad=True)
    fn = lambda t: getattr(NF, name)(t, **kw)  # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(lambda t: fn(t) ** 2, (x,))


BLOCK_ERRORS = [
    ("unfold", (1, 2, 3, 4, 5), dict(kernel_size=2)),
    ("unfold", (1, 1, 2, 2), dict(kernel_size=3)),
    ("unfold", (1, 1, 3, 3), dict(kernel_size=(2, 2, 2))),
    ("unfold", (1, 1, 3, 3), dict(kernel_size=2, dilation=0)),
    ("unfold", (1, 1, 3, 3), dict(kernel_size=2, padding=-1)),
    ("unfold", (1, 1, 3, 3), dict(kernel_size=2, stride=0)),
    ("fold", (1, 4, 3), dict(output_size=(3, 3), kernel_size=2)),
    ("fold", (1, 5, 4), dict(output_size=(3, 3), kernel_size=2)),
    ("fold", (1, 2, 4, 4), dict(output_size=(3, 3), kernel_size=2)),
]


@pytest.mark.parametrize("name,shape,kw", BLOCK_ERRORS, ids=str)
def test_fold_and_unfold_errors_match_torch(torch, name, shape, kw):
    _same_error(torch, lambda lib, x: getattr(lib.nn.functional, name)(x, **kw), _arrays(8, shape))


def test_fold_and_unfold_modules_match_torch(torch):
    args = dict(kernel_size=2, dilation=1, padding=1, stride=2)
    assert repr(nn.Unfold(**args)) == repr(torch.nn.Unfold(**args))
    assert repr(nn.Fold((4, 5), **args)) == repr(torch.nn.Fold((4, 5), **args))
    _same_as_torch(
        torch, lambda lib, x: lib.nn.Fold((4, 5), **args)(lib.nn.Unfold(**args)(x)), _arrays(9, (2, 3, 4, 5))
    )


# --- instance normalization --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5), (1, 2, 2, 3, 2)])
@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_matches_torch(torch, shape, affine):
    c = shape[1]
    arrays = _arrays(10, shape, c if affine else None, c if affine else None)
    _same_as_torch(torch, lambda lib, x, w, b: lib.nn.functional.instance_norm(x, weight=w, bias=b, eps=1e-3), arrays)


def test_instance_norm_gradcheck():
    x, w, b = (numbagrad.tensor(a, requires_grad=True) for a in _arrays(11, (2, 2, 3), 2, 2))
    assert gradcheck(lambda *t: NF.instance_norm(t[0], weight=t[1], bias=t[2]), (x, w, b))


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_running_statistics_match_torch(torch, use_input_stats):
    x, mean, var = _arrays(12, (3, 2, 5), 2, 2)
    var = np.abs(var) + 0.5
    stats = {}
    for lib in (numbagrad, torch):
        m, v = lib.tensor(mean), lib.tensor(var)
        out = lib.nn.functional.instance_norm(lib.tensor(x), m, v, use_input_stats=use_input_stats, momentum=0.3)
        stats[lib.__name__] = (out.numpy(), m.numpy(), v.numpy())
    for a, b in zip(stats["numbagrad"], stats["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


INSTANCE_MODULES = [
    ("InstanceNorm1d", (3,), {}, (2, 3, 4)),
    ("InstanceNorm1d", (3,), {"affine": True}, (3, 5)),
    ("InstanceNorm2d", (2,), {"affine": True, "track_running_stats": True, "momentum": None}, (2, 2, 3, 3)),
    ("InstanceNorm3d", (2,), {"track_running_stats": True, "eps": 1e-3}, (2, 2, 2, 3, 2)),
    ("InstanceNorm2d", (2,), {"affine": True, "bias": False}, (2, 3, 3)),
]


@pytest.mark.parametrize("name,args,kw,shape", INSTANCE_MODULES, ids=str)
def test_instance_norm_modules_match_torch_in_training_and_eval(torch, name, args, kw, shape):
    theirs = getattr(torch.nn, name)(*args, **kw).double()
    ours = getattr(nn, name)(*args, **kw, dtype=numbagrad.float64)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    (x,) = _arrays(13, shape)
    for training in (True, True, False):
        ours.train(training)
        theirs.train(training)
        ya, yb = ours(numbagrad.tensor(x, requires_grad=True)), theirs(torch.tensor(x, requires_grad=True))
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-10, atol=1e-12)
        for key, value in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-10, err_msg=key)
    ya.sum().backward()
    yb.sum().backward()
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


def test_instance_norm_errors_and_warnings_match_torch(torch):
    _same_error(torch, lambda lib, x: lib.nn.functional.instance_norm(x), _arrays(14, (2, 3, 1)))
    _same_error(torch, lambda lib, x: lib.nn.functional.instance_norm(x, use_input_stats=False), _arrays(14, (2, 3, 2)))
    _same_error(torch, lambda lib, x: lib.nn.InstanceNorm2d(3)(x), _arrays(14, (2, 3, 2, 2, 2)))
    _same_error(torch, lambda lib, x: lib.nn.InstanceNorm1d(4, affine=True)(x), _arrays(14, (2, 3, 2)))
    (x,) = _arrays(15, (2, 3, 2))
    with pytest.warns(UserWarning) as ours:
        nn.InstanceNorm1d(4)(numbagrad.tensor(x))
    with pytest.warns(UserWarning) as theirs:
        torch.nn.InstanceNorm1d(4)(torch.tensor(x))
    assert str(ours[0].message) == str(theirs[0].message)


def test_modules_load_from_torchs_module_paths():
    from numbagrad.nn.modules.channelshuffle import ChannelShuffle
    from numbagrad.nn.modules.fold import Fold, Unfold
    from numbagrad.nn.modules.instancenorm import InstanceNorm2d
    from numbagrad.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle

    assert (ChannelShuffle, Fold, Unfold, InstanceNorm2d, PixelShuffle, PixelUnshuffle) == (
        nn.ChannelShuffle,
        nn.Fold,
        nn.Unfold,
        nn.InstanceNorm2d,
        nn.PixelShuffle,
        nn.PixelUnshuffle,
    )
