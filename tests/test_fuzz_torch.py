"""A differential fuzzer against torch: hypothesis draws small programs (type promotion, indexing, reductions,
shape ops on non-contiguous inputs), each runs on numbagrad and on torch, and the two must agree in values,
dtypes, shapes, input gradients, the inputs after the call, or the exception type.

Each family runs ``NUMBAGRAD_FUZZ_EXAMPLES`` examples (by default 50, and 200 for the ``nn.functional`` and matmul
families; set it higher for a longer hunt). The examples are the same on every run unless
``NUMBAGRAD_FUZZ_RANDOM=1``; then hypothesis draws new ones, from ``pytest --hypothesis-seed=N`` when given (so a
hunt over several seeds is ``NUMBAGRAD_FUZZ_RANDOM=1 NUMBAGRAD_FUZZ_EXAMPLES=2000 pytest --hypothesis-seed=1``)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import numbagrad

settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("NUMBAGRAD_FUZZ_EXAMPLES", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    derandomize=os.environ.get("NUMBAGRAD_FUZZ_RANDOM") != "1",
)
FUZZ = settings.get_profile("fuzz")

DTYPES = ["float32", "float64", "int64", "int32", "bool"]


def _array(draw, shape, dtype: str) -> np.ndarray:
    """Small exact values (halves, small ints), so both libraries compute the same bits."""
    n = int(np.prod(shape))
    if dtype == "bool":
        values = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    elif dtype.startswith("float"):
        values = [v / 2 for v in draw(st.lists(st.integers(-6, 6), min_size=n, max_size=n))]
    else:
        values = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    return np.array(values, dtype=dtype).reshape(shape)


shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


def _run(lib, program, arrays):
    """(result or exception type name, the inputs afterwards, the float inputs' gradients)."""
    inputs = []
    for a in arrays:
        t = lib.tensor(a)
        if a.dtype.kind == "f":
            t.requires_grad_(True)
        inputs.append(t)
    leaves = list(inputs)
    try:
        out = program(lib, *[t * 1 if t.requires_grad else t.clone() for t in inputs])
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return type(e).__name__, [t.detach().numpy().copy() for t in leaves], None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    answer = [(str(o.dtype).split(".")[-1], tuple(o.shape), o.detach().numpy().copy()) for o in outs]
    grads = None
    differentiable = [o for o in outs if o.requires_grad]
    if differentiable and lib.is_grad_enabled():
        total = sum(
            (o * lib.tensor(np.linspace(0.5, 1.5, o.numel()).reshape(tuple(o.shape)), dtype=o.dtype)).sum()
            for o in differentiable
        )
        try:
            total.backward()
        except Exception as e:  # noqa: BLE001 - a node without a derivative (floor_divide) raises in both
            return answer, [t.detach().numpy().copy() for t in leaves], type(e).__name__
        grads = [None if t.grad is None else t.grad.numpy().copy() for t in leaves]
    return answer, [t.detach().numpy().copy() for t in leaves], grads


def _same_arrays(a, b) -> bool:
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


def compare(torch, program, *arrays) -> None:
    """``program(lib, *tensors)`` agrees on numbagrad and torch."""
    got, want = _run(numbagrad, program, arrays), _run(torch, program, arrays)
    if isinstance(want[0], str) or isinstance(got[0], str):
        assert got[0] == want[0], (got[0], want[0])
    else:
        assert [(d, s) for d, s, _ in got[0]] == [(d, s) for d, s, _ in want[0]]
        for (_, _, a), (_, _, b) in zip(got[0], want[0]):
            assert _same_arrays(a, b), (a, b)
    for a, b in zip(got[1], want[1]):
        assert _same_arrays(a, b), ("input changed", a, b)
    if isinstance(got[2], str) or isinstance(want[2], str):
        assert got[2] == want[2], ("backward", got[2], want[2])
    elif got[2] is not None and want[2] is not None:
        for a, b in zip(got[2], want[2]):
            assert (a is None) == (b is None)
            if a is not None:
                assert _same_arrays(a, b), ("gradient", a, b)


# --- type promotion ---------------------------------------------------------------------------------------------
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "lt": lambda a, b: a < b,
    "eq": lambda a, b: a == b,
    "and": lambda a, b: a & b,
}
INPLACE = {
    "add": lambda a, b: a.add_(b),
    "sub": lambda a, b: a.sub_(b),
    "mul": lambda a, b: a.mul_(b),
    "truediv": lambda a, b: a.div_(b),
    "lt": lambda a, b: a.lt_(b),
    "maximum": lambda a, b: a.copy_(a.maximum(b)) if not isinstance(b, (int, float)) else a,
}


