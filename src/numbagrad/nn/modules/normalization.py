"""torch.nn.modules.normalization's classes at their torch path (what torch's pickles name)."""

from ..normalization import CrossMapLRN2d, GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm  # noqa: F401

__all__ = ["CrossMapLRN2d", "GroupNorm", "LayerNorm", "LocalResponseNorm", "RMSNorm"]
