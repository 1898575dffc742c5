"""The ``torch.*`` forms of the nn operations (``torch.conv2d``, ``torch.batch_norm``, ``torch.dropout``...).

torch exposes its native nn kernels in the top namespace with their native signatures, which differ from
``torch.nn.functional``'s: losses take ``reduction`` as an int (0: none, 1: mean, 2: sum), ``batch_norm`` and
``instance_norm`` take the weights before the running statistics, ``embedding`` takes the weight first, the
dropouts take ``train`` without a default, the pools take ``stride=()`` for "the kernel size", and the
``native_*`` functions also return the statistics they computed. Each form here maps those arguments onto the
``nn.functional`` op that does the work; where the signatures agree the form is the functional itself.
``numbagrad.<name>`` loads this module on first use (``numbagrad.__getattr__``), so ``import numbagrad`` does not
import ``nn``.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from .._tensor import Tensor
from .._types import bool_, float32
from ..autograd.grad_mode import no_grad
from . import functional as F

#: torch's reduction enum, as its native losses take it.
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value) -> str:
    if value not in _REDUCTIONS:
        raise ValueError(f"{value} is not a valid value for reduction")
    return _REDUCTIONS[value]


def _stride(stride):
    """torch's native pools read an empty ``stride`` as "the kernel size", as ``None`` is in nn.functional."""
    return None if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else stride


# --- the forms whose signature is nn.functional's ------------------------------------------------------------------
conv1d = F.conv1d
conv2d = F.conv2d
conv3d = F.conv3d
conv_transpose1d = F.conv_transpose1d
conv_transpose2d = F.conv_transpose2d
conv_transpose3d = F.conv_transpose3d
adaptive_avg_pool1d = F.adaptive_avg_pool1d
pixel_shuffle = F.pixel_shuffle
pixel_unshuffle = F.pixel_unshuffle
channel_shuffle = F.channel_shuffle
native_channel_shuffle = F.native_channel_shuffle
selu_ = F.selu_
celu_ = F.celu_
threshold_ = F.threshold_
hardshrink = F.hardshrink
bilinear = F.bilinear
cosine_similarity = F.cosine_similarity
pairwise_distance = F.pairwise_distance
pdist = F.pdist
rms_norm = F.rms_norm


def selu(input: Tensor) -> Tensor:  # noqa: A002 - torch's parameter name
    """``nn.functional.selu`` (torch's form has no ``inplace``)."""
    return F.selu(input)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    """``nn.functional.celu`` (torch's form has no ``inplace``)."""
    return F.celu(input, alpha)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    """``nn.functional.threshold``: ``value`` where ``input <= threshold``."""
    return F.threshold(input, threshold, value)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
          generator=None) -> Tensor:  # fmt: skip
    """``nn.functional.rrelu`` (its slopes come from the global generator: a ``generator=`` is refused)."""
    _no_generator(generator)
    return F.rrelu(input, lower, upper, training)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
           generator=None) -> Tensor:  # fmt: skip
    """``nn.functional.rrelu_`` (its slopes come from the global generator: a ``generator=`` is refused)."""
    _no_generator(generator)
    return F.rrelu_(input, lower, upper, training)


def _no_generator(generator) -> None:
    if generator is not None:
        raise NotImplementedError("numbagrad's rrelu draws from the global generator: generator= is not supported")


# --- convolution ---------------------------------------------------------------------------------------------------
def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding, dilation,  # noqa: A002
                transposed: bool, output_padding, groups: int) -> Tensor:  # fmt: skip
    """The N-d convolution (or transposed convolution) the weight's dims call for (1, 2 or 3 spatial dims)."""
    n = weight.dim() - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"Expected 3D, 4D or 5D weight for convolution, but got weight of size {list(weight.shape)}")
    if transposed:
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return conv(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return (F.conv1d, F.conv2d, F.conv3d)[n - 1](input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:  # noqa: A002
    """A 1-d convolution of a (time, batch, channels) input with a (kernel, in, out) weight, padded by ``pad``
    steps at both ends of time; the result is (time, batch, out)."""
    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


# --- normalization --------------------------------------------------------------------------------------------------
def batch_norm(input: Tensor, weight, bias, running_mean, running_var, training: bool, momentum: float,  # noqa: A002
               eps: float, cudnn_enabled: bool) -> Tensor:  # fmt: skip
    """``nn.functional.batch_norm`` with torch's native argument order (weights before running statistics)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Tensor, weight, bias, running_mean, running_var, use_input_stats: bool,  # noqa: A002
                  momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:  # fmt: skip
    """``nn.functional.instance_norm`` with torch's native argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def layer_norm(input: Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5,  # noqa: A002
               cudnn_enable: bool = True) -> Tensor:  # fmt: skip
    """``nn.functional.layer_norm`` (``cudnn_enable`` is torch's backend switch and changes nothing)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight=None, bias=None, eps: float = 1e-5,  # noqa: A002
               cudnn_enabled: bool = True) -> Tensor:  # fmt: skip
    """``nn.functional.group_norm``."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def _mean_rstd(x: Tensor, dims: list, eps: float) -> tuple:
    """The biased mean and ``1 / sqrt(var + eps)`` over ``dims`` (kept as size 1)."""
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) * (x - mean)).mean(dims, keepdim=True)
    return mean, (var + eps).rsqrt()


