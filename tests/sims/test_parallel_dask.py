"""pmap on a real Dask LocalCluster (2 worker processes): equal results, a killed worker, Ctrl-C.

One cluster serves the module (its start-up costs seconds): it is the one ``dask-local:2``
starts, and ``dask://HOST:PORT`` reaches the same scheduler through a second client.
"""

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("distributed", reason="needs the `cluster` extra")

from sims.runtime import executors  # noqa: E402
from sims.runtime.executors import ExecutorSpec, parse_executor  # noqa: E402
from sims.runtime.parallel import JobStore, pmap  # noqa: E402
from tests.sims.parallel_jobs import counted_square, markers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LOCAL2 = ExecutorSpec("dask-local", n_workers=2)


@pytest.fixture(scope="module")
def client():
    """The ``dask-local:2`` cluster's client; closed after the module."""
    c = executors._dask_client(LOCAL2)
    yield c
    for spec in list(executors._DASK):
        executors._close_dask(spec)


@pytest.fixture
def two_workers(client):
    """The worker pids, once both workers are up (a killed one is restarted by its nanny)."""
    client.wait_for_workers(2, timeout=60)
    return set(client.run(os.getpid).values())


def _address(client) -> str:
    return client.scheduler.address.removeprefix("tcp://")


def test_dask_sweep_equals_the_in_process_sweep_bit_for_bit(two_workers):
    from sims.markov.tensor_dynamics import FlowConfig, discrete_flow

    # whole SAM trajectories of the tensor loss (floats at every recorded step), 4 seeds
    fn = functools.partial(discrete_flow, method="sam", lr=0.1, rho=0.05, steps=3000,
                           record_every=25)  # fmt: skip
    cfgs = [FlowConfig(T=20, init_std=1e-6, seed=s) for s in range(4)]
    here = pmap(fn, cfgs, workers=1)
    there = pmap(fn, cfgs, executor="dask-local:2")
    for a, b in zip(here, there, strict=True):
        xr.testing.assert_identical(a, b)
        assert a["loss"].size > 100 and np.ptp(a["loss"].values) > 0  # not a constant


def test_jobs_run_in_the_worker_processes(two_workers, client, tmp_path, monkeypatch):
    # $SBT_EXECUTOR = dask://HOST:PORT: the module's scheduler, reached as a running cluster
    monkeypatch.setenv("SBT_EXECUTOR", f"dask://{_address(client)}")
    out = pmap(counted_square, [(str(tmp_path), x, 0.0) for x in range(6)])
    assert [float(d.v) for d in out] == [x**2 for x in range(6)]
    pids = {d.attrs["pid"] for d in out}
    assert pids <= two_workers and os.getpid() not in pids
    assert ExecutorSpec("dask", address=_address(client)) in executors._DASK
    import dask

    # our clients leave dask's default scheduler alone (xarray/dask code of the caller)
    assert dask.config.get("scheduler", None) is None


def test_a_failing_job_is_named_and_the_cluster_stays_up(client):
    import math

    with pytest.raises(RuntimeError, match=r"job 1 \(-1\) failed.*ValueError"):
        pmap(math.sqrt, [4.0, -1, 9.0], executor=client)  # a Client passed in code
    assert pmap(math.sqrt, [4.0, 9.0], executor=client) == [2.0, 3.0]


def test_a_killed_worker_loses_only_its_running_job(two_workers, tmp_path):
    marks, store = tmp_path / "m", JobStore(tmp_path / "parts")
    marks.mkdir()
    jobs = [(str(marks), 0, 2.5)] + [(str(marks), x, 0.3) for x in range(1, 7)]
    killed = []

    def kill_the_worker_of_job_0():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and 0.0 not in markers(marks):
            time.sleep(0.02)
        time.sleep(1.0)  # job 0 is running, and results finished before it were fetched
        pid = markers(marks)[0.0][0]
        assert pid in two_workers and pid != os.getpid()  # a worker, never the client
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_the_worker_of_job_0)
    killer.start()
    out = pmap(counted_square, jobs, executor="dask-local:2", store=store)
    killer.join()
    assert [float(d.v) for d in out] == [x**2 for x in range(7)]
    ran = markers(marks)
    assert len(ran[0.0]) == 2 and killed[0] in ran[0.0]  # computed again, elsewhere:
    assert out[0].attrs["pid"] in ran[0.0] and out[0].attrs["pid"] != killed[0]
    assert all(len(ran[float(x)]) == 1 for x in range(1, 7))  # nothing else ran twice
    assert all(store.load(j) is not None for j in jobs)


