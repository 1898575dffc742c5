"""nn.functional on cuda tensors, compared with the CPU (tiny shapes: run under Numba's simulator with
``NUMBA_ENABLE_CUDASIM=1``). The fused kernels reach the device through the backend's host round trips; every
result and gradient must come back as a cuda tensor."""

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F

if not numbagrad.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

CASES = {
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1, stride=(1, 2)), ((1, 2, 4, 5), (3, 2, 3, 3))),
    "conv1d_groups": (lambda x, w: F.conv1d(x, w, groups=2), ((1, 2, 6), (4, 1, 2))),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 1), ((1, 2, 3, 4),)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, padding=1), ((1, 2, 3, 4),)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), ((1, 2, 3, 4),)),
    "layer_norm": (lambda x, w: F.layer_norm(x, (4,), w), ((3, 4), (4,))),
    "group_norm": (lambda x: F.group_norm(x, 2), ((2, 4, 3),)),
    "batch_norm": (lambda x: F.batch_norm(x, None, None, training=True), ((4, 3),)),
    "cross_entropy": (lambda x: F.cross_entropy(x, _target(x, [1, 0, 3]), label_smoothing=0.2), ((3, 4),)),
    "cross_entropy_per_position": (
        lambda x: F.cross_entropy(
            x, _target(x, [[1, 0, 2], [2, 2, 0]]), ignore_index=0, label_smoothing=0.1, reduction="none"
        ),
        ((2, 3, 3),),
    ),
    "nll_loss": (lambda x: F.nll_loss(x, _target(x, [1, 0, 3])), ((3, 4),)),
    "embedding": (lambda w: F.embedding(_target(w, [[1, 2], [2, 0]]), w, padding_idx=0), ((3, 2),)),
    "pad": (lambda x: F.pad(x, (1, -1, 2, 0), value=0.5), ((2, 3),)),
    "linear": (lambda x, w, b: F.linear(x, w, b), ((2, 3, 4), (5, 4), (5,))),
    "linear_1d": (lambda x, w, b: F.linear(x, w, b), ((4,), (5, 4), (5,))),
    "gelu": (lambda x: F.gelu(x), ((2, 3),)),
    "glu": (lambda x: F.glu(x, 0), ((4, 2),)),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x, y), ((2, 3), (2, 3))),
    "bce_with_logits": (lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid()), ((2, 3), (2, 3))),
}


def _target(like, values):
    return numbagrad.tensor(values, device=like.device)


@pytest.mark.parametrize("name", CASES)
def test_cuda_matches_cpu(name):
    fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(s) for s in shapes]
    cpu = [numbagrad.tensor(d, requires_grad=True) for d in data]
    gpu = [numbagrad.tensor(d, device="cuda", requires_grad=True) for d in data]
    out_c, out_g = fn(*cpu), fn(*gpu)
    assert out_g.device.type == "cuda"
    np.testing.assert_allclose(out_g.detach().cpu().numpy(), out_c.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(tuple(out_c.shape))
    out_c.backward(numbagrad.tensor(g))
    out_g.backward(numbagrad.tensor(g, device="cuda"))
    for c, d in zip(cpu, gpu):
        assert d.grad.device.type == "cuda"
        np.testing.assert_allclose(d.grad.cpu().numpy(), c.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_linear_with_bias_is_one_addmm_node_on_cuda_as_on_the_cpu():
    """``linear`` runs the backend's ``linear`` on either device (torch's ``addmm``), not a matmul and an add."""
    for device in ("cpu", "cuda"):
        x, w, b = (numbagrad.ones(*s, device=device, requires_grad=True) for s in ((2, 4), (3, 4), (3,)))
        assert F.linear(x, w, b).grad_fn.name() == "AddmmBackward0"


def test_linear_of_tensors_on_two_devices_is_torchs_error():
    x, w, b = numbagrad.ones(2, 4), numbagrad.ones(3, 4), numbagrad.ones(3)
    for args in ((x, w, b.cuda()), (x.cuda(), w.cuda(), b), (x, w.cuda(), b)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two"):
            F.linear(*args)


def test_conv_module_moves_to_cuda_and_trains():
    model = numbagrad.nn.Sequential(numbagrad.nn.Conv2d(1, 2, 3), numbagrad.nn.BatchNorm2d(2), numbagrad.nn.ReLU())
    model.to("cuda")
    out = model(numbagrad.randn(2, 1, 4, 4, device="cuda"))
    out.sum().backward()
    assert model[0].weight.grad.device.type == "cuda" and model[1].running_mean.device.type == "cuda"
    assert model[1].num_batches_tracked.item() == 1
