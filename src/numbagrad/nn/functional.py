"""``nn.functional``: torch's functional API on numbagrad tensors.

Elementwise activations are rows of the table (``scalar_math.ROWS``: one generated Numba kernel each way);
convolution, pooling, normalization, embedding, padding and the fused losses are single-node Functions
(``ops/nn_ops.py``, ``ops/loss_ops.py``) over backend primitives; the rest are compositions of tensor ops, as in
torch, so every function returns the node torch prints.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings

import numpy as np

from .. import ops
from .._tensor import Tensor
from .._types import broadcast_shapes, float32, wrap_dim
from ..autograd.function import (
    NOT_A_TENSOR_INPUT,
    Function,
    edge_of,
    make_node,
    once_differentiable,
    saved_input_unhooked,
)
from ..autograd.fused import fused_grads
from ..autograd.grad_mode import no_grad, nothing_records, state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for, layout
from ..ops import loss_ops, nn_ops
from ..ops._common import autocast_to, not_a_tensor, same_backend
from ..ops._common import new_shell as _new
from ..ops._registry import batchable
from ..ops.creation import _generator
from ..ops.elementwise import CLASSES, ROWS, make_function, row_inplace
from ..ops.inplace import write_inplace
from ..ops.sparse import SparseCOOTensor as _SparseCOOTensor
from ..scalar_math import RESULT_ROWS

_REDUCTIONS = ("none", "mean", "sum")


def _row(name: str):
    return CLASSES[name][""]


# --- activations -------------------------------------------------------------------------------------------------
# In-place forms: torch names the nodes of leaky_relu_ and elu_ (selu_ and celu_ too) ...Backward1; they save
# only the result (``RESULT_ROWS``), and their backward refuses a negative slope (the result then loses the sign).
def _from_result(name: str, node_name: str, class_name: str, message: str):
    cls = make_function(RESULT_ROWS[name], node_name, class_name)
    backward = cls.backward

    def refusing_negative_slopes(ctx, g):
        if ctx.params[0] < 0:  # (leaky_relu's negative_slope, elu's alpha)
            raise RuntimeError(message)
        return backward(ctx, g)

    cls.backward = staticmethod(refusing_negative_slopes)
    return cls


_NEGATIVE_SLOPE = (
    "backward calculation is triggered with a negative slope which is not supported. This is caused by calling "
    "in-place forward function with a negative slope, please call out-of-place version instead."
)
_LEAKY_RELU_INPLACE = _from_result(
    "leaky_relu",
    "LeakyReluBackward1",
    "LeakyReluInplace",
    f"In-place leakyReLu {_NEGATIVE_SLOPE} File an issue at https://github.com/pytorch/pytorch if you do require "
    "supporting in-place leakRelu backward calculation with negative slope",
)
_ELU_INPLACE = _from_result("elu", "EluBackward1", "EluInplace", f"In-place elu {_NEGATIVE_SLOPE}")


def _activation(name: str, input: Tensor, params: tuple = (), inplace: bool = False, kernel: str | None = None,
                inplace_cls=None) -> Tensor:  # fmt: skip
    """Apply the table row ``name`` (with ``params``), out of place or into ``input``. ``kernel`` names torch's
    kernel for the error on non-float input (None: integers are allowed)."""
    if not isinstance(input, Tensor):
        raise not_a_tensor(name, "input", 1, input)
    if kernel is not None and not input.is_floating_point():
        raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for '{input.dtype.scalar_name}'")
    cls = inplace_cls or _row(name)
    if inplace:
        return row_inplace(input, ROWS[name], lambda old, *p: cls.apply(old, *p), params, {})
    return cls.apply(input, *params)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(input, 0)`` elementwise; ``inplace=True`` overwrites the input."""
    return input.relu_() if inplace else ops.relu(input)


def relu_(input: Tensor) -> Tensor:
    """In-place ``relu``."""
    return input.relu_()


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``clamp(input, min_val, max_val)`` whose gradient is zero at the bounds too."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _activation("hardtanh", input, (min_val, max_val), inplace)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place ``hardtanh``."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(0, x), 6)``: torch computes it as ``hardtanh(x, 0, 6)`` (node ``HardtanhBackward0``)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``negative_slope * input``; ``inplace=True`` overwrites the input."""
    return _activation("leaky_relu", input, (negative_slope,), inplace, "leaky_relu",
                       _LEAKY_RELU_INPLACE if inplace else None)  # fmt: skip


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place ``leaky_relu``."""
    return leaky_relu(input, negative_slope, inplace=True)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``alpha * (exp(input) - 1)``; ``inplace=True`` overwrites the input."""
    return _activation("elu", input, (alpha, 1.0, 1.0), inplace, "elu", _ELU_INPLACE if inplace else None)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place ``elu``."""
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants (node ``EluBackward0``, as torch)."""
    return _activation("elu", input, (_SELU_ALPHA, _SELU_SCALE, 1.0), inplace, "elu",
                       _ELU_INPLACE if inplace else None)  # fmt: skip


def selu_(input: Tensor) -> Tensor:
    """In-place ``selu``."""
    return selu(input, inplace=True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)`` (``approximate='none'``, through ``erf``) or its tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    name = "gelu" if approximate == "none" else "gelu_tanh"
    if isinstance(input, Tensor) and not input.is_floating_point():
        raise NotImplementedError(f"\"GeluKernelImpl\" not implemented for '{input.dtype.scalar_name}'")
    return _activation(name, input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * sigmoid(input)`` (swish); ``inplace=True`` overwrites the input."""
    return _activation("silu", input, (), inplace, "silu")


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * tanh(softplus(input))``; ``inplace=True`` overwrites the input."""
    return _activation("mish", input, (), inplace, "mish")


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    return _activation("softplus", input, (beta, threshold), False, "softplus")


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * relu6(input + 3) / 6``; ``inplace=True`` overwrites the input."""
    return _activation("hardswish", input, (), inplace, "hardswish")


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(input + 3) / 6``; ``inplace=True`` overwrites the input."""
    return _activation("hardsigmoid", input, (), inplace, "hardsigmoid")


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(input))``, computed stably."""
    return _activation("logsigmoid", input, (), False, "log_sigmoid")


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``, composed as torch does (node ``DivBackward0``)."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)`` (node ``SubBackward0``)."""
    return input - input.tanh()


def tanh(input: Tensor) -> Tensor:
    """``tanh`` elementwise (as ``numbagrad.tanh``)."""
    return ops.tanh(input)


def sigmoid(input: Tensor) -> Tensor:
    """The logistic sigmoid elementwise (as ``numbagrad.sigmoid``)."""
    return ops.sigmoid(input)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``exp(input) / sum(exp(input))`` along ``dim`` (computed in ``dtype`` when given)."""
    return ops.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``log(softmax(input))`` along ``dim``, computed stably (in ``dtype`` when given)."""
    return ops.log_softmax(input, dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``softmax(-input)`` (nodes ``SoftmaxBackward0`` over ``NegBackward0``)."""
    return ops.softmax(-input, dim, dtype)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: ``a * sigmoid(b)`` for the halves ``a``, ``b`` of ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = wrap_dim(dim, input.dim())
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    return nn_ops.Glu.apply(input, d)


# torch's celu is elu with input_scale 1 / alpha, under its own node names.
_CELU = make_function(ROWS["elu"], "CeluBackward0", "Celu")
_CELU_INPLACE = _from_result("elu", "CeluBackward1", "CeluInplace", f"In-place elu {_NEGATIVE_SLOPE}")
_THRESHOLD_INPLACE = make_function(ROWS["threshold"], "ThresholdBackward1", "ThresholdInplace")


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; ``inplace=True`` overwrites the input."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _activation("elu", input, (alpha, 1.0, 1.0 / alpha), inplace, "elu", _CELU_INPLACE if inplace else _CELU)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place ``celu``."""
    return celu(input, alpha, inplace=True)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` where ``|input| > lambd``, else 0."""
    return _activation("hardshrink", input, (lambd,), False, "hardshrink")


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` moved ``lambd`` towards zero, and 0 where ``|input| <= lambd``."""
    if isinstance(input, Tensor) and input.is_floating_point() and lambd < 0:
        limit = float(np.finfo(input.dtype.numpy).max)
        raise RuntimeError(
            f"lambda must be in range [0, {limit:g}] for input dtype {input.dtype.scalar_name}, but found {lambd:g}"
        )
    return _activation("softshrink", input, (lambd,), False, "softshrink")


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where ``input <= threshold``, else ``input`` (integer tensors too)."""
    return _activation("threshold", input, (threshold, value), inplace, None,
                       _THRESHOLD_INPLACE if inplace else None)  # fmt: skip


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place ``threshold``."""
    return _activation("threshold", input, (threshold, value), True, None, _THRESHOLD_INPLACE)


class _RReLU(Function):
    """``input`` where positive, else ``input * slope`` with the slope drawn from ``U(lower, upper)`` per element in
    training, or ``(lower + upper) / 2`` in evaluation; one node (torch's ``RreluWithNoiseBackward0``) whose
    backward multiplies by the saved slopes."""

    node_name = "RreluWithNoiseBackward0"

    @staticmethod
    def forward(ctx, input: Tensor, lower: float, upper: float, training: bool) -> Tensor:
        if training:
            slope = ops.empty_like(input).uniform_(lower, upper)
        else:
            slope = ops.full_like(input, (lower + upper) / 2)
        noise = ops.where(input > 0, ops.ones_like(input), slope)
        ctx.save_for_backward(noise)
        return input * noise

    @staticmethod
    def backward(ctx, grad: Tensor):
        (noise,) = ctx.saved_tensors
        return grad * noise, None, None, None


class _RReLUInplace(_RReLU):
    node_name = "RreluWithNoiseBackward1"


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:  # fmt: skip
    """Randomized leaky ReLU: negative inputs scaled by a random slope in ``[lower, upper]`` (training), or by the
    mean slope (evaluation)."""
    if not isinstance(input, Tensor):
        raise not_a_tensor("rrelu", "input", 1, input)
    if not input.is_floating_point():
        raise NotImplementedError(f"\"leaky_relu_cpu\" not implemented for '{input.dtype.scalar_name}'")
    if inplace:
        return write_inplace(input, lambda old: _RReLUInplace.apply(old, lower, upper, training))
    return _RReLU.apply(input, lower, upper, training)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """In-place ``rrelu``."""
    return rrelu(input, lower, upper, training, inplace=True)


prelu = ops.prelu


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """Samples from the Gumbel-softmax distribution; ``hard=True`` returns one-hot samples whose gradient is the
    soft sample's (straight-through: ``y_hard - y_soft.detach() + y_soft``)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    exponential = _generator().exponential(size=tuple(logits.shape)).astype(logits._data.dtype)
    gumbels = -Tensor._make(logits._backend.from_host(exponential)).log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    d = dim % logits.dim() if logits.dim() else 0
    backend = y_soft._backend
    index = backend.arg_reduce(y_soft._data, "argmax", d, True) if logits.dim() else backend.zeros((), np.int64)
    ones = backend.full(index.shape, 1, y_soft._data.dtype)
    y_hard = Tensor._make(backend.put_along_axis_zeros(tuple(y_soft.shape), index, ones, d) if logits.dim() else ones)
    return y_hard - y_soft.detach() + y_soft


# --- distances ---------------------------------------------------------------------------------------------------
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    denom = input.norm(p, dim, keepdim=True).clamp(min=eps).expand_as(input)
    result = input / denom
    if out is not None:
        return out.copy_(result)
    return result


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 / ||x1|| * x2 / ||x2||)`` along ``dim``, each norm clamped to at least ``eps`` (as torch, dividing
    by the norms first keeps the result within [-1, 1])."""
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    a, b = x1.expand(*shape), x2.expand(*shape)
    if not a.is_floating_point():
        a, b = a.float(), b.float()
    na = a.norm(2, dim, keepdim=True).clone()
    nb = b.norm(2, dim, keepdim=True).clone()
    with no_grad():  # clamped in place outside autograd: the gradient is the unclamped norm's, as torch's
        na.clamp_(min=eps)
        nb.clamp_(min=eps)
    return ((a / na) * (b / nb)).sum(dim)


def pdist(input: Tensor, p: float = 2) -> Tensor:  # noqa: A002
    """The ``p``-norm distances between every pair of rows of a 2-D ``input`` (the upper triangle, row by row)."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    first, second = np.triu_indices(input.shape[0], 1)
    diff = input[Tensor._make(first.astype(np.int64))] - input[Tensor._make(second.astype(np.int64))]
    return diff.norm(p, 1)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim (node ``NormBackward1``)."""
    last = max(x1.dim(), x2.dim()) - 1
    return nn_ops.PNorm.apply(x1 - x2 + eps, float(p), max(last, 0), keepdim)


# --- dropout, embedding, one_hot, pad ------------------------------------------------------------------------------
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training only; otherwise
    the input itself comes back, as in torch)."""
    return _masked_dropout(input, p, training, inplace, feature=False, alpha=False)


_SELU_NEGATIVE_SATURATION = 1.7580993408473766  # -SELU(-inf) = scale * alpha


def _masked_dropout(input: Tensor, p: float, training: bool, inplace: bool, feature: bool, alpha: bool) -> Tensor:
    """torch's dropout family in one place: a keep mask per element, or per channel (``feature``: one draw for each
    (N, C) map, broadcast over the rest); kept values scaled by ``1 / (1 - p)``, or, for ``alpha`` dropout, the
    dropped ones set to SELU's negative saturation and the result shifted and scaled so that inputs of zero mean and
    unit variance keep them."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        zero = ops.zeros((), dtype=input.dtype, device=input.device)
        return input.mul_(zero) if inplace else input * zero
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature else tuple(input.shape)
    dt = input._data.dtype
    backend = input._backend
    keep = backend.dropout_keep(shape, p, dt, _generator())
    if not alpha:
        scale = Tensor._make(backend.elementwise(ROWS["mul"], [keep, dt.type(1.0 / (1.0 - p))], (), dt))
        return input.mul_(scale) if inplace else input * scale
    keep = backend.to_host(keep)
    a = 1.0 / math.sqrt((_SELU_NEGATIVE_SATURATION**2 * p + 1) * (1 - p))
    shift = ((keep - 1) * (_SELU_NEGATIVE_SATURATION * a) + _SELU_NEGATIVE_SATURATION * a * p).astype(dt)
    scale_t = Tensor._make(input._backend.from_host((keep * a).astype(dt)))
    shift_t = Tensor._make(input._backend.from_host(shift))
    return input.mul_(scale_t).add_(shift_t) if inplace else input * scale_t + shift_t


def _channel_dropout(name: str, input: Tensor, p: float, training: bool, inplace: bool, spatial: int) -> Tensor:
    """dropout1d/2d/3d: per-channel dropout of a (N, C, *spatial) input, or (C, *spatial) without a batch dim."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    dims = input.dim()
    unbatched = dims == spatial + 1
    if spatial == 1 and dims not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {dims}D input. Note that dropout1d exists to provide "
            "channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an optional batch "
            "dimension (i.e. 2D or 3D inputs)."
        )
    if spatial > 1 and dims not in (spatial + 1, spatial + 2):
        warnings.warn(
            f"{name}: Received a {dims}-D input to {name}, which is deprecated and will result in an error in a "
            f"future release. To retain the behavior and silence this warning, please use dropout instead. Note that "
            f"{name} exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, a channel "
            f"dimension, and an optional batch dimension (i.e. {spatial + 1}D or {spatial + 2}D inputs).",
            stacklevel=3,
        )
    if spatial == 2 and dims == 3:
        # torch keeps its historical reading of a 3-D input to dropout2d as batched 1-D maps, and says so
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
            "desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior will change "
            "in a future release to interpret the input as one without a batch dimension, i.e. shape (C, H, W). To "
            "maintain the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=3,
        )
        unbatched = False
    if unbatched:
        input = input.unsqueeze_(0) if inplace else input.unsqueeze(0)
    result = _masked_dropout(input, p, training, inplace, feature=True, alpha=False)
    if unbatched:
        result = result.squeeze_(0) if inplace else result.squeeze(0)
    return result


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, L) or (C, L) input with probability ``p``, scaling the rest."""
    return _channel_dropout("dropout1d", input, p, training, inplace, 1)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, H, W) or (C, H, W) input with probability ``p``, scaling the rest."""
    return _channel_dropout("dropout2d", input, p, training, inplace, 2)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input with probability ``p``, scaling the rest."""
    return _channel_dropout("dropout3d", input, p, training, inplace, 3)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped elements take SELU's negative saturation, then an affine map keeps zero
    mean and unit variance."""
    return _masked_dropout(input, p, training, inplace, feature=False, alpha=True)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """``alpha_dropout`` of whole channels."""
    return _masked_dropout(input, p, training, inplace, feature=True, alpha=True)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:  # fmt: skip
    """Rows of ``weight`` for the integer indices ``input``; ``padding_idx``'s row gets no gradient, ``max_norm``
    renormalizes the looked-up rows of ``weight`` in place first; with ``sparse`` the weight's gradient is a
    sparse COO tensor of the looked-up rows."""
    shape = weight._data.shape  # (the storage's plain tuple: a Size costs a microsecond a read)
    num = shape[0] if shape else weight.shape[0]  # (a 0-d weight: the Size's IndexError, as before)
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -num, "Padding_idx must be within num_embeddings"
            padding_idx = num + padding_idx
    if not isinstance(input, Tensor) or input.dtype.name not in ("int64", "int32"):
        found = input.dtype.scalar_name if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but "
            f"got numbagrad.{found}Tensor instead (while checking arguments for embedding)"
        )
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    if max_norm is not None:  # (the indices are checked before the renorm indexes with them; the op checks again)
        input._backend.check_index(input._data, 0, num, None, nn_ops._embedding_index_error)
        _embedding_renorm_(weight, input._host().astype(np.int64), max_norm, norm_type)
    if sparse:
        return nn_ops.SparseEmbedding.apply(weight, input, padding_idx, scale_grad_by_freq)
    return nn_ops.Embedding.apply(weight, input, padding_idx, scale_grad_by_freq)