def test_ctrl_c_then_rerun_recomputes_nothing_finished(two_workers, tmp_path):
    marks, parts = tmp_path / "m", tmp_path / "parts"
    marks.mkdir()
    script = f"""
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, however pytest runs
from sims.runtime.cli import run_cli
from sims.runtime.parallel import JobStore, pmap
from tests.sims.parallel_jobs import counted_square
def main(argv):
    jobs = [({str(marks)!r}, x, 0.0 if x < 2 else 600.0) for x in range(4)]
    pmap(counted_square, jobs, store=JobStore({str(parts)!r}))
    return 0
if __name__ == "__main__":
    sys.exit(run_cli(main, prog="sweep"))
"""
    (tmp_path / "sweep.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SBT_EXECUTOR": "dask-local:2"}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "sweep.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        len(list(parts.glob("job-*.nc"))) < 2 or len(markers(marks)) < 4
    ):
        time.sleep(0.1)
    time.sleep(0.3)  # jobs 2 and 3 run on the two workers
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30  # the 600 s jobs were stopped, not awaited
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    assert "interrupted: 2 of 4 jobs finished and saved in" in err and "rerun" in err
    assert len(list(parts.glob("job-*.nc"))) == 2
    # the rerun (on the module's cluster) computes jobs 2 and 3 only
    (marks / "release").touch()
    jobs = [(str(marks), x, 0.0 if x < 2 else 600.0) for x in range(4)]
    out = pmap(counted_square, jobs, executor="dask-local:2", store=JobStore(parts))
    assert [float(d.v) for d in out] == [0.0, 1.0, 4.0, 9.0]
    ran = markers(marks)
    assert [len(ran[float(x)]) for x in range(4)] == [1, 1, 2, 2]


def test_dask_specs_parse():
    assert parse_executor("dask-local") == ExecutorSpec("dask-local")
    assert parse_executor(" dask-local:3 ") == ExecutorSpec("dask-local", n_workers=3)
    assert parse_executor("dask://10.0.0.5:8786").address == "10.0.0.5:8786"
    assert str(parse_executor("dask://[::1]:8786")) == "dask://[::1]:8786"


# --------------------------------------------------------------------------- checked before work


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args, env=None, cwd=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


@pytest.fixture
def scheduler():
    """A real ``dask scheduler`` with no worker: ``(address, port)``; stopped afterwards."""
    port = _free_port()
    proc = _start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                   "--dashboard-address", ":0"])  # fmt: skip
    address = f"127.0.0.1:{port}"
    import socket

    deadline = time.monotonic() + 60
    while True:  # wait until it listens
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert proc.poll() is None and time.monotonic() < deadline, "the scheduler did not start"
        time.sleep(0.2)
    yield address
    proc.terminate()
    proc.wait(timeout=30)
    for spec in [s for s in executors._DASK if s.address == address]:
        executors._close_dask(spec)


