"""``nn.functional``: torch's functional API on numbagrad tensors.

Elementwise activations are rows of the table (``scalar_math.ROWS``: one generated Numba kernel each way);
convolution, pooling, normalization, embedding, padding and the fused losses are single-node Functions
(``ops/nn_ops.py``, ``ops/loss_ops.py``) over backend primitives; the rest are compositions of tensor ops, as in
torch, so every function returns the node torch prints.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import ops
from .._tensor import Tensor
from .._types import broadcast_shapes, wrap_dim
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad, state
from ..ops import loss_ops, nn_ops
from ..ops._common import not_a_tensor, same_backend
from ..ops.creation import _generator
from ..ops.elementwise import CLASSES, ROWS, make_function, row_inplace

_REDUCTIONS = ("none", "mean", "sum")


def _row(name: str):
    return CLASSES[name][""]


# --- activations -------------------------------------------------------------------------------------------------
# In-place forms: torch names the nodes of leaky_relu_ and elu_ (selu_ too) ...Backward1 (they save the result).
_LEAKY_RELU_INPLACE = make_function(ROWS["leaky_relu"], "LeakyReluBackward1", "LeakyReluInplace")
_ELU_INPLACE = make_function(ROWS["elu"], "EluBackward1", "EluInplace")


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


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim (node ``NormBackward1``)."""
    last = max(x1.dim(), x2.dim()) - 1
    return nn_ops.PNorm.apply(x1 - x2 + eps, float(p), max(last, 0), keepdim)


# --- dropout, embedding, one_hot, pad ------------------------------------------------------------------------------
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training only; otherwise
    the input itself comes back, as in torch)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    dt = input._data.dtype
    if p == 1.0:
        mask = np.zeros(tuple(input.shape), dt)
    else:
        keep = _generator().random(tuple(input.shape), dtype=np.float32) >= np.float32(p)
        mask = keep.astype(dt) * dt.type(1.0 / (1.0 - p))
    m = Tensor._make(input._backend.from_host(mask))
    return input.mul_(m) if inplace else input * m


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:  # fmt: skip
    """Rows of ``weight`` for the integer indices ``input``; ``padding_idx``'s row gets no gradient, ``max_norm``
    renormalizes the looked-up rows of ``weight`` in place first."""
    if sparse:
        raise NotImplementedError("numbagrad has no sparse tensors: embedding(sparse=True) is not supported")
    num = weight.shape[0]
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
    indices = input._host().astype(np.int64)
    if indices.size and (indices.min() < 0 or indices.max() >= num):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(weight, indices, max_norm, norm_type)
    return nn_ops.Embedding.apply(weight, indices, padding_idx, scale_grad_by_freq)


