"""The fused kernels behind the convolution models' layers, against torch: batch norm's one-pass forward and
backward (training and eval, with and without the affine parameters, running statistics updated as torch's), the
2-d transposed convolution's backend path (its weight gradient from the columns of one convolution of the output
gradient), and the convolution's im2col/col2im at odd geometries. Tiny shapes, float64 for exact comparisons,
float32 where the models run."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF


def _arrays(seed: int, *shapes, dtype=np.float64) -> list:
    rng = np.random.default_rng(seed)
    return [None if s is None else rng.standard_normal(s).astype(dtype) for s in shapes]


def _run(lib, fn, arrays):
    """``fn(*tensors)`` on leaves that require grad, backward with a fixed output gradient: (output, grads)."""
    ts = [None if a is None else lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *ts)
    seed = np.random.default_rng(99).standard_normal(tuple(out.shape)).astype(arrays[0].dtype)
    out.backward(lib.tensor(seed))
    return out, [None if t is None else t.grad.numpy() for t in ts]


def _same_as_torch(torch, fn, arrays, tol=1e-10):
    (ours, our_grads), (theirs, their_grads) = _run(numbagrad, fn, arrays), _run(torch, fn, arrays)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)
    for a, b in zip(our_grads, their_grads):
        assert (a is None) == (b is None)
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# --- batch norm ------------------------------------------------------------------------------------------------
BN_SHAPES = {"1d": (5, 3), "1d_length": (4, 3, 5), "2d": (3, 4, 5, 2), "3d": (2, 3, 2, 3, 2)}


@pytest.mark.parametrize("shape", BN_SHAPES.values(), ids=BN_SHAPES.keys())
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_values_and_gradients_match_torch(torch, shape, affine):
    c = shape[1]
    arrays = _arrays(0, shape, (c,) if affine else None, (c,) if affine else None)

    def fn(lib, x, w, b):
        return lib.nn.functional.batch_norm(x, None, None, w, b, training=True)

    _same_as_torch(torch, fn, arrays)


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_eval_values_and_gradients_match_torch(torch, affine):
    x, w, b, mean, var = _arrays(1, (3, 4, 2, 3), (4,), (4,), (4,), (4,))
    var = np.abs(var) + 0.5

    def fn(lib, x, w, b):
        return lib.nn.functional.batch_norm(x, lib.tensor(mean), lib.tensor(var), w, b, training=False)

    _same_as_torch(torch, fn, [x, w if affine else None, b if affine else None])


@pytest.mark.parametrize("momentum", [0.1, 0.7])
def test_batch_norm_updates_the_running_statistics_as_torch(torch, momentum):
    (x,) = _arrays(2, (4, 3, 2, 2), dtype=np.float32)
    stats = []
    for lib in (numbagrad, torch):
        mean, var = lib.zeros(3) + 0.5, lib.ones(3) * 2
        lib.nn.functional.batch_norm(lib.tensor(x), mean, var, training=True, momentum=momentum)
        stats.append((mean.numpy(), var.numpy()))
    (m1, v1), (m2, v2) = stats
    np.testing.assert_allclose(m1, m2, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(v1, v2, rtol=1e-6, atol=1e-7)


def test_batch_norm_module_float32_step_matches_torch(torch):
    """BatchNorm2d as the models run it: float32, training, then eval on the updated statistics."""
    (x,) = _arrays(3, (4, 5, 3, 3), dtype=np.float32)
    results = []
    for lib in (numbagrad, torch):
        bn = lib.nn.BatchNorm2d(5)
        with lib.no_grad():
            bn.weight.copy_(lib.arange(5, dtype=lib.float32) * 0.3 + 0.5)
            bn.bias.copy_(lib.arange(5, dtype=lib.float32) * -0.2)
        t = lib.tensor(x, requires_grad=True)
        out = bn(t)
        (out * out).sum().backward()
        evaluated = bn.eval()(lib.tensor(x))
        results.append([a.detach().numpy() for a in (out, t.grad, bn.weight.grad, bn.bias.grad, evaluated)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradcheck_and_gradgradcheck(training):
    x, w, b = (numbagrad.tensor(a, requires_grad=True) for a in _arrays(4, (3, 2, 2, 2), (2,), (2,)))
    mean, var = (
        numbagrad.tensor([0.1, -0.3], dtype=numbagrad.float64),
        numbagrad.tensor([0.8, 1.5], dtype=numbagrad.float64),
    )

    def fn(x, w, b):
        return NF.batch_norm(x, mean.clone(), var.clone(), w, b, training=training) ** 2

    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))


def test_batch_norm_backward_with_create_graph_matches_the_fused_backward():
    """The kernel's gradients (no graph) and the differentiable formula's (create_graph) agree."""
    arrays = _arrays(5, (3, 4, 3, 2), (4,), (4,))
    grads = []
    for create_graph in (False, True):
        ts = [numbagrad.tensor(a, requires_grad=True) for a in arrays]
        out = NF.batch_norm(ts[0], None, None, ts[1], ts[2], training=True)
        grads.append(numbagrad.autograd.grad((out * out.detach()).sum(), ts, create_graph=create_graph))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_of_a_transposed_view_matches_torch(training, torch):
    """(N, L, C) data normalized over C through its (N, C, L) view, as a sequence model's BatchNorm1d sees it: the
    kernels walk the view's memory order (channels innermost), values and gradients as torch's."""
    x, w, b, mean, var = _arrays(6, (4, 5, 3), (3,), (3,), (3,), (3,))
    var = np.abs(var) + 0.5

    def fn(lib, x, w, b):
        stats = (None, None) if training else (lib.tensor(mean), lib.tensor(var))
        return lib.nn.functional.batch_norm(x.transpose(1, 2), *stats, w, b, training=training).transpose(1, 2)

    _same_as_torch(torch, fn, [x, w, b])


@pytest.mark.parametrize("transposed_input", [True, False], ids=["input_transposed", "gradient_transposed"])
def test_batch_norm_gradient_laid_out_unlike_its_input_matches_torch(transposed_input, torch):
    """One of the input and the incoming gradient has its channels side by side in memory, the other not: the
    kernels walk the input's layout, the gradient copied to it."""
    x, w, b = _arrays(8, (4, 5, 3), (3,), (3,))

    def fn(lib, x, w, b):
        if transposed_input:  # (the output, and so its gradient, are (N, C, L) row-major)
            return lib.nn.functional.batch_norm(x.transpose(1, 2), None, None, w, b, training=True)
        return lib.nn.functional.batch_norm(x.transpose(1, 2).contiguous(), None, None, w, b, True).transpose(1, 2)

    _same_as_torch(torch, fn, [x, w, b])


