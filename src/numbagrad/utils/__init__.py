"""``numbagrad.utils``: ``utils.data`` (datasets, samplers, DataLoader) and ``utils.checkpoint``."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
