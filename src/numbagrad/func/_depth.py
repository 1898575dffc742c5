"""How many ``numbagrad.func`` transforms are running in this thread: results keep their graph inside one, not
outside all. Its own module so that ``func`` and ``func._vmap`` (which ``func`` imports) share it."""

from __future__ import annotations

import threading


class _Depth(threading.local):
    def __init__(self) -> None:
        self.value = 0


depth = _Depth()


class Level:
    """``with Level():`` counts one more transform running while the block runs."""

    def __enter__(self) -> None:
        depth.value += 1

    def __exit__(self, *exc) -> None:
        depth.value -= 1
