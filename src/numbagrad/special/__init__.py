"""``numbagrad.special``: torch.special for real tensors.

The elementwise functions are rows of the table (``scalar_math.ROWS``): ports of the Cephes algorithms torch
uses, compiled for CPU and CUDA, with torch's derivative formulas where torch has them. The Bessel functions and
the orthogonal polynomials have none in torch, which records no graph for them, and neither does numbagrad. The
rest are torch's aliases of ops numbagrad already has (``expit`` is ``sigmoid``, ``gammaln`` is ``lgamma``) and
compositions of them (``ndtr``, ``multigammaln``, ``softmax``).
"""

from __future__ import annotations

import math

from .. import ops
from .._tensor import Tensor
from ..ops.elementwise import FRONTENDS, ROWS, _make_frontend

__all__ = [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammainc",
    "gammaincc",
    "gammaln",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "sinc",
    "softmax",
    "spherical_bessel_j0",
    "xlog1py",
    "xlogy",
    "zeta",
]


def _row(row_name: str, public: str):
    """The public function of a table row under torch.special's name for it (``special_expit()`` in errors)."""
    return _make_frontend(ROWS[row_name], f"special_{public}")


# rows torch records no graph for (their public functions are the table's, named as torch's)
airy_ai = FRONTENDS["special_airy_ai"]
bessel_j0 = FRONTENDS["special_bessel_j0"]
bessel_j1 = FRONTENDS["special_bessel_j1"]
bessel_y0 = FRONTENDS["special_bessel_y0"]
bessel_y1 = FRONTENDS["special_bessel_y1"]
modified_bessel_i0 = FRONTENDS["special_modified_bessel_i0"]
modified_bessel_i1 = FRONTENDS["special_modified_bessel_i1"]
modified_bessel_k0 = FRONTENDS["special_modified_bessel_k0"]
modified_bessel_k1 = FRONTENDS["special_modified_bessel_k1"]
scaled_modified_bessel_k0 = FRONTENDS["special_scaled_modified_bessel_k0"]
scaled_modified_bessel_k1 = FRONTENDS["special_scaled_modified_bessel_k1"]
spherical_bessel_j0 = FRONTENDS["special_spherical_bessel_j0"]
chebyshev_polynomial_t = FRONTENDS["special_chebyshev_polynomial_t"]
chebyshev_polynomial_u = FRONTENDS["special_chebyshev_polynomial_u"]
chebyshev_polynomial_v = FRONTENDS["special_chebyshev_polynomial_v"]
chebyshev_polynomial_w = FRONTENDS["special_chebyshev_polynomial_w"]
shifted_chebyshev_polynomial_t = FRONTENDS["special_shifted_chebyshev_polynomial_t"]
shifted_chebyshev_polynomial_u = FRONTENDS["special_shifted_chebyshev_polynomial_u"]
shifted_chebyshev_polynomial_v = FRONTENDS["special_shifted_chebyshev_polynomial_v"]
shifted_chebyshev_polynomial_w = FRONTENDS["special_shifted_chebyshev_polynomial_w"]
hermite_polynomial_h = FRONTENDS["special_hermite_polynomial_h"]
hermite_polynomial_he = FRONTENDS["special_hermite_polynomial_he"]
laguerre_polynomial_l = FRONTENDS["special_laguerre_polynomial_l"]
legendre_polynomial_p = FRONTENDS["special_legendre_polynomial_p"]

# differentiable rows
i0 = _row("i0", "i0")
i0e = _row("special_i0e", "i0e")
i1 = _row("special_i1", "i1")
i1e = _row("special_i1e", "i1e")
erfcx = _row("special_erfcx", "erfcx")
log_ndtr = _row("special_log_ndtr", "log_ndtr")
ndtri = _row("special_ndtri", "ndtri")
entr = _row("special_entr", "entr")
xlog1py = _row("special_xlog1py", "xlog1py")
zeta = _row("special_zeta", "zeta")
gammainc = _row("igamma", "gammainc")
gammaincc = _row("igammac", "gammaincc")

# torch's aliases of ops numbagrad has
digamma = _row("digamma", "digamma")
psi = _row("digamma", "psi")
erf = _row("erf", "erf")
erfc = _row("erfc", "erfc")
erfinv = _row("erfinv", "erfinv")
exp2 = _row("exp2", "exp2")
expit = _row("sigmoid", "expit")
expm1 = _row("expm1", "expm1")
gammaln = _row("lgamma", "gammaln")
log1p = _row("log1p", "log1p")
sinc = _row("sinc", "sinc")
xlogy = _row("xlogy", "xlogy")
logit = ops.logit
polygamma = ops.polygamma


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001, A002 - torch's names
    """Each element rounded half to even, to ``decimals`` decimal places (negative: to tens, hundreds...)."""
    return ops.round(input, decimals=decimals)


def ndtr(input: Tensor) -> Tensor:  # noqa: A002
    """The standard normal CDF of each element, ``(1 + erf(input / sqrt(2))) / 2``, composed as torch's is."""
    if not isinstance(input, Tensor):
        raise TypeError(f"special_ndtr(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return (1 + ops.erf(input * (1 / math.sqrt(2)))) * 0.5


def multigammaln(input: Tensor, p: int) -> Tensor:  # noqa: A002
    """The multivariate log-gamma function of dimension ``p`` of each element (``mvlgamma``)."""
    return ops.mvlgamma(input, p)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """``exp(input) / sum(exp(input))`` along ``dim``, computed stably (in ``dtype`` when given)."""
    return ops.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """``log(softmax(input))`` along ``dim``, computed stably (in ``dtype`` when given)."""
    return ops.log_softmax(input, dim, dtype=dtype)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:  # noqa: A002
    """``log(sum(exp(input)))`` over ``dim``, computed stably."""
    return ops.logsumexp(input, dim, keepdim)
