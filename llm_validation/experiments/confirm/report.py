"""The confirmation's tables (:func:`report`).

Accuracy, per-source accuracy, held-out loss, paired differences with their intervals,
contamination and program-of-thought counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from llm_validation.data.records import BENCHMARKS
from llm_validation.experiments.confirm.analysis import (
    constant_letter_chance,
    paired_bootstrap,
    paired_ci,
)

# ----------------------------------------------------------------------------- report

_BNAME = {
    "gsm8k": "GSM8K",
    "math": "MATH",
    "numglue": "NumGLUE",
    "svamp": "SVAMP",
    "deepmind": "DeepMind",
    "mmlu_math": "MMLU-Math",
}


#: Chance accuracy of each benchmark format: MMLU-Math is 4-way multiple choice; the other five
#: ask for an exact number (a guess is right with probability about 0).
CHANCE = {"gsm8k": 0.0, "math": 0.0, "numglue": 0.0, "svamp": 0.0, "deepmind": 0.0,
          "mmlu_math": 0.25}  # fmt: skip

#: Smallest effect of interest in average accuracy (points) for the equivalence test: below
#: the paper's smallest FT+UP gain (+1.2 points, Table 2).
ACCURACY_MARGIN = 1.0


def _mean_sd(vals, digits: int = 1, scale: float = 1.0) -> str:
    """``mean ± sd`` over the finite values (sample sd, ddof=1, everywhere in the report)."""
    v = scale * np.asarray(vals, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "–"
    if v.size == 1:
        return f"{v[0]:.{digits}f}"
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}"


def chance_levels(ds) -> dict[str, float]:
    """Chance accuracy per format: :data:`CHANCE`, MMLU-Math's from the run's own key.

    When the gold letters are stored, MMLU-Math's chance is the best constant-letter baseline
    of the key (issue 36: with sorted options "always B" scored 55 %, not 25 %).
    """
    out = dict(CHANCE)
    if "item_gold" in ds.coords:
        gold = [g for g in ds["item_gold"].values if g]
        if gold:
            out["mmlu_math"] = constant_letter_chance(gold)
    return out


def _table(ds, cols: Mapping[str, str], title: str) -> list[str]:
    """Mean ± std (over seeds) per benchmark and average, columns = variants.

    A table whose own variants (those other than PT, FT, FT+UP and FT with FT+UP's steps) were
    all left out of the run is omitted rather than drawn with the baselines only.
    """
    have = [c for c in cols if c in ("pt", "chance") or c in ds["variant"].values]
    own = [c for c in cols if c not in ("pt", "chance", "ft", "ft_up", "ft_matched")]
    if own and not any(c in have for c in own):
        return []
    lines = [
        f"### {title}",
        "",
        "| Dataset | " + " | ".join(cols[c] for c in have) + " |",
        "|---|" + "---:|" * len(have),
    ]

    chance = chance_levels(ds)

    def cell(c, b):
        if c == "chance":
            return f"{100 * (np.mean(list(chance.values())) if b == 'avg' else chance[b]):.1f}"
        if c == "pt":
            v = (
                ds["pt_accuracy"].sel(benchmark=b).values
                if b != "avg"
                else np.nanmean(ds["pt_accuracy"].values)
            )
            return f"{100 * float(v):.1f}"
        a = ds["accuracy"].sel(variant=c)
        a = a.mean("benchmark") if b == "avg" else a.sel(benchmark=b)
        return _mean_sd(a.values, 1, 100)

    for b in [*BENCHMARKS, "avg"]:
        lines.append(f"| {_BNAME.get(b, 'Avg.')} | " + " | ".join(cell(c, b) for c in have) + " |")
    return lines + [""]


#: The paired comparisons of the report (claim tested: see the paper's table in VARIANTS).
_PAIRS = [("ft_up", "ft"), ("ft_up", "ft_matched"), ("ft_matched", "ft"), ("random", "ft"),
          ("easy", "ft"), ("ft_up", "random"), ("ft_up", "easy"), ("ft_up", "ft_up_last"),
          ("ft_up_k10", "ft_up"), ("ft_up_k15", "ft_up"), ("ft_up_self", "ft_up"),
          ("ft_up_muon", "ft_muon"), ("ft_fsam", "ft"), ("ft_up", "ft_fsam"),
          ("ft_up_clean", "ft_up")]  # fmt: skip


def _avg_accuracy(ds, v: str) -> np.ndarray:
    """Average accuracy over the benchmarks, in points, per seed."""
    return 100 * ds["accuracy"].sel(variant=v).mean("benchmark").values


def _source_losses(ds, v: str | None):
    """Held-out loss per (seed, source) (``v=None``: the pretrained model, per source)."""
    da = ds["pt_heldout_loss"] if v is None else ds["heldout_loss"].sel(variant=v)
    return da.groupby("heldout_source").mean("heldout")


def _mean_heldout_loss(ds, v: str) -> np.ndarray:
    """Mean held-out solution loss over problems (nats/token), per seed."""
    return ds["heldout_loss"].sel(variant=v).mean("heldout").values


def _worst_source_loss(ds, v: str) -> np.ndarray:
    """Held-out loss of the worst-learned source, per seed (uniformity of learning)."""
    return _source_losses(ds, v).max("heldout_source").values


def _diffs(
    ds,
    pairs: Sequence[tuple[str, str]],
    metric=_avg_accuracy,
    what: str = "average accuracy",
    unit: str = "points",
    higher_is_better: bool = True,
    digits: int = 2,
    margin: float | None = None,
) -> list[str]:
    """Paired differences ``metric(a) - metric(b)`` over seeds, with a 95 % t-interval.

    The verdict: ``a better``/``a worse`` when the 95 % interval excludes 0; with a ``margin``
    (smallest effect of interest) also the equivalence test (TOST: the 90 % interval inside
    ``±margin``), so the outcome is one of four: different, equivalent, different but within
    the margin (negligible), or not shown (neither; inside the seed noise).
    """
    note = f"; equivalence margin ±{margin:g} (90 % interval, TOST)" if margin else ""
    lines = [
        f"### Paired differences in {what} ({unit}; 95 % t-interval over seeds{note})",
        "",
        "| comparison | mean | 95 % CI | per seed | verdict |",
        "|---|---:|---|---|---|",
    ]
    for a, b in pairs:
        if a not in ds["variant"].values or b not in ds["variant"].values:
            continue
        d = np.asarray(metric(ds, a)) - np.asarray(metric(ds, b))
        m, lo, hi = paired_ci(d)
        n = int(np.isfinite(d).sum())
        above, below = lo > 0, hi < 0  # the interval excludes 0
        if n == 0:
            verdict = "no seed finished"
        elif n == 1:
            verdict = "one seed: no interval"
        else:
            _, lo90, hi90 = paired_ci(d, level=0.90)
            equivalent = margin is not None and -margin < lo90 and hi90 < margin
            if above or below:
                verdict = f"{a} better" if above == higher_is_better else f"{a} worse"
                if equivalent:
                    verdict += f", but within ±{margin:g} (negligible)"
            elif equivalent:
                verdict = f"equivalent within ±{margin:g}"
            else:
                verdict = "not shown: inside the seed noise"
        if 0 < n < d.size:
            verdict += f" ({n} of {d.size} seeds; the others gave no number)"
        f = f"{{:+.{digits}f}}"
        lines.append(
            f"| {a} − {b} | {f.format(m)} | [{f.format(lo)}, {f.format(hi)}] | "
            f"{', '.join(f.format(x) for x in d)} | {verdict} |"
        )
    return lines + [""]


def _source_accuracy(ds, v: str | None):
    """Held-out accuracy (points) per (seed, source) over the answered problems.

    ``v=None``: the pretrained model's, per source.
    """
    da = ds["pt_heldout_correct"] if v is None else ds["heldout_correct"].sel(variant=v)
    return 100 * da.groupby("heldout_source").mean("heldout", skipna=True)


def _worst_source_accuracy(ds, v: str) -> np.ndarray:
    """Held-out accuracy (points) of each run's worst-learned source, per seed."""
    return _source_accuracy(ds, v).min("heldout_source").values


def _mean_source_accuracy(ds, v: str) -> np.ndarray:
    """Held-out accuracy (points), unweighted mean over sources, per seed."""
    return _source_accuracy(ds, v).mean("heldout_source").values


def _source_accuracy_table(ds, cols: Sequence[str]) -> list[str]:
    """Held-out accuracy per source (rows) and variant (columns), mean ± sd over seeds.

    With the sources' FT learning times (half-drop step of the probe loss, eq. 11), when
    recorded: the premise of the paper is that sources are learned at different times.
    """
    have = [c for c in cols if c == "pt" or c in ds["variant"].values]
    per = {c: _source_accuracy(ds, None if c == "pt" else c) for c in have}
    answered = np.isfinite(ds["pt_heldout_correct"]).groupby(ds["heldout_source"]).sum()
    t_src = None
    if "t_sources" in ds and "ft" in ds["variant"].values:
        t_src = ds["t_sources"].sel(variant="ft")
    lines = [
        "### Accuracy per source (held-out problems of the training distribution, %)",
        "",
        "Greedy answers to the first held-out problems of each source, scored by the "
        "evaluator's rules for the source's answer style; mean ± sd over seeds."
        + (" FT t½: the step at which FT's probe loss of the source made half its drop "
           "(mean over seeds; learning time, eq. 11)." if t_src is not None else ""),
        "",
        "| source | n | " + ("FT t½ | " if t_src is not None else "")
        + " | ".join("PT" if c == "pt" else c for c in have) + " |",
        "|---|---:|" + ("---:|" if t_src is not None else "") + "---:|" * len(have),
    ]  # fmt: skip
    for src in per[have[0]]["heldout_source"].values:
        short = Path(str(src)).stem
        t = ""
        if t_src is not None:
            t = f"{np.nanmean(t_src.sel(source=src).values):.0f} | "
        cells = [_mean_sd(per[c].sel(heldout_source=src).values, 1) for c in have]
        n = int(answered.sel(heldout_source=src))
        lines.append(f"| {short} | {n} | {t}" + " | ".join(cells) + " |")
    pad = "| " if t_src is not None else ""
    for label, fn in (("**mean over sources**", "mean"), ("**worst source**", "min")):
        cells = []
        for c in have:
            if c == "pt":
                v = getattr(per[c], fn)().values
            else:
                f = _mean_source_accuracy if fn == "mean" else _worst_source_accuracy
                v = f(ds, c)
            cells.append(_mean_sd(v, 1))
        lines.append(f"| {label} | | {pad}" + " | ".join(cells) + " |")
    return lines + [""]


def _heldout_table(ds, cols: Sequence[str]) -> list[str]:
    """Held-out solution loss per source (rows) and variant (columns), mean ± sd over seeds."""
    have = [c for c in cols if c == "pt" or c in ds["variant"].values]
    per = {c: _source_losses(ds, None if c == "pt" else c) for c in have}
    n_nan = int(np.isnan(ds["pt_heldout_loss"].values).sum())
    lines = [
        "### Held-out solution loss (nats/token, lower is better; clean problems from the "
        "training distribution)",
        "",
        f"{ds.sizes['heldout']} problems, {n_nan} without a scored token (prompt cut at "
        "`max_length`; left out of every mean).",
        "",
        "| source | " + " | ".join("PT" if c == "pt" else c for c in have) + " |",
        "|---|" + "---:|" * len(have),
    ]

    for src in per[have[0]]["heldout_source"].values:
        short = Path(str(src)).stem
        lines.append(
            f"| {short} | "
            + " | ".join(_mean_sd(per[c].sel(heldout_source=src).values, 3) for c in have)
            + " |"
        )
    for label, fn in (("**mean**", "mean"), ("**worst source**", "max")):
        cells = []
        for c in have:
            if c == "pt":
                v = ds["pt_heldout_loss"].mean().values if fn == "mean" else per[c].max().values
            else:
                v = _mean_heldout_loss(ds, c) if fn == "mean" else _worst_source_loss(ds, c)
            cells.append(_mean_sd(v, 3))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + [""]


def _contamination_lines(ds) -> list[str]:
    """The corpus's decontamination check (``contamination.json`` of the corpus folder)."""
    if "contamination" not in ds.attrs:
        return []
    rep = json.loads(ds.attrs["contamination"])
    rows = [(k, v) for k, v in rep.items() if k != "reference"]
    return [
        "Decontamination (against the training and pre-training problems): "
        + "; ".join(
            f"{_BNAME.get(k, k)} {v['exact']} exact / {v['near']} near-duplicates of {v['n']}, "
            f"template overlap {100 * v['template_overlap']:.0f} %"
            for k, v in rows
        )
        + ". Template overlap is by design for GSM8K, MATH, NumGLUE and the held-out split "
        "(training templates, fresh numbers).",
        "",
    ]


def _program_table(ds) -> list[str]:
    """Share of completions that are programs, and their accuracy with and without execution."""
    if "programs" not in ds:
        return []
    n = ds.attrs.get("n_test") or 1
    on = "on" if ds.attrs.get("execute_programs", 1) else "off (scored on their text)"
    lines = [
        "### Program-of-thought completions (run in the sandbox; execution " + on + ")",
        "",
        "Completions containing `print(` (MAmmoTH's test), summed over the 6 benchmarks; "
        "accuracy of those programs when run (what they print) and when read as text; "
        "mean ± sd over seeds.",
        "",
        "| model | programs % of completions | programs correct, run % | programs correct, "
        "as text % | overall accuracy, run | overall accuracy, as text |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = [("PT", "pt_", None)] + [(str(v), "", v) for v in ds["variant"].values]
    for label, pre, v in rows:

        def get(k, pre=pre, v=v):
            da = ds[pre + k] if v is None else ds[k].sel(variant=v)
            return da.sum("benchmark").values  # per seed (a scalar for PT)

        progs, ok, ok_text = get("programs"), get("programs_correct"), get("programs_correct_text")
        acc = (ds["pt_accuracy"] if v is None else ds["accuracy"].sel(variant=v)).values
        correct = n * np.asarray(acc).sum(-1)
        total = n * ds.sizes["benchmark"]
        with np.errstate(invalid="ignore", divide="ignore"):
            cells = [
                _mean_sd(100 * progs / total, 1),
                _mean_sd(np.where(progs > 0, 100 * ok / progs, np.nan), 1),
                _mean_sd(np.where(progs > 0, 100 * ok_text / progs, np.nan), 1),
                _mean_sd(100 * correct / total, 1),
                _mean_sd(100 * (correct - ok + ok_text) / total, 1),
            ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + [""]


def accuracy_by_split(ds, v: str, mapped: bool = False) -> dict:
    """``{benchmark: {"id", "ood", "all"}}``: mean accuracy (%) of ``v`` per format and half.

    Over seeds and items, from the per-item verdicts (``pt``: the pretrained model); ``{}``
    without them.
    """
    if "item_correct" not in ds or "item_split" not in ds.coords:
        return {}
    name = "item_correct_mapped" if mapped else "item_correct"
    x = ds["pt_item_correct"] if v == "pt" else ds[name].sel(variant=v)
    x = np.where(x.values >= 0, x.values.astype(float), np.nan)
    bench, split = ds["item_benchmark"].values, ds["item_split"].values
    out = {}
    for b in BENCHMARKS:
        m = bench == b
        out[b] = {
            sp: float(100 * np.nanmean(x[..., m & (split == sp)]))
            if (m & (split == sp)).any() else float("nan")
            for sp in ("id", "ood")
        }  # fmt: skip
        out[b]["all"] = float(100 * np.nanmean(x[..., m]))
    return out


def item_diffs(ds, a: str, b: str, n_boot: int = 2000) -> dict:
    """``a - b`` average accuracy (points) with two intervals.

    The t-interval over seeds (of the per-seed averages) and the paired two-way bootstrap over
    seeds and items (formats kept as strata).
    """
    if "item_correct" not in ds or "item_benchmark" not in ds.coords:
        return {}
    xa = ds["item_correct"].sel(variant=a).values.astype(float)
    xb = ds["item_correct"].sel(variant=b).values.astype(float)
    xa[xa < 0] = np.nan
    xb[xb < 0] = np.nan
    bench = ds["item_benchmark"].values
    # per-seed average over formats (each format's mean, then the mean of the six)
    per_seed = np.nanmean(
        np.stack([np.nanmean(xa[:, bench == f] - xb[:, bench == f], axis=1) for f in BENCHMARKS]),
        axis=0,
    )
    m, lo, hi = paired_ci(per_seed)
    bm, blo, bhi = paired_bootstrap(xa, xb, bench, n_boot=n_boot)
    return {
        "mean": 100 * m,
        "t_interval": [100 * lo, 100 * hi],
        "bootstrap_interval": [100 * blo, 100 * bhi],
        "bootstrap_mean": 100 * bm,
        "n_seeds": int(np.isfinite(per_seed).sum()),
        "n_items": int(xa.shape[1]),
    }


def _design_checks(ds) -> list[str]:
    """Issue 36's checks, as report lines.

    Per-format in-distribution vs held-out-template accuracy, both multiple-choice scorings
    against the key's constant-letter chance, the item-resampled intervals and the selection
    check.
    """
    out: list[str] = []
    variants = ds["variant"].values.tolist()
    if "item_correct" in ds and "item_split" in ds.coords:
        out += [
            "### Accuracy per format: in-distribution (training templates) vs held-out "
            "templates (%)",
            "",
            "| variant | " + " | ".join(f"{_BNAME[b]} id / ood" for b in BENCHMARKS) + " |",
            "|---|" + "---:|" * len(BENCHMARKS),
        ]
        for v in ["pt", *variants]:
            acc = accuracy_by_split(ds, v)
            cells = [f"{acc[b]['id']:.1f} / {acc[b]['ood']:.1f}" for b in BENCHMARKS]
            out.append(f"| {v} | " + " | ".join(cells) + " |")
        gold = [g for g in ds["item_gold"].values if g]
        if gold:
            chance = constant_letter_chance(gold)
            mc = ", ".join(
                f"{v} {accuracy_by_split(ds, v)['mmlu_math']['all']:.1f} / "
                f"{accuracy_by_split(ds, v, mapped=True)['mmlu_math']['all']:.1f}"
                for v in variants
            )
            out += [
                "",
                f"MMLU-Math, letter / value mapped to its option (%): {mc}; chance (the best "
                f"constant letter of this key) {100 * chance:.1f} %.",
            ]
        out.append("")
        for a, b in (("ft_up", "ft_matched"), ("ft_up", "ft")):
            if a in variants and b in variants:
                d = item_diffs(ds, a, b)
                out.append(
                    f"{a} − {b}: {d['mean']:+.2f} points; t-interval over {d['n_seeds']} seeds "
                    f"[{d['t_interval'][0]:+.2f}, {d['t_interval'][1]:+.2f}]; paired bootstrap "
                    f"over seeds and {d['n_items']} items [{d['bootstrap_interval'][0]:+.2f}, "
                    f"{d['bootstrap_interval'][1]:+.2f}] (the bootstrap decides: it counts the "
                    "item sample's noise too)."
                )
        out.append("")
    checks = json.loads(ds.attrs.get("selection_check", "{}"))
    if checks:
        out += [
            "### Selection check: does FT+UP upsample the examples the proxy learns late?",
            "",
            "| seed | AUC (selected later) | Spearman share vs time | median t selected | "
            "median t rest | recordings before median half-drop |",
            "|---|---:|---:|---:|---:|---:|",
        ]

        def f(x, d=2):
            return "–" if x is None else f"{x:.{d}f}"

        for s_, c in checks.items():
            out.append(
                f"| {s_} | {f(c['auc'])} | {f(c['spearman_share_vs_time'])} | "
                f"{f(c['median_time_selected'], 1)} | {f(c['median_time_rest'], 1)} | "
                f"{c['recordings_before_median_half_drop']} |"
            )
        out.append("")
    return out


def report(ds) -> str:
    """Markdown report: the tables, paired differences, entropies and the hard cluster.

    Tables in the layouts of the paper's Tables 2, 4, 6, Fig. 4a/4c and the optimizers; paired
    differences with 95 % intervals; learning-time entropies; the hard cluster's composition.
    """
    out = [
        f"# Confirmation of the upsampling claims ({ds.attrs.get('scale')} scale, "
        f"{ds.sizes['seed']} seeds)",
        "",
    ]
    if "cpu_seconds" in ds.attrs:
        cpu = json.loads(ds.attrs["cpu_seconds"])
        total = sum(cpu.values())
        out += [
            f"Compute: {total:.0f} CPU-seconds "
            f"({', '.join(f'{k} {v:.0f}' for k, v in cpu.items())}) = about "
            f"{total / 60 / 2:.1f} minutes on 2 idle cores (one thread per worker).",
            "",
        ]
    out += _contamination_lines(ds)
    out += _table(
        ds,
        {
            "chance": "Chance",
            "pt": "PT",
            "ft": "FT",
            "ft_matched": "FT (FT+UP's steps)",
            "ft_up": "FT+UP",
        },  # fmt: skip
        "Table 2 layout",
    )
    out += _table(
        ds,
        {"ft": "FT", "random": "Rand.", "easy": "Easy", "ft_up": "Hard"},
        "Table 4 layout (compute-matched upsampling)",
    )
    out += _table(
        ds,
        {"ft": "FT", "ft_up": "Traj.", "ft_up_last": "Ckpt."},
        "Table 6 layout (trajectory vs last checkpoint)",
    )
    out += _table(
        ds,
        {"ft_up": "K=5", "ft_up_k10": "K=10", "ft_up_k15": "K=15", "ft_up_self": "proxy=target"},
        "Fig. 4a/4c: proxy and trajectory length",
    )
    out += _table(
        ds,
        {"ft": "FT", "ft_up": "FT+UP", "ft_up_clean": "FT+UP (no corrupted)"},
        "Beyond the paper: upsampling without the corrupted (noisy) hard examples",
    )
    out += _table(
        ds,
        {
            "ft": "AdamW",
            "ft_up": "AdamW+UP",
            "ft_muon": "Muon",
            "ft_up_muon": "Muon+UP",
            "ft_fsam": "FSAM",
        },
        "Optimizers",
    )
    out += _diffs(ds, _PAIRS, margin=ACCURACY_MARGIN)
    out += _design_checks(ds)
    if "heldout_correct" in ds:
        out += _source_accuracy_table(ds, ["pt", *ds["variant"].values.tolist()])
        out += _diffs(ds, _PAIRS, _worst_source_accuracy, "worst-source held-out accuracy")
    out += _program_table(ds)
    if "heldout_loss" in ds:
        out += _heldout_table(ds, ["pt", *ds["variant"].values.tolist()])
        out += _diffs(ds, _PAIRS, _mean_heldout_loss, "mean held-out loss", "nats/token",
                      higher_is_better=False, digits=4)  # fmt: skip
        out += _diffs(ds, _PAIRS, _worst_source_loss, "worst-source held-out loss", "nats/token",
                      higher_is_better=False, digits=4)  # fmt: skip
    if "train_seconds" in ds:
        ts = ds["train_seconds"].mean("seed")
        out += [
            "### Training time per run (s, mean over seeds)",
            "",
            ", ".join(f"{v}: {float(ts.sel(variant=v)):.0f}" for v in ds["variant"].values),
            "",
        ]
    out += [
        "### Learning-time entropy (main paper eq. 11) during fine-tuning",
        "",
        "Entropy of the sum-normalized half-drop times of the 13 sources' probe losses, "
        "and of the proxy's two clusters (hard, easy); higher = more uniform learning "
        "(mean ± sd over seeds, ddof=1, as in every table here).",
        "",
        "| variant | entropy (sources) | entropy (clusters) | t_easy | t_hard |",
        "|---|---:|---:|---:|---:|",
    ]
    for v in ds["variant"].values:
        e1 = ds["entropy_sources"].sel(variant=v).values
        e2 = ds["entropy_clusters"].sel(variant=v).values
        th = ds["t_hard"].sel(variant=v).values
        te = ds["t_easy"].sel(variant=v).values
        out.append(
            f"| {v} | {_mean_sd(e1, 4)} | {_mean_sd(e2, 4)} | {np.nanmean(te):.1f} | "
            f"{np.nanmean(th):.1f} |"
        )
    if "ft_up" in ds["variant"].values:
        de = ds["entropy_sources"].sel(variant="ft_up") - ds["entropy_sources"].sel(variant="ft")
        da = (ds["accuracy"].sel(variant="ft_up") - ds["accuracy"].sel(variant="ft")).mean(
            "benchmark"
        )
        out += [
            "",
            f"Paired entropy change FT+UP − FT (sources): {np.nanmean(de.values):+.4f} "
            f"(per seed {', '.join(f'{x:+.4f}' for x in de.values)}); accuracy change per "
            f"seed {', '.join(f'{100 * x:+.1f}' for x in da.values)} points.",
        ]
    comp = json.loads(ds.attrs.get("hard_composition", "{}"))
    if comp:
        out += [
            "",
            "### The hard cluster: late-learned or noisy? (small proxy, K=5)",
            "",
            "| seed | hard % | corrupted in hard % | in easy % | level hard | level easy | "
            "proxy loss drop hard (clean / corrupted) | easy | final loss hard (clean / "
            "corrupted) | easy |",
            "|---|---:|---:|---:|---:|---:|---|---:|---|---:|",
        ]
        for s, c in comp.items():
            out.append(
                f"| {s} | {100 * c['hard_fraction']:.1f} | {100 * c['corrupted_in_hard']:.1f} | "
                f"{100 * c['corrupted_in_easy']:.1f} | {c['mean_level_hard']:.2f} | "
                f"{c['mean_level_easy']:.2f} | {c['drop_hard_clean']:.3f} / "
                f"{c['drop_hard_corrupted']:.3f} | {c['drop_easy']:.3f} | "
                f"{c['final_hard_clean']:.3f} / {c['final_hard_corrupted']:.3f} | "
                f"{c['final_easy']:.3f} |"
            )
        shares = [c["hard_share_by_source"] for c in comp.values() if "hard_share_by_source" in c]
        if shares:
            mean = {k: np.mean([sh[k] for sh in shares]) for k in shares[0]}
            out += [
                "",
                "Share of each source in the hard cluster (mean over seeds): "
                + ", ".join(f"{k} {100 * v:.0f} %" for k, v in sorted(mean.items(),
                                                                       key=lambda kv: -kv[1]))
                + ".",
            ]  # fmt: skip
    return "\n".join(out) + "\n"
