"""``nn.Buffer``: a tensor marked to become a buffer when assigned to a Module attribute, as torch's."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng


class _Holder(ng.nn.Module):
    def __init__(self, lib=ng):
        super().__init__()
        self.kept = lib.nn.Buffer(lib.ones(2))
        self.scratch = lib.nn.Buffer(lib.zeros(3), persistent=False)


def test_assigned_buffer_is_registered():
    m = _Holder()
    assert [name for name, _ in m.named_buffers()] == ["kept", "scratch"]
    assert list(m.state_dict()) == ["kept"]


def test_buffer_is_a_plain_marked_tensor():
    b = ng.nn.Buffer(ng.ones(2))
    assert type(b) is ng.Tensor and isinstance(b, ng.nn.Buffer) and b.persistent
    assert not isinstance(ng.ones(2), ng.nn.Buffer)


def test_buffer_detaches_and_keeps_requires_grad():
    x = ng.ones(2, requires_grad=True)
    b = ng.nn.Buffer(x * 2)
    assert b.grad_fn is None and b.requires_grad


def test_buffer_of_nothing_is_empty():
    assert ng.nn.Buffer().shape == (0,)


def test_plain_tensor_assigned_to_a_buffer_keeps_its_persistence():
    m = _Holder()
    m.scratch = ng.ones(3)
    assert "scratch" not in m.state_dict() and "scratch" in dict(m.named_buffers())


def test_buffer_replacing_a_plain_attribute_raises_torchs_error():
    m = ng.nn.Module()
    m.x = 3
    with pytest.raises(KeyError, match="attribute 'x' already exists"):
        m.x = ng.nn.Buffer(ng.ones(1))


def test_non_tensor_assigned_to_a_buffer_raises_torchs_error():
    m = _Holder()
    with pytest.raises(
        TypeError, match=r"cannot assign 'int' as buffer 'kept' \(torch.nn.Buffer, torch.Tensor or None"
    ):
        m.kept = 3


def test_buffers_move_and_load_as_torchs():
    torch = pytest.importorskip("torch")

    class Theirs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = torch.nn.Buffer(torch.ones(2))
            self.scratch = torch.nn.Buffer(torch.zeros(3), persistent=False)

    ours, theirs = _Holder(), Theirs()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    ours.load_state_dict({"kept": ng.tensor([5.0, 6.0])})
    np.testing.assert_array_equal(ours.kept.numpy(), [5.0, 6.0])
    assert ours.double().kept.dtype == ng.float64
