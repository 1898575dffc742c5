"""``numbagrad.nn``: Modules, Parameters, containers, layers, losses, ``functional`` and ``init`` (torch's API)."""

from . import functional, init
from . import parallel as parallel  # DistributedDataParallel (imports no mpi4py)
from .containers import ModuleDict, ModuleList, Sequential
from .layers import (
    CrossEntropyLoss,
    Identity,
    Linear,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    ReLU,
    Sigmoid,
    Softmax,
    Tanh,
)
from .module import Module
from .parameter import Parameter

__all__ = [
    "CrossEntropyLoss",
    "Identity",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "Tanh",
    "functional",
    "init",
]
