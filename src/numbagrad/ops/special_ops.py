"""The gamma-function ops torch has beside its elementwise table: ``mvlgamma`` (the multivariate log-gamma,
``torch.special.multigammaln``), composed of ``lgamma`` and a sum, and the Tensor forms of ``polygamma``,
whose torch signature puts the order before the tensor (``polygamma(n, input)`` but ``input.polygamma(n)``)."""

from __future__ import annotations

import math

from .._tensor import Tensor
from .._types import get_default_dtype
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from . import creation, inplace
from ._registry import Declaration, Sample, T, declare, register
from .elementwise import FUNCTIONS, polygamma


def _check_order(name: str, p) -> int:
    if not isinstance(p, int) or isinstance(p, bool):
        raise TypeError(f"{name}(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return p


def _shifted(x: Tensor, p: int) -> Tensor:
    """``x - j / 2`` for ``j`` in ``p - 1, ..., 0``, along a new last dimension (torch's order of the terms)."""
    offsets = creation.arange(-(p - 1) / 2, 0.5, 0.5, dtype=x.dtype, device=x.device)
    return x.unsqueeze(-1) + offsets


class Mvlgamma(Function):
    """``p (p - 1) / 4 * log(pi) + sum_j lgamma(x - j / 2)``; the gradient is ``sum_j digamma(x - j / 2)``, made of
    differentiable ops so it differentiates again."""

    node_name = "MvlgammaBackward0"

    @staticmethod
    def forward(ctx, x, p):
        ctx.p = p
        ctx.save_for_backward(x)
        with no_grad():
            terms = FUNCTIONS["lgamma"].apply(_shifted(x, p))
            return terms.sum(-1) + p * (p - 1) * math.log(math.pi) / 4

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * FUNCTIONS["digamma"].apply(_shifted(x, ctx.p)).sum(-1), None


@declare(methods=True, samples=(Sample(T(3, domain=(2.0, 4.0)), 1), Sample(T(2, 3, domain=(2.0, 4.0)), 3)))
def mvlgamma(input: Tensor, p: int) -> Tensor:  # noqa: A002 - torch's name
    """The multivariate log-gamma function of dimension ``p`` of each element:
    ``p (p - 1) / 4 * log(pi) + sum(lgamma(input - j / 2) for j in range(p))``."""
    p = _check_order("mvlgamma", p)
    x = input if input.is_floating_point() else input.to(get_default_dtype())
    return Mvlgamma.apply(x, p)


@declare(methods=("mvlgamma_",), name="_mvlgamma_")
def mvlgamma_(input: Tensor, p: int) -> Tensor:  # noqa: A002
    """In-place ``mvlgamma``: the multivariate log-gamma function of dimension ``p`` written into this tensor."""
    p = _check_order("mvlgamma_", p)
    return inplace.write_inplace(input, lambda t: mvlgamma(t, p))


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """The ``n``-th derivative of the digamma function of each element: ``polygamma(n, self)``."""
    return polygamma(n, self)


def _polygamma_inplace(self: Tensor, n: int) -> Tensor:
    """In-place ``polygamma``: the ``n``-th derivative of the digamma function written into this tensor."""
    return inplace.write_inplace(self, lambda t: polygamma(n, t))


register(Declaration("_polygamma_method", _polygamma_method, ("polygamma",)))
register(Declaration("_polygamma_inplace", _polygamma_inplace, ("polygamma_",)))
