"""The op profiler (``autograd.profiler.profile``, ``profiler.profile``, ``record_function``): op counts by torch's
names, ``record_function`` ranges whose self time leaves out their ops, backward nodes, and the table."""

from __future__ import annotations

import pytest

import numbagrad
from numbagrad.autograd.grad_mode import state


def _forward(lib):
    x = lib.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    y = (x * 2).sum() + (x * 3).exp().sum()
    return x, y


def test_op_counts_by_name_are_torchs(torch):
    counts = []
    for lib in (numbagrad, torch):
        x, _ = _forward(lib)
        with lib.autograd.profiler.profile() as prof:
            _forward(lib)
        counts.append({e.key: e.count for e in prof.key_averages()})
    ours, theirs = counts
    for name in ("aten::mul", "aten::sum", "aten::exp", "aten::add"):
        assert ours[name] == theirs[name]


def test_record_function_is_a_range_whose_self_time_leaves_out_its_ops():
    with numbagrad.autograd.profiler.profile() as prof:
        with numbagrad.autograd.profiler.record_function("block"):
            _forward(numbagrad)
    events = {e.key: e for e in prof.key_averages()}
    block = events.pop("block")
    inside = sum(e.cpu_time_total for e in events.values())
    assert block.count == 1
    assert block.cpu_time_total >= inside
    assert block.self_cpu_time_total == pytest.approx(block.cpu_time_total - inside, abs=1e-6)


def test_backward_nodes_are_recorded_by_name():
    x, y = _forward(numbagrad)
    with numbagrad.autograd.profiler.profile() as prof:
        y.backward()
    names = {e.key for e in prof.key_averages()}
    assert {"AddBackward0", "SumBackward0", "ExpBackward0", "MulBackward0"} <= names


def test_a_backward_records_the_ops_its_nodes_apply():
    """An embedding's backward node scatters its gradient through a ``LinearMap``; without a profiler it skips
    that op's ``apply`` (nothing would see it), under one the op is recorded."""
    weight = numbagrad.ones(4, 2, requires_grad=True)
    loss = numbagrad.nn.functional.embedding(numbagrad.tensor([[0, 3], [3, 1]]), weight).sum()
    with numbagrad.autograd.profiler.profile() as prof:
        loss.backward()
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts["EmbeddingBackward0"] == 1 and counts["aten::linear_map"] == 1
    assert weight.grad.tolist() == [[1.0, 1.0], [1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]


def test_a_custom_function_is_recorded_by_its_class_name():
    class Twice(numbagrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = numbagrad.ones(2)
    with numbagrad.autograd.profiler.profile() as prof:
        Twice.apply(x)
    assert {e.key: e.count for e in prof.key_averages()} == {"Twice": 1}


def test_table_lists_each_name_with_its_calls():
    with numbagrad.autograd.profiler.profile() as prof:
        _forward(numbagrad)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
    lines = table.splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU", "total",
                                "CPU", "time", "avg", "#", "of", "Calls"]  # fmt: skip
    mul = next(line for line in lines if line.split()[:1] == ["aten::mul"])
    assert mul.split()[-1] == "2"
    assert lines[-1].startswith("Self CPU time total: ")


def test_nothing_is_recorded_outside_the_block_and_the_op_slot_is_freed():
    with numbagrad.autograd.profiler.profile() as prof:
        numbagrad.ones(2) * 2
    numbagrad.ones(2) * 3
    with numbagrad.autograd.profiler.record_function("unprofiled"):
        numbagrad.ones(2) * 4
    assert {e.key: e.count for e in prof.key_averages()}["aten::mul"] == 1
    assert state.tracer is None and state.profiler is None


def test_a_second_profiler_in_the_same_thread_is_refused():
    with numbagrad.autograd.profiler.profile():
        with pytest.raises(RuntimeError, match="already enabled"):
            with numbagrad.autograd.profiler.profile():
                pass


def test_torch_profiler_interface_with_activities_and_steps():
    from numbagrad.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function("step"):
                numbagrad.ones(2).exp()
            prof.step()
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts["step"] == 3 and counts["aten::exp"] == 3 and prof.step_num == 3


def test_unsupported_options_are_refused():
    with pytest.raises(NotImplementedError):
        numbagrad.autograd.profiler.profile(record_shapes=True)
