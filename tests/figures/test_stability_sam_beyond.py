"""Stability of the SAM-family sharpness/τ rows, the Markov "hard is noisy" row and the SoSD
bridge's drops-on-peaks row (issue 28, item 4).

Each row's verdict and its stability come from one ``decide`` over per-seed (per-run) records.
The synthetic cases have 3 seeds, so :func:`~figures.report.verdicts.bootstrap_stability`
enumerates all 27 ordered resamples; the expected shares are counted by hand in the comments
(``k`` = how many of the 3 draws pick the odd seed: ``k = 0`` in 2³ = 8 resamples, ``k = 1`` in
3·2² = 12, ``k = 2`` in 3·2 = 6, ``k = 3`` in 1). On the committed summaries, the 3-seed rows
are recomputed independently from the committed *data* files (the reduced result files, read
with xarray), not from the rows' own functions.
"""

from __future__ import annotations

import copy
import itertools
import shutil

import numpy as np
import pytest
import xarray as xr

from figures.report import beyond as B
from figures.report import claims as C
from figures.report import seed003 as S3
from figures.report import store
from figures.report import verdicts as V
from figures.report.backfill import backfill_numbers, new_fields
from figures.report.sources import tau_per_seed
from figures.report.summaries import load_numbers

COMMITTED = load_numbers()
ROWS = ("fsam-flatter", "sam-lowest-lambda", "tau-logit", "tau-cross", "tau-init",
        "markov-hard-is-noisy", "bridge-drops-on-peaks", "markov-sam-uniform",
        "markov-upsampling")  # fmt: skip


def _row(claim_id, numbers):
    claim = next(c for c in C.CLAIMS if c.id == claim_id)
    return C.evaluate(claim, numbers).finding


# ----------------------------------------------------------------------------- synthetic


def _sharpness(lam: dict, tr: dict) -> dict:
    """``sam_family_sharpness`` numbers from per-seed λ_max and tr H_L per optimizer."""

    def metric(v):
        return {o: {"per_seed": list(x), "mean": float(np.mean(x))} for o, x in v.items()}

    return {
        "sam_family_sharpness": {
            "seeds": [0, 1, 2],
            "metrics": {"lambda_max": metric(lam), "tr_H_L": metric(tr)},
        }
    }


FLAT_TR = {"adamw": [10.0] * 3, "sam": [5.0] * 3, "fsam": [5.0] * 3}


def test_flatter_share_counted_by_hand():
    # AdamW λ_max 1 in every seed, so SAM's ratio is its resample mean of (0.5, 0.5, 1.6):
    # (1.5 + 1.1 k) / 3 < 1 for k <= 1 draws of 1.6: 8 + 12 = 20 of 27 resamples stay flatter
    lam = {"adamw": [1.0] * 3, "sam": [0.5, 0.5, 1.6], "fsam": [0.5] * 3}
    f = _row("fsam-flatter", _sharpness(lam, FLAT_TR))
    assert f.verdict == V.REPRODUCED and f.n == 3
    assert f.stability == pytest.approx(20 / 27)
    assert f.fragile and "27 resamples" in f.resampling
    # tr H_L counts too: FSAM's tr H_L at AdamW's level is not flatter in any resample
    tr = {**FLAT_TR, "fsam": [10.0] * 3}
    g = _row("fsam-flatter", _sharpness({**lam, "sam": [0.5] * 3}, tr))
    assert g.verdict == V.NOT_SHOWN and g.stability == 1.0


def test_flatter_resamples_seeds_paired_across_optimizers():
    # AdamW and SAM move together seed by seed (SAM = 0.9 × AdamW): every paired resample keeps
    # the ratio at 0.9; drawn independently, about a third of the resamples would not
    lam = {"adamw": [1.0, 2.0, 9.0], "sam": [0.9, 1.8, 8.1], "fsam": [0.1, 0.2, 0.9]}
    assert _row("fsam-flatter", _sharpness(lam, FLAT_TR)).stability == 1.0


