"""torch.nn.modules.adaptive's classes at their torch path (what torch's pickles name)."""

from ..adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401

__all__ = ["AdaptiveLogSoftmaxWithLoss"]
