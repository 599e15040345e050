"""Theorem 4.4 checks, the main job's CLI and its outputs."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

from sims import sam_entropy as se
from sims.entropy import majorizes, shannon_entropy
from sims.runtime.io import read_netcdf

SQ3 = math.sqrt(3)


def t_gd_formula(lam, eps, u, tau=1.0):
    return tau / lam**2 * (1 / eps - 1 / u)


def t_sam_formula(lam, rho, eps, u, tau=1.0):
    rh = 2 * rho / SQ3
    return tau / (lam**2 * rh) * math.log((u - rh) * eps / (u * (eps - rh)))


# Distinct spectra with at least 5% relative separation (so the theorem's strict gap is resolvable
# in double precision), ρ inside the condition.
spectra = st.lists(st.floats(0.01, 5.0), min_size=2, max_size=7).filter(
    lambda v: min(np.diff(np.sort(v))) > 0.05 * max(v)
)


@given(spectra, st.floats(0.05, 0.99), st.floats(1e-3, 0.05), st.floats(0.2, 0.9))
def test_theorem_4_4_holds_inside_condition(lams, frac, eps, c):
    if c * max(lams) ** (-1 / 3) <= 1.05 * eps:
        return
    rho = frac * SQ3 / 2 * eps
    ds = se.check_theorem(se.SamEntropyConfig(eigenvalues=tuple(lams), rhos=(rho,), eps=eps, c=c,
                                              cross_check=False))  # fmt: skip
    r = ds.sel(rho=rho)
    assert bool(r.condition) and bool(r.learned_all)
    # independent recomputation from the paper's closed forms
    lam = np.sort(lams)[::-1]
    u = c * lam ** (-1 / 3)
    tg = np.array([t_gd_formula(x, eps, ui) for x, ui in zip(lam, u, strict=True)])
    ts = np.array([t_sam_formula(x, rho, eps, ui) for x, ui in zip(lam, u, strict=True)])
    np.testing.assert_allclose(ds.t_gd.values, tg, rtol=1e-12)
    np.testing.assert_allclose(r.t_sam.values, ts, rtol=1e-9)
    assert shannon_entropy(ts) > shannon_entropy(tg)  # the theorem
    assert majorizes(tg / tg.sum(), ts / ts.sum(), atol=1e-13)  # via Lemma C.2
    assert bool(r.ordering_holds) and bool(r.majorizes)
    # Step 2: w_i = t_SAM/t_GD increases as t_GD decreases (larger λ)
    w = ts / tg
    assert np.all(np.diff(w) <= 1e-12 * w[:-1])
    # SAM's entropy stays below the ρ → bound ceiling H(p ∝ λ^-2)
    assert float(r.entropy_sam) <= float(ds.entropy_ceiling) + 1e-12


@given(spectra, st.floats(0.05, 1.99), st.floats(1e-3, 0.05), st.floats(0.2, 0.9))
def test_exact_sam_ordering_holds_up_to_twice_the_bound(lams, frac, eps, c):
    """Beyond the paper: exact SAM on the ansatz ray learns whenever ρ < √3 ε and the entropy
    ordering holds there too (checked against t = τ/λ²(1/(ε−δ) − 1/(u−δ)), δ = ρ/√3)."""
    if c * max(lams) ** (-1 / 3) <= 1.05 * eps:
        return
    rho = frac * SQ3 / 2 * eps
    ds = se.check_theorem(se.SamEntropyConfig(eigenvalues=tuple(lams), rhos=(rho,), eps=eps, c=c,
                                              cross_check=False, sam_form="exact"))  # fmt: skip
    lam = np.sort(lams)[::-1]
    u = c * lam ** (-1 / 3)
    d = rho / SQ3
    ts = 1 / lam**2 * (1 / (eps - d) - 1 / (u - d))
    np.testing.assert_allclose(ds.t_sam.values[0], ts, rtol=1e-9)
    assert bool(ds.ordering_holds.values[0]) and bool(ds.majorizes.values[0])


def test_outside_condition_truncated_sam_learns_nothing():
    eps = 0.01
    ds = se.check_theorem(se.SamEntropyConfig(rhos=(1.01 * SQ3 / 2 * eps,), eps=eps,
                                              cross_check=False))  # fmt: skip
    r = ds.isel(rho=0)
    assert not bool(r.condition) and not bool(r.learned_all)
    assert np.all(np.isinf(r.t_sam.values)) and set(r.status_sam.values) == {"decays"}
    assert "condition violated" in str(r.verdict.values)


def test_full_dynamics_ordering_reverses_just_outside_condition():
    """Finding (beyond the paper): with the untruncated ODEs SAM still learns every feature a little
    past ρ = (√3/2)ε, and there the entropy ordering reverses. Pinned with quadrature times."""
    from sims.scalar_odes import a_coefficient, attn_s_ode, learning_time

    lam = se.spectrum("geometric", 4, spread=10.0)
    eps, c, n = 0.01, 0.5, 31.0
    # the full-dynamics threshold for feature i: P(ε) = 0  ⇔  ρ_i = √3 ε(λ − aε³)/(2λ − 5aε³)
    a = np.array([a_coefficient(x, 1.0, n) for x in lam])
    thresholds = SQ3 * eps * (lam - a * eps**3) / (2 * lam - 5 * a * eps**3)
    rho = 0.5 * (SQ3 / 2 * eps + thresholds.min())  # outside the paper's bound, below all ρ_i
    assert rho > SQ3 / 2 * eps
    t = {}
    for name, r in (("gd", 0.0), ("sam", rho)):
        t[name] = np.array([
            learning_time(attn_s_ode(x, rho=r, dynamics="full", a=ai), eps, c * x ** (-1 / 3),
                          method="quad").time
            for x, ai in zip(lam, a, strict=True)
        ])  # fmt: skip
    assert np.all(np.isfinite(t["gd"])) and np.all(np.isfinite(t["sam"]))
    assert shannon_entropy(t["sam"]) < shannon_entropy(t["gd"])  # ordering fails
    ds = se.check_theorem(se.SamEntropyConfig(eigenvalues=tuple(lam), rhos=(rho,), eps=eps, c=c,
                                              dynamics="full", cross_check=False))  # fmt: skip
    assert "FAILS" in str(ds.verdict.values[0]) and not bool(ds.condition.values[0])


def test_default_run_and_json_agree_with_closed_forms(tmp_path, capsys):
    assert se.main(["--json", "--no-plot", "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    cfg = out["config"]
    lam = np.array(out["eigenvalues"])
    eps, c, tau = cfg["eps"], cfg["c"], cfg["tau"]
    np.testing.assert_allclose(lam, [0.4, 0.3, 0.2, 0.1], rtol=1e-15)
    u = c * lam ** (-1 / 3)
    np.testing.assert_allclose(out["t_gd"], t_gd_formula(lam, eps, u, tau), rtol=1e-9)
    assert len(out["per_rho"]) == 6
    for rec in out["per_rho"]:
        if rec["rho"] == 0:
            continue
        ts = [t_sam_formula(x, rec["rho"], eps, ui, tau) for x, ui in zip(lam, u, strict=True)]
        np.testing.assert_allclose(rec["t_sam"], ts, rtol=1e-9)
        assert rec["condition"] and rec["ordering_holds"]
        assert rec["majorization"]["gd_majorizes_sam"] and rec["majorization"]["min_margin"] > 0
    assert out["theorem_holds_inside_condition"] is True
    assert out["cross_checks"]["quad_max_rel_diff"] < 1e-10
    assert out["cross_checks"]["ode_max_rel_diff"] < 1e-8
    assert out["meta"]["config"]["eps"] == eps and "git_commit" in out["meta"]
    json.dumps(out, allow_nan=False)  # never a NaN in the output
    # files: NetCDF round-trips with provenance
    ds = read_netcdf(tmp_path / "sam_entropy.nc")
    assert ds.attrs["meta"]["status"] == "success" and ds.attrs["config"]["eps"] == eps
    fresh = se.check_theorem(se.SamEntropyConfig())
    xr.testing.assert_allclose(ds[["t_gd", "t_sam", "entropy_sam"]],
                               fresh[["t_gd", "t_sam", "entropy_sam"]])  # fmt: skip
    assert json.loads((tmp_path / "sam_entropy.json").read_text())["meta"]["status"] == "success"


def test_table_output_and_figure(tmp_path, capsys):
    assert se.main(["--rho", "0.004,0.02", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "Theorem 4.4" in text and "condition violated" in text and "holds:" in text
    assert "nan" not in text.lower() and "in []" not in text
    # the GD row of feature 4 (λ = 0.1) shows the closed-form time and its share of the total
    lam = np.array([0.4, 0.3, 0.2, 0.1])
    t = t_gd_formula(lam, 0.01, 0.5 * lam ** (-1 / 3), 1.0)
    row = next(ln for ln in text.splitlines() if ln.split()[:2] == ["4", "0.1"])
    assert f"{t[3]:.5g}" in row and f"[{t[3] / t.sum():.4g}]" in row
    from matplotlib.image import imread

    assert imread(tmp_path / "sam_entropy.png").shape[:2] == (552, 2280)  # 19 x 4.6 in at 120 dpi


def test_large_spectrum_table_is_truncated_and_shows_progress(capsys):
    cfg = se.SamEntropyConfig(eigenvalues=tuple(se.spectrum("geometric", 40)), rhos=(0.004,),
                              cross_check=False)  # fmt: skip
    ds = se.check_theorem(cfg, progress=True)
    assert "learning times" in capsys.readouterr().err  # the bar went to stderr
    text = se.format_table(ds, max_features=6)
    rows = [ln for ln in text.splitlines() if ln[:4].strip().isdigit()]
    assert [int(r.split()[0]) for r in rows] == [1, 2, 3, 38, 39, 40]
    assert "(34 more features; all are in the NetCDF/JSON)" in text


def test_no_write_writes_nothing_and_json_still_writes(tmp_path, capsys):
    out = tmp_path / "never"
    assert se.main(["--no-write", "--json", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["entropy_gd"] == pytest.approx(0.888414, abs=1e-6)
    assert not out.exists()
    assert se.main(["--json", "--no-plot", "--out", str(out)]) == 0  # --json alone: files too
    assert sorted(p.name for p in out.iterdir()) == ["sam_entropy.json", "sam_entropy.nc"]


@pytest.mark.parametrize("bad", ["/proc/x", "FILE"])
def test_unwritable_out_fails_before_computing(bad, tmp_path, capsys, monkeypatch):
    if bad == "FILE":
        (tmp_path / "f").write_text("x")
        bad = str(tmp_path / "f")
    monkeypatch.setattr(se, "check_theorem", lambda *a, **k: pytest.fail("computed first"))
    with pytest.raises(SystemExit) as exc:
        se.main(["--out", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "`--out`" in err and bad in err


def test_cli_exact_sam_form(tmp_path, capsys):
    assert se.main(["--sam-form", "exact", "--rho-frac", "1.5", "--json", "--no-plot", "--out",
                    str(tmp_path)]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["sam_form"] == "exact"
    rec = out["per_rho"][0]
    assert (
        not rec["condition"] and rec["ordering_holds"] and "outside the condition" in rec["verdict"]
    )


def test_full_dynamics_reports_truncated_gap(tmp_path, capsys):
    assert se.main(["--dynamics", "full", "--no-plot", "--no-cross-check", "--out",
                    str(tmp_path)]) == 0  # fmt: skip
    assert "gap(trunc)" in capsys.readouterr().out


def test_sweep_small_grid(tmp_path, capsys):
    cfg = se.SweepConfig(spreads=(2.0, 50.0), rho_fractions=(0.2, 0.9, 1.1))
    ds = se.sweep(cfg, progress=False)
    assert ds.entropy_gap.shape == (4, 2, 3)
    ex = ds.sel(model="truncated/exact", rho_fraction=1.1)
    assert bool(ex.learned_all.all()) and bool(ex.ordering_holds.all())
    tr = ds.sel(model="truncated/first_order")
    assert bool(tr.ordering_holds.sel(rho_fraction=[0.2, 0.9]).all())
    assert not bool(tr.learned_all.sel(rho_fraction=1.1).any())
    assert "ordering holds" in se.format_sweep(ds)
    assert se.main(["--sweep", "--rho-frac", "0.5,1.1", "--dim", "3", "--no-plot", "--out",
                    str(tmp_path)]) == 0  # fmt: skip
    saved = read_netcdf(tmp_path / "sweep.nc")
    fresh = se.sweep(se.SweepConfig(dim=3, rho_fractions=(0.5, 1.1)), progress=False)
    xr.testing.assert_allclose(saved.entropy_gap, fresh.entropy_gap)


def test_spectrum_families():
    np.testing.assert_allclose(se.spectrum("linear", 4), [0.4, 0.3, 0.2, 0.1])
    g = se.spectrum("geometric", 5, spread=16.0)
    assert g.sum() == pytest.approx(1.0) and g[0] / g[-1] == pytest.approx(16.0)
    p = se.spectrum("power", 3, spread=2.0)
    np.testing.assert_allclose(p / p[0], [1, 1 / 4, 1 / 9])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"eigenvalues": (1.0, 1.0, 0.5)}, "must be distinct"),
        ({"eigenvalues": (1.0, -0.5)}, "finite and positive"),
        ({"eigenvalues": (1.0,)}, "at least 2"),
        ({"rhos": (-0.1,)}, "`rhos` must be finite and >= 0"),
        ({"eps": 0.0}, "`eps` must be a positive number"),
        ({"c": 0.001}, "`c`=0.001 puts the endpoint"),
        ({"tau": -1.0}, "`tau` must be a positive"),
        ({"dynamics": "exact"}, "`dynamics` must be"),
    ],
)
def test_config_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        se.SamEntropyConfig(**kwargs)


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--eigenvalues", "1,1,0.5"], "must be distinct"),
        (["--rho", "-0.1"], "must be finite and >= 0"),
        (["--eps", "0"], "`--eps` must be a positive"),
        (["--n-context", "-1"], "`--n-context` must be a positive"),
        (["--dim", "1", "--family", "power"], "`--dim` must be an integer >= 2"),
        (["--c", "0.001"], "puts the endpoint"),
        (["--eigenvalues", "1,a"], "comma-separated numbers"),
        (["--family", "flat"], "invalid choice"),
        (["--family", "geometric", "--spread", "0.5"], "`--spread` must be > 1"),
    ],
)
def test_cli_usage_errors_exit_2(argv, match, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        se.main([*argv, "--no-plot", "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, "one line, no usage block"
    assert "error:" in err and pytest.importorskip("re").search(match, err)


def test_entropy_ceiling_is_the_limit_of_sam_entropy_at_the_bound():
    # As ρ → (√3/2)ε every truncated SAM time is dominated by the common log(1 − ρ̂/ε) → −∞,
    # so p_SAM → λ^-2 / Σλ^-2 and the entropy gap to that ceiling closes like 1/|ln δ|,
    # δ = 1 − ρ/bound. Approach the bound with real SAM times and check both.
    lam = np.array([0.4, 0.3, 0.2, 0.1])
    delta = np.array([1e-3, 1e-6, 1e-10])
    ds = se.check_theorem(se.SamEntropyConfig(rhos=tuple((1 - delta) * se.rho_bound(0.01)),
                                              cross_check=False))  # fmt: skip
    p = lam**-2 / (lam**-2).sum()
    ceiling = -np.sum(p * np.log(p))
    assert float(ds.entropy_ceiling) == pytest.approx(ceiling, rel=1e-14)
    dist = ceiling - ds.entropy_sam.values
    assert np.all(dist > 0)  # approached from below
    scaled = dist * np.abs(np.log(delta))  # measured: 1.4447e-3, 1.4450e-3, 1.4445e-3
    np.testing.assert_allclose(scaled, scaled.mean(), rtol=1e-2)


# --- the vectorized learning times against the per-feature code they replaced (issue 24) ------
# tests/sims/data/sam_entropy_reference.json was written by make_sam_entropy_reference.py at
# commit 7cf70cf, before check_theorem was vectorized: one learning_time call per feature and ρ.
# Those values are trustworthy because the same run cross-checked every one of them against
# adaptive quadrature and DOP853 integration (stored `xcheck_*`: all below 1e-10 relative) and,
# for the truncated model, the paper's closed forms are recomputed here independently below.
REFERENCE = json.loads((Path(__file__).parent / "data" / "sam_entropy_reference.json").read_text())


def _ref_array(values):
    return np.array([float(v) for v in values])


def test_reference_was_cross_checked_when_recorded():
    cases = REFERENCE["cases"]
    assert len(cases) == 54 and REFERENCE["commit"].startswith("7cf70cf")
    assert max(c["xcheck_quad"] for c in cases) < 1e-12
    assert max(c["xcheck_ode"] for c in cases) < 1e-10
    # both branches of every verdict are represented: learned-all and GD-stalls cases
    assert {all(c["learned_all"]) for c in cases} == {True, False}


@pytest.mark.parametrize(
    "case", REFERENCE["cases"],
    ids=lambda c: f"{c['family']}-{c['dim']}-{c['dynamics']}-{c['sam_form']}-c{c['c']}",
)  # fmt: skip
def test_vectorized_check_reproduces_the_per_feature_reference(case):
    cfg = se.SamEntropyConfig(
        eigenvalues=tuple(se.spectrum(case["family"], case["dim"])), dynamics=case["dynamics"],
        sam_form=case["sam_form"], c=case["c"], cross_check=False,
    )  # fmt: skip
    ds = se.check_theorem(cfg, progress=False)
    idx = np.asarray(case["feature_index"])
    np.testing.assert_array_equal(ds.rho.values, case["rhos"])
    # times: same reachability (inf where never learned) and equal to ~1e-13 (the vectorized
    # elementary functions may differ from libm's in the last ulp)
    np.testing.assert_allclose(ds.t_gd.values[idx], _ref_array(case["t_gd"]), rtol=1e-13)
    np.testing.assert_allclose(ds.t_sam.values[:, idx], np.array([_ref_array(r) for r in
                                                                  case["t_sam"]]), rtol=1e-12)
    assert ds.status_gd.values[idx].tolist() == case["status_gd"]
    assert [row[idx].tolist() for row in ds.status_sam.values] == case["status_sam"]
    # entropies, gaps and margins depend on every feature, not only the stored ones
    for key in ("entropy_sam", "entropy_gap", "min_margin"):
        np.testing.assert_allclose(ds[key].values, _ref_array(case[key]), rtol=1e-9, atol=1e-15,
                                   err_msg=key)  # fmt: skip
    np.testing.assert_allclose(float(ds.entropy_gd), float(case["entropy_gd"]), rtol=1e-13)
    assert ds.majorizes.values.tolist() == case["majorizes"]
    assert ds.learned_all.values.tolist() == case["learned_all"]
    assert ds.verdict.values.tolist() == case["verdict"]
    if "entropy_gap_truncated" in case:
        np.testing.assert_allclose(ds.entropy_gap_truncated.values,
                                   _ref_array(case["entropy_gap_truncated"]), rtol=1e-9)


@pytest.mark.parametrize("family", se.FAMILIES)
def test_truncated_times_at_60000_features_equal_the_paper_closed_forms(family):
    """The main job's size (`--dim 60000`): every time against eqs. (23) and (C.4) written out."""
    lam = se.spectrum(family, 60_000)
    cfg = se.SamEntropyConfig(eigenvalues=tuple(lam), cross_check=False)
    ds = se.check_theorem(cfg, progress=False)
    lam = np.sort(lam)[::-1]
    u = cfg.c * lam ** (-1 / 3)
    np.testing.assert_allclose(ds.t_gd.values, (1 / cfg.eps - 1 / u) / lam**2, rtol=1e-12)
    for rho in cfg.rhos[1:]:
        rh = 2 * rho / SQ3
        expect = np.log((u - rh) * cfg.eps / (u * (cfg.eps - rh))) / (lam**2 * rh)
        np.testing.assert_allclose(ds.t_sam.sel(rho=rho).values, expect, rtol=1e-9)
    assert bool(ds.ordering_holds.values[1:].all()) and bool(ds.majorizes.values[1:].all())