def test_lowest_lambda_share_counted_by_hand():
    # SAM 1.0 in every seed; FSAM (0.7, 1.2, 1.2): resample mean (3.6 − 0.5 j) / 3 < 1 when
    # j >= 2 draws of 0.7 (6 + 1 = 7 resamples): SAM stays lowest in 20 of 27
    lam = {"adamw": [3.0] * 3, "sam": [1.0] * 3, "fsam": [0.7, 1.2, 1.2]}
    f = _row("sam-lowest-lambda", _sharpness(lam, FLAT_TR))
    assert f.verdict == V.REPRODUCED and f.stability == pytest.approx(20 / 27)
    # FSAM lower in every seed: SAM is never lowest, in no resample either
    f = _row("sam-lowest-lambda", _sharpness({**lam, "fsam": [0.5] * 3}, FLAT_TR))
    assert f.verdict == V.NOT_SHOWN and f.stability == 1.0


def _tau(logit, func, cross, init_logit=(0.0,) * 3, init_func=(1.0,) * 3) -> dict:
    def share(per, init):
        return {"per_seed": [list(x) for x in per], "per_seed_init": list(init)}

    m = {"tau_logit": share(logit, init_logit), "tau_func": share(func, init_func),
         "tau_cross": share(cross, (0.0,) * 3), "n_seeds": 3}  # fmt: skip
    return {"sam_family_tau": {"cut_step": 50, "methods": {"adamw": m}}}


def test_tau_logit_share_counted_by_hand():
    # seeds' τ_logit after the cut: 1, 1, 2 (4 steps each); pooled median 1 while seed 2 is drawn
    # at most once (8 or more of the 12 pooled values are 1), 2 when twice or more: 20 of 27
    logit = ([1.0] * 4, [1.0] * 4, [2.0] * 4)
    func = ([0.1] * 4,) * 3
    cross = ([-0.1] * 4,) * 3
    f = _row("tau-logit", _tau(logit, func, cross))
    assert f.verdict == V.REPRODUCED and f.stability == pytest.approx(20 / 27)
    assert "q25/median/q75 1/1/" in f.ours and "(3 seeds)" in f.ours
    # τ_func too large (median 0.5 > 1/3 of τ_logit's 1): not shown whatever is drawn
    g = _row("tau-logit", _tau(([1.0] * 4,) * 3, ([0.5] * 4,) * 3, cross))
    assert g.verdict == V.NOT_SHOWN and g.stability == 1.0


def test_tau_cross_share_counted_by_hand():
    # seeds (-1)×4, (-1)×4, (-1, -1, +1, +1). numpy's q75 sits at position 0.75·11 = 8.25 of the 12
    # sorted values: with seed 2 drawn once, 10 values are -1 (q75 = -1 < 0); twice or more, only
    # 8 or 6 are (q75 = +1): 20 of 27 resamples reproduce
    logit = ([1.0] * 4,) * 3
    func = ([0.1] * 4,) * 3
    cross = ([-1.0] * 4, [-1.0] * 4, [-1.0, -1.0, 1.0, 1.0])
    f = _row("tau-cross", _tau(logit, func, cross))
    assert f.verdict == V.REPRODUCED and f.stability == pytest.approx(20 / 27)
    assert np.quantile([-1.0] * 10 + [1.0] * 2, 0.75) < 0 < np.quantile([-1.0] * 8 + [1] * 4, 0.75)


def test_tau_init_share_counted_by_hand():
    # τ_func at step 0: 1, 1, 0.5; resample mean (3 − 0.5 k) / 3 > 0.8 for k <= 1: 20 of 27
    logit = ([1.0] * 4,) * 3
    func = ([0.1] * 4,) * 3
    cross = ([-1.0] * 4,) * 3
    f = _row("tau-init", _tau(logit, func, cross, init_func=(1.0, 1.0, 0.5)))
    assert f.verdict == V.VERIFIED and f.stability == pytest.approx(20 / 27)
    # τ_func 1, 1, 0.25: mean 0.75 (not > 0.8), > 0.8 only when seed 2 is not drawn: 19 of 27
    h = _row("tau-init", _tau(logit, func, cross, init_func=(1.0, 1.0, 0.25)))
    assert h.verdict == V.NOT_SHOWN and h.stability == pytest.approx(19 / 27)
    # τ_logit at step 0 matters as well: 0.4 in one seed gives a mean 0.4 k / 3 < 0.2 for k <= 1
    # (0.27 and 0.4 otherwise): again 20 of 27
    g = _row("tau-init", _tau(logit, func, cross, init_logit=(0.0, 0.0, 0.4)))
    assert g.verdict == V.VERIFIED and g.stability == pytest.approx(20 / 27)


