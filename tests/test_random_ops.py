"""Random ops: bernoulli, multinomial, normal and the random fills. Draws are checked by their
distribution (large samples, loose bounds), by determinism under a seed or a ``numbagrad.Generator``, and by the
node names and (zero) gradients torch gives them."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad


# --- bernoulli --------------------------------------------------------------------------------------------------------
def test_bernoulli_draws_ones_with_the_given_probabilities():
    p = numbagrad.tensor([0.0, 0.2, 0.9, 1.0]).expand(20000, 4)
    draws = numbagrad.bernoulli(p)
    assert draws.dtype is numbagrad.float32 and set(np.unique(draws.numpy())) <= {0.0, 1.0}
    np.testing.assert_allclose(draws.numpy().mean(0), [0.0, 0.2, 0.9, 1.0], atol=0.015)


def test_bernoulli_with_p_ignores_the_values_and_keeps_the_shape_and_dtype():
    draws = numbagrad.bernoulli(numbagrad.zeros(10000, dtype=numbagrad.float64), 0.3)
    assert draws.dtype is numbagrad.float64 and abs(draws.mean().item() - 0.3) < 0.02


def test_bernoulli_records_torchs_node_with_zero_gradient():
    p = numbagrad.full((3,), 0.5, requires_grad=True)
    draws = numbagrad.bernoulli(p)
    assert type(draws.grad_fn).__name__ == "BernoulliBackward0"
    draws.sum().backward()
    assert p.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: numbagrad.bernoulli(numbagrad.tensor([1.5])), RuntimeError, "Expected p_in >= 0 && p_in <= 1"),
        (lambda: numbagrad.bernoulli(numbagrad.tensor([1, 0])), NotImplementedError, "not implemented for 'Long'"),
        (lambda: numbagrad.zeros(2).bernoulli_(2.0), RuntimeError, "Expected p_in >= 0 && p_in <= 1"),
    ],
)
def test_bernoulli_errors(call, kind, message):
    with pytest.raises(kind, match=message.replace("(", "\\(").replace("|", "\\|")):
        call()


def test_bernoulli_fill_takes_a_number_or_a_tensor_of_probabilities():
    assert numbagrad.zeros(3).bernoulli_(numbagrad.tensor([0.0, 1.0, 1.0])).tolist() == [0.0, 1.0, 1.0]
    assert abs(numbagrad.zeros(20000).bernoulli_().mean().item() - 0.5) < 0.02


# --- multinomial ------------------------------------------------------------------------------------------------------
def test_multinomial_with_replacement_follows_the_weights():
    draws = numbagrad.multinomial(numbagrad.tensor([1.0, 2.0, 7.0]), 30000, replacement=True)
    assert draws.dtype is numbagrad.int64 and draws.shape == (30000,)
    np.testing.assert_allclose(np.bincount(draws.numpy(), minlength=3) / 30000, [0.1, 0.2, 0.7], atol=0.015)


def test_multinomial_without_replacement_draws_distinct_categories_per_row():
    draws = numbagrad.multinomial(numbagrad.ones(50, 6), 6)
    assert draws.shape == (50, 6)
    assert all(sorted(row) == list(range(6)) for row in draws.tolist())


def test_multinomial_without_replacement_takes_zero_weight_categories_last_like_torch():
    assert numbagrad.multinomial(numbagrad.tensor([1.0, 0.0, 0.0]), 1).tolist() == [0]
    first = numbagrad.multinomial(numbagrad.tensor([0.0, 5.0, 0.0, 1.0]), 4)[:2].tolist()
    assert sorted(first) == [1, 3]


def test_multinomial_without_replacement_prefers_heavy_categories():
    firsts = [numbagrad.multinomial(numbagrad.tensor([1.0, 9.0]), 1).item() for _ in range(2000)]
    assert abs(np.mean(firsts) - 0.9) < 0.03


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: numbagrad.multinomial(numbagrad.tensor([1.0, 1.0]), 3), "cannot sample n_sample > prob_dist.size"),
        (lambda: numbagrad.multinomial(numbagrad.tensor([1.0, -1.0]), 1), "contains either `inf`, `nan` or element"),
        (lambda: numbagrad.multinomial(numbagrad.tensor([0.0, 0.0]), 1), "sum of probabilities <= 0"),
        (lambda: numbagrad.multinomial(numbagrad.ones(2, 2, 2), 1), "prob_dist must be 1 or 2 dim"),
        (lambda: numbagrad.multinomial(numbagrad.ones(2), 0), "cannot sample n_sample <= 0 samples"),
    ],
)
def test_multinomial_errors(call, message):
    with pytest.raises(RuntimeError, match=message.replace("(", "\\(")):
        call()


# --- normal -----------------------------------------------------------------------------------------------------------
def test_normal_of_tensors_broadcasts_mean_and_std():
    mean = numbagrad.tensor([[0.0], [10.0]])
    std = numbagrad.tensor([1.0, 2.0, 0.0])
    draws = numbagrad.normal(mean.expand(2, 3).contiguous(), std.expand(2, 3).contiguous())
    assert draws.shape == (2, 3)
    assert draws[1, 2].item() == 10.0 and draws[0, 2].item() == 0.0  # std 0: exactly the mean
    big = numbagrad.normal(numbagrad.full((20000,), 3.0), 2.0)
    assert abs(big.mean().item() - 3.0) < 0.05 and abs(big.std().item() - 2.0) < 0.05


@pytest.mark.parametrize(
    ("mean_tensor", "std_tensor", "node"),
    [(True, False, "NormalBackward1"), (False, True, "NormalBackward2"), (True, True, "NormalBackward3")],
)
def test_normal_nodes_and_zero_gradients_match_torch(torch, mean_tensor, std_tensor, node):
    for lib in (numbagrad, torch):
        mean = lib.zeros(3, requires_grad=True) if mean_tensor else 0.0
        std = lib.ones(3, requires_grad=True) if std_tensor else 1.0
        draws = lib.normal(mean, std)
        assert type(draws.grad_fn).__name__ == node
        draws.sum().backward()
        for t in (mean, std):
            if not isinstance(t, float):
                assert t.grad.tolist() == [0.0, 0.0, 0.0]


def test_normal_of_numbers_needs_a_size_and_takes_dtype():
    draws = numbagrad.normal(2.0, 3.0, (4, 5), dtype=numbagrad.float64)
    assert draws.shape == (4, 5) and draws.dtype is numbagrad.float64 and not draws.requires_grad
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        numbagrad.normal(numbagrad.zeros(2), -1.0)


# --- fills and generators --------------------------------------------------------------------------------------------
def test_random_fill_draws_integers_in_its_range():
    x = numbagrad.zeros(5000)
    assert set(np.unique(x.random_(5).numpy())) == {0.0, 1.0, 2.0, 3.0, 4.0}
    assert set(np.unique(x.random_(2, 5).numpy())) == {2.0, 3.0, 4.0}
    assert x.random_().numpy().max() <= 2**24 and x.numpy().min() >= 0
    assert numbagrad.zeros(10, dtype=numbagrad.int64).random_().numpy().min() >= 0
    assert set(np.unique(numbagrad.zeros(100, dtype=numbagrad.bool).random_().numpy())) == {False, True}


def test_exponential_fill_has_mean_one_over_lambda():
    x = numbagrad.zeros(20000, dtype=numbagrad.float64).exponential_(4.0)
    assert x.numpy().min() >= 0 and abs(x.mean().item() - 0.25) < 0.01


def test_random_fills_refuse_a_leaf_that_requires_grad():
    for fill in (lambda t: t.bernoulli_(), lambda t: t.exponential_(), lambda t: t.random_(3), lambda t: t.uniform_()):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            fill(numbagrad.zeros(2, requires_grad=True))


@pytest.mark.parametrize(
    "draw",
    [
        lambda g: numbagrad.rand(3, generator=g),
        lambda g: numbagrad.randn(3, generator=g),
        lambda g: numbagrad.bernoulli(numbagrad.full((8,), 0.5), generator=g),
        lambda g: numbagrad.multinomial(numbagrad.ones(6), 3, generator=g),
        lambda g: numbagrad.normal(numbagrad.zeros(3), 1.0, generator=g),
        lambda g: numbagrad.zeros(3).uniform_(generator=g),
        lambda g: numbagrad.zeros(3).normal_(generator=g),
        lambda g: numbagrad.zeros(3).exponential_(generator=g),
        lambda g: numbagrad.zeros(3).random_(100, generator=g),
    ],
)
def test_a_seeded_generator_repeats_its_draws(draw):
    first = draw(numbagrad.Generator().manual_seed(7)).tolist()
    assert draw(numbagrad.Generator().manual_seed(7)).tolist() == first
    assert draw(numbagrad.Generator().manual_seed(8)).tolist() != first


def test_the_global_seed_repeats_draws():
    numbagrad.manual_seed(3)

    def draws():
        return numbagrad.bernoulli(numbagrad.full((16,), 0.5)).tolist(), numbagrad.normal(0.0, 1.0, (3,)).tolist()

    first = draws()
    numbagrad.manual_seed(3)
    assert draws() == first


@pytest.mark.torch
def test_randint_and_randperm_with_a_generator_draw_torchs_values(torch):
    for seed in (0, 3, 12345):
        ours = numbagrad.randint(2, 10, (6,), generator=numbagrad.Generator().manual_seed(seed))
        theirs = torch.randint(2, 10, (6,), generator=torch.Generator().manual_seed(seed))
        assert ours.tolist() == theirs.tolist()
        ours = numbagrad.randperm(7, generator=numbagrad.Generator().manual_seed(seed))
        assert ours.tolist() == torch.randperm(7, generator=torch.Generator().manual_seed(seed)).tolist()
