"""``numbagrad.compile``: fused kernels agree with eager mode and torch; the eager graph's behaviours hold.

The helpers (``CHAIN_OPS``, ``run_chain``, ``check_chain``, ``row_program``) are shared with
``test_compile_cuda.py``, which runs the same checks on cuda tensors under Numba's simulator.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numbagrad as ng
from numbagrad.autograd import Function
from numbagrad.compile import GraphBreakError
from numbagrad.ops.elementwise import function_for
from numbagrad.scalar_math import ROWS, example_params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# --- random chains of table ops ---------------------------------------------------------------------------
# Each op maps the running value ``v`` (and maybe input ``y``) to a new value; domains are kept safe so that
# values stay finite (``exp`` of a bounded value, ``log`` of a positive one).
CHAIN_OPS = {
    "neg": lambda L, v, y: -v,
    "tanh": lambda L, v, y: L.tanh(v),
    "sigmoid": lambda L, v, y: L.sigmoid(v),
    "sin": lambda L, v, y: L.sin(v),
    "cos": lambda L, v, y: L.cos(v),
    "relu": lambda L, v, y: L.relu(v),
    "abs": lambda L, v, y: L.abs(v),
    "exp": lambda L, v, y: L.exp(L.tanh(v)),
    "log": lambda L, v, y: L.log(v * v + 1),
    "sqrt": lambda L, v, y: L.sqrt(v * v + 0.5),
    "rsqrt": lambda L, v, y: L.rsqrt(v * v + 0.5),
    "reciprocal": lambda L, v, y: L.reciprocal(v * v + 1),
    "tan": lambda L, v, y: L.tan(L.tanh(v)),
    "add_scalar": lambda L, v, y: v + 2.5,
    "mul_scalar": lambda L, v, y: v * -1.5,
    "rsub_scalar": lambda L, v, y: 3 - v,
    "square": lambda L, v, y: v**2,
    "clamp": lambda L, v, y: v.clamp(-0.5, 0.5),
    "add": lambda L, v, y: v + y,
    "sub": lambda L, v, y: v - y,
    "mul": lambda L, v, y: v * y,
    "div": lambda L, v, y: v / (y * y + 1),
    "maximum": lambda L, v, y: L.maximum(v, y),
    "minimum": lambda L, v, y: L.minimum(v, y),
    "pow": lambda L, v, y: L.pow(v * v + 1, L.tanh(y)),
}
BINARY = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"}


def run_chain(L, chain, inputs, closing):
    """Apply ``chain`` (a list of ``(op, input index)``) starting from input 0, then the closing reduction."""
    v = inputs[0]
    for op, k in chain:
        v = CHAIN_OPS[op](L, v, inputs[k % len(inputs)])
    if closing is None:
        return v
    kind, dim, keepdim = closing
    if dim is None:
        return getattr(v, kind)()
    return getattr(v, kind)(min(dim, v.dim() - 1), keepdim=keepdim)


def check_chain(shapes, chain, closing, dtype, seed, device="cpu"):
    """Compiled (the replay, second call), eager and torch agree in value and every input gradient."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    compiled = ng.compile(lambda *xs: run_chain(ng, chain, xs, closing))
    tol = {"rtol": 1e-9, "atol": 1e-12} if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}

    def ours(fn):
        xs = [ng.tensor(a.astype(dtype), requires_grad=True, device=device) for a in arrays]
        out = fn(*xs)
        weights = rng_w.standard_normal(tuple(out.shape)).astype(dtype)
        (out * ng.tensor(weights, device=device)).sum().backward()
        return out.detach().cpu().numpy(), [x.grad.cpu().numpy() for x in xs]

    rng_w = np.random.default_rng(seed + 1)
    ours(compiled)  # the trace (eager)
    rng_w = np.random.default_rng(seed + 1)
    value, grads = ours(compiled)  # the replay
    assert compiled.plans and not compiled.graph_breaks
    assert compiled.plans[0].groups, "the chain was not fused"
    rng_w = np.random.default_rng(seed + 1)
    eager_value, eager_grads = ours(lambda *xs: run_chain(ng, chain, xs, closing))
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = run_chain(torch, chain, ts, closing)
    rng_w = np.random.default_rng(seed + 1)
    (out * torch.tensor(rng_w.standard_normal(tuple(out.shape)).astype(dtype))).sum().backward()
    assert value.dtype == np.dtype(dtype)
    np.testing.assert_allclose(value, eager_value, **tol)
    np.testing.assert_allclose(value, out.detach().numpy(), **tol)
    for g, e, t in zip(grads, eager_grads, ts):
        np.testing.assert_allclose(g, e, **tol)
        np.testing.assert_allclose(g, t.grad.numpy(), **tol)


@st.composite
def chains(draw, max_dim=4):
    """Broadcastable shapes for 1-3 inputs, a chain of 1-5 table ops using them all, and a closing reduction."""
    rank = draw(st.integers(1, 3))
    base = draw(st.lists(st.integers(1, max_dim), min_size=rank, max_size=rank))
    n = draw(st.integers(1, 3))
    shapes = [tuple(base)]
    for _ in range(n - 1):
        drop = draw(st.integers(0, rank - 1))
        shapes.append(tuple(1 if draw(st.booleans()) else s for s in base[drop:]))
    chain = draw(st.lists(st.tuples(st.sampled_from(sorted(CHAIN_OPS)), st.integers(0, 2)), min_size=1, max_size=5))
    for k in range(1, n):  # every input is used
        chain.insert(draw(st.integers(0, len(chain))), (draw(st.sampled_from(sorted(BINARY))), k))
    closing = draw(
        st.sampled_from([None, ("sum", None, False), ("mean", None, False)])
        | st.tuples(st.sampled_from(["sum", "mean"]), st.integers(0, 2), st.booleans())
    )
    return shapes, chain, closing


# Each example compiles its own kernels (about 1 s cold): the counts are sized for the suite's time budget.
@pytest.mark.torch
@settings(max_examples=10, deadline=None, derandomize=True)
@given(case=chains(), seed=st.integers(0, 2**16))
def test_random_chains_float64_match_eager_and_torch(case, seed):
    check_chain(*case, np.float64, seed)


@pytest.mark.torch
@settings(max_examples=5, deadline=None, derandomize=True)
@given(case=chains(), seed=st.integers(0, 2**16))
def test_random_chains_float32_match_eager_and_torch(case, seed):
    check_chain(*case, np.float32, seed)


# --- every table row ----------------------------------------------------------------------------------------
def _row_call(row):
    fn = function_for(row.name)
    params = example_params(row)
    return lambda *xs: fn.apply(*xs, *params)


#: Every differentiable row, called through its Function class (what the public functions call).
ROW_CALLS = {name: _row_call(row) for name, row in ROWS.items() if row.differentiable}


#: The rows in chunks of 16 for the CPU tests below: one fused kernel of every row took 90 s (float64) and 60 s
#: (float32) to compile, and LLVM's time grows faster than the kernel does.
ROW_CHUNKS = [list(ROW_CALLS)[k : k + 16] for k in range(0, len(ROW_CALLS), 16)]


def row_program(device="cpu", shape=(3, 4), dtype=np.float64, names=None):
    """The table rows ``names`` (default: every one) applied to their own inputs (drawn from the row's domain; a
    binary row's second input broadcasts), as ONE function: compiled, it is one fused group with an output per row."""
    rng = np.random.default_rng(7)
    arrays, slices, needs = [], [], []
    for name in ROW_CALLS if names is None else names:
        lo, hi = ROWS[name].domain
        start = len(arrays)
        arrays.append(rng.uniform(lo, hi, shape))
        for _ in range(ROWS[name].arity - 1):  # further inputs broadcast
            arrays.append(rng.uniform(lo, hi, shape[-1:]))
        slices.append((name, start, len(arrays)))
        needs.extend(k not in ROWS[name].no_formula for k in range(ROWS[name].arity))  # (zeta's x: no gradient)

    def program(*xs):
        return tuple(ROW_CALLS[name](*xs[a:b]) for name, a, b in slices)

    def run(fn):
        xs = [ng.tensor(a.astype(dtype), requires_grad=n, device=device) for a, n in zip(arrays, needs)]
        outs = fn(*xs)
        loss = None
        for k, o in enumerate(outs):
            term = (o * (k + 1.0)).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        return [o.detach().cpu().numpy() for o in outs], [x.grad.cpu().numpy() for x in xs if x.requires_grad]

    return program, run


def test_every_differentiable_row_has_a_compiled_test():
    assert set(ROW_CALLS) == {n for n, r in ROWS.items() if r.differentiable}, "a table row has no compiled test"
    assert sum(ROW_CHUNKS, []) == list(ROW_CALLS)


@pytest.mark.parametrize("chunk", range(len(ROW_CHUNKS)))
def test_every_table_row_compiled_matches_eager(chunk):
    names = ROW_CHUNKS[chunk]
    program, run = row_program(names=names)
    compiled = ng.compile(program)
    run(compiled)
    values, grads = run(compiled)
    eager_values, eager_grads = run(program)
    (plan,) = compiled.plans
    assert len(plan.groups) == 1 and len(plan.groups[0].nodes) >= len(names)
    for name, v, e in zip(names, values, eager_values):
        np.testing.assert_allclose(v, e, rtol=1e-12, atol=1e-14, err_msg=name)
    for g, e in zip(grads, eager_grads):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("chunk", range(len(ROW_CHUNKS)))
def test_every_table_row_compiled_in_float32_matches_eager(chunk):
    """Compiled float32 rows compute in float32 (their float32 twins); eager rows round a float64 result once."""
    names = ROW_CHUNKS[chunk]
    program, run = row_program(dtype=np.float32, names=names)
    compiled = ng.compile(program)
    run(compiled)
    values, grads = run(compiled)
    eager_values, eager_grads = run(program)
    for name, v, e in zip(names, values, eager_values):
        assert v.dtype == np.float32
        np.testing.assert_allclose(v, e, rtol=1e-5, atol=1e-6, err_msg=name)
    for k, (g, e) in enumerate(zip(grads, eager_grads)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"input {k}")


# --- API --------------------------------------------------------------------------------------------------
def test_import_numbagrad_and_compile_do_not_import_numba():
    code = "import sys, numbagrad; numbagrad.compile(lambda x: x); assert 'numba' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))


def test_compile_works_as_a_decorator_with_and_without_arguments():
    @ng.compile
    def f(x):
        return x * 2 + 1

    @ng.compile(fullgraph=True)
    def g(x):
        return x * 2 + 1

    x = ng.tensor([1.0, 2.0])
    for fn in (f, g):
        np.testing.assert_array_equal(fn(x).numpy(), [3.0, 5.0])
        np.testing.assert_array_equal(fn(x).numpy(), [3.0, 5.0])


def test_replay_runs_one_fused_node_and_accumulates_grad_like_eager():
    f = ng.compile(lambda x, w, b: ng.relu(x * w + b).sum())
    x, w, b = (ng.tensor(a, requires_grad=True) for a in ([1.0, -2.0, 3.0], [0.5, 0.5, -1.0], [0.1, 0.1, 0.1]))
    f(x, w, b).backward()  # traced: eager nodes
    y = f(x, w, b)
    assert type(y.grad_fn).__name__ == "CompiledFunctionBackward"
    assert [type(n).__name__ for n, _ in y.grad_fn.next_functions] == ["AccumulateGrad"] * 3
    y.backward()
    # relu(x*w+b) = [0.6, 0, 0]: gradients where the unit is active, accumulated over both calls
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 0.0, 0.0])
    np.testing.assert_allclose(b.grad.numpy(), [2.0, 0.0, 0.0])
    np.testing.assert_allclose(y.item(), 0.6)


def test_new_shape_dtype_or_requires_grad_traces_again():
    f = ng.compile(lambda x: (x * x).sum())
    f(ng.ones(3))
    f(ng.ones(3))
    assert len(f.plans) == 1
    f(ng.ones(4))
    f(ng.ones(4, dtype=ng.float64))
    f(ng.ones(4, requires_grad=True))
    with ng.no_grad():
        f(ng.ones(4, requires_grad=True))
    assert len(f.plans) == 5


def test_dynamic_reuses_the_plan_for_a_new_size_of_the_same_rank():
    f = ng.compile(lambda x, w: ng.tanh(x * w).sum(1), dynamic=True)
    w = ng.tensor([1.0, -1.0, 0.5])
    for n in (2, 5, 9):
        x = ng.tensor(np.arange(n * 3.0).reshape(n, 3) / 10)
        np.testing.assert_allclose(f(x, w).numpy(), np.tanh(x.numpy() * w.numpy()).sum(1), rtol=1e-12)
    assert len(f.plans) == 1


def test_dynamic_specializes_when_python_reads_a_shape():
    f = ng.compile(lambda x: x.reshape(x.shape[0], -1) * 2, dynamic=True)
    for n in (2, 3):
        x = ng.ones(n, 2, 2)
        assert tuple(f(x).shape) == (n, 4)
        assert tuple(f(x).shape) == (n, 4)
    assert len(f.plans) == 2


# --- fusion groups --------------------------------------------------------------------------------------------
def _groups(f) -> list[str]:
    return [repr(g) for p in f.plans for g in p.groups]


