"""``numbagrad.optim``: ``SGD`` and ``Adam`` with torch's options and semantics; each step runs one fused Numba
kernel per parameter."""

from . import lr_scheduler
from .adam import Adam
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer", "lr_scheduler"]
