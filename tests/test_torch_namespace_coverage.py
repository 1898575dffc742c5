"""Every public function of the ``torch`` namespace exists in numbagrad, apart from the names listed below: those
that do not apply to numbagrad's dense real tensors (NOT_APPLICABLE, by name or by prefix) and those not built yet
(NOT_YET). A listed name that appears, or an unlisted one that is missing, fails the test, so the lists stay true.
Behaviour is compared with torch in the tests of each function."""

import inspect

import pytest

import numbagrad

#: Name prefixes of torch functions that do not apply, and why.
NOT_APPLICABLE_PREFIXES = {
    "q_": "quantized tensors do not exist in numbagrad",
    "quantize": "quantized tensors do not exist in numbagrad",
    "quantized_": "quantized tensors do not exist in numbagrad",
    "fake_quantize_": "quantized tensors do not exist in numbagrad",
    "fbgemm_": "FBGEMM (x86 quantized kernels) backend entry point",
    "mkldnn_": "oneDNN backend entry point",
    "miopen_": "ROCm MIOpen backend entry point",
    "cudnn_": "cuDNN backend entry point",
    "sym_": "symbolic shapes of torch.compile's tracer",
    "sparse_bs": "blocked sparse compressed layouts do not exist in numbagrad",
    "sparse_cs": "sparse compressed layouts do not exist in numbagrad",
    "autocast_": "torch's internal autocast nesting counters",
    "set_autocast_": "per-backend autocast switches of torch's C++ dispatcher; numbagrad.autocast is the API",
    "batch_norm_": "SyncBatchNorm's internal statistics kernels",
}

#: Single torch functions that do not apply, and why.
NOT_APPLICABLE = {
    "get_autocast_cpu_dtype": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "get_autocast_gpu_dtype": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "get_autocast_ipu_dtype": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "get_autocast_xla_dtype": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "is_autocast_cache_enabled": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "is_autocast_cpu_enabled": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "is_autocast_ipu_enabled": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "is_autocast_xla_enabled": "per-backend autocast switch of torch's C++ dispatcher; numbagrad.autocast is the API",
    "sparse_compressed_tensor": "sparse compressed layouts do not exist in numbagrad",
    "ccol_indices_copy": "sparse compressed layouts do not exist in numbagrad",
    "col_indices_copy": "sparse compressed layouts do not exist in numbagrad",
    "crow_indices_copy": "sparse compressed layouts do not exist in numbagrad",
    "row_indices_copy": "sparse compressed layouts do not exist in numbagrad",
    "choose_qparams_optimized": "quantized tensors do not exist in numbagrad",
    "dequantize": "quantized tensors do not exist in numbagrad",
    "empty_quantized": "quantized tensors do not exist in numbagrad",
    "fused_moving_avg_obs_fake_quant": "quantized tensors do not exist in numbagrad",
    "int_repr": "quantized tensors do not exist in numbagrad",
    "stft": "the short-time Fourier transform is not built",
    "istft": "the short-time Fourier transform is not built",
    "parse_ir": "TorchScript",
    "parse_schema": "TorchScript",
    "parse_type_comment": "TorchScript",
    "merge_type_from_type_comment": "TorchScript",
    "unify_type_list": "TorchScript",
    "import_ir_module": "TorchScript",
    "import_ir_module_from_buffer": "TorchScript",
    "fork": "TorchScript futures",
    "wait": "TorchScript futures",
    "cond": "torch.compile higher-order operator",
    "while_loop": "torch.compile higher-order operator",
    "classproperty": "torch's internal decorator",
    "compiled_with_cxx11_abi": "property of torch's C++ build",
    "get_file_path": "torch's internal path helper",
    "prepare_multiprocessing_environment": "torch's internal multiprocessing hook",
    "get_device_module": "torch's accelerator-backend registry",
    "is_vulkan_available": "Vulkan backend",
    "is_distributed": "torch's internal distributed-tensor probe (always False for a dense tensor)",
    "clear_autocast_cache": "autocast's C++ weight-cast cache",
    "thread_safe_generator": "DataLoader worker internals",
    "profiler_allow_cudagraph_cupti_lazy_reinit_cuda12": "CUDA profiler internals",
    "dsmm": "sparse-dense products of torch's legacy sparse API",
    "hsmm": "sparse-dense products of torch's legacy sparse API",
    "smm": "sparse-dense products of torch's legacy sparse API",
    "saddmm": "sparse-dense products of torch's legacy sparse API",
    "sspaddmm": "sparse-dense products of torch's legacy sparse API",
    "hspmm": "sparse-dense products of torch's legacy sparse API",
    "resize_as_sparse_": "sparse tensors' internal resize",
    "indices_copy": "sparse COO internals (the _copy form of an internal view)",
    "values_copy": "sparse COO internals (the _copy form of an internal view)",
    "native_norm": "sparse tensors' internal norm",
    "get_num_interop_threads": "numbagrad has no inter-op thread pool: ops run on the calling thread",
    "set_num_interop_threads": "numbagrad has no inter-op thread pool: ops run on the calling thread",
    "init_num_threads": "torch's internal per-thread OpenMP setup",
    "set_flush_denormal": "x86 MXCSR control of torch's C++ kernels",
    "hash_tensor": "torch-internal content hash",
    "slice_inverse": "functionalization internals",
    "get_deterministic_debug_mode": "deterministic-algorithm checks of torch's C++ kernels",
    "set_deterministic_debug_mode": "deterministic-algorithm checks of torch's C++ kernels",
    "is_deterministic_algorithms_warn_only_enabled": "deterministic-algorithm checks of torch's C++ kernels",
    "to_dlpack": "a DLPack capsule: numbagrad exchanges through Tensor.__dlpack__ and numbagrad.from_dlpack",
}

#: torch functions that apply but are not built yet, and why.
NOT_YET: dict[str, str] = {}


def _torch_functions(torch) -> list[str]:
    def is_function(name: str) -> bool:
        value = getattr(torch, name)
        return callable(value) and not inspect.isclass(value) and not inspect.ismodule(value)

    return sorted(n for n in dir(torch) if not n.startswith("_") and is_function(n))


def _not_applicable(name: str) -> bool:
    return name in NOT_APPLICABLE or name.startswith(tuple(NOT_APPLICABLE_PREFIXES))


@pytest.mark.torch
def test_every_torch_function_exists_but_the_listed_ones(torch):
    missing = {n for n in _torch_functions(torch) if not hasattr(numbagrad, n) and not _not_applicable(n)}
    assert missing == set(NOT_YET), (
        f"now missing but not listed: {sorted(missing - set(NOT_YET))}; "
        f"listed but present: {sorted(set(NOT_YET) - missing)}"
    )


@pytest.mark.torch
def test_no_name_is_listed_as_not_applicable_while_numbagrad_has_it(torch):
    present = [n for n in _torch_functions(torch) if _not_applicable(n) and hasattr(numbagrad, n)]
    assert not present


@pytest.mark.torch
def test_every_listed_name_is_a_torch_function(torch):
    names = set(_torch_functions(torch))
    assert not (set(NOT_APPLICABLE) | set(NOT_YET)) - names
