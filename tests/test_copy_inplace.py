"""``copy_``'s common call (same shape, dtype or float width, device; no graph to record) writes straight into the
storage; everything around it still reports torch's errors and records torch's graph. Each is held to torch."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like


def test_running_statistic_update_under_no_grad_matches_torch(torch):
    def update(lib):
        running = lib.zeros(1, 1, 4)
        batch = lib.tensor(np.arange(8.0, dtype=np.float32).reshape(2, 1, 4), requires_grad=True)
        mean = batch.mean((0, 1), keepdim=True)
        with lib.no_grad():
            running.copy_(0.9 * running + 0.1 * mean)
        return running

    ours, theirs = update(numbagrad), update(torch)
    assert ours.grad_fn is None and not ours.requires_grad
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_copy_bumps_the_version_and_writes_through_views(torch):
    for lib in (numbagrad, torch):
        base = lib.zeros(2, 3)
        row = base[1]
        before = base._version
        row.copy_(lib.ones(3))
        assert base._version == row._version == before + 1
        assert base.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


def test_copy_leaves_the_source_its_own_storage():
    dst, src = numbagrad.zeros(3), numbagrad.ones(3)
    dst.copy_(src)
    src.add_(1)
    assert dst.tolist() == [1.0, 1.0, 1.0]


def test_copy_into_itself_is_a_no_op():
    x = numbagrad.arange(3.0)
    assert x.copy_(x) is x and x.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("src_dtype", [np.float64, np.float16])
def test_copy_between_float_widths_rounds_as_torch(torch, src_dtype):
    values = (np.random.default_rng(0).standard_normal(7) * 1e3).astype(src_dtype)
    ours = numbagrad.zeros(7).copy_(numbagrad.tensor(values))
    theirs = torch.zeros(7).copy_(torch.tensor(values))
    assert ours.dtype == numbagrad.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_copy_of_an_integer_source_into_floats_matches_torch(torch):
    ours = numbagrad.zeros(3).copy_(numbagrad.tensor([1, 2, 3]))
    theirs = torch.zeros(3).copy_(torch.tensor([1, 2, 3]))
    assert ours.tolist() == theirs.tolist()


def test_copy_broadcasts_a_smaller_source(torch):
    ours = numbagrad.zeros(2, 3).copy_(numbagrad.tensor([1.0, 2.0, 3.0]))
    theirs = torch.zeros(2, 3).copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert ours.tolist() == theirs.tolist()


def test_copy_from_a_tracked_source_records_torchs_node_and_gradient(torch):
    grads = []
    for lib in (numbagrad, torch):
        src = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        dst = lib.zeros(3)
        dst.copy_(src)
        assert type(dst.grad_fn).__name__ == "CopyBackwards"
        (dst * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        grads.append(src.grad.tolist())
    assert grads[0] == grads[1]


def test_copy_into_a_leaf_that_requires_grad_is_refused(torch):
    raises_like(torch, lambda lib: lib.zeros(3, requires_grad=True).copy_(lib.ones(3)))


def test_copy_into_a_leaf_under_no_grad_is_allowed(torch):
    for lib in (numbagrad, torch):
        w = lib.zeros(3, requires_grad=True)
        with lib.no_grad():
            w.copy_(lib.ones(3))
        assert w.tolist() == [1.0, 1.0, 1.0] and w.is_leaf and w.requires_grad and w.grad_fn is None


def test_copy_from_a_partly_overlapping_source_is_refused(torch):
    def overlapping(lib):
        x = lib.arange(6.0)
        x[1:].copy_(x[:-1])

    raises_like(torch, overlapping)


def test_copy_into_an_expanded_tensor_is_refused(torch):
    raises_like(torch, lambda lib: lib.zeros(1, 3).expand(2, 3).copy_(lib.ones(2, 3)))


def test_copy_into_an_inference_tensor_outside_inference_mode_is_refused(torch):
    def written(lib):
        with lib.inference_mode():
            t = lib.zeros(3)
        t.copy_(lib.ones(3))

    raises_like(torch, written)


def test_copy_into_a_view_of_a_tracked_tensor_records_the_write(torch):
    grads = []
    for lib in (numbagrad, torch):
        leaf = lib.ones(2, 3, requires_grad=True)
        base = leaf * 2
        base[0].copy_(lib.zeros(3))
        base.sum().backward()
        grads.append(leaf.grad.tolist())
    assert grads[0] == grads[1]


@pytest.mark.parametrize("src_shape", [(2, 3), (3,), (1, 3)])
def test_copy_from_a_tracked_broadcast_or_wider_source_gives_torchs_gradient(torch, src_shape):
    grads = []
    for lib in (numbagrad, torch):
        src = lib.tensor(np.arange(float(np.prod(src_shape))).reshape(src_shape), requires_grad=True)  # float64
        dst = lib.zeros(2, 3)
        dst.copy_(src)
        assert dst.dtype == lib.float32 and type(dst.grad_fn).__name__ == "CopyBackwards"
        (dst * lib.arange(6.0).reshape(2, 3)).sum().backward()
        assert src.grad.dtype == lib.float64
        grads.append(src.grad.tolist())
    assert grads[0] == grads[1]