def _embedding_renorm_(weight: Tensor, indices: np.ndarray, max_norm: float, norm_type: float) -> None:
    """torch's ``embedding_renorm_``: each looked-up row whose norm exceeds ``max_norm`` is scaled down to it."""
    with no_grad():
        rows = np.unique(indices)
        picked = weight[Tensor._make(rows)]
        norms = picked.norm(norm_type, 1, keepdim=True)
        scale = ops.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[Tensor._make(rows)] = picked * scale


class _EmbeddingBag(Function):
    """Sums, means or maxima of bags of ``weight``'s rows, in one node (torch's ``EmbeddingBagBackward0``).

    ``bags`` gives each index's bag and ``valid`` whether it counts (``padding_idx`` entries do not); the backward
    scatters the output gradient back to the rows with tensor ops, so it is differentiable again."""

    node_name = "EmbeddingBagBackward0"

    @staticmethod
    def forward(ctx, weight: Tensor, per_sample_weights, indices, bags, valid, num_bags: int, mode: str) -> Tensor:
        table = weight._host()
        rows = table[indices] * valid[:, None].astype(table.dtype)
        if per_sample_weights is not None:
            rows = rows * per_sample_weights._host()[:, None]
        out = np.zeros((num_bags, table.shape[1]), dtype=table.dtype)
        counts = np.bincount(bags[valid], minlength=num_bags).astype(table.dtype)
        winners = None
        if mode == "max":
            winners = np.full((num_bags, table.shape[1]), -1, dtype=np.int64)
            for position in np.flatnonzero(valid):
                bag, row = bags[position], rows[position]
                better = (winners[bag] < 0) | (row > out[bag])
                out[bag] = np.where(better, row, out[bag])
                winners[bag] = np.where(better, indices[position], winners[bag])
        else:
            np.add.at(out, bags, rows)
            if mode == "mean":
                out /= np.maximum(counts, 1)[:, None]
        ctx.save_for_backward(weight, per_sample_weights)
        ctx.indices, ctx.bags, ctx.valid, ctx.counts, ctx.winners, ctx.mode = (
            indices,
            bags,
            valid,
            counts,
            winners,
            mode,
        )
        return Tensor._make(weight._backend.from_host(out))

    @staticmethod
    def backward(ctx, grad: Tensor):
        weight, per_sample_weights = ctx.saved_tensors
        num, dim = weight.shape
        grad_weight = grad_psw = None
        if ctx.mode == "max":
            won = ctx.winners >= 0
            targets = (ctx.winners * dim + np.arange(dim))[won]
            flat = ops.zeros(num * dim, dtype=weight.dtype, device=weight.device)
            grad_weight = flat.index_add(0, Tensor._make(targets), grad[Tensor._make(won)]).reshape(num, dim)
            return grad_weight, None, None, None, None, None, None
        per_index, grad_psw = _EmbeddingBag._index_grads(ctx, grad, weight, per_sample_weights)
        if ctx.needs_input_grad[0]:
            grad_weight = ops.zeros_like(weight).index_add(0, Tensor._make(ctx.indices), per_index)
        return grad_weight, grad_psw, None, None, None, None, None

    @staticmethod
    def _index_grads(ctx, grad: Tensor, weight: Tensor, per_sample_weights) -> tuple:
        """Sum or mean: the gradient each looked-up row receives (one per index, zero for ``padding_idx``) and
        the gradient of ``per_sample_weights`` (None unless it is needed)."""
        scale = ctx.valid.astype(ctx.counts.dtype)
        if ctx.mode == "mean":
            scale = scale / np.maximum(ctx.counts, 1)[ctx.bags]
        per_index = grad[Tensor._make(ctx.bags)] * Tensor._make(scale.astype(weight._data.dtype)).unsqueeze(1)
        grad_psw = (per_index * weight[Tensor._make(ctx.indices)]).sum(1) if ctx.needs_input_grad[1] else None
        if per_sample_weights is not None:
            per_index = per_index * per_sample_weights.unsqueeze(1)
        return per_index, grad_psw


class _SparseEmbeddingBag(_EmbeddingBag):
    """``embedding_bag(sparse=True)`` (sum or mean): the weight's gradient is a sparse COO tensor with one stored
    row per looked-up index (``padding_idx``'s left out), as torch's."""

    node_name = "EmbeddingBagBackward0"
    _trusted = True  # (its weight gradient is sparse: the dense checks do not apply)

    @staticmethod
    def backward(ctx, grad: Tensor):
        weight, per_sample_weights = ctx.saved_tensors
        per_index, grad_psw = _EmbeddingBag._index_grads(ctx, grad, weight, per_sample_weights)
        grad_weight = None
        if ctx.needs_input_grad[0]:
            keep = np.flatnonzero(ctx.valid)
            rows = per_index[Tensor._make(keep)]
            at = Tensor._make(weight._backend.from_host(ctx.indices[keep].reshape(1, -1)))
            grad_weight = _SparseCOOTensor(at, rows, tuple(weight.shape))
        return grad_weight, grad_psw, None, None, None, None, None


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:  # fmt: skip
    """Reduce bags of embeddings without materialising them: a 2-D ``input`` holds one fixed-size bag per row; a 1-D
    ``input`` is cut into bags at ``offsets``. ``mode`` is ``'sum'``, ``'mean'`` or ``'max'``; ``padding_idx``
    entries count for nothing (an empty bag gives zeros). ``sparse`` (sum or mean): the weight's gradient is sparse."""
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it must have the "
            f"same shape as the input ({input.shape})"
        )
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length "
                "sequences. However, found offsets of type "
                + ("<class 'numbagrad.Tensor'>" if isinstance(offsets, Tensor) else str(type(offsets)))
            )
        num_bags, length = input.shape
        indices = input._host().reshape(-1).astype(np.int64)
        starts = np.arange(num_bags, dtype=np.int64) * length
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        indices = input._host().astype(np.int64)
        starts = offsets._host().astype(np.int64)
        if starts.size and starts[0] != 0:
            raise RuntimeError(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                f"However, got {starts[0]}\n[ numbagrad.LongTensor{{}} ]"
            )
        if starts.size and starts[-1] > indices.size:
            raise RuntimeError(
                f"offsets[-1] can not be greater than input's length ({indices.size}), but got offsets[-1] of "
                f"{starts[-1]}"
            )
        if include_last_offset:
            starts = starts[:-1]
        num_bags = starts.size
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}'). Please open a feature request on GitHub."
        )
    num = weight.shape[0]
    bad = np.flatnonzero((indices < 0) | (indices >= num))
    if bad.size:
        raise RuntimeError(
            f"Index {bad[0]} of input takes value {indices[bad[0]]} which is not in the valid range [0, {num})"
        )
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx %= num
    if max_norm is not None:
        _embedding_renorm_(weight, indices, max_norm, norm_type)
    bags = np.searchsorted(starts, np.arange(indices.size), side="right") - 1
    valid = indices != padding_idx if padding_idx is not None else np.ones(indices.size, dtype=bool)
    valid &= bags >= 0
    bags = np.maximum(bags, 0)
    node = _SparseEmbeddingBag if sparse else _EmbeddingBag
    return node.apply(weight, per_sample_weights, indices, bags, valid, num_bags, mode)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x1^T A_o x2 + b_o`` for each output feature ``o`` (``weight`` is (out, in1, in2)), over any leading dims."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and {input2.dim()}")
    for d in range(input1.dim() - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {d}: got {input1.shape[d]} and "
                f"{input2.shape[d]}"
            )
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but expected {weight.shape[1]}"
        )
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(
            f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but expected {weight.shape[2]}"
        )
    if bias is not None and bias.numel() != weight.shape[0]:
        raise RuntimeError(
            f"bilinear(): bias size does not match weight size: got {bias.numel()} but expected {weight.shape[0]}"
        )
    lead = tuple(input1.shape[:-1])
    flat1, flat2 = input1.reshape(-1, input1.shape[-1]), input2.reshape(-1, input2.shape[-1])
    out = ops.einsum("bi,oij,bj->bo", flat1, weight, flat2).reshape(*lead, weight.shape[0])
    return out if bias is None else out + bias


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot vectors of the class indices in ``tensor`` (a new last dim of ``num_classes``)."""
    if tensor.dtype.name != "int64":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    values = tensor._host()
    if num_classes == -1:
        if values.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(values.max()) + 1
    if values.size and values.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if values.size and values.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros((*values.shape, num_classes), np.int64)
    np.put_along_axis(out, values[..., None], 1, axis=-1)
    return Tensor._make(tensor._backend.from_host(out))


def pad(input: Tensor, pad: list, mode: str = "constant", value: float | None = None) -> Tensor:  # noqa: A002
    """Pad the last ``len(pad) // 2`` dims (last dim first, ``(left, right)`` each); negative pads crop. Modes
    other than ``constant`` copy input elements: mirrored (``reflect``), the edge (``replicate``) or wrapped
    around (``circular``), over the last 1, 2 or 3 dims of a batched or unbatched input."""
    pads = tuple(int(p) for p in pad)
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pads) // 2 > input.dim():
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but got padding length "
            f"{len(pads)} and input of dimension {input.dim()}"
        )
    if mode != "constant":
        return _index_pad(input, pads, mode, value)
    size = list(input.shape)
    for d in range(input.dim() - len(pads) // 2, input.dim()):  # torch first narrows by the negative pads
        for p in pads[2 * (input.dim() - 1 - d) : 2 * (input.dim() - d)]:
            if p < 0:
                size[d] += p
                if size[d] < 0:
                    raise RuntimeError("narrow(): length must be non-negative.")
    shape, _, _ = nn_ops.pad_geometry(tuple(input.shape), pads)
    for k, size in enumerate(shape):
        if size < 0:
            raise RuntimeError(
                f"The input size {input.shape[k]}, plus negative padding {pads[2 * (input.dim() - 1 - k)]} and "
                f"{pads[2 * (input.dim() - 1 - k) + 1]} resulted in a negative output size, which is invalid. Check "
                f"dimension {k} of your input."
            )
    fill = 0 if value is None else value
    return nn_ops.ConstantPad.apply(input, pads, fill)


def _index_pad(input: Tensor, pads: tuple, mode: str, value) -> Tensor:
    """``reflect``/``replicate``/``circular`` padding: torch's checks, then one gather per padded dim."""
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pads) // 2
    if k not in (1, 2, 3) or input.dim() not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pads)} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    shape = tuple(input.shape)
    if mode != "circular" and any(s == 0 for s in shape[1:]):
        raise RuntimeError(
            f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and other non-zero "
            f"dimensions for input, but got: {list(shape)}"
        )
    if mode == "circular":  # torch's checks, first spatial dim first
        for i in reversed(range(k)):
            left, right, size = pads[2 * i], pads[2 * i + 1], shape[input.dim() - 1 - i]
            if left > size or right > size:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if size + left + right < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
    out_shape = list(shape)
    for i in range(k):
        dim = input.dim() - 1 - i
        left, right, size = pads[2 * i], pads[2 * i + 1], shape[dim]
        out_shape[dim] = size + left + right
        if mode == "reflect" and (left >= size or right >= size):
            raise RuntimeError(
                f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding input dimension, but got: "
                f"padding ({left}, {right}) at dimension {dim} of input {list(shape)}"
            )
    if mode != "circular" and k < 3:  # the reflect and replicate kernels' check of the output width (and height)
        hw = shape[-k:]
        out = [s + pads[2 * (k - 1 - j)] + pads[2 * (k - 1 - j) + 1] for j, s in enumerate(hw)]
        if all(o < 1 for o in out):
            names = ("H", "W")[2 - k :]
            sizes = ", ".join(f"{a}: {v}" for a, v in zip(names, hw))
            raise RuntimeError(
                f"input ({sizes}{' ' if k == 2 and mode == 'replicate' else ''}) is too small. Calculated output "
                + " ".join(f"{a}: {v}" for a, v in zip(names, out))
            )
    for d in range(input.dim()):
        if out_shape[d] < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {out_shape[d]}: {out_shape}")
    indices = []
    for i in range(k):
        dim = input.dim() - 1 - i
        positions = _pad_positions(shape[dim], pads[2 * i], pads[2 * i + 1], mode)
        if (positions < 0).any():  # torch's copies would read elements not written yet
            raise RuntimeError("Padding value causes wrapping around more than once.")
        indices.append((dim, positions))
    return nn_ops.PAD_NODES[mode, k].apply(input, nn_ops._IndexPadMaps(shape, tuple(indices)))


