"""``backend.lstm_layer`` and the backward it returns: all the steps of an LSTM layer that runs its whole batch
at every step, in one compiled loop (each step's recurrent product on ``row_products``' kernel, then the fused cell),
the batch's rows shared among threads. They give the bits of the step-by-step loop, and ``nn.LSTM`` through them
matches torch."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.backend import blas, cpu, cpu_threads, rnn_kernels, row_products

pytestmark = pytest.mark.skipif(
    not row_products.measured_host(), reason="the whole-layer loop runs where the row kernel does (AVX-512)"
)

#: (steps, batch, hidden, reverse): whole register blocks of rows, a ragged last block, a single row.
SHAPES = [(6, 10, 128, False), (5, 7, 128, True), (3, 1, 160, False)]


def _operands(steps, batch, hidden, dtype, seed=0):
    rng = np.random.default_rng(seed)
    xi = rng.standard_normal((steps * batch, 4 * hidden)).astype(dtype)
    h0, c0 = rng.standard_normal((2, batch, hidden)).astype(dtype)
    w_hh = (rng.standard_normal((4 * hidden, hidden)) * 0.1).astype(dtype)
    return xi, h0, c0, w_hh


def _buffers(xi, hidden):
    rows = xi.shape[0]
    return np.empty_like(xi), np.empty((rows, hidden), xi.dtype), np.empty((rows, hidden), xi.dtype)


def _order(steps, reverse):
    return list(range(steps - 1, -1, -1) if reverse else range(steps))


def _steps_forward(xi, h0, c0, w_hh, reverse):
    """The reference: one ``repeated_product`` and one ``lstm_cell`` per step."""
    batch, hidden = c0.shape
    acts, output, cells = _buffers(xi, hidden)
    product, h, c = cpu.repeated_product(w_hh, batch), h0, c0
    for t in _order(xi.shape[0] // batch, reverse):
        rows = slice(t * batch, (t + 1) * batch)
        cpu.lstm_cell(xi[rows], product(h), c, acts[rows], output[rows], cells[rows])
        h, c = output[rows], cells[rows]
    return acts, output, cells


def _steps_backward(g_out, g_h, g_c, acts, cells, c0, w_hh, reverse):
    batch, hidden = c0.shape
    d_gates = np.empty_like(acts)
    product = cpu.repeated_product(w_hh.T, batch)
    order = _order(acts.shape[0] // batch, reverse)
    for k in range(len(order) - 1, -1, -1):
        rows = slice(order[k] * batch, (order[k] + 1) * batch)
        c_prev = c0 if k == 0 else cells[order[k - 1] * batch : (order[k - 1] + 1) * batch]
        given = np.zeros((batch, hidden), acts.dtype) if g_out is None else g_out[rows]
        g_c_prev = np.empty((batch, hidden), acts.dtype)
        cpu.lstm_cell_backward(given, g_h, g_c, acts[rows], c_prev, cells[rows], d_gates[rows], g_c_prev)
        g_h, g_c = product(d_gates[rows]), g_c_prev
    return d_gates, g_h, g_c


def _whole_backward(steps_back, g_out, g_h, g_c, w_hh, rows):
    d_gates = np.empty((rows, w_hh.shape[0]), w_hh.dtype)
    g_h0, g_c0 = steps_back(g_out, g_h, g_c, w_hh, d_gates)
    return d_gates, g_h0, g_c0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("steps, batch, hidden, reverse", SHAPES)
def test_the_whole_layer_forward_gives_the_step_loops_bits(dtype, steps, batch, hidden, reverse):
    xi, h0, c0, w_hh = _operands(steps, batch, hidden, dtype)
    acts, output, cells = _buffers(xi, hidden)
    assert cpu.lstm_layer(xi, h0, c0, w_hh, reverse, acts, output, cells) is not None
    for ours, reference in zip((acts, output, cells), _steps_forward(xi, h0, c0, w_hh, reverse)):
        np.testing.assert_array_equal(ours, reference)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_output_grad", [True, False])
@pytest.mark.parametrize("steps, batch, hidden, reverse", SHAPES)
def test_the_whole_layer_backward_gives_the_step_loops_bits(dtype, with_output_grad, steps, batch, hidden, reverse):
    """The gates' gradient of every step and the initial states' gradients; without an output gradient (only the
    final states reach the loss) the steps add zeros."""
    xi, h0, c0, w_hh = _operands(steps, batch, hidden, dtype)
    acts, output, cells = _buffers(xi, hidden)
    steps_back = cpu.lstm_layer(xi, h0, c0, w_hh, reverse, acts, output, cells)
    rng = np.random.default_rng(1)
    g_out = rng.standard_normal((steps * batch, hidden)).astype(dtype) if with_output_grad else None
    g_h, g_c = rng.standard_normal((2, batch, hidden)).astype(dtype)
    before = g_h.copy(), g_c.copy()
    whole = _whole_backward(steps_back, g_out, g_h, g_c, w_hh, steps * batch)
    for ours, reference in zip(whole, _steps_backward(g_out, g_h, g_c, acts, cells, c0, w_hh, reverse)):
        np.testing.assert_array_equal(ours, reference)
    np.testing.assert_array_equal(g_h, before[0])  # (the final states' gradients are read, never written)
    np.testing.assert_array_equal(g_c, before[1])


@pytest.mark.parametrize("batch, hidden, dtype", [(10, 64, np.float32), (65, 128, np.float32), (10, 128, np.int64)])
def test_the_layer_is_left_to_the_steps_where_the_row_kernel_does_not_run(batch, hidden, dtype):
    """Shallow products or many rows run on BLAS step by step: nothing is written, None is returned, and the caller
    runs the steps."""
    xi, h0, c0, w_hh = (a.astype(dtype) for a in _operands(2, batch, hidden, np.float64))
    acts, output, cells = (np.zeros_like(a) for a in _buffers(xi, hidden))
    assert cpu.lstm_layer(xi, h0, c0, w_hh, False, acts, output, cells) is None
    assert not (acts.any() or output.any() or cells.any())


def test_the_rows_shared_among_threads_give_the_bits_of_one_thread():
    """Each thread runs every step for its own register blocks of rows (the rows never meet): 13 rows on two
    threads are 5 and 8 (one block, then two: the second ragged)."""
    if blas.openblas() is None or not blas.openblas().runs_tasks:
        pytest.skip("numpy links a BLAS whose threads cannot run tasks")
    xi, h0, c0, w_hh = _operands(40, 13, 128, np.float32)
    g_out = np.random.default_rng(2).standard_normal((40 * 13, 128)).astype(np.float32)
    before = numbagrad.get_num_threads()
    results = {}
    try:
        for threads in (1, 2):
            numbagrad.set_num_threads(threads)
            calls = []

            def spy(function, args, calls=calls, real=cpu_threads.run_compiled):
                if function == rnn_kernels._loops().share_f32.address:  # (not the shared pack of W_hh)
                    calls.append(args[:, -3:-1].tolist())  # (each share's first row and count)
                real(function, args)

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(cpu_threads, "run_compiled", spy)
                acts, output, cells = _buffers(xi, 128)
                steps_back = cpu.lstm_layer(xi, h0, c0, w_hh, False, acts, output, cells)
                grads = _whole_backward(steps_back, g_out, h0, c0, w_hh, 40 * 13)
            results[threads] = (acts, output, cells, *grads)
            assert calls == ([] if threads == 1 else [[[0, 5], [5, 8]]] * 2)
    finally:
        numbagrad.set_num_threads(before)
    for one, two in zip(results[1], results[2]):
        np.testing.assert_array_equal(one, two)


def _torch_pair(torch, dtype, **kw):
    theirs = torch.nn.LSTM(6, 128, **kw).to(getattr(torch, dtype))
    ours = nn.LSTM(6, 128, **kw).to(getattr(numbagrad, dtype))
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return theirs, ours


@pytest.mark.parametrize("dtype, atol", [("float32", 2e-5), ("float64", 1e-12)])
def test_lstm_layers_run_whole_and_match_torch(torch, monkeypatch, dtype, atol):
    """Two bidirectional layers (the reverse direction walks the steps back) from given initial states: outputs,
    final states and every gradient, each of the four layer directions one ``lstm_layer`` call."""
    ran = []
    real = cpu.lstm_layer
    monkeypatch.setattr(cpu, "lstm_layer", lambda *args: ran.append(real(*args)) or ran[-1])
    theirs, ours = _torch_pair(torch, dtype, num_layers=2, bidirectional=True)
    tdtype = getattr(torch, dtype)
    x = torch.randn(4, 7, 6, dtype=tdtype, requires_grad=True)
    h0, c0 = (torch.randn(4, 7, 128, dtype=tdtype, requires_grad=True) for _ in range(2))
    ours_x, ours_h0, ours_c0 = (numbagrad.tensor(t.detach().numpy(), requires_grad=True) for t in (x, h0, c0))
    out, (h_n, c_n) = theirs(x, (h0, c0))
    ours_out, (ours_h_n, ours_c_n) = ours(ours_x, (ours_h0, ours_c0))
    assert len(ran) == 4 and all(callable(steps_back) for steps_back in ran)
    weights = [torch.randn(t.shape, dtype=tdtype) for t in (out, h_n, c_n)]
    sum((w * t).sum() for w, t in zip(weights, (out, h_n, c_n))).backward()
    ours_loss = sum((numbagrad.tensor(w.numpy()) * t).sum() for w, t in zip(weights, (ours_out, ours_h_n, ours_c_n)))
    ours_loss.backward()
    pairs = [(ours_out, out), (ours_h_n, h_n), (ours_c_n, c_n), (ours_x.grad, x.grad), (ours_h0.grad, h0.grad)]
    pairs += [(ours_c0.grad, c0.grad)]
    pairs += [(p.grad, dict(theirs.named_parameters())[name].grad) for name, p in ours.named_parameters()]
    for a, b in pairs:
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=atol)


def test_only_the_final_state_reaching_the_loss_matches_torch(torch):
    """No gradient reaches the output: the steps back start from the final state's alone."""
    theirs, ours = _torch_pair(torch, "float64")
    x = torch.randn(5, 6, 6, dtype=torch.float64, requires_grad=True)
    ours_x = numbagrad.tensor(x.detach().numpy(), requires_grad=True)
    theirs(x)[1][1].sum().backward()
    ours(ours_x)[1][1].sum().backward()
    np.testing.assert_allclose(ours_x.grad.numpy(), x.grad.numpy(), rtol=0, atol=1e-12)


def test_a_second_backward_through_a_whole_layer_raises_torchs_error(torch):
    theirs, ours = _torch_pair(torch, "float32")
    x = torch.randn(3, 5, 6)
    loss, ours_loss = theirs(x)[0].sum(), ours(numbagrad.tensor(x.numpy()))[0].sum()
    loss.backward()
    ours_loss.backward()
    with pytest.raises(RuntimeError) as theirs_error:
        loss.backward()
    with pytest.raises(RuntimeError) as ours_error:
        ours_loss.backward()
    assert str(ours_error.value) == str(theirs_error.value)


def test_a_whole_layer_backward_with_retain_graph_gives_the_same_gradients_twice():
    lstm = nn.LSTM(6, 128)
    loss = lstm(numbagrad.randn(3, 5, 6))[0].sum()
    loss.backward(retain_graph=True)
    first = lstm.weight_hh_l0.grad.clone()
    lstm.zero_grad()
    loss.backward()
    np.testing.assert_array_equal(lstm.weight_hh_l0.grad.numpy(), first.numpy())
