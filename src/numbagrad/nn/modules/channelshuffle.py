"""``torch.nn.modules.channelshuffle``: ``ChannelShuffle`` (defined in ``numbagrad.nn.pixelshuffle``)."""

from ..pixelshuffle import ChannelShuffle

__all__ = ["ChannelShuffle"]
