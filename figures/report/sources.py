"""What is summarised, figure by figure: the result files it draws and the numbers it reports.

Each :class:`Source` names a registered figure (or ``"theory"``), the result files under
``results/`` that the figure reads (with the :class:`~figures.report.reduce.Reduction` that makes
each small enough to commit), and a ``numbers(results_dir)`` function that computes, from the
full results, the numbers the findings page reads. ``python -m figures summaries`` runs them
all (:func:`figures.report.summaries.write_summaries`).

The numbers are computed with the package's own analysis functions wherever one exists (the
Figure 1 summary, the confirmation's paired intervals), so the page and the per-experiment
reports cannot disagree.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from .reduce import Reduction

__all__ = ["Source", "SOURCES", "source"]


@dataclasses.dataclass(frozen=True)
class Source:
    """One summarised figure (or the theory report).

    Attributes:
        name: the figure's registry name (``"theory"`` for ``python -m theory``).
        files: ``{result path under results/: Reduction}``; every file the figure reads.
        numbers: ``numbers(results_dir) -> dict`` of the values the page reads (``None``: the
            figure's claims read another source's numbers; only its data and provenance).
        producer: the command that makes the full results (defaults to the figure's).
    """

    name: str
    files: Mapping[str, Reduction]
    numbers: Callable[[Path], dict] | None
    producer: str | None = None


# ----------------------------------------------------------------------------- helpers


def _nc(results_dir: Path, rel: str):
    from sims.runtime.io import read_netcdf

    return read_netcdf(Path(results_dir) / rel)


def _json(results_dir: Path, rel: str) -> dict:
    return json.loads((Path(results_dir) / rel).read_text())


def _f(x) -> float | None:
    """A JSON-ready float (``None`` for NaN)."""
    x = float(x)
    return None if not np.isfinite(x) else x


def _sig(x, digits: int = 4) -> float:
    """``x`` to ``digits`` significant digits (per-seed lists of data stored at 4 digits)."""
    return float(f"{float(x):.{digits}g}")


def _stats(values) -> dict:
    """n, mean, sd, median, quartiles, min, max of the finite values."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"n": 0}
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {
        "n": int(v.size),
        "mean": _f(v.mean()),
        "sd": _f(v.std(ddof=1)) if v.size > 1 else 0.0,
        "median": _f(med),
        "q25": _f(q25),
        "q75": _f(q75),
        "min": _f(v.min()),
        "max": _f(v.max()),
    }


def _runs(values, digits: int) -> list:
    """Per-run values for the page's resampling: ``digits`` significant digits, None for NaN.

    ``digits`` is the precision the committed data file keeps for the same variable, so the list
    is the same whether it is computed from the full result or from its committed reduction.
    """
    v = np.asarray(values).ravel()
    if v.dtype.kind in "biu":
        return [int(x) for x in v]
    return [_sig(x, digits) if np.isfinite(x) else None for x in v.astype(float)]


#: The Figure 1 methods whose per-run values the page's rows resample.
LA_FIG1_RUN_METHODS = ("gd", "gd_upsample", "sam")


def la_fig1_per_run(ds, digits: int = 4) -> dict:
    """Figure 1's per-run values: test loss at both horizons, features learned by the long one.

    Per method of :data:`LA_FIG1_RUN_METHODS`; run ``i`` of every method is paired (same data
    and initialization). ``digits``: the ``FIG1`` reduction's.
    """
    out = {}
    for m in LA_FIG1_RUN_METHODS:
        s = ds.sel({"method": m})
        out[m] = {
            "test_loss_paper": _runs(s.test_loss_at.sel({"horizon": "paper"}).values, digits),
            "test_loss_long": _runs(s.test_loss_at.sel({"horizon": "long"}).values, digits),
            "n_learned_long": _runs(s.n_learned.sel({"horizon": "long"}).values, digits),
        }
    return out


def la_mechanism_per_run(ds, digits: int = 5) -> dict:
    """Per run: measured and predicted entropies of GD's, SAM's and head-wise SAM's times.

    The entropy of the learning times (None where a run did not learn every feature).
    """
    return {
        var: {
            str(m): _runs(ds[var].sel({"method": m}).values, digits)
            for m in ds.method.values
            if str(m) in ("gd", "sam", "sam_headwise")
        }
        for var in ("entropy_measured", "entropy_predicted")
    }


def la_upsampling_per_run(ds, digits: int = 5) -> dict:
    """Per run: entropies of GD and of the hard and condition selections, and the condition.

    Also whether each selection meets the entropy condition and its predicted entropy change.
    """
    sels = [k for k in ("hard", "condition") if k in ds.selection.values]
    return {
        "entropy": {
            k: _runs(ds.entropy.sel(run_kind=k).values, digits) for k in ("gd", *sels)
        },
        "condition_met": {k: _runs(ds.condition_met.sel(selection=k).values, digits)
                          for k in sels},
        "predicted_entropy_change": {
            k: _runs(ds.predicted_entropy_change.sel(selection=k).values, digits) for k in sels
        },
    }  # fmt: skip


# ----------------------------------------------------------------------------- main paper


def _sam_entropy(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sam_entropy/sam_entropy.nc")
    inside = ds.rho.values > 0
    return {
        "eigenvalues": ds.lam.values.tolist(),
        "rho_bound": float(ds.attrs["rho_bound"]),
        "rho": ds.rho.values[inside].tolist(),
        "entropy_gd": float(ds.entropy_gd),
        "entropy_gain": ds.entropy_gap.values[inside].tolist(),
        "ordering_holds": ds.ordering_holds.values[inside].astype(bool).tolist(),
        "min_majorization_margin": ds.min_margin.values[inside].tolist(),
        "entropy_ceiling": float(ds.entropy_ceiling),
        "xcheck_quad_max": float(np.max(ds.xcheck_quad)),
        "xcheck_ode_max": float(np.max(ds.xcheck_ode)),
    }


def _sam_entropy_sweep(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sam_entropy/sweep.nc")
    cond = ds.condition.values.astype(bool)
    out = {
        "n_spreads": int(ds.spread.size),
        "rho_fractions": ds.rho_fraction.values.tolist(),
        "models": {},
    }
    for m in ds.model.values:
        s = ds.sel(model=m)
        holds, learned = s.ordering_holds.values, s.learned_all.values
        gap = s.entropy_gap.values
        out["models"][str(m)] = {
            "inside_points": int(learned[:, cond].size),
            "inside_learned": int(learned[:, cond].sum()),
            "inside_holds": int((holds & learned)[:, cond].sum()),
            "outside_points": int(learned[:, ~cond].size),
            "outside_learned": int(learned[:, ~cond].sum()),
            "outside_holds": int((holds & learned)[:, ~cond].sum()),
            "max_gap_inside": _f(np.nanmax(np.where(cond, gap, np.nan))),
            "min_gap_learned": _f(np.nanmin(np.where(learned, gap, np.nan))),
        }
    return out


def _entropy_toy(results_dir: Path) -> dict:
    ds = _nc(results_dir, "fig05_entropy_toy/toy.nc")
    return {
        "eigenvalues": ds.lam.values.tolist(),
        "rho": ds.rho.values.tolist(),
        "rho_bound": float(ds.attrs["rho_bound"]),
        "entropy_gd": float(ds.entropy_gd),
        "entropy_sam": ds.entropy_sam.values.tolist(),
        "ordering_holds": ds.ordering_holds.values.astype(bool).tolist(),
        "t_gd": ds.t_gd.values.tolist(),
        "t_sam": ds.t_sam.values[0].tolist(),
    }


def _la_fig1(results_dir: Path) -> dict:
    ds = _nc(results_dir, "linear_attention/figure1.nc")
    out = dict(ds.attrs["meta"]["summary"])
    out["n_runs"] = int(ds.run.size)
    out["saddle_level"] = ds.saddle_level.values.tolist()
    out["per_run"] = la_fig1_per_run(ds, FIG1.sig)
    return out


def _la_mechanism(results_dir: Path) -> dict:
    ds = _nc(results_dir, "linear_attention/sam_mechanism.nc")
    gd_m = ds.measured.sel({"method": "gd"}).values
    gd_p = ds.predicted.sel({"method": "gd"}).values
    out = {}
    for m in ds.method.values:
        if m == "gd":
            continue
        meas = ds.measured.sel({"method": m}).values / gd_m
        pred = ds.predicted.sel({"method": m}).values / gd_p
        dh = (
            ds.entropy_measured.sel({"method": m}).values
            - ds.entropy_measured.sel({"method": "gd"}).values
        )
        dp = (
            ds.entropy_predicted.sel({"method": m}).values
            - ds.entropy_predicted.sel({"method": "gd"}).values
        )
        out[str(m)] = {
            "median_time_ratio_measured": np.nanmedian(meas, axis=0).tolist(),
            "median_time_ratio_predicted": np.nanmedian(pred, axis=0).tolist(),
            "entropy_gain_measured": _stats(dh),
            "entropy_gain_predicted": _stats(dp),
            "runs_with_entropy": int(np.isfinite(dh).sum()),
        }
    esc = _nc(results_dir, "linear_attention/sam_escape.nc")
    out["escape"] = {"rho": esc.rho.values.tolist(), "background": esc.background.values.tolist()}
    out["per_run"] = la_mechanism_per_run(ds, WHOLE.sig)
    return out


def _la_upsampling(results_dir: Path) -> dict:
    ds = _nc(results_dir, "linear_attention/upsampling_study.nc")
    out = dict(ds.attrs["meta"]["summary"])
    out["n_runs"] = int(ds.run.size)
    out["per_run"] = la_upsampling_per_run(ds, WHOLE.sig)
    return out


def _la_theory_vs_sim(results_dir: Path) -> dict:
    ds = _nc(results_dir, "linear_attention/theory_vs_sim.nc")
    out = {"rho": ds.rho.values.tolist(), "sources": {}}
    for s in ds.source.values:
        out["sources"][str(s)] = {
            "time": ds.time.sel(source=s).values.tolist(),
            "entropy": ds.entropy.sel(source=s).values.tolist(),
        }
    return out


# ----------------------------------------------------------------------------- LLM confirmation


def paired_per_seed(pairs: dict, a: str, b: str, metric: str) -> list[float] | None:
    """Per-seed ``a − b`` from :func:`confirm_numbers`'s ``pairs``.

    Two pairs against FT are subtracted (same seeds) when ``a-b`` itself is not stored;
    ``None`` when a variant was not run.
    """
    if f"{a}-{b}" in pairs:
        return list(pairs[f"{a}-{b}"][metric]["per_seed"])
    if f"{a}-ft" in pairs and f"{b}-ft" in pairs:
        x, y = pairs[f"{a}-ft"][metric]["per_seed"], pairs[f"{b}-ft"][metric]["per_seed"]
        return [p - q for p, q in zip(x, y, strict=True)]
    return None


_CHECK_KEYS = ("auc", "spearman_share_vs_time", "median_time_selected", "median_time_rest",
               "mannwhitney_p", "spearman_p")  # fmt: skip


def _item_record(d: dict) -> dict:
    """An ``item_diffs`` result as the summary keeps it (the bootstrap decides, issue 36)."""
    return {
        "mean": _f(d["mean"]),
        "t_interval": [_f(x) for x in d["t_interval"]],
        "bootstrap_interval": [_f(x) for x in d["bootstrap_interval"]],
        "n_seeds": d["n_seeds"],
        "n_items": d["n_items"],
        "decides": "bootstrap",
    }


def _design_numbers(ds, have) -> dict:
    """Issue 36's numbers of a confirmation run with per-item verdicts.

    Items per format, the key's largest gold-letter share (the best constant-letter baseline),
    accuracy per format (all items, and per half: ``id`` = training templates, ``ood`` = held-out
    templates; multiple choice also with values mapped to options), the paired intervals of
    FT+UP against ft_matched and FT from resampling seeds and items beside the t-interval, the
    selection check (per seed and its medians over seeds), the recordings before the median
    half-drop (the smallest over seeds) and the measured time.
    """
    from llm_validation.data.records import BENCHMARKS
    from llm_validation.experiments.confirm.analysis import constant_letter_chance
    from llm_validation.experiments.confirm.report import accuracy_by_split, item_diffs

    bench = ds["item_benchmark"].values
    out: dict = {"items_per_format": {b: int((bench == b).sum()) for b in BENCHMARKS}}
    gold = [g for g in ds["item_gold"].values if g]
    if gold:
        out["mmlu_gold_letter_share_max"] = _f(constant_letter_chance(gold))
    per = {v: accuracy_by_split(ds, v) for v in [*have, "pt"]}
    out["accuracy_per_format"] = {
        v: {b: _f(a[b]["all"]) for b in BENCHMARKS} for v, a in per.items()
    }
    out["accuracy_per_format_split"] = {
        v: {b: {"id": _f(a[b]["id"]), "ood": _f(a[b]["ood"])} for b in BENCHMARKS}
        for v, a in per.items()
    }
    out["mmlu_accuracy_mapped"] = {
        v: _f(accuracy_by_split(ds, v, mapped=True)["mmlu_math"]["all"]) for v in have
    }
    out["item_intervals"] = {}
    for a, b in (("ft_up", "ft_matched"), ("ft_up", "ft"), ("ft_matched", "ft")):
        if a in have and b in have:
            out["item_intervals"][f"{a}-{b}"] = _item_record(item_diffs(ds, a, b))
    checks = json.loads(ds.attrs.get("selection_check", "{}"))
    if checks:

        def med(key):
            vals = [c[key] for c in checks.values() if c.get(key) is not None]
            return _f(np.median(vals)) if vals else None

        out["selection_check"] = {
            "auc_selected_vs_learning_time": med("auc"),
            "spearman_share_vs_learning_time": med("spearman_share_vs_time"),
            "median_learning_time_selected": med("median_time_selected"),
            "median_learning_time_rest": med("median_time_rest"),
            "n_seeds": len(checks),
            "summary": "medians over seeds",
            "per_seed": {s_: {k: c[k] for k in _CHECK_KEYS} for s_, c in checks.items()},
        }
        out["recordings_before_median_half_drop"] = min(
            c["recordings_before_median_half_drop"] for c in checks.values()
        )
    for k in ("wall_seconds_measured", "cpu_seconds_measured", "estimated_wall_seconds"):
        if k in ds.attrs:
            out[k] = _f(float(ds.attrs[k]))
    if "load" in ds.attrs:
        out["load"] = json.loads(ds.attrs["load"])
    return out


def confirm_numbers(ds) -> dict:
    """The confirmation's paired differences, entropies and hard cluster, from its aggregate.

    Uses :mod:`llm_validation.experiments.confirm`'s own metrics and intervals (``paired_ci``), so
    the page and ``report.md`` agree. Pairs are ``"a-b"`` for
    :data:`llm_validation.experiments.confirm._PAIRS` (plus the ones against FT), each with
    ``accuracy`` and ``worst_accuracy`` (the worst held-out source's, points), ``mean_loss`` and
    ``worst_loss`` (nats/token): ``{mean, lo, hi, per_seed}``.
    """
    from llm_validation.experiments import confirm as C

    have = [str(v) for v in ds["variant"].values]
    metrics = {"accuracy": C._avg_accuracy}
    if "heldout_loss" in ds:
        metrics.update(mean_loss=C._mean_heldout_loss, worst_loss=C._worst_source_loss)
    if "heldout_correct" in ds:
        metrics.update(worst_accuracy=C._worst_source_accuracy)
    pairs = {}
    for a, b in [*C._PAIRS, *((v, "ft") for v in have if v != "ft")]:
        if a not in have or b not in have or f"{a}-{b}" in pairs:
            continue
        pairs[f"{a}-{b}"] = {}
        for k, fn in metrics.items():
            d = np.asarray(fn(ds, a), dtype=float) - np.asarray(fn(ds, b), dtype=float)
            m, lo, hi = C.paired_ci(d)
            pairs[f"{a}-{b}"][k] = {
                "mean": _f(m),
                "lo": _f(lo),
                "hi": _f(hi),
                "per_seed": [_f(x) for x in d],
            }
    acc = {v: _f(np.nanmean(C._avg_accuracy(ds, v))) for v in have}
    acc["pt"] = _f(100 * np.nanmean(ds["pt_accuracy"].values))
    out = {
        "scale": str(ds.attrs.get("scale")),
        "n_seeds": int(ds.sizes["seed"]),
        "seeds": [int(s) for s in ds["seed"].values],
        "variants": have,
        "pairs": pairs,
        "accuracy_mean": acc,
        "train_seconds": {v: _f(ds["train_seconds"].sel(variant=v).mean()) for v in have},
        "entropy_sources": {
            v: [_f(x) for x in ds["entropy_sources"].sel(variant=v).values] for v in have
        },
        "entropy_sources_diff": {
            f"{v}-ft": [
                _f(x)
                for x in (
                    ds["entropy_sources"].sel(variant=v) - ds["entropy_sources"].sel(variant="ft")
                ).values
            ]
            for v in have
            if v != "ft"
        },
        "hard_composition": json.loads(ds.attrs.get("hard_composition", "{}")),
    }
    if "item_correct" in ds and "item_benchmark" in ds.coords:
        out.update(_design_numbers(ds, have))
    if "heldout_correct" in ds:
        out["worst_source_accuracy"] = {
            v: _f(np.nanmean(C._worst_source_accuracy(ds, v))) for v in have
        }
    if "heldout_loss" in ds:
        out["heldout_mean"] = {v: _f(np.nanmean(C._mean_heldout_loss(ds, v))) for v in have}
        out["worst_source"] = {}
        for v in have:
            per = C._source_losses(ds, v).mean("seed")
            i = int(np.argmax(per.values))
            out["worst_source"][v] = {
                "name": Path(str(per["heldout_source"].values[i])).stem,
                "mean": _f(per.values[i]),
            }
    return out


#: The 5-epoch horizon check of the confirmation (same corpus and pre-trained models).
CONFIRM_EP5 = (
    "python -m llm_validation confirm --scale cpu --epochs 5 --variants ft,ft_up,random,easy "
    "--reuse results/llm/confirm_cpu --out results/llm/confirm_cpu_ep5"
)


#: The CPU scale before issue 29 (``scale`` of its numbers): corpus levels 1-4, 6,000
#: pre-training problems x 3 epochs (1.74M tokens), 3 seeds, every variant; its fine-tuned models
#: sat at the accuracy floor (FT 3.15 %). Rows on variants today's default run leaves out
#: read it and say so.
PREVIOUS_CPU = "previous CPU (levels 1-4, 1.74M pre-training tokens, accuracy at the floor)"

#: The run that made the previous scale's numbers (the code of that commit, ``--variants all``).
CONFIRM_V1 = (
    "git checkout e3c21fc && python -m llm_validation confirm --scale cpu --variants all "
    "--out results/llm/confirm_cpu_v1"
)


def _llm_confirm(results_dir: Path) -> dict:
    return confirm_numbers(_nc(results_dir, "llm/confirm_cpu/results.nc"))


#: Issue 36's late-learner arm: FT+UP's count of examples, chosen as the latest learners by the
#: proxy's measured learning times (eq. 11) instead of the clustering; same corpus, pre-trained
#: models and proxy runs as the default run (``--reuse``), the first five seeds.
CONFIRM_LATE = (
    "python -m llm_validation confirm --scale cpu --variants ft,ft_up_late --seeds 0,1,2,3,4 "
    "--reuse results/llm/confirm_cpu --out results/llm/confirm_cpu_late"
)


def late_vs_default(late, default) -> dict:
    """``ft_up_late`` (its own run) against the default run's variants, paired by seed and item.

    Both runs share the corpus, the pre-trained model and the proxy runs (``--reuse``), so the
    seeds and benchmark items are the same; ``ft`` is fine-tuned in both, and its largest
    per-seed accuracy difference between them (``ft_rerun_max_diff``, points) says whether a
    cross-run pairing is sound (0: the runs are deterministic).
    """
    import xarray as xr

    from llm_validation.experiments.confirm.report import item_diffs

    seeds = sorted(set(late["seed"].values.tolist()) & set(default["seed"].values.tolist()))
    if not seeds:
        raise ValueError("the late-learner run and the default run share no seed")
    a, b = late.sel(seed=seeds), default.sel(seed=seeds)
    if not np.array_equal(a["item_benchmark"].values, b["item_benchmark"].values):
        raise ValueError("the late-learner run's benchmark items are not the default run's")
    out: dict = {"seeds": seeds}
    if "heldout_loss" in a and "heldout_loss" in b and "ft_matched" in b["variant"].values:
        from llm_validation.experiments.confirm.report import _mean_heldout_loss

        d = _mean_heldout_loss(a, "ft_up_late") - _mean_heldout_loss(b, "ft_matched")
        out["mean_loss_ft_up_late-ft_matched"] = [_f(x) for x in d]  # per seed, nats/token
    ft = [x["accuracy"].sel(variant="ft").values for x in (a, b)]
    out["ft_rerun_max_diff"] = _f(np.nanmax(np.abs(ft[0] - ft[1])))
    for other in ("ft_matched", "ft_up", "ft"):
        if other not in b["variant"].values:
            continue
        both = xr.Dataset(
            {"item_correct": xr.concat([a["item_correct"].sel(variant=["ft_up_late"]),
                                        b["item_correct"].sel(variant=[other])], dim="variant")},
        ).assign_coords(item_benchmark=("item", a["item_benchmark"].values))  # fmt: skip
        out[f"ft_up_late-{other}"] = _item_record(item_diffs(both, "ft_up_late", other))
    return out


def _llm_confirm_late(results_dir: Path) -> dict:
    late = _nc(results_dir, "llm/confirm_cpu_late/results.nc")
    out = confirm_numbers(late)
    out["vs_default"] = late_vs_default(late, _nc(results_dir, "llm/confirm_cpu/results.nc"))
    return out


#: Issue 29's CPU design (before issue 36): 5 seeds x ft, ft_matched, ft_up, random, easy; 60
#: items per format, one number away from a training template; FT 21.4 %. Rows on random and
#: easy upsampling, which issue 36's default leaves out, read it and say so.
I29_CPU = "issue 29's CPU design (5 seeds, 60 items per format, FT 21.4 %)"

#: The run that made issue 29's numbers (the code of its commit).
CONFIRM_I29 = (
    "git checkout 2c49762 && python -m llm_validation confirm --scale cpu "
    "--out results/llm/confirm_cpu_i29"
)


def _llm_confirm_i29(results_dir: Path) -> dict:
    return {**confirm_numbers(_nc(results_dir, "llm/confirm_cpu_i29/results.nc")),
            "scale": I29_CPU}  # fmt: skip


def _llm_confirm_v1(results_dir: Path) -> dict:
    return {**confirm_numbers(_nc(results_dir, "llm/confirm_cpu_v1/results.nc")),
            "scale": PREVIOUS_CPU}  # fmt: skip


def _llm_confirm_ep5(results_dir: Path) -> dict:
    return confirm_numbers(_nc(results_dir, "llm/confirm_cpu_ep5/results.nc"))


# ----------------------------------------------------------------------------- seed 004


def markov_run_numbers(ds) -> dict:
    """Stages, order, phases and KL minima of one Markov training run (:mod:`sims.markov`)."""
    from sims.markov.train import detect_stages, stage_band

    r = detect_stages(ds)
    band = stage_band(ds)
    kl = ds["kl_restricted"].values
    steps = ds["step"].values
    fin = np.where(np.isfinite(kl), kl, np.inf)
    return {
        "group_times": [_f(t) for t in r.group_times],
        "kl_times": [_f(t) for t in r.kl_times],
        "n_stages": int(r.n_stages),
        "order_ok": bool(r.order_ok),
        "heads_on_first": int(r.heads_on_first),
        "n_heads": int(ds.sizes["head"]),
        "final_assignment": [int(x) for x in r.final_assignment],
        "n_patterns": int(r.n_patterns),
        "band": {k: int(band.attrs[k]) for k in ("min", "max", "default")},
        "kl_min_step": [int(steps[i]) for i in fin.argmin(0)],
        "kl_min": [_f(x) for x in fin.min(0)],
        "final_excess_loss": _f(ds["excess_loss"].values[-1]),
        "steps": int(steps[-1]),
    }


def _markov_single(rel: str) -> Callable[[Path], dict]:
    def numbers(results_dir: Path) -> dict:
        ds = _nc(results_dir, rel)
        out = markov_run_numbers(ds)
        if ds.sizes.get("reference", 0):
            kr = np.where(np.isfinite(ds["kl_reference"].values), ds["kl_reference"].values, np.inf)
            out["reference"] = [str(x) for x in ds["reference"].values]
            out["kl_reference_min_step"] = [int(ds["step"].values[i]) for i in kr.argmin(0)]
        return out

    numbers.__name__ = f"numbers_{Path(rel).stem}"
    return numbers


def _markov_seeds(results_dir: Path) -> dict:
    """The extra seeds of the one-seed Markov rows (:mod:`figures.report.reruns`).

    ``{fig: [run numbers with "seed"], ...}`` in seed order; seed 0 is the figure's own source.
    """
    import re

    out: dict[str, list[dict]] = {}
    for path in sorted(Path(results_dir).glob("markov/seeds/*_seed*.nc")):
        m = re.fullmatch(r"(.+)_seed(\d+)\.nc", path.name)
        if not m:
            continue
        r = markov_run_numbers(_nc(results_dir, f"markov/seeds/{path.name}"))
        keep = ("group_times", "n_stages", "order_ok", "heads_on_first", "n_heads",
                "final_assignment", "kl_min_step", "n_patterns")  # what the rows read
        out.setdefault(m.group(1), []).append({"seed": int(m.group(2)),
                                               **{k: r[k] for k in keep}})  # fmt: skip
    for v in out.values():
        v.sort(key=lambda r: r["seed"])
    return out


def _markov_fig10(results_dir: Path) -> dict:
    from sims.markov import tensor_dynamics as T

    ds = _nc(results_dir, "markov/fig10_ode.nc")
    out = {
        "init_std": [],
        "stage_times": [],
        "n_stages": [],
        "coupling_time": [],
        "final_loss": [],
        "m_star": list(ds.attrs["m_star"]),
    }
    for std in ds.init_std.values:
        r = ds.sel(init_std=std)
        r.attrs["m_star"] = ds.attrs["m_star"]
        st = T.stage_times(r)
        out["init_std"].append(float(std))
        out["stage_times"].append([_f(x) for x in st])
        out["n_stages"].append(int(T.count_stages(st)))
        out["coupling_time"].append(_f(T.coupling_time(r)))
        out["final_loss"].append(_f(r.loss.values[-1]))
    return out


def _markov_coupling(results_dir: Path) -> dict:
    from sims.markov.tensor_dynamics import target_scales
    from theory.markov_coupling import coupling_beta

    ds = _nc(results_dir, "markov/coupling_time.nc")
    ms = target_scales(int(ds.attrs["h"]), float(ds.attrs["m"]), float(ds.attrs["b0"]))
    L = np.log(1.0 / ds.eps.values)
    big = L >= np.median(L)
    out = {"eps": ds.eps.values.tolist(), "T": {}}
    for T in ds["T"].values:
        tc = ds.t_c.sel(T=T).values  # (seed, eps)
        beta = float(coupling_beta(ms, int(ds.attrs["H"]), int(T)))
        slope = float(np.polyfit(L[big], np.sqrt(tc[:, big]).mean(0), 1)[0])
        ratio = tc.mean(0) / L
        far = ds.eps.values <= 1e-6  # the theory claim's range, 1e-6 ... 1e-12
        out["T"][str(int(T))] = {
            "t_c_mean": tc.mean(0).tolist(),
            "t_c_per_seed": tc.tolist(),  # (seed, eps): the seeds are resampled (stability)
            "n_seeds": int(tc.shape[0]),
            "beta": beta,
            "slope_sqrt_tc": slope,
            "slope_law": 1 / (2 * beta),
            "tc_over_log_growth": float(ratio[far][-1] / ratio[far][0]),
            "growth_eps": [float(ds.eps.values[far][0]), float(ds.eps.values[far][-1])],
        }
    return out


def _markov_fig4(results_dir: Path) -> dict:
    ds = _nc(results_dir, "markov/fig4_sweeps.nc")
    out: dict = {"u": {}, "m": {}}
    for i in range(ds.sizes["run"]):
        r = ds.isel(run=i)
        row = {
            "seed": int(r.seed),
            "pattern_time": [_f(t) for t in r.pattern_time.values],
            "n_stages": int(r.n_stages),
            "band": [int(r.n_stages_min), int(r.n_stages_max)],
            "n_patterns": int(r.n_patterns),
            "final_excess_loss": _f(r.excess_loss.values[np.isfinite(r.excess_loss.values)][-1]),
        }
        out[str(r.param.values)].setdefault(f"{float(r.value):g}", []).append(row)
    return out


def _markov_fig5(results_dir: Path) -> dict:
    ds = _nc(results_dir, "markov/fig5_datasize.nc")
    out: dict = {
        "sizes": [int(n) for n in ds["size"].values],
        "seeds": [int(s) for s in ds.seed.values],
        "runs": {},
    }
    for n in ds["size"].values:
        rows = []
        for sd in ds.seed.values:
            r = ds.sel({"size": n, "seed": sd})
            kl = r.kl_context.values
            ib = int(np.argmin(np.abs(r.step.values - int(r.best_step))))
            rows.append(
                {
                    "seed": int(sd),
                    "n_stages": int(r.n_stages),
                    "n_stages_at_best": int(r.n_stages_at_best),
                    "best_step": int(r.best_step),
                    "best_excess": _f(r.best_excess),
                    "closest_at_best": int(r.closest_at_best),
                    "kl_at_best": [_f(x) for x in kl[ib]],
                    "final_excess_loss": _f(r.excess_loss.values[-1]),
                }
            )
        out["runs"][str(int(n))] = rows
    return out


def _markov_beyond(results_dir: Path) -> dict:
    from sims.markov.beyond import paired_gains

    ds = _nc(results_dir, "markov/beyond_uniformity.nc")
    ode = {}
    e0 = ds.ode_entropy_times.sel(rho=0.0).values
    for r in ds.rho.values:
        e = ds.ode_entropy_times.sel(rho=r).values
        ode[f"{float(r):g}"] = {"entropy": _stats(e), "gain": {**_stats(e - e0), "per_seed": [
                                    _sig(x) for x in (e - e0) if np.isfinite(x)]},
                                "n_positive": int((e - e0 > 0).sum())}  # fmt: skip
    mm = ds[["mm_gain_times"]].rename({"mm_gain_times": "gain_times", "mm_seed": "seed"})
    gains = paired_gains(mm)
    for k in gains:  # the per-seed gains behind each mean (the page's t-tests and bootstrap)
        x = mm.gain_times.sel(run=k).values
        gains[k]["per_seed"] = [_sig(v) for v in x if np.isfinite(v)]
    t3 = ds.mm_pattern_time.sel(group=3)
    shift = (t3 - t3.sel(run="adamw")).mean("mm_seed")
    out = {
        "ode": ode, "n_seeds": int(ds.sizes["mm_seed"]),
        "entropy_adamw": _stats(ds.mm_entropy_times.sel(run="adamw").values),
        "gains": {k: {kk: _f(vv) if isinstance(vv, float) else vv for kk, vv in v.items()}
                  for k, v in gains.items()},
        "stage3_shift": {str(k): _f(shift.sel(run=k)) for k in ds.run.values},
        "final_excess": {str(k): _f(ds.mm_final_excess.sel(run=k).mean()) for k in ds.run.values},
        # a per-seed variable (an attribute in results written before sims.markov.beyond's
        # per-seed store)
        "bayes_loss_mean": _f(np.mean(ds["mm_bayes_loss_mean"].values
                                      if "mm_bayes_loss_mean" in ds
                                      else ds.attrs.get("mm_bayes_loss_mean", np.nan))),
        "hard_bayes_loss": {f"{t}_k{int(k)}": _f(ds.mm_hard_cluster_bayes_loss.sel(
            target=t, k=k).mean()) for t in ds.target.values for k in ds.k.values},
        # the same per seed (mm_seed order; None where a seed has none), for the page's
        # bootstrap over seeds
        "hard_bayes_loss_per_seed": {f"{t}_k{int(k)}": [_f(x) for x in
            ds.mm_hard_cluster_bayes_loss.sel(target=t, k=k).values]
            for t in ds.target.values for k in ds.k.values},
        "hard_fraction": {f"{t}_k{int(k)}": [_f(x) for x in (ds.mm_n_selected.sel(
            target=t, k=k).values / ds.attrs.get("mm_n_train", np.nan))]
            for t in ds.target.values for k in ds.k.values},
    }  # fmt: skip
    if "mm_bayes_loss_mean" in ds:
        out["bayes_loss_per_seed"] = [_f(x) for x in ds["mm_bayes_loss_mean"].values]
    return out


def _sosd_bridge(results_dir: Path) -> dict:
    from sims.sosd.bridge import alignment_table

    ds = _nc(results_dir, "sosd_bridge/la.nc")
    out: dict = {"n_runs": int(ds.sizes["run"]), "arms": [str(a) for a in ds.arm.values],
                 "alignment": {}, "onset": {}}  # fmt: skip
    for mat in ("key", "merged"):
        tab = alignment_table(ds, mat)
        out["alignment"][mat] = {}
        for arm, rows in tab.items():
            first = [r["relative"][0] for r in rows if r["relative"]]
            later = [x for r in rows for x in r["relative"][1:]]
            chance = [r["chance_relative"] for r in rows if np.isfinite(r["chance_relative"])]
            out["alignment"][mat][arm] = {
                "first": _stats(first),
                "later": _stats(later),
                "chance": _f(np.median(chance)) if chance else None,
                # per run: every stage's offset and the chance level (the page's bootstrap
                # over runs)
                "per_run": [{"relative": [_f(x) for x in r["relative"]],
                             "chance": _f(r["chance_relative"])} for r in rows],
            }
    gd = ds.onset.sel(arm="gd").values
    for arm in ds.arm.values:
        on = ds.onset.sel(arm=arm).values
        out["onset"][str(arm)] = {
            **_stats(on),
            "n_earlier_than_gd": int((on < gd).sum()),
            "n_paired": int((np.isfinite(on) & np.isfinite(gd)).sum()),
        }
    pooled = bridge_batches(results_dir)
    if pooled:
        out["pooled"] = pooled
    return out


def bridge_batches(results_dir: Path) -> dict[str, list[dict]]:
    """The bridge's onsets per batch (seed) and value init, from ``sosd_bridge/la_seed*.nc``.

    Kept in the numbers only (``numbers/sosd_bridge.json``, key ``pooled``), not as data files:
    the figure reads them from there when the batches are not in ``results/``.

    ``{value_init: [{"seed", "gd", "gd_upsample", "sam"}, ...]}`` (onset per run, ``None`` where
    the detector found none), batches in seed order.
    """
    import re

    out: dict[str, list[dict]] = {}
    for path in sorted(Path(results_dir).glob("sosd_bridge/la_seed*.nc")):
        m = re.fullmatch(r"la_seed(\d+)(_valuerow)?\.nc", path.name)
        if not m:
            continue
        ds = _nc(results_dir, f"sosd_bridge/{path.name}")
        init = "value-row" if m.group(2) else "linattn-icl"
        rec = {"seed": int(m.group(1))}
        for arm in ("gd", "gd_upsample", "sam"):
            rec[arm] = [int(x) if np.isfinite(x) and x == int(x) else _f(x)
                        for x in ds.onset.sel(arm=arm).values]  # steps: ints, None for none
        out.setdefault(init, []).append(rec)
    for v in out.values():
        v.sort(key=lambda r: r["seed"])
    return out


#: Markov training runs: every curve kept (121-201 evaluations); attention maps only at the
#: evaluations the figure draws (:func:`sims.markov.plotting.pick_steps`).
def _attention_steps(ds) -> list[int]:
    from sims.markov.plotting import pick_steps

    steps = pick_steps(ds, 5)
    return [int(np.argmin(np.abs(ds.step.values - s))) for s in steps]


MARKOV_RUN = Reduction(only={"attention": {"step": _attention_steps}}, sig=4)


# ----------------------------------------------------------------------------- seed 003


def _study(ds) -> dict:
    study = ds.attrs.get("study") or ds.attrs.get("meta", {}).get("config", {}).get("study", {})
    base = study.get("base", {})
    return {
        "steps": base.get("steps"),
        "batch_size": base.get("batch_size"),
        "lr": base.get("lr"),
        "rho": study.get("rho"),
        "n_layer": base.get("model", {}).get("n_layer"),
        "d_model": base.get("model", {}).get("d_model"),
    }


def _paired(a, b) -> dict:
    d = np.asarray(a, float) - np.asarray(b, float)
    return {
        "per_seed": [_f(x) for x in d],
        "mean": _f(d.mean()),
        "sd": _f(d.std(ddof=1)) if d.size > 1 else 0.0,
    }


def _sam_table1(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sam_family/table1.nc")
    opt = [str(m) for m in ds.optimizer.values]
    v = {m: ds.final_val_loss.sel(optimizer=m).values for m in opt}
    out = {
        "optimizers": opt,
        "seeds": [int(s) for s in ds.seed.values],
        "final_val_loss": {m: _stats(v[m]) for m in opt},
        "delta_vs_adamw": {m: _paired(v[m], v["adamw"]) for m in opt if m != "adamw"},
        "bayes_loss": _f(ds.attrs.get("bayes_loss", np.nan)),
        "study": _study(ds),
    }
    for a, b in (("fsam", "sam"), ("pfsam", "psam")):
        if a in v and b in v:
            out["delta_vs_adamw"].setdefault(f"{a}-{b}", _paired(v[a], v[b]))
    return out


def _sam_rho(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sam_family/rho_sweep.nc")
    adamw = float(ds.adamw_val_loss)
    return {
        "rho": ds.rho.values.tolist(),
        "adamw": adamw,
        "seed": ds.attrs.get("seed"),
        "final_val_loss": {
            str(m): ds.final_val_loss.sel(optimizer=m).values.tolist() for m in ds.optimizer.values
        },
        "below_adamw": {
            str(m): int((ds.final_val_loss.sel(optimizer=m).values < adamw).sum())
            for m in ds.optimizer.values
        },
        "study": _study(ds),
    }


def _sam_sharpness(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sam_family/sharpness.nc")
    keys = [
        k for k in ("lambda_max", "tr_H_L", "tr_H_G", "tr_H_F", "logit_one_minus_p_sq") if k in ds
    ]
    out: dict = {"seeds": [int(s) for s in ds.seed.values], "metrics": {}}
    for k in keys:
        base = float(ds[k].sel(optimizer="adamw").mean())
        out["metrics"][k] = {
            str(m): {
                **_stats(ds[k].sel(optimizer=m).values),
                "ratio_to_adamw": _f(float(ds[k].sel(optimizer=m).mean()) / base),
                # per seed, in the order of ``seeds`` (the page's bootstrap over seeds)
                "per_seed": [_f(x) for x in ds[k].sel(optimizer=m).values],
            }
            for m in ds.optimizer.values
        }
    return out


def _sam_tau(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sam_family/tau.nc")
    cut = min(50, int(ds.callback_step.max()) // 2)
    out: dict = {"cut_step": cut, "methods": {}}
    for m in ds.optimizer.values:
        x = ds.sel({"optimizer": m}).where(ds.callback_step > cut, drop=True)
        init = ds.sel({"optimizer": m, "callback_step": 0})
        row = {}
        for k in ("tau_logit", "tau_func", "tau_cross"):
            q = np.nanquantile(x[k].values, [0.25, 0.5, 0.75])
            row[k] = {
                "q25": _f(q[0]),
                "median": _f(q[1]),
                "q75": _f(q[2]),
                "init": _f(np.nanmean(init[k].values)),
                **tau_per_seed(x[k], init[k]),
            }
        row["n_seeds"] = int(np.isfinite(x["tau_logit"].values).any(axis=-1).sum())
        out["methods"][str(m)] = row
    return out


def tau_per_seed(after, init) -> dict:
    """One τ share per seed that ran: its values after the cut step and at step 0.

    ``after``: ``(seed, callback_step)`` after the cut; ``init``: ``(seed,)`` at step 0.
    ``{"per_seed": [[values after the cut (4 digits)], ...], "per_seed_init": [...]}`` over the
    seeds with any finite value (the page's bootstrap over seeds pools the drawn seeds' values).
    """
    a = np.asarray(after.transpose("seed", ...).values, float)
    ran = np.isfinite(a).any(axis=-1)
    return {
        "per_seed": [[_sig(v) for v in row if np.isfinite(v)] for row in a[ran]],
        "per_seed_init": [_f(v) for v in np.asarray(init.values, float)[ran]],
    }


def _sam_tau_smollm2(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sam_family/smollm2/cpu/tau_smollm2.nc")
    out: dict = {
        "model": ds.attrs.get("model"),
        "steps": [int(s) for s in ds.step.values],
        "param_sets": {},
    }
    for p in ds.param_set.values:
        r = ds.sel(param_set=p)
        out["param_sets"][str(p)] = {
            k: [_f(x) for x in r[k].values]
            for k in ("tau_logit", "tau_func", "tau_cross", "lambda_max")
        }
    return out


# ----------------------------------------------------------------------------- seed 002


def _sosd_toy(results_dir: Path) -> dict:
    summ = _json(results_dir, "sosd_toy/summary.json")["runs"]
    fits = _json(results_dir, "sosd_toy/sweep_fits.json")
    viol = [sum(r["norm_violations"][m]["frobenius"] for m in "QKV") for r in summ]
    t_eps = [r["T_eps"] for r in summ]
    return {
        "n_runs": len(summ),
        "eta": summ[0]["eta"],
        "sigma": summ[0]["sigma"],
        "steps": summ[0]["steps"],
        "eps": summ[0]["eps"],
        "v_before_qk": [bool(r["v_before_qk"]) for r in summ],
        "T_eps": t_eps,
        "onset_all_finite": all(np.isfinite(float(v)) for t in t_eps for v in t.values()),
        "norm_violations_frobenius": viol,
        "a4_ratio_max": max(r["a4_ratio_max"] for r in summ),
        "dL_vs_dSigma_slope": [r["slopes"]["300-3000"]["dL_vs_dSigma"] for r in summ],
        "eta_exponent_scaled": _stats([r["exponent_scaled"] for r in fits["eta_exponent"]]),
        "eta_exponent_fixed": _stats([r["exponent_fixed"] for r in fits["eta_exponent"]]),
        "sigma_law_r2": _stats([r["r2"] for r in fits["sigma_law"] if "r2" in r]),
        # the fits with their seed (fits of one seed share its runs: seeds are resampled)
        "eta_exponent_scaled_fits": [
            {"seed": int(r["seed"]), "sigma": r["sigma"], "exponent": r["exponent_scaled"]}
            for r in fits["eta_exponent"]
        ],
        "sigma_law_r2_fits": [
            {"seed": int(r["seed"]), "eta": r["eta"], "r2": r["r2"]}
            for r in fits["sigma_law"]
            if "r2" in r
        ],
        "loss_final": _stats([r["loss"]["final"] for r in summ]),
        # per run of the onset sweep: Q's onset at ε = 2e-4·η in flow time ηT (the σ law's
        # data: the page fits the exponent of ηT against ln(1/σ) and compares it with its rival)
        "sigma_law_runs": _sigma_law_runs(results_dir),
    }


def _sigma_law_runs(results_dir: Path) -> dict:
    ds = _nc(results_dir, "sosd_toy/sweep_onsets.nc")
    t = np.asarray(ds["T_eps_scaled"].sel(matrix="Q").values, float)
    eta = np.asarray(ds["eta"].values, float)
    return {
        "seed": [int(x) for x in ds["seed"].values],
        "eta": [float(x) for x in eta],
        "sigma": [float(x) for x in ds["sigma"].values],
        "tau": [_f(x) for x in eta * t],
    }


def _sosd_lm(results_dir: Path) -> dict:
    runs = _json(results_dir, "sosd_lm/cpu/summary.json")["runs"]
    by: dict[str, list] = {}
    for stem, r in sorted(runs.items()):
        name, seed = stem.rsplit("_seed", 1)
        by.setdefault(name, []).append((int(seed), r))

    def gmean(xs):
        xs = [x for x in xs if x is not None and np.isfinite(x) and x > 0]
        return _f(np.exp(np.mean(np.log(xs)))) if xs else None

    settings = {}
    for name, rs in by.items():
        rs = [r for _, r in sorted(rs, key=lambda t: t[0])]
        a = [r["delta_sigma_attn"] for r in rs]
        settings[name] = {
            "seeds": [s for s, _ in sorted(by[name], key=lambda t: t[0])],
            "steps": rs[0]["steps"],
            "onsets": [_f(r.get("onset", np.nan)) for r in rs],
            "onset_mean": _f(np.nanmean([r.get("onset", np.nan) for r in rs])),
            "knee_mean": _f(np.nanmean([r.get("loss_knee", np.nan) for r in rs])),
            "attn_peak": gmean([x["peak"] for x in a]),
            "attn_before": gmean([x["before_decay"] for x in a]),
            "attn_end": gmean([x["end"] for x in a]),
            "attn_before_per_seed": [x["before_decay"] for x in a],
            "decay_ratio": [r["decay_ratio"] for r in rs if "decay_ratio" in r],
            "val_loss_mean": _f(np.mean([r["val_loss_final"] for r in rs])),
            "attn_end_per_seed": [x["end"] for x in a],
            "val_loss_per_seed": [r["val_loss_final"] for r in rs],
            "nuclear_growth": _f(np.mean([r["nuclear_growth"] for r in rs])),
        }
    const = [r for _, r in sorted(by["constant"], key=lambda t: t[0])]
    snaps = [sorted(r["cos_to_final"].items(), key=lambda kv: int(kv[0])) for r in const]

    def cos_at(step, key):
        vals = [dict(s)[str(step)][key] for s in snaps if str(step) in dict(s)]
        return _f(np.mean(vals)) if vals else None

    at_100 = [dict(s)["100"] for s in snaps if "100" in dict(s)]
    cw, c0 = settings.get("cosine_wd"), settings.get("cosine")
    wd_gain = (
        [
            w / c - 1
            for w, c in zip(cw["attn_before_per_seed"], c0["attn_before_per_seed"], strict=True)
        ]
        if cw and c0
        else []
    )
    return {
        "settings": settings,
        "cosines": {
            "sigma_at_100": cos_at(100, "spectral"),
            "weight_at_100": cos_at(100, "weight"),
            "sigma_at_50": cos_at(50, "spectral"),
            # per seed at step 100 (the seeds that recorded it, in seed order)
            "sigma_at_100_per_seed": [c["spectral"] for c in at_100],
            "weight_at_100_per_seed": [c["weight"] for c in at_100],
            "n_seeds": len(const),
        },
        "wd_paired_gain": wd_gain,
        "lemma_a4": {
            "violations": int(sum(r["a4_ratio_violations"] for r in runs.values())),
            "records": int(sum(r["a4_records_checked"] for r in runs.values())),
            "max_ratio": _f(max(r["a4_ratio_max"] for r in runs.values())),
        },
        "bayes_loss": _f(const[0].get("bayes_loss", np.nan)),
    }


#: The toy's curves (20,001 GD steps, 8 seeds) thinned to 500 steps; the margins of panel (f)
#: are drawn for seed 0 only.
SOSD_TOY = Reduction(
    keep=(
        "loss",
        "delta_loss",
        "frobenius",
        "delta_sigma",
        "a4_ratio",
        "omega_min",
        "gamma_min",
        "gamma_min_proof",
    ),
    thin={"step": 500},
    only={v: {"run": (0,)} for v in ("omega_min", "gamma_min", "gamma_min_proof")},
    sig=4,
)


#: The bridge draws the curves of one run per arm and the peaks of every run (kept whole
#: until its size is known).
SOSD_BRIDGE = Reduction(sig=4)
#: The bridge's Markov run: the figure draws the head-mean ΔΣ, the stage times, the onsets and
#: the alignment (attributes); the singular values themselves (``sigma``, 0.99 of the 1.1 MB
#: file) are read by nothing, so they stay in ``results/``.
SOSD_BRIDGE_MARKOV = Reduction(drop=("sigma",), sig=4)
#: The SoSD LM figure reads the per-matrix metrics, not the singular values themselves (18 files
#: of 64 singular values x 8 matrices x 101 records would be 3.9 MB of the 4 MB budget); every
#: other record is enough to draw the curves (the onsets are computed from the full runs).
SOSD_LM_SPECTRA = Reduction(drop=("sigma", "reason", "state_reason"), thin={"record": 51}, sig=4)

#: Figure 10 draws the loss parts of the first h positions only.
FIG10 = Reduction(thin={"time": 200}, only={"loss_split": {"position": (0, 1, 2)}}, sig=4)

#: Reductions shared by several figures (the Figure 1 result feeds three figures).
FIG1 = Reduction(
    keep=(
        "test_loss",
        "grad_norm",
        "test_loss_at",
        "n_learned",
        "learning_time",
        "entropy",
        "saddle_level",
        "horizon_step",
        "final_test_loss",
        "phase",
    ),
    thin={"step": 240},
    anchors={"step": (10_000,)},
    only={"grad_norm": {"run": (0, 1)}},
    sig=4,
)
WHOLE = Reduction()

SOURCES: dict[str, Source] = {}


def _add(*sources: Source) -> None:
    for s in sources:
        if s.name in SOURCES:
            raise ValueError(f"two summary sources are named {s.name!r}.")
        SOURCES[s.name] = s


_add(
    Source("sam_entropy", {"sam_entropy/sam_entropy.nc": WHOLE}, _sam_entropy),
    Source("sam_entropy_sweep", {"sam_entropy/sweep.nc": WHOLE}, _sam_entropy_sweep),
    Source("entropy_toy", {"fig05_entropy_toy/toy.nc": WHOLE}, _entropy_toy),
    Source("la_fig1", {"linear_attention/figure1.nc": FIG1}, _la_fig1),
    Source("la_fig1_horizon", {"linear_attention/figure1.nc": FIG1}, None),
    Source(
        "la_sam_mechanism",
        {
            "linear_attention/figure1.nc": FIG1,
            "linear_attention/sam_mechanism.nc": WHOLE,
            "linear_attention/sam_escape.nc": WHOLE,
        },
        _la_mechanism,
    ),
    Source("la_upsampling", {"linear_attention/upsampling_study.nc": WHOLE}, _la_upsampling),
    Source("la_theory_vs_sim", {"linear_attention/theory_vs_sim.nc": WHOLE}, _la_theory_vs_sim),
    Source("llm_confirm", {"llm/confirm_cpu/results.nc": Reduction(sig=4)}, _llm_confirm),
    Source(
        "llm_confirm_late",
        {"llm/confirm_cpu_late/results.nc": Reduction(sig=4),
         "llm/confirm_cpu/results.nc": Reduction(sig=4)},
        _llm_confirm_late,
        producer=CONFIRM_LATE,
    ),
    Source(
        "llm_confirm_i29",
        {"llm/confirm_cpu_i29/results.nc": Reduction(sig=4)},
        _llm_confirm_i29,
        producer=CONFIRM_I29,
    ),
    Source(
        "llm_confirm_v1",
        {"llm/confirm_cpu_v1/results.nc": Reduction(sig=4)},
        _llm_confirm_v1,
        producer=CONFIRM_V1,
    ),
    Source(
        "markov_fig1",
        {"markov/fig1_minimal.nc": MARKOV_RUN},
        _markov_single("markov/fig1_minimal.nc"),
    ),
    Source("markov_fig10", {"markov/fig10_ode.nc": FIG10}, _markov_fig10),
    Source("markov_coupling", {"markov/coupling_time.nc": WHOLE}, _markov_coupling),
    Source(
        "markov_fig6_7",
        {"markov/fig6_7_online.nc": MARKOV_RUN},
        _markov_single("markov/fig6_7_online.nc"),
    ),
    Source(
        "markov_fig8_9",
        {"markov/fig8_9_reversed.nc": MARKOV_RUN},
        _markov_single("markov/fig8_9_reversed.nc"),
    ),
    Source(
        "markov_fig2_3",
        {"markov/fig2_3_full.nc": MARKOV_RUN},
        _markov_single("markov/fig2_3_full.nc"),
    ),
    Source("sam_family_table1", {"sam_family/table1.nc": Reduction(sig=5)}, _sam_table1),
    Source("sam_family_rho", {"sam_family/rho_sweep.nc": WHOLE}, _sam_rho),
    Source(
        "sam_family_sharpness",
        {"sam_family/sharpness.nc": WHOLE, "sam_family/table1.nc": Reduction(sig=5)},
        _sam_sharpness,
    ),
    Source("sam_family_tau", {"sam_family/tau.nc": Reduction(sig=4)}, _sam_tau),
    Source(
        "sam_family_tau_smollm2", {"sam_family/smollm2/cpu/tau_smollm2.nc": WHOLE}, _sam_tau_smollm2
    ),
    Source("markov_beyond", {"markov/beyond_uniformity.nc": Reduction(sig=4)}, _markov_beyond),
    Source(
        "sosd_bridge",
        {"sosd_bridge/la.nc": SOSD_BRIDGE, "sosd_bridge/markov_seed0.nc": SOSD_BRIDGE_MARKOV},
        _sosd_bridge,
    ),
    Source(
        "sosd_lm",
        {
            "sosd_lm/cpu/summary.json": WHOLE,
            "sosd_lm/cpu/*_seed*.spectra.nc": SOSD_LM_SPECTRA,
            "sosd_lm/cpu/*_seed*.history.nc": Reduction(sig=4),
            "sosd_lm/cpu/*_seed*.json": WHOLE,
        },
        _sosd_lm,
    ),
    Source("markov_fig4", {"markov/fig4_sweeps.nc": Reduction(sig=4)}, _markov_fig4),
    Source("markov_fig5", {"markov/fig5_datasize.nc": Reduction(sig=4)}, _markov_fig5),
    Source(
        "sosd_toy",
        {
            "sosd_toy/toy.nc": SOSD_TOY,
            "sosd_toy/summary.json": WHOLE,
            "sosd_toy/sweep_onsets.nc": WHOLE,
            "sosd_toy/sweep_fits.json": WHOLE,
        },
        _sosd_toy,
    ),
    Source("sosd_theory", {"sosd_theory/panels.nc": Reduction(sig=4)}, None),
    Source(
        "llm_confirm_ep5",
        {},
        _llm_confirm_ep5,
        producer=CONFIRM_EP5,
    ),
    Source("markov_seeds", {}, _markov_seeds, producer="python -m figures.report.reruns"),
)


def source(name: str) -> Source:
    """The summary source of figure ``name`` (``KeyError`` naming the known ones)."""
    try:
        return SOURCES[name]
    except KeyError:
        raise KeyError(f"no summary source {name!r}; known: {sorted(SOURCES)}") from None
