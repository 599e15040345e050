"""The confirmation experiment (issue 14): statistics helpers and a micro end-to-end run."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from llm_validation.experiments.confirm import (
    SCALES,
    VARIANTS,
    ConfirmConfig,
    learning_times,
    matched_epochs,
    paired_ci,
    report,
    run_confirmation,
)


def test_paired_ci_matches_a_t_test():
    d = np.array([0.5, 1.5, 0.8, 1.1])
    m, lo, hi = paired_ci(d)
    # the interval excludes 0 exactly when the one-sample t-test rejects at 5 %
    p = stats.ttest_1samp(d, 0.0).pvalue
    assert (lo > 0) == (p < 0.05)
    assert m == pytest.approx(d.mean())
    assert hi - lo == pytest.approx(2 * 3.182446 * d.std(ddof=1) / 2, rel=1e-5)  # t(.975, 3)
    assert math.isnan(paired_ci([2.0])[1])


def test_paired_ci_leaves_out_a_nan_seed():
    # finite seeds 0.1 and 0.3: mean 0.2, sd 0.1414 (ddof=1), se 0.1, t(0.975, 1) = 12.7062
    m, lo, hi = paired_ci([0.1, float("nan"), 0.3])
    assert m == pytest.approx(0.2)
    assert (lo, hi) == pytest.approx((0.2 - 1.270620, 0.2 + 1.270620), abs=1e-6)
    assert all(math.isnan(x) for x in paired_ci([float("nan")] * 3))
    m, lo, hi = paired_ci([float("nan"), 0.7, float("inf")])
    assert m == pytest.approx(0.7) and math.isnan(lo) and math.isnan(hi)


def test_report_rows_with_a_nan_seed_and_sample_sd_everywhere():
    ds = _synthetic_results()
    # one seed of ft_up has no held-out loss (a crashed run): the row keeps its 2 seeds
    held = ds["heldout_loss"].values.copy()
    held[1, 2, :] = np.nan
    ds["heldout_loss"] = (("variant", "seed", "heldout"), held)
    # entropies with spread: sample sd of [0.60, 0.62, 0.64] is 0.02 (0.01633 with ddof=0)
    ent = ds["entropy_sources"].values.copy()
    ent[1] = [0.60, 0.62, 0.64]
    ds["entropy_sources"] = (("variant", "seed"), ent)
    text = report(ds)
    rows = text.split("Paired differences in mean held-out loss")[1].splitlines()
    row = next(ln for ln in rows if ln.startswith("| ft_up − ft |"))
    # per seed -0.15, -0.15, nan: mean -0.15 over the 2 finite seeds, interval of width 0
    assert "| -0.1500 | [-0.1500, -0.1500] |" in row and "nan" in row
    assert "ft_up better (2 of 3 seeds; the others gave no number)" in row
    assert "one seed" not in row
    ent_row = next(ln for ln in text.splitlines() if ln.startswith("| ft_up | 0.6200"))
    assert ent_row.startswith("| ft_up | 0.6200 ± 0.0200 |")


def test_learning_times_interpolate_the_half_drop():
    steps = np.array([0, 10, 20, 30])
    curves = np.array(
        [
            [4.0, 2.0, 1.0, 0.0],  # drop 4, half (2.0) reached at step 10
            [4.0, 3.5, 3.0, 2.0],  # drop 2, level 3.0 at step 20
            [4.0, 3.0, 3.0, 3.0],
        ]
    )  # drop 1, level 3.5 halfway between 0 and 10
    np.testing.assert_allclose(learning_times(steps, curves), [10.0, 20.0, 5.0])
    flat = learning_times(steps, np.array([[1.0, 1.0, 1.0, 1.0]]))
    assert np.isnan(flat[0])  # a curve that never drops has no learning time


def test_config_validation():
    with pytest.raises(ValueError, match="unknown variant"):
        ConfirmConfig(variants=("ft", "hard"))
    with pytest.raises(ValueError, match="must include 'ft'"):
        ConfirmConfig(variants=("ft_up",))
    assert set(SCALES) == {"cpu", "gpu", "gpu-scratch", "quick"}
    assert SCALES["gpu"].target == "gemma3-270m"
    assert SCALES["gpu"].proxy == "smollm2-135m-instruct" and SCALES["gpu"].finetune.lora
    # issue 36: the same design at every full scale: one pre-trained base, 10 fine-tuning
    # seeds of FT, FT with FT+UP's step count and FT+UP; >= 300 items per format; >= 50
    # answered held-out problems per source; learning times on a log-spaced schedule
    default = ("ft", "ft_matched", "ft_up")
    for name in ("cpu", "gpu", "gpu-scratch"):
        cfg = SCALES[name]
        assert cfg.variants == default, name
        assert cfg.seeds == tuple(range(10)), name
        assert cfg.n_test >= 300 and cfg.lt_records >= 10, name
        assert cfg.heldout_acc_per_source >= 50, name
        assert cfg.n_heldout >= 13 * cfg.heldout_acc_per_source, name  # 13 sources, stratified
    assert SCALES["gpu-scratch"].target == SCALES["gpu-scratch"].proxy == "scratch"


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    """One micro run on tiny models, every stage, shared by the tests that read a finished run."""
    tmp_path = tmp_path_factory.mktemp("micro")
    cfg = dataclasses.replace(
        SCALES["quick"], variants=("ft", "ft_matched", "ft_up", "easy"), seeds=(0,)
    )
    return cfg, run_confirmation(cfg, tmp_path, quiet=True), tmp_path


@pytest.mark.slow
def test_micro_run_end_to_end(micro):
    """Pre-training, proxies, selections, fine-tuning, evaluation, tables: all on tiny models."""
    cfg, ds, tmp_path = micro
    assert ds["accuracy"].dims == ("variant", "seed", "benchmark")
    assert ds["variant"].values.tolist() == ["ft", "ft_matched", "ft_up", "easy"]
    assert np.isfinite(ds["accuracy"].values).all() and np.isfinite(ds["pt_accuracy"]).all()
    # held-out solution loss of every (variant, seed, problem): fine-tuning on the template
    # lowers it below the plain-text pretrained model's
    assert ds["heldout_loss"].dims == ("variant", "seed", "heldout") and ds.sizes["heldout"] == 40
    # issue 36: per-item verdicts (int8, -1 = none) of every (variant, seed, item), both
    # multiple-choice scorings, each item's format and half; the selection check per seed
    n_items = 6 * cfg.n_test
    assert ds["item_correct"].dims == ("variant", "seed", "item") and ds.sizes["item"] == n_items
    assert ds["item_correct"].dtype == np.int8 and set(np.unique(ds["item_correct"])) <= {0, 1}
    assert (ds["item_correct_mapped"] >= ds["item_correct"]).all()
    assert sorted(set(ds["item_split"].values.tolist())) == ["id", "ood"]
    per_b = ds["item_correct"].groupby("item_benchmark").mean("item")
    np.testing.assert_allclose(
        per_b.sel(item_benchmark=list(ds["benchmark"].values)).transpose(
            "variant", "seed", "item_benchmark").values, ds["accuracy"].values)  # fmt: skip
    chk = json.loads(ds.attrs["selection_check"])["0"]
    assert 0 <= chk["auc"] <= 1 and chk["recordings_before_median_half_drop"] >= 0
    assert chk["lt_steps"][0] == 0 and len(chk["lt_steps"]) == cfg.lt_records
    assert ds.attrs["wall_seconds_measured"] > 0 and ds.attrs["cpu_seconds_measured"] > 0
    # NaN only where the prompt fills the window (tokenization, the same in every run)
    nan = np.isnan(ds["heldout_loss"].values)
    assert (nan == np.isnan(ds["pt_heldout_loss"].values)).all() and nan.mean() < 0.25
    assert "without a scored token" in (tmp_path / "report.md").read_text()
    assert float(ds["heldout_loss"].sel(variant="ft").mean()) < float(ds["pt_heldout_loss"].mean())
    # per-source accuracy: the first 2 held-out problems of each source are answered and
    # scored (0/1), the rest NaN, the same problems in every run
    answered = np.isfinite(ds["pt_heldout_correct"].values)
    per_src = {}
    for s_ in ds["heldout_source"].values:
        per_src[s_] = per_src.get(s_, 0) + 1
    assert answered.sum() == sum(min(2, n) for n in per_src.values())
    ok = ds["heldout_correct"].values
    assert (np.isfinite(ok) == answered).all() and set(np.unique(ok[np.isfinite(ok)])) <= {0, 1}
    assert ds["t_sources"].dims == ("variant", "seed", "source")
    assert (ds["train_steps"] > 0).all() and (ds["run_cpu_seconds"] > 0).all()
    assert set(json.loads(ds.attrs["job_cpu_seconds"])) == {
        "pretrain_target",
        "pretrain_proxy",
        "proxy",
        "pt_eval",
    }
    train = json.loads((tmp_path / "data" / "MathInstruct.json").read_text())
    assert set(ds["heldout_source"].values.tolist()) <= {r["source"] for r in train}
    comp = json.loads(ds.attrs["hard_composition"])["0"]
    assert 0 < comp["hard_fraction"] < 1
    # the per-source shares of the hard cluster average back to its overall fraction
    split = [
        json.loads(x)
        for x in (tmp_path / "data" / "train_split.jsonl").read_text().split("\n")
        if x
    ]
    n_src = {}
    for r in split:
        stem = r["source"].rsplit("/", 1)[-1].removesuffix(".json")
        n_src[stem] = n_src.get(stem, 0) + 1
    share = comp["hard_share_by_source"]
    assert set(share) == set(n_src)
    assert sum(share[k] * n_src[k] for k in n_src) / len(split) == pytest.approx(
        comp["hard_fraction"]
    )
    text = (tmp_path / "report.md").read_text()
    assert "### Table 2 layout" in text and "| GSM8K |" in text
    assert "### Accuracy per source" in text and "worst-source held-out accuracy" in text
    assert "ft_up − ft" in text and "one seed: no interval" in text
    # programs run in the sandbox: counted per benchmark, reported with and without execution
    assert ds["programs"].dims == ("variant", "seed", "benchmark")
    assert (ds["programs_correct"] <= ds["programs"]).all()
    assert "### Program-of-thought completions" in text
    assert "Decontamination (against the training and pre-training problems)" in text
    assert "0 near-duplicates" in text and "1 near-duplicates" not in text
    assert report(ds) == text
    # the upsampled run trained on more examples than FT (compute is not matched to FT)
    assert ds["train_seconds"].sel(variant="ft_up").item() > 0
    # resume: everything is loaded from the job store, nothing is retrained
    again = run_confirmation(cfg, tmp_path, quiet=True)
    np.testing.assert_array_equal(again["accuracy"].values, ds["accuracy"].values)
    # the horizon check: other fine-tuning epochs on the same pre-trained models and proxies
    longer = dataclasses.replace(
        cfg, variants=("ft", "ft_up"), finetune=dataclasses.replace(cfg.finetune, epochs=2)
    )
    ep = run_confirmation(longer, tmp_path / "ep2", quiet=True, reuse_from=tmp_path)
    assert json.loads(ep.attrs["models"]) == json.loads(ds.attrs["models"])
    assert not (tmp_path / "ep2" / "pretrain_target").exists()
    assert not (tmp_path / "ep2" / "seed0" / "proxy_small").exists()
    np.testing.assert_array_equal(ep["pt_accuracy"].values, ds["pt_accuracy"].values)
    assert (tmp_path / "ep2" / "seed0" / "ft_up").is_dir()


def test_reuse_needs_a_finished_run_of_the_same_corpus(tmp_path):
    cfg = dataclasses.replace(SCALES["quick"], variants=("ft",), seeds=(0,))
    with pytest.raises(ValueError, match="`reuse_from`=.* is not the folder of another"):
        run_confirmation(cfg, tmp_path / "a", quiet=True, reuse_from=tmp_path / "none")
    assert not (tmp_path / "a" / "data").exists()  # refused before the corpus is written
    (tmp_path / "b" / "jobs").mkdir(parents=True)
    (tmp_path / "b" / "data").mkdir()
    (tmp_path / "b" / "data" / "MathInstruct.json").write_text("[]")
    with pytest.raises(ValueError, match="differs from this run's"):
        run_confirmation(cfg, tmp_path / "a", quiet=True, reuse_from=tmp_path / "b")


def test_reuse_finds_a_run_keyed_by_relative_or_absolute_paths(tmp_path, monkeypatch):
    """The README's horizon check (`--epochs 5 --reuse results/llm/confirm_cpu`) after a run
    with the default, relative `--out`: its jobs are keyed by relative paths while the reused
    folder is resolved (this refused the 5-epoch check of the committed run)."""
    import xarray as xr

    from llm_validation.experiments.confirm import _in_reused_run
    from sims.runtime.parallel import JobStore

    monkeypatch.chdir(tmp_path)
    store = JobStore(tmp_path / "run" / "jobs")
    relative = {"kind": "pretrain", "role": "target", "out": "run/pretrain_target"}
    store.save(relative, xr.Dataset(attrs={"folder": "run/pretrain_target/model"}))
    now = [{"kind": "pretrain", "role": "target", "out": "ep5/pretrain_target"}]
    reuse = (tmp_path / "run").resolve()
    assert _in_reused_run(now, Path("ep5"), reuse, store) == [relative]
    absolute = {**relative, "out": f"{reuse}/pretrain_target"}  # a run given an absolute --out
    other = JobStore(tmp_path / "abs" / "jobs")
    other.save(absolute, xr.Dataset())
    assert _in_reused_run(now, Path("ep5"), reuse, other) == [absolute]
    proxy = [{"kind": "pretrain", "role": "proxy", "out": "ep5/pretrain_proxy"}]
    with pytest.raises(ValueError, match=r"has no result for \['pretrain pretrain_proxy'\]"):
        _in_reused_run(proxy, Path("ep5"), reuse, store)


def test_every_variant_is_described():
    names = {"ft", "ft_matched", "ft_up", "random", "easy", "ft_up_last", "ft_up_k10", "ft_up_k15",
             "ft_up_self", "ft_muon", "ft_up_muon", "ft_fsam", "ft_up_clean",
             "ft_up_late"}  # fmt: skip
    assert names == set(VARIANTS)
    assert VARIANTS["ft_up_late"].late_oracle and VARIANTS["ft_up_late"].setting == "ft_up"
    assert VARIANTS["ft_up_last"].features == "last" and VARIANTS["ft_up_k15"].k == 15


def _synthetic_results():
    import xarray as xr

    from llm_validation.data.records import BENCHMARKS

    names = ["ft", "ft_up", "random", "easy", "ft_up_last"]
    base = np.array([0.30, 0.32, 0.28])  # per seed
    shift = {"ft": 0.0, "ft_up": 0.02, "random": 0.0, "easy": -0.03, "ft_up_last": 0.01}
    noise = {"random": np.array([0.004, -0.006, 0.002])}
    acc = np.stack([np.repeat((base + shift[v] + noise.get(v, 0.0))[:, None], 6, 1)
                    for v in names])  # fmt: skip
    z = np.zeros((len(names), 3))
    ds = xr.Dataset(
        {"accuracy": (("variant", "seed", "benchmark"), acc),
         "pt_accuracy": ("benchmark", np.full(6, 0.05)), "train_seconds": (("variant", "seed"), z),
         "entropy_sources": (("variant", "seed"), z + 2.0),
         "entropy_clusters": (("variant", "seed"), z + 0.6),
         "t_hard": (("variant", "seed"), z + 9), "t_easy": (("variant", "seed"), z + 4)},
        coords={"variant": names, "seed": [0, 1, 2], "benchmark": list(BENCHMARKS)},
        attrs={"scale": "synthetic", "hard_composition": "{}"},
    )  # fmt: skip
    # held-out losses: 2 sources x 2 problems; ft_up lowers the hard source "b" only
    src = np.array(["data/CoT/a.json", "data/CoT/a.json", "data/CoT/b.json", "data/CoT/b.json"])
    loss = np.array([[1.0, 1.2, 2.0, 2.2]]).repeat(3, 0) + np.array([0.0, 0.01, -0.01])[:, None]
    delta = {"ft_up": [0, 0, -0.3, -0.3], "easy": [-0.1, -0.1, 0.2, 0.2]}
    held = np.stack([loss + np.asarray(delta.get(v, np.zeros(4))) for v in names])
    ds["heldout_loss"] = (("variant", "seed", "heldout"), held)
    ds["pt_heldout_loss"] = ("heldout", np.array([3.0, 3.0, 4.0, 4.0]))
    return ds.assign_coords(heldout_source=("heldout", src))


def test_report_tables_and_verdicts():
    ds = _synthetic_results()
    text = report(ds)
    # Chance, PT, FT, FT+UP (mean ± sd); chance: 0 for numbers, 25 % for MMLU's 4 choices,
    # 25/6 = 4.2 % on average
    assert "| GSM8K | 0.0 | 5.0 | 30.0 ± 2.0 | 32.0 ± 2.0 |" in text
    assert "| MMLU-Math | 25.0 | 5.0 | 30.0 ± 2.0 | 32.0 ± 2.0 |" in text
    assert "| Avg. | 4.2 | 5.0 | 30.0 ± 2.0 | 32.0 ± 2.0 |" in text
    assert "| ft_up − ft | +2.00 | [+2.00, +2.00] |" in text and "ft_up better" in text
    assert "| easy − ft | -3.00 |" in text and "easy worse" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| random − ft |"))
    # random − ft: +0.4, -0.6, +0.2 points; mean 0, sd 0.5292, se 0.3055; the 95 % interval
    # (t 4.303: ±1.31) holds 0 and the 90 % one (t 2.920: ±0.892) lies inside ±1 point
    assert "0.00 | [-1.31, +1.31] |" in row and "equivalent within ±1" in row
    assert "| ft_up − ft_up_last | +1.00 |" in text
    assert "Optimizers" not in text and "Beyond the paper" not in text  # none of their variants
    assert "Fig. 4a/4c" not in text and "### Table 6 layout" in text
    # held-out loss (lower is better): per-source rows, mean and worst source
    assert "| a | 3.000 | 1.100 ± 0.010 | 1.100 ± 0.010 |" in text  # PT, ft, ft_up
    assert "| b | 4.000 | 2.100 ± 0.010 | 1.800 ± 0.010 |" in text
    loss_rows = text.split("Paired differences in mean held-out loss")[1]
    assert "| ft_up − ft | -0.1500 | [-0.1500, -0.1500] |" in loss_rows
    assert "ft_up better" in loss_rows.splitlines()[4]
    worst = text.split("worst-source held-out loss")[1].splitlines()
    assert "| ft_up − ft | -0.3000 |" in worst[4] and "ft_up better" in worst[4]
    assert "| easy − ft | +0.2000 |" in worst[6] and "easy worse" in worst[6]


def test_figure_renders_from_results(tmp_path):
    from figures import discover

    mod = discover()["llm_confirm"]
    assert mod.FIGURE.extra == "llm" and mod.FIGURE.result_file == "llm/confirm_cpu/results.nc"
    (path,) = mod.plot(_synthetic_results(), tmp_path)
    assert path.name == "llm_confirm.png" and path.stat().st_size > 20_000


def test_confirm_cpu_announces_an_estimate_within_2x_of_the_committed_run(tmp_path, capsys,
                                                                         monkeypatch):
    """The committed default run (issue 29) took 54 min of wall time on 2 shared cores: its
    design's estimate is within 2x of it; issue 36's default adds its items and recordings
    (by hand below); the estimate is announced in the dry run and before the real run starts."""
    import re

    from llm_validation.__main__ import main
    from llm_validation.experiments import confirm

    monkeypatch.setenv("SBT_WORKERS", "2")
    assert main(["confirm", "--scale", "cpu", "--out", str(tmp_path / "c"), "--dry-run"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "time:" in ln)
    minutes = int(re.search(r"estimated (\d+) min on 2 idle cores", line).group(1))
    old = dataclasses.replace(confirm.SCALES["cpu"], variants=("ft", "ft_matched", "ft_up",
                              "random", "easy"), seeds=(0, 1, 2, 3, 4), n_test=60,
                              heldout_acc_per_source=16, lt_records=0)  # fmt: skip
    assert confirm.design_extras(old) == (0.0, 0.0)
    old_min = int(re.search(r"estimated (\d+) min", confirm.estimate_line(old, "cpu", 2))[1])
    assert 54 / 2 <= old_min <= 54 * 2
    # issue 36's default: 1882 more answers per run, 12 recordings of 1045 examples per proxy
    from llm_validation.experiments.confirm.design import COSTS

    run, proxy = confirm.design_extras(confirm.SCALES["cpu"])
    assert run == pytest.approx(COSTS["gen_item"] * (6 * 300 + 13 * 50 - 6 * 60 - 13 * 16))
    assert proxy == pytest.approx(COSTS["lt_record"] * 1045 * 12)
    assert minutes > old_min * 0.8, line
    # the phases add up: pre-training (2 models on 2 cores) is the longer pre-trained model's
    # CPU time; fine-tuning is 26 jobs on 2 cores, so at least half their CPU seconds
    ds = confirm.committed_costs()
    job = json.loads(ds.attrs["job_cpu_seconds"])
    e = confirm.estimate_run(ds, confirm.SCALES["cpu"].variants, 5, 2)
    assert e["phases"]["pretrain"] == max(job["pretrain_target"], job["pretrain_proxy"])
    assert e["total"] >= (job["pretrain_target"] + np.nansum(ds["run_cpu_seconds"])) / 2 - 1
    # --reuse (the horizon check) skips pre-training and proxies; 5 epochs cost more runs
    longer = confirm.estimate_run(ds, confirm.SCALES["cpu"].variants, 5, 2, step_factor=5 / 3,
                                  reuse=True)  # fmt: skip
    assert longer["phases"]["pretrain"] == longer["phases"]["proxies"] == 0
    assert longer["phases"]["finetune"] > e["phases"]["finetune"]
    # the real run announces it before any work: stop it at the first job
    monkeypatch.setattr(confirm, "run_confirmation",
                        lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(["confirm", "--scale", "cpu", "--out", str(tmp_path / "c")]) == 130
    assert f"estimated {minutes} min on 2 idle cores" in capsys.readouterr().out
    assert "quick has no" not in confirm.estimate_line(confirm.SCALES["quick"], "quick", 2)


def test_confirm_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    from llm_validation.__main__ import main

    out = tmp_path / "confirm"
    argv = ["confirm", "--scale", "cpu", "--seeds", "4,5", "--out", str(out), "--dry-run"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "seeds: 4, 5" in text and "36000 pre-training" in text and str(out) in text
    assert not out.exists()  # a dry run computes and writes nothing (it used to start the run)
    assert "650 held-out" in text and "300 per benchmark" in text
    assert "time: estimated" in text and "idle core" in text
    default = next(ln for ln in text.splitlines() if "variants:" in ln)
    # issue 36's default: 10 seeds of FT, ft_matched, FT+UP (random and easy: --variants)
    assert default.split(": ")[1] == "ft, ft_matched, ft_up"
    assert main(argv + ["--variants", "all"]) == 0
    listed = next(ln for ln in capsys.readouterr().out.splitlines() if "variants:" in ln)
    assert listed.split(": ")[1].split(", ") == list(VARIANTS)


def test_confirm_checks_out_before_any_work(tmp_path, capsys):
    from llm_validation.__main__ import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["confirm", "--scale", "cpu", "--out", str(blocker / "sub")]) == 2
    assert "`--out`" in capsys.readouterr().err


def test_program_table_shares_and_accuracies():
    ds = _synthetic_results()
    ds.attrs["n_test"] = 10  # 6 benchmarks x 10 problems = 60 completions per run
    shape = (ds.sizes["variant"], 3, 6)
    per_bench = {"programs": 1, "programs_correct": 0.5, "programs_correct_text": 0}
    for k, v in per_bench.items():  # per run: 6 programs, 3 right when run, 0 as text
        ds[k] = (("variant", "seed", "benchmark"), np.full(shape, float(v)))
        ds["pt_" + k] = ("benchmark", np.zeros(6))
    text = report(ds)
    row = next(ln for ln in text.splitlines() if ln.startswith("| ft | 10.0"))
    # ft accuracy 30/32/28 %: 18, 19.2, 16.8 right of 60; as text 3 fewer: 25.0/27.0/23.0 %
    assert row == "| ft | 10.0 ± 0.0 | 50.0 ± 0.0 | 0.0 ± 0.0 | 30.0 ± 2.0 | 25.0 ± 2.0 |"
    pt = next(ln for ln in text.splitlines() if ln.startswith("| PT |"))
    assert pt == "| PT | 0.0 | – | – | 5.0 | 5.0 |"


def test_matched_epochs_give_exactly_the_wanted_steps():
    from llm_validation.train.trainer import schedule

    # 1045 examples at batch 32: 33 steps per epoch; 120 steps = 119.5/33 epochs
    assert matched_epochs(120, 1045, 32) == pytest.approx(119.5 / 33)
    for n, b in [(1045, 32), (152, 16), (7, 3), (1000, 8)]:
        for steps in range(1, 400, 7):
            assert schedule(n, b, matched_epochs(steps, n, b)).total == steps
    with pytest.raises(ValueError, match="must be positive"):
        matched_epochs(0, 10, 2)


@pytest.mark.slow
def test_ft_matched_takes_ft_ups_steps_on_the_original_data(micro):
    """``ft_matched``: FT's data (each example once per epoch) for FT+UP's optimizer steps."""
    from llm_validation.train.trainer import schedule

    cfg, ds, tmp_path = micro
    steps = ds["train_steps"].sel(seed=0)
    n_train = sum(1 for ln in (tmp_path / "data" / "train_split.jsonl").open() if ln.strip())
    ft_steps = schedule(n_train, cfg.finetune.batch_size, cfg.finetune.epochs).total
    assert int(steps.sel(variant="ft")) == ft_steps  # ceil(n / 16) for one epoch
    # FT+UP trains longer (duplicated hard examples) and ft_matched exactly as long
    assert int(steps.sel(variant="ft_up")) > ft_steps
    assert int(steps.sel(variant="ft_matched")) == int(steps.sel(variant="ft_up"))
    # ... on the original data: its epochs are fractional passes over the n_train examples
    done = (tmp_path / "seed0" / "ft_matched" / "final" / "DONE").read_text()  # the Trainer's
    assert done.strip() == f"steps={int(steps.sel(variant='ft_up'))}"
    assert "| Dataset | Chance | PT | FT | FT (FT+UP's steps) | FT+UP |" in report(ds)


def test_accuracy_per_source_and_worst_source_by_hand():
    """Per-source held-out accuracy, its mean and worst source, and the paired difference."""
    ds = _synthetic_results()
    # 2 sources (a, b) x 2 problems; 1 = right. Per seed, ft: a 100/50/100, b 0/50/50 %
    ft = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], float)
    # ft_up: a 100/100/100, b 50/50/100 %
    up = np.array([[1, 1, 1, 0], [1, 1, 0, 1], [1, 1, 1, 1]], float)
    ok = np.stack([up if v == "ft_up" else ft for v in ds["variant"].values])
    ds["heldout_correct"] = (("variant", "seed", "heldout"), ok)
    ds["pt_heldout_correct"] = ("heldout", np.array([1.0, 0.0, 0.0, 0.0]))  # a 50, b 0 %
    text = report(ds)
    table = text.split("### Accuracy per source")[1].split("###")[0].splitlines()
    # PT, ft, ft_up, ...: a 83.3 ± 28.9 (sample sd of 100, 50, 100), b 33.3 ± 28.9
    assert next(r for r in table if r.startswith("| a |")).startswith(
        "| a | 2 | 50.0 | 83.3 ± 28.9 | 100.0 ± 0.0 |"
    )
    assert next(r for r in table if r.startswith("| b |")).startswith(
        "| b | 2 | 0.0 | 33.3 ± 28.9 | 66.7 ± 28.9 |"
    )
    # mean over sources per seed: ft 50/50/75 -> 58.3 ± 14.4; ft_up 75/75/100 -> 83.3 ± 14.4
    mean_row = next(r for r in table if r.startswith("| **mean over sources**"))
    assert "| 25.0 | 58.3 ± 14.4 | 83.3 ± 14.4 |" in mean_row
    # worst source per seed: ft 0/50/50 -> 33.3 ± 28.9; ft_up 50/50/100 -> 66.7 ± 28.9
    worst_row = next(r for r in table if r.startswith("| **worst source**"))
    assert "| 0.0 | 33.3 ± 28.9 | 66.7 ± 28.9 |" in worst_row
    # paired: +50, 0, +50; mean 33.33, se 16.667, t(0.975, 2) = 4.3027: ±71.71, [-38.38, +105.04]
    diffs = text.split("Paired differences in worst-source held-out accuracy")[1].splitlines()
    row = next(r for r in diffs if r.startswith("| ft_up − ft |"))
    assert "| +33.33 | [-38.38, +105.04] | +50.00, +0.00, +50.00 |" in row
    assert "not shown: inside the seed noise" in row


def test_heldout_answers_scored_by_their_style():
    """Each held-out completion is scored with the rules of its source's answer style."""
    from llm_validation.experiments.confirm import heldout_subset, score_heldout

    recs = [
        {"style": "gsm", "answer": "7"},
        {"style": "cot", "answer": "3/4"},
        {"style": "boxed", "answer": "1/2"},
        {"style": "cot", "answer": "(B)"},
        {"style": "code", "answer": "12"},
        {"style": "cot", "answer": "(C)"},
        {"style": "gsm", "answer": "8"},
    ]
    comps = [
        "3 + 4 = <<3+4=7>>7.\n#### 7",
        "So it is 0.75.\nThe answer is 0.75.",
        "Divide: $x = \\frac{1}{2}$.\nTherefore, the answer is $\\boxed{\\frac{1}{2}}$.",
        "This matches choice (B).\nThe answer is (B).",
        "a = 3\nb = 4\nprint(a * b)",  # run in the sandbox: prints 12
        "This matches choice (B).\nThe answer is (B).",  # wrong letter
        "#### 7",  # wrong number
    ]
    np.testing.assert_array_equal(score_heldout(comps, recs), [1, 1, 1, 1, 1, 0, 0])
    assert heldout_subset(["a", "b", "a", "a", "c", "b"], 1).tolist() == [0, 1, 4]
    assert heldout_subset(["a", "b"], 0).tolist() == []


