"""torch's ``out=`` argument of the namespace functions: ``numbagrad.add(a, b, out=c)`` writes the result into
``c`` and returns ``c``.

Every declared function that torch's binding gives an ``out=`` (``OUT_FUNCTIONS``) is wrapped here once, by the
registry; Tensor methods never take one (as in torch). The wrapper costs a call without ``out`` one frame; with it,
the function runs as usual and its result is written into the given tensor (or tuple of tensors, for
``max(x, dim)``, ``sort``, ``topk``...) under torch's rules, in this order:

1. grad mode on and an argument or ``out`` that requires grad: torch's "don't support automatic differentiation"
   error (``out=`` writes outside the graph);
2. the dtype: creation functions take ``out``'s dtype when none is given, and the accumulating reductions
   (``sum``, ``prod``, ``cumsum``...) compute in it; elementwise ops and the rest cast the result into it when
   torch's category rule allows (no float into an integer, no complex into a real, nothing but bool into bool),
   and the ops torch checks strictly (``mm``, ``softmax``, ``gather``...) want the result's dtype exactly, each
   with torch's message;
3. the shape: an ``out`` of another shape is resized to the result's, with torch's deprecation warning when it had
   elements (a creation function resizes it silently);
4. the values are copied in through ``out``'s strides (a view writes into its base), and ``out``'s version is
   bumped.

The result is computed before ``out`` is touched, so ``add(a, b, out=a)`` reads ``a`` whole, and a refused call
leaves ``out`` as it was.
"""

from __future__ import annotations

import functools
import inspect
import typing
import warnings

from .._tensor import Tensor
from .._typeinfo import CPP_NAMES
from .._types import CAST_CATEGORY, check_castable, shape_str
from ..autograd.grad_mode import no_grad, state

#: The declared functions whose torch binding takes ``out=`` (read from torch 2.13's signatures). Functions that
#: return a list of tensors (``split_copy``, ``unbind_copy``) are left out: torch wants their outs pre-sized.
OUT_FUNCTIONS = frozenset(
    """
    abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr alias_copy all amax amin aminmax angle any
    arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argsort as_strided_copy asin asinh
    atan atan2 atanh baddbmm bartlett_window bernoulli bitwise_and bitwise_left_shift bitwise_not bitwise_or
    bitwise_right_shift bitwise_xor blackman_window bmm bucketize cat ceil chain_matmul cholesky cholesky_inverse
    cholesky_solve clamp clamp_max clamp_min clip column_stack complex concat concatenate conj_physical copysign cos
    cosh cross cummax cummin cumprod cumsum deg2rad detach_copy diag diagonal_copy diff digamma div divide dot
    dstack empty empty_permuted empty_strided eq erf erfc erfinv exp exp2 expand_copy expm1 eye fix float_power
    floor floor_divide fmax fmin fmod frac frexp frobenius_norm full gather gcd ge geqrf ger greater greater_equal
    gt hamming_window hann_window heaviside histc histogram hstack hypot i0 igamma igammac index_add index_copy
    index_reduce index_select inner inverse isin isneginf isposinf kaiser_window kron kthvalue lcm ldexp le lerp
    less less_equal lgamma linspace log log10 log1p log2 log_softmax logaddexp logaddexp2 logcumsumexp logical_and
    logical_not logical_or logical_xor logit logspace logsumexp lstsq lt lu_solve lu_unpack masked_select matmul
    matrix_power matrix_rank max maximum mean median min minimum mm mode msort mul multinomial multiply mv mvlgamma
    nan_to_num nanmean nanmedian nanquantile nansum narrow_copy ne neg negative nextafter nonzero nonzero_static
    norm normal not_equal nuclear_norm ones orgqr ormqr outer permute_copy polar polygamma pow prod qr quantile
    rad2deg rand randint randn randperm range reciprocal remainder renorm round row_stack rsqrt scatter scatter_add
    scatter_reduce searchsorted select_copy sgn sigmoid sign signbit sin sinc sinh slice_copy slogdet softmax solve
    sort sqrt square squeeze_copy stack std sub subtract sum svd symeig t_copy take take_along_dim tan tanh
    tensordot topk transpose_copy triangular_solve tril tril_indices triu triu_indices true_divide trunc
    unfold_copy unsqueeze_copy var vdot view_as_complex_copy view_as_real_copy view_copy vstack where xlogy zeros
    """.split()
)

