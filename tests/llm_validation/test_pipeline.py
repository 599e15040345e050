"""The CLI end to end on a tiny model: every stage, every setting, resume, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from llm_validation.__main__ import main
from llm_validation.scoring import is_correct
from sims.io import read_json, read_netcdf
from tests.core_only import run_core_only

SETTINGS = ["ft", "ft_up", "random", "easy", "synth", "both"]


def _config(root: Path, model: Path, **over) -> Path:
    cfg = {
        "run_dir": str(root / "run"),
        "data": {"train_file": "MathInstruct.json", "benchmark_dir": "dataset",
                 "max_length": 96},
        "proxy": {"model": str(model), "batch_size": 8, "per_device_batch_size": 8,
                  "epoch_fraction": 1.0, "schedule_epochs": 1.0, "n_checkpoints": 3, "lr": 0.01},
        "selection": {"small_sources": "none"},
        "finetune": {"model": str(model), "settings": SETTINGS, "batch_size": 8,
                     "per_device_batch_size": 8, "epochs": 1, "lr": 0.01, "lora_rank": 4,
                     "lora_alpha": 8},
        "synthesis": {"model": str(model), "max_new_tokens": 8},
        "evaluate": {"max_new_tokens": 12, "batch_size": 8},
    }  # fmt: skip
    for key, value in over.items():
        section, name = key.split(".")
        cfg[section][name] = value
    path = root / "run.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, data_files, tiny_model_dir):
    root = tmp_path_factory.mktemp("pipe")
    train, bench = data_files
    shutil.copy(train, root / "MathInstruct.json")
    shutil.copytree(bench, root / "dataset")
    return root


@pytest.fixture(scope="module")
def finished_run(workdir, tiny_model_dir):
    """``run-all`` once (synthesis generations replaced by canned rephrasings)."""
    from llm_validation import synthesis

    real = synthesis.synthesize

    def canned(examples, model, tok, **kw):
        res = real(examples, model, tok, **kw)  # runs the real generation (tiny model: garbage)
        comps = tuple(f"<question>Variant of: {e.instruction}</question>" if i % 2 == 0 else c
                      for i, (e, c) in enumerate(zip(examples, res.completions, strict=True)))
        accepted = [synthesis.Example(f"Variant of: {e.instruction}", e.output, e.source, e.index)
                    for i, e in enumerate(examples) if i % 2 == 0]  # fmt: skip
        return synthesis.SynthesisResult(tuple(accepted), {"no_question_tag": len(examples)
                                                           - len(accepted)},
                                         len(examples), comps)  # fmt: skip

    mp = pytest.MonkeyPatch()
    mp.setattr(synthesis, "synthesize", canned)
    cfg = _config(workdir, tiny_model_dir)
    t0 = time.perf_counter()
    try:
        assert main(["run-all", "--config", str(cfg), "--quiet"]) == 0
    finally:
        mp.undo()
    return cfg, workdir / "run", time.perf_counter() - t0


def test_run_all_writes_every_artifact(finished_run):
    cfg, run, seconds = finished_run
    print(f"\nrun-all on the tiny model took {seconds:.1f} s (load {os.getloadavg()})")
    for rel in ["data/split.json", "proxy/trajectories.nc", "selection/selection.nc",
                "selection/report.md", "selection/selection.png", "synthesis/synthetic.jsonl",
                "report.md", *[f"finetune/{s}/final/adapter_model.safetensors" for s in SETTINGS],
                *[f"eval/{s}/scores.json" for s in ["pretrained", *SETTINGS]]]:  # fmt: skip
        assert (run / rel).exists(), rel
    for stage in ["data", "proxy", "selection", "synthesis", "finetune/ft_up", "eval/both"]:
        meta = read_json(run / stage / "stage.json")
        assert meta["status"] == "success" and meta["meta"]["git_commit"] is not None


def test_selection_and_training_sets_are_consistent(finished_run):
    _, run, _ = finished_run
    split = read_json(run / "data" / "split.json")
    sel = read_netcdf(run / "selection" / "selection.nc")
    traj = read_netcdf(run / "proxy" / "trajectories.nc")
    n, hard = split["n_train"], int(sel["hard"].sum())
    assert sel["example"].values.tolist() == split["train_index"] == traj["example"].values.tolist()
    assert 0 < hard < n
    assert int(sel["random"].sum()) == hard and int(sel["easy"].sum()) == hard
    assert not (sel["easy"].values & sel["hard"].values).any()
    # the hard cluster has the higher mean loss inside every source
    src = sel["source"].values.astype(str)
    loss = traj["loss"].values.mean(axis=1)
    for s in set(src):
        m = src == s
        assert loss[m & sel["hard"].values].mean() > loss[m & ~sel["hard"].values].mean()
    n_synth = len((run / "synthesis" / "synthetic.jsonl").read_text().splitlines())
    assert n_synth == (hard + 1) // 2  # the canned generator accepts every other one
    sizes = {s: read_json(run / "finetune" / s / "stage.json")["summary"]["n_train"]
             for s in SETTINGS}  # fmt: skip
    assert sizes == {"ft": n, "ft_up": n + hard, "random": n + hard, "easy": n + hard,
                     "synth": n + n_synth, "both": n + hard + n_synth}  # fmt: skip


def test_scores_agree_with_predictions(finished_run):
    _, run, _ = finished_run
    for name in ["pretrained", "ft_up"]:
        scores = read_json(run / "eval" / name / "scores.json")["scores"]
        for bench, s in scores.items():
            rows = [json.loads(x) for x in (run / "eval" / name / f"{bench}.jsonl").open()]
            assert len(rows) == s["n"] == 6
            assert sum(r["correct"] for r in rows) == s["correct"]
            assert all(r["correct"] == is_correct(bench, r["prediction"], r["gold"]) for r in rows)
    report = (run / "report.md").read_text()
    assert "| Dataset | #Inst. | PT | FT | FT+UP | Rand. | Easy | Synth. | Both |" in report
    assert "| GSM8K | 6 |" in report and "| **all** |" in report


def test_rerun_is_a_noop_and_other_config_is_refused(finished_run, workdir, tiny_model_dir,
                                                     capsys):  # fmt: skip
    cfg, run, _ = finished_run
    stamp = (run / "finetune" / "ft" / "stage.json").stat().st_mtime_ns
    t0 = time.perf_counter()
    assert main(["run-all", "--config", str(cfg), "--quiet"]) == 0
    assert time.perf_counter() - t0 < 30
    assert (run / "finetune" / "ft" / "stage.json").stat().st_mtime_ns == stamp
    other = _config(workdir, tiny_model_dir, **{"proxy.lr": 0.02})
    before = (run / "proxy" / "trajectories.nc").read_bytes()
    assert main(["proxy", "--config", str(other), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "another config" in err and "'proxy'" in err
    assert (run / "proxy" / "trajectories.nc").read_bytes() == before


def test_dry_run_prints_the_plan(workdir, tiny_model_dir, capsys):
    cfg = _config(workdir, tiny_model_dir)
    assert main(["run-all", "--config", str(cfg), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "90 examples -> 86 train / 4 validation (seed 42), 3 sources" in out
    assert "trains 11 steps" in out and "losses at steps [4, 7, 11]" in out
    assert "gsm8k (6), math (6)" in out


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"data.train_file": "missing.json"}, "does not exist"),
        ({"proxy.model": "/no/such/model"}, "is neither a local Hugging Face folder"),
        ({"data.benchmarks": ["gsm8k", "aime"]}, r"`data.benchmarks` must be one of"),
        ({"finetune.lora_targets": ["q_proj", "c_attn"]}, r"\['c_attn'\] do not exist"),
    ],
)
def test_bad_input_exits_2_with_one_line(workdir, tiny_model_dir, capsys, over, match, tmp_path):
    cfg = _config(workdir, tiny_model_dir, **over)
    args = ["run-all", "--config", str(cfg), "--run-dir", str(tmp_path / "r"), "--quiet"]
    if "lora_targets" in str(over):
        args = ["finetune", "--settings", "ft", *args[1:]]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    import re

    assert re.search(match, err), err


def test_malformed_training_line(workdir, tiny_model_dir, capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "q", "output": "a", "source": "s"}\n{"instruction": "q"}\n')
    cfg = _config(workdir, tiny_model_dir, **{"data.train_file": str(bad)})
    assert main(["data", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 2
    assert "bad.jsonl:2: missing field 'output'" in capsys.readouterr().err


def test_cli_on_a_core_install_names_the_extra(workdir, tiny_model_dir):
    cfg = _config(workdir, tiny_model_dir)
    proc = run_core_only("llm_validation", "run-all", "--config", str(cfg), "--dry-run")
    assert proc.returncode == 2, proc.stderr
    assert "needs the `llm` extra" in proc.stderr and "pip install" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_two_process_cpu_launch_matches_one_process(workdir, tiny_model_dir, tmp_path):
    """``accelerate launch --num_processes 2 --cpu`` = one process with accumulation 2."""
    from safetensors.torch import load_file

    cfg = _config(workdir, tiny_model_dir, **{"finetune.per_device_batch_size": 4})
    common = ["-m", "llm_validation", "finetune", "--config", str(cfg), "--settings", "ft",
              "--quiet"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}
    two = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--cpu",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
         *common, "--run-dir", str(tmp_path / "two")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert two.returncode == 0, two.stderr[-2000:]
    one = subprocess.run([sys.executable, *common, "--run-dir", str(tmp_path / "one")],
                         capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert one.returncode == 0, one.stderr[-2000:]
    s2 = read_json(tmp_path / "two" / "finetune" / "ft" / "stage.json")["summary"]
    s1 = read_json(tmp_path / "one" / "finetune" / "ft" / "stage.json")["summary"]
    assert s1["steps"] == s2["steps"] == 11
    w1 = load_file(str(tmp_path / "one/finetune/ft/final/adapter_model.safetensors"))
    w2 = load_file(str(tmp_path / "two/finetune/ft/final/adapter_model.safetensors"))
    for k in w1:
        np.testing.assert_allclose(w1[k].numpy(), w2[k].numpy(), rtol=1e-3, atol=1e-5)
