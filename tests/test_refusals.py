"""Calls torch refuses, refused here with its exception and message: continuous draws into integral or bool
dtypes, negative sizes of ``zeros`` and ``eye``, batch norm's parameter sizes in torch's order, and
``cross_entropy``'s target checks in torch's order (shape decides between class indices and probabilities)."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like

DRAWS = {
    "rand": lambda lib, dt: lib.rand(3, dtype=dt),
    "randn": lambda lib, dt: lib.randn(3, dtype=dt),
    "rand_like": lambda lib, dt: lib.rand_like(lib.zeros(3, dtype=dt)),
    "randn_like": lambda lib, dt: lib.randn_like(lib.zeros(3, dtype=dt)),
    "normal_": lambda lib, dt: lib.zeros(3, dtype=dt).normal_(),
    "uniform_": lambda lib, dt: lib.zeros(3, dtype=dt).uniform_(),
    "exponential_": lambda lib, dt: lib.zeros(3, dtype=dt).exponential_(),
    "nn.init.normal_": lambda lib, dt: lib.nn.init.normal_(lib.zeros(3, dtype=dt)),
    "normal with a size": lambda lib, dt: lib.normal(0.0, 1.0, (3,), dtype=dt),
    "normal of a tensor mean": lambda lib, dt: lib.normal(lib.zeros(3, dtype=dt), 1.0),
}


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("name", list(DRAWS))
def test_a_continuous_draw_into_an_integral_dtype_is_refused(torch, name, dtype):
    raises_like(torch, lambda lib: DRAWS[name](lib, getattr(lib, dtype)))


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.zeros(-1),
        lambda lib: lib.zeros(2, -3),
        lambda lib: lib.eye(-1),
        lambda lib: lib.eye(2, -1),
        lambda lib: lib.eye(-1, -2),
        lambda lib: lib.randn(-1, dtype=lib.long),
    ],
)
def test_negative_sizes_are_refused_with_torchs_message(torch, make):
    raises_like(torch, make)


def test_batch_norm_checks_the_running_statistics_sizes_first(torch):
    raises_like(torch, lambda lib: lib.nn.BatchNorm1d(5)(lib.randn(4, 6)))
    raises_like(
        torch, lambda lib: lib.nn.functional.batch_norm(lib.randn(4, 6), None, None, lib.ones(5), training=True)
    )


TARGETS = {
    "float, one per sample": lambda lib: lib.tensor([0.5, 1.0, 2.0, 3.0]),
    "float, another class count": lambda lib: lib.rand(4, 5),
    "float, another batch": lambda lib: lib.rand(3, 6),
    "long, the input's shape": lambda lib: lib.zeros(4, 6, dtype=lib.long),
    "long, another batch": lambda lib: lib.tensor([0, 1, 2]),
    "int32 indices": lambda lib: lib.tensor([0, 1, 2, 3], dtype=lib.int32),
    "float, 3-d": lambda lib: lib.rand(4, 6, 2),
}


@pytest.mark.parametrize("name", list(TARGETS))
def test_cross_entropy_checks_its_target_in_torchs_order(torch, name):
    raises_like(torch, lambda lib: lib.nn.functional.cross_entropy(lib.randn(4, 6), TARGETS[name](lib)))


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.tensor("a"),
        lambda lib: lib.tensor(["a", "b"]),
        lambda lib: lib.tensor([1, "a"]),
        lambda lib: lib.tensor(None),
        lambda lib: lib.tensor({1: 2}),
    ],
)
def test_data_that_is_not_numbers_is_refused_as_torch_refuses_it(torch, make):
    raises_like(torch, make)


def test_other_refusals_with_torchs_messages(torch):
    raises_like(torch, lambda lib: lib.histc(lib.randn(3), bins=0))
    raises_like(torch, lambda lib: lib.save(lib.ones(1), 5))
    raises_like(torch, lambda lib: lib.ones(2).to("tpu"))
    raises_like(torch, lambda lib: lib.device("tpu:0"))
    raises_like(torch, lambda lib: setattr(lib.randn(3, requires_grad=True), "grad", lib.zeros(4)))


@pytest.mark.parametrize(
    ("values", "name"), [(["a"], "numpy.str_"), ([b"a"], "numpy.bytes_"), ([None], "numpy.object_")]
)
def test_an_array_of_another_kind_is_refused_naming_its_numpy_type(values, name):
    """torch's message, but its list of supported types is numbagrad's (no uint16, uint32 or uint64 storage)."""
    with pytest.raises(TypeError, match=f"can't convert np.ndarray of type {name}. The only supported types are: "):
        numbagrad.tensor(np.array(values))
