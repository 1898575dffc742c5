"""numbagrad.distributions against torch.distributions: values and parameter gradients of log_prob, entropy,
mean, variance, cdf and icdf on the same inputs; sample shapes, dtypes and supports; sample statistics of a
large seeded sample; KL divergences; transforms; and validate_args errors."""

import math

import numpy as np
import pytest

import numbagrad
import numbagrad.distributions as D

RNG = np.random.default_rng(0)
POS = RNG.uniform(0.5, 2.0, (3,))
POS2 = RNG.uniform(0.5, 2.0, (3,))
REAL = RNG.standard_normal((3,))
PROB = RNG.uniform(0.1, 0.9, (3,))
SIMPLEX = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
LOWER = np.array([[1.2, 0.0, 0.0], [0.3, 0.9, 0.0], [-0.4, 0.2, 1.5]])
COV = LOWER @ LOWER.T


def _cases():
    """name -> (parameters, constructor(module, params), values to score, methods)."""
    # fmt: off
    return {
        "Normal": ({"loc": REAL, "scale": POS}, lambda m, p: m.Normal(p["loc"], p["scale"]), REAL + 0.3,
                   ("log_prob", "entropy", "mean", "variance", "stddev", "cdf", "icdf")),
        "Uniform": ({"low": -POS, "high": POS2}, lambda m, p: m.Uniform(p["low"], p["high"]), 0.2 * REAL,
                    ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "Bernoulli(probs)": ({"probs": PROB}, lambda m, p: m.Bernoulli(probs=p["probs"]), np.array([0.0, 1.0, 1.0]),
                             ("log_prob", "entropy", "mean", "variance")),
        "Bernoulli(logits)": ({"logits": REAL}, lambda m, p: m.Bernoulli(logits=p["logits"]),
                              np.array([1.0, 0.0, 1.0]), ("log_prob", "entropy", "mean", "variance")),
        "Categorical(probs)": ({"probs": SIMPLEX}, lambda m, p: m.Categorical(probs=p["probs"]), np.array([2, 0]),
                               ("log_prob", "entropy")),
        "Categorical(logits)": ({"logits": SIMPLEX * 3}, lambda m, p: m.Categorical(logits=p["logits"]),
                                np.array([1, 2]), ("log_prob", "entropy")),
        "OneHotCategorical": ({"probs": SIMPLEX}, lambda m, p: m.OneHotCategorical(probs=p["probs"]),
                              np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
                              ("log_prob", "entropy", "mean", "variance")),
        "Exponential": ({"rate": POS}, lambda m, p: m.Exponential(p["rate"]), POS2,
                        ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "Laplace": ({"loc": REAL, "scale": POS}, lambda m, p: m.Laplace(p["loc"], p["scale"]), REAL - 0.4,
                    ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "Cauchy": ({"loc": REAL, "scale": POS}, lambda m, p: m.Cauchy(p["loc"], p["scale"]), REAL + 0.7,
                   ("log_prob", "entropy", "cdf", "icdf")),
        "Gumbel": ({"loc": REAL, "scale": POS}, lambda m, p: m.Gumbel(p["loc"], p["scale"]), REAL + 0.2,
                   ("log_prob", "entropy", "mean", "variance")),
        "LogNormal": ({"loc": REAL, "scale": POS}, lambda m, p: m.LogNormal(p["loc"], p["scale"]), POS2,
                      ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "HalfNormal": ({"scale": POS}, lambda m, p: m.HalfNormal(p["scale"]), POS2,
                       ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "HalfCauchy": ({"scale": POS}, lambda m, p: m.HalfCauchy(p["scale"]), POS2,
                       ("log_prob", "entropy", "cdf", "icdf")),
        "Gamma": ({"concentration": POS, "rate": POS2}, lambda m, p: m.Gamma(p["concentration"], p["rate"]), POS2,
                  ("log_prob", "entropy", "mean", "variance")),
        "Chi2": ({"df": 2 * POS}, lambda m, p: m.Chi2(p["df"]), POS2, ("log_prob", "entropy", "mean", "variance")),
        "Beta": ({"c1": POS, "c0": POS2}, lambda m, p: m.Beta(p["c1"], p["c0"]), PROB,
                 ("log_prob", "entropy", "mean", "variance")),
        "Dirichlet": ({"concentration": SIMPLEX * 4}, lambda m, p: m.Dirichlet(p["concentration"]),
                      np.array([[0.3, 0.3, 0.4], [0.1, 0.2, 0.7]]), ("log_prob", "entropy", "mean", "variance")),
        "StudentT": ({"df": 2 + POS, "loc": REAL, "scale": POS2},
                     lambda m, p: m.StudentT(p["df"], p["loc"], p["scale"]), REAL + 0.5,
                     ("log_prob", "entropy", "mean", "variance")),
        "Poisson": ({"rate": POS}, lambda m, p: m.Poisson(p["rate"]), np.array([0.0, 2.0, 5.0]),
                    ("log_prob", "mean", "variance")),
        "Binomial": ({"probs": PROB}, lambda m, p: m.Binomial(5, probs=p["probs"]), np.array([0.0, 2.0, 5.0]),
                     ("log_prob", "entropy", "mean", "variance")),
        "Geometric": ({"probs": PROB}, lambda m, p: m.Geometric(probs=p["probs"]), np.array([0.0, 2.0, 5.0]),
                      ("log_prob", "entropy", "mean", "variance")),
        "RelaxedBernoulli": ({"temperature": np.array(0.7), "probs": PROB},
                             lambda m, p: m.RelaxedBernoulli(p["temperature"], probs=p["probs"]), PROB[::-1].copy(),
                             ("log_prob",)),
        "RelaxedOneHotCategorical": ({"temperature": np.array(0.7), "probs": SIMPLEX},
                                     lambda m, p: m.RelaxedOneHotCategorical(p["temperature"], probs=p["probs"]),
                                     np.array([[0.3, 0.3, 0.4], [0.1, 0.2, 0.7]]), ("log_prob",)),
        "MultivariateNormal(cov)": ({"loc": REAL, "cov": COV},
                                    lambda m, p: m.MultivariateNormal(p["loc"], covariance_matrix=p["cov"]),
                                    np.stack([REAL + 0.5, REAL - 1.0]), ("log_prob", "entropy", "mean", "variance")),
        "MultivariateNormal(tril)": ({"loc": REAL, "tril": LOWER},
                                     lambda m, p: m.MultivariateNormal(p["loc"], scale_tril=p["tril"]),
                                     REAL + 0.5, ("log_prob", "entropy", "variance")),
        "MultivariateNormal(precision)": ({"loc": REAL, "prec": np.linalg.inv(COV)},
                                          lambda m, p: m.MultivariateNormal(p["loc"], precision_matrix=p["prec"]),
                                          REAL + 0.5, ("log_prob", "entropy", "variance")),
        "Multinomial": ({"probs": SIMPLEX}, lambda m, p: m.Multinomial(4, probs=p["probs"]),
                        np.array([[1.0, 0.0, 3.0], [2.0, 2.0, 0.0]]), ("log_prob", "entropy", "mean", "variance")),
        "NegativeBinomial": ({"total_count": POS2 * 3, "probs": PROB},
                             lambda m, p: m.NegativeBinomial(p["total_count"], probs=p["probs"]),
                             np.array([0.0, 2.0, 5.0]), ("log_prob", "mean", "variance")),
        "Pareto": ({"scale": POS, "alpha": 2.5 + POS2}, lambda m, p: m.Pareto(p["scale"], p["alpha"]), POS + POS2,
                   ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "Weibull": ({"scale": POS, "concentration": POS2}, lambda m, p: m.Weibull(p["scale"], p["concentration"]),
                    POS2, ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "InverseGamma": ({"concentration": 2 + POS, "rate": POS2},
                         lambda m, p: m.InverseGamma(p["concentration"], p["rate"]), POS2,
                         ("log_prob", "entropy", "mean", "variance")),
        "FisherSnedecor": ({"df1": 2 + POS, "df2": 4 + POS2}, lambda m, p: m.FisherSnedecor(p["df1"], p["df2"]),
                           POS2, ("log_prob", "mean", "variance")),
        "Kumaraswamy": ({"c1": POS, "c0": POS2}, lambda m, p: m.Kumaraswamy(p["c1"], p["c0"]), PROB,
                        ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "LogisticNormal": ({"loc": REAL, "scale": POS}, lambda m, p: m.LogisticNormal(p["loc"], p["scale"]),
                           np.array([0.1, 0.2, 0.3, 0.4]), ("log_prob",)),
        "Softplus-transformed": ({"loc": REAL, "scale": POS},
                                 lambda m, p: m.TransformedDistribution(m.Normal(p["loc"], p["scale"]),
                                                                        m.transforms.SoftplusTransform()),
                                 POS2, ("log_prob", "cdf", "icdf")),
        "LowRankMultivariateNormal": ({"loc": REAL, "w": LOWER[:, :2], "d": POS},
                                      lambda m, p: m.LowRankMultivariateNormal(p["loc"], p["w"], p["d"]),
                                      np.stack([REAL + 0.5, REAL - 1.0]), ("log_prob", "entropy", "variance")),
        "VonMises": ({"loc": REAL, "concentration": np.array([0.5, 2.0, 6.0])},
                     lambda m, p: m.VonMises(p["loc"], p["concentration"]), REAL + 1.0,
                     ("log_prob", "mean", "variance")),
        "ContinuousBernoulli": ({"probs": np.array([0.2, 0.4995, 0.8])},
                                lambda m, p: m.ContinuousBernoulli(probs=p["probs"]), PROB,
                                ("log_prob", "entropy", "mean", "variance", "cdf", "icdf")),
        "ContinuousBernoulli(logits)": ({"logits": REAL}, lambda m, p: m.ContinuousBernoulli(logits=p["logits"]),
                                        PROB, ("log_prob", "entropy", "mean", "variance")),
        "GeneralizedPareto": ({"loc": REAL, "scale": POS, "concentration": np.array([-0.2, 0.0, 0.3])},
                              lambda m, p: m.GeneralizedPareto(p["loc"], p["scale"], p["concentration"]),
                              REAL + 0.5, ("entropy", "mean", "variance", "icdf")),
        "Independent(Normal)": ({"loc": REAL, "scale": POS},
                                lambda m, p: m.Independent(m.Normal(p["loc"], p["scale"]), 1), REAL,
                                ("log_prob", "entropy", "mean", "variance")),
        "MixtureSameFamily": ({"logits": REAL, "loc": REAL, "scale": POS},
                              lambda m, p: m.MixtureSameFamily(m.Categorical(logits=p["logits"]),
                                                               m.Normal(p["loc"], p["scale"])),
                              np.array([0.3, -1.0]), ("log_prob", "mean", "variance", "cdf")),
        "Copula": ({"loc": REAL, "scale": POS},
                   lambda m, p: m.TransformedDistribution(
                       m.Normal(p["loc"], p["scale"]),
                       m.transforms.CumulativeDistributionTransform(m.Normal(0.0, 1.0))),
                   np.array([0.2, 0.5, 0.9]), ("log_prob",)),
        "Tanh-transformed": ({"loc": REAL, "scale": POS},
                             lambda m, p: m.TransformedDistribution(m.Normal(p["loc"], p["scale"]),
                                                                    [m.transforms.TanhTransform(),
                                                                     m.transforms.AffineTransform(1.0, 2.0)]),
                             np.array([0.5, 1.2, 2.5]), ("log_prob",)),
        "StickBreaking-transformed": ({"loc": REAL[:2], "scale": POS[:2]},
                                      lambda m, p: m.TransformedDistribution(
                                          m.Independent(m.Normal(p["loc"], p["scale"]), 1),
                                          m.transforms.StickBreakingTransform()),
                                      np.array([0.2, 0.5, 0.3]), ("log_prob",)),
        "Power-Sigmoid-transformed": ({"loc": REAL, "scale": POS},
                                      lambda m, p: m.TransformedDistribution(
                                          m.Normal(p["loc"], p["scale"]),
                                          [m.transforms.SigmoidTransform(), m.transforms.PowerTransform(2.0)]),
                                      np.array([0.2, 0.5, 0.3]), ("log_prob",)),
    }
    # fmt: on


CASES = _cases()


def _evaluate(module, tensor_of, name: str, method: str):
    """Builds the case's distribution in ``module`` from fresh leaf parameters; returns (result, params)."""
    params_np, make, value, _ = CASES[name]
    params = {k: tensor_of(v) for k, v in params_np.items()}
    dist = make(module, params)
    if method in ("log_prob", "cdf"):
        v = value if value.dtype.kind == "f" else value.astype(np.int64)
        result = getattr(dist, method)(module_tensor(module, v))
    elif method == "icdf":
        result = dist.icdf(module_tensor(module, np.full(tuple(dist.batch_shape), 0.3)))
    elif method == "entropy":
        result = dist.entropy()
    else:
        result = getattr(dist, method)
    return result, params


def module_tensor(module, array):
    return (numbagrad if module is D else module_torch()).tensor(array)


_TORCH = []


def module_torch():
    return _TORCH[0]


@pytest.mark.parametrize(
    "name, method", [(name, method) for name, case in CASES.items() for method in case[3]], ids=lambda x: str(x)
)
def test_values_and_gradients_match_torch(torch, name, method):
    _TORCH[:] = [torch]
    ours, our_params = _evaluate(D, lambda a: numbagrad.tensor(a, requires_grad=True), name, method)
    theirs, their_params = _evaluate(torch.distributions, lambda a: torch.tensor(a, requires_grad=True), name, method)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-9, atol=1e-12)
    assert tuple(ours.shape) == tuple(theirs.shape)
    if not theirs.requires_grad:
        return
    weights = np.linspace(0.5, 1.5, max(ours.numel(), 1)).reshape(tuple(ours.shape))
    (ours * numbagrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    for key in our_params:
        g_ours, g_theirs = our_params[key].grad, their_params[key].grad
        if g_theirs is None:
            assert g_ours is None or not np.any(g_ours.numpy()), key
            continue
        np.testing.assert_allclose(g_ours.numpy(), g_theirs.numpy(), rtol=1e-7, atol=1e-10, err_msg=key)


def _von_mises_variance(kappa: float) -> float:
    """The variance of the angle about its mean, by the trapezoidal rule (the density is periodic)."""
    t = np.linspace(-np.pi, np.pi, 20001)
    density = np.exp(kappa * np.cos(t))
    return float(np.trapezoid(t**2 * density, t) / np.trapezoid(density, t))


SAMPLING = {
    "Normal": (lambda: D.Normal(numbagrad.tensor([1.0, -2.0]), numbagrad.tensor([0.5, 2.0])), [1.0, -2.0], [0.25, 4.0]),
    "Uniform": (
        lambda: D.Uniform(numbagrad.tensor([0.0, 1.0]), numbagrad.tensor([2.0, 4.0])),
        [1.0, 2.5],
        [1 / 3, 0.75],
    ),
    "Bernoulli": (lambda: D.Bernoulli(numbagrad.tensor([0.2, 0.7])), [0.2, 0.7], [0.16, 0.21]),
    "Exponential": (lambda: D.Exponential(numbagrad.tensor([0.5, 2.0])), [2.0, 0.5], [4.0, 0.25]),
    "Laplace": (lambda: D.Laplace(numbagrad.tensor([0.0, 1.0]), numbagrad.tensor([1.0, 0.5])), [0.0, 1.0], [2.0, 0.5]),
    "Gamma": (lambda: D.Gamma(numbagrad.tensor([0.5, 3.0]), numbagrad.tensor([1.0, 2.0])), [0.5, 1.5], [0.5, 0.75]),
    "Beta": (lambda: D.Beta(numbagrad.tensor([2.0, 0.5]), numbagrad.tensor([3.0, 0.5])), [0.4, 0.5], [0.04, 0.125]),
    "Poisson": (lambda: D.Poisson(numbagrad.tensor([0.5, 4.0])), [0.5, 4.0], [0.5, 4.0]),
    "Binomial": (lambda: D.Binomial(10, numbagrad.tensor([0.2, 0.5])), [2.0, 5.0], [1.6, 2.5]),
    "Geometric": (lambda: D.Geometric(numbagrad.tensor([0.3, 0.8])), [7 / 3, 0.25], [70 / 9, 0.3125]),
    "Gumbel": (
        lambda: D.Gumbel(numbagrad.tensor([0.0, 1.0]), numbagrad.tensor([1.0, 2.0])),
        [0.5772156649, 2.1544313298],
        [math.pi**2 / 6, 4 * math.pi**2 / 6],
    ),
    "LogNormal": (
        lambda: D.LogNormal(numbagrad.tensor([0.0, 0.5]), numbagrad.tensor([0.5, 0.25])),
        [math.exp(0.125), math.exp(0.53125)],
        [(math.exp(0.25) - 1) * math.exp(0.25), (math.exp(0.0625) - 1) * math.exp(1.0625)],
    ),
    "HalfNormal": (
        lambda: D.HalfNormal(numbagrad.tensor([1.0, 2.0])),
        [math.sqrt(2 / math.pi), 2 * math.sqrt(2 / math.pi)],
        [1 - 2 / math.pi, 4 * (1 - 2 / math.pi)],
    ),
    "StudentT": (lambda: D.StudentT(numbagrad.tensor([5.0, 10.0])), [0.0, 0.0], [5 / 3, 1.25]),
    "Chi2": (lambda: D.Chi2(numbagrad.tensor([1.0, 4.0])), [1.0, 4.0], [2.0, 8.0]),
    "VonMises": (
        lambda: D.VonMises(numbagrad.tensor([0.5, -1.0]), numbagrad.tensor([4.0, 10.0])),
        [0.5, -1.0],
        [0.2894, 0.1071],
    ),
    "NegativeBinomial": (
        lambda: D.NegativeBinomial(numbagrad.tensor([3.0, 5.0]), numbagrad.tensor([0.4, 0.2])),
        [2.0, 1.25],
        [10 / 3, 1.5625],
    ),
    "Weibull": (
        lambda: D.Weibull(numbagrad.tensor([1.0, 2.0]), numbagrad.tensor([1.0, 2.0])),
        [1.0, math.sqrt(math.pi)],
        [1.0, 4 * (1 - math.pi / 4)],
    ),
    "Pareto": (
        lambda: D.Pareto(numbagrad.tensor([1.0, 2.0]), numbagrad.tensor([5.0, 6.0])),
        [1.25, 2.4],
        [1.25**2 * 5 / (16 * 3) * 16 / 25 * 1.0, 4 * 6 / (25 * 4)],
    ),
}


@pytest.mark.parametrize("name", list(SAMPLING))
def test_sample_statistics(name):
    numbagrad.manual_seed(1)
    make, mean, var = SAMPLING[name]
    dist = make()
    x = dist.sample((40000,))
    assert tuple(x.shape) == (40000, 2) and x.dtype == numbagrad.float32
    assert bool(dist.support.check(x).all())
    data = x.numpy().astype(np.float64)
    np.testing.assert_allclose(data.mean(0), mean, rtol=0.05, atol=0.02)
    np.testing.assert_allclose(data.var(0), var, rtol=0.08, atol=0.01)


def test_categorical_and_dirichlet_sample_frequencies():
    numbagrad.manual_seed(2)
    probs = numbagrad.tensor([0.1, 0.6, 0.3])
    counts = np.bincount(D.Categorical(probs).sample((30000,)).numpy(), minlength=3) / 30000
    np.testing.assert_allclose(counts, probs.numpy(), atol=0.01)
    one_hot = D.OneHotCategorical(probs).sample((20000,)).numpy()
    np.testing.assert_allclose(one_hot.mean(0), probs.numpy(), atol=0.015)
    counts = D.Multinomial(10, probs).sample((5000,))
    assert tuple(counts.shape) == (5000, 3) and bool((counts.sum(-1) == 10).all())
    np.testing.assert_allclose(counts.numpy().mean(0), 10 * probs.numpy(), atol=0.1)
    conc = numbagrad.tensor([1.0, 2.0, 5.0])
    draws = D.Dirichlet(conc).sample((20000,)).numpy()
    np.testing.assert_allclose(draws.mean(0), [0.125, 0.25, 0.625], atol=0.01)
    np.testing.assert_allclose(draws.sum(-1), 1.0, rtol=1e-5)


def test_multivariate_normal_sample_covariance():
    numbagrad.manual_seed(3)
    dist = D.MultivariateNormal(numbagrad.tensor(REAL), covariance_matrix=numbagrad.tensor(COV))
    x = dist.sample((50000,)).numpy().astype(np.float64)
    np.testing.assert_allclose(x.mean(0), REAL, atol=0.05)
    np.testing.assert_allclose(np.cov(x.T), COV, atol=0.08)


def test_mixture_sample_shape_and_mean():
    numbagrad.manual_seed(4)
    mix = D.MixtureSameFamily(
        D.Categorical(numbagrad.tensor([0.25, 0.75])),
        D.Normal(numbagrad.tensor([-2.0, 2.0]), numbagrad.tensor([0.5, 0.5])),
    )
    x = mix.sample((20000,))
    assert tuple(x.shape) == (20000,)
    assert abs(float(x.mean()) - 1.0) < 0.05


@pytest.mark.parametrize("name", ["Normal", "Laplace", "Exponential", "Uniform", "LogNormal", "Gumbel", "Cauchy"])
def test_rsample_is_differentiable_and_shaped(name):
    params = {k: numbagrad.tensor(v, requires_grad=True) for k, v in CASES[name][0].items()}
    dist = CASES[name][1](D, params)
    x = dist.rsample((4,))
    assert tuple(x.shape) == (4, 3)
    x.sum().backward()
    assert all(p.grad is not None for p in params.values())


def test_normal_rsample_gradient_is_the_reparameterization():
    loc = numbagrad.tensor([0.5, -1.0], requires_grad=True)
    scale = numbagrad.tensor([2.0, 0.5], requires_grad=True)
    numbagrad.manual_seed(5)
    x = D.Normal(loc, scale).rsample((3,))
    x.sum().backward()
    eps = (x.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(loc.grad.numpy(), [3.0, 3.0])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-5)


def test_gamma_rsample_gradient_matches_torchs_formula(torch):
    numbagrad.manual_seed(6)
    alpha = numbagrad.tensor([0.3, 1.0, 2.5, 8.0], dtype=numbagrad.float64, requires_grad=True)
    x = D.Gamma(alpha, 1.0).rsample()
    x.sum().backward()
    expected = torch._standard_gamma_grad(torch.tensor(alpha.detach().numpy()), torch.tensor(x.detach().numpy()))
    np.testing.assert_allclose(alpha.grad.numpy(), expected.numpy(), rtol=2e-3)


def test_sample_shapes_and_dtypes():
    assert D.Normal(0.0, 1.0).sample().shape == ()
    assert D.Normal(numbagrad.zeros(2, dtype=numbagrad.float64), 1.0).sample((3,)).dtype == numbagrad.float64
    assert tuple(D.Categorical(numbagrad.ones(2, 4)).sample((5,)).shape) == (5, 2)
    assert D.Categorical(numbagrad.ones(4)).sample().dtype == numbagrad.int64
    assert tuple(D.OneHotCategorical(numbagrad.ones(2, 4)).sample((5,)).shape) == (5, 2, 4)
    assert tuple(D.Dirichlet(numbagrad.ones(2, 3)).rsample((4,)).shape) == (4, 2, 3)
    mvn = D.MultivariateNormal(numbagrad.zeros(2, 3), scale_tril=numbagrad.eye(3))
    assert tuple(mvn.rsample((4,)).shape) == (4, 2, 3) and mvn.batch_shape == (2,) and mvn.event_shape == (3,)


def test_expand_and_shapes_match_torch(torch):
    for name in ("Normal", "Bernoulli(probs)", "Categorical(probs)", "Gamma", "Beta", "Dirichlet", "LogNormal",
                 "MultivariateNormal(cov)", "Independent(Normal)"):  # fmt: skip
        params, make, _, _ = CASES[name]
        ours = make(D, {k: numbagrad.tensor(v) for k, v in params.items()})
        theirs = make(torch.distributions, {k: torch.tensor(v) for k, v in params.items()})
        assert (ours.batch_shape, ours.event_shape) == (tuple(theirs.batch_shape), tuple(theirs.event_shape)), name
        batch = (4,) + tuple(theirs.batch_shape)
        ours_e, theirs_e = ours.expand(batch), theirs.expand(batch)
        assert tuple(ours_e.batch_shape) == tuple(theirs_e.batch_shape)
        assert tuple(ours_e.sample().shape) == tuple(theirs_e.sample().shape), name


KL_PAIRS = [
    ("Normal", "Normal"), ("Bernoulli(probs)", "Bernoulli(logits)"), ("Categorical(probs)", "Categorical(logits)"),
    ("Exponential", "Exponential"), ("Laplace", "Laplace"), ("Gamma", "Gamma"), ("Beta", "Beta"),
    ("Dirichlet", "Dirichlet"), ("Poisson", "Poisson"), ("Geometric", "Geometric"), ("Gumbel", "Gumbel"),
    ("Cauchy", "Cauchy"), ("HalfNormal", "HalfNormal"), ("LogNormal", "LogNormal"), ("Uniform", "Normal"),
    ("Normal", "Laplace"), ("Exponential", "Gamma"), ("Gamma", "Normal"), ("Laplace", "Normal"),
    ("MultivariateNormal(cov)", "MultivariateNormal(tril)"), ("LowRankMultivariateNormal", "LowRankMultivariateNormal"),
    ("MultivariateNormal(cov)", "LowRankMultivariateNormal"), ("LowRankMultivariateNormal", "MultivariateNormal(cov)"),
    ("Independent(Normal)", "Independent(Normal)"),
    ("OneHotCategorical", "OneHotCategorical"), ("Pareto", "Pareto"), ("Pareto", "Exponential"), ("Pareto", "Gamma"),
    ("Pareto", "Normal"), ("Pareto", "Uniform"), ("Normal", "Pareto"), ("Uniform", "Pareto"), ("Gamma", "Pareto"),
    ("Normal", "Uniform"), ("Beta", "Normal"), ("Uniform", "Gumbel"),
    ("ContinuousBernoulli", "ContinuousBernoulli(logits)"), ("ContinuousBernoulli", "Normal"),
    ("ContinuousBernoulli", "Exponential"), ("ContinuousBernoulli", "Uniform"), ("Beta", "ContinuousBernoulli"),
    ("Uniform", "ContinuousBernoulli"), ("Normal", "ContinuousBernoulli"),
]  # fmt: skip


@pytest.mark.parametrize("p_name, q_name", KL_PAIRS, ids=lambda x: x)
def test_kl_divergence_matches_torch(torch, p_name, q_name):
    def build(module, tensor_of, name, shift):
        params, make, _, _ = CASES[name]
        return make(module, {k: tensor_of(v * shift if k in ("loc", "logits") else v) for k, v in params.items()})

    our_params, their_params = [], []

    def ours_of(a):
        our_params.append(numbagrad.tensor(a, requires_grad=True))
        return our_params[-1]

    def theirs_of(a):
        their_params.append(torch.tensor(a, requires_grad=True))
        return their_params[-1]

    ours = D.kl_divergence(build(D, ours_of, p_name, 1.0), build(D, ours_of, q_name, 0.7))
    theirs = torch.distributions.kl_divergence(
        build(torch.distributions, theirs_of, p_name, 1.0), build(torch.distributions, theirs_of, q_name, 0.7)
    )
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-8)
    finite = np.isfinite(theirs.detach().numpy())
    if finite.all():
        ours.sum().backward()
        theirs.sum().backward()
        for a, b in zip(our_params, their_params):
            if b.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-10)


def test_kl_not_implemented_and_register_kl(torch):
    def message(module, tensor, q):
        with pytest.raises(NotImplementedError) as info:
            module.kl_divergence(module.Normal(tensor([0.0]), tensor([1.0])), q(module, tensor))
        return str(info.value)

    for q in (lambda m, t: m.Categorical(t([0.5, 0.5])), lambda m, t: m.Poisson(t([1.0]))):
        assert message(D, numbagrad.tensor, q) == message(torch.distributions, torch.tensor, q)
    q = D.Poisson(1.0)

    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Poisson)
    def _kl(p, q):
        return p.loc * 0 + 42.0

    try:
        assert float(D.kl_divergence(MyNormal(0.0, 1.0), q)) == 42.0
        np.testing.assert_allclose(float(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0))), 0.5)
    finally:
        del D.kl._KL_REGISTRY[MyNormal, D.Poisson]
        D.kl._KL_MEMOIZE.clear()


VALIDATION = [
    ("Normal scale", lambda m, t: m.Normal(t([0.0]), t([-1.0]))),
    ("Bernoulli probs", lambda m, t: m.Bernoulli(t([1.5]))),
    ("Exponential rate", lambda m, t: m.Exponential(t([0.0]))),
    ("Categorical probs", lambda m, t: m.Categorical(t([[0.5, -0.5]]))),
    ("Gamma concentration", lambda m, t: m.Gamma(t([-1.0]), t([1.0]))),
    ("Uniform order", lambda m, t: m.Uniform(t([1.0]), t([0.0]))),
    ("both probs and logits", lambda m, t: m.Bernoulli(probs=t([0.5]), logits=t([0.0]))),
    ("MVN none", lambda m, t: m.MultivariateNormal(t([0.0, 0.0]))),
    ("MVN loc 0-d", lambda m, t: m.MultivariateNormal(t(0.0), scale_tril=t([[1.0]]))),
    ("Dirichlet 0-d", lambda m, t: m.Dirichlet(t(1.0))),
    ("log_prob outside support", lambda m, t: m.Exponential(t([1.0])).log_prob(t([-1.0]))),
    ("log_prob event shape", lambda m, t: m.Dirichlet(t([1.0, 1.0])).log_prob(t([0.2, 0.3, 0.5]))),
    ("log_prob batch shape", lambda m, t: m.Normal(t([0.0, 1.0]), t([1.0, 1.0])).log_prob(t([0.0, 1.0, 2.0]))),
    ("log_prob not a tensor", lambda m, t: m.Normal(t([0.0]), t([1.0])).log_prob(0.5)),
    ("Independent ndims", lambda m, t: m.Independent(m.Normal(t([0.0]), t([1.0])), 2)),
    ("transforms type", lambda m, t: m.TransformedDistribution(m.Normal(t([0.0]), t([1.0])), "exp")),
]


@pytest.fixture
def validating(torch):
    """Validation on in both libraries: their class-wide default is a global that other tests (torch's compile
    machinery, for one) may have switched off."""
    previous = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(previous)


@pytest.mark.parametrize("case", VALIDATION, ids=lambda c: c[0])
def test_validation_errors_match_torch(torch, case, validating):
    _, build = case

    def run(module, tensor):
        with pytest.raises(Exception) as info:
            build(module, tensor)
        return type(info.value), str(info.value).replace("torch.", "numbagrad.").replace("grad_fn", "")

    ours = run(D, numbagrad.tensor)
    theirs = run(torch.distributions, torch.tensor)
    assert ours == theirs


def test_validate_args_off_skips_checks():
    dist = D.Normal(numbagrad.tensor([0.0]), numbagrad.tensor([-1.0]), validate_args=False)
    assert dist.scale.item() == -1.0
    D.Distribution.set_default_validate_args(False)
    try:
        D.Exponential(numbagrad.tensor([-1.0]))
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_constraints_and_support_match_torch(torch):
    C, TC = D.constraints, torch.distributions.constraints
    values = [-1.0, 0.0, 0.5, 1.0, 2.0, float("nan")]
    for name in ("real", "positive", "nonnegative", "unit_interval", "boolean", "nonnegative_integer"):
        ours = getattr(C, name).check(numbagrad.tensor(values)).numpy()
        theirs = getattr(TC, name).check(torch.tensor(values)).numpy()
        np.testing.assert_array_equal(ours, theirs, err_msg=name)
        assert repr(getattr(C, name)) == repr(getattr(TC, name))
    simplex = [[0.2, 0.8], [0.5, 0.6]]
    np.testing.assert_array_equal(
        C.simplex.check(numbagrad.tensor(simplex)).numpy(), TC.simplex.check(torch.tensor(simplex)).numpy()
    )
    assert repr(D.Uniform(0.0, 2.0).support) == repr(torch.distributions.Uniform(0.0, 2.0).support)
    assert repr(C.independent(C.real, 1)) == repr(TC.independent(TC.real, 1))
    assert D.Normal(0.0, 1.0).__repr__() == "Normal(loc: 0.0, scale: 1.0)"
    assert C.is_dependent(D.Uniform.support) and not C.is_dependent(C.real)


@pytest.mark.parametrize(
    "name",
    ["ExpTransform", "SigmoidTransform", "TanhTransform", "AbsTransform", "Affine", "Power", "Softmax", "StickBreaking",
     "Compose"],
)  # fmt: skip
def test_transforms_match_torch(torch, name):
    def make(T):
        return {
            "ExpTransform": T.ExpTransform(), "SigmoidTransform": T.SigmoidTransform(),
            "TanhTransform": T.TanhTransform(), "AbsTransform": T.AbsTransform(),
            "Affine": T.AffineTransform(0.5, -2.0), "Power": T.PowerTransform(3.0),
            "Softmax": T.SoftmaxTransform(), "StickBreaking": T.StickBreakingTransform(),
            "Compose": T.ComposeTransform([T.AffineTransform(0.5, 2.0), T.ExpTransform()]),
        }[name]  # fmt: skip

    x = np.array([0.3, 1.2, 0.7])
    ours_t, theirs_t = make(D.transforms), make(torch.distributions.transforms)
    xo = numbagrad.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    yo, yt = ours_t(xo), theirs_t(xt)
    np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours_t.inv(yo).detach().numpy(), theirs_t.inv(yt).detach().numpy(), rtol=1e-9)
    if theirs_t.bijective:
        lo, lt = ours_t.log_abs_det_jacobian(xo, yo), theirs_t.log_abs_det_jacobian(xt, yt)
        np.testing.assert_allclose(lo.detach().numpy(), lt.detach().numpy(), rtol=1e-9)
        if lt.requires_grad:
            lo.sum().backward()
            lt.sum().backward()
            np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert tuple(ours_t.forward_shape((2, 3))) == tuple(theirs_t.forward_shape(torch.Size((2, 3))))
    assert ours_t.domain.event_dim == theirs_t.domain.event_dim
    assert ours_t.codomain.event_dim == theirs_t.codomain.event_dim


def test_transform_cache_returns_the_same_tensor():
    t = D.transforms.ExpTransform(cache_size=1)
    x = numbagrad.tensor([0.5])
    y = t(x)
    assert t.inv(y) is x
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        D.transforms.ExpTransform(cache_size=2)


def test_enumerate_support_matches_torch(torch):
    for make in (
        lambda m, t: m.Bernoulli(t([0.2, 0.4])),
        lambda m, t: m.Categorical(t([[0.2, 0.8], [0.5, 0.5]])),
        lambda m, t: m.Binomial(3, t([0.2, 0.4])),
        lambda m, t: m.OneHotCategorical(t([0.2, 0.3, 0.5])),
    ):
        for expand in (True, False):
            ours = make(D, numbagrad.tensor).enumerate_support(expand)
            theirs = make(torch.distributions, torch.tensor).enumerate_support(expand)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
            assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]


def test_mode_matches_torch(torch):
    for name in ("Normal", "Gamma", "Beta", "Dirichlet", "Exponential", "LogNormal", "Poisson", "Binomial",
                 "Categorical(probs)", "OneHotCategorical", "Bernoulli(probs)", "StudentT"):  # fmt: skip
        params, make, _, _ = CASES[name]
        ours = make(D, {k: numbagrad.tensor(v) for k, v in params.items()}).mode
        theirs = make(torch.distributions, {k: torch.tensor(v) for k, v in params.items()}).mode
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, err_msg=name)