def _beyond(bayes, hard: dict) -> dict:
    means = {k: float(np.mean([x for x in v if x is not None])) for k, v in hard.items()}
    return {"markov_beyond": {"n_seeds": len(bayes), "bayes_loss_mean": float(np.mean(bayes)),
                              "bayes_loss_per_seed": list(bayes), "hard_bayes_loss": means,
                              "hard_bayes_loss_per_seed": hard}}  # fmt: skip


def test_hard_is_noisy_share_counted_by_hand():
    # Bayes loss 1 in every seed; loss_k2's cluster (1.3, 1.3, 1.0): mean (3.9 − 0.3 k) / 3 >
    # 1.15 for k <= 1: 20 of 27. The excess-trajectory clusters are not part of the rule.
    hard = {"loss_k2": [1.3, 1.3, 1.0], "loss_k4": [2.0] * 3, "excess_k2": [0.5] * 3}
    f = _row("markov-hard-is-noisy", _beyond([1.0] * 3, hard))
    assert f.verdict == V.VERIFIED and f.n == 3 and f.stability == pytest.approx(20 / 27)
    # a seed without a cluster (None) is left out of that cluster's mean: (1.3, 1.3) → 1.3; a
    # resample drawing only seed 2 has no loss_k4 cluster at all (1 of 27 not verified)
    g = _row(
        "markov-hard-is-noisy",
        _beyond([1.0] * 3, {"loss_k2": [1.3] * 3, "loss_k4": [1.3, 1.3, None]}),
    )
    assert g.verdict == V.VERIFIED and g.stability == pytest.approx(26 / 27)


def test_hard_is_noisy_follows_the_factor(monkeypatch):
    hard = {"loss_k2": [1.3, 1.3, 1.0], "loss_k4": [2.0] * 3}
    monkeypatch.setattr(B, "NOISY_FACTOR", 1.25)
    # > 1.25 needs (3.9 − 0.3 k) / 3 > 1.25: k = 0 only: the full data (1.2) is not shown, and
    # 27 − 8 = 19 resamples agree
    f = _row("markov-hard-is-noisy", _beyond([1.0] * 3, hard))
    assert f.verdict == V.NOT_SHOWN and f.stability == pytest.approx(19 / 27)
    assert "25 % above" in f.rule


def _bridge(runs) -> dict:
    per_run = [{"relative": [0.001, *later], "chance": ch} for later, ch in runs]
    return {"sosd_bridge": {"n_runs": len(runs), "alignment": {"key": {"gd": {
        "first": {"median": 0.001}, "per_run": per_run}}}}}  # fmt: skip


def test_bridge_share_counted_by_hand():
    # later offsets 0.01, 0.01, 0.5 (one per run), chance 1 → threshold 0.1: the pooled median
    # is 0.01 while run 2 is drawn at most once, 0.5 after: 20 of 27
    f = _row("bridge-drops-on-peaks", _bridge([([0.01], 1.0), ([0.01], 1.0), ([0.5], 1.0)]))
    assert f.verdict == V.VERIFIED and f.n == 3 and f.stability == pytest.approx(20 / 27)
    # the first drop is not a "later" one; a run without later drops adds none; the chance level
    # is the runs' median: (1, 1, 0.05) → 1, but 0.05 when run 2 is drawn twice or more (k >= 2:
    # 7 resamples not verified), and the one resample of run 1 only has no later drop at all:
    # 27 − 7 − 1 = 19 of 27
    g = _row("bridge-drops-on-peaks", _bridge([([0.02], 1.0), ([], 1.0), ([0.02], 0.05)]))
    assert g.verdict == V.VERIFIED and "median 0.02" in g.ours and "2 drops" in g.ours
    assert g.stability == pytest.approx(19 / 27)


def test_resampled_rule_is_the_full_data_rule():
    """Each row's verdict is its ``decide`` on all seeds: planting another threshold in the
    decide (what a resample sees) changes the row's verdict too."""
    n = _tau(([1.0] * 4, [1.0] * 4, [2.0] * 4), ([0.1] * 4,) * 3, ([-1.0] * 4,) * 3)
    assert _row("tau-logit", n).verdict == V.REPRODUCED
    rows = S3._tau_rows(n)
    assert S3.tau_logit_decide(rows) == V.REPRODUCED
    assert V.bootstrap_stability(rows, S3.tau_logit_decide) == pytest.approx(20 / 27)


