"""Pooling modules in 1, 2 and 3 dims: ``MaxPool``, ``AvgPool``, ``AdaptiveAvgPool/MaxPool``, ``FractionalMaxPool``
(arguments stored as given, as torch; ``AvgPool1d`` keeps them as 1-tuples, as torch)."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module


class _MaxPoolNd(Module):
    _fn = staticmethod(F.max_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor):
        return self._fn(input, self.kernel_size, self.stride, self.padding, self.dilation, ceil_mode=self.ceil_mode,
                        return_indices=self.return_indices)  # fmt: skip

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")  # fmt: skip


class MaxPool1d(_MaxPoolNd):
    """Max over 1-d windows of the last dim (optionally returning the argmax indices)."""

    _fn = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Max over 2-d windows of the last two dims (optionally returning the argmax indices)."""

    _fn = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """Max over 3-d windows of the last three dims (optionally returning the argmax indices)."""

    _fn = staticmethod(F.max_pool3d)


class AvgPool1d(Module):
    """Mean over 1-d windows of the last dim."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:  # fmt: skip
        super().__init__()
        one = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,)  # noqa: E731 - torch's _single
        self.kernel_size = one(kernel_size)
        self.stride = one(stride if stride is not None else kernel_size)
        self.padding, self.ceil_mode, self.count_include_pad = one(padding), ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """Mean over 2-d windows of the last two dims."""

    _fn = staticmethod(F.avg_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return self._fn(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                        self.count_include_pad, self.divisor_override)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(AvgPool2d):
    """Mean over 3-d windows of the last three dims."""

    _fn = staticmethod(F.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    _fn = staticmethod(F.adaptive_avg_pool2d)

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return self._fn(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Mean over windows chosen so the last dim becomes ``output_size``."""

    _fn = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Mean over windows chosen so the last two dims become ``output_size``."""

    _fn = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Mean over windows chosen so the last three dims become ``output_size``."""

    _fn = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _fn = staticmethod(F.adaptive_max_pool2d)

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor):
        return self._fn(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max over windows chosen so the last dim becomes ``output_size`` (optionally returning the indices)."""

    _fn = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max over windows chosen so the last two dims become ``output_size`` (optionally returning the indices)."""

    _fn = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max over windows chosen so the last three dims become ``output_size`` (optionally returning the indices)."""

    _fn = staticmethod(F.adaptive_max_pool3d)


class _FractionalMaxPoolNd(Module):
    """Fractional max pooling (Graham, 2014): ``kernel_size`` windows at pseudo-random strides. A
    ``_random_samples`` tensor given here is a buffer (fixing the windows), as torch's."""

    _dims = 2
    _fn = staticmethod(F.fractional_max_pool2d)

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None) -> None:  # fmt: skip
        super().__init__()
        n, name = self._dims, type(self).__name__
        as_tuple = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * n  # noqa: E731 - torch's _ntuple
        if n == 3 and any(k <= 0 for k in as_tuple(kernel_size)):
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size}")
        self.kernel_size = as_tuple(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = as_tuple(output_size) if output_size is not None else None
        self.output_ratio = as_tuple(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor):
        return self._fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                        _random_samples=self._random_samples)  # fmt: skip


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling over the last two dims of (N, C, H, W) or (C, H, W) input."""

    _dims = 2
    _fn = staticmethod(F.fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling over the last three dims of (N, C, D, H, W) or (C, D, H, W) input."""

    _dims = 3
    _fn = staticmethod(F.fractional_max_pool3d)


class _LPPoolNd(Module):
    _function = staticmethod(F.lp_pool2d)

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")  # fmt: skip


class LPPool1d(_LPPoolNd):
    """The ``norm_type``-norm of each window of (N, C, L) input."""

    _function = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """The ``norm_type``-norm of each window of (N, C, H, W) input."""

    _function = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """The ``norm_type``-norm of each window of (N, C, D, H, W) input."""

    _function = staticmethod(F.lp_pool3d)


class _MaxUnpoolNd(Module):
    _function = staticmethod(F.max_unpool2d)
    _dims = 2

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        n = self._dims
        self.kernel_size = F._tuple(kernel_size, n, "kernel_size")
        self.stride = F._tuple(stride if stride is not None else kernel_size, n, "stride")
        self.padding = F._tuple(padding, n, "padding")

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return self._function(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Put ``MaxPool1d``'s maxima back at their positions (zeros elsewhere)."""

    _function = staticmethod(F.max_unpool1d)
    _dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Put ``MaxPool2d``'s maxima back at their positions (zeros elsewhere)."""

    _function = staticmethod(F.max_unpool2d)
    _dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """Put ``MaxPool3d``'s maxima back at their positions (zeros elsewhere)."""

    _function = staticmethod(F.max_unpool3d)
    _dims = 3
