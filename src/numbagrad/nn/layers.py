"""``Identity`` and ``Linear`` (torch's ``nn/modules/linear.py``). The other layers live in modules named as
torch's (``activation``, ``conv``, ``pooling``, ``normalization``, ``batchnorm``, ``sparse``, ``dropout``,
``flatten``, ``loss``); they are re-exported here for code that imported them from ``nn.layers``."""

from __future__ import annotations

import math

from .. import ops
from .._tensor import Tensor
from . import functional as F
from . import init
from .activation import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .loss import CrossEntropyLoss, MSELoss, NLLLoss
from .module import Module
from .parameter import Parameter

__all__ = [
    "CrossEntropyLoss",
    "Identity",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "NLLLoss",
    "ReLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
]


class Identity(Module):
    """Returns its input; accepts (and ignores) any constructor arguments, as torch's does."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.t() + bias``, initialised as torch does (kaiming_uniform_(a=sqrt(5)), bias in
    ``±1/sqrt(in_features)``)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(ops.empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(ops.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise ``weight`` (kaiming_uniform with ``a=sqrt(5)``) and ``bias`` as torch does."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y_o = x1^T A_o x2 + b_o``, with ``A`` (``weight``) of shape (out, in1, in2) and ``b`` (``bias``), both
    initialised uniformly in ``±1/sqrt(in1_features)``, as torch's."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(ops.empty(out_features, in1_features, in2_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(ops.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ``±1/sqrt(in1_features)``, weight and bias alike."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")  # fmt: skip
