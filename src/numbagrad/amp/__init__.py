"""``numbagrad.amp``: automatic mixed precision, as torch's ``torch.amp``.

``autocast`` runs the ops torch's autocast lists in a lower precision (matmul, linear and convolution in the
autocast dtype) or in float32 (the losses), per thread; ``GradScaler`` scales the loss so that small gradients
survive float16, unscales the gradients before the optimizer step and skips steps whose gradients overflowed.
CPU autocast's default dtype is bfloat16, as torch's; float16 may be asked for instead.
"""

from .autocast_mode import (
    autocast,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_enabled,
)
from .grad_scaler import GradScaler

__all__ = [
    "GradScaler",
    "autocast",
    "custom_bwd",
    "custom_fwd",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_enabled",
]
