"""A custom Function with ``generate_vmap_rule = True`` under vmap, against torch.func.vmap: its forward,
setup_context and backward run once over the whole batch (called with batched tensors), not once per sample, and
values, per-sample gradients (vmap of grad and of grad of grad), gradients after the vmap returned and nested vmaps
match torch's; in forward mode (jvp and jacfwd of vmap, vmap of them) its ``jvp`` runs once over the batch, and a
Function without one raises torch's error. A Function with its own vmap staticmethod takes torch's derivative in
forward mode too: its ``jvp`` inside ``vmap(jvp(f))``, its vmap rule's in ``jvp(vmap(f))``."""

import importlib

import numpy as np
import pytest

import numbagrad
from numbagrad import func
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.autograd.gradcheck import GradcheckError


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _scaled_sin(lib):
    """``(sin(x) * w, x * 2)`` as a Function of ``lib`` that counts the calls of its staticmethods; the second
    output is non-differentiable and ``scale`` a non-tensor argument."""

    class ScaledSin(lib.autograd.Function):
        generate_vmap_rule = True
        calls = {"forward": 0, "setup_context": 0, "backward": 0}

        @staticmethod
        def forward(x, w, scale):
            ScaledSin.calls["forward"] += 1
            return x.sin() * w * scale, x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ScaledSin.calls["setup_context"] += 1
            x, w, scale = inputs
            ctx.save_for_backward(x, w)
            ctx.scale = scale
            ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, g, _):
            ScaledSin.calls["backward"] += 1
            x, w = ctx.saved_tensors
            return g * x.cos() * w * ctx.scale, g * x.sin() * ctx.scale, None

    return ScaledSin


def _close(ours, theirs):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_forward_runs_once_over_the_batch_with_torchs_values(torch):
    ours, theirs = _scaled_sin(numbagrad), _scaled_sin(torch)
    x, w = _rand(5, 3), _rand(3, seed=1)
    out = func.vmap(lambda a, b: ours.apply(a, b, 1.5), in_dims=(0, None))(numbagrad.tensor(x), numbagrad.tensor(w))
    expected = torch.func.vmap(lambda a, b: theirs.apply(a, b, 1.5), in_dims=(0, None))(
        torch.tensor(x), torch.tensor(w)
    )
    for o, t in zip(out, expected):
        _close(o, t)
    assert ours.calls == theirs.calls == {"forward": 1, "setup_context": 1, "backward": 0}