def _pad_positions(size: int, left: int, right: int, mode: str) -> np.ndarray:
    """The source position of each output position along one dim (negative pads crop first)."""
    if mode == "circular":  # torch's steps: the cropped input in the middle, then copies of the output's slices
        n = size + left + right
        pos = np.full(n, -1, np.int64)
        lo, hi = max(left, 0), n - max(right, 0)
        pos[lo:hi] = np.arange(max(-left, 0), size - max(-right, 0))
        if left > 0:
            pos[:left] = pos[n - left - max(right, 0) : hi].copy()
        if right > 0:
            pos[n - right :] = pos[lo : lo + right].copy()
        return pos
    j = np.arange(-left, size + right, dtype=np.int64)
    if mode == "replicate":
        return np.clip(j, 0, size - 1)
    j = np.abs(j)  # reflect about the first element, then the last
    return np.where(j >= size, 2 * (size - 1) - j, j)


# --- normalization -----------------------------------------------------------------------------------------------
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize over the trailing ``normalized_shape`` dims (then ``* weight + bias``), in one fused node."""
    if isinstance(normalized_shape, int):  # (the LayerNorm module takes an int; the function a sequence)
        raise TypeError("layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not int")
    shape = tuple(normalized_shape)
    k = len(shape)
    ishape = input._data.shape  # plain tuples: cheaper than Size in the hot path
    if k == 0 or len(ishape) < k or ishape[len(ishape) - k :] != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [*, {', '.join(map(str, shape))}], but "
            f"got input of size{list(ishape)}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t._data.shape != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{list(t.shape)} and normalized_shape = {list(shape)}"
            )
    n = shape[0] if k == 1 else math.prod(shape)
    return nn_ops.LayerNorm.apply(input, weight, bias, shape, n, eps)


def _check_normalized_shape(input: Tensor, shape: tuple) -> None:
    """rms_norm's check; its message has no comma after the ``*`` (layer_norm's has one)."""
    ishape = tuple(input.shape)
    k = len(shape)
    if k == 0 or len(ishape) < k or ishape[len(ishape) - k :] != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [*{', '.join(map(str, shape))}], but "
            f"got input of size{list(ishape)}"
        )


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """``input / sqrt(mean(input ** 2) + eps)`` over the trailing ``normalized_shape`` dims (then ``* weight``);
    ``eps`` defaults to the machine epsilon of the input's dtype, as torch's."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    _check_normalized_shape(input, shape)
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(
            f"Expected weight to be of same shape as normalized_shape, but got weight of shape {list(weight.shape)} "
            f"and normalized_shape = {list(shape)}"
        )
    if eps is None:
        eps = float(np.finfo(input.dtype.numpy).eps) if input.is_floating_point() else float(np.finfo(np.float32).eps)
    dims = tuple(range(input.dim() - len(shape), input.dim()))
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Divide each element by ``(k + alpha * mean of squares over size neighbouring channels) ** beta``; the window
    is centred as torch's (``size // 2`` channels before, ``(size - 1) // 2`` after, zero-padded)."""
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    channels = input.shape[1]
    square = input * input
    last = (0, *range(2, dim), 1)  # channels last, where pad's first pair applies
    back = (0, dim - 1, *range(1, dim - 1))
    padded = pad(square.permute(*last), (size // 2, (size - 1) // 2)).permute(*back)
    window = padded.narrow(1, 0, channels)
    for offset in range(1, size):
        window = window + padded.narrow(1, offset, channels)
    div = (window / size * alpha + k) ** beta
    return input / div


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize each channel (dim 1) by the batch statistics (training, updating the running ones in place with
    ``momentum``, the variance unbiased) or by the running statistics (eval)."""
    if not isinstance(momentum, (int, float)):  # (the modules' ``momentum=None``, a cumulative mean, is theirs)
        raise TypeError(f"batch_norm(): argument 'momentum' (position 7) must be float, not {type(momentum).__name__}")
    _check_batch_norm(input, running_mean, running_var, weight, bias, training)
    out = nn_ops.BatchNorm.apply(input, weight, bias, running_mean, running_var, training, momentum, eps, None)
    return _channels_last_as(out, input)


def _channels_last_order(a) -> tuple | None:
    """The channels-last axis order of a 4-d or 5-d storage array with channels-last-like strides, else None."""
    return _suggested_order(a.shape, a.strides, a.dtype.itemsize)


def _channels_last_as(out: Tensor, *inputs) -> Tensor:
    """``out`` laid out channels-last when one of ``inputs`` (4-d or 5-d, of ``out``'s rank) is channels-last-like,
    as torch's CPU kernels of convolution, batch norm and pooling write it; else as it is."""
    for t in inputs:
        if t is not None and t.dim() == out.dim() and t.dim() in (4, 5):
            order = _channels_last_order(t._data)
            if order is not None:
                out._data = layout.in_order(out._data, order, out._backend.copy)
                return out
    return out


@functools.lru_cache(maxsize=1024)
def _suggested_order(shape: tuple, strides: tuple, itemsize: int) -> tuple | None:
    """The channels-last axis order when an array of ``shape`` and byte ``strides`` has channels-last-like strides
    (``layout.suggested_order``), else None: cached, since a model's convolutions, norms and pools see the same
    few layouts every step (4 us a call otherwise, twice per convolution)."""
    if layout.strides_like_channels_last(shape, tuple(st // itemsize for st in strides)):
        return layout.FORMAT_ORDERS["channels_last" if len(shape) == 4 else "channels_last_3d"][len(shape)]
    return None


def _check_batch_norm(input: Tensor, running_mean, running_var, weight, bias, training: bool) -> None:
    """torch's checks of ``batch_norm``'s arguments (the BatchNorm modules make them too), read from the storages'
    shapes and dtypes (every training step's norm makes them)."""
    shape = input._data.shape
    if training:
        if math.prod(shape[:1]) * math.prod(shape[2:]) == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    if len(shape) < 2:
        raise ValueError(f"expected 2D or 3D input (got {len(shape)}D input)")
    c = shape[1]
    dtype = input._data.dtype
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and t._data.size != c:  # (in torch's order)
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    first = None  # the first parameter given: the others must have its dtype
    for t in (weight, bias, running_mean, running_var):
        if t is not None:
            if first is None:
                first = t
            elif t._data.dtype != first._data.dtype:
                raise RuntimeError(f"expected scalar type {first.dtype.scalar_name} but found {t.dtype.scalar_name}")
    if first is not None and first._data.dtype != dtype:  # mixed: only a 2-byte float input with float32 parameters
        if first._data.dtype != np.float32:
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        if dtype.itemsize >= 4:
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize each group of ``C / num_groups`` channels of each sample (then a per-channel affine); a group
    of one value per sample is torch's ValueError."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    c = input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{list(input.shape)} and num_groups={num_groups}"
        )
    sizes = [input.shape[0] * c // num_groups, num_groups, *input.shape[2:]]
    if int(np.prod([sizes[0], *sizes[2:]])) == 1:  # (torch counts the values per channel of this layout)
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {sizes}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.dim() != 1 or t.numel() != c):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got {name} "
                f"of shape {list(t.shape)} and input of shape {list(input.shape)}"
            )
    return nn_ops.GroupNorm.apply(input, weight, bias, num_groups, eps)


# --- convolution and pooling ---------------------------------------------------------------------------------------
def _tuple(value, n: int, name: str) -> tuple:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"convolution dimensions, but got {name}={list(value)}")  # fmt: skip
    return value


def _conv_shapes(input: Tensor, weight: Tensor, bias, groups: int, dims: int, name: str, transposed: bool) -> tuple:
    """torch's checks of a convolution's operands, in torch's order: (batched input shape, unbatched?)."""
    batched_dim = dims + 2
    if input.dim() not in (batched_dim - 1, batched_dim):
        raise RuntimeError(
            f"Expected {batched_dim - 1}D (unbatched) or {batched_dim}D (batched) input to {name}, but got input of "
            f"size: {list(input.shape)}"
        )
    if weight.dim() != batched_dim:
        raise RuntimeError(
            f"Expected {batched_dim}-dimensional input for {batched_dim}-dimensional weight {list(weight.shape)}, "
            f"but got {input.dim()}-dimensional input of size {list(input.shape)} instead"
        )
    unbatched = input.dim() == batched_dim - 1
    shape = (1, *input.shape) if unbatched else tuple(input.shape)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] < groups or weight.shape[0] % groups:
        least = "at least" if weight.shape[0] < groups else "divisible by"
        size = f"{list(weight.shape)}" if least == "at least" else f"[{list(weight.shape)}]"  # sic: torch's brackets
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be {least} {groups} at dimension 0, but got weight of size "
            f"{size} instead"
        )
    given = f"transposed=1, weight of size {list(weight.shape)}" if transposed else (
        f"groups={groups}, weight of size {list(weight.shape)}"
    )  # fmt: skip
    channels = weight.shape[0] if transposed else weight.shape[1] * groups
    if shape[1] != channels:
        raise RuntimeError(
            f"Given {given}, expected input{list(shape)} to have {channels} channels, but got {shape[1]} channels "
            "instead"
        )
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(
            f"Given {'transposed=1, ' if transposed else ''}weight of size {list(weight.shape)}, expected bias to be "
            f"1-dimensional with {out_channels} elements, but got bias of size {list(bias.shape)} instead"
        )
    if weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.scalar_name} but found {weight.dtype.scalar_name}")
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(f"Input type ({_type_name(input)}) and bias type ({_type_name(bias)}) should be the same")
    return shape, unbatched


def _geometry(big_shape: tuple, small_shape: tuple, kernel, stride, pads, dilation, groups: int, dims: int):
    """The convolution geometry from the large side to the small one (1-d as 2-d of height 1)."""
    out = tuple(small_shape[2:])
    in_shape = tuple(big_shape)
    lead = [p for p, _ in pads]
    if dims == 1:
        kernel, stride, dilation, lead = (1, *kernel), (1, *stride), (1, *dilation), [0, *lead]
        out, in_shape = (1, *out), (*in_shape[:2], 1, *in_shape[2:])
    return nn_ops.ConvGeometry(tuple(kernel), tuple(stride), tuple(lead), tuple(dilation), groups, out, in_shape,
                               tuple(big_shape), tuple(small_shape))  # fmt: skip


def _conv(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int, dims: int) -> Tensor:
    if state.autocast is not None:  # every convolution is on torch's autocast lower-precision list
        input, weight, bias = autocast_to(None, input, weight, bias)
    shape, unbatched = _conv_shapes(input, weight, bias, groups, dims, f"conv{dims}d", False)
    stride = _tuple(stride, dims, "stride")
    dilation = _tuple(dilation, dims, "dilation")
    kernel = tuple(weight.shape[2:])
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * dims
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = []
            for d, k in zip(dilation, kernel):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pads = [(p, p) for p in _tuple(padding, dims, "padding")]
        if any(p < 0 for p, _ in pads):
            raise RuntimeError("negative padding is not supported")
    spatial = shape[2:]
    padded = [s + a + b for s, (a, b) in zip(spatial, pads)]
    effective = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    if any(p < e for p, e in zip(padded, effective)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, effective))}). Kernel size can't be greater than actual input size"
        )
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, effective, stride))
    geom = _geometry(shape, (shape[0], weight.shape[0], *out), kernel, stride, pads, dilation, groups, dims)
    if unbatched:  # torch unsqueezes, convolves and squeezes (node SqueezeBackward1)
        return nn_ops.Convolution.apply(input.unsqueeze(0), weight, bias, geom).squeeze(0)
    return nn_ops.Convolution.apply(input, weight, bias, geom)


def _conv_transpose(input: Tensor, weight: Tensor, bias, stride, padding, output_padding, groups: int, dilation,
                    dims: int) -> Tensor:  # fmt: skip
    if state.autocast is not None:
        input, weight, bias = autocast_to(None, input, weight, bias)
    shape, unbatched = _conv_shapes(input, weight, bias, groups, dims, f"conv_transpose{dims}d", True)
    stride = _tuple(stride, dims, "stride")
    padding = _tuple(padding, dims, "padding")
    output_padding = _tuple(output_padding, dims, "output_padding")
    dilation = _tuple(dilation, dims, "dilation")
    kernel = tuple(weight.shape[2:])
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(k <= 0 for k in kernel):
        axes = ("depth", "height", "width")[3 - dims :]
        raise RuntimeError(
            "kernel size should be greater than zero, but got "
            + " ".join(f"kernel_{a}: {k}" for a, k in zip(axes, kernel))
        )
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        lead = (0, 1, 1) if dims == 1 else ()  # torch runs a 1-d one as a 2-d one of height 1
        axes = ("depth", "height", "width")[3 - max(dims, 2) :]
        parts = [f"output_padding_{a}: {v}" for a, v in zip(axes, (*lead[:1], *output_padding))]
        parts += [f"stride_{a}: {v}" for a, v in zip(axes, (*lead[1:2], *stride))]
        parts += [f"dilation_{a}: {v}" for a, v in zip(axes, (*lead[2:], *dilation))]
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got {' '.join(parts)}")
    spatial = shape[2:]
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                for i, s, p, d, k, op in zip(spatial, stride, padding, dilation, kernel, output_padding))  # fmt: skip
    if any(o <= 0 for o in out):
        lead = (1,) if dims == 1 else ()  # torch runs a 1-d one as a 2-d one of height 1
        raise RuntimeError(
            f"Given input size per channel: ({' x '.join(map(str, lead + spatial))}). Calculated output size per "
            f"channel: ({' x '.join(map(str, lead + out))}). Output size is too small"
        )
    big = (shape[0], weight.shape[1] * groups, *out)
    geom = _geometry(big, shape, kernel, stride, [(p, p) for p in padding], dilation, groups, dims)
    if unbatched:
        return nn_ops.ConvolutionTranspose.apply(input.unsqueeze(0), weight, bias, geom).squeeze(0)
    return nn_ops.ConvolutionTranspose.apply(input, weight, bias, geom)


