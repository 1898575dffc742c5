"""``numbagrad.cuda.amp``: torch's deprecated spellings ``torch.cuda.amp.autocast`` and ``GradScaler``, which warn
and build the ``numbagrad.amp`` objects for the ``"cuda"`` device."""

from __future__ import annotations

import warnings

from ..amp import GradScaler as _GradScaler
from ..amp import autocast as _autocast


class autocast(_autocast):  # noqa: N801 - torch's name
    """``numbagrad.amp.autocast("cuda", ...)`` under its deprecated name."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True) -> None:
        warnings.warn(
            "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``numbagrad.amp.GradScaler("cuda", ...)`` under its deprecated name."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:  # fmt: skip
        warnings.warn(
            "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


__all__ = ["GradScaler", "autocast"]
