"""``nn.utils.stateless.functional_call``: torch's older spelling of ``numbagrad.func.functional_call``."""

from __future__ import annotations

import warnings


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):  # fmt: skip
    """Call ``module`` with the given parameters and buffers in place of its own (see ``func.functional_call``)."""
    warnings.warn(
        "This API is deprecated as of PyTorch 2.0 and will be removed in a future version of PyTorch. Please use "
        "torch.func.functional_call instead which is a drop-in replacement.",
        FutureWarning,
        stacklevel=2,
    )
    from ...func import functional_call as call  # lazy: numbagrad.func sits beside nn, not below it

    return call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
