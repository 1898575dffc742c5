"""torch.nn.modules.linear's classes at their torch path (what torch's pickles name)."""

from ..layers import Bilinear, Identity, Linear  # noqa: F401
from ..lazy import LazyLinear  # noqa: F401
from ..transformer import NonDynamicallyQuantizableLinear  # noqa: F401

__all__ = ["Bilinear", "Identity", "LazyLinear", "Linear", "NonDynamicallyQuantizableLinear"]
