"""Grad modes (no_grad, enable_grad, set_grad_enabled, inference_mode) and anomaly mode.

Each is a context manager, a decorator, and for ``set_grad_enabled`` also a plain function, as in torch.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings


class _Guarded:
    """A ``_State`` field that keeps ``state.fast`` up to date: setting it also recomputes that flag. It defines
    no ``__get__``, so reading the field reads the thread's own dict at a plain attribute's cost."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __set__(self, st, value) -> None:
        fields = st.__dict__  # (a thread-local's __dict__ is this thread's own)
        fields[self.name] = value
        fields["fast"] = (
            fields.get("tracer") is None
            and not fields.get("inference")
            and not fields.get("anomaly")
            and fields.get("saved_hooks") is None
        )


class _State(threading.local):
    """Per-thread autograd state, as torch's is: a ``no_grad()`` or a backward in one thread never changes what
    another thread records. ``threading.local`` runs ``__init__`` afresh in every thread that reads it.

    ``tracer``: while ``numbagrad.compile`` traces a function in this thread, ``Function.apply`` hands every
    call to it (``tracer(cls, args, kwargs)``); the tracer records the call and runs it with ``tracer`` unset.

    ``fast``: no tracer, inference mode, anomaly mode or saved-tensor hooks, i.e. nothing an op's fast path
    (``_fast_apply``...) would have to honour. The four fields keep it up to date whoever sets them (``_Guarded``),
    so a fast path reads one thread-local field (each costs about 0.1 us) instead of four.
    """

    tracer = _Guarded()
    inference = _Guarded()
    anomaly = _Guarded()
    saved_hooks = _Guarded()

    def __init__(self) -> None:
        self.enabled = True
        self.inference = False
        self.anomaly = False
        self.anomaly_check_nan = True
        self.tracer = None
        self.autocast = None  # (device type, dtype) inside an enabled ``amp.autocast`` region
        self.saved_hooks = None  # the (pack, unpack) pairs of saved_tensors_hooks, innermost last; None if none
        self.saved_hooks_disabled = None  # disable_saved_tensors_hooks' error message while it is active
        self.task = None  # the backward pass running in this thread (the engine's ``_Task``), if any
        self.in_forward = False  # while ``Function.apply`` runs a forward with grad mode turned off for it
        self.profiler = None  # the ``autograd.profiler.profile`` recording in this thread, if any


state = _State()


def nothing_records(st) -> bool:
    """Whether an op called now would be recorded by nothing: grad mode is off (no graph node) and no tracer
    watches the calls (a forward-AD level, a compile trace, the profiler: ``st.tracer``). A backward may then run
    its kernels on the storage instead of calling ops; inside a forward-AD level it may not, since the gradients
    it computes must carry tangents (forward-over-reverse without ``create_graph``, as torch's do)."""
    return not st.enabled and st.tracer is None


def break_trace(reason: str) -> None:
    """While ``numbagrad.compile`` traces a function in this thread, stop tracing it: ``reason`` (what the code
    does that a replay would not repeat) is reported, and that guard key runs eagerly. Otherwise nothing."""
    tracer = state.tracer
    if tracer is not None:
        tracer.graph_break(reason)


class untraced:  # noqa: N801 - a context manager, named as the grad-mode ones are
    """Inside it, ``numbagrad.compile``'s tracer (if any) does not record: for a library cache's tensor made once
    and read as a constant after (``trace_constant``), not a value a replay computes again."""

    def __enter__(self) -> None:
        self._tracer, state.tracer = state.tracer, None

    def __exit__(self, *exc) -> None:
        state.tracer = self._tracer


def trace_constant(t):
    """``t``, a tensor a library cache keeps and never writes (an attention's causal mask): while ``numbagrad.compile``
    traces a function in this thread, a replay may read it as a constant, as it reads a parameter. Returns ``t``."""
    tracer = state.tracer
    if tracer is not None:
        tracer.constant(t)
    return t


