"""The one iteration space of elementwise kernels (``backend.layout.iteration_space``) and the one kernel cache
(``backend.codegen.KERNELS``) that eager CPU, CUDA and compiled kernels share."""

import gc

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import codegen, cpu
from numbagrad.backend.layout import collapse, compact_index, iteration_space

F64 = np.dtype(np.float64)
T, F = True, False

# (loop shape, operand shapes (None: a number)) -> (collapsed dims, masks, kinds)
SPACES = [
    ((3, 4), [(3, 4), (3, 4)], (12,), ((T,), (T,)), "aa"),
    ((3, 4), [(3, 4), None], (12,), ((T,), None), "as"),
    ((3, 4), [(3, 4), (1, 1)], (12,), ((T,), (F,)), "ao"),
    ((3, 4), [(3, 4), (4,)], (3, 4), ((T, T), (F, T)), "ar"),
    ((3, 4), [(3, 1), (3, 4)], (3, 4), ((T, F), (T, T)), "ca"),
    ((3, 4), [(3, 4), (4,), (3, 1)], (3, 4), ((T, T), (F, T), (T, F)), "arc"),
    ((2, 3, 4), [(2, 3, 4), (3, 4)], (2, 12), ((T, T), (F, T)), "ar"),  # trailing dims merge
    ((2, 3, 4), [(2, 3, 4), (2, 3, 1)], (6, 4), ((T, T), (T, F)), "ac"),  # leading dims merge
    ((2, 3, 4), [(2, 3, 4), (1, 3, 1)], (2, 3, 4), ((T, T, T), (F, T, F)), "am"),  # a middle dim
    ((2, 1, 4), [(2, 1, 4), (4,)], (2, 4), ((T, T), (F, T)), "ar"),  # size-1 dims drop out
    ((5, 4), [(5, 1), (1, 4)], (5, 4), ((T, F), (F, T)), "cr"),  # an outer product
    ((), [(), None], (1,), ((T,), None), "as"),
    ((4,), [(1, 4), (4,)], (4,), ((T,), (T,)), "aa"),  # extra leading ones of an operand
]


@pytest.mark.parametrize(("shape", "operands", "dims", "masks", "kinds"), SPACES)
def test_operand_layouts_give_their_loop_description(shape, operands, dims, masks, kinds):
    space = iteration_space(shape, operands)
    assert (space.dims, space.masks, space.kinds) == (dims, masks, kinds)
    assert collapse(shape, operands) == (dims, list(masks))


def test_the_mask_pattern_names_each_operands_flags_once_an_operand_needs_the_dims():
    assert iteration_space((3, 4), [(3, 4), None, (1,)]).mask_pattern() == "aso"  # a flat loop: the kinds
    assert iteration_space((3, 4), [(3, 4), (4,), None]).mask_pattern() == "11_01_s"
    assert iteration_space((2, 3, 4), [(1, 3, 1), (2, 3, 4)]).mask_pattern() == "010_111"


@pytest.mark.parametrize("mask", [(T, F, T), (F, T, F), (T, T, T), (F, F, F), (F, T, T)])
def test_the_generated_index_reads_each_element_of_the_operands_own_storage(mask):
    """``unravel`` splits a flat loop index over the collapsed dims and ``flat_offset`` finds the element of a
    C-contiguous operand with ``mask`` at it: numpy's index into the operand broadcast to the loop."""
    dims = (2, 3, 4)
    shape = [d if full else 1 for d, full in zip(dims, mask)]
    operand = np.arange(np.prod(shape)).reshape(shape)
    expected = np.broadcast_to(operand, dims).reshape(-1)
    code = compile("\n".join([*codegen.unravel(3), f"_off = {codegen.flat_offset(mask)}"]), "<index>", "exec")
    for i in range(24):
        scope = {"i": i, "d0": 2, "d1": 3, "d2": 4}
        exec(code, scope)
        assert operand.reshape(-1)[scope["_off"]] == expected[i]


def test_an_expanded_view_is_indexed_down_to_the_array_it_repeats():
    bias = np.arange(4.0)
    view = np.broadcast_to(bias, (3, 4))
    index = compact_index(view.shape, view.strides)
    assert view[index].shape == (1, 4) and np.shares_memory(view[index], bias)
    assert compact_index((3, 4), (32, 8)) is None  # no stride-0 dim
    assert compact_index((1, 4), (0, 8)) is None  # a size-1 dim is no broadcast


