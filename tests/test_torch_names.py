"""The name lists of the first op-breadth request: every torch name a custom-autograd program reaches for exists in
numbagrad.

Each list is copied from the issue ("`torch.*` functions and constants", "Tensor methods"); a missing name fails
its own test case. The nn.functional and nn module names are checked in their own test file (see the marked place
below).
"""

from __future__ import annotations

import pytest

import numbagrad

#: "`torch.*` functions and constants", by the issue's headings.
FUNCTIONS = {
    "elementwise": "round sinh cosh asin acos atan atan2 log1p expm1 log2 log10 erf floor ceil trunc fmod reciprocal "
    "square hypot lerp nan_to_num clamp_min clamp_max clip logical_and logical_or",
    "linear algebra": "addmm addcmul addcdiv bmm baddbmm einsum outer dot trace diag diagonal triu tril",
    "reductions and scans": "cumsum cumprod logsumexp var_mean std_mean all any topk argsort unique",
    "indexing": "gather scatter scatter_add index_select masked_fill masked_select repeat_interleave",
    "shape": "flip roll narrow split chunk unbind broadcast_to detach",
    "random": "bernoulli multinomial normal",
    "constants": "pi e inf nan",
    "dtypes": "uint8 int8 int16 float16 half",
    "type helpers": "finfo iinfo LongTensor FloatTensor",
    "keyword forms": "zeros ones empty full rand randn",
}

#: "Tensor methods", by the issue's headings.
METHODS = {
    "new tensors": "new new_zeros new_ones new_full new_empty new_tensor",
    "types": "type_as type output_nr",
    "indexing writes": "masked_fill masked_fill_ scatter_ scatter_add_ index_add_ index_fill_ index_put_ "
    "masked_scatter_ fill_diagonal_ gather",
    "random fills": "uniform_ normal_ bernoulli_ exponential_ random_",
    "in-place math": "abs_ neg_ exp_ log_ sqrt_ sigmoid_ tanh_ relu_ pow_",
    "memory": "data_ptr stride is_contiguous element_size nbytes",
    "python protocols": "__format__ __len__ __iter__ __bool__",
}

#: "Method forms: every function above that torch also has as a method" (torch 2.13's Tensor has these; the
#: torch-marked test below keeps this list equal to torch's).
METHOD_FORMS = (
    "round sinh cosh asin acos atan atan2 log1p expm1 log2 log10 erf floor ceil trunc fmod reciprocal square hypot "
    "lerp nan_to_num clamp_min clamp_max clip logical_and logical_or addmm addcmul addcdiv bmm baddbmm outer dot "
    "trace diag diagonal triu tril cumsum cumprod logsumexp all any topk argsort unique gather scatter scatter_add "
    "index_select masked_fill masked_select repeat_interleave flip roll narrow split chunk unbind broadcast_to "
    "detach bernoulli multinomial half"
).split()

# --- nn.functional and nn modules: their names live in tests/test_nn_names.py --------------------------------------


def _cases(groups: dict) -> list:
    return [pytest.param(name, id=f"{group}:{name}") for group, names in groups.items() for name in names.split()]


@pytest.mark.parametrize("name", _cases(FUNCTIONS))
def test_torch_function_or_constant_exists(name):
    assert hasattr(numbagrad, name), f"numbagrad.{name} is missing"


@pytest.mark.parametrize("name", _cases(METHODS))
def test_tensor_method_exists(name):
    assert hasattr(numbagrad.Tensor, name), f"numbagrad.Tensor.{name} is missing"


@pytest.mark.parametrize("name", METHOD_FORMS)
def test_function_that_torch_also_has_as_a_method_is_a_method(name):
    assert hasattr(numbagrad.Tensor, name), f"numbagrad.Tensor.{name} is missing"


@pytest.mark.torch
def test_method_forms_are_exactly_the_listed_functions_torch_has_as_methods():
    torch = pytest.importorskip("torch")
    listed = [n for names in FUNCTIONS.values() for n in names.split()]
    assert sorted(n for n in listed if hasattr(torch.Tensor, n)) == sorted(METHOD_FORMS)


@pytest.mark.torch
def test_constants_equal_torchs():
    torch = pytest.importorskip("torch")
    for name in ("pi", "e", "inf"):
        assert getattr(numbagrad, name) == getattr(torch, name)
    assert numbagrad.nan != numbagrad.nan and torch.nan != torch.nan
