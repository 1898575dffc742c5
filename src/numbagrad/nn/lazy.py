"""Lazy modules: layers whose input size is read from the first batch (torch's ``LazyModuleMixin``).

Until then their parameters are ``UninitializedParameter`` placeholders. A forward pre-hook calls
``initialize_parameters(input)``, which materializes them and runs the layer's own ``reset_parameters``; the module
then becomes its ``cls_to_become`` (``LazyLinear`` becomes a ``Linear``) and the hook goes away. A state_dict loaded
before the first forward materializes the placeholders to the saved shapes (``Module.load_state_dict``).
"""

from __future__ import annotations

from .. import ops
from .._tensor import Tensor
from .._types import int64
from ..autograd.grad_mode import no_grad
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .layers import Linear
from .parameter import UninitializedBuffer, UninitializedParameter, UninitializedTensorMixin


class LazyModuleMixin:
    """Adds the lazy protocol to a module class listed before the layer it becomes (``cls_to_become``)."""

    cls_to_become: type | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer is still a placeholder."""
        tensors = list(self._parameters.values()) + list(self._buffers.values())
        return any(isinstance(t, UninitializedTensorMixin) for t in tensors)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialize the placeholders from the first input (each lazy layer says how)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")


def _infer_parameters(module: LazyModuleMixin, args: tuple) -> None:
    """The forward pre-hook: initialize from the first input, then become the concrete class."""
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """A ``Linear`` whose ``in_features`` is the last dim of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class _LazyBatchNorm(LazyModuleMixin):
    """Batch norm whose ``num_features`` is the channel count (dim 1) of its first input."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None) -> None:  # fmt: skip
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = ops.tensor(0, dtype=int64, device=device)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            if self.affine:
                self.weight.materialize((self.num_features,))
                self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyBatchNorm, BatchNorm1d):
    """A ``BatchNorm1d`` whose ``num_features`` comes from its first input."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm, BatchNorm2d):
    """A ``BatchNorm2d`` whose ``num_features`` comes from its first input."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm, BatchNorm3d):
    """A ``BatchNorm3d`` whose ``num_features`` comes from its first input."""

    cls_to_become = BatchNorm3d


class _LazyConv(LazyModuleMixin):
    """A convolution whose ``in_channels`` is the channel count of its first input."""

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input: Tensor) -> int:
        spatial = self._dims
        if input.dim() not in (spatial + 1, spatial + 2):
            raise RuntimeError(
                f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to {type(self).__name__}, but "
                f"got input of size: {input.shape}"
            )
        return input.shape[1] if input.dim() == spatial + 2 else input.shape[0]

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            with no_grad():
                self.weight.materialize(shape)
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()


def _lazy_conv(base: type, transposed: bool) -> type:
    """The lazy form of ``base`` (``LazyConv2d`` of ``Conv2d``...): torch's constructor less ``in_channels``."""

    if transposed:

        def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                     bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                     dtype=None) -> None:  # fmt: skip
            base.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
                          padding_mode, device, dtype)  # fmt: skip
            _lazy_parameters(self, out_channels, bias, device, dtype)
    else:

        def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                     bias: bool = True, padding_mode: str = "zeros", device=None,
                     dtype=None) -> None:  # fmt: skip
            base.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device,
                          dtype)  # fmt: skip
            _lazy_parameters(self, out_channels, bias, device, dtype)

    name = "Lazy" + base.__name__
    doc = f"A ``{base.__name__}`` whose ``in_channels`` is the channel count of its first input."
    return type(name, (_LazyConv, base), {"__init__": __init__, "cls_to_become": base, "__doc__": doc,
                                          "__module__": __name__})  # fmt: skip


def _lazy_parameters(module, out_channels: int, bias: bool, device, dtype) -> None:
    module._initialize_hook = module.register_forward_pre_hook(_infer_parameters)
    module.weight = UninitializedParameter(device=device, dtype=dtype)
    module.out_channels = out_channels
    if bias:
        module.bias = UninitializedParameter(device=device, dtype=dtype)


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


class _LazyInstanceNorm(_LazyBatchNorm):
    """Instance norm whose ``num_features`` comes from its first input (dim 1, as torch reads it)."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None) -> None:  # fmt: skip
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """An ``InstanceNorm1d`` whose ``num_features`` comes from its first input."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """An ``InstanceNorm2d`` whose ``num_features`` comes from its first input."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """An ``InstanceNorm3d`` whose ``num_features`` comes from its first input."""

    cls_to_become = InstanceNorm3d