def test_forward_sees_batched_tensors_of_the_per_sample_shape():
    seen = []

    class Record(numbagrad.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            seen.append((type(x).__name__, tuple(x.shape)))
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    func.vmap(Record.apply)(numbagrad.ones(4, 3))
    assert seen == [("BatchedTensor", (3,))]


def test_per_sample_gradients_by_vmap_of_grad_match_torch(torch):
    ours, theirs = _scaled_sin(numbagrad), _scaled_sin(torch)
    x, w = _rand(4, 3), _rand(3, seed=1)

    def per_sample(lib, fn):
        return lambda a, b: lib.func.grad(lambda a, b: fn.apply(a, b, 0.5)[0].sum(), argnums=(0, 1))(a, b)

    got = func.vmap(per_sample(numbagrad, ours), in_dims=(0, None))(numbagrad.tensor(x), numbagrad.tensor(w))
    expected = torch.func.vmap(per_sample(torch, theirs), in_dims=(0, None))(torch.tensor(x), torch.tensor(w))
    _close(got[0], expected[0])
    _close(got[1], expected[1])
    assert ours.calls["forward"] == ours.calls["backward"] == 1


def test_backward_after_the_vmap_returned_reaches_batched_and_shared_inputs(torch):
    ours, theirs = _scaled_sin(numbagrad), _scaled_sin(torch)
    x, w = _rand(4, 3), _rand(3, seed=1)
    nx, nw = (numbagrad.tensor(a, requires_grad=True) for a in (x, w))
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    (func.vmap(lambda a, b: ours.apply(a, b, 2.0)[0], in_dims=(0, None))(nx, nw) ** 2).sum().backward()
    (torch.func.vmap(lambda a, b: theirs.apply(a, b, 2.0)[0], in_dims=(0, None))(tx, tw) ** 2).sum().backward()
    _close(nx.grad, tx.grad)
    _close(nw.grad, tw.grad)  # the shared input's gradient sums the samples'
    assert ours.calls["backward"] == 1


def test_nested_vmaps_run_the_forward_once(torch):
    ours, theirs = _scaled_sin(numbagrad), _scaled_sin(torch)
    x, w = _rand(2, 3, 4), _rand(4, seed=1)
    inner = (0, None)
    got = func.vmap(func.vmap(lambda a, b: ours.apply(a, b, 1.0)[0], in_dims=inner), in_dims=inner)(
        numbagrad.tensor(x), numbagrad.tensor(w)
    )
    expected = torch.func.vmap(torch.func.vmap(lambda a, b: theirs.apply(a, b, 1.0)[0], in_dims=inner), in_dims=inner)(
        torch.tensor(x), torch.tensor(w)
    )
    _close(got, expected)
    assert ours.calls["forward"] == 1


def _cube(lib):
    """``x ** 3`` with a backward of differentiable ops (so it differentiates twice) and an op without a numbagrad
    batching rule (``outer``) inside its forward, which falls back to a loop for that op alone."""

    class Cube(lib.autograd.Function):
        generate_vmap_rule = True
        forwards = [0]

        @staticmethod
        def forward(x):
            Cube.forwards[0] += 1
            return x**3 + lib.outer(x, x).sum() * 0

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * g

    return Cube


def test_op_without_a_batching_rule_inside_keeps_the_forward_batched(torch):
    ours, theirs = _cube(numbagrad), _cube(torch)
    x = _rand(3, 2)
    _close(func.vmap(ours.apply)(numbagrad.tensor(x)), torch.func.vmap(theirs.apply)(torch.tensor(x)))
    assert ours.forwards == [1]


def test_second_derivatives_per_sample_match_torch(torch):
    ours, theirs = _cube(numbagrad), _cube(torch)
    x = _rand(4, 2)

    def second(lib, fn):
        first = lib.func.grad(lambda a: fn.apply(a).sum())
        return lib.func.grad(lambda a: first(a).sum())

    _close(
        func.vmap(second(numbagrad, ours))(numbagrad.tensor(x)), torch.func.vmap(second(torch, theirs))(torch.tensor(x))
    )


@pytest.mark.parametrize("size", [1, 3])
def test_outputs_keep_the_batch_size(size):
    ours = _scaled_sin(numbagrad)
    out, doubled = func.vmap(lambda a: ours.apply(a, numbagrad.ones(2), 1.0))(numbagrad.ones(size, 2))
    assert out.shape == doubled.shape == (size, 2)


def test_keyword_arguments_reach_the_batched_forward(torch):
    ours, theirs = _scaled_sin(numbagrad), _scaled_sin(torch)
    x, w = _rand(3, 2), _rand(2, seed=1)
    got = func.vmap(lambda a: ours.apply(a, numbagrad.tensor(w), scale=3.0)[0])(numbagrad.tensor(x))
    expected = torch.func.vmap(lambda a: theirs.apply(a, torch.tensor(w), scale=3.0)[0])(torch.tensor(x))
    _close(got, expected)
    assert ours.calls["forward"] == 1


def test_gradcheck_checks_batched_grads_through_the_generated_rule():
    ours = _scaled_sin(numbagrad)
    x, w = (numbagrad.tensor(_rand(3, seed=s), requires_grad=True) for s in (0, 1))
    assert gradcheck(lambda a, b: ours.apply(a, b, 2.0)[0], (x, w), check_batched_grad=True)
    assert gradgradcheck(_cube(numbagrad).apply, (x,), check_batched_grad=True)


# --- forward mode: the Function's jvp under vmap -------------------------------------------------------------------
def _scaled_sin_with_jvp(lib, with_jvp: bool = True):
    """``sin(x) * w * scale`` with its forward-mode derivative in ``jvp`` (from tensors saved for forward)
    and a backward that would give a different tangent, so that a result made by the backward shows."""

    class ScaledSinJvp(lib.autograd.Function):
        generate_vmap_rule = True
        calls = {"forward": 0, "jvp": 0, "backward": 0}
        seen: list = []

        @staticmethod
        def forward(x, w, scale):
            ScaledSinJvp.calls["forward"] += 1
            return x.sin() * w * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w, scale = inputs
            ctx.save_for_forward(x, w)
            ctx.scale = scale

        @staticmethod
        def backward(ctx, g):
            ScaledSinJvp.calls["backward"] += 1
            return g * 0, g * 0, None

        if with_jvp:

            @staticmethod
            def jvp(ctx, tx, tw, _):
                ScaledSinJvp.calls["jvp"] += 1
                x, w = ctx.saved_tensors
                ScaledSinJvp.seen.append((tuple(tx.shape), tuple(tw.shape), tuple(x.shape)))
                return (tx * x.cos() * w + tw * x.sin()) * ctx.scale

    return ScaledSinJvp


def _pair_close(ours, theirs):
    for o, t in zip(ours, theirs):
        _close(o, t)


def test_jvp_of_vmap_runs_the_jvp_once_over_the_batch_with_torchs_values(torch):
    ours, theirs = _scaled_sin_with_jvp(numbagrad), _scaled_sin_with_jvp(torch)
    x, w, tx = _rand(4, 3), _rand(3, seed=1), _rand(4, 3, seed=2)

    def run(lib, fn, w):
        return lib.func.jvp(
            lambda a: lib.func.vmap(lambda b: fn.apply(b, w, 1.5))(a), (lib.tensor(x),), (lib.tensor(tx),)
        )

    _pair_close(run(numbagrad, ours, numbagrad.tensor(w)), run(torch, theirs, torch.tensor(w)))
    assert ours.calls == theirs.calls == {"forward": 1, "jvp": 1, "backward": 0}
    assert ours.seen == theirs.seen == [((3,), (3,), (3,))]  # per-sample shapes, the shared input's zero tangent


def test_jvp_of_vmap_with_a_tangent_for_the_shared_input_matches_torch(torch):
    ours, theirs = _scaled_sin_with_jvp(numbagrad), _scaled_sin_with_jvp(torch)
    x, w, tx, tw = _rand(4, 3), _rand(3, seed=1), _rand(4, 3, seed=2), _rand(3, seed=3)

    def run(lib, fn):
        mapped = lib.func.vmap(lambda a, b: fn.apply(a, b, 0.5), in_dims=(0, None))
        return lib.func.jvp(mapped, (lib.tensor(x), lib.tensor(w)), (lib.tensor(tx), lib.tensor(tw)))

    _pair_close(run(numbagrad, ours), run(torch, theirs))
    assert ours.calls["jvp"] == 1


def test_vmap_of_jvp_runs_the_jvp_once_with_torchs_values(torch):
    ours, theirs = _scaled_sin_with_jvp(numbagrad), _scaled_sin_with_jvp(torch)
    x, w, tx = _rand(4, 3), _rand(3, seed=1), _rand(4, 3, seed=2)

    def run(lib, fn):
        w_ = lib.tensor(w)
        per_sample = lambda a, t: lib.func.jvp(lambda b: fn.apply(b, w_, 2.0), (a,), (t,))  # noqa: E731
        return lib.func.vmap(per_sample)(lib.tensor(x), lib.tensor(tx))

    _pair_close(run(numbagrad, ours), run(torch, theirs))
    assert ours.calls == theirs.calls == {"forward": 1, "jvp": 1, "backward": 0}


def test_vmap_of_jvp_with_a_tangent_shared_by_the_samples_matches_torch(torch):
    ours, theirs = _scaled_sin_with_jvp(numbagrad), _scaled_sin_with_jvp(torch)
    x, w, tx = _rand(4, 3), _rand(3, seed=1), _rand(3, seed=2)

    def run(lib, fn):
        w_ = lib.tensor(w)
        per_sample = lambda a, t: lib.func.jvp(lambda b: fn.apply(b, w_, 2.0), (a,), (t,))  # noqa: E731
        return lib.func.vmap(per_sample, in_dims=(0, None))(lib.tensor(x), lib.tensor(tx))

    _pair_close(run(numbagrad, ours), run(torch, theirs))


@pytest.mark.parametrize("order", ["jacfwd-of-vmap", "vmap-of-jacfwd"])
def test_jacfwd_and_vmap_compose_through_the_jvp_as_torchs(torch, order):
    ours, theirs = _scaled_sin_with_jvp(numbagrad), _scaled_sin_with_jvp(torch)
    x, w = _rand(3, 2), _rand(2, seed=1)

    def run(lib, fn):
        w_ = lib.tensor(w)
        f = lambda a: fn.apply(a, w_, 1.0)  # noqa: E731
        composed = lib.func.jacfwd(lib.func.vmap(f)) if order == "jacfwd-of-vmap" else lib.func.vmap(lib.func.jacfwd(f))
        return composed(lib.tensor(x))

    _close(run(numbagrad, ours), run(torch, theirs))
    assert ours.calls["backward"] == 0


def test_nested_vmaps_inside_jvp_run_the_jvp_once(torch):
    ours, theirs = _scaled_sin_with_jvp(numbagrad), _scaled_sin_with_jvp(torch)
    x, w, tx = _rand(2, 3, 4), _rand(4, seed=1), _rand(2, 3, 4, seed=2)

    def run(lib, fn):
        w_ = lib.tensor(w)
        f = lib.func.vmap(lib.func.vmap(lambda a: fn.apply(a, w_, 1.0)))
        return lib.func.jvp(f, (lib.tensor(x),), (lib.tensor(tx),))

    _pair_close(run(numbagrad, ours), run(torch, theirs))
    assert ours.calls["jvp"] == 1


@pytest.mark.parametrize("order", ["jvp-of-vmap", "vmap-of-jvp"])
def test_function_without_jvp_raises_torchs_error_under_forward_mode(torch, order):
    def run(lib):
        fn = _scaled_sin_with_jvp(lib, with_jvp=False)
        w = lib.tensor(_rand(3, seed=1))
        f = lambda a: fn.apply(a, w, 1.0)  # noqa: E731
        x, t = lib.tensor(_rand(4, 3)), lib.tensor(_rand(4, 3, seed=2))
        if order == "jvp-of-vmap":
            return lib.func.jvp(lib.func.vmap(f), (x,), (t,))
        return lib.func.vmap(lambda a, b: lib.func.jvp(f, (a,), (b,)))(x, t)

    with pytest.raises(NotImplementedError) as expected:
        run(torch)
    with pytest.raises(NotImplementedError) as got:
        run(numbagrad)
    assert str(got.value) == str(expected.value)


def test_gradcheck_checks_batched_forward_grads_through_the_jvp():
    ours = _scaled_sin_with_jvp(numbagrad)
    x, w = (numbagrad.tensor(_rand(3, seed=s), requires_grad=True) for s in (0, 1))
    fn = lambda a, b: ours.apply(a, b, 2.0)  # noqa: E731
    assert gradcheck(fn, (x, w), check_forward_ad=True, check_backward_ad=False, check_batched_forward_grad=True)
    assert ours.calls["jvp"] > 0 and ours.calls["backward"] == 0


def test_batched_forward_grad_check_needs_the_forward_check(torch):
    x = numbagrad.tensor(_rand(3), requires_grad=True)
    with pytest.raises(AssertionError) as expected:
        torch.autograd.gradcheck(
            torch.sin, (torch.tensor(_rand(3), requires_grad=True),), check_batched_forward_grad=True
        )
    with pytest.raises(AssertionError) as got:
        gradcheck(numbagrad.sin, (x,), check_batched_forward_grad=True)
    assert str(got.value) == str(expected.value)


def test_a_jvp_that_cannot_run_batched_fails_the_batched_forward_grad_check_as_torchs(torch):
    def reads_a_number(lib):
        class ReadsANumber(lib.autograd.Function):
            generate_vmap_rule = True

            @staticmethod
            def forward(x):
                return x * 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, g):
                return g * 3

            @staticmethod
            def jvp(ctx, t):
                return t * float(t.abs().sum() * 0 + 3)  # .item() of a batched tensor: refused under vmap

        return ReadsANumber

    def check(lib):
        x = lib.tensor(_rand(3), requires_grad=True)
        return lib.autograd.gradcheck(
            reads_a_number(lib).apply, (x,), check_forward_ad=True, check_batched_forward_grad=True
        )

    theirs = importlib.import_module("torch.autograd.gradcheck")  # (the module, which its function shadows)
    with pytest.raises(theirs.GradcheckError) as expected:
        check(torch)
    with pytest.raises(GradcheckError) as got:
        check(numbagrad)
    tail = theirs.FAILED_BATCHED_GRAD_MSG_FWD_AD
    assert str(expected.value).startswith("While computing batched gradients, got: ")
    assert str(got.value).startswith("While computing batched gradients, got: ") and str(got.value).endswith(tail)


