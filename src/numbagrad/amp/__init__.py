"""``numbagrad.amp``: automatic mixed precision, as torch's ``torch.amp``.

``autocast`` runs the ops torch's autocast lists in a lower precision (matmul, linear and convolution in the
autocast dtype) or in float32 (the losses), per thread; ``GradScaler`` scales the loss so that small gradients
survive float16, unscales the gradients before the optimizer step and skips steps whose gradients overflowed.
numbagrad has float16 but no bfloat16 yet, so CPU autocast, whose default dtype is bfloat16, needs
``dtype=numbagrad.float16`` to be enabled.
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