def _embedding_renorm_(weight: Tensor, indices: np.ndarray, max_norm: float, norm_type: float) -> None:
    """torch's ``embedding_renorm_``: each looked-up row whose norm exceeds ``max_norm`` is scaled down to it."""
    with no_grad():
        rows = np.unique(indices)
        picked = weight[Tensor._make(rows)]
        norms = picked.norm(norm_type, 1, keepdim=True)
        scale = ops.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[Tensor._make(rows)] = picked * scale


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
    """Pad the last ``len(pad) // 2`` dims (last dim first, ``(left, right)`` each); negative pads crop."""
    pads = tuple(int(p) for p in pad)
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pads) // 2 > input.dim():
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but got padding length "
            f"{len(pads)} and input of dimension {input.dim()}"
        )
    if mode != "constant":
        raise NotImplementedError(f"numbagrad's pad supports mode='constant' only, not {mode!r}")
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


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize each channel (dim 1) by the batch statistics (training, updating the running ones in place with
    ``momentum``, the variance unbiased) or by the running statistics (eval)."""
    _check_batch_norm(input, running_mean, running_var, weight, bias, training)
    return nn_ops.BatchNorm.apply(input, weight, bias, running_mean, running_var, training, momentum, eps, None)


def _check_batch_norm(input: Tensor, running_mean, running_var, weight, bias, training: bool) -> None:
    """torch's checks of ``batch_norm``'s arguments (the BatchNorm modules make them too)."""
    if training:
        size = int(np.prod([input.shape[0], *input.shape[2:]])) if input.dim() else 1
        if size == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    if input.dim() < 2:
        raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")
    c = input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    params = [t for t in (weight, bias, running_mean, running_var) if t is not None]
    if input.dtype.itemsize >= 4 and any(t.dtype != input.dtype for t in params):  # (half input: float params)
        if input.dtype.name == "float32":
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
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


def _conv(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int, dims: int) -> Tensor:
    name = f"conv{dims}d"
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
    n, c = shape[0], shape[1]
    o = weight.shape[0]
    stride = _tuple(stride, dims, "stride")
    dilation = _tuple(dilation, dims, "dilation")
    kernel = tuple(weight.shape[2:])
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
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
    if o % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of "
            f"size [{list(weight.shape)}] instead"  # sic: torch prints the size in double brackets
        )
    if c != weight.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(shape)} to have "
            f"{weight.shape[1] * groups} channels, but got {c} channels instead"
        )
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != o):
        raise RuntimeError(
            f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with {o} elements, but got "
            f"bias of size {list(bias.shape)} instead"
        )
    if weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.scalar_name} but found {weight.dtype.scalar_name}")
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(f"Input type ({_type_name(input)}) and bias type ({_type_name(bias)}) should be the same")
    spatial = shape[2:]
    padded = [s + a + b for s, (a, b) in zip(spatial, pads)]
    effective = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    if any(p < e for p, e in zip(padded, effective)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, effective))}). Kernel size can't be greater than actual input size"
        )
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, effective, stride))
    if dims == 1:  # a 1-d convolution is a 2-d one of height 1
        kernel, stride, dilation = (1, *kernel), (1, *stride), (1, *dilation)
        pads, out, spatial = [(0, 0), *pads], (1, *out), (1, *spatial)
    out_shape = (n, o, *out[-dims:])
    geom = nn_ops.ConvGeometry(kernel, stride, tuple(a for a, _ in pads), dilation, groups, out, (n, c, *spatial),
                               out_shape)  # fmt: skip
    if unbatched:  # torch unsqueezes, convolves and squeezes (node SqueezeBackward1)
        return nn_ops.Convolution.apply(input.unsqueeze(0), weight, bias, geom).squeeze(0)
    return nn_ops.Convolution.apply(input, weight, bias, geom)


def _type_name(t: Tensor) -> str:
    return {"float32": "float", "float64": "double"}.get(t.dtype.name, t.dtype.name)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:  # fmt: skip
    """1-d convolution (cross-correlation) of (N, C, L) by (O, C / groups, k), in one node."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:  # fmt: skip
    """2-d convolution (cross-correlation) of (N, C, H, W) by (O, C / groups, kh, kw): im2col and BLAS, one
    node."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2)


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
    for p, k, d in zip(padding, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and "
                f"dilation={d}"
            )
    out_hw = _out_hw(input, kernel, stride, padding, dilation, ceil_mode)
    values, indices = nn_ops.MaxPool2d.apply(input, kernel, stride, padding, dilation, out_hw)
    return (values, indices) if return_indices else values


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
    return nn_ops.AvgPool2d.apply(input, nn_ops._PoolMaps(input.shape, out_hw, False, args))


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
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        ctx.save_for_backward(x, weight)
        xd, wd, bd = x._data, weight._data, bias._data
        backend = same_backend((x, weight, bias))  # (torch's error when they are on two devices)
        shape = xd.shape
        if len(shape) == 2:
            return Tensor._make(backend.linear(xd, wd, bd))
        rows = math.prod(shape[:-1])  # (not -1: a size-0 input leaves it ambiguous)
        out = backend.linear(backend.reshape(xd, (rows, shape[-1])), wd, bd)
        return Tensor._make(backend.reshape(out, (*shape[:-1], out.shape[1])))

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        rows = math.prod(x.shape[:-1])  # (not -1: a size-0 input leaves it ambiguous)
        if state.enabled:  # create_graph: differentiable ops
            g2 = g.reshape(rows, g.shape[-1])
            gx = g.matmul(weight) if need_x else None
            gw = g2.t().mm(x.reshape(rows, x.shape[-1])) if need_w else None
            gb = g2.sum(0) if need_b else None
            return gx, gw, gb
        backend = g._backend
        shape = x._data.shape
        if len(shape) == 2:
            g2, x2 = g._data, x._data
        else:
            g2 = backend.reshape(g._data, (rows, g._data.shape[-1]))
            x2 = backend.reshape(x._data, (rows, shape[-1]))
        gx, gw, gb = backend.linear_backward(g2, x2, weight._data, ctx.needs_input_grad)
        return (
            None if gx is None else Tensor._make(gx if len(shape) == 2 else backend.reshape(gx, shape)),
            None if gw is None else Tensor._make(gw),
            None if gb is None else Tensor._make(gb),
        )


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.t() + bias``: one node (``AddmmBackward0``), or a matmul without bias; torch's checks and
    errors, in torch's order."""
    if not isinstance(input, Tensor):
        raise not_a_tensor("linear", "input", 1, input)
    if not isinstance(weight, Tensor):
        raise not_a_tensor("linear", "weight", 2, weight)
    x, w = input._data, weight._data
    if x.ndim == 0 or w.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {x.ndim}D and {w.ndim}D")
    if bias is None:
        return input.matmul(weight.t())
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

    @staticmethod
    def forward(ctx, x: Tensor, target: Tensor, reduction: str) -> Tensor:
        ctx.save_for_backward(x, target)
        ctx.reduction = reduction
        sq = (x - target) ** 2
        return sq.mean() if reduction == "mean" else (sq.sum() if reduction == "sum" else sq)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, target = ctx.saved_tensors
        diff = x - target
        scale = g * (2.0 / max(diff.numel(), 1)) if ctx.reduction == "mean" else g * 2.0  # (empty: no elements)
        grad = diff * scale
        return grad, -grad, None


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:  # fmt: skip
    """Mean (or sum, or elementwise) squared error."""
    _warn_size(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    a, b = _broadcast_pair(input, target)
    if weight is not None:
        return _weighted((a - b) ** 2, weight, input, reduction)
    return _MseLoss.apply(a, b, reduction)


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


def _class_targets(input: Tensor, target: Tensor, weight, ignore_index: int) -> tuple:
    """Checks torch makes of class-index targets; (host targets, one per row of the (rows, C) layout, layout)."""
    _not_differentiable("nll_loss_forward", "weight", weight)
    if not isinstance(target, Tensor) or target.dtype.name not in ("int64", "uint8"):
        found = target.dtype.scalar_name if isinstance(target, Tensor) else type(target).__name__
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {found}")
    ishape, tshape = input._data.shape, target._data.shape  # plain tuples: cheaper than Size in the hot path
    dim = len(ishape)
    if dim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    c = ishape[1] if dim >= 2 else ishape[0]
    if dim == 1:
        if len(tshape) > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    elif dim == 2:
        if len(tshape) != 1 or tshape[0] != ishape[0]:
            raise ValueError(
                f"Expected input batch_size ({ishape[0]}) to match target batch_size ({tshape[0] if tshape else 1})."
            )
    elif tshape != (ishape[0], *ishape[2:]):
        raise RuntimeError(f"Expected target size {[ishape[0], *ishape[2:]]}, got {list(tshape)}")
    if weight is not None and weight._data.shape != (c,):
        raise RuntimeError(
            f"weight tensor should be defined either for all {c} classes or no classes but got weight tensor of "
            f"shape: [{', '.join(map(str, weight.shape))}]"
        )
    t = target._host().reshape(-1).astype(np.int64, copy=False)
    if t.size and (t.min() < 0 or t.max() >= c):  # (two reductions: the common, valid case pays only these)
        bad = ((t < 0) | (t >= c)) & (t != ignore_index)
        if bad.any():
            raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    targets = loss_ops.ClassTargets(t, weight, ignore_index, input._data.dtype)
    return targets, loss_ops.RowLayout(ishape)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:  # fmt: skip
    """Cross entropy between ``softmax(input)`` over dim 1 and class-index targets (one fused node: ``weight``,
    ``ignore_index``, ``label_smoothing``) or class-probability targets (a float tensor shaped like ``input``)."""
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if isinstance(target, Tensor) and target.is_floating_point():
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing)
    targets, layout = _class_targets(input, target, weight, ignore_index)
    if label_smoothing > 0.0:
        cls = loss_ops.SmoothedCrossEntropy
    elif input.dim() >= 3:
        cls = loss_ops.CrossEntropy2d
    else:
        cls = loss_ops.CrossEntropy
    out = cls.apply(input, weight, targets, reduction, float(label_smoothing), layout)
    if cls is loss_ops.CrossEntropy2d and reduction == "none" and input.dim() != 4:
        return out.view(layout.loss_none_shape)  # torch views its 2-d loss back (node ViewBackward0)
    return out


def _cross_entropy_probs(input: Tensor, target: Tensor, weight, ignore_index: int, reduction: str,
                         smoothing: float) -> Tensor:  # fmt: skip
    """torch's ``cross_entropy_loss_prob_target``: ``-sum(log_softmax(input) * target * weight)``, the mean
    divided by the number of samples (``numel / C``)."""
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({target.shape[0]})."
            if input.dim() and target.dim() and input.shape[0] != target.shape[0]
            else f"Expected target size {list(input.shape)}, got {list(target.shape)}"
        )
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


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:  # fmt: skip
    """Negative log-likelihood of class-index ``target`` given log-probabilities ``input`` (class dim 1)."""
    reduction = _reduction(reduction, size_average, reduce)
    targets, layout = _class_targets(input, target, weight, ignore_index)
    cls = loss_ops.NllLoss2d if input.dim() >= 3 else loss_ops.NllLoss
    out = cls.apply(input, targets, reduction, layout)
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
    if input.numel() and bool(((input < 0) | (input > 1)).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        weight = weight.expand(*input.shape)
    return loss_ops.BinaryCrossEntropy.apply(input, target, weight, reduction)


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
