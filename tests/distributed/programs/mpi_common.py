"""Shared by the mpiexec programs and the tests that check them: the inputs each rank starts from, and a
recorder that writes what a rank saw to ``<outdir>/rank<r>.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

DTYPES = ("float32", "float64", "int64")
OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX")


def rank_values(rank: int, dtype: str) -> np.ndarray:
    """Rank ``rank``'s input to the collectives: distinct signs and magnitudes per rank, so that every reduce op
    (and AVG's truncation on integers) gives a different answer."""
    return np.array([rank + 1, -(rank + 2), 3 * rank + 1, 5, -7 * rank], dtype=dtype)


class Recorder(dict):
    """``rec[name] = value`` (JSON-able), then ``rec.save()``; ``rec.error(name, fn)`` records fn's exception."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank
        self.outdir = Path(sys.argv[1])

    def error(self, name: str, fn) -> None:
        try:
            fn()
        except Exception as e:  # the test checks the type and message
            self[name] = [type(e).__name__, str(e)]
        else:
            self[name] = None

    def save(self) -> None:
        (self.outdir / f"rank{self.rank}.json").write_text(json.dumps(self))