def test_rows_between_matmuls_fuse_and_the_matmul_runs_eagerly():
    f = ng.compile(lambda x, w1, w2: (ng.tanh(x @ w1) * 2 + 1) @ w2)
    x, w1, w2 = ng.randn(4, 3), ng.randn(3, 5, requires_grad=True), ng.randn(5, 2, requires_grad=True)
    f(x, w1, w2)
    out = f(x, w1, w2)
    assert _groups(f) == ["<fused group g0: tanh -> mul -> add>"]
    expected = (np.tanh(x.numpy() @ w1.detach().numpy()) * 2 + 1) @ w2.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("kind", "dim"), [("sum", None), ("mean", None), ("amax", None), ("sum", 0), ("mean", 1), ("amax", 1)]
)
def test_closing_reduction_over_all_or_some_dims_is_in_the_group(kind, dim):
    torch = pytest.importorskip("torch")
    a, b = np.random.default_rng(3).standard_normal((2, 3, 4)), np.random.default_rng(4).standard_normal((3, 1))

    def fn(L, x, y):
        v = L.exp(L.tanh(x)) * y
        return getattr(v, kind)() if dim is None else getattr(v, kind)(dim)

    f = ng.compile(lambda x, y: fn(ng, x, y))
    for _ in range(2):
        x, y = ng.tensor(a, requires_grad=True), ng.tensor(b, requires_grad=True)
        out = f(x, y)
        out.sum().backward()
    assert _groups(f)[0].endswith(f"-> {kind}>")
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    tout = fn(torch, tx, ty)
    tout.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)


def test_amax_shares_the_gradient_among_ties_as_eager():
    f = ng.compile(lambda x: (x * 1.0).amax())
    for _ in range(2):
        x = ng.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
        f(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.5, 0.5, 0.0])


def test_amax_propagates_nan_as_eager():
    f = ng.compile(lambda x: (x * 2).amax())
    for _ in range(2):
        x = ng.tensor([1.0, np.nan, 2.0], requires_grad=True)
        y = f(x)
        y.backward()
    eager_x = ng.tensor([1.0, np.nan, 2.0], requires_grad=True)
    (eager_x * 2).amax().backward()
    assert np.isnan(y.item())
    np.testing.assert_array_equal(x.grad.numpy(), eager_x.grad.numpy())  # nan everywhere: g * mask / 0


def test_returned_intermediate_read_again_starts_a_new_group():
    f = ng.compile(lambda x: (lambda h: (h, (h * h).sum()))(ng.tanh(x) + 1))
    for _ in range(2):
        x = ng.tensor([0.5, -1.0], requires_grad=True)
        h, s = f(x)
        (h.sum() + s).backward()
    # h leaves the group, so the rows reading it start the next one: h's gradient (its hooks, retain_grad) is
    # then the full one, summed by the engine as in eager mode
    assert _groups(f) == ["<fused group g0: tanh -> add>", "<fused group g1: mul -> sum>"]
    t = np.tanh([0.5, -1.0])
    np.testing.assert_allclose(h.detach().numpy(), t + 1)
    np.testing.assert_allclose(x.grad.numpy(), (1 + 2 * (t + 1)) * (1 - t * t))


def test_a_small_value_needed_outside_gets_its_own_group():
    f = ng.compile(lambda x, c: (lambda s: ((x * s).sum(), s))(c * 2.0))
    x, c = ng.ones(3, 2), ng.tensor([1.0, 2.0])
    f(x, c)
    total, s = f(x, c)
    assert _groups(f) == ["<fused group g0: mul>", "<fused group g1: mul -> sum>"]
    assert total.item() == 18.0 and s.numpy().tolist() == [2.0, 4.0]


def test_mixed_dtypes_promote_as_eager():
    f = ng.compile(lambda x, y, i: (x * y + i).sum())
    x, y = ng.tensor([1.5, 2.5], dtype=ng.float32), ng.tensor([2.0, 4.0], dtype=ng.float64, requires_grad=True)
    i = ng.tensor([1, 2])
    f(x, y, i)
    out = f(x, y, i)
    assert out.dtype == ng.float64 and out.item() == 16.0
    out.backward()
    np.testing.assert_allclose(y.grad.numpy(), [1.5, 2.5])


def test_group_gradients_have_each_inputs_shape_and_dtype():
    # the group's node is trusted (the engine does not check its gradients): its backward must return each input's
    # gradient in the input's own shape and dtype, mixed dtypes and broadcast inputs included
    def fn(x, w, b):
        return (ng.relu(x * w + b) * x).sum()

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3), rng.standard_normal((4, 1))]
    arrays[2] = arrays[2].astype(np.float32)
    grads = {}
    for name, g in (("eager", fn), ("compiled", ng.compile(fn))):
        for _ in range(3):
            ts = [ng.tensor(a, requires_grad=True) for a in arrays]
            g(*ts).backward()
        grads[name] = [t.grad for t in ts]
    for ge, gc, a in zip(grads["eager"], grads["compiled"], arrays):
        assert gc.shape == a.shape and gc.dtype == ge.dtype and gc.numpy().dtype == a.dtype
        np.testing.assert_allclose(gc.numpy(), ge.numpy(), rtol=1e-5)


def test_no_grad_block_inside_the_function_is_replayed():
    def fn(x):
        with ng.no_grad():
            scale = x * 2
        return x * scale

    f = ng.compile(fn)
    f(ng.tensor([3.0], requires_grad=True))
    x = ng.tensor([3.0], requires_grad=True)
    y = f(x)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0])  # scale is a constant: d(x * 2x_const)/dx = 6


def test_kernel_sources_are_files_in_the_cache_directory(tmp_path):
    code = (
        "import numbagrad as ng, os\n"
        "f = ng.compile(lambda x: (ng.tanh(x) * 3).sum())\n"
        "x = ng.ones(4, requires_grad=True)\n"
        "f(x); f(x).backward()\n"
        "names = os.listdir(os.environ['NUMBAGRAD_CACHE_DIR'])\n"
        "assert any('fused_fwd' in n and n.endswith('.py') for n in names), names\n"
        "assert any('fused_bwd' in n and n.endswith('.py') for n in names), names\n"
    )
    env = dict(os.environ, NUMBAGRAD_CACHE_DIR=str(tmp_path), PYTHONPATH=os.path.join(ROOT, "src"))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert any(n.endswith(".nbi") for n in os.listdir(tmp_path / "__pycache__")), "no Numba disk cache written"


# --- graph breaks -----------------------------------------------------------------------------------------------
def branchy(x):
    if x.sum() > 0:  # data-dependent control flow
        return x * 2
    return x * 3


def test_data_dependent_control_flow_breaks_the_graph_and_stays_correct():
    f = ng.compile(branchy)
    for v in (1.0, -1.0, 1.0, -1.0):
        x = ng.tensor([v, v], requires_grad=True)
        y = f(x)
        y.sum().backward()
        np.testing.assert_array_equal(y.detach().numpy(), [2 * v if v > 0 else 3 * v] * 2)
        np.testing.assert_array_equal(x.grad.numpy(), [2.0 if v > 0 else 3.0] * 2)
    ((reason, where),) = f.graph_breaks
    assert "test_compile.py" in where and "if x.sum() > 0" in where


