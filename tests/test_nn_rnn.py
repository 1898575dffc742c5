"""RNN, LSTM, GRU, their cells and ``nn.utils.rnn`` against torch: torch's weights loaded into ours, then outputs,
final states and every gradient compared (input 3, hidden 4, seq 5, batch 2)."""

import gc
import tracemalloc

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn.utils import rnn as R
from torch_oracle import raises_like

ATOL = {"float64": 1e-6, "float32": 1e-5}

CASES = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu"}),
    ("RNN", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 2}),
    ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("LSTM", {"bias": False, "batch_first": True}),
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "bidirectional": True}),
    ("GRU", {"bias": False, "batch_first": True}),
]


def _ng(t, requires_grad=False):
    return numbagrad.tensor(t.detach().numpy(), requires_grad=requires_grad)


def _close(ours, theirs, atol):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=0, atol=atol)


def _pair(torch, name, dtype="float64", **kw):
    """torch's module and ours with torch's weights (loaded through a state_dict)."""
    theirs = getattr(torch.nn, name)(3, 4, **kw).to(getattr(torch, dtype))
    ours = getattr(nn, name)(3, 4, **kw).to(getattr(numbagrad, dtype))
    ours.load_state_dict({k: _ng(v) for k, v in theirs.state_dict().items()})
    return theirs, ours


def _initial_state(torch, name, kw, batch, dtype):
    """A random initial state of the shape torch expects (a pair for LSTM)."""
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h_size = kw.get("proj_size", 0) or 4
    h = torch.randn(layers, *batch, h_size, dtype=dtype, requires_grad=True)
    if name != "LSTM":
        return h
    return h, torch.randn(layers, *batch, 4, dtype=dtype, requires_grad=True)


def _states(hx):
    return list(hx) if isinstance(hx, tuple) else [hx]


def _compare_run(torch, theirs, ours, x, hx, atol):
    """Run both, compare outputs and final states, then backpropagate the same weighted sum and compare the
    gradients of the input, the initial states and every parameter."""
    xn = _ng(x, requires_grad=True)
    hxn = None if hx is None else tuple(_ng(h, requires_grad=True) for h in _states(hx))
    if hxn is not None and not isinstance(hx, tuple):
        hxn = hxn[0]
    out, h_n = theirs(x, hx)
    out_n, h_n_n = ours(xn, hxn)
    _close(out_n, out, atol)
    for a, b in zip(_states(h_n_n), _states(h_n)):
        _close(a, b, atol)
    weights = [torch.randn(out.shape, dtype=out.dtype)] + [torch.randn(h.shape, dtype=h.dtype) for h in _states(h_n)]
    loss = sum((w * t).sum() for w, t in zip(weights, [out] + _states(h_n)))
    loss_n = sum((_ng(w) * t).sum() for w, t in zip(weights, [out_n] + _states(h_n_n)))
    loss.backward()
    loss_n.backward()
    _close(xn.grad, x.grad, atol)
    if hx is not None:
        for a, b in zip(_states(hxn), _states(hx)):
            _close(a.grad, b.grad, atol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad, atol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("name, kw", CASES)
def test_module_matches_torch_outputs_states_and_gradients(torch, name, kw, with_h0, dtype):
    theirs, ours = _pair(torch, name, dtype, **kw)
    tdtype = getattr(torch, dtype)
    shape = (2, 5, 3) if kw.get("batch_first") else (5, 2, 3)
    x = torch.randn(shape, dtype=tdtype, requires_grad=True)
    hx = _initial_state(torch, name, kw, (2,), tdtype) if with_h0 else None
    _compare_run(torch, theirs, ours, x, hx, ATOL[dtype])


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_float16_module_matches_torch(torch, name):
    """Half precision computes in float32 inside the fused kernels and rounds once, as torch's CPU does."""
    theirs, ours = _pair(torch, name, "float16")
    x = torch.randn(5, 2, 3, dtype=torch.float16, requires_grad=True)
    xn = _ng(x, requires_grad=True)
    out, out_n = theirs(x)[0], ours(xn)[0]
    assert out_n.dtype == numbagrad.float16
    _close(out_n.float(), out.float(), 2e-3)
    out.float().sum().backward()
    out_n.float().sum().backward()
    _close(xn.grad.float(), x.grad.float(), 2e-3)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_bfloat16_module_matches_torch_within_its_rounding(torch, name):
    """bfloat16 steps compute in float32 inside the fused kernels and round once on the write."""
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(3, 4).to(torch.bfloat16)
    ours = getattr(nn, name)(3, 4).to(numbagrad.bfloat16)
    ours.load_state_dict({k: _ng(v.float()).to(numbagrad.bfloat16) for k, v in theirs.state_dict().items()})
    x = torch.randn(5, 2, 3).to(torch.bfloat16).requires_grad_()
    xn = _ng(x.float()).to(numbagrad.bfloat16).requires_grad_()
    out, out_n = theirs(x)[0], ours(xn)[0]
    assert out_n.dtype == numbagrad.bfloat16
    _close(out_n.float(), out.float(), 1.6e-2)
    out.float().sum().backward()
    out_n.float().sum().backward()
    _close(xn.grad.float(), x.grad.float(), 1.6e-2)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_float32_layers_wider_than_a_vector_match_torch(torch, name):
    """Hidden 37 and batch 3: the fused step kernels' vectorized loops and their remainders, over two
    bidirectional layers with initial states."""
    theirs = getattr(torch.nn, name)(5, 37, num_layers=2, bidirectional=True)
    ours = getattr(nn, name)(5, 37, num_layers=2, bidirectional=True)
    ours.load_state_dict({k: _ng(v) for k, v in theirs.state_dict().items()})
    x = torch.randn(4, 3, 5, requires_grad=True)
    h = torch.randn(4, 3, 37, requires_grad=True)
    hx = (h, torch.randn(4, 3, 37, requires_grad=True)) if name == "LSTM" else h
    _compare_run(torch, theirs, ours, x, hx, 2e-5)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_final_states_do_not_change_with_the_output(torch, name):
    """``h_n`` holds the last step's hidden state, but as its own tensor: writing into the output leaves it as
    torch leaves it."""
    results = []
    for lib in (torch, numbagrad):
        lib.manual_seed(0)
        module = getattr(lib.nn, name)(3, 4)
        with lib.no_grad():
            out, hidden = module(lib.ones(5, 2, 3))
            h_n = hidden[0] if name == "LSTM" else hidden
            before = h_n.clone()
            out.fill_(7.0)
            results.append(bool((h_n == before).all()))
    assert results == [True, True]


@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("name, kw", [("RNN", {}), ("LSTM", {"proj_size": 2}), ("GRU", {"batch_first": True})])
def test_unbatched_input_matches_torch(torch, name, kw, with_h0):
    theirs, ours = _pair(torch, name, **kw)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    hx = _initial_state(torch, name, kw, (), torch.float64) if with_h0 else None
    _compare_run(torch, theirs, ours, x, hx, ATOL["float64"])


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_dropout_one_in_training_feeds_zeros_to_the_next_layer_as_torch(torch, name):
    """With p=1 the dropout between layers is deterministic (all zeros), so training mode is comparable."""
    theirs, ours = _pair(torch, name, num_layers=2, dropout=1.0)
    x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)
    _compare_run(torch, theirs, ours, x, None, ATOL["float64"])