def test_gamma_cdf_matches_torch_and_refuses_the_concentration_gradient(torch):
    a, r, v = np.array([0.3, 1.5, 4.0, 20.0]), np.array([1.0, 2.0, 0.5, 1.0]), np.array([0.01, 0.7, 9.0, 19.0])
    x, tx = numbagrad.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    ours = D.Gamma(numbagrad.tensor(a), numbagrad.tensor(r)).cdf(x)
    theirs = torch.distributions.Gamma(torch.tensor(a), torch.tensor(r)).cdf(tx)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    chi2 = D.Chi2(numbagrad.tensor(a)).cdf(numbagrad.tensor(v))
    np.testing.assert_allclose(chi2.numpy(), torch.distributions.Chi2(torch.tensor(a)).cdf(torch.tensor(v)), rtol=1e-12)
    concentration = numbagrad.tensor(a, requires_grad=True)
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input' is not implemented."):
        D.Gamma(concentration, 1.0).cdf(numbagrad.tensor(v)).sum().backward()


@pytest.mark.parametrize("name", ["Normal", "Bernoulli(probs)", "Exponential", "Gamma"])
def test_exponential_family_entropy_from_the_log_normalizer(torch, name):
    params, make, _, _ = CASES[name]
    ours = make(D, {k: numbagrad.tensor(v) for k, v in params.items()})
    theirs = make(torch.distributions, {k: torch.tensor(v) for k, v in params.items()})
    assert isinstance(ours, D.ExponentialFamily) and isinstance(theirs, torch.distributions.ExponentialFamily)
    np.testing.assert_allclose(
        D.ExponentialFamily.entropy(ours).detach().numpy(),
        torch.distributions.ExponentialFamily.entropy(theirs).detach().numpy(),
        rtol=1e-10,
    )


