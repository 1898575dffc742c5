"""``numbagrad.utils``: ``utils.data`` (datasets, samplers, DataLoader)."""

from . import data

__all__ = ["data"]
