"""The findings page (issue 22): summary codec, verdict rules, committed summaries, the page.

The committed summaries in ``figures/summaries/`` are what a fresh clone renders, so their
schema is checked against what the claims and the figures read; every verdict rule is checked on
numbers with a known answer, and changing a committed number must change its verdict.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import xarray as xr
from scipy.stats import binomtest

from figures.report import claims as C
from figures.report import store
from figures.report import verdicts as V
from figures.report.reduce import Reduction, reduce_dataset, thin_indices
from figures.report.sources import SOURCES, confirm_numbers
from figures.report.summaries import TOTAL_BYTES_LIMIT, load_numbers

COMMITTED = load_numbers()


# ----------------------------------------------------------------------------- codec


def _dataset():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 5000))
    x[0, 7] = np.nan
    x[1, 3] = np.inf
    x[2, 9] = -np.inf
    sparse = np.full((4, 100), np.nan)
    sparse[1, 5] = 0.123456789
    return xr.Dataset(
        {
            "curve": (("run", "step"), x),
            "sparse": (("run4", "k"), sparse),
            "count": ("run", np.array([1, 2, 3], dtype=np.int64)),
            "flag": ("run", np.array([True, False, True])),
            "label": ("run", np.array(["a", "bb", "ccc"])),
            "scalar": ((), 2.5),
        },
        coords={"run": [10, 11, 12], "step": np.arange(5000) * 50},
        attrs={"meta": 'json:{"git_commit": "abc"}', "rho": 0.001},
    )


def test_dataset_codec_round_trips_to_the_stated_digits():
    ds = _dataset()
    enc = store.encode_dataset(ds, sig=4)
    assert "packed" in enc["data_vars"]["curve"]["data"]  # > PACK_ABOVE values: zlib-packed
    assert "sparse" in enc["data_vars"]["sparse"]  # mostly NaN: finite entries only
    back = store.decode_dataset(json.loads(json.dumps(enc, allow_nan=False)))
    a, b = ds.curve.values, back.curve.values
    fin = np.isfinite(a)
    assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(
        a[~fin], b[~fin], equal_nan=True
    )
    # 4 significant digits: relative error at most half a unit in the 4th digit
    assert np.max(np.abs(b[fin] - a[fin]) / np.abs(a[fin])) <= 5e-4
    assert np.max(np.abs(b[fin] - a[fin]) / np.abs(a[fin])) > 0  # it did round
    assert (
        back.sparse.values[1, 5] == pytest.approx(0.1235, abs=0) and np.isnan(back.sparse)[0].all()
    )
    assert back["count"].dtype == np.int64 and back["count"].values.tolist() == [1, 2, 3]
    assert back.flag.values.tolist() == [True, False, True]
    assert back.label.values.tolist() == ["a", "bb", "ccc"]
    assert float(back.scalar) == 2.5 and back.attrs == ds.attrs
    assert back.step.values.tolist() == ds.step.values.tolist()
    with pytest.raises(ValueError, match="format"):
        store.decode_dataset({"format": "other"})


def test_thinning_keeps_ends_anchors_and_the_log_and_linear_halves():
    coord = np.arange(4001) * 50
    idx = thin_indices(4001, 200, coord=coord, anchors=(10_000,))
    assert idx[0] == 0 and idx[-1] == 4000 and 200 in idx  # step 10,000 is index 200
    assert len(idx) <= 201 and np.all(np.diff(idx) > 0)
    early = np.sum(idx < 40)  # the log half keeps the first steps densely
    assert early >= 20
    assert np.sum(idx > 2000) >= 45  # the uniform half keeps the tail
    with pytest.raises(ValueError, match="`m`"):
        thin_indices(10, 1)


def test_reduce_keeps_what_is_asked_and_masks_the_rest():
    ds = _dataset()
    r = reduce_dataset(ds, Reduction(keep=("curve", "count"), thin={"step": 100},
                                     only={"curve": {"run": (1,)}}))  # fmt: skip
    assert set(r.data_vars) == {"curve", "count"} and r.sizes["step"] <= 100
    assert np.isnan(r.curve.values[[0, 2]]).all() and np.isfinite(r.curve.values[1]).any()
    assert r.attrs == ds.attrs
    with pytest.raises(KeyError, match="nope"):
        reduce_dataset(ds, Reduction(keep=("nope",)))


# ----------------------------------------------------------------------------- verdict rules


@pytest.mark.parametrize(
    ("lo", "hi", "expect", "verdict"),
    [
        (-0.03, -0.01, "negative", V.REPRODUCED),
        (0.01, 0.03, "negative", V.CONTRADICTED),
        (-0.01, 0.01, "negative", V.NOT_SHOWN),
        (0.01, 0.03, "positive", V.REPRODUCED),
        (math.nan, math.nan, "negative", V.NOT_SHOWN),
    ],
)
def test_interval_rule(lo, hi, expect, verdict):
    assert V.interval_rule(lo, hi, expect=expect)[0] == verdict


def test_interval_rule_refuses_a_no_effect_claim_without_a_margin():
    """An interval containing 0 does not show an absence (issue 28): 'zero' needs TOST."""
    with pytest.raises(ValueError, match="tost_rule"):
        V.interval_rule(-0.01, 0.01, expect="zero")


def test_sign_test_rule_matches_scipy():
    # 18 of 25 positive: p = 0.043 < 0.05; 17 of 25: p = 0.108
    assert binomtest(18, 25).pvalue < 0.05 < binomtest(17, 25).pvalue
    assert V.sign_test_rule(18 / 25, 25, expect="positive")[0] == V.REPRODUCED
    assert V.sign_test_rule(17 / 25, 25, expect="positive")[0] == V.NOT_SHOWN
    assert V.sign_test_rule(7 / 25, 25, expect="positive")[0] == V.CONTRADICTED
    assert V.sign_test_rule(2 / 25, 25, expect="negative", paper=False)[0] == V.VERIFIED


def test_count_all_threshold_rules():
    assert V.count_rule(5, 6, at_least=2 / 3)[0] == V.REPRODUCED
    assert V.count_rule(3, 6, at_least=2 / 3)[0] == V.NOT_SHOWN
    # missing a share or a threshold rejects nothing: not shown, unless a counterexample decides
    assert V.all_rule([True, True, False], paper=False)[0] == V.NOT_SHOWN
    assert V.all_rule([True, False], paper=False, against=V.REFUTED)[0] == V.REFUTED
    assert V.threshold_rule(1.5, below=1.0, paper=False)[0] == V.NOT_SHOWN
    assert V.threshold_rule(0.5, below=1.0)[0] == V.REPRODUCED
    assert V.threshold_rule(1.5, below=1.0, against=V.CONTRADICTED)[0] == V.CONTRADICTED
    with pytest.raises(ValueError, match="unknown verdict"):
        V.Finding("maybe", "")


# ----------------------------------------------------------------------------- committed data


def test_committed_summaries_are_small_and_listed_in_the_manifest():
    man = store.read_summary_json(store.SUMMARY_DIR / "MANIFEST.json")
    on_disk = {p.relative_to(store.SUMMARY_DIR).as_posix(): p.stat().st_size
               for p in store.SUMMARY_DIR.rglob("*") if p.is_file()
               and p.name not in store.NOT_DATA and not p.name.startswith(".")
               and not p.relative_to(store.SUMMARY_DIR).as_posix().startswith("gpu/")}  # fmt: skip
    listed = {k: v["bytes"] for k, v in man["files"].items() if not k.startswith("gpu/")}
    assert on_disk == listed  # regenerated with `python -m figures summaries`, not edited by hand
    total = sum(p.stat().st_size for p in store.SUMMARY_DIR.rglob("*") if p.is_file())
    assert total < TOTAL_BYTES_LIMIT


def test_every_committed_numbers_file_has_provenance():
    for p in sorted((store.SUMMARY_DIR / "numbers").glob("*.json")):
        prov = store.read_summary_json(p)["provenance"]
        assert prov["summary_commit"] and prov["results"], p.name
        for rel, meta in prov["results"].items():
            assert meta.get("git_commit") and "config" in meta, (p.name, rel)


def test_claims_read_only_what_the_summaries_hold():
    """Schema drift: a judge reading a key the committed summary lacks is a KeyError, which
    the page would show as 'the summary has no ...' instead of a verdict."""
    rows = C.all_rows(COMMITTED)
    drift = [(r.claim.id, r.finding.ours) for r in rows if "the summary has no" in r.finding.ours]
    assert not drift
    for r in rows:  # never a blank: a missing result names the command that makes it
        assert r.finding.ours.strip() and r.command.strip()
        if r.finding.verdict in (V.NO_RESULT, V.NEEDS_GPU):
            assert "`" in r.finding.ours, r.claim.id


def test_the_page_covers_the_four_seeds_with_at_least_40_claims():
    rows = C.all_rows(COMMITTED)
    judged = [r for r in rows if r.finding.verdict not in (V.NO_RESULT, V.NEEDS_GPU)]
    groups = {r.claim.group for r in judged}
    assert {"000", "002", "003", "004"} <= groups
    assert len(judged) >= 40
    assert len({r.claim.id for r in rows}) == len(rows)


def test_summary_data_hydrates_with_what_the_figures_read():
    """Every summarised result file decodes, and keeps exactly the variables its reduction
    keeps (a drawing reads them); the figure's own result file is among them."""
    import figures

    found = figures.discover()
    for name, src in SOURCES.items():
        for rel, red in src.files.items():
            path = store.data_path(rel)
            if "*" in rel or not path.exists():
                continue
            if rel.endswith(".nc"):
                ds = store.decode_dataset(store.read_summary_json(path))
                if red.keep is not None:
                    assert set(ds.data_vars) == set(red.keep) - set(red.drop), (name, rel)
        if name in found and src.files:
            assert found[name].FIGURE.result_file in src.files, name


