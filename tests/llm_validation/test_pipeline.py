"""The CLI end to end on a tiny model: every stage, every setting, resume, and bad input."""

from __future__ import annotations

import hashlib
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
from llm_validation.evaluate.scoring import is_correct
from sims.runtime.io import read_json, read_netcdf
from tests.core_only import run_core_only

SETTINGS = ["ft", "ft_up", "random", "easy", "synth", "both"]
ERROR = "python -m llm_validation: error: "
TARGET_HIDDEN = 48  # the target differs from the proxy (hidden 32): a swapped model shows


def _config(root: Path, model: Path, *, target: Path | None = None, **over) -> Path:
    """A run config; the proxy is ``model``, the target and synthesizer ``target``."""
    target = target or root / "target"
    cfg = {
        "run_dir": str(root / "run"),
        "data": {"train_file": "MathInstruct.json", "benchmark_dir": "dataset",
                 "max_length": 96},
        "proxy": {"model": str(model), "batch_size": 8, "per_device_batch_size": 8,
                  "epoch_fraction": 1.0, "schedule_epochs": 1.0, "n_checkpoints": 3, "lr": 0.01,
                  "keep_checkpoints": True},
        "selection": {"small_sources": "none"},
        "finetune": {"model": str(target), "settings": SETTINGS, "batch_size": 8,
                     "per_device_batch_size": 8, "epochs": 1, "lr": 0.02, "lora_rank": 4,
                     "lora_alpha": 8},
        "synthesis": {"model": str(target), "max_new_tokens": 8},
        "evaluate": {"max_new_tokens": 12, "batch_size": 8},
    }  # fmt: skip
    for key, value in over.items():
        section, name = key.split(".")
        cfg[section][name] = value
    tag = hashlib.sha256(json.dumps([str(target), over], sort_keys=True).encode()).hexdigest()
    path = root / ("run.json" if not over and target == root / "target" else f"run-{tag[:8]}.json")
    path.write_text(json.dumps(cfg))  # one file per variant: the finished run's stays as it ran
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, data_files, tiny_model_dir, tokenizer):
    from llm_validation.models.tiny import TinySize, make_tiny_model

    root = tmp_path_factory.mktemp("pipe")
    train, bench = data_files
    shutil.copy(train, root / "MathInstruct.json")
    shutil.copytree(bench, root / "dataset")
    size = TinySize(hidden=TARGET_HIDDEN, layers=2, heads=4, kv_heads=2)
    make_tiny_model(root / "target", "llama", tokenizer, size, seed=1)
    return root


@pytest.fixture(scope="module")
def finished_run(workdir, tiny_model_dir):
    """``run-all`` once (synthesis generations replaced by canned rephrasings)."""
    from llm_validation.select import synthesis

    real = synthesis.synthesize

    def canned(examples, model, tok, **kw):
        res = real(examples, model, tok, **kw)  # runs the real generation (tiny model: garbage)
        comps = tuple(
            f"<question>Variant of: {e.instruction}</question>" if i % 2 == 0 else c
            for i, (e, c) in enumerate(zip(examples, res.completions, strict=True))
        )
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


