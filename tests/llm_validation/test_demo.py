"""``python -m llm_validation demo``: every step end to end (the demo's own code path at the
``tiny`` size), what it writes, where it says to look, no warnings, and a no-op rerun."""

from __future__ import annotations

import json
import re
import time
import warnings
from pathlib import Path

from llm_validation.__main__ import main
from sims.runtime.io import read_json, read_netcdf


def test_demo_runs_every_step_and_says_where_to_look(tmp_path, monkeypatch, capsys):
    """As the README types it: a relative --out (it was joined twice, issue 31 row 1)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "demo"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["demo", "--size", "tiny", "--out", "demo"]) == 0
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []
    said, progress = capsys.readouterr()
    listed = dict(re.findall(r"^  (\w+) +(\S+)$", said, flags=re.M))
    assert set(listed) == {"report", "selection", "trajectory", "finetune", "evaluation",
                           "config"}  # fmt: skip
    assert all(Path(p).exists() and not Path(p).is_absolute() for p in listed.values()), listed
    assert listed["report"] == "demo/run/report.md"  # as typed, from the current folder
    # a report, not raw HF Trainer dicts ({'loss': ..., 'train_runtime': ...})
    assert "{'" not in said + progress and "train_runtime" not in said + progress
    assert "finetune[ft]:" in said and "select:" in said
    run = out / "run"
    stages = ["data", "proxy", "selection", "synthesis", "finetune/ft", "finetune/ft_up",
              "finetune/synth", "eval/pretrained", "eval/ft", "eval/synth"]  # fmt: skip
    for stage in stages:
        assert read_json(run / stage / "stage.json")["status"] == "success", stage
    report = (run / "report.md").read_text()
    assert "| Dataset | #Inst. | PT | FT | FT+UP | Synth. |" in report
    assert "| GSM8K | 4 |" in report
    synth = read_json(run / "synthesis" / "stage.json")["summary"]
    if synth["kept_after_recluster"] == 0:  # the from-scratch target cannot follow the prompt
        assert (f"Synthesis: 0 of {synth['attempted']} rephrasings accepted" in report
                and "trained on the same data as FT" in report)  # fmt: skip
    for row in report.splitlines():  # "best" marks only where one column is better
        cells = [c.strip().strip("*") for c in row.split("|")[3:-1]]
        if row.startswith("| ") and cells and len(set(cells)) == 1:
            assert "**" not in row, row
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
    # the selection figure draws every source (13; max_sources=12 dropped one)
    drawn = _selection_axes(run, monkeypatch)
    assert sorted(drawn) == sorted(sel.attrs["per_source"]) and len(drawn) == 13
    assert "accuracy near 0 % is expected here" in said  # the tiny models score ~0
    t0 = time.perf_counter()
    assert main(["demo", "--size", "tiny", "--out", str(out)]) == 0  # resumes: no-op
    assert time.perf_counter() - t0 < 15
    again = capsys.readouterr().out
    assert "reusing the target model" in again and "reusing the proxy model" in again
    assert "model from scratch" not in again
    # the default size into the same folder reused the tiny corpus: refused, nothing changed
    before = sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*"))
    assert main(["demo", "--out", str(out), "--quiet"]) == 2
    assert "holds a demo of another size (python -m llm_validation demo --size tiny)" in (
        capsys.readouterr().err)  # fmt: skip
    assert sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*")) == before


def _selection_axes(run: Path, monkeypatch) -> list[str]:
    """The titles of the panels ``plot_selection`` draws for the demo's selection."""
    from llm_validation.select import clustering as selection

    titles = []

    def keep(fig, path):
        titles.extend(ax.get_title() for ax in fig.axes if ax.axison and ax.get_title())
        import matplotlib.pyplot as plt

        plt.close(fig)
        return path

    monkeypatch.setattr(selection, "save_plot", keep)
    traj = read_netcdf(run / "proxy" / "trajectories.nc")
    sel = read_netcdf(run / "selection" / "selection.nc")
    selection.plot_selection(traj, sel, run / "unused.png")
    full = list(sel.attrs["per_source"])
    return [next(n for n in full if n == t or n.endswith(t.removeprefix("..."))) for t in titles]


def test_the_accuracy_table_marks_no_best_on_a_tie():
    """The demo bolded every cell of all-zero rows as "best"."""
    from llm_validation.evaluate.generation import accuracy_table

    t = accuracy_table({"PT": {"gsm8k": 0.0, "math": 0.2}, "FT": {"gsm8k": 0.0, "math": 0.5}},
                       sizes={"gsm8k": 4, "math": 4})  # fmt: skip
    rows = t.splitlines()
    assert rows[2] == "| GSM8K | 4 | 0.0 | 0.0 |"
    assert rows[3] == "| MATH | 4 | 20.0 | **50.0** |"
    assert rows[4] == "| Avg. | 4 | 10.0 | **25.0** |"


def test_the_rerun_line_is_safe_to_copy_with_a_space_in_the_path(tmp_path, monkeypatch, capsys):
    """The printed "rerun one step" command, split as a shell would, names the real config."""
    import shlex

    from llm_validation.experiments import demo

    out = tmp_path / "my demo"
    paths = {k: out / k for k in ("report", "selection", "trajectory", "finetune", "evaluation")}
    paths["config"] = out / "run.json"
    monkeypatch.setattr(demo, "run_demo", lambda *a, **k: paths)
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--size", "tiny", "--out", str(out)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("rerun"))
    words = shlex.split(line.split(": ", 1)[1])
    assert words[-2:] == ["--config", "my demo/run.json"]
