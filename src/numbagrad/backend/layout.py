"""Memory layouts of storage arrays (numpy or device), as torch reasons about them: channels-last strides,
torch's contiguity tests per memory format, and copies laid out in a given axis order.

A channels-last tensor is an (N, H, W, C) row-major buffer seen through a transpose as (N, C, H, W): its strides
are torch's, and every op that reads it through its strides needs nothing new. Sizes and strides here are in
elements; ``order`` lists the axes from the outermost (largest stride) to the innermost.
"""

from __future__ import annotations

import numpy as np

#: The axis order (outermost first) of each memory format, by tensor rank.
FORMAT_ORDERS = {"channels_last": {4: (0, 2, 3, 1)}, "channels_last_3d": {5: (0, 2, 3, 4, 1)}}
_RANK_ERRORS = {"channels_last": "required rank 4 tensor to use channels_last format",
                "channels_last_3d": "required rank 5 tensor to use channels_last_3d format"}  # fmt: skip


def element_strides(a) -> tuple:
    return tuple(s // a.dtype.itemsize for s in a.strides)


def format_order(name: str, ndim: int) -> tuple:
    """The axis order of memory format ``name`` for a tensor of ``ndim`` dims (torch's error for a wrong rank)."""
    if name == "contiguous_format":
        return tuple(range(ndim))
    orders = FORMAT_ORDERS[name]
    if ndim not in orders:
        raise RuntimeError(_RANK_ERRORS[name])
    return orders[ndim]


def is_contiguous_as(shape: tuple, strides: tuple, name: str) -> bool:
    """torch's ``is_contiguous(memory_format)``: the strides are those of ``name``'s order, size-1 dims aside
    (an empty tensor is contiguous in every format it has the rank for)."""
    if name != "contiguous_format" and len(shape) not in FORMAT_ORDERS[name]:
        return False
    if 0 in shape:
        return True
    expected = 1
    for d in reversed(format_order(name, len(shape))):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def strides_like_channels_last(shape: tuple, strides: tuple) -> bool:
    """torch's ``is_channels_last_strides_2d/3d``: strides increase from C through the spatial dims to N (a
    looser test than contiguity), which makes ``suggest_memory_format`` pick channels-last."""
    if len(shape) not in (4, 5) or strides[1] == 0:
        return False
    least = 0
    for d in (1, *range(len(shape) - 1, 1, -1), 0):
        if shape[d] == 0 or strides[d] < least:
            return False
        if d == 0 and least == strides[1]:  # an (N, 1, 1, 1) tensor: ambiguous, torch keeps it contiguous
            return False
        least = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def suggested_order(a) -> tuple:
    """torch's ``suggest_memory_format`` as an axis order: channels-last for channels-last-like strides, else
    row-major."""
    shape, strides = a.shape, element_strides(a)
    if strides_like_channels_last(shape, strides):
        return FORMAT_ORDERS["channels_last" if len(shape) == 4 else "channels_last_3d"][len(shape)]
    return tuple(range(len(shape)))


def dense_order(a) -> tuple | None:
    """The axis order of ``a``'s strides when its elements fill their span without gaps or overlap (torch's
    ``is_non_overlapping_and_dense``), else None."""
    shape, strides = a.shape, element_strides(a)
    order = sorted(range(len(shape)), key=lambda d: (-strides[d], d))  # equal strides: the earlier dim outside
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return None
            expected *= shape[d]
    return tuple(order)


def preserved_order(a) -> tuple:
    """The layout ``preserve_format`` keeps: ``a``'s own for dense storage, torch's suggestion otherwise."""
    order = dense_order(a)
    return order if order is not None else suggested_order(a)


def in_order(a, order: tuple, row_major):
    """``a`` laid out with its axes in ``order``, seen in ``a``'s axis order; ``row_major`` makes the row-major
    array of its argument (the backend's ``copy``, or ``ascontiguous`` to copy only if needed)."""
    inverse = tuple(int(i) for i in np.argsort(order))
    return row_major(a.transpose(order)).transpose(inverse)
