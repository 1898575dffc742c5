"""``AdaptiveLogSoftmaxWithLoss``: Grave et al.'s adaptive softmax for large vocabularies, as torch's.

The frequent classes (below the first cutoff) and one entry per cluster of rarer classes share the ``head``
softmax; each cluster has its own smaller projection (``tail``). A target's log-probability is the head's (for its
class or its cluster) plus, in a cluster, the cluster's own.
"""

from __future__ import annotations

import itertools
from collections import namedtuple

import numpy as np

from .. import ops
from .._tensor import Tensor
from . import functional as F
from .containers import ModuleList, Sequential
from .layers import Linear
from .module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Log-probabilities of ``n_classes`` classes split at ``cutoffs`` into a head and clusters whose projections
    shrink by ``div_value`` each; ``forward(input, target)`` gives the targets' log-probabilities and their mean
    negative as the loss."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > (n_classes - 1)
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):  # fmt: skip
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where each "
                "value is between 1 and n_classes-1"
            )
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                        Linear(hsz, osz, bias=False, device=device, dtype=dtype)))  # fmt: skip

    def reset_parameters(self) -> None:
        """Re-initialise the head and every tail projection as their ``Linear`` layers do."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        targ_dim = target_.dim()
        if targ_dim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise RuntimeError(
                    f"1D target tensor expects 2D input tensors, but found inputs with size {input_.shape}"
                )
        elif targ_dim == 0:
            if input_.dim() != 1:
                raise RuntimeError(
                    f"0D target tensor expects 1D input tensors, but found inputs with size {input_.shape}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = (target_ if batched else target_.unsqueeze(0))._host().astype(np.int64)
        batch = target.shape[0]
        output = ops.zeros(batch, dtype=input.dtype, device=input.device)
        gather = np.zeros(batch, dtype=np.int64)
        used = 0
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            rows = np.flatnonzero((target >= low) & (target < high))
            if rows.size == 0:
                continue
            if i == 0:
                gather[rows] = target[rows]
            else:
                row_index = Tensor._make(rows)
                cluster = F.log_softmax(self.tail[i - 1](input.index_select(0, row_index)), dim=1)
                local = cluster.gather(1, Tensor._make((target[rows] - low).reshape(-1, 1)))
                gather[rows] = self.shortlist_size + i - 1
                output = output.index_add(0, row_index, local.squeeze(1))
            used += rows.size
        if used != batch:
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range [{target.min()}, "
                f"{target.max()}] were found. "
            )
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, Tensor._make(gather.reshape(-1, 1))).squeeze()
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i, _ in enumerate(itertools.pairwise(self.cutoffs)):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return ops.cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of all ``n_classes`` classes, (N, n_classes)."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The most probable class of each example (``log_prob(input).argmax(1)``, computed from the head alone
        when every example's best head entry is a shortlist class)."""
        head_output = self.head(input)
        output = ops.argmax(head_output, dim=1)
        if not bool((output >= self.shortlist_size).any()):
            return output
        return ops.argmax(self._get_full_log_prob(input, head_output), dim=1)