# --- a Function with its own vmap staticmethod under forward mode ------------------------------------------------
def _sin_times_with_vmap_rule(lib, with_jvp: bool = True):
    """``sin(x) * w`` whose ``vmap`` staticmethod computes 1.5 times that (so it shows which derivative torch
    takes: ``vmap(jvp(f))`` differentiates with the Function's ``jvp``, ``jvp(vmap(f))`` through the vmap rule)."""

    class SinTimes(lib.autograd.Function):
        calls = {"jvp": 0, "vmap": 0}

        @staticmethod
        def forward(x, w):
            return x.sin() * w

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(*inputs)

        @staticmethod
        def backward(ctx, g):
            return g, None

        if with_jvp:

            @staticmethod
            def jvp(ctx, tx, tw):
                SinTimes.calls["jvp"] += 1
                x, w = ctx.saved_tensors
                return tx * x.cos() * w + tw * x.sin()

        @staticmethod
        def vmap(info, in_dims, x, w):
            SinTimes.calls["vmap"] += 1
            x = x if in_dims[0] is not None else x.unsqueeze(0)
            w = w if in_dims[1] is not None else w.unsqueeze(0)
            return x.sin() * w * 1.5, 0

    return SinTimes


@pytest.mark.parametrize("order", ["vmap-of-jvp", "jvp-of-vmap", "vmap-of-vmap-of-jvp"])
def test_own_vmap_rule_under_forward_mode_takes_torchs_derivative(torch, order):
    ours, theirs = _sin_times_with_vmap_rule(numbagrad), _sin_times_with_vmap_rule(torch)
    shape = (2, 4, 3) if order == "vmap-of-vmap-of-jvp" else (4, 3)
    x, t, w = _rand(*shape), _rand(*shape, seed=1), _rand(3, seed=2)

    def run(lib, fn):
        w_ = lib.tensor(w)
        f = lambda a: fn.apply(a, w_)  # noqa: E731
        if order == "jvp-of-vmap":
            return lib.func.jvp(lib.func.vmap(f), (lib.tensor(x),), (lib.tensor(t),))
        mapped = lib.func.vmap(lambda a, b: lib.func.jvp(f, (a,), (b,)))
        return (lib.func.vmap(mapped) if order == "vmap-of-vmap-of-jvp" else mapped)(lib.tensor(x), lib.tensor(t))

    _pair_close(run(numbagrad, ours), run(torch, theirs))
    assert ours.calls == theirs.calls


def test_own_vmap_rule_without_jvp_raises_torchs_error_in_vmap_of_jvp(torch):
    def run(lib):
        fn, w = _sin_times_with_vmap_rule(lib, with_jvp=False), lib.tensor(_rand(3, seed=2))
        return lib.func.vmap(lambda a, b: lib.func.jvp(lambda c: fn.apply(c, w), (a,), (b,)))(
            lib.tensor(_rand(4, 3)), lib.tensor(_rand(4, 3, seed=1))
        )

    with pytest.raises(NotImplementedError) as expected:
        run(torch)
    with pytest.raises(NotImplementedError) as got:
        run(numbagrad)
    assert str(got.value) == str(expected.value)