def test_dropout_acts_only_in_training_mode():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5).double()
    x = numbagrad.randn(5, 2, 3, dtype=numbagrad.float64)
    lstm.eval()
    first, second = lstm(x)[0].detach(), lstm(x)[0].detach()
    assert np.array_equal(first.numpy(), second.numpy())
    lstm.train()
    assert not np.array_equal(lstm(x)[0].detach().numpy(), first.numpy())


# --- parameters, state_dicts, printing ------------------------------------------------------------------------
@pytest.mark.parametrize("name, kw", CASES)
def test_parameter_names_shapes_and_flat_order_match_torch(torch, name, kw):
    theirs = getattr(torch.nn, name)(3, 4, **kw)
    ours = getattr(nn, name)(3, 4, **kw)
    assert [(k, tuple(p.shape)) for k, p in ours.named_parameters()] == [
        (k, tuple(p.shape)) for k, p in theirs.named_parameters()
    ]
    assert ours._flat_weights_names == theirs._flat_weights_names
    assert [[tuple(p.shape) for p in ws] for ws in ours.all_weights] == [
        [tuple(p.shape) for p in ws] for ws in theirs.all_weights
    ]
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_our_state_dict_loads_into_torch_and_gives_the_same_outputs(torch, name):
    ours = getattr(nn, name)(3, 4, num_layers=2, bidirectional=True).double()
    theirs = getattr(torch.nn, name)(3, 4, num_layers=2, bidirectional=True).double()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    x = torch.randn(5, 2, 3, dtype=torch.float64)
    _close(ours(_ng(x))[0], theirs(x)[0], 1e-6)


def test_init_is_uniform_within_one_over_sqrt_hidden():
    lstm = nn.LSTM(3, 16, num_layers=2, proj_size=4)
    values = np.concatenate([p.detach().numpy().ravel() for p in lstm.parameters()])
    bound = 1 / np.sqrt(16)
    assert values.min() >= -bound and values.max() <= bound
    assert values.min() < -0.9 * bound and values.max() > 0.9 * bound


