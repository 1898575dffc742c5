"""RMSNorm, LocalResponseNorm, CrossMapLRN2d and BatchNorm3d against torch: reprs, outputs, input and parameter
gradients with torch's parameters loaded, and gradcheck of the functional forms."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck
from numbagrad.nn import functional as F
from torch_oracle import raises_like

MODULES = [
    ("RMSNorm", (4,), dict(), (2, 3, 4)),
    ("RMSNorm", ([3, 4],), dict(eps=1e-3), (2, 3, 4)),
    ("RMSNorm", (4,), dict(elementwise_affine=False), (3, 4)),
    ("LocalResponseNorm", (3,), dict(), (2, 5, 3)),
    ("LocalResponseNorm", (2,), dict(alpha=0.1, beta=0.5, k=2.0), (2, 5, 3, 4)),
    ("LocalResponseNorm", (4,), dict(alpha=0.3), (1, 6, 2, 2, 3)),
    ("CrossMapLRN2d", (3,), dict(alpha=0.2), (2, 7, 3, 2)),
    ("CrossMapLRN2d", (4,), dict(beta=0.5, k=2), (1, 6, 2, 3)),
    ("BatchNorm3d", (3,), dict(), (2, 3, 2, 3, 2)),
    ("BatchNorm3d", (3,), dict(momentum=None, affine=False), (2, 3, 2, 3, 2)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, args, kwargs, shape", MODULES, ids=[f"{m[0]}{m[1]}{m[2]}" for m in MODULES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_module_matches_torch(name, args, kwargs, shape, dtype, torch):
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype))
    ours = getattr(nn, name)(*args, **kwargs).to(getattr(numbagrad, dtype))
    assert repr(ours) == repr(theirs)
    rng = np.random.default_rng(0)
    for p in theirs.parameters():
        with torch.no_grad():
            p.copy_(torch.tensor(rng.uniform(0.5, 1.5, tuple(p.shape))))
    ours.load_state_dict({k: numbagrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    data = rng.standard_normal(shape).astype(dtype)
    x_ours, x_theirs = numbagrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    out_ours, out_theirs = ours(x_ours), theirs(x_theirs)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), **tol)
    assert out_ours.dtype.name == dtype
    weights = rng.standard_normal(shape).astype(dtype)
    (out_ours * numbagrad.tensor(weights)).sum().backward()
    (out_theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(x_ours.grad.numpy(), x_theirs.grad.numpy(), **tol)
    for (key, p_ours), p_theirs in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p_ours.grad.numpy(), p_theirs.grad.numpy(), err_msg=key, **tol)
    for key, buffer in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), buffer.numpy(), err_msg=key, **tol)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w: F.rms_norm(x, (4,), w),
        lambda x, w: F.rms_norm(x, (3, 4), None, eps=1e-2),
        lambda x, w: F.local_response_norm(x, 3, alpha=0.5, beta=0.6, k=1.5),
        lambda x, w: F.local_response_norm(x, 2, alpha=0.5),
    ],
)
def test_functional_forms_pass_gradcheck(call):
    rng = np.random.default_rng(1)
    x = numbagrad.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    w = numbagrad.tensor(rng.uniform(0.5, 1.5, (4,)), requires_grad=True)
    assert gradcheck(call, (x, w))


def test_rms_norm_defaults_eps_to_the_dtype_epsilon():
    x = numbagrad.zeros(2, 3)
    x32 = F.rms_norm(x + 1e-20, (3,))
    assert np.isfinite(x32.numpy()).all()
    expected = 1e-20 / np.sqrt(1e-40 + np.finfo(np.float32).eps)
    np.testing.assert_allclose(x32.numpy(), np.full((2, 3), expected, np.float32), rtol=1e-5)


ERRORS = [
    lambda m: m.nn.functional.rms_norm(m.ones(2, 3), (4,)),
    lambda m: m.nn.functional.rms_norm(m.ones(2, 3), (3,), m.ones(2)),
    lambda m: m.nn.functional.local_response_norm(m.ones(2, 3), 2),
    lambda m: m.nn.CrossMapLRN2d(3)(m.ones(2, 3, 4)),
    lambda m: m.nn.BatchNorm3d(3)(m.ones(2, 3, 4, 5)),
]


@pytest.mark.torch
@pytest.mark.parametrize("call", ERRORS)
def test_errors_match_torch(call, torch):
    raises_like(torch, call)


@pytest.mark.torch
def test_batch_norm_in_training_runs_twice_before_backward_as_torch(torch):
    """A module used twice before one backward (a GAN's discriminator on real and generated batches): the second
    forward updates the running statistics in place, which the first one's backward must not need."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 4, 8, 8)), rng.standard_normal((2, 4, 8, 8))
    grads = []
    for lib in (numbagrad, torch):
        bn = lib.nn.BatchNorm2d(4).double()
        x = lib.tensor(a, requires_grad=True)
        (bn(x).square().sum() + bn(lib.tensor(b)).sum()).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-7, atol=1e-10)
