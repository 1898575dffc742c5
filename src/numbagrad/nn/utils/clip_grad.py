"""Gradient clipping: ``clip_grad_norm_``, ``clip_grad_value_`` and their parts, with torch's semantics.

Everything runs as tensor ops under ``no_grad`` on the gradients' own device (no host round trip of the
gradients), and the arithmetic is torch's: per-tensor norms, the norm of the stacked norms, then one multiplication
by ``clamp(max_norm / (total_norm + 1e-6), max=1)`` (a multiplication even when it is 1, as torch does, so no
device-to-host synchronisation is needed). ``foreach`` is accepted and changes nothing: torch has foreach kernels
for both of numbagrad's devices (cpu and cuda), so no value of it raises, and the results are the same.
"""

from __future__ import annotations

import math
import types
import warnings
from collections.abc import Iterable

import numpy as np

from ... import ops
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...scalar_math import ROWS

_tensor_or_tensors = Tensor | Iterable[Tensor]


def _grouped(tensors: list[Tensor]) -> dict:
    """Tensors grouped by (device, dtype), in first-seen order (torch's ``_group_tensors_by_device_and_dtype``).
    The key is the storage's backend (one per device) and array dtype: ``Tensor.device`` and ``.dtype`` build
    objects, 4 us a gradient."""
    groups: dict = {}
    for t in tensors:
        groups.setdefault((t._backend, t._data.dtype), []).append(t)
    return groups


#: The dtypes whose 2-norms ``_norms`` and scaling ``_scale_`` run as one backend call per gradient.
_PLAIN = (np.dtype(np.float32), np.dtype(np.float64))


def _norms(group: list[Tensor], norm_type: float) -> Tensor:
    """The norms of the tensors of one (device, dtype) group, as one 1-D tensor. A float32/float64 2-norm is
    one pass over each tensor, its flat self-dot product (the backend's ``matmul`` of two vectors: BLAS's
    ``dot`` on the CPU), then one square root over the group's sums: the GPT step's 52 gradients took 1080 us
    as a square, a sum and a root per tensor, torch's whole clip 340. Other norms and dtypes run ``ops.norm``
    per tensor."""
    backend = group[0]._backend
    if norm_type == 2.0 and group[0]._data.dtype in _PLAIN:
        dtype = group[0]._data.dtype
        flats = [backend.reshape(t._data, (-1,)) for t in group]
        sums = [backend.reshape(backend.matmul(a, a), (1,)) for a in flats]
        joined = backend.concatenate(sums, 0, dtype) if len(sums) > 1 else sums[0]
        return Tensor._make(backend.elementwise(ROWS["sqrt"], [joined], (), dtype))
    parts = [backend.reshape(ops.norm(t, norm_type)._data, (1,)) for t in group]
    return Tensor._make(backend.concatenate(parts, 0, parts[0].dtype) if len(parts) > 1 else parts[0])


def _scale_update(i, g, coef):
    """One element of the in-place scaling: ``coef`` is a 1-element array on the gradients' device, read there
    (torch's clipping never copies the coefficient to the host)."""
    g[i] = g[i] * coef[0]


def _scale_(group: list[Tensor], coef: Tensor) -> None:
    """``g.mul_(coef)`` for every gradient of one (device, dtype) group, ``coef`` a 0-dim tensor on their device,
    then the version bump ``mul_`` makes. A contiguous float32/float64 gradient is one ``foreach`` loop (52 GPT
    gradients: 96 us; the table's ``mul`` kernel with ``out``: 420 us, torch's ``_foreach_mul_`` 84 us); the
    rest run that kernel (``mul_``'s checks, for one dtype and a 0-dim factor, find nothing to refuse)."""
    dtype = group[0]._data.dtype
    if coef.dtype != group[0].dtype:
        coef = coef.to(group[0].dtype)
    backend, factor, mul = group[0]._backend, coef._data, ROWS["mul"]
    single = backend.reshape(factor, (1,))
    for g in group:
        d = g._data
        if dtype in _PLAIN and backend.is_contiguous(d):
            backend.foreach(_scale_update, [backend.reshape(d, (-1,)), single])
        else:
            backend.elementwise(mul, [d, factor], (), dtype, out=d)
        g._bump_version()


def get_total_norm(
    tensors: _tensor_or_tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach: bool | None = None
) -> Tensor:
    """The ``norm_type`` norm of all ``tensors`` together (the norm of their norms), as a 0-dim tensor on the first
    tensor's device; ``error_if_nonfinite`` raises if it is nan or inf."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return ops.tensor(0.0)
    first_device = tensors[0].device
    with no_grad():
        norms = []  # one 1-D tensor per group
        for group in _grouped(tensors).values():
            norms.append(_norms(group, norm_type))
        # (``to`` only where a norm is elsewhere or of another dtype: one group needs none)
        stacked = [n if n.device == first_device else n.to(first_device) for n in norms]
        dtype = stacked[0].dtype
        for n in stacked[1:]:
            if n.dtype != dtype:
                dtype = ops.promote_types(dtype, n.dtype)
        parts = [(n if n.dtype == dtype else n.to(dtype))._data for n in stacked]
        backend = stacked[0]._backend
        joined = backend.concatenate(parts, 0, parts[0].dtype) if len(parts) > 1 else parts[0]
        total_norm = ops.norm(Tensor._make(joined), norm_type)
    if error_if_nonfinite and not math.isfinite(total_norm.item()):  # one host sync, as in torch
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from "
            "`parameters` is non-finite, so it cannot be clipped. To disable "
            "this error and scale the gradients by the non-finite norm anyway, "
            "set `error_if_nonfinite=False`"
        )
    return total_norm


def clip_grads_with_norm_(
    parameters: _tensor_or_tensors, max_norm: float, total_norm: Tensor, foreach: bool | None = None
) -> None:
    """Scale the gradients of ``parameters`` in place by ``min(1, max_norm / (total_norm + 1e-6))``."""
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    if len(grads) == 0:
        return
    with no_grad():
        clip_coef_clamped = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for group in _grouped(grads).values():
            _scale_(group, clip_coef_clamped.to(group[0].device))


def clip_grad_norm_(
    parameters: _tensor_or_tensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Rescale the gradients of ``parameters`` in place so that their total ``norm_type`` norm is at most
    ``max_norm``; return the total norm before clipping (a 0-dim tensor)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)  # a generator is read once, for both passes
        if is_generator and len(parameters) == 0:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(
    parameters: _tensor_or_tensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Deprecated alias of ``clip_grad_norm_`` (warns, as torch does)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: _tensor_or_tensors, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient of ``parameters`` in place to ``[-clip_value, clip_value]``."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    clip_value = float(clip_value)
    grads = [p.grad for p in parameters if p.grad is not None]
    with no_grad():
        for group in _grouped(grads).values():
            for g in group:
                g.clamp_(min=-clip_value, max=clip_value)
