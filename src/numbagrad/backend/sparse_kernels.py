"""The sparse COO product kernel: ``out[rows[k]] += values[k] * dense[cols[k]]`` over the stored entries.

A module-level ``@njit(cache=True)`` function, imported lazily by ``backend/cpu.py`` (importing this module starts
Numba). Duplicate entries (an uncoalesced tensor) add up, as torch's products treat them.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def coo_matmul_add(rows, cols, values, dense, out):
    n = dense.shape[1]
    for k in range(rows.shape[0]):
        r, c, v = rows[k], cols[k], values[k]
        for j in range(n):
            out[r, j] += v * dense[c, j]
