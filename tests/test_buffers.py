"""Gradient buffers are reused only when nothing else can see them (``autograd.function.engine_owns``).

Reuse saves allocations (a leaf keeps its first gradient as ``.grad``; an elementwise backward writes into the
incoming gradient's buffer), and must never change a value that someone else holds.
"""

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import engine
from numbagrad.backend import cpu
from numbagrad.ops import elementwise


@pytest.fixture
def grad_kernel_calls(monkeypatch):
    """Record, per elementwise gradient computed (alone, or two in one pass), whether it was written into the
    incoming gradient's buffer."""
    calls = []
    original, original_pair = cpu.elementwise_grad, cpu.elementwise_grads

    def spy(row, i, g, *args, result=None, **kwargs):
        calls.append((row.name, i, result is g))
        return original(row, i, g, *args, result=result, **kwargs)

    def spy_pair(row, which, g, *args, **kwargs):
        first, second = original_pair(row, which, g, *args, **kwargs)
        calls.extend([(row.name, which[0], first is g), (row.name, which[1], second is g)])
        return first, second

    monkeypatch.setattr(cpu, "elementwise_grad", spy)
    monkeypatch.setattr(cpu, "elementwise_grads", spy_pair)
    return calls


def leaves(*values):
    return [numbagrad.tensor(v, dtype=numbagrad.float64, requires_grad=True) for v in values]


def test_backward_writes_its_last_gradient_into_an_engine_owned_buffer(grad_kernel_calls):
    x, w = leaves([1.0, -2.0, 3.0], [2.0, 2.0, 2.0])
    (x * w).relu().sum().backward()
    # relu's incoming gradient is sum's broadcast view (read-only): not reused; mul's is relu's fresh result
    assert grad_kernel_calls == [("relu", 0, False), ("mul", 0, False), ("mul", 1, True)]
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 0.0, 3.0])


@pytest.fixture
def copies(monkeypatch):
    """The arrays the backend copies."""
    seen = []
    original = cpu.copy
    monkeypatch.setattr(cpu, "copy", lambda a: seen.append(a) or original(a))
    return seen


def test_a_leaf_sharing_its_gradient_waits_for_the_other_reader_instead_of_copying(
    monkeypatch, copies, grad_kernel_calls
):
    """``x * w + b``: add hands one tensor to ``b`` and to mul's backward. ``b`` keeps it once mul has read it
    (torch copies it), so mul writes its gradients into fresh buffers instead."""
    monkeypatch.setattr(engine, "WAIT_MIN_SIZE", 1)
    x, w, b = leaves([1.0, -2.0, 3.0], [2.0, 2.0, 2.0], [0.5, 0.5, 0.5])
    (x * w + b).relu().sum().backward()
    assert copies == []
    assert grad_kernel_calls == [("relu", 0, False), ("mul", 0, False), ("mul", 1, False)]
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 0.0, 3.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 0.0, 1.0])


def test_a_small_shared_gradient_is_copied_at_once(grad_kernel_calls):
    """Below ``WAIT_MIN_SIZE`` the copy is cheaper than waiting: ``b`` gets a copy, mul then reuses the buffer."""
    x, w, b = leaves([1.0, -2.0, 3.0], [2.0, 2.0, 2.0], [0.5, 0.5, 0.5])
    (x * w + b).relu().sum().backward()
    assert not np.shares_memory(b.grad.numpy(), w.grad.numpy())
    assert grad_kernel_calls == [("relu", 0, False), ("mul", 0, False), ("mul", 1, True)]
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 0.0, 3.0])


def test_user_gradient_is_never_overwritten(grad_kernel_calls):
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    gradient = numbagrad.tensor([1.0, 10.0], dtype=numbagrad.float64)
    (x * w).backward(gradient)
    assert all(not reused for *_, reused in grad_kernel_calls)
    np.testing.assert_array_equal(gradient.numpy(), [1.0, 10.0])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 40.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 20.0])


def test_a_gradient_kept_by_a_hook_is_not_overwritten():
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    y = (x * 2.0).exp()
    seen = []
    y.register_hook(lambda g: seen.append(g))
    (y * w).sum().backward()
    np.testing.assert_array_equal(seen[0].numpy(), [3.0, 4.0])  # d(sum(y*w))/dy = w


def test_retained_and_captured_gradients_keep_their_values():
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    y = (x * 2.0).exp()
    y.retain_grad()
    z = (y * w).tanh()
    gy, gx = numbagrad.autograd.grad(z.sum(), [y, x], retain_graph=True)
    dz = 1 - np.tanh(np.exp([2.0, 4.0]) * [3.0, 4.0]) ** 2
    np.testing.assert_allclose(gy.numpy(), dz * [3.0, 4.0])
    np.testing.assert_allclose(gx.numpy(), dz * [3.0, 4.0] * 2 * np.exp([2.0, 4.0]))
    z.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), dz * [3.0, 4.0])


