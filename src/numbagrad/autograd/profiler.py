"""``autograd.profiler``: count the ops a block runs and time each, by name, on the host (torch's CPU profiler).

While a profiler is active it sits where ``numbagrad.compile``'s recorder would (``grad_mode.state.tracer``),
so every ``Function.apply`` and creation function is handed to it: it times the call, run with the slot empty
(ops an op calls inside are part of its time), and notes it. No profiler, nothing to pay: the op entry points
already test that slot. ``record_function`` adds a named range whose self time leaves out the ops inside it.
Built-in ops are named as torch names them (``aten::mul``); a custom Function by its class name.
"""

from __future__ import annotations

import re
import time
import warnings

from .grad_mode import state

__all__ = ["EventList", "FunctionEventAvg", "profile", "record_function"]


def _op_name(cls) -> str:
    """``aten::<op>`` for a built-in op (from its node's name: ``AddmmBackward0`` is ``aten::addmm``); a custom
    Function's class name."""
    node = cls._backward_cls
    if not node._builtin:
        return cls.__name__
    base = re.sub(r"Backward\d*$", "", node.__name__)
    return "aten::" + re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()


class _OpRecorder:
    """Calls ``callback(name, seconds)`` for each op run while it is active; an active profiler outside it keeps
    seeing the ops too (they are handed on)."""

    def __init__(self, callback) -> None:
        self.callback = callback
        self.outer = None

    def __enter__(self) -> _OpRecorder:
        self.outer = state.tracer
        if self.outer is not None and not isinstance(self.outer, _OpRecorder):
            raise RuntimeError("numbagrad's profiler cannot run inside numbagrad.compile's tracing")
        state.tracer = self
        return self

    def __exit__(self, *exc) -> None:
        state.tracer = self.outer

    def _timed(self, name: str, fn, args, kwargs):
        st = state
        st.tracer = None
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - start
            st.tracer = self
            self._note(name, seconds)

    def _note(self, name: str, seconds: float) -> None:
        self.callback(name, seconds)
        if self.outer is not None:
            self.outer._note(name, seconds)

    def __call__(self, cls, args: tuple, kwargs: dict):
        return self._timed(_op_name(cls), cls.apply, args, kwargs)

    def creation(self, fn, args: tuple, kwargs: dict):
        return self._timed("aten::" + fn.__name__, fn, args, kwargs)

    def graph_break(self, reason: str) -> None:
        """What ``numbagrad.compile`` asks of a tracer when traced code cannot be replayed: a profiler replays
        nothing, so there is nothing to stop."""


class _Event:
    """One op call or ``record_function`` range: its name, total time and (for a range) its children's time."""

    __slots__ = ("name", "total", "children")

    def __init__(self, name: str, total: float = 0.0) -> None:
        self.name, self.total, self.children = name, total, 0.0


class FunctionEventAvg:
    """The calls of one name summed: ``count``, ``cpu_time_total`` and ``self_cpu_time_total`` (microseconds,
    as torch's), ``cpu_time`` (the mean)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (
            f"<FunctionEventAvg key={self.key} self_cpu_time={_format_time(self.self_cpu_time_total)} "
            f"cpu_time={_format_time(self.cpu_time)} count={self.count}>"
        )


class EventList(list):
    """``key_averages()``'s result: a list of ``FunctionEventAvg`` that prints as torch's table."""

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55) -> str:
        """torch's profiler table: name, self and total CPU time (and their shares), mean time, calls."""
        events = list(self)
        if sort_by is not None:  # an attribute of FunctionEventAvg: self_cpu_time_total, cpu_time_total, count...
            events.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        if row_limit is not None and row_limit > 0:
            events = events[:row_limit]
        width = min(max((len(e.key) for e in self), default=0) + 4, max_name_column_width)
        headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        widths = [width] + [12] * (len(headers) - 1)
        line = "  ".join("-" * w for w in widths) + "  "
        total = sum(e.self_cpu_time_total for e in self)
        rows = [line, "  ".join(h.rjust(w) for h, w in zip(headers, widths)) + "  ", line]
        for e in events:
            name = e.key if len(e.key) < width - 3 else e.key[: width - 3] + "..."
            cells = [
                name,
                _format_share(e.self_cpu_time_total, total),
                _format_time(e.self_cpu_time_total),
                _format_share(e.cpu_time_total, total),
                _format_time(e.cpu_time_total),
                _format_time(e.cpu_time),
                str(e.count),
            ]
            rows.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)) + "  ")
        rows += [line, f"Self CPU time total: {_format_time(total)}", ""]
        return "\n".join(rows)


def _format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_share(us: float, total: float) -> str:
    return f"{us / total * 100:.2f}%" if total else "0.00%"


class profile:  # noqa: N801 - torch's name
    """``with profile() as prof:`` records every op the block runs (and ``record_function`` ranges);
    ``prof.key_averages().table()`` sums them by name."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = True, use_cpu: bool = True) -> None:  # fmt: skip
        if not use_cpu:
            raise ValueError("numbagrad's profiler times ops on the host: use_cpu=False leaves nothing to record")
        unsupported = {"record_shapes": record_shapes, "with_flops": with_flops, "profile_memory": profile_memory,
                       "with_stack": with_stack, "with_modules": with_modules}  # fmt: skip
        for name, value in unsupported.items():
            if value:
                raise NotImplementedError(f"numbagrad's profiler records op names and host times only, not {name}")
        if use_cuda or use_device:
            warnings.warn("numbagrad's profiler records host time only: device kernels are not timed", stacklevel=2)
        self.enabled = enabled
        self.events: list[_Event] = []
        self._open: list[_Event] = []  # the record_function ranges now open, innermost last
        self._recorder = _OpRecorder(self._op)
        self._entered = False

    def __enter__(self) -> profile:
        if self.enabled:
            if state.profiler is not None:
                raise RuntimeError("Profiler is already enabled on this thread")
            state.profiler = self
            self._recorder.__enter__()
            self._entered = True
        return self

    def __exit__(self, *exc) -> None:
        if self._entered:
            self._recorder.__exit__(*exc)
            state.profiler = None
            self._entered = False

    def _op(self, name: str, seconds: float) -> None:
        self.events.append(_Event(name, seconds))
        if self._open:
            self._open[-1].children += seconds

    def _begin(self, name: str) -> _Event:
        event = _Event(name)
        self._open.append(event)
        return event

    def _end(self, event: _Event, seconds: float) -> None:
        self._open.remove(event)
        event.total = seconds
        self.events.append(event)
        if self._open:
            self._open[-1].children += seconds

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """The recorded calls summed per name, in order of first call (times in microseconds)."""
        averages: dict[str, FunctionEventAvg] = {}
        for e in self.events:
            avg = averages.get(e.name)
            if avg is None:
                avg = averages[e.name] = FunctionEventAvg(e.name)
            avg.count += 1
            avg.cpu_time_total += e.total * 1e6
            avg.self_cpu_time_total += (e.total - e.children) * 1e6
        return EventList(averages.values())

    def table(self, **kwargs) -> str:
        return self.key_averages().table(**kwargs)


class record_function:  # noqa: N801 - torch's name
    """A named range in an active profiler's record (its self time leaves out the ops run inside it); a context
    manager or a decorator. Without a profiler it records nothing."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._event = None
        self._start = 0.0
        self._profiler = None

    def __enter__(self) -> record_function:
        self._profiler = state.profiler
        if self._profiler is not None:
            self._event = self._profiler._begin(self.name)
            self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if self._profiler is not None:
            self._profiler._end(self._event, time.perf_counter() - self._start)
            self._profiler = self._event = None

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapper
