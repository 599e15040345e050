"""Importable jobs for the executor tests (``spawn`` and remote workers import jobs by name)."""

import os
import time
import uuid
from pathlib import Path

import xarray as xr


def sleepy_square(seconds: float) -> xr.Dataset:
    """Sleep, then return a Dataset (a stand-in for one training run)."""
    time.sleep(seconds)
    return xr.Dataset({"v": ((), seconds**2)})


def counted_square(job: tuple[str, float, float]) -> xr.Dataset:
    """``(folder, x, seconds)``: leave a marker ``x-<pid>-<id>`` in ``folder``, then return x².

    Each computation that starts leaves one marker, so a test counts how often a job ran (and in
    which process) across a kill, a Ctrl-C and a rerun. The job waits ``seconds``, or until a
    file ``folder/release`` exists (so a rerun need not wait out the jobs a test interrupted).
    """
    folder, x, seconds = job
    Path(folder, f"{x}-{os.getpid()}-{uuid.uuid4().hex[:8]}").touch()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not Path(folder, "release").exists():
        time.sleep(0.02)
    return xr.Dataset({"v": ((), float(x) ** 2)}, attrs={"pid": os.getpid()})


def markers(folder) -> dict[float, list[int]]:
    """``{x: [pid of each computation of job x]}`` from the markers of :func:`counted_square`."""
    out: dict[float, list[int]] = {}
    for p in Path(folder).iterdir():
        if p.name != "release":
            x, pid, _ = p.name.split("-")
            out.setdefault(float(x), []).append(int(pid))
    return out
