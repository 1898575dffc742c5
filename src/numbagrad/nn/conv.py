"""``Conv1d`` and ``Conv2d``: weights initialised as torch's ``reset_parameters`` (kaiming_uniform with
``a=sqrt(5)``, bias uniform in ``±1/sqrt(fan_in)``), forward through ``F.conv1d``/``F.conv2d``."""

from __future__ import annotations

import math

from .. import ops
from .._tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

_PADDING_STRINGS = {"same", "valid"}
_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        stride = _ntuple(stride, n)
        if isinstance(padding, str):
            if padding not in _PADDING_STRINGS:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {_PADDING_STRINGS}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, n)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride, self.padding, self.dilation = stride, padding, _ntuple(dilation, n)
        self.transposed, self.output_padding = False, (0,) * n
        self.groups, self.padding_mode = groups, padding_mode
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(ops.empty(*shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(ops.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise ``weight`` (kaiming_uniform with ``a=sqrt(5)``) and ``bias`` as torch does."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv(self, input: Tensor, fn) -> Tensor:
        if self.padding_mode != "zeros":
            raise NotImplementedError(
                f"numbagrad's convolutions pad with zeros only (padding_mode={self.padding_mode!r} is not supported)"
            )
        return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    """1-d convolution (cross-correlation) over (N, C, L) input.

    ``padding_mode`` other than ``'zeros'`` is accepted but raises ``NotImplementedError`` in forward.
    """

    _dims = 1

    def forward(self, input: Tensor) -> Tensor:
        return self._conv(input, F.conv1d)


class Conv2d(_ConvNd):
    """2-d convolution (cross-correlation) over (N, C, H, W) input.

    ``padding_mode`` other than ``'zeros'`` is accepted but raises ``NotImplementedError`` in forward.
    """

    _dims = 2

    def forward(self, input: Tensor) -> Tensor:
        return self._conv(input, F.conv2d)
