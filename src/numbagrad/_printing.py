"""Tensor repr that matches PyTorch's ``torch/_tensor_str.py`` character for character.

Users coming from PyTorch read tensor reprs all day; matching torch's layout exactly (column padding,
int/sci mode selection, summarization, wrapping, suffixes) makes numbagrad output directly comparable.
Everything here works on plain numpy arrays so the tensor class only has to hand over its data and
metadata.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["format_tensor", "get_printoptions", "printoptions", "set_printoptions"]


@dataclasses.dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTS = _PrinterOptions()

_NUMPY_DTYPES: dict[str, Any] = {
    "float16": np.float16,
    "float32": np.float32,
    "float64": np.float64,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "bool": np.bool_,
    "complex64": np.complex64,
    "complex128": np.complex128,
}


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set global print options, with torch's semantics (``sci_mode`` is always overwritten)."""
    if profile is not None:
        if profile == "default":
            _OPTS.precision, _OPTS.threshold, _OPTS.edgeitems, _OPTS.linewidth = 4, 1000, 3, 80
        elif profile == "short":
            _OPTS.precision, _OPTS.threshold, _OPTS.edgeitems, _OPTS.linewidth = 2, 1000, 2, 80
        elif profile == "full":
            _OPTS.precision, _OPTS.threshold, _OPTS.edgeitems, _OPTS.linewidth = 4, math.inf, 3, 80
    if precision is not None:
        _OPTS.precision = precision
    if threshold is not None:
        _OPTS.threshold = threshold
    if edgeitems is not None:
        _OPTS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTS.linewidth = linewidth
    _OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """Return the current options as kwargs for ``set_printoptions`` (lets callers restore them)."""
    return dataclasses.asdict(_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Temporarily change print options; restores the previous ones on exit."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """Decide width and int/sci mode once for all values, so columns line up."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = bool(np.issubdtype(values.dtype, np.floating))
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not self.floating:
            if flat.size:
                # str() length is monotone in the value on each side of zero, so the extremes suffice.
                for v in (flat.min(), flat.max()):
                    self.max_width = max(self.max_width, len(str(v.item())))
            return

        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:
            return
        abs_vals = np.abs(vals)
        vmin = float(abs_vals.min())
        vmax = float(abs_vals.max())
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        if _OPTS.sci_mode is None:
            self.sci_mode = vmax / vmin > 1000.0 or vmax > 1.0e8 or vmin < 1.0e-4
        else:
            self.sci_mode = bool(_OPTS.sci_mode)

        # The formatted length depends only on the sign and is monotone in |value| for each sign
        # (also in 'e' format, whose exponent digits grow towards both extremes of |value|), so the
        # largest and smallest magnitude of each sign give the maximum width.
        candidates: list[float] = []
        for part in (vals[vals > 0], vals[vals < 0]):
            if part.size:
                candidates += [float(part.min()), float(part.max())]
        p = _OPTS.precision
        for v in candidates:
            if self.sci_mode:
                width = len(f"{v:.{p}e}")
            elif self.int_mode:
                width = len(f"{v:.0f}") + 1  # room for the trailing '.'
            else:
                width = len(f"{v:.{p}f}")
            self.max_width = max(self.max_width, width)

    def format(self, value: Any) -> str:
        if self.floating:
            p = _OPTS.precision
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _summarized_data(a: np.ndarray) -> np.ndarray:
    """Values that will actually be shown when summarizing (torch's ``get_summarized_data``)."""
    e = _OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        # Note: like torch, with edgeitems == 0 this is a[:0] + a[-0:], i.e. the whole row.
        return np.concatenate((a[:e], a[-e:])) if a.shape[0] > 2 * e else a
    if not e:
        return a[tuple(slice(0, 0) for _ in range(a.ndim))]
    index = [np.concatenate((np.arange(e), np.arange(n - e, n))) if n > 2 * e else np.arange(n) for n in a.shape]
    return a[np.ix_(*index)]


class _ComplexFormatter:
    """torch's printing of complex values: the real parts and the imaginary parts each get a ``_Formatter`` of
    their own (so each lines up in its column), joined as ``re+imj``."""

    def __init__(self, values: np.ndarray) -> None:
        self.real = _Formatter(np.ascontiguousarray(values.real))
        self.imag = _Formatter(np.ascontiguousarray(values.imag))
        self.max_width = self.real.max_width + self.imag.max_width + 1  # (the "j")

    def format(self, value: Any) -> str:
        value = complex(value)
        real_str = self.real.format(value.real)
        imag_str = (self.imag.format(value.imag) + "j").lstrip()
        if imag_str[0] in "+-":
            return real_str + imag_str
        return real_str + "+" + imag_str


def _vector_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter | _ComplexFormatter) -> str:
    element_length = fmt.max_width + 2
    elements_per_line = max(1, math.floor((_OPTS.linewidth - indent) / element_length))
    e = _OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + [fmt.format(v) for v in a[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i : i + elements_per_line]) for i in range(0, len(data), elements_per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter | _ComplexFormatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = _OPTS.edgeitems
    n = a.shape[0]
    if summarize and n > 2 * e:
        slices = (
            [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(e)]
            + ["..."]
            + [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(n - e, n)]
        )
    else:
        slices = [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(a: np.ndarray, indent: int) -> str:
    if a.size == 0:
        return "[]"
    summarize = a.size > _OPTS.threshold
    shown = _summarized_data(a) if summarize else a
    fmt = _ComplexFormatter(shown) if a.dtype.kind == "c" else _Formatter(shown)
    return _tensor_str_with_formatter(a, indent, summarize, fmt)


def _add_suffixes(tensor_str: str, suffixes: Sequence[str], indent: int) -> str:
    """Append ``, suffix`` items, wrapping onto new lines when the last line would get too long.

    Widths are counted as torch spells the suffix (``dtype=torch.float64``), so a suffix wraps where torch's
    does although ``numbagrad.`` is longer."""
    parts = [tensor_str]
    # The "+ 1" (instead of "- 1") mirrors torch exactly; it makes wrapping kick in 2 chars early.
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        width = len(suffix.replace("numbagrad.", "torch."))
        if last_line_len + width + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + width
        else:
            parts.append(", " + suffix)
            last_line_len += width + 2
    parts.append(")")
    return "".join(parts)


def format_tensor(
    data: np.ndarray,
    *,
    dtype_name: str,
    default_dtype_name: str = "float32",
    default_complex_name: str = "complex64",
    suffixes: Sequence[str] = (),
    device_suffix: str | None = None,
    prefix: str = "tensor(",
    dtype_prefix: str = "numbagrad.",
) -> str:
    """Render ``data`` exactly like ``repr(torch_tensor)``.

    ``suffixes`` (e.g. ``"requires_grad=True"``, ``"grad_fn=<MulBackward0>"``) follow torch's own
    device/size/dtype suffixes. ``prefix`` may contain newlines (``"Parameter containing:\\ntensor("``);
    indentation is taken from its last line, as torch indents relative to ``"tensor("``.
    """
    np_dtype = _NUMPY_DTYPES.get(dtype_name)
    a = np.asarray(data) if np_dtype is None else np.asarray(data, dtype=np_dtype)
    if a.dtype.kind == "V":  # bfloat16 prints through float32, as torch's printer widens it
        a = a.astype(np.float32)
    indent = len(prefix) - prefix.rfind("\n") - 1

    all_suffixes: list[str] = []
    if device_suffix is not None:
        all_suffixes.append(f"device='{device_suffix}'")
    dtype_suffix = f"dtype={dtype_prefix}{dtype_name}"
    if a.size == 0:
        # Empty: shape is shown unless it is (0,), and the dtype cannot be inferred so it is
        # shown whenever it is not the default float dtype (even int64 / bool).
        if a.ndim != 1:
            all_suffixes.append(f"size={tuple(int(n) for n in a.shape)}")
        if dtype_name != default_dtype_name:
            all_suffixes.append(dtype_suffix)
        tensor_str = "[]"
    else:
        if not _OPTS.edgeitems:
            all_suffixes.append(f"size={tuple(int(n) for n in a.shape)}")
        if dtype_name not in (default_dtype_name, default_complex_name, "int64", "bool"):
            all_suffixes.append(dtype_suffix)
        tensor_str = _tensor_str(a, indent)
    all_suffixes.extend(suffixes)
    return _add_suffixes(prefix + tensor_str, all_suffixes, indent)
