"""Convolution modules ``Conv1d/2d/3d`` and ``ConvTranspose1d/2d/3d``: weights initialised as torch's
``reset_parameters`` (kaiming_uniform with ``a=sqrt(5)``, bias uniform in ``±1/sqrt(fan_in)``), forward through
``F.conv{n}d``/``F.conv_transpose{n}d``; a ``padding_mode`` other than ``'zeros'`` pads with ``F.pad`` first."""

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
    _transposed = False

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
        stride, dilation = _ntuple(stride, n), _ntuple(dilation, n)
        self.kernel_size = _ntuple(kernel_size, n)
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
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.transposed, self.output_padding = self._transposed, (0,) * n
        self.groups, self.padding_mode = groups, padding_mode
        self._reversed_padding_repeated_twice = self._pad_list()
        if self.transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(ops.empty(*shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(ops.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _pad_list(self) -> list:
        """``F.pad``'s list for ``padding`` (last dim first): what a non-zero ``padding_mode`` pads by."""
        if self.padding == "valid":
            return [0, 0] * self._dims
        if self.padding == "same":
            pads = []
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
            return pads
        return [p for p in reversed(self.padding) for _ in range(2)]

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
        if self.padding != (0,) * len(self.kernel_size):
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

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        fn = (F.conv1d, F.conv2d, F.conv3d)[self._dims - 1]
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_ConvNd):
    """1-d convolution (cross-correlation) over (N, C, L) or (C, L) input."""

    _dims = 1


class Conv2d(_ConvNd):
    """2-d convolution (cross-correlation) over (N, C, H, W) or (C, H, W) input."""

    _dims = 2


class Conv3d(_ConvNd):
    """3-d convolution (cross-correlation) over (N, C, D, H, W) or (C, D, H, W) input."""

    _dims = 3


class _ConvTransposeNd(_ConvNd):
    """A transposed convolution: the gradient of the matching convolution with respect to its input. The weight is
    (in_channels, out_channels / groups, *kernel_size); ``forward`` takes an optional ``output_size`` that picks
    the ``output_padding`` giving that size."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:  # fmt: skip
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)  # fmt: skip
        self.output_padding = _ntuple(output_padding, self._dims)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """torch's ``_output_padding``: the module's own, or what makes the output ``output_size`` (which may also
        name the batch and channel dims)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        lead = 2 if input.dim() == n + 2 else 1
        output_size = [int(s) for s in output_size]
        if len(output_size) == lead + n:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(
                f"ConvTranspose{n}D: for {input.dim()}D input, output_size must have {n} or {lead + n} elements "
                f"(got {len(output_size)})"
            )
        spatial = input.shape[lead:]
        min_sizes = [(spatial[d] - 1) * self.stride[d] - 2 * self.padding[d] + self.dilation[d] *
                     (self.kernel_size[d] - 1) + 1 for d in range(n)]  # fmt: skip
        max_sizes = [m + self.stride[d] - 1 for d, m in enumerate(min_sizes)]
        for size, lo, hi in zip(output_size, min_sizes, max_sizes):
            if size < lo or size > hi:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range from {min_sizes} to "
                    f"{max_sizes} (for an input of {input.shape[lead:]})"
                )
        return tuple(s - m for s, m in zip(output_size, min_sizes))

    def forward(self, input: Tensor, output_size: list[int] | None = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError(f"Only `zeros` padding mode is supported for {type(self).__name__}")
        output_padding = self._output_padding(input, output_size)
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._dims - 1]
        return fn(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                  self.dilation)  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution over (N, C, L) or (C, L) input."""

    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution over (N, C, H, W) or (C, H, W) input."""

    _dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution over (N, C, D, H, W) or (C, D, H, W) input."""

    _dims = 3