def test_batch_norm_of_channels_side_by_side_with_gaps_matches_torch(torch):
    """Every other position of a transposed sequence: its channels lie side by side but its rows are apart (no
    rows view: the kernels walk a row-major copy)."""
    x, w, b = _arrays(10, (3, 6, 4), (4,), (4,))

    def fn(lib, x, w, b):
        return lib.nn.functional.batch_norm(x.transpose(1, 2)[:, :, ::2], None, None, w, b, training=True)

    _same_as_torch(torch, fn, [x, w, b])


def test_batch_norm_walks_rows_and_planes_to_the_same_values():
    """The backend's batch norm of a transposed (N, L, C) float32 array, whose kernels walk its (N * L, C) rows,
    equals the same kernels' walk of its (N, C, L) planes (given no rows)."""
    from numbagrad.backend import cpu

    x, w, b, g = _arrays(9, (8, 4, 16), (16,), (16,), (8, 4, 16), dtype=np.float32)
    x3, g3 = x.transpose(0, 2, 1), g.transpose(0, 2, 1)
    out, mean, rstd, _, _ = cpu.batch_norm(x3, w, b, None, None, True, 0.1, 1e-5)
    gx, gw, gb = cpu.batch_norm_backward(g3, x3, mean, rstd, w, True, True, True, True)
    assert cpu._channel_rows(x3).shape == (32, 16) and cpu._channel_rows(g3).shape == (32, 16)
    no_rows, no_stat = np.empty((0, 0), np.float32), np.empty(0, np.float32)
    mean64, var64, rstd64 = np.empty(16), np.empty(16), np.empty(16)
    strided_out = np.empty(x3.shape, np.float32)
    kernels = cpu._nn()
    kernels.batch_norm_forward(x3, no_rows, w, b, 1e-5, True, 0.1, no_stat, no_stat, mean64, var64, rstd64, strided_out)
    sum_g, dot, strided_gx = np.zeros(16), np.zeros(16), np.empty(x3.shape, np.float32)
    kernels.batch_norm_backward(g3, x3, no_rows, no_rows, mean, rstd, w, True, sum_g, dot, strided_gx)
    np.testing.assert_allclose(out, strided_out, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(mean, mean64.astype(np.float32), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gx, strided_gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb, sum_g.astype(np.float32), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gw, (dot * rstd).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_batch_norm_of_channels_last_images_matches_torch(torch):
    x, w, b = _arrays(7, (2, 3, 4, 5), (3,), (3,))

    def fn(lib, x, w, b):
        return lib.nn.functional.batch_norm(x.contiguous(memory_format=lib.channels_last), None, None, w, b, True)

    _same_as_torch(torch, fn, [x, w, b])


def test_batch_norm_of_an_empty_batch_leaves_the_running_statistics(torch):
    results = []
    for lib in (numbagrad, torch):
        bn = lib.nn.BatchNorm1d(3)
        out = bn(lib.zeros(0, 3))
        results.append((tuple(out.shape), bn.running_mean.numpy().tolist(), bn.running_var.numpy().tolist()))
    assert results[0] == results[1]


# --- transposed convolution ---------------------------------------------------------------------------------------
CONV_T = {
    "plain": ((2, 3, 3, 4), (3, 2, 3, 2), (2,), {}),
    "dcgan_up": ((2, 4, 4, 4), (4, 3, 4, 4), None, dict(stride=2, padding=1)),
    "from_1x1": ((3, 4, 1, 1), (4, 2, 4, 4), None, {}),
    "groups_dilation": (
        (2, 4, 3, 3),
        (4, 3, 2, 3),
        (6,),
        dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), output_padding=(1, 0), groups=2),
    ),  # fmt: skip
    "1d": ((2, 2, 5), (2, 3, 3), (3,), dict(stride=3, padding=1, output_padding=2)),
}