def _type_name(t: Tensor) -> str:
    return {"float32": "float", "float64": "double"}.get(t.dtype.name, t.dtype.name)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:  # fmt: skip
    """1-d convolution (cross-correlation) of (N, C, L) by (O, C / groups, k), in one node."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:  # fmt: skip
    """2-d convolution (cross-correlation) of (N, C, H, W) by (O, C / groups, kh, kw): im2col and BLAS, one
    node; channels-last when the input or the weight is, as torch's."""
    return _channels_last_as(_conv(input, weight, bias, stride, padding, dilation, groups, 2), input, weight)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:  # fmt: skip
    """3-d convolution (cross-correlation) of (N, C, D, H, W) by (O, C / groups, kd, kh, kw), in one node: its
    columns are two 2-d im2col passes (depth windows, then height-width windows)."""
    return _channels_last_as(_conv(input, weight, bias, stride, padding, dilation, groups, 3), input, weight)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-d convolution of (time, batch, channels) input by a (kernel width, in, out) weight, ``pad`` zeros at
    both ends of time (torch's ``conv_tbc``): ``conv1d`` on the transposed operands, differentiable as it is."""
    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.dim() != 1 or bias.shape[0] != weight.shape[2]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    return ConvTbc.apply(input, weight, bias, int(pad))


class ConvTbc(Function):
    """``conv_tbc`` as one node (torch's ``ConvTbcBackward0``): the gradients are the usual convolution ones,
    computed with differentiable convolutions."""

    node_name = "ConvTbcBackward0"

    @staticmethod
    def forward(ctx, input: Tensor, weight: Tensor, bias: Tensor, pad: int) -> Tensor:
        ctx.pad = pad
        ctx.save_for_backward(input, weight)
        w = weight.permute(2, 1, 0)  # (out, in, kernel width)
        return conv1d(input.permute(1, 2, 0), w, bias, padding=pad).permute(2, 0, 1).contiguous()

    @staticmethod
    def backward(ctx, g: Tensor):
        input, weight = ctx.saved_tensors
        pad = ctx.pad
        g_bct = g.permute(1, 2, 0)  # (batch, out, time)
        w = weight.permute(2, 1, 0)
        gx = conv_transpose1d(g_bct, w, padding=pad).permute(2, 0, 1)
        gw = conv1d(input.permute(2, 1, 0), g_bct.transpose(0, 1), padding=pad)  # (in, out, kernel width)
        return gx, gw.permute(2, 0, 1), g.sum((0, 1)), None


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:  # fmt: skip
    """1-d transposed convolution of (N, C_in, L) by (C_in, C_out / groups, k): the gradient of ``conv1d`` with
    respect to its input, one node."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:  # fmt: skip
    """2-d transposed convolution of (N, C_in, H, W) by (C_in, C_out / groups, kh, kw): the gradient of
    ``conv2d`` with respect to its input, one node."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:  # fmt: skip
    """3-d transposed convolution of (N, C_in, D, H, W) by (C_in, C_out / groups, kd, kh, kw): the gradient of
    ``conv3d`` with respect to its input, one node."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3)


# --- resampling: interpolate and adaptive average pooling in 1 and 3 dims --------------------------------------------
_RESAMPLE_MODES = {  # (mode, spatial dims) -> (matrix kind, torch's node)
    **{("nearest", k): ("nearest", f"UpsampleNearest{k}DBackward0") for k in (1, 2, 3)},
    **{("nearest-exact", k): ("nearest-exact", f"UpsampleNearestExact{k}DBackward0") for k in (1, 2, 3)},
    ("linear", 1): ("linear", "UpsampleLinear1DBackward0"),
    ("bilinear", 2): ("linear", "UpsampleBilinear2DBackward0"),
    ("trilinear", 3): ("linear", "UpsampleTrilinear3DBackward0"),
    ("bicubic", 2): ("cubic", "UpsampleBicubic2DBackward0"),
}
_NEEDS = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _resample(input: Tensor, kind: str, node: str, out: tuple, align_corners: bool, scales,
              antialias: bool = False) -> Tensor:  # fmt: skip
    """``input`` resampled to ``out`` over its trailing dims, one matrix per dim."""
    k, dtype = len(out), input._data.dtype
    legacy = k == 2  # torch's 2-d nearest forward takes its backward kernels' older picks; 1-d and 3-d do not
    same = tuple(input.shape[-k:]) == tuple(out)  # (torch's bicubic backward then copies the gradient)
    mats = []
    for i, (size, new) in enumerate(zip(input.shape[-k:], out)):
        scale = None if scales is None else scales[i]
        if antialias:
            m = back = nn_ops.antialiased_matrix(kind, size, new, align_corners, scale, dtype)
        else:
            m = nn_ops.resample_matrix(kind, size, new, align_corners, scale, dtype, legacy)
            back = nn_ops.resample_matrix(kind, size, new, align_corners, scale, dtype, True)
            if kind == "cubic" and same:
                back = np.eye(size)
        mats.append((input.dim() - k + i, m, back))
    return nn_ops.RESAMPLE_NODES[node].apply(input, tuple(mats))


def _check_resample_sizes(input: Tensor, out, gap: str = "") -> None:
    spatial = tuple(input.shape[2:])
    if any(s <= 0 for s in out) or any(s <= 0 for s in spatial):
        axes = ("D", "H", "W")[3 - len(out) :]
        shown = lambda sizes: ", ".join(f"{a}: {s}" for a, s in zip(axes, sizes))  # noqa: E731
        raise RuntimeError(
            f"Input and output sizes should be greater than 0, but got input ({shown(spatial)}){gap} output "
            f"({shown(out)})"
        )


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:  # fmt: skip
    """Resample the spatial dims of (N, C, *spatial) ``input`` to ``size`` or by ``scale_factor``: ``nearest``,
    ``nearest-exact``, ``linear``/``bilinear``/``trilinear``, ``bicubic`` (1, 2 and 3 spatial dims
    respectively) or ``area`` (adaptive average pooling), with torch's source positions and weights."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
                "trilinear"
            )
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    scales = None
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got input with spatial "
                    f"dimensions of {list(input.shape[2:])} and output size of {size}. Please provide input tensor in "
                    "(N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format."
                )
            if not all(isinstance(s, (int, np.integer)) for s in size):
                raise TypeError(
                    "expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, int], but got "
                    f"size with types {[type(s) for s in size]}"
                )
            out = [int(s) for s in size]
        else:
            out = [int(size)] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                    f"spatial dimensions of {list(input.shape[2:])} and scale_factor of shape {scale_factor}. Please "
                    "provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) "
                    "format."
                )
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out = [int(math.floor(s * f)) for s, f in zip(input.shape[2:], scales)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor or mode == "area":
        scales = None  # the output size alone decides the positions
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input"
        )
    if antialias and mode in ("bilinear", "bicubic"):
        _check_resample_sizes(input, out)
        kind, node = _RESAMPLE_MODES[mode, 2]
        return _resample(input, kind, node.replace("2D", "2DAa"), tuple(out), bool(align_corners), scales, True)
    if mode == "lanczos" and input.dim() == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
        raise NotImplementedError("numbagrad's interpolate has no lanczos mode")
    if mode == "area" and dim in (1, 2, 3):
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dim - 1](input, out)
    if (mode, dim) in _RESAMPLE_MODES:
        _check_resample_sizes(input, out, " and" if dim == 1 else "")
        kind, node = _RESAMPLE_MODES[mode, dim]
        return _resample(input, kind, node, tuple(out), bool(align_corners), scales)
    if mode in _NEEDS and dim in (1, 2, 3):
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {_NEEDS[mode]}D input")
    raise NotImplementedError(
        f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the modes: nearest | "
        f"linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got {mode})"
    )


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None):
    """Deprecated alias of ``interpolate`` (torch warns the same)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Mean over ``output_size`` windows spanning the last dim (torch: a 2-d pool of height 1)."""
    if input.dim() not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d() argument 'input' (position 1) must be 2D or 3D, got {input.dim()}D")
    size = output_size[0] if isinstance(output_size, (list, tuple)) else output_size
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, int(size))).squeeze(-2)


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Mean over ``output_size`` windows spanning the last three dims (``None`` keeps that dim's size)."""
    if input.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    sizes = (output_size,) * 3 if isinstance(output_size, int) or output_size is None else tuple(output_size)
    out = tuple(input.shape[-3 + i] if s is None else int(s) for i, s in enumerate(sizes))
    if out == (1, 1, 1):  # torch takes the mean (node MeanBackward1)
        return input.mean((-1, -2, -3), keepdim=True)
    return _resample(input, "area", "AdaptiveAvgPool3DBackward0", out, False, None)


# --- rearrangements: pixel and channel shuffles, fold and unfold ------------------------------------------------------
def _shuffle_factor(input: Tensor, factor: int, name: str, kind: str) -> None:
    if input.dim() < 3:
        raise RuntimeError(
            f"{name} expects input to have at least 3 dimensions, but got input with {input.dim()} dimension(s)"
        )
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {kind}, but got {factor}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): each group of r * r channels becomes an r x r block."""
    r = int(upscale_factor)
    _shuffle_factor(input, r, "pixel_shuffle", "upscale_factor")
    c = input.shape[-3]
    if c % (r * r):
        raise RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
            f"but input.size(-3)={c} is not divisible by {r * r}"
        )
    return nn_ops.PixelShuffle.apply(input, r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W): the inverse of ``pixel_shuffle``."""
    r = int(downscale_factor)
    _shuffle_factor(input, r, "pixel_unshuffle", "downscale_factor")
    for name, d in (("height", -2), ("width", -1)):
        if input.shape[d] % r:
            raise RuntimeError(
                f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but input.size({d})="
                f"{input.shape[d]} is not divisible by {r}"
            )
    return nn_ops.PixelUnshuffle.apply(input, r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, C, *) with the channels of ``groups`` groups interleaved (ShuffleNet's channel shuffle)."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    return nn_ops.ChannelShuffle.apply(input, int(groups))


native_channel_shuffle = channel_shuffle


def _block_args(kernel_size, dilation, padding, stride) -> tuple:
    """fold/unfold's (kernel, dilation, padding, stride) pairs, with torch's checks."""
    args = []
    for name, value in (("kernel_size", kernel_size), ("dilation", dilation), ("padding", padding),
                        ("stride", stride)):  # fmt: skip
        pair = (int(value),) * 2 if isinstance(value, int) else tuple(int(v) for v in value)
        if len(pair) != 2:
            raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(pair)}")
        args.append(pair)
    kernel, dilation, padding, stride = args
    checks = (("kernel size", "kernel", kernel, 1, "greater than zero"), ("dilation", "dilation", dilation, 1,
              "greater than zero"), ("padding", "pad", padding, 0, "non-negative"),
              ("stride", "stride", stride, 1, "greater than zero"))  # fmt: skip
    for label, short, pair, least, words in checks:
        if min(pair) < least:
            raise RuntimeError(f"{label} should be {words}, but got {short}_height: {pair[0]} {short}_width: {pair[1]}")
    return kernel, dilation, padding, stride


