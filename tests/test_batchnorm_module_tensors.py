"""BatchNorm modules read their weight, bias and running statistics from the parameter and buffer dicts, and as
attributes where a parametrization has replaced them: whichever way they are set, the output is torch's."""

import numpy as np

import numbagrad
from numbagrad import nn
from numbagrad.nn.utils import parametrize


class _Doubled(nn.Module):
    def forward(self, w):
        return w * 2


def _both(torch, make, x):
    """``make(lib)``'s module applied to ``x`` (and then its running mean) in both libraries."""
    ours, theirs = make(numbagrad), make(torch)
    y_ours, y_theirs = ours(numbagrad.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(y_ours.detach().numpy(), y_theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    if theirs.running_mean is not None:
        np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-6)
    return ours, theirs


def _x(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_parametrized_weight_is_read_through_the_parametrization(torch):
    def make(lib):
        bn = lib.nn.BatchNorm1d(4)
        with lib.no_grad():
            bn.weight.copy_(lib.tensor([1.0, 2.0, 3.0, 4.0]))
        mod = _Doubled() if lib is numbagrad else type("Doubled", (torch.nn.Module,), {"forward": _Doubled.forward})()
        (parametrize if lib is numbagrad else torch.nn.utils.parametrize).register_parametrization(bn, "weight", mod)
        return bn

    ours, _ = _both(torch, make, _x(6, 4))
    assert "weight" not in ours._parameters


def test_reassigned_parameters_and_buffers(torch):
    def make(lib):
        bn = lib.nn.BatchNorm1d(3)
        bn.weight = lib.nn.Parameter(lib.tensor([0.5, -1.0, 2.0]))
        bn.bias = lib.nn.Parameter(lib.tensor([0.1, 0.2, 0.3]))
        bn.running_mean = lib.tensor([1.0, 2.0, 3.0])
        return bn

    _both(torch, make, _x(5, 3, 2))


def test_eval_reads_reassigned_running_statistics(torch):
    def make(lib):
        bn = lib.nn.BatchNorm1d(3)
        bn.running_mean = lib.tensor([1.0, -2.0, 0.5])
        bn.running_var = lib.tensor([4.0, 0.25, 1.0])
        return bn.eval()

    _both(torch, make, _x(5, 3))


def test_no_affine_no_running_statistics(torch):
    _both(torch, lambda lib: lib.nn.BatchNorm1d(3, affine=False, track_running_stats=False), _x(4, 3, 5))
