"""Storage objects (``Tensor.untyped_storage()``, ``Tensor.storage()``, ``numbagrad.UntypedStorage``/``TypedStorage``
and the legacy ``FloatStorage``... names), compared with torch: sizes, bytes, element values, shared memory (a write
through a storage changes the tensor), ``set_`` onto a storage, warnings and errors."""

import re
import warnings

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def _same_error(torch, program):
    """``program(lib)`` raises the same exception type and message in both libraries (a class shown in the message
    is each library's own)."""
    raises_like(torch, lambda lib: _quiet(lambda: program(lib)),
                normalize=lambda message: re.sub(r"<class '[^']+'>", "<class>", message))  # fmt: skip


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "bool", "uint8"])
def test_untyped_storage_holds_the_tensors_bytes(torch, dtype):
    values = np.array([1.5, -2.0, 0.0, 3.0]).astype(dtype)
    got, want = numbagrad.tensor(values).untyped_storage(), torch.tensor(values).untyped_storage()
    assert got.nbytes() == got.size() == len(got) == want.nbytes()
    assert got.element_size() == want.element_size() == 1
    assert got.tolist() == want.tolist()
    assert str(got.device) == str(want.device)


def test_untyped_storage_covers_the_whole_block_of_a_view(torch):
    for lib in (numbagrad, torch):
        base = lib.arange(6.0).reshape(2, 3)
        views = [base[1], base.t(), base[:, 1:], base.reshape(6)[2:4]]
        assert {v.untyped_storage().data_ptr() for v in views} == {base.untyped_storage().data_ptr()}
        assert [v.untyped_storage().nbytes() for v in views] == [24] * 4
        assert base[1].data_ptr() - base[1].untyped_storage().data_ptr() == 3 * base.element_size()


def test_untyped_storage_of_one_block_is_one_object_while_it_lives():
    x = numbagrad.zeros(3)
    s = x.untyped_storage()
    assert x[1:].untyped_storage() is s
    assert numbagrad.zeros(3).untyped_storage() is not s


def test_writing_through_the_untyped_storage_changes_the_tensor(torch):
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor([1.0, 2.0, 3.0])
        s = x.untyped_storage()
        s[3] = 0x40
        s[4:6] = 7
        s[11] = 300  # kept modulo 256, as a cast to uint8 keeps it
        s[-3:-1] = 1
        results.append((x.tolist(), s.tolist(), s[-1], s[3]))
    assert results[0] == results[1]


def test_untyped_storage_slices_share_the_bytes(torch):
    results = []
    for lib in (numbagrad, torch):
        x = lib.arange(4, dtype=lib.int16)
        s = x.untyped_storage()
        part = s[2:6]
        part[0] = 9
        results.append((part.data_ptr() - s.data_ptr(), part.nbytes(), x.tolist(), s[-2:].tolist(), s[6:2].nbytes()))
    assert results[0] == results[1]


def test_untyped_storage_fill_and_copy_write_the_tensor(torch):
    results = []
    for lib in (numbagrad, torch):
        x, y = lib.zeros(2), lib.tensor([1.0, 2.0])
        s = x.untyped_storage()
        assert s.copy_(y.untyped_storage()) is s
        copied = x.tolist()
        assert s.fill_(257) is s
        results.append((copied, s.tolist(), x.tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "program",
    [
        lambda m: m.zeros(2).untyped_storage()[8],
        lambda m: m.zeros(2).untyped_storage()[-9],
        lambda m: m.zeros(2).untyped_storage().__setitem__(-1, 0),
        lambda m: m.zeros(2).untyped_storage().__setitem__(8, 0),
        lambda m: m.zeros(2).untyped_storage()[0:4:2],
        lambda m: m.zeros(2).untyped_storage().__setitem__(0, 1.5),
        lambda m: m.zeros(2).untyped_storage().fill_(1.5),
        lambda m: m.zeros(2).untyped_storage().copy_(m.zeros(3).untyped_storage()),
        lambda m: m.zeros(2).storage()[2],
        lambda m: m.zeros(2).storage()[-3],
        lambda m: m.zeros(2).storage()[0:1],
        lambda m: m.zeros(2).storage().copy_(m.zeros(2, dtype=m.float64).storage()),
        lambda m: m.zeros(0, dtype=m.int64).set_(m.zeros(2).storage()),
        lambda m: m.TypedStorage(m.zeros(2).untyped_storage()),
        lambda m: m.TypedStorage(1, 2),
        lambda m: m.TypedStorage(wrap_storage=m.zeros(2).untyped_storage()),
        lambda m: m.TypedStorage(wrap_storage=m.zeros(2), dtype=m.float32),
        lambda m: m.TypedStorage(wrap_storage=m.zeros(2).untyped_storage(), dtype=m.float32, device="cpu"),
    ],
)
def test_storages_refuse_what_torch_refuses(torch, program):
    _same_error(torch, program)


@pytest.mark.parametrize("program", [lambda m: m.zeros(2).untyped_storage()["a"], lambda m: m.zeros(2).storage()[1.0]])
def test_storages_refuse_indices_that_are_not_ints(torch, program):
    for lib in (numbagrad, torch):
        with pytest.raises((TypeError, RuntimeError)) as info:
            _quiet(lambda lib=lib: program(lib))
        assert "can't index a" in str(info.value)


def test_storage_warns_that_typed_storage_is_deprecated(torch):
    for lib in (numbagrad, torch):
        x = lib.zeros(2)
        torch.storage._reset_warn_typed_storage_removal()  # (torch warns once a process; numbagrad on every call)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x.storage()
            x.storage_type()
        assert UserWarning in [w.category for w in caught]
        assert all("TypedStorage is deprecated" in str(w.message) for w in caught)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "bool", "float16"])
