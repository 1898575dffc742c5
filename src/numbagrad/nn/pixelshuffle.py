"""``PixelShuffle``, ``PixelUnshuffle`` and ``ChannelShuffle``: channel/space rearrangements (sub-pixel
convolution upsampling, ShuffleNet's channel mixing), each one ``F`` call."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module


class PixelShuffle(Module):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r) with ``r = upscale_factor``."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W) with ``r = downscale_factor``: the inverse of PixelShuffle."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of ``groups`` groups of (N, C, *) input."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
