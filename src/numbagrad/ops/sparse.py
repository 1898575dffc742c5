"""Sparse COO tensors: enough of torch's ``sparse_coo`` layout for graph networks.

A ``SparseCOOTensor`` holds an int64 ``indices`` tensor (sparse_dim x nnz), a ``values`` tensor (nnz, *dense
dims) and a size. It is deliberately not a ``Tensor``: the dense ops cannot take it by mistake and silently compute
on nothing; what it supports are its own methods (``to_dense``, ``coalesce``, ``indices``/``values``, ``t``,
``@``) and ``sparse.mm``/``spmm``/``mm``/``sparse.sum``. Its gradient lives on ``values``: a sparse tensor built
with ``requires_grad=True`` (or from values that require grad) passes gradients to its stored entries only, so its
``.grad`` is sparse with the same pattern, as torch's ``sparse.mm`` gives (torch's dense ``mm`` gives a dense
gradient there instead). Products run one Numba kernel over the stored entries (``backend.coo_matmul``); on a cuda
device that kernel runs on the host.
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

from .. import _printing
from .._tensor import Tensor
from .._types import Size, get_default_dtype, int64, sparse_coo
from ..autograd.function import Function
from ._common import not_a_tensor
from ._registry import declare
from .creation import tensor as make_tensor
from .shape import cat


class SparseCOOTensor:
    """A sparse tensor in coordinate format (see the module docstring)."""

    is_sparse = True
    layout = sparse_coo
    _grad_slots = 0  # never owned by the backward engine, which reads this mark on every gradient it hands on

    def __init__(self, indices: Tensor, values: Tensor, size: tuple, coalesced: bool = False) -> None:
        self._indices_t, self._values_t, self._size, self._coalesced = indices, values, tuple(size), coalesced

    # --- what torch's sparse tensors answer ------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._size)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self._size[dim]

    def dim(self) -> int:
        return len(self._size)

    @property
    def ndim(self) -> int:
        return len(self._size)

    @property
    def dtype(self):
        return self._values_t.dtype

    @property
    def device(self):
        return self._values_t.device

    @property
    def requires_grad(self) -> bool:
        return self._values_t.requires_grad

    def requires_grad_(self, requires_grad: bool = True) -> SparseCOOTensor:
        self._values_t.requires_grad_(requires_grad)
        return self

    @property
    def grad(self) -> SparseCOOTensor | None:
        """The gradient with respect to this tensor at its stored positions, as a coalesced sparse tensor (entries
        repeated at one position share that position's gradient, so it is taken once)."""
        g = self._values_t.grad
        if g is None:
            return None
        idx = self._indices_t._host()
        if idx.shape[1] == 0:
            return SparseCOOTensor(self._indices_t, g, self._size, True)
        flat = np.ravel_multi_index(tuple(idx), self._size[: idx.shape[0]])
        unique, first = np.unique(flat, return_index=True)
        indices = Tensor._make(np.stack(np.unravel_index(unique, self._size[: idx.shape[0]])).astype(np.int64))
        return SparseCOOTensor(indices, g[Tensor._make(first.astype(np.int64))], self._size, True)

    def sparse_dim(self) -> int:
        return self._indices_t.shape[0]

    def dense_dim(self) -> int:
        return self._values_t.dim() - 1

    def _nnz(self) -> int:
        return self._indices_t.shape[1]

    def is_coalesced(self) -> bool:
        return self._coalesced

    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._indices_t

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._values_t

    def _indices(self) -> Tensor:
        return self._indices_t

    def _values(self) -> Tensor:
        return self._values_t

    def numel(self) -> int:
        return int(np.prod(self._size))

    def coalesce(self) -> SparseCOOTensor:
        """Sorted unique indices, the values of repeated ones summed (differentiable in the values)."""
        if self._coalesced:
            return self
        idx = self._indices_t._host()
        if idx.shape[1] == 0:
            return SparseCOOTensor(self._indices_t, self._values_t, self._size, True)
        flat = np.ravel_multi_index(tuple(idx), self._size[: idx.shape[0]])
        unique, inverse = np.unique(flat, return_inverse=True)
        indices = Tensor._make(np.stack(np.unravel_index(unique, self._size[: idx.shape[0]])).astype(np.int64))
        summed = self._values_t.new_zeros((len(unique), *self._values_t.shape[1:]))
        values = summed.index_add(0, Tensor._make(inverse.astype(np.int64)), self._values_t)
        return SparseCOOTensor(indices, values, self._size, True)

    def to_dense(self, dtype=None, *, masked_grad: bool = True) -> Tensor:
        """The dense tensor, zeros where nothing is stored (repeated indices add up)."""
        out = ToDense.apply(self._values_t, self._indices_t, self._size)
        return out if dtype is None else out.to(dtype)

    def t(self) -> SparseCOOTensor:
        if self.sparse_dim() != 2 or self.dense_dim() != 0:
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got "
                               f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dimensions")  # fmt: skip
        return SparseCOOTensor(self._indices_t.flip(0), self._values_t, self._size[::-1], False)

    def __add__(self, other):
        """Sparse plus sparse keeps every entry of both (uncoalesced, as torch's); sparse plus dense is dense."""
        if isinstance(other, SparseCOOTensor):
            if other._size != self._size:
                raise RuntimeError(
                    f"add: expected 'self' and 'other' to have same size, but self has size {list(self._size)} while "
                    f"other has size {list(other._size)} (FYI: dense-sparse addition does not currently support "
                    "broadcasting)"
                )
            indices = cat([self._indices_t, other._indices_t], 1)
            return SparseCOOTensor(indices, cat([self._values_t, other._values_t], 0), self._size, False)
        if isinstance(other, Tensor):
            return other + self.to_dense()
        return NotImplemented

    __radd__ = __add__

    def zero_(self) -> SparseCOOTensor:
        """Drop every stored entry (torch's ``zero_`` of a sparse tensor: nnz becomes 0), in place."""
        self._indices_t = self._indices_t[:, :0]
        self._values_t = self._values_t.detach()[:0]
        self._coalesced = True
        return self

    def __neg__(self) -> SparseCOOTensor:
        return SparseCOOTensor(self._indices_t, -self._values_t, self._size, self._coalesced)

    def __matmul__(self, other: Tensor) -> Tensor:
        return mm(self, other)

    def mm(self, other: Tensor) -> Tensor:
        return mm(self, other)

    def to(self, *args, **kwargs) -> SparseCOOTensor:
        return SparseCOOTensor(self._indices_t.to(*_device_only(args), **_without_dtype(kwargs)),
                               self._values_t.to(*args, **kwargs), self._size, self._coalesced)  # fmt: skip

    def detach(self) -> SparseCOOTensor:
        return SparseCOOTensor(self._indices_t, self._values_t.detach(), self._size, self._coalesced)

    def __repr__(self) -> str:
        def body(t: Tensor, column: int) -> str:
            text = _printing.format_tensor(t._host(), dtype_name=t.dtype.name, default_dtype_name=t.dtype.name,
                                           suffixes=(), device_suffix=None)  # fmt: skip
            return text.replace("\n", "\n" + " " * column)

        size = "(" + ", ".join(map(str, self._size)) + ("," if len(self._size) == 1 else "") + ")"
        suffixes = [f"size={size}", f"nnz={self._nnz()}"]
        if self.dtype.name not in (get_default_dtype().name, "int64", "bool"):
            suffixes.append(f"dtype=numbagrad.{self.dtype.name}")
        suffixes.append("layout=numbagrad.sparse_coo")
        if self.requires_grad:
            suffixes.append("requires_grad=True")
        text = (f"tensor(indices={body(self._indices_t, len('tensor(indices='))},\n"
                f"       values={body(self._values_t, len('       values='))}")  # fmt: skip
        # torch's suffix wrapping (the first suffix on a line of its own), measured as torch prints the names
        line = 0
        for k, suffix in enumerate(suffixes):
            width = len(suffix) - suffix.count("numbagrad.") * (len("numbagrad.") - len("torch."))
            if k == 0 or line + width + 2 > 80:
                text += ",\n       " + suffix
                line = 7 + width
            else:
                text += ", " + suffix
                line += width + 2
        return text + ")"

    __str__ = __repr__


def _device_only(args: tuple) -> tuple:
    return tuple(a for a in args if isinstance(a, str) or type(a).__name__ == "device")


def _without_dtype(kwargs: dict) -> dict:
    return {k: v for k, v in kwargs.items() if k != "dtype"}


class ToDense(Function):
    """Scatter the stored values into a dense tensor; the gradient of each value is the gradient at its index."""

    node_name = "ToDenseBackward0"

    @staticmethod
    def forward(ctx, values: Tensor, indices: Tensor, size: tuple) -> Tensor:
        ctx.save_for_backward(indices)
        sparse_dims = indices.shape[0]
        flat_size = int(np.prod(size[:sparse_dims]))
        flat = values.new_zeros((flat_size, *values.shape[1:]))
        if indices.shape[1]:
            position = np.ravel_multi_index(tuple(indices._host()), size[:sparse_dims])
            flat = flat.index_add(0, Tensor._make(position.astype(np.int64)), values.detach())
        return flat.reshape(size)

    @staticmethod
    def backward(ctx, g: Tensor):
        (indices,) = ctx.saved_tensors
        sparse_dims = indices.shape[0]
        dense_shape = tuple(g.shape[sparse_dims:])
        flat = g.reshape(-1, *dense_shape)
        if indices.shape[1] == 0:
            return flat[:0], None, None
        position = np.ravel_multi_index(tuple(indices._host()), tuple(g.shape[:sparse_dims]))
        return flat[Tensor._make(position.astype(np.int64))], None, None


class SparseMm(Function):
    """``sparse @ dense`` for a 2-D sparse matrix: one kernel over the stored entries. Its backward is the
    transposed product (itself this Function) for the dense side and, for the values, each entry's row of the
    output gradient dotted with its column's dense row."""

    node_name = "SparseAddmmBackward0"

    @staticmethod
    def forward(ctx, values: Tensor, dense: Tensor, indices: Tensor, size: tuple) -> Tensor:
        rows, cols = indices._host()
        ctx.save_for_backward(values, dense, indices)
        ctx.size = size
        data = dense._backend.coo_matmul(rows, cols, values._data, dense._data, size[0])
        return Tensor._make(data)

    @staticmethod
    def backward(ctx, g: Tensor):
        values, dense, indices = ctx.saved_tensors
        grad_values = grad_dense = None
        if ctx.needs_input_grad[1]:
            grad_dense = SparseMm.apply(values, g, indices.flip(0), ctx.size[::-1])
        if ctx.needs_input_grad[0]:
            rows, cols = indices[0], indices[1]
            grad_values = (g[rows] * dense[cols]).sum(-1)
        return grad_values, grad_dense, None, None


@declare(methods=("to_sparse", "to_sparse_coo"), differentiable=False)
def to_sparse(input: Tensor, sparse_dim: int | None = None, *, layout=None) -> SparseCOOTensor:  # noqa: A002
    """The nonzero elements of ``input`` as a coalesced sparse COO tensor (the first ``sparse_dim`` dims sparse)."""
    sparse_dim = input.dim() if sparse_dim is None else sparse_dim
    data = input._host()
    keep = data.reshape(*data.shape[:sparse_dim], -1).any(axis=-1) if sparse_dim < input.dim() else data != 0
    index = np.nonzero(keep)
    indices = Tensor._make(np.stack(index).astype(np.int64) if index else np.zeros((0, 1), np.int64))
    return SparseCOOTensor(indices, input[tuple(Tensor._make(i.astype(np.int64)) for i in index)], tuple(input.shape),
                           True)  # fmt: skip


@declare(differentiable=False)
def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory: bool = False,
                      requires_grad: bool = False, check_invariants=None,
                      is_coalesced=None) -> SparseCOOTensor:  # fmt: skip
    """A sparse tensor with ``values`` at ``indices`` (sparse_dim x nnz); ``size`` defaults to the smallest that
    holds them. Values that require grad, or ``requires_grad=True``, make the stored entries differentiable."""
    indices = indices if isinstance(indices, Tensor) else make_tensor(indices, dtype=int64)
    values = values if isinstance(values, Tensor) else make_tensor(values, dtype=dtype)
    if dtype is not None and values.dtype != dtype:
        values = values.to(dtype)
    if indices.dim() != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if indices.shape[1] != values.shape[0]:
        raise RuntimeError(
            f"indices and values must have same nnz, but got nnz from indices: {indices.shape[1]}, nnz from values: "
            f"{values.shape[0]}"
        )
    idx = indices._host()
    if size is None:
        size = tuple(int(m) + 1 for m in (idx.max(axis=1) if idx.shape[1] else [0] * idx.shape[0]))
        size += tuple(values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != indices.shape[0] + values.dim() - 1:
        raise RuntimeError(
            f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, sparse_dim = "
            f"{indices.shape[0]}, dense_dim = {values.dim() - 1}"
        )
    if check_invariants and idx.shape[1]:
        for d in range(idx.shape[0]):
            if idx[d].min() < 0 or idx[d].max() >= size[d]:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found "
                                   f"index {int(idx[d].max())}")  # fmt: skip
    if requires_grad:
        values = values.detach().requires_grad_(True)
    return SparseCOOTensor(indices.to(int64), values, size, bool(is_coalesced))


