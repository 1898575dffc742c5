"""numbagrad.distributed's collectives on 2 ranks (programs/collectives.py), against values computed here."""

import numpy as np
import pytest
from programs.mpi_common import DTYPES, OPS, rank_values

WORLD = 2
NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."


@pytest.fixture(scope="module")
def ranks(mpirun):
    run = mpirun("collectives.py")
    assert run.returncode == 0, run.output
    return [run.rank(r) for r in range(WORLD)]


def reduced(op: str, arrays: list) -> list:
    """What reducing the ranks' arrays with ``op`` gives; integer AVG truncates toward zero (as NCCL's)."""
    stack = np.stack(arrays)
    if op == "SUM":
        return stack.sum(0).tolist()
    if op == "PRODUCT":
        return stack.prod(0).tolist()
    if op == "MIN":
        return stack.min(0).tolist()
    if op == "MAX":
        return stack.max(0).tolist()
    total = stack.sum(0)
    if stack.dtype.kind == "f":
        return (total / len(arrays)).astype(stack.dtype).tolist()
    return (np.sign(total) * (np.abs(total) // len(arrays))).tolist()


def inputs(dtype: str) -> list:
    return [rank_values(r, dtype) for r in range(WORLD)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_all_reduce_gives_every_rank_the_reduction(ranks, op, dtype):
    for r in range(WORLD):
        assert ranks[r][f"all_reduce/{op}/{dtype}"] == reduced(op, inputs(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_all_reduce_writes_into_the_tensors_own_storage(ranks, op, dtype):
    assert all(ranks[r][f"all_reduce/{op}/{dtype}/in_place"] for r in range(WORLD))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_async_all_reduce_has_the_result_after_wait(ranks, op, dtype):
    for r in range(WORLD):
        waited, values, completed = ranks[r][f"all_reduce_async/{op}/{dtype}"]
        assert waited is True and completed is True
        assert values == reduced(op, inputs(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_reduce_scatter_tensor_gives_rank_r_the_rth_chunk_of_the_reduction(ranks, op, dtype):
    bigs = [np.concatenate([a, a * 2]) for a in inputs(dtype)]
    whole = reduced(op, bigs)
    for r in range(WORLD):
        assert ranks[r][f"reduce_scatter_tensor/{op}/{dtype}"] == whole[5 * r : 5 * (r + 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_reduce_writes_the_reduction_on_dst_only(ranks, op, dtype):
    assert ranks[1][f"reduce/{op}/{dtype}"] == reduced(op, inputs(dtype))
    assert ranks[0][f"reduce/{op}/{dtype}"] == rank_values(0, dtype).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_copies_src_in_place(ranks, dtype):
    for r in range(WORLD):
        assert ranks[r][f"broadcast/{dtype}"] == [rank_values(1, dtype).tolist(), True]
        assert ranks[r][f"broadcast_async/{dtype}"] == rank_values(0, dtype).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_fills_the_list_in_rank_order(ranks, dtype):
    for r in range(WORLD):
        assert ranks[r][f"all_gather/{dtype}"] == [a.tolist() for a in inputs(dtype)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_into_tensor_stacks_into_the_output_storage(ranks, dtype):
    for r in range(WORLD):
        assert ranks[r][f"all_gather_into_tensor/{dtype}"] == [[a.tolist() for a in inputs(dtype)], True]


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_fills_the_list_on_dst(ranks, dtype):
    assert ranks[0][f"gather/{dtype}"] == [a.tolist() for a in inputs(dtype)]
    assert ranks[1][f"gather/{dtype}"] is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_gives_rank_r_the_rth_tensor_of_src(ranks, dtype):
    for r in range(WORLD):
        assert ranks[r][f"scatter/{dtype}"] == (rank_values(r, dtype) * 10).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_recv_from_any_rank_returns_the_senders_rank(ranks, dtype):
    assert ranks[1][f"send_recv/{dtype}"] == [rank_values(0, dtype).tolist(), 0]
    assert ranks[1][f"isend_irecv/{dtype}"] == rank_values(0, dtype).tolist()


def test_work_waits_with_a_timeout_and_can_be_polled(ranks):
    for r in range(WORLD):
        assert ranks[r]["wait_with_timeout"] == [True, True, [2.0, 2.0, 2.0, 2.0]]
        assert ranks[r]["poll_until_completed"] == [[2.0, 2.0]]


def test_bool_sum_is_a_logical_or_and_product_a_logical_and(ranks):
    for r in range(WORLD):
        assert ranks[r]["all_reduce/SUM/bool"] == [True, True, False]
        assert ranks[r]["all_reduce/PRODUCT/bool"] == [False, True, False]


def test_object_collectives(ranks):
    for r in range(WORLD):
        assert ranks[r]["all_gather_object"] == [{"rank": 0, "name": "r0"}, {"rank": 1, "name": "r1"}]
        assert ranks[r]["broadcast_object_list"] == ["from 1", 1]


def test_a_rank_outside_a_group_gets_rank_minus_one_and_a_warning(ranks):
    assert (ranks[0]["solo/rank"], ranks[0]["solo/size"]) == (-1, -1)
    assert ranks[0]["solo/all_reduce"] == [rank_values(0, "float64").tolist(), True]  # untouched
    warning = "Running all_reduce on global rank 0 which does not belong to the given group."
    assert ranks[0]["solo/warnings"] == [warning]
    assert (ranks[1]["solo/rank"], ranks[1]["solo/size"]) == (0, 1)
    assert ranks[1]["solo/all_reduce"] == [rank_values(1, "float64").tolist(), True]  # a group of one


def test_new_group_of_everyone_reduces_over_both_ranks(ranks):
    for r in range(WORLD):
        assert ranks[r]["everyone/all_reduce"] == reduced("SUM", inputs("float64"))
        assert ranks[r]["everyone/ranks"] == [0, 1]


def test_setup_queries(ranks):
    for r in range(WORLD):
        assert ranks[r]["initialized_before"] is False and ranks[r]["initialized"] is True
        assert (ranks[r]["world"], ranks[r]["backend"]) == (2, "mpi")


def test_use_before_init_raises_torchs_error(ranks):
    for name in ("all_reduce", "get_rank", "new_group"):
        assert ranks[0]["before"][name] == ["ValueError", NOT_INITIALIZED]


def test_use_after_destroy_raises_torchs_error(ranks):
    assert ranks[0]["initialized_after_destroy"] is False
    assert ranks[0]["after_destroy"] == ["ValueError", NOT_INITIALIZED]


def test_non_contiguous_tensor_raises_torchs_mpi_error(ranks):
    assert ranks[0]["non_contiguous"] == ["RuntimeError", "input tensor has to be contiguous"]
    assert ranks[0]["non_contiguous_broadcast"] == ["RuntimeError", "input tensor has to be contiguous"]


@pytest.mark.parametrize(
    "case, error",
    [
        ("init_twice", ["ValueError", "trying to initialize the default process group twice!"]),
        ("send_to_self", ["ValueError", "Invalid destination rank: destination rank should not be the same as the "
                                        "rank of the current process."]),
        ("all_gather_into_tensor_size",
         ["ValueError", "output tensor size must be equal to world_size times input tensor size"]),
        ("reduce_scatter_tensor_size",
         ["ValueError", "input tensor must be the same size as output size times world size"]),
        ("all_gather_list_size",
         ["RuntimeError", "All gather: number of output tensors should equal to the world size"]),
        ("band_float", ["RuntimeError", "Cannot use ReduceOp.BAND with non-integral dtype"]),
    ],
)  # fmt: skip
def test_misuse_raises_torchs_error(ranks, case, error):
    assert ranks[0][case] == error


def test_not_a_tensor_raises_type_error(ranks):
    kind, message = ranks[0]["not_a_tensor"]
    assert kind == "TypeError" and "Expected parameter `tensor` of type torch.Tensor" in message


def test_debug_mode_reports_mismatched_shapes_on_every_rank(ranks):
    for r in range(WORLD):
        kind, message = ranks[r]["debug_mismatch"]
        assert kind == "RuntimeError"
        assert message.startswith(f"Detected mismatch between collectives on ranks. Rank {r} is running collective")
        assert "TensorShape=[3]" in message and "TensorShape=[4]" in message
        assert ranks[r]["debug_match"] == [2.0, 2.0, 2.0]
