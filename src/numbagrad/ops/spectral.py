"""The discrete Fourier transforms of ``torch.fft``, and ``stft``/``istft`` built on them.

The transforms run pocketfft on the host: ``scipy.fft`` when scipy is importable, else ``numpy.fft`` (both keep
float32/complex64 in single precision). A cuda tensor is copied to the host, transformed there and the result
copied back. As in torch, every transform is one of three Functions: complex-to-complex (``FftC2C``),
real-to-complex (``FftR2C``, one-sided or full) and complex-to-real (``FftC2R``), applied after the input is
promoted (ints and bools to the default float dtype, real to complex where needed) and zero-padded or trimmed to
the requested signal sizes. Each backward is made of the other transforms and of the small linear maps below
(real part, conjugate, scaling along a dim), so double backward needs no second formula. The rules are torch's:
the gradient of a c2c transform is the opposite-direction transform with the same scaling; r2c's pads the one-sided
spectrum with zeros, runs the inverse c2c and keeps the real part; c2r's is an r2c with the bins that stand for
two (a bin and its mirror) doubled. Gradients follow torch's convention for complex tensors (the conjugate
Wirtinger derivative), so they equal torch's.

``stft`` frames the (centre-padded) signal into overlapping windows, multiplies by the window and transforms
each frame; ``istft`` inverts each frame, overlap-adds them and divides by the summed squared window. Both are
compositions of differentiable ops, so their gradients come from the pieces.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._tensor import Tensor
from .._typeinfo import type_name as tensor_type_name
from .._types import complex_of, get_default_dtype, wrap_dim
from ..autograd.function import Function
from ..autograd.grad_mode import state
from . import complex_ops, nn_ops
from ._common import not_a_tensor, type_name
from ._registry import declare
from .complex_ops import view_as_real
from .out_arguments import write_into

# --- the host transforms ---------------------------------------------------------------------------------------------

#: numpy's (and scipy's) ``norm=`` for a scaling mode, by direction: "none" scales by 1, "by_n" by 1/n and
#: "by_root_n" by 1/sqrt(n), with n the product of the transformed signal sizes.
_LIBRARY_NORM = {
    True: {"none": "backward", "by_n": "forward", "by_root_n": "ortho"},
    False: {"none": "forward", "by_n": "backward", "by_root_n": "ortho"},
}
_LIBRARY: list = []


def fft_library():
    """``scipy.fft`` when it can be imported, else ``numpy.fft``: chosen once, at the first transform, so that
    ``import numbagrad`` never pays for scipy."""
    if not _LIBRARY:
        try:
            import scipy.fft as library  # optional: the same pocketfft with more threads, where installed
        except ImportError:
            library = np.fft
        _LIBRARY.append(library)
    return _LIBRARY[0]


def _c2c_host(a: np.ndarray, dims: tuple, norm: str, forward: bool) -> np.ndarray:
    if not dims:  # (fftn over no dims: a copy)
        return a.copy()
    library = fft_library()
    transform = library.fftn if forward else library.ifftn
    return transform(a, axes=dims, norm=_LIBRARY_NORM[forward][norm])


def _r2c_host(a: np.ndarray, dims: tuple, norm: str, onesided: bool) -> np.ndarray:
    """The one-sided transform of real ``a``; the full one is completed from it by conjugate symmetry
    (``X[k] = conj(X[-k mod n])`` over every transformed dim), as torch does: half the work of a complex
    transform of the real input."""
    half = fft_library().rfftn(a, axes=dims, norm=_LIBRARY_NORM[True][norm])
    last = dims[-1]
    n, bins = a.shape[last], half.shape[last]
    if onesided or n == bins:
        return half
    full = np.empty(a.shape, half.dtype)
    full[(slice(None),) * last + (slice(0, bins),)] = half
    mirror = half
    for d in dims[:-1]:  # index -k mod n along the other transformed dims
        mirror = np.roll(np.flip(mirror, d), 1, d)
    full[(slice(None),) * last + (slice(bins, n),)] = np.conj(mirror[(slice(None),) * last + (slice(n - bins, 0, -1),)])
    return full


def _c2r_host(a: np.ndarray, dims: tuple, norm: str, last_size: int) -> np.ndarray:
    sizes = [a.shape[d] for d in dims[:-1]] + [last_size]
    return fft_library().irfftn(a, s=sizes, axes=dims, norm=_LIBRARY_NORM[False][norm])


def _on_host(x: Tensor, fn) -> Tensor:
    """``fn`` of ``x``'s values, computed on the host and stored on ``x``'s device."""
    backend = x._backend
    return Tensor._make(backend.from_host(np.ascontiguousarray(fn(backend.to_host(x._data)))))


# --- the Functions ---------------------------------------------------------------------------------------------------


class FftC2C(Function):
    """A complex-to-complex transform over ``dims``; its gradient is the opposite direction, scaled the same."""

    node_name = "FftC2CBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, dims: tuple, norm: str, forward: bool) -> Tensor:
        ctx.dims, ctx.norm, ctx.direction = dims, norm, forward
        return _on_host(x, lambda a: _c2c_host(a, dims, norm, forward))

    @staticmethod
    def backward(ctx, g: Tensor):
        return FftC2C.apply(g, ctx.dims, ctx.norm, not ctx.direction), None, None, None


class FftR2C(Function):
    """A real-to-complex forward transform over ``dims``, one-sided (the last dim keeps ``n // 2 + 1`` bins) or
    full; its gradient is the real part of the inverse transform of the zero-padded full spectrum."""

    node_name = "FftR2CBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, dims: tuple, norm: str, onesided: bool) -> Tensor:
        ctx.dims, ctx.norm, ctx.onesided, ctx.shape = dims, norm, onesided, tuple(x.shape)
        return _on_host(x, lambda a: _r2c_host(a, dims, norm, onesided))

    @staticmethod
    def backward(ctx, g: Tensor):
        if ctx.onesided:
            g = _resize(g, ctx.dims[-1:], (ctx.shape[ctx.dims[-1]],))
        return complex_ops.real(FftC2C.apply(g, ctx.dims, ctx.norm, False)), None, None, None


class FftC2R(Function):
    """A complex-to-real inverse transform over ``dims`` of a one-sided spectrum, the last dim's output
    ``last_size`` long; its gradient is the one-sided forward transform with every bin but the first (and, for an
    even size, the last) doubled, as each stands for itself and its mirror."""

    node_name = "FftC2RBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, dims: tuple, norm: str, last_size: int) -> Tensor:
        ctx.dims, ctx.norm, ctx.last_size = dims, norm, last_size
        return _on_host(x, lambda a: _c2r_host(a, dims, norm, last_size))

    @staticmethod
    def backward(ctx, g: Tensor):
        grad = FftR2C.apply(g, ctx.dims, ctx.norm, True)
        bins = ctx.last_size // 2 + 1
        weights = np.ones(bins)
        weights[1 : 1 + ctx.last_size - bins] = 2.0
        return _scale_along(grad, ctx.dims[-1], weights), None, None, None


def _scale_along(x: Tensor, dim: int, weights: np.ndarray) -> Tensor:
    """``x`` times fixed real ``weights`` along ``dim``: an ordinary product with a constant, so its gradient and
    device are ``mul``'s."""
    shape = [1] * x.dim()
    shape[dim] = len(weights)
    parts = np.zeros(0, x._data.dtype).real.dtype  # (float32 for complex64)
    return x * Tensor._make(x._backend.constant(weights.astype(parts).reshape(shape)))


def _resize(x: Tensor, dims: tuple, sizes: tuple) -> Tensor:
    """``x`` zero-padded or trimmed at the end of each of ``dims`` to ``sizes`` (itself when it fits)."""
    pads = [0] * (2 * x.dim())
    for d, n in zip(dims, sizes):
        pads[2 * (x.dim() - 1 - d) + 1] = n - x.shape[d]
    if not any(pads):
        return x
    return nn_ops.ConstantPad.apply(x, tuple(pads), 0)


# --- arguments -------------------------------------------------------------------------------------------------------


def _norm_mode(norm, forward: bool) -> str:
    """torch's scaling mode of ``norm`` for a transform in this direction."""
    if norm is None or norm == "backward":
        return "none" if forward else "by_n"
    if norm == "forward":
        return "by_n" if forward else "none"
    if norm == "ortho":
        return "by_root_n"
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_arguments(op: str, input, n=None, dim=None, norm=None, many: bool = False) -> None:  # noqa: A002
    """torch's argument-parser errors: ``input`` a tensor, ``n``/``dim`` ints (or, for the n-dim transforms, ints
    or sequences of ints; None only where there is a default of None), ``norm`` a string."""
    if not isinstance(input, Tensor):
        raise not_a_tensor(f"fft_{op}", "input", 1, input)
    for name, value in (("s" if many else "n", n), ("dim", dim)):
        if value is None and (many or name == "n"):
            continue
        if many and isinstance(value, (tuple, list)):
            bad = [k for k, v in enumerate(value) if not _is_int(v)]
            if not bad:
                continue
            if bad[0]:  # (a first element that is no int: torch names the sequence's type, below)
                raise TypeError(
                    f"fft_{op}(): argument '{name}' failed to unpack the object at pos {bad[0] + 1} with error "
                    f'"type must be tuple of ints,but got {type_name(value[bad[0]])}"'
                )
        if not _is_int(value):
            kind = "tuple of ints" if many else "int"
            raise TypeError(f"fft_{op}(): argument '{name}' must be {kind}, not {type_name(value)}")
    if norm is not None and not isinstance(norm, str):
        raise TypeError(f"fft_{op}(): argument 'norm' must be str, not {type_name(norm)}")


def _wrap(dim: int, ndim: int) -> int:
    """A dim wrapped as torch's transforms do (a 0-dim tensor has no dim to transform)."""
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, ndim)


