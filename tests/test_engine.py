"""The backward engine: SPEC §3, TORCH_CONTRACT §3."""

import gc
import re
import warnings
import weakref

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import Function

F64 = numbagrad.float64


def leaf(values, requires_grad=True):
    return numbagrad.tensor(values, dtype=F64, requires_grad=requires_grad)


def make_recorder(lib, log):
    """A pass-through Function that appends its label to ``log`` when its backward runs."""

    class Tag(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, label):
            ctx.label = label
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            log.append(ctx.label)
            return grad, None

    return Tag


def order_program(lib):
    """A diamond and two independent branches; returns the order the custom backwards ran in."""
    log = []
    tag = make_recorder(lib, log).apply
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    a = tag(x, "a")
    b = tag(a, "b")
    c = tag(a, "c")
    d = tag(x * 2, "d")
    e = tag(b + c, "e")
    f = tag(d, "f")
    (e.sum() + f.sum() * 3 + tag(c, "g").sum()).backward()
    return log, x.grad.tolist()


def test_ready_nodes_run_latest_created_first():
    log, grad = order_program(numbagrad)
    # Among ready nodes the one created later runs first: g; then f before e; then e (created after d) before d.
    assert log == ["g", "f", "e", "d", "c", "b", "a"]
    assert grad == [9.0, 9.0]


def test_execution_order_matches_torch():
    torch = pytest.importorskip("torch")
    assert order_program(numbagrad) == order_program(torch)


def test_gradients_from_several_paths_are_summed_before_a_node_runs():
    calls = []
    x = leaf([1.0, 2.0])
    y = make_recorder(numbagrad, calls).apply(x, "y")
    (y * 2 + y * 3 + y.exp()).sum().backward()
    assert calls == ["y"]  # ran once, with the summed gradient
    np.testing.assert_allclose(x.grad.numpy(), 5 + np.exp([1.0, 2.0]))


def test_leaf_grad_accumulates_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    first = x.grad
    (x * x).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    assert x.grad is first  # accumulated in place


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_double_backward_through_builtin_ops():
    x = leaf([0.5, 1.0])
    y = (x**3 + x.sin()).sum()
    (g,) = numbagrad.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([0.5, 1.0]) ** 2 + np.cos([0.5, 1.0]))
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.array([0.5, 1.0]) - np.sin([0.5, 1.0]))