@pytest.mark.parametrize("case", CONV_T.values(), ids=CONV_T.keys())
def test_conv_transpose_values_and_gradients_match_torch(torch, case):
    x, w, b, kw = case
    name = "conv_transpose1d" if len(x) == 3 else "conv_transpose2d"

    def fn(lib, x, w, b):
        return getattr(lib.nn.functional, name)(x, w, b, **kw)

    _same_as_torch(torch, fn, _arrays(6, x, w, b))


def test_conv_transpose_weight_gradient_alone_matches_torch(torch):
    """An input that needs no gradient (the generator's noise): only the weight's is computed."""
    x, w = _arrays(7, (3, 4, 2, 2), (4, 2, 3, 3))
    grads = []
    for lib in (numbagrad, torch):
        weight = lib.tensor(w, requires_grad=True)
        lib.nn.functional.conv_transpose2d(lib.tensor(x), weight, stride=2).pow(2).sum().backward()
        grads.append(weight.grad.numpy())
    np.testing.assert_allclose(*grads, rtol=1e-10, atol=1e-12)


def test_conv_transpose_backward_with_create_graph_matches_the_fused_backward():
    arrays = _arrays(8, (2, 4, 3, 3), (4, 3, 2, 3), (6,))
    grads = []
    for create_graph in (False, True):
        ts = [numbagrad.tensor(a, requires_grad=True) for a in arrays]
        out = NF.conv_transpose2d(*ts, stride=2, padding=(0, 1), dilation=(2, 1), groups=2)
        grads.append(numbagrad.autograd.grad((out * out.detach()).sum(), ts, create_graph=create_graph))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_conv_transpose_gradgradcheck_with_stride_and_groups():
    ts = [numbagrad.tensor(a, requires_grad=True) for a in _arrays(9, (1, 2, 2, 2), (2, 1, 2, 2), (2,))]
    assert gradgradcheck(lambda *t: NF.conv_transpose2d(*t, stride=2, groups=2), ts)