@pytest.mark.parametrize(
    ("claim_id", "path", "value", "verdict"),
    [
        # issue 36's run is judged on the held-out loss (FT under 20 % accuracy): FT+UP clearly
        # above the step-matched FT's loss contradicts
        ("confirm-up-loss", ("llm_confirm", "pairs", "ft_up-ft_matched", "mean_loss"),
         {"per_seed": [0.03, 0.032, 0.029, 0.031, 0.03, 0.03, 0.031, 0.029, 0.03, 0.03]},
         V.CONTRADICTED),
        ("fig1-sam-uniform", ("la_fig1", "sam", "long", "entropy_minus_gd", "frac_positive"),
         0.2, V.CONTRADICTED),
        # deterministic ODEs: a failing radius is a counterexample (issue 37: both directions)
        ("thm44-odes", ("sam_entropy", "ordering_holds"), [True, False, True, True, True],
         V.CONTRADICTED),
        ("sosd-toy-norms", ("sosd_toy", "norm_violations_frobenius"), [0] * 8, V.REPRODUCED),
    ],
)  # fmt: skip
def test_changing_a_number_changes_the_verdict(claim_id, path, value, verdict):
    nums = copy.deepcopy(COMMITTED)
    if "llm_confirm" not in nums:  # until the lead commits the confirmation's summary
        nums["llm_confirm"] = confirm_numbers(_confirm_dataset())
    claim = next(c for c in C.CLAIMS if c.id == claim_id)
    before = C.evaluate(claim, nums).finding.verdict
    d = nums
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value if not isinstance(value, dict) else {**d[path[-1]], **value}
    after = C.evaluate(claim, nums).finding.verdict
    assert after == verdict and after != before