def native_layer_norm(input: Tensor, normalized_shape, weight, bias, eps: float) -> tuple:  # noqa: A002
    """``(layer_norm(input), mean, rstd)``: the statistics over the normalized dims, kept as size 1."""
    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    mean, rstd = _mean_rstd(input, dims, eps)
    return F.layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd


def native_batch_norm(input: Tensor, weight, bias, running_mean, running_var, training: bool,  # noqa: A002
                      momentum: float, eps: float) -> tuple:  # fmt: skip
    """``(batch_norm(input), save_mean, save_invstd)``: the batch's per-channel mean and ``1 / sqrt(var + eps)``
    in training, empty tensors in evaluation (the running statistics are used then)."""
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        empty = ops.zeros(0, dtype=input.dtype, device=input.device)
        return out, empty, empty.clone()
    dims = [0, *range(2, input.dim())]
    mean, rstd = _mean_rstd(input, dims, eps)
    return out, mean.reshape(-1), rstd.reshape(-1)


def native_group_norm(input: Tensor, weight, bias, N: int, C: int, HxW: int, group: int,  # noqa: A002, N803
                      eps: float) -> tuple:  # fmt: skip
    """``(group_norm(input), mean, rstd)`` with the statistics of each (sample, group), shaped (N, group)."""
    out = F.group_norm(input, group, weight, bias, eps)
    mean, rstd = _mean_rstd(input.reshape(N, group, -1), [2], eps)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


# --- embedding ------------------------------------------------------------------------------------------------------
def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:  # fmt: skip
    """``nn.functional.embedding`` with the weight first; a negative ``padding_idx`` means none."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx, None, 2.0, scale_grad_by_freq, sparse)


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:  # noqa: A002
    """Scale down, in place and outside autograd, each row of ``input`` named in ``indices`` whose
    ``norm_type``-norm exceeds ``max_norm``."""
    with no_grad():
        rows = indices.reshape(-1).unique()
        picked = input[rows]
        norms = picked.norm(norm_type, 1, keepdim=True)
        input[rows] = picked * ops.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    return input


_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor, scale_grad_by_freq: bool = False,
                  mode: int = 0, sparse: bool = False, per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> tuple:  # fmt: skip
    """``(bags, offset2bag, bag_size, max_indices)``: ``nn.functional.embedding_bag`` with the weight first and the
    mode as torch's enum (sum 0, mean 1, max 2), and the bookkeeping torch's CPU kernel returns beside the bags:
    each index's bag (empty for a float32 sum without ``padding_idx``), each bag's count of non-padding
    indices (zeros for a sum, one per offset), and for max each (bag, column)'s winning row of ``weight`` (for a
    mean: the counts again; for a sum: zeros), as torch does. ``indices`` are read flat, as torch's native form
    reads them."""
    if mode not in (0, 1, 2):
        raise ValueError(f"{mode} is not a valid embedding_bag mode")
    bags = F.embedding_bag(indices.reshape(-1), weight, offsets, None, 2, scale_grad_by_freq, _BAG_MODES[mode],
                           sparse, per_sample_weights, include_last_offset, padding_idx)  # fmt: skip
    flat = indices._host().reshape(-1).astype(np.int64)
    starts = offsets._host().astype(np.int64).reshape(-1)
    num_bags = bags.shape[0]
    # each index's bag, as torch counts it: one step at each bag's start (past the last bag nothing steps)
    bag_of = np.cumsum(np.bincount(starts[1:num_bags], minlength=flat.size + 1))[: flat.size]
    counted = np.ones(flat.size, bool) if padding_idx is None else flat != padding_idx
    counts = np.bincount(bag_of[counted], minlength=num_bags)[:num_bags]

    def long(values) -> Tensor:
        return Tensor._make(np.ascontiguousarray(values, dtype=np.int64)).to(weight.device)

    if mode == 0:
        zeros = long(np.zeros(len(starts)))
        fast_path = padding_idx is None and weight.dtype == float32  # (torch's float32 sum kernel skips it)
        return bags, long(np.zeros(0) if fast_path else bag_of), zeros, zeros.clone()
    if mode == 1:
        return bags, long(bag_of), long(counts), long(counts)
    table = weight.detach()._host()
    winners = np.zeros((num_bags, table.shape[1]), np.int64)
    for bag in range(num_bags):
        members = flat[(bag_of == bag) & counted]
        if members.size:
            winners[bag] = members[np.argmax(table[members], axis=0)]
    return bags, long(bag_of), long(counts), long(winners)


# --- dropout --------------------------------------------------------------------------------------------------------
def dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``nn.functional.dropout`` (``train`` has no default here)."""
    return F.dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``dropout`` in place."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``nn.functional.alpha_dropout``."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``alpha_dropout`` in place."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """Dropout of whole channels (dim 1) of an input of any rank of at least 2."""
    return F._masked_dropout(input, p, train, inplace=False, feature=True, alpha=False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``feature_dropout`` in place."""
    return F._masked_dropout(input, p, train, inplace=True, feature=True, alpha=False)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``nn.functional.feature_alpha_dropout``."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``feature_alpha_dropout`` in place."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def native_dropout(input: Tensor, p: float, train: bool | None) -> tuple:  # noqa: A002
    """``(output, mask)``: in training each element is kept (scaled by ``1 / (1 - p)``) where the bool ``mask`` is
    True; out of training the output is a copy and the mask all True."""
    if p < 0.0 or p > 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if train is False:
        return input.clone(), ops.ones(input.shape, dtype=bool_, device=input.device)
    mask = ops.rand(input.shape, dtype=input.dtype, device=input.device) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return input * mask.to(input.dtype) * scale, mask


