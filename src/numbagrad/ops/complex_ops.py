"""The complex-number ops: parts as views (``real``, ``imag``, ``view_as_real``, ``view_as_complex``), building
complex tensors (``complex``, ``polar``), conjugation, and the real-valued ``abs``/``angle`` and ``sgn`` of complex
tensors.

Gradients follow torch's convention: the gradient of a complex input is the conjugate Wirtinger derivative of the
(real) loss, ``grad_in = g * conj(df/dz) + conj(g) * df/dconj(z)``; for a holomorphic ``f`` that is
``g * conj(f'(z))``. Every backward is made of differentiable ops, so double backward needs no second formula.

``conj()`` of a complex tensor is lazy, as torch's: it returns a ``ConjView`` sharing the tensor's storage and
version counter, whose values are the conjugates of the storage's at every read. numpy has no conjugating view of
an array, so the view keeps the storage (``_physical``) and conjugates it whenever an op reads ``_data``: a write
to the tensor is seen through its conjugate, and no op has to know about a conjugate bit. Writing through the
view in place is refused (``check_inplace``), since the conjugated values it reads are a fresh array each time.
"""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from .._types import complex_of
from ..autograd.function import Function
from ..backend import backend_for
from ._registry import declare

__all__ = ["ConjView", "abs_complex", "angle_complex", "sgn_complex"]


class ConjView(Tensor):
    """The lazily conjugated view of a complex tensor (see the module docstring): ``is_conj()`` is True, its
    values are the conjugates of the storage it shares with the tensor it was made from."""

    _lazy_conj = True

    @property
    def _data(self):
        physical = self._physical
        values = backend_for(physical).conj(physical)
        if isinstance(values, np.ndarray):
            values.flags.writeable = False  # (a write would land in this fresh array, not in the storage)
        return values

    def detach(self) -> Tensor:
        """The same lazily conjugated storage, without history."""
        return _conj_view(self._physical, self._shared_version())

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """torch's refusal: numpy has no conjugated view of the storage to hand out."""
        raise RuntimeError(
            "Can't call numpy() on Tensor that has conjugate bit set. Use tensor.resolve_conj().numpy() instead."
        )


def _conj_view(physical, version) -> ConjView:
    view = object.__new__(ConjView)
    view._physical = physical
    view._version_counter = version
    return view


def _physical(z: Tensor):
    """The storage of ``z`` as it is in memory: a conjugate view's is its unconjugated storage."""
    return z._physical if type(z) is ConjView else z._data


class Conj(Function):
    node_name = "ConjBackward0"

    @staticmethod
    def forward(ctx, z):
        if type(z) is ConjView:  # the conjugate of a conjugate view is the storage itself
            t = Tensor._make(z._physical)
            t._version_counter = z._shared_version()
            return t
        return _conj_view(z._data, z._shared_version())

    @staticmethod
    def backward(ctx, g):
        return conj(g)


class ConjPhysical(Function):
    node_name = "ConjPhysicalBackward0"

    @staticmethod
    def forward(ctx, z):
        return Tensor._make(z._backend.conj(z._data))

    @staticmethod
    def backward(ctx, g):
        return ConjPhysical.apply(g) if g.is_complex() else g


def conj(z: Tensor) -> Tensor:
    """The conjugate of ``z``: a lazy view for a complex tensor, ``z`` itself for a real one."""
    return Conj.apply(z) if z._data.dtype.kind == "c" else z


def resolve_conj(z: Tensor) -> Tensor:
    """A conjugate view's values in a new tensor (``is_conj()`` False); any other tensor itself."""
    return ConjPhysical.apply(Conj.apply(z)) if type(z) is ConjView else z


def conj_physical(z: Tensor) -> Tensor:
    """The conjugate of ``z`` in a new tensor (a copy of a real one)."""
    if z._data.dtype.kind == "c":
        return ConjPhysical.apply(z)
    return z.clone()


