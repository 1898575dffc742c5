"""``InstanceNorm1d/2d/3d``: each (sample, channel) normalized over its spatial elements, with an optional affine
(off by default) and optional running statistics (off by default; used in eval when tracked)."""

from __future__ import annotations

import warnings

from .._tensor import Tensor
from . import functional as F
from .batchnorm import _BatchNorm


class _InstanceNorm(_BatchNorm):
    _spatial = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True) -> None:  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input: Tensor) -> None:
        n = self._spatial
        if input.dim() not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.dim()}D input)")

    def _apply_instance_norm(self, input: Tensor) -> Tensor:
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)  # fmt: skip

    def forward(self, input: Tensor) -> Tensor:
        """Normalize by each instance's statistics (or the running ones in eval when they are tracked)."""
        self._check_input_dim(input)
        unbatched = input.dim() == self._spatial + 1
        feature_dim = 0 if unbatched else 1
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features ({self.num_features}), but "
                    f"got: {input.shape[feature_dim]}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can silence this warning by not "
                "passing in num_features, which is not used because affine=False",
                stacklevel=2,
            )
        if unbatched:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Over (N, C, L) or (C, L) input."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Over (N, C, H, W) or (C, H, W) input."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Over (N, C, D, H, W) or (C, D, H, W) input."""

    _spatial = 3
