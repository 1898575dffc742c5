"""Every public attribute of ``torch.Tensor`` exists on ``numbagrad.Tensor``, apart from the names listed below
with the reason: the lists must stay true (a listed name that appears fails the test too, so they shrink as
names are built). Behaviour is tested against torch elsewhere (tests/test_tensor_methods.py and tests/test_storage.py
for the methods added with this list)."""

import pytest

import numbagrad

#: Names that do not apply to numbagrad's dense real CPU/CUDA tensors, and why.
NOT_APPLICABLE = {
    **{n: "quantized tensors are not modelled" for n in (
        "dequantize", "int_repr", "q_per_channel_axis", "q_per_channel_scales", "q_per_channel_zero_points",
        "q_scale", "q_zero_point", "qscheme")},
    **{n: "sparse compressed layouts (CSR/CSC/BSR/BSC) are not modelled" for n in (
        "ccol_indices", "col_indices", "crow_indices", "row_indices", "to_sparse_bsc", "to_sparse_bsr",
        "to_sparse_csc", "to_sparse_csr")},
    "chalf": "numbagrad has no complex32 (complex64 and complex128 only)",
    "to_mkldnn": "no MKL-DNN layout",
    "ipu": "no IPU device", "xpu": "no XPU device", "mtia": "no MTIA device",
    "pin_memory": "no page-locked host memory: numbagrad's host arrays are numpy's",
    "record_stream": "numbagrad has no CUDA stream objects to record",
    "to_padded_tensor": "nested tensors are not modelled",
    "index": "first-class dims (functorch.dim) are not modelled",
    "hash_tensor": "new in torch 2.13, a hash of the bytes with no numbagrad use",
    "reinforce": "torch's removed stochastic-function API (raises in torch)",
    "slice_inverse": "torch's internal op of its functionalization pass",
    "smm": "sparse-dense matmul on sparse COO with the sparse layout kept: not modelled",
    "sspaddmm": "sparse-dense matmul on sparse COO with the sparse layout kept: not modelled",
    "sparse_mask": "sparse COO masking of a dense tensor: not modelled",
    "sparse_resize_": "sparse COO resizing: not modelled",
    "sparse_resize_and_clear_": "sparse COO resizing: not modelled",
    "resize_as_sparse_": "sparse COO resizing: not modelled",
}  # fmt: skip

#: Names that apply but are not built yet, and why.
NOT_YET: dict[str, str] = {}


def _torch_names(torch) -> list:
    return sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))


@pytest.mark.torch
def test_every_torch_tensor_attribute_exists_but_the_listed_ones(torch):
    missing = [
        n for n in _torch_names(torch) if not hasattr(numbagrad.Tensor, n) and n not in NOT_APPLICABLE and n not in
        NOT_YET
    ]  # fmt: skip
    assert missing == []


@pytest.mark.torch
def test_the_lists_name_only_missing_torch_attributes(torch):
    names = set(_torch_names(torch))
    listed = {**NOT_APPLICABLE, **NOT_YET}
    assert sorted(n for n in listed if n not in names) == []
    assert sorted(n for n in listed if hasattr(numbagrad.Tensor, n)) == []


def test_no_name_is_in_both_lists():
    assert set(NOT_APPLICABLE) & set(NOT_YET) == set()