class Real(Function):
    node_name = "SelectBackward0"  # (torch takes the real part as a select of ``view_as_real``)

    @staticmethod
    def forward(ctx, z):
        return z._view_of(z._backend.real_part(z._data))

    @staticmethod
    def backward(ctx, g):
        return complex_(g, g * 0)


class Imag(Function):
    node_name = "SelectBackward0"

    @staticmethod
    def forward(ctx, z):
        return z._view_of(z._backend.imag_part(z._data))

    @staticmethod
    def backward(ctx, g):
        return complex_(g * 0, g)


def real(z: Tensor) -> Tensor:
    """The real parts of ``z`` as a view sharing its storage (``z`` itself when it is real)."""
    return Real.apply(z) if z._data.dtype.kind == "c" else z


def imag(z: Tensor) -> Tensor:
    """The imaginary parts of ``z`` as a view sharing its storage (torch's error for a real tensor)."""
    if z._data.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return Imag.apply(z)


class ViewAsReal(Function):
    node_name = "ViewAsRealBackward0"

    @staticmethod
    def forward(ctx, z):
        return z._view_of(z._backend.view_as_real(z._data))

    @staticmethod
    def backward(ctx, g):
        return view_as_complex(g.contiguous())


class ViewAsComplex(Function):
    node_name = "ViewAsComplexBackward0"

    @staticmethod
    def forward(ctx, x):
        return x._view_of(x._backend.view_as_complex(x._data, complex_of(x.dtype).numpy))

    @staticmethod
    def backward(ctx, g):
        return view_as_real(resolve_conj(g))


@declare
def view_as_real(input: Tensor) -> Tensor:  # noqa: A002
    """A complex tensor's storage as floats with a last dim of 2 (real, imaginary): a view sharing it."""
    if input._data.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    if type(input) is ConjView:
        raise RuntimeError(
            "view_as_real doesn't work on unresolved conjugated tensors.  To resolve the conjugate tensor so you can "
            "view it as real, use self.resolve_conj(); however, be warned that the resulting tensor will NOT alias "
            "the original."
        )
    return ViewAsReal.apply(input)


@declare
def view_as_complex(input: Tensor) -> Tensor:  # noqa: A002
    """A float tensor whose last dim holds (real, imaginary) pairs, seen as complex numbers: a view sharing it."""
    d = input.dtype
    if not d.is_floating_point or d.name == "bfloat16":
        raise RuntimeError(
            f"view_as_complex is only supported for half, float and double tensors, but got a tensor of scalar type: "
            f"{d.scalar_name}"
        )
    if d.name == "float16":
        raise RuntimeError("numbagrad has no complex32: view_as_complex takes float and double tensors")
    data = input._data
    if data.ndim == 0 or data.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    item = data.dtype.itemsize
    if data.strides[-1] != item:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * item) for s in data.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    return ViewAsComplex.apply(input)


@declare
def view_as_real_copy(input: Tensor) -> Tensor:  # noqa: A002
    """``view_as_real``'s values in a tensor of their own."""
    return view_as_real(input).clone()


@declare
def view_as_complex_copy(input: Tensor) -> Tensor:  # noqa: A002
    """``view_as_complex``'s values in a tensor of their own."""
    return view_as_complex(input).clone()


class Complex(Function):
    node_name = "ComplexBackward0"

    @staticmethod
    def forward(ctx, re, im):
        return Tensor._make(re._backend.make_complex(re._data, im._data, complex_of(re.dtype).numpy))

    @staticmethod
    def backward(ctx, g):
        return real(g), imag(g)


def _check_parts(name: str, a: Tensor, b: Tensor) -> None:
    """torch's checks of the two real tensors ``complex``/``polar`` combine: both float, of one dtype."""
    names = ("real", "imag") if name == "complex" else ("abs", "angle")
    for position, (t, arg) in enumerate(zip((a, b), names), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, not {type(t).__name__}")
    if a.dtype.name not in ("float16", "float32", "float64") or b.dtype.name not in ("float16", "float32", "float64"):
        raise RuntimeError(
            f"Expected both inputs to be Half, Float or Double tensors but got {a.dtype.scalar_name} and "
            f"{b.dtype.scalar_name}"
        )
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {a.dtype.scalar_name} but got scalar type {b.dtype.scalar_name} for "
            "second argument"
        )
    if a.dtype.name == "float16":
        raise RuntimeError("numbagrad has no complex32: complex parts must be float or double tensors")


