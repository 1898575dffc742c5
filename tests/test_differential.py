"""Differential testing against torch: random chains of ops on random broadcastable shapes (0-dim and empty ones
included), with in-place steps, must give torch's values, dtypes and input gradients; and 300 random autograd
programs (views, in-place ops on views, bases and leaves, hooks, retained grads, second backwards, autograd.grad,
custom Functions) must give torch's values, gradients, hook calls and errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numbagrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

UNARY = ["exp", "tanh", "sigmoid", "relu", "abs", "neg", "sin", "square_", "clamp_", "sum_keep", "mean_last"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow_scalar", "add_scalar", "rsub_scalar", "where"]
INPLACE = ["add_", "mul_", "sub_"]


def _apply_unary(lib, name: str, t):
    if name == "square_":
        return t * t
    if name == "clamp_":
        return t.clamp(-0.5, 0.7)
    if name == "sum_keep":
        return t.sum(dim=-1, keepdim=True) if t.dim() else t.sum()
    if name == "mean_last":
        return t.mean(dim=-1) if t.dim() and t.shape[-1] else t * 1.0
    return getattr(lib, name)(t)


def _apply_binary(lib, name: str, a, b):
    if name == "div":
        return a / (b.abs() + 1.0)
    if name == "pow_scalar":
        return (a.abs() + 0.5) ** 1.5
    if name == "add_scalar":
        return a + 2.5
    if name == "rsub_scalar":
        return 1.0 - a
    if name == "where":
        return lib.where(a > b, a, b * 2.0)
    return getattr(lib, name)(a, b)


def _broadcasts_into(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _run(lib, arrays: list, program: list):
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    values = list(leaves)
    for step in program:
        kind, name, i, j = step
        if kind == "unary":
            values.append(_apply_unary(lib, name, values[i % len(values)]))
        elif kind == "binary":
            values.append(_apply_binary(lib, name, values[i % len(values)], values[j % len(values)]))
        else:  # in-place on a fresh non-leaf copy, with a tensor that broadcasts into it
            target = values[i % len(values)] * 1.0
            other = values[j % len(values)]
            if _broadcasts_into(tuple(other.shape), tuple(target.shape)):
                getattr(target, name)(other)
            values.append(target)
    out = values[-1]
    loss = (out * out).sum() if out.numel() else out.sum()
    loss.backward()
    return out, leaves


@st.composite
def programs(draw):
    base = draw(st.lists(st.integers(0, 3), min_size=0, max_size=3))  # the broadcast shape; 0 makes it empty
    n_inputs = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_inputs):
        keep = draw(st.integers(0, len(base)))  # trailing dims kept, some set to 1
        tail = base[len(base) - keep :]
        shapes.append(tuple(draw(st.sampled_from([d, 1])) for d in tail))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    arrays = [rng.uniform(-2, 2, s) for s in shapes]
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "inplace"]))
        names = {"unary": UNARY, "binary": BINARY, "inplace": INPLACE}[kind]
        steps.append((kind, draw(st.sampled_from(names)), draw(st.integers(0, 7)), draw(st.integers(0, 7))))
    return arrays, steps


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_op_chains_match_torch(case):
    arrays, program = case
    try:
        theirs, their_leaves = _run(torch, arrays, program)
    except RuntimeError as error:  # shapes that do not broadcast: numbagrad must refuse them with torch's text
        with pytest.raises(RuntimeError) as ours:
            _run(numbagrad, arrays, program)
        assert str(ours.value) == str(error)
        return
    ours, our_leaves = _run(numbagrad, arrays, program)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    for x, y in zip(our_leaves, their_leaves):
        if y.grad is None:
            assert x.grad is None
        else:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)


# --- autograd programs: views, in-place ops, hooks, retained grads, second backwards, custom Functions ----------
# Each program is drawn step by step from a seeded generator while it runs in torch (so that a step can be drawn
# to fit the shapes torch has at that point); the recorded steps are then replayed in numbagrad. Values, every
# leaf's and retained .grad, what hooks and custom backwards saw, and the exception (type and first line) that
# stops a program must all be torch's.

VIEWS = ["slice", "select", "narrow", "view", "reshape", "transpose", "permute", "t", "expand", "squeeze",
         "unsqueeze", "diagonal", "unbind", "split", "chunk", "unflatten", "movedim"]  # fmt: skip
FUNCS = ["exp", "sin", "tanh", "sigmoid", "mul2", "square", "sum_last", "add_other", "mul_other", "clone", "relu"]
INPLACES = ["add_", "add_other_", "mul_", "mul_other_", "copy_", "fill_", "zero_", "mask_set", "mask_set_tensor",
            "index_set", "index_set_tensor", "clamp_", "relu_", "iadd_select"]  # fmt: skip
CUSTOMS = ["dirty_double", "save_mul", "two_out_lazy", "non_differentiable", "view_of_input"]
FINALS = ["backward", "backward_retained_twice", "backward_twice", "grad", "grad_create_graph", "grad_non_leaf"]


def _custom_functions(lib, log: list) -> dict:
    """The same custom Functions written once per library; their backwards log what they received."""
    Function = lib.autograd.Function

    class DirtyDouble(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x.mul_(2)

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class SaveMul(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            log.append(("save_mul.needs", tuple(ctx.needs_input_grad)))
            return (g * y if ctx.needs_input_grad[0] else None), (g * x if ctx.needs_input_grad[1] else None)

    class TwoOutLazy(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            log.append(("two_out.none", g1 is None, g2 is None))
            total = None
            for g, k in ((g1, 2), (g2, 3)):
                if g is not None:
                    total = g * k if total is None else total + g * k
            return total

    class NonDifferentiable(Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).to(x.dtype)
            ctx.mark_non_differentiable(mask)
            ctx.save_for_backward(x)
            return x.exp(), mask

        @staticmethod
        def backward(ctx, g, g_mask):
            log.append(("non_diff.mask_grad", float(g_mask.abs().sum())))
            (x,) = ctx.saved_tensors
            return g * x.exp()

    class ViewOfInput(Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g

    return {"dirty_double": DirtyDouble, "save_mul": SaveMul, "two_out_lazy": TwoOutLazy,
            "non_differentiable": NonDifferentiable, "view_of_input": ViewOfInput}  # fmt: skip


class _Program:
    """One program run in one library: drawn from ``rng`` (torch) or replayed from ``steps`` (numbagrad)."""

    def __init__(self, lib, rng=None, steps=None) -> None:
        self.lib, self.rng = lib, rng
        self.steps = [] if steps is None else steps
        self.pool: list = []  # every tensor made so far; steps pick their operands here
        self.leaves: list = []
        self.retained: list = []
        self.log: list = []
        self.error = None
        self.customs = _custom_functions(lib, self.log)

    # -- drawing (torch only) --
    def _draw(self):
        rng, pool = self.rng, self.pool
        kind = rng.choices(["view", "func", "inplace", "hook", "retain", "custom"], [30, 15, 30, 8, 6, 8])[0]
        i = self._pick(kind)
        shape = tuple(pool[i].shape)
        if kind == "view":
            name = rng.choice(VIEWS)
            return ("view", i, name, self._view_args(name, shape), rng.random() < 0.1)
        if kind == "func":
            return ("func", i, rng.choice(FUNCS), rng.randrange(len(pool)))
        if kind == "inplace":
            return ("inplace", i, rng.choice(INPLACES), rng.randrange(len(pool)), rng.random() < 0.12,
                    rng.randrange(8))  # fmt: skip
        if kind == "hook":
            return ("hook", i, rng.choice(["scale", "log"]))
        if kind == "retain":
            return ("retain", i)
        return ("custom", rng.choice(CUSTOMS), i, rng.randrange(len(pool)))

    def _pick(self, kind: str) -> int:
        """The operand of a step: mostly one the step can use (most in-place ops are not on leaves that require
        grad, most hooks on tensors that require grad), sometimes any, so that torch's refusals are tried too."""
        everything = range(len(self.pool))
        if kind in ("inplace", "hook", "retain") and self.rng.random() < 0.85:
            usable = [k for k in everything if _usable(self.pool[k], kind)]
            if usable:
                return self.rng.choice(usable)
        return self.rng.choice(everything)

    def _view_args(self, name: str, shape: tuple) -> tuple:
        rng, n = self.rng, len(shape)
        d = rng.randrange(n) if n else 0
        size = shape[d] if n else 1
        if name == "slice":
            lo = rng.randrange(size + 1)
            return (d, lo, rng.randrange(lo, size + 1), rng.choice([1, 1, 2]))
        if name == "select":
            return (d, rng.randrange(-size, size) if size else 0)
        if name == "narrow":
            start = rng.randrange(size + 1)
            return (d, start, rng.randrange(size - start + 1))
        if name in ("view", "reshape"):
            return rng.choice([(-1,), (shape[0], -1) if n else (1,), (1,) + shape])
        if name == "transpose":
            return (rng.randrange(-n, n) if n else 0, rng.randrange(-n, n) if n else 0)
        if name == "permute":
            return tuple(rng.sample(range(n), n))
        if name == "expand":
            return (2,) + shape
        if name == "squeeze":
            return (d,) if rng.random() < 0.5 and n else ()
        if name == "unsqueeze":
            return (rng.randrange(-n - 1, n + 1),)
        if name == "diagonal":
            return (rng.randrange(-1, 2), 0, 1 if n > 1 else 0)
        if name in ("unbind", "split", "chunk"):
            return (d, rng.randrange(1, 4), rng.randrange(4))
        if name == "unflatten":
            return (d, (2, -1))
        if name == "movedim":
            return (d, rng.randrange(n) if n else 0)
        return ()

    # -- running (both) --
    def run(self, arrays: list, n_steps: int, final: str):
        lib = self.lib
        try:
            for k, a in enumerate(arrays):
                leaf = lib.tensor(a, requires_grad=k < 2)
                self.leaves.append(leaf)
                self.pool.append(leaf)
            self.pool.append(self.pool[0] * 1.0)  # a non-leaf to start from
            for k in range(n_steps):
                if self.rng is not None:
                    self.steps.append(self._draw())
                self._step(self.steps[k])
            self._final(final)
        except Exception as error:  # noqa: BLE001 - the exception itself is what is compared
            self.error = (type(error).__name__, str(error).split("\n")[0])

    def _step(self, step) -> None:
        lib, pool = self.lib, self.pool
        kind = step[0]
        if kind == "view":
            _, i, name, args, in_no_grad = step
            with lib.set_grad_enabled(not in_no_grad):
                v = _make_view(pool[i], name, args)
            if v is not None:
                pool.append(v)
        elif kind == "func":
            _, i, name, j = step
            pool.append(_apply_func(lib, name, pool[i], pool[j]))
        elif kind == "inplace":
            _, i, name, j, in_no_grad, r = step
            with lib.set_grad_enabled(not in_no_grad):
                _apply_inplace(lib, name, pool[i], pool[j], r)
        elif kind == "hook":
            _, i, mode = step
            label = len(self.log)
            _flags(pool[i])  # (reads grad_fn: torch 2.13 crashes hooking a view whose grad_fn it has not regenerated)
            if mode == "scale":
                pool[i].register_hook(lambda g: g * 2)
            else:
                pool[i].register_hook(lambda g: self.log.append(("hook", label, tuple(g.shape), _round(g))))
        elif kind == "retain":
            pool[step[1]].retain_grad()
            self.retained.append(pool[step[1]])
        else:
            _, name, i, j = step
            fn = self.customs[name]
            out = fn.apply(pool[i], pool[j]) if name == "save_mul" else fn.apply(pool[i])
            pool.extend(out if isinstance(out, tuple) else (out,))

    def _final(self, final: str) -> None:
        lib = self.lib
        terms = []
        for t in self.pool:
            if t.requires_grad:
                w = lib.linspace(-1.0, 1.0, t.numel(), dtype=t.dtype).reshape(t.shape)
                terms.append((t * w).sum())
        if not terms:
            self.log.append("nothing requires grad")
            return
        loss = terms[0]
        for term in terms[1:]:
            loss = loss + term
        grads_of = [t for t in self.leaves if t.requires_grad]
        if final == "backward":
            loss.backward()
        elif final == "backward_retained_twice":
            loss.backward(retain_graph=True)
            loss.backward()
        elif final == "backward_twice":
            loss.backward()
            loss.backward()
        elif final == "grad":
            self.log.append(("grad", [_round(g) for g in lib.autograd.grad(loss, grads_of, allow_unused=True)]))
        elif final == "grad_create_graph":
            grads = lib.autograd.grad(loss, grads_of, create_graph=True, allow_unused=True)
            self.log.append(("grad", [_round(g) for g in grads]))
            total = None
            for g in grads:
                if g is not None and g.requires_grad:
                    total = (g * g).sum() if total is None else total + (g * g).sum()
            if total is not None:
                total.backward()
        else:
            inner = [t for t in self.pool[len(self.leaves) :] if t.requires_grad][-1:]
            self.log.append(("grad", [_round(g) for g in lib.autograd.grad(loss, inner, allow_unused=True)]))

    def outcome(self) -> dict:
        """What is compared: values, flags and grads of every tensor made, the log and the error."""

        def grad_of(t):
            g = t.grad
            return None if g is None else g.detach().numpy().copy()

        return {
            "error": self.error,
            "log": self.log,
            "values": [(tuple(t.shape), t.detach().numpy().copy()) for t in self.pool],
            "flags": [_flags(t) for t in self.pool],
            "leaf_grads": [grad_of(t) for t in self.leaves],
            "retained_grads": [grad_of(t) for t in self.retained],
        }


