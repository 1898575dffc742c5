"""Packed and padded variable-length sequences (torch's ``nn.utils.rnn``).

A ``PackedSequence`` stores a batch of sequences time step by time step: ``data`` holds the rows of step 0 for
every sequence, then the rows of step 1 for every sequence still running, and so on; ``batch_sizes[t]`` says how
many rows step ``t`` has. Packing and unpacking are each one ``index_select`` (a gather) on the padded or packed
tensor, so gradients flow back through them with no extra code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ... import ops
from ..._tensor import Tensor
from ..._types import float16, float32, float64, int8, int16, int32, int64, uint8

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]

_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(PackedSequence_):
    """Sequences of different lengths packed step by step; made by ``pack_padded_sequence``/``pack_sequence``.

    ``batch_sizes`` is a CPU int64 tensor; ``sorted_indices`` maps the packed order to the caller's batch order
    (``None`` when the batch was already sorted by decreasing length), ``unsorted_indices`` is its inverse.
    """

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Tensor | None = None,
        sorted_indices: Tensor | None = None,
        unsorted_indices: Tensor | None = None,
    ) -> PackedSequence:
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never be created manually. "
                "They should be instantiated by functions like pack_sequence and pack_padded_sequences in "
                "nn.utils.rnn. https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence"
            )
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """Move or cast ``data`` (the indices follow it to its device; ``batch_sizes`` stays on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(data.device)

        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cuda(self, device=None) -> PackedSequence:
        return self.to("cuda" if device is None else device)

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=int32)

    def short(self) -> PackedSequence:
        return self.to(dtype=int16)

    def char(self) -> PackedSequence:
        return self.to(dtype=int8)

    def byte(self) -> PackedSequence:
        return self.to(dtype=uint8)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes ``permutation`` (``None`` stays ``None``)."""
    if permutation is None:
        return None
    perm = permutation.cpu().numpy()
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(perm.size, dtype=perm.dtype)
    return ops.tensor(inverse, device=permutation.device)


def _lengths_array(lengths) -> np.ndarray:
    """``lengths`` (a list or a 1-D CPU integer tensor) as an int64 numpy array, checked as torch checks it."""
    if not isinstance(lengths, Tensor):
        return np.asarray(lengths, dtype=np.int64).reshape(-1)
    if lengths.dim() != 1 or lengths.device.type != "cpu":
        kind = _TYPE_NAMES.get(lengths.dtype.name, lengths.dtype.name.capitalize())
        raise RuntimeError(
            f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D {lengths.device} "
            f"{kind} tensor"
        )
    return lengths.numpy().astype(np.int64)


def _batch_sizes(lengths: np.ndarray) -> np.ndarray:
    """How many sequences of these (decreasing) lengths are still running at each step."""
    return (lengths[None, :] > np.arange(lengths[0])[:, None]).sum(axis=1).astype(np.int64)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True):  # noqa: A002
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` if ``batch_first``) whose sequences have ``lengths``.

    With ``enforce_sorted`` the lengths must already decrease; otherwise the batch is sorted here and the
    permutation is kept in the result, so ``pad_packed_sequence`` and the RNN modules give results in the
    caller's order.
    """
    lengths_np = _lengths_array(lengths)
    batch_dim = 0 if batch_first else 1
    sorted_indices = None
    if not enforce_sorted:
        order = np.argsort(-lengths_np, kind="stable")
        lengths_np = lengths_np[order]
        sorted_indices = ops.tensor(order, device=input.device)
        input = input.index_select(batch_dim, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    steps, batch = input.shape[0], input.shape[1]
    if lengths_np.size != batch:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {lengths_np.size} (batch_size={batch})"
        )
    if np.any(lengths_np[:-1] < lengths_np[1:]):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
            "you do not need ONNX exportability."
        )
    if lengths_np[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if lengths_np[0] > steps:
        raise ValueError(f"a sequence length ({lengths_np[0]}) exceeds the padded input's length ({steps})")
    batch_sizes = _batch_sizes(lengths_np)
    rows = np.concatenate([t * batch + np.arange(n) for t, n in enumerate(batch_sizes)])
    flat = input.reshape((steps * batch,) + tuple(input.shape[2:]))
    data = flat.index_select(0, ops.tensor(rows, device=input.device))
    return PackedSequence(data, ops.tensor(batch_sizes), sorted_indices, None)


def pad_packed_sequence(
    sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length: int | None = None
) -> tuple[Tensor, Tensor]:
    """Undo ``pack_padded_sequence``: the padded batch (in the caller's order) and each sequence's length."""
    batch_sizes = sequence.batch_sizes.numpy().astype(np.int64)
    steps = batch_sizes.size
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    data = sequence.data
    batch = int(batch_sizes[0])
    n = data.shape[0]
    # Each padded slot (t, b) reads packed row offset[t] + b, or the padding row appended at index n.
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]])
    rows = np.full((steps, batch), n, dtype=np.int64)
    for t, (offset, size) in enumerate(zip(offsets, batch_sizes)):
        rows[t, :size] = offset + np.arange(size)
    if batch_first:
        rows = rows.T
    pad_row = ops.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    source = ops.cat([data, pad_row], 0)
    padded = source.index_select(0, ops.tensor(rows.reshape(-1), device=data.device))
    padded = padded.reshape(rows.shape + tuple(data.shape[1:]))
    lengths = (batch_sizes[None, :] > np.arange(batch)[:, None]).sum(axis=1).astype(np.int64)
    if sequence.unsorted_indices is not None:
        unsorted = sequence.unsorted_indices
        padded = padded.index_select(0 if batch_first else 1, unsorted)
        lengths = lengths[unsorted.cpu().numpy()]
    return padded, ops.tensor(lengths)