def test_kl_between_exponential_family_subclasses_uses_bregman_divergence(torch):
    def subclass_kl(module):
        class MyExponential(module.Exponential):
            pass

        return module.kl_divergence(
            MyExponential(torch_or_ours(module, [0.5, 2.0])), MyExponential(torch_or_ours(module, [1.5, 1.0]))
        )

    def torch_or_ours(module, values):
        return numbagrad.tensor(values) if module is D else torch.tensor(values)

    np.testing.assert_allclose(subclass_kl(D).numpy(), subclass_kl(torch.distributions).numpy(), rtol=1e-6)


REGISTRY_CONSTRAINTS = {
    "real": lambda C: C.real,
    "positive": lambda C: C.positive,
    "greater_than": lambda C: C.greater_than(1.5),
    "less_than": lambda C: C.less_than(-1.0),
    "unit_interval": lambda C: C.unit_interval,
    "interval": lambda C: C.interval(-2.0, 3.0),
    "simplex": lambda C: C.simplex,
    "real_vector": lambda C: C.real_vector,
    "lower_cholesky": lambda C: C.lower_cholesky,
    "positive_definite": lambda C: C.positive_definite,
}


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name", list(REGISTRY_CONSTRAINTS))
def test_constraint_registry_matches_torch(torch, registry, name):
    tdist = torch.distributions
    try:
        theirs_t = getattr(tdist, registry)(REGISTRY_CONSTRAINTS[name](tdist.constraints))
    except NotImplementedError as error:
        with pytest.raises(NotImplementedError, match=str(error)):
            getattr(D, registry)(REGISTRY_CONSTRAINTS[name](D.constraints))
        return
    ours_t = getattr(D, registry)(REGISTRY_CONSTRAINTS[name](D.constraints))
    x = np.random.default_rng(1).standard_normal((3, 3))
    y_ours, y_theirs = ours_t(numbagrad.tensor(x)), theirs_t(torch.tensor(x))
    np.testing.assert_allclose(y_ours.numpy(), y_theirs.numpy(), rtol=1e-12)
    assert bool(REGISTRY_CONSTRAINTS[name](D.constraints).check(y_ours).all())
    np.testing.assert_allclose(ours_t.inv(y_ours).numpy(), theirs_t.inv(y_theirs).numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda: D.Normal(0.0, 1.0),
        lambda: D.Gamma(numbagrad.tensor([0.5, 2.0]), 1.0),
        lambda: D.Poisson(numbagrad.tensor([3.0])),
        lambda: D.Binomial(7, numbagrad.tensor([0.3])),
        lambda: D.Categorical(numbagrad.tensor([0.2, 0.8])),
        lambda: D.Dirichlet(numbagrad.tensor([1.0, 2.0])),
        lambda: D.MultivariateNormal(numbagrad.zeros(2), numbagrad.eye(2)),
    ],
)
def test_manual_seed_makes_samples_reproducible(make):
    numbagrad.manual_seed(123)
    first = make().sample((5,))
    numbagrad.manual_seed(123)
    again = make().sample((5,))
    second = make().sample((5,))
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert not np.array_equal(first.numpy(), second.numpy())