def _blocks(spatial, kernel, dilation, padding, stride) -> tuple:
    return tuple((s + 2 * p - (d * (k - 1) + 1)) // st + 1
                 for s, k, d, p, st in zip(spatial, kernel, dilation, padding, stride))  # fmt: skip


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding blocks of (N, C, H, W) input as columns: (N, C * kh * kw, L) (im2col), one node."""
    kernel, dilation, padding, stride = _block_args(kernel_size, dilation, padding, stride)
    if input.dim() not in (3, 4) or any(s == 0 for s in input.shape[1:]):
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
            f"input, but got: {list(input.shape)}"
        )
    x = input.unsqueeze(0) if input.dim() == 3 else input  # (only its shape is used)
    out = _blocks(x.shape[2:], kernel, dilation, padding, stride)
    if min(out) < 1:
        raise RuntimeError(
            f"Given input with spatial size {tuple(x.shape[2:])}, kernel_size={kernel}, dilation={dilation}, "
            f"padding={padding}, calculated shape of the array of sliding blocks as {out}, but its components must "
            "be at least one."
        )
    c = x.shape[1]
    cols_shape = (*input.shape[:-3], c * kernel[0] * kernel[1], out[0] * out[1])
    plane = nn_ops._Plane(tuple(x.shape), kernel, stride, padding, dilation, out, tuple(input.shape), cols_shape)
    return nn_ops.Im2Col.apply(input, plane.im2col, plane.col2im)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Columns (N, C * kh * kw, L) summed back into (N, C, *output_size) (col2im, the adjoint of ``unfold``)."""
    size = (int(output_size),) * 2 if isinstance(output_size, int) else tuple(int(v) for v in output_size)
    if len(size) != 2:
        raise RuntimeError(f"It is expected output_size equals to 2, but got size {len(size)}")
    kernel, dilation, padding, stride = _block_args(kernel_size, dilation, padding, stride)
    if input.dim() not in (2, 3) or any(s == 0 for s in input.shape[1:]):
        raise RuntimeError(
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for "
            f"input, but got: {list(input.shape)}"
        )
    n, k, length = (1, *input.shape) if input.dim() == 2 else input.shape
    if k % (kernel[0] * kernel[1]):
        raise RuntimeError(
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
            f"input.size(1)={k} and kernel_size={kernel}."
        )
    out = _blocks(size, kernel, dilation, padding, stride)
    if out[0] * out[1] != length:
        raise RuntimeError(
            f"Given output_size={size}, kernel_size={kernel}, dilation={dilation}, padding={padding}, "
            f"stride={stride}, expected size of input's dimension 2 to match the calculated number of sliding blocks "
            f"{out[0]} * {out[1]} = {out[0] * out[1]}, but got input.size(2)={length}."
        )
    shape = (n, k // (kernel[0] * kernel[1]), *size)
    image_shape = shape[1:] if input.dim() == 2 else shape
    plane = nn_ops._Plane(shape, kernel, stride, padding, dilation, out, image_shape, tuple(input.shape))
    return nn_ops.Col2Im.apply(input.contiguous(), plane.col2im, plane.im2col)


# --- instance normalization ------------------------------------------------------------------------------------------
def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize each (sample, channel) over its spatial elements: torch's batch norm of the input seen as one
    sample of N * C channels; the running statistics (if given) take the mean of the N samples' updates."""
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    n, c = input.shape[:2]
    repeated = [None if t is None else t.repeat(n) for t in (weight, bias, running_mean, running_var)]
    x = input.contiguous().view(1, n * c, *input.shape[2:])
    out = nn_ops.BatchNorm.apply(x, *repeated, use_input_stats, momentum, eps, None)
    with no_grad():
        for stat, updated in ((running_mean, repeated[2]), (running_var, repeated[3])):
            if stat is not None:
                stat.copy_(updated.view(n, c).mean(0))
    return out.view(input.shape)


# --- pooling in 1 and 3 dims -----------------------------------------------------------------------------------------
def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):  # fmt: skip
    """Max over windows of the last dim (torch: a 2-d pool of height 1); indices are positions in that dim."""
    if input.dim() not in (2, 3):
        raise RuntimeError(
            "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:"
            f"{list(input.shape)}"
        )
    (k,), (p,), (d,) = (
        _tuple(kernel_size, 1, "kernel_size"),
        _tuple(padding, 1, "padding"),
        _tuple(dilation, 1, "dilation"),
    )
    (s,) = (k,) if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _tuple(stride, 1, "stride")
    if not return_indices and p > k // 2:  # (with indices, torch checks as the 2-d pool)
        raise RuntimeError(
            f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and kernel_size={k}"
        )
    size = _pool_size(input.shape[-1], k, p, s, d, ceil_mode)
    if not return_indices and size < 1:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {size}")
    out = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:  # fmt: skip
    """Mean over windows of the last dim (torch: a 2-d pool of height 1)."""
    if input.dim() not in (2, 3):
        raise RuntimeError(
            f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional tensor for argument #1 'self' (while "
            "checking arguments for avg_pool1d)"
        )
    (k,), (p,) = _tuple(kernel_size, 1, "kernel_size"), _tuple(padding, 1, "padding")
    (s,) = (k,) if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _tuple(stride, 1, "stride")
    return avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad).squeeze(-2)


def _pool3d_args(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool, name: str) -> tuple:
    """3-d pooling's (kernel, stride, padding, dilation, output size), with torch's checks in torch's order."""
    if input.dim() not in (4, 5) or input.numel() == 0:
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    kernel = _tuple(kernel_size, 3, "kernel_size")
    empty = stride is None or (not isinstance(stride, int) and len(stride) == 0)
    stride = kernel if empty else _tuple(stride, 3, "stride")
    padding, dilation = _tuple(padding, 3, "padding"), _tuple(dilation, 3, "dilation")
    spatial = tuple(input.shape[-3:])
    if name == "avg_pool3d" and any(s < k for s, k in zip(spatial, kernel)):
        raise RuntimeError(
            "input image (T: {} H: {} W: {}) smaller than kernel size (kT: {} kH: {} kW: {})".format(*spatial, *kernel)
        )
    for p, k, d in zip(padding, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and "
                f"dilation={d}"
            )
    out = tuple(_pool_size(*a, ceil_mode) for a in zip(spatial, kernel, padding, stride, dilation))
    if min(out) < 1:
        c = input.shape[-4]
        raise RuntimeError(
            f"Given input size: ({c}x{'x'.join(map(str, spatial))}). Calculated output size: "
            f"({c}x{'x'.join(map(str, out))}). Output size is too small"
        )
    return kernel, stride, padding, dilation, out


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):  # fmt: skip
    """Max over 3-d windows of the last three dims; with ``return_indices`` also the int64 positions
    ``(d * H + h) * W + w`` of each maximum in its volume."""
    kernel, stride, padding, dilation, out = _pool3d_args(input, kernel_size, stride, padding, dilation, ceil_mode,
                                                          "max_pool3d")  # fmt: skip
    values, indices = nn_ops.MaxPool3d.apply(input, kernel, stride, padding, dilation, out)
    return (values, indices) if return_indices else values


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:  # fmt: skip
    """Mean over 3-d windows of the last three dims."""
    kernel, stride, padding, _, out = _pool3d_args(input, kernel_size, stride, padding, 1, ceil_mode, "avg_pool3d")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    maps = nn_ops._DepthThenPlanes(tuple(input.shape), kernel, stride, padding, bool(count_include_pad),
                                   int(divisor_override or 0), out)  # fmt: skip
    return nn_ops.AvgPool3d.apply(input, maps)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max over ``output_size`` adaptive windows of the last two dims (``None`` keeps that dim's size); with
    ``return_indices`` also the int64 positions ``h * W + w`` of each maximum in its plane."""
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    sizes = (output_size, output_size) if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) != 2:
        raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must be 2")
    out_hw = tuple(input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(sizes))
    in_hw = tuple(input.shape[-2:])
    tables = [nn_ops.adaptive_windows(size, o) for size, o in zip(in_hw, out_hw)]
    values, indices = nn_ops.AdaptiveMaxPool2d.apply(input, nn_ops.window_positions(tables, in_hw), out_hw)
    return (values, indices) if return_indices else values


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max over ``output_size`` adaptive windows of the last dim (torch: a 2-d pool of height 1)."""
    if input.dim() not in (2, 3):
        raise RuntimeError(
            f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional tensor for argument #1 'self' (while "
            "checking arguments for adaptive_max_pool1d)"
        )
    size = output_size[0] if isinstance(output_size, (list, tuple)) else output_size
    values, indices = adaptive_max_pool2d(input.unsqueeze(-2), (1, int(size)), True)
    values, indices = values.squeeze(-2), indices.squeeze(-2)
    return (values, indices) if return_indices else values


# --- pooling in 2 dims ----------------------------------------------------------------------------------------------
def _pool_size(size: int, k: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """torch's ``pooling_output_shape``: a window may start in the right padding only with ``ceil_mode``."""
    num = size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = num // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_args(input: Tensor, kernel_size, stride, padding, dilation=1) -> tuple:
    if input.dim() not in (3, 4) or input.numel() == 0 and input.dim() == 3:
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    kernel = _tuple(kernel_size, 2, "kernel_size")
    stride = (
        kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _tuple(stride, 2, "stride")
    )
    return kernel, stride, _tuple(padding, 2, "padding"), _tuple(dilation, 2, "dilation")


def _out_hw(input: Tensor, kernel, stride, padding, dilation, ceil_mode) -> tuple:
    h, w = input.shape[-2:]
    out = (_pool_size(h, kernel[0], padding[0], stride[0], dilation[0], ceil_mode),
           _pool_size(w, kernel[1], padding[1], stride[1], dilation[1], ceil_mode))  # fmt: skip
    if out[0] < 1 or out[1] < 1:
        c = input.shape[-3]
        raise RuntimeError(
            f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{out[0]}x{out[1]}). Output size is too "
            "small"
        )
    return out


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):  # fmt: skip
    """Max over 2-d windows of the last two dims; with ``return_indices`` also the int64 positions ``h * W + w``
    of each maximum in its plane (what ``max_unpool2d`` takes)."""
    kernel, stride, padding, dilation = _pool_args(input, kernel_size, stride, padding, dilation)
    if padding != (0, 0) or kernel[0] < 1 or kernel[1] < 1:  # (no padding and a kernel pass both checks)
        _check_pool_padding(kernel, padding, dilation)
    out_hw = _out_hw(input, kernel, stride, padding, dilation, ceil_mode)
    values, indices = nn_ops.MaxPool2d.apply(input, kernel, stride, padding, dilation, out_hw)
    if input.dim() == 4 and _channels_last_order(input._data) is not None:
        values, indices = _channels_last_as(values, input), _channels_last_as(indices, input)
    return (values, indices) if return_indices else values


def _check_pool_padding(kernel: tuple, padding: tuple, dilation: tuple) -> None:
    """torch's refusals of a max pool's padding beyond half its (dilated) kernel."""
    for p, k, d in zip(padding, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and "
                f"dilation={d}"
            )
    if any(p > k // 2 for p, k in zip(padding, kernel)):  # (torch's dilated kernel checks the kernel itself too)
        raise RuntimeError(
            f"pad should be smaller than or equal to half of kernel size, but got padW = {padding[1]}, padH = "
            f"{padding[0]}, kW = {kernel[1]}, kH = {kernel[0]}"
        )


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:  # fmt: skip
    """Mean over 2-d windows of the last two dims."""
    kernel, stride, padding, _ = _pool_args(input, kernel_size, stride, padding)
    for p, k in zip(padding, kernel):
        if p > k // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and dilation=1"
            )
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out_hw = _out_hw(input, kernel, stride, padding, (1, 1), ceil_mode)
    args = (kernel, stride, padding, bool(count_include_pad), int(divisor_override or 0))
    return _channels_last_as(nn_ops.AvgPool2d.apply(input, nn_ops._PoolMaps(input.shape, out_hw, False, args)), input)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Mean over ``output_size`` windows spanning the last two dims (``None`` keeps that dim's size)."""
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    sizes = (output_size, output_size) if isinstance(output_size, int) or output_size is None else tuple(output_size)
    out_hw = tuple(input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(sizes))
    if out_hw == (1, 1):  # torch takes the mean (node MeanBackward1)
        return input.mean((-1, -2), keepdim=True)
    return nn_ops.AdaptiveAvgPool2d.apply(input, nn_ops._PoolMaps(input.shape, out_hw, True))


# --- linear ------------------------------------------------------------------------------------------------------
class _Linear(Function):
    """``x @ W.t() + b`` in one node (torch's ``addmm`` for 2-D input), on the backend's ``linear``. ``linear`` has
    checked the operands (a 2-D weight, one dtype, a bias of shape ``(out_features,)``), so its backward's gradients
    need no checking (``_trusted``) and the call takes the short path of ops that apply no other Function
    (``_simple``)."""

    node_name = "AddmmBackward0"
    _trusted = True
    _simple = True

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        ctx.save_for_backward(x, weight)
        xd, wd, bd = x._data, weight._data, None if bias is None else bias._data
        backend = same_backend((x, weight) if bias is None else (x, weight, bias))  # (torch's error across devices)
        shape = xd.shape
        if len(shape) == 2:
            return Tensor._make(backend.linear(xd, wd, bd))
        rows = math.prod(shape[:-1])  # (not -1: a size-0 input leaves it ambiguous)
        out = backend.linear(backend.reshape(xd, (rows, shape[-1])), wd, bd)
        return Tensor._make(backend.reshape(out, (*shape[:-1], out.shape[1])))

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        wanted = ctx.needs_input_grad
        if len(wanted) == 2:  # (``_Product``: no bias)
            wanted += (False,)
        if nothing_records(state):  # the kernel alone (what fused_grads would call)
            return _linear_grads(wanted, g, x, weight)
        kernel, formula = functools.partial(_linear_grads, wanted), functools.partial(_linear_grads_formula, wanted)
        return tuple(fused_grads("AddmmBackwardBackward0", kernel, formula, (g, x, weight), wanted))


class _Product(_Linear):
    """``x @ W.t()`` (``linear`` without bias) in one node: torch's ``mm`` for 2-D input. ``_Linear``'s forward
    and backward with no bias; its gradients are those of its two inputs."""

    node_name = "MmBackward0"

    @staticmethod
    def backward(ctx, g: Tensor):
        return _Linear.backward(ctx, g)[:2]


class _FoldedProduct(_Product):
    """``_Product`` of an input with more than 2 dims, folded to 2-D as torch's ``matmul`` folds it (its node
    ``UnsafeViewBackward0``)."""

    node_name = "UnsafeViewBackward0"


def _linear_grads(wanted: tuple, g: Tensor, x: Tensor, weight: Tensor) -> tuple:
    """``_Linear``'s gradients (those ``wanted``) from the backend's ``linear_backward`` kernel."""
    backend = g._backend
    shape = x._data.shape
    if len(shape) == 2:
        g2, x2 = g._data, x._data
    else:
        rows = math.prod(shape[:-1])  # (not -1: a size-0 input leaves it ambiguous)
        g2 = backend.reshape(g._data, (rows, g._data.shape[-1]))
        x2 = backend.reshape(x._data, (rows, shape[-1]))
    w2 = weight._data
    if w2.dtype.kind == "c":  # (complex: the gradients take the conjugates, g @ conj(W) and g.T @ conj(x), as torch)
        x2, w2 = backend.conj(x2), backend.conj(w2)
    gx, gw, gb = backend.linear_backward(g2, x2, w2, wanted)
    return (
        None if gx is None else Tensor._make(gx if len(shape) == 2 else backend.reshape(gx, shape)),
        None if gw is None else Tensor._make(gw),
        None if gb is None else Tensor._make(gb),
    )


def _linear_grads_formula(wanted: tuple, g: Tensor, x: Tensor, weight: Tensor) -> tuple:
    """``_linear_grads`` written with differentiable ops (what double backward differentiates)."""
    rows = math.prod(x.shape[:-1])
    g2 = g.reshape(rows, g.shape[-1])
    if weight.is_complex():  # (as _linear_grads)
        x, weight = x.conj(), weight.conj()
    gx = g.matmul(weight) if wanted[0] else None
    gw = g2.t().mm(x.reshape(rows, x.shape[-1])) if wanted[1] else None
    return gx, gw, (g2.sum(0) if wanted[2] else None)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.t() + bias``: one node (``AddmmBackward0``), or a matmul without bias; torch's checks and
    errors, in torch's order."""
    if not isinstance(input, Tensor):
        raise not_a_tensor("linear", "input", 1, input)
    if not isinstance(weight, Tensor):
        raise not_a_tensor("linear", "weight", 2, weight)
    if state.autocast is not None:
        input, weight, bias = autocast_to(None, input, weight, bias)
    x, w = input._data, weight._data
    if x.ndim == 0 or w.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {x.ndim}D and {w.ndim}D")
    if bias is None:
        if x.ndim == 1 or w.ndim != 2 or x.shape[-1] != w.shape[1] or x.dtype != w.dtype:
            return input.matmul(weight.t())  # (a vector input, or torch's matmul errors)
        return (_Product if x.ndim == 2 else _FoldedProduct).apply(input, weight)
    if not isinstance(bias, Tensor):
        raise not_a_tensor("linear", "bias", 3, bias)
    if w.ndim != 2:
        if w.ndim == 1:
            raise RuntimeError("mat2 must be a matrix, got 1-D tensor")
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {w.ndim}D")
    if x.shape[-1] != w.shape[1]:
        rows = math.prod(x.shape[:-1])
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and {w.shape[1]}x{w.shape[0]})"
        )
    b = bias._data
    if x.dtype != w.dtype:
        raise RuntimeError(
            f"mat1 and mat2 must have the same dtype, but got {input.dtype.scalar_name} and {weight.dtype.scalar_name}"
        )
    if b.dtype != w.dtype:
        raise RuntimeError(
            f"self and mat2 must have the same dtype, but got {bias.dtype.scalar_name} and {weight.dtype.scalar_name}"
        )
    if b.shape != (w.shape[0],):  # a bias that broadcasts to the output (addmm's ``self``), with expand's errors
        return input.matmul(weight.t()) + bias.expand(*x.shape[:-1], w.shape[0])
    return _Linear.apply(input, weight, bias)