# --- pooling --------------------------------------------------------------------------------------------------------
def max_pool1d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:  # noqa: A002
    """``nn.functional.max_pool1d`` (an empty ``stride`` is the kernel size)."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=(), padding=0, dilation=1,  # noqa: A002
                            ceil_mode: bool = False) -> tuple:  # fmt: skip
    """``(values, indices)`` of ``max_pool1d``."""
    return tuple(F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode, return_indices=True))


def max_pool2d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:  # noqa: A002
    """``nn.functional.max_pool2d`` (an empty ``stride`` is the kernel size)."""
    return F.max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:  # noqa: A002
    """``nn.functional.max_pool3d`` (an empty ``stride`` is the kernel size)."""
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def avg_pool1d(input: Tensor, kernel_size, stride=(), padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True) -> Tensor:  # fmt: skip
    """``nn.functional.avg_pool1d`` (an empty ``stride`` is the kernel size)."""
    return F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def adaptive_max_pool1d(input: Tensor, output_size) -> tuple:  # noqa: A002
    """``(values, indices)`` of ``nn.functional.adaptive_max_pool1d``."""
    return tuple(F.adaptive_max_pool1d(input, output_size, return_indices=True))


# --- padding and sampling -------------------------------------------------------------------------------------------
def constant_pad_nd(input: Tensor, pad, value=0) -> Tensor:  # noqa: A002
    """``input`` padded with ``value``: ``pad`` lists (before, after) amounts from the last dim backwards
    (negative amounts crop)."""
    return F.pad(input, list(pad), "constant", value)


_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def grid_sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,  # noqa: A002
                 align_corners: bool) -> Tensor:  # fmt: skip
    """``nn.functional.grid_sample`` with its modes as torch's enums (bilinear 0, nearest 1, bicubic 2; zeros 0,
    border 1, reflection 2)."""
    return F.grid_sample(input, grid, _INTERPOLATION[interpolation_mode], _PADDING[padding_mode], align_corners)


def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,  # noqa: A002
                    align_corners: bool) -> Tensor:  # fmt: skip
    """``grid_sampler`` of a 4-D input."""
    if input.dim() != 4:
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")  # fmt: skip
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,  # noqa: A002
                    align_corners: bool) -> Tensor:  # fmt: skip
    """``grid_sampler`` of a 5-D input."""
    if input.dim() != 5:
        raise RuntimeError(f"grid_sampler(): expected 5D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")  # fmt: skip
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta: Tensor, size, align_corners: bool) -> Tensor:
    """``nn.functional.affine_grid``."""
    return F.affine_grid(theta, list(size), align_corners)


# --- losses (reduction as torch's enum) -----------------------------------------------------------------------------
def kl_div(input: Tensor, target: Tensor, reduction: int = 1, *, log_target: bool = False) -> Tensor:  # noqa: A002
    """``nn.functional.kl_div``; reduction 1 is the plain mean over all elements."""
    pointwise = F.kl_div(input, target, reduction="none", log_target=log_target)
    return _reduce(pointwise, reduction)


def _reduce(loss: Tensor, reduction: int) -> Tensor:
    mode = _reduction(reduction)
    return loss if mode == "none" else loss.mean() if mode == "mean" else loss.sum()


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight=None, pos_weight=None,  # noqa: A002
                                     reduction: int = 1) -> Tensor:  # fmt: skip
    """``nn.functional.binary_cross_entropy_with_logits``."""
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                              pos_weight=pos_weight)  # fmt: skip


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: int = 1, zero_infinity: bool = False) -> Tensor:  # fmt: skip
    """``nn.functional.ctc_loss``."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 1) -> Tensor:  # fmt: skip
    """``nn.functional.margin_ranking_loss``."""
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 1) -> Tensor:  # noqa: A002
    """``nn.functional.hinge_embedding_loss``."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 1) -> Tensor:  # fmt: skip
    """``nn.functional.cosine_embedding_loss``."""
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,  # noqa: A002
                     reduction: int) -> Tensor:  # fmt: skip
    """``nn.functional.poisson_nll_loss`` (every argument positional, as torch's native form has them)."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, reduction: int = 1) -> Tensor:  # fmt: skip
    """``nn.functional.triplet_margin_loss``."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))