class Cube(Function):
    """A custom Function whose backward uses differentiable ops on a saved input: twice differentiable."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad


def test_double_backward_through_a_custom_function():
    x = leaf([1.0, 2.0])
    (g,) = numbagrad.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [3.0, 12.0]
    (gg,) = numbagrad.autograd.grad(g.sum(), x, create_graph=True)
    assert gg.tolist() == [6.0, 12.0]
    (ggg,) = numbagrad.autograd.grad(gg.sum(), x)
    assert ggg.tolist() == [6.0, 6.0]


def test_create_graph_makes_leaf_grad_differentiable():
    x = leaf([1.0, 2.0])
    (x**3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    gx = x.grad
    x.grad = None
    gx.sum().backward()
    assert x.grad.tolist() == [6.0, 12.0]


def test_backward_inputs_limits_accumulation():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x * w).sum().backward(inputs=[w])
    assert w.grad.tolist() == [1.0, 2.0]
    assert x.grad is None


def test_backward_inputs_cannot_be_empty():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="'inputs' argument to backward\\(\\) cannot be empty."):
        (x * 2).sum().backward(inputs=[])


def test_grad_returns_gradients_without_touching_dot_grad():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    gx, gw = numbagrad.autograd.grad((x * w).sum(), (x, w))
    assert gx.tolist() == [3.0, 4.0] and gw.tolist() == [1.0, 2.0]
    assert x.grad is None and w.grad is None


def test_grad_of_an_intermediate_tensor():
    x = leaf([1.0, 2.0])
    h = x * 2
    (gh,) = numbagrad.autograd.grad((h * h).sum(), h)
    assert gh.tolist() == [4.0, 8.0]


def test_grad_with_grad_outputs():
    x = leaf([1.0, 2.0])
    (g,) = numbagrad.autograd.grad(x * x, x, grad_outputs=leaf([10.0, 100.0], requires_grad=False))
    assert g.tolist() == [20.0, 400.0]


def test_grad_unused_input():
    x, unused = leaf([1.0]), leaf([2.0])
    y = (x * 2).sum()
    with pytest.raises(
        RuntimeError, match="One of the differentiated Tensors appears to not have been used in the graph"
    ):
        numbagrad.autograd.grad(y, (x, unused), retain_graph=True)
    gx, gu = numbagrad.autograd.grad(y, (x, unused), retain_graph=True, allow_unused=True)
    assert gx.tolist() == [2.0] and gu is None
    gx, gu = numbagrad.autograd.grad(y, (x, unused), materialize_grads=True)
    assert gu.tolist() == [0.0]


def test_tensor_hook_replaces_the_gradient_flowing_on():
    x = leaf([1.0, 2.0])
    h = x * 2
    seen = []
    h.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (h * h).sum().backward()
    assert seen == [[4.0, 8.0]]
    assert x.grad.tolist() == [80.0, 160.0]


def test_leaf_hook_runs_before_accumulation():
    x = leaf([1.0, 2.0])
    x.grad = leaf([100.0, 100.0], requires_grad=False)
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()) or g * 2)
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]]  # the new gradient, not the accumulated one
    assert x.grad.tolist() == [106.0, 106.0]


def test_removed_hook_is_not_called():
    x = leaf([1.0])
    seen = []
    handle = x.register_hook(lambda g: seen.append(1))
    handle.remove()
    (x * 2).sum().backward()
    assert seen == [] and x.grad.tolist() == [2.0]


def test_hook_on_a_tensor_without_grad_fails():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        leaf([1.0], requires_grad=False).register_hook(lambda g: g)


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = leaf([1.0, 2.0])
    h = x * 3
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    assert h.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]


def test_non_scalar_backward_takes_a_gradient():
    x = leaf([1.0, 2.0, 3.0])
    y = x * x
    y.backward(numbagrad.tensor([1.0, 0.5, 0.0], dtype=F64))
    assert x.grad.tolist() == [2.0, 2.0, 0.0]


def test_grad_modes_as_context_managers():
    x = leaf([1.0])
    with numbagrad.no_grad():
        assert not numbagrad.is_grad_enabled()
        assert (x * 2).grad_fn is None
        with numbagrad.enable_grad():
            assert (x * 2).grad_fn is not None
        with numbagrad.set_grad_enabled(True):
            assert (x * 2).requires_grad
    with numbagrad.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert numbagrad.is_grad_enabled()


def test_grad_modes_as_decorators_and_function():
    x = leaf([1.0])

    @numbagrad.no_grad()
    def off():
        return x * 2

    @numbagrad.no_grad
    def off_bare():
        return x * 2

    @numbagrad.enable_grad()
    def on():
        return x * 2

    @numbagrad.set_grad_enabled(False)
    def off_too():
        return x * 2

    assert off().grad_fn is None and off_bare().grad_fn is None and off_too().grad_fn is None
    with numbagrad.no_grad():
        assert on().grad_fn is not None
    assert numbagrad.is_grad_enabled()
    numbagrad.set_grad_enabled(False)
    assert not numbagrad.is_grad_enabled()
    numbagrad.set_grad_enabled(True)
    assert numbagrad.is_grad_enabled()


def test_inference_mode_tensors_cannot_be_saved_for_backward():
    x = leaf([1.0, 2.0])
    with numbagrad.inference_mode():
        assert numbagrad.is_inference_mode_enabled() and not numbagrad.is_grad_enabled()
        frozen = numbagrad.tensor([3.0, 4.0], dtype=F64)
        assert (x * 2).grad_fn is None
    message = (
        "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
        "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and "
        "use it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`."
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        x * frozen

    @numbagrad.inference_mode()
    def infer():
        return numbagrad.is_inference_mode_enabled()

    assert infer() and not numbagrad.is_inference_mode_enabled()


class NaNBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def test_anomaly_mode_reports_nan_gradients():
    x = leaf([1.0])
    with numbagrad.autograd.detect_anomaly():
        y = NaNBackward.apply(x)
        with pytest.raises(
            RuntimeError, match=re.escape("Function 'NaNBackwardBackward' returned nan values in its 0th output.")
        ):
            with pytest.warns(UserWarning, match="Error detected in NaNBackwardBackward"):
                y.backward()
    NaNBackward.apply(x).backward()  # outside anomaly mode a NaN gradient passes silently
    assert np.isnan(x.grad.item())


def test_set_detect_anomaly_switches_and_restores():
    assert not numbagrad.autograd.is_anomaly_enabled()
    with numbagrad.autograd.set_detect_anomaly(True):
        assert numbagrad.autograd.is_anomaly_enabled()
    assert not numbagrad.autograd.is_anomaly_enabled()


def test_gradcheck_and_gradgradcheck_pass_on_a_correct_function():
    x = leaf([0.5, -1.25, 2.0])
    assert numbagrad.autograd.gradcheck(Cube.apply, (x,))
    assert numbagrad.autograd.gradgradcheck(Cube.apply, (x,))


def test_gradcheck_catches_a_wrong_backward():
    class WrongCube(Cube):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x**2 * grad

    x = leaf([0.5, -1.25, 2.0])
    with pytest.raises(
        numbagrad.autograd.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"
    ):
        numbagrad.autograd.gradcheck(WrongCube.apply, (x,))
    assert numbagrad.autograd.gradcheck(WrongCube.apply, (x,), raise_exception=False) is False


def test_gradgradcheck_catches_a_wrong_double_backward():
    class SecondWrong(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x.detach() ** 2 * grad  # right values, but detached: the second derivative is lost

    x = leaf([0.5, -1.25])
    assert numbagrad.autograd.gradcheck(SecondWrong.apply, (x,))
    assert not numbagrad.autograd.gradgradcheck(SecondWrong.apply, (x,), raise_exception=False)


def test_backward_through_a_100000_op_chain():
    x = leaf([1.0])
    gc.disable()  # only for speed: the collector rescans the growing graph many times while it is built
    try:
        y = x
        for _ in range(100_000):
            y = y * 1.0
        y.backward()
        del y
    finally:
        gc.enable()
    assert x.grad.tolist() == [1.0]


def test_graph_and_saved_tensors_are_freed_without_the_garbage_collector():
    class Keep(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    gc.collect()
    gc.disable()
    try:
        x = leaf([1.0, 2.0])
        hidden = x * 1  # a non-leaf input, held only by the graph once this name is gone
        out = Keep.apply(hidden)
        saved_input = weakref.ref(hidden)
        node = weakref.ref(out.grad_fn)
        saved_output = weakref.ref(out.grad_fn._saved[1].tensor)
        del hidden
        assert saved_input() is not None
        loss = (out * out).sum()
        loss.backward()
        assert saved_input() is None and saved_output() is None  # freed by backward while the graph still lives
        assert node() is not None
        del out, loss
        assert node() is None  # and the graph goes with its outputs
        assert x.grad.tolist() == [8.0, 16.0]
    finally:
        gc.enable()


def test_unused_graph_is_freed_on_del_without_the_garbage_collector():
    gc.collect()
    gc.disable()
    try:
        x = leaf([1.0, 2.0])
        out = Cube.apply(x * 1)
        node = weakref.ref(out.grad_fn)
        saved = weakref.ref(out.grad_fn._saved[0].tensor)
        del out
        assert node() is None and saved() is None
    finally:
        gc.enable()


# --- against torch ----------------------------------------------------------------------------------------------
def test_same_program_as_torch_hooks_retain_grad_and_double_backward():
    torch = pytest.importorskip("torch")

    def program(lib):
        x = lib.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([1.5, -0.5], dtype=lib.float64, requires_grad=True)
        h = (x * w).tanh()
        h.retain_grad()
        h.register_hook(lambda g: g * 2)
        loss = (h.sum(1) ** 2).mean()
        (gx,) = lib.autograd.grad(loss, x, create_graph=True)
        (gx * gx).sum().backward()
        printed = [repr(loss), repr(h), repr(gx), repr(h.grad)]
        return printed, x.grad.detach().numpy().copy(), w.grad.detach().numpy().copy()

    ours, theirs = program(numbagrad), program(torch)
    assert ours[0] == [p.replace("dtype=torch.", "dtype=numbagrad.") for p in theirs[0]]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)


def test_backward_inputs_fills_the_grad_of_a_non_leaf():
    x = leaf([1.0, 2.0])
    h = x * 3
    (h * h).sum().backward(inputs=[h])
    assert h.grad.tolist() == [6.0, 12.0]
    assert x.grad is None


def test_first_leaf_grad_under_create_graph_is_a_differentiable_copy():
    x = leaf([1.0, 2.0])
    (x**2).sum().backward(create_graph=True)
    assert repr(x.grad) == "tensor([2., 4.], dtype=numbagrad.float64, grad_fn=<CopyBackwards>)"


def engine_corner_cases(lib):
    """Small engine programs whose printed results must equal torch's."""
    f64 = lib.float64
    results = []
    x = lib.tensor([1.0, 2.0], dtype=f64, requires_grad=True)
    h = x * 3
    h.register_hook(lambda g: g * 2)
    h.retain_grad()  # torch runs retain_grad's hook after the others, whatever the registration order
    h.register_hook(lambda g: g + 1)
    (h * h).sum().backward()
    results.append((h.grad, x.grad))
    x = lib.tensor([1.0, 2.0], dtype=f64, requires_grad=True)
    x.register_hook(lambda g: g * 10)
    results.append(lib.autograd.grad((x * x).sum(), x))
    x = lib.tensor([1.0, 2.0], dtype=f64, requires_grad=True)
    h = x * 3
    h.retain_grad()
    y = (h * h).sum()
    y.backward(retain_graph=True)
    y.backward()
    results.append(h.grad)
    x = lib.tensor([1.0, 2.0], dtype=f64, requires_grad=True)
    (x**2).sum().backward(create_graph=True)
    (x**2).sum().backward(create_graph=True)
    results.append(x.grad)
    x = lib.tensor([1.0, 2.0], dtype=f64, requires_grad=True)
    a, b = x * 2, x * 3
    results.append(lib.autograd.grad([a.sum(), b.sum()], x, retain_graph=True))
    results.append(lib.autograd.grad([a, b], [x], [lib.ones(2, dtype=f64), lib.ones(2, dtype=f64) * 2]))
    x = lib.tensor([1.0, 2.0], dtype=f64, requires_grad=True)
    x.backward(lib.tensor([3.0, 4.0], dtype=f64))
    results.append(x.grad)
    y = x * 2
    results.append(lib.autograd.grad(y, y, lib.ones(2, dtype=f64)))
    x = lib.tensor([1.0], dtype=f64, requires_grad=True)
    assigned = lib.tensor([5.0], dtype=f64)
    x.grad = assigned
    (x * 2).sum().backward()
    results.append((x.grad, x.grad is assigned))
    x = lib.tensor([1.0], dtype=f64, requires_grad=True)
    (x.expand(3) * lib.tensor([1.0, 2.0, 3.0], dtype=f64)).sum().backward()
    results.append(x.grad)
    return [repr(r) for r in results]