# ----------------------------------------------------------------------------- committed


def test_every_row_has_a_stability_on_the_committed_summaries():
    for cid in ROWS:
        f = _row(cid, COMMITTED)
        assert f.stability is not None and f.resampling, (cid, f.resampling)
        assert "no per-seed" not in f.resampling
        assert f.n >= 3


def _data(rel):
    return store.decode_dataset(store.read_summary_json(store.data_path(rel)))


def _exact_share(n_seeds, verdict_of):
    """Share of the n^n ordered resamples of seed indices on which ``verdict_of`` agrees."""
    ref = verdict_of(list(range(n_seeds)))
    draws = list(itertools.product(range(n_seeds), repeat=n_seeds))
    return sum(verdict_of(list(d)) == ref for d in draws) / len(draws), ref


def test_sharpness_rows_match_an_independent_recount_from_the_data():
    ds = _data("sam_family/sharpness.nc")
    opts = [str(o) for o in ds.optimizer.values]

    def flatter(idx):
        m = {k: ds[k].isel(seed=idx).mean("seed") for k in ("lambda_max", "tr_H_L")}
        ok = all(float(m[k].sel(optimizer=o) / m[k].sel(optimizer="adamw")) < 1
                 for k in m for o in opts if o != "adamw")  # fmt: skip
        return V.REPRODUCED if ok else V.NOT_SHOWN

    def lowest(idx):
        m = ds.lambda_max.isel(seed=idx).mean("seed")
        return V.REPRODUCED if str(m.idxmin("optimizer").values) == "sam" else V.NOT_SHOWN

    for cid, fn in (("fsam-flatter", flatter), ("sam-lowest-lambda", lowest)):
        share, ref = _exact_share(ds.sizes["seed"], fn)
        f = _row(cid, COMMITTED)
        assert (f.verdict, f.stability, f.n) == (ref, pytest.approx(share), 3), cid


def test_tau_rows_match_an_independent_recount_from_the_data():
    ds = _data("sam_family/tau.nc").sel(optimizer="adamw")
    cut = COMMITTED["sam_family_tau"]["cut_step"]
    after = ds.where(ds.callback_step > cut, drop=True)

    def pooled(k, idx, q):
        return float(np.nanquantile(after[k].isel(seed=idx).values.ravel(), q))

    def logit(idx):
        lo, f = pooled("tau_logit", idx, 0.5), pooled("tau_func", idx, 0.5)
        return V.REPRODUCED if 0.8 <= lo <= 1.25 and lo > 3 * abs(f) else V.NOT_SHOWN

    def cross(idx):
        return V.REPRODUCED if pooled("tau_cross", idx, 0.75) < 0 else V.NOT_SHOWN

    def init(idx):
        x = ds.sel(callback_step=0).isel(seed=idx)
        ok = float(x.tau_func.mean()) > 0.8 and float(x.tau_logit.mean()) < 0.2
        return V.VERIFIED if ok else V.NOT_SHOWN

    for cid, fn in (("tau-logit", logit), ("tau-cross", cross), ("tau-init", init)):
        share, ref = _exact_share(ds.sizes["seed"], fn)
        f = _row(cid, COMMITTED)
        assert (f.verdict, f.stability) == (ref, pytest.approx(share)), cid


def test_committed_numbers_of_the_rows_are_unchanged():
    """The per-seed recomputation shows the numbers the page showed before (issue 22's)."""
    f = _row("tau-logit", COMMITTED)
    assert "0.999/1.06/1.19, τ_func median 0.224" in f.ours
    assert "-0.462/-0.295/-0.184" in _row("tau-cross", COMMITTED).ours
    assert "median 0.002 (max 0.0037, 12 drops)" in _row("bridge-drops-on-peaks", COMMITTED).ours
    assert "SAM 1.96, PSAM 2.28, FSAM 1.99" in _row("sam-lowest-lambda", COMMITTED).ours


# ----------------------------------------------------------------------------- summaries


