"""``Flatten`` and ``Unflatten``: reshape a range of dims into one, and one dim into several."""

from __future__ import annotations

import math

from .._tensor import Tensor
from .._types import wrap_dim
from .module import Module


class Flatten(Module):
    """Flatten dims ``start_dim`` to ``end_dim`` (by default all but the batch dim) into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (one entry may be -1, inferred)."""

    def __init__(self, dim: int | str, unflattened_size) -> None:
        super().__init__()
        if isinstance(dim, int):
            if not isinstance(unflattened_size, (tuple, list)):
                raise TypeError(
                    f"unflattened_size must be tuple of ints, but found type {type(unflattened_size).__name__}"
                )
            for i, s in enumerate(unflattened_size):
                if not isinstance(s, int):
                    raise TypeError(f"unflattened_size must be tuple of ints, but found element of type "
                                    f"{type(s).__name__} at pos {i}")  # fmt: skip
        else:
            raise TypeError(f"invalid argument type for dim parameter: {type(dim).__name__} (named tensors are not "
                            "supported)")  # fmt: skip
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        return unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """``input`` with dim ``dim`` split into ``sizes`` (torch's ``Tensor.unflatten``; node ``ViewBackward0``)."""
    d = wrap_dim(dim, input.dim())
    sizes = list(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or input.shape[d] % known:
            raise RuntimeError(f"shape '{sizes}' is invalid for input of size {input.shape[d]}")
        sizes[sizes.index(-1)] = input.shape[d] // known
    elif known != input.shape[d]:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
            f"({input.shape[d]}) in the input tensor"
        )
    return input.reshape(*input.shape[:d], *sizes, *input.shape[d + 1 :])