@st.composite
def promotion_cases(draw):
    shape = draw(shapes)
    a = _array(draw, shape, draw(st.sampled_from(DTYPES)))
    kind = draw(st.sampled_from(["tensor", "scalar", "reflected"]))
    if kind == "tensor":
        other_shape = shape[draw(st.integers(0, len(shape))) :]
        b = _array(draw, other_shape, draw(st.sampled_from(DTYPES)))
    else:
        b = draw(st.sampled_from([2, -1, 0, 1.5, -0.5, True, False, 3]))
    return a, b, kind


@FUZZ
@given(case=promotion_cases(), op=st.sampled_from(sorted(BINARY)), inplace=st.booleans())
def test_fuzz_type_promotion(torch, case, op, inplace):
    a, b, kind = case
    table = INPLACE if inplace else BINARY
    if op not in table:
        op = "add"
    fn = table[op]
    if op == "pow" and kind == "tensor" and b.dtype == np.bool_:
        b = b.astype(np.int64)  # (torch's gradient of x ** bool_tensor computes bool - 1 and raises: its bug)
    if op == "pow" and type(b) is bool:
        b = int(b)  # (torch's gradient of x ** False is nan, of x ** 0 zero)
    # (torch lets an integer tensor compared in place with a float that requires grad require grad itself)
    assume(not (inplace and op == "lt" and kind == "tensor" and a.dtype.kind != "f" and b.dtype.kind == "f"))
    if kind == "tensor":
        compare(torch, lambda m, x, y: fn(x, y), a, b)
    elif kind == "scalar":
        compare(torch, lambda m, x: fn(x, b), a)
    elif not inplace:
        compare(torch, lambda m, x: fn(b, x), a)


UNARY = [
    "abs",
    "neg",
    "floor",
    "ceil",
    "trunc",
    "round",
    "sign",
    "sqrt",
    "exp",
    "log",
    "sigmoid",
    "relu",
    "square",
    "reciprocal",
    "logical_not",
    "bitwise_not",
    "clamp",
    "cumsum",
    "flip",
    "max",
    "argsort",
]


@FUZZ
@given(shape=shapes, dtype=st.sampled_from(DTYPES), name=st.sampled_from(UNARY), data=st.data())
def test_fuzz_unary(torch, shape, dtype, name, data):
    x = _array(data.draw, shape, dtype)
    calls = {
        "clamp": lambda m, t: t.clamp(-1, 1),
        "cumsum": lambda m, t: t.cumsum(0),
        "flip": lambda m, t: t.flip(0),
        "max": lambda m, t: t.max(0) if t.dim() else t.max(),
        "argsort": lambda m, t: t.argsort(dim=0, stable=True),
    }
    compare(torch, calls.get(name, lambda m, t: getattr(m, name)(t)), x)


