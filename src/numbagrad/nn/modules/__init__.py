"""torch's module paths (``torch.nn.modules.conv.Conv2d``, ...): each file here re-exports the classes that
``numbagrad.nn`` defines, so code that imports them from there runs unchanged."""

from . import channelshuffle, conv, fold, instancenorm, padding, pixelshuffle, pooling, upsampling

__all__ = ["channelshuffle", "conv", "fold", "instancenorm", "padding", "pixelshuffle", "pooling", "upsampling"]
