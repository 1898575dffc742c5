"""torch.nn.modules.pixelshuffle's classes at their torch path (what torch's pickles name)."""

from ..pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