# ----------------------------------------------------------------------------- issue 36


def test_paired_bootstrap_width_matches_the_two_way_closed_form():
    """Differences = seed effect + item effect (additive): resampling seeds and items
    independently, the mean's variance is var(seed)/n_seeds + var(item)/n_items (population
    variances, the bootstrap's); the 95 % interval's half-width is 1.96 of its root."""
    from llm_validation.experiments.confirm.analysis import paired_bootstrap

    rng = np.random.default_rng(3)
    s_eff, i_eff = rng.normal(0, 0.03, 10), rng.normal(0, 0.3, 300)
    a = 0.5 + s_eff[:, None] + i_eff[None, :]
    b = np.zeros_like(a)
    m, lo, hi = paired_bootstrap(a, b, n_boot=2000, seed=1)
    assert m == pytest.approx(a.mean())
    se = math.sqrt(s_eff.var() / 10 + i_eff.var() / 300)
    assert (hi - lo) / 2 == pytest.approx(1.96 * se, rel=0.1)
    # strata: items resampled within each; a constant within-stratum effect adds no variance
    strata = np.repeat(np.arange(6), 50)
    a2 = 0.5 + s_eff[:, None] + np.repeat(rng.normal(0, 0.3, 6), 50)[None, :]
    _, lo2, hi2 = paired_bootstrap(a2, b, strata, n_boot=2000, seed=1)
    assert (hi2 - lo2) / 2 == pytest.approx(1.96 * math.sqrt(s_eff.var() / 10), rel=0.1)
    # a seed without results (NaN) is left out of both
    a3 = a.copy()
    a3[0, 0] = np.nan
    assert paired_bootstrap(a3, b, n_boot=10)[0] == pytest.approx(a[1:].mean())


