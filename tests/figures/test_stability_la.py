"""Stability of the linear-attention rows of the findings page (issue 28, item 4).

The rows ``fig1-median-loss``, ``fig1-plateau-artefact``, ``fig1-convergence``,
``sam-mechanism``, ``up-recipe-condition`` and ``up-condition-rule`` decide their verdict with
one rule (:mod:`figures.report.seed000`) that is applied to the 25 paired runs and to every
bootstrap resample of them. Checked here:

* each rule's bootstrap share on tiny paired sets, against the exact share counted by hand
  (``n**n <= 5000``: every ordered resample is enumerated);
* the committed ``per_run`` values agree with the committed reductions they come from and with
  the full-precision summary statistics the rows print;
* every row's stability on the committed summary, against an independent bootstrap written
  here from the rule's text and the committed data files (another generator, its own loop);
* a planted change of each rule's threshold changes the row's verdict and stability (the row
  cannot decide on the full runs with one rule and resample another).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest

from figures.report import claims as C
from figures.report import seed000 as S
from figures.report import sources as SRC
from figures.report import store
from figures.report import verdicts as V
from figures.report.summaries import load_numbers
from sims.runtime.io import read_netcdf

COMMITTED = load_numbers()
ROWS = (
    "fig1-median-loss",
    "fig1-plateau-artefact",
    "fig1-convergence",
    "sam-mechanism",
    "up-recipe-condition",
    "up-condition-rule",
)


def _finding(cid, numbers=COMMITTED):
    (claim,) = [c for c in C.CLAIMS if c.id == cid]
    return C.evaluate(claim, numbers).finding


def _stab(rows, decide):
    return Fraction(V.bootstrap_stability(rows, decide)).limit_denominator(10**6)


# ----------------------------------------------------------------------------- hand-counted


def test_paired_runs_keep_run_i_of_every_column_together():
    rows = S.paired_runs({"a": [1.0, 2.0, None], "b": [4, 5, 6]})
    assert [r["b"] for r in rows] == [4, 5, 6]
    assert rows[1] == {"a": 2.0, "b": 5}
    assert math.isnan(rows[2]["a"])  # a run without the value
    with pytest.raises(ValueError, match="different lengths"):
        S.paired_runs({"a": [1.0], "b": [1.0, 2.0]})


def test_fig1_median_rule_share_counted_by_hand():
    # Issue 37: each half is a two-sided sign test over the runs off GD by > 1 %. k of k lower
    # rejects only from k = 6 (2·2^-6 = 0.031; 2·2^-5 = 0.0625). SAM's run 6 ends at GD's loss:
    # 5 of 5 lower, not shown; a resample is 'reproduced' exactly when it never draws run 6,
    # P = (5/6)^6 = 0.335, so 'not shown' survives in 0.665 (2000 random resamples: ±0.035).
    rows = S.paired_runs({"gd": [1] * 6, "gd_upsample": [0.5] * 6, "sam": [0.5] * 5 + [1.0]})
    assert S.fig1_median_rule(rows) == V.NOT_SHOWN
    assert V.bootstrap_stability(rows, S.fig1_median_rule) == pytest.approx(
        1 - (5 / 6) ** 6, abs=0.035
    )
    rows = S.paired_runs({"gd": [1] * 6, "gd_upsample": [0.5] * 6, "sam": [0.5] * 6})
    assert S.fig1_median_rule(rows) == V.REPRODUCED
    # SAM above GD in every run: its half goes the other way
    rows = S.paired_runs({"gd": [1] * 6, "gd_upsample": [0.5] * 6, "sam": [1.5] * 6})
    assert S.fig1_median_rule(rows) == V.CONTRADICTED
    # margin: 0.5 % below GD is within the 1 % band, outside a 0.1 % one
    rows = S.paired_runs({"gd": [1] * 6, "gd_upsample": [0.995] * 6, "sam": [0.5] * 6})
    assert S.fig1_median_rule(rows) == V.NOT_SHOWN
    assert S.fig1_median_rule(rows, margin=0.001) == V.REPRODUCED


def test_fig1_median_rule_resamples_runs_paired():
    # run 2 is 5 % below its own GD. Methods resampled apart would pair GD's run 1 (1.0) with
    # GD+UP's run 2 (1.9, +90 %): stability would fall below 1.
    rows = S.paired_runs({"gd": [1, 2] * 3, "gd_upsample": [0.5, 1.9] * 3,
                          "sam": [0.5, 1.9] * 3})  # fmt: skip
    assert S.fig1_median_rule(rows) == V.REPRODUCED
    assert _stab(rows, S.fig1_median_rule) == 1


def test_plateau_rule_share_counted_by_hand():
    # levels 1 and 0.5; GD's run 3 at 0.7 is 40 % from the nearest level (0.5): the median
    # leaves the plateau when >= 2 of 3 draws are run 3 (7/27).
    rule = S.plateau_rule([1.0, 0.5])
    rows = S.paired_runs({"gd": [0.5, 0.5, 0.7], "sam": [0.51, 0.5, 0.5]})
    assert rule(rows) == V.VERIFIED
    assert _stab(rows, rule) == Fraction(20, 27)
    # tol: GD's single run is 4 % above the level 0.5
    one = S.paired_runs({"gd": [0.52], "sam": [0.5]})
    assert S.plateau_rule([1.0, 0.5])(one) == V.VERIFIED
    assert S.plateau_rule([1.0, 0.5], tol=0.03)(one) == V.NOT_SHOWN


def _conv_rows(loss_up, learned_sam):
    n = len(loss_up)
    return S.paired_runs(
        {
            "loss:gd": [1.0] * n,
            "loss:gd_upsample": loss_up,
            "loss:sam": [1.0] * n,
            "learned:gd": [2] * n,
            "learned:gd_upsample": [2] * n,
            "learned:sam": learned_sam,
        }
    )


def test_convergence_rule_shares_counted_by_hand():
    rule = S.convergence_rule(d=2)
    # GD+UP's run 3 is 50 % above GD: refuted when >= 2 of 3 draws are run 3 (7/27)
    rows = _conv_rows([1.0, 1.0, 1.5], [2, 2, 2])
    assert rule(rows) == V.VERIFIED
    assert _stab(rows, rule) == Fraction(20, 27)
    # one SAM run of 4 learned 1 of 2 features: refuted, unless a resample misses it,
    # (3/4)^4 = 81/256 of the resamples
    rows = _conv_rows([1.0] * 4, [2, 2, 2, 1])
    assert rule(rows) == V.NOT_SHOWN
    assert _stab(rows, rule) == Fraction(256 - 81, 256)
    # tol: a 0.3 % gap passes at 0.5 %, not at 0.1 %
    rows = _conv_rows([1.003] * 3, [2] * 3)
    assert rule(rows) == V.VERIFIED
    assert S.convergence_rule(d=2, tol=0.001)(rows) == V.NOT_SHOWN
    assert S.convergence_rule(d=3)(rows) == V.NOT_SHOWN  # d: every run must learn all d


def test_sam_mechanism_rule_share_counted_by_hand():
    # Issue 37: three tests. SAM's gain (1, 1, 1) and the prediction's excess over half of it
    # (0.6 − 0.5 = +0.1 every run) have zero spread: intervals [1, 1] and [0.1, 0.1], above 0.
    # Head-wise gains +0.01, NaN, −0.01: 90 % t-interval 0 ± 6.31·0.01414/√2 = ±0.063, inside
    # the margin ±0.5 (half of SAM's median gain 1). Every resample keeps SAM's and the
    # prediction's intervals; a TOST needs >= 2 head-wise runs: the resamples with exactly one
    # draw of run 1 or 3 (3 positions × 2 runs = 6) or none (run 2 thrice, 1) are not shown,
    # the other 20 of 27 verified.
    rule = S.sam_mechanism_rule()
    rows = S.paired_runs({"sam": [1.0] * 3, "sam_pred": [0.6] * 3,
                          "headwise": [0.01, None, -0.01]})  # fmt: skip
    assert rule(rows) == V.VERIFIED
    assert _stab(rows, rule) == Fraction(20, 27)
    # share: the prediction is 60 % of the gain; asking 70 % puts its excess at −0.1 in every
    # run, an interval below 0: refuted
    assert S.sam_mechanism_rule(0.7)(rows) == V.REFUTED
    # a median <= 0 with a wide spread (the old rule's 'gains nothing') is not shown
    wide = S.paired_runs({"sam": [1.0] * 3, "sam_pred": [0.6] * 3, "headwise": [-1, None, 0.9]})
    assert rule(wide) == V.NOT_SHOWN


def test_recipe_rule_share_counted_by_hand():
    # run 3 meets the condition: refuted; resamples that miss it (2/3)^3 = 8/27 are verified
    rows = S.paired_runs({"met": [0.0, 0.0, 1.0], "dh": [-1.0] * 3, "pred": [0.0] * 3})
    assert S.recipe_rule(rows) == V.NOT_SHOWN
    assert _stab(rows, S.recipe_rule) == Fraction(19, 27)
    rows = S.paired_runs({"met": [0.0], "dh": [-0.05], "pred": [0.0]})
    assert S.recipe_rule(rows) == V.VERIFIED
    assert S.recipe_rule(rows, below=-0.1) == V.NOT_SHOWN


def test_condition_selection_rule_share_counted_by_hand():
    # 4 runs, run 4 measured -1: the median of 4 drops to <= 0 when run 4 is drawn >= 2
    # times; P(k <= 1) = (3/4)^4 + 4·(1/4)(3/4)^3 = 189/256
    rows = S.paired_runs({"dh": [1.0, 1.0, 1.0, -1.0], "pred": [1.0] * 4, "met": [1.0] * 4})
    assert S.condition_selection_rule(rows) == V.VERIFIED
    assert _stab(rows, S.condition_selection_rule) == Fraction(189, 256)
    assert S.condition_selection_rule(rows, above=1.5) == V.NOT_SHOWN


# ----------------------------------------------------------------------------- committed values


@pytest.fixture(scope="module")
def hydrated(tmp_path_factory):
    rels = {
        "fig1": "linear_attention/figure1.nc",
        "mech": "linear_attention/sam_mechanism.nc",
        "up": "linear_attention/upsampling_study.nc",
    }
    d = tmp_path_factory.mktemp("hyd")
    store.hydrate([*rels.values(), "linear_attention/sam_escape.nc"], d)
    return {"dir": d, **{k: read_netcdf(d / r) for k, r in rels.items()}}


def test_the_summary_writer_keeps_the_per_run_values(hydrated):
    # what `python -m figures summaries` stores from results (here the hydrated reductions)
    for name in ("la_fig1", "la_sam_mechanism", "la_upsampling"):
        out = SRC.SOURCES[name].numbers(hydrated["dir"])
        assert out["per_run"] == COMMITTED[name]["per_run"], name


def test_committed_per_run_values_are_those_of_the_committed_data(hydrated):
    assert COMMITTED["la_fig1"]["per_run"] == SRC.la_fig1_per_run(hydrated["fig1"], SRC.FIG1.sig)
    assert COMMITTED["la_sam_mechanism"]["per_run"] == SRC.la_mechanism_per_run(
        hydrated["mech"], SRC.WHOLE.sig
    )
    assert COMMITTED["la_upsampling"]["per_run"] == SRC.la_upsampling_per_run(
        hydrated["up"], SRC.WHOLE.sig
    )


def test_per_run_rounding_is_idempotent():
    # so the lists are the same from the full result or from its rounded reduction
    x = np.random.default_rng(3).lognormal(size=200)
    x[5] = np.nan
    once = SRC._runs(x, 4)
    assert once[5] is None
    assert SRC._runs(np.array([np.nan if v is None else v for v in once]), 4) == once
    assert SRC._runs(np.array([True, False]), 4) == [1, 0]


def _sig(x, k):
    return float(f"{x:.{k}g}")


def test_per_run_values_agree_with_the_printed_summary():
    f = COMMITTED["la_fig1"]
    for m in SRC.LA_FIG1_RUN_METHODS:
        pr = f["per_run"][m]
        assert len(pr["test_loss_paper"]) == f["n_runs"] == 25
        for h in ("paper", "long"):
            # odd n: the median is one run's loss, rounded to the 4 digits the data keep
            assert np.median(pr[f"test_loss_{h}"]) == _sig(f[m][h]["test_loss"]["median"], 4)
        counts = np.bincount(pr["n_learned_long"], minlength=5).tolist()
        assert counts == f[m]["long"]["runs_with_n_features"]
    m = COMMITTED["la_sam_mechanism"]
    e = m["per_run"]["entropy_measured"]
    hw = [a - b for a, b in zip(e["sam_headwise"], e["gd"], strict=True) if a is not None]
    assert len(hw) == m["sam_headwise"]["entropy_gain_measured"]["n"] == 9
    # entropies (0.5 to 1.3 nats) kept at 5 digits: each off by <= 5e-5, a difference by 1e-4
    assert np.median(hw) == pytest.approx(
        m["sam_headwise"]["entropy_gain_measured"]["median"], abs=1e-4
    )
    u = COMMITTED["la_upsampling"]
    for sel in ("hard", "condition"):
        pr = u["per_run"]
        dh = np.subtract(pr["entropy"][sel], pr["entropy"]["gd"])
        assert np.median(dh) == pytest.approx(u[sel]["entropy_minus_gd_median"], abs=1e-4)
        assert sum(pr["condition_met"][sel]) == u[sel]["condition_met_runs"]
        assert np.median(pr["predicted_entropy_change"][sel]) == pytest.approx(
            u[sel]["predicted_entropy_change_median"], rel=1e-4
        )


# ----------------------------------------------------------------------------- the rows


def _independent_rows(h):
    """Per-run arrays of every row, read from the committed data files (not the numbers)."""
    f, mech, up = h["fig1"], h["mech"], h["up"]

    def fig(var, m, hz):
        return f[var].sel({"method": m, "horizon": hz}).values.astype(float)

    em, ep = mech.entropy_measured, mech.entropy_predicted
    ms = ("gd", "gd_upsample", "sam")
    return {
        "loss10k": np.stack([fig("test_loss_at", m, "paper") for m in ms], 1),
        "loss200k": np.stack([fig("test_loss_at", m, "long") for m in ms], 1),
        "learned": np.stack([fig("n_learned", m, "long") for m in ms], 1),
        "mech": np.stack(
            [
                em.sel({"method": "sam"}).values - em.sel({"method": "gd"}).values,
                ep.sel({"method": "sam"}).values - ep.sel({"method": "gd"}).values,
                em.sel({"method": "sam_headwise"}).values - em.sel({"method": "gd"}).values,
            ],
            1,
        ),
        "hard": np.stack(
            [
                up.entropy.sel(run_kind="hard").values - up.entropy.sel(run_kind="gd").values,
                up.condition_met.sel(selection="hard").values.astype(float),
            ],
            1,
        ),
        "cond": np.stack(
            [
                up.entropy.sel(run_kind="condition").values - up.entropy.sel(run_kind="gd").values,
                up.predicted_entropy_change.sel(selection="condition").values,
            ],
            1,
        ),
    }


def _fig1_independent(a):
    """Figure 1 as its page text states it: per half a sign test over runs off GD by > 1 %."""
    from scipy.stats import binomtest

    res = []
    for j in (1, 2):
        lo = int(np.sum(a[:, j] < 0.99 * a[:, 0]))
        hi = int(np.sum(a[:, j] > 1.01 * a[:, 0]))
        p = binomtest(lo, lo + hi).pvalue if lo + hi else 1.0
        res.append("not shown" if p >= 0.05 else ("holds" if lo > hi else "against"))
    if res == ["holds", "holds"]:
        return V.REPRODUCED
    return V.CONTRADICTED if "against" in res else V.NOT_SHOWN


def _mech_independent(margin):
    """sam-mechanism as its page text states it (scipy's t quantiles, its own loops)."""
    from scipy.stats import t

    def interval(x, level):
        x = x[~np.isnan(x)]
        if x.size < 2:
            return np.nan, np.nan
        h = t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
        return x.mean() - h, x.mean() + h

    def decide(a):
        ok = ~np.isnan(a[:, 0]) & ~np.isnan(a[:, 1])
        g_lo, g_hi = interval(a[ok, 0], 0.95)
        e_lo, e_hi = interval(a[ok, 1] - 0.5 * a[ok, 0], 0.95)
        h_lo, h_hi = interval(a[:, 2], 0.90)
        if g_hi < 0 or e_hi < 0 or h_lo > margin:
            return V.REFUTED
        if g_lo > 0 and e_lo > 0 and -margin < h_lo and h_hi < margin:
            return V.VERIFIED
        return V.NOT_SHOWN

    return decide


def _independent_rules(levels, mech_margin):
    """Each row's rule as its page text states it, on an (n_runs, k) array."""

    def plateau_ok(x):
        return min(abs(x - L) / L for L in levels) < 0.05

    def nanmed(x):
        x = x[~np.isnan(x)]
        return np.median(x) if x.size else np.nan

    return {
        "fig1-median-loss": ("loss10k", _fig1_independent),
        "fig1-plateau-artefact": (
            "loss10k",
            lambda a: plateau_ok(np.median(a[:, 0])) and plateau_ok(np.median(a[:, 2])),
        ),
        "fig1-convergence": (
            "both",
            lambda a: (
                (a[:, 3:] == 4).all()
                and all(
                    abs(np.median(a[:, j]) - np.median(a[:, 0])) < 0.005 * np.median(a[:, 0])
                    for j in (1, 2)
                )
            ),
        ),
        "sam-mechanism": ("mech", _mech_independent(mech_margin)),
        "up-recipe-condition": ("hard", lambda a: a[:, 1].sum() == 0 and nanmed(a[:, 0]) < 0),
        "up-condition-rule": ("cond", lambda a: nanmed(a[:, 0]) > 0 and nanmed(a[:, 1]) > 0),
    }


@pytest.fixture(scope="module")
def rows_now():
    return {cid: _finding(cid) for cid in ROWS}


def test_every_row_has_a_stability_on_the_committed_summary(rows_now):
    for cid, f in rows_now.items():
        assert f.n == 25, cid
        assert f.stability is not None, cid
        assert f.resampling == "bootstrap over the 25 paired runs: 2000 random resamples", cid
        assert "n/a" not in f.resampling


def test_every_row_stability_matches_an_independent_bootstrap(rows_now, hydrated):
    data = _independent_rows(hydrated)
    data["both"] = np.concatenate([data["loss200k"], data["learned"]], 1)
    mech_margin = 0.5 * float(np.nanmedian(data["mech"][:, 0]))
    rules = _independent_rules(COMMITTED["la_fig1"]["saddle_level"], mech_margin)
    rng = np.random.default_rng(20261127)
    for cid, (key, ok) in rules.items():
        a = data[key]
        ref = ok(a)
        f = rows_now[cid]
        want = ref if isinstance(ref, str) else (V.VERIFIED if ref else V.NOT_SHOWN)
        assert f.verdict == want, cid
        share = np.mean([ok(a[rng.integers(0, len(a), len(a))]) == ref for _ in range(2000)])
        # two independent 2000-draw estimates: SE of the difference <= sqrt(2·0.25/2000) = 0.016
        assert f.stability == pytest.approx(share, abs=0.05), cid


def test_no_linear_attention_row_is_fragile(rows_now):
    # sam-mechanism was 'verified' and fragile (66 %) on medians against thresholds; decided by
    # its tests (issue 37), 'not shown' survives nearly every resample: the head-wise TOST
    # interval over 9 runs is far wider than the margin
    for cid in ROWS:
        assert rows_now[cid].stability >= 0.95 and not rows_now[cid].fragile, cid


PLANTED = {
    # row: (attribute of seed000, is it a factory of the rule, planted rule from the original,
    # verdict after)
    "fig1-median-loss": (
        "fig1_median_rule",
        False,
        # SAM's column read as GD+UP's, at a 2 % band: GD+UP's half (8 lower, 0 higher) twice
        lambda orig: lambda rows: orig([{**r, "sam": r["gd_upsample"]} for r in rows], 0.02),
        V.REPRODUCED,
    ),
    "fig1-plateau-artefact": (
        "plateau_rule",
        True,
        lambda orig: lambda levels: orig(levels, tol=0.02),  # SAM's median is 3 % off
        V.NOT_SHOWN,
    ),
    "fig1-convergence": (
        "convergence_rule",
        True,
        lambda orig: lambda d: orig(d, tol=0.001),  # GD+UP's median is 0.18 % above GD's
        V.NOT_SHOWN,
    ),
    "sam-mechanism": (
        "sam_mechanism_rule",
        True,
        # a 10 % share and a margin 10x wider: every test passes
        lambda orig: lambda share, margin: orig(0.1, 10 * margin),
        V.VERIFIED,
    ),
    "up-recipe-condition": (
        "recipe_rule",
        False,
        lambda orig: functools.partial(orig, below=-0.1),  # measured -0.056
        V.NOT_SHOWN,
    ),
    "up-condition-rule": (
        "condition_selection_rule",
        False,
        lambda orig: functools.partial(orig, above=0.07),  # measured +0.067
        V.NOT_SHOWN,
    ),
}


@pytest.mark.parametrize("cid", ROWS)
def test_a_planted_threshold_changes_the_row_verdict_and_its_resamples(cid, rows_now, monkeypatch):
    attr, factory, plant, after = PLANTED[cid]
    planted = plant(getattr(S, attr))
    seen = []  # every verdict the planted rule gives, in call order

    def record(decide):
        def wrapped(rows):
            seen.append(decide(rows))
            return seen[-1]

        return wrapped

    if factory:
        monkeypatch.setattr(S, attr, lambda *a, **k: record(planted(*a, **k)))
    else:
        monkeypatch.setattr(S, attr, record(planted))
    f = _finding(cid)
    assert f.verdict == after != rows_now[cid].verdict
    # one rule: the verdict on the 25 runs, and every one of the 2000 resamples, went through
    # the planted rule; the stability is the share of those resamples giving the row's verdict
    assert len(seen) == 1 + 2000 + 1  # bootstrap_stability's default n_boot
    assert seen[0] == seen[-1] == f.verdict
    assert f.stability == np.mean([v == f.verdict for v in seen[1:-1]])
