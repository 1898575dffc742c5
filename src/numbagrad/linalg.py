"""``numbagrad.linalg``: torch.linalg's functions for real float32/float64 tensors, batched over leading dims.

The decompositions and solvers run numpy's LAPACK on the host (cuda inputs are copied there and back); their
Functions live in ``ops/linalg_functions.py``. Complex-valued results (``eig``, ``eigvals``) are absent because
numbagrad has no complex dtype.
"""

from __future__ import annotations

from .ops.linalg import matmul
from .ops.linalg_functions import (
    LinAlgError,
    cholesky,
    cholesky_ex,
    cond,
    cross,
    eigh,
    eigvalsh,
    householder_product,
    inv_ex,
    lstsq,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    matrix_norm,
    matrix_rank,
    multi_dot,
    norm,
    pinv,
    qr,
    solve,
    solve_ex,
    solve_triangular,
    svd,
    svdvals,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
    vector_norm,
)
from .ops.linalg_functions import det as det
from .ops.linalg_functions import inv as inv
from .ops.linalg_functions import linalg_diagonal as diagonal
from .ops.linalg_functions import matrix_exp as matrix_exp
from .ops.linalg_functions import matrix_power as matrix_power
from .ops.linalg_functions import slogdet as slogdet

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]
