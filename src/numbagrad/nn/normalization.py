"""``LayerNorm`` and ``GroupNorm``: affine parameters start at ones and zeros, as torch's."""

from __future__ import annotations

import numpy as np

from .. import ops
from .._tensor import Tensor
from ..autograd.function import Function, once_differentiable
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def affine_parameters(module: Module, shape: tuple, affine: bool, bias: bool, dtype, device) -> None:
    """The optional per-feature affine of a normalization layer: ``weight`` and (with ``bias``) ``bias`` of
    ``shape``, left uninitialized for ``reset_affine``; each registered as None when absent, as torch does."""
    if affine:
        module.weight = Parameter(ops.empty(*shape, dtype=dtype, device=device))
        if bias:
            module.bias = Parameter(ops.empty(*shape, dtype=dtype, device=device))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def reset_affine(module: Module) -> None:
    """``weight`` to ones and ``bias`` to zeros (where the layer has them): how torch's normalization layers start."""
    if module.weight is not None:
        init.ones_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift (``weight``, ``bias``)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        affine_parameters(self, self.normalized_shape, elementwise_affine, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set ``weight`` to ones and ``bias`` to zeros."""
        reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")  # fmt: skip


class GroupNorm(Module):
    """Normalize each group of ``num_channels / num_groups`` channels per sample, then a per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:  # fmt: skip
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        affine_parameters(self, (num_channels,), affine, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set ``weight`` to ones and ``bias`` to zeros."""
        reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")  # fmt: skip


class RMSNorm(Module):
    """Root-mean-square normalization over the trailing ``normalized_shape`` dims, then a learned scale
    (``weight``); ``eps=None`` uses the input dtype's machine epsilon."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ops.empty(*self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set ``weight`` to ones."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Normalize each element by the squares of its ``size`` neighbouring channels (AlexNet's LRN)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class _CrossMapLRN2d(Function):
    """Lua Torch's cross-map LRN as torch still computes it: a running sum of squares over the channels whose
    window keeps channel 0 once it should have slid past it (for channels from ``(size - 1) // 2 + 2`` on), and a
    backward that assumes the centred window of ``LocalResponseNorm``. Both are kept, so that values and gradients
    are torch's; the backward is not differentiated again (torch's is not either)."""

    node_name = "CrossMapLRN2dBackward"

    @staticmethod
    def forward(ctx, input: Tensor, size: int, alpha: float, beta: float, k: float) -> Tensor:
        x = input._host()
        square = x * x
        channels = x.shape[1]
        pre_pad = int((size - 1) / 2 + 1)
        scale = np.empty_like(x)
        scale[:, 0] = square[:, : min(pre_pad, channels)].sum(1)
        for c in range(1, channels):
            scale[:, c] = scale[:, c - 1]
            if c < channels - pre_pad + 1:
                scale[:, c] += square[:, c + pre_pad - 1]
            if c > pre_pad:
                scale[:, c] -= square[:, c - pre_pad]
        scale = scale * (alpha / size) + k
        output = scale ** (-beta) * x
        ctx.size, ctx.alpha, ctx.beta = size, alpha, beta
        ctx.scale, ctx.input, ctx.output = scale, x, output
        return Tensor._make(input._backend.from_host(output))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        g = grad._host()
        size, scale, x, out = ctx.size, ctx.scale, ctx.input, ctx.output
        channels = x.shape[1]
        ratio = g * out / scale
        padded = np.zeros((x.shape[0], channels + size - 1) + x.shape[2:], dtype=x.dtype)
        first = int(size - (size - 1) / 2)
        padded[:, first : first + channels] = ratio
        window = np.stack([padded[:, c : c + size].sum(1) for c in range(channels)], axis=1)
        grad_input = scale ** (-ctx.beta) * g - (2 * ctx.alpha * ctx.beta / size) * x * window
        return Tensor._make(grad._backend.from_host(grad_input.astype(x.dtype))), None, None, None, None


class CrossMapLRN2d(LocalResponseNorm):
    """Lua Torch's cross-map LRN over (N, C, H, W) input (see ``_CrossMapLRN2d`` for how it differs from
    ``LocalResponseNorm``)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__(size, alpha, beta, k)

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        return _CrossMapLRN2d.apply(input, self.size, self.alpha, self.beta, self.k)