def _flags(t):
    """``(requires_grad, is_leaf)``; None where reading them raises (reading the grad_fn of a view that may not
    follow its base's in-place change)."""
    try:
        return t.requires_grad, t.is_leaf
    except RuntimeError:
        return None


def _usable(t, kind: str) -> bool:
    flags = _flags(t)
    if flags is None:
        return False
    requires_grad, is_leaf = flags
    return not (requires_grad and is_leaf) if kind == "inplace" else requires_grad


def _round(g):
    return None if g is None else round(float(g.detach().sum()), 8)


def _make_view(t, name: str, args: tuple):
    """The view ``name`` of ``t``; ``None`` when a multi-view op gave no pieces."""
    if name == "slice":
        d, lo, hi, step = args
        return t[(slice(None),) * d + (slice(lo, hi, step),)]
    if name == "select":
        return t.select(*args)
    if name == "narrow":
        return t.narrow(*args)
    if name == "view":
        return t.view(*args)
    if name == "reshape":
        return t.reshape(*args)
    if name == "transpose":
        return t.transpose(*args)
    if name == "permute":
        return t.permute(*args)
    if name == "t":
        return t.t()
    if name == "expand":
        return t.expand(*args)
    if name == "squeeze":
        return t.squeeze(*args)
    if name == "unsqueeze":
        return t.unsqueeze(*args)
    if name == "diagonal":
        offset, d1, d2 = args
        return t.diagonal(offset, d1, d2)
    if name in ("unbind", "split", "chunk"):
        d, n, k = args
        pieces = t.unbind(d) if name == "unbind" else (t.split(n, d) if name == "split" else t.chunk(n, d))
        return pieces[k % len(pieces)] if pieces else None
    if name == "unflatten":
        return t.unflatten(*args)
    return t.movedim(*args)


