"""torch.nn.modules.flatten's classes at their torch path (what torch's pickles name)."""

from ..flatten import Flatten, Unflatten  # noqa: F401

__all__ = ["Flatten", "Unflatten"]