def mm(sparse: SparseCOOTensor, dense: Tensor) -> Tensor:
    """``sparse @ dense`` for a 2-D sparse matrix and a dense matrix."""
    if not isinstance(dense, Tensor):
        raise not_a_tensor("mm", "mat2", 2, dense)
    if sparse.sparse_dim() != 2 or sparse.dense_dim() != 0 or dense.dim() != 2:
        raise RuntimeError("mm: expects a 2-D sparse matrix and a 2-D dense matrix")
    if sparse.shape[1] != dense.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sparse.shape[0]}x{sparse.shape[1]} and "
                           f"{dense.shape[0]}x{dense.shape[1]})")  # fmt: skip
    if sparse.dtype != dense.dtype:
        raise RuntimeError(f"expected scalar type {sparse.dtype.scalar_name} but found {dense.dtype.scalar_name}")
    return SparseMm.apply(sparse._values_t, dense, sparse._indices_t, tuple(sparse.shape))


@declare(differentiable=False)
def spmm(input, mat2: Tensor) -> Tensor:  # noqa: A002
    """``sparse @ dense`` (torch's older name of ``sparse.mm``)."""
    return mm(input, mat2)


# --- the sparse accessors of a dense (strided) tensor, as torch answers them ---------------------------------------
@declare(methods=("to_dense",), name="_strided_to_dense")
def _strided_to_dense(input: Tensor, dtype=None, *, masked_grad=None) -> Tensor:  # noqa: A002
    """A strided tensor is already dense: itself, or a copy in ``dtype``."""
    return input if dtype is None else input.to(dtype)