def is_grad_enabled() -> bool:
    """True when operations record a graph (not inside ``no_grad``); the setting is per thread."""
    return state.enabled


def is_inference_mode_enabled() -> bool:
    """True inside ``inference_mode()`` in this thread."""
    return state.inference


class _DecoratorContextManager:
    """Base: ``with mode():`` or ``@mode()`` (or ``@mode`` for the no-argument ones). A decorated generator runs
    in the mode only while its body runs (each resumption), never between ``next`` calls, as in torch."""

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            return self._wrap_generator(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    def _wrap_generator(self, fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as error:  # thrown into the generator: rethrow inside the mode
                        with self.clone():
                            response = gen.throw(error)
                    else:
                        with self.clone():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value

        return generator

    def clone(self):
        """A fresh context manager with the same settings (used to decorate functions)."""
        return self.__class__()


class no_grad(_DecoratorContextManager):  # noqa: N801 - torch's name
    """Operations inside record no graph."""

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        if callable(fn):  # used as a bare decorator: @no_grad
            self.__init__()
            return self(fn)
        return self

    def __init__(self, fn=None) -> None:
        self.prev = True

    def __enter__(self) -> None:
        self.prev = state.enabled
        state.enabled = False

    def __exit__(self, *exc) -> None:
        state.enabled = self.prev


class enable_grad(no_grad):  # noqa: N801
    """Operations inside record a graph again (inside ``no_grad``)."""

    def __enter__(self) -> None:
        self.prev = state.enabled
        state.enabled = True


class set_grad_enabled(_DecoratorContextManager):  # noqa: N801
    """``set_grad_enabled(False)`` switches grad mode now, and restores it when used as a context manager."""

    def __init__(self, mode: bool) -> None:
        self.prev = state.enabled
        self.mode = bool(mode)
        state.enabled = self.mode

    def __call__(self, fn):
        state.enabled = self.prev  # used as a decorator: the mode applies inside calls only (torch does the same)
        return super().__call__(fn)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        state.enabled = self.prev

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):  # noqa: N801
    """Like ``no_grad``; tensors created inside are inference tensors that cannot be saved for backward."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):
            self.__init__()
            return self(mode)
        return self

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode) if not callable(mode) else True
        self.prev = (True, False)

    def __enter__(self) -> None:
        self.prev = (state.enabled, state.inference)
        # torch's InferenceMode guard: grad mode is the opposite of inference mode, inside either
        state.enabled, state.inference = not self.mode, self.mode

    def __exit__(self, *exc) -> None:
        state.enabled, state.inference = self.prev

    def clone(self):
        return self.__class__(self.mode)


def is_anomaly_enabled() -> bool:
    """True inside ``detect_anomaly()`` / ``set_detect_anomaly(True)`` in this thread."""
    return state.anomaly


def is_anomaly_check_nan_enabled() -> bool:
    """True when anomaly mode also checks backward results for NaN (``check_nan=True``)."""
    return state.anomaly_check_nan


class detect_anomaly(_DecoratorContextManager):  # noqa: N801
    """Record each node's forward traceback, print it when its backward fails, and check for NaN grads."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self.prev = (False, True)
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled for "
            "debugging.",
            UserWarning,
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self.prev = (state.anomaly, state.anomaly_check_nan)
        state.anomaly, state.anomaly_check_nan = True, self.check_nan

    def __exit__(self, *exc) -> None:
        state.anomaly, state.anomaly_check_nan = self.prev

    def clone(self):
        copy = object.__new__(self.__class__)  # (no second warning for each call of a decorated function)
        copy.check_nan, copy.prev = self.check_nan, self.prev
        return copy


class set_detect_anomaly:  # noqa: N801
    """``set_detect_anomaly(True)`` switches anomaly mode now (and restores it as a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = (state.anomaly, state.anomaly_check_nan)
        state.anomaly, state.anomaly_check_nan = bool(mode), check_nan

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        state.anomaly, state.anomaly_check_nan = self.prev
