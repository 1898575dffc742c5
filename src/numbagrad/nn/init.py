"""``nn.init``: in-place initialisers with torch's fan and gain rules. Each runs under no-grad (so it works on
parameters) and returns the tensor."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import ops
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended scale of weights for an activation (torch's table)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid") or nonlinearity.startswith("conv_transpose"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill ``tensor`` with draws from ``U(a, b)``, in place.

    ``generator`` is accepted but ignored: the draws come from numbagrad's global generator (``manual_seed``).
    """
    with no_grad():
        return tensor.uniform_(a, b)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill ``tensor`` with draws from ``N(mean, std ** 2)``, in place.

    ``generator`` is accepted but ignored: the draws come from numbagrad's global generator (``manual_seed``).
    """
    with no_grad():
        return tensor.normal_(mean, std)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``, in place."""
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with zeros, in place."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with ones, in place."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Uniform in ``±gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio).

    ``generator`` is accepted but ignored: the draws come from numbagrad's global generator (``manual_seed``).
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Normal with std ``gain * sqrt(2 / (fan_in + fan_out))`` (Glorot & Bengio), in place.

    ``generator`` is accepted but ignored: the draws come from numbagrad's global generator (``manual_seed``).
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    """Uniform in ``±gain * sqrt(3 / fan)`` (He et al.); ``Linear`` uses it with ``a=sqrt(5)``.

    ``generator`` is accepted but ignored: the draws come from numbagrad's global generator (``manual_seed``).
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std)


def kaiming_normal_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    """Normal with std ``gain / sqrt(fan)`` (He et al.), in place.

    ``generator`` is accepted but ignored: the draws come from numbagrad's global generator (``manual_seed``).
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else normal_(tensor, 0.0, std)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:  # fmt: skip
    """Fill ``tensor`` with draws from ``N(mean, std ** 2)`` truncated to ``[a, b]``, in place.

    As torch: where the interval holds more than 30% of the mass, normal draws outside it are redrawn; otherwise
    uniform draws on ``[a, b]`` are accepted with the normal density's ratio to its peak there (rejection sampling),
    so narrow intervals far in a tail do not loop for ever. ``generator`` is accepted but ignored.
    """
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may be "
            "incorrect.",
            stacklevel=2,
        )

    def norm_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    with no_grad():
        if norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std) > 0.3:
            result = ops.empty_like(tensor).normal_(mean, std)
            while bool((outside := (result < a) | (result > b)).any()):
                result = ops.where(outside, ops.empty_like(result).normal_(mean, std), result)
        else:
            peak = max(a, min(mean, b))
            log_peak = -0.5 * ((peak - mean) / std) ** 2
            result = ops.empty_like(tensor).uniform_(a, b)
            pending = ops.empty_like(tensor).uniform_().log() > -0.5 * ((result - mean) / std) ** 2 - log_peak
            while bool(pending.any()):
                candidates = ops.empty_like(tensor).uniform_(a, b)
                result = ops.where(pending, candidates, result)
                accept = ops.empty_like(tensor).uniform_().log() <= -0.5 * ((candidates - mean) / std) ** 2 - log_peak
                pending = pending & ~accept
        return tensor.copy_(result)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D ``tensor`` with the identity (ones on the main diagonal), in place: linear layers that start as
    the identity map."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(ops.eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D convolution weight with the Dirac delta, in place: each output channel of each group
    copies one input channel through the kernel's centre, so the convolution starts as the identity."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    weight = np.zeros(sizes, dtype=tensor.dtype.numpy)
    centre = tuple(size // 2 for size in sizes[2:])
    for g in range(groups):
        for d in range(min(per_group, sizes[1])):
            weight[(g * per_group + d, d, *centre)] = 1
    with no_grad():
        return tensor.copy_(Tensor._make(weight))


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """Fill ``tensor`` (2-D or more, trailing dims flattened) with a random (semi-)orthogonal matrix times ``gain``,
    in place (Saxe et al.): the Q of a Gaussian matrix's QR, its columns' signs fixed by R's diagonal so that Q is
    uniform over the orthogonal group. ``generator`` is accepted but ignored."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flattened = ops.empty(rows, cols, dtype=tensor.dtype).normal_(0, 1).numpy().astype(np.float64)
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        tensor.copy_(Tensor._make(np.ascontiguousarray(q.reshape(tuple(tensor.shape)))).to(tensor.dtype))
        return tensor.mul_(gain)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fill a 2-D ``tensor`` from ``N(0, std ** 2)`` with ``ceil(sparsity * rows)`` zeros in each column at random
    rows, in place (Martens' sparse initialisation). ``generator`` is accepted but ignored."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std)
        for col in range(cols):
            zero_rows = ops.randperm(rows)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor
