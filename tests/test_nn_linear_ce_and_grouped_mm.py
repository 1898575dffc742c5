"""torch 2.13's newest nn.functional entries against torch: ``linear_cross_entropy`` and
``LinearCrossEntropyLoss`` (class indices or probabilities, K-dimensional weights, bias, class weights,
``ignore_index``, label smoothing, reductions; values, gradients, errors), ``conv_tbc`` (with its gradients),
``grouped_mm`` in its four layouts in float32 and float16, and torch's CPU refusals of ``scaled_mm`` and
``scaled_grouped_mm``."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF


def _arrays(seed: int, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def _run(lib, fn, arrays, extra):
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *tensors, **{k: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in extra.items()})
    (out * out).sum().backward()  # (a dense gradient: torch's grouped_mm refuses an expanded one)
    return out.detach().numpy(), [t.grad.numpy() for t in tensors], type(out.grad_fn).__name__


def _same(torch, fn, arrays, extra=None, tol=1e-10):
    ours = _run(numbagrad, fn, arrays, extra or {})
    theirs = _run(torch, fn, arrays, extra or {})
    np.testing.assert_allclose(ours[0], theirs[0], rtol=tol, atol=tol)
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    return ours[2], theirs[2]


TARGETS = {"indices": np.array([0, 2, 1, 2]), "ignored": np.array([0, -100, 1, 2]),
           "probabilities": np.random.default_rng(9).dirichlet(np.ones(3), 4)}  # fmt: skip
LCE = [
    ("indices", {}),
    ("indices", {"reduction": "sum", "label_smoothing": 0.2}),
    ("ignored", {"reduction": "none"}),
    ("indices", {"ignore_index": 2, "weight": np.array([0.5, 2.0, 1.0])}),
    ("probabilities", {}),
    ("probabilities", {"label_smoothing": 0.1, "reduction": "sum"}),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("target,kw", LCE, ids=str)
def test_linear_cross_entropy_matches_torch(torch, target, kw, bias):
    arrays = _arrays(0, (4, 5), (3, 5), (3,))[: 3 if bias else 2]

    def fn(lib, x, w, *b, **extra):
        return lib.nn.functional.linear_cross_entropy(
            x, w, lib.tensor(TARGETS[target]), linear_bias=b[0] if b else None, **extra
        )

    _same(torch, fn, arrays, kw)


def test_linear_cross_entropy_with_k_dimensional_weights_matches_torch(torch):
    targets = np.random.default_rng(1).integers(0, 3, (4, 2, 2))

    def fn(lib, x, w, b):
        return lib.nn.functional.linear_cross_entropy(x, w, lib.tensor(targets), linear_bias=b, reduction="none")

    _same(torch, fn, _arrays(1, (4, 5), (3, 2, 2, 5), (3, 2, 2)))


def test_unbatched_linear_cross_entropy_matches_torch(torch):
    _same(
        torch, lambda lib, x, w: lib.nn.functional.linear_cross_entropy(x, w, lib.tensor(1)), _arrays(2, (5,), (3, 5))
    )


@pytest.mark.parametrize(
    "shapes,target,kw",
    [
        (((4, 5, 1), (3, 5)), np.zeros(4, np.int64), {}),
        (((4, 5), (5,)), np.zeros(4, np.int64), {}),
        (((4, 5), (3, 4)), np.zeros(4, np.int64), {}),
        (((4, 5), (3, 5)), np.zeros(4, np.int64), {"linear_bias": np.zeros(4)}),
        (((5,), (3, 2, 5)), np.zeros(2, np.int64), {}),
        (((4, 5), (3, 5)), np.full((4, 3), 1 / 3), {"ignore_index": 1}),
    ],
    ids=["input3d", "weight1d", "features", "bias", "unbatched_k", "probabilities_ignore"],
)
def test_linear_cross_entropy_errors_match_torch(torch, shapes, target, kw):
    def call(lib):
        x, w = (lib.tensor(np.zeros(s)) for s in shapes)
        extra = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        return lib.nn.functional.linear_cross_entropy(x, w, lib.tensor(target), **extra)

    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "kw", [{}, {"bias": True, "out_features": (2,), "reduction": "sum"}, {"label_smoothing": 0.3, "ignore_index": 0}]
)
def test_linear_cross_entropy_loss_module_matches_torch(torch, kw):
    theirs = torch.nn.LinearCrossEntropyLoss(5, 3, **kw, dtype=torch.float64)
    ours = numbagrad.nn.LinearCrossEntropyLoss(5, 3, **kw, dtype=numbagrad.float64)
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: numbagrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _arrays(3, (4, 5))[0]
    target = np.random.default_rng(4).integers(0, 3, (4, *kw.get("out_features", ())))
    results = []
    for lib, module in ((numbagrad, ours), (torch, theirs)):
        t = lib.tensor(x, requires_grad=True)
        loss = module(t, lib.tensor(target))
        loss.sum().backward()
        results.append((loss.detach().numpy(), t.grad.numpy(), module.linear.weight.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw", [{"weight": np.ones(4)}, {"label_smoothing": 1.5}], ids=str)
def test_linear_cross_entropy_loss_constructor_errors_match_torch(torch, kw):
    def make(lib):
        return lib.nn.LinearCrossEntropyLoss(5, 3, **{k: lib.tensor(v) if isinstance(v, np.ndarray) else v
                                                     for k, v in kw.items()})  # fmt: skip

    with pytest.raises(RuntimeError) as theirs:
        make(torch)
    with pytest.raises(RuntimeError) as ours:
        make(numbagrad)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_conv_tbc_matches_torch(torch, pad):
    arrays = _arrays(5, (5, 2, 3), (3, 3, 4), (4,))
    names = _same(torch, lambda lib, x, w, b: lib.nn.functional.conv_tbc(x, w, b, pad), arrays)
    assert names == ("ConvTbcBackward0", "ConvTbcBackward0")


def test_conv_tbc_passes_gradcheck_and_gradgradcheck():
    tensors = [numbagrad.tensor(a, requires_grad=True) for a in _arrays(6, (4, 2, 2), (2, 2, 3), (3,))]
    assert gradcheck(lambda x, w, b: NF.conv_tbc(x, w, b, 1), tensors)
    assert gradgradcheck(lambda x, w, b: NF.conv_tbc(x, w, b, 1), tensors)


@pytest.mark.parametrize(
    "shapes",
    [((5, 2), (3, 2, 4), (4,)), ((5, 2, 2), (2, 4), (4,)), ((5, 2, 2), (3, 2, 4), (3,)), ((5, 2, 3), (3, 2, 4), (4,))],
    ids=["input2d", "weight2d", "bias", "channels"],
)
def test_conv_tbc_errors_match_torch(torch, shapes):
    def call(lib):
        x, w, b = (lib.zeros(s, dtype=lib.float64) for s in shapes)
        return lib.nn.functional.conv_tbc(x, w, b)

    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)


GROUPED = [
    ("3d3d", (2, 4, 8), (2, 8, 8), None),
    ("2d3d", (8, 8), (2, 8, 8), [3, 8]),
    ("3d2d", (2, 4, 8), (8, 16), [8, 16]),
    ("2d2d", (4, 16), (16, 8), [8, 16]),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name,a_shape,b_shape,offs", GROUPED, ids=[g[0] for g in GROUPED])
def test_grouped_mm_matches_torch(torch, name, a_shape, b_shape, offs, dtype):
    a, b = (x.astype(dtype) for x in _arrays(7, a_shape, b_shape))
    extra = {} if offs is None else {"offs": np.array(offs, np.int32)}
    names = _same(torch, lambda lib, x, y, **kw: lib.nn.functional.grouped_mm(x, y, **kw), [a, b], extra,
                  tol=1e-5 if dtype == "float32" else 2e-2)  # fmt: skip
    assert names == ("GroupedMmBackward0", "GroupedMmBackward0")


GROUPED_ERRORS = [
    ((2, 4, 8), (2, 8, 8), {}, "float64"),
    ((8,), (2, 8, 8), {"offs": [2, 4]}, "float32"),
    ((8, 8), (2, 8, 8), {}, "float32"),
    ((2, 4, 8), (2, 8, 8), {"offs": [2, 4]}, "float32"),
    ((8, 8), (2, 8, 8), {"offs": np.array([3, 8], np.int64)}, "float32"),
    ((2, 4, 8), (2, 8, 8), {"bias": np.zeros((2, 8), np.float32)}, "float32"),
    ((2, 4, 6), (2, 6, 8), {}, "float32"),
    ((2, 4, 8), (2, 4, 8), {}, "float32"),
    ((2, 4, 8), (3, 8, 8), {}, "float32"),
    ((8, 8), (2, 8, 8), {"offs": [4]}, "float32"),
    ((2, 4, 8), (2, 8, 8), {"out_dtype": "float32"}, "float16"),
]


@pytest.mark.parametrize("a_shape,b_shape,kw,dtype", GROUPED_ERRORS, ids=str)
def test_grouped_mm_errors_match_torch(torch, a_shape, b_shape, kw, dtype):
    def call(lib):
        extra = {}
        for k, v in kw.items():
            if k == "out_dtype":
                extra[k] = getattr(lib, v)
            elif isinstance(v, list):
                extra[k] = lib.tensor(v, dtype=lib.int32)
            else:
                extra[k] = lib.tensor(v)
        a, b = (lib.zeros(s, dtype=getattr(lib, dtype)) for s in (a_shape, b_shape))
        return lib.nn.functional.grouped_mm(a, b, **extra)

    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize(
    "scales", [((), "TensorWise", ()), ((16, 1), "RowWise", (1, 8)), ((16, 1), "BlockWise1x16", (1, 8))], ids=str
)
def test_scaled_mm_refuses_non_float8_matrices_like_torch(torch, dtype, scales):
    def call(lib):
        F = lib.nn.functional
        a, b = lib.zeros(16, 16, dtype=getattr(lib, dtype)), lib.zeros(8, 16, dtype=getattr(lib, dtype)).t()
        recipe = getattr(F.ScalingType, scales[1])
        return F.scaled_mm(a, b, lib.ones(scales[0]), recipe, lib.ones(scales[2]), recipe)

    with pytest.raises(ValueError) as theirs:
        call(torch)
    with pytest.raises(ValueError) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)


def test_scaled_mm_wants_matrices_like_torch(torch):
    messages = []
    for lib in (numbagrad, torch):
        F = lib.nn.functional
        with pytest.raises(ValueError) as err:
            F.scaled_mm(lib.zeros(16), lib.zeros(16, 16), lib.ones(()), F.ScalingType.TensorWise, lib.ones(()),
                        F.ScalingType.TensorWise)  # fmt: skip
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_scaled_grouped_mm_has_no_cpu_kernel_like_torch(torch):
    messages = []
    for lib in (numbagrad, torch):
        F = lib.nn.functional
        with pytest.raises(NotImplementedError) as err:
            F.scaled_grouped_mm(lib.zeros(2, 16, 16), lib.zeros(2, 16, 16).transpose(-2, -1), lib.ones(2, 16),
                                F.ScalingType.RowWise, lib.ones(2, 16), F.ScalingType.RowWise)  # fmt: skip
        messages.append(str(err.value))
    assert messages[1].startswith(messages[0])
