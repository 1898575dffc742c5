"""torch.nn.modules.batchnorm's classes at their torch path (what torch's pickles name)."""

from ..batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from ..lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]
