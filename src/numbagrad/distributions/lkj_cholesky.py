"""The LKJ distribution over Cholesky factors of correlation matrices (Lewandowski, Kurowicka and Joe, 2009)."""

from __future__ import annotations

import math

from .. import ops
from .._typeinfo import finfo
from .._types import Size
from . import constraints
from .beta import Beta
from .distribution import _EMPTY, Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """Lower Cholesky factors ``L`` of ``dim x dim`` correlation matrices ``M = L L^T`` with density proportional
    to ``det(M) ** (concentration - 1)``; ``concentration == 1`` is uniform over correlation matrices.

    Samples come from the onion method (section 3.2 of the paper), vectorized over rows: row ``i`` is
    ``sqrt(y_i) * u_i`` with ``y_i ~ Beta(i / 2, concentration + (dim - 2 - i) / 2)`` and ``u_i`` uniform on the
    unit sphere of its first ``i`` entries, completed by the diagonal entry that makes the row unit length.
    (torch 2.13 draws ``y_i`` from ``Beta(i - 1/2, ...)`` instead, which for ``dim > 2`` puts its samples off the
    LKJ law that its own ``log_prob`` describes; these follow the paper, so samples and ``log_prob`` agree.)"""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None) -> None:
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = Size((dim, dim))
        # the Beta(i / 2, eta + (dim - 2 - i) / 2) laws of row i's squared off-diagonal norm; row 0 has none (its
        # draw is discarded)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = ops.arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = ops.cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(0.5 * offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=_EMPTY):
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u_normal = ops.randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype, device=y.device).tril(-1)
        u_hypersphere = u_normal / u_normal.norm(dim=-1, keepdim=True)
        u_hypersphere[..., 0, :].fill_(0.0)  # row 0 has no off-diagonal entries (it was 0 / 0)
        w = ops.sqrt(y) * u_hypersphere
        diag_elems = ops.clamp(1 - ops.sum(w**2, dim=-1), min=finfo(w.dtype).tiny).sqrt()
        return w + ops.diag_embed(diag_elems)

    def log_prob(self, value):
        # p(M) ~ det(M)^(eta - 1) = prod L_ii^(2 (eta - 1)); with the Jacobian prod L_ii^(D - i) of L -> M,
        # p(L) ~ prod_{i >= 1} L_ii^(2 eta - 2 + D - i - 1) (0-based i; L_00 = 1)
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = ops.arange(2, self.dim + 1, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = ops.sum(order * diag_elems.log(), dim=-1)
        # the normalizing constant (page 1999 of the paper); mvlgamma's pi term is (D-1)(D-2)/4 log(pi), the
        # paper's D(D-1)/4 log(pi), hence the (D-1)/2 log(pi) added
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = ops.lgamma(alpha) * dm1
        numerator = ops.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