def test_flatten_parameters_leaves_parameters_unchanged():
    gru = nn.GRU(3, 4)
    before = [p.detach().numpy().copy() for p in gru.parameters()]
    assert gru.flatten_parameters() is None
    assert all(np.array_equal(a, p.detach().numpy()) for a, p in zip(before, gru.parameters()))


def test_assigned_weight_is_used_by_forward():
    rnn = nn.RNN(3, 4).double()
    x = numbagrad.randn(5, 2, 3, dtype=numbagrad.float64)
    rnn.weight_ih_l0 = nn.Parameter(numbagrad.zeros(4, 3, dtype=numbagrad.float64))
    rnn.weight_hh_l0 = nn.Parameter(numbagrad.zeros(4, 4, dtype=numbagrad.float64))
    expected = np.tanh(rnn.bias_ih_l0.detach().numpy() + rnn.bias_hh_l0.detach().numpy())
    np.testing.assert_allclose(rnn(x)[0].detach().numpy(), np.broadcast_to(expected, (5, 2, 4)))


def test_module_classes_are_importable_from_torchs_module_path():
    from numbagrad.nn.modules import rnn as modules_rnn

    assert (modules_rnn.LSTM, modules_rnn.GRU, modules_rnn.RNN) == (nn.LSTM, nn.GRU, nn.RNN)
    assert (modules_rnn.LSTMCell, modules_rnn.GRUCell, modules_rnn.RNNCell) == (nn.LSTMCell, nn.GRUCell, nn.RNNCell)


# --- cells ---------------------------------------------------------------------------------------------------
CELLS = [
    ("RNNCell", {}),
    ("RNNCell", {"nonlinearity": "relu"}),
    ("LSTMCell", {}),
    ("GRUCell", {}),
    ("GRUCell", {"bias": False}),
]


def _cell_pair(torch, name, kw):
    theirs = getattr(torch.nn, name)(3, 4, **kw).double()
    ours = getattr(nn, name)(3, 4, **kw).double()
    ours.load_state_dict({k: _ng(v) for k, v in theirs.state_dict().items()})
    return theirs, ours


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("name, kw", CELLS)
def test_cell_matches_torch(torch, name, kw, with_hx, batched):
    theirs, ours = _cell_pair(torch, name, kw)
    batch = (2,) if batched else ()
    x = torch.randn(*batch, 3, dtype=torch.float64, requires_grad=True)
    hx = None
    if with_hx:
        hx = torch.randn(*batch, 4, dtype=torch.float64, requires_grad=True)
        if name == "LSTMCell":
            hx = (hx, torch.randn(*batch, 4, dtype=torch.float64, requires_grad=True))
    xn = _ng(x, requires_grad=True)
    hxn = None if hx is None else [_ng(h, requires_grad=True) for h in _states(hx)]
    out = _states(theirs(x, hx))
    out_n = _states(ours(xn, None if hxn is None else (tuple(hxn) if name == "LSTMCell" else hxn[0])))
    for a, b in zip(out_n, out):
        _close(a, b, 1e-6)
    sum(o.sum() * (k + 1) for k, o in enumerate(out)).backward()
    sum(o.sum() * (k + 1) for k, o in enumerate(out_n)).backward()
    _close(xn.grad, x.grad, 1e-6)
    for a, b in zip(hxn or [], _states(hx) if hx is not None else []):
        _close(a.grad, b.grad, 1e-6)
    theirs_params = dict(theirs.named_parameters())
    for pname, p in ours.named_parameters():
        _close(p.grad, theirs_params[pname].grad, 1e-6)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_passes_gradcheck_in_float64(name):
    cell = getattr(nn, name)(3, 4).double()
    x = numbagrad.randn(2, 3, dtype=numbagrad.float64, requires_grad=True)
    h = numbagrad.randn(2, 4, dtype=numbagrad.float64, requires_grad=True)
    c = numbagrad.randn(2, 4, dtype=numbagrad.float64, requires_grad=True)

    def run(x, h, c, *params):
        """The cell reads its parameters itself; gradcheck perturbs them (in place) as it perturbs x, h, c."""
        return cell(x, (h, c)) if name == "LSTMCell" else cell(x, h)

    assert gradcheck(run, (x, h, c, *cell.parameters()))


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_passes_gradgradcheck_in_float64(name):
    """The fused gate kernels' gradients are themselves differentiable (create_graph runs their tensor form)."""
    cell = getattr(nn, name)(3, 2).double()
    x = numbagrad.randn(2, 3, dtype=numbagrad.float64, requires_grad=True)
    h = numbagrad.randn(2, 2, dtype=numbagrad.float64, requires_grad=True)
    c = numbagrad.randn(2, 2, dtype=numbagrad.float64, requires_grad=True)

    def run(x, h, c, *params):
        return cell(x, (h, c)) if name == "LSTMCell" else cell(x, h)

    assert gradgradcheck(run, (x, h, c, *cell.parameters()))


