"""Helpers shared by the distributions: broadcasting parameters, logits and probabilities, lazy properties."""

from __future__ import annotations

import numbers

from .. import ops
from .._tensor import Tensor
from .._typeinfo import finfo
from .._types import broadcast_shapes, get_default_dtype
from ..autograd import enable_grad
from ..nn import functional as F

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]

euler_constant = 0.57721566490153286060


def broadcast_all(*values) -> tuple[Tensor, ...]:
    """The values as tensors of one broadcast shape; numbers take the dtype and device of the first tensor (the
    default dtype if there is none)."""
    if not all(isinstance(v, Tensor | numbers.Number) for v in values):
        raise ValueError(
            "Input arguments must all be instances of Number, torch.Tensor or objects implementing __torch_function__."
        )
    if not all(isinstance(v, Tensor) for v in values):
        options: dict = dict(dtype=get_default_dtype())
        for value in values:
            if isinstance(value, Tensor):
                options = dict(dtype=value.dtype, device=value.device)
                break
        values = tuple(v if isinstance(v, Tensor) else ops.tensor(v, **options) for v in values)
    shape = broadcast_shapes(*(v.shape for v in values))
    return tuple(v if tuple(v.shape) == shape else v.expand(shape) for v in values)


def _standard_normal(shape, dtype, device) -> Tensor:
    return ops.empty(shape, dtype=dtype, device=device).normal_()


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from log-odds (``is_binary``) or from unnormalized log-probabilities along the last dim."""
    if is_binary:
        return ops.sigmoid(logits)
    return F.softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` clamped into ``[eps, 1 - eps]`` (the dtype's eps), so their logs stay finite."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (``is_binary``) or log-probabilities of clamped ``probs``."""
    clamped = clamp_probs(probs)
    if is_binary:
        return ops.log(clamped) - ops.log1p(-clamped)
    return ops.log(clamped)


class lazy_property:  # noqa: N801 - torch's name
    """A property computed on first access and then stored on the instance (so ``probs`` made from ``logits`` is
    computed once, and a distribution made from one of them never computes the other unless asked)."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):  # noqa: N801
    """What a ``lazy_property`` looks like on the class: both a lazy_property and a property (for docs)."""

    def __init__(self, wrapped) -> None:
        property.__init__(self, wrapped)


def _tril_mask(n: int, diag: int, device) -> Tensor:
    """The ``n x n`` bool mask of the entries on or below diagonal ``diag``."""
    arange = ops.arange(n, device=device)
    return arange < arange.view(-1, 1) + (diag + 1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The entries of ``mat`` (batched square matrices) on or below diagonal ``diag``, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag, mat.device)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of ``tril_matrix_to_vec``: square matrices, zero above diagonal ``diag``, whose lower part is
    filled from ``vec`` in row order (its last size must be such a triangle's size)."""
    # the positive root of D**2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 len = 0
    b = 1 + 2 * diag
    n = (-b + (b**2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > finfo(vec.dtype).eps:
        raise ValueError(
            f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as "
            "the lower triangular part of a square D x D matrix."
        )
    n = round(n)
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    mat[..., _tril_mask(n, diag, vec.device)] = vec
    return mat
