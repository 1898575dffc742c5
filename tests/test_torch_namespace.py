"""torch's namespace functions for dense real tensors (``ops/torch_namespace.py``), compared with torch: values,
dtypes, gradients and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck
from torch_oracle import raises_like

RNG = np.random.default_rng(0)


def _close(ours, theirs, **kw):
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **kw)


# --- in-place function forms ---------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    ("name", "args", "domain"),
    [("abs_", (), (-2, 2)), ("exp_", (), (-2, 2)), ("sqrt_", (), (0.1, 2)), ("sigmoid_", (), (-2, 2)),
     ("logit_", (), (0.1, 0.9)), ("clamp_", (-0.5, 0.5), (-2, 2)), ("relu_", (), (-2, 2)), ("round_", (), (-3, 3)),
     ("clamp_min_", (0.2,), (-2, 2)), ("clip_", (-0.1, 0.1), (-2, 2)), ("fix_", (), (-3, 3)), ("zero_", (), (0, 1)),
     ("fill_", (2.5,), (0, 1)), ("negative_", (), (0, 1)), ("xlogy_", (2.0,), (0.1, 2))],
)  # fmt: skip
def test_inplace_function_form_writes_its_input_like_torch(torch, name, args, domain):
    data = RNG.uniform(*domain, (3, 4))
    ours, theirs = numbagrad.tensor(data), torch.tensor(data)
    assert getattr(numbagrad, name)(ours, *args) is ours
    getattr(torch, name)(theirs, *args)
    _close(ours, theirs)


def test_every_table_inplace_function_is_the_tensor_method():
    from numbagrad.ops import torch_namespace

    extra_args = {"xlogy": (2.0,), "clamp": (0.0, 0.3)}
    for name in torch_namespace._ROW_INPLACE_FUNCTIONS:
        x, y = numbagrad.tensor([0.25, 0.5]), numbagrad.tensor([0.25, 0.5])
        assert getattr(numbagrad, name + "_")(x, *extra_args.get(name, ())) is x
        getattr(y, name + "_")(*extra_args.get(name, ()))
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.torch
def test_inplace_forms_of_integer_and_matrix_ops(torch):
    a, b = [12, 18, 7], [8, 12, 5]
    for name in ("gcd_", "lcm_"):
        ours, theirs = numbagrad.tensor(a), torch.tensor(a)
        getattr(numbagrad, name)(ours, numbagrad.tensor(b))
        getattr(theirs, name)(torch.tensor(b))
        _close(ours, theirs)
    ours, theirs = numbagrad.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert ours.ldexp_(numbagrad.tensor([3, -1])) is ours
    theirs.ldexp_(torch.tensor([3, -1]))
    _close(ours, theirs)
    m, v = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
    ours, theirs = numbagrad.zeros(2, dtype=numbagrad.float64), torch.zeros(2, dtype=torch.float64)
    numbagrad.addmv_(ours, numbagrad.tensor(m), numbagrad.tensor(v), beta=0.5, alpha=2)
    torch.addmv_(theirs, torch.tensor(m), torch.tensor(v), beta=0.5, alpha=2)
    _close(ours, theirs)


def test_inplace_form_on_a_leaf_requiring_grad_is_refused_and_leaves_it_intact():
    x = numbagrad.tensor([1.0, -2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        numbagrad.abs_(x)
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, -2.0])


# --- the *_copy forms ------------------------------------------------------------------------------------------------
def test_copy_forms_own_their_storage_and_are_contiguous():
    x = numbagrad.arange(6.0).reshape(2, 3)
    for out in (numbagrad.t_copy(x), numbagrad.transpose_copy(x, 0, 1), numbagrad.permute_copy(x, [1, 0]),
                numbagrad.diagonal_copy(x), numbagrad.slice_copy(x, 1, 0, 3, 2), numbagrad.alias_copy(x)):  # fmt: skip
        assert out.is_contiguous()
        out.add_(100.0)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))


def test_detach_copy_is_a_copy_outside_the_graph():
    x = numbagrad.ones(2, requires_grad=True)
    y = numbagrad.detach_copy(x)
    assert not y.requires_grad and y.grad_fn is None
    y.add_(1.0)
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 1.0])


@pytest.mark.torch
def test_view_copy_to_a_dtype_and_slice_copy_step(torch):
    _close(
        numbagrad.view_copy(numbagrad.tensor([1.0, 2.0]), numbagrad.int32),
        torch.view_copy(torch.tensor([1.0, 2.0]), torch.int32),
    )
    _close(numbagrad.slice_copy(numbagrad.arange(7), 0, -5, None, 2), torch.slice_copy(torch.arange(7), 0, -5, None, 2))


@pytest.mark.torch
def test_unfold_copy_errors_match_torch(torch):
    raises_like(torch, lambda lib: lib.unfold_copy(lib.arange(4.0), 0, 5, 1))


# --- global settings -----------------------------------------------------------------------------------------------
def test_set_num_threads_sets_numbas_and_openblas_thread_counts():
    import numba

    from numbagrad.backend.blas import openblas

    before = numbagrad.get_num_threads()
    try:
        numbagrad.set_num_threads(1)
        assert numbagrad.get_num_threads() == 1
        assert numba.get_num_threads() == 1
        blas = openblas()
        if blas is not None:
            assert blas.get_num_threads() == 1
    finally:
        numbagrad.set_num_threads(before)


@pytest.mark.torch
@pytest.mark.parametrize("bad", [0, -2, 2.5])
def test_set_num_threads_refuses_what_torch_refuses(torch, bad):
    raises_like(torch, lambda lib: lib.set_num_threads(bad))


def test_rng_state_round_trip_replays_the_draws():
    numbagrad.manual_seed(7)
    assert numbagrad.initial_seed() == 7
    state = numbagrad.get_rng_state()
    assert state.dtype == numbagrad.uint8
    first = numbagrad.rand(4)
    numbagrad.set_rng_state(state)
    np.testing.assert_array_equal(numbagrad.rand(4).numpy(), first.numpy())


@pytest.mark.torch
def test_set_rng_state_refuses_a_non_byte_tensor(torch):
    raises_like(torch, lambda lib: lib.set_rng_state(lib.zeros(3)))


def test_set_default_tensor_type_sets_the_default_dtype_and_warns():
    try:
        with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated"):
            numbagrad.set_default_tensor_type("torch.DoubleTensor")
        assert numbagrad.get_default_dtype() == numbagrad.float64
        assert numbagrad.tensor([1.5]).dtype == numbagrad.float64
        with pytest.warns(UserWarning):
            numbagrad.set_default_tensor_type(numbagrad.FloatTensor)
        assert numbagrad.get_default_dtype() == numbagrad.float32
    finally:
        numbagrad.set_default_dtype(numbagrad.float32)


@pytest.mark.torch
def test_matmul_precision_deterministic_and_warn_always_flags_read_back(torch):
    assert numbagrad.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    try:
        numbagrad.set_float32_matmul_precision("medium")
        assert numbagrad.get_float32_matmul_precision() == "medium"
        with pytest.warns(UserWarning, match="is not one of 'highest', 'high', or 'medium'"):
            numbagrad.set_float32_matmul_precision("fast")
        assert numbagrad.get_float32_matmul_precision() == "medium"
    finally:
        numbagrad.set_float32_matmul_precision("highest")
    assert not numbagrad.are_deterministic_algorithms_enabled()
    try:
        numbagrad.use_deterministic_algorithms(True)
        assert numbagrad.are_deterministic_algorithms_enabled()
    finally:
        numbagrad.use_deterministic_algorithms(False)
    raises_like(torch, lambda lib: lib.use_deterministic_algorithms(1))
    numbagrad.set_warn_always(True)
    assert numbagrad.is_warn_always_enabled()
    numbagrad.set_warn_always(False)
    assert not numbagrad.is_warn_always_enabled()


def test_set_anomaly_enabled_switches_anomaly_mode():
    try:
        numbagrad.set_anomaly_enabled(True, check_nan=False)
        assert numbagrad.is_anomaly_enabled() and not numbagrad.is_anomaly_check_nan_enabled()
    finally:
        numbagrad.set_anomaly_enabled(False)
    assert not numbagrad.is_anomaly_enabled() and numbagrad.is_anomaly_check_nan_enabled()


# --- predicates -----------------------------------------------------------------------------------------------------
@pytest.mark.torch
def test_predicates_match_torch(torch):
    for lib_dtype in ("float32", "int64", "uint8", "bool"):
        ours, theirs = (
            numbagrad.zeros(2, dtype=getattr(numbagrad, lib_dtype)),
            torch.zeros(2, dtype=getattr(torch, lib_dtype)),
        )
        assert numbagrad.is_signed(ours) == torch.is_signed(theirs)
        assert numbagrad.typename(ours) == torch.typename(theirs)
        assert numbagrad.is_complex(ours) == torch.is_complex(theirs)
        assert numbagrad.is_conj(ours) == torch.is_conj(theirs)
        assert numbagrad.is_neg(ours) == torch.is_neg(theirs)
        assert numbagrad.get_device(ours) == torch.get_device(theirs)
    assert numbagrad.typename(3) == torch.typename(3)
    assert numbagrad.is_same_size(numbagrad.zeros(2), numbagrad.zeros(2, 1)) is False
    assert numbagrad.is_same_size(numbagrad.zeros(2, 1), numbagrad.zeros(2, 1)) is True
    assert numbagrad.is_nonzero(numbagrad.tensor([3.0])) is True
    assert numbagrad.is_storage(numbagrad.zeros(1)) is False
    dtypes = ("float32", "float64", "int64", "int8", "uint8", "bool")
    for a in dtypes:
        for b in dtypes:
            assert numbagrad.can_cast(getattr(numbagrad, a), getattr(numbagrad, b)) == torch.can_cast(
                getattr(torch, a), getattr(torch, b)
            ), (a, b)


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(2,), (0,)])
def test_is_nonzero_errors_match_torch(torch, shape):
    raises_like(torch, lambda lib: lib.is_nonzero(lib.zeros(shape)))


@pytest.mark.torch
def test_real_tensor_forms_of_the_complex_functions(torch):
    x = numbagrad.tensor([1.0, -2.0])
    assert numbagrad.real(x) is x and numbagrad.conj(x) is x and numbagrad.resolve_conj(x) is x
    assert numbagrad.resolve_neg(x) is x and numbagrad.positive(x) is x
    c = numbagrad.conj_physical(x)
    assert c is not x
    np.testing.assert_array_equal(c.numpy(), x.numpy())
    _close(numbagrad.isreal(x), torch.isreal(torch.tensor([1.0, -2.0])))
    raises_like(torch, lambda lib: lib.imag(lib.tensor([1.0])))
    raises_like(torch, lambda lib: lib.positive(lib.tensor([True])))
    raises_like(torch, lambda lib: lib.adjoint(lib.zeros(3)))
    _close(numbagrad.adjoint(numbagrad.ones(2, 3)), torch.adjoint(torch.ones(2, 3)))


# --- math -----------------------------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("weights", ["none", "fweights", "aweights", "both"])
def test_cov_matches_torch(torch, weights):
    data = RNG.standard_normal((3, 6))
    fw = np.array([1, 2, 1, 3, 1, 2])
    aw = RNG.uniform(0.1, 1.0, 6)
    kwargs_of = {
        "none": lambda lib: {},
        "fweights": lambda lib: {"fweights": lib.tensor(fw)},
        "aweights": lambda lib: {"aweights": lib.tensor(aw)},
        "both": lambda lib: {"fweights": lib.tensor(fw), "aweights": lib.tensor(aw), "correction": 0},
    }[weights]
    _close(
        numbagrad.cov(numbagrad.tensor(data), **kwargs_of(numbagrad)), torch.cov(torch.tensor(data), **kwargs_of(torch))
    )


@pytest.mark.torch
def test_cov_and_corrcoef_of_integers_and_vectors(torch):
    data = [[1, 4, 2, 8], [3, 1, 0, 2]]
    _close(numbagrad.cov(numbagrad.tensor(data)), torch.cov(torch.tensor(data)))
    _close(numbagrad.corrcoef(numbagrad.tensor(data)), torch.corrcoef(torch.tensor(data)), rtol=1e-6)
    _close(numbagrad.cov(numbagrad.tensor([1.0, 2.0, 4.0])), torch.cov(torch.tensor([1.0, 2.0, 4.0])))


def test_cov_and_corrcoef_pass_gradcheck():
    x = numbagrad.tensor(RNG.standard_normal((3, 5)), requires_grad=True)
    assert gradcheck(numbagrad.cov, (x,))
    assert gradcheck(numbagrad.corrcoef, (x,))


@pytest.mark.torch
def test_norm_family_matches_torch(torch):
    data, other = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p in (1, 2, 3, float("inf")):
            _close(
                numbagrad.dist(numbagrad.tensor(data), numbagrad.tensor(other), p),
                torch.dist(torch.tensor(data), torch.tensor(other), p),
            )
        _close(numbagrad.frobenius_norm(numbagrad.tensor(data), 1), torch.frobenius_norm(torch.tensor(data), 1))
        _close(numbagrad.nuclear_norm(numbagrad.tensor(data)), torch.nuclear_norm(torch.tensor(data)))
        _close(numbagrad.nuclear_norm(numbagrad.tensor(data), True), torch.nuclear_norm(torch.tensor(data), True))
        for dim in (0, 1, -1):
            _close(
                numbagrad.norm_except_dim(numbagrad.tensor(data), 2, dim),
                torch.norm_except_dim(torch.tensor(data), 2, dim),
            )


def test_dist_passes_gradcheck():
    a = numbagrad.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    b = numbagrad.tensor(RNG.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda x, y: numbagrad.dist(x, y, 3), (a, b))


@pytest.mark.torch
def test_trapz_msort_nextafter_and_angle(torch):
    y, x = RNG.standard_normal((2, 5)), np.cumsum(RNG.uniform(0.1, 1, 5))
    _close(numbagrad.trapz(numbagrad.tensor(y)), torch.trapz(torch.tensor(y)))
    _close(numbagrad.trapz(numbagrad.tensor(y), numbagrad.tensor(x)), torch.trapz(torch.tensor(y), torch.tensor(x)))
    _close(numbagrad.trapz(numbagrad.tensor(y), dx=0.5, dim=0), torch.trapz(torch.tensor(y), dx=0.5, dim=0))
    _close(numbagrad.msort(numbagrad.tensor(y)), torch.msort(torch.tensor(y)))
    for dtype in ("float32", "float64"):
        a = numbagrad.tensor([1.0, 0.0, -1.0], dtype=getattr(numbagrad, dtype))
        b = numbagrad.tensor([2.0, -1.0, -2.0], dtype=getattr(numbagrad, dtype))
        _close(numbagrad.nextafter(a, b), torch.nextafter(torch.tensor(a.numpy()), torch.tensor(b.numpy())), rtol=0)
    for values in ([-1.0, float("nan"), 2.0, -0.0], [-3, 0, 2]):
        _close(numbagrad.angle(numbagrad.tensor(values)), torch.angle(torch.tensor(values)))


@pytest.mark.torch
@pytest.mark.parametrize(
    "name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]
)
@pytest.mark.parametrize("length", [0, 1, 2, 7])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(torch, name, length, periodic):
    _close(getattr(numbagrad, name)(length, periodic), getattr(torch, name)(length, periodic), atol=1e-6)
    _close(getattr(numbagrad, name)(length, periodic, dtype=numbagrad.float64),
           getattr(torch, name)(length, periodic, dtype=torch.float64), atol=1e-12)  # fmt: skip


@pytest.mark.torch
def test_window_parameters_and_integer_dtype_error(torch):
    _close(numbagrad.hamming_window(6, False, 0.5, 0.4), torch.hamming_window(6, False, 0.5, 0.4), atol=1e-6)
    _close(numbagrad.kaiser_window(6, True, 3.0), torch.kaiser_window(6, True, 3.0), atol=1e-6)
    raises_like(torch, lambda lib: lib.hann_window(5, dtype=lib.int64))


@pytest.mark.torch
def test_creation_functions_match_torch(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(numbagrad.range(0, 1, 0.25), torch.range(0, 1, 0.25))
        _close(numbagrad.range(1, 4), torch.range(1, 4))
        _close(numbagrad.range(3, 0, -1, dtype=numbagrad.int64), torch.range(3, 0, -1, dtype=torch.int64))
    _close(numbagrad.scalar_tensor(3), torch.scalar_tensor(3))
    _close(numbagrad.scalar_tensor(3, dtype=numbagrad.int64), torch.scalar_tensor(3, dtype=torch.int64))
    _close(numbagrad.fill(numbagrad.zeros(2, 3), 2), torch.fill(torch.zeros(2, 3), 2))
    ours = numbagrad.empty_strided((2, 3), (1, 2))
    assert ours.stride() == torch.empty_strided((2, 3), (1, 2)).stride()
    assert (
        numbagrad.empty_permuted((2, 3, 4), (0, 2, 1)).stride() == torch.empty_permuted((2, 3, 4), (0, 2, 1)).stride()
    )
    raises_like(torch, lambda lib: lib.fill(lib.zeros(2), lib.tensor([1.0])))


def test_range_warns_that_it_is_deprecated():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        numbagrad.range(0, 2)


def test_fill_with_a_tensor_value_passes_the_gradient_to_it():
    value = numbagrad.tensor(2.0, requires_grad=True)
    numbagrad.fill(numbagrad.zeros(2, 3), value).sum().backward()
    assert value.grad.item() == 6.0


@pytest.mark.torch
def test_frombuffer_shares_the_buffers_memory(torch):
    buffer = bytearray(np.arange(6, dtype=np.int16).tobytes())
    ours = numbagrad.frombuffer(buffer, dtype=numbagrad.int16, count=3, offset=2)
    _close(ours, torch.frombuffer(bytearray(buffer), dtype=torch.int16, count=3, offset=2))
    buffer[2] = 9
    assert ours[0].item() == 9
    raises_like(torch, lambda lib: lib.frombuffer(bytearray(3), dtype=lib.int16))


@pytest.mark.torch
def test_unravel_index_matches_torch(torch):
    for indices, shape in [([4, 1, -1], (2, 3)), (5, (2, 3)), ([[0, 23], [7, 11]], (2, 3, 4))]:
        ours = numbagrad.unravel_index(numbagrad.tensor(indices), shape)
        theirs = torch.unravel_index(torch.tensor(indices), shape)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _close(a, b)
    with pytest.raises(TypeError, match="expected 'indices' to be integer dtype, but got numbagrad.float32"):
        numbagrad.unravel_index(numbagrad.tensor([0.5]), (2, 3))


@pytest.mark.torch
def test_bitwise_shifts_match_torch(torch):
    for dtype in ("int64", "int32", "uint8"):
        a = [1, 5, 100, 7]
        for shift in ([0, 1, 3, 2], 2, [40, 1, 70, 0]):
            ours = numbagrad.tensor(shift) if isinstance(shift, list) else shift
            theirs = torch.tensor(shift) if isinstance(shift, list) else shift
            x, tx = numbagrad.tensor(a, dtype=getattr(numbagrad, dtype)), torch.tensor(a, dtype=getattr(torch, dtype))
            _close(numbagrad.bitwise_left_shift(x, ours), torch.bitwise_left_shift(tx, theirs))
            _close(numbagrad.bitwise_right_shift(x, ours), torch.bitwise_right_shift(tx, theirs))
    _close(
        numbagrad.bitwise_right_shift(numbagrad.tensor([-8, -1]), 1),
        torch.bitwise_right_shift(torch.tensor([-8, -1]), 1),
    )
    raises_like(torch, lambda lib: lib.bitwise_left_shift(lib.tensor([1.0]), 2))


@pytest.mark.torch
def test_histogram_and_histogramdd_match_torch(torch):
    data = RNG.standard_normal(50).astype(np.float32)
    weight = RNG.uniform(0, 1, 50).astype(np.float32)
    for kwargs in [{}, {"range": (-1.0, 1.0)}, {"density": True}]:
        ours = numbagrad.histogram(numbagrad.tensor(data), 7, **kwargs)
        theirs = torch.histogram(torch.tensor(data), 7, **kwargs)
        _close(ours.hist, theirs.hist, rtol=1e-6)
        _close(ours.bin_edges, theirs.bin_edges, rtol=1e-6)
    ours = numbagrad.histogram(
        numbagrad.tensor(data), numbagrad.tensor([-1.0, 0.0, 2.0]), weight=numbagrad.tensor(weight)
    )
    theirs = torch.histogram(torch.tensor(data), torch.tensor([-1.0, 0.0, 2.0]), weight=torch.tensor(weight))
    _close(ours.hist, theirs.hist, rtol=1e-6)
    points = RNG.standard_normal((20, 2))
    ours = numbagrad.histogramdd(numbagrad.tensor(points), [3, 4], range=[-2.0, 2.0, -1.0, 1.0])
    theirs = torch.histogramdd(torch.tensor(points), [3, 4], range=[-2.0, 2.0, -1.0, 1.0])
    _close(ours.hist, theirs.hist)
    for a, b in zip(ours.bin_edges, theirs.bin_edges):
        _close(a, b)
    raises_like(torch, lambda lib: lib.histogram(lib.tensor([1, 2]), 3))


@pytest.mark.torch
def test_put_matches_torch_and_is_differentiable(torch):
    for accumulate in (False, True):
        ours = numbagrad.put(
            numbagrad.zeros(2, 3), numbagrad.tensor([1, -1, 1]), numbagrad.tensor([5.0, 6.0, 7.0]), accumulate
        )
        theirs = torch.put(torch.zeros(2, 3), torch.tensor([1, -1, 1]), torch.tensor([5.0, 6.0, 7.0]), accumulate)
        if accumulate:
            _close(ours, theirs)
        else:
            assert ours[0, 1].item() in (5.0, 7.0) and ours[1, 2].item() == 6.0
    x = numbagrad.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    src = numbagrad.tensor(RNG.standard_normal(2), requires_grad=True)
    assert gradcheck(lambda a, s: numbagrad.put(a, numbagrad.tensor([0, 4]), s, True), (x, src))
    y = numbagrad.zeros(4)
    assert y.put_(numbagrad.tensor([2]), numbagrad.tensor([1.0])) is y
    assert y[2].item() == 1.0


@pytest.mark.torch
def test_nonzero_static_pads_or_cuts_to_size(torch):
    for size in (0, 1, 2, 5):
        data = [[1, 0], [0, 3]]
        _close(numbagrad.nonzero_static(numbagrad.tensor(data), size=size, fill_value=-7),
               torch.nonzero_static(torch.tensor(data), size=size, fill_value=-7))  # fmt: skip


def test_from_file_reads_and_maps_raw_bytes(tmp_path):
    path = tmp_path / "values.bin"
    np.arange(5, dtype=np.float32).tofile(path)
    np.testing.assert_array_equal(numbagrad.from_file(str(path), size=3).numpy(), [0.0, 1.0, 2.0])
    mapped = numbagrad.from_file(str(path), True, 5)
    mapped[0] = 42.0
    mapped._data.flush()
    assert np.fromfile(path, dtype=np.float32)[0] == 42.0
    with pytest.raises(RuntimeError, match="unexpected EOF"):
        numbagrad.from_file(str(path), size=9)


def test_binomial_draws_counts_between_zero_and_count():
    count = numbagrad.full((1000,), 10.0)
    draws = numbagrad.binomial(count, numbagrad.full((1000,), 0.3))
    assert draws.dtype == numbagrad.float32
    values = draws.numpy()
    assert values.min() >= 0 and values.max() <= 10 and np.all(values == np.round(values))
    assert abs(values.mean() - 3.0) < 0.3
    with pytest.raises(ValueError, match="binomial only supports floating-point dtypes for count, got: Long"):
        numbagrad.binomial(numbagrad.tensor([5]), numbagrad.tensor([0.5]))


@pytest.mark.torch
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"spacing": 2.0}, {"spacing": [2.0, 0.5]}, {"edge_order": 2}, {"dim": 1, "spacing": 3.0, "edge_order": 2},
     {"dim": [0]}],
)  # fmt: skip
def test_gradient_matches_torch(torch, kwargs):
    data = RNG.standard_normal((4, 5))
    ours, theirs = numbagrad.gradient(numbagrad.tensor(data), **kwargs), torch.gradient(torch.tensor(data), **kwargs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _close(a, b)


@pytest.mark.torch
@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_with_coordinates_matches_torch(torch, edge_order):
    data, coords = RNG.standard_normal((3, 5)), np.array([0.0, 1.0, 3.0, 4.0, 7.0])
    ours = numbagrad.gradient(numbagrad.tensor(data), spacing=(numbagrad.tensor(coords),), dim=1, edge_order=edge_order)
    theirs = torch.gradient(torch.tensor(data), spacing=(torch.tensor(coords),), dim=1, edge_order=edge_order)
    _close(ours[0], theirs[0])


@pytest.mark.torch
def test_gradient_errors_match_torch(torch):
    raises_like(torch, lambda lib: lib.gradient(lib.tensor([1.0, 2.0]), edge_order=2))


def test_gradient_passes_gradcheck():
    x = numbagrad.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(lambda t: numbagrad.gradient(t, spacing=0.5, edge_order=2), (x,))


# --- legacy linear algebra -----------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("name", ["solve", "lstsq", "symeig", "eig", "matrix_rank"])
def test_removed_linalg_functions_raise_torchs_error(torch, name):
    raises_like(torch, lambda lib: getattr(lib, name)(lib.eye(2), lib.eye(2)))


@pytest.mark.torch
def test_lu_lu_solve_and_triangular_solve_match_torch(torch):
    a, b = RNG.standard_normal((3, 3)), RNG.standard_normal((3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = numbagrad.lu(numbagrad.tensor(a)), torch.lu(torch.tensor(a))
        _close(ours[0], theirs[0])
        _close(ours[1], theirs[1])
        _close(numbagrad.lu_solve(numbagrad.tensor(b), *ours), torch.lu_solve(torch.tensor(b), *theirs))
        assert len(numbagrad.lu(numbagrad.tensor(a), get_infos=True)) == 3
        tri = np.triu(a) + 3 * np.eye(3)
        for upper, transpose, unit in [(True, False, False), (True, True, False), (False, False, True)]:
            m = tri if upper else tri.T
            ours = numbagrad.triangular_solve(numbagrad.tensor(b), numbagrad.tensor(m), upper, transpose, unit)
            theirs = torch.triangular_solve(torch.tensor(b), torch.tensor(m), upper, transpose, unit)
            _close(ours.solution, theirs.solution)
            _close(ours.cloned_coefficient, theirs.cloned_coefficient)


def test_lu_warns_that_it_is_deprecated():
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        numbagrad.lu(numbagrad.eye(2))


@pytest.mark.torch
@pytest.mark.parametrize(("left", "transpose"), [(True, False), (True, True), (False, False), (False, True)])
def test_ormqr_matches_torch(torch, left, transpose):
    a, tau = torch.geqrf(torch.tensor(RNG.standard_normal((4, 3))))
    other = RNG.standard_normal((4, 2) if left else (2, 4))
    ours = numbagrad.ormqr(
        numbagrad.tensor(a.numpy()), numbagrad.tensor(tau.numpy()), numbagrad.tensor(other), left, transpose
    )
    _close(ours, torch.ormqr(a, tau, torch.tensor(other), left, transpose))


# --- distances and recurrent layers ---------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_matches_torch(torch, p):
    a, b = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((1, 5, 3))
    x1, x2 = numbagrad.tensor(a, requires_grad=True), numbagrad.tensor(b, requires_grad=True)
    t1, t2 = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ours, theirs = numbagrad.cdist(x1, x2, p), torch.cdist(t1, t2, p)
    _close(ours, theirs)
    if p > 0:
        ours.sum().backward()
        theirs.sum().backward()
        _close(x1.grad, t1.grad)
        _close(x2.grad, t2.grad)


@pytest.mark.torch
def test_cdist_errors_match_torch(torch):
    raises_like(torch, lambda lib: lib.cdist(lib.zeros(3), lib.zeros(2, 3)))
    raises_like(torch, lambda lib: lib.cdist(lib.zeros(2, 3), lib.zeros(2, 4)))
    raises_like(torch, lambda lib: lib.cdist(lib.zeros(2, 3), lib.zeros(2, 3), -1.0))


def _weights(torch, gates: int, sizes: list, hidden: int):
    arrays = []
    for inputs in sizes:
        arrays += [RNG.standard_normal((gates * hidden, inputs)), RNG.standard_normal((gates * hidden, hidden)),
                   RNG.standard_normal(gates * hidden), RNG.standard_normal(gates * hidden)]  # fmt: skip
    return [numbagrad.tensor(a, requires_grad=True) for a in arrays], [
        torch.tensor(a, requires_grad=True) for a in arrays
    ]


@pytest.mark.torch
@pytest.mark.parametrize(
    ("name", "gates"), [("lstm_cell", 4), ("gru_cell", 3), ("rnn_tanh_cell", 1), ("rnn_relu_cell", 1)]
)
def test_cells_match_torch(torch, name, gates):
    ours_w, theirs_w = _weights(torch, gates, [3], 4)
    x, h, c = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4)), RNG.standard_normal((2, 4))
    ours_hx = (numbagrad.tensor(h), numbagrad.tensor(c)) if name == "lstm_cell" else numbagrad.tensor(h)
    theirs_hx = (torch.tensor(h), torch.tensor(c)) if name == "lstm_cell" else torch.tensor(h)
    ours = getattr(numbagrad, name)(numbagrad.tensor(x), ours_hx, *ours_w)
    theirs = getattr(torch, name)(torch.tensor(x), theirs_hx, *theirs_w)
    ours, theirs = (ours, theirs) if isinstance(ours, tuple) else ((ours,), (theirs,))
    for a, b in zip(ours, theirs):
        _close(a, b)
    sum(a.sum() for a in ours).backward()
    sum(b.sum() for b in theirs).backward()
    for a, b in zip(ours_w, theirs_w):
        _close(a.grad, b.grad)


@pytest.mark.torch
@pytest.mark.parametrize(("name", "gates"), [("lstm", 4), ("gru", 3), ("rnn_tanh", 1), ("rnn_relu", 1)])
@pytest.mark.parametrize(("bidirectional", "batch_first"), [(False, False), (True, True)])
def test_recurrent_layers_with_flat_weights_match_torch(torch, name, gates, bidirectional, batch_first):
    steps, batch, features, hidden, layers = 3, 2, 3, 4, 2
    directions = 2 if bidirectional else 1
    sizes = [features] * directions + [hidden * directions] * directions
    ours_w, theirs_w = _weights(torch, gates, sizes, hidden)
    x = RNG.standard_normal((batch, steps, features) if batch_first else (steps, batch, features))
    h, c = RNG.standard_normal((2, layers * directions, batch, hidden))
    ours_hx = (numbagrad.tensor(h), numbagrad.tensor(c)) if name == "lstm" else numbagrad.tensor(h)
    theirs_hx = (torch.tensor(h), torch.tensor(c)) if name == "lstm" else torch.tensor(h)
    args = (True, layers, 0.0, False, bidirectional, batch_first)
    ours = getattr(numbagrad, name)(numbagrad.tensor(x), ours_hx, ours_w, *args)
    theirs = getattr(torch, name)(torch.tensor(x), theirs_hx, theirs_w, *args)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _close(a, b)
    sum(a.sum() for a in ours).backward()
    sum(b.sum() for b in theirs).backward()
    for a, b in zip(ours_w, theirs_w):
        _close(a.grad, b.grad)


def test_recurrent_layer_checks_the_weight_count():
    w = [numbagrad.zeros(4, 3), numbagrad.zeros(4, 4)]
    with pytest.raises(RuntimeError, match="expected 4 weights"):
        numbagrad.rnn_tanh(numbagrad.zeros(2, 1, 3), numbagrad.zeros(1, 1, 4), w, True, 1, 0.0, False, False, False)


# --- scatter_reduce -------------------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_reduce_matches_torch(torch, reduce, include_self, dim):
    shape = (2, 4) if dim == 0 else (3, 3)
    data, src, index = RNG.standard_normal((3, 4)), RNG.standard_normal(shape), RNG.integers(0, 3, shape)
    weights = RNG.standard_normal((3, 4))
    x, s = numbagrad.tensor(data, requires_grad=True), numbagrad.tensor(src, requires_grad=True)
    tx, ts = torch.tensor(data, requires_grad=True), torch.tensor(src, requires_grad=True)
    ours = numbagrad.scatter_reduce(x, dim, numbagrad.tensor(index), s, reduce, include_self=include_self)
    theirs = torch.scatter_reduce(tx, dim, torch.tensor(index), ts, reduce, include_self=include_self)
    _close(ours, theirs)
    (ours * numbagrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    _close(x.grad, tx.grad)
    _close(s.grad, ts.grad)


@pytest.mark.torch
def test_scatter_reduce_shares_the_gradient_among_tied_maxima_and_is_exact_at_zeros(torch):
    for reduce, data, src in [("amax", [1.0, 2.0], [2.0, 2.0, 0.5]), ("prod", [0.0, 3.0], [2.0, 0.0, 4.0])]:
        index = [0, 1, 1]
        x, s = numbagrad.tensor(data, requires_grad=True), numbagrad.tensor(src, requires_grad=True)
        tx, ts = torch.tensor(data, requires_grad=True), torch.tensor(src, requires_grad=True)
        numbagrad.scatter_reduce(x, 0, numbagrad.tensor(index), s, reduce).sum().backward()
        torch.scatter_reduce(tx, 0, torch.tensor(index), ts, reduce).sum().backward()
        _close(x.grad, tx.grad)
        _close(s.grad, ts.grad)


@pytest.mark.torch
def test_scatter_reduce_mean_of_integers_floors_like_torch(torch):
    def run(lib):
        return lib.scatter_reduce(lib.tensor([5, 5, 5]), 0, lib.tensor([0, 0, 1]), lib.tensor([-3, 2, 4]), "mean")

    _close(run(numbagrad), run(torch))


def test_scatter_reduce_passes_gradcheck_and_gradgradcheck():
    from numbagrad.autograd import gradgradcheck

    x = numbagrad.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    s = numbagrad.tensor(RNG.standard_normal((4, 2)), requires_grad=True)
    index = numbagrad.tensor([[0, 1], [0, 1], [2, 0], [0, 0]])
    for reduce in ("prod", "mean", "amax"):

        def fn(a, b, reduce=reduce):
            return numbagrad.scatter_reduce(a, 0, index, b, reduce)

        assert gradcheck(fn, (x, s))
        assert gradgradcheck(fn, (x, s))


@pytest.mark.torch
def test_scatter_reduce_errors_match_torch(torch):
    raises_like(torch, lambda lib: lib.scatter_reduce(lib.zeros(3), 0, lib.tensor([0]), lib.ones(1), "median"))
    raises_like(torch, lambda lib: lib.scatter_reduce(lib.zeros(3), 0, lib.tensor([5]), lib.ones(1), "sum"))
    raises_like(
        torch, lambda lib: lib.scatter_reduce(lib.zeros(3), 0, lib.tensor([0]), lib.ones(1, dtype=lib.float64), "sum")
    )
    raises_like(torch, lambda lib: lib.scatter_reduce(lib.zeros(3), 0, lib.tensor([[0]]), lib.ones(1, 1), "sum"))


@pytest.mark.torch
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_scatter_reduce_takes_torchs_older_names_max_and_min(torch, reduce):
    def run(lib):
        return lib.scatter_reduce(lib.ones(3), 0, lib.tensor([0, 0]), lib.tensor([3.0, -2.0]), reduce)

    _close(run(numbagrad), run(torch))


# --- randomized low-rank decompositions -----------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("shape", [(8, 6), (6, 8), (2, 8, 6)])
def test_svd_lowrank_recovers_a_low_rank_matrix_with_torchs_shapes(torch, shape):
    low_rank = RNG.standard_normal((*shape[:-1], 3)) @ RNG.standard_normal((*shape[:-2], 3, shape[-1]))
    u, s, v = numbagrad.svd_lowrank(numbagrad.tensor(low_rank), q=4)
    tu, ts, tv = torch.svd_lowrank(torch.tensor(low_rank), q=4)
    assert (u.shape, s.shape, v.shape) == (tuple(tu.shape), tuple(ts.shape), tuple(tv.shape))
    rebuilt = (u * s.unsqueeze(-2)) @ v.transpose(-2, -1)
    np.testing.assert_allclose(rebuilt.numpy(), low_rank, atol=1e-9)
    np.testing.assert_allclose(s.numpy()[..., :3], ts.numpy()[..., :3], rtol=1e-9)


@pytest.mark.torch
def test_pca_lowrank_centres_and_matches_torchs_spectrum(torch):
    data = RNG.standard_normal((10, 3)) @ RNG.standard_normal((3, 5)) + 4.0
    _, s, v = numbagrad.pca_lowrank(numbagrad.tensor(data))
    _, ts, tv = torch.pca_lowrank(torch.tensor(data))
    assert tuple(v.shape) == tuple(tv.shape)
    np.testing.assert_allclose(s.numpy()[:3], ts.numpy()[:3], rtol=1e-9)
    raises_like(torch, lambda lib: lib.pca_lowrank(lib.zeros(3, 4), q=5))


# --- segment_reduce -------------------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "max", "min"])
@pytest.mark.parametrize("initial", [None, 10.0])
def test_segment_reduce_matches_torch(torch, reduce, initial):
    data = RNG.standard_normal(6)
    x, tx = numbagrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    ours = numbagrad.segment_reduce(x, reduce, lengths=numbagrad.tensor([2, 0, 4]), initial=initial)
    theirs = torch.segment_reduce(tx, reduce, lengths=torch.tensor([2, 0, 4]), initial=initial)
    _close(ours, theirs)
    if initial is not None:  # (an empty segment's NaN or inf would poison the sum)
        ours.sum().backward()
        theirs.sum().backward()
        _close(x.grad, tx.grad)


@pytest.mark.torch
def test_segment_reduce_by_offsets_and_per_row_lengths(torch):
    data = np.arange(10.0).reshape(2, 5)
    for kwargs in ({"lengths": [[2, 3], [1, 4]], "axis": 1}, {"offsets": [[0, 2, 5], [0, 1, 5]], "axis": 1}):
        ours = numbagrad.segment_reduce(
            numbagrad.tensor(data), "sum", **{k: numbagrad.tensor(v) if k != "axis" else v for k, v in kwargs.items()}
        )
        theirs = torch.segment_reduce(
            torch.tensor(data), "sum", **{k: torch.tensor(v) if k != "axis" else v for k, v in kwargs.items()}
        )
        _close(ours, theirs)
    _close(numbagrad.segment_reduce(numbagrad.tensor(data.T), "mean", lengths=numbagrad.tensor([2, 3])),
           torch.segment_reduce(torch.tensor(data.T), "mean", lengths=torch.tensor([2, 3])))  # fmt: skip


@pytest.mark.torch
def test_segment_reduce_errors_match_torch(torch):
    data = [1.0, 2.0, 3.0]
    raises_like(torch, lambda lib: lib.segment_reduce(lib.tensor(data), "sum", lengths=lib.tensor([1, 1])))
    raises_like(torch, lambda lib: lib.segment_reduce(lib.tensor(data), "sum"))
    raises_like(torch, lambda lib: lib.segment_reduce(lib.tensor(data), "sum", lengths=lib.tensor([4, -1])))
    raises_like(torch, lambda lib: lib.segment_reduce(lib.tensor(data), "foo", lengths=lib.tensor([3])))
    raises_like(torch, lambda lib: lib.segment_reduce(lib.tensor(data), "sum", indices=lib.tensor([0, 0, 1])))


@pytest.mark.parametrize(("name", "args"), [("frobenius_norm", (1,)), ("nuclear_norm", ())])
def test_deprecated_matrix_norms_warn_like_torch(name, args):
    with pytest.warns(UserWarning, match=f"at::{name} is deprecated"):
        getattr(numbagrad, name)(numbagrad.ones(2, 3), *args)


# --- default device ------------------------------------------------------------------------------------------------
def test_factories_put_tensors_on_the_default_device(device):
    assert numbagrad.get_default_device() == numbagrad.device("cpu")
    try:
        numbagrad.set_default_device(device)
        assert numbagrad.get_default_device().type == device
        made = [numbagrad.zeros(2), numbagrad.ones(2), numbagrad.tensor([1.0]), numbagrad.arange(3),
                numbagrad.rand(2), numbagrad.full((2,), 3.0), numbagrad.hann_window(4)]  # fmt: skip
        assert all(t.device.type == device for t in made)
        assert numbagrad.zeros(2, device="cpu").device.type == "cpu"
        host = numbagrad.zeros(2, device="cpu")
        assert numbagrad.zeros_like(host).device.type == "cpu"  # the _like factories follow their input
    finally:
        numbagrad.set_default_device(None)
    assert numbagrad.zeros(2).device.type == "cpu"


# --- lobpcg ---------------------------------------------------------------------------------------------------------
def _spd(size: int) -> np.ndarray:
    m = RNG.standard_normal((size, size))
    return m @ m.T + np.eye(size)


@pytest.mark.torch
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 3])
def test_lobpcg_finds_torchs_eigenpairs(torch, largest, k):
    a = _spd(12)
    values, vectors = numbagrad.lobpcg(numbagrad.tensor(a), k=k, largest=largest)
    theirs, _ = torch.lobpcg(torch.tensor(a), k=k, largest=largest)
    _close(values, theirs, rtol=1e-7)
    residual = a @ vectors.numpy() - vectors.numpy() * values.numpy()
    assert np.abs(residual).max() < 1e-5


def test_lobpcg_solves_the_generalized_problem():
    a, b = _spd(12), _spd(12) + 12 * np.eye(12)
    values, vectors = numbagrad.lobpcg(numbagrad.tensor(a), k=2, B=numbagrad.tensor(b))
    expected = np.sort(np.linalg.eigvals(np.linalg.solve(b, a)).real)[::-1][:2]
    np.testing.assert_allclose(values.numpy(), expected, rtol=1e-7)
    x = vectors.numpy()
    np.testing.assert_allclose(x.T @ b @ x, np.eye(2), atol=1e-9)


@pytest.mark.torch
def test_lobpcg_eigenvalue_gradient_matches_torch(torch):
    a = _spd(12)
    ours, theirs = numbagrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    numbagrad.lobpcg(ours, k=2)[0].sum().backward()
    torch.lobpcg(theirs, k=2)[0].sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=1e-6)


@pytest.mark.torch
def test_lobpcg_refuses_too_many_pairs_for_the_size_and_calls_the_tracker(torch):
    raises_like(torch, lambda lib: lib.lobpcg(lib.eye(12, dtype=lib.float64), k=5))
    steps = []
    numbagrad.lobpcg(numbagrad.tensor(_spd(12)), k=1, tracker=lambda state: steps.append(state["iteration"]))
    assert steps and steps == list(range(len(steps)))


# --- resize_as_ -----------------------------------------------------------------------------------------------------
@pytest.mark.torch
def test_resize_as_keeps_the_elements_in_order_and_bumps_the_version(torch):
    for old, template in [((6,), (2, 2)), ((2, 3), (3, 2)), ((4,), (3, 3)), ((2, 3), (2, 3))]:
        ours, theirs = numbagrad.arange(math_prod(old)).reshape(old), torch.arange(math_prod(old)).reshape(old)
        before = ours._version
        assert numbagrad.resize_as_(ours, numbagrad.zeros(template)) is ours
        torch.resize_as_(theirs, torch.zeros(template))
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype == numbagrad.int64
        kept = min(math_prod(old), math_prod(template))
        np.testing.assert_array_equal(ours.numpy().reshape(-1)[:kept], theirs.numpy().reshape(-1)[:kept])
        assert ours._version == before + (old != template)


def test_resize_as_of_a_contiguous_tensor_that_shrinks_keeps_its_storage():
    x = numbagrad.arange(6.0)
    alias = x.view(2, 3)
    x.resize_as_(numbagrad.zeros(2, 2))
    x[0, 0] = 42.0
    assert alias[0, 0].item() == 42.0


@pytest.mark.torch
def test_resize_as_refuses_a_tensor_that_requires_grad(torch):
    raises_like(torch, lambda lib: lib.resize_as_(lib.zeros(3, requires_grad=True), lib.zeros(2)))


def math_prod(shape) -> int:
    return int(np.prod(shape))
