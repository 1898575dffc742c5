"""The ``torch.*`` forms of the nn ops take torch's native signatures (weights before running statistics, the
weight first in ``embedding``, reductions as ints, ``stride=()``) and give torch's values and gradients."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad

RNG = np.random.default_rng(0)


def _pair(torch, *shape, integer_high=None):
    """The same random data as a numbagrad and a torch tensor (float64 requiring grad, or int64 below
    ``integer_high``)."""
    if integer_high is not None:
        data = RNG.integers(0, integer_high, shape)
        return numbagrad.tensor(data), torch.tensor(data)
    data = RNG.standard_normal(shape)
    return numbagrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)


def _same(ours, theirs, ours_in=(), theirs_in=()):
    """Values agree, and so do the gradients of the listed inputs after summing every float output."""
    ours_out = ours if isinstance(ours, (tuple, list)) else (ours,)
    theirs_out = theirs if isinstance(theirs, (tuple, list)) else (theirs,)
    assert len(ours_out) == len(theirs_out)
    for a, b in zip(ours_out, theirs_out):
        assert tuple(a.shape) == tuple(b.shape)
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7, atol=1e-9)
    if ours_in:
        sum(a.sum() for a in ours_out if a.requires_grad).backward()
        sum(b.sum() for b in theirs_out if b.requires_grad).backward()
        for x, y in zip(ours_in, theirs_in):
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.torch
def test_batch_norm_takes_weights_before_running_statistics(torch):
    x, tx = _pair(torch, 4, 3, 2)
    w, tw = _pair(torch, 3)
    b, tb = _pair(torch, 3)
    rm, trm = numbagrad.zeros(3, dtype=numbagrad.float64), torch.zeros(3, dtype=torch.float64)
    rv, trv = numbagrad.ones(3, dtype=numbagrad.float64), torch.ones(3, dtype=torch.float64)
    ours = numbagrad.batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5, False)
    theirs = torch.batch_norm(tx, tw, tb, trm, trv, True, 0.1, 1e-5, False)
    _same(ours, theirs, (x, w, b), (tx, tw, tb))
    np.testing.assert_allclose(rm.numpy(), trm.numpy())
    np.testing.assert_allclose(rv.numpy(), trv.numpy())


@pytest.mark.torch
def test_instance_layer_group_and_rms_norm(torch):
    x, tx = _pair(torch, 2, 4, 3)
    w, tw = _pair(torch, 4)
    _same(numbagrad.instance_norm(x, w, None, None, None, True, 0.1, 1e-5, False),
          torch.instance_norm(tx, tw, None, None, None, True, 0.1, 1e-5, False), (x, w), (tx, tw))  # fmt: skip
    _same(numbagrad.layer_norm(x, [3]), torch.layer_norm(tx, [3]))
    _same(numbagrad.group_norm(x, 2, w), torch.group_norm(tx, 2, tw))
    _same(numbagrad.rms_norm(x, [3]), torch.rms_norm(tx, [3]))


@pytest.mark.torch
def test_native_norms_return_their_statistics(torch):
    x, tx = _pair(torch, 2, 4, 3)
    w, tw = _pair(torch, 3)
    _same(numbagrad.native_layer_norm(x, [3], w, None, 1e-5), torch.native_layer_norm(tx, [3], tw, None, 1e-5))
    w4, tw4 = _pair(torch, 4)
    _same(numbagrad.native_group_norm(x, w4, None, 2, 4, 3, 2, 1e-5),
          torch.native_group_norm(tx, tw4, None, 2, 4, 3, 2, 1e-5))  # fmt: skip
    _same(numbagrad.native_batch_norm(x, w4, None, None, None, True, 0.1, 1e-5),
          torch.native_batch_norm(tx, tw4, None, None, None, True, 0.1, 1e-5))  # fmt: skip


@pytest.mark.torch
def test_native_batch_norm_in_evaluation_returns_empty_statistics(torch):
    x, tx = _pair(torch, 2, 3)
    rm, rv = numbagrad.zeros(3, dtype=numbagrad.float64), numbagrad.ones(3, dtype=numbagrad.float64)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    _same(numbagrad.native_batch_norm(x, None, None, rm, rv, False, 0.1, 1e-5),
          torch.native_batch_norm(tx, None, None, trm, trv, False, 0.1, 1e-5))  # fmt: skip


@pytest.mark.torch
def test_embedding_takes_the_weight_first_and_minus_one_as_no_padding(torch):
    w, tw = _pair(torch, 5, 3)
    i, ti = _pair(torch, 2, 4, integer_high=5)
    _same(numbagrad.embedding(w, i), torch.embedding(tw, ti), (w,), (tw,))
    w, tw = _pair(torch, 5, 3)
    _same(numbagrad.embedding(w, i, 2), torch.embedding(tw, ti, 2), (w,), (tw,))


@pytest.mark.torch
def test_embedding_renorm_scales_the_named_rows_in_place(torch):
    data = RNG.standard_normal((5, 3)) * 3
    w, tw = numbagrad.tensor(data), torch.tensor(data)
    assert numbagrad.embedding_renorm_(w, numbagrad.tensor([0, 2, 2]), 1.0, 2.0) is w
    torch.embedding_renorm_(tw, torch.tensor([0, 2, 2]), 1.0, 2.0)
    np.testing.assert_allclose(w.numpy(), tw.numpy())


@pytest.mark.torch
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_losses_take_reduction_as_an_int(torch, reduction):
    a, ta = _pair(torch, 4, 3)
    b, tb = _pair(torch, 4, 3)
    sign = numbagrad.tensor([1.0, -1.0, 1.0, -1.0], dtype=numbagrad.float64)
    tsign = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    probs = numbagrad.tensor(RNG.uniform(0.1, 0.9, (4, 3)))
    tprobs = torch.tensor(probs.numpy())
    cases = [
        ("kl_div", (a, probs.log()), (ta, tprobs.log())),
        ("binary_cross_entropy_with_logits", (a, probs), (ta, tprobs)),
        ("margin_ranking_loss", (a[:, 0], b[:, 0], sign), (ta[:, 0], tb[:, 0], tsign)),
        ("hinge_embedding_loss", (a[:, 0], sign), (ta[:, 0], tsign)),
        ("cosine_embedding_loss", (a, b, sign), (ta, tb, tsign)),
        ("triplet_margin_loss", (a, b, a * 2), (ta, tb, ta * 2)),
    ]
    for name, ours_args, theirs_args in cases:
        _same(getattr(numbagrad, name)(*ours_args, reduction=reduction),
              getattr(torch, name)(*theirs_args, reduction=reduction))  # fmt: skip
    _same(numbagrad.poisson_nll_loss(a, probs, True, False, 1e-8, reduction),
          torch.poisson_nll_loss(ta, tprobs, True, False, 1e-8, reduction))  # fmt: skip


def test_a_reduction_outside_torchs_enum_is_refused():
    x = numbagrad.ones(3)
    with pytest.raises(ValueError, match="3 is not a valid value for reduction"):
        numbagrad.hinge_embedding_loss(x, x, 1.0, 3)


@pytest.mark.torch
def test_ctc_loss_form(torch):
    log_probs = numbagrad.tensor(RNG.standard_normal((6, 2, 4))).log_softmax(2).detach().requires_grad_()
    tlog_probs = torch.tensor(log_probs.detach().numpy(), requires_grad=True)
    targets = [[1, 2, 1], [3, 1, 0]]
    ours = numbagrad.ctc_loss(log_probs, numbagrad.tensor(targets), [6, 5], [3, 2], 0, 1, False)
    theirs = torch.ctc_loss(tlog_probs, torch.tensor(targets), [6, 5], [3, 2], 0, 1, False)
    _same(ours, theirs, (log_probs,), (tlog_probs,))


@pytest.mark.torch
def test_convolution_dispatches_on_the_weights_rank_and_transposed(torch):
    x, tx = _pair(torch, 1, 2, 5, 5)
    w, tw = _pair(torch, 3, 2, 2, 2)
    _same(numbagrad.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
          torch.convolution(tx, tw, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), (x, w), (tx, tw))  # fmt: skip
    x1, tx1 = _pair(torch, 1, 2, 5)
    wt, twt = _pair(torch, 2, 3, 3)
    _same(numbagrad.convolution(x1, wt, None, [2], [1], [1], True, [1], 1),
          torch.convolution(tx1, twt, None, [2], [1], [1], True, [1], 1))  # fmt: skip
    _same(numbagrad.conv1d(x1, wt.transpose(0, 1).contiguous()), torch.conv1d(tx1, twt.transpose(0, 1).contiguous()))


@pytest.mark.torch
def test_conv_tbc_convolves_time_batch_channel_inputs(torch):
    x, tx = _pair(torch, 6, 2, 3)
    w, tw = _pair(torch, 3, 3, 4)
    b, tb = _pair(torch, 4)
    _same(numbagrad.conv_tbc(x, w, b, 1), torch.conv_tbc(tx, tw, tb, 1), (x, w, b), (tx, tw, tb))


@pytest.mark.torch
def test_pools_read_an_empty_stride_as_the_kernel_size(torch):
    x, tx = _pair(torch, 1, 2, 6)
    _same(numbagrad.max_pool1d(x, 2), torch.max_pool1d(tx, 2))
    _same(numbagrad.avg_pool1d(x, 3, ()), torch.avg_pool1d(tx, 3, ()))
    _same(numbagrad.max_pool1d_with_indices(x, 2, 1), torch.max_pool1d_with_indices(tx, 2, 1))
    _same(numbagrad.adaptive_max_pool1d(x, 4), torch.adaptive_max_pool1d(tx, 4))
    _same(numbagrad.adaptive_avg_pool1d(x, 4), torch.adaptive_avg_pool1d(tx, 4))
    x2, tx2 = _pair(torch, 1, 1, 4, 4)
    _same(numbagrad.max_pool2d(x2, 2), torch.max_pool2d(tx2, 2))
    x3, tx3 = _pair(torch, 1, 1, 2, 4, 4)
    _same(numbagrad.max_pool3d(x3, 2, (), 0, 1, True), torch.max_pool3d(tx3, 2, (), 0, 1, True))


@pytest.mark.torch
def test_activations_shuffles_and_distances(torch):
    x, tx = _pair(torch, 2, 4, 2, 2)
    y, ty = _pair(torch, 2, 4, 2, 2)
    for name, args in [("selu", ()), ("celu", (0.5,)), ("threshold", (0.1, 2.0)), ("hardshrink", (0.3,)),
                       ("pixel_shuffle", (2,)), ("pixel_unshuffle", (2,)), ("channel_shuffle", (2,)),
                       ("native_channel_shuffle", (2,)), ("rrelu", ())]:  # fmt: skip
        _same(getattr(numbagrad, name)(x, *args), getattr(torch, name)(tx, *args))
    _same(numbagrad.cosine_similarity(x, y), torch.cosine_similarity(tx, ty))
    _same(numbagrad.pairwise_distance(x[0, 0], y[0, 0]), torch.pairwise_distance(tx[0, 0], ty[0, 0]))
    _same(numbagrad.pdist(x[0, 0]), torch.pdist(tx[0, 0]))
    _same(numbagrad.prelu(x, numbagrad.tensor([0.25], dtype=numbagrad.float64)),
          torch.prelu(tx, torch.tensor([0.25], dtype=torch.float64)))  # fmt: skip


@pytest.mark.torch
def test_inplace_activation_forms_write_their_input(torch):
    data = RNG.standard_normal((3, 4))
    for name, args in [("selu_", ()), ("celu_", (0.5,)), ("threshold_", (0.1, 2.0))]:
        ours, theirs = numbagrad.tensor(data), torch.tensor(data)
        assert getattr(numbagrad, name)(ours, *args) is ours
        getattr(torch, name)(theirs, *args)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy())


@pytest.mark.torch
def test_bilinear_constant_pad_and_grid_sampler(torch):
    a, ta = _pair(torch, 3, 2)
    b, tb = _pair(torch, 3, 4)
    w, tw = _pair(torch, 5, 2, 4)
    _same(numbagrad.bilinear(a, b, w), torch.bilinear(ta, tb, tw), (a, b, w), (ta, tb, tw))
    _same(numbagrad.constant_pad_nd(a, [1, 2, 0, 1], 3.0), torch.constant_pad_nd(ta, [1, 2, 0, 1], 3.0))
    x, tx = _pair(torch, 1, 2, 3, 3)
    theta = numbagrad.tensor([[[0.9, 0.1, 0.0], [-0.1, 0.8, 0.1]]], dtype=numbagrad.float64)
    ttheta = torch.tensor(theta.numpy())
    grid = numbagrad.affine_grid_generator(theta, [1, 2, 3, 3], False)
    tgrid = torch.affine_grid_generator(ttheta, [1, 2, 3, 3], False)
    _same(grid, tgrid)
    for mode, padding in [(0, 0), (1, 1), (0, 2)]:
        _same(
            numbagrad.grid_sampler(x, grid, mode, padding, False), torch.grid_sampler(tx, tgrid, mode, padding, False)
        )
        _same(numbagrad.grid_sampler_2d(x, grid, mode, padding, True),
              torch.grid_sampler_2d(tx, tgrid, mode, padding, True))  # fmt: skip


def test_dropout_forms_take_train_positionally():
    x = numbagrad.ones(200, 3)
    assert numbagrad.dropout(x, 0.5, False) is x
    out = numbagrad.dropout(x, 0.5, True)
    assert set(np.unique(out.numpy())) <= {0.0, 2.0}
    channels = numbagrad.feature_dropout(numbagrad.ones(50, 4, 3), 0.5, True).numpy()
    assert all(len(np.unique(channels[n, c])) == 1 for n in range(50) for c in range(4))
    y = numbagrad.ones(100)
    assert numbagrad.dropout_(y, 0.5, True) is y and set(np.unique(y.numpy())) <= {0.0, 2.0}
    assert numbagrad.alpha_dropout(x, 0.5, False) is x
    assert numbagrad.feature_alpha_dropout(x, 0.5, False) is x


@pytest.mark.torch
def test_native_dropout_returns_the_scaled_output_and_its_mask(torch):
    x = numbagrad.ones(1000, dtype=numbagrad.float64)
    out, mask = numbagrad.native_dropout(x, 0.25, True)
    assert mask.dtype == numbagrad.bool
    np.testing.assert_allclose(out.numpy(), np.where(mask.numpy(), 1 / 0.75, 0.0))
    out, mask = numbagrad.native_dropout(x, 0.25, False)
    tout, tmask = torch.native_dropout(torch.ones(1000, dtype=torch.float64), 0.25, False)
    _same((out, mask), (tout, tmask))


def test_rrelu_refuses_a_generator_it_would_not_use():
    with pytest.raises(NotImplementedError, match="generator= is not supported"):
        numbagrad.rrelu(numbagrad.ones(2), training=True, generator=numbagrad.Generator())


@pytest.mark.torch
@pytest.mark.parametrize(
    ("indices", "offsets", "mode", "weights", "include_last_offset", "padding_idx"),
    [([0, 2, 1, 3, 3], [0, 2], 0, None, False, None), ([0, 2, 1, 3, 3], [0, 2], 0, [1.0, 2, 3, 4, 5], False, None),
     ([0, 2, 1, 3, 3], [0, 2], 0, None, False, 2), ([0, 2, 1, 3, 3], [0, 2], 1, None, False, 2),
     ([0, 2, 1, 3, 3], [0, 2], 2, None, False, 3), ([0, 2, 1, 3, 3], [0, 2, 5], 1, None, True, None),
     ([0, 2, 1, 3, 3], [0, 2, 5], 2, None, True, None), ([0, 2, 1, 3, 3], [0, 2, 2], 0, None, False, None),
     ([0, 2, 1, 3, 3], [0, 2, 2], 1, None, False, None), ([0, 2, 1, 3, 3], [0, 2, 2], 2, None, False, None),
     ([0, 2, 1, 3, 3], [0, 2, 5], 0, None, True, None)],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_bag_returns_torchs_bookkeeping(torch, indices, offsets, mode, weights, include_last_offset,
                                                  padding_idx, dtype):  # fmt: skip
    table = np.arange(12.0).reshape(4, 3)
    table[1, 0] = 20.0

    def run(lib):
        d = getattr(lib, dtype)
        return lib.embedding_bag(lib.tensor(table, dtype=d), lib.tensor(indices),
                                 lib.tensor(offsets), False, mode, False,
                                 None if weights is None else lib.tensor(weights, dtype=d), include_last_offset,
                                 padding_idx)  # fmt: skip

    _same(run(numbagrad), run(torch))