def test_a_cpu_kernel_reads_an_expanded_row_in_place():
    x, bias = np.ones((3, 4)), np.arange(4.0)
    _, flat, pattern, tail = cpu._flatten([x, np.broadcast_to(bias, (3, 4))], 12, F64, (np.empty((3, 4)),))
    assert (pattern, tail) == ("ar", (3, 4))
    assert np.shares_memory(flat[1], bias)
    out = cpu.elementwise(numbagrad.scalar_math.ROWS["sub"], [x, np.broadcast_to(bias, (3, 4))], (), F64)
    np.testing.assert_array_equal(out, x - bias)


@pytest.mark.parametrize("other", [(4,), (3, 1)])
def test_two_gradients_of_a_broadcast_pair_read_the_small_operand_in_place(other):
    """A binary op's one-pass backward over a row or column operand: the two gradients of the single-gradient
    kernels, also written into the incoming gradient."""
    row = numbagrad.scalar_math.ROWS["mul"]
    rng = np.random.default_rng(0)
    x, y, g = rng.standard_normal((3, 4)), rng.standard_normal(other), rng.standard_normal((3, 4))
    assert cpu._flatten([g, 0, x, y], 12, F64, (np.empty((3, 4)),))[2][-1] in "rc"
    expected = [cpu.elementwise_grad(row, i, g, 0, [x, y], (), F64) for i in (0, 1)]
    np.testing.assert_array_equal(expected[0], g * y)
    np.testing.assert_array_equal(expected[1], g * x)
    owned = g.copy()
    for got in (cpu.elementwise_grads(row, (0, 1), g, 0, [x, y], (), F64),
                cpu.elementwise_grads(row, (0, 1), owned, 0, [x, y], (), F64, True)):  # fmt: skip
        for a, b in zip(expected, got):
            np.testing.assert_array_equal(a, b)


def test_warmup_fills_the_cache_the_eager_op_reads():
    numbagrad.warmup(["sin"], ("float64",))
    keys = {k for k in codegen.KERNELS if k[0] == "sin"}
    assert ("sin", "forward", "a", "serial") in keys
    numbagrad.arange(5.0, dtype=numbagrad.float64).sin()
    assert {k for k in codegen.KERNELS if k[0] == "sin"} == keys


def test_compiled_groups_load_their_modules_through_the_same_cache(monkeypatch):
    monkeypatch.setattr(codegen, "KERNELS", {})

    @numbagrad.compile
    def f(x, y):
        return (x * y + 1.0).relu()

    x, y = numbagrad.ones(6), numbagrad.full((6,), 2.0)
    f(x, y)  # (the first call traces, running the eager ops)
    np.testing.assert_array_equal(f(x, y).numpy(), np.full(6, 3.0))
    assert any(key[0] == "module" and "fused_fwd" in key[1] for key in codegen.KERNELS)


# --- cuda: broadcast operands are read in place, never expanded into a copy ----------------------------------
cuda_only = pytest.mark.skipif(
    not numbagrad.cuda.is_available(), reason="no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set"
)


@cuda_only
@pytest.mark.cuda
@pytest.mark.parametrize(("shape", "other"), [((8, 16), (16,)), ((8, 16), (8, 1)), ((2, 8, 4), (1, 8, 1))])
def test_a_cuda_broadcast_operand_is_not_materialised(shape, other):
    """The only block a broadcast add allocates is its result (an expanded copy of the small operand would be a
    second block of the result's size)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape), rng.standard_normal(other)
    x, y = numbagrad.tensor(a, device="cuda"), numbagrad.tensor(b, device="cuda")
    gc.collect()
    before = numbagrad.cuda.memory_allocated()
    numbagrad.cuda.reset_peak_memory_stats()
    z = x + y
    assert numbagrad.cuda.max_memory_allocated() - before == a.nbytes  # (a 512-byte multiple: its own block)
    np.testing.assert_array_equal(z.cpu().numpy(), a + b)


@cuda_only
@pytest.mark.cuda
def test_a_cuda_expanded_view_is_read_through_its_pattern():
    a, b = np.arange(12.0).reshape(3, 4), np.arange(4.0)
    x = numbagrad.tensor(a, device="cuda")
    y = numbagrad.tensor(b, device="cuda").expand(3, 4)
    gc.collect()
    before = numbagrad.cuda.memory_allocated()
    numbagrad.cuda.reset_peak_memory_stats()
    z = x * y
    assert numbagrad.cuda.max_memory_allocated() - before == 512  # the result's one block (96 bytes)
    np.testing.assert_array_equal(z.cpu().numpy(), a * b)
