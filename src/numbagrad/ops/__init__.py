"""All built-in ops. Each is an ``autograd.Function`` (or a composition of them) declared once in one of the
modules below; this package collects the declarations (``_registry``) into the public namespace and binds the
Tensor methods and operators they name."""

from .. import _tensor
from .. import autograd as _autograd
from .._tensor import Tensor as _Tensor
from ..autograd import grad_mode as _grad_mode
from . import (  # noqa: F401 - each registers its ops
    apply,
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

# What the layers below reach up to without importing the ops (bound here, as the ops load).
sum_to_shape = reduction.sum_to_shape
copy_grad = shape.copy_grad
get_default_dtype = creation.get_default_dtype
_tensor._ops = __import__(__name__, fromlist=["*"])
_tensor._grad_mode = _grad_mode
_tensor._autograd = _autograd

del _decl, _alias
