"""``numbagrad.profiler`` (torch.profiler): the host-time op profiler of ``autograd.profiler`` behind torch's
newer interface (``activities``, ``step``)."""

from __future__ import annotations

import enum

from ..autograd import profiler as _autograd_profiler
from ..autograd.profiler import record_function

__all__ = ["ProfilerActivity", "profile", "record_function"]


class ProfilerActivity(enum.Enum):
    """What a profiler records: numbagrad records ``CPU`` (host) time; ``CUDA`` adds nothing."""

    CPU = 0
    CUDA = 2


class profile(_autograd_profiler.profile):  # noqa: N801 - torch's name
    """``with profile(activities=[ProfilerActivity.CPU]) as prof:`` records every op the block runs;
    ``prof.key_averages().table()`` sums them by name. ``step()`` counts steps (``step_num``)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False) -> None:  # fmt: skip
        if schedule is not None or on_trace_ready is not None:
            raise NotImplementedError("numbagrad's profiler records the whole block: no schedule or trace handler")
        activities = set(activities) if activities is not None else {ProfilerActivity.CPU}
        super().__init__(use_cpu=ProfilerActivity.CPU in activities, use_cuda=ProfilerActivity.CUDA in activities,
                         record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules)  # fmt: skip
        self.step_num = 0

    def step(self) -> None:
        """Mark the end of one training step."""
        self.step_num += 1
