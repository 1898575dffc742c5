"""CTC loss against torch: per-sample losses, every reduction, padded and concatenated targets, unequal input
and target lengths, repeated labels, impossible alignments (inf, or 0 with zero_infinity), unbatched input, the
gradient with respect to the log-probabilities, and torch's errors."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn

CASES = [
    ("padded", [[1, 2, 2], [3, 1, 0]], [6, 4], [3, 2], {}),
    ("concatenated", [1, 2, 2, 3, 1], [6, 4], [3, 2], {}),
    ("sum_blank_2", [[1, 0, 0], [3, 1, 0]], [6, 5], [2, 2], {"blank": 2, "reduction": "sum"}),
    ("none_empty_target", [[1, 2, 2], [3, 1, 0]], [6, 4], [3, 0], {"reduction": "none"}),
    ("impossible", [[1, 1, 1], [3, 3, 3]], [6, 2], [3, 3], {"reduction": "none"}),
    ("impossible_zeroed", [[1, 1, 1], [3, 3, 3]], [6, 2], [3, 3], {"zero_infinity": True}),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, targets, in_lengths, t_lengths, kwargs", CASES, ids=[c[0] for c in CASES])
def test_ctc_loss_matches_torch(name, targets, in_lengths, t_lengths, kwargs, torch):
    logits = np.random.default_rng(0).standard_normal((6, 2, 5))
    ours_in = numbagrad.tensor(logits, requires_grad=True)
    theirs_in = torch.tensor(logits, requires_grad=True)
    ours = nn.functional.ctc_loss(ours_in.log_softmax(2), numbagrad.tensor(targets), numbagrad.tensor(in_lengths),
                                  numbagrad.tensor(t_lengths), **kwargs)  # fmt: skip
    theirs = torch.nn.functional.ctc_loss(theirs_in.log_softmax(2), torch.tensor(targets), torch.tensor(in_lengths),
                                          torch.tensor(t_lengths), **kwargs)  # fmt: skip
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10)
    assert ours.grad_fn.name() == type(theirs.grad_fn).__name__
    finite = np.isfinite(theirs.detach().numpy())
    weights = np.where(finite, 1.0, 0.0) if theirs.dim() else 1.0
    (ours * numbagrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours_in.grad.numpy(), theirs_in.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.torch
def test_unbatched_and_module_match_torch(torch):
    logits = np.random.default_rng(1).standard_normal((5, 4))
    ours = nn.CTCLoss(blank=3)(numbagrad.tensor(logits).log_softmax(1), numbagrad.tensor([0, 1]),
                               numbagrad.tensor(5), numbagrad.tensor(2))  # fmt: skip
    theirs = torch.nn.CTCLoss(blank=3)(torch.tensor(logits).log_softmax(1), torch.tensor([0, 1]), torch.tensor(5),
                                       torch.tensor(2))  # fmt: skip
    assert abs(ours.item() - theirs.item()) < 1e-12
    assert repr(nn.CTCLoss(zero_infinity=True)) == repr(torch.nn.CTCLoss(zero_infinity=True))


@pytest.mark.torch
@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.functional.ctc_loss(
            m.zeros(5, 2, 4), m.tensor([[1, 2], [3, 3]]), m.tensor([6, 4]), m.tensor([2, 2])
        ),  # fmt: skip
        lambda m: m.nn.functional.ctc_loss(
            m.zeros(5, 2, 4), m.tensor([[1, 2], [3, 3]]), m.tensor([5, 4]), m.tensor([3, 2])
        ),  # fmt: skip
    ],
)
def test_errors_match_torch(call, torch):
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)