def pad_sequence(
    sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Tensor:
    """Stack tensors of shapes ``(L_i, *)`` into ``(max L, B, *)`` (``(B, max L, *)`` if ``batch_first``),
    filling with ``padding_value`` after each sequence (before it, with ``padding_side="left"``)."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(
            f"pad_sequence: Expected iterable for input sequences, but got arg of type: {type(sequences)}"
        )
    sequences = list(sequences.unbind(0) if isinstance(sequences, Tensor) else sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for seq in sequences[1:]:
        for d, (a, b) in enumerate(zip(trailing, seq.shape[1:])):
            if a != b:
                raise RuntimeError(
                    f"The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension "
                    f"{d + 1}"
                )
    lengths = np.array([s.shape[0] for s in sequences], dtype=np.int64)
    steps, n = int(lengths.max()), int(lengths.sum())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    rows = np.full((len(sequences), steps), n, dtype=np.int64)  # index n is the padding row
    for b, (start, length) in enumerate(zip(starts, lengths)):
        first = 0 if padding_side == "right" else steps - length
        rows[b, first : first + length] = start + np.arange(length)
    if not batch_first:
        rows = rows.T
    first = sequences[0]
    pad_row = ops.full((1,) + trailing, padding_value, dtype=first.dtype, device=first.device)
    source = ops.cat([s.reshape((s.shape[0],) + trailing) for s in sequences] + [pad_row], 0)
    padded = source.index_select(0, ops.tensor(rows.reshape(-1), device=first.device))
    return padded.reshape(rows.shape + trailing)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences, ``padded[:length]`` for each (the inverse of
    ``pad_sequence`` with right padding)."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[: int(length)] for seq, length in zip(padded_sequences.unbind(0), _lengths_array(lengths))]


def pack_sequence(sequences: list[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences ``(L_i, *)``: ``pack_padded_sequence(pad_sequence(sequences), lengths)``."""
    lengths = ops.tensor([v.size(0) for v in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a ``PackedSequence`` holds, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