#: Functions that make a tensor from sizes or ranges: ``out``'s dtype is theirs when no ``dtype=`` is given, and
#: ``out`` is resized without a warning.
_CREATION = frozenset(
    """
    arange bartlett_window blackman_window empty empty_permuted empty_strided eye full hamming_window hann_window
    kaiser_window linspace logspace ones rand randint randn randperm range tril_indices triu_indices zeros
    """.split()
)

#: Reductions that compute in ``out``'s dtype when no ``dtype=`` is given (torch's ``sum(x, 0, out=long)`` sums
#: as integers).
_ACCUMULATING = frozenset("sum nansum prod cumsum cumprod".split())

#: The concatenations: torch's ``cat`` refuses an ``out`` the inputs cannot be cast to with a TypeError.
_CONCATENATING = frozenset("cat concat concatenate stack hstack vstack dstack column_stack row_stack".split())

#: Ops that want ``out`` of exactly the result's dtype, and torch's message when it is not (fields: the
#: ScalarType names ``res``/``got`` ("Float"), the C++ names ``res_cpp``/``got_cpp`` ("float")).
_STRICT = "Expected out tensor to have dtype {res_cpp}, but got {got_cpp} instead"
_EXACT_DTYPE = {
    **dict.fromkeys(
        """
        mm bmm addmm baddbmm mv addmv matmul softmax log_softmax sort topk gather norm tril triu diag cross inverse
        matrix_power index_add scatter scatter_add argmax argmin kthvalue mode median nanmedian
        """.split(),
        _STRICT,
    ),
    "max": _STRICT,  # (its (values, indices) form only: the reduction to one value and the binary one cast)
    "min": _STRICT,
    "dot": "result dtype {got} does not match input dtype {res}",
    "vdot": "result dtype {got} does not match input dtype {res}",
    "where": "Expected out type to be {res} but got {got}",
    "clamp": "Found dtype {got} but expected {res}",
    "clip": "Found dtype {got} but expected {res}",
    "index_select": "index_select(): self and result must have the same scalar type",
    "masked_select": "masked_select(): self and result must have the same scalar type",
    "take": "take(): self and out expected to have the same dtype, but got self.dtype = {res} and out.dtype = {got}",
    "amax": "Expected the dtype for input and out to match, but got {res} for input's dtype and {got} for out's dtype.",
    "amin": "Expected the dtype for input and out to match, but got {res} for input's dtype and {got} for out's dtype.",
    "cummax": "expected scalar_type {res} but found {got}",
    "cummin": "expected scalar_type {res} but found {got}",
    "logcumsumexp": "expected scalar_type {res} but found {got}",
    "quantile": "quantile() out tensor must be same dtype as the input tensor",
    "nanquantile": "nanquantile() out tensor must be same dtype as the input tensor",
}


_RESIZED = (
    "An output with one or more elements was resized since it had shape {had}, which does not match the required "
    "output shape {need}. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
    "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
    "elements with t.resize_(0)."
)


#: Ops whose ``_EXACT_DTYPE`` check holds for their tuple-returning form only.
_STRICT_IN_TUPLES_ONLY = frozenset({"max", "min"})


def takes_out(names: tuple) -> bool:
    """Whether the op declared under ``names`` (its name and aliases) takes torch's ``out=``."""
    return any(n in OUT_FUNCTIONS for n in names)


