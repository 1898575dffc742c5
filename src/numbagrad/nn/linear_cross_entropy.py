"""``LinearCrossEntropyLoss``: a ``Linear`` layer and the cross entropy of its logits in one module (torch's
``nn.modules.loss.LinearCrossEntropyLoss``; here apart from ``loss.py`` because ``layers.py`` imports that)."""

from __future__ import annotations

import math

from .._tensor import Tensor
from . import functional as F
from .layers import Linear
from .loss import _WeightedLoss


class LinearCrossEntropyLoss(_WeightedLoss):
    """Cross entropy of ``linear(input)`` against ``target``: a ``Linear(in_features, num_classes *
    prod(out_features))`` (``self.linear``, no bias by default) and the loss in one module, as torch's (its
    ``options`` pick torch's chunked kernel, which computes the same loss)."""

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple = (), bias: bool = False,
                 device=None, dtype=None, reduction: str = "mean", weight: Tensor | None = None,
                 ignore_index: int | None = None, label_smoothing: float = 0.0, options=None) -> None:  # fmt: skip
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes, self.out_features = num_classes, out_features
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        rows = num_classes * math.prod(out_features)
        self.linear = Linear(in_features, rows, bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        weight = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
        bias = self.linear.bias
        bias = bias.reshape((self.num_classes, *self.out_features)) if bias is not None else None
        return F.linear_cross_entropy(input, weight, target, linear_bias=bias, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)  # fmt: skip

    def extra_repr(self) -> str:
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")  # fmt: skip
