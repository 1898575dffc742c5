"""torch.nn.modules.upsampling's classes at their torch path (what torch's pickles name)."""

from ..upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