def test_missing_summaries_name_their_command():
    rows = C.all_rows({})
    assert all(r.finding.verdict in (V.NO_RESULT, V.NEEDS_GPU) for r in rows)
    for r in rows:
        assert "`" in r.finding.ours and r.command in r.finding.ours
    gpu = [r for r in rows if r.claim.gpu]
    assert gpu and all(r.finding.verdict == V.NEEDS_GPU for r in gpu)
    assert all("llm_validation campaign" in r.command for r in gpu)


# ----------------------------------------------------------------------------- confirmation


def _confirm_dataset(seeds=(0, 1, 2)):
    """An aggregate in the layout of :func:`llm_validation.experiments.confirm.run_confirmation`
    with known
    effects: FT+UP lowers every held-out loss by 0.02 (+ seed noise), random by 0.01 on the
    first source only; accuracy is FT + 2 points for FT+UP."""
    rng = np.random.default_rng(0)
    variants = ["ft", "ft_up", "random", "easy"]
    bench = ["gsm8k", "math", "numglue", "svamp", "deepmind", "mmlu_math"]
    n_held, sources = 12, np.array(["a.json", "b.json", "c.json"] * 4)
    base = 0.5 + 0.1 * (sources == "c.json")  # source c is the worst learned
    held = np.empty((4, len(seeds), n_held))
    for j, _ in enumerate(seeds):
        noise = rng.normal(0, 1e-3, n_held)
        held[0, j] = base + noise
        held[1, j] = base - 0.02 + noise + rng.normal(0, 1e-4)
        held[2, j] = base - 0.01 * (sources == "a.json") + noise
        held[3, j] = base + noise
    acc = np.full((4, len(seeds), len(bench)), 0.10)
    acc[1] += 0.02
    ent = np.array([[0.9, 0.91, 0.92], [0.95, 0.96, 0.94], [0.9] * 3, [0.9] * 3])
    return xr.Dataset(
        {
            "accuracy": (("variant", "seed", "benchmark"), acc),
            "pt_accuracy": ("benchmark", np.full(len(bench), 0.01)),
            "train_seconds": (("variant", "seed"), np.full((4, len(seeds)), 60.0)),
            "entropy_sources": (("variant", "seed"), ent[:, : len(seeds)]),
            "heldout_loss": (("variant", "seed", "heldout"), held),
            "pt_heldout_loss": ("heldout", np.full(n_held, 2.0)),
        },
        coords={"variant": variants, "seed": list(seeds), "benchmark": bench,
                "heldout_source": ("heldout", sources)},
        attrs={"scale": "synthetic", "hard_composition": json.dumps({"0": {
            "hard_fraction": 0.3, "corrupted_in_hard": 0.05, "drop_hard_clean": 1.5,
            "drop_easy": 1.0}})},
    )  # fmt: skip


