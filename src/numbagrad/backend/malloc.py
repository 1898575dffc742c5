"""Keep glibc's malloc from handing mid-size arrays back to the kernel after every step.

An eager step allocates and frees a handful of same-size temporaries. glibc serves arrays of 128 KiB and more
with ``mmap`` until the first one is freed; from then on its dynamic threshold puts them on the heap, but it
also trims the heap's top back to the system whenever more than twice that size is free there. A backward
frees several such arrays at once, so each step gave the memory back and faulted it in again, page by page:
``relu(x*w+b).sum().backward()`` at 1e5 float32 made 166 page faults a step and took 535 µs alone in a
process, 156 µs with the settings below (at 1e6: 7.3 ms and 2.0 ms). Importing torch hid this: its own
allocations keep the heap's top busy.

The settings are what glibc's dynamic rule converges to anyway (heap allocations up to 32 MiB, a trim
threshold of twice that), fixed from the start, so the heap keeps up to 64 MiB of free memory at its top
instead of trimming it every step. They apply to the whole process, so they are skipped when the user has
set any of glibc's malloc variables, when ``NUMBAGRAD_TUNE_MALLOC=0``, and on any other C library.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for its dynamic mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc would set when it raises the mmap threshold to that ceiling

_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def _is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # not a GNU system
        return False


def wanted() -> bool:
    """Whether to tune: glibc, no malloc setting of the user's, and no ``NUMBAGRAD_TUNE_MALLOC=0``."""
    if os.environ.get("NUMBAGRAD_TUNE_MALLOC", "1") == "0":
        return False
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    return _is_glibc()


def tune() -> bool:
    """Fix the mmap and trim thresholds (once, at import); True when glibc took both."""
    if not wanted():
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