def test_fullgraph_raises_naming_the_line():
    f = ng.compile(branchy, fullgraph=True)
    with pytest.raises(GraphBreakError, match=r"test_compile\.py:\d+: if x\.sum\(\) > 0"):
        f(ng.tensor([1.0]))


@pytest.mark.parametrize(
    "use",
    [
        lambda x: x * float(x.sum().item()),
        lambda x: x * x.numpy().max(),
        lambda x: (print(x), x * 2)[1],
        lambda x: x * ng.tensor([2.0]),  # a tensor made inside by an untraced creation function
        lambda x: x * x.detach().clone().fill_(1),  # an in-place update that is not a table row
    ],
    ids=["item", "numpy", "print", "creation", "inplace"],
)
def test_untraceable_uses_run_eagerly_with_correct_results(use, capsys):
    f = ng.compile(use)
    for v in (1.0, 2.0):
        x = ng.tensor([v, 2 * v])
        np.testing.assert_allclose(f(x).numpy(), use(x).numpy())
    assert len(f.graph_breaks) == 1


def test_untraceable_custom_function_runs_eagerly():
    class Host(Function):
        @staticmethod
        def forward(ctx, x):
            return ng.tensor(np.sort(x.numpy()))  # host code

        @staticmethod
        def backward(ctx, g):
            return g

    f = ng.compile(lambda x: Host.apply(x * 2) + 1)
    for _ in range(2):
        np.testing.assert_array_equal(f(ng.tensor([3.0, 1.0])).numpy(), [3.0, 7.0])


def test_a_graph_break_inside_a_custom_forward_is_not_a_break_of_the_caller():
    class Sort(Function):
        @staticmethod
        def forward(ctx, x):
            return ng.tensor(np.sort(x.numpy()))

        @staticmethod
        def backward(ctx, g):
            return g

    f = ng.compile(lambda x: Sort.apply(x * 2) + 1)
    f(ng.tensor([3.0, 1.0]))
    np.testing.assert_array_equal(f(ng.tensor([5.0, 4.0])).numpy(), [9.0, 11.0])
    assert not f.graph_breaks  # the Function is one recorded op; its body is its own business


def test_creation_functions_in_compiled_code_are_replayed_not_a_graph_break():
    def fn(x):
        positions = ng.arange(x.shape[0], dtype=x.dtype)
        return (x * positions + ng.ones_like(x) + ng.full((x.shape[0],), 0.5) + ng.zeros(x.shape[0])).sum()

    f = ng.compile(fn)
    for values in ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.0, -1.0, 2.0]):
        x = ng.tensor(values, requires_grad=True)
        out = f(x)
        out.backward()
        assert out.item() == fn(ng.tensor(values)).item()
        np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 2.0])
    assert not f.graph_breaks and len(f.plans) == 1


def test_random_draws_in_compiled_code_follow_the_generator_as_eagerly():
    def fn(x):
        return x + ng.randn(4) * ng.rand(4)

    f = ng.compile(fn)
    x = ng.zeros(4)
    ng.manual_seed(5)
    compiled = [f(x).numpy() for _ in range(3)]
    ng.manual_seed(5)
    eager = [fn(x).numpy() for _ in range(3)]
    np.testing.assert_array_equal(compiled, eager)
    assert not np.array_equal(compiled[1], compiled[2])  # a fresh draw at every replay
    assert not f.graph_breaks


def test_seeding_in_compiled_code_reseeds_every_call():
    def fn(x):
        ng.manual_seed(0)
        return x + ng.randn(3)

    f = ng.compile(fn)
    x = ng.zeros(3)
    first, second = f(x).numpy(), f(x).numpy()
    np.testing.assert_array_equal(first, second)  # a replay would have drawn on from the old stream
    np.testing.assert_array_equal(first, fn(x).numpy())
    assert [reason for reason, _ in f.graph_breaks] == ["seeds the random number generator"]


def test_seeding_a_generator_in_compiled_code_reseeds_every_call():
    generator = ng.Generator()

    def fn(x):
        generator.manual_seed(1)
        return x + ng.randn(3, generator=generator)

    f = ng.compile(fn)
    x = ng.zeros(3)
    np.testing.assert_array_equal(f(x).numpy(), f(x).numpy())
    np.testing.assert_array_equal(f(x).numpy(), fn(x).numpy())
    assert [reason for reason, _ in f.graph_breaks] == ["seeds a random number generator"]


