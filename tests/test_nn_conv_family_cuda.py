"""The convolution family on cuda tensors, compared with the CPU (tiny shapes: run under Numba's simulator with
``NUMBA_ENABLE_CUDASIM=1``): every result and gradient comes back as a cuda tensor with the CPU's values."""

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F

if not numbagrad.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

CASES = {
    "conv3d": (lambda x, w: F.conv3d(x, w, padding=1, stride=(1, 2, 1)), ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2))),
    "conv_transpose2d": (
        lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1),
        ((1, 2, 2, 3), (2, 1, 2, 2)),
    ),
    "conv_transpose1d": (lambda x, w, b: F.conv_transpose1d(x, w, b, groups=2), ((1, 2, 3), (2, 1, 2), (2,))),
    "pad_reflect": (lambda x: F.pad(x, (1, 2, 1, 0), mode="reflect"), ((1, 1, 3, 4),)),
    "pad_circular": (lambda x: F.pad(x, (1, 2), mode="circular"), ((1, 2, 3),)),
    "interpolate_bicubic": (lambda x: F.interpolate(x, scale_factor=1.5, mode="bicubic"), ((1, 1, 3, 3),)),
    "interpolate_nearest": (lambda x: F.interpolate(x, size=5), ((1, 2, 3),)),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), ((1, 4, 2, 2),)),
    "fold_unfold": (lambda x: F.fold(F.unfold(x, 2), (3, 3), 2), ((1, 2, 3, 3),)),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), ((2, 2, 3), (2,), (2,))),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), ((1, 1, 2, 4, 4),)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, divisor_override=3), ((1, 1, 2, 4, 4),)),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, 2), ((1, 1, 3, 5),)),
}


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
