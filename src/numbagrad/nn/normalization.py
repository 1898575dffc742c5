"""``LayerNorm`` and ``GroupNorm``: affine parameters start at ones and zeros, as torch's."""

from __future__ import annotations

from .. import ops
from .._tensor import Tensor
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
