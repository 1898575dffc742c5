"""torch.nn.modules.distance's classes at their torch path (what torch's pickles name)."""

from ..distance import CosineSimilarity, PairwiseDistance  # noqa: F401

__all__ = ["CosineSimilarity", "PairwiseDistance"]
