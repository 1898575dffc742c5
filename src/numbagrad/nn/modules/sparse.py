"""torch.nn.modules.sparse's classes at their torch path (what torch's pickles name)."""

from ..sparse import Embedding, EmbeddingBag  # noqa: F401

__all__ = ["Embedding", "EmbeddingBag"]
