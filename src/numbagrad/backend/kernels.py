"""The few hand-written CPU kernels: gradient accumulation (``apply_`` and optimizer steps live beside
their users). Imported lazily: importing this module starts Numba."""

from numba import njit, prange


@njit(cache=True, nogil=True)
def _accumulate_serial(dst, src):
    for i in range(dst.shape[0]):
        dst[i] += src[i]


@njit(cache=True, nogil=True, parallel=True)
def _accumulate_parallel(dst, src):
    for i in prange(dst.shape[0]):
        dst[i] += src[i]


def accumulate(dst, src, parallel: bool) -> None:
    """``dst += src`` over flat arrays of one dtype."""
    (_accumulate_parallel if parallel else _accumulate_serial)(dst, src)
