"""Activation modules: thin wrappers over ``nn.functional`` with torch's constructor arguments and reprs."""

from __future__ import annotations

from .. import ops
from .._tensor import Tensor
from . import functional as F
from . import init as nn_init
from .module import Module
from .parameter import Parameter


def _inplace_suffix(inplace: bool) -> str:
    return ", inplace=True" if inplace else ""


class _Inplace(Module):
    """An activation whose only option is ``inplace`` (printed only when set)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """Applies ``relu(x) = max(x, 0)`` elementwise; ``inplace=True`` overwrites the input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)


class Tanh(Module):
    """Applies ``tanh`` elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    """Applies the logistic sigmoid ``1 / (1 + exp(-x))`` elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Hardtanh(Module):
    """``clamp(x, min_val, max_val)``, zero gradient outside (and at) the bounds."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False, min_value=None,
                 max_value=None) -> None:  # fmt: skip
        super().__init__()
        if min_value is not None or max_value is not None:
            import warnings

            warnings.warn("keyword argument `min_value`/`max_value` is deprecated and will be removed in future "
                          "releases, please use `min_val`/`max_val` instead.", FutureWarning, stacklevel=2)  # fmt: skip
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace
        assert self.max_val > self.min_val

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_suffix(self.inplace)}"


class ReLU6(Hardtanh):
    """Applies ``min(max(x, 0), 6)`` elementwise (a ``Hardtanh(0, 6)``); ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """Applies ``x`` where positive, else ``negative_slope * x``; ``inplace=True`` overwrites the input."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{_inplace_suffix(self.inplace)}"


class ELU(Module):
    """Applies ``x`` where positive, else ``alpha * (exp(x) - 1)``; ``inplace=True`` overwrites the input."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace_suffix(self.inplace)}"


class SELU(_Inplace):
    """Applies ``scale * elu(x, alpha)`` with the self-normalizing constants; ``inplace=True`` overwrites the input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.selu(input, self.inplace)


class GELU(Module):
    """Applies ``x * Phi(x)`` (``approximate='none'``) or its tanh approximation (``approximate='tanh'``)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_Inplace):
    """Applies ``x * sigmoid(x)`` (swish); ``inplace=True`` overwrites the input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, inplace=self.inplace)


class Mish(_Inplace):
    """Applies ``x * tanh(softplus(x))``; ``inplace=True`` overwrites the input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input, inplace=self.inplace)


class Hardswish(Module):
    """Applies ``x * relu6(x + 3) / 6``; ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input, self.inplace)


class Hardsigmoid(Hardswish):
    """Applies ``relu6(x + 3) / 6``; ``inplace=True`` overwrites the input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.hardsigmoid(input, self.inplace)


class Softplus(Module):
    """Applies ``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    """Applies ``x / (1 + |x|)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softsign(input)


class Tanhshrink(Module):
    """Applies ``x - tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanhshrink(input)


class LogSigmoid(Module):
    """Applies ``log(sigmoid(x))``, computed stably."""

    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class GLU(Module):
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves ``a``, ``b`` of dim ``dim``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(Module):
    """Applies softmax along ``dim``: ``exp(x) / sum(exp(x))``, entries in [0, 1] summing to 1."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """Applies ``log(softmax(x))`` along ``dim``, computed stably."""

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class Softmin(Softmax):
    """Applies ``softmax(-x)`` along ``dim``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim)


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; ``inplace=True`` overwrites the input."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace_suffix(self.inplace)}"


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """``x`` moved ``lambd`` towards 0, and 0 where ``|x| <= lambd``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)


class Threshold(Module):
    """``value`` where ``x <= threshold``, else ``x``; ``inplace=True`` overwrites the input."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_inplace_suffix(self.inplace)}"


class RReLU(Module):
    """Randomized leaky ReLU: a random negative slope in ``[lower, upper]`` per element while training, their mean
    in evaluation."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_inplace_suffix(self.inplace)}"


class PReLU(Module):
    """``x`` where positive, else ``weight * x`` with a learned slope (one, or ``num_parameters`` for the channels
    of dim 1), initialised to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(ops.empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set every slope back to ``init``."""
        nn_init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3)