def _worker(address: str, pythonpath: str, cwd: Path) -> subprocess.Popen:
    """A ``dask worker`` importing the project from ``pythonpath`` (``cwd``: not a checkout,
    as ``python -m`` puts the working folder first on ``sys.path``)."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    return _start(["distributed.cli.dask_worker", f"tcp://{address}", "--nthreads", "1",
                   "--nworkers", "1", "--no-dashboard"], env, cwd)  # fmt: skip


def test_a_scheduler_without_workers_is_refused_after_the_stated_timeout(scheduler, monkeypatch):
    """It hung silently (issue 31 row 6); now a usage error naming the wait and the fix."""
    monkeypatch.setattr(executors, "DASK_TIMEOUT", 2.0)
    t0 = time.monotonic()
    with pytest.raises(executors.UsageError) as exc:
        executors.check_executor(parse_executor(f"dask://{scheduler}"))
    assert time.monotonic() - t0 < 30
    assert str(exc.value) == (
        f"executor dask://{scheduler}: the scheduler has no worker after 2 s; start one with "
        f"`dask worker {scheduler} --nthreads 1`"
    )
    assert not [s for s in executors._DASK if s.address == scheduler]  # no client kept


def test_an_unreachable_scheduler_is_one_line_from_the_cli(monkeypatch, capsys, tmp_path):
    """``figures --executor dask://...`` wrote nothing and failed after 10 s on the bar's line."""
    from figures.__main__ import main

    monkeypatch.setattr(executors, "DASK_TIMEOUT", 0.5)
    address = f"127.0.0.1:{_free_port()}"
    with pytest.raises(SystemExit) as exc:
        main(["--only", "markov_fig5", "--quick", "--executor", f"dask://{address}",
              "--out", str(tmp_path / "o"), "--results", str(tmp_path / "r")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"dask://{address}: no Dask scheduler answered within 0.5 s" in err
    assert not list(tmp_path.iterdir())


def test_a_worker_running_another_version_of_the_package_is_refused(scheduler, tmp_path,
                                                                    monkeypatch):  # fmt: skip
    """A worker importing a changed copy of ``sims`` computed other numbers silently (issue 31).

    A real worker process is started with ``PYTHONPATH`` pointing at a copy of the package
    with one changed line: the check before work names both source hashes and folders; a job
    shipped to it (as a worker joining later would get) fails with the same message.
    """
    import shutil

    copy = tmp_path / "other_checkout"
    shutil.copytree(REPO / "sims", copy / "sims", ignore=shutil.ignore_patterns("__pycache__"))
    entropy = copy / "sims" / "entropy.py"
    entropy.write_text(entropy.read_text() + "\n# a changed line\n")
    worker = _worker(scheduler, f"{copy}{os.pathsep}{REPO}", tmp_path)
    try:
        from distributed import Client

        with Client(f"tcp://{scheduler}", timeout=30) as c:  # the worker is up
            c.wait_for_workers(1, timeout=60)
            theirs = next(iter(c.run(executors.source_fingerprint).values()))
        mine = executors.source_fingerprint()
        assert theirs[1] == str(copy) and mine[1] == str(REPO) and theirs[0] != mine[0]
        monkeypatch.setattr(executors, "DASK_TIMEOUT", 30.0)
        with pytest.raises(executors.SourceMismatch) as exc:
            executors.check_executor(parse_executor(f"dask://{scheduler}"))
        msg = str(exc.value)
        assert f"(source {theirs[0]} in {copy})" in msg and f"(source {mine[0]} in {REPO})" in msg
        # the same check runs with every job: pmap on a client whose worker has the copy
        with Client(f"tcp://{scheduler}", timeout=30, set_as_default=False) as c:
            with pytest.raises(executors.SourceMismatch, match=f"source {theirs[0]} in {copy}"):
                pmap(counted_square, [(str(tmp_path), x, 0.0) for x in range(2)], executor=c)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_the_same_source_passes_and_the_executor_is_in_the_provenance(scheduler, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    """A worker of this checkout passes; results record ``executor: dask://HOST:PORT``."""
    from sims.runtime.io import provenance

    worker = _worker(scheduler, str(REPO), tmp_path)
    try:
        monkeypatch.setattr(executors, "DASK_TIMEOUT", 60.0)
        spec = executors.check_executor(parse_executor(f"dask://{scheduler}"))
        executors.use_executor(spec)
        out = pmap(counted_square, [(str(tmp_path), x, 0.0) for x in range(3)])
        assert [float(d.v) for d in out] == [0.0, 1.0, 4.0]
        assert provenance()["executor"] == f"dask://{scheduler}"
    finally:
        executors.use_executor(None)
        worker.terminate()
        worker.wait(timeout=30)
    assert provenance()["executor"] == "processes"