# --- nn.Module ------------------------------------------------------------------------------------------------
def test_compiled_module_sees_a_new_batch_size_and_keeps_the_modules_state():
    nn = ng.nn
    ng.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    cm = ng.compile(model)
    for batch in (5, 5, 9, 9):
        x = ng.randn(batch, 4)
        out = cm(x)
        np.testing.assert_allclose(out.detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [id(p) for p in cm.parameters()] == [id(p) for p in model.parameters()]
    assert cm.eval() is cm and model.training is False
    assert cm.train() is cm and model.training is True
    out.sum().backward()
    assert model[0].weight.grad is not None


def test_compiled_module_is_a_module_laid_out_as_torchs():
    nn = ng.nn
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    cm = ng.compile(model)
    assert isinstance(cm, nn.Module) and type(cm).__name__ == "OptimizedModule"
    assert cm._orig_mod is model
    assert repr(cm) == (
        "OptimizedModule(\n  (_orig_mod): Sequential(\n    (0): Linear(in_features=3, out_features=2, bias=True)\n"
        "    (1): ReLU()\n  )\n)"
    )
    assert [name for name, _ in cm.named_parameters()] == ["_orig_mod.0.weight", "_orig_mod.0.bias"]
    state = cm.state_dict()
    assert list(state) == ["_orig_mod.0.weight", "_orig_mod.0.bias"]
    assert np.shares_memory(state["_orig_mod.0.weight"].numpy(), model[0].weight.detach().numpy())
    assert list(cm._orig_mod.state_dict()) == ["0.weight", "0.bias"]
    assert len(cm) == 2


def test_compiled_module_loads_a_compiled_modules_state_dict():
    nn = ng.nn
    ng.manual_seed(0)
    source, target = ng.compile(nn.Linear(3, 2)), ng.compile(nn.Linear(3, 2))
    target.load_state_dict(source.state_dict())
    x = ng.randn(4, 3)
    np.testing.assert_array_equal(target(x).detach().numpy(), source(x).detach().numpy())


def test_compiled_module_reads_and_writes_attributes_through_to_the_original():
    layer = ng.nn.Linear(2, 2)
    cm = ng.compile(layer)
    cm.scale = 3
    assert layer.scale == 3 and "scale" not in cm.__dict__
    assert cm.in_features == 2
    cm.eval()
    assert layer.training is False and cm.training is False
    layer.train()
    assert cm.training is True


def test_a_copied_or_pickled_compiled_module_compiles_its_own_copy():
    nn = ng.nn
    ng.manual_seed(0)
    cm = ng.compile(nn.Sequential(nn.Linear(3, 4), nn.Tanh()))
    x = ng.randn(5, 3)
    expected = cm(x).detach().numpy()
    for other in (copy.deepcopy(cm), pickle.loads(pickle.dumps(cm))):
        assert type(other).__name__ == "OptimizedModule" and other._orig_mod is not cm._orig_mod
        np.testing.assert_array_equal(other(x).detach().numpy(), expected)
        with ng.no_grad():
            other._orig_mod[0].bias.add_(1.0)
        assert not np.array_equal(other(x).detach().numpy(), expected)  # its own parameters
    np.testing.assert_array_equal(cm(x).detach().numpy(), expected)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (torch.compile's first use imports torch.jit)
def test_compiled_module_prints_and_names_its_state_as_torch():
    torch = pytest.importorskip("torch")
    ng_model = ng.compile(ng.nn.Sequential(ng.nn.Linear(3, 2), ng.nn.ReLU()))
    torch_model = torch.compile(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
    assert repr(ng_model) == repr(torch_model)
    assert list(ng_model.state_dict()) == list(torch_model.state_dict())


def test_compiled_module_follows_parameter_updates():
    nn = ng.nn
    layer = nn.Linear(2, 1)
    cm = ng.compile(layer)
    x = ng.ones(1, 2)
    cm(x)
    with ng.no_grad():
        layer.weight.mul_(0)
        layer.bias.fill_(0.5)
    np.testing.assert_allclose(cm(x).detach().numpy(), [[0.5]])


def test_a_buffer_updated_in_place_by_module_code_is_updated_on_every_call():
    class Counter(ng.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", ng.zeros(()))

        def forward(self, x):
            self.calls.add_(1)
            return x * 2

    counter = Counter()
    cm = ng.compile(counter)
    for _ in range(3):
        np.testing.assert_array_equal(cm(ng.ones(2)).numpy(), [2.0, 2.0])
    assert counter.calls.item() == 3.0  # a replay would have skipped the add_: the key runs eagerly
    assert [reason.split(" (")[0] for reason, _ in cm.graph_breaks] == [
        "updates a parameter, buffer or captured tensor in place outside a traced op"
    ]


@pytest.mark.parametrize("momentum", [0.1, None])  # None: the cumulative average, 1 / num_batches_tracked
def test_a_compiled_batch_norm_tracks_its_statistics_as_eager(momentum):
    ng.manual_seed(0)
    x = ng.randn(8, 4)
    eager, compiled = ng.nn.BatchNorm1d(4, momentum=momentum), ng.nn.BatchNorm1d(4, momentum=momentum)
    cm = ng.compile(compiled)
    for i in range(3):
        np.testing.assert_allclose(cm(x * (i + 1)).detach().numpy(), eager(x * (i + 1)).detach().numpy(), rtol=1e-6)
    assert compiled.num_batches_tracked.item() == eager.num_batches_tracked.item() == 3
    np.testing.assert_allclose(compiled.running_mean.numpy(), eager.running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(compiled.running_var.numpy(), eager.running_var.numpy(), rtol=1e-6)
    assert not cm.graph_breaks and cm._compiled.plans  # its buffer updates all happen inside the recorded op


def test_statistics_an_op_updates_in_place_are_updated_by_every_replay():
    F = ng.nn.functional
    ng.manual_seed(0)
    x = ng.randn(8, 3)
    mean, var = ng.zeros(3), ng.ones(3)
    f = ng.compile(lambda x: F.batch_norm(x, mean, var, training=True, momentum=0.5))
    eager_mean, eager_var = ng.zeros(3), ng.ones(3)
    for _ in range(3):
        f(x)
        F.batch_norm(x, eager_mean, eager_var, training=True, momentum=0.5)
    assert not f.graph_breaks and f.plans  # the writes belong to the recorded op, which each replay runs
    np.testing.assert_allclose(mean.numpy(), eager_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), eager_var.numpy(), rtol=1e-6)


def test_an_in_place_update_of_a_captured_tensor_under_fullgraph_is_an_error():
    total = ng.zeros(2)

    def accumulate(x):
        total.add_(x)
        return x * 2

    f = ng.compile(accumulate, fullgraph=True)
    with pytest.raises(GraphBreakError, match="in place outside a traced op"):
        f(ng.ones(2))


def test_forward_hooks_of_a_submodule_run_on_every_call():
    nn = ng.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    seen = []
    model[1].register_forward_hook(lambda module, args, out: seen.append(out.detach()))
    cm = ng.compile(model)
    for i in range(3):
        cm(ng.ones(2, 3) * i)
    assert len(seen) == 3  # a replay would have skipped the hook: that call runs eagerly
    np.testing.assert_array_equal(seen[2].numpy(), model[1](model[0](ng.ones(2, 3) * 2)).detach().numpy())
    assert [reason for reason, _ in cm.graph_breaks] == ["calls a ReLU that has forward hooks"]


def test_a_module_that_keeps_a_computed_tensor_keeps_the_latest_one():
    class Remember(ng.nn.Module):
        def __init__(self):
            super().__init__()
            self.last = None
            self.history = []

        def forward(self, x):
            y = x * 2
            self.last = y.detach()
            self.history.append(y.sum().detach())
            return y + 1

    module = Remember()
    cm = ng.compile(module)
    for i in range(3):
        cm(ng.ones(2) * i)
    np.testing.assert_array_equal(module.last.numpy(), [4.0, 4.0])  # a replay would have left the first call's
    assert [t.item() for t in module.history] == [0.0, 4.0, 8.0]
    assert [reason for reason, _ in cm.graph_breaks] == [
        "sets the attribute 'last' of a Remember, which a replay would not do"
    ]


def test_compiled_module_keeps_forward_hooks():
    nn = ng.nn
    layer = nn.Linear(2, 2)
    seen = []
    layer.register_forward_hook(lambda m, args, out: seen.append(tuple(out.shape)))
    cm = ng.compile(layer)
    cm(ng.ones(3, 2))
    cm(ng.ones(3, 2))
    assert seen == [(3, 2), (3, 2)]


# --- numbagrad.compiler ----------------------------------------------------------------------------------------
def test_a_disabled_helper_breaks_the_graph_and_runs_eagerly():
    @ng.compiler.disable
    def helper(x):
        return x * 3

    f = ng.compile(lambda x: helper(x + 1).sum())
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(2):
        x.grad = None
        out = f(x)
        out.backward()
        assert out.item() == 15.0
        np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    assert [reason for reason, _ in f.graph_breaks] == [
        "calls " + helper.__qualname__ + ", marked numbagrad.compiler.disable"
    ]


def test_a_disabled_helper_under_fullgraph_is_an_error_naming_the_reason():
    helper = ng.compiler.disable(lambda x: x * 3, reason="host code")
    f = ng.compile(lambda x: helper(x) + 1, fullgraph=True)
    with pytest.raises(GraphBreakError, match=r"marked numbagrad.compiler.disable \(host code\)"):
        f(ng.ones(2))


def test_a_disabled_function_called_eagerly_is_the_function():
    @ng.compiler.disable(reason="why not")
    def double(x):
        """Twice x."""
        return x * 2

    np.testing.assert_array_equal(double(ng.tensor([1.0, 4.0])).numpy(), [2.0, 8.0])
    assert double.__name__ == "double" and double.__doc__ == "Twice x."


def test_is_compiling_is_true_only_while_tracing_so_replays_keep_the_compiled_branch():
    assert ng.compiler.is_compiling() is False

    def fn(x):
        return x * 2 if ng.compiler.is_compiling() else x * 3

    f = ng.compile(fn)
    for _ in range(2):  # the trace, then the replay of what it recorded
        np.testing.assert_array_equal(f(ng.tensor([1.0, 2.0])).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(fn(ng.tensor([1.0, 2.0])).numpy(), [3.0, 6.0])
    assert ng.compiler.is_dynamo_compiling is ng.compiler.is_compiling


def test_reset_makes_every_compiled_callable_trace_again():
    f = ng.compile(lambda x: (x * 2).sum())
    cm = ng.compile(ng.nn.Linear(2, 1))
    swish = _swish_class()
    x = ng.tensor([1.0, -2.0], requires_grad=True)
    f(x), cm(x), swish.apply(x).sum().backward()
    assert f.plans and cm._compiled.plans and swish.forward.plans and swish.backward.plans
    ng.compiler.reset()
    assert not f.plans and not cm._compiled.plans and not swish.forward.plans and not swish.backward.plans
    assert f(x).item() == -2.0 and f.plans  # traced again, same result
    x.grad = None
    swish.apply(x).sum().backward()
    s = 1 / (1 + np.exp(-np.array([1.0, -2.0])))
    np.testing.assert_allclose(x.grad.numpy(), s + np.array([1.0, -2.0]) * s * (1 - s), rtol=1e-6)


def test_compiler_helpers_that_have_nothing_to_do():
    def fn(x):
        return x

    assert ng.compiler.allow_in_graph(fn) is fn
    assert ng.compiler.cudagraph_mark_step_begin() is None
    assert ng.compiler.compile is ng.compile.compile


def test_compiler_names_are_torchs():
    torch = pytest.importorskip("torch")
    missing = [name for name in ng.compiler.__all__ if not hasattr(torch.compiler, name)]
    assert not missing


# --- custom Function -------------------------------------------------------------------------------------------
def _swish_class():
    """A fresh compiled Swish (its plans start empty)."""

    @ng.compile
    class Swish(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * ng.sigmoid(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            s = ng.sigmoid(x)
            return g * (s + x * s * (1 - s))

    return Swish


Swish = _swish_class()


def test_compiled_custom_function_fuses_its_forward_and_its_backward():
    for _ in range(3):
        x = ng.tensor(np.linspace(-2, 2, 5), requires_grad=True)
        y = Swish.apply(x)
        y.sum().backward()
    s = 1 / (1 + np.exp(-np.linspace(-2, 2, 5)))
    np.testing.assert_allclose(y.detach().numpy(), np.linspace(-2, 2, 5) * s, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), s + np.linspace(-2, 2, 5) * s * (1 - s), rtol=1e-12)
    assert type(y.grad_fn).__name__ == "SwishBackward"
    assert [repr(g) for p in Swish.forward.plans for g in p.groups] == ["<fused group g0: sigmoid -> mul>"]
    assert len(Swish.backward.plans[0].groups) == 1


def test_compiled_custom_function_hands_its_backward_what_the_forward_computed():
    """The backward computes sigmoid(x) again: the forward's kernel writes it out, and the backward reads it."""
    swish = _swish_class()
    v = np.linspace(-3, 3, 7)
    for _ in range(3):
        x = ng.tensor(v, requires_grad=True)
        y = swish.apply(x)
        y.sum().backward()
    (shared,) = swish.forward._shared.values()
    (plan,) = shared.plans.values()
    assert [n.row.name for g in plan.groups for n in g.nodes] == ["mul", "rsub", "mul", "add", "mul"]
    s = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(y.detach().numpy(), v * s, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), s + v * s * (1 - s), rtol=1e-12)


@ng.compile
class Gate(Function):
    """Two inputs; the backward computes ``sigmoid(x * w)`` again (shared), and ``x * w`` from the saved tensors."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * ng.sigmoid(x * w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        s = ng.sigmoid(x * w)
        ds = s * (1 - s)
        return g * (s + x * ds * w), g * x * ds * x


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_shared_values_with_two_inputs_broadcasting_and_either_gradient(needs, dtype, rtol):
    rng = np.random.default_rng(1)
    for _ in range(3):  # trace, trace the backward and share, then replay with the shared value
        xv, wv = rng.standard_normal((4, 3)).astype(dtype), rng.standard_normal(3).astype(dtype)
        x, w = ng.tensor(xv, requires_grad=needs[0]), ng.tensor(wv, requires_grad=needs[1])
        y = Gate.apply(x, w)
        y.sum().backward()
    x64, w64 = xv.astype(np.float64), wv.astype(np.float64)
    s = 1 / (1 + np.exp(-x64 * w64))
    ds = s * (1 - s)
    np.testing.assert_allclose(y.detach().numpy(), x64 * s, rtol=rtol)
    if needs[0]:
        np.testing.assert_allclose(x.grad.numpy(), s + x64 * ds * w64, rtol=rtol, atol=rtol)
    if needs[1]:
        np.testing.assert_allclose(w.grad.numpy(), (x64 * ds * x64).sum(0), rtol=rtol, atol=rtol)
    assert Gate.forward._shared


def test_a_shared_value_does_not_hide_an_in_place_change_of_a_saved_tensor():
    swish = _swish_class()
    for _ in range(2):
        x = ng.tensor([0.5, -1.0], requires_grad=True)
        swish.apply(x).sum().backward()
    a = ng.tensor([0.5, -1.0], requires_grad=True) * 1.0
    y = swish.apply(a)
    a.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_double_backward_through_a_compiled_function_with_shared_values():
    swish = _swish_class()
    v = np.array([-1.5, 0.25, 2.0])
    for _ in range(2):  # plain backwards: the forward now hands sigmoid(x) to the backward
        swish.apply(ng.tensor(v, requires_grad=True)).sum().backward()
    assert swish.forward._shared
    for _ in range(2):
        x = ng.tensor(v, requires_grad=True)
        (g,) = ng.autograd.grad(swish.apply(x).sum(), x, create_graph=True)
        g.sum().backward()
    s = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(g.detach().numpy(), s + v * s * (1 - s), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * s * (1 - s) + v * s * (1 - s) * (1 - 2 * s), rtol=1e-12)


@ng.compile
class StraightThrough(Function):
    """Forward rounds to a step; backward passes the gradient through where |x| <= 1 (a clipped STE)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ng.relu(x) / (ng.abs(x) + 1e-30) * 2 - 1  # 1 where x > 0, -1 elsewhere: zero gradient a.e.

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.clamp(-1, 1) - x + 1)  # 1 inside [-1, 1], 1 - (|x| - 1) outside: the user's formula


def test_compiled_function_keeps_the_users_backward_straight_through():
    for _ in range(2):
        x = ng.tensor([-2.0, -0.5, 0.5, 3.0], requires_grad=True)
        y = StraightThrough.apply(x)
        y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), [-1.0, -1.0, 1.0, 1.0])
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 1.0, 1.0, -1.0])