def test_a_gradient_shared_by_two_leaves_is_not_aliased():
    a, b = leaves([1.0, 2.0], [5.0, 6.0])
    (a * 3.0 + b).relu().sum().backward()  # add hands relu's gradient to both branches
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    b.grad.add_(100.0)
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0])


def test_a_leaf_keeps_a_fresh_first_gradient_without_copying(copies):
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    (x * w).relu().sum().backward()
    assert copies == []  # mul produced fresh gradients that only the engine held
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0])


def test_accumulation_into_a_kept_gradient_leaves_other_tensors_alone():
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    (x * w).relu().sum().backward()
    first = x.grad.numpy().copy()
    (x * w).relu().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * first)
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_a_hooked_leaf_gets_its_shared_gradient_at_once(monkeypatch):
    """A leaf with a post-accumulate hook is accumulated when its gradient is ready, as in torch (a copy)."""
    monkeypatch.setattr(engine, "WAIT_MIN_SIZE", 1)
    x, w, b = leaves([1.0, -2.0], [2.0, 2.0], [0.5, 0.5])
    order = []
    b.register_post_accumulate_grad_hook(lambda t: order.append(("b", x.grad is None)))
    (x * w + b).relu().sum().backward()
    assert order == [("b", True)]  # before mul's backward gave x its gradient
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0])


def test_a_waiting_leaf_is_accumulated_even_when_a_later_node_fails(monkeypatch):
    monkeypatch.setattr(engine, "WAIT_MIN_SIZE", 1)

    class Fails(numbagrad.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("backward failed")

    x, b = leaves([1.0, 2.0], [3.0, 4.0])
    with pytest.raises(RuntimeError, match="backward failed"):
        (Fails.apply(x) + b).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0])


@pytest.fixture
def into_saved_output(monkeypatch):
    """Per gradient computed alone by the backend: (row, whether it was written into the node's saved output);
    saved outputs of every size may take a gradient (the default starts at 16384 elements)."""
    monkeypatch.setattr(elementwise, "SAVED_REUSE_MIN_SIZE", 1)
    calls = []
    original = cpu.elementwise_grad

    def spy(row, i, g, out, *args, result=None, **kwargs):
        calls.append((row.name, result is not None and result is out))
        return original(row, i, g, out, *args, result=result, **kwargs)

    monkeypatch.setattr(cpu, "elementwise_grad", spy)
    return calls


def test_a_gradient_takes_the_buffer_of_a_saved_output_nothing_else_holds(into_saved_output):
    """relu saved its output for backward; nothing else holds it and the engine frees it after the node: the
    gradient is written there instead of into a new buffer (no allocation, memory already in the cache)."""
    x, w = leaves([1.0, -2.0, 3.0], [2.0, 2.0, 2.0])
    (x * w).relu().sum().backward()
    assert into_saved_output[0] == ("relu", True)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 0.0, 3.0])


def test_an_output_the_user_holds_keeps_its_values(into_saved_output):
    x, w = leaves([1.0, -2.0, 3.0], [2.0, 2.0, 2.0])
    y = (x * w).relu()
    y.sum().backward()
    assert into_saved_output[0] == ("relu", False)
    np.testing.assert_array_equal(y.detach().numpy(), [2.0, 0.0, 6.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0])


def test_retain_graph_keeps_the_saved_output_for_the_next_backward(into_saved_output):
    (x,) = leaves([0.5, -1.0])
    loss = (x * 2.0).sigmoid().sum()
    loss.backward(retain_graph=True)
    loss.backward()  # the graph's last use: now its saved output may take the gradient
    assert [taken for name, taken in into_saved_output if name == "sigmoid"] == [False, True]
    s = 1 / (1 + np.exp(-2 * np.array([0.5, -1.0])))
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2 * s * (1 - s))


def test_an_output_saved_by_two_nodes_is_not_taken(into_saved_output):
    (x,) = leaves([0.5, -1.0])
    t = x.exp()
    loss = (t * t).sum()  # mul saves t twice, exp saves it as its output
    del t
    loss.backward()
    assert ("exp", True) not in into_saved_output
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * np.array([0.5, -1.0])))


def test_a_node_with_a_post_hook_keeps_its_saved_output(into_saved_output):
    """A post hook runs before the node's saved tensors are freed, so they keep their values until then."""
    (x,) = leaves([0.5, -1.0])
    y = x.tanh()
    seen = []
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(grad_inputs[0].numpy().copy()))
    loss = y.sum()
    del y
    loss.backward()
    assert into_saved_output == [("tanh", False)]
    np.testing.assert_allclose(seen[0], 1 - np.tanh([0.5, -1.0]) ** 2)
