"""``a @ b.T`` for a few rows of ``a``, both operands row-major: each output a dot product of two contiguous rows.

This is the product an LSTM or GRU layer runs once per time step (``h @ W_hh.T`` forward, ``d(gates) @ W_hh``
backward, with ``W_hh`` as stored and its transpose copied once per layer), 70 times a step in a 2-layer model
over 35 steps. numpy's OpenBLAS runs its SkylakeX (AVX-512) sgemm on AMD Zen 4, slow for so few rows: at batch
20, hidden 256, float32, one thread, in an LSTM layer's loop, ``(20, 256) x (256, 1024)`` took 149 us there (on a
64-byte aligned copy of ``W_hh.T``; 200 on an unaligned one), torch's MKL 137 us alone, and this kernel 122 us;
``(20, 1024) x (1024, 256)``: 134 us and 113 us. The whole layer's forward and backward: 58.6 ms, 54.4 here.

How: the outputs go in blocks of ``ROWS`` x ``COLUMNS``. A block keeps its ``ROWS * COLUMNS`` sums in registers
and reads ``ROWS + COLUMNS`` elements per step along the shared dimension, and LLVM vectorizes that loop as a
reduction (``fastmath={'reassoc', 'contract'}``: the sum's order differs from BLAS's, as BLAS's own kernels
differ from each other; no other fast-math liberty, so infinities and NaNs propagate as in BLAS). Rows and
columns past the last whole block run in narrower blocks. Float32 sums in float32 and float64 in float64, as
BLAS does; the generated source is one text per precision (the accumulators' zero is the only difference).

Imported lazily by ``backend/cpu.py`` (it starts Numba).
"""

from __future__ import annotations

import numpy as np

from . import codegen

#: Output rows and columns per register block. In the LSTM layer's loop (hidden 256, batch 20, one thread),
#: medians of the forward's and backward's products: 5 x 4 122 and 113 us, 4 x 4 118 and 104, 4 x 3 116 and 114,
#: 5 x 2 118 and 135, 10 x 2 135 and 197; the whole layer's forward and backward against BLAS's in two pairs of
#: runs: 0.93 and 0.92 of its time with 5 x 4, 0.95 and 0.94 with 4 x 4.
ROWS, COLUMNS = 5, 4


def _block(rows: int, columns: int, column: str, indent: str) -> list[str]:
    """The source lines of one ``rows`` x ``columns`` block at ``(i0, column)``: sums, the loop along ``k``,
    stores."""
    sums = [f"s{r}_{c}" for r in range(rows) for c in range(columns)]
    lines = [indent + " = ".join(sums) + " = ZERO", indent + "for k in range(depth):"]
    lines += [f"{indent}    x{r} = a[i0 + {r}, k]" for r in range(rows)]
    lines += [f"{indent}    y{c} = b[{column} + {c}, k]" for c in range(columns)]
    lines += [f"{indent}    s{r}_{c} += x{r} * y{c}" for r in range(rows) for c in range(columns)]
    lines += [f"{indent}out[i0 + {r}, {column} + {c}] = s{r}_{c}" for r in range(rows) for c in range(columns)]
    return lines


def _column_blocks(columns: int, column: str, indent: str) -> list[str]:
    """All of ``a``'s rows against ``columns`` of ``b``'s from ``column``: whole row blocks, then the rest."""
    pad = " " * indent
    lines = [f"{pad}for i0 in range(0, whole_rows, {ROWS}):", *_block(ROWS, columns, column, pad + "    ")]
    lines.append(f"{pad}i0 = whole_rows")
    for rows in range(ROWS - 1, 0, -1):
        lines += [f"{pad}{'if' if rows == ROWS - 1 else 'elif'} rest == {rows}:"]
        lines += _block(rows, columns, column, pad + "    ")
    return lines


def _source(name: str, zero: str) -> str:
    """``name(a, b, out)``: ``out[:] = a @ b.T``. Column blocks outside, row blocks inside: a block of ``b``'s
    rows (``W``, 1 MiB at hidden 256, more than this processor's L2 beside the step's other data) is read once
    and used for all of ``a``'s rows (a few KiB), not read again for each block of them. The last rows and
    columns run in blocks as wide as they are."""
    lines = [
        "@njit(cache=CACHE, nogil=True, fastmath={'reassoc', 'contract'}, boundscheck=False)",
        f"def {name}(a, b, out):",
        f"    ZERO = {zero}",
        "    m, depth = a.shape",
        "    n = b.shape[0]",
        f"    whole_rows = m - m % {ROWS}",
        "    rest = m - whole_rows",
        f"    for block in range((n + {COLUMNS - 1}) // {COLUMNS}):",
        f"        j0 = block * {COLUMNS}",
        f"        if j0 + {COLUMNS} <= n:",
        *_column_blocks(COLUMNS, "j0", 12),
        "        else:",
        "            for j in range(j0, n):",
        *_column_blocks(1, "j", 16),
    ]
    return "\n".join(lines) + "\n"


_module = None
_FLOAT32 = np.dtype(np.float32)


def _loops():
    """The compiled module (built once per process; its kernels come from Numba's disk cache)."""
    global _module
    if _module is None:
        header = codegen.header("serial") + "from numba import float32\n"
        kernels = [_source("nt_f64", "0.0"), _source("nt_f32", "float32(0)")]
        _module = codegen.load_module("row_products", "\n\n".join([header, *kernels]))
    return _module


def product_nt(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b.T`` for C-contiguous 2-D float32 or float64 ``a`` and ``b`` of one dtype, into ``out`` (a new array,
    or a given ``(len(a), len(b))`` one of that dtype, strided as it may be: a block of a larger result's columns)."""
    if out is None:
        out = np.empty((a.shape[0], b.shape[0]), a.dtype)
    module = _loops()
    (module.nt_f32 if a.dtype == _FLOAT32 else module.nt_f64)(a, b, out)
    return out
