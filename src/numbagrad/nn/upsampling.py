"""``Upsample`` and its fixed-mode forms ``UpsamplingNearest2d``/``UpsamplingBilinear2d``: ``F.interpolate`` with
the arguments stored as torch stores them (a scale factor as a float, or a tuple of floats)."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module


class Upsample(Module):
    """Resample the spatial dims of (N, C, *spatial) input to ``size`` or by ``scale_factor`` (``F.interpolate``)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:  # fmt: skip
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)  # fmt: skip

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample`` in mode ``nearest`` (torch keeps it for old code)."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample`` in mode ``bilinear`` with ``align_corners=True`` (torch keeps it for old code)."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