def test_engine_corner_cases_match_torch():
    torch = pytest.importorskip("torch")
    expected = [r.replace("torch.", "numbagrad.") for r in engine_corner_cases(torch)]
    assert engine_corner_cases(numbagrad) == expected


def test_nodes_that_grad_does_not_need_keep_their_saved_tensors():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    b = (w * w).sum()
    y = (x * x).sum() + b
    (gx,) = numbagrad.autograd.grad(y, x)  # w * w is not on the way to x: it does not run and is not freed
    b.backward()
    assert gx.tolist() == [2.0, 4.0] and w.grad.tolist() == [6.0, 8.0]


def test_post_accumulate_grad_hook_sees_the_accumulated_grad():
    w = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
    (w * 3).sum().backward()
    (w * 3).sum().backward()
    assert seen == [[3.0, 3.0], [6.0, 6.0]]
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 2


def test_post_accumulate_grad_hook_refuses_non_leaves():
    w = numbagrad.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)


def test_grad_mode_is_per_thread():
    import threading

    seen = {}
    with numbagrad.no_grad():
        thread = threading.Thread(target=lambda: seen.setdefault("enabled", numbagrad.is_grad_enabled()))
        thread.start()
        thread.join()
        assert not numbagrad.is_grad_enabled()
    assert seen["enabled"] is True