def test_confirm_numbers_match_the_known_effects():
    from scipy import stats

    n = confirm_numbers(_confirm_dataset())
    up = n["pairs"]["ft_up-ft"]
    assert up["mean_loss"]["mean"] == pytest.approx(-0.02, abs=2e-4)
    assert up["worst_loss"]["mean"] == pytest.approx(-0.02, abs=2e-4)
    assert up["accuracy"]["mean"] == pytest.approx(2.0)  # points
    d = np.array(up["mean_loss"]["per_seed"])
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    assert up["mean_loss"]["hi"] == pytest.approx(d.mean() + half)
    rnd = n["pairs"]["random-ft"]
    assert rnd["mean_loss"]["mean"] == pytest.approx(-0.01 / 3, abs=1e-4)
    assert rnd["worst_loss"]["mean"] == pytest.approx(0.0, abs=1e-12)  # c is untouched
    assert n["worst_source"]["ft"]["name"] == "c"
    assert n["entropy_sources_diff"]["ft_up-ft"] == pytest.approx([0.05, 0.05, 0.02])
    assert n["accuracy_mean"]["pt"] == pytest.approx(1.0)
    rows = {r.claim.id: r.finding for r in C.all_rows({"llm_confirm": n})}
    # no ft_matched in this run: FT+UP against plain FT, which trains fewer steps, gives at most
    # not shown (issue 37), and the row says so first
    assert rows["confirm-up-loss"].verdict == V.NOT_SHOWN
    assert rows["confirm-up-loss"].ours.startswith("not compute-matched")
    # +0.05, +0.05, +0.02: all > 0, but the 95 % t-interval [-0.003, +0.083] contains 0
    assert rows["confirm-entropy"].verdict == V.NOT_SHOWN
    assert rows["confirm-muon"].verdict == V.NO_RESULT and "--variants" in rows["confirm-muon"].ours


def test_committed_findings_markdown_is_up_to_date():
    from figures.report import FINDINGS, findings_markdown

    assert FINDINGS.read_text(encoding="utf-8") == findings_markdown(), (
        "figures/summaries/FINDINGS.md is stale: run `python -m figures summaries`"
    )


