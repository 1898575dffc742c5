"""``GradScaler``: dynamic loss scaling, as torch's ``torch.amp.GradScaler``.

The scale multiplies the loss before backward, so float16 gradients do not underflow; ``unscale_`` divides the
gradients by it (checking them for inf/nan), ``step`` skips the optimizer step when any was non-finite, and
``update`` backs the scale off after such a step or grows it after ``growth_interval`` clean ones. The scale is a
float32 value, as torch's scale tensor.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from enum import Enum

import numpy as np

from .. import ops
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_optimizer_state() -> dict:
    return {"stage": OptState.READY, "found_inf": None}


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with non-finite gradients, adapt the scale."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:  # fmt: skip
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from ..cuda import is_available  # lazy: numbagrad.cuda imports this package (torch.cuda.amp's names)

            if not is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                              stacklevel=2)  # fmt: skip
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: np.float32 | None = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: int | None = None
            self._per_optimizer_states: dict = defaultdict(_fresh_optimizer_state)

    def _lazy_init(self) -> None:
        if self._scale is None:
            self._scale = np.float32(self._init_scale)
            self._growth_tracker = self._init_growth_tracker

    def _check_scale(self, funcname: str) -> None:
        if self._scale is None:
            raise AssertionError(
                f"Attempted {funcname} but _scale is None.  This may indicate your script did not use scaler.scale"
                "(loss or outputs) earlier in the iteration."
            )

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them) times the current scale."""
        if not self._enabled:
            return outputs
        self._lazy_init()
        if isinstance(outputs, Tensor):
            return outputs * float(self._scale)
        if isinstance(outputs, (list, tuple)) or hasattr(outputs, "__iter__"):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else iter(scaled)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, noting whether any is inf or nan."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = float(np.float32(1.0 / np.float64(self._scale)))
        found_inf = False
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    if param.grad.dtype.name == "float16":
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    param.grad.mul_(inv_scale)
                    found_inf = found_inf or not bool(ops.isfinite(param.grad).all())
        state["found_inf"] = found_inf
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless ``unscale_`` already did), then ``optimizer.step()`` unless a gradient was non-finite."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Back the scale off if any step this iteration saw inf/nan, else count a clean step and grow it every
        ``growth_interval`` of them; or set it to ``new_scale``."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(
                        "new_scale should be a float or a 1-element torch.cuda.FloatTensor or torch.FloatTensor with "
                        "requires_grad=False."
                    )
                new_scale = new_scale.item()
            self._scale = np.float32(new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer_states.values() if s["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found):
                self._scale = np.float32(self._scale * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = np.float32(self._scale * np.float32(self._growth_factor))
                    if np.isfinite(grown):
                        self._scale = grown
                    successful = 0
                self._growth_tracker = successful
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale)

    def get_growth_factor(self) -> float:
        """The factor the scale grows by after ``growth_interval`` clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the growth factor."""
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after a step with inf/nan gradients."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the backoff factor."""
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        """How many clean steps in a row grow the scale."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the growth interval."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self) -> bool:
        """Whether this scaler scales (False: every method passes through)."""
        return self._enabled

    def state_dict(self) -> dict:
        """torch's keys: ``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``, ``_growth_tracker``
        (empty when disabled)."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the scale, factors, interval and growth tracker from ``state_dict()``'s dict."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            )
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale = np.float32(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker = state_dict["_growth_tracker"]