def test_queue_callback_runs_once_backward_has_finished():
    from numbagrad.autograd.engine import queue_callback

    w = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    order = []
    w.register_hook(lambda g: queue_callback(lambda: order.append(("callback", w.grad.tolist()))))
    w.register_post_accumulate_grad_hook(lambda p: order.append(("accumulated", p.grad.tolist())))
    (w * 2).sum().backward()
    assert order == [("accumulated", [2.0, 2.0]), ("callback", [2.0, 2.0])]


def test_a_queued_callback_may_queue_another_that_runs_in_the_same_pass(torch):
    """torch runs the final callbacks in a loop that sees callbacks queued by the running ones."""

    def run(lib, queue):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        order = []

        def first():
            order.append("first")
            queue(lambda: order.append("second"))

        w.register_hook(lambda g: queue(first))
        (w * 2).sum().backward()
        order.append("after")
        return order

    from numbagrad.autograd.engine import queue_callback

    expected = run(torch, torch.autograd.Variable._execution_engine.queue_callback)
    assert run(numbagrad, queue_callback) == expected == ["first", "second", "after"]


def test_queue_callback_outside_backward_is_an_error():
    from numbagrad.autograd.engine import queue_callback

    with pytest.raises(RuntimeError, match="only be installed during backward"):
        queue_callback(lambda: None)


