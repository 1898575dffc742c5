"""Reliability under threads and bad input: per-thread autograd state, torch's errors for misuse with
the tensor left unchanged, edge shapes, and torch's autograd behaviours around custom Functions and grad modes."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import Function


# --- threads ---------------------------------------------------------------------------------------------------
def _independent_pass(seed: int) -> tuple:
    """One forward+backward on its own small graph: elementwise, matmul, reduction, a custom Function."""

    class Scale(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3.0

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3.0 + x * 0.0

    rng = np.random.default_rng(seed)
    x = numbagrad.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    w = numbagrad.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    loss = (Scale.apply(x).tanh() @ w).relu().sum() + (x * x).mean()
    loss.backward()
    return loss.item(), x.grad.numpy().copy(), w.grad.numpy().copy()


def test_four_threads_give_bit_identical_results_to_one_thread():
    seeds = list(range(4 * 150))
    expected = [_independent_pass(s) for s in seeds]
    results: dict = {}
    errors: list = []

    def worker(chunk):
        try:
            for s in chunk:
                results[s] = _independent_pass(s)
        except Exception as error:  # collected: an exception in a thread would otherwise be lost
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(seeds[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for s, (loss, gx, gw) in zip(seeds, expected):
        got = results[s]
        assert got[0] == loss
        assert np.array_equal(got[1], gx) and np.array_equal(got[2], gw)


def test_no_grad_in_one_thread_does_not_stop_another_recording():
    inside, recorded = threading.Event(), {}
    release = threading.Event()

    def holder():
        with numbagrad.no_grad():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    inside.wait(10)
    x = numbagrad.tensor([1.0], requires_grad=True)
    recorded["grad_fn"] = (x * 2).grad_fn
    release.set()
    thread.join()
    assert recorded["grad_fn"] is not None


def test_overlapping_backwards_leave_grad_mode_alone_in_every_thread():
    barrier = threading.Barrier(2)
    modes = []

    def hook_waits(g):
        barrier.wait(10)  # both backwards are inside the engine at once
        return g

    def run():
        x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        y.register_hook(hook_waits)
        y.sum().backward()
        modes.append((numbagrad.is_grad_enabled(), x.grad.tolist()))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert modes == [(True, [3.0, 3.0]), (True, [3.0, 3.0])]
    assert numbagrad.is_grad_enabled()


# --- torch's autograd behaviours ------------------------------------------------------------------------------
def test_a_downstream_none_gradient_reaches_an_upstream_backward_as_zeros():
    seen = []

    class Upstream(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(g.tolist())
            return g * 2

    class DropsGradient(Function):
        @staticmethod
        def forward(ctx, y):
            return y.clone()

        @staticmethod
        def backward(ctx, g):
            return None

    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    DropsGradient.apply(Upstream.apply(x)).sum().backward()
    assert seen == [[0.0, 0.0]]
    assert x.grad.tolist() == [0.0, 0.0]


def test_without_materialize_grads_the_upstream_backward_gets_none():
    seen = []

    class Upstream(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(g)
            return None

    class DropsGradient(Function):
        @staticmethod
        def forward(ctx, y):
            return y.clone()

        @staticmethod
        def backward(ctx, g):
            return None

    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    DropsGradient.apply(Upstream.apply(x)).sum().backward()
    assert seen == [None]
    assert x.grad is None


def test_a_graph_that_saved_no_tensors_runs_backward_twice():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_a_graph_that_saved_tensors_refuses_a_second_backward():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_no_grad_on_a_generator_applies_only_while_its_body_runs():
    @numbagrad.no_grad()
    def generate():
        yield numbagrad.is_grad_enabled()
        yield numbagrad.is_grad_enabled()

    gen = generate()
    assert next(gen) is False
    assert numbagrad.is_grad_enabled() is True
    assert next(gen) is False
    assert numbagrad.is_grad_enabled() is True


def test_setup_context_receives_forwards_default_arguments():
    received = []

    class WithDefault(Function):
        @staticmethod
        def forward(x, scale=3.0):
            return x * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            received.append(inputs[1:])
            ctx.scale = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale, None

    x = numbagrad.tensor([1.0], requires_grad=True)
    WithDefault.apply(x).sum().backward()
    assert received == [(3.0,)]
    assert x.grad.tolist() == [3.0]


def test_retained_gradient_after_an_inplace_op_is_the_new_versions():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    (y * y).sum().backward()
    assert y.grad.tolist() == [12.0, 24.0]  # d(y*y)/dy at y = [6, 12]


def test_format_of_a_0_dim_tensor_formats_its_value():
    t = numbagrad.tensor([1.5, 2.0])
    assert f"{t[0]}" == "1.5"
    assert f"{t[1]:.2f}" == "2.00"
    assert f"{numbagrad.tensor(3)}" == "3"


# --- 0-dim results and edge shapes ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.softmax(0),
        lambda t: t.log_softmax(0),
        lambda t: t.sign(),
        lambda t: t.isnan(),
        lambda t: t.isinf(),
        lambda t: t.isfinite(),
        lambda t: t.logical_not(),
        lambda t: t.argmax(dim=0),
        lambda t: t.sum(0),
        lambda t: t.amax(0),
        lambda t: t.max(0).values,
        lambda t: t.sort().values,
    ],
    ids=[
        "softmax",
        "log_softmax",
        "sign",
        "isnan",
        "isinf",
        "isfinite",
        "logical_not",
        "argmax",
        "sum",
        "amax",
        "max",
        "sort",
    ],  # fmt: skip
)
def test_ops_on_0_dim_tensors_give_0_dim_tensors_that_work_on(op):
    out = op(numbagrad.tensor(2.0))
    assert out.dim() == 0
    assert isinstance(out._data, np.ndarray)
    assert (out + 1).dim() == 0 and isinstance(out.item(), (bool, int, float))


def test_softmax_of_an_empty_tensor_is_empty():
    assert numbagrad.tensor([]).softmax(0).shape == (0,)
    assert numbagrad.tensor([]).log_softmax(0).shape == (0,)


def test_max_over_an_empty_dim_is_torchs_index_error():
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero size\."):
        numbagrad.empty(0, 3).amax(0)
    assert numbagrad.empty(0, 3).amax(1).shape == (0,)


# --- misuse: torch's exception type and key phrase, and the data untouched -------------------------------------
def _misuse_cases():
    def partial_overlap(a):
        a[1:] += a[:-1]

    def expanded_view_inplace(a):
        a[:1].expand(4).add_(1)

    def int_floor_divide_by_zero(a):
        numbagrad.tensor([1, 2]) // 0

    def int_remainder_by_zero(a):
        numbagrad.tensor([1, 2]) % numbagrad.tensor([1, 0])

    def add_a_list(a):
        a + [1, 2, 3, 4]

    def exp_of_a_list(a):
        numbagrad.exp([1.0, 2.0])

    def cast_float_into_int(a):
        numbagrad.tensor([1, 2, 3, 4]).add_(0.5)

    def broadcast_grows_destination(a):
        a.add_(numbagrad.ones(2, 4, dtype=numbagrad.float64))

    def wrong_shape_write(a):
        a[0:2] = numbagrad.tensor([7.0, 8.0, 9.0], dtype=numbagrad.float64)

    def inplace_on_leaf(a):
        numbagrad.tensor([1.0], requires_grad=True).mul_(2)

    def huge_allocation(a):
        numbagrad.empty(2**45, 2**10)

    def sub_bool(a):
        numbagrad.tensor([True, False]) - True

    return [
        (partial_overlap, RuntimeError, "refer to a single memory location"),
        (expanded_view_inplace, RuntimeError, "more than one element of the written-to tensor"),
        (int_floor_divide_by_zero, RuntimeError, "ZeroDivisionError"),
        (int_remainder_by_zero, RuntimeError, "ZeroDivisionError"),
        (add_a_list, TypeError, "unsupported operand type(s) for +: 'Tensor' and 'list'"),
        (exp_of_a_list, TypeError, "exp(): argument 'input' (position 1) must be Tensor, not list"),
        (cast_float_into_int, RuntimeError, "result type Float can't be cast to the desired output type Long"),
        (broadcast_grows_destination, RuntimeError, "doesn't match the broadcast shape"),
        (wrong_shape_write, RuntimeError, "must match the existing size"),
        (inplace_on_leaf, RuntimeError, "a leaf Variable that requires grad is being used in an in-place"),
        (huge_allocation, RuntimeError, "can't allocate memory"),
        (sub_bool, RuntimeError, "Subtraction, the `-` operator, with a bool tensor is not supported"),
    ]


@pytest.mark.parametrize(("misuse", "error", "phrase"), _misuse_cases(), ids=lambda c: getattr(c, "__name__", ""))
def test_misuse_raises_torchs_error_and_leaves_the_tensor_unchanged(misuse, error, phrase):
    a = numbagrad.tensor([1.0, 2.0, 3.0, 4.0], dtype=numbagrad.float64)
    before, version = a.numpy().copy(), a._version
    with pytest.raises(error) as info:
        misuse(a)
    assert phrase in str(info.value)
    assert np.array_equal(a.numpy(), before) and a._version == version


def test_full_overlap_in_place_still_works():
    a = numbagrad.tensor([1.0, 2.0, 3.0])
    a += a
    assert a.tolist() == [2.0, 4.0, 6.0]


def test_custom_backward_returning_a_non_tensor_is_a_runtime_error():
    class ReturnsNumber(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return 1.0

    x = numbagrad.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"expected Variable or None \(got float\)"):
        ReturnsNumber.apply(x).sum().backward()


def test_is_anomaly_enabled_is_at_the_top_level():
    assert numbagrad.is_anomaly_enabled() is False
    with numbagrad.autograd.detect_anomaly():
        assert numbagrad.is_anomaly_enabled() is True


def _special_value_ops(lib):
    """Ops whose numpy forms warn on an inf - inf, an overflow or a nan cast (torch's never do)."""
    inf, nan = float("inf"), float("nan")
    f = lib.nn.functional
    return {
        "sum": lambda: lib.tensor([inf, -inf]).sum(),
        "mean": lambda: lib.tensor([inf, -inf]).mean(),
        "sum(dim)": lambda: lib.tensor([[inf, -inf], [1.0, 2.0]]).sum(1),
        "prod": lambda: lib.tensor([1e30, 1e30]).prod(),
        "matmul": lambda: lib.tensor([[inf, 1.0]]) @ lib.tensor([[0.0], [1.0]]),
        "linear": lambda: f.linear(lib.tensor([[inf, 1.0]]), lib.tensor([[0.0, 1.0]]), lib.tensor([0.0])),
        "conv2d": lambda: f.conv2d(lib.tensor([[[[inf, 1.0], [1.0, 1.0]]]]), lib.tensor([[[[0.0]]]])),
        "long": lambda: lib.tensor([nan, -inf]).long(),
    }


@pytest.mark.parametrize("name", list(_special_value_ops(numbagrad)))
def test_inf_and_nan_pass_through_reductions_products_and_casts_without_a_warning(torch, name):
    """inf - inf, inf * 0 and overflows give torch's nan and inf silently: numpy's RuntimeWarnings stay out."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _special_value_ops(numbagrad)[name]()
    want = _special_value_ops(torch)[name]()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
