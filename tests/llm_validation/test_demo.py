"""``python -m llm_validation demo``: every step end to end (the demo's own code path at the
``tiny`` size), what it writes, where it says to look, no warnings, and a no-op rerun."""

from __future__ import annotations

import json
import re
import time
import warnings
from pathlib import Path

from llm_validation.__main__ import main
from sims.io import read_json, read_netcdf


def test_demo_runs_every_step_and_says_where_to_look(tmp_path, capsys):
    out = tmp_path / "demo"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["demo", "--size", "tiny", "--out", str(out), "--quiet"]) == 0
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []
    said = capsys.readouterr().out
    listed = dict(re.findall(r"^  (\w+) +(\S+)$", said, flags=re.M))
    assert set(listed) == {"report", "selection", "trajectory", "finetune", "evaluation",
                           "config"}  # fmt: skip
    assert all(Path(p).exists() for p in listed.values()), listed
    run = out / "run"
    stages = ["data", "proxy", "selection", "synthesis", "finetune/ft", "finetune/ft_up",
              "finetune/synth", "eval/pretrained", "eval/ft", "eval/synth"]  # fmt: skip
    for stage in stages:
        assert read_json(run / stage / "stage.json")["status"] == "success", stage
    report = (run / "report.md").read_text()
    assert "| Dataset | #Inst. | PT | FT | FT+UP | Synth. |" in report
    assert "| GSM8K | 4 |" in report
    # the proxy and the target are different from-scratch models, as in the paper
    cfg = json.loads((out / "run.json").read_text())
    assert cfg["proxy"]["model"] != cfg["finetune"]["model"]
    traj = read_netcdf(run / "proxy" / "trajectories.nc")
    assert traj.sizes["checkpoint"] == 4 and not traj["loss"].isnull().any()
    # the proxy learned: its mean loss falls over its trajectory
    assert float(traj["loss"][:, -1].mean()) < float(traj["loss"][:, 0].mean())
    up = read_netcdf(run / "finetune" / "ft_up" / "usage.nc")["count"].values
    sel = read_netcdf(run / "selection" / "selection.nc")
    assert int((up == 2).sum()) == int(sel["hard"].sum()) > 0
    t0 = time.perf_counter()
    assert main(["demo", "--size", "tiny", "--out", str(out), "--quiet"]) == 0  # resumes: no-op
    assert time.perf_counter() - t0 < 15