# --- losses ------------------------------------------------------------------------------------------------------
def _float32_under_autocast(loss):
    """torch's autocast runs the losses in float32 (its ``fp32`` lists): floating tensor arguments of the region's
    device are cast up before the loss runs."""

    @functools.wraps(loss)
    def wrapped(*args, **kwargs):
        if state.autocast is not None:
            args = autocast_to(float32, *args)
            kwargs = {key: autocast_to(float32, value)[0] for key, value in kwargs.items()}
        return loss(*args, **kwargs)

    return wrapped


def _legacy_reduction(size_average, reduce, emit_warning: bool = True) -> str:
    """torch's ``_Reduction.legacy_get_string``: the deprecated ``size_average``/``reduce`` flags as a reduction."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else ("sum" if reduce else "none")
    if emit_warning:
        warnings.warn(
            f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.", stacklevel=3
        )
    return ret


def _reduction(reduction: str, size_average=None, reduce=None) -> str:
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_size(input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). This will "
            "likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=3,
        )


def _broadcast_pair(input: Tensor, target: Tensor) -> tuple:
    if tuple(input.shape) == tuple(target.shape):
        return input, target
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    return input.expand(*shape), target.expand(*shape)


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _weighted(loss: Tensor, weight: Tensor | None, input: Tensor, reduction: str):
    """torch's per-element ``weight`` of mse/l1/huber: weighted sum, or divided by the weights' sum for mean."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    weighted = loss * weight
    if reduction == "none":
        return weighted
    if reduction == "sum":
        return weighted.sum()
    return weighted.sum() / weight.sum()


@_float32_under_autocast
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:  # fmt: skip
    """Mean (or sum, or elementwise) absolute error."""
    _warn_size(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    a, b = _broadcast_pair(input, target)
    loss = (a - b).abs()
    return _reduce(loss, reduction) if weight is None else _weighted(loss, weight, input, reduction)


class _MseLoss(Function):
    """``(input - target) ** 2``, reduced, in one node (torch's ``MseLossBackward0``)."""

    node_name = "MseLossBackward0"

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for plain Tensors that ``_plain_pair`` takes, outside anomaly and inference mode, with no
        tracer or saved-tensor hooks (``st.fast``): the loss on the storage and the node ``_link_outputs`` builds
        (both operands saved, the metadata its gradients are checked against); anything else returns None."""
        x, target, reduction = args
        if type(x) is not Tensor or type(target) is not Tensor or not st.fast:
            return None
        xd, td = x._data, target._data
        if not _plain_pair(xd, td) or x._is_inference or target._is_inference:
            return None
        backend = _BACKENDS.get(type(xd)) or backend_for(xd)
        result = _new(Tensor)
        out = result._data = _mse_on_storage(xd, td, reduction, backend)
        need_x = x._requires_grad or x.grad_fn is not None
        need_t = target._requires_grad or target.grad_fn is not None
        if st.enabled and (need_x or need_t):
            ctx = cls._backward_cls()
            ctx.needs_input_grad = (need_x, need_t, False)
            ctx.reduction = reduction
            make_node(ctx, (edge_of(x), edge_of(target), NOT_A_TENSOR_INPUT), result)
            ctx._input_meta = ((xd.shape, xd.dtype, backend), (td.shape, td.dtype, backend), False)
            ctx._output_meta = ((out.shape, out.dtype, backend),)
            ctx._saved = [saved_input_unhooked(x), saved_input_unhooked(target)]
        return result

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, reduction: str) -> Tensor:
        ctx.save_for_backward(x, target)
        ctx.reduction = reduction
        if _plain_pair(x._data, target._data):  # the kernels the three ops below call, without the three calls
            return Tensor._make(_mse_on_storage(x._data, target._data, reduction, x._backend))
        sq = (x - target) ** 2
        return sq.mean() if reduction == "mean" else (sq.sum() if reduction == "sum" else sq)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, target = ctx.saved_tensors
        if nothing_records(state) and _plain_pair(x._data, target._data) and g._data.dtype is x._data.dtype:
            return _mse_grads_on_storage(ctx, g._data, x._data, target._data, x._backend)
        diff = x - target
        scale = g * (2.0 / max(diff.numel(), 1)) if ctx.reduction == "mean" else g * 2.0  # (empty: no elements)
        grad = diff * scale
        return grad, -grad, None


_SUB, _POW, _MUL, _NEG = ROWS["sub"], ROWS["pow"], ROWS["mul"], ROWS["neg"]


def _plain_pair(a, b) -> bool:
    """Whether ``a`` and ``b`` are C-contiguous float32 or float64 arrays of one shape, dtype and device: operands
    the elementwise fast paths take as they are (``elementwise_plain``)."""
    dt = a.dtype
    return (
        b.dtype is dt
        and dt.kind == "f"
        and dt.itemsize >= 4
        and type(a) is type(b)
        and a.shape == b.shape
        and a.flags.c_contiguous
        and b.flags.c_contiguous
    )


def _mse_on_storage(xd, td, reduction: str, backend):
    """``((x - t) ** 2)`` reduced, for ``_plain_pair`` operands: the kernels its three ops' fast paths call."""
    dt, n = xd.dtype, xd.size
    flat = (n,)  # (1-d: elementwise_plain's direct kernel call)
    diff = backend.elementwise_plain(_SUB, [backend.reshape(xd, flat), backend.reshape(td, flat)], dt, flat)
    sq = backend.elementwise_plain(_POW, [diff, 2], dt, flat)
    if reduction == "none":
        return backend.reshape(sq, xd.shape)
    total = backend.reduce(sq, "sum", None, False, dt)
    return backend.divide_by(total, n) if reduction == "mean" else total


def _mse_grads_on_storage(ctx, gd, xd, td, backend) -> tuple:
    """``_MseLoss``'s gradients without create_graph: the kernels of its formula's ops (``diff * (g * factor)``
    and its negation, only where needed) called directly, so the bits are the formula's."""
    dt = xd.dtype
    diff = backend.elementwise_plain(_SUB, [xd, td], dt, xd.shape)
    factor = 2.0 / max(diff.size, 1) if ctx.reduction == "mean" else 2.0  # (empty: no elements)
    grad = backend.elementwise(_MUL, [diff, backend.elementwise(_MUL, [gd, factor], (), dt)], (), dt)
    needs = ctx.needs_input_grad
    gx = Tensor._make(grad) if needs[0] else None
    return gx, (Tensor._make(backend.elementwise(_NEG, [grad], (), dt)) if needs[1] else None), None


@_float32_under_autocast
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:  # fmt: skip
    """Mean (or sum, or elementwise) squared error."""
    _warn_size(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    a, b = _broadcast_pair(input, target)
    if weight is not None:
        return _weighted((a - b) ** 2, weight, input, reduction)
    return _MseLoss.apply(a, b, reduction)


@_float32_under_autocast
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:  # fmt: skip
    """Squared error below ``beta`` (scaled by ``0.5 / beta``), absolute error above (``beta=0``: L1)."""
    _warn_size(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    a, b = _broadcast_pair(input, target)
    if beta == 0.0:
        return _reduce((a - b).abs(), reduction)
    return loss_ops.SmoothL1Loss.apply(a, b, reduction, float(beta))


@_float32_under_autocast
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:  # fmt: skip
    """Squared error below ``delta``, ``delta``-scaled absolute error above."""
    _warn_size(input, target)
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    a, b = _broadcast_pair(input, target)
    if weight is None:
        return loss_ops.HuberLoss.apply(a, b, reduction, float(delta))
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    return _reduce(loss_ops.HuberLoss.apply(a, b, "none", float(delta)) * weight, reduction)  # a plain mean here


def _not_differentiable(function: str, argument: str, t) -> None:
    """torch's refusal of a tensor that requires grad where its op has no derivative (a loss's ``weight``)."""
    if t is not None and state.enabled and t.requires_grad:
        raise RuntimeError(
            f"The function '{function}' is not differentiable with respect to argument '{argument}'. This input "
            "cannot have requires_grad True."
        )


def _class_layout(input: Tensor, target: Tensor, weight) -> loss_ops.RowLayout:
    """The checks torch makes of class-index targets' shapes and dtype (their range is checked by the loss
    itself); the layout of the input's (rows, C) logits."""
    _not_differentiable("nll_loss_forward", "weight", weight)
    if not isinstance(target, Tensor):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {type(target).__name__}")
    ishape, tshape = input._data.shape, target._data.shape  # plain tuples: cheaper than Size in the hot path
    dim = len(ishape)
    if dim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    c = ishape[1] if dim >= 2 else ishape[0]
    # torch's order: the batch sizes, then the target's shape, then its dtype
    if dim >= 2 and (tshape[0] if tshape else 1) != ishape[0]:
        raise ValueError(
            f"Expected input batch_size ({ishape[0]}) to match target batch_size ({tshape[0] if tshape else 1})."
        )
    if dim <= 2:
        if len(tshape) > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    elif tshape != (ishape[0], *ishape[2:]):
        raise RuntimeError(f"Expected target size {[ishape[0], *ishape[2:]]}, got {list(tshape)}")
    if target.dtype.name not in ("int64", "uint8"):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {target.dtype.scalar_name}")
    if weight is not None and weight._data.shape != (c,):
        raise RuntimeError(
            f"weight tensor should be defined either for all {c} classes or no classes but got weight tensor of "
            f"shape: [{', '.join(map(str, weight.shape))}]"
        )
    return loss_ops.RowLayout(ishape)


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *, linear_bias: Tensor | None = None,
                         weight: Tensor | None = None, reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:  # fmt: skip
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``: ``linear_weight`` (C, [d_1...,]
    in_features) makes (N, C[, d_1...]) logits; ``target`` of the logits' shape holds class probabilities (then
    ``ignore_index`` may not be given), else class indices (``ignore_index`` None means -100). torch's
    ``options`` choose how its chunked kernel saves memory; the loss and gradients are the same without it, which
    is what is computed here."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            "expected equal input and linear_weight last dimensions (in_features), "
            f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively"
        )
    num_classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got {tuple(linear_bias.shape)}")
    if out_features and not batches:
        raise RuntimeError(
            f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires batched input, "
            f"(N, {in_features}), got unbatched input with shape {tuple(input.shape)}"
        )
    logits_shape = (*batches, num_classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    rows = math.prod(out_features) * num_classes
    flat_weight = linear_weight.reshape(rows, in_features) if out_features else linear_weight
    flat_bias = linear_bias.reshape(rows) if out_features and linear_bias is not None else linear_bias
    logits = linear(input, flat_weight, flat_bias).reshape(logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index,
                         label_smoothing=label_smoothing)  # fmt: skip


@_float32_under_autocast
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:  # fmt: skip
    """Cross entropy between ``softmax(input)`` over dim 1 and class-index targets (one fused node: ``weight``,
    ``ignore_index``, ``label_smoothing``) or class-probability targets (a float tensor shaped like ``input``)."""
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if isinstance(target, Tensor) and target._data.shape == input._data.shape:  # (torch decides by shape)
        if not target.is_floating_point():
            raise RuntimeError(
                f"Expected floating point type for target with class probabilities, got {target.dtype.scalar_name}"
            )
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing)
    layout = _class_layout(input, target, weight)
    if label_smoothing > 0.0:
        cls = loss_ops.SmoothedCrossEntropy
    elif layout.ndim >= 3:
        cls = loss_ops.CrossEntropy2d
    else:
        cls = loss_ops.CrossEntropy
    out = cls.apply(input, weight, target, reduction, float(label_smoothing), layout, ignore_index)
    if cls is loss_ops.CrossEntropy2d and reduction == "none" and layout.ndim != 4:
        return out.view(layout.loss_none_shape)  # torch views its 2-d loss back (node ViewBackward0)
    return out


def _cross_entropy_probs(input: Tensor, target: Tensor, weight, ignore_index: int, reduction: str,
                         smoothing: float) -> Tensor:  # fmt: skip
    """torch's ``cross_entropy_loss_prob_target``: ``-sum(log_softmax(input) * target * weight)``, the mean
    divided by the number of samples (``numel / C``)."""
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    class_dim = 0 if input.dim() == 1 else 1
    c = input.shape[class_dim]
    logp = ops.log_softmax(input, class_dim)
    if smoothing > 0.0:
        target = target * (1 - smoothing) + smoothing / c
    prod = logp * target
    if weight is not None:
        shape = [1] * input.dim()
        shape[class_dim] = c
        prod = prod * weight.reshape(*shape)
    if reduction == "none":
        return -prod.sum(class_dim)
    total = -prod.sum()
    if reduction == "sum":
        return total
    return loss_ops.ScalarDiv.apply(total, input.numel() / c if input.numel() else math.nan)


@_float32_under_autocast
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """Negative log-likelihood of class-index ``target`` given log-probabilities ``input`` (class dim 1)."""
    reduction = _reduction(reduction, size_average, reduce)
    layout = _class_layout(input, target, weight)
    cls = loss_ops.NllLoss2d if input.dim() >= 3 else loss_ops.NllLoss
    out = cls.apply(input, target, weight, reduction, layout, ignore_index)
    if cls is loss_ops.NllLoss2d and reduction == "none" and input.dim() != 4:
        return out.view(layout.loss_none_shape)
    return out


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """``-weight * (target * log(input) + (1 - target) * log(1 - input))``, the logs clamped at -100."""
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) is "
            "deprecated. Please ensure they have the same size."
        )
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype.scalar_name} but expected {input.dtype.scalar_name}")
    _not_differentiable("binary_cross_entropy", "weight", weight)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        weight = weight.expand(*input.shape)
    return loss_ops.BinaryCrossEntropy.apply(input, target, weight, reduction)


