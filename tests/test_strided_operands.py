"""CPU elementwise kernels read strided and broadcast operands in place: transposed, sliced, flipped and
broadcast arrays of any rank go to the kernel through their strides (``layout.strided_loop``), never through a
copy, and results are laid out as their first full-size operand is (torch's TensorIterator rule)."""

import tracemalloc

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import codegen, cpu
from numbagrad.backend.layout import contiguous_steps, strided_loop
from numbagrad.scalar_math import ROWS

F64 = np.dtype(np.float64)
RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.standard_normal(shape)


# (name, operands of a binary op): each operand a numpy array (any strides) or a number
LAYOUTS = [
    ("transposed 3-d", lambda: [_x(2, 4, 3).transpose(0, 2, 1), _x(2, 3, 4)]),
    ("both transposed", lambda: [_x(2, 4, 3).transpose(0, 2, 1), _x(4, 3, 2).transpose(2, 1, 0)]),
    ("transposed and a middle broadcast", lambda: [_x(2, 4, 3).transpose(0, 2, 1), _x(1, 3, 1)]),
    ("sliced with steps", lambda: [_x(4, 6, 5)[::2, 1::2, ::3], _x(2, 3, 2)]),
    ("broadcast channel of 4-d", lambda: [_x(2, 3, 4, 5), _x(1, 3, 1, 1)]),
    ("channel bias of 4-d, bias first", lambda: [_x(3, 1, 1), _x(2, 3, 4, 5)]),
    ("two broadcasts, outer product of 3-d", lambda: [_x(2, 1, 4), _x(1, 3, 1)]),
    ("5-d transposed and broadcast", lambda: [_x(2, 3, 2, 4, 2).transpose(0, 3, 1, 4, 2), _x(4, 1, 1, 1)]),
    ("channels-last 4-d", lambda: [_x(2, 4, 5, 3).transpose(0, 3, 1, 2), _x(2, 3, 4, 5)]),
    ("expanded view", lambda: [np.broadcast_to(_x(1, 3, 1), (2, 3, 4)), _x(2, 3, 4)]),
    ("a number", lambda: [_x(3, 4, 5).transpose(2, 0, 1), 2.5]),
    ("a 0-d array", lambda: [_x(3, 4, 5)[:, ::2], np.array(1.5)]),
    ("flipped (negative strides)", lambda: [_x(3, 4, 5)[::-1, :, ::-1], _x(4, 1)]),
    ("1-d with a step", lambda: [_x(10)[::3], _x(4)]),
    ("zero-size", lambda: [_x(2, 0, 3).transpose(0, 2, 1), _x(1, 3, 1)]),
    ("a slice of columns (a chunk's part)", lambda: [_x(4, 12)[:, 3:6], _x(4, 3)]),
    ("two slices of columns", lambda: [_x(4, 12)[:, 3:6], _x(4, 9)[:, 6:]]),
    ("a channel slice of 4-d", lambda: [_x(2, 6, 3, 4)[:, 2:4], _x(2, 2, 3, 4)]),
    ("rows reversed, columns sliced", lambda: [_x(5, 8)[::-1, 2:6], _x(5, 4)]),
    ("a slice of columns and a broadcast row", lambda: [_x(4, 12)[:, 3:6], _x(3)]),
    ("a slice of columns and a broadcast column", lambda: [_x(4, 1), _x(4, 12)[:, 3:6]]),
]


@pytest.mark.parametrize(("name", "make"), LAYOUTS, ids=[n for n, _ in LAYOUTS])
def test_a_binary_op_over_any_layout_equals_numpy(name, make):
    a, b = make()
    out = cpu.elementwise(ROWS["sub"], [a, b], (), F64)
    np.testing.assert_array_equal(out, np.subtract(a, b))


@pytest.mark.parametrize(("name", "make"), LAYOUTS, ids=[n for n, _ in LAYOUTS])
def test_both_gradients_over_any_layout_equal_numpy(name, make):
    a, b = make()
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    g = _x(*shape[::-1]).T  # an incoming gradient of yet another layout
    first, second = cpu.elementwise_grads(ROWS["mul"], (0, 1), g, 0, [a, b], (), F64)
    np.testing.assert_array_equal(first, g * b)
    np.testing.assert_array_equal(second, g * a)