def test_each_stage_used_its_own_model(finished_run):
    """The proxy (hidden 32) and the target (hidden 48) differ, so a swapped model shows."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig

    _, run, _ = finished_run
    (ckpt,) = (run / "proxy" / "trainer").glob("checkpoint-*")
    assert AutoConfig.from_pretrained(ckpt).hidden_size == 32
    for setting in SETTINGS:
        ad = load_file(str(run / "finetune" / setting / "final" / "adapter_model.safetensors"))
        a = [v for k, v in ad.items() if "q_proj.lora_A" in k]
        assert a and all(v.shape == torch.Size([4, TARGET_HIDDEN]) for v in a), setting
    meta = read_json(run / "finetune" / "ft" / "final" / "adapter_config.json")
    assert Path(meta["base_model_name_or_path"]).name == "target"


def test_proxy_losses_are_the_checkpoint_models_losses(finished_run):
    """The pipeline's trajectories at the last step = an independent, unbatched float64 loss
    of the proxy checkpoint written at that step (the recorder inside its caller)."""
    import torch
    from transformers import AutoModelForCausalLM

    from llm_validation.data.records import IGNORE_INDEX, load_mathinstruct, tokenize_examples
    from llm_validation.models.registry import load_tokenizer

    _, run, _ = finished_run
    traj = read_netcdf(run / "proxy" / "trajectories.nc")
    last = int(traj["step"].values[-1])
    ckpt = run / "proxy" / "trainer" / f"checkpoint-{last}"
    model = AutoModelForCausalLM.from_pretrained(ckpt).eval()
    tok = load_tokenizer(ckpt)
    by_index = {e.index: e for e in load_mathinstruct(run.parent / "MathInstruct.json")}
    rows = [0, 5, 17, 40, 85]
    recs = tokenize_examples([by_index[int(traj["example"].values[r])] for r in rows], tok,
                             max_length=96)  # fmt: skip
    want = []
    for rec in recs:
        ids = torch.tensor([rec["input_ids"]])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
        lab = rec["labels"]
        terms = [-float(logp[t - 1, lab[t]]) for t in range(1, len(lab)) if lab[t] != IGNORE_INDEX]
        want.append(np.mean(terms))
    np.testing.assert_allclose(traj["loss"].values[rows, -1], want, rtol=2e-5)


def test_trained_sets_are_the_selected_examples(finished_run):
    """Each setting trained on its own examples: ``usage.nc`` against the selection masks."""
    _, run, _ = finished_run
    sel = read_netcdf(run / "selection" / "selection.nc")
    n = sel.sizes["example"]
    n_synth = len((run / "synthesis" / "synthetic.jsonl").read_text().splitlines())
    masks = {"ft": np.zeros(n, bool), "ft_up": sel["hard"].values.astype(bool),
             "random": sel["random"].values.astype(bool),
             "easy": sel["easy"].values.astype(bool), "synth": np.zeros(n, bool),
             "both": sel["hard"].values.astype(bool)}  # fmt: skip
    assert not np.array_equal(masks["ft_up"], masks["random"])
    for setting, mask in masks.items():
        use = read_netcdf(run / "finetune" / setting / "usage.nc")
        count = use["count"].values
        assert use["example"].values[:n].tolist() == sel["example"].values.tolist()
        np.testing.assert_array_equal(count[:n], 1 + mask, err_msg=setting)
        extra = n_synth if setting in ("synth", "both") else 0
        assert count.size == n + extra and (count[n:] == 1).all(), setting


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
    assert err.startswith(ERROR) and "another config" in err and "'proxy'" in err
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
    assert err.startswith(ERROR) and len(err.splitlines()) == 1
    import re

    assert re.search(match, err), err
    assert not (tmp_path / "r").exists()  # checked before anything is written


def test_a_stage_checks_its_model_before_writing(workdir, tiny_model_dir, tmp_path):
    """The library path too: a bad proxy model leaves no stage file to block the fixed run."""
    from llm_validation.config import load_config
    from llm_validation.experiments import pipeline
    from llm_validation.models.registry import ModelSpecError

    bad = load_config(_config(workdir, tiny_model_dir, **{"proxy.model": "/no/such/model"}),
                      {"run_dir": str(tmp_path / "r")})  # fmt: skip
    with pytest.raises(ModelSpecError):
        pipeline.run_proxy(bad, quiet=True)
    assert not (tmp_path / "r" / "proxy" / "stage.json").exists()


def test_damaged_files_are_named(finished_run, workdir, tiny_model_dir, tmp_path, capsys):
    """A damaged selection is recomputed (and says so); a damaged stage.json is refused."""
    cfg, run, _ = finished_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("finetune", "eval", "trainer"))
    (copy / "selection" / "selection.nc").write_bytes(b"\x89HDF\r\n garbage")
    args = ["select", "--config", str(cfg), "--run-dir", str(copy), "--quiet"]
    assert main(args) == 0
    assert "selection.nc is unreadable (" in capsys.readouterr().out
    again, before = (read_netcdf(r / "selection" / "selection.nc") for r in (copy, run))
    assert again["hard"].values.tolist() == before["hard"].values.tolist()
    (copy / "data" / "stage.json").write_text('{"stage": "data", "config_ha')
    assert main(["data", "--config", str(cfg), "--run-dir", str(copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{copy / 'data' / 'stage.json'} is unreadable" in err


def test_malformed_training_line(workdir, tiny_model_dir, capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "q", "output": "a", "source": "s"}\n{"instruction": "q"}\n')
    cfg = _config(workdir, tiny_model_dir, **{"data.train_file": str(bad)})
    assert main(["data", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 2
    assert "bad.jsonl:2: missing field 'output'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_cli_on_a_core_install_names_the_extra(workdir, tiny_model_dir):
    cfg = _config(workdir, tiny_model_dir)
    proc = run_core_only("llm_validation", "run-all", "--config", str(cfg), "--dry-run")
    assert proc.returncode == 2, proc.stderr
    assert "needs the `llm` extra" in proc.stderr and "pip install" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_two_process_cpu_launch_matches_one_process(workdir, tiny_model_dir, tmp_path):
    """``accelerate launch --multi_gpu --num_processes 2`` on CPUs = one process, accumulation 2.

    Without GPUs, ``--cpu --num_processes 2`` starts a single process (accelerate's simple
    launcher); ``--multi_gpu`` goes through ``torch.distributed.run``: 2 gloo processes. The
    stage summary records the world size training saw, so a launch of one process fails here.
    """
    from safetensors.torch import load_file

    # no LoRA dropout: its masks come from each process's own RNG stream
    cfg = _config(workdir, tiny_model_dir, **{"finetune.per_device_batch_size": 4,
                                              "finetune.lora_dropout": 0.0})  # fmt: skip
    common = ["-m", "llm_validation", "finetune", "--config", str(cfg), "--settings", "ft",
              "--quiet"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}
    two = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--multi_gpu",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
         *common, "--run-dir", str(tmp_path / "two")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert two.returncode == 0, two.stderr[-6000:]  # the ranks' lines precede torchrun's summary
    # the one-process reference runs here, in the test's process (one interpreter start less)
    assert main([*common[2:], "--run-dir", str(tmp_path / "one")]) == 0
    s2 = read_json(tmp_path / "two" / "finetune" / "ft" / "stage.json")["summary"]
    s1 = read_json(tmp_path / "one" / "finetune" / "ft" / "stage.json")["summary"]
    assert s1["steps"] == s2["steps"] == 11
    assert (s1["processes"], s2["processes"]) == (1, 2)
    w1 = load_file(str(tmp_path / "one/finetune/ft/final/adapter_model.safetensors"))
    w2 = load_file(str(tmp_path / "two/finetune/ft/final/adapter_model.safetensors"))
    # float32 sums in another order (gloo all-reduce of two half-batch sums vs accumulation):
    # gradients agree to ~1e-7 relative, but Adam's g/sqrt(v) amplifies this on coordinates
    # whose gradient is tiny; measured max |diff| 6e-5 after 11 steps of lr 0.02. atol = 1% of
    # one step's size (2e-4) still fails for a wrong effective batch or data split (O(lr)).
    for k in w1:
        np.testing.assert_allclose(w1[k].numpy(), w2[k].numpy(), rtol=1e-3, atol=2e-4)


def test_assign_to_hard_places_rows_on_their_sources_clusters():
    """Nearest centre of the row's own source; the last centre is the hard one."""
    from llm_validation.experiments.pipeline import assign_to_hard

    per_source = {
        "a": {"rule": "clustered", "centers": [[1.0, 1.0], [3.0, 3.0]]},  # easy, hard
        "b": {"rule": "clustered", "centers": [[3.0, 3.0], [9.0, 9.0]]},  # same point is easy here
        "c": {"rule": "small"},
        "d": {"rule": "degenerate"},
    }
    feats = np.array([[0.9, 1.2], [2.9, 3.5], [2.9, 3.5], [50.0, 50.0], [3.0, 3.0], [1.0, 1.0]])
    keep, hard = assign_to_hard(feats, ["a", "a", "b", "c", "d", "zz"], per_source)
    assert hard.tolist() == [False, True, False, False, False, False]
    assert keep.tolist() == [False, True, False, True, False, False]
    glob = {"all": {"rule": "clustered", "centers": [[0.0, 0.0], [2.0, 2.0], [5.0, 5.0]]}}
    rows = np.array([[0.9, 1.2], [4.6, 4.0], [2.2, 1.9]])  # nearest: [2,2], [5,5], [2,2]
    keep, hard = assign_to_hard(rows, ["a", "b", "c"], glob, per_source_mode=False)
    assert hard.tolist() == keep.tolist() == [False, True, False]  # only the last centre is hard


