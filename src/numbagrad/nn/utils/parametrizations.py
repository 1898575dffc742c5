"""``nn.utils.parametrizations``: ``orthogonal``, ``weight_norm`` and ``spectral_norm`` as parametrizations
(torch's current API; the hook-based ``nn.utils.weight_norm``/``spectral_norm`` are in ``weight_norm.py``/
``spectral_norm.py``)."""

from __future__ import annotations

from ... import ops
from ..._tensor import Tensor
from ..._typeinfo import finfo
from ...autograd.grad_mode import no_grad
from ...linalg import householder_product, solve
from .. import functional as F
from ..module import Module
from . import parametrize


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002 - torch's name
    """The ``pow``-norm of ``v`` over every dim but ``dim``, kept broadcastable to ``v`` (``dim=-1``: the norm of
    the whole tensor)."""
    if dim == -1:
        return v.norm(pow)
    dims = tuple(d for d in range(v.dim()) if d != dim)
    return v.norm(pow, dims, keepdim=True) if dims else v.abs()


def _weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """``v * (g / ||v||)``, the norm taken over every dim but ``dim``."""
    return v * (g / norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||``: its magnitude ``original0`` and direction
    ``original1`` are learned separately (Salimans & Kingma)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """``weight / sigma``, with ``sigma`` the largest singular value of the weight as a matrix (``dim`` first),
    estimated by power iteration on the buffers ``_u`` and ``_v``: ``n_power_iterations`` more each training
    forward, 15 at registration."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = ops.empty(h, dtype=weight.dtype, device=weight.device).normal_(0, 1)
            v = ops.empty(w, dtype=weight.dtype, device=weight.device).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        with no_grad():
            for _ in range(n_power_iterations):
                self._u = F.normalize(ops.mv(weight_mat, self._v), dim=0, eps=self.eps)
                self._v = F.normalize(ops.mv(weight_mat.t(), self._u), dim=0, eps=self.eps)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = ops.dot(u, ops.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:  # fmt: skip
    """Divide ``module.<name>`` by its spectral norm (Miyato et al.), estimated by power iteration; ``dim``
    defaults to the output-channel dim (1 for transposed convolutions, else 0)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


def _is_orthogonal(Q: Tensor) -> bool:
    """``Q^T Q == I`` up to ``10 * n * eps`` of its dtype, torch's test for keeping an assigned matrix as it is."""
    n, k = Q.shape[-2], Q.shape[-1]
    eye = ops.eye(k, dtype=Q.dtype, device=Q.device)
    return bool(ops.allclose(Q.mT @ Q, eye, atol=10.0 * n * finfo(Q.dtype).eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of ``A = QR`` (A tall) with ``diag(R)`` non-negative, from the Householder QR."""
    X, tau = ops.geqrf(A)
    return householder_product(X, tau) * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    """A matrix (or batch) with orthonormal columns (rows, if wide) from an unconstrained one: the exponential or
    Cayley transform of its skew-symmetric part, or the product of the Householder reflectors in its lower
    triangle. With ``use_trivialization`` the result is left-multiplied by the ``base`` buffer that assignment
    sets (the dynamic trivialization of Lezcano-Casado, 2019)."""

    _MAPS = ("matrix_exp", "cayley", "householder")

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = ops.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = ops.matrix_exp(A)
            else:
                eye = ops.eye(n, dtype=A.dtype, device=A.device)
                Q = solve(ops.add(eye, A, alpha=-0.5), ops.add(eye, A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        """An unconstrained matrix this parametrization maps to ``Q``: with trivialization, ``-I`` (which every
        map takes to ``I``) and ``base`` set to ``Q`` (orthogonalized, completed to a square matrix with random
        columns if it is tall); without, the Householder reflectors of ``Q``'s QR."""
        with no_grad():
            if tuple(Q.shape) != tuple(self.shape):
                raise ValueError(
                    f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape {Q.shape}."
                )
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q, n, k = Q.mT, k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley parametrizations when "
                        "use_trivialization=False."
                    )
                A, tau = ops.geqrf(Q)
                diagonal = A.diagonal(dim1=-2, dim2=-1)
                diagonal.copy_(ops.where(tau == 0.0, -diagonal.sign(), diagonal.sign()))
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = ops.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(ops.cat([Q, N], dim=-1))
            self.base = Q
            neg_eye = ops.zeros_like(Q_init)
            neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_eye


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:  # fmt: skip
    """Keep ``module.<name>`` orthogonal (orthonormal columns, or rows if it is wide; each matrix of a batch) by
    parametrizing it with ``orthogonal_map``: ``"matrix_exp"`` (the default for square matrices), ``"cayley"`` or
    ``"householder"`` (the default otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.dim()} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _Orthogonal._MAPS:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


__all__ = ["orthogonal", "spectral_norm", "weight_norm"]