@declare(methods=("sparse_dim",), name="_strided_sparse_dim", differentiable=False)
def _strided_sparse_dim(input: Tensor) -> int:  # noqa: A002
    """A strided tensor has no sparse dims."""
    return 0


@declare(methods=("dense_dim",), name="_strided_dense_dim", differentiable=False)
def _strided_dense_dim(input: Tensor) -> int:  # noqa: A002
    """Every dim of a strided tensor is dense."""
    return input.dim()


def _coo_only(name: str, layout: str) -> NoReturn:
    raise RuntimeError(f"{name} expected sparse {layout}tensor layout but got Strided")


@declare(methods=("indices",), name="_strided_indices", differentiable=False)
def _strided_indices(input: Tensor) -> Tensor:  # noqa: A002
    """Only sparse COO tensors have indices: torch's RuntimeError for a strided one."""
    _coo_only("indices", "coordinate ")


@declare(methods=("values",), name="_strided_values", differentiable=False)
def _strided_values(input: Tensor) -> Tensor:  # noqa: A002
    """Only sparse tensors have values: torch's RuntimeError for a strided one."""
    _coo_only("values", "")


@declare(methods=("coalesce",), name="_strided_coalesce", differentiable=False)
def _strided_coalesce(input: Tensor) -> Tensor:  # noqa: A002
    """Only sparse COO tensors coalesce: torch's RuntimeError for a strided one."""
    _coo_only("coalesce", "coordinate ")


@declare(methods=("is_coalesced",), name="_strided_is_coalesced", differentiable=False)
def _strided_is_coalesced(input: Tensor) -> bool:  # noqa: A002
    """Only sparse COO tensors know whether they are coalesced: torch's RuntimeError for a strided one."""
    _coo_only("is_coalesced", "coordinate ")
