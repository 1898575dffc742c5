"""cuda tensors in collectives and DistributedDataParallel, under Numba's CUDA simulator on 2 ranks
(programs/cuda.py). With a real GPU the same code hands device arrays to a CUDA-aware MPI."""

import numpy as np
import pytest
from programs.mpi_common import rank_values

WORLD = 2


@pytest.fixture(scope="module")
def ranks(mpirun):
    pytest.importorskip("numba")
    run = mpirun("cuda.py", env={"NUMBA_ENABLE_CUDASIM": "1"}, timeout=300)
    assert run.returncode == 0, run.output
    return [run.rank(r) for r in range(WORLD)]


@pytest.mark.parametrize("mode", ["staged", "aware"])
def test_collectives_on_cuda_tensors(ranks, mode):
    inputs = [rank_values(r, "float32") for r in range(WORLD)]
    for r in range(WORLD):
        got = ranks[r]
        assert got[f"{mode}/all_reduce"] == ["cuda", (inputs[0] + inputs[1]).tolist()]
        assert got[f"{mode}/all_reduce_avg_int64"] == [1, -2, 2, 5, -3]  # (a + b) / 2, truncated toward zero
        assert got[f"{mode}/broadcast"] == rank_values(1, "float64").tolist()
        assert got[f"{mode}/all_gather"] == [a.tolist() for a in inputs]
        assert got[f"{mode}/all_gather_into_tensor"] == [a.tolist() for a in inputs]
        assert got[f"{mode}/scatter"] == (inputs[r] * 10).tolist()


def test_staging_through_the_host_warns_once_per_process(ranks):
    for r in range(WORLD):
        assert len(ranks[r]["warnings"]) == 1
        assert "not CUDA-aware, so cuda tensors are staged through host memory" in ranks[r]["warnings"][0]


def test_ddp_on_cuda_parameters_matches_one_cpu_process_on_the_whole_batch(ranks):
    reference = ranks[0]["ddp/reference"]
    for r in range(WORLD):
        for got, want in zip(ranks[r]["ddp/cuda"], reference):
            assert np.max(np.abs(np.array(got) - np.array(want))) <= 1e-10
