"""torch.nn.modules.module's classes at their torch path (what torch's pickles name)."""

from ..module import Module  # noqa: F401

__all__ = ["Module"]
