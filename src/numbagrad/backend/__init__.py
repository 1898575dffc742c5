"""Storage -> backend, in one place. ``numba.cuda`` is imported only by ``backend.cuda``, on first use.

Both backends (``cpu`` on numpy arrays, ``cuda`` on numba.cuda device arrays) offer the same functions, so ops
call ``backend_for(storage).<function>`` and never test the device.
"""

from __future__ import annotations

import numpy as np

from . import cpu

_BY_TYPE: dict = {np.ndarray: cpu}


def backend_for(data):
    """The backend module that owns this storage: ``cpu`` for numpy arrays, ``cuda`` for device arrays."""
    backend = _BY_TYPE.get(type(data))
    if backend is None:
        backend = _BY_TYPE[type(data)] = _classify(data)
    return backend


def for_device(device):
    """The backend that stores tensors on ``device`` (a ``numbagrad.device``); cuda raises a clear error where
    CUDA cannot be used."""
    if device.type == "cpu":
        return cpu
    cuda = cuda_backend()
    cuda.require()
    return cuda


def cuda_backend():
    """The cuda backend module, imported on first use (everything outside ``backend`` reaches it through here)."""
    from . import cuda  # lazy: importing numba.cuda costs seconds and needs a CUDA toolkit or the simulator

    return cuda


def _classify(data):
    if isinstance(data, np.ndarray):
        return cpu
    if isinstance(data, np.generic):
        raise TypeError(f"tensor storage must be an array, not the numpy scalar {data!r}")
    cuda = cuda_backend()
    if cuda.is_device_array(data):
        return cuda
    raise TypeError(f"tensor storage must be a numpy or numba.cuda device array, not {type(data).__name__}")
