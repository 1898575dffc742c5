"""The only references from lower layers to upper ones, handed over once by the upper package that owns them.

``_tensor`` (``Tensor.backward``, iteration, inference mode), ``autograd`` (the engine's gradient copies and
stacks, the functional API) and ``ops.elementwise`` call into packages above them; importing those would be an
import cycle. So ``numbagrad.ops``, as it loads, calls ``register`` with them, and the lower layers read them here
(``_upward.ops.stack(...)``). This module imports nothing of numbagrad, so every layer may read it, and
``tests/test_layout.py`` lists the names registered here and fails on any other way up.
"""

from __future__ import annotations

from typing import Any

#: ``numbagrad.ops``: the op functions (``stack``, ``where``, ``copy_grad``, ``zeros_like``).
ops: Any = None
#: ``numbagrad.autograd.grad_mode``: whether inference mode is on when a tensor is made.
grad_mode: Any = None
#: ``numbagrad.autograd``: ``Tensor.backward`` runs its ``backward``.
autograd: Any = None


def register(*, ops: Any, grad_mode: Any, autograd: Any) -> None:
    """Hand over the upper modules the lower layers call (once, by ``numbagrad.ops`` as it loads)."""
    globals().update(ops=ops, grad_mode=grad_mode, autograd=autograd)
