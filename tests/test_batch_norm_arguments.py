"""``batch_norm``'s argument checks against torch: which dtype mixes it takes, and the error texts of the rest."""

import itertools

import numpy as np
import pytest

import numbagrad as ng

DTYPES = ("float16", "bfloat16", "float32", "float64")


def _outcome(lib, input_dtype: str, stats_dtype: str, weight_dtype: str | None, training: bool):
    """The result's dtype name, or the exception's type and text."""
    dt = lambda name: getattr(lib, name)  # noqa: E731
    x = lib.tensor(np.arange(6.0).reshape(2, 3)).to(dt(input_dtype))
    mean, var = lib.zeros(3, dtype=dt(stats_dtype)), lib.ones(3, dtype=dt(stats_dtype))
    weight = None if weight_dtype is None else lib.ones(3, dtype=dt(weight_dtype))
    try:
        out = lib.nn.functional.batch_norm(x, mean, var, weight=weight, training=training)
    except Exception as error:
        return type(error).__name__, str(error)
    return str(out.dtype).split(".")[1]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("input_dtype,stats_dtype,weight_dtype", [
    (i, s, w) for i, s, w in itertools.product(DTYPES, DTYPES, (None, *DTYPES)) if w is None or w in (i, s)
])  # fmt: skip
def test_batch_norm_dtype_mixes_match_torch(torch, input_dtype, stats_dtype, weight_dtype, training):
    assert _outcome(ng, input_dtype, stats_dtype, weight_dtype, training) == _outcome(
        torch, input_dtype, stats_dtype, weight_dtype, training
    )
