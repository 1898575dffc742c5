"""The margin, ranking, embedding and likelihood losses against torch: values, dtypes, the printed node, input
gradients, torch's errors; gradcheck (and gradgradcheck for the single-node ones) in float64."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as NF

RNG_SEED = 3


def _draw(spec, lib, rng):
    kind, value = spec
    if kind == "r":  # float64 requiring grad, from the given shape
        return lib.tensor(rng.uniform(-2.0, 2.0, value), requires_grad=True)
    if kind == "pos":  # positive float64 requiring grad
        return lib.tensor(rng.uniform(0.2, 2.0, value), requires_grad=True)
    return lib.tensor(np.asarray(value))  # a constant (float64 or int64): targets, signs, class lists


SIGNS = [1.0, -1.0, -1.0, 1.0]
CASES = {
    "poisson_nll": (lambda F, x, t: F.poisson_nll_loss(x, t), [("r", (4, 3)), ("c", [[0.0, 1.0, 3.0]] * 4)]),
    "poisson_nll_rate_full_sum": (
        lambda F, x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="sum"),
        [("pos", (4, 3)), ("c", [[0.0, 1.0, 3.0], [2.0, 5.0, 0.5]] * 2)],
    ),
    "gaussian_nll": (lambda F, x, t, v: F.gaussian_nll_loss(x, t, v), [("r", (4, 3)), ("r", (4, 3)), ("pos", (4, 3))]),
    "gaussian_nll_homoscedastic_full_none": (
        lambda F, x, t, v: F.gaussian_nll_loss(x, t, v, full=True, reduction="none"),
        [("r", (4, 3)), ("r", (4, 3)), ("pos", (4,))],
    ),
    "gaussian_nll_broadcast_var_sum": (
        lambda F, x, t, v: F.gaussian_nll_loss(x, t, v, reduction="sum"),
        [("r", (4, 3)), ("r", (4, 3)), ("pos", (4, 1))],
    ),
    "margin_ranking": (
        lambda F, a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3),
        [("r", (4,)), ("r", (4,)), ("c", SIGNS)],
    ),
    "margin_ranking_none": (
        lambda F, a, b, y: F.margin_ranking_loss(a, b, y, reduction="none"),
        [("r", (4,)), ("r", (4,)), ("c", SIGNS)],
    ),
    "hinge_embedding": (lambda F, x, y: F.hinge_embedding_loss(x, y, margin=1.5), [("r", (4,)), ("c", SIGNS)]),
    "hinge_embedding_none": (
        lambda F, x, y: F.hinge_embedding_loss(x, y, reduction="none"),
        [("r", (2, 4)), ("c", [SIGNS, SIGNS[::-1]])],
    ),
    "soft_margin": (lambda F, x, y: F.soft_margin_loss(x, y), [("r", (2, 4)), ("c", [SIGNS, SIGNS[::-1]])]),
    "soft_margin_none": (lambda F, x, y: F.soft_margin_loss(x, y, reduction="none"), [("r", (4,)), ("c", SIGNS)]),
    "multilabel_soft_margin": (
        lambda F, x, t: F.multilabel_soft_margin_loss(x, t),
        [("r", (3, 4)), ("c", [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])],
    ),
    "multilabel_soft_margin_weight_none": (
        lambda F, x, t, w: F.multilabel_soft_margin_loss(x, t, w, reduction="none"),
        [("r", (3, 4)), ("c", [[1.0, 0.0, 1.0, 0.0]] * 3), ("c", [0.5, 1.0, 2.0, 1.5])],
    ),
    "cosine_embedding": (
        lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1),
        [("r", (4, 3)), ("r", (4, 3)), ("c", SIGNS)],
    ),
    "cosine_embedding_0d_target": (
        lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, reduction="none"),
        [("r", (3,)), ("r", (3,)), ("c", -1.0)],
    ),
    "multi_margin": (lambda F, x, t: F.multi_margin_loss(x, t), [("r", (4, 3)), ("c", [0, 2, 1, 2])]),
    "multi_margin_p2_weight_none": (
        lambda F, x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.7, weight=w, reduction="none"),
        [("r", (4, 3)), ("c", [0, 2, 1, 2]), ("c", [0.5, 2.0, 1.0])],
    ),
    "multi_margin_1d_sum": (lambda F, x, t: F.multi_margin_loss(x, t, reduction="sum"), [("r", (5,)), ("c", [3])]),
    "multilabel_margin": (
        lambda F, x, t: F.multilabel_margin_loss(x, t),
        [("r", (3, 4)), ("c", [[3, 0, -1, 1], [1, 2, 0, -1], [-1, 0, 0, 0]])],
    ),
    "multilabel_margin_1d_none": (
        lambda F, x, t: F.multilabel_margin_loss(x, t, reduction="none"),
        [("r", (4,)), ("c", [2, 1, -1, 0])],
    ),
    "triplet_margin": (
        lambda F, a, p, n: F.triplet_margin_loss(a, p, n),
        [("r", (4, 3)), ("r", (4, 3)), ("r", (4, 3))],
    ),
    "triplet_margin_p1_swap_none": (
        lambda F, a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, p=1, swap=True, reduction="none"),
        [("r", (4, 3)), ("r", (4, 3)), ("r", (4, 3))],
    ),
    "triplet_with_distance": (
        lambda F, a, p, n: F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda x, y: 1.0 - F.cosine_similarity(x, y), swap=True, reduction="sum"
        ),
        [("r", (4, 3)), ("r", (4, 3)), ("r", (4, 3))],
    ),
}
SINGLE_NODE = ["soft_margin", "multi_margin", "multi_margin_p2_weight_none", "multilabel_margin"]


def _inputs(name, lib):
    rng = np.random.default_rng(RNG_SEED)
    return [_draw(spec, lib, rng) for spec in CASES[name][1]]


@pytest.mark.torch
@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name, torch):
    fn = CASES[name][0]
    ours_in, theirs_in = _inputs(name, numbagrad), _inputs(name, torch)
    ours, theirs = fn(NF, *ours_in), fn(torch.nn.functional, *theirs_in)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert ours.grad_fn.name() == type(theirs.grad_fn).__name__
    weights = np.random.default_rng(1).standard_normal(tuple(theirs.shape))
    (ours * numbagrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    for a, b in zip(ours_in, theirs_in):
        if b.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_gradcheck(name):
    fn, inputs = CASES[name][0], _inputs(name, numbagrad)
    leaves = [t for t in inputs if t.requires_grad]

    def call(*xs):
        it = iter(xs)
        return fn(NF, *[next(it) if t.requires_grad else t for t in inputs])

    assert gradcheck(call, tuple(leaves))


@pytest.mark.parametrize("name", SINGLE_NODE)
def test_single_node_losses_have_a_second_derivative(name):
    fn, inputs = CASES[name][0], _inputs(name, numbagrad)
    # Shift away from the hinges' kinks, where finite differences of the first derivative are not defined.
    x = inputs[0]

    def call(v):
        return fn(NF, v, *inputs[1:])

    assert gradgradcheck(call, (x,))


ERRORS = [
    ("gaussian_nll negative var", lambda m: m.nn.functional.gaussian_nll_loss(
        m.zeros(2, 3), m.zeros(2, 3), -m.ones(2, 3)), ValueError),
    ("gaussian_nll bad var shape", lambda m: m.nn.functional.gaussian_nll_loss(
        m.zeros(2, 3), m.zeros(2, 3), m.ones(3, 3)), ValueError),
    ("gaussian_nll reduction", lambda m: m.nn.functional.gaussian_nll_loss(
        m.zeros(2, 3), m.zeros(2, 3), m.ones(2, 3), reduction="avg"), ValueError),
    ("margin_ranking dims", lambda m: m.nn.functional.margin_ranking_loss(
        m.zeros(2, 3), m.zeros(2, 3), m.ones(3)), RuntimeError),
    ("cosine_embedding 2d target", lambda m: m.nn.functional.cosine_embedding_loss(
        m.ones(2, 3), m.ones(2, 3), m.ones(2, 1)), RuntimeError),
    ("cosine_embedding 1d target 1d inputs", lambda m: m.nn.functional.cosine_embedding_loss(
        m.ones(3), m.ones(3), m.ones(3)), RuntimeError),
    ("cosine_embedding 0d target 2d inputs", lambda m: m.nn.functional.cosine_embedding_loss(
        m.ones(2, 3), m.ones(2, 3), m.tensor(1.0)), RuntimeError),
    ("multi_margin p", lambda m: m.nn.functional.multi_margin_loss(m.ones(2, 3), m.tensor([0, 1]), p=3), ValueError),
    ("multi_margin target size", lambda m: m.nn.functional.multi_margin_loss(
        m.ones(2, 3), m.tensor([0, 1, 1])), RuntimeError),
    ("multi_margin target range", lambda m: m.nn.functional.multi_margin_loss(
        m.ones(2, 3), m.tensor([0, 3])), RuntimeError),
    ("multi_margin weight size", lambda m: m.nn.functional.multi_margin_loss(
        m.ones(2, 3), m.tensor([0, 1]), weight=m.ones(4)), RuntimeError),
    ("multi_margin 3d", lambda m: m.nn.functional.multi_margin_loss(m.ones(2, 3, 2), m.tensor([0, 1])), RuntimeError),
    ("multilabel_margin target size", lambda m: m.nn.functional.multilabel_margin_loss(
        m.ones(2, 3), m.tensor([[0, 1, -1]])), RuntimeError),
    ("triplet margin", lambda m: m.nn.functional.triplet_margin_loss(
        m.ones(2, 3), m.ones(2, 3), m.ones(2, 3), margin=0.0), ValueError),
    ("triplet dims", lambda m: m.nn.functional.triplet_margin_loss(
        m.ones(2, 3), m.ones(2, 3), m.ones(3)), RuntimeError),
    ("triplet_with_distance reduction", lambda m: m.nn.functional.triplet_margin_with_distance_loss(
        m.ones(2, 3), m.ones(2, 3), m.ones(2, 3), reduction="avg"), ValueError),
    ("MultiMarginLoss weight dims", lambda m: m.nn.MultiMarginLoss(weight=m.ones(2, 2)), ValueError),
    ("TripletMarginLoss margin", lambda m: m.nn.TripletMarginLoss(margin=-1.0), ValueError),
]  # fmt: skip


@pytest.mark.torch
@pytest.mark.parametrize("what, call, error", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(what, call, error, torch):
    with pytest.raises(error) as theirs:
        call(torch)
    with pytest.raises(error) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value).replace("torch.", "numbagrad.")


MODULES = [
    ("PoissonNLLLoss", dict(log_input=False, full=True), [("pos", (4, 3)), ("c", [[0.0, 2.0, 3.0]] * 4)]),
    ("GaussianNLLLoss", dict(full=True), [("r", (4, 3)), ("r", (4, 3)), ("pos", (4, 3))]),
    ("MarginRankingLoss", dict(margin=0.2), [("r", (4,)), ("r", (4,)), ("c", SIGNS)]),
    ("CosineEmbeddingLoss", dict(margin=0.2, reduction="sum"), [("r", (4, 3)), ("r", (4, 3)), ("c", SIGNS)]),
    ("HingeEmbeddingLoss", dict(), [("r", (4,)), ("c", SIGNS)]),
    ("SoftMarginLoss", dict(reduction="sum"), [("r", (4,)), ("c", SIGNS)]),
    ("MultiLabelMarginLoss", dict(), [("r", (2, 3)), ("c", [[2, -1, 0], [0, 1, -1]])]),
    ("MultiLabelSoftMarginLoss", dict(), [("r", (2, 3)), ("c", [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])]),
    ("MultiMarginLoss", dict(p=2, margin=0.5), [("r", (4, 3)), ("c", [0, 2, 1, 2])]),
    ("TripletMarginLoss", dict(p=3.0, swap=True), [("r", (4, 3)), ("r", (4, 3)), ("r", (4, 3))]),
    ("TripletMarginWithDistanceLoss", dict(margin=0.5), [("r", (4, 3)), ("r", (4, 3)), ("r", (4, 3))]),
]


@pytest.mark.torch
@pytest.mark.parametrize("cls, kwargs, specs", MODULES, ids=[m[0] for m in MODULES])
def test_loss_modules_match_torch(cls, kwargs, specs, torch):
    rng_ours, rng_theirs = np.random.default_rng(5), np.random.default_rng(5)
    ours_in = [_draw(s, numbagrad, rng_ours) for s in specs]
    theirs_in = [_draw(s, torch, rng_theirs) for s in specs]
    ours = getattr(numbagrad.nn, cls)(**kwargs)(*ours_in)
    theirs = getattr(torch.nn, cls)(**kwargs)(*theirs_in)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(ours_in[0].grad.numpy(), theirs_in[0].grad.numpy(), rtol=1e-10, atol=1e-12)
    assert repr(getattr(numbagrad.nn, cls)(**kwargs)) == repr(getattr(torch.nn, cls)(**kwargs))


@pytest.mark.torch
@pytest.mark.parametrize(
    "cls, kwargs",
    [("PairwiseDistance", dict()), ("PairwiseDistance", dict(p=1.0, keepdim=True)), ("CosineSimilarity", dict(dim=0))],
)
def test_distance_modules_match_torch(cls, kwargs, torch):
    a, b = np.random.default_rng(2).standard_normal((2, 4, 3))
    ours = getattr(numbagrad.nn, cls)(**kwargs)
    theirs = getattr(torch.nn, cls)(**kwargs)
    np.testing.assert_allclose(
        ours(numbagrad.tensor(a), numbagrad.tensor(b)).numpy(), theirs(torch.tensor(a), torch.tensor(b)).numpy()
    )
    assert repr(ours) == repr(theirs)