FUNCTIONS = {
    "maximum": lambda m, a, b: m.maximum(a, b),
    "fmod": lambda m, a, b: m.fmod(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "where": lambda m, a, b: m.where(a > 0, a, b),
    "masked_fill": lambda m, a, b: a.masked_fill(b > 0, 2),
    "copysign": lambda m, a, b: m.copysign(a, b),
    "xlogy": lambda m, a, b: m.xlogy(a, b),
    "isclose": lambda m, a, b: m.isclose(a, b),
    "logical_xor": lambda m, a, b: m.logical_xor(a, b),
    "bitwise_and": lambda m, a, b: a & b,
    "cat": lambda m, a, b: m.cat([a.reshape(-1), b.reshape(-1)]),
    "dot": lambda m, a, b: m.dot(a.reshape(-1), b.reshape(-1)),
    "outer": lambda m, a, b: m.outer(a.reshape(-1), b.reshape(-1)),
}


@FUZZ
@given(case=promotion_cases(), name=st.sampled_from(sorted(FUNCTIONS)))
def test_fuzz_binary_functions(torch, case, name):
    a, b, kind = case
    assume(kind == "tensor")
    # (torch's gradients of these with a bool operand negate or square the bool and raise: its bug)
    assume(name not in ("atan2", "xlogy", "copysign") or np.bool_ not in (a.dtype, b.dtype))
    compare(torch, lambda m, x, y: FUNCTIONS[name](m, x, y), a, b)


# --- indexing -----------------------------------------------------------------------------------------------------
@st.composite
def index_cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    items, dim, ellipsis = [], 0, False
    while dim < len(shape) and len(items) < 4:
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis", "list", "mask", "bool", "tensor", "stop"]))
        size = shape[dim]
        if kind == "stop":
            break
        if kind == "int":  # (one past either end now and then: torch's IndexError)
            items.append(draw(st.integers(-size - 1, size)))
            dim += 1
        elif kind == "slice":
            start = draw(st.none() | st.integers(-size - 1, size + 1))
            stop = draw(st.none() | st.integers(-size - 1, size + 1))
            items.append(slice(start, stop, draw(st.sampled_from([None, 1, 2]))))
            dim += 1
        elif kind == "none":
            items.append(None)
        elif kind == "bool":
            items.append(draw(st.booleans()))
        elif kind == "ellipsis" and not ellipsis:
            items.append(Ellipsis)
            ellipsis = True
            dim = len(shape) - sum(1 for i in items if not (i is None or i is Ellipsis or isinstance(i, bool)))
            dim = max(dim, 0)
        elif kind == "list":
            items.append(draw(st.lists(st.integers(-size, size - 1), min_size=0, max_size=3)))
            dim += 1
        elif kind == "tensor":  # a 0-d or 1-d int32/int64 tensor index
            values = draw(st.lists(st.integers(-size, size - 1), min_size=1, max_size=2))
            dtype = draw(st.sampled_from(["int64", "int32"]))
            items.append(np.array(values[0] if draw(st.booleans()) else values, dtype=dtype))
            dim += 1
        elif kind == "mask":
            items.append(np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size))))
            dim += 1
    return shape, tuple(items)


def _lib_index(lib, index):
    return tuple(lib.tensor(i) if isinstance(i, np.ndarray) else i for i in index)


@FUZZ
@given(case=index_cases(), dtype=st.sampled_from(["float64", "int64"]))
def test_fuzz_getitem(torch, case, dtype):
    shape, index = case
    x = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    compare(torch, lambda m, t: t[_lib_index(m, index)], x)


@FUZZ
@given(case=index_cases(), tensor_value=st.booleans())
def test_fuzz_setitem(torch, case, tensor_value):
    shape, index = case
    x = np.arange(int(np.prod(shape)), dtype="float64").reshape(shape)

    def program(m, t, v):
        t = t.clone()
        idx = _lib_index(m, index)
        if tensor_value:
            n = t[idx].numel()
            t[idx] = v.sum() * m.arange(float(n), dtype=m.float64).reshape(tuple(t[idx].shape))
        else:
            t[idx] = -7.0
        return t

    compare(torch, program, x, np.array(2.0))


# --- reductions ---------------------------------------------------------------------------------------------------
REDUCTIONS = ["sum", "mean", "amax", "amin", "std", "var", "prod", "any", "all", "argmax", "logsumexp", "norm"]


@st.composite
def reduction_cases(draw):
    shape = draw(shapes)
    dtype = draw(st.sampled_from(DTYPES))
    ndim = max(len(shape), 1)
    dim = draw(
        st.none()
        | st.integers(-ndim, ndim - 1)
        | st.lists(st.integers(-ndim, ndim - 1), max_size=3).map(tuple)
        | st.just([])
    )
    return _array(draw, shape, dtype), dim, draw(st.booleans()), draw(st.sampled_from([None, "float64", "int64"]))