def test_compiled_function_with_a_ctx_attribute_guards_on_its_value():
    @ng.compile
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    for k in (2.0, 3.0, 2.0, 3.0):
        x = ng.ones(2, requires_grad=True)
        Scale.apply(x, k).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [k, k])


class ClippedIdentity(Function):
    """Not compiled itself: identity forward, a backward that clips the gradient (not the forward's autograd)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.clamp(-0.5, 0.5) * (x * 0 + 1)


def test_a_custom_function_called_in_compiled_code_runs_compiled_with_the_users_backward():
    f = ng.compile(lambda x: (ClippedIdentity.apply(x * 3.0) * 2.0).sum())
    v = np.array([-1.0, 0.1, 2.0])
    for _ in range(3):  # trace; the Function's twin traces its forward and backward; replay
        x = ng.tensor(v, requires_grad=True)
        f(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.5, 1.5, 1.5])  # 3 * clamp(2, -0.5, 0.5)
    twin = ClippedIdentity.__dict__["_compiled_twin"]
    assert twin._compiled_from is ClippedIdentity and twin.__name__ == "ClippedIdentity"
    assert twin in f.plans[0].replay.__globals__.values()  # the plan replays the twin, not the class
    assert [repr(g) for p in twin.forward.plans for g in p.groups] == ["<fused group g0: mul>"]
    assert twin.backward.plans  # the user's backward, traced and replayed
    eager = ng.tensor(v, requires_grad=True)
    (ClippedIdentity.apply(eager * 3.0) * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), eager.grad.numpy())
    assert "_compiled_twin" not in Swish.__dict__  # an already compiled class replays as itself


def test_a_custom_function_in_a_compiled_module_keeps_its_node_name():
    class Net(ng.nn.Module):
        def forward(self, x):
            return ClippedIdentity.apply(x).tanh()

    net = ng.compile(Net())
    for _ in range(2):
        y = net(ng.tensor([0.3, -0.2], requires_grad=True))
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "ClippedIdentityBackward"


def test_compiled_new_style_function():
    @ng.compile
    class Cube(Function):
        @staticmethod
        def forward(x):
            return x * x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    for _ in range(2):
        x = ng.tensor([2.0], requires_grad=True)
        Cube.apply(x).backward()
    assert x.grad.item() == 12.0


# --- the eager graph's behaviours through a group ---------------------------------------------------------------
def test_hooks_and_retain_grad_on_group_outputs():
    f = ng.compile(lambda x: (lambda h: (h, (h * 3).sum()))(ng.tanh(x) * 2))
    f(ng.ones(2, requires_grad=True))
    x = ng.tensor([0.0, 1.0], requires_grad=True)
    h, s = f(x)
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    h.retain_grad()
    s.backward()
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
    np.testing.assert_allclose(h.grad.numpy(), [3.0, 3.0])
    np.testing.assert_allclose(x.grad.numpy(), 6 * (1 - np.tanh([0.0, 1.0]) ** 2))


def test_hook_registered_inside_the_compiled_function_is_replayed():
    seen = []

    def fn(x):
        h = ng.tanh(x) * 2
        h.register_hook(lambda g: seen.append(float(g.sum().item())))
        return (h * h).sum()

    f = ng.compile(fn)
    for _ in range(2):
        f(ng.ones(3, requires_grad=True)).backward()
    assert len(seen) == 2 and seen[0] == pytest.approx(seen[1])


def test_inplace_change_of_a_saved_input_is_caught_by_the_version_counter():
    f = ng.compile(lambda x, w: (x * w).sum())
    w = ng.ones(2, requires_grad=True)
    f(ng.ones(2), w)
    x = ng.ones(2)
    y = f(x, w)
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_a_group_reads_its_own_output_for_a_gradient_that_needs_it():
    """``tanh(x @ w + b)``'s group hands its tanh output to the backward instead of recomputing tanh (both read
    one full array); so an in-place change of that output is caught, as torch's TanhBackward catches it."""
    f = ng.compile(lambda x, w, b: ng.tanh(x @ w + b))
    xv, wv, bv = np.linspace(-1, 1, 12).reshape(4, 3), np.linspace(-0.5, 0.5, 6).reshape(3, 2), np.array([0.1, -0.2])
    for _ in range(2):
        w, b = ng.tensor(wv, requires_grad=True), ng.tensor(bv, requires_grad=True)
        f(ng.tensor(xv), w, b).sum().backward()
    y = np.tanh(xv @ wv + bv)
    np.testing.assert_allclose(b.grad.numpy(), (1 - y * y).sum(0), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), xv.T @ (1 - y * y), rtol=1e-12)
    out = f(ng.tensor(xv), w, b)
    out.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_anomaly_mode_reports_the_group_that_failed():
    f = ng.compile(lambda x: ng.sqrt(x * 1.0).sum())
    f(ng.ones(2, requires_grad=True))
    x = ng.tensor([0.0, 1.0], requires_grad=True)
    with ng.autograd.detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = f(x)
        with pytest.raises(RuntimeError, match="CompiledFunctionBackward"):
            (y * 0).backward()  # 0 * inf = nan in the sqrt gradient at 0