def _node_summary(t):
    """What a node records, saved inputs by their storage's identity (the output saved as "out"): comparable across
    two builds."""
    node = t.grad_fn
    saved = [
        (id(s.tensor._data) if s.output_nr < 0 else "out", s.version, s.output_nr, s.grad_fn) for s in node._saved or ()
    ]
    return type(node).__name__, node._edges, node.needs_input_grad, saved


_FAST_CASES = [(name, (True,)) for name in ("exp", "relu", "sigmoid")] + [
    (name, grads) for name in ("mul", "add", "sub", "div") for grads in ((True, True), (True, False), (False, True))
]


@pytest.mark.parametrize(("name", "grads"), _FAST_CASES)
def test_unrolled_fast_paths_build_the_node_the_general_loop_builds(name, grads):
    # ``_fast_one``/``_fast_pair`` (what ``relu(x)`` and ``x * w`` call) against ``_fast_apply``'s loop
    from numbagrad.autograd.grad_mode import state
    from numbagrad.ops.elementwise import CLASSES

    cls = CLASSES[name].get("tt") or CLASSES[name][""]
    a = leaf([0.5, -1.5, 2.0], requires_grad=grads[0])
    if cls.arity == 1:
        unrolled, looped = cls._fast_one(a, state), cls._fast_apply((a,), state)
    else:
        b = leaf([1.5, 2.5, -3.0], requires_grad=grads[1]) * 1.0  # a non-leaf when it requires grad
        unrolled, looped = cls._fast_pair(a, b, state), cls._fast_apply((a, b), state)
    assert np.array_equal(unrolled.detach().numpy(), looped.detach().numpy())
    assert _node_summary(unrolled) == _node_summary(looped)


