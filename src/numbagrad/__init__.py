"""numbagrad: PyTorch's custom-autograd workflow on numpy tensors, with kernels compiled by Numba.

``import numbagrad as torch`` runs programs written for the covered subset of torch. Nothing compiles at import:
kernels compile on first use and are cached on disk (see ``numbagrad.backend.codegen``).
"""

import math

from . import autograd
from ._generator import Generator
from ._interop import from_dlpack
from ._printing import set_printoptions
from ._tensor import Tensor, is_tensor
from ._typeinfo import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    finfo,
    iinfo,
)
from ._types import (
    Size,
    bfloat16,
    cdouble,
    cfloat,
    channels_last,
    channels_last_3d,
    complex64,
    complex128,
    contiguous_format,
    device,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    layout,
    legacy_contiguous_format,
    memory_format,
    preserve_format,
    set_default_dtype,
    sparse_coo,
    strided,
    uint8,
)
from ._types import bool_ as bool  # noqa: A001 - torch's name
from .autograd import enable_grad, inference_mode, no_grad, set_grad_enabled
from .autograd.grad_mode import is_anomaly_enabled, is_grad_enabled, is_inference_mode_enabled
from .ops import *  # noqa: F403 - the torch-shaped function namespace (declared ops only)
from .ops import __all__ as _ops_all
from .ops.storage import (
    BFloat16Storage,
    BoolStorage,
    ByteStorage,
    CharStorage,
    DoubleStorage,
    FloatStorage,
    HalfStorage,
    IntStorage,
    LongStorage,
    ShortStorage,
    TypedStorage,
    UntypedStorage,
)
from .serialization import load, load_file, save, save_file

float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
half = float16
short = int16
pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
__version__ = "0.1.0"

__all__ = [
    "preserve_format",
    "memory_format",
    "legacy_contiguous_format",
    "contiguous_format",
    "channels_last_3d",
    "channels_last",
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "Generator",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "Size",
    "Tensor",
    "autograd",
    "bfloat16",
    "bool",
    "device",
    "double",
    "cfloat",
    "cdouble",
    "complex64",
    "complex128",
    "dtype",
    "e",
    "enable_grad",
    "finfo",
    "float",
    "float16",
    "float32",
    "float64",
    "from_dlpack",
    "get_default_dtype",
    "half",
    "iinfo",
    "inf",
    "inference_mode",
    "int",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_anomaly_enabled",
    "is_floating_point",
    "is_grad_enabled",
    "is_inference",
    "is_inference_mode_enabled",
    "is_tensor",
    "load",
    "load_file",
    "long",
    "nan",
    "no_grad",
    "numel",
    "pi",
    "set_default_dtype",
    "set_grad_enabled",
    "save",
    "save_file",
    "set_printoptions",
    "short",
    "uint8",
    "layout",
    "sparse_coo",
    "strided",
    "BFloat16Storage",
    "BoolStorage",
    "ByteStorage",
    "CharStorage",
    "DoubleStorage",
    "FloatStorage",
    "HalfStorage",
    "IntStorage",
    "LongStorage",
    "ShortStorage",
    "TypedStorage",
    "UntypedStorage",
]
__all__ += _ops_all


def is_floating_point(t: Tensor) -> bool:
    """True if ``t``'s dtype is a float type (float16, float32, float64)."""
    return t.is_floating_point()


def is_inference(input: Tensor) -> bool:  # noqa: A002 - torch's parameter name
    """True if ``input`` is an inference tensor (made inside ``inference_mode()``)."""
    return input.is_inference()


def numel(t: Tensor) -> int:
    """The number of elements of ``t``."""
    return t.numel()


_LAZY_MODULES = (  # compile: a callable package
    "amp",
    "func",
    "sparse",
    "linalg",
    "nn",
    "optim",
    "cuda",
    "utils",
    "cache",
    "extend",
    "compile",
    "compiler",
    "testing",
    "distributions",
    "fft",
    "special",
    "profiler",
)


# --- torch-namespace forms of the nn ops (torch.conv2d, torch.batch_norm, ...): nn/_torch_forms.py, loaded lazily --
_NN_FORMS = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution",
    "conv_tbc", "adaptive_avg_pool1d", "adaptive_max_pool1d", "avg_pool1d", "max_pool1d", "max_pool1d_with_indices",
    "max_pool2d", "max_pool3d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
    "selu", "selu_", "celu", "celu_", "threshold", "threshold_", "rrelu", "rrelu_", "hardshrink",
    "bilinear", "cosine_similarity", "pairwise_distance", "pdist", "batch_norm", "instance_norm", "layer_norm",
    "group_norm", "rms_norm", "native_layer_norm", "native_batch_norm", "native_group_norm", "embedding",
    "embedding_bag", "embedding_renorm_", "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_dropout",
    "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "native_dropout", "constant_pad_nd",
    "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "kl_div",
    "binary_cross_entropy_with_logits", "ctc_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "cosine_embedding_loss", "poisson_nll_loss", "triplet_margin_loss",
)  # fmt: skip


def __getattr__(name: str):
    """``numbagrad.nn``, ``numbagrad.optim``, ``numbagrad.cuda``, ``numbagrad.distributions`` and the other
    subpackages, and ``numbagrad.elementwise``, load on first use
    (lazy: ``import numbagrad`` stays fast and never imports numba)."""
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in ("elementwise", "warmup", "warmup_manifest"):
        return getattr(importlib.import_module(".extend", __name__), name)
    if name in _NN_FORMS:
        return getattr(importlib.import_module(".nn._torch_forms", __name__), name)
    if name == "vmap":
        return importlib.import_module(".func", __name__).vmap
    if name in ("autocast", "get_autocast_dtype", "is_autocast_available", "is_autocast_enabled"):
        return getattr(importlib.import_module(".amp", __name__), name)
    raise AttributeError(f"module 'numbagrad' has no attribute '{name}'")