@pytest.mark.parametrize(
    "make",
    [
        lambda: D.FisherSnedecor(numbagrad.tensor([5.0]), numbagrad.tensor([12.0])),
        lambda: D.Kumaraswamy(numbagrad.tensor([2.0]), numbagrad.tensor([3.0])),
        lambda: D.InverseGamma(numbagrad.tensor([5.0]), numbagrad.tensor([2.0])),
        lambda: D.ContinuousBernoulli(numbagrad.tensor([0.2, 0.5, 0.9])),
        lambda: D.GeneralizedPareto(
            numbagrad.tensor([0.0, 1.0]), numbagrad.tensor([1.0, 2.0]), numbagrad.tensor([0.2, -0.3])
        ),
        lambda: D.LogisticNormal(numbagrad.tensor([0.5, -0.5]), numbagrad.tensor([0.3, 0.3])),
    ],
)
def test_rsample_mean_matches_the_mean(make):
    numbagrad.manual_seed(7)
    dist = make()
    x = dist.rsample((40000,)).numpy().astype(np.float64)
    assert bool(dist.support.check(numbagrad.tensor(x)).all())
    if not isinstance(dist, D.LogisticNormal):
        np.testing.assert_allclose(x.mean(0), dist.mean.numpy(), rtol=0.03)
    else:
        np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-6)  # (float32 samples)


