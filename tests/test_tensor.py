"""The Tensor itself: dtypes and torch's type promotion, creation functions, memory sharing, version counters,
in-place rules, conversions and comparisons."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck

# ----------------------------------------------------------------------------------------------- dtypes


def test_default_dtype_is_float32_and_aliases_are_torchs():
    assert numbagrad.get_default_dtype() is numbagrad.float32
    assert numbagrad.float is numbagrad.float32 and numbagrad.double is numbagrad.float64
    assert numbagrad.long is numbagrad.int64 and numbagrad.int is numbagrad.int32
    assert repr(numbagrad.bool) == "numbagrad.bool"


@pytest.mark.parametrize(
    ("data", "dtype"),
    [
        (3.5, "float32"),
        ([1.0, 2.0], "float32"),
        ([1, 2], "int64"),
        ([True, False], "bool"),
        (np.array([1, 2], dtype=np.int32), "int32"),
        (np.array([1.0, 2.0]), "float64"),
        ([1, 2.5], "float32"),
    ],
)
def test_tensor_infers_dtype_like_torch(data, dtype):
    assert numbagrad.tensor(data).dtype.name == dtype


@pytest.mark.parametrize(
    ("make", "dtype"),
    [
        # dimensioned tensor with a Python scalar: the scalar only matters when it is of a higher category
        (lambda T: T.tensor([1, 2]) + 1.5, "float32"),
        (lambda T: T.tensor([1, 2]) + 1, "int64"),
        (lambda T: T.tensor([1, 2], dtype=T.int32) + 1, "int32"),
        (lambda T: T.tensor([1, 2], dtype=T.int32) * 2.5, "float32"),
        (lambda T: T.tensor([True]) + True, "bool"),
        (lambda T: T.tensor([True]) + 1, "int64"),
        (lambda T: T.tensor([True]) * 2.5, "float32"),
        (lambda T: T.tensor([1.0], dtype=T.float32) + np.float64(2.0), "float32"),
        # 0-dim tensors rank below dimensioned ones of the same category
        (lambda T: T.tensor([1.0, 2.0]) + T.tensor(1.0, dtype=T.float64), "float32"),
        (lambda T: T.tensor([1, 2], dtype=T.int32) + T.tensor(1), "int32"),
        (lambda T: T.tensor([1, 2]) + T.tensor(1.0, dtype=T.float64), "float64"),
        (lambda T: T.tensor(1.0) + T.tensor(1.0, dtype=T.float64), "float64"),
        (lambda T: T.tensor(5) + T.tensor([True]), "int64"),
        # two dimensioned tensors: the wider one, a float over any integer
        (lambda T: T.tensor([1, 2], dtype=T.int32) + T.tensor([1, 2]), "int64"),
        (lambda T: T.tensor([1, 2]) * T.tensor([1.0, 2.0], dtype=T.float64), "float64"),
        (lambda T: T.tensor([1.0]) * T.tensor([1.0], dtype=T.float64), "float64"),
        # ops that always produce floats
        (lambda T: T.tensor([1, 2]) / 2, "float32"),
        (lambda T: T.tensor([1, 2]) / T.tensor([2, 2]), "float32"),
        (lambda T: T.exp(T.tensor([0, 1])), "float32"),
        (lambda T: T.tensor([4, 9]).sqrt(), "float32"),
        (lambda T: T.tensor([1, 2]) ** 0.5, "float32"),
        (lambda T: T.tensor([1, 2]) ** 2, "int64"),
        (lambda T: 2.0 ** T.tensor([1, 2]), "float32"),
        # reductions
        (lambda T: T.tensor([1, 2], dtype=T.int32).sum(), "int64"),
        (lambda T: T.tensor([True, False]).sum(), "int64"),
        (lambda T: T.tensor([1.0, 2.0]).sum(dtype=T.float64), "float64"),
        # comparisons
        (lambda T: T.tensor([1.0, 2.0]) < 1.5, "bool"),
        (lambda T: T.tensor([1, 2]) == T.tensor([1.0, 3.0]), "bool"),
    ],
)
def test_type_promotion_follows_torch(make, dtype):
    assert make(numbagrad).dtype.name == dtype


def test_promotion_keeps_values_exact():
    out = numbagrad.tensor([1, 2], dtype=numbagrad.int32) * 2.5
    assert out.tolist() == [2.5, 5.0]
    assert (numbagrad.tensor([True, False]) + 1).tolist() == [2, 1]


def test_requires_grad_on_integer_tensor_raises_torchs_errors():
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require gradients$"):
        numbagrad.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="^only Tensors of floating point and complex dtype can require grad"):
        numbagrad.tensor([1, 2]).requires_grad = True
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype can require grad"):
        numbagrad.tensor([1, 2], requires_grad=True)


def test_subtraction_and_negation_of_bools_raise_torchs_error():
    with pytest.raises(RuntimeError, match=r"Subtraction, the `-` operator, with a bool tensor is not supported"):
        numbagrad.tensor([1.0, 2.0]) - True
    with pytest.raises(RuntimeError, match=r"Negation, the `-` operator, on a bool tensor is not supported"):
        -numbagrad.tensor([True, False])


# --------------------------------------------------------------------------------------------- creation


def test_tensor_copies_its_data():
    a = np.array([1.0, 2.0])
    t = numbagrad.tensor(a)
    a[0] = 9.0
    assert t.tolist() == [1.0, 2.0]


def test_zero_dim_tensor_keeps_zero_dims():
    for data in (3.0, np.float64(3.0), np.array(3.0)):
        assert numbagrad.tensor(data).shape == ()


def test_ragged_nested_list_raises_torchs_error():
    with pytest.raises(ValueError, match=r"^expected sequence of length 2 at dim 1 \(got 1\)$"):
        numbagrad.tensor([[1, 2], [3]])


@pytest.mark.parametrize(
    ("make", "values", "dtype"),
    [
        (lambda: numbagrad.zeros(2, 3), [[0.0] * 3] * 2, "float32"),
        (lambda: numbagrad.zeros((2, 3), dtype=numbagrad.float64), [[0.0] * 3] * 2, "float64"),
        (lambda: numbagrad.ones(2, dtype=numbagrad.int64), [1, 1], "int64"),
        (lambda: numbagrad.ones(2, dtype=numbagrad.bool), [True, True], "bool"),
        (lambda: numbagrad.full((2,), 3), [3, 3], "int64"),
        (lambda: numbagrad.full((2,), 3.0), [3.0, 3.0], "float32"),
        (lambda: numbagrad.full((2,), True), [True, True], "bool"),
        (lambda: numbagrad.arange(4), [0, 1, 2, 3], "int64"),
        (lambda: numbagrad.arange(1, 3, 0.5), [1.0, 1.5, 2.0, 2.5], "float32"),
        (lambda: numbagrad.arange(3, dtype=numbagrad.float64), [0.0, 1.0, 2.0], "float64"),
        (lambda: numbagrad.linspace(0, 1, 5), [0.0, 0.25, 0.5, 0.75, 1.0], "float32"),
        (lambda: numbagrad.eye(2), [[1.0, 0.0], [0.0, 1.0]], "float32"),
        (lambda: numbagrad.eye(2, 3), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], "float32"),
        (lambda: numbagrad.zeros_like(numbagrad.tensor([1, 2])), [0, 0], "int64"),
        (lambda: numbagrad.ones_like(numbagrad.tensor([1.0]), dtype=numbagrad.float64), [1.0], "float64"),
        (lambda: numbagrad.full_like(numbagrad.tensor([1, 2]), 7), [7, 7], "int64"),
    ],
)
def test_creation_functions(make, values, dtype):
    t = make()
    assert t.tolist() == values and t.dtype.name == dtype
    assert t.is_leaf and not t.requires_grad


def test_empty_and_empty_like_have_the_right_shape_and_dtype():
    assert numbagrad.empty(2, 3).shape == (2, 3)
    e = numbagrad.empty_like(numbagrad.tensor([[1, 2]]))
    assert e.shape == (1, 2) and e.dtype is numbagrad.int64


def test_creation_with_requires_grad_makes_a_leaf_that_requires_grad():
    t = numbagrad.zeros(2, requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad_fn is None


def test_random_creation_shapes_dtypes_and_ranges():
    r = numbagrad.rand(200)
    assert r.dtype is numbagrad.float32 and 0 <= r.min().item() and r.max().item() < 1
    n = numbagrad.randn(2, 3, dtype=numbagrad.float64)
    assert n.shape == (2, 3) and n.dtype is numbagrad.float64
    i = numbagrad.randint(0, 5, (100,))
    assert i.dtype is numbagrad.int64 and set(i.tolist()) <= set(range(5))
    assert numbagrad.randint(5, (2, 2)).shape == (2, 2)
    assert numbagrad.rand_like(n).dtype is numbagrad.float64 and numbagrad.randn_like(n).shape == (2, 3)


def test_manual_seed_makes_random_streams_reproducible():
    numbagrad.manual_seed(42)
    first = [numbagrad.rand(3).tolist(), numbagrad.randn(2).tolist(), numbagrad.randint(0, 100, (3,)).tolist()]
    numbagrad.manual_seed(42)
    again = [numbagrad.rand(3).tolist(), numbagrad.randn(2).tolist(), numbagrad.randint(0, 100, (3,)).tolist()]
    assert first == again
    numbagrad.manual_seed(43)
    assert numbagrad.rand(3).tolist() != first[0]


# ------------------------------------------------------------------------------------------ memory sharing


def test_from_numpy_and_numpy_share_memory():
    a = np.array([1.0, 2.0, 3.0])
    t = numbagrad.from_numpy(a)
    a[0] = 10.0
    assert t[0].item() == 10.0
    t.numpy()[1] = 20.0
    assert a[1] == 20.0
    assert t.numpy() is a


def test_views_share_memory_and_the_version_counter():
    x = numbagrad.zeros(2, 3)
    views = [x[0], x[:, 1], x.view(6), x.t(), x.reshape(3, 2), x.unsqueeze(0), x.transpose(0, 1), x.flatten()]
    x[0, 1] = 5.0
    for v in views:
        assert 5.0 in v.flatten().tolist()
        assert v._version == x._version == 1
    views[0].add_(1)
    assert x._version == 2 and views[1]._version == 2
    assert x[0].tolist() == [1.0, 6.0, 1.0]


def test_detach_shares_memory_and_version_but_not_history():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    d[0] = 7.0
    assert y[0].item() == 7.0 and y._version == 1


def test_data_shares_memory_with_a_separate_version_counter():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    data = x.data
    assert not data.requires_grad
    data.mul_(3)
    assert x.tolist() == [3.0, 6.0]
    assert x._version == 0


def test_clone_copies_and_is_differentiable():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert type(c.grad_fn).__name__ == "CloneBackward0"
    (c * c).sum().backward()
    c.detach()[0] = 9.0
    assert x.tolist() == [1.0, 2.0]
    assert x.grad.tolist() == [2.0, 4.0]


def test_contiguous_copies_only_when_needed():
    x = numbagrad.arange(6.0).reshape(2, 3)
    assert x.contiguous() is x
    t = x.t()
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c.tolist() == t.tolist()


# ------------------------------------------------------------------------------------------- conversions


def test_dtype_conversions():
    x = numbagrad.tensor([1.7, -2.2])
    assert x.double().dtype is numbagrad.float64
    assert x.long().tolist() == [1, -2] and x.long().dtype is numbagrad.int64
    assert x.int().dtype is numbagrad.int32
    assert numbagrad.tensor([0.0, 2.0]).bool().tolist() == [False, True]
    assert numbagrad.tensor([1, 2]).float().dtype is numbagrad.float32
    assert x.to(numbagrad.float64).dtype is numbagrad.float64
    assert x.to(numbagrad.tensor([1])).dtype is numbagrad.int64


def test_to_returns_self_when_nothing_changes():
    x = numbagrad.tensor([1.0])
    assert x.to(numbagrad.float32) is x and x.to("cpu") is x and x.float() is x
    assert x.to(numbagrad.float32, copy=True) is not x


def test_size_prints_and_behaves_like_a_tuple():
    x = numbagrad.zeros(2, 3)
    assert repr(x.shape) == "numbagrad.Size([2, 3])" and str(x.size()) == "numbagrad.Size([2, 3])"
    assert x.shape == (2, 3) and isinstance(x.shape, tuple)
    assert repr(x.shape[1:]) == "numbagrad.Size([3])" and x.shape[0] == 2
    assert x.size(1) == 3 and x.size(-1) == 3 and x.dim() == 2 and x.numel() == 6
    assert repr(numbagrad.Size([])) == "numbagrad.Size([])"


def test_item_and_tolist():
    assert numbagrad.tensor([1.5]).item() == 1.5 and isinstance(numbagrad.tensor(2).item(), int)
    assert numbagrad.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert numbagrad.tensor(2.5).tolist() == 2.5
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        numbagrad.tensor([1.0, 2.0]).item()


def test_python_number_conversions():
    assert int(numbagrad.tensor(3.7)) == 3 and float(numbagrad.tensor([2])) == 2.0
    assert bool(numbagrad.tensor([0.0])) is False and len(numbagrad.zeros(4, 2)) == 4


# ---------------------------------------------------------------------------------------- comparisons


def test_comparisons_give_bool_tensors():
    x = numbagrad.tensor([1.0, 2.0, 3.0])
    for result, expected in [
        (x < 2, [True, False, False]),
        (x <= 2, [True, True, False]),
        (x > 2, [False, False, True]),
        (x >= 2, [False, True, True]),
        (x == 2, [False, True, False]),
        (x != 2, [True, False, True]),
        (x == numbagrad.tensor([1, 0, 3]), [True, False, True]),
    ]:
        assert result.dtype is numbagrad.bool and result.tolist() == expected


def test_allclose_and_equal():
    a = numbagrad.tensor([1.0, 2.0])
    assert numbagrad.allclose(a, numbagrad.tensor([1.0, 2.0 + 1e-9]))
    assert not numbagrad.allclose(a, numbagrad.tensor([1.0, 2.1]))
    assert a.allclose(numbagrad.tensor([1.0, 2.05]), atol=0.1)
    assert numbagrad.equal(numbagrad.tensor([1, 2]), numbagrad.tensor([1, 2]))
    assert not numbagrad.equal(numbagrad.tensor([1, 2]), numbagrad.tensor([1, 3]))
    assert not numbagrad.equal(numbagrad.tensor([1, 2]), numbagrad.tensor([[1, 2]]))


# --------------------------------------------------------------------------------------------- in-place

INPLACE = {
    "add_": lambda t: t.add_(1.0),
    "add_tensor": lambda t: t.add_(numbagrad.ones(3)),
    "add_alpha": lambda t: t.add_(numbagrad.ones(3), alpha=2),
    "sub_": lambda t: t.sub_(1.0),
    "mul_": lambda t: t.mul_(2.0),
    "div_": lambda t: t.div_(2.0),
    "zero_": lambda t: t.zero_(),
    "fill_": lambda t: t.fill_(3.0),
    "copy_": lambda t: t.copy_(numbagrad.tensor([7.0, 8.0, 9.0])),
    "clamp_": lambda t: t.clamp_(0.0, 1.5),
    "iadd": lambda t: t.__iadd__(1.0),
    "isub": lambda t: t.__isub__(1.0),
    "imul": lambda t: t.__imul__(2.0),
    "itruediv": lambda t: t.__itruediv__(2.0),
    "setitem": lambda t: t.__setitem__(0, 5.0),
    "setitem_mask": lambda t: t.__setitem__(t > 1, 0.0),
}
INPLACE_RESULTS = {
    "add_": [2.0, 3.0, 4.0],
    "add_tensor": [2.0, 3.0, 4.0],
    "add_alpha": [3.0, 4.0, 5.0],
    "sub_": [0.0, 1.0, 2.0],
    "mul_": [2.0, 4.0, 6.0],
    "div_": [0.5, 1.0, 1.5],
    "zero_": [0.0, 0.0, 0.0],
    "fill_": [3.0, 3.0, 3.0],
    "copy_": [7.0, 8.0, 9.0],
    "clamp_": [1.0, 1.5, 1.5],
    "iadd": [2.0, 3.0, 4.0],
    "isub": [0.0, 1.0, 2.0],
    "imul": [2.0, 4.0, 6.0],
    "itruediv": [0.5, 1.0, 1.5],
    "setitem": [5.0, 2.0, 3.0],
    "setitem_mask": [1.0, 0.0, 0.0],
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_op_writes_in_place_and_bumps_the_version(name):
    t = numbagrad.tensor([1.0, 2.0, 3.0])
    storage = t.numpy()
    view = t[1:]
    result = INPLACE[name](t)
    if not name.startswith("setitem"):
        assert result is t
    assert t.tolist() == INPLACE_RESULTS[name]
    assert t.numpy() is storage
    assert t._version == 1 and view._version == 1


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_op_on_a_leaf_that_requires_grad_raises(name):
    t = numbagrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    leaf_or_view = "a view of a leaf" if name == "setitem" else "a leaf"
    with pytest.raises(RuntimeError, match=f"^{leaf_or_view} Variable that requires grad is being used in an in-place"):
        INPLACE[name](t)
    assert t.tolist() == [1.0, 2.0, 3.0] and t._version == 0


def test_inplace_on_a_view_of_a_leaf_that_requires_grad_raises():
    t = numbagrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used"):
        t[1:].mul_(2)


def test_inplace_on_a_leaf_is_allowed_under_no_grad():
    t = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    with numbagrad.no_grad():
        t.mul_(2)
    assert t.tolist() == [2.0, 4.0] and t.is_leaf and t._version == 1


@pytest.mark.parametrize("name", [n for n in INPLACE if n not in ("zero_", "fill_", "copy_")])
def test_inplace_on_a_non_leaf_rebases_its_history(name):
    def f(x):
        y = x * 1.5
        INPLACE[name](y)
        return y * x

    x = numbagrad.tensor([0.3, 1.2, 2.1], dtype=numbagrad.float64, requires_grad=True)
    y = x * 1.5
    INPLACE[name](y)
    assert not y.is_leaf and y._version == 1
    assert gradcheck(f, (x,))


def test_inplace_with_a_tensor_that_requires_grad_flows_gradient_to_it():
    def f(x, w):
        y = x * 1.0
        y.mul_(w)
        y[0] = w[1] * 3
        return y

    x = numbagrad.tensor([0.5, 1.5], dtype=numbagrad.float64, requires_grad=True)
    w = numbagrad.tensor([2.0, -1.0], dtype=numbagrad.float64, requires_grad=True)
    assert gradcheck(f, (x, w))


@pytest.mark.parametrize(
    ("data", "dtype"),
    [(np.float64(2.5), "float64"), (np.int32(3), "int32"), (np.float16(1.5), "float16"), (np.bool_(True), "bool"),
     ([np.float64(1.0), np.float64(2.0)], "float64"), ([[np.int32(1)], [np.int32(2)]], "int32"), ([1, 2.5], "float32")],
)  # fmt: skip
def test_a_tensor_of_numpy_scalars_keeps_their_dtype_as_torch(data, dtype):
    assert numbagrad.tensor(data).dtype == getattr(numbagrad, dtype)


@pytest.mark.parametrize(
    "data",
    [[np.float64(1.0), 2.0], [1, np.float64(2.0)], [np.float32(1.0), np.float64(2.0)], [np.int64(1), 2.5],
     [np.int32(1), 2], [np.float16(1.0), 2], [np.int8(1), True], [np.uint8(3), -1], [[1, 2], np.array([3.0, 4.0])],
     [1, np.array(2.0)], [[np.float64(1.0)], [2.0]], [1.0, True]],
)  # fmt: skip
@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy.ndarrays")  # (torch's, not ours)
def test_a_sequence_mixing_numpy_values_and_numbers_promotes_their_types_as_torch(data):
    torch = pytest.importorskip("torch")
    assert str(numbagrad.tensor(data).dtype).split(".")[1] == str(torch.tensor(data).dtype).split(".")[1]


def test_a_sequence_of_tensors_promotes_their_dtypes_as_torch():
    one = numbagrad.tensor(1.0, dtype=numbagrad.float64)
    assert numbagrad.tensor([one, 2.0]).dtype == numbagrad.float64
    assert numbagrad.tensor([numbagrad.tensor(1, dtype=numbagrad.int8), numbagrad.tensor(True)]).dtype == numbagrad.int8
    assert numbagrad.tensor([1.0, numbagrad.tensor(2)]).dtype == numbagrad.float32


def test_inplace_with_itself_as_the_operand_reads_each_element_first():
    t = numbagrad.tensor([1.0, -2.0, 3.0])
    t.mul_(t)
    assert t.tolist() == [1.0, 4.0, 9.0] and t._version == 1


def test_inplace_from_a_partly_overlapping_view_raises_and_leaves_the_data_intact():
    t = numbagrad.tensor([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor refer"):
        t[1:].add_(t[:-1])
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0] and t._version == 0


def test_inplace_on_a_view_with_a_number_writes_through_to_the_base():
    t = numbagrad.tensor([1.0, 2.0, 3.0])
    t[1:].add_(10)
    assert t.tolist() == [1.0, 12.0, 13.0] and t._version == 1


def test_inplace_with_an_operand_of_another_float_dtype_computes_as_torch():
    t = numbagrad.tensor([1.0, 2.0], dtype=numbagrad.float32)
    t.add_(numbagrad.tensor([0.1, 0.2], dtype=numbagrad.float64))
    assert t.dtype == numbagrad.float32
    np.testing.assert_array_equal(t.numpy(), np.array([1.1, 2.2], np.float32))


def test_a_tensor_saved_for_backward_then_changed_in_place_is_caught_at_backward():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    w = numbagrad.tensor([3.0, 4.0])
    y = (x * w).sum()
    w.add_(1.0)
    with pytest.raises(RuntimeError, match="has been modified by an inplace operation"):
        y.backward()


def test_inplace_result_dtype_must_fit_the_tensor():
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        numbagrad.tensor([1, 2]).add_(1.5)


def test_saved_tensor_modified_in_place_is_detected():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_inplace_with_a_broadcast_operand_reduces_its_gradient():
    def f(x, w):
        y = x * 1.0
        y.add_(w)
        y *= w
        return y

    x = numbagrad.tensor([[0.5, 1.5, -1.0], [2.0, 0.1, 0.3]], dtype=numbagrad.float64, requires_grad=True)
    w = numbagrad.tensor([2.0, -1.0, 0.7], dtype=numbagrad.float64, requires_grad=True)
    assert gradcheck(f, (x, w))


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            lambda t: t.copy_(numbagrad.ones(4)),
            r"The size of tensor a \(3\) must match the size of tensor b \(4\) at non-singleton dimension 0",
        ),
        (
            lambda t: t.__setitem__(slice(0, 2), numbagrad.tensor([7.0, 8.0, 9.0])),
            r"The expanded size of the tensor \(2\) must match the existing size \(3\) at non-singleton dimension 0\."
            r"  Target sizes: \[2\]\.  Tensor sizes: \[3\]",
        ),
        (
            lambda t: t.__setitem__(t > 1, numbagrad.tensor([7.0, 8.0, 9.0])),
            r"shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing result of shape \[2\]",
        ),
    ],
    ids=["copy_", "slice", "mask"],
)
def test_writes_of_the_wrong_shape_raise_torchs_error_and_leave_the_tensor_alone(write, message):
    t = numbagrad.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        write(t)
    assert t.tolist() == [1.0, 2.0, 3.0] and t._version == 0