def test_a_strided_destination_is_written_in_place():
    base = np.zeros((4, 5, 6))
    out = base.transpose(2, 0, 1)[::2]
    a, b = _x(3, 4, 5), _x(5)
    cpu.elementwise(ROWS["add"], [a, b], (), F64, out=out)
    np.testing.assert_array_equal(base.transpose(2, 0, 1)[::2], a + b)
    assert not base.transpose(2, 0, 1)[1::2].any()  # nothing else written


def test_an_operand_overlapping_the_destination_is_read_before_it_is_written():
    x = np.arange(12.0).reshape(3, 4)
    expected = x + x[::-1, ::-1]
    cpu.elementwise(ROWS["add"], [x, x[::-1, ::-1]], (), F64, out=x)
    np.testing.assert_array_equal(x, expected)


# --- no copies ------------------------------------------------------------------------------------------------
NO_COPY = [
    ("transposed", lambda: [_x(64, 32, 32).transpose(0, 2, 1), 2.0]),
    ("transposed with a middle broadcast", lambda: [_x(64, 32, 32).transpose(0, 2, 1), _x(1, 32, 1)]),
    ("middle broadcast of 4-d", lambda: [_x(16, 8, 16, 16), _x(1, 8, 1, 1)]),
    ("sliced", lambda: [_x(64, 64, 16)[:, ::2], _x(32, 1)]),
    ("flipped", lambda: [_x(64, 32, 32)[::-1], 1.0]),
]