def complex_(real: Tensor, imag: Tensor) -> Tensor:
    """``real + imag * 1j`` (broadcast), without the argument checks (gradients call it)."""
    shape = np.broadcast_shapes(real.shape, imag.shape)
    if real.shape != shape:
        real = real.expand(shape)
    if imag.shape != shape:
        imag = imag.expand(shape)
    return Complex.apply(real, imag)


@declare(name="complex")
def complex_tensor(real: Tensor, imag: Tensor) -> Tensor:
    """The complex tensor ``real + imag * 1j`` (broadcast); both parts float tensors of one dtype."""
    _check_parts("complex", real, imag)
    return complex_(real, imag)


class Polar(Function):
    node_name = "PolarBackward0"

    @staticmethod
    def forward(ctx, r, theta):
        ctx.save_for_backward(r, theta)
        re, im = (r * theta.cos())._data, (r * theta.sin())._data  # (table rows: the backend's kernels)
        return Tensor._make(r._backend.make_complex(re, im, complex_of(r.dtype).numpy))

    @staticmethod
    def backward(ctx, g):
        # w = r e^(i theta) of real r, theta: a real input's gradient is Re(conj(g) dw/dinput)
        r, theta = ctx.saved_tensors
        unit = complex_(theta.cos(), theta.sin())
        ga = real(conj_physical(g) * unit) if ctx.needs_input_grad[0] else None
        gt = real(conj_physical(g) * unit * r * 1j) if ctx.needs_input_grad[1] else None
        return ga, gt


@declare
def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002 - torch's names
    """The complex tensor of magnitudes ``abs`` and arguments ``angle``: ``abs * (cos(angle) + sin(angle) * 1j)``."""
    _check_parts("polar", abs, angle)
    shape = np.broadcast_shapes(abs.shape, angle.shape)
    return Polar.apply(abs.expand(shape), angle.expand(shape))


class AbsComplex(Function):
    node_name = "AbsBackward0"

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return Tensor._make(z._backend.complex_abs(z._data))

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * sgn_complex(z)


class AngleComplex(Function):
    node_name = "AngleBackward0"

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return Tensor._make(z._backend.complex_angle(z._data))

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        r2 = AbsComplex.apply(z) ** 2
        safe = r2.masked_fill(r2 == 0, 1)  # (the gradient at 0 is 0, as torch's)
        return (g * z / safe * 1j).masked_fill(r2 == 0, 0)


class SgnComplex(Function):
    node_name = "SgnBackward0"

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return Tensor._make(z._backend.complex_sgn(z._data))

    @staticmethod
    def backward(ctx, g):
        # sgn(z) = z / |z|: d/dz = 1 / (2|z|), d/dconj(z) = -z^2 / (2|z|^3), so grad = (g - conj(g) sgn(z)^2) / (2|z|)
        (z,) = ctx.saved_tensors
        r = AbsComplex.apply(z)
        s = SgnComplex.apply(z)
        safe = r.masked_fill(r == 0, 1)
        return ((g - conj(g) * s * s) / (2 * safe)).masked_fill(r == 0, 0)


def abs_complex(z: Tensor) -> Tensor:
    """``|z|`` of a complex tensor: a real tensor of its parts' dtype."""
    return AbsComplex.apply(z)


def angle_complex(z: Tensor) -> Tensor:
    """The argument of each complex element, in (-pi, pi]: a real tensor of its parts' dtype."""
    return AngleComplex.apply(z)


def sgn_complex(z: Tensor) -> Tensor:
    """``z / |z|`` of a complex tensor (0 where ``z`` is 0)."""
    return SgnComplex.apply(z)


def is_conj(z: Tensor) -> bool:
    """Whether ``z`` is a lazily conjugated view."""
    return type(z) is ConjView
