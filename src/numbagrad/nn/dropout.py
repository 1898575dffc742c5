"""The dropout modules: ``Dropout`` zeroes elements with probability ``p`` in training mode (the identity in eval
mode); the others drop whole channels, or use SELU's negative saturation (``AlphaDropout``)."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module


class Dropout(Module):
    """In training, zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The identity in eval mode. The mask comes from numbagrad's global generator (numpy's PCG64), so it differs
    from torch's for the same seed.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _DropoutNd(Dropout):
    """A dropout module whose forward is one ``nn.functional`` function of ``(input, p, training, inplace)``."""

    function = staticmethod(F.dropout)

    def forward(self, input: Tensor) -> Tensor:
        return self.function(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) inputs with probability ``p`` (training only)."""

    function = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) or (C, H, W) inputs with probability ``p`` (training only)."""

    function = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs with probability ``p`` (training only)."""

    function = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU's self-normalising mean and variance (training only)."""

    function = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """``AlphaDropout`` of whole channels (training only)."""

    function = staticmethod(F.feature_alpha_dropout)