@_float32_under_autocast
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:  # fmt: skip
    """``binary_cross_entropy(sigmoid(input), target)`` computed stably from logits; ``pos_weight`` weights the
    positive term per class."""
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    _not_differentiable("binary_cross_entropy_with_logits", "weight", weight)
    _not_differentiable("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    return loss_ops.BinaryCrossEntropyWithLogits.apply(input, target, weight, pos_weight, reduction)


@_float32_under_autocast
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:  # fmt: skip
    """``target * (log(target) - input)`` (``input`` holds log-probabilities; ``log_target``: so does
    ``target``), reduced; ``'batchmean'`` divides the sum by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    else:
        if reduction == "mean":
            warnings.warn(
                "reduction: 'mean' divides the total loss by both the batch size and the support size."
                "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                stacklevel=2,
            )
        if reduction not in (*_REDUCTIONS, "batchmean"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        xlogy = ops.where(target == 0, 0.0, target * target.log())
        loss = xlogy - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.dim() else total
    return _reduce(loss, reduction)


# --- margin, ranking, embedding and likelihood losses ---------------------------------------------------------------
# torch computes most of these as compositions (their last node is the reduction's); soft_margin_loss,
# multi_margin_loss and multilabel_margin_loss are single nodes there, and are single nodes here, each with a
# backward written in tensor ops so double backward needs no second formula.
def _sizes(t: Tensor) -> str:
    """A shape as torch's C++ messages print it: ``[2, 3]``."""
    return str(list(t.shape))


def _ctc_tables(lp: np.ndarray, target: np.ndarray, blank: int) -> tuple:
    """The log forward (alpha) and backward (beta) variables of one sample over its blank-interleaved target, and
    its negative log-likelihood; both tables include the emission at their own time step, as torch's do."""
    steps = lp.shape[0]
    ext = np.full(2 * len(target) + 1, blank, dtype=np.int64)
    ext[1::2] = target
    width = len(ext)
    skip = np.zeros(width, dtype=bool)
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    alpha = np.full((steps, width), -np.inf)
    beta = np.full((steps, width), -np.inf)
    if steps == 0:
        return alpha, beta, ext, (0.0 if len(target) == 0 else np.inf)
    alpha[0, 0] = lp[0, blank]
    if width > 1:
        alpha[0, 1] = lp[0, ext[1]]
    for t in range(1, steps):
        prev = alpha[t - 1]
        one = np.concatenate(([-np.inf], prev[:-1]))
        two = np.where(skip, np.concatenate(([-np.inf, -np.inf], prev[:-2]))[:width], -np.inf)
        alpha[t] = np.logaddexp(np.logaddexp(prev, one), two) + lp[t, ext]
    beta[-1, -1] = lp[-1, ext[-1]]
    if width > 1:
        beta[-1, -2] = lp[-1, ext[-2]]
    skip_next = np.zeros(width, dtype=bool)
    skip_next[: max(width - 2, 0)] = skip[2:]
    for t in range(steps - 2, -1, -1):
        nxt = beta[t + 1]
        one = np.concatenate((nxt[1:], [-np.inf]))
        two = np.where(skip_next, np.concatenate((nxt[2:], [-np.inf, -np.inf]))[:width], -np.inf)
        beta[t] = np.logaddexp(np.logaddexp(nxt, one), two) + lp[t, ext]
    last = alpha[-1, -1] if width == 1 else np.logaddexp(alpha[-1, -1], alpha[-1, -2])
    return alpha, beta, ext, -last


class _CtcLoss(Function):
    """The per-sample CTC negative log-likelihoods, in one node; the backward is torch's: ``exp(lp) -
    exp(logsumexp(alpha + beta) + nll - lp)`` per class and step (it assumes ``log_probs`` came from a log-softmax,
    as torch's does) and is not differentiated again."""

    node_name = "CtcLossBackward0"

    @staticmethod
    def forward(ctx, log_probs: Tensor, targets: list, input_lengths: list, blank: int, zero_infinity: bool):
        lp = log_probs._host().astype(np.float64)
        losses, tables = [], []
        for n, target in enumerate(targets):
            alpha, beta, ext, nll = _ctc_tables(lp[: input_lengths[n], n], target, blank)
            if zero_infinity and np.isinf(nll):
                nll = 0.0
                alpha = None
            losses.append(nll)
            tables.append((alpha, beta, ext))
        ctx.lp, ctx.tables, ctx.losses, ctx.input_lengths = lp, tables, losses, input_lengths
        out = np.asarray(losses, dtype=log_probs._data.dtype)
        return Tensor._make(log_probs._backend.from_host(out))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        g = grad._host().astype(np.float64)
        lp = ctx.lp
        result = np.zeros_like(lp)
        for n, (alpha, beta, ext) in enumerate(ctx.tables):
            steps = ctx.input_lengths[n]
            if alpha is None or steps == 0:
                continue
            nll = ctx.losses[n]
            both = alpha + beta
            lcab = np.full((steps, lp.shape[2]), -np.inf)
            for s, c in enumerate(ext):
                lcab[:, c] = np.logaddexp(lcab[:, c], both[:, s])
            sample = lp[:steps, n]
            with np.errstate(over="ignore", invalid="ignore"):
                result[:steps, n] = (np.exp(sample) - np.exp(lcab + nll - sample)) * g[n]
        return Tensor._make(grad._backend.from_host(result.astype(grad._data.dtype))), None, None, None, None


def _int_list(values) -> list:
    """Lengths given as a tensor, a sequence or one number, as Python ints."""
    return [int(v) for v in np.atleast_1d(np.asarray(values._host() if isinstance(values, Tensor) else values))]


@_float32_under_autocast
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:  # fmt: skip
    """Connectionist Temporal Classification: the negative log-likelihood of each target sequence over every
    alignment of it (blanks and repeats) to the (T, N, C) ``log_probs``; ``'mean'`` divides each by its target
    length, then averages."""
    _check_reduction(reduction)
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.dim() == 1 else targets
    in_lengths, t_lengths = _int_list(input_lengths), _int_list(target_lengths)
    steps, batch = log_probs.shape[0], log_probs.shape[1]
    for v in in_lengths:
        if v > steps:
            raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got value {v} (while "
                               "checking arguments for ctc_loss_allocate_outputs)")  # fmt: skip
    flat = targets._host().astype(np.int64)
    if targets.dim() == 1 and not unbatched:
        offsets = np.concatenate(([0], np.cumsum(t_lengths)))
        sequences = [flat[offsets[n] : offsets[n + 1]] for n in range(batch)]
    else:
        longest = max(t_lengths) if t_lengths else 0
        if flat.shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                               f"{flat.shape[1]} for argument #2 'targets' (while checking arguments for "
                               "ctc_loss_allocate_outputs)")  # fmt: skip
        sequences = [flat[n, : t_lengths[n]] for n in range(batch)]
    losses = _CtcLoss.apply(log_probs, sequences, in_lengths, blank, zero_infinity)
    if unbatched:
        losses = losses.squeeze(0)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    lengths = ops.tensor(t_lengths, dtype=losses.dtype).clamp_min(1)
    return (losses / (lengths if not unbatched else lengths[0])).mean()


@_float32_under_autocast
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """Negative log-likelihood of ``target`` under a Poisson distribution of rate ``exp(input)`` (``log_input``) or
    ``input``; ``full`` adds Stirling's approximation of ``log(target!)`` for targets above 1."""
    reduction = _reduction(reduction, size_average, reduce)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


@_float32_under_autocast
def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:  # fmt: skip
    """``0.5 * (log(var) + (input - target)**2 / var)`` (plus ``0.5 * log(2 pi)`` with ``full``), ``var`` clamped
    below at ``eps`` without passing that clamp to its gradient, as torch does."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ops.ones_like(input)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif input.dim() == var.dim() and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in _REDUCTIONS:
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@_float32_under_autocast
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """``max(0, -target * (input1 - input2) + margin)``: ``target`` 1 asks input1 to rank higher, -1 lower."""
    reduction = _reduction(reduction, size_average, reduce)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(
            "margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} "
        )
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


@_float32_under_autocast
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:  # fmt: skip
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1 (other targets add both)."""
    reduction = _reduction(reduction, size_average, reduce)
    zeros = ops.zeros_like(input)
    margin_part = ops.where(target != 1, (margin - input).clamp_min(0), zeros)
    self_part = ops.where(target != -1, input, zeros)
    return _reduce(margin_part + self_part, reduction)


class _SoftMarginLoss(Function):
    """``log(1 + exp(-target * input))``, reduced, in one node."""

    node_name = "SoftMarginLossBackward0"

    @staticmethod
    def forward(ctx, input: Tensor, target: Tensor, reduction: str) -> Tensor:
        ctx.save_for_backward(input, target)
        ctx.reduction = reduction
        return _reduce((-input * target).exp().log1p(), reduction)

    @staticmethod
    def backward(ctx, grad: Tensor):
        input, target = ctx.saved_tensors
        scale = grad / input.numel() if ctx.reduction == "mean" else grad
        grad_input = -target * (-input * target).sigmoid() * scale
        return grad_input, None, None


@_float32_under_autocast
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:  # fmt: skip
    """The two-class logistic loss ``log(1 + exp(-target * input))`` for targets in {1, -1}."""
    reduction = _reduction(reduction, size_average, reduce)
    return _SoftMarginLoss.apply(input, target, reduction)


@_float32_under_autocast
def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """One-vs-all logistic loss over the classes of the last dim, averaged over them: one loss per sample."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(dim=class_dim) / input.shape[class_dim]
    if reduction not in _REDUCTIONS:
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, reduction)


@_float32_under_autocast
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)`` where it is -1."""
    reduction = _reduction(reduction, size_average, reduce)
    dim = target.dim()
    if dim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if dim == 1 and (input1.dim() != 2 or input2.dim() != 2):
        raise RuntimeError(
            "1D target tensor expects 2D input tensors, but found inputs with sizes "
            f"{_sizes(input1)} and {_sizes(input2)}."
        )
    if dim == 0 and (input1.dim() != 1 or input2.dim() != 1):
        raise RuntimeError(
            "0D target tensor expects 1D input tensors, but found inputs with sizes "
            f"{_sizes(input1)} and {_sizes(input2)}."
        )
    eps = 1e-12
    prod_sum = (input1 * input2).sum(dim)
    mag1 = (input1 * input1).sum(dim) + eps
    mag2 = (input2 * input2).sum(dim) + eps
    cos = prod_sum / (mag1 * mag2).sqrt()
    zeros = ops.zeros_like(cos)
    positive = ops.where(target == 1, 1 - cos, zeros)
    negative = ops.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _reduce(positive + negative, reduction)


def _margin_targets(input: Tensor, target: Tensor) -> tuple:
    """The (rows, classes) view of a 1-D or 2-D margin-loss input, and its class count, with torch's checks."""
    if input.dim() > 2 or (input.dim() == 2 and input.shape[1] == 0) or (input.dim() < 2 and input.numel() == 0):
        raise RuntimeError(
            "Expected non-empty vector or matrix with optional 0-dim batch size, but got: " + _sizes(input)
        )
    classes = input.shape[-1] if input.dim() else 1
    return input.reshape(-1, classes), classes


