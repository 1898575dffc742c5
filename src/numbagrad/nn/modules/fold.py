"""``torch.nn.modules.fold``: ``Fold`` and ``Unfold`` (defined in ``numbagrad.nn.fold``)."""

from ..fold import Fold, Unfold

__all__ = ["Fold", "Unfold"]