def test_tau_per_seed_keeps_only_the_seeds_that_ran():
    a = np.array([[0.5, 0.25, np.nan], [np.nan] * 3, [1.0, 2.0, 3.0]])
    after = xr.DataArray(a, dims=("seed", "callback_step"))
    init = xr.DataArray([0.1, np.nan, 0.3], dims=("seed",))
    out = tau_per_seed(after.transpose("callback_step", "seed"), init)
    assert out == {"per_seed": [[0.5, 0.25], [1.0, 2.0, 3.0]], "per_seed_init": [0.1, 0.3]}


def test_new_fields_adds_wildcard_keys_and_never_overwrites():
    new = {"a": {"x": {"p": [1.0], "q": 2.0}, "y": {"p": [3.0]}, "z": {"p": [4.0]}}, "b": 5}
    old = {"a": {"x": {"q": 2.0}, "y": {}}}
    out, added = new_fields(old, new, ["a/*/p"])
    assert added == ["a/x/p", "a/y/p"]  # "a/z" is a branch `old` lacks: not this field's
    assert out == {"a": {"x": {"q": 2.0, "p": [1.0]}, "y": {"p": [3.0]}}}
    assert old == {"a": {"x": {"q": 2.0}, "y": {}}}  # the input is left alone
    assert new_fields(out, new, ["a/*/p"]) == (out, [])  # present already: nothing to add
    out_all, added_all = new_fields(old, new)  # keys=None: every absent field, whole subtrees
    assert added_all == ["a/x/p", "a/y/p", "a/z", "b"]
    assert out_all == {**new, "a": {**new["a"], "x": {"q": 2.0, "p": [1.0]}}}
    # an existing value is never replaced: within rtol it is kept, beyond it is refused
    kept = {"a": {"x": {"q": 2.0 * (1 + 1e-4), "p": [1.0]}}}
    assert new_fields(kept, new, ["a/x/q"]) == (kept, [])
    moved = {"a": {"x": {"q": 2.0, "p": [1.05]}, "y": {}}}
    with pytest.raises(ValueError, match=r"a/x/p.*rtol=0.01"):
        new_fields(moved, new, ["a/*/p"])
    assert new_fields(moved, new, ["a/*/p"], rtol=0.1)[1] == ["a/y/p"]
    with pytest.raises(ValueError, match="matched no field"):
        new_fields(old, new, ["a/*/nope"])
    with pytest.raises(ValueError, match="not a path"):
        new_fields(old, new, ["a//p"])
    with pytest.raises(TypeError, match="one string"):
        new_fields(old, new, "a/*/p")


def test_committed_per_seed_fields_are_what_the_sources_compute_from_the_data(tmp_path):
    """Backfilling again from the committed data finds the committed fields in place and adds
    nothing; stripped, they come back as committed; a planted change of one committed value is
    refused."""
    root = tmp_path / "summaries"
    shutil.copytree(store.SUMMARY_DIR, root)
    quiet = {"root": root, "progress": lambda _: None}
    keys = {
        "sam_family_sharpness": ["metrics/*/*/per_seed"],
        "sam_family_tau": ["methods/*/*/per_seed", "methods/*/*/per_seed_init"],
        "markov_beyond": ["hard_bayes_loss_per_seed", "bayes_loss_per_seed"],
        "sosd_bridge": ["alignment/*/*/per_run"],
    }
    for name, k in keys.items():
        assert backfill_numbers(name, k, **quiet) == [], name
    p = store.numbers_path("markov_beyond", root)
    d = store.read_summary_json(p)
    assert len(d["provenance"]["backfilled"]) == 1  # the committed one: nothing written now
    stripped = copy.deepcopy(d)
    del stripped["numbers"]["bayes_loss_per_seed"]
    store.write_summary_json(p, stripped)
    assert backfill_numbers("markov_beyond", keys["markov_beyond"], **quiet) == [
        "bayes_loss_per_seed"
    ]
    back = store.read_summary_json(p)
    assert back["numbers"] == d["numbers"]
    assert len(back["provenance"]["backfilled"]) == 2  # the committed one and this one
    assert "markov/beyond_uniformity.nc" in back["provenance"]["backfilled"][1]["from"]
    bad = copy.deepcopy(d)
    bad["numbers"]["bayes_loss_per_seed"][0] += 0.1
    store.write_summary_json(p, bad)
    text = p.read_text()
    with pytest.raises(ValueError, match="bayes_loss_per_seed"):
        backfill_numbers("markov_beyond", ["bayes_loss_per_seed"], **quiet)
    assert p.read_text() == text  # nothing overwritten
    store.write_summary_json(p, d)
    with pytest.raises(ValueError, match="matched no field"):
        backfill_numbers("markov_beyond", ["no_such_field"], **quiet)
    with pytest.raises(ValueError, match="not a summary source"):
        backfill_numbers("nope", ["x"], **quiet)
    with pytest.raises(ValueError, match="rtol"):
        backfill_numbers("markov_beyond", rtol=-1, **quiet)


