"""``torch.nn.modules.pixelshuffle``: the pixel shuffles (defined in ``numbagrad.nn.pixelshuffle``)."""

from ..pixelshuffle import PixelShuffle, PixelUnshuffle

__all__ = ["PixelShuffle", "PixelUnshuffle"]
