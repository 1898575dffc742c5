"""All built-in ops. Each is an ``autograd.Function`` (or a composition of them) declared once in one of the
modules below; this package collects the declarations (``_registry``) into the public namespace and binds the
Tensor methods and operators they name."""

from .. import _upward
from .. import autograd as _autograd
from .._tensor import Tensor as _Tensor
from ..autograd import grad_mode as _grad_mode
from . import (  # noqa: F401 - each registers its ops
    apply,
    complex_ops,
    creation,
    elementwise,
    indexing,
    inplace,
    linalg,
    linalg_functions,
    more,
    reduction,
    shape,
    sparse,
    special_ops,
    spectral,
    storage,
    tensor_methods,
    torch_namespace,
)
from ._registry import OPS, bind_methods, public_names

for _decl in OPS.values():
    if not _decl.name.startswith("_"):
        globals()[_decl.name] = _decl.function
        for _alias in _decl.aliases:
            globals()[_alias] = _decl.function

__all__ = public_names()

bind_methods(_Tensor)
elementwise.register_inplace(_Tensor)

# What the layers below reach up to without importing the ops: the engine's differentiable gradient copy is one.
copy_grad = shape.copy_grad
_upward.register(ops=__import__(__name__, fromlist=["*"]), grad_mode=_grad_mode, autograd=_autograd)

del _decl, _alias