@pytest.mark.parametrize(("name", "make"), NO_COPY, ids=[n for n, _ in NO_COPY])
def test_no_operand_sized_buffer_is_allocated_besides_the_result(name, make):
    """tracemalloc sees numpy's data allocations: the op's peak is its result (a copy of the large operand, or
    the broadcast of the small one, would be a second block of the result's size)."""
    a, b = make()
    row = ROWS["mul"]
    cpu.elementwise(row, [a, b], (), F64)  # compiled and loaded first
    tracemalloc.start()
    try:
        out = cpu.elementwise(row, [a, b], (), F64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < out.nbytes * 1.25
    np.testing.assert_array_equal(out, a * b)


def test_a_gradient_pass_over_transposed_operands_allocates_only_its_results():
    x, w, g = _x(64, 32, 32).transpose(0, 2, 1), _x(1, 32, 1), _x(64, 32, 32).transpose(0, 2, 1)
    cpu.elementwise_grads(ROWS["mul"], (0, 1), g, 0, [x, w], (), F64)
    tracemalloc.start()
    try:
        first, second = cpu.elementwise_grads(ROWS["mul"], (0, 1), g, 0, [x, w], (), F64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2.25 * first.nbytes
    np.testing.assert_array_equal(second, g * x)


# --- the loop's order and collapse ----------------------------------------------------------------------------
def test_the_loop_follows_the_results_memory_order_and_merges_contiguous_runs():
    # a result laid out as a transposed (2, 4, 3) input: both walk memory in order, one flat loop
    assert strided_loop((2, 3, 4), [[12, 1, 3], [12, 1, 3]]) == ((24,), [(1,), (1,)])
    # against a C-contiguous operand: the result's order, the operand read across
    assert strided_loop((2, 3, 4), [[12, 1, 3], [12, 4, 1]]) == ((2, 4, 3), [(12, 3, 1), (12, 1, 4)])
    # a channel broadcast over (N, C, H, W): H and W merge, the channel stays a middle dim
    assert strided_loop((2, 3, 4, 5), [[60, 20, 5, 1], [0, 1, 0, 0]]) == ((2, 3, 20), [(60, 20, 1), (0, 1, 0)])
    # size-1 dims drop out; nothing left is one element
    assert strided_loop((1, 1), [[0, 0]]) == ((1,), [(0,)])
    # a negative stride orders by its magnitude and never merges with a positive one
    assert strided_loop((3, 4), [[4, 1], [-4, 1]]) == ((3, 4), [(4, 1), (-4, 1)])


def test_contiguous_steps_are_the_c_strides():
    assert contiguous_steps((2, 3, 4)) == (12, 4, 1)
    assert contiguous_steps((5,)) == (1,)


def test_a_result_laid_out_as_its_transposed_input_runs_the_flat_kernel():
    x = _x(2, 4, 3).transpose(0, 2, 1)
    res, flat, pattern, tail = cpu._flatten([x, 2.0], x.size, F64, (np.empty((2, 4, 3)).transpose(0, 2, 1),))
    assert (pattern, tail) == ("as", ())
    assert np.shares_memory(flat[0], x)


def test_one_kernel_serves_every_shape_and_stride_of_a_rank():
    before = {k for k in codegen.KERNELS if k[0] == "atan2"}
    for shape, perm in [((2, 3, 4), (0, 2, 1)), ((5, 2, 3), (1, 0, 2)), ((3, 3, 7), (2, 1, 0))]:
        a, b = _x(*shape).transpose(perm), _x(*[shape[p] for p in perm])[::-1]
        expected = cpu.elementwise(ROWS["atan2"], [a.copy(), b.copy()], (), F64)  # the flat kernel
        np.testing.assert_array_equal(cpu.elementwise(ROWS["atan2"], [a, b], (), F64), expected)
    loops = {cpu.loop_variant(n) for n in (24, 30, 63)}
    nests = {("atan2", "forward", codegen.strided_pattern("nn", 3), loop) for loop in loops}
    assert nests <= set(codegen.KERNELS)
    flat = {("atan2", "forward", "aa", loop) for loop in loops}
    assert {k for k in codegen.KERNELS if k[0] == "atan2"} - before <= nests | flat


# --- through tensors, against torch ---------------------------------------------------------------------------
def test_results_take_the_layout_of_their_first_full_size_operand_as_in_torch(torch):
    a = _x(2, 4, 3)
    for op in (lambda m, t: m.transpose(1, 2) * 2, lambda m, t: m.transpose(1, 2) - t.ones(1, 3, 1)):
        ours = op(numbagrad.tensor(a), numbagrad)
        theirs = op(torch.tensor(a), torch)
        assert ours.stride() == theirs.stride()
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_a_batch_norm_over_a_transposed_input_matches_torch(torch):
    """The wavenet level: BatchNorm1d over ``x.transpose(1, 2)``, its forward and gradients."""
    a = _x(4, 3, 5)
    grads = []
    for lib in (numbagrad, torch):
        lib.manual_seed(0)
        x = lib.tensor(a, requires_grad=True)
        bn = lib.nn.BatchNorm1d(5).double()
        y = lib.tanh(bn(x.transpose(1, 2)).transpose(1, 2))
        (y * lib.tensor(a)).sum().backward()
        grads.append((y.detach().numpy(), x.grad.numpy(), bn.weight.grad.numpy()))
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_gradients_through_transposed_and_broadcast_operands_pass_gradcheck():
    x = numbagrad.tensor(_x(2, 4, 3), requires_grad=True)
    w = numbagrad.tensor(_x(1, 3, 1), requires_grad=True)

    def f(x, w):
        t = x.transpose(1, 2)
        return (t * w - w).exp() / (t[:, :, ::2].sum(2, keepdim=True) + 3.0)

    assert numbagrad.autograd.gradcheck(f, (x, w))


# --- sums of permuted (transposed) storage ----------------------------------------------------------------------
SUMS = [
    ("transposed, the storage's middle axis", (32, 4, 128), (0, 2, 1), (0, 2)),
    ("transposed, one dim", (8, 16, 64), (2, 0, 1), (1,)),
    ("transposed, leading storage dims", (8, 16, 64), (2, 0, 1), (0, 1)),
    ("transposed, all", (8, 16, 64), (2, 0, 1), None),
    ("not consecutive in storage", (8, 16, 64), (2, 0, 1), (0, 2)),
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize(("name", "shape", "perm", "axes"), SUMS, ids=[s[0] for s in SUMS])
def test_a_sum_of_a_transposed_array_equals_numpy(name, shape, perm, axes, keepdim):
    a = _x(*shape).transpose(perm)
    got = cpu.reduce(a, "sum", axes, keepdim)
    expected = a.sum(axis=axes, keepdims=keepdim)
    assert got.shape == expected.shape and got.dtype == a.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_a_sum_of_a_transposed_array_reads_it_in_place():
    a = _x(64, 8, 128).transpose(0, 2, 1)
    cpu.reduce(a, "sum", (0, 2), False)
    tracemalloc.start()
    try:
        cpu.reduce(a, "sum", (0, 2), False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes / 8


# --- contiguous row and column broadcasts: the row-broadcast kernel without a loop plan -------------------------
BROADCASTS = [
    ("a keepdim statistic over the leading dims", (2, 3, 4), [(2, 3, 4), (1, 1, 4)], "ar", (6, 4)),
    ("a bias of fewer dims", (2, 3, 4), [(2, 3, 4), (4,)], "ar", (6, 4)),
    ("a bias first", (2, 3, 4), [(3, 4), (2, 3, 4)], "ra", (2, 12)),
    ("a keepdim statistic over the trailing dim", (2, 3, 4), [(2, 3, 4), (2, 3, 1)], "ac", (6, 4)),
    ("a row and a column of one split", (2, 3, 4), [(2, 1, 1), (1, 3, 4), (2, 3, 4)], "cra", (2, 12)),
]


@pytest.mark.parametrize(("name", "shape", "shapes", "pattern", "tail"), BROADCASTS, ids=[b[0] for b in BROADCASTS])
def test_a_contiguous_row_or_column_broadcast_takes_the_row_kernel_directly(name, shape, shapes, pattern, tail):
    arrays = [_x(*s) for s in shapes]
    out = np.empty(shape)
    res, flat, got, got_tail = cpu._strided(arrays, out.size, F64, (out,))
    assert (got, got_tail) == (pattern, tail)
    assert all(np.shares_memory(f, a) for f, a in zip(flat, arrays))
    if len(arrays) == 2:
        np.testing.assert_array_equal(cpu.elementwise(ROWS["mul"], arrays, (), F64), arrays[0] * arrays[1])
    else:  # addcmul: x + value * y * z
        expected = arrays[0] + 0.5 * arrays[1] * arrays[2]
        np.testing.assert_array_equal(cpu.elementwise(ROWS["addcmul"], arrays, (0.5,), F64), expected)


def test_a_row_and_a_column_of_different_splits_take_the_loop_nest():
    a, b = _x(2, 1, 1), _x(1, 1, 4)
    out = np.empty((2, 3, 4))
    _, _, pattern, tail = cpu._strided([a, b], out.size, F64, (out,))
    assert (pattern, tail) != ("cr", (2, 12)) and (pattern, tail) != ("cr", (6, 4))
    np.testing.assert_array_equal(cpu.elementwise(ROWS["sub"], [a, b], (), F64), a - b)


def test_broadcast_normalization_by_hand_matches_torch(torch):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over a keepdim statistic, values and gradients."""
    x, gamma, beta = _x(4, 3, 5), _x(5), _x(5)
    results = []
    for lib in (numbagrad, torch):
        t, g, b = (lib.tensor(a, requires_grad=True) for a in (x, gamma, beta))
        mean, var = t.mean((0, 1), keepdim=True), t.var((0, 1), keepdim=True)
        out = (t - mean) / lib.sqrt(var + 1e-5) * g + b
        out.backward(lib.tensor(np.linspace(-1, 1, 60).reshape(4, 3, 5)))
        results.append([v.detach().numpy() for v in (out, t.grad, g.grad, b.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_an_operand_walked_with_its_own_strides_is_passed_as_itself():
    """A transposed operand of a contiguous result (a gradient through a transposed activation): the loop nest
    reads the array itself, no strided view of it is made."""
    x, y = _x(2, 4, 3).transpose(0, 2, 1), _x(2, 3, 4)
    out = np.empty((2, 3, 4))
    _, flat, pattern, _ = cpu._strided([x, y], out.size, F64, (out,))
    assert pattern == codegen.strided_pattern("nn", 3)
    assert flat[0] is x
    np.testing.assert_array_equal(cpu.elementwise(ROWS["sub"], [x, y], (), F64, out=out), x - y)


# --- operands whose rows are contiguous: the row-walk loop ----------------------------------------------------
ROW_WALKS = [
    ("a chunk's part", [(64, 1024)], lambda a: [a[:, 256:512]], "w", (64, 256, 1024 * 8)),
    ("two chunks' parts", [(64, 1024)], lambda a: [a[:, :256], a[:, 512:768]], "ww", (64, 256, 8192, 8192)),
    ("a channel slice", [(4, 24, 8, 8)], lambda a: [a[:, 16:]], "w", (4, 512, 24 * 64 * 8)),
    ("a part and a whole array", [(8, 30), (8, 10)], lambda a, b: [a[:, 10:20], b], "wa", (8, 10, 240)),
    ("a part and a row", [(8, 30), (10,)], lambda a, b: [a[:, 10:20], b], "wr", (8, 10, 240)),
    ("reversed rows", [(8, 30)], lambda a: [a[::-1, 5:15]], "w", (8, 10, -240)),
]


@pytest.mark.parametrize(("name", "shapes", "take", "pattern", "tail"), ROW_WALKS, ids=[w[0] for w in ROW_WALKS])
def test_operands_with_contiguous_rows_are_walked_row_by_row(name, shapes, take, pattern, tail):
    """Each row of such an operand is read as a contiguous array (so the loop vectorizes), the operand itself is
    handed to the kernel (no view, no copy), and the tail gives the loop's rows, columns and each walked
    operand's row stride in bytes."""
    arrays = take(*[_x(*s) for s in shapes])
    out = np.empty(arrays[0].shape)
    _, flat, got, got_tail = cpu._strided(arrays, out.size, F64, (out,))
    assert (got, got_tail) == (pattern, tail)
    for f, a, k in zip(flat, arrays, pattern):
        assert f is a if k == "w" else np.shares_memory(f, a)
    operands = arrays if len(arrays) == 2 else [arrays[0], 0.5]
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in operands]  # (a flat loop: the same bits)
    ours = cpu.elementwise(ROWS["atan2"], operands, (), F64)
    np.testing.assert_array_equal(ours, cpu.elementwise(ROWS["atan2"], copies, (), F64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_row_walk_of_a_vectorized_function_equals_its_flat_loop(dtype):
    """sigmoid and tanh over a chunk's part give the bits they give over a contiguous copy of it."""
    a = _x(64, 1024).astype(dtype)[:, 256:512]
    for name in ("sigmoid", "tanh", "exp"):
        ours = cpu.elementwise(ROWS[name], [a], (), np.dtype(dtype))
        np.testing.assert_array_equal(ours, cpu.elementwise(ROWS[name], [a.copy()], (), np.dtype(dtype)))


def test_a_row_walk_runs_in_the_parallel_loop(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 16)
    a, b = _x(40, 30)[:, 5:25], _x(40, 50)[:, ::-1][:, :20]
    np.testing.assert_array_equal(cpu.elementwise(ROWS["mul"], [a, a], (), F64), a * a)
    np.testing.assert_array_equal(cpu.elementwise(ROWS["sub"], [a, b], (), F64), a - b)


def test_a_row_walked_operand_overlapping_an_in_place_destination_is_read_first():
    x = np.arange(40.0).reshape(4, 10)
    expected = x[:, :5] + x[:, 5:]
    cpu.elementwise(ROWS["add"], [x[:, :5], x[:, 5:]], (), F64, out=x[:, 5:])
    np.testing.assert_array_equal(x[:, 5:], expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gates_of_a_hand_written_lstm_cell_match_torch(torch, dtype):
    """``chunk`` of the gates, then sigmoid, tanh and products of the parts: values, layouts and gradients."""
    gates, c = _x(6, 16), _x(6, 4)
    results = []
    for lib in (numbagrad, torch):
        g = lib.tensor(gates, dtype=getattr(lib, dtype), requires_grad=True)
        cell = lib.tensor(c, dtype=getattr(lib, dtype), requires_grad=True)
        i, f, u, o = g.chunk(4, 1)
        c2 = f.sigmoid() * cell + i.sigmoid() * u.tanh()
        h = o.sigmoid() * c2.tanh()
        h.backward(lib.tensor(np.linspace(-1, 1, 24).reshape(6, 4), dtype=getattr(lib, dtype)))
        assert h.is_contiguous() and c2.is_contiguous()
        results.append([t.detach().numpy() for t in (h, c2, g.grad, cell.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


def test_an_op_on_a_channel_slice_takes_the_fast_path_and_keeps_row_major_layout(torch):
    a = _x(2, 6, 3, 4)
    ours = numbagrad.tensor(a)[:, 2:5].exp()
    theirs = torch.tensor(a)[:, 2:5].exp()
    assert ours.stride() == theirs.stride()
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-14)


# --- loop nests whose arrays are all contiguous along the innermost dim ----------------------------------------
INNER_CONTIGUOUS = [  # (each made in the given dtype, then viewed)
    ("an outer product of rows", lambda t: [_x(6, 1, 20).astype(t), _x(1, 5, 20).astype(t)]),
    ("a broadcast middle of 4-d", lambda t: [_x(2, 3, 4, 16).astype(t), _x(2, 1, 4, 16).astype(t)]),
    ("a sliced 3-d and a whole one", lambda t: [_x(4, 7, 30).astype(t)[:, ::2, 5:25], _x(4, 4, 20).astype(t)]),
    (
        "heads transposed against a contiguous result",
        lambda t: [_x(2, 7, 3, 8).astype(t).transpose(0, 2, 1, 3), _x(2, 3, 7, 8).astype(t)],
    ),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("name", "make"), INNER_CONTIGUOUS, ids=[n for n, _ in INNER_CONTIGUOUS])
def test_a_nest_contiguous_along_its_innermost_dim_gives_the_flat_loops_bits(name, make, dtype):
    """Such a nest walks its innermost runs as contiguous arrays: the same bits as the flat loop over copies."""
    a, b = make(dtype)
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty(shape, dtype)
    _, _, pattern, _ = cpu._strided([a, b], out.size, np.dtype(dtype), (out,))
    assert codegen.strided_rank(pattern) >= 2
    copies = [np.ascontiguousarray(np.broadcast_to(v, shape)) for v in (a, b)]
    for row in ("atan2", "mul"):
        ours = cpu.elementwise(ROWS[row], [a, b], (), np.dtype(dtype))
        np.testing.assert_array_equal(ours, cpu.elementwise(ROWS[row], copies, (), np.dtype(dtype)))


def test_a_nest_with_a_strided_innermost_dim_keeps_its_element_loop():
    a, b = _x(4, 6, 30)[:, :, ::3], _x(4, 1, 10)
    np.testing.assert_array_equal(cpu.elementwise(ROWS["sub"], [a, b], (), F64), a - b)


def test_a_nest_row_walk_runs_in_the_parallel_loop(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 16)
    a, b = _x(6, 1, 20), _x(1, 5, 20)
    np.testing.assert_array_equal(cpu.elementwise(ROWS["mul"], [a, b], (), F64), a * b)


def test_gradients_through_a_broadcast_outer_product_match_torch(torch):
    x, y = _x(6, 20), _x(5, 20)
    results = []
    for lib in (numbagrad, torch):
        a, b = lib.tensor(x, requires_grad=True), lib.tensor(y, requires_grad=True)
        out = (a[:, None, :] - b[None, :, :]).tanh()
        out.backward(lib.tensor(np.linspace(-1, 1, 600).reshape(6, 5, 20)))
        results.append([v.detach().numpy() for v in (out, a.grad, b.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
