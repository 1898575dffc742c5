"""Complex tensors on cuda, compared with the CPU: the parts' views, conjugation, abs/angle/sgn, construction,
table rows, matmul, reductions and gradients (Wirtinger convention, as on the CPU). Run under Numba's simulator
with ``NUMBA_ENABLE_CUDASIM=1``: tiny shapes."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad

if not numbagrad.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

pytestmark = pytest.mark.cuda

Z = np.array([[1.0 + 2.0j, -0.5 + 0.0j, 0.0 + 0.0j], [3.0 - 1.0j, 0.0 - 2.0j, 1.5 + 0.5j]], np.complex128)
W = np.array([[0.5 - 1.0j, 2.0 + 0.0j], [1.0 + 1.0j, -1.0 + 0.5j], [0.0 + 3.0j, 1.0 - 1.0j]], np.complex128)

CASES = {
    "real": lambda z: z.real * 1,
    "imag": lambda z: z.imag * 1,
    "view_as_real": lambda z: numbagrad.view_as_real(z) * 1,
    "conj_resolved": lambda z: z.conj().resolve_conj(),
    "conj_physical": lambda z: z.conj_physical(),
    "abs": lambda z: z.abs(),
    "angle": lambda z: z.angle(),
    "sgn": lambda z: z.sgn(),
    "exp_mul": lambda z: (z.exp() * z).sum(dim=1),
    "matmul": lambda z: z @ numbagrad.tensor(W, device=z.device),
    "complex_of_parts": lambda z: numbagrad.complex(z.real * 2, z.imag - 1),
    "polar": lambda z: numbagrad.polar(z.abs(), z.real),
}


@pytest.mark.parametrize("name", CASES)
def test_complex_op_on_cuda_matches_the_cpu(name):
    results = []
    for device in ("cpu", "cuda"):
        z = numbagrad.tensor(Z, device=device)
        out = CASES[name](z)
        assert out.device.type == device
        results.append((out.cpu().numpy(), out.dtype))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12, atol=1e-12)
    assert results[1][1] == results[0][1]


def test_writing_a_part_view_on_cuda_changes_the_complex_tensor():
    z = numbagrad.tensor(Z, device="cuda")
    z.real.mul_(2)
    z.imag.add_(1)
    np.testing.assert_array_equal(z.cpu().numpy(), (Z.real * 2) + 1j * (Z.imag + 1))


def test_view_as_complex_on_cuda_shares_memory_with_its_floats():
    pairs = numbagrad.tensor(np.stack([Z.real, Z.imag], -1), device="cuda")
    z = numbagrad.view_as_complex(pairs)
    pairs.mul_(-1)
    np.testing.assert_array_equal(z.cpu().numpy(), -Z)


def test_gradient_of_a_complex_leaf_on_cuda_matches_the_cpu():
    grads = []
    for device in ("cpu", "cuda"):
        z = numbagrad.tensor(Z, device=device, requires_grad=True)
        w = numbagrad.tensor(W, device=device)
        loss = ((z @ w).abs() ** 2).sum() + (z.exp() * z.conj()).real.sum()
        loss.backward()
        grads.append(z.grad.cpu().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
