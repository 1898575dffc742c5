"""Checks that hold numbagrad to torch, shared by the test files (``from torch_oracle import raises_like``)."""

import pytest

import numbagrad


def raises_like(torch, make) -> None:
    """``make(lib)`` raises the same exception type with the same message in torch and in numbagrad."""
    with pytest.raises(Exception) as theirs:
        make(torch)
    with pytest.raises(type(theirs.value)) as ours:
        make(numbagrad)
    assert str(ours.value) == str(theirs.value)