def test_typed_storage_reads_the_elements_of_the_tensors_block(torch, dtype):
    values = np.array([1.5, -2.0, 0.0, 3.0]).astype(dtype)
    got, want = (
        _quiet(lambda: numbagrad.tensor(values)[1:].storage()),
        _quiet(lambda: torch.tensor(values)[1:].storage()),
    )
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert (got.size(), len(got), got.nbytes(), got.element_size()) == (want.size(), len(want), want.nbytes(),
                                                                        want.element_size())  # fmt: skip
    assert got.tolist() == want.tolist()
    assert (got[0], got[-1]) == (want[0], want[-1])
    assert got.untyped().nbytes() == want.untyped().nbytes()


def test_writing_through_the_typed_storage_changes_the_tensor(torch):
    results = []
    for lib in (numbagrad, torch):
        x = lib.arange(4, dtype=lib.int16)
        s = _quiet(x.storage)
        s[0] = 1.5
        s[-1] = 9
        first = x.tolist()
        s.fill_(2.7)
        filled = x.tolist()
        s.copy_(lib.tensor([1.0, 2.0], dtype=lib.float32).untyped_storage())
        results.append((first, filled, x.tolist(), s.data_ptr() == x.data_ptr()))
    assert results[0] == results[1]


def test_typed_storage_is_a_view_of_the_untyped_storage(torch):
    for lib in (numbagrad, torch):
        x = lib.zeros(2)
        s = _quiet(x.storage)
        assert s.untyped() is x.untyped_storage()


@pytest.mark.parametrize(
    ("dtype", "name"),
    [("float32", "FloatStorage"), ("float64", "DoubleStorage"), ("int64", "LongStorage"), ("int32", "IntStorage"),
     ("int16", "ShortStorage"), ("int8", "CharStorage"), ("uint8", "ByteStorage"), ("bool", "BoolStorage"),
     ("float16", "HalfStorage"), ("bfloat16", "BFloat16Storage")],
)  # fmt: skip
def test_storage_type_is_the_legacy_class_of_the_dtype(torch, dtype, name):
    got = _quiet(numbagrad.zeros(1, dtype=getattr(numbagrad, dtype)).storage_type)
    want = _quiet(torch.zeros(1, dtype=getattr(torch, dtype)).storage_type)
    assert got is getattr(numbagrad, name)
    assert want is getattr(torch, name)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.FloatStorage([1, 2.5]),
        lambda m: m.TypedStorage([1, 2], dtype=m.int64),
        lambda m: m.TypedStorage(wrap_storage=m.tensor([1.0, 2.0]).untyped_storage(), dtype=m.int32),
        lambda m: m.UntypedStorage([1, 2, 255]),
    ],
)
def test_storage_constructors_from_data_match_torch(torch, make):
    got, want = _quiet(lambda: make(numbagrad)), _quiet(lambda: make(torch))
    assert type(got).__name__ == type(want).__name__
    assert got.tolist() == want.tolist()
    assert str(getattr(got, "dtype", "")).split(".")[-1] == str(getattr(want, "dtype", "")).split(".")[-1]


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.LongStorage(3),
        lambda m: m.TypedStorage(2),
        lambda m: m.UntypedStorage(4),
        lambda m: m.UntypedStorage(),
    ],
)
def test_storage_constructors_of_a_size_match_torch(torch, make):
    got, want = _quiet(lambda: make(numbagrad)), _quiet(lambda: make(torch))
    assert type(got).__name__ == type(want).__name__
    assert (got.nbytes(), len(got)) == (want.nbytes(), len(want))
    assert str(getattr(got, "dtype", "")).split(".")[-1] == str(getattr(want, "dtype", "")).split(".")[-1]


def test_legacy_storage_names_are_typed_storages_of_their_dtype(torch):
    for lib in (numbagrad, torch):
        s = lib.DoubleStorage(2)
        assert isinstance(s, lib.TypedStorage)
        assert s.dtype == lib.float64 == lib.DoubleStorage.dtype


@pytest.mark.parametrize(
    "program",
    [
        lambda m, s: m.zeros(0).set_(s.untyped_storage()),
        lambda m, s: m.zeros(0).set_(s.untyped_storage(), 1, (2,), (1,)),
        lambda m, s: m.zeros(0).set_(s.untyped_storage(), 0, (2, 2), (1, 2)),
        lambda m, s: m.zeros(0).set_(_quiet(s.storage), 2, (2,)),
        lambda m, s: m.zeros(0, dtype=m.int32).set_(s.untyped_storage()),
    ],
)
def test_set_onto_a_storage_views_its_block(torch, program):
    results = []
    for lib in (numbagrad, torch):
        source = lib.tensor([1.0, 2.0, 3.0, 4.0])
        x = program(lib, source)
        source[0] = 10.0  # the same memory: the set_ tensor sees the write
        results.append((x.tolist(), tuple(x.shape), x.stride(), x.storage_offset(), str(x.dtype).split(".")[-1]))
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.tensor([1.5, -2.0]).untyped_storage(),
        lambda m: m.tensor([], dtype=m.int8).untyped_storage(),
        lambda m: _quiet(m.tensor([1.5, -2.0]).storage),
        lambda m: _quiet(m.tensor([True]).storage),
    ],
)
def test_storage_repr_lists_the_elements_as_torch(torch, make):
    def shown(lib):
        return repr(make(lib)).replace(lib.__name__ + ".", "").replace("ops.storage.", "").replace("storage.", "")

    assert shown(numbagrad) == shown(torch)


def test_a_tensor_set_onto_a_new_storage_reports_that_storage(torch):
    for lib in (numbagrad, torch):
        s = lib.UntypedStorage(8)
        x = lib.zeros(0).set_(s)
        assert x.untyped_storage() is s
        assert x.shape == (2,)
