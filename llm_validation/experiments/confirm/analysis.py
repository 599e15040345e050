"""Statistics of the confirmation and the aggregation of its finished jobs.

Paired intervals, learning times, matched epochs, held-out scoring, and one ``xarray.Dataset``
of every finished job (:func:`_aggregate`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from llm_validation.data.records import BENCHMARKS
from sims.selection import loss_learning_times as learning_times

# ----------------------------------------------------------------------------- helpers


def paired_ci(diffs: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and ``level`` t-interval of paired differences (over seeds).

    Non-finite differences (a seed whose run produced no number) are left out: the interval is
    over the finite ones, with their count's degrees of freedom.

    Returns:
        ``(mean, low, high)``; with one finite seed the interval is ``(nan, nan)``, with none
        everything is ``nan``.

    Examples:
        >>> m, lo, hi = paired_ci([1.0, 2.0, 3.0])
        >>> round(m, 3), round(lo, 3), round(hi, 3)  # t(0.975, 2) = 4.303
        (2.0, -0.484, 4.484)
    """
    from scipy import stats

    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return math.nan, math.nan, math.nan
    m = float(d.mean())
    if d.size < 2:
        return m, math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    return m, m - half, m + half


def paired_bootstrap(
    a, b, strata=None, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean difference of two variants' accuracies and its paired two-way bootstrap interval.

    ``a`` and ``b`` are ``(n_seeds, n_items)`` 0/1 verdicts of the same items under the same
    seeds (paired). Each replicate resamples the seeds and, independently, the items (within
    each stratum, e.g. benchmark format, so the formats keep their weights) with replacement,
    and takes the mean over the resampled cells of ``a - b``: the interval covers both sources
    of noise, the fine-tuning seeds and the item sample (issue 36). Percentile interval.

    Args:
        a: ``(n_seeds, n_items)`` verdicts of the first variant; a row with a non-finite value
            (a seed without results) is left out of both.
        b: the second variant's, the same shape.
        strata: ``(n_items,)`` labels; items are resampled within each (``None``: one stratum).
        n_boot: replicates.
        level: interval level.
        seed: resampling seed.

    Returns:
        ``(mean, low, high)`` of the mean of ``a - b`` (fractions, not points).

    Examples:
        >>> a = np.array([[1, 1, 0, 1], [1, 0, 1, 1]]); b = np.zeros((2, 4))
        >>> m, lo, hi = paired_bootstrap(a, b, n_boot=500)
        >>> m, lo <= m <= hi <= 1
        (0.75, True)
    """
    x = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"`a` and `b` must be (n_seeds, n_items); got shape {x.shape}.")
    x = x[np.all(np.isfinite(x), axis=1)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if x.shape[0] < 2:
        return m, math.nan, math.nan
    lab = np.zeros(x.shape[1], int) if strata is None else np.unique(strata, return_inverse=True)[1]
    groups = [np.flatnonzero(lab == g) for g in np.unique(lab)]
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    for r in range(n_boot):
        rows = rng.integers(0, x.shape[0], x.shape[0])
        cols = np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups])
        reps[r] = x[np.ix_(rows, cols)].mean()
    lo, hi = np.quantile(reps, [0.5 - level / 2, 0.5 + level / 2])
    return m, float(lo), float(hi)


def latest_learners(times, count: int) -> np.ndarray:
    """Mask of the ``count`` examples learned latest: the selection of ``ft_up_late``.

    Unlearned examples (``nan``) come first, then by learning time, latest first; ties by
    index (issue 36).

    Examples:
        >>> latest_learners([3.0, float("nan"), 1.0, 7.0], 2).tolist()
        [False, True, False, True]
    """
    t = np.asarray(times, dtype=float)
    if not 0 <= count <= t.size:
        raise ValueError(f"`count` must be in [0, {t.size}]; got {count}.")
    order = np.lexsort((np.arange(t.size), -np.where(np.isfinite(t), t, np.inf)))
    mask = np.zeros(t.size, bool)
    mask[order[:count]] = True
    return mask


def benchmark_items(bench_dir) -> dict[str, np.ndarray]:
    """Every benchmark item in evaluation order: its format, half and multiple-choice gold.

    The half is ``id``/``ood`` (files without the field: ``id``); the gold letter is ``""``
    outside multiple choice.
    """
    from llm_validation.data.records import BENCHMARK_FILES

    fmt, split, gold = [], [], []
    for b in BENCHMARKS:
        p = Path(bench_dir) / BENCHMARK_FILES[b]
        text = p.read_text()
        recs = (
            [json.loads(x) for x in text.splitlines() if x.strip()]
            if p.suffix == ".jsonl"
            else json.loads(text)
        )
        fmt += [b] * len(recs)
        split += [r.get("split", "id") for r in recs]
        gold += ["ABCD"[r["answer"]] if b == "mmlu_math" else "" for r in recs]
    return {"benchmark": np.asarray(fmt), "split": np.asarray(split), "gold": np.asarray(gold)}


def constant_letter_chance(golds: Sequence[str]) -> float:
    """The best constant-letter baseline of a key: the largest share of one gold letter.

    Examples:
        >>> constant_letter_chance(list("BBBCA"))
        0.6
    """
    g = [x for x in golds if x]
    if not g:
        raise ValueError("`golds` holds no letter.")
    _, counts = np.unique(g, return_counts=True)
    return float(counts.max() / len(g))


def matched_epochs(steps: int, n_examples: int, batch_size: int) -> float:
    """Epochs over ``n_examples`` that make exactly ``steps`` optimizer steps at ``batch_size``.

    The schedule takes ``ceil(ceil(n / B) * epochs)`` steps (:func:`llm_validation.train.trainer.
    schedule`, as the Trainer); ``(steps - 1/2) / ceil(n / B)`` lands half a step inside the
    wanted count, so floating-point rounding cannot add or drop one.

    Examples:
        >>> matched_epochs(120, 1045, 32)  # 33 steps per epoch
        3.621212121212121
    """
    if steps < 1 or n_examples < 1 or batch_size < 1:
        raise ValueError(
            f"`steps`, `n_examples`, `batch_size` must be positive; got {steps}, {n_examples}, "
            f"{batch_size}."
        )
    per_epoch = math.ceil(n_examples / batch_size)
    return (steps - 0.5) / per_epoch


#: How a held-out problem's completion is scored, by its source's solution style: the
#: evaluator's rules of the benchmark written in that style (``#### X`` / "The answer is X." /
#: a printed value: GSM8K-like numeric rules, letters accepted as NumGLUE does; ``\boxed{X}``:
#: MATH's).
_STYLE_RULES = {"gsm": "numglue", "cot": "numglue", "code": "numglue", "boxed": "math"}


def heldout_subset(sources: Sequence[str], per_source: int) -> np.ndarray:
    """Indices of the first ``per_source`` held-out problems of each source (file order).

    Examples:
        >>> heldout_subset(["a", "b", "a", "a", "c", "b"], 2).tolist()
        [0, 1, 2, 4, 5]
    """
    if per_source < 0:
        raise ValueError(f"`per_source` must be >= 0; got {per_source}.")
    seen: dict[str, list[int]] = {}
    for i, s in enumerate(sources):
        seen.setdefault(s, [])
        if len(seen[s]) < per_source:
            seen[s].append(i)
    return np.sort(np.array([i for idx in seen.values() for i in idx], dtype=int))


def score_heldout(completions: Sequence[str], records: Sequence[Mapping]) -> np.ndarray:
    """1.0/0.0 per held-out completion: its final answer equals the record's exact answer.

    ``records`` are held-out corpus records (``answer``, ``style``); a multiple-choice answer
    ``(B)`` is compared as the letter ``B``. Programs are run in the sandbox (MAmmoTH).
    """
    from llm_validation.evaluate.scoring import extract_answer, is_correct, program_outputs

    printed = program_outputs(list(completions))
    out = np.zeros(len(records))
    for i, (comp, rec) in enumerate(zip(completions, records, strict=True)):
        rule = _STYLE_RULES[rec["style"]]
        gold = str(rec["answer"]).strip()
        if gold.startswith("(") and gold.endswith(")") and len(gold) == 3:
            gold = gold[1]
        pred = extract_answer(rule, comp, program_output=printed[i])
        out[i] = float(is_correct(rule, pred, gold))
    return out


def _selection_checks(seeds, sel_info, trajs, src) -> dict:
    """Per seed: does FT+UP's selection pick the examples the proxy learns late (issue 36)?

    Learning times (eq. 11's t_i, the half-drop step) from the proxy's log-spaced recordings
    of every training example (``lt_loss``); the upsampled (hard-cluster) examples against the
    rest: :func:`sims.selection.selection_check`.
    """
    from sims.selection import recordings_before, selection_check

    out = {}
    for s in seeds:
        sel, tr = sel_info.get((s, "ft_up")), trajs.get((s, "small"))
        if sel is None or tr is None or "lt_loss" not in tr:
            continue
        steps = tr["lt_step"].values
        t = learning_times(steps, tr["lt_loss"].values)
        hard = sel["hard"].values.astype(bool)
        if hard.all() or not hard.any():
            continue
        chk = selection_check(t, hard, src).to_dict()
        med = float(np.nanmedian(t)) if np.isfinite(t).any() else math.nan
        chk["median_learning_time_all"] = med
        chk["recordings_before_median_half_drop"] = int(recordings_before(steps, [med])[0])
        chk["lt_steps"] = [int(x) for x in steps]
        chk["unlearned_fraction"] = float(np.mean(~np.isfinite(t)))
        out[int(s)] = chk
    return out


def _aggregate(
    cfg, variants, jobs, results, sel_info, trajs, train_idx, corrupted, levels, src, held_src,
    items=None,
):  # fmt: skip
    """Collect accuracies, per-item verdicts, learning times, entropies, the hard cluster.

    Also the selection check per seed (``items``: :func:`benchmark_items`).
    """
    import xarray as xr

    from sims.entropy import shannon_entropy

    names = list(variants)
    seeds = list(cfg.seeds)
    acc = np.full((len(names), len(seeds), len(BENCHMARKS)), np.nan)
    train_s = np.full((len(names), len(seeds)), np.nan)
    train_steps = np.full((len(names), len(seeds)), np.nan)
    run_cpu = np.full((len(names), len(seeds)), np.nan)
    ent_src = np.full((len(names), len(seeds)), np.nan)
    ent_clu = np.full((len(names), len(seeds)), np.nan)
    t_hard = np.full((len(names), len(seeds)), np.nan)
    t_easy = np.full((len(names), len(seeds)), np.nan)
    pt_acc = np.full(len(BENCHMARKS), np.nan)
    progs = {k: np.full((len(names) + 1, len(seeds), len(BENCHMARKS)), np.nan)
             for k in ("programs", "programs_correct", "programs_correct_text")}  # fmt: skip
    n_held = next((r.sizes["heldout"] for r in results if "heldout_loss" in r), 0)
    held = np.full((len(names), len(seeds), n_held), np.nan)
    pt_held = np.full(n_held, np.nan)
    held_ok = np.full((len(names), len(seeds), n_held), np.nan)
    pt_held_ok = np.full(n_held, np.nan)
    has_ok = any("heldout_correct" in r for r in results)
    sources = sorted(set(src))
    t_src = np.full((len(names), len(seeds), len(sources)), np.nan)
    n_items = next((r.sizes["item"] for r in results if "item_correct" in r), 0)
    item_ok = np.full((len(names), len(seeds), n_items), -1, np.int8)  # -1: no result
    item_ok_mapped = np.full((len(names), len(seeds), n_items), -1, np.int8)
    pt_item_ok = np.full(n_items, -1, np.int8)
    for job, r in zip(jobs, results, strict=True):
        i = len(names) if job["variant"] == "pt" else names.index(job["variant"])
        for k, arr in progs.items():  # the pretrained model's row is the last ("pt")
            if k in r:
                arr[i, 0 if job["variant"] == "pt" else seeds.index(job["seed"])] = r[k].values
        if job["variant"] == "pt":
            pt_acc = r["accuracy"].values
            if "item_correct" in r:
                pt_item_ok = r["item_correct"].values.astype(np.int8)
            if n_held:
                pt_held = r["heldout_loss"].values
            if "heldout_correct" in r:
                pt_held_ok = r["heldout_correct"].values
            continue
        j = seeds.index(job["seed"])
        acc[i, j] = r["accuracy"].values
        if "item_correct" in r:
            item_ok[i, j] = r["item_correct"].values
            item_ok_mapped[i, j] = r["item_correct_mapped"].values
        if n_held:
            held[i, j] = r["heldout_loss"].values
        if "heldout_correct" in r:
            held_ok[i, j] = r["heldout_correct"].values
        train_s[i, j] = r.attrs.get("train_seconds", np.nan)
        train_steps[i, j] = r.attrs.get("train_steps", np.nan)
        run_cpu[i, j] = r.attrs.get("cpu_seconds", np.nan)
        if "probe_loss" in r:
            probes = r["probe"].values
            steps = r["record_step"].values
            loss = r["probe_loss"].values
            psrc = src[probes]
            curves = np.stack([np.nanmean(loss[psrc == s_], axis=0) for s_ in sources])
            t = learning_times(steps, curves)
            t_src[i, j] = t
            if np.all(np.isfinite(t)) and np.all(t > 0):
                ent_src[i, j] = shannon_entropy(t)
            # hard vs easy (the small proxy's trajectory clusters of this seed)
            ref = sel_info.get((job["seed"], "ft_up"))
            if ref is not None:
                hard = ref["hard"].values.astype(bool)[probes]
                if hard.any() and (~hard).any():
                    tc = learning_times(
                        steps, np.stack([np.nanmean(loss[~hard], 0), np.nanmean(loss[hard], 0)])
                    )
                    t_easy[i, j], t_hard[i, j] = tc
                    if np.all(np.isfinite(tc)) and np.all(tc > 0):
                        ent_clu[i, j] = shannon_entropy(tc)
    # hard-cluster composition (small proxy, trajectories, K=5): noise and difficulty
    comp = {}
    for s in seeds:
        sel = sel_info.get((s, "ft_up"))
        if sel is None:
            continue
        hard = sel["hard"].values.astype(bool)
        cor = corrupted[train_idx]
        lev = levels[train_idx]
        traj = trajs[(s, "small")]["loss"].values
        comp[s] = {
            "hard_fraction": float(hard.mean()),
            "corrupted_in_hard": float(cor[hard].mean()) if hard.any() else np.nan,
            "corrupted_in_easy": float(cor[~hard].mean()) if (~hard).any() else np.nan,
            "mean_level_hard": float(lev[hard].mean()),
            "mean_level_easy": float(lev[~hard].mean()),
            # late-learned vs noisy: drop of the proxy loss from checkpoint 1 to 15
            "drop_hard_clean": float(np.nanmean(traj[hard & ~cor, 0] - traj[hard & ~cor, -1])),
            "drop_hard_corrupted": float(np.nanmean(traj[hard & cor, 0] - traj[hard & cor, -1]))
            if (hard & cor).any()
            else np.nan,
            "drop_easy": float(np.nanmean(traj[~hard, 0] - traj[~hard, -1])),
            "final_hard_clean": float(np.nanmean(traj[hard & ~cor, -1])),
            "final_hard_corrupted": float(np.nanmean(traj[hard & cor, -1]))
            if (hard & cor).any()
            else np.nan,
            "final_easy": float(np.nanmean(traj[~hard, -1])),
            "hard_share_by_source": {
                Path(str(name)).stem: float(hard[src == name].mean()) for name in sources
            },
        }
    ds = xr.Dataset(
        {
            "accuracy": (("variant", "seed", "benchmark"), acc),
            "pt_accuracy": ("benchmark", pt_acc),
            "train_seconds": (("variant", "seed"), train_s),
            "train_steps": (("variant", "seed"), train_steps),
            "run_cpu_seconds": (("variant", "seed"), run_cpu),
            "entropy_sources": (("variant", "seed"), ent_src),
            "entropy_clusters": (("variant", "seed"), ent_clu),
            "t_hard": (("variant", "seed"), t_hard),
            "t_easy": (("variant", "seed"), t_easy),
            "t_sources": (("variant", "seed", "source"), t_src),
        },
        coords={
            "variant": names,
            "seed": seeds,
            "benchmark": list(BENCHMARKS),
            "source": np.asarray(sources, dtype=str),
        },
        attrs={
            "scale": cfg.name,
            "n_test": cfg.n_test,
            "execute_programs": int(cfg.execute_programs),
            "hard_composition": json.dumps(comp),
            "description": "confirmation of the paper's upsampling claims (issue 14)",
        },
    )
    if n_items:  # issue 36: per-item verdicts, compactly (int8; -1 = no result)
        ds["item_correct"] = (("variant", "seed", "item"), item_ok)
        ds["item_correct_mapped"] = (("variant", "seed", "item"), item_ok_mapped)
        ds["pt_item_correct"] = ("item", pt_item_ok)
        ds["item_correct"].attrs["description"] = (
            "1/0 per (variant, seed, item), -1 = no result; multiple choice by its letter"
        )
        ds["item_correct_mapped"].attrs["description"] = (
            "as item_correct, with a stated option value mapped to its letter (issue 36)"
        )
        if items is not None and len(items["benchmark"]) == n_items:
            ds = ds.assign_coords(
                item_benchmark=("item", items["benchmark"]),
                item_split=("item", items["split"]),
                item_gold=("item", items["gold"]),
            )
    checks = _selection_checks(seeds, sel_info, trajs, src)
    ds.attrs["selection_check"] = json.dumps(checks)
    for k, arr in progs.items():
        ds[k] = (("variant", "seed", "benchmark"), arr[: len(names)])
        ds["pt_" + k] = ("benchmark", arr[len(names), 0])
    if n_held:
        ds["heldout_loss"] = (("variant", "seed", "heldout"), held)
        ds["pt_heldout_loss"] = ("heldout", pt_held)
        if has_ok:
            ds["heldout_correct"] = (("variant", "seed", "heldout"), held_ok)
            ds["pt_heldout_correct"] = ("heldout", pt_held_ok)
            ds["heldout_correct"].attrs["description"] = (
                "1/0: the greedy answer to a held-out problem is right (NaN: not answered; "
                "the first `heldout_acc_per_source` problems of each source are)"
            )
        ds = ds.assign_coords(heldout_source=("heldout", np.asarray(held_src)))
        ds["heldout_loss"].attrs["description"] = (
            "mean solution-token cross-entropy (nats) of clean held-out problems after fine-tuning"
        )
    return ds
