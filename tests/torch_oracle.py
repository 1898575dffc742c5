"""Checks that hold numbagrad to torch, shared by the test files (``from torch_oracle import raises_like``)."""

import pytest

import numbagrad


def raises_like(torch, make, normalize=None) -> None:
    """``make(lib)`` raises the same exception type with the same message in torch and in numbagrad; where a
    message names something each library spells its own way (``torch.Size``, a class), ``normalize`` maps both
    messages to one spelling first."""
    with pytest.raises(Exception) as theirs:
        make(torch)
    with pytest.raises(type(theirs.value)) as ours:
        make(numbagrad)
    same = normalize or (lambda message: message)
    assert same(str(ours.value)) == same(str(theirs.value))
