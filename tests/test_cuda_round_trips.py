"""cuda tensors stay on the device in training: a training step copies nothing between host and device until the
loss is read (``.item()``), and the device kernels behind it give the CPU's values and gradients. Copies are
counted by ``backend.cuda.transfers``. Run under Numba's simulator with ``NUMBA_ENABLE_CUDASIM=1``: tiny shapes."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.nn import functional as F

if not numbagrad.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

from numbagrad.backend import cuda as cuda_backend  # noqa: E402  (after the skip: it needs numba.cuda)


def _cnn(device, optimizer):
    numbagrad.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3)
    ).to(device)
    opt = optimizer(model.parameters(), lr=0.01)
    x = numbagrad.randn(2, 1, 4, 4).to(device)
    y = numbagrad.tensor([0, 2]).to(device)
    return model, opt, lambda: F.cross_entropy(model(x), y)


class _TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 4)
        self.ln = nn.LayerNorm(4)
        self.att = nn.MultiheadAttention(4, 2, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(4, 4), nn.GELU())
        self.head = nn.Linear(4, 5)

    def forward(self, tokens):
        h = self.ln(self.emb(tokens))
        a, _ = self.att(h, h, h, need_weights=False)
        h = h + a
        q = h.view(2, 3, 2, 2).transpose(1, 2)
        h = h + F.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2).reshape(2, 3, 4)
        return self.head(self.ff(h).softmax(-1))


def _transformer(device, optimizer):
    numbagrad.manual_seed(0)
    model = _TinyTransformer().to(device)
    opt = optimizer(model.parameters(), lr=0.01)
    tokens = numbagrad.tensor([[1, 2, 2], [0, 4, 1]]).to(device)
    y = numbagrad.tensor([[2, 2, 0], [1, 3, 4]]).to(device)
    return model, opt, lambda: F.cross_entropy(model(tokens).reshape(6, 5), y.reshape(6))


class _Indexing(nn.Module):
    """gather, scatter, index_add_, advanced get and set with repeated indices, masked_fill, argmax, sort, topk,
    cumsum: a loss built from all of them."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(numbagrad.randn(4, 3))
        self.register_buffer("i", numbagrad.tensor([[0, 2, 1], [3, 0, 0]]))
        self.register_buffer("r", numbagrad.tensor([1, 1, 3]))
        self.register_buffer("mask", numbagrad.tensor([True, False, True]))

    def forward(self):
        w, i, r, mask, device = self.w, self.i, self.r, self.mask, self.w.device
        a = w.gather(0, i)
        b = numbagrad.zeros(4, 3, device=device).scatter(0, i, a)
        c = numbagrad.zeros(4, 3, device=device).index_add_(0, r, w[r])
        e = numbagrad.zeros(4, 3, device=device)
        e[r] = w[r] * 2
        f = (a + b.sum() + c[:2] + e[:2]).masked_fill(mask, 0.0)
        s, _ = f.sort(dim=1)
        top, _ = f.topk(2, dim=1)
        return (s * f.argmax(1, keepdim=True) + top.sum(1, keepdim=True) + f.cumsum(1)).sum()


def _indexing(device, optimizer):
    numbagrad.manual_seed(0)
    model = _Indexing().to(device)
    opt = optimizer(model.parameters(), lr=0.01)
    return model, opt, model


def _nll(device, optimizer):
    """log_softmax and nll_loss with class weights and an ignored target."""
    numbagrad.manual_seed(0)
    model = nn.Linear(3, 4).to(device)
    opt = optimizer(model.parameters(), lr=0.01)
    x = numbagrad.randn(3, 3).to(device)
    y = numbagrad.tensor([1, -100, 3]).to(device)
    weight = numbagrad.tensor([1.0, 2.0, 0.5, 1.5]).to(device)
    return model, opt, lambda: F.nll_loss(F.log_softmax(model(x), 1), y, weight=weight)


def _resampling(device, optimizer):
    """adaptive_max_pool2d, bilinear interpolate and reflect padding: ops that read fixed tables (window
    positions, interpolation weights), uploaded on the first step only."""
    numbagrad.manual_seed(0)
    model = nn.Conv2d(1, 2, 3, padding=1).to(device)
    opt = optimizer(model.parameters(), lr=0.01)
    x = numbagrad.randn(1, 1, 5, 5).to(device)
    target = numbagrad.randn(1, 2, 6, 6).to(device)

    def loss_fn():
        h = F.interpolate(F.adaptive_max_pool2d(model(x), 3), size=(4, 4), mode="bilinear")
        return F.mse_loss(F.pad(h, (1, 1, 1, 1), mode="reflect"), target)

    return model, opt, loss_fn