def _reduce_rows(per_row: Tensor, input: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return per_row.reshape(input.shape[:-1]) if input.dim() else per_row.reshape(())
    return _reduce(per_row, reduction)


def _row_scale(grad: Tensor, rows: int, classes: int, reduction: str) -> Tensor:
    """The output gradient each row of a per-sample margin loss (a mean over ``classes``) receives, as a column:
    its own entry (``'none'``), or the reduced loss's share (``'sum'``, ``'mean'``)."""
    per_row = grad.reshape(-1, 1) if reduction == "none" else grad.expand(rows, 1)
    if reduction == "mean":
        per_row = per_row / rows
    return per_row / classes


class _MultiMarginLoss(Function):
    """``sum_{j != y} max(0, margin - x[y] + x[j]) ** p * weight[y] / C`` per sample, in one node."""

    node_name = "MultiMarginLossBackward0"

    @staticmethod
    def forward(ctx, input: Tensor, target: Tensor, p: int, margin: float, weight, reduction: str) -> Tensor:
        rows, classes = _margin_targets(input, target)
        index = target.reshape(-1, 1)
        z = (margin - rows.gather(1, index) + rows).scatter(1, index, 0.0).clamp_min(0)
        scale = 1.0 if weight is None else weight[target.reshape(-1)].reshape(-1, 1)
        per_row = ((z if p == 1 else z * z) * scale).sum(1) / classes
        ctx.save_for_backward(input, target, weight)
        ctx.p, ctx.margin, ctx.reduction = p, margin, reduction
        return _reduce_rows(per_row, input, reduction)

    @staticmethod
    def backward(ctx, grad: Tensor):
        input, target, weight = ctx.saved_tensors
        rows, classes = _margin_targets(input, target)
        index = target.reshape(-1, 1)
        z = (ctx.margin - rows.gather(1, index) + rows).scatter(1, index, 0.0)
        active = (z > 0).to(rows.dtype)
        dz = active if ctx.p == 1 else 2 * z * active
        if weight is not None:
            dz = dz * weight[target.reshape(-1)].reshape(-1, 1)
        dz = dz * _row_scale(grad, rows.shape[0], classes, ctx.reduction)
        grad_rows = dz.scatter(1, index, -dz.sum(1, keepdim=True))
        return grad_rows.reshape(input.shape), None, None, None, None, None


@_float32_under_autocast
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """The multi-class hinge loss: each wrong class scoring within ``margin`` of the target class costs."""
    reduction = _reduction(reduction, size_average, reduce)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    _margin_targets(input, target)
    rows = input.shape[0] if input.dim() == 2 else 1
    classes = input.shape[-1] if input.dim() else 1
    if target.dim() > 1 or target.numel() != rows:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples (batch "
            f"size). Expected target size [{rows}], but got {_sizes(target)}. Input has shape {_sizes(input)}."
        )
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got {_sizes(weight)}")
    if target.numel() and (int(target.min()) < 0 or int(target.max()) >= classes):
        raise RuntimeError("target out of range")
    return _MultiMarginLoss.apply(input, target, p, margin, weight, reduction)


class _MultilabelMarginLoss(Function):
    """``sum_{j in targets} sum_{k not in targets} max(0, 1 - (x[j] - x[k])) / C`` per sample, in one node."""

    node_name = "MultilabelMarginLossBackward0"

    @staticmethod
    def _pairs(input: Tensor, target: Tensor) -> tuple:
        """Per row: which classes are targets (the indices before the first -1), and the hinge of every (target j,
        other k) pair, as a (rows, C, C) tensor masked to the pairs that count."""
        rows, classes = _margin_targets(input, target)
        labels = target.reshape(-1, classes).numpy()
        chosen = np.zeros((rows.shape[0], classes), dtype=bool)
        for r, row in enumerate(labels):
            for label in row:
                if label < 0:
                    break
                chosen[r, label] = True
        pairs = chosen[:, :, None] & ~chosen[:, None, :]
        hinge = 1 - (rows.unsqueeze(2) - rows.unsqueeze(1))
        mask = Tensor._make(pairs & (hinge.detach().numpy() > 0)).to(rows.dtype)
        return rows, classes, hinge, mask

    @staticmethod
    def forward(ctx, input: Tensor, target: Tensor, reduction: str) -> Tensor:
        rows, classes, hinge, mask = _MultilabelMarginLoss._pairs(input, target)
        ctx.save_for_backward(input, target)
        ctx.reduction = reduction
        return _reduce_rows((hinge * mask).sum((1, 2)) / classes, input, reduction)

    @staticmethod
    def backward(ctx, grad: Tensor):
        input, target = ctx.saved_tensors
        rows, classes, _, mask = _MultilabelMarginLoss._pairs(input, target)
        scale = _row_scale(grad, rows.shape[0], classes, ctx.reduction)
        grad_rows = (mask.sum(1) - mask.sum(2)) * scale
        return grad_rows.reshape(input.shape), None, None


@_float32_under_autocast
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:  # fmt: skip
    """The multi-label hinge loss: ``target`` lists each sample's classes, ended by the first -1."""
    reduction = _reduction(reduction, size_average, reduce)
    if input.dim() <= 1:
        ok = target.dim() <= 1 and target.numel() == (input.shape[0] if input.dim() else 1)
    else:
        ok = target.dim() == 2 and tuple(target.shape) == tuple(input.shape)
    if input.dim() <= 2 and not ok:
        raise RuntimeError(f"inconsistent target size: {_sizes(target)} for input of size: {_sizes(input)}")
    classes = input.shape[-1] if input.dim() else 1
    if target.numel() and (int(target.min()) < -1 or int(target.max()) >= classes):
        raise RuntimeError("target out of range")
    return _MultilabelMarginLoss.apply(input, target, reduction)


@_float32_under_autocast
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:  # fmt: skip
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with the ``p``-norm distance (``swap``: the
    smaller of the negative's distances to the anchor and to the positive)."""
    reduction = _reduction(reduction, size_average, reduce)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
            f"got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs"
        )
    return triplet_margin_with_distance_loss(
        anchor, positive, negative, margin=margin, swap=swap, reduction=reduction,
        distance_function=lambda x, y: pairwise_distance(x, y, p, eps),
    )  # fmt: skip


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:  # fmt: skip
    """The triplet loss with any distance (``pairwise_distance`` by default)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
            f"got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs"
        )
    distance = distance_function if distance_function is not None else pairwise_distance
    dist_pos = distance(anchor, positive)
    dist_neg = distance(anchor, negative)
    if swap:
        dist_neg = ops.minimum(dist_neg, distance(positive, negative))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


# --- attention, window max pools, grouped products (their modules import nothing from this one) ---------------
from ._attention import (  # noqa: E402, F401
    _canonical_mask,
    _none_or_dtype,
    multi_head_attention_forward,
    scaled_dot_product_attention,
)
from ._grouped_mm import ScalingType, SwizzleType, grouped_mm, scaled_grouped_mm, scaled_mm  # noqa: E402, F401
from ._window_pool import (  # noqa: E402, F401
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)


# --- LP pooling, unpooling, and torch's *_with_indices and upsample_* spellings ----------------------------------
def _lp_pool(input: Tensor, norm_type: float, kernel_size, stride, ceil_mode: bool, dims: int) -> Tensor:
    """``(sum over the window of x ** p) ** (1 / p)``, computed as torch does: the window mean of ``x ** p`` times
    the window size, its negative part clipped to 0 (``sign * relu(abs)``) before the root."""
    kernel = _tuple(kernel_size, dims, "kernel_size")
    pool = (avg_pool1d, avg_pool2d, avg_pool3d)[dims - 1]
    out = pool(input.pow(norm_type), kernel_size, stride if stride is not None else None, 0, ceil_mode)
    return (ops.sign(out) * relu(out.abs())).mul(math.prod(kernel)).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over (N, C, L): the ``norm_type``-norm of each window."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over (N, C, H, W): the ``norm_type``-norm of each window."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over (N, C, D, H, W): the ``norm_type``-norm of each window."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


def _unpool_output_size(input: Tensor, kernel: tuple, stride: tuple, padding: tuple, output_size) -> list:
    dims = len(kernel)
    default = [(input.shape[-dims + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(dims)]
    if output_size is None:
        return default
    if len(output_size) == dims + 2:
        output_size = output_size[2:]
    if len(output_size) != dims:
        raise ValueError(
            f"output_size should be a sequence containing {dims} or {dims + 2} elements, but it has a length of "
            f"'{len(output_size)}'"
        )
    for d in range(dims):  # (the message shows output_size as given: a tuple, or torch.Size, or a list)
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return list(output_size)


def _max_unpool(input: Tensor, indices: Tensor, kernel_size, stride, padding, output_size, dims: int) -> Tensor:
    """Put each pooled value back where ``max_pool``'s ``indices`` say it came from (flat positions within its
    (N, C) plane), zeros elsewhere; the gradient gathers from those positions."""
    kernel = _tuple(kernel_size, dims, "kernel_size")
    stride = kernel if stride is None else _tuple(stride, dims, "stride")
    padding = _tuple(padding, dims, "padding")
    size = _unpool_output_size(input, kernel, stride, padding, output_size)
    unbatched = input.dim() == dims + 1
    x, idx = (input.unsqueeze(0), indices.unsqueeze(0)) if unbatched else (input, indices)
    n, c = x.shape[0], x.shape[1]
    plane = math.prod(size)
    flat_idx = idx.reshape(n, c, -1)
    if flat_idx.numel() and (int(flat_idx.min()) < 0 or int(flat_idx.max()) >= plane):
        raise RuntimeError(f"Found an invalid max index: {int(flat_idx.max())} (output volumes are of size "
                           f"{'x'.join(map(str, size))}")  # fmt: skip
    out = ops.zeros(n, c, plane, dtype=x.dtype, device=x.device).scatter(2, flat_idx, x.reshape(n, c, -1))
    out = out.reshape(n, c, *size)
    return out.squeeze(0) if unbatched else out


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of ``max_pool1d``: maxima back at their positions, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of ``max_pool2d``: maxima back at their positions, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of ``max_pool3d``: maxima back at their positions, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):  # fmt: skip
    """``max_pool1d`` with its argmax indices."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):  # fmt: skip
    """``max_pool2d`` with its argmax indices."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):  # fmt: skip
    """``max_pool3d`` with its argmax indices."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """``adaptive_max_pool1d`` with its argmax indices."""
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """``adaptive_max_pool2d`` with its argmax indices."""
    return adaptive_max_pool2d(input, output_size, return_indices=True)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated spelling of ``interpolate(mode="nearest")`` (it warns, as torch's does)."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)  # fmt: skip
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated spelling of ``interpolate(mode="bilinear", align_corners=True)`` (it warns, as torch's does)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)  # fmt: skip
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# --- spatial transformers: affine_grid and grid_sample ------------------------------------------------------------
_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please specify "
    "align_corners=True if the old behavior is desired. See the documentation of grid_sample for details."
)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid of a batch of affine maps: (N, H, W, 2) for 2-D ``theta`` (N, 2, 3), (N, D, H, W, 3) for
    3-D (N, 3, 4), in ``grid_sample``'s normalised [-1, 1] coordinates."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    given, size = size, [int(s) for s in size]
    if len(size) == 4:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError(
                f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {given}. Got {theta.shape}."
            )
        spatial = size[2:]
    elif len(size) == 5:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError(
                f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {given}. Got {theta.shape}."
            )
        spatial = size[2:]
    else:
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. Got size "
            f"{given}."
        )
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {given}")

    def axis(n: int) -> np.ndarray:
        points = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        return points if align_corners else points * (n - 1) / n

    # the base grid (x, y[, z], 1) per output point, x varying fastest, as torch's
    coords = np.meshgrid(*[axis(n) for n in spatial], indexing="ij")[::-1]
    base = np.stack([*coords, np.ones(spatial)], axis=-1).reshape(-1, len(spatial) + 1)
    base_t = Tensor._make(theta._backend.from_host(base.astype(theta._data.dtype)))
    grid = base_t.unsqueeze(0).matmul(theta.transpose(1, 2))
    return grid.reshape(size[0], *spatial, len(spatial))


def _reflect(coord: Tensor, twice_low: float, twice_high: float) -> Tensor:
    """torch's ``reflect_coordinates``: fold a coordinate into [low, high] by reflecting at the ends."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (coord - low).abs()
    extra = ops.fmod(distance, span)
    flips = (distance / span).floor()
    return ops.where(ops.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _bounded(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """torch's ``compute_coordinates``: a source coordinate clipped (``border``) or reflected then clipped
    (``reflection``); unchanged for ``zeros``, where out-of-range taps read 0."""
    if padding_mode == "border":
        return coord.clamp(0, size - 1)
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        return coord.clamp(0, size - 1)
    return coord


def _tap(flat: Tensor, xs: np.ndarray, ys: np.ndarray, width: int, height: int) -> Tensor:
    """The input's values at integer (x, y) per output point, 0 where outside: (N, C, points)."""
    inside = (xs >= 0) & (xs < width) & (ys >= 0) & (ys < height)
    index = np.where(inside, ys * width + xs, 0).astype(np.int64)
    n, c = flat.shape[0], flat.shape[1]
    values = flat.gather(2, Tensor._make(index).unsqueeze(1).expand(n, c, index.shape[-1]))
    return values * Tensor._make(inside.astype(flat._data.dtype)).unsqueeze(1)


def _cubic_weights(t: Tensor) -> list:
    a = -0.75

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:  # fmt: skip
    """Sample (N, C, H, W) ``input`` at the normalised (x, y) points of ``grid`` (N, H_out, W_out, 2):
    ``bilinear``, ``nearest`` or ``bicubic`` interpolation, outside points read as zeros, the border, or its
    reflection. Gradients reach both the input and the grid."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', but got: "
            f"'{padding_mode}'"
        )
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if input.dim() != 4:
        raise NotImplementedError("grid_sample: numbagrad samples 4-D (N, C, H, W) inputs; 5-D volumes are not built")
    if grid.dim() != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(
            "grid_sampler(): expected grid and input to have same batch size, and grid to have shape (N, H_out, "
            f"W_out, 2), but got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        )
    n, c, height, width = input.shape
    out_h, out_w = grid.shape[1], grid.shape[2]
    flat = input.reshape(n, c, height * width)
    gx, gy = grid[..., 0].reshape(n, -1), grid[..., 1].reshape(n, -1)

    def unnormalize(g: Tensor, size: int) -> Tensor:
        return (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2

    x, y = unnormalize(gx, width), unnormalize(gy, height)
    if mode == "bicubic":
        x0, y0 = x.detach().floor(), y.detach().floor()
        wx, wy = _cubic_weights(x - x0), _cubic_weights(y - y0)
        x0n, y0n = x0.numpy().astype(np.int64), y0.numpy().astype(np.int64)
        out = None
        for j in range(4):
            row = None
            for i in range(4):
                tx = _bounded(Tensor._make((x0n - 1 + i).astype(input._data.dtype)), width, padding_mode,
                              align_corners).numpy().astype(np.int64)  # fmt: skip
                ty = _bounded(Tensor._make((y0n - 1 + j).astype(input._data.dtype)), height, padding_mode,
                              align_corners).numpy().astype(np.int64)  # fmt: skip
                term = _tap(flat, tx, ty, width, height) * wx[i].unsqueeze(1)
                row = term if row is None else row + term
            term = row * wy[j].unsqueeze(1)
            out = term if out is None else out + term
        return out.reshape(n, c, out_h, out_w)
    x, y = _bounded(x, width, padding_mode, align_corners), _bounded(y, height, padding_mode, align_corners)
    if mode == "nearest":
        xs = np.rint(x.detach().numpy()).astype(np.int64)
        ys = np.rint(y.detach().numpy()).astype(np.int64)
        return _tap(flat, xs, ys, width, height).reshape(n, c, out_h, out_w)
    x0, y0 = x.detach().floor(), y.detach().floor()
    fx, fy = (x - x0).unsqueeze(1), (y - y0).unsqueeze(1)
    xi, yi = x0.numpy().astype(np.int64), y0.numpy().astype(np.int64)
    out = (_tap(flat, xi, yi, width, height) * (1 - fx) * (1 - fy) + _tap(flat, xi + 1, yi, width, height) * fx
           * (1 - fy) + _tap(flat, xi, yi + 1, width, height) * (1 - fx) * fy
           + _tap(flat, xi + 1, yi + 1, width, height) * fx * fy)  # fmt: skip
    return out.reshape(n, c, out_h, out_w)


def _make_batchable() -> None:
    """Every public function here, made batchable by ``numbagrad.func.vmap`` (``ops._registry.batchable``): these
    read their tensors' storage, so under vmap they run by a batching rule or once per sample."""
    for name, value in list(globals().items()):
        if not name.startswith("_") and inspect.isfunction(value) and value.__module__ == __name__:
            globals()[name] = batchable(f"F.{name}", value)


_make_batchable()