def test_create_graph_through_a_group_gives_the_second_derivative():
    f = ng.compile(lambda x: (x * x * x).sum())
    f(ng.ones(2, requires_grad=True))
    x = ng.tensor([1.0, 2.0], requires_grad=True)
    (g,) = ng.autograd.grad(f(x), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [3.0, 12.0])
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_a_stride_0_operand_is_passed_as_the_elements_it_repeats():
    from numbagrad.compile._group import _compact

    one = np.array(2.5, np.float32)
    seed = np.ndarray((3, 4), one.dtype, one, 0, (0, 0))  # what a sum's backward hands on
    small = _compact(seed)
    assert small.shape == (1, 1) and small[0, 0] == 2.5 and np.shares_memory(small, one)
    rows = np.broadcast_to(np.arange(4.0), (3, 4))  # stride 0 along dim 0 only: one row
    np.testing.assert_array_equal(_compact(rows), [[0.0, 1.0, 2.0, 3.0]])


def test_a_compiled_backward_reads_the_sums_gradient_in_place_and_stays_right():
    swish = _swish_class()
    v = np.linspace(-2.0, 2.0, 6).reshape(2, 3)
    for _ in range(3):
        x = ng.tensor(v, requires_grad=True)
        (swish.apply(x).sum() * 3.0).backward()
    s = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * (s + v * s * (1 - s)), rtol=1e-12)


