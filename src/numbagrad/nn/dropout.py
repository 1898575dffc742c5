"""``Dropout``: zeroes elements with probability ``p`` in training mode, the identity in eval mode."""

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
