"""torch.nn.modules.channelshuffle's classes at their torch path (what torch's pickles name)."""

from ..pixelshuffle import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]