#: The verdicts the closing notes of issues 2-16 give, with the numbers behind them (issue 22:
#: "each verdict matching the closing notes' numbers"), as issue 28 restated them at the
#: strength of their evidence (three-way tests, equivalence margins, n >= 3). The committed
#: summaries must judge the same; a changed rule or a new run that flips one fails here and must
#: be argued in a note. ``not shown`` was ``not reproduced`` before issue 28 (the same verdict).
NOTES = {
    # seed 000 and beyond (issues 2, 4, 13, 15)
    "fig1-median-loss": V.NOT_SHOWN, "fig1-sam-uniform": V.REPRODUCED,
    "fig1-up-uniform": V.CONTRADICTED, "la-theory-vs-sim": V.REPRODUCED,
    "thm44-odes": V.REPRODUCED, "thm44-sweep": V.REPRODUCED, "fig5-toy": V.REPRODUCED,
    "fig1-plateau-artefact": V.VERIFIED, "fig1-convergence": V.VERIFIED,
    "sam-mechanism": V.NOT_SHOWN, "thm44-cap": V.VERIFIED, "thm44-edge": V.VERIFIED,
    "thm44-exact-sam": V.VERIFIED, "up-recipe-condition": V.VERIFIED,
    "up-condition-rule": V.VERIFIED,
    # the confirmation, issue 29's CPU scale (5 seeds, FT 21.4 % average accuracy): judged on
    # accuracy (paired t 95 %; TOST within +-1 point for no-effect claims), held-out loss beside.
    # confirm-up-loss: FT+UP vs the step-matched FT, -0.78 [-1.88, +0.32] points (was
    # 'reproduced' on the loss vs an FT with 22 % fewer steps; the companion loss now has FT+UP
    # worse than ft_matched, +0.0020 [+0.0007, +0.0034]); confirm-easy, confirm-random: the
    # intervals (+1.78 [-1.23, +4.79], +0.78 [-2.90, +4.46]) contain 0 and exceed the margin:
    # not shown (were 'contradicted' on the loss). confirm-mean-is-compute: random and easy
    # lower the loss as much as hard (5 seeds; was not shown at 3). Rows on variants the default
    # run leaves out (traj-vs-ckpt, muon, proxy, checkpoints, fsam) keep the previous CPU
    # scale's numbers (3 seeds, loss) and say so; FSAM's rho is untuned. confirm-transient: the
    # 5-epoch check rerun at this scale: worst-source FT+UP - FT -0.0002 [-0.054, +0.053], too
    # wide for the +-0.009 margin either way (was refuted at the previous scale): not shown.
    # issue 37: the paper's smallest gain (+1.2 points) lies above up-loss's interval, and
    # easy's [-1.23, +4.79] excludes the paper's -1.5: 'smaller than claimed'; muon trains
    # more steps than its baseline (no step-matched Muon run): not shown; sam-mechanism's
    # head-wise half fails TOST (90 % [-0.24, +0.097] vs +-0.044): not shown; the sigma law
    # is contradicted by its exponent interval (2 excluded at every eta, 1 preferred by AIC)
    # issue 36's default run (10 fine-tuning seeds of ft, ft_matched, ft_up on one pre-trained
    # base; 300 items per format, half on held-out templates): FT averages 10.2 %, under the
    # 20 % at which rows judge on accuracy, so up-loss is judged on the held-out loss again:
    # ft_up - ft_matched +0.0030 [-0.0002, +0.0062] nats/token: not shown (was 'smaller than
    # claimed' on issue 29's accuracy); its accuracy beside it is -0.81 points, seeds x items
    # bootstrap [-1.46, -0.16]: FT+UP is worse than training as long on the original data.
    # Rows on random and easy read issue 29's numbers (llm_confirm_i29) and say so, with the
    # same verdicts as before. late-not-noisy is read from measured learning times now: AUC
    # 0.66-0.71, Mann-Whitney p < 0.05 in 10/10 seeds, hard cluster 88-89 % clean: verified.
    # confirm-late-arm (upsampling the proxy's measured latest learners, 5 seeds, paired with
    # the default run's ft_matched; FT rerun identical): loss -0.00057 [-0.0033, +0.0022],
    # accuracy -0.32 points, bootstrap [-1.20, +0.62]: not shown
    "confirm-late-arm": V.NOT_SHOWN,
    "confirm-up-loss": V.NOT_SHOWN, "confirm-up-acc": V.NOT_SHOWN,
    "confirm-random": V.NOT_SHOWN, "confirm-easy": V.SMALLER,
    "confirm-hard-vs-matched": V.NOT_SHOWN, "confirm-traj-vs-ckpt": V.NOT_SHOWN,
    "confirm-muon": V.NOT_SHOWN, "confirm-entropy": V.NOT_SHOWN,
    "confirm-worst-source": V.NOT_SHOWN, "confirm-mean-is-compute": V.VERIFIED,
    "confirm-late-not-noisy": V.VERIFIED, "confirm-transient": V.NOT_SHOWN,
    "confirm-proxy": V.NOT_SHOWN, "confirm-checkpoints": V.REPRODUCED,
    "confirm-fsam": V.NOT_SHOWN,
    # seed 002 (issue 12)
    "sosd-two-phase": V.REPRODUCED, "sosd-onset-vs-knee": V.NOT_SHOWN,
    "sosd-step-decay": V.REPRODUCED, "sosd-wsd": V.REPRODUCED, "sosd-decay-loss": V.REPRODUCED,
    "sosd-weight-decay": V.REPRODUCED, "sosd-muon": V.REPRODUCED,
    "sosd-lemma-a4-runs": V.REPRODUCED, "sosd-toy-onset": V.REPRODUCED,
    "sosd-toy-norms": V.CONTRADICTED, "bridge-drops-on-peaks": V.VERIFIED,
    # issue 12's note: GD+UP onset 6145 vs GD 8170, 8/8 (verified). The flip to 7290 vs 7810,
    # 5/7 on one batch was caused by the linear-attention value init (v's std divided by an
    # extra sqrt(d+1) in commit 4d1fae3 "linattn-icl value init"), not by the selection changes
    # of issues 20/24: value_init="value-row" on today's code reproduces 8170 / 6145 / 8/8
    # exactly (issue 28). Pooled over 8 batches (seeds 0-7), upsampling starts earlier in 45/57
    # paired runs with today's init (sign test p = 1e-5) and 46/60 with the earlier one.
    "bridge-onset-upsampling": V.VERIFIED, "bridge-onset-init": V.VERIFIED,
    # seed 003 (issue 10); paired t per variant (issue 28): all three variants are above AdamW
    # in every seed at our scale (contradicted there, not at the paper's 2M model); FSAM < SAM
    # and PFSAM < PSAM do not both reject at 3 seeds; the rho sweep has one seed (n = 1)
    "fsam-table1": V.CONTRADICTED, "fsam-vs-sam": V.NOT_SHOWN, "sam-worse": V.REPRODUCED,
    "fsam-rho": V.NOT_SHOWN, "sam-rho-monotone": V.NOT_SHOWN,
    "fsam-flatter": V.REPRODUCED, "tau-logit": V.REPRODUCED, "tau-cross": V.REPRODUCED,
    "tau-init": V.VERIFIED,
    # seed 004 (issues 5, 7, 16); one-seed and two-seed rows are not shown (n = 1, 2); Figure 1's
    # rows rerun at 5 seeds (issue 28: every seed 3 stages in order, KL minima in order, heads
    # compete then cooperate), and so are the online rows of Figs. 6-7 (3 stages in order, 5/5)
    "markov-three-stages": V.REPRODUCED, "markov-kl-order": V.REPRODUCED,
    "markov-heads": V.REPRODUCED, "markov-online": V.REPRODUCED,
    "markov-reversed": V.NOT_SHOWN, "markov-full-references": V.NOT_SHOWN,
    "markov-m1": V.NOT_SHOWN, "markov-m13-15": V.REPRODUCED, "markov-u0": V.NOT_SHOWN,
    "markov-u-slower": V.NOT_SHOWN, "markov-fig5-stages": V.NOT_SHOWN,
    "markov-fig5-early-stop": V.NOT_SHOWN, "markov-ode-stages": V.REPRODUCED,
    "markov-coupling-log2": V.VERIFIED, "markov-sam-uniform": V.VERIFIED,
    "markov-upsampling": V.NOT_SHOWN, "markov-hard-is-noisy": V.VERIFIED,
}  # fmt: skip


