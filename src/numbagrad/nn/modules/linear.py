"""torch's ``nn.modules.linear`` path: ``Identity``, ``Linear`` and ``NonDynamicallyQuantizableLinear``."""

from ..layers import Identity, Linear
from ..transformer import NonDynamicallyQuantizableLinear

__all__ = ["Identity", "Linear", "NonDynamicallyQuantizableLinear"]