def _promote(x: Tensor, require_complex: bool) -> Tensor:
    """``x`` in the dtype a transform computes in: ints and bools as the default float, float32/float64 as they
    are (as complex when ``require_complex``), complex as it is; other floats are torch's error."""
    d = x.dtype
    if d.is_complex:
        return x
    if not d.is_floating_point:
        d = get_default_dtype()
    if d.name not in ("float32", "float64"):
        raise RuntimeError(f"Unsupported dtype {d.scalar_name}")
    if d != x.dtype:
        x = x.to(d)
    if require_complex:
        return x.to(complex_of(d))
    return x


def _shape_and_dims(input: Tensor, s, dim) -> tuple:  # noqa: A002
    """The dims an n-dim transform runs over and the signal size along each (torch's defaults: all dims, or the
    last ``len(s)``; an ``s`` entry of -1 keeps the input's size), with torch's checks."""
    ndim = input.dim()
    dims = None
    if dim is not None:
        dims = [_wrap(int(d), ndim) for d in ((dim,) if _is_int(dim) else dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = (int(s),) if _is_int(s) else tuple(int(n) for n in s)
        if dims is not None and len(dims) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {ndim} dimensions.")
        if dims is None:
            dims = list(range(ndim - len(s), ndim))
        sizes = [input.shape[d] if n == -1 else n for d, n in zip(dims, s)]
    elif dims is None:
        dims, sizes = list(range(ndim)), list(input.shape)
    else:
        sizes = [input.shape[d] for d in dims]
    for n in sizes:
        if n <= 0:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return tuple(dims), tuple(sizes)


def _check_out(op: str, out, complex_out: bool) -> None:
    if out is None:
        return
    if complex_out and not out.dtype.is_complex:
        raise RuntimeError(f"{op} expects a complex output tensor, but got {out.dtype.scalar_name}")
    if not complex_out and not out.dtype.is_floating_point:
        raise RuntimeError(f"{op} expects a floating point output tensor, but got {out.dtype.scalar_name}")


def _into(out, result: Tensor, internal: str, input: Tensor) -> Tensor:  # noqa: A002
    """``result``, or ``out`` resized to it and holding it (torch's ``out=``: no autograd through it)."""
    if out is None:
        return result
    if state.enabled and input.requires_grad:
        raise RuntimeError(
            f"{internal}(): functions with out=... arguments don't support automatic differentiation, but one of "
            "the arguments requires grad."
        )
    write_into(out, result, stacklevel=4)  # (the user, past the transform and its helper)
    return out


# --- the transform families (torch's fft_c2c, fft_r2c, fft_c2r and their n-dim forms) ---------------------------------


def _c2c(op, input, n, dim, norm, out, forward: bool) -> Tensor:  # noqa: A002
    _check_out(op, out, True)
    x = input
    d = _wrap(int(dim), x.dim())
    size = x.shape[d] if n is None else int(n)
    if size < 1:
        raise RuntimeError(f"Invalid number of data points ({size}) specified")
    x = _resize(x, (d,), (size,))
    result = FftC2C.apply(x, (d,), _norm_mode(norm, forward), forward)
    return _into(out, result, "_fft_c2c", input)


def _r2c(op, input, n, dim, norm, out, forward: bool, onesided: bool) -> Tensor:  # noqa: A002
    if input.dtype.is_complex:
        raise RuntimeError(f"{op} expects a real input tensor, but got {input.dtype.scalar_name}")
    _check_out(op, out, True)
    x = _promote(input, False)
    d = _wrap(int(dim), x.dim())
    size = x.shape[d] if n is None else int(n)
    if size < 1:
        raise RuntimeError(f"Invalid number of data points ({size}) specified")
    x = _resize(x, (d,), (size,))
    result = FftR2C.apply(x, (d,), _norm_mode(norm, forward), onesided)
    if not forward:
        result = complex_ops.conj(result)  # (a lazy conjugate view, as torch's)
    return _into(out, result, "_fft_r2c" if forward else "conj_physical", input)


def _c2r(op, input, n, dim, norm, out, forward: bool) -> Tensor:  # noqa: A002
    _check_out(op, out, False)
    x = _promote(input, True)
    d = _wrap(int(dim), x.dim())
    size = 2 * (x.shape[d] - 1) if n is None else int(n)
    if size < 1:
        raise RuntimeError(f"Invalid number of data points ({size}) specified")
    x = _resize(x, (d,), (size // 2 + 1,))
    mode = _norm_mode(norm, forward)
    if forward:
        x = complex_ops.conj_physical(x)
    return _into(out, FftC2R.apply(x, (d,), mode, size), "_fft_c2r", input)


def _fftn(input, s, dim, norm, out, forward: bool) -> Tensor:  # noqa: A002
    dims, sizes = _shape_and_dims(input, s, dim)
    x = _promote(input, True)
    _check_out("fftn", out, True)  # (torch's message names fftn for all four c2c n-dim transforms)
    x = _resize(x, dims, sizes)
    return _into(out, FftC2C.apply(x, dims, _norm_mode(norm, forward), forward), "_fft_c2c", input)


def _rfftn(input, s, dim, norm, out) -> Tensor:  # noqa: A002
    if input.dtype.is_complex:
        raise RuntimeError(f"rfftn expects a real-valued input tensor, but got {input.dtype.scalar_name}")
    dims, sizes = _shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    x = _resize(_promote(input, False), dims, sizes)
    mode = _norm_mode(norm, True)
    _check_out("rfftn", out, True)
    return _into(out, FftR2C.apply(x, dims, mode, True), "_fft_r2c", input)


def _c2r_shape_and_dims(op: str, input: Tensor, s, dim) -> tuple:  # noqa: A002
    """The dims and input sizes of an n-dim complex-to-real transform, and its last dim's output size."""
    dims, sizes = _shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError(f"{op} must transform at least one axis")
    if s is None or (s if _is_int(s) else s[-1]) == -1:
        last_size = 2 * (input.shape[dims[-1]] - 1)
    else:
        last_size = sizes[-1]
    if last_size < 1:
        raise RuntimeError(f"Invalid number of data points ({last_size}) specified")
    return dims, sizes[:-1] + (last_size // 2 + 1,), last_size


def _irfftn(input, s, dim, norm, out) -> Tensor:  # noqa: A002
    dims, sizes, last_size = _c2r_shape_and_dims("irfftn", input, s, dim)
    x = _resize(_promote(input, True), dims, sizes)
    mode = _norm_mode(norm, False)
    _check_out("irfftn", out, False)
    return _into(out, FftC2R.apply(x, dims, mode, last_size), "_fft_c2r", input)


def _hfftn(input, s, dim, norm, out) -> Tensor:  # noqa: A002
    dims, sizes, last_size = _c2r_shape_and_dims("hfftn", input, s, dim)
    x = _resize(_promote(input, True), dims, sizes)
    mode = _norm_mode(norm, True)
    if len(dims) > 1:
        x = FftC2C.apply(x, dims[:-1], mode, True)
    _check_out("hfftn", out, False)
    return _into(out, FftC2R.apply(complex_ops.conj_physical(x), dims[-1:], mode, last_size), "_fft_c2r", input)


def _ihfftn(input, s, dim, norm, out) -> Tensor:  # noqa: A002
    dims, sizes = _shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError("ihfftn must transform at least one axis")
    if input.dtype.is_complex:
        raise RuntimeError(f"Only supports floating-point dtypes, but found: {input.dtype.scalar_name}")
    x = _resize(_promote(input, False), dims, sizes)
    mode = _norm_mode(norm, False)
    _check_out("ihfftn", out, True)
    result = complex_ops.conj(FftR2C.apply(x, dims[-1:], mode, True))
    if len(dims) > 1:
        result = FftC2C.apply(result, dims[:-1], mode, False)
    return _into(out, result, "_fft_c2c" if len(dims) > 1 else "conj_physical", input)


# --- torch.fft's functions -------------------------------------------------------------------------------------------
# (Functions of ``numbagrad.fft``, not of the top-level namespace: torch has them only under ``torch.fft``.)

_HOST = "On cuda the transform runs on the host: the input is copied there and the result copied back."


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The one-dimensional discrete Fourier transform along ``dim``, of ``n`` points (the input zero-padded or
    trimmed to ``n``). ``norm``: ``"backward"`` (no scaling, the default), ``"ortho"`` (``1/sqrt(n)``) or
    ``"forward"`` (``1/n``). A real input gives the full (two-sided) spectrum."""
    _check_arguments("fft", input, n, dim, norm)
    if input.dtype.is_complex:
        return _c2c("fft", input, n, dim, norm, out, True)
    return _r2c("fft", input, n, dim, norm, out, True, False)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The inverse of ``fft``: scaled by ``1/n`` by default (``norm="backward"``)."""
    _check_arguments("ifft", input, n, dim, norm)
    if input.dtype.is_complex:
        return _c2c("ifft", input, n, dim, norm, out, False)
    return _r2c("ifft", input, n, dim, norm, out, False, False)


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """``fftn`` over the last two dims by default."""
    _check_arguments("fft2", input, s, dim, norm, many=True)
    return _fftn(input, s, dim, norm, out, True)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """``ifftn`` over the last two dims by default."""
    _check_arguments("ifft2", input, s, dim, norm, many=True)
    return _fftn(input, s, dim, norm, out, False)


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The n-dimensional discrete Fourier transform over ``dim`` (all dims by default, or the last ``len(s)``),
    with signal sizes ``s`` (-1 keeps a dim's size)."""
    _check_arguments("fftn", input, s, dim, norm, many=True)
    return _fftn(input, s, dim, norm, out, True)


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The inverse of ``fftn``."""
    _check_arguments("ifftn", input, s, dim, norm, many=True)
    return _fftn(input, s, dim, norm, out, False)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The Fourier transform of a real signal: only the ``n // 2 + 1`` non-negative frequencies (the others are
    their conjugates)."""
    _check_arguments("rfft", input, n, dim, norm)
    return _r2c("rfft", input, n, dim, norm, out, True, True)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The inverse of ``rfft``: a real signal of ``n`` points (by default ``2 * (m - 1)`` for ``m`` input bins)
    from its one-sided spectrum."""
    _check_arguments("irfft", input, n, dim, norm)
    return _c2r("irfft", input, n, dim, norm, out, False)


def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """``rfftn`` over the last two dims by default."""
    _check_arguments("rfft2", input, s, dim, norm, many=True)
    return _rfftn(input, s, dim, norm, out)


def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """``irfftn`` over the last two dims by default."""
    _check_arguments("irfft2", input, s, dim, norm, many=True)
    return _irfftn(input, s, dim, norm, out)


def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The n-dimensional Fourier transform of a real input, one-sided in the last transformed dim."""
    _check_arguments("rfftn", input, s, dim, norm, many=True)
    return _rfftn(input, s, dim, norm, out)


def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The inverse of ``rfftn``: the last transformed dim's output has ``s[-1]`` points (by default
    ``2 * (m - 1)``)."""
    _check_arguments("irfftn", input, s, dim, norm, many=True)
    return _irfftn(input, s, dim, norm, out)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The Fourier transform of a Hermitian-symmetric signal given by its first half: a real spectrum of ``n``
    points (by default ``2 * (m - 1)``)."""
    _check_arguments("hfft", input, n, dim, norm)
    return _c2r("hfft", input, n, dim, norm, out, True)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The inverse of ``hfft``: the one-sided inverse transform of a real signal."""
    _check_arguments("ihfft", input, n, dim, norm)
    return _r2c("ihfft", input, n, dim, norm, out, False, True)


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """``hfftn`` over the last two dims by default."""
    _check_arguments("hfft2", input, s, dim, norm, many=True)
    return _hfftn(input, s, dim, norm, out)


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """``ihfftn`` over the last two dims by default."""
    _check_arguments("ihfft2", input, s, dim, norm, many=True)
    return _ihfftn(input, s, dim, norm, out)


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The n-dimensional ``hfft``: a real output from a half-Hermitian input (one-sided in the last dim)."""
    _check_arguments("hfftn", input, s, dim, norm, many=True)
    return _hfftn(input, s, dim, norm, out)


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:  # noqa: A002
    """The inverse of ``hfftn``: one-sided in the last transformed dim."""
    _check_arguments("ihfftn", input, s, dim, norm, many=True)
    return _ihfftn(input, s, dim, norm, out)


TRANSFORMS = (fft, ifft, fft2, ifft2, fftn, ifftn, rfft, irfft, rfft2, irfft2, rfftn, irfftn)
TRANSFORMS += (hfft, ihfft, hfft2, ihfft2, hfftn, ihfftn)
for _transform in TRANSFORMS:
    _transform.__doc__ += "\n\n" + _HOST
del _transform


# --- stft / istft ----------------------------------------------------------------------------------------------------


class Frames(Function):
    """The overlapping frames of the last dim: ``(..., L)`` to ``(..., T, size)``, frame ``t`` starting at
    ``t * step``; its gradient is the overlap-add of the frames' gradients (``OverlapAdd``)."""

    node_name = "AsStridedBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, size: int, step: int) -> Tensor:
        ctx.step, ctx.length = step, x.shape[-1]
        return _on_host(x, lambda a: np.lib.stride_tricks.sliding_window_view(a, size, axis=-1)[..., ::step, :])

    @staticmethod
    def backward(ctx, g: Tensor):
        return OverlapAdd.apply(g, ctx.step, ctx.length), None, None


class OverlapAdd(Function):
    """Frames ``(..., T, size)`` summed into a signal ``(..., length)``, frame ``t`` added from ``t * step`` on
    (torch's ``unfold_backward``); its gradient is the frames of the signal's gradient (``Frames``)."""

    node_name = "UnfoldBackwardBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, frames: Tensor, step: int, length: int) -> Tensor:
        ctx.size, ctx.step = frames.shape[-1], step

        def overlap_add(a: np.ndarray) -> np.ndarray:
            # Cut every frame into chunks of ``step`` samples: chunk c of frame t lands at (t + c) * step, so
            # chunk c of all frames is one contiguous run of the output, added in one step (n / step adds).
            *batch, frames, size = a.shape
            chunks = -(-size // step)
            out = np.zeros((*batch, max(length, (frames + chunks) * step)), a.dtype)
            for c in range(chunks):
                width = min(step, size - c * step)
                run = out[..., c * step : (c + frames) * step]
                run.shape = (*batch, frames, step)  # (a view: assigning the shape raises rather than copy)
                run[..., :width] += a[..., c * step : c * step + width]
            return out[..., :length]

        return _on_host(frames, overlap_add)

    @staticmethod
    def backward(ctx, g: Tensor):
        return Frames.apply(g, ctx.size, ctx.step), None, None


def _option(value) -> str:
    """An optional argument as torch's messages print it: ``None``, or a bool as 0/1."""
    return "None" if value is None else str(int(value)) if isinstance(value, bool) else str(value)


def _window_repr(window) -> str:
    return "None" if window is None else f"{tensor_type_name(window)}{{{list(window.shape)}}}"


_NO_WINDOW = (
    "A window was not provided. A rectangular window will be applied,which is known to cause spectral leakage. "
    "Other windows such as torch.hann_window or torch.hamming_window are recommended to reduce spectral leakage.To "
    "suppress this warning and use a rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`."
)
_NO_INVERSE_WINDOW = (
    "A window was not provided. A rectangular window will be applied.Please provide the same window used by stft to "
    "make the inversion lossless.To suppress this warning and use a rectangular window, explicitly set "
    "`window=torch.ones(n_fft, device=<device>)`."
)


def _pad_signal(x: Tensor, pad: int, mode: str) -> Tensor:
    """``nn.functional.pad(x, [pad, pad], mode)`` of the last dim of a 3-d signal, with its checks (stft's
    centring; written here because the ops stand below ``nn``)."""
    if mode == "constant":
        return nn_ops.ConstantPad.apply(x, (pad, pad), 0)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    shape, dim = tuple(x.shape), x.dim() - 1
    if x.dim() not in (2, 3):
        raise NotImplementedError(
            f"Padding size 2 is not supported for {x.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    size = shape[dim]
    if mode != "circular" and any(s == 0 for s in shape[1:]):
        raise RuntimeError(
            f"Expected 2D or 3D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
            f"input, but got: {list(shape)}"
        )
    if mode == "circular" and pad > size:
        raise RuntimeError("Padding value causes wrapping around more than once.")
    if mode == "reflect" and pad >= size:
        raise RuntimeError(
            f"Argument #4: Padding size should be less than the corresponding input dimension, but got: padding "
            f"({pad}, {pad}) at dimension {dim} of input {list(shape)}"
        )
    j = np.arange(-pad, size + pad, dtype=np.int64)
    if mode == "circular":
        positions = j % size
    elif mode == "replicate":
        positions = np.clip(j, 0, size - 1)
    else:  # reflect about the first element, then the last
        j = np.abs(j)
        positions = np.where(j >= size, 2 * (size - 1) - j, j)
    return nn_ops.PAD_NODES[mode, 1].apply(x, nn_ops._IndexPadMaps(shape, ((dim, positions),)))


def _centred_window(window, win_length: int, n_fft: int, like: Tensor, dtype) -> Tensor:
    """The window (ones when None) zero-padded on both sides to ``n_fft`` samples, as stft and istft use it."""
    if window is None:
        window = Tensor._make(like._backend.from_host(np.ones(win_length, dtype.numpy)))
    left = (n_fft - win_length) // 2
    if win_length == n_fft:
        return window
    return nn_ops.ConstantPad.apply(window, (left, n_fft - win_length - left), 0)


@declare(methods=True)
def stft(
    input: Tensor,  # noqa: A002
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    pad_mode: str = "reflect",
    normalized: bool = False,
    onesided: bool | None = None,
    return_complex: bool | None = None,
    align_to_window: bool | None = None,
) -> Tensor:
    """The short-time Fourier transform: the Fourier transform of each frame of ``n_fft`` samples, taken every
    ``hop_length`` (default ``n_fft // 4``) samples and multiplied by ``window`` (``win_length`` samples, centred
    in the frame; rectangular when None). Output ``(freq, frames)`` (batched: ``(batch, freq, frames)``);
    ``center`` pads the signal by ``n_fft // 2`` on both sides (``pad_mode``); ``onesided`` keeps the
    non-negative frequencies (the default for real input and window); ``normalized`` scales by ``1/sqrt(n_fft)``.
    Real input needs ``return_complex`` given (``False``, deprecated, returns ``view_as_real`` of the result).
    ``align_to_window`` (only with ``center=False``) starts each frame where its window starts. On cuda the
    framing and the transforms run on the host (copied there and back)."""
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if center:
        signal_dim = input.dim()
        padded = _pad_signal(input.reshape([1] * (3 - signal_dim) + list(input.shape)), n_fft // 2, pad_mode)
        input = padded.reshape(padded.shape[-signal_dim:] if signal_dim else padded.shape)  # noqa: A001
    if window is not None and window.device != input.device:
        raise RuntimeError(
            f"stft input and window must be on the same device but got self on {input.device} and window on "
            f"{window.device}"
        )
    if window is None:
        warnings.warn(_NO_WINDOW, UserWarning, stacklevel=2)
    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    complex_input = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    returns_complex = complex_input if return_complex is None else return_complex
    if not returns_complex:
        if return_complex is None:
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and will further require that "
                "return_complex=True in a future PyTorch release."
            )
        warnings.warn(
            "stft with return_complex=False is deprecated. In a future pytorch release, stft will return complex "
            "tensors for all inputs, and return_complex=False will raise an error.\nNote: you can still call "
            "torch.view_as_real on the complex output to recover the old return format.",
            UserWarning,
            stacklevel=2,
        )
    described = (
        f"stft({tensor_type_name(input)}{list(input.shape)}, n_fft={n_fft}, hop_length={hop}, win_length={win}, "
        f"window={_window_repr(window)}, normalized={int(normalized)}, onesided={_option(onesided)}, "
        f"return_complex={_option(return_complex)}, align_to_window={_option(align_to_window)}) : "
    )
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(described + "expected a tensor of floating point or complex values")
    if input.dim() not in (1, 2):
        raise RuntimeError(described + "expected a 1D or 2D tensor")
    x = input.unsqueeze(0) if input.dim() == 1 else input
    length = x.shape[1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(described + f"expected 0 < n_fft < {length}, but got n_fft={win}")
    if hop <= 0:
        raise RuntimeError(described + f"expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(described + f"expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(
            described + f"expected a 1D window tensor of size equal to win_length={win}, but got window with size "
            f"{list(window.shape)}"
        )
    if align_to_window:  # frames of the window's length where it lies, then zero-padded around it to n_fft
        frames = Frames.apply(x, win, hop)
        if window is not None:
            frames = frames * window
        left = (n_fft - win) // 2
        frames = nn_ops.ConstantPad.apply(frames, (left, n_fft - win - left), 0)
    else:
        frames = Frames.apply(x, n_fft, hop)
        if window is not None:
            frames = frames * _centred_window(window, win, n_fft, x, window.dtype)
        elif win < n_fft:
            frames = frames * _centred_window(None, win, n_fft, x, x.dtype)
    if frames.dtype.name in ("float16", "bfloat16"):  # (torch's CPU transforms take only float32/float64)
        raise RuntimeError(f"MKL FFT doesn't support tensors of type: {frames.dtype.scalar_name}")
    mode = "by_root_n" if normalized else "none"
    if frames.dtype.is_complex:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        out = FftC2C.apply(frames, (2,), mode, True)
    else:
        out = FftR2C.apply(frames, (2,), mode, True if onesided is None else onesided)
    out = out.transpose(1, 2)
    if input.dim() == 1:
        out = out.squeeze(0)
    return out if returns_complex else view_as_real(out)


@declare(methods=True)
def istft(
    input: Tensor,  # noqa: A002
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    normalized: bool = False,
    onesided: bool | None = None,
    length: int | None = None,
    return_complex: bool = False,
) -> Tensor:
    """The inverse of ``stft``: each frame's inverse transform times the window, overlap-added, divided by the
    overlap-added squared window (which must not vanish anywhere: torch's "window overlap add" error), trimmed
    by ``n_fft // 2`` at both ends when ``center`` and cut or zero-padded to ``length`` when given. On cuda the
    transforms and the overlap-add run on the host (copied there and back)."""
    if window is not None and window.device != input.device:
        raise RuntimeError(
            f"istft input and window must be on the same device but got self on {input.device} and window on "
            f"{window.device}"
        )
    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if not input.dtype.is_complex:
        raise RuntimeError(
            "istft requires a complex-valued input tensor matching the output from stft with return_complex=True."
        )
    if window is None:
        warnings.warn(_NO_INVERSE_WINDOW, UserWarning, stacklevel=2)
    real_dims = input.dim() + 1  # torch reads the sizes from the real view (a trailing dim of 2)
    for k in (-2, -3):
        if -k > real_dims:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-real_dims}, {real_dims - 1}], but got {k})"
            )
    n_frames, fft_size = input.shape[-1], input.shape[-2]
    expected_length = n_fft + hop * (n_frames - 1)
    device = "CPU" if input.device.type == "cpu" else "CUDA"
    described = (
        f"istft({device}{input.dtype.scalar_name}Type{list(input.shape)}, n_fft={n_fft}, hop_length={hop}, "
        f"win_length={win}, window={_window_repr(window)}, center={int(center)}, normalized={int(normalized)}, "
        f"onesided={_option(onesided)}, length={_option(length)}, return_complex={int(return_complex)}) "
    )
    if input.numel() == 0:
        raise RuntimeError(described + ": input tensor cannot be empty.")
    if real_dims not in (3, 4):
        raise RuntimeError(described + f": expected a tensor with 3 or 4 dimensions, but got {real_dims}")
    one_sided = fft_size != n_fft if onesided is None else onesided
    if one_sided and n_fft // 2 + 1 != fft_size:
        raise RuntimeError(
            described + ": expected the frequency dimension (3rd to the last) of the input tensor to match n_fft / 2 "
            f"+ 1 when onesided=True, but got {fft_size}"
        )
    if not one_sided and n_fft != fft_size:
        raise RuntimeError(
            described + ": expected the frequency dimension (3rd to the last) of the input tensor to match n_fft when "
            f"onesided=False, but got {fft_size}"
        )
    if not 0 < hop <= win:
        raise RuntimeError(described + ": expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        raise RuntimeError(described + ": expected 0 < win_length <= n_fft")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(described + ": Invalid window shape. window has to be 1D and length of `win_length`")
    real_dtype = np.dtype(np.float32 if input.dtype.name == "complex64" else np.float64)
    if window is None:
        window = Tensor._make(input._backend.from_host(np.ones(win, real_dtype)))
    window = _centred_window(window, win, n_fft, input, None)
    x = (input.unsqueeze(0) if input.dim() == 2 else input).transpose(1, 2)  # (batch, frames, freq)
    mode = "by_root_n" if normalized else "by_n"
    if return_complex:
        if one_sided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        frames = FftC2C.apply(x, (2,), mode, False)
    else:
        if window.dtype.is_complex:
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not one_sided:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        frames = FftC2R.apply(x, (2,), mode, n_fft)
    signal = OverlapAdd.apply(frames * window, hop, expected_length)
    envelope = OverlapAdd.apply(window.pow(2).expand(1, n_frames, n_fft), hop, expected_length)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else -(n_fft // 2) if center else expected_length
    signal, envelope = signal[:, start:end], envelope[:, start:end]
    if bool((envelope.abs().amin() < 1e-11).item()):
        raise RuntimeError(described + f"window overlap add min: 1\n[ {device}BoolType{{}} ]")
    signal = signal / envelope
    if input.dim() == 2:
        signal = signal.squeeze(0)
    if end > expected_length:
        warnings.warn(
            "The length of signal is shorter than the length parameter. Result is being padded with zeros in the "
            "tail. Please check your center and hop_length settings.",
            UserWarning,
            stacklevel=2,
        )
        signal = nn_ops.ConstantPad.apply(signal, (0, end - expected_length), 0)
    return signal