@FUZZ
@given(case=reduction_cases(), name=st.sampled_from(REDUCTIONS))
def test_fuzz_reductions(torch, case, name):
    x, dim, keepdim, dtype = case

    def program(m, t):
        fn = getattr(t, name)
        kwargs = {}
        if dim is not None:  # (torch takes keepdim only with a dim)
            kwargs["dim"], kwargs["keepdim"] = dim, keepdim
        if name in ("std", "var") and dim is not None and not isinstance(dim, int) and not dim:
            kwargs["dim"] = None  # torch's gradient over an empty dim list divides by 1 - correction (its bug)
        if name in ("sum", "mean", "prod") and dtype is not None:
            kwargs["dtype"] = getattr(m, dtype)
        if name == "argmax" and isinstance(dim, (tuple, list)):
            kwargs["dim"] = dim[0] if dim else None
        if name == "prod" and isinstance(dim, (tuple, list)):
            kwargs["dim"] = dim[0] if dim else 0
        if name == "logsumexp" and (dim is None or (not isinstance(dim, int) and not dim)):
            kwargs["dim"] = tuple(range(t.dim()))  # (torch's logsumexp over an empty dim list is broken)
        return fn(**kwargs)

    compare(torch, program, x)


# --- shape ops on non-contiguous inputs ---------------------------------------------------------------------------
LAYOUTS = {
    "transposed": lambda t: t.transpose(0, -1),
    "strided": lambda t: t[..., ::2],
    "expanded": lambda t: t.unsqueeze(0).expand(2, *t.shape),
    "flipped": lambda t: t.flip(0),
    "plain": lambda t: t,
}
SHAPE_OPS = {
    "reshape": lambda m, t: t.reshape(-1),
    "view": lambda m, t: t.view(-1),
    "flatten": lambda m, t: t.flatten(),
    "permute": lambda m, t: t.permute(*reversed(range(t.dim()))),
    "t": lambda m, t: t.t() if t.dim() <= 2 else t.mT,
    "squeeze": lambda m, t: t.squeeze(),
    "unsqueeze": lambda m, t: t.unsqueeze(-1),
    "narrow": lambda m, t: t.narrow(-1, 0, 1),
    "contiguous": lambda m, t: t.contiguous(),
    "repeat": lambda m, t: t.repeat(*([2] + [1] * (t.dim() - 1))),
    "roll": lambda m, t: t.roll(1, 0),
    "chunk": lambda m, t: t.chunk(2, -1),
    "split": lambda m, t: t.split(1, 0),
    "cat": lambda m, t: m.cat([t, t], -1),
    "stack": lambda m, t: m.stack([t, t], 1),
    "transpose": lambda m, t: t.transpose(0, -1),
    "unbind": lambda m, t: t.unbind(-1),
    "add_": lambda m, t: t.add_(1),
    "mul_ row": lambda m, t: t[0].mul_(2),
}


@FUZZ
@given(
    shape=st.lists(st.integers(1, 3), min_size=2, max_size=3).map(tuple),
    layout=st.sampled_from(sorted(LAYOUTS)),
    name=st.sampled_from(sorted(SHAPE_OPS)),
    dtype=st.sampled_from(["float64", "int64"]),
)
def test_fuzz_shape_ops(torch, shape, layout, name, dtype):
    # (in-place ops on views of tensors that require grad are another part's work: integers only here)
    assume(not name.endswith("_") and name != "mul_ row" or dtype == "int64")
    x = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    compare(torch, lambda m, t: SHAPE_OPS[name](m, LAYOUTS[layout](t)), x)


# --- nn.functional with random strides, padding, dilation, groups -----------------------------------------------
def _floats(draw, *shape) -> np.ndarray:
    return _array(draw, tuple(shape), "float64")