# --- im2col / col2im at odd geometries ---------------------------------------------------------------------------
GEOMETRIES = {
    "pad_beyond_reach": ((2, 3, 4, 5), (2, 3, 2, 2), dict(stride=3, padding=2)),
    "dilated": ((1, 2, 7, 6), (3, 2, 3, 2), dict(stride=(1, 2), padding=(3, 1), dilation=(2, 3))),
    "stride_past_kernel": ((2, 2, 9, 8), (2, 1, 2, 3), dict(stride=(4, 3), padding=(1, 0), groups=2)),
    "wide_kernel": ((1, 1, 3, 3), (2, 1, 5, 5), dict(padding=2)),
}


@pytest.mark.parametrize("case", GEOMETRIES.values(), ids=GEOMETRIES.keys())
def test_conv2d_odd_geometries_match_torch(torch, case):
    x, w, kw = case
    _same_as_torch(torch, lambda lib, x, w: lib.nn.functional.conv2d(x, w, **kw), _arrays(10, x, w))


# --- large convolutions: run sample by sample, their columns made again in the backward ---------------------------
def test_conv2d_by_sample_matches_torch(torch):
    """16 output channels and 72 * 1024 columns per sample: the per-sample forward and backward."""
    _same_as_torch(torch, lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, padding=1),
                   _arrays(11, (3, 8, 32, 32), (16, 8, 3, 3), (16,)), tol=1e-9)  # fmt: skip


def test_conv2d_by_sample_weight_gradient_alone_matches_torch(torch):
    x, w = _arrays(12, (2, 8, 34, 34), (16, 8, 3, 3))
    grads = []
    for lib in (numbagrad, torch):
        weight = lib.tensor(w, requires_grad=True)
        lib.nn.functional.conv2d(lib.tensor(x), weight).pow(2).sum().backward()
        grads.append(weight.grad.numpy())
    np.testing.assert_allclose(*grads, rtol=1e-9, atol=1e-9)


def test_conv_transpose_by_sample_matches_torch(torch):
    """A transposed convolution whose backward convolution of the output gradient runs sample by sample."""
    _same_as_torch(torch, lambda lib, x, w: lib.nn.functional.conv_transpose2d(x, w, padding=1),
                   _arrays(13, (2, 16, 32, 32), (16, 8, 3, 3)), tol=1e-9)  # fmt: skip


def test_conv2d_by_sample_bfloat16_matches_torch(torch):
    x, w = _arrays(14, (2, 8, 32, 32), (16, 8, 3, 3), dtype=np.float32)
    results = []
    for lib in (numbagrad, torch):
        ts = [lib.tensor(a).to(lib.bfloat16).requires_grad_() for a in (x, w)]
        out = lib.nn.functional.conv2d(*ts, padding=1)
        out.float().sum().backward()
        results.append([t.detach().float().numpy() for t in (out, *(t.grad for t in ts))])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=0.5)


BN_ERRORS = {
    "weight of another size": lambda lib: lib.nn.functional.batch_norm(
        lib.zeros(4, 3), None, None, lib.ones(2), None, training=True
    ),
    "float32 input, float64 weight": lambda lib: lib.nn.functional.batch_norm(
        lib.zeros(4, 3), None, None, lib.ones(3, dtype=lib.float64), None, training=True
    ),
}


@pytest.mark.parametrize("call", BN_ERRORS.values(), ids=BN_ERRORS.keys())
def test_batch_norm_argument_errors_match_torch(torch, call):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises((RuntimeError, ValueError)) as info:
            call(lib)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]
