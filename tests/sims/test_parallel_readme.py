"""The README's cluster commands, run as written: Dask (dask-local:2) and SLURM (as local jobs).

Both run the same Markov sweep (Figure 5, quick) in worker processes of two different engines;
their results must be equal, value for value.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

pytest.importorskip("distributed", reason="needs the `cluster` extra")
pytest.importorskip("submitit", reason="needs the `cluster` extra")
pytest.importorskip("torch", reason="the Markov figures need the `torch` extra")

REPO = Path(__file__).resolve().parents[2]
DASK = "python -m figures --only markov_fig5 --quick --executor dask-local:2"
SLURM = (
    "SBT_EXECUTOR=slurm SBT_SLURM_PARTITION=cpu SBT_SLURM_TIME=30 "
    "python -m figures --only markov_fig5 --quick"
)


def _run(command: str, tmp: Path, **env: str) -> xr.Dataset:
    words = shlex.split(command)
    assigns = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    argv = [sys.executable, *words[len(assigns) + 1 :], "--out", str(tmp / "out"),
            "--results", str(tmp / "results")]  # fmt: skip
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg", **assigns, **env}
    full_env.pop("SBT_WORKERS", None)  # the test suite's in-process default
    r = subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp / "out" / "markov_fig5_quick.png").stat().st_size > 0
    return xr.load_dataset(tmp / "results" / "markov" / "quick" / "fig5_datasize.nc")


@pytest.mark.slow
def test_readme_dask_and_slurm_commands_agree(tmp_path):
    readme = (REPO / "README.md").read_text()
    assert DASK in readme and SLURM in readme
    a = _run(DASK, tmp_path / "dask")
    b = _run(SLURM, tmp_path / "slurm", SBT_SLURM_CLUSTER="local",
             SBT_SLURM_FOLDER=str(tmp_path / "jobs"))  # fmt: skip
    assert len(list((tmp_path / "jobs").glob("*_log.out"))) == a.sizes["seed"] * a.sizes["size"]
    xr.testing.assert_equal(a, b)  # exact: every value of both sweeps
    assert a["kl_context"].size >= 18 and float(a["kl_context"].std()) > 0  # real numbers
