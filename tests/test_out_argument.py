"""torch's ``out=`` argument (``numbagrad.ops.out_arguments``): every namespace function that takes one writes its
result into the given tensor and returns it; the rules for grad mode, dtypes, shapes and tuples follow torch's,
checked against torch where it is installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.ops.out_arguments import OUT_FUNCTIONS
from numbagrad.scalar_math import ROWS
from samples import call_declared, declared_samples


def _tensors(value) -> list:
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return [value] if isinstance(value, ng.Tensor) else []


def _empty_like(result):
    """Fresh ``out`` tensors for ``result`` (a tensor or a tuple of them), filled with a marker value."""
    if isinstance(result, (tuple, list)):
        return tuple(_empty_like(r) for r in result)
    return ng.full(tuple(result.shape), 7, dtype=result.dtype)


OUT_SAMPLES = [p for p in declared_samples() if p.values[0].name in OUT_FUNCTIONS]


@pytest.mark.parametrize("decl, sample", OUT_SAMPLES)
def test_declared_op_writes_its_result_into_out_and_returns_it(decl, sample):
    with ng.no_grad():
        ng.manual_seed(0)  # (a random op draws the same values in both calls)
        expected, args, kwargs = call_declared(decl, ng, sample, requires_grad=False)
        out = _empty_like(expected)
        ng.manual_seed(0)
        got = decl.function(*args, **kwargs, out=out)
    if isinstance(out, tuple):
        assert all(g is o for g, o in zip(got, out)) and len(got) == len(out)
    else:
        assert got is out
    for e, o in zip(_tensors(expected), _tensors(out)):
        assert o.dtype == e.dtype and o.shape == e.shape
        np.testing.assert_array_equal(o.numpy(), e.numpy())


ELEMENTWISE = sorted(
    name
    for name, row in ROWS.items()
    if name in OUT_FUNCTIONS and row.arity in (1, 2) and not row.params and getattr(ng, name, None) is not None
)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_function_writes_into_out(name):
    row = ROWS[name]
    rng = np.random.default_rng(0)
    lo, hi = row.domain if row.domain else (-2.0, 2.0)
    dtype = np.int64 if row.integral_only else np.float64
    draw = (lambda: rng.integers(1, 5, (2, 3))) if row.integral_only else (lambda: rng.uniform(lo, hi, (2, 3)))
    args = [ng.tensor(draw().astype(dtype)) for _ in range(row.arity)]
    expected = getattr(ng, name)(*args)
    out = ng.empty(0, dtype=expected.dtype)
    assert getattr(ng, name)(*args, out=out) is out
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_out_may_be_an_input():
    a = ng.tensor([1.0, 2.0, 3.0])
    ng.add(a, a, out=a)
    np.testing.assert_array_equal(a.numpy(), [2.0, 4.0, 6.0])


def test_out_view_writes_into_its_base():
    base = ng.zeros(2, 3)
    ng.mul(ng.ones(3), 5, out=base[1])
    np.testing.assert_array_equal(base.numpy(), [[0, 0, 0], [5, 5, 5]])


def test_out_bumps_the_version():
    out = ng.empty(2)
    before = out._version
    ng.exp(ng.zeros(2), out=out)
    assert out._version > before


def test_tensor_methods_take_no_out():
    a = ng.ones(2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        a.add(a, out=ng.empty(2))


def test_refused_out_stays_untouched():
    out = ng.full((2,), 3, dtype=ng.int64)
    with pytest.raises(RuntimeError):
        ng.exp(ng.zeros(2), out=out)
    np.testing.assert_array_equal(out.numpy(), [3, 3])


def test_functions_outside_the_list_refuse_out():
    with pytest.raises(TypeError):
        ng.flip(ng.ones(2), (0,), out=ng.empty(2))


# --- against torch ------------------------------------------------------------------------------------------------
def _cases(lib):
    """Calls with ``out=`` whose outcome (values, dtype, shape, warning or error) torch defines."""
    f32, f64, i64 = lib.float32, lib.float64, lib.int64
    x = lib.tensor([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]])
    v = lib.tensor([1.0, 2.0, 3.0])
    idx = lib.tensor([1, 0])
    grad = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return {
        "add_cast_up": lambda: lib.add(v, v, out=lib.empty(3, dtype=f64)),
        "add_float_into_long": lambda: lib.add(v, v, out=lib.empty(3, dtype=i64)),
        "eq_bool_into_float": lambda: lib.eq(v, v, out=lib.empty(3, dtype=f32)),
        "add_long_into_bool": lambda: lib.add(idx, idx, out=lib.empty(2, dtype=lib.bool)),
        "resize_warns": lambda: lib.add(v, v, out=lib.empty(5)),
        "resize_empty_silent": lambda: lib.add(v, v, out=lib.empty(0)),
        "grad_input": lambda: lib.add(grad, v, out=lib.empty(3)),
        "grad_out": lambda: lib.add(v, v, out=lib.empty(3, requires_grad=True)),
        "mm_exact": lambda: lib.mm(x, x.t(), out=lib.empty(2, 2, dtype=f64)),
        "matmul": lambda: lib.matmul(x, x.t(), out=lib.empty(0)),
        "softmax_exact": lambda: lib.softmax(x, 1, out=lib.empty(0, dtype=f64)),
        "dot_exact": lambda: lib.dot(v, v, out=lib.empty((), dtype=f64)),
        "where_exact": lambda: lib.where(x > 0, x, x, out=lib.empty(0, dtype=f64)),
        "amax_exact": lambda: lib.amax(x, 1, out=lib.empty(0, dtype=f64)),
        "index_select_exact": lambda: lib.index_select(x, 0, idx, out=lib.empty(0, dtype=f64)),
        "cat_into_long": lambda: lib.cat([v, v], out=lib.empty(6, dtype=i64)),
        "cat_cast_up": lambda: lib.cat([v, v], out=lib.empty(6, dtype=f64)),
        "hstack": lambda: lib.hstack([v, v], out=lib.empty(6)),
        "stack": lambda: lib.stack([v, v], out=lib.empty(0)),
        "sum_in_out_dtype": lambda: lib.sum(x, 1, out=lib.empty(0, dtype=i64)),
        "cumsum_in_out_dtype": lambda: lib.cumsum(x, 1, out=lib.empty(0, dtype=i64)),
        "mean_into_long": lambda: lib.mean(x, 1, out=lib.empty(0, dtype=i64)),
        "max_dim_tuple": lambda: lib.max(x, 1, out=(lib.empty(0), lib.empty(0, dtype=i64))),
        "max_dim_tuple_exact": lambda: lib.max(x, 1, out=(lib.empty(0, dtype=f64), lib.empty(0, dtype=i64))),
        "max_binary_cast_up": lambda: lib.max(v, v * 2, out=lib.empty(3, dtype=f64)),
        "min_binary_into_long": lambda: lib.min(v, v * 2, out=lib.empty(3, dtype=i64)),
        "max_all_cast_up": lambda: lib.max(x, out=lib.empty((), dtype=f64)),
        "sort_tuple": lambda: lib.sort(x, 1, out=(lib.empty(0), lib.empty(0, dtype=i64))),
        "topk_tuple": lambda: lib.topk(v, 2, out=(lib.empty(0), lib.empty(0, dtype=i64))),
        "zeros_takes_out_dtype": lambda: lib.zeros(2, 3, out=lib.empty(2, dtype=i64)),
        "arange_takes_out_dtype": lambda: lib.arange(4, out=lib.empty(0, dtype=f64)),
        "full_dtype_given": lambda: lib.full((2,), 3, dtype=f32, out=lib.empty(2, dtype=f32)),
        "addmv": lambda: lib.addmv(v[:2], x, v, out=lib.empty(0)),
        "kron": lambda: lib.kron(v, v, out=lib.empty(0, dtype=f64)),
        "clamp_exact": lambda: lib.clamp(x, 0, 1, out=lib.empty(0, dtype=f64)),
        "gather_exact": lambda: lib.gather(x, 1, idx.reshape(2, 1), out=lib.empty(0, dtype=f64)),
        "exp_long_out": lambda: lib.exp(v, out=lib.empty(3, dtype=i64)),
    }


def _outcome(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001 - the outcome compared is the exception
            return ("error", type(err).__name__, str(err).split("\n")[0]), []
    messages = [str(w.message).split(" (Triggered internally")[0] for w in seen]
    tensors = [result] if not isinstance(result, tuple) else list(result)
    return ("ok", [(t.detach().numpy().tolist(), str(t.dtype).split(".")[-1]) for t in tensors]), messages


@pytest.mark.parametrize("case", sorted(_cases(ng)))
def test_out_behaves_as_torchs(case):
    torch = pytest.importorskip("torch")
    assert _outcome(_cases(ng)[case]) == _outcome(_cases(torch)[case])


def test_tuple_out_returns_the_named_result():
    x = ng.tensor([[3.0, 1.0], [2.0, 5.0]])
    values, indices = ng.empty(0), ng.empty(0, dtype=ng.int64)
    got = ng.max(x, 1, out=(values, indices))
    assert got.values is values and got.indices is indices