def test_committed_verdicts_match_the_closing_notes():
    rows = {r.claim.id: r for r in C.all_rows(COMMITTED)}
    assert set(NOTES) <= set(rows)
    wrong = {}
    for cid, verdict in NOTES.items():
        needs = set(rows[cid].claim.needs)
        if not needs <= set(COMMITTED):
            # a run too long for the session that committed the summaries: the row must say
            # so, with the command that makes it, instead of a verdict
            f = rows[cid].finding
            assert f.verdict == V.NO_RESULT and "python -m" in f.ours, (cid, f)
            continue
        if rows[cid].finding.verdict != verdict:
            wrong[cid] = (rows[cid].finding.verdict, verdict, rows[cid].finding.ours)
    assert not wrong


def test_gpu_campaign_summary_feeds_the_gpu_rows(tmp_path):
    """A published campaign (schema ``sbtheory-campaign/1``) turns 'needs a GPU' into verdicts;
    failed stages and rehearsals do not."""
    from figures.report.summaries import gpu_numbers

    stages = [
        {"name": "markov_fig2_3", "status": "ok", "device": "cuda (H100)",
         "figures": {"n_stages": 3, "order_ok": True, "group_times": [100, 400, 1500]}},
        {"name": "markov_fig8_9", "status": "failed", "device": "cuda (H100)", "figures": {}},
        {"name": "confirm_smollm2", "status": "ok", "device": "cuda (H100)", "figures": {
            "paired_differences": {"ft_up-ft_matched": {"heldout_loss": [-0.02, -0.03, -0.01]}}}},
        {"name": "throughput", "status": "ok", "device": "cuda (H100)", "targets": [
            {"name": "generation", "value": 40.0, "op": ">=", "target": 50.0, "unit": "/s",
             "met": False}]},
    ]  # fmt: skip
    (tmp_path / "gpu").mkdir()
    summary = {"schema": "sbtheory-campaign/1", "kind": "gpu", "stages": stages}
    (tmp_path / "gpu" / "summary.json").write_text(json.dumps(summary))
    nums = gpu_numbers(tmp_path)
    assert set(nums) == {"gpu_markov_fig2_3", "gpu_confirm_smollm2", "gpu_throughput"}
    rows = {r.claim.id: r.finding for r in C.all_rows(nums)}
    # one paper-scale run: not shown (n = 1), the rule's verdict at enough runs named
    f = rows["markov_fig2_3-paper-scale"]
    assert f.verdict == V.NOT_SHOWN and f.n == 1 and "would give 'reproduced'" in f.rule
    assert rows["markov_fig8_9-paper-scale"].verdict == V.NEEDS_GPU  # its stage failed
    assert rows["confirm-gpu"].verdict == V.REPRODUCED
    assert rows["gpu-throughput"].verdict == V.REFUTED  # a target missed
    summary["kind"] = "rehearsal"
    (tmp_path / "gpu" / "summary.json").write_text(json.dumps(summary))
    assert gpu_numbers(tmp_path) == {}


