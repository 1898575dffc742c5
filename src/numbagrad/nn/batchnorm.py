"""``BatchNorm1d``, ``BatchNorm2d`` and ``BatchNorm3d``: batch statistics in training (updating ``running_mean``
and ``running_var`` with ``momentum``, or a cumulative average when ``momentum=None``, and counting
``num_batches_tracked``), the running statistics in eval."""

from __future__ import annotations

from .. import ops
from .._tensor import Tensor
from .._types import int64
from ..ops import nn_ops
from . import functional as F
from .module import Module
from .normalization import affine_parameters, reset_affine


class _BatchNorm(Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:  # fmt: skip
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        affine_parameters(self, (num_features,), affine, bias, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", ops.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ops.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", ops.tensor(0, dtype=int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Reset ``running_mean`` to zeros, ``running_var`` to ones and ``num_batches_tracked`` to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics, ``weight`` to ones and ``bias`` to zeros."""
        self.reset_running_stats()
        reset_affine(self)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def forward(self, input: Tensor) -> Tensor:
        """Normalize with the batch statistics in training (updating the running ones), the running ones in eval."""
        self._check_input_dim(input)
        weight, bias, running_mean, running_var, counter = self._tensors()
        training = self.training
        counted = training and self.track_running_stats and counter is not None
        bn_training = training or (running_mean is None and running_var is None)
        track = not training or self.track_running_stats
        mean, var = (running_mean, running_var) if track else (None, None)
        F._check_batch_norm(input, mean, var, weight, bias, bn_training)
        # the op counts num_batches_tracked too (momentum=None: the cumulative average), see ops.nn_ops.BatchNorm
        out = nn_ops.BatchNorm.apply(input, weight, bias, mean, var, bn_training, self.momentum, self.eps,
                                     counter if counted else None)  # fmt: skip
        return F._channels_last_as(out, input)  # (torch's kernel writes channels-last input's layout)

    def _tensors(self) -> tuple:
        """``weight``, ``bias``, ``running_mean``, ``running_var`` and ``num_batches_tracked``, read from the
        parameter and buffer dicts where they are there (``Module.__getattr__`` takes 1 us a name, 5 us of a
        27 us BatchNorm1d step), else as attributes (a parametrization makes ``weight`` a property)."""
        params, buffers = self._parameters, self._buffers
        return (
            params["weight"] if "weight" in params else self.weight,
            params["bias"] if "bias" in params else self.bias,
            buffers["running_mean"] if "running_mean" in buffers else self.running_mean,
            buffers["running_var"] if "running_var" in buffers else self.running_var,
            buffers["num_batches_tracked"] if "num_batches_tracked" in buffers else self.num_batches_tracked,
        )

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")  # fmt: skip


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) input."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) input."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Over (N, C, D, H, W) input."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")