def test_report_takes_each_columns_best_checkpoint_by_average(tmp_path, monkeypatch):
    """With every epoch evaluated, a column shows its checkpoint of best average accuracy."""
    from llm_validation.config import load_config
    from llm_validation.experiments import pipeline

    def scores(gsm, math):
        return {"gsm8k": {"accuracy": gsm, "n": 10}, "math": {"accuracy": math, "n": 10}}

    results = {
        "pretrained": {"column": "pretrained", "scores": scores(0.1, 0.1)},
        "ft/checkpoint-4": {"column": "ft", "scores": scores(0.6, 0.0)},  # avg 0.3
        "ft/checkpoint-8": {"column": "ft", "scores": scores(0.2, 0.6)},  # avg 0.4: best
        "ft_up/checkpoint-5": {"column": "ft_up", "scores": scores(0.5, 0.5)},  # best
        "ft_up/checkpoint-10": {"column": "ft_up", "scores": scores(0.7, 0.1)},
    }
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg, quiet=False: results)
    cfg = load_config(None, {"run_dir": str(tmp_path), "evaluate.checkpoints": "all"})
    text = pipeline.run_report(cfg, quiet=True)
    assert "| GSM8K | 10 | 10.0 | 20.0 | **50.0** |" in text
    assert "| MATH | 10 | 10.0 | **60.0** | 50.0 |" in text
    assert "PT: pretrained, FT: ft/checkpoint-8, FT+UP: ft_up/checkpoint-5" in text
    assert (tmp_path / "report.md").read_text() == text
