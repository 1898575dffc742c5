"""``numbagrad.optim``: torch's optimizers (``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adadelta``,
``Adamax``, ``NAdam``, ``RAdam``, ``ASGD``, ``Rprop``, ``LBFGS``, ``Adafactor``, ``SparseAdam``, ``Muon``) with
torch's options and semantics; each element-wise step runs one fused kernel per parameter, generated from a
per-element update function (Adafactor's and Muon's, whose steps need reductions and products, are tensor ops).
``optim.lr_scheduler`` holds torch's learning-rate schedulers, ``optim.swa_utils`` weight averaging."""

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = [
    "ASGD",
    "LBFGS",
    "Muon",
    "SGD",
    "SparseAdam",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
    "swa_utils",
]
