"""LP pooling, max unpooling and torch's *_with_indices / upsample_* spellings against torch: values, gradients,
reprs and errors."""

import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad import nn

LP = [
    ("LPPool1d", (2.0, 3), (2, 3, 8)),
    ("LPPool1d", (1.5, 2, 1, True), (2, 3, 7)),
    ("LPPool2d", (2.0, 2), (2, 3, 6, 6)),
    ("LPPool2d", (3, (2, 3), (1, 2)), (1, 2, 5, 7)),
    ("LPPool3d", (2.0, 2), (1, 2, 4, 4, 4)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, args, shape", LP, ids=[f"{n}{a}" for n, a, _ in LP])
def test_lp_pool_matches_torch(name, args, shape, torch):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    x = np.random.default_rng(0).uniform(0.1, 2.0, shape)
    xo, xt = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_ours, out_theirs = ours(xo), theirs(xt)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-12)
    out_ours.sum().backward()
    out_theirs.sum().backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-10)


UNPOOL = [(1, (2, 3, 8), 2, {}), (2, (2, 3, 6, 6), 2, {}), (2, (1, 2, 7, 5), 3, {"stride": 2, "padding": 1}),
          (3, (1, 2, 4, 4, 4), 2, {})]  # fmt: skip


@pytest.mark.torch
@pytest.mark.parametrize("dims, shape, kernel, kw", UNPOOL)
def test_max_unpool_inverts_max_pool_as_torch(dims, shape, kernel, kw, torch):
    x = np.random.default_rng(1).standard_normal(shape)
    results = []
    for lib in (numbagrad, torch):
        pool = getattr(lib.nn, f"MaxPool{dims}d")(kernel, return_indices=True, **kw)
        unpool = getattr(lib.nn, f"MaxUnpool{dims}d")(kernel, **kw)
        t = lib.tensor(x, requires_grad=True)
        pooled, indices = pool(t)
        out = unpool(pooled, indices, output_size=t.shape)
        (out * lib.tensor(np.arange(out.numel()).reshape(tuple(out.shape)) % 5)).sum().backward()
        results.append((out.detach().numpy(), t.grad.numpy(), repr(unpool)))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][2] == results[1][2]


@pytest.mark.torch
def test_unpool_output_size_errors_match_torch(torch):
    for call in (
        lambda m: m.nn.functional.max_unpool2d(m.ones(1, 1, 2, 2), m.zeros(1, 1, 2, 2, dtype=m.int64), 2,
                                               output_size=(9, 9)),
        lambda m: m.nn.functional.max_unpool2d(m.ones(1, 1, 2, 2), m.zeros(1, 1, 2, 2, dtype=m.int64), 2,
                                               output_size=(1, 4, 4, 4, 4)),
    ):  # fmt: skip
        with pytest.raises(ValueError) as theirs:
            call(torch)
        with pytest.raises(ValueError) as ours:
            call(numbagrad)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.torch
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_pool_with_indices_is_max_pool_returning_indices(dims, torch):
    x = np.random.default_rng(2).standard_normal((1, 2) + (6,) * dims)
    ours = getattr(nn.functional, f"max_pool{dims}d_with_indices")(numbagrad.tensor(x), 2)
    theirs = getattr(torch.nn.functional, f"max_pool{dims}d_with_indices")(torch.tensor(x), 2)
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    if dims < 3:
        a = getattr(nn.functional, f"adaptive_max_pool{dims}d_with_indices")(numbagrad.tensor(x), 3)
        b = getattr(torch.nn.functional, f"adaptive_max_pool{dims}d_with_indices")(torch.tensor(x), 3)
        np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())


@pytest.mark.torch
@pytest.mark.parametrize("name", ["upsample_nearest", "upsample_bilinear"])
def test_deprecated_upsample_spellings_warn_and_match_torch(name, torch):
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 4))
    with warnings.catch_warnings(record=True) as theirs_w:
        warnings.simplefilter("always")
        theirs = getattr(torch.nn.functional, name)(torch.tensor(x), scale_factor=2)
    with warnings.catch_warnings(record=True) as ours_w:
        warnings.simplefilter("always")
        ours = getattr(nn.functional, name)(numbagrad.tensor(x), scale_factor=2)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    assert [str(w.message) for w in ours_w] == [str(w.message) for w in theirs_w]
