"""Tensor methods and protocols: new_*, type/type_as, output_nr, memory queries, __format__, __len__,
__iter__, __bool__, the narrow dtypes, finfo/iinfo and the legacy tensor types; and retain_grad across an in-place
op. Each behaviour is compared with torch where torch is installed."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad


# --- retain_grad followed by an in-place op (once silently wrong) --------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    "ops",
    [
        pytest.param(lambda y: y.mul_(3), id="mul_"),
        pytest.param(lambda y: y.add_(1).exp_(), id="add_-exp_"),
        pytest.param(lambda y: y.__setitem__(1, 5.0), id="setitem"),
        pytest.param(lambda y: y.masked_fill_(y > 3, 0.5), id="masked_fill_"),
    ],
)
def test_retained_gradient_after_inplace_ops_is_the_new_versions(torch, ops):
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        ops(y)
        (y * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
        results.append((y.grad.numpy(), x.grad.numpy()))
    (ours_y, ours_x), (theirs_y, theirs_x) = results
    np.testing.assert_allclose(ours_y, theirs_y)
    np.testing.assert_allclose(ours_x, theirs_x)


def test_retained_gradient_after_inplace_op_by_hand():
    x = numbagrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    (y * numbagrad.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 10.0, 100.0])  # d(sum(w * y)) / dy of the new y
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 60.0, 600.0])


# --- __format__ (once silently wrong) -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "spec", "expected"),
    [
        (1.5, "", "1.5"),
        (1.5, ".2f", "1.50"),
        (3, "", "3"),
        (3, ">4", "   3"),
        (True, "", "True"),
        (0.25, "e", "2.500000e-01"),
    ],
)
def test_format_of_a_0d_tensor_formats_its_value(value, spec, expected):
    assert format(numbagrad.tensor(value), spec) == expected


def test_fstring_of_a_0d_element_prints_the_value_not_the_repr():
    x = numbagrad.tensor([1.5, 2.5])
    assert f"{x[0]}" == "1.5"
    assert f"loss: {(x * 2).sum():.3f}" == "loss: 8.000"


def test_format_of_a_0d_float32_tensor_is_the_float32_value_widened():
    assert f"{numbagrad.tensor(0.1)}" == "0.10000000149011612"  # torch's item() of float32 0.1


def test_format_of_a_tensor_with_dims_is_its_repr_and_refuses_a_spec():
    x = numbagrad.tensor([1.5])
    assert f"{x}" == repr(x)
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        format(x, ".2f")


@pytest.mark.torch
@pytest.mark.parametrize("spec", ["", ".3f", "g", "10.2e"])
def test_format_matches_torch(torch, spec):
    for value, dtype in ((2.5, "float64"), (1 / 3, "float32"), (7, "int64")):
        ours = numbagrad.tensor(value, dtype=getattr(numbagrad, dtype))
        theirs = torch.tensor(value, dtype=getattr(torch, dtype))
        assert format(ours, spec) == format(theirs, spec)


# --- Python protocols -----------------------------------------------------------------------------------------------
def test_len_is_the_first_dimension_and_refuses_0d():
    assert len(numbagrad.zeros(4, 2)) == 4
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(numbagrad.tensor(1.0))


def test_iteration_yields_rows_each_an_output_of_one_unbind_node():
    x = numbagrad.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    rows = list(x)
    assert [r.tolist() for r in rows] == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert {type(r.grad_fn).__name__ for r in rows} == {"UnbindBackward0"}
    assert rows[0].grad_fn is rows[2].grad_fn and [r.output_nr for r in rows] == [0, 1, 2]
    (rows[0] * 2 + rows[2]).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]])


def test_iteration_over_a_0d_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(numbagrad.tensor(1.0))


@pytest.mark.parametrize(("data", "expected"), [([0.0], False), ([2.0], True), (3, True), ([[0]], False)])
def test_bool_of_a_one_element_tensor_is_its_truth(data, expected):
    assert bool(numbagrad.tensor(data)) is expected


@pytest.mark.parametrize(("data", "words"), [([1.0, 2.0], "more than one value"), ([], "no values")])
def test_bool_of_other_tensors_is_ambiguous(data, words):
    with pytest.raises(RuntimeError, match=f"Boolean value of Tensor with {words} is ambiguous"):
        bool(numbagrad.tensor(data))


# --- memory queries -------------------------------------------------------------------------------------------------
def test_memory_queries_follow_the_storage():
    x = numbagrad.zeros(2, 3)
    assert x.stride() == (3, 1) and x.stride(0) == 3 and x.t().stride() == (1, 3)
    assert x.is_contiguous() and not x.t().is_contiguous()
    assert x.element_size() == 4 and x.itemsize == 4
    assert x.nbytes == 24 and x[:, ::2].nbytes == 16  # numel * itemsize, whatever the strides
    assert numbagrad.tensor([1, 2, 3], dtype=numbagrad.int16).nbytes == 6
    assert x.data_ptr() == x.numpy().__array_interface__["data"][0]
    assert x[1].data_ptr() == x.data_ptr() + 12


def test_output_nr_is_the_position_among_the_nodes_outputs():
    x = numbagrad.ones(3, requires_grad=True)
    assert x.output_nr == 0
    assert [t.output_nr for t in (x * 1).unbind()] == [0, 1, 2]
    values, indices = (x * 1).max(0)
    assert values.output_nr == 0


# --- new tensors ----------------------------------------------------------------------------------------------------
def test_new_factories_take_the_tensors_dtype_unless_given():
    x = numbagrad.tensor([1.0, 2.0], dtype=numbagrad.float64)
    assert x.new_zeros(2, 3).dtype is numbagrad.float64 and x.new_zeros((2, 3)).shape == (2, 3)
    assert x.new_ones(2, dtype=numbagrad.int64).tolist() == [1, 1]
    assert x.new_full((2,), 3).tolist() == [3.0, 3.0] and x.new_full((2,), 3).dtype is numbagrad.float64
    assert x.new_empty(4).shape == (4,) and x.new_empty(4).dtype is numbagrad.float64
    t = x.new_tensor([1, 2])
    assert t.dtype is numbagrad.float64 and t.tolist() == [1.0, 2.0]
    assert x.new_zeros(2, requires_grad=True).requires_grad


def test_legacy_new_makes_shapes_data_or_empty_in_the_tensors_dtype():
    x = numbagrad.tensor([1, 2])
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype is numbagrad.int64
    assert x.new([1.7, 2.2]).tolist() == [1, 2]
    assert x.new().shape == (0,)
    assert x.new(x) is x


# --- types ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dtype", "name"),
    [("float32", "FloatTensor"), ("float64", "DoubleTensor"), ("float16", "HalfTensor"), ("int64", "LongTensor"),
     ("int32", "IntTensor"), ("int16", "ShortTensor"), ("int8", "CharTensor"), ("uint8", "ByteTensor"),
     ("bool", "BoolTensor")],
)  # fmt: skip
def test_type_names_the_tensor_type_and_converts_by_name_class_or_dtype(dtype, name):
    x = numbagrad.tensor([1, 0], dtype=getattr(numbagrad, dtype))
    assert x.type() == f"torch.{name}"
    legacy = getattr(numbagrad, name)
    other = numbagrad.float32 if dtype == "float64" else numbagrad.float64
    assert isinstance(x, legacy) and not isinstance(x.to(other), legacy)
    y = numbagrad.tensor([1.5, 0.0]).type(f"torch.{name}")
    assert y.dtype is getattr(numbagrad, dtype)
    assert numbagrad.tensor([1.5]).type(legacy).dtype is getattr(numbagrad, dtype)


def test_type_of_an_unknown_name_is_torchs_value_error():
    with pytest.raises(ValueError, match="invalid type: 'float'"):
        numbagrad.tensor([1.0]).type("float")


def test_type_to_the_same_dtype_returns_the_tensor_itself_and_otherwise_records_a_copy_node():
    x = numbagrad.tensor([1.0], requires_grad=True)
    assert x.type(numbagrad.float32) is x
    assert type(x.type(numbagrad.float64).grad_fn).__name__ == "ToCopyBackward0"


def test_type_as_takes_the_other_tensors_dtype():
    assert numbagrad.tensor([1.7]).type_as(numbagrad.tensor([1], dtype=numbagrad.int32)).tolist() == [1]


def test_legacy_constructors_make_shapes_data_and_empty_tensors():
    assert numbagrad.LongTensor([1.7, 2.2]).tolist() == [1, 2]
    assert numbagrad.FloatTensor(2, 3).shape == (2, 3) and numbagrad.FloatTensor(2, 3).dtype is numbagrad.float32
    assert numbagrad.FloatTensor([[1, 2], [3, 4]]).dtype is numbagrad.float32
    assert numbagrad.LongTensor().shape == (0,) and numbagrad.LongTensor(numbagrad.Size([2])).shape == (2,)
    assert numbagrad.ByteTensor([1, 2]).dtype is numbagrad.uint8 and numbagrad.BoolTensor([1, 0]).tolist() == [
        True,
        False,
    ]
    assert repr(numbagrad.FloatTensor) == "<class 'numbagrad.FloatTensor'>"


def test_legacy_constructor_of_a_tensor_of_another_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="expected TensorOptions\\(dtype=float, .*got TensorOptions\\(dtype=long int"):
        numbagrad.FloatTensor(numbagrad.tensor([1, 2]))


@pytest.mark.parametrize("conversion", ["half", "short", "char", "byte"])
def test_narrow_conversion_methods(conversion):
    dtype = {"half": numbagrad.float16, "short": numbagrad.int16, "char": numbagrad.int8, "byte": numbagrad.uint8}
    assert getattr(numbagrad.tensor([1.0, 2.0]), conversion)().dtype is dtype[conversion]


# --- finfo / iinfo --------------------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_finfo_matches_torch(torch, name):
    ours, theirs = numbagrad.finfo(getattr(numbagrad, name)), torch.finfo(getattr(torch, name))
    assert repr(ours) == repr(theirs)
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, field) == getattr(theirs, field), field


@pytest.mark.torch
@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(torch, name):
    ours, theirs = numbagrad.iinfo(getattr(numbagrad, name)), torch.iinfo(getattr(torch, name))
    assert repr(ours) == repr(theirs)
    assert (ours.bits, ours.max, ours.min, ours.dtype) == (theirs.bits, theirs.max, theirs.min, theirs.dtype)


def test_finfo_defaults_to_the_default_dtype():
    assert numbagrad.finfo() == numbagrad.finfo(numbagrad.float32)
    assert numbagrad.finfo().eps == np.finfo(np.float32).eps


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: numbagrad.finfo(numbagrad.int32), "torch.finfo\\(\\) requires a floating point input type"),
        (lambda: numbagrad.iinfo(numbagrad.float32), "torch.iinfo\\(\\) requires an integer input type"),
        (lambda: numbagrad.iinfo(numbagrad.bool), "torch.bool is not supported by torch.iinfo"),
        (lambda: numbagrad.finfo("float32"), "must be torch.dtype, not str"),
    ],
)
def test_finfo_and_iinfo_refuse_the_other_kind(call, message):
    with pytest.raises(TypeError, match=message):
        call()


# --- narrow dtypes --------------------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    ("a", "b"),
    [("uint8", "int8"), ("uint8", "int16"), ("int8", "int16"), ("float16", "int64"), ("float16", "float32"),
     ("bool", "uint8"), ("uint8", "int64"), ("float16", "float64")],
)  # fmt: skip
def test_promotion_of_narrow_dtypes_matches_torch(torch, a, b):
    ours = numbagrad.promote_types(getattr(numbagrad, a), getattr(numbagrad, b))
    assert ours.name == str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[1]
    x = numbagrad.tensor([1, 2], dtype=getattr(numbagrad, a)) + numbagrad.tensor([3, 4], dtype=getattr(numbagrad, b))
    assert x.dtype is ours


@pytest.mark.torch
def test_python_ints_wrap_around_in_uint8_arithmetic_as_torch(torch):
    for op in (lambda t: t + 100, lambda t: t * 300, lambda t: t - 3):
        ours = op(numbagrad.tensor([200, 1], dtype=numbagrad.uint8))
        theirs = op(torch.tensor([200, 1], dtype=torch.uint8))
        assert ours.dtype is numbagrad.uint8 and ours.tolist() == theirs.tolist()


@pytest.mark.torch
@pytest.mark.parametrize("op", ["exp", "sin", "sqrt", "tanh", "sigmoid", "log1p", "erf"])
def test_float16_ops_compute_in_float32_and_store_float16_as_torch(torch, op):
    data = np.linspace(0.1, 3.0, 17)
    ours = getattr(numbagrad, op)(numbagrad.tensor(data, dtype=numbagrad.float16))
    theirs = getattr(torch, op)(torch.tensor(data, dtype=torch.float16))
    assert ours.dtype is numbagrad.float16
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.torch
def test_float16_gradients_and_binary_ops_match_torch(torch):
    data = np.linspace(-2.0, 2.0, 9)
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor(data, dtype=lib.float16, requires_grad=True)
        y = (x * x / 3 + x.tanh()).sum()
        y.backward()
        results.append((y.detach().numpy(), x.grad.numpy(), x.grad.dtype))
    (y_ours, g_ours, dt), (y_theirs, g_theirs, _) = results
    assert dt is numbagrad.float16
    np.testing.assert_allclose(y_ours, y_theirs, rtol=2e-3)
    np.testing.assert_array_equal(g_ours, g_theirs)


def test_narrow_dtypes_print_with_their_names():
    assert repr(numbagrad.tensor([1, 2], dtype=numbagrad.uint8)) == "tensor([1, 2], dtype=numbagrad.uint8)"
    assert repr(numbagrad.tensor([1.5], dtype=numbagrad.half)) == "tensor([1.5000], dtype=numbagrad.float16)"
    assert numbagrad.half is numbagrad.float16 and numbagrad.short is numbagrad.int16


def test_numpy_arrays_of_narrow_types_convert_and_others_name_the_supported_types():
    assert numbagrad.from_numpy(np.zeros(2, np.int8)).dtype is numbagrad.int8
    with pytest.raises(
        TypeError, match="float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint8, and bool"
    ):
        numbagrad.from_numpy(np.zeros(2, np.uint16))


def test_keyword_size_forms_of_the_factories():
    assert numbagrad.zeros(size=(2, 3)).shape == (2, 3)
    assert numbagrad.ones(size=[2]).tolist() == [1.0, 1.0]
    assert numbagrad.empty(size=(1,)).shape == (1,)
    assert numbagrad.full(size=(2,), fill_value=3.0).tolist() == [3.0, 3.0]
    assert numbagrad.rand(size=(2,)).shape == (2,) and numbagrad.randn(size=(3,)).shape == (3,)
    with pytest.raises(TypeError, match="multiple values for argument 'size'"):
        numbagrad.zeros(2, size=(2,))


# --- the transpose properties x.T, x.mT, x.H, x.mH ---------------------------------------------------------------
TRANSPOSE_CASES = [("T", (2, 3)), ("T", (2, 3, 4)), ("T", (3,)), ("mT", (2, 3)), ("mT", (4, 2, 3)), ("H", (2, 3)),
                   ("mH", (4, 2, 3))]  # fmt: skip


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")
@pytest.mark.parametrize(("attr", "shape"), TRANSPOSE_CASES)
def test_transpose_properties_match_torch(torch, attr, shape):
    base = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor(base, requires_grad=True)
        y = getattr(x, attr)
        (y * lib.tensor(np.random.default_rng(0).standard_normal(tuple(y.shape)))).sum().backward()
        results.append((tuple(y.shape), type(y.grad_fn).__name__, y.detach().numpy(), x.grad.numpy()))
    (shape_a, node_a, out_a, grad_a), (shape_b, node_b, out_b, grad_b) = results
    assert shape_a == shape_b and node_a == node_b
    np.testing.assert_array_equal(out_a, out_b)
    np.testing.assert_array_equal(grad_a, grad_b)


@pytest.mark.parametrize("attr", ["T", "mT", "H", "mH"])
def test_transpose_properties_are_views(attr):
    x = numbagrad.arange(6.0).reshape(2, 3)
    getattr(x, attr)[0, 1] = 10.0
    assert x[1, 0].item() == 10.0


@pytest.mark.parametrize(
    ("attr", "shape", "message"),
    [
        ("mT", (3,), "tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor."),
        ("mH", (3,), "tensor.mH is only supported on matrices or batches of matrices. Got 1-D tensor."),
        ("H", (3,), "tensor.H is only supported on matrices (2-D tensors). Got 1-D tensor."),
        ("H", (2, 3, 4), "tensor.H is only supported on matrices (2-D tensors). Got 3-D tensor. For batches of "
                         "matrices, consider using tensor.mH"),
    ],
)  # fmt: skip
def test_matrix_transposes_of_the_wrong_rank_are_torchs_errors(attr, shape, message):
    with pytest.raises(RuntimeError) as err:
        getattr(numbagrad.ones(shape), attr)
    assert str(err.value) == message


@pytest.mark.parametrize("attr", ["T", "mT", "H", "mH"])
def test_transpose_properties_of_a_0d_tensor_warn_as_torch(attr):
    x = numbagrad.tensor(2.0)
    with pytest.warns(UserWarning, match=f"Tensor.{attr} is deprecated on 0-D tensors"):
        y = getattr(x, attr)
    assert y.shape == () and y.item() == 2.0


def test_T_of_other_ranks_warns_that_it_is_deprecated():
    with pytest.warns(UserWarning, match="The use of `x.T` on tensors of dimension other than 2"):
        assert numbagrad.ones(2, 3, 4).T.shape == (4, 3, 2)
