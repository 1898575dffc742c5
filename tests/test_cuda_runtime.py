"""torch.cuda's runtime API: the caching allocator's statistics, streams, events and synchronisation.

Runs under Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) or on a GPU; the figures are torch's: bytes by block
size, peaks that ``reset_peak_memory_stats`` restarts, ``elapsed_time`` in milliseconds.
"""

import gc
import subprocess
import sys

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import cuda_memory

if not numbagrad.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

cuda = numbagrad.cuda


def settled() -> int:
    gc.collect()
    return cuda.memory_allocated()


# --- the caching allocator ----------------------------------------------------------------------------------------
def test_a_block_size_is_rounded_to_512_bytes_below_a_mebibyte_and_to_2_mebibytes_above():
    assert cuda_memory.size_class(1) == 512
    assert cuda_memory.size_class(512) == 512
    assert cuda_memory.size_class(513) == 1024
    assert cuda_memory.size_class((1 << 20) + 1) == 2 << 20
    assert cuda_memory.size_class(5 << 20) == 6 << 20


def test_a_cuda_tensor_counts_its_block_while_it_lives():
    before = settled()
    x = numbagrad.zeros(1000, device="cuda")  # 4,000 bytes -> one 4,096-byte block
    assert cuda.memory_allocated() - before == 4096
    del x
    assert settled() == before


def test_a_view_keeps_its_block_allocated_after_the_base_is_gone():
    before = settled()
    x = numbagrad.arange(256.0, device="cuda")
    view = x[10:20]
    del x
    assert settled() - before == 1024  # 256 float32
    assert view.cpu().tolist() == list(range(10, 20))
    del view
    assert settled() == before


def test_a_freed_block_is_reused_without_reserving_more():
    x = numbagrad.ones(300, device="cuda")
    del x
    settled()
    reserved = cuda.memory_reserved()
    y = numbagrad.ones(300, device="cuda")
    assert cuda.memory_reserved() == reserved
    assert y.sum().item() == 300.0


def test_reused_memory_holds_the_new_tensors_values():
    a = numbagrad.full((64,), 7.0, device="cuda")
    del a
    settled()
    b = numbagrad.zeros(64, device="cuda")
    assert b.cpu().tolist() == [0.0] * 64


def test_max_memory_allocated_is_the_peak_until_reset():
    settled()
    cuda.reset_peak_memory_stats()
    start = cuda.max_memory_allocated()
    big = numbagrad.empty(100_000, device="cuda")  # 400,000 bytes
    del big
    settled()
    assert cuda.max_memory_allocated() - start >= 400_000
    cuda.reset_peak_memory_stats()
    assert cuda.max_memory_allocated() == cuda.memory_allocated()


def test_empty_cache_gives_cached_blocks_back_and_keeps_live_ones():
    keep = numbagrad.ones(10, device="cuda")
    spare = numbagrad.ones(5000, device="cuda")
    del spare
    settled()
    assert cuda.memory_reserved() > cuda.memory_allocated()
    cuda.empty_cache()
    assert cuda.memory_reserved() == cuda.memory_allocated()
    assert keep.sum().item() == 10.0


def test_a_training_step_repeated_reserves_nothing_new():
    lin = numbagrad.nn.Linear(8, 4).to("cuda")
    opt = numbagrad.optim.SGD(lin.parameters(), lr=0.1)
    x = numbagrad.ones(5, 8, device="cuda")

    def step():
        opt.zero_grad()
        lin(x).square().mean().backward()
        opt.step()

    step()
    step()
    settled()
    reserved = cuda.memory_reserved()
    step()
    settled()
    assert cuda.memory_reserved() == reserved


def test_memory_statistics_do_not_import_numba_cuda():
    code = (
        "import sys, numbagrad; numbagrad.cuda.memory_allocated(); numbagrad.cuda.max_memory_reserved(); "
        "numbagrad.cuda.empty_cache(); print('numba.cuda' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- events and streams -------------------------------------------------------------------------------------------
def test_elapsed_time_is_in_milliseconds_between_two_recorded_events():
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    (numbagrad.ones(64, device="cuda") * 3).sum().item()
    end.record()
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float) and 0.0 <= elapsed < 60_000.0
    assert start.query() and end.query()


def test_elapsed_time_needs_timing_events_recorded(torch):
    plain, timing = cuda.Event(), cuda.Event(enable_timing=True)
    plain.record()
    timing.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        plain.elapsed_time(timing)
    with pytest.raises(RuntimeError, match="must be recorded"):
        cuda.Event(enable_timing=True).elapsed_time(timing)


def test_the_current_stream_is_the_default_one_outside_a_stream_block():
    assert cuda.current_stream() == cuda.default_stream()


def test_a_stream_block_makes_its_stream_current_and_restores_the_previous():
    s = cuda.Stream()
    with cuda.stream(s):
        assert cuda.current_stream() == s
        y = numbagrad.arange(4.0, device="cuda") + 1
        s.synchronize()
    assert cuda.current_stream() == cuda.default_stream()
    assert y.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_work_on_another_stream_is_ordered_before_what_waits_for_it():
    s = cuda.Stream()
    with cuda.stream(s):
        x = numbagrad.full((8,), 2.0, device="cuda")
    cuda.current_stream().wait_stream(s)
    assert (x * x).sum().item() == 32.0
    assert s.query()


def test_item_and_cpu_return_finished_results():
    x = numbagrad.tensor(np.arange(6.0), device="cuda")
    y = x.exp()
    np.testing.assert_allclose(y.cpu().numpy(), np.exp(np.arange(6.0)))
    assert y[5].item() == pytest.approx(np.exp(5.0))