def test_json_patterns_do_not_hydrate_encoded_netcdf_summaries():
    """``sosd_lm/cpu/*_seed*.json`` (the runs' JSON) must not also pick up the committed
    ``*_seed*.spectra.nc.json`` (encoded NetCDF): the figure read those as run summaries."""
    from figures.report.drawing import summary_results

    with summary_results(["sosd_lm"]) as tmp:
        folder = tmp / "sosd_lm" / "cpu"
        assert not list(folder.glob("*.nc.json"))
        runs = sorted(folder.glob("*_seed*.json"))
        assert len(runs) == len(list(folder.glob("*_seed*.spectra.nc"))) > 0
        for p in runs:
            assert "a4_ratio_max" in json.loads(p.read_text()), p.name


@pytest.mark.parametrize(
    ("three", "five", "verdict"),
    [
        ((-0.05, -0.06, -0.055), (0.001, -0.002, 0.0005), V.VERIFIED),  # a benefit, gone by 5
        ((-0.02, -0.05, +0.01), (0.001, -0.002, 0.0005), V.NOT_SHOWN),  # none shown at 3
        ((-0.05, -0.06, -0.055), (-0.05, -0.055, -0.06), V.REFUTED),  # still there at 5
        ((+0.05, +0.055, +0.06), (0.001, -0.002, 0.0005), V.REFUTED),  # worse at 3
        ((-0.05, -0.06, -0.055), (-0.002, -0.03, 0.01), V.NOT_SHOWN),  # 5 epochs: too wide
    ],
)  # fmt: skip
def test_transient_rule_needs_a_benefit_at_3_epochs_and_none_at_5(three, five, verdict):
    """Issue 28: a benefit at 3 epochs (paired t) that is gone at 5 (TOST against half the main
    effect, here 0.01); a benefit still beyond the margin at 5, or a loss at 3, refutes it."""
    from figures.report.seed000 import _confirm_transient

    def pairs(worst, scale="cpu"):
        return {"pairs": {"ft_up-ft": {"worst_loss": {"per_seed": list(worst)},
                                       "mean_loss": {"per_seed": [-0.02, -0.021, -0.019]}}},
                "n_seeds": 3, "scale": scale}  # fmt: skip

    n = {"llm_confirm": pairs(three), "llm_confirm_ep5": pairs(five)}
    assert _confirm_transient(n)[0] == verdict
    # the 5-epoch run is compared with the 3-epoch run of its own scale (it reused its models)
    old = {"llm_confirm": pairs((0.3, 0.2, 0.1), "new"), "llm_confirm_v1": pairs(three, "old"),
           "llm_confirm_ep5": pairs(five, "old")}  # fmt: skip
    assert _confirm_transient(old)[0] == verdict
    alone = {"llm_confirm": pairs(three, "new"), "llm_confirm_ep5": pairs(five, "old")}
    assert _confirm_transient(alone)[0] == V.NO_RESULT