@pytest.mark.parametrize("which", ["output", "c_n"])
def test_lstm_passes_gradgradcheck_when_only_one_state_reaches_the_loss(which):
    """A step whose h' (or c') gets no gradient still differentiates twice (the other seed is absent)."""
    lstm = nn.LSTM(2, 2).double()
    x = numbagrad.randn(2, 1, 2, dtype=numbagrad.float64, requires_grad=True)

    def run(x, *params):
        out, (_, c_n) = lstm(x)
        return out if which == "output" else c_n

    assert gradgradcheck(run, (x, *lstm.parameters()))


def test_gru_module_passes_gradgradcheck():
    gru = nn.GRU(2, 2).double()
    x = numbagrad.randn(2, 1, 2, dtype=numbagrad.float64, requires_grad=True)
    assert gradgradcheck(lambda x, *params: gru(x)[0], (x, *gru.parameters()))


def test_lstm_passes_gradcheck_through_packed_bidirectional_layers():
    lstm = nn.LSTM(3, 4, bidirectional=True, proj_size=2).double()
    x = numbagrad.randn(3, 2, 3, dtype=numbagrad.float64, requires_grad=True)

    def run(x):
        packed = R.pack_padded_sequence(x, [3, 1])
        out, (h, c) = lstm(packed)
        return out.data, h, c

    assert gradcheck(run, (x,))


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_packed_bidirectional_layers_with_initial_states_pass_gradcheck_and_gradgradcheck(name):
    """The whole-layer node on a packed batch: forward, sequences end early (their final states are set aside);
    in reverse, they join late from their initial states. Both directions differentiate once and twice."""
    module = getattr(nn, name)(2, 2, bidirectional=True).double()
    x = numbagrad.randn(3, 2, 2, dtype=numbagrad.float64, requires_grad=True)
    h0 = numbagrad.randn(2, 2, 2, dtype=numbagrad.float64, requires_grad=True)
    c0 = numbagrad.randn(2, 2, 2, dtype=numbagrad.float64, requires_grad=True)

    def run(x, h0, c0, *params):
        packed = R.pack_padded_sequence(x, [3, 1])
        out, state = module(packed, (h0, c0) if name == "LSTM" else h0)
        return (out.data, *_states(state))

    inputs = (x, h0, c0, *module.parameters())
    assert gradcheck(run, inputs)
    assert gradgradcheck(run, inputs)


def test_layer_backward_run_twice_with_retain_graph_gives_the_same_gradients():
    lstm = nn.LSTM(3, 4, num_layers=2)
    x = numbagrad.randn(4, 2, 3, requires_grad=True)
    out, (h_n, c_n) = lstm(x)
    loss = (out**2).sum() + c_n.sum()
    first = numbagrad.autograd.grad(loss, [x, *lstm.parameters()], retain_graph=True)
    second = numbagrad.autograd.grad(loss, [x, *lstm.parameters()])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def _recurrent_output(module, batch_of_sequences: bool, lib=numbagrad):
    """``module`` run on a small random input (a sequence for a layer, one step for a cell); its first output."""
    x = lib.randn(5, 2, 3) if batch_of_sequences else lib.randn(2, 3)
    out = module(x)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", ["LSTM", "GRU", "LSTMCell", "GRUCell"])
def test_second_backward_without_retain_graph_raises_torchs_error(torch, name):
    """As torch's: the first backward frees what the graph saved, so a second one through it raises."""
    errors = []
    for lib in (numbagrad, torch):
        lib.manual_seed(0)
        out = _recurrent_output(getattr(lib.nn, name)(3, 4), not name.endswith("Cell"), lib)
        out.sum().backward()
        with pytest.raises(RuntimeError) as info:
            out.sum().backward()
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("name", ["LSTM", "GRU", "LSTMCell", "GRUCell"])
def test_backward_with_retain_graph_then_without_gives_the_same_gradients_then_frees(name):
    module = getattr(nn, name)(3, 4)
    out = _recurrent_output(module, not name.endswith("Cell"))
    out.sum().backward(retain_graph=True)
    first = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    out.sum().backward()
    for a, p in zip(first, module.parameters()):
        np.testing.assert_array_equal(a.numpy(), p.grad.numpy())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.sum().backward()