def _apply_func(lib, name: str, t, other):
    if name in ("exp", "sin", "tanh", "sigmoid", "relu", "clone"):
        return getattr(t, name)()
    if name == "mul2":
        return t * 2
    if name == "square":
        return t * t
    if name == "sum_last":
        return t.sum(-1) if t.dim() else t.sum()
    if name == "add_other":
        return t + other
    return t * other


def _apply_inplace(lib, name: str, t, other, r: int) -> None:
    if name == "add_":
        t.add_(0.5 * (r + 1))
    elif name == "add_other_":
        t.add_(other)
    elif name == "mul_":
        t.mul_(1.5)
    elif name == "mul_other_":
        t.mul_(other)
    elif name == "copy_":
        t.copy_(other)
    elif name == "fill_":
        t.fill_(0.25 * r)
    elif name == "zero_":
        t.zero_()
    elif name == "mask_set":
        t[t > 0] = -0.5
    elif name == "mask_set_tensor":
        t[t > 0] = other.sum()
    elif name == "index_set":
        t[[0, r % max(t.shape[0], 1)] if t.dim() else 0] = 1.25
    elif name == "index_set_tensor":
        t[[0, r % max(t.shape[0], 1)] if t.dim() else 0] = other.sum() * 0.5
    elif name == "clamp_":
        t.clamp_(-0.5, 0.6)
    elif name == "relu_":
        t.relu_()
    else:
        t[0] += other.sum() if t.dim() else other.sum()