@pytest.mark.parametrize(
    "name",
    [
        "MultivariateNormal(cov)",
        "MultivariateNormal(tril)",
        "MultivariateNormal(precision)",
        "LowRankMultivariateNormal",
    ],
)
@pytest.mark.parametrize("matrix", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_matrices_and_their_gradients_match_torch(torch, name, matrix):
    params, make, _, _ = CASES[name]
    ours_p = {k: numbagrad.tensor(v, requires_grad=True) for k, v in params.items()}
    theirs_p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    ours, theirs = getattr(make(D, ours_p), matrix), getattr(make(torch.distributions, theirs_p), matrix)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-9, atol=1e-12)
    weights = np.arange(9.0).reshape(3, 3)
    (ours * numbagrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    for key in ours_p:
        if theirs_p[key].grad is not None:
            np.testing.assert_allclose(ours_p[key].grad.numpy(), theirs_p[key].grad.numpy(), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("kind", ["cat", "stack"])
@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_cat_and_stack_transforms_match_torch(torch, kind, registry):
    def build(module):
        C = module.constraints
        if kind == "cat":
            return C.cat([C.real, C.positive, C.interval(0.0, 2.0)], dim=1, lengths=[1, 2, 1])
        return C.stack([C.positive, C.unit_interval, C.real], dim=0)

    x = np.random.default_rng(2).standard_normal((3, 4))
    ours_t, theirs_t = (
        getattr(D, registry)(build(D)),
        getattr(torch.distributions, registry)(build(torch.distributions)),
    )
    xo, xt = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = ours_t(xo), theirs_t(xt)
    np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    assert bool(build(D).check(yo).all())
    np.testing.assert_allclose(ours_t.inv(yo).detach().numpy(), theirs_t.inv(yt).detach().numpy(), rtol=1e-9)
    lo, lt = ours_t.log_abs_det_jacobian(xo, yo), theirs_t.log_abs_det_jacobian(xt, yt)
    np.testing.assert_allclose(lo.detach().numpy(), lt.detach().numpy(), rtol=1e-9)
    lo.sum().backward()
    lt.sum().backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_generalized_pareto_log_prob_and_cdf_match_torch_in_float32(torch):
    """(torch's own log_prob and cdf raise for float64 parameters: they compare with a float32 zero.)"""
    params = {"loc": REAL, "scale": POS, "concentration": np.array([-0.2, 0.0, 0.3])}
    value = (REAL + 0.5).astype(np.float32)
    ours_p = {k: numbagrad.tensor(v.astype(np.float32), requires_grad=True) for k, v in params.items()}
    theirs_p = {k: torch.tensor(v.astype(np.float32), requires_grad=True) for k, v in params.items()}
    ours = D.GeneralizedPareto(**ours_p)
    theirs = torch.distributions.GeneralizedPareto(**theirs_p)
    for method in ("log_prob", "cdf"):
        a, b = getattr(ours, method)(numbagrad.tensor(value)), getattr(theirs, method)(torch.tensor(value))
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-6, atol=1e-7)
        a.sum().backward()
        b.sum().backward()
    for key in ours_p:
        np.testing.assert_allclose(ours_p[key].grad.numpy(), theirs_p[key].grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, n", [("lgamma", None), ("digamma", None), ("polygamma", 1), ("polygamma", 3)])
def test_special_functions_and_their_second_derivatives_match_torch(torch, name, n):
    """lgamma, digamma and polygamma, which the gamma-family distributions are built on."""
    data = np.array([0.3, 1.0, 2.5, 7.0, 15.0, -0.5, -2.3])

    def first_and_second(module, tensor):
        x = tensor(data, requires_grad=True)
        y = getattr(module, name)(x) if n is None else module.polygamma(n, x)
        (g,) = module.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = module.autograd.grad(g.sum(), x)
        return y.detach().numpy(), g.detach().numpy(), h.numpy()

    ours = first_and_second(numbagrad, numbagrad.tensor)
    theirs = first_and_second(torch, torch.tensor)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)


def test_polygamma_errors_match_torch(torch):
    for call in (lambda m: m.polygamma(-1, m.ones(2)), lambda m: m.polygamma(1.5, m.ones(2)),
                 lambda m: m.polygamma(1, [1.0])):  # fmt: skip
        with pytest.raises(Exception) as ours:
            call(numbagrad)
        with pytest.raises(Exception) as theirs:
            call(torch)
        assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))
