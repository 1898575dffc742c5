"""Storage -> backend, in one place. ``numba.cuda`` is imported only by ``backend.cuda``, on first use."""

from __future__ import annotations

import numpy as np


def backend_for(data):
    """The backend module that owns this storage: ``cpu`` for numpy arrays, ``cuda`` for device arrays."""
    if isinstance(data, np.ndarray):
        from . import cpu

        return cpu
    from . import cuda

    return cuda
