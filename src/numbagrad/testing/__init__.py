"""``numbagrad.testing``: torch.testing's comparison and creation helpers (``assert_close``, ``make_tensor``).

Tensors are compared through their numpy data, with torch's tolerances per dtype and torch's report when values
differ, so a failure reads the same as it would under torch.
"""

from ._comparison import assert_allclose, assert_close
from ._creation import make_tensor

__all__ = ["assert_allclose", "assert_close", "make_tensor"]