@st.composite
def nn_cases(draw):
    """(name, input arrays, program): one ``nn.functional`` call with drawn hyper-parameters, invalid ones
    included (both libraries must then raise the same exception type)."""
    name = draw(st.sampled_from(NN_OPS))
    n, groups = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    c_in, c_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    k, stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    padding = draw(st.integers(0, 2))
    bias = draw(st.booleans())
    if name in ("conv1d", "conv2d"):
        spatial = [draw(st.integers(1, 6)) for _ in range(1 if name == "conv1d" else 2)]
        pad = draw(st.sampled_from([padding, padding, "same", "valid"]))
        stride = 1 if pad == "same" else stride
        fn = getattr(numbagrad.nn.functional, name).__name__
        arrays = [_floats(draw, n, c_in, *spatial), _floats(draw, c_out, c_in // groups, *[k] * len(spatial))]
        arrays += [_floats(draw, c_out)] if bias else []
        return (
            name,
            arrays,
            lambda m, x, w, *b: getattr(m.nn.functional, fn)(
                x, w, b[0] if b else None, stride=stride, padding=pad, dilation=dilation, groups=groups
            ),
        )
    if name == "conv_transpose2d":
        h, w_ = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        output_padding = draw(st.integers(0, 2))
        arrays = [_floats(draw, n, c_in, h, w_), _floats(draw, c_in, c_out // groups, k, k)]
        arrays += [_floats(draw, c_out)] if bias else []
        return (
            name,
            arrays,
            lambda m, x, w, *b: m.nn.functional.conv_transpose2d(
                x,
                w,
                b[0] if b else None,
                stride=stride,
                padding=padding,
                output_padding=output_padding,
                groups=groups,
                dilation=dilation,
            ),
        )
    if name in ("max_pool2d", "avg_pool2d", "max_pool1d", "avg_pool1d"):
        dims = 1 if name.endswith("1d") else 2
        spatial = [draw(st.integers(2, 6)) for _ in range(dims)]
        ceil_mode = draw(st.booleans())
        step = draw(st.sampled_from([None, stride]))
        if name.startswith("max"):
            extra = {"dilation": dilation, "ceil_mode": ceil_mode}
        else:
            extra = {"ceil_mode": ceil_mode, "count_include_pad": draw(st.booleans())}
        pool_padding = draw(st.integers(0, k // 2)) if draw(st.integers(0, 4)) else padding  # (mostly valid)
        arrays = [_floats(draw, n, c_in, *spatial)]
        return name, arrays, lambda m, x: getattr(m.nn.functional, name)(x, k, step, pool_padding, **extra)
    if name == "interpolate":
        mode = draw(st.sampled_from(["nearest", "bilinear", "bicubic", "nearest-exact", "area"]))
        h, w_ = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        by_size = draw(st.booleans())
        size = (draw(st.integers(1, 6)), draw(st.integers(1, 6))) if by_size else None
        scale = None if by_size else draw(st.sampled_from([0.5, 1.5, 2.0, 3.0]))
        align = draw(st.booleans()) if mode in ("bilinear", "bicubic") else None
        return (
            name,
            [_floats(draw, n, c_in, h, w_)],
            lambda m, x: m.nn.functional.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align),
        )
    if name == "pad":
        mode = draw(st.sampled_from(["constant", "reflect", "replicate", "circular"]))
        pads = tuple(draw(st.lists(st.integers(-1 if mode == "constant" else 0, 3), min_size=2, max_size=4)))
        shape = (n, c_in) + tuple(draw(st.integers(1, 4)) for _ in range(len(pads) // 2))
        value = 1.5 if mode == "constant" else None
        return name, [_floats(draw, *shape)], lambda m, x: m.nn.functional.pad(x, pads, mode=mode, value=value)
    if name == "layer_norm":
        shape = (n, c_in, draw(st.integers(1, 3)))
        normalized = shape[-draw(st.integers(1, 2)) :]
        arrays = [_floats(draw, *shape)] + ([_floats(draw, *normalized), _floats(draw, *normalized)] if bias else [])
        return name, arrays, lambda m, x, *wb: m.nn.functional.layer_norm(x, normalized, *wb, eps=0.5)
    if name == "group_norm":
        shape = (n, c_in * 2, draw(st.integers(1, 3)))
        arrays = [_floats(draw, *shape)] + ([_floats(draw, shape[1]), _floats(draw, shape[1])] if bias else [])
        return name, arrays, lambda m, x, *wb: m.nn.functional.group_norm(x, groups, *wb, eps=0.5)
    if name == "batch_norm":
        shape = (n + 1, c_in) + tuple(draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 2))))
        training, momentum = draw(st.booleans()), draw(st.sampled_from([0.1, 0.5, None]))
        arrays = [_floats(draw, *shape)] + ([_floats(draw, c_in), _floats(draw, c_in)] if bias else [])

        def batch_norm(m, x, *wb):
            mean, var = m.zeros(c_in, dtype=m.float64), m.ones(c_in, dtype=m.float64) * 2
            out = m.nn.functional.batch_norm(x, mean, var, *wb, training=training, momentum=momentum, eps=0.5)
            return out, mean, var

        return name, arrays, batch_norm
    if name == "linear":
        arrays = [_floats(draw, *draw(shapes), c_in), _floats(draw, c_out, c_in)] + ([_floats(draw, c_out)] if bias
                                                                                       else [])  # fmt: skip
        return name, arrays, lambda m, x, w, *b: m.nn.functional.linear(x, w, *b)
    if name == "embedding":
        indices = np.array(draw(st.lists(st.integers(0, 3), min_size=1, max_size=5)))
        padding_idx = draw(st.sampled_from([None, 0, -1]))
        return (
            name,
            [_floats(draw, 4, c_in), indices],
            lambda m, w, ix: m.nn.functional.embedding(ix, w, padding_idx=padding_idx),
        )
    if name in ("softmax", "log_softmax"):
        shape = draw(shapes)
        dim = draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1))
        return name, [_floats(draw, *shape)], lambda m, x: getattr(m.nn.functional, name)(x, dim)
    # cross_entropy: class indices (some ignored) or probabilities, weights, smoothing, reductions
    classes, extra = c_in + 1, tuple(draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 1))))
    reduction = draw(st.sampled_from(["mean", "sum", "none"]))
    smoothing = draw(st.sampled_from([0.0, 0.25]))
    arrays = [_floats(draw, n, classes, *extra)]
    if draw(st.booleans()):
        arrays.append(np.array(draw(st.lists(st.integers(0, classes - 1), min_size=n * int(np.prod(extra)),
                                             max_size=n * int(np.prod(extra))))).reshape((n, *extra)))  # fmt: skip
    else:
        arrays.append(np.abs(_floats(draw, n, classes, *extra)) + 0.5)
    weighted = draw(st.booleans())
    arrays += [np.abs(_floats(draw, classes)) + 0.5] if weighted else []
    ignore = draw(st.sampled_from([-100, 0]))
    return (
        name,
        arrays,
        lambda m, x, y, *w: m.nn.functional.cross_entropy(
            x,
            y if y.dtype == m.int64 else y / y.sum(1, keepdim=True),
            w[0] if w else None,
            ignore_index=ignore,
            reduction=reduction,
            label_smoothing=smoothing,
        ),
    )