def _held_by_graph_after_backward(name: str, retain_graph: bool) -> tuple[int, int]:
    """Bytes that numbagrad's code allocated and still holds once ``out.sum().backward()`` has run on a ``name``
    layer (its output, and so its graph, still referenced), counted from before the forward; and the bytes of the
    output and the final states, all that a released graph may still hold. (Numba's own allocations, such as
    kernels loaded from its cache, are not numbagrad's and not counted.)"""
    seq, batch, size, hidden = 12, 8, 4, 32
    module = getattr(nn, name)(size, hidden)
    x = numbagrad.randn(seq, batch, size)
    module(x)[0].sum().backward()  # (kernels compiled, gradients allocated)
    gc.collect()
    ours = [tracemalloc.Filter(True, "*/numbagrad/*")]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(ours)
        out = module(x)[0]
        out.sum().backward(retain_graph=retain_graph)
        after = tracemalloc.take_snapshot().filter_traces(ours)
    finally:
        tracemalloc.stop()
    assert out.grad_fn is not None
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return held, out.detach().numpy().nbytes + 2 * batch * hidden * 4


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_a_released_layer_graph_holds_no_per_step_arrays(name):
    """After a backward without retain_graph the graph keeps its output and nothing per step (each step's gates
    ran to several times the output's size); with retain_graph it keeps them for the next backward."""
    held, bound = _held_by_graph_after_backward(name, retain_graph=False)
    assert held < bound + 16 * 1024
    held_retained, _ = _held_by_graph_after_backward(name, retain_graph=True)
    assert held_retained > 3 * bound


# --- packed sequences -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths, enforce_sorted", [([5, 3, 2], True), ([2, 5, 3], False), ([3, 5, 5], False)])
def test_pack_and_pad_match_torch(torch, lengths, enforce_sorted, batch_first):
    x = torch.randn((3, 5, 2) if batch_first else (5, 3, 2), dtype=torch.float64, requires_grad=True)
    xn = _ng(x, requires_grad=True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first, enforce_sorted)
    packed_n = R.pack_padded_sequence(xn, lengths, batch_first, enforce_sorted)
    _close(packed_n.data, packed.data, 0)
    assert packed_n.batch_sizes.tolist() == packed.batch_sizes.tolist()
    for a, b in [
        (packed_n.sorted_indices, packed.sorted_indices),
        (packed_n.unsorted_indices, packed.unsorted_indices),
    ]:
        assert (a is None and b is None) or a.tolist() == b.tolist()
    padded, lens = torch.nn.utils.rnn.pad_packed_sequence(packed, batch_first, padding_value=-1.5, total_length=6)
    padded_n, lens_n = R.pad_packed_sequence(packed_n, batch_first, padding_value=-1.5, total_length=6)
    _close(padded_n, padded, 0)
    assert lens_n.tolist() == lens.tolist() and lens_n.dtype == numbagrad.int64
    weights = torch.randn(padded.shape, dtype=torch.float64)
    (weights * padded).sum().backward()
    (_ng(weights) * padded_n).sum().backward()
    _close(xn.grad, x.grad, 0)


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_sequence_matches_torch(torch, batch_first, padding_side):
    seqs = [torch.randn(n, 2, requires_grad=True) for n in (2, 4, 1)]
    seqs_n = [_ng(s, requires_grad=True) for s in seqs]
    padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first, 7.0, padding_side)
    padded_n = R.pad_sequence(seqs_n, batch_first, 7.0, padding_side)
    _close(padded_n, padded, 0)
    weights = torch.randn(padded.shape)
    (weights * padded).sum().backward()
    (_ng(weights) * padded_n).sum().backward()
    for a, b in zip(seqs_n, seqs):
        _close(a.grad, b.grad, 0)


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_unpack_sequence_and_unpad_sequence_match_torch(torch, enforce_sorted):
    seqs = [torch.randn(n, 3) for n in ((4, 2, 1) if enforce_sorted else (2, 4, 1))]
    packed = torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted)
    packed_n = R.pack_sequence([_ng(s) for s in seqs], enforce_sorted)
    _close(packed_n.data, packed.data, 0)
    assert packed_n.batch_sizes.tolist() == packed.batch_sizes.tolist()
    for a, b in zip(R.unpack_sequence(packed_n), seqs):
        _close(a, b, 0)
    padded = torch.nn.utils.rnn.pad_sequence(seqs)
    lengths = torch.tensor([len(s) for s in seqs])
    for a, b in zip(R.unpad_sequence(_ng(padded), _ng(lengths)), torch.nn.utils.rnn.unpad_sequence(padded, lengths)):
        _close(a, b, 0)