def with_out(name: str, fn: typing.Callable) -> typing.Callable:
    """``fn`` taking a keyword ``out=`` as torch's ``name`` does (see the module docstring)."""

    @functools.wraps(fn)
    def op(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        return _call_into(name, fn, args, kwargs, out)

    op.without_out = fn  # (what ``declare`` hands back to the op's module, for the library's own calls)
    return op


def signature_with_out(op: typing.Callable) -> inspect.Signature:
    """The signature of a ``with_out`` function: its function's, with the keyword-only ``out=None`` (made when
    asked, by the stub generator: reading 300 signatures at import would cost ``import numbagrad`` milliseconds)."""
    signature = inspect.signature(op.without_out)
    parameters = [p for p in signature.parameters.values() if p.name != "out"]
    keyword = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=typing.Any)
    at = next((k for k, p in enumerate(parameters) if p.kind is p.VAR_KEYWORD), len(parameters))
    return signature.replace(parameters=[*parameters[:at], keyword, *parameters[at:]])


def _requires_grad(value) -> bool:
    if isinstance(value, Tensor):
        return value.requires_grad
    if isinstance(value, (list, tuple)):
        return any(_requires_grad(v) for v in value)
    return False


def _call_into(name: str, fn: typing.Callable, args: tuple, kwargs: dict, out):
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(o).__name__}")
    if state.enabled and (_requires_grad(args) or _requires_grad(tuple(kwargs.values())) or _requires_grad(outs)):
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic differentiation, but one of the "
            "arguments requires grad."
        )
    if (name in _CREATION or name in _ACCUMULATING) and kwargs.get("dtype") is None and len(outs) == 1:
        kwargs = {**kwargs, "dtype": outs[0].dtype}
    result = fn(*args, **kwargs)
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(results) != len(outs):
        raise RuntimeError(f"{name}(): expected out to be a tuple of {len(results)} tensors, but got {len(outs)}")
    strict = len(results) > 1 or name not in _STRICT_IN_TUPLES_ONLY
    for r, o in zip(results, outs):
        _check_dtype(name, r, o, strict)
    for r, o in zip(results, outs):
        write_into(o, r, resize_warns=name not in _CREATION, stacklevel=3)
    if len(outs) == 1 and not isinstance(out, (tuple, list)):
        return out
    return type(result)(*outs) if hasattr(result, "_fields") else tuple(outs)


def _check_dtype(name: str, result: Tensor, out: Tensor, strict: bool) -> None:
    if result.device != out.device:
        raise RuntimeError(f"Expected out tensor to have device {result.device}, but got {out.device} instead")
    have, want = result.dtype, out.dtype
    if have == want:
        return
    template = _EXACT_DTYPE.get(name) if strict else None
    if template is not None:
        raise RuntimeError(
            template.format(
                res=have.scalar_name, got=want.scalar_name, res_cpp=CPP_NAMES[have.name], got_cpp=CPP_NAMES[want.name]
            )
        )
    if name in _CONCATENATING and CAST_CATEGORY[result._data.dtype.kind] > CAST_CATEGORY[out._data.dtype.kind]:
        raise TypeError(f"torch.cat(): input types can't be cast to the desired output type {want.scalar_name}")
    check_castable(result._data.dtype, out._data.dtype)


def write_into(out: Tensor, result: Tensor, *, resize_warns: bool = True, stacklevel: int = 2) -> None:
    """Copy ``result`` into ``out`` through its strides, resizing ``out`` to the result's shape first (with torch's
    deprecation warning when it had elements and ``resize_warns``); ``stacklevel`` is the user's frame as seen
    from the caller."""
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() and resize_warns:
            warnings.warn(
                _RESIZED.format(had=shape_str(out.shape), need=shape_str(result.shape)),
                UserWarning,
                stacklevel=stacklevel + 1,
            )
        out.resize_(tuple(result.shape))
    with no_grad():
        out.copy_(result)