def test_constant_letter_chance_and_the_item_intervals_by_hand():
    import xarray as xr

    from llm_validation.data.records import BENCHMARKS
    from llm_validation.experiments.confirm.analysis import constant_letter_chance
    from llm_validation.experiments.confirm.report import accuracy_by_split, item_diffs

    assert constant_letter_chance(list("BBCA") + [""]) == 0.5  # 2 of 4 letters are B
    bench = np.repeat(list(BENCHMARKS), 2)
    split = np.tile(["id", "ood"], 6)
    x = np.zeros((2, 3, 12), np.int8)
    x[1, :, ::2] = 1  # ft_up right on every id item, wrong on every ood item
    x[1, 0, 1] = 1  # ...and, seed 0, the first ood item (GSM8K)
    x[0, 2, 0] = -1  # ft, seed 2: no result for one item
    ds = xr.Dataset(
        {"item_correct": (("variant", "seed", "item"), x),
         "pt_item_correct": ("item", np.zeros(12, np.int8))},
        coords={"variant": ["ft", "ft_up"], "seed": [0, 1, 2], "item_benchmark": ("item", bench),
                "item_split": ("item", split)},
    )  # fmt: skip
    acc = accuracy_by_split(ds, "ft_up")
    assert acc["gsm8k"] == {"id": 100.0, "ood": pytest.approx(100 / 3), "all": pytest.approx(
        100 * 4 / 6)}  # fmt: skip
    assert acc["math"] == {"id": 100.0, "ood": 0.0, "all": 50.0}
    d = item_diffs(ds, "ft_up", "ft", n_boot=200)
    # per seed, the mean over formats of each format's mean difference (by hand): seed 0:
    # GSM8K 1, the other five 0.5; seed 1: all 0.5; seed 2: GSM8K 0 (its id item has no ft
    # result, the ood item 0 - 0), the others 0.5
    per_seed = [(1 + 5 * 0.5) / 6, 0.5, (0 + 5 * 0.5) / 6]
    assert d["mean"] == pytest.approx(100 * np.mean(per_seed))
    assert d["n_seeds"] == 3 and d["n_items"] == 12
    assert d["t_interval"][0] < d["mean"] < d["t_interval"][1]


