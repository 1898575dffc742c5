"""``autocast``: the per-thread mixed-precision region (its state lives in ``autograd.grad_mode.state.autocast``,
read by the ops it casts)."""

from __future__ import annotations

import functools
import warnings

from .. import _types
from ..autograd.grad_mode import state

#: torch's default autocast dtype per device type, and the dtypes a region may cast to (torch's order).
_DEFAULT_DTYPES = {"cpu": _types.bfloat16, "cuda": _types.float16}
_SUPPORTED_DTYPES = (_types.bfloat16, _types.float16)
#: The device types torch's device strings name (an autocast for any other is a malformed device string).


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` accepts ``device_type`` (``"cpu"`` and ``"cuda"``)."""
    return device_type in _DEFAULT_DTYPES


def get_autocast_dtype(device_type: str):
    """The dtype ``autocast(device_type)`` uses when none is given: float16 for cuda, bfloat16 for the CPU."""
    return _DEFAULT_DTYPES[device_type]


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether this thread is inside an enabled ``autocast`` region (for ``device_type``, when given)."""
    active = state.autocast
    return active is not None and (device_type is None or active[0] == device_type)


def _device_name(device_type: str) -> str:
    return device_type.upper()


class autocast:  # noqa: N801 - torch's name
    """Within the region, matmul-like ops (``matmul``, ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``linear``,
    ``conv1d``/``conv2d``, ``prelu``) cast their floating inputs of ``device_type`` to ``dtype``, and the losses
    compute in float32; elsewhere ops run in their inputs' dtypes. ``enabled=False`` regions nest inside enabled
    ones. Also a decorator."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _types.DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(_types.DEVICE_TYPES)} device type at start of device string: {device_type}"
            )
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = True if cache_enabled is None else cache_enabled
        if enabled and device_type == "cuda":
            from ..cuda import is_available  # lazy: numbagrad.cuda imports this package (torch.cuda.amp's names)

            if not is_available():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
                enabled = False
        if enabled and self.fast_dtype not in _SUPPORTED_DTYPES:
            name = _device_name(device_type)
            supported = ", ".join(map(str, _SUPPORTED_DTYPES))
            warnings.warn(
                f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                f"{name} Autocast only supports dtypes of {supported} currently.",
                stacklevel=2,
            )
            enabled = False
        self._enabled = enabled

    def __enter__(self):
        self._previous = state.autocast
        state.autocast = (self.device, self.fast_dtype) if self._enabled else None
        return self

    def __exit__(self, *exc) -> None:
        state.autocast = self._previous

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)

        return wrapped


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """For a custom ``Function.forward``: with ``cast_inputs``, run it outside autocast on floating inputs cast to
    that dtype (when autocast is on); otherwise run it in the autocast state of the caller, as torch."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        active = state.autocast
        args[0]._autocast_state = active
        if cast_inputs is None or active is None:
            return fwd(*args, **kwargs)
        cast = [a.to(cast_inputs) if _is_floating_tensor(a) else a for a in args[1:]]
        kwargs = {k: v.to(cast_inputs) if _is_floating_tensor(v) else v for k, v in kwargs.items()}
        with autocast(device_type, enabled=False):
            return fwd(args[0], *cast, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """For a custom ``Function.backward``: run it in the autocast state its forward ran in."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        previous = state.autocast
        state.autocast = getattr(args[0], "_autocast_state", None)
        try:
            return bwd(*args, **kwargs)
        finally:
            state.autocast = previous

    return decorate_bwd


def _is_floating_tensor(value) -> bool:
    return hasattr(value, "is_floating_point") and value.is_floating_point()