def _draw_program(seed: int):
    """The inputs, step count and final action of program ``seed``."""
    import random

    rng = random.Random(seed)
    shape_a = rng.choice([(3, 4), (2, 3), (4,), (2, 3, 2)])
    nprng = np.random.default_rng(seed)
    arrays = [nprng.uniform(-2, 2, shape_a), nprng.uniform(-2, 2, shape_a[-1:]), nprng.uniform(-2, 2, shape_a)]
    return rng, arrays, rng.randrange(2, 11), rng.choice(FINALS)


def _assert_same(ours: dict, theirs: dict, steps) -> None:
    context = f"steps={steps}"
    if theirs["error"] is not None or ours["error"] is not None:
        assert ours["error"] is not None and theirs["error"] is not None, (ours["error"], theirs["error"], context)
        assert ours["error"][0] == theirs["error"][0], (ours["error"], theirs["error"], context)
        if not theirs["error"][1].startswith("one of the variables needed"):  # (names its tensor its own way)
            assert ours["error"][1] == theirs["error"][1].replace("torch.", "numbagrad."), context
    assert ours["log"] == theirs["log"], context
    for flags, their_flags in zip(ours["flags"], theirs["flags"]):
        assert flags == their_flags, context
    for (shape, value), (their_shape, their_value) in zip(ours["values"], theirs["values"]):
        assert shape == their_shape, context
        np.testing.assert_allclose(value, their_value, rtol=1e-12, atol=1e-12, err_msg=context)
    for key in ("leaf_grads", "retained_grads"):
        for g, their_g in zip(ours[key], theirs[key]):
            assert (g is None) == (their_g is None), (key, context)
            if g is not None:
                np.testing.assert_allclose(g, their_g, rtol=1e-10, atol=1e-12, err_msg=f"{key} {context}")


@pytest.mark.parametrize("seed", range(300))
def test_random_autograd_programs_match_torch(seed):
    rng, arrays, n_steps, final = _draw_program(seed)
    theirs = _Program(torch, rng=rng)
    theirs.run(arrays, n_steps, final)
    ours = _Program(numbagrad, steps=theirs.steps)
    ours.run(arrays, len(theirs.steps), final)
    _assert_same(ours.outcome(), theirs.outcome(), theirs.steps)