def test_bench_confirm_estimate_and_check_against_a_run_by_hand():
    """benchmarks/bench_confirm.py: the estimate of a run's own jobs, by hand, and the ratio to
    what the run measured (issue 36: the estimate is validated against a measured run)."""
    import importlib.util

    import xarray as xr

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_confirm.py"
    spec = importlib.util.spec_from_file_location("bench_confirm", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    ds = xr.Dataset(
        {"train_steps": (("variant", "seed"), [[100.0, 100.0], [130.0, 130.0]]),
         "run_cpu_seconds": (("variant", "seed"), [[30.0, 30.0], [40.0, 40.0]])},
        coords={"variant": ["ft", "ft_up"], "seed": [0, 1]},
        attrs={"job_cpu_seconds": json.dumps({"pretrain_target": 100.0, "pretrain_proxy": 50.0,
                                              "proxy": [10.0, 10.0], "pt_eval": 20.0}),
               "wall_seconds_measured": 300.0, "cpu_seconds_measured": 400.0},
    )  # fmt: skip
    c = bench.check_against_run(ds, workers=2)
    # 2 workers: pre-training max(100, 50); proxies 10 | 10; runs 40, 40, 30, 30 and the
    # pretrained model's 20, longest first: 40 | 40, 70 | 40, 70 | 70, 90 | 70: max 90
    assert c["estimate_wall"] == pytest.approx(100 + 10 + 90)
    assert c["estimate_cpu"] == pytest.approx(150 + 20 + 160)
    assert c["cpu_ratio"] == pytest.approx(c["estimate_cpu"] / 400)
    assert c["wall_ratio"] == pytest.approx(c["estimate_wall"] / 300)


def test_latest_learners_are_the_unlearned_then_the_latest_half_drops():
    """ft_up_late's oracle selection on a synthetic trajectory with known half-drops: losses
    4 -> 0 falling linearly to 0 at step T_i reach half (2) at T_i / 2 (eq. 11's t_i)."""
    from llm_validation.experiments.confirm.analysis import latest_learners
    from sims.selection import loss_learning_times, selection_check

    steps = np.array([0, 1, 2, 4, 8, 16, 32])
    ends = np.array([2, 32, 4, 16, 8, 1000])  # the last never reaches 0 within 32 steps...
    losses = np.maximum(0, 4 - 4 * steps[None, :] / ends[:, None])
    losses[-1] = 4.0  # ...and stays flat: not learned (no learning time)
    t = loss_learning_times(steps, losses)
    np.testing.assert_allclose(t[:5], ends[:5] / 2)  # 1, 16, 2, 8, 4
    assert np.isnan(t[5])
    late = latest_learners(t, 3)
    assert late.tolist() == [False, True, False, True, False, True]  # unlearned, 16, 8
    chk = selection_check(t, late)
    assert chk.auc == 1.0  # every selected example is learned after every other one
    with pytest.raises(ValueError, match="`count` must be in"):
        latest_learners(t, 7)
