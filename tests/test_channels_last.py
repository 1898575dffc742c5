"""``memory_format=channels_last`` (and ``channels_last_3d``) with real NHWC strides, against torch: conversions
(``to``, ``contiguous``, ``clone``, ``Module.to``), ``is_contiguous``, ``preserve_format`` in ``clone`` and the
``*_like`` creators, and the strides and values of conv2d, batch_norm, relu, max/avg pooling and add on
channels-last inputs (their gradients too)."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad


def _pair(torch, shape=(2, 3, 4, 5), seed: int = 0):
    x = np.random.default_rng(seed).standard_normal(shape)
    return numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _fmt(lib, name):
    return getattr(lib, name)


CONVERSIONS = [
    ("to", lambda lib, t: t.to(memory_format=lib.channels_last)),
    ("contiguous", lambda lib, t: t.contiguous(memory_format=lib.channels_last)),
    ("clone", lambda lib, t: t.clone(memory_format=lib.channels_last)),
    ("back", lambda lib, t: t.to(memory_format=lib.channels_last).contiguous()),
    ("back_to", lambda lib, t: t.to(memory_format=lib.channels_last).to(memory_format=lib.contiguous_format)),
    ("3d", lambda lib, t: t.reshape(2, 3, 2, 2, 5).to(memory_format=lib.channels_last_3d)),
    ("size1", lambda lib, t: t[:1, :, :1, :1].contiguous(memory_format=lib.channels_last)),
    ("to_dtype_keeps", lambda lib, t: t.to(memory_format=lib.channels_last).to(lib.float32)),
    ("to_copy_keeps", lambda lib, t: t.transpose(0, 2).to(lib.float64, copy=True)),
    ("to_sliced", lambda lib, t: t[:, :, ::2].to(lib.float32)),
]


@pytest.mark.parametrize("name,fn", CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
def test_conversions_give_torchs_strides_values_and_node(torch, name, fn):
    ours, theirs = _pair(torch)
    a, b = fn(numbagrad, ours), fn(torch, theirs)
    assert a.stride() == b.stride()
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_converting_a_tensor_already_in_the_format_returns_it(torch):
    x = numbagrad.randn(2, 3, 4, 5).to(memory_format=numbagrad.channels_last)
    assert x.contiguous(memory_format=numbagrad.channels_last) is x
    assert x.to(memory_format=numbagrad.channels_last) is x


@pytest.mark.parametrize(
    "shape,perm", [((2, 3, 4, 5), None), ((2, 3, 4, 5), (0, 2, 3, 1)), ((1, 3, 1, 1), None), ((2, 3, 4), None),
                   ((2, 1, 4, 5), (0, 2, 3, 1)), ((2, 3, 2, 4, 5), (0, 2, 3, 4, 1))],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("fmt", ["contiguous_format", "channels_last", "channels_last_3d", "preserve_format"])
def test_is_contiguous_per_format_matches_torch(torch, shape, perm, fmt):
    x = np.zeros(shape)
    if perm is not None:  # a channels-last buffer seen as (N, C, ...)
        x = np.moveaxis(np.zeros([shape[i] for i in perm]), -1, 1)
    ours = numbagrad.tensor(x) if perm is None else numbagrad.zeros([shape[i] for i in perm]).movedim(-1, 1)
    theirs = torch.tensor(x) if perm is None else torch.zeros([shape[i] for i in perm]).movedim(-1, 1)
    assert ours.is_contiguous(memory_format=_fmt(numbagrad, fmt)) == theirs.is_contiguous(
        memory_format=_fmt(torch, fmt)
    )


@pytest.mark.parametrize(
    "source",
    [
        lambda lib, t: t.to(memory_format=lib.channels_last),
        lambda lib, t: t.transpose(0, 1),
        lambda lib, t: t.to(memory_format=lib.channels_last)[:, :, ::2],
        lambda lib, t: t[:, :, ::2],
        lambda lib, t: t,
    ],
    ids=["channels_last", "transposed", "channels_last_sliced", "sliced", "contiguous"],
)
@pytest.mark.parametrize(
    "make",
    [
        lambda lib, t: t.clone(),
        lambda lib, t: lib.empty_like(t),
        lambda lib, t: lib.zeros_like(t),
        lambda lib, t: lib.ones_like(t),
        lambda lib, t: lib.full_like(t, 2.0),
        lambda lib, t: lib.randn_like(t),
        lambda lib, t: lib.rand_like(t),
        lambda lib, t: lib.zeros_like(t, memory_format=lib.contiguous_format),
        lambda lib, t: lib.ones_like(t, memory_format=lib.channels_last),
    ],
    ids=["clone", "empty_like", "zeros_like", "ones_like", "full_like", "randn_like", "rand_like", "contiguous",
         "as_channels_last"],
)  # fmt: skip
def test_preserve_format_keeps_strides_as_torch(torch, source, make):
    ours, theirs = _pair(torch)
    a, b = make(numbagrad, source(numbagrad, ours.detach())), make(torch, source(torch, theirs.detach()))
    assert a.stride() == b.stride() and tuple(a.shape) == tuple(b.shape)


OPS = [
    ("relu", lambda lib, x, m: x.relu()),
    ("add_scalar", lambda lib, x, m: x + 1.5),
    ("add_same", lambda lib, x, m: x + x * 2),
    ("add_contiguous", lambda lib, x, m: x + m["other"]),
    ("contiguous_add", lambda lib, x, m: m["other"] + x),
    ("conv2d", lambda lib, x, m: m["conv"](x)),
    ("batch_norm", lambda lib, x, m: m["bn"](x)),
    ("batch_norm_eval", lambda lib, x, m: m["bn"].eval()(x)),
    ("max_pool2d", lambda lib, x, m: lib.nn.functional.max_pool2d(x, 2, return_indices=True)),
    ("avg_pool2d", lambda lib, x, m: lib.nn.functional.avg_pool2d(x, 2)),
]


def _modules(lib, seed: int = 1):
    rng = np.random.default_rng(seed)
    conv = lib.nn.Conv2d(3, 4, 3, padding=1, dtype=lib.float64)
    bn = lib.nn.BatchNorm2d(3, dtype=lib.float64)
    with lib.no_grad():
        conv.weight.copy_(lib.tensor(rng.standard_normal((4, 3, 3, 3))))
        conv.bias.copy_(lib.tensor(rng.standard_normal(4)))
        bn.weight.copy_(lib.tensor(rng.standard_normal(3)))
    return {"conv": conv, "bn": bn, "other": lib.tensor(rng.standard_normal((2, 3, 4, 5)))}


@pytest.mark.parametrize("name,fn", OPS, ids=[o[0] for o in OPS])
def test_ops_on_channels_last_inputs_match_torchs_strides_and_values(torch, name, fn):
    ours, theirs = _pair(torch, seed=3)
    results = []
    for lib, x in ((numbagrad, ours), (torch, theirs)):
        out = fn(lib, x.to(memory_format=lib.channels_last), _modules(lib))
        values, indices = out if isinstance(out, tuple) else (out, None)
        (values * values).sum().backward()
        results.append((values, indices, x.grad.numpy()))
    (a, ai, ag), (b, bi, bg) = results
    assert a.stride() == b.stride()
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ag, bg, rtol=1e-10, atol=1e-12)
    if bi is not None:
        assert ai.stride() == bi.stride()
        np.testing.assert_array_equal(ai.numpy(), bi.numpy())


def test_conv2d_with_a_channels_last_weight_writes_channels_last_like_torch(torch):
    ours, theirs = _pair(torch, seed=4)
    a = _modules(numbagrad)["conv"].to(memory_format=numbagrad.channels_last)
    b = _modules(torch)["conv"].to(memory_format=torch.channels_last)
    assert a.weight.stride() == b.weight.stride() and a.bias.stride() == b.bias.stride()
    assert a(ours).stride() == b(theirs).stride()
    np.testing.assert_allclose(a(ours).detach().numpy(), b(theirs).detach().numpy(), rtol=1e-10)


def test_memory_format_errors_match_torch(torch):
    for call in (
        lambda lib: lib.zeros(2, 3, 4).contiguous(memory_format=lib.channels_last),
        lambda lib: lib.zeros(2, 3, 4).to(memory_format=lib.channels_last),
        lambda lib: lib.zeros(2, 3, 4, 5).to(memory_format=lib.channels_last_3d),
        lambda lib: lib.zeros(2, 3, 4, 5).transpose(1, 2).contiguous(memory_format=lib.preserve_format),
    ):
        with pytest.raises(RuntimeError) as theirs:
            call(torch)
        with pytest.raises(RuntimeError) as ours:
            call(numbagrad)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.randn(2, 3, 4, 5).to(memory_format=lib.channels_last).requires_grad_(),
        lambda lib: lib.randn(3, 4).t().requires_grad_(),
        lambda lib: lib.randn(2, 3, 4, 5).requires_grad_(),
    ],
    ids=["channels_last", "transposed", "contiguous"],
)
def test_a_leafs_gradient_takes_the_leafs_layout_like_torch(torch, make):
    strides = []
    for lib in (numbagrad, torch):
        leaf = make(lib)
        (leaf.relu() * 3).sum().backward()
        strides.append(leaf.grad.stride())
    assert strides[0] == strides[1]


def test_a_channels_last_conv_weight_gets_a_channels_last_gradient_and_trains_like_torch(torch):
    x = np.random.default_rng(8).standard_normal((2, 3, 6, 6))
    results = []
    for lib in (numbagrad, torch):
        conv = _modules(lib)["conv"].to(memory_format=lib.channels_last)
        opt = lib.optim.SGD(conv.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            opt.zero_grad()
            conv(lib.tensor(x)).square().sum().backward()
            opt.step()
        results.append((conv.weight.grad.stride(), conv.weight.stride(), conv.weight.detach().numpy()))
    assert results[0][:2] == results[1][:2]
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-10)
