"""A large output that only its node still holds takes its own gradient (``SavedTensor.output_ref``): the backward
writes ``relu``'s gradient over ``relu``'s output instead of into new memory. These tests pin when that happens,
and that nothing anyone can still read is ever written over: an output alive, a view of it, its storage handed
out (numpy, ``detach()``, ``.data`` read or set, DLPack, a storage object, ``set_``, a Parameter, ``view(dtype)``, the
node's saved tensors), the graph retained, or the output saved by another graph. And an in-place op's saved result
is the tensor's own storage, as torch's."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.autograd.function import SPARE_OUTPUT_MIN_SIZE

N = SPARE_OUTPUT_MIN_SIZE + 7


def _leaves():
    rng = np.random.default_rng(0)
    return [ng.tensor(rng.standard_normal(N).astype(np.float32), requires_grad=True) for _ in range(3)]


def _expected_grads(x, w, b):
    """d/dx, d/dw, d/db of relu(x * w + b).sum(), from numpy."""
    mask = ((x.detach().numpy() * w.detach().numpy() + b.detach().numpy()) > 0).astype(np.float32)
    return mask * w.detach().numpy(), mask * x.detach().numpy(), mask


def test_a_dead_output_takes_its_gradient():
    x, w, b = _leaves()
    y = ng.relu(x * w + b)
    storage = y.data_ptr()
    loss = y.sum()
    del y
    loss.backward()
    assert b.grad.data_ptr() == storage
    for leaf, want in zip((x, w, b), _expected_grads(x, w, b)):
        np.testing.assert_array_equal(leaf.grad.numpy(), want)


def test_a_small_output_is_not_taken():
    x = ng.tensor(np.ones(SPARE_OUTPUT_MIN_SIZE - 1, dtype=np.float32), requires_grad=True)
    y = ng.relu(x * 2)
    storage = y.data_ptr()
    loss = y.sum()
    del y
    loss.backward()
    assert x.grad.data_ptr() != storage
    np.testing.assert_array_equal(x.grad.numpy(), 2)


def test_a_live_output_keeps_its_values():
    x, w, b = _leaves()
    y = ng.relu(x * w + b)
    before = y.clone().detach().numpy()  # (a copy: reading y's own storage would hand it out)
    y.sum().backward()
    np.testing.assert_array_equal(y.clone().detach().numpy(), before)
    np.testing.assert_array_equal(b.grad.numpy(), _expected_grads(x, w, b)[2])


def test_a_view_of_the_output_keeps_its_values():
    x, w, b = _leaves()
    y = ng.relu(x * w + b)
    view = y[:100]
    before = view.clone().detach().numpy()
    loss = y.sum()
    del y
    loss.backward()
    np.testing.assert_array_equal(view.clone().detach().numpy(), before)


HANDED_OUT = {
    "numpy": lambda y: y.detach().numpy(),
    "detach": lambda y: y.detach(),
    "data": lambda y: y.data,
    "dlpack": lambda y: np.from_dlpack(y.detach()),
    "untyped_storage": lambda y: y.untyped_storage(),
    "saved_tensors": lambda y: y.grad_fn.saved_tensors[-1],
    "set_": lambda y: ng.empty(0).set_(y.detach()),
    "data_setter": lambda y: _with_data(ng.empty(0), y),
    "Parameter": lambda y: ng.nn.Parameter(y),
    "view_as_int32": lambda y: y.view(ng.int32),
}


def _with_data(t, y):
    t.data = y
    return t


def _values(kept) -> np.ndarray:
    if isinstance(kept, ng.UntypedStorage):
        return np.frombuffer(bytes(kept), dtype=np.float32).copy()
    return np.array(kept.detach().numpy() if isinstance(kept, ng.Tensor) else kept, copy=True)


@pytest.mark.parametrize("hand_out", HANDED_OUT.values(), ids=HANDED_OUT.keys())
def test_storage_handed_out_keeps_its_values(hand_out):
    x, w, b = _leaves()
    y = ng.relu(x * w + b)
    kept = hand_out(y)
    before = _values(kept)
    loss = y.sum()
    del y
    loss.backward()
    np.testing.assert_array_equal(_values(kept), before)
    np.testing.assert_array_equal(b.grad.numpy(), _expected_grads(x, w, b)[2])


def test_detach_in_place_then_numpy_keeps_its_values():
    x, w, b = _leaves()
    y = ng.relu(x * w + b)
    loss = y.sum()
    y.detach_()
    kept = y.numpy()
    before = kept.copy()
    del y
    loss.backward()
    np.testing.assert_array_equal(kept, before)


def test_a_retained_graph_runs_twice_with_the_same_gradients():
    x, w, b = _leaves()
    y = ng.sigmoid(x * w + b)
    loss = y.sum()
    del y
    loss.backward(retain_graph=True)
    first = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    loss.backward()
    for t, g in zip((x, w, b), first):
        np.testing.assert_array_equal(t.grad.numpy(), g.numpy())


def test_an_output_saved_by_another_graph_is_not_taken():
    x, w, b = _leaves()
    v = ng.tensor(np.linspace(-1, 1, N, dtype=np.float32), requires_grad=True)
    y = ng.relu(x * w + b)
    other = (y * v).sum()  # (its node saved y, to compute v's gradient)
    values = y.clone().detach().numpy()
    loss = y.sum()
    del y
    loss.backward(retain_graph=True)
    other.backward()
    np.testing.assert_array_equal(v.grad.numpy(), values)


def test_create_graph_gives_the_same_first_gradient():
    x, w, b = _leaves()
    y = ng.sigmoid(x * w + b)
    loss = y.sum()
    del y
    (gb,) = ng.autograd.grad(loss, b, create_graph=True)
    z = ng.sigmoid(x.detach() * w.detach() + b.detach())
    np.testing.assert_allclose(gb.detach().numpy(), (z * (1 - z)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("op", ["relu_", "sigmoid_", "exp_", "tanh_"])
@pytest.mark.parametrize("on_view", [False, True])
def test_an_in_place_op_saves_the_tensor_itself_as_torch(torch, op, on_view):
    """torch's ``relu_`` saves its result, the tensor's own storage: values written through ``.data`` after it
    reach its backward."""
    grads = []
    for lib in (ng, torch):
        x = lib.tensor([[1.0, -2.0, 3.0], [0.5, -0.5, 2.0]], requires_grad=True)
        y = x * 1
        target = y[1] if on_view else y
        getattr(target, op)()
        target.data.fill_(0.25)
        y.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_an_in_place_op_whose_backward_reads_its_input_keeps_the_old_values(torch):
    grads = []
    for lib in (ng, torch):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = x * 1
        y.mul_(y.detach() + 1)
        y.data.fill_(7.0)
        y.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
