"""A rank that raises ends the whole job (programs/failure.py): without the abort the other rank would wait in its
collective forever."""

TIMEOUT = 60


def test_an_exception_on_one_rank_ends_the_job_with_its_traceback(mpirun):
    run = mpirun("failure.py", timeout=TIMEOUT)  # subprocess raises TimeoutExpired if the job hangs
    assert run.returncode != 0
    assert "[rank1]: ValueError: boom on rank 1" in run.output
    assert "[rank1]: Traceback (most recent call last):" in run.output
    assert "rank 0 finished" not in run.output
    assert run.seconds < TIMEOUT / 2
