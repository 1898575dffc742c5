"""``numbagrad.sparse``: torch.sparse's products and sums of sparse COO tensors (``ops/sparse.py`` holds the
tensors themselves)."""

from __future__ import annotations

from ..ops.sparse import SparseCOOTensor
from ..ops.sparse import mm as _mm


def mm(mat1: SparseCOOTensor, mat2):
    """``mat1 @ mat2`` for a 2-D sparse ``mat1`` and a dense ``mat2``; gradients reach ``mat2`` and ``mat1``'s
    stored values."""
    return _mm(mat1, mat2)


def sum(input: SparseCOOTensor, dim=None, dtype=None):  # noqa: A001, A002 - torch's names
    """The sum of all stored values, or over ``dim`` (a dense tensor when every sparse dim is summed, else a
    sparse one)."""
    if dim is None:
        total = input._values().sum()
        return total if dtype is None else total.to(dtype)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dense = input.to_dense().sum(dims)
    if dtype is not None:
        dense = dense.to(dtype)
    summed_sparse = {d % input.dim() for d in dims if d % input.dim() < input.sparse_dim()}
    if len(summed_sparse) == input.sparse_dim():
        return dense
    return dense.to_sparse(input.sparse_dim() - len(summed_sparse))


__all__ = ["mm", "sum"]