def test_bridge_markov_summary_keeps_what_the_figure_reads():
    ds = _data("sosd_bridge/markov_seed0.nc")
    assert "sigma" not in ds  # 0.99 MB of singular values nothing reads
    for v in ("a_delta_sigma", "pattern_time", "onset"):
        assert v in ds and np.isfinite(ds[v].values).any(), v
    assert "alignment" in ds.attrs and "step" in ds.coords
    assert store.data_path("sosd_bridge/markov_seed0.nc").stat().st_size < 150_000


def _keys(x, prefix=""):
    if isinstance(x, dict):
        return {k for key, v in x.items() for k in _keys(v, f"{prefix}/{key}")} | {prefix}
    return {prefix}


def _assert_same_up_to_rounding(got, want, path=""):
    """Equal structure, strings and integers; floats to 1e-12 relative (another numpy's summation
    order moves a derived float by an ulp: 0.5588111048551118 vs ...117 seen; a changed value from
    the data moves it in the 4th digit)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), path
        for k in want:
            _assert_same_up_to_rounding(got[k], want[k], f"{path}/{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same_up_to_rounding(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got == pytest.approx(want, rel=1e-12, abs=0), path
    else:
        assert got == want, path


def test_the_writer_makes_the_committed_fields_from_results(tmp_path):
    """``python -m figures summaries`` on results rebuilt from the committed data writes every
    committed field, the per-seed ones included (the pooled bridge batches come from
    ``la_seed*.nc`` files that are not summarised as data)."""
    from figures.report.sources import SOURCES
    from figures.report.summaries import write_summaries

    names = ["sam_family_sharpness", "sam_family_tau", "markov_beyond", "sosd_bridge"]
    store.hydrate([rel for n in names for rel in SOURCES[n].files], tmp_path / "results")
    mk = tmp_path / "results" / "sosd_bridge" / "markov_seed0.nc"
    with xr.open_dataset(mk) as ds:  # the full result has the singular values the summary drops
        full = ds.load().assign(sigma=ds.delta_sigma.expand_dims(k=2).transpose(..., "k"))
    full.to_netcdf(mk)
    status = write_summaries(tmp_path / "results", root=tmp_path / "sum", only=names,
                             progress=lambda _: None)  # fmt: skip
    assert all(v == "written" for v in status.values())
    fresh = load_numbers(tmp_path / "sum")
    for n in names:
        committed = {k for k in _keys(COMMITTED[n]) if not k.startswith("/pooled")}
        assert _keys(fresh[n]) == committed, n
    # the row's matrix (keys) exactly; the merged matrix's peaks move with the data's 4 digits
    # (one SAM run's first-stage offset: 0.722 from the data, 0.724 from the full result)
    a, b = fresh["sosd_bridge"]["alignment"], COMMITTED["sosd_bridge"]["alignment"]
    _assert_same_up_to_rounding(a["key"], b["key"])
    assert a["merged"]["sam"]["first"] == pytest.approx(b["merged"]["sam"]["first"], rel=0.01)
    for m, row in COMMITTED["sam_family_tau"]["methods"].items():  # 4 digits in both
        for k in ("tau_logit", "tau_func", "tau_cross"):
            got = fresh["sam_family_tau"]["methods"][m][k]
            assert (got["per_seed"], got["per_seed_init"]) == (
                row[k]["per_seed"],
                row[k]["per_seed_init"],
            )
    hard = "hard_bayes_loss_per_seed"
    assert fresh["markov_beyond"][hard] == COMMITTED["markov_beyond"][hard]


def test_bridge_figure_draws_from_the_reduced_summary(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    from figures.report.drawing import draw

    out = draw(["sosd_bridge"], tmp_path, workers=1)
    assert out["sosd_bridge"].get("paths"), out["sosd_bridge"]
    assert all(p.stat().st_size > 50_000 for p in out["sosd_bridge"]["paths"])