class _Recurrent(nn.Module):
    """An embedding, a 2-layer LSTM, a GRU cell over its outputs and a linear head: the fused gate kernels."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 3)
        self.lstm = nn.LSTM(3, 4, num_layers=2)
        self.cell = nn.GRUCell(4, 4)
        self.head = nn.Linear(4, 5)

    def forward(self, tokens):
        out, _ = self.lstm(self.emb(tokens))
        h = out[0]
        for t in range(1, out.shape[0]):
            h = self.cell(out[t], h)
        return self.head(h)


def _recurrent(device, optimizer):
    numbagrad.manual_seed(0)
    model = _Recurrent().to(device)
    opt = optimizer(model.parameters(), lr=0.01)
    tokens = numbagrad.tensor([[1, 2], [0, 4], [3, 3]]).to(device)  # (time 3, batch 2)
    y = numbagrad.tensor([2, 0]).to(device)
    return model, opt, lambda: F.cross_entropy(model(tokens), y)


WORKLOADS = {
    "cnn": _cnn,
    "transformer": _transformer,
    "indexing": _indexing,
    "nll": _nll,
    "resampling": _resampling,
    "recurrent": _recurrent,
}


def _step(opt, loss_fn):
    opt.zero_grad()
    loss = loss_fn()
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("name", WORKLOADS)
def test_a_training_step_copies_nothing_until_the_loss_is_read(name):
    _, opt, loss_fn = WORKLOADS[name]("cuda", numbagrad.optim.AdamW)
    _step(opt, loss_fn)  # the first step creates the optimizer's state
    before = dict(cuda_backend.transfers)
    loss = _step(opt, loss_fn)
    assert cuda_backend.transfers == before
    loss.item()
    assert cuda_backend.transfers["to_host"] > before["to_host"]  # (the counter counts)


@pytest.mark.parametrize("name", WORKLOADS)
def test_training_on_cuda_matches_the_cpu(name):
    """With SGD: AdamW would blow float32 rounding up in the directions of zero gradient (a conv bias before a
    batch norm, the attention's key bias) to steps of ``lr``."""
    results = {}
    for device in ("cpu", "cuda"):
        model, opt, loss_fn = WORKLOADS[name](device, numbagrad.optim.SGD)
        losses = [_step(opt, loss_fn).item() for _ in range(2)]
        results[device] = losses, [p.detach().cpu().numpy() for p in model.parameters()]
    np.testing.assert_allclose(results["cuda"][0], results["cpu"][0], rtol=1e-5, atol=1e-6)  # (float32 models)
    for got, want in zip(results["cuda"][1], results["cpu"][1]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- device kernels against the CPU's, value and gradient ----------------------------------------------------
CASES = {
    "sort_ties_and_nan": (lambda x: x.sort(dim=1)[0], [[2.0, 1.0, 2.0, np.nan], [0.5, 0.5, -1.0, 3.0]]),
    "sort_descending_dim0": (lambda x: x.sort(dim=0, descending=True)[0], [[2.0, 1.0], [2.0, 3.0], [np.nan, 0.0]]),
    "topk_smallest": (lambda x: x.topk(2, dim=0, largest=False)[0], [[2.0, 1.0], [2.0, 3.0], [-1.0, 0.0]]),
    "cumprod_dim0": (lambda x: x.cumprod(0), [[1.0, 2.0], [3.0, -1.0], [0.5, 2.0]]),
    "scatter_add_repeated": (
        lambda x: numbagrad.zeros(2, 3, dtype=x.dtype, device=x.device).scatter_add(
            1, _i(x, [[0, 0, 2], [1, 1, 1]]), x
        ),
        [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
    ),
    "gather_smaller_index": (lambda x: x.gather(1, _i(x, [[2, 0]])), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    "index_select_dim1": (lambda x: x.index_select(1, _i(x, [2, 2, 0])), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    "index_put_accumulate": (
        lambda x: numbagrad.zeros(3, 2, dtype=x.dtype, device=x.device).index_put(
            (_i(x, [0, 2, 0]),), x, accumulate=True
        ),
        [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
    ),
    "two_index_arrays": (lambda x: x[_i(x, [1, -1, 1]), _i(x, [0, 2, 0])], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    "triu_batched": (lambda x: x.triu(1), [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0], [1.0, 2.0, 3.0]]]),
    "flip": (lambda x: x.flip(0, 1), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    "avg_pool2d_exclude_pad": (
        lambda x: F.avg_pool2d(x, 2, 1, padding=1, count_include_pad=False),
        [[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]],
    ),
    "conv2d_dilated_grouped": (
        lambda x: F.conv2d(x, _w(x, (2, 1, 2, 2)), stride=1, padding=1, dilation=2, groups=2),
        np.arange(2 * 3 * 3, dtype=float).reshape(1, 2, 3, 3) / 7,
    ),
    "layer_norm_plain": (lambda x: F.layer_norm(x, (3,)), [[1.0, 2.0, 4.0], [-1.0, 0.0, 0.5]]),
    "cross_entropy_weighted_ignored": (
        lambda x: F.cross_entropy(x, _i(x, [2, -100, 0]), weight=_w(x, (3,)).abs(), label_smoothing=0.1),
        [[1.0, 2.0, 0.5], [0.0, 1.0, 1.0], [3.0, -1.0, 0.0]],
    ),
    "embedding_scaled_by_freq": (
        lambda x: F.embedding(_i(x, [[1, 2], [1, 1]]), x, padding_idx=2, scale_grad_by_freq=True),
        [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
    ),
}


def _i(like, values):
    return numbagrad.tensor(values, device=like.device)


def _w(like, shape):
    return numbagrad.tensor(np.linspace(-1, 1, int(np.prod(shape))).reshape(shape), device=like.device)


@pytest.mark.parametrize("name", CASES)
def test_device_kernel_matches_cpu(name):
    fn, data = CASES[name]
    cpu = numbagrad.tensor(np.asarray(data, dtype=float), requires_grad=True)
    gpu = numbagrad.tensor(np.asarray(data, dtype=float), device="cuda", requires_grad=True)
    out_c, out_g = fn(cpu), fn(gpu)
    np.testing.assert_allclose(out_g.detach().cpu().numpy(), out_c.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.linspace(0.5, 1.5, out_c.numel()).reshape(tuple(out_c.shape))
    out_c.backward(numbagrad.tensor(g))
    out_g.backward(numbagrad.tensor(g, device="cuda"))
    np.testing.assert_allclose(gpu.grad.cpu().numpy(), cpu.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_argmax_and_argmin_take_the_first_extreme_and_the_first_nan():
    data = np.array([[1.0, 3.0, 3.0, np.nan, np.nan], [2.0, -1.0, -1.0, 0.0, 2.0]])
    for op in ("argmax", "argmin"):
        for dim in (None, 0, 1):
            want = getattr(numbagrad.tensor(data), op)(dim)
            got = getattr(numbagrad.tensor(data, device="cuda"), op)(dim)
            np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


def test_cumsum_of_ints_stays_integer():
    got = numbagrad.tensor([[1, 2, 3], [4, 5, 6]], device="cuda").cumsum(1)
    assert got.dtype == numbagrad.int64
    np.testing.assert_array_equal(got.cpu().numpy(), [[1, 3, 6], [4, 9, 15]])


# --- index checks on the device: the error comes with the next read -----------------------------------------
def test_an_out_of_range_target_raises_at_the_next_read_and_is_then_cleared():
    x = numbagrad.zeros(2, 3, device="cuda")
    loss = F.cross_entropy(x, numbagrad.tensor([1, 7], device="cuda"))
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        loss.item()
    assert F.cross_entropy(x, numbagrad.tensor([1, 2], device="cuda")).item() == pytest.approx(np.log(3))


def test_an_out_of_range_gather_index_raises_torchs_error_at_the_next_read():
    x = numbagrad.ones(2, 3, device="cuda")
    out = x.gather(1, numbagrad.tensor([[0, 3]], device="cuda"))
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
        out.cpu()


def test_an_out_of_range_embedding_index_leaves_the_weight_intact():
    weight = numbagrad.ones(3, 2, device="cuda")
    F.embedding(numbagrad.tensor([0, 5], device="cuda"), weight)
    with pytest.raises(IndexError, match="index out of range in self"):
        weight.cpu()
    np.testing.assert_array_equal(weight.cpu().numpy(), np.ones((3, 2)))


def test_queued_index_checks_do_not_pile_up_between_reads():
    x = numbagrad.zeros(2, 3, device="cuda")
    target = numbagrad.tensor([1, 2], device="cuda")
    F.cross_entropy(x, target)
    queued = len(cuda_backend.pending_checks)
    for _ in range(3):
        F.cross_entropy(x, target)
    assert len(cuda_backend.pending_checks) == queued


def test_dropout_draws_its_mask_on_the_device():
    """One seed from the host generator, a hashed draw per element: nothing copied, about ``p`` dropped, and
    ``manual_seed`` repeats the mask."""
    x = numbagrad.ones(2000, device="cuda", requires_grad=True)
    numbagrad.manual_seed(3)
    before = dict(cuda_backend.transfers)
    y = F.dropout(x, 0.25)
    y.sum().backward()
    assert cuda_backend.transfers == before
    values = y.detach().cpu().numpy()
    assert set(np.unique(values)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((values == 0).mean() - 0.25) < 0.05
    np.testing.assert_array_equal(x.grad.cpu().numpy(), values)
    numbagrad.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, 0.25).detach().cpu().numpy(), values)


def test_binary_cross_entropy_checks_its_input_on_the_device():
    target = numbagrad.tensor([0.0, 1.0], device="cuda")
    good = numbagrad.tensor([0.25, 0.5], device="cuda")
    before = dict(cuda_backend.transfers)
    loss = F.binary_cross_entropy(good, target)
    assert cuda_backend.transfers == before
    assert loss.item() == pytest.approx(-(np.log(0.75) + np.log(0.5)) / 2)
    F.binary_cross_entropy(numbagrad.tensor([0.25, 1.5], device="cuda"), target)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        good.cpu()
