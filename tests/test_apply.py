"""Tensor.apply_: compiled in place over any dtype and layout, torch's checks, and the Python fallback."""

import math
import os
import re
import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.ops import apply as apply_mod


def double_plus_one(v):
    return v * 2 + 1


@pytest.mark.parametrize("dtype", [ng.float32, ng.float64, ng.int32, ng.int64])
def test_apply_every_numeric_dtype_matches_python_map(dtype):
    t = ng.tensor([1, -2, 3]).to(dtype)
    assert t.apply_(double_plus_one) is t
    assert t.dtype is dtype
    assert t.tolist() == [3, -3, 7]


def test_float_results_truncate_into_integer_tensors_like_torch():
    t = ng.tensor([1, 2, 3])
    t.apply_(lambda v: v / 2 + 0.7)  # torch: tensor([1, 1, 2])
    assert t.tolist() == [1, 1, 2]


def test_bool_tensor_stores_truthiness():
    t = ng.tensor([True, False, True])
    t.apply_(lambda v: not v)
    assert t.tolist() == [False, True, False]


def test_non_contiguous_view_writes_back_into_base():
    base = ng.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=ng.float64)
    view = base.t()[1:]  # columns 1 and 2, transposed: not contiguous
    view.apply_(lambda v: -v)
    assert base.tolist() == [[1.0, -2.0, -3.0], [4.0, -5.0, -6.0]]


def test_apply_bumps_version_so_saved_tensors_notice():
    t = ng.tensor([1.0])
    before = t._version
    t.apply_(double_plus_one)
    assert t._version == before + 1


def test_requires_grad_raises_torch_error():
    t = ng.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call apply_\(\) on Variable that requires grad\. Use var\.detach"):
        t.apply_(double_plus_one)


def test_non_callable_raises_type_error():
    with pytest.raises(TypeError, match="'int' object is not callable"):
        ng.tensor([1.0]).apply_(5)


def test_second_call_compiles_nothing():
    def triple(v):
        return v * 3

    t = ng.tensor([1.0, 2.0], dtype=ng.float64)
    t.apply_(triple)
    kernel = apply_mod._kernels[apply_mod._key(triple), "d", 1, "serial"]
    t.apply_(triple)
    assert len(kernel.signatures) == 1
    assert apply_mod._kernels[apply_mod._key(triple), "d", 1, "serial"] is kernel
    assert t.tolist() == [9.0, 18.0]


def test_fresh_lambdas_from_one_line_share_a_kernel():
    t = ng.tensor([0.0], dtype=ng.float64)
    fns = []
    for _ in range(3):
        fns.append(lambda v: v + 1)
        t.apply_(fns[-1])
    assert t.tolist() == [3.0]
    assert len({apply_mod._key(f) for f in fns}) == 1


def test_closures_with_different_values_get_different_kernels():
    def adder(k):
        return lambda v: v + k

    t = ng.tensor([0.0], dtype=ng.float64)
    t.apply_(adder(1.0))
    t.apply_(adder(10.0))
    assert t.tolist() == [11.0]


