"""Gradient buffers are reused only while the engine owns them (``autograd.engine.owns``: ``Tensor._grad_slots``).

Reuse saves allocations (a leaf keeps its first gradient as ``.grad``; an elementwise backward writes into the
incoming gradient's buffer), and must never change a value that someone else holds.
"""

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import engine
from numbagrad.backend import cpu


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


def test_a_leaf_gradient_a_hook_stored_is_not_written_by_later_accumulation():
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    stored = []
    x.register_hook(lambda g: stored.append(g))
    (x * w).relu().sum().backward()
    (x * w).relu().sum().backward()  # accumulates into x.grad in place
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 8.0])
    np.testing.assert_array_equal(stored[0].numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(stored[1].numpy(), [3.0, 4.0])


def test_a_retained_gradient_keeps_the_value_it_had_when_the_node_below_reuses_buffers(grad_kernel_calls):
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    y = x * w
    y.retain_grad()
    y.exp().sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), np.exp([3.0, 8.0]))
    np.testing.assert_allclose(x.grad.numpy(), np.exp([3.0, 8.0]) * [3.0, 4.0])


def test_a_gradient_a_user_function_returns_and_keeps_is_not_written_afterwards(grad_kernel_calls):
    kept = []

    class Keep(numbagrad.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.clone()

        @staticmethod
        def backward(ctx, g):
            kept.append(g)
            return g

    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    (Keep.apply(x.exp()) * w).sum().backward()
    np.testing.assert_array_equal(kept[0].numpy(), [3.0, 4.0])  # exp's backward did not write into it
    assert ("exp", 0, True) not in grad_kernel_calls
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]) * [3.0, 4.0])


def test_a_node_called_outside_backward_never_writes_into_its_argument():
    (x,) = leaves([1.0, 2.0])
    node = x.exp().grad_fn
    g = numbagrad.tensor([1.0, 1.0], dtype=numbagrad.float64)
    with numbagrad.no_grad():  # (as backward runs it)
        result = node(g)  # (one input: its gradient alone, as torch)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0])
    np.testing.assert_allclose(result.numpy(), np.exp([1.0, 2.0]))


# --- a node with several outputs ---------------------------------------------------------------------------------
class TwoOutputs(numbagrad.autograd.Function):
    """``(2x, 3x)``; backward records the gradients it received."""

    received: list = []

    @staticmethod
    def forward(ctx, t):
        return t * 2.0, t * 3.0

    @staticmethod
    def backward(ctx, ga, gb):
        TwoOutputs.received.append((ga.numpy().copy(), gb.numpy().copy()))
        return ga * 2.0 + gb * 3.0


def test_a_two_output_node_runs_once_with_the_summed_gradient_of_each_output():
    TwoOutputs.received = []
    x, w = leaves([1.0, 2.0], [3.0, 4.0])
    p, q = TwoOutputs.apply(x)
    ((p * w).exp() + p * q + q.relu()).sum().backward()  # p and q each reached by two paths
    assert len(TwoOutputs.received) == 1
    pv, qv, wv = np.array([2.0, 4.0]), np.array([3.0, 6.0]), np.array([3.0, 4.0])
    ga, gb = TwoOutputs.received[0]
    np.testing.assert_allclose(ga, np.exp(pv * wv) * wv + qv)
    np.testing.assert_allclose(gb, pv + 1.0)
    np.testing.assert_allclose(x.grad.numpy(), 2 * ga + 3 * gb)


def test_one_buffer_in_both_slots_of_a_two_output_node_is_read_unchanged_by_both(grad_kernel_calls):
    # add hands exp's gradient to p and to q: the node's two slots hold one buffer
    TwoOutputs.received = []
    (x,) = leaves([1.0, 2.0])
    p, q = TwoOutputs.apply(x)
    (p + q).exp().sum().backward()
    e = np.exp([5.0, 10.0])
    ga, gb = TwoOutputs.received[0]
    np.testing.assert_allclose(ga, e)
    np.testing.assert_allclose(gb, e)
    np.testing.assert_allclose(x.grad.numpy(), 5 * e)


def test_a_builtin_two_output_node_matches_torch(torch):
    def run(lib):
        x = lib.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([2.0, -1.0], dtype=lib.float64, requires_grad=True)
        a, b = (x * 1.5).unbind(0)
        ((a * w).sigmoid() + a * b + (b + a).tanh()).sum().backward()
        return x.grad.tolist(), w.grad.tolist()

    gx, gw = run(numbagrad)
    tx, tw = run(torch)
    np.testing.assert_allclose(gx, tx)
    np.testing.assert_allclose(gw, tw)


def test_a_gradient_an_accumulator_post_hook_stored_is_not_written_by_the_node_that_shares_it(grad_kernel_calls):
    # add hands one buffer to b's accumulator and to mul: b copies it, its post hook stores it, mul runs after
    x, w, b = leaves([1.0, -2.0], [2.0, 2.0], [0.5, 0.5])
    stored = []
    accumulator = b.add(0.0).grad_fn.next_functions[0][0]  # (held: the graph below finds this one)
    accumulator.register_hook(lambda grad_inputs, grad_outputs: stored.append(grad_outputs[0]))
    (x * w + b).exp().sum().backward()
    expected = np.exp(np.array([1.0, -2.0]) * 2.0 + 0.5)
    np.testing.assert_allclose(stored[0].numpy(), expected)
    np.testing.assert_allclose(x.grad.numpy(), expected * 2.0)


def test_a_view_of_a_shared_gradient_is_read_unchanged_after_the_other_reader_ran(torch):
    # add hands one buffer to reshape's backward (a view of it goes on to exp, made first: it runs last) and to
    # sigmoid's backward, which runs in between and must not write into the buffer the view still shows
    def run(lib):
        p, q, w = (lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0],
                   [2.0, 3.0, 4.0]))  # fmt: skip
        e = p.exp()
        v = q.sigmoid()
        u = e.reshape(3, 1).reshape(3)
        ((u + v) * w).sum().backward()
        return p.grad.tolist(), q.grad.tolist(), w.grad.tolist()

    for ours, theirs in zip(run(numbagrad), run(torch)):
        np.testing.assert_allclose(ours, theirs)
