"""torch.nn.modules.fold's classes at their torch path (what torch's pickles name)."""

from ..fold import Fold, Unfold  # noqa: F401

__all__ = ["Fold", "Unfold"]
