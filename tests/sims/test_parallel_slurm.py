"""pmap on ``slurm`` through submitit's local executor (``SBT_SLURM_CLUSTER=local``).

The same job files, pickles and polling as on a SLURM queue, with each job a local process.
"""

import math
import os
import signal
import threading
import time

import pytest

pytest.importorskip("submitit", reason="needs the `cluster` extra")

from sims.runtime.parallel import JobStore, pmap  # noqa: E402
from tests.sims.parallel_jobs import counted_square, markers  # noqa: E402


@pytest.fixture
def slurm_local(tmp_path, monkeypatch):
    """``SBT_EXECUTOR=slurm`` with local jobs; the job files go under ``tmp_path/jobs``."""
    monkeypatch.setenv("SBT_EXECUTOR", "slurm")
    monkeypatch.setenv("SBT_SLURM_CLUSTER", "local")
    monkeypatch.setenv("SBT_SLURM_FOLDER", str(tmp_path / "jobs"))
    monkeypatch.setenv("SBT_SLURM_TIME", "00:05:00")
    return tmp_path / "jobs"


def test_slurm_sweep_runs_jobs_elsewhere_and_resumes(slurm_local, tmp_path):
    marks, store = tmp_path / "m", JobStore(tmp_path / "parts")
    marks.mkdir()
    jobs = [(str(marks), x, 0.0) for x in range(3)]
    out = pmap(counted_square, jobs, store=store)
    assert [float(d.v) for d in out] == [0.0, 1.0, 4.0]
    pids = {d.attrs["pid"] for d in out}
    assert len(pids) == 3 and os.getpid() not in pids  # one process per job
    assert len(list(slurm_local.glob("*_log.out"))) == 3  # submitit's job logs
    again = pmap(counted_square, jobs, store=store)  # the rerun loads every job
    assert [float(d.v) for d in again] == [0.0, 1.0, 4.0]
    assert [len(markers(marks)[float(x)]) for x in range(3)] == [1, 1, 1]


def test_a_killed_slurm_job_is_submitted_again(slurm_local, tmp_path):
    marks = tmp_path / "m"
    marks.mkdir()
    killed = []

    def kill_job_10():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and 10.0 not in markers(marks):
            time.sleep(0.02)
        pid = markers(marks)[10.0][0]
        assert pid != os.getpid()
        os.kill(pid, signal.SIGKILL)  # as when its node is lost
        killed.append(pid)

    killer = threading.Thread(target=kill_job_10)
    killer.start()
    out = pmap(counted_square, [(str(marks), 10, 2.0), (str(marks), 11, 0.0)])
    killer.join()
    assert [float(d.v) for d in out] == [100.0, 121.0]
    ran = markers(marks)
    assert len(ran[10.0]) == 2 and killed[0] in ran[10.0] and out[0].attrs["pid"] != killed[0]
    assert len(ran[11.0]) == 1


def test_a_failing_slurm_job_is_named_with_its_error_and_log(slurm_local):
    with pytest.raises(RuntimeError, match=r"job 1 \(-1\.0\) failed: .*math domain error.*log: "):
        pmap(math.sqrt, [4.0, -1.0])
