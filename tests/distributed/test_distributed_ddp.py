"""DistributedDataParallel on 2 ranks (programs/ddp.py): what each rank recorded, against values computed here."""

import numpy as np
import pytest

WORLD = 2


@pytest.fixture(scope="module")
def ranks(mpirun):
    run = mpirun("ddp.py")
    assert run.returncode == 0, run.output
    return [run.rank(r) for r in range(WORLD)]


def max_difference(a: list, b: list) -> float:
    return max(float(np.max(np.abs(np.array(x) - np.array(y)))) for x, y in zip(a, b))


@pytest.mark.parametrize("case", ["sgd", "sgd_small_buckets", "adam", "sgd_progress_thread"])
def test_twenty_steps_on_two_half_batches_equal_one_process_on_the_whole_batch(ranks, case):
    reference = ranks[0][f"{case}/reference"]
    for r in range(WORLD):
        assert max_difference(ranks[r][f"{case}/trained"], reference) <= 1e-10
    assert max_difference(reference, ranks[0][f"{case}/initial"]) > 1e-3  # training moved the weights


@pytest.mark.parametrize("case", ["sgd", "sgd_small_buckets", "adam"])
def test_construction_copies_rank_0s_parameters_to_every_rank(ranks, case):
    assert max_difference(ranks[0][f"{case}/initial"], ranks[1][f"{case}/initial"]) > 1e-3  # different seeds
    for r in range(WORLD):
        assert ranks[r][f"{case}/after_construction"] == ranks[0][f"{case}/initial"]


def test_the_progress_thread_runs_only_when_asked_for(ranks):
    for r in range(WORLD):
        assert ranks[r]["sgd_progress_thread/progress_thread"] is True
        assert ranks[r]["sgd_small_buckets/progress_thread"] is False


def test_default_buckets_hold_the_whole_small_model(ranks):
    # 3*16 + 16 + 16*16 + 16 + 16*4 + 4 float64 values: under the 1 MiB first bucket
    assert ranks[0]["sgd/bucket_sizes"] == [8 * (48 + 16 + 256 + 16 + 64 + 4)]


def test_buckets_follow_reverse_parameter_order_and_close_once_past_the_cap(ranks):
    # cap 0.0005 MiB = 524 bytes, parameters taken last to first: [bias3 32 + weight3 512], [bias2 128 + weight2
    # 2048], [bias1 128 + weight1 384] (still under the cap: the leftover bucket)
    assert ranks[0]["sgd_small_buckets/bucket_sizes"] == [544, 2176, 512]


def test_all_reduce_of_earlier_buckets_starts_before_backward_reaches_the_first_layer(ranks):
    for r in range(WORLD):
        assert ranks[r]["overlap/buckets"] == 3
        assert ranks[r]["overlap/started_when_first_layer_grads_arrive"] == [2, 2]


def test_no_sync_leaves_each_ranks_gradients_local(ranks):
    for r in range(WORLD):
        assert max_difference(ranks[r]["no_sync/inside"], ranks[r]["no_sync/local_reference_inside"]) <= 1e-12
    assert max_difference(ranks[0]["no_sync/inside"], ranks[1]["no_sync/inside"]) > 1e-6


def test_the_backward_after_no_sync_averages_the_accumulated_gradients(ranks):
    local = [ranks[r]["no_sync/local_reference_all"] for r in range(WORLD)]
    expected = [(np.array(a) + np.array(b)) / 2 for a, b in zip(*local)]
    for r in range(WORLD):
        assert max_difference(ranks[r]["no_sync/after"], expected) <= 1e-12


def test_an_unused_parameter_raises_torchs_error_at_the_next_forward(ranks):
    for r in range(WORLD):
        kind, message = ranks[r]["unused/next_forward"]
        assert kind == "RuntimeError"
        assert message.startswith(
            "Expected to have finished reduction in the prior iteration before starting a new one. This error "
            "indicates that your module has parameters that were not used in producing loss. You can enable unused "
            "parameter detection by passing the keyword argument `find_unused_parameters=True`"
        )
        assert f"\nParameter indices which did not receive grad for rank {r}: 2 3 4 5\n" in message


def test_find_unused_parameters_averages_with_zeros_and_leaves_globally_unused_grads_none(ranks):
    # parameters: a.weight, a.bias, b.weight, b.bias, never.weight, never.bias; b is used on rank 0 only
    local = [ranks[r]["find_unused/local_reference"] for r in range(WORLD)]
    for r in range(WORLD):
        got = ranks[r]["find_unused/grads"]
        for i in (0, 1):
            assert max_difference([got[i]], [(np.array(local[0][i]) + np.array(local[1][i])) / 2]) <= 1e-12
        for i in (2, 3):
            assert local[1][i] is None
            assert max_difference([got[i]], [np.array(local[0][i]) / 2]) <= 1e-12
        assert got[4] is None and got[5] is None
        assert ranks[r]["find_unused/second_iteration_a_grad"] is True


def test_a_gradient_for_a_parameter_found_unused_raises_marked_twice(ranks):
    kind, message = ranks[0]["marked_twice"]
    assert kind == "RuntimeError"
    assert message.startswith("Expected to mark a variable ready only once.")
    assert "Parameter at index 2 has been marked as ready twice." in message
    assert "3) Incorrect unused parameter detection." in message


def test_buffers_come_from_rank_0_at_construction_and_before_each_forward(ranks):
    for r in range(WORLD):
        assert ranks[r]["buffers/after_construction"] == [0.0, 0.0]
        assert ranks[r]["buffers/after_forward"] == [0.0, 0.0]


def test_different_parameter_shapes_raise_on_every_rank(ranks):
    assert ranks[1]["shape_mismatch"] == [
        "RuntimeError",
        "[1]: params[0] in this process with sizes [5, 3] appears not to match sizes of the same param in process 0.",
    ]
    assert ranks[0]["shape_mismatch"] == [
        "RuntimeError",
        "DDP expects same model across all ranks, but the parameter shapes of rank(s) 1 do not match process 0's.",
    ]


def test_different_parameter_counts_raise_torchs_error(ranks):
    assert ranks[0]["count_mismatch"] == [
        "RuntimeError",
        "DDP expects same model across all ranks, but Rank 0 has 2 params, while rank 1 has inconsistent 1 params.",
    ]
    assert ranks[1]["count_mismatch"] == [
        "RuntimeError",
        "DDP expects same model across all ranks, but Rank 1 has 1 params, while rank 0 has inconsistent 2 params.",
    ]


def test_a_module_without_trainable_parameters_raises(ranks):
    assert ranks[0]["no_parameters"] == [
        "RuntimeError",
        "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient.",
    ]


def test_state_dict_keys_carry_the_module_prefix_as_torchs(ranks):
    assert ranks[0]["state_dict_keys"] == ["module.0.weight", "module.0.bias"]
    assert ranks[0]["load_state_dict"] == "<All keys matched successfully>"