@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize(
    "name, kw",
    [
        ("RNN", {}),
        ("LSTM", {"num_layers": 2, "bidirectional": True}),
        ("GRU", {"bidirectional": True}),
        ("LSTM", {"proj_size": 2, "bidirectional": True}),
    ],
)
def test_module_on_packed_sequence_matches_torch(torch, name, kw, with_h0):
    theirs, ours = _pair(torch, name, **kw)
    x = torch.randn(5, 3, 3, dtype=torch.float64, requires_grad=True)
    xn = _ng(x, requires_grad=True)
    lengths = [3, 5, 1]
    hx = _initial_state(torch, name, kw, (3,), torch.float64) if with_h0 else None
    hxn = None if hx is None else [_ng(h, requires_grad=True) for h in _states(hx)]
    out, h_n = theirs(torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False), hx)
    packed_n = R.pack_padded_sequence(xn, lengths, enforce_sorted=False)
    out_n, h_n_n = ours(packed_n, None if hxn is None else (tuple(hxn) if name == "LSTM" else hxn[0]))
    assert isinstance(out_n, R.PackedSequence)
    _close(out_n.data, out.data, 1e-6)
    assert out_n.unsorted_indices.tolist() == out.unsorted_indices.tolist()
    for a, b in zip(_states(h_n_n), _states(h_n)):
        _close(a, b, 1e-6)
    loss = (out.data**2).sum() + sum((h**3).sum() for h in _states(h_n))
    loss_n = (out_n.data**2).sum() + sum((h**3).sum() for h in _states(h_n_n))
    loss.backward()
    loss_n.backward()
    _close(xn.grad, x.grad, 1e-6)
    for a, b in zip(hxn or [], _states(hx) if hx is not None else []):
        _close(a.grad, b.grad, 1e-6)
    theirs_params = dict(theirs.named_parameters())
    for pname, p in ours.named_parameters():
        _close(p.grad, theirs_params[pname].grad, 1e-6)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_packed_reverse_layer_whose_output_does_not_reach_the_loss_matches_torch(torch, name):
    """Only the final states reach the loss: the layers' backward starts with no output gradient, over a reverse
    direction whose sequences join late (the last step run has fewer rows than the state)."""
    theirs, ours = _pair(torch, name, bidirectional=True)
    x = torch.randn(4, 3, 3, dtype=torch.float64, requires_grad=True)
    xn = _ng(x, requires_grad=True)
    lengths = [4, 2, 1]
    _, h_n = theirs(torch.nn.utils.rnn.pack_padded_sequence(x, lengths), None)
    _, h_n_n = ours(R.pack_padded_sequence(xn, lengths), None)
    sum((h**2).sum() for h in _states(h_n)).backward()
    sum((h**2).sum() for h in _states(h_n_n)).backward()
    _close(xn.grad, x.grad, 1e-6)
    theirs_params = dict(theirs.named_parameters())
    for pname, p in ours.named_parameters():
        _close(p.grad, theirs_params[pname].grad, 1e-6)


# --- errors ------------------------------------------------------------------------------------------------
def _same_error(torch, make_theirs, make_ours):
    """``make_theirs(torch)`` and ``make_ours(numbagrad)`` raise the same exception type and message."""
    raises_like(torch, lambda lib: make_theirs(lib) if lib is torch else make_ours(lib))


def _module_call(name, x_shape, hx_shape=None, **kw):
    def run(lib):
        module = getattr(lib.nn, name)(3, 4, **kw)
        hx = None
        if hx_shape is not None:
            hx = lib.zeros(*hx_shape)
            hx = (hx, lib.zeros(*hx_shape)) if name.startswith("LSTM") else hx
        return module(lib.zeros(*x_shape), hx)

    return run


@pytest.mark.parametrize(
    "name, x_shape, hx_shape",
    [
        ("RNN", (5, 2, 6), None),
        ("LSTM", (5, 2, 6), None),
        ("GRU", (5, 2, 6), None),
        ("RNN", (5, 2, 3), (1, 3, 4)),
        ("LSTM", (5, 2, 3), (1, 3, 4)),
        ("GRU", (5, 2, 3), (2, 2, 4)),
        ("RNN", (5, 2, 3, 1), None),
        ("LSTM", (5, 2, 3, 1), None),
        ("GRU", (5, 2, 3, 1), None),
        ("RNN", (5, 2, 3), (2, 4)),
        ("LSTM", (5, 3), (1, 1, 4)),
        ("GRU", (5, 3), (1, 1, 4)),
    ],
)
def test_module_errors_match_torch(torch, name, x_shape, hx_shape):
    _same_error(torch, _module_call(name, x_shape, hx_shape), _module_call(name, x_shape, hx_shape))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_empty_sequence_raises_torchs_error(torch, name):
    def run(lib):
        return getattr(lib.nn, name)(3, 4)(lib.zeros(0, 2, 3))

    _same_error(torch, run, run)


def test_lstm_with_projection_checks_hidden_against_proj_size(torch):
    run = _module_call("LSTM", (5, 2, 3), (1, 2, 4), proj_size=2)
    _same_error(torch, run, run)