_BACKWARD_CASES = ["exp", "relu", "sigmoid", "tanh", "sqrt", "log", "mul", "div", "atan2", "maximum"]


@pytest.mark.parametrize("name", _BACKWARD_CASES)
def test_unrolled_backwards_give_the_general_backwards_gradients(name):
    # ``_backward_one``/``_backward_pair`` (what relu's and mul's nodes run) against ``Elementwise.backward``
    from numbagrad.ops.elementwise import CLASSES, Elementwise

    cls = CLASSES[name].get("tt") or CLASSES[name][""]
    assert cls.backward is not Elementwise.backward  # the row takes an unrolled path
    inputs = [leaf([0.5, 1.5, 2.0]), leaf([1.5, 2.5, 0.25])][: cls.arity]
    node = cls.apply(*inputs).grad_fn
    g = numbagrad.tensor([1.0, -2.0, 3.0])
    with numbagrad.no_grad():  # (as the engine runs nodes without create_graph)
        unrolled, general = node._apply([g]), Elementwise.backward(node, g)
    assert len(unrolled) == len(general) == cls.arity
    for u, v in zip(unrolled, general):
        assert u.dtype == v.dtype and np.array_equal(u.numpy(), v.numpy())


def test_unrolled_backward_still_reports_a_saved_tensor_modified_in_place():
    x = leaf([0.5, 1.5])
    y = x.exp()
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("bias_shape", [(5,), (4, 1), (1, 5)])
def test_a_gradient_written_into_its_own_buffer_reads_a_broadcast_operand_by_rows(bias_shape):
    # sigmoid's gradient is owned by the engine, so mul's backward writes x's gradient into it, reading b by rows
    gen = np.random.default_rng(1)
    x_values = gen.standard_normal((4, 5)).astype(np.float32)
    b_values = gen.standard_normal(bias_shape).astype(np.float32)
    x = leaf(x_values)
    numbagrad.sigmoid(numbagrad.exp(x * 1.0) * numbagrad.tensor(b_values)).sum().backward()
    s = 1 / (1 + np.exp(-(np.exp(x_values) * b_values)))
    np.testing.assert_allclose(x.grad.numpy(), s * (1 - s) * b_values * np.exp(x_values), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "op", [lambda x, w: x * 2.0, lambda x, w: x * w, lambda x, w: w * x, lambda x, w: x / w, lambda x, w: 2.0 - x]
)
def test_an_input_no_needed_gradient_reads_may_change_in_place_before_backward(torch, op):
    """torch saves an input only when a gradient it computes reads it: ``x * w`` with ``w`` needing no gradient
    keeps ``w`` alone, so changing ``x`` in place afterwards does not stop backward."""
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        h = x * 1.0
        out = op(h, lib.tensor([0.5, 1.5, 2.5]))
        with lib.no_grad():
            h.add_(1.0)
        out.sum().backward()
        results.append(x.grad.tolist())
    assert results[0] == results[1]


def test_anomaly_mode_nan_error_and_forward_traceback_as_torch(torch):
    """detect_anomaly(check_nan=True): torch's error for a NaN gradient, and its warning naming the node and the
    forward line that made it."""
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly(check_nan=True):
                y = x.sqrt()  # the forward line the warning shows
                with pytest.raises(RuntimeError) as info:
                    (y * 0).sum().backward()
        (warning,) = [str(w.message) for w in caught if "Error detected" in str(w.message)]
        lines = warning.splitlines()
        results.append((str(info.value), lines[0], [line for line in lines if "x.sqrt()" in line]))
    assert results[0] == results[1]
    assert results[0][0] == "Function 'SqrtBackward0' returned nan values in its 0th output."
