"""``torch.nn.modules.instancenorm``: the instance norms (defined in ``numbagrad.nn.instancenorm``)."""

from ..instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
