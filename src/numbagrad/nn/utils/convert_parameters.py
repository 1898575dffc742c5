"""``parameters_to_vector`` and ``vector_to_parameters``: all parameters as one flat vector and back."""

from __future__ import annotations

from collections.abc import Iterable

from ... import ops
from ..._tensor import Tensor
from ..module import typename


def _check_param_device(param: Tensor, old_param_device: int | None) -> int:
    """The device index of the first parameter (-1 for cpu); raises if a later one lives elsewhere."""
    device = param.device
    index = (device.index or 0) if device.type == "cuda" else -1
    if old_param_device is None:
        return index
    if index != old_param_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return old_param_device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Concatenate the parameters, each flattened, into one vector (differentiable, as in torch)."""
    param_device = None
    vec = []
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        vec.append(param.view(-1))
    return ops.cat(vec)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Point each parameter's ``.data`` at its slice of ``vec`` (views of ``vec``, not copies, as in torch)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected numbagrad.Tensor, but got: {typename(vec)}")
    param_device = None
    pointer = 0
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        num_param = param.numel()
        param.data = vec[pointer : pointer + num_param].view_as(param).data
        pointer += num_param