def _confirm_numbers_by_hand(ft_accuracy: float) -> dict:
    """Five paired seeds: random − FT within ±0.3 points of accuracy but +0.02 nats/token of
    loss (beyond half the main effect, 0.01); easy − FT −2 points / +0.02 nats; FT+UP − FT
    +2 points / −0.02 nats."""

    def pair(acc, loss):
        return {"accuracy": {"per_seed": list(acc)}, "mean_loss": {"per_seed": list(loss)}}

    up = pair((2.0, 2.2, 1.8, 2.1, 1.9), (-0.02, -0.021, -0.019, -0.02, -0.02))
    pairs = {"random-ft": pair((0.2, -0.3, 0.1, 0.0, -0.1), (0.02, 0.021, 0.019, 0.02, 0.02)),
             "easy-ft": pair((-2.0, -2.5, -1.8, -2.2, -2.1), (0.02, 0.021, 0.019, 0.02, 0.022)),
             "ft_up-ft": up}  # fmt: skip
    return {"pairs": pairs, "n_seeds": 5, "scale": "cpu",
            "accuracy_mean": {"ft": ft_accuracy, "ft_up": ft_accuracy + 2, "pt": 1.0}}  # fmt: skip


def test_confirm_rows_judge_accuracy_once_ft_is_off_the_floor():
    """Issue 29: the paper's metric (accuracy) decides once FT averages >= 20 %; at the floor the
    rows fall back to held-out loss and say so in their first words."""
    from figures.report import seed000 as S

    off = {"llm_confirm": _confirm_numbers_by_hand(30.0)}
    floor = {"llm_confirm": _confirm_numbers_by_hand(3.0)}
    assert S.primary_metric(off) == "accuracy" and S.primary_metric(floor) == "mean_loss"
    # random − FT: 90 % interval 0 ± 2.132·0.1936/√5 = ±0.185 points, inside the 1-point margin;
    # on the loss it is +0.02, wholly beyond half the main effect (0.01): contradicted
    v, ours, rule, e = S._equivalent(off, "random", "ft")
    assert v == V.REPRODUCED and ours.startswith("not compute-matched: random trains more")
    assert "average accuracy random − ft" in ours
    assert "margin ±1 points" in e["test"] and "companion: mean held-out loss" in ours
    v, ours, *_ = S._equivalent(floor, "random", "ft")
    assert v == V.CONTRADICTED and ours.startswith("not compute-matched")
    assert "trains more optimizer steps than ft; " + S.LOSS_NOT_ACC in ours
    # easy hurts: lower accuracy (negative a − b) off the floor, higher loss at the floor
    assert S._confirm(off, "easy", "ft", better=False)[0] == V.REPRODUCED
    assert S._confirm(floor, "easy", "ft", better=False)[0] == V.REPRODUCED
    # FT+UP above FT, but it trains more steps: at most not shown (issue 37); its opposite
    # claim (FT+UP worse) is still contradicted by the same numbers
    assert S._confirm(off, "ft_up", "ft")[0] == V.NOT_SHOWN
    assert S._confirm(off, "ft_up", "ft", better=False)[0] == V.CONTRADICTED


def test_confirm_rows_on_variants_left_out_read_the_previous_scale_and_say_so():
    from figures.report import seed000 as S

    old = _confirm_numbers_by_hand(3.0)
    old["pairs"]["ft_up_self-ft_up"] = old["pairs"].pop("random-ft")
    old["scale"] = "previous CPU"
    n = {"llm_confirm": _confirm_numbers_by_hand(30.0), S.PREVIOUS: old}
    v, ours, *_ = S._equivalent(n, "ft_up_self", "ft_up")
    assert ours.startswith("steps not matched exactly")  # issue 37: compute matching first
    assert "; previous CPU scale, not today's: " + S.LOSS_NOT_ACC in ours
    assert "previous CPU scale)" in ours and v == V.CONTRADICTED  # judged on the old loss
    assert S._equivalent({"llm_confirm": n["llm_confirm"]}, "ft_up_self", "ft_up")[0] == (
        V.NO_RESULT
    )