def test_an_exploratory_run_never_replaces_the_default_results(tmp_path, monkeypatch, capsys):
    """Non-default parameters without --out write to results/sam_entropy/runs/<parameters>; the
    figure reading a result of other parameters (put there with --out) says so in one line."""
    from figures import fig_sam_entropy
    from sims.runtime.io import read_netcdf

    monkeypatch.chdir(tmp_path)
    default = tmp_path / "results" / "sam_entropy"
    assert se.main(["--no-plot"]) == 0
    before = (default / "sam_entropy.nc").read_bytes()
    assert se.main(["--rho", "1.0", "--no-plot"]) == 0
    err = capsys.readouterr().err
    assert "non-default parameters: writing to results/sam_entropy/runs/rho-1" in err
    assert (default / "sam_entropy.nc").read_bytes() == before  # untouched
    run = read_netcdf(default / "runs" / "rho-1" / "sam_entropy.nc")
    assert run.attrs["meta"]["config"]["rhos"] == [1.0]
    assert se.main(["--eps", "0.02", "--c", "0.4", "--no-plot", "--no-write"]) == 0
    assert not (default / "runs" / "eps-0.02_c-0.4").exists()  # --no-write writes nothing
    # the figure on the default result: no note; on another run's result: one line naming it
    fig_sam_entropy.make(tmp_path / "figs", results_dir=tmp_path / "results")
    assert "other parameters" not in capsys.readouterr().err
    assert se.main(["--rho", "1.0", "--no-plot", "--out", str(default)]) == 0  # explicit
    capsys.readouterr()
    fig_sam_entropy.make(tmp_path / "figs", results_dir=tmp_path / "results")
    note = [ln for ln in capsys.readouterr().err.splitlines() if "other parameters" in ln]
    assert len(note) == 1 and "rhos=[1.0]" in note[0]