def test_input_dtype_must_match_the_weights():
    lstm = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"RNN input dtype \(numbagrad.float64\) does not match weight dtype"):
        lstm(numbagrad.zeros(5, 2, 3, dtype=numbagrad.float64))


@pytest.mark.parametrize(
    "name, x_shape, hx_shape",
    [
        ("RNNCell", (2, 5), None),
        ("LSTMCell", (2, 5), None),
        ("GRUCell", (2, 5), None),
        ("RNNCell", (2, 3), (2, 5)),
        ("LSTMCell", (2, 3), (3, 4)),
        ("GRUCell", (2, 3), (3, 4)),
        ("GRUCell", (2, 3, 1), None),
        ("LSTMCell", (2, 3), (2, 2, 4)),
    ],
)
def test_cell_errors_match_torch(torch, name, x_shape, hx_shape):
    _same_error(torch, _module_call(name, x_shape, hx_shape), _module_call(name, x_shape, hx_shape))


@pytest.mark.parametrize(
    "name, args, kw",
    [
        ("LSTM", (3, 4), {"dropout": 1.5}),
        ("LSTM", (3, 4), {"proj_size": 4}),
        ("LSTM", (3, 4), {"proj_size": -1}),
        ("GRU", (3, 4), {"proj_size": 2}),
        ("RNN", (3, 4), {"nonlinearity": "sigmoid"}),
        ("RNN", (3, 0), {}),
        ("GRU", (3, 4), {"num_layers": 0}),
        ("LSTM", (3, 4.0), {}),
        ("GRU", (3, 4), {"bias": 1}),
    ],
)
def test_constructor_errors_match_torch(torch, name, args, kw):
    _same_error(torch, lambda lib: getattr(lib.nn, name)(*args, **kw), lambda lib: getattr(lib.nn, name)(*args, **kw))


def test_dropout_with_one_layer_warns_as_torch():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)


@pytest.mark.parametrize(
    "call",
    [
        lambda R, lib: R.pack_padded_sequence(lib.zeros(4, 3, 2), [2, 3, 1]),
        lambda R, lib: R.pack_padded_sequence(lib.zeros(4, 3, 2), [3, 2, 0]),
        lambda R, lib: R.pack_padded_sequence(lib.zeros(4, 3, 2), [3, 2]),
        lambda R, lib: R.pack_padded_sequence(lib.zeros(4, 3, 2), lib.tensor([[3, 2, 1]])),
        lambda R, lib: R.pad_packed_sequence(R.pack_padded_sequence(lib.zeros(4, 3, 2), [3, 2, 1]), total_length=2),
        lambda R, lib: R.pad_sequence([lib.ones(2, 3)], padding_side="middle"),
        lambda R, lib: R.pad_sequence([lib.ones(2, 3), lib.ones(2, 4)]),
        lambda R, lib: R.pad_sequence([]),
    ],
)
def test_packing_errors_match_torch(torch, call):
    _same_error(torch, lambda t: call(t.nn.utils.rnn, t), lambda lib: call(R, lib))


# --- a training program, unchanged between the two libraries --------------------------------------------------
def _train_language_model(lib, state=None, steps=3):
    """A tiny LSTM language model trained a few SGD steps: the same code for torch and numbagrad."""
    nn_ = lib.nn

    class LM(nn_.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn_.Embedding(7, 3)
            self.rnn = nn_.LSTM(3, 4, num_layers=2, dropout=0.0, batch_first=True)
            self.head = nn_.Linear(4, 7)

        def forward(self, tokens, hidden=None):
            out, hidden = self.rnn(self.embed(tokens), hidden)
            return self.head(out), hidden

    model = LM().double()
    if state is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    tokens = lib.tensor(np.random.default_rng(1).integers(0, 7, (2, 6)))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.5)
    losses, hidden = [], None
    for _ in range(steps):
        optimizer.zero_grad()
        if hidden is not None:
            hidden = tuple(h.detach() for h in hidden)  # truncated backpropagation through time
        logits, hidden = model(tokens[:, :-1], hidden)
        loss = nn_.functional.cross_entropy(logits.reshape(-1, 7), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


def test_lstm_language_model_trains_as_torchs(torch):
    start, _ = _train_language_model(torch, steps=0)
    state = {k: v.detach().numpy().copy() for k, v in start.state_dict().items()}
    theirs, their_losses = _train_language_model(torch, state)
    ours, our_losses = _train_language_model(numbagrad, state)
    np.testing.assert_allclose(our_losses, their_losses, rtol=0, atol=1e-10)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p, theirs_params[name], 1e-10)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_a_compiled_recurrent_module_gives_the_eager_gradients_over_repeated_calls(mode):
    numbagrad.manual_seed(0)
    module = getattr(nn, mode)(3, 4, num_layers=2)
    compiled = numbagrad.compile(module)
    x = numbagrad.randn(5, 2, 3)
    out, _ = module(x)
    out.sum().backward()
    eager = [p.grad.clone() for p in module.parameters()]
    for _ in range(3):  # tracing, then replays of whatever the plan holds
        module.zero_grad()
        out, _ = compiled(x)
        out.sum().backward()
        for p, g in zip(module.parameters(), eager):
            np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-6, atol=1e-7)


