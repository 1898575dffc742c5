"""``numbagrad.optim``: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop`` and ``Adagrad`` with torch's options and
semantics; each step runs one fused kernel per parameter, generated from a per-element update function.
``optim.lr_scheduler`` holds torch's learning-rate schedulers."""

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