def test_uncompilable_callable_falls_back_with_one_warning():
    seen = {}

    def record(v):  # a dict global: Numba cannot type it
        seen[v] = True
        return v + 1

    t = ng.tensor([1.0, 2.0], dtype=ng.float64)
    with pytest.warns(RuntimeWarning, match=r"Numba could not compile record .*slow"):
        t.apply_(record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.apply_(record)
    assert t.tolist() == [3.0, 4.0]
    assert set(seen) == {1.0, 2.0, 3.0}  # both calls ran the Python function


def test_builtin_callable_falls_back():
    t = ng.tensor([4.0, 9.0], dtype=ng.float64)
    with pytest.warns(RuntimeWarning, match="Numba could not compile"):
        t.apply_(math.sqrt)
    assert t.tolist() == [2.0, 3.0]


def test_parallel_kernel_matches_serial(monkeypatch):
    data = np.linspace(-3, 3, 1001)
    serial = ng.tensor(data.copy())
    serial.apply_(double_plus_one)
    monkeypatch.setattr("numbagrad.backend.cpu.PARALLEL_THRESHOLD", 1)
    parallel = ng.tensor(data.copy())
    parallel.apply_(double_plus_one)
    assert (apply_mod._key(double_plus_one), "d", 1, "parallel") in apply_mod._kernels
    np.testing.assert_array_equal(parallel.numpy(), serial.numpy())


def test_matches_torch_apply():
    torch = pytest.importorskip("torch")
    data = [[1.5, -2.25], [3.0, 0.0]]
    expected = torch.tensor(data).t().apply_(lambda v: v * v - 1)
    got = ng.tensor(data).t().apply_(lambda v: v * v - 1)
    assert got.tolist() == expected.tolist()


def test_module_level_function_is_compiled_from_the_kernel_cache_directory():
    from numbagrad.backend import codegen

    t = ng.tensor([1.0, 2.0], dtype=ng.float64)
    t.apply_(double_plus_one)
    kernel = apply_mod._kernels[apply_mod._key(double_plus_one), "d", 1, "serial"]
    assert os.path.dirname(kernel.py_func.__code__.co_filename) == codegen.cache_dir()
    assert t.tolist() == [3.0, 5.0]


def returns_none(v):
    return None


def returns_pair(v):
    return (v, v)


def returns_text_via_a_dict(v):  # a dict global: Numba cannot compile it, so the Python fallback runs
    return LABELS.get(v, "other")


LABELS = {1.0: "one"}


@pytest.mark.parametrize(
    ("fn", "kind"),
    [(returns_none, "NoneType"), (returns_pair, "tuple"), (lambda v: "text", "str"), (lambda v: 1j, "complex")],
)
def test_a_callable_returning_a_non_number_raises_torchs_type_error_and_leaves_the_tensor(fn, kind):
    t = ng.tensor([1.0, 2.0], dtype=ng.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "running it in Python" warning for a call that fails
        with pytest.raises(TypeError, match=f"^must be real number, not {kind}$"):
            t.apply_(fn)
    assert t.tolist() == [1.0, 2.0] and t._version == 0


def test_the_python_fallback_checks_every_result_before_writing():
    t = ng.tensor([2.0, 1.0], dtype=ng.float64)  # the first element is fine, the second is not
    with pytest.raises(TypeError, match="must be real number, not str"):
        t.apply_(returns_text_via_a_dict)
    assert t.tolist() == [2.0, 1.0]


def test_map_combines_two_tensors_elementwise_with_broadcasting():
    t = ng.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ng.float64)
    assert t.map_(ng.tensor([10.0, 20.0], dtype=ng.float64), lambda a, b: a * b + 1) is t
    assert t.tolist() == [[11.0, 41.0], [31.0, 81.0]]
    assert t._version == 1


def test_map_matches_torch():
    torch = pytest.importorskip("torch")
    data, other = [[1.5, -2.0], [0.25, 3.0]], [2.0, -1.0]
    expected = torch.tensor(data).t().map_(torch.tensor(other), lambda a, b: a * a - b)
    got = ng.tensor(data).t().map_(ng.tensor(other), lambda a, b: a * a - b)
    assert got.tolist() == expected.tolist()


def test_map_refuses_another_dtype_like_torch():
    with pytest.raises(TypeError, match=r"map_: expected torch.FloatTensor for 'other' \(got torch.LongTensor\)"):
        ng.tensor([1.0]).map_(ng.tensor([1]), lambda a, b: a + b)


def test_map_with_an_uncompilable_callable_falls_back_to_python():
    seen = []

    def record(a, b):
        seen.append((a, b))
        return a - b

    t = ng.tensor([5.0, 7.0], dtype=ng.float64)
    with pytest.warns(RuntimeWarning, match="map_: Numba could not compile record"):
        t.map_(ng.tensor([1.0, 2.0], dtype=ng.float64), record)
    assert t.tolist() == [4.0, 5.0] and seen == [(5.0, 1.0), (7.0, 2.0)]


def _random(shape, seed=0):
    return np.random.default_rng(seed).uniform(-3, 3, shape)


def test_map_passes_float32_elements_as_python_floats_like_torch(torch):
    # torch computes a * b + 1 in double and rounds once: a float32 product would round twice, differently
    a, b = _random(200).astype(np.float32), _random(200, seed=1).astype(np.float32)
    expected = torch.tensor(a).map_(torch.tensor(b), lambda x, y: x * y + 1)
    got = ng.tensor(a).map_(ng.tensor(b), lambda x, y: x * y + 1)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
@pytest.mark.parametrize(
    "fn",
    [lambda v: math.sqrt(abs(v)) * 3 + 1, lambda v: math.sin(v) / 3 - math.exp(-v * v), lambda v: v * 2 + 1],
    ids=["sqrt", "sin-exp", "affine"],
)
def test_apply_on_a_transposed_tensor_matches_torch(torch, dtype, fn):
    data = _random((4, 3)) * 10
    expected = torch.tensor(data).to(getattr(torch, dtype)).t().apply_(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled for every dtype: no Python fallback
        got = ng.tensor(data).to(getattr(ng, dtype)).t().apply_(fn)
    assert got.dtype is getattr(ng, dtype)
    np.testing.assert_array_equal(got.float().numpy(), expected.float().numpy())


@pytest.mark.parametrize(("dtype", "half_way"), [(ng.float16, 2.0**-11), (ng.bfloat16, 2.0**-8)])
def test_half_precision_results_round_through_float32_like_torch(dtype, half_way):
    # just above half way between 1 and the next 2-byte float, but exactly half way once rounded to float32: torch
    # stores a Python float into a 2-byte tensor through float, so the tie rounds to even, down to 1
    value = 1 + half_way + 2.0**-40
    t = ng.zeros(2, dtype=dtype).apply_(lambda v: value)
    assert t.tolist() == [1.0, 1.0]


def test_a_callable_that_fails_for_one_dtype_still_compiles_for_another():
    def halve(v):
        return v >> 1  # no float >> in Python or Numba

    with pytest.raises(TypeError, match="unsupported operand type"):
        ng.tensor([1.0]).apply_(halve)
    t = ng.tensor([8, 6])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled: no "running it in Python" warning
        t.apply_(halve)
    assert t.tolist() == [4, 3]


def test_the_float32_loop_converts_whole_vectors():
    # the double-precision loop over float32 stays vectorised: whole vectors widened to double and narrowed back
    fn = lambda v: v * 3 - 1  # noqa: E731 - a lambda compiles in memory, where Numba keeps its IR for inspection
    t = ng.tensor(np.ones(64, np.float32))
    t.apply_(fn)
    kernel = apply_mod._kernels[apply_mod._key(fn), "f", 1, "serial"]
    ir = kernel.inspect_llvm(kernel.signatures[0])
    assert re.search(r"fpext <\d+ x float> .* to <\d+ x double>", ir)
    assert re.search(r"fptrunc <\d+ x double> .* to <\d+ x float>", ir)
    assert t.tolist() == [2.0] * 64


@pytest.mark.parametrize(("dtype", "half_way"), [(ng.float16, 2.0**-11), (ng.bfloat16, 2.0**-8)])
def test_the_python_fallback_rounds_half_precision_through_float32_too(dtype, half_way):
    values = {"tie": 1 + half_way + 2.0**-40}

    def lookup(v):  # a dict global: Numba cannot compile it
        return values["tie"]

    t = ng.zeros(2, dtype=dtype)
    with pytest.warns(RuntimeWarning, match="Numba could not compile lookup"):
        t.apply_(lookup)
    assert t.tolist() == [1.0, 1.0]