NN_OPS = ["conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "max_pool1d", "avg_pool1d",
          "interpolate", "pad", "layer_norm", "group_norm", "batch_norm", "linear", "embedding", "softmax",
          "log_softmax", "cross_entropy"]  # fmt: skip
FUZZ_200 = settings(FUZZ, max_examples=int(os.environ.get("NUMBAGRAD_FUZZ_EXAMPLES", "200")))


def _parameters(program) -> dict:
    """The values a drawn program closes over (its hyper-parameters), for the report of a failing example."""
    cells = program.__closure__ or ()
    return {n: c.cell_contents for n, c in zip(program.__code__.co_freevars, cells) if n not in ("draw", "arr")}


@FUZZ_200
@given(case=nn_cases())
def test_fuzz_nn_functional(torch, case):
    name, arrays, program = case
    note(f"{name} {_parameters(program)}")
    compare(torch, program, *arrays)


# --- matmul family with broadcast batch dims ----------------------------------------------------------------------
EINSUM = ["ij,jk->ik", "bij,bjk->bik", "i,i->", "ij->ji", "ii->i", "ij,j->i", "...ij,...jk->...ik", "i,j->ij",
          "bij->b", "ijk,ikl->jl"]  # fmt: skip


@st.composite
def matmul_cases(draw):
    """(name, arrays, program): a product of drawn shapes (batch dims that broadcast, or do not) and dtypes."""
    name = draw(st.sampled_from(["matmul", "mm", "bmm", "mv", "dot", "addmm", "baddbmm", "einsum", "tensordot"]))
    dtype = draw(st.sampled_from(["float64", "float64", "float32", "int64"]))
    other_dtype = dtype if draw(st.integers(0, 5)) else draw(st.sampled_from(["float64", "float32", "int64"]))
    m_, k_, n_ = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k2 = k_ if draw(st.integers(0, 7)) else draw(st.integers(1, 3))  # now and then a mismatch
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    other_batch = tuple(1 if draw(st.booleans()) else b for b in batch)[draw(st.integers(0, len(batch))) :]

    def arr(shape, dt=dtype):
        return _array(draw, tuple(shape), dt)

    if name == "matmul":
        a_shape = draw(st.sampled_from([(k_,), (*batch, m_, k_)]))
        b_shape = draw(st.sampled_from([(k2,), (*other_batch, k2, n_)]))
        return name, [arr(a_shape), arr(b_shape, other_dtype)], lambda m, a, b: m.matmul(a, b)
    if name == "mm":
        return name, [arr((m_, k_)), arr((k2, n_), other_dtype)], lambda m, a, b: m.mm(a, b)
    if name == "bmm":
        b1 = batch[0] if batch else 2
        b2 = b1 if draw(st.integers(0, 7)) else b1 + 1
        return name, [arr((b1, m_, k_)), arr((b2, k2, n_), other_dtype)], lambda m, a, b: m.bmm(a, b)
    if name == "mv":
        return name, [arr((m_, k_)), arr((k2,), other_dtype)], lambda m, a, b: m.mv(a, b)
    if name == "dot":
        return name, [arr((k_,)), arr((k2,), other_dtype)], lambda m, a, b: m.dot(a, b)
    beta, alpha = draw(st.sampled_from([1, 0.5, 0])), draw(st.sampled_from([1, 2, -0.5]))
    if dtype == "int64":
        beta, alpha = int(beta), int(alpha) or 1
    if name == "addmm":
        inp = draw(st.sampled_from([(m_, n_), (n_,), (1, n_), (m_, 1), ()]))
        return (
            name,
            [arr(inp), arr((m_, k_)), arr((k2, n_), other_dtype)],
            lambda m, c, a, b: m.addmm(c, a, b, beta=beta, alpha=alpha),
        )
    if name == "baddbmm":
        b1 = batch[0] if batch else 2
        inp = draw(st.sampled_from([(b1, m_, n_), (m_, n_), (1, n_), ()]))
        return (
            name,
            [arr(inp), arr((b1, m_, k_)), arr((b1, k2, n_), other_dtype)],
            lambda m, c, a, b: m.baddbmm(c, a, b, beta=beta, alpha=alpha),
        )
    if name == "einsum":
        equation = draw(st.sampled_from(EINSUM))
        sizes = {"i": m_, "j": k_, "k": n_, "l": 2, "b": batch[0] if batch else 2}
        operands = equation.split("->")[0].split(",")

        def shape_of(spec):
            dims = [sizes[c] for c in spec.replace("...", "")]
            return (*other_batch, *dims) if spec.startswith("...") else tuple(dims)

        # (one dtype: torch's einsum with mixed dtypes promotes or raises depending on its contraction path)
        arrays = [arr(shape_of(spec)) for spec in operands]
        return name, arrays, lambda m, *ts: m.einsum(equation, *ts)
    # tensordot: contract the last dims of a with the first of b (an int), or explicit dim lists
    a_shape, b_shape = (*batch, m_, k_), (k2, n_, *other_batch)
    dims = draw(st.sampled_from([1, 0, ([len(a_shape) - 1], [0])]))
    return name, [arr(a_shape), arr(b_shape, other_dtype)], lambda m, a, b: m.tensordot(a, b, dims=dims)


@FUZZ_200
@given(case=matmul_cases())
def test_fuzz_matmul_family(torch, case):
    name, arrays, program = case
    note(f"{name} {_parameters(program)}")
    compare(torch, program, *arrays)


def test_fuzz_compare_notices_a_difference(torch):
    """The comparison fails when the two libraries disagree (here: the program itself differs)."""
    with pytest.raises(AssertionError):
        compare(torch, lambda m, t: t + (1 if m is numbagrad else 2), np.ones(2))
