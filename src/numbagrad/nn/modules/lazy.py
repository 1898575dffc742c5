"""torch.nn.modules.lazy's classes at their torch path."""

from ..lazy import LazyModuleMixin  # noqa: F401

__all__ = ["LazyModuleMixin"]
