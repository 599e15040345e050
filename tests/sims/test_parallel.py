"""sims.runtime.parallel.pmap: a serial map's results, in order; errors name the failing item."""

import math

import pytest

from sims.runtime.cli import UsageError
from sims.runtime.parallel import (
    JobStore,
    SweepInterrupted,
    check_workers_env,
    default_workers,
    pmap,
)


def test_serial_and_process_pool_agree_in_order():
    items = [5, 0, 3, 12, 1]
    expect = [math.factorial(x) for x in items]
    assert pmap(math.factorial, items, workers=1) == expect
    assert pmap(math.factorial, items, workers=2) == expect  # spawn pool, completion order varies


def test_failure_names_the_item():
    with pytest.raises(RuntimeError, match=r"job 1 \(-1\) failed.*ValueError"):
        pmap(math.sqrt, [4.0, -1, 9.0], workers=2)
    with pytest.raises(ValueError, match="math domain"):  # serial path: the original error
        pmap(math.sqrt, [-1.0], workers=1)


def test_workers_validation_and_env(monkeypatch):
    with pytest.raises(ValueError, match="`workers`"):
        pmap(abs, [1], workers=0)
    monkeypatch.setenv("SBT_WORKERS", "3")
    assert default_workers(10) == 3
    assert default_workers(2) == 2
    monkeypatch.setenv("SBT_WORKERS", "two")
    with pytest.raises(UsageError, match="SBT_WORKERS='two' must be a positive integer"):
        default_workers(4)
    monkeypatch.setenv("SBT_WORKERS", "0")
    with pytest.raises(ValueError, match="SBT_WORKERS='0'"):  # a UsageError is a ValueError
        check_workers_env()


def _ds(x):
    import xarray as xr

    return xr.Dataset({"v": ((), float(x) ** 2)}, attrs={"x": x})


class _Crash(BaseException):
    """Stands for a kill or Ctrl-C (not an ``Exception``)."""


def test_store_resumes_after_a_crash(tmp_path):
    from sims.runtime.parallel import JobStore

    store = JobStore(tmp_path / "parts")
    calls, crash = [], [True]

    def flaky(x):
        calls.append(x)
        if x == 3 and crash[0]:
            raise _Crash  # the sweep dies at the third job
        return _ds(x)

    with pytest.raises(_Crash):
        pmap(flaky, [1, 2, 3, 4], workers=1, store=store)
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(
        store.path(x).name for x in (1, 2)
    )
    calls.clear()
    crash[0] = False
    out = pmap(flaky, [1, 2, 3, 4], workers=1, store=store)
    assert calls == [3, 4]  # only the unfinished jobs ran again
    assert [float(d.v) for d in out] == [1.0, 4.0, 9.0, 16.0]
    assert out[0].attrs["x"] == 1  # loaded back from disk
    store.clear()
    assert not store.directory.exists()


def test_store_keeps_only_datasets(tmp_path):
    from sims.runtime.parallel import JobStore

    with pytest.raises(TypeError, match="xarray.Dataset"):
        pmap(abs, [-2], workers=1, store=JobStore(tmp_path))


def test_truncated_part_file_is_recomputed(tmp_path, capsys):
    store = JobStore(tmp_path / "parts")
    pmap(_ds, [1, 2], workers=1, store=store)
    p = store.path(2)
    p.write_bytes(p.read_bytes()[:100])  # e.g. the disk filled up during a copy
    calls = []

    def count(x):
        calls.append(x)
        return _ds(x)

    out = pmap(count, [1, 2], workers=1, store=store)
    assert calls == [2] and [float(d.v) for d in out] == [1.0, 4.0]
    assert "is unreadable" in capsys.readouterr().err
    assert float(store.load(2).v) == 4.0  # rewritten whole


def test_serial_ctrl_c_says_what_was_saved(tmp_path):
    store = JobStore(tmp_path / "parts")

    def fn(x):
        if x == 3:
            raise KeyboardInterrupt
        return _ds(x)

    with pytest.raises(SweepInterrupted, match=r"2 of 4 jobs finished and saved in .*parts; rerun"):
        pmap(fn, [1, 2, 3, 4], workers=1, store=store)
    assert isinstance(SweepInterrupted("x"), KeyboardInterrupt)


def _sweep_cli_with_two_running_jobs(tmp_path):
    """A CLI (``run_cli``) running a 4-job pool sweep, returned once 2 jobs are saved and the two
    60 s jobs are running; its own session, so its whole process group can be inspected."""
    import os
    import subprocess
    import sys
    import time

    script = f"""
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, however pytest runs
from sims.runtime.cli import run_cli
from sims.runtime.parallel import JobStore, pmap
from tests.sims.parallel_jobs import sleepy_square
def main(argv):
    out = pmap(sleepy_square, [0.0, 0.01, 60.0, 60.0], workers=2,
               store=JobStore({str(tmp_path / "parts")!r}))
    print("done", [float(d.v) for d in out])
    return 0
sys.exit(run_cli(main, prog="sweep"))
"""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": repo}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=repo,
                            start_new_session=True)  # fmt: skip
    parts = tmp_path / "parts"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(parts.glob("job-*.nc"))) < 2:
        time.sleep(0.2)
    time.sleep(1.0)  # both 60 s jobs are running now
    return proc, parts


def test_ctrl_c_in_a_process_pool_stops_workers_and_keeps_finished_jobs(tmp_path):
    import os
    import signal
    import time

    proc, parts = _sweep_cli_with_two_running_jobs(tmp_path)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30  # the running 60 s jobs were stopped, not awaited
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    assert "interrupted: 2 of 4 jobs finished and saved in" in err and "rerun" in err
    assert len(list(parts.glob("job-*.nc"))) == 2


def test_sigterm_to_the_parent_stops_the_workers_too(tmp_path):
    """`kill PID` of a sweep's CLI (the parent only) must not leave its pool workers computing
    on as orphans (they kept writing into the run folder): status 143, one line, nothing left."""
    import contextlib
    import os
    import signal
    import time

    proc, _ = _sweep_cli_with_two_running_jobs(tmp_path)
    os.kill(proc.pid, signal.SIGTERM)  # the parent only, as `kill PID` does
    try:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        assert "Traceback" not in err and err.strip().count("\n") == 0, err
        assert "2 of 4 jobs finished and saved in" in err
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)  # any process of the sweep's session still alive?
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("a worker outlived its parent's SIGTERM")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # leave nothing behind, pass or fail
