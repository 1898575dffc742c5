"""Padding modules over the last 1, 2 or 3 dims, each a thin ``F.pad`` call: ``ZeroPad``, ``ConstantPad``,
``ReflectionPad``, ``ReplicationPad`` and ``CircularPad`` in 1, 2 and 3 dims. ``padding`` is an int (every side)
or torch's list (last dim first, ``(left, right)`` each)."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module


def _sides(padding, n: int) -> tuple:
    """torch's ``_ntuple``: a sequence as a tuple, a number repeated for all ``n`` sides."""
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * n


class _PadNd(Module):
    """``F.pad(input, self.padding, mode)``; ``_dims`` padded dims, so 2 * ``_dims`` sides."""

    _dims = 1
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _sides(padding, 2 * self._dims)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``."""

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value``."""

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value``."""

    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pad the last dim with its mirror image (the edge element not repeated)."""

    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last two dims with their mirror image (the edge elements not repeated)."""

    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pad the last three dims with their mirror image (the edge elements not repeated)."""

    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last dim with copies of its edge elements."""

    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last two dims with copies of their edge elements."""

    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pad the last three dims with copies of their edge elements."""

    _dims, _mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    """Circular padding; torch's modules check the input's rank before ``F.pad`` does."""

    _mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        n = self._dims
        if input.dim() not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.dim()}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pad the last dim by wrapping around."""

    _dims = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last two dims by wrapping around."""

    _dims = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last three dims by wrapping around."""

    _dims = 3
