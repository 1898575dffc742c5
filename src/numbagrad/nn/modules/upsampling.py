"""``torch.nn.modules.upsampling``: the upsampling modules (defined in ``numbagrad.nn.upsampling``)."""

from ..upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
