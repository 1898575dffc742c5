"""``Fold`` and ``Unfold``: sliding blocks of images as columns (im2col) and back (col2im), as ``F.fold``/``F.unfold``
with the arguments stored as given."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module


class Fold(Module):
    """Sum (N, C * kh * kw, L) columns back into (N, C, *output_size) images."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")  # fmt: skip


class Unfold(Module):
    """(N, C, H, W) images as (N, C * kh * kw, L) columns of sliding blocks."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")  # fmt: skip