# --- a derivative written once: the first gradient's kernels serve create_graph too (as test_first_vs_second_order)
def _seq(*shape):
    return numbagrad.randn(*shape, dtype=numbagrad.float64, requires_grad=True)


def _flat(result) -> tuple:
    """A layer's ``(output, state)`` as ``(output, *states)``."""
    out, state = result
    return (out, *state) if isinstance(state, tuple) else (out, state)


def _packed(module):
    """A packed batch of two sequences (lengths 2 and 1) through ``module``: the padded output and final states."""

    def run(x):
        out, *states = _flat(module(R.pack_padded_sequence(x, [2, 1])))
        return (R.pad_packed_sequence(out)[0], *states)

    return run


def _second_order_cases():
    """``(name, module, fn, leaves)``: ``fn(*leaves)`` returns the float outputs; tiny float64 sizes."""
    numbagrad.manual_seed(0)
    cells = {name: getattr(nn, name)(2, 2).double() for name in ("RNNCell", "LSTMCell", "GRUCell")}
    yield "RNNCell", cells["RNNCell"], lambda x, h: (cells["RNNCell"](x, h),), [_seq(2, 2), _seq(2, 2)]
    yield "LSTMCell", cells["LSTMCell"], lambda x, h, c: cells["LSTMCell"](x, (h, c)), [_seq(2, 2) for _ in "xhc"]
    yield "GRUCell", cells["GRUCell"], lambda x, h: (cells["GRUCell"](x, h),), [_seq(2, 2), _seq(2, 2)]
    rnn = nn.RNN(2, 2).double()
    yield "RNN", rnn, lambda x: _flat(rnn(x)), [_seq(2, 2, 2)]
    lstm2 = nn.LSTM(2, 2, num_layers=2, bidirectional=True).double()
    yield "LSTM-2-layers-bidirectional", lstm2, lambda x: _flat(lstm2(x)), [_seq(2, 1, 2)]
    lstm_proj = nn.LSTM(2, 3, proj_size=2).double()
    yield (
        "LSTM-proj-initial-states",
        lstm_proj,
        lambda x, h, c: _flat(lstm_proj(x, (h, c))),
        [_seq(2, 2, 2), _seq(1, 2, 2), _seq(1, 2, 3)],
    )
    lstm = nn.LSTM(2, 2).double()
    yield "LSTM-packed", lstm, _packed(lstm), [_seq(2, 2, 2)]
    gru2 = nn.GRU(2, 2, num_layers=2, bidirectional=True).double()
    yield "GRU-2-layers-bidirectional", gru2, lambda x: _flat(gru2(x)), [_seq(2, 1, 2)]
    gru = nn.GRU(2, 2, bias=False).double()
    yield "GRU-no-bias-initial-state", gru, lambda x, h: _flat(gru(x, h)), [_seq(2, 2, 2), _seq(1, 2, 2)]
    gru_packed = nn.GRU(2, 2).double()
    yield "GRU-packed", gru_packed, _packed(gru_packed), [_seq(2, 2, 2)]


SECOND_ORDER = {name: (module, fn, leaves) for name, module, fn, leaves in _second_order_cases()}


def _first_gradients(module, fn, leaves, create_graph: bool) -> list:
    inputs = [*leaves, *module.parameters()]
    outs = fn(*leaves)
    rng = np.random.default_rng(1)
    seeds = [numbagrad.tensor(rng.standard_normal(tuple(o.shape))) for o in outs]
    grads = numbagrad.autograd.grad(outs, inputs, seeds, create_graph=create_graph)
    return [g.detach().numpy() for g in grads]


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_first_gradient_is_bitwise_the_same_with_and_without_create_graph(name):
    module, fn, leaves = SECOND_ORDER[name]
    without = _first_gradients(module, fn, leaves, create_graph=False)
    with_graph = _first_gradients(module, fn, leaves, create_graph=True)
    for a, b in zip(without, with_graph):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_derivative_through_the_first_gradient_passes_gradgradcheck(name):
    """The module reads its parameters itself; gradgradcheck perturbs them (in place) as it perturbs the leaves."""
    module, fn, leaves = SECOND_ORDER[name]
    count = len(leaves)
    assert gradgradcheck(lambda *xs: fn(*xs[:count]), (*leaves, *module.parameters()))
