"""Memory layouts of storage arrays (numpy or device), as torch reasons about them: channels-last strides,
torch's contiguity tests per memory format, and copies laid out in a given axis order.

A channels-last tensor is an (N, H, W, C) row-major buffer seen through a transpose as (N, C, H, W): its strides
are torch's, and every op that reads it through its strides needs nothing new. Sizes and strides here are in
elements; ``order`` lists the axes from the outermost (largest stride) to the innermost.

It also holds the one description of how an elementwise kernel iterates over broadcast operands
(``iteration_space``: collapsed dims and masks over C-contiguous operands), which the CUDA backend and the
compiler's fused kernels share, and its strided form (``strided_loop``: the loop order and merged dims for arrays
of any strides, the result's first), by which the CPU backend reads transposed, sliced and broadcast operands in
place.
"""

from __future__ import annotations

from typing import NamedTuple

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


# --- the iteration space of an elementwise kernel ---------------------------------------------------------------
class Space(NamedTuple):
    """How a kernel loops over a broadcast ``shape``: the collapsed loop shape ``dims`` and, per operand, its
    ``masks`` entry (one flag per collapsed dim, True where the operand runs along it; None for a number) and
    its kind in ``kinds``:

    * ``s``: a number (a Python or numpy scalar), passed by value;
    * ``o``: one element broadcast to all (every flag False);
    * ``a``: a full operand (every flag True), read at the loop's flat index;
    * ``r``: a row, broadcast down the rows of a 2-dim loop (flags ``(False, True)``: a bias ``(C,)`` of
      ``(N, C)``);
    * ``c``: a column, broadcast along the rows of a 2-dim loop (``(True, False)``: ``(N, 1)`` of ``(N, C)``);
    * ``m``: any other broadcast, over a loop of 3 dims or more (``(1, C, 1)`` of ``(N, C, L)``).
    """

    dims: tuple
    masks: tuple
    kinds: str

    def mask_pattern(self) -> str:
        """The kernel pattern of a loop that reads every operand through its mask (CUDA's): ``kinds`` itself when
        no operand needs the loop's dims (all ``s``, ``o`` or ``a``), else one token per operand joined by ``_``:
        ``s`` for a number, the mask's flags as ``0``/``1`` digits for an array."""
        if all(k in "soa" for k in self.kinds):
            return self.kinds
        return "_".join("s" if m is None else "".join("1" if f else "0" for f in m) for m in self.masks)


def collapse(shape: tuple, operand_shapes) -> tuple[tuple, list]:
    """The collapsed sizes of the iteration ``shape`` and each operand's mask (True = full, False = broadcast):
    size-1 dims dropped and adjacent dims merged where every operand is full in both or broadcast in both. An
    operand shape of None (a number) has the mask None. An operand of C-contiguous storage is then read at
    stride 0 along its broadcast dims and, along the others, at the product of the later dims it is full in.

    This is ``strided_loop`` for C-contiguous operands (and result): their strides merge exactly there."""
    rank = len(shape)
    arrays = [s for s in operand_shapes if s is not None]
    strides = [contiguous_steps(shape)]
    for s in arrays:
        # an operand of more dims than the loop has only ones in its extra leading dims (its size is the loop's)
        padded = ((1,) * (rank - len(s)) + tuple(s))[-rank:] if rank else ()
        own = contiguous_steps(padded)
        strides.append(tuple(st if n == full else 0 for st, n, full in zip(own, padded, shape)))
    dims, steps = strided_loop(shape, strides)
    if not any(n != 1 for n in shape):
        flags = iter([(True,)] * len(arrays))
    else:
        flags = iter([tuple(st != 0 for st in step) for step in steps[1:]])
    return dims, [None if s is None else next(flags) for s in operand_shapes]


def iteration_space(shape: tuple, operand_shapes) -> Space:
    """The loop over ``shape`` (the broadcast of ``operand_shapes``; None for a number) that reads every operand
    in place: its collapsed dims, each operand's mask and kind (``Space``). Operands are C-contiguous arrays of
    their shapes (``compact_index`` turns an expanded view into one)."""
    dims, masks = collapse(shape, operand_shapes)
    kinds = ""
    for m in masks:
        if m is None:
            kinds += "s"
        elif all(m):
            kinds += "a"
        elif not any(m):
            kinds += "o"
        elif len(m) == 2:
            kinds += "r" if m[1] else "c"
        else:
            kinds += "m"
    return Space(dims, tuple(masks), kinds)


def compact_index(shape: tuple, strides: tuple) -> tuple | None:
    """The basic index that takes one element along each stride-0 dim of an expanded view (``x.expand(3, 4)`` of
    a ``(1, 4)`` tensor), giving the array it repeats, when there is such a dim; else None. Its result may still
    be strided (a transposed view); the caller checks."""
    if not any(st == 0 and n > 1 for st, n in zip(strides, shape)):
        return None
    return tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(strides, shape))


def strided_loop(shape: tuple, strides: list) -> tuple[tuple, list]:
    """The loop nest over ``shape`` that reads and writes arrays in place through their strides, as torch's
    TensorIterator walks them: ``strides`` holds, per array (the result first), its element strides along
    ``shape``'s dims (0 along a dim it is broadcast in). Returns the loop's sizes, outermost first, and each
    array's strides along them.

    Size-1 dims drop out; the others are ordered so that the result's strides (then, where it does not decide,
    the next array's) decrease inwards, so a result laid out as its input (``x.transpose(1, 2) * 2``) is walked
    in memory order and its input read contiguously; adjacent dims merge where every array steps through the
    two as through one (``stride[outer] == stride[inner] * size[inner]``: contiguous runs, and broadcast in
    both). A stride 0 never decides the order, and a negative stride orders by its magnitude."""
    keep = [d for d in range(len(shape)) if shape[d] != 1]
    order: list = []
    for d in keep:  # insertion from the outside in: d goes inside every dim it has a smaller stride than
        at = len(order)
        while at > 0 and not _inside(strides, order[at - 1], d):
            at -= 1
        order.insert(at, d)
    dims: list = []
    steps: list = [[] for _ in strides]
    for d in order:
        n = shape[d]
        if dims and all(s[-1] == st[d] * n for s, st in zip(steps, strides)):
            dims[-1] *= n
            for s, st in zip(steps, strides):
                s[-1] = st[d]
        else:
            dims.append(n)
            for s, st in zip(steps, strides):
                s.append(st[d])
    if not dims:
        return (1,), [(0,) for _ in strides]
    return tuple(dims), [tuple(s) for s in steps]


def _inside(strides: list, outer: int, inner: int) -> bool:
    """Whether dim ``inner`` belongs inside dim ``outer``: the first array with nonzero strides in both that
    differ says so by a smaller stride; none (a tie) keeps them in their order (``outer`` first)."""
    for st in strides:
        a, b = abs(st[outer]), abs(st[inner])
        if a and b and a != b:
            return b < a
    return True


def contiguous_steps(dims: tuple) -> tuple:
    """The element strides of a C-contiguous array of ``dims``: what a dense array walked in its memory order has
    along a ``strided_loop``."""
    steps, n = [], 1
    for d in reversed(dims):
        steps.append(n)
        n *= d
    return tuple(reversed(steps))