def test_gradient_of_a_broadcast_input_is_reduced_to_its_shape():
    f = ng.compile(lambda x, b, c: (ng.sigmoid(x + b) * c).sum())
    for _ in range(2):
        x = ng.tensor(np.arange(6.0).reshape(2, 3) / 5)
        b = ng.tensor([0.1, 0.2, 0.3], requires_grad=True)
        c = ng.tensor([[2.0], [3.0]], requires_grad=True)
        f(x, b, c).backward()
    s = 1 / (1 + np.exp(-(x.numpy() + b.detach().numpy())))
    np.testing.assert_allclose(b.grad.numpy(), (s * (1 - s) * c.detach().numpy()).sum(0))
    np.testing.assert_allclose(c.grad.numpy(), s.sum(1, keepdims=True))


def test_expanded_incoming_gradient_is_read_in_place():
    f = ng.compile(lambda x, w: ng.tanh(x * w))
    w = ng.ones(3, requires_grad=True)
    f(ng.ones(2, 3), w)
    y = f(ng.ones(2, 3), w)
    y.sum().backward()  # SumBackward hands an expanded (stride-0) gradient to the group
    np.testing.assert_allclose(w.grad.numpy(), [2 * (1 - np.tanh(1.0) ** 2)] * 3)


# --- the parallel (prange) target ------------------------------------------------------------------------------
@pytest.fixture
def parallel_kernels(monkeypatch):
    """Every group takes the ``prange`` kernels (normally only above ``backend.cpu.PARALLEL_THRESHOLD``)."""
    from numbagrad.compile import _group

    monkeypatch.setattr(_group, "_PARALLEL_THRESHOLD", 1)


@pytest.mark.parametrize(
    "case",
    [
        ([(6, 5), (5,), (6, 1)], [("mul", 1), ("add", 2), ("relu", 0)], ("sum", None, False)),  # prange reduction
        ([(6, 5), (5,)], [("mul", 1), ("tanh", 0)], ("sum", 0, False)),  # dim 0 reduced: serial forward
        ([(4, 3, 2), (3, 1), (1,)], [("mul", 1), ("sub", 2), ("exp", 0)], None),  # broadcast grads after
    ],
)
def test_parallel_kernels_match_eager_and_torch(parallel_kernels, case):
    check_chain(*case, np.float64, seed=5)


def test_a_group_whose_kernel_cannot_be_built_runs_its_eager_ops(monkeypatch):
    from numbagrad.compile import _group

    def broken(*args, **kwargs):
        raise RuntimeError("generator bug")

    monkeypatch.setattr(_group, "forward_source", broken)
    f = ng.compile(lambda x: (ng.tanh(x) * 2).sum())
    f(ng.ones(2, requires_grad=True))
    x = ng.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(RuntimeWarning, match="could not be compiled .*generator bug"):
        y = f(x)
    y.backward()
    np.testing.assert_allclose(y.item(), 2 * np.tanh(1.0))
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh([0.0, 1.0]) ** 2))
    assert f.plans[0].groups[0].failed == "RuntimeError: generator bug"


def test_the_same_tensor_twice_and_then_two_tensors_are_different_keys():
    f = ng.compile(lambda a, b: (a * b).sum())
    x, y = ng.tensor([1.0, 2.0]), ng.tensor([3.0, 4.0])
    f(x, x)
    assert f(x, x).item() == 5.0
    assert f(x, y).item() == 11.0 and f(x, y).item() == 11.0
    assert f(y, y).item() == 25.0


def test_non_tensor_arguments_are_part_of_the_key():
    f = ng.compile(lambda a, scale=1.0: (a * scale).exp())
    x = ng.tensor([1.0, 2.0], dtype=ng.float64)
    for scale in (2.0, 3.0, 2.0):
        np.testing.assert_allclose(f(x, scale=scale).numpy(), np.exp([scale, 2 * scale]), rtol=1e-12)
    np.testing.assert_allclose(f(a=x, scale=3.0).numpy(), np.exp([3.0, 6.0]), rtol=1e-12)


def test_integer_zero_dim_and_empty_inputs():
    k = ng.compile(lambda a, b: (a * b + 1).abs())
    ia, ib = ng.tensor([1, -2, 3]), ng.tensor([2, 2, -2])
    k(ia, ib)
    out = k(ia, ib)
    assert out.dtype == ng.int64 and out.numpy().tolist() == [3, 3, 5]
    z = ng.compile(lambda a, s: ng.tanh(a * s) + s)
    for _ in range(2):
        s = ng.tensor(0.5, dtype=ng.float64, requires_grad=True)
        a = ng.tensor([1.0, 2.0], dtype=ng.float64)
        z(a, s).sum().backward()
    np.testing.assert_allclose(s.grad.item(), (1 - np.tanh(0.5) ** 2) + 2 * (1 - np.tanh(1.0) ** 2) + 2)
    e = ng.compile(lambda a: (a * 2).sum())
    e(ng.zeros(0))
    assert e(ng.zeros(0)).item() == 0.0


@pytest.mark.parametrize("name", sorted(n for n, r in ROWS.items() if not r.differentiable))
def test_rows_without_a_gradient_run_eagerly_inside_a_compiled_function(name):
    row = ROWS[name]
    rng = np.random.default_rng(3)
    arrays = [rng.uniform(*row.domain, (3, 4)) for _ in range(row.arity)]
    if row.integral_only:
        arrays = [np.round(a * 3).astype(np.int64) for a in arrays]
    fn = function_for(name)
    x = ng.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)

    def program(*xs):
        return fn.apply(*xs), (x * 2).sum()

    compiled = ng.compile(program)
    inputs = [ng.tensor(a) for a in arrays]
    for _ in range(2):  # trace, then replay
        got, s = compiled(*inputs)
    expected, _ = program(*inputs)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    s.backward()
    assert x.grad.tolist() == np.full((3, 4), 2.0).tolist()
