"""Max pools over windows that are not a regular grid: ``adaptive_max_pool3d`` (torch's adaptive windows) and
``fractional_max_pool2d/3d`` (Graham's pseudo-random windows, drawn from ``_random_samples`` exactly as torch's
CPU kernel does, so the same samples give torch's values and indices).

All three list each window's input positions and reduce them with one ``nn_ops.WindowMaxPool`` node; its backward
is max pooling's (each gradient added at its maximum's index). This module imports nothing from
``nn.functional`` (which re-exports it).
"""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..ops import nn_ops
from ..ops.creation import rand

_AXES = {2: ("height", "width"), 3: ("time", "height", "width")}


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max over ``output_size`` adaptive windows of the last three dims (``None`` keeps that dim's size); with
    ``return_indices`` also the int64 positions ``(d * H + h) * W + w`` of each maximum in its volume."""
    if input.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    sizes = (output_size,) * 3 if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) != 3:
        raise RuntimeError("adaptive_max_pool3d(): internal error: output_size.size() must be 3")
    for d in range(1, input.dim()):
        if input.shape[d] == 0:
            raise RuntimeError(
                "adaptive_max_pool3d(): Expected input to have non-zero size for non-batch dimensions, but input "
                f"has sizes {list(input.shape)} with dimension {d} being empty"
            )
    in_sizes = tuple(input.shape[-3:])
    out = tuple(size if s is None else int(s) for size, s in zip(in_sizes, sizes))
    tables = [nn_ops.adaptive_windows(size, o) for size, o in zip(in_sizes, out)]
    positions = nn_ops.window_positions(tables, in_sizes)
    values, indices = nn_ops.AdaptiveMaxPool3d.apply(input, positions, out)
    return (values, indices) if return_indices else values


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """``adaptive_max_pool3d`` with its argmax indices."""
    return adaptive_max_pool3d(input, output_size, return_indices=True)


def fractional_starts(samples: np.ndarray, in_size: int, out: int, k: int) -> np.ndarray:
    """(planes, out) window starts for one dim from each plane's sample in [0, 1): torch's interval sequence
    ``int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (in_size - k) / (out - 1)``, computed in the samples'
    own float type (float32 rounding changes some starts), the last window ending at the input's end."""
    dtype = samples.dtype.type
    starts = np.empty((samples.shape[0], out), np.int64)
    if out > 1:
        alpha = dtype(in_size - k) / dtype(out - 1)
        steps = np.arange(out - 1).astype(samples.dtype)
        ahead = ((steps[None, :] + samples[:, None]) * alpha).astype(np.int64)
        starts[:, :-1] = ahead - (samples * alpha).astype(np.int64)[:, None]
    if out > 0:
        starts[:, -1] = in_size - k
    return starts


def _ints(value, n: int, what: str, name: str) -> tuple:
    values = (value,) * n if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        values = values * n
    if len(values) != n:
        count = "Ints" if n == 2 else "three Ints"
        raise RuntimeError(f"{name}: {what} must either be a single Int or tuple of {count}")
    return tuple(int(v) for v in values)


def _fractional(input: Tensor, kernel_size, output_size, output_ratio, samples, dims: int):
    name = f"fractional_max_pool{dims}d"
    where = name if dims == 2 else f"{name}_out"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        if dims == 2 and len(output_ratio) > 2:  # torch's 2-d pool takes only a sequence here
            raise ValueError(f"{name} requires output_ratio to either be a single Int or tuple of Ints.")
        ratios = (output_ratio,) * dims if isinstance(output_ratio, (int, float)) else tuple(output_ratio)
        ratios = ratios * dims if len(ratios) == 1 else ratios
        output_size = [int(input.shape[-dims + i] * ratios[i]) for i in range(dims)]
    if samples is None:
        n_batch = 1 if input.dim() == dims + 1 else input.shape[0]
        samples = rand(n_batch, input.shape[-dims - 1], dims, dtype=input.dtype, device=input.device)
    kernel = _ints(kernel_size, dims, "kernel_size", name)
    out = _ints(output_size, dims, "output_size", name)
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(f"{where}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(input.shape)}")
    for d in range(input.dim() - dims - 1, input.dim()):
        if input.shape[d] == 0:
            raise RuntimeError(
                f"{where}(): Expected input to have non-zero size for non-batch dimensions, but got"
                f"{list(input.shape)} with dimension {d} being empty."
            )
    if samples.dim() != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.dim()}")
    batch = 1 if input.dim() == dims + 1 else input.shape[0]
    if samples.shape[0] < batch:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != input.shape[-dims - 1]:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != dims:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {dims}; got {samples.shape[2]}.")
    if samples.dtype != input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    in_sizes = tuple(input.shape[-dims:])
    for axis, o, k, size in zip(_AXES[dims], out, kernel, in_sizes):
        if o + k - 1 > size or (dims == 3 and o + k - 1 == size):  # torch's 3-d check is strict
            raise RuntimeError(f"{where}(): pool {axis} {k} too large relative to input {axis} {size}")
    # one sample per plane and dim: torch's 2-d kernel reads (w, h), its 3-d kernel (t, h, w)
    u = samples[:batch].detach().cpu().reshape(-1, dims).numpy()
    order = (1, 0) if dims == 2 else (0, 1, 2)
    tables = [
        fractional_starts(np.ascontiguousarray(u[:, j]), size, o, k)[:, :, None] + np.arange(k)
        for j, size, o, k in zip(order, in_sizes, out, kernel)
    ]
    positions = nn_ops.window_positions(tables, in_sizes)
    node = nn_ops.FractionalMaxPool2d if dims == 2 else nn_ops.FractionalMaxPool3d
    return node.apply(input, positions, out)


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):  # fmt: skip
    """Max over ``kernel_size`` windows of the last two dims placed at pseudo-random strides so the output is
    ``output_size`` (or ``output_ratio`` of the input); one random sample per plane and dim (drawn from numbagrad's
    generator unless ``_random_samples`` (N, C, 2) is given). With ``return_indices`` also the maxima's positions."""
    values, indices = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)
    return (values, indices) if return_indices else values


def fractional_max_pool2d_with_indices(
    input: Tensor, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
    _random_samples: Tensor | None = None,
):  # fmt: skip
    """``fractional_max_pool2d`` with its argmax indices."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):  # fmt: skip
    """``fractional_max_pool2d`` over the last three dims (``_random_samples`` (N, C, 3))."""
    values, indices = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)
    return (values, indices) if return_indices else values


def fractional_max_pool3d_with_indices(
    input: Tensor, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
    _random_samples: Tensor | None = None,
):  # fmt: skip
    """``fractional_max_pool3d`` with its argmax indices."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)
