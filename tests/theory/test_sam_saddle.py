"""theory/sam_saddle.py: the claims' verdicts, and that each claim sees a wrong number in sims.

The numerics themselves (sims/ansatz.py) are tested in tests/sims/test_ansatz.py.
"""

import numpy as np
import pytest

import sims.ansatz
import theory
from theory import sam_saddle as ss
from theory.verify import Verdict

EXPECTED = {
    "sam_multihead_ansatz_reduction": Verdict.VERIFIED,
    "sam_reduced_rate_and_map_numerics": Verdict.VERIFIED,
    "sam_headwise_uniform_slowdown": Verdict.VERIFIED_APPROX,
    "sam_exact_kick_region": Verdict.VERIFIED,
    "sam_shared_radius_background_delay": Verdict.VERIFIED_APPROX,
    "ansatz_gd_time_closed_form": Verdict.VERIFIED,
    "sam_shared_radius_fig1": Verdict.VERIFIED_APPROX,
    "sam_learned_head_bounce": Verdict.VERIFIED,
}


def test_every_claim_has_an_expectation():
    mine = {n for n, c in theory.load_all().items() if c.module == "theory.sam_saddle"}
    assert mine == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_claim_verdict(name):
    c = theory.load_all()[name]
    r = c.func()
    assert c.verdict(r) is EXPECTED[name], (r.residual, r.detail)
    assert r.conditions and r.detail


def _first_order_rate_doubled(v, sigma, kappa, c, exact, glob):
    g = sims.ansatz.ansatz_rate(v, sigma, kappa)
    n = np.sqrt(np.sum(g * g, axis=-1, keepdims=True))
    share = np.where(glob, g / np.where(n > 0, n, 1.0), np.sign(g))
    return np.where(exact, sims.ansatz.ansatz_rate(v - c * share, sigma, kappa),
                    g - 2 * c * share * sims.ansatz.ansatz_rate_prime(v, sigma, kappa))


@pytest.mark.parametrize(
    "target, wrong",
    [
        ("_rate", _first_order_rate_doubled),
        ("ansatz_rate", lambda v, s, k: s * np.asarray(v) ** 2 - k * np.asarray(v) ** 4),
    ],
)
def test_numerics_claim_sees_a_wrong_rate(monkeypatch, target, wrong):
    """Negative control: the claim pinning sims.ansatz must fail when the numbers are wrong."""
    monkeypatch.setattr(sims.ansatz, target, wrong)
    monkeypatch.setattr(ss, "ansatz_rate", sims.ansatz.ansatz_rate)
    assert not ss.check_rate_and_map_numerics().holds


def test_numerics_claim_sees_a_map_that_is_not_one_rate_step(monkeypatch):
    real = sims.ansatz._rate
    monkeypatch.setattr(sims.ansatz, "_rate", lambda *a: 1.01 * real(*a))
    monkeypatch.setattr(ss, "reduced_rate", lambda *a, **k: real_reduced(*a, **k))
    assert not ss.check_rate_and_map_numerics().holds


def real_reduced(v, sigma, kappa, rho, *, form="exact", normalization="global"):
    g = sims.ansatz.ansatz_rate(v, sigma, kappa)
    c = rho / np.sqrt(3)
    n = np.linalg.norm(g)
    share = g / n if normalization == "global" else np.sign(g)
    if form == "exact":
        return sims.ansatz.ansatz_rate(v - c * share, sigma, kappa)
    return g - c * share * sims.ansatz.ansatz_rate_prime(v, sigma, kappa)


def _fake_fig1(gd, glob, head):
    lam = np.array([0.4, 0.3, 0.2, 0.1])
    return {"lam": lam, "gd": np.array(gd, float), "exact/global": np.array(glob, float),
            "first_order/global": np.array(glob, float), "exact/headwise": np.array(head, float),
            "first_order/headwise": np.array(head, float)}  # fmt: skip


# a GD profile, global-SAM profiles meeting every condition but one, a head-wise profile
GD = [1000.0, 2000.0, 3000.0, 4000.0]
GLOBAL_OK = [2000.0, 2300.0, 3300.0, 4300.0]  # ×2, phase 2 ×0.3, phases 3-4 ×1.0, ΔH 0.06
HEAD_OK = [1200.0, 2400.0, 3600.0, 4800.0]  # uniform ×1.2: ΔH = 0


@pytest.mark.parametrize(
    "glob, head, which",
    [
        (GLOBAL_OK, HEAD_OK, None),
        ([1290.0, 1800.0, 2300.0, 2800.0], HEAD_OK, "feature 1 slowed < 1.3x"),
        ([2000.0, 3000.0, 3600.0, 4200.0], HEAD_OK, "phase 2 not shortened"),
        ([2000.0, 2300.0, 3400.0, 3500.0], HEAD_OK, "phase 3 lengthened"),
        ([1310.0, 2110.0, 3110.0, 4110.0], HEAD_OK, "entropy gain < 0.04"),
        (GLOBAL_OK, [1200.0, 2400.0, 3600.0, 4900.0], "head-wise not uniform"),
    ],
)
def test_fig1_claim_verdict_depends_on_every_condition(monkeypatch, glob, head, which):
    """Each sub-condition of sam_shared_radius_fig1 reaches its verdict: a profile violating
    only that one condition is refuted (issue 24: dropping one passed every test)."""
    gd, g = np.array(GD), np.array(glob)
    ratio, phase = g / gd, np.diff(g, prepend=0.0) / np.diff(gd, prepend=0.0)
    dh = float(ss.time_entropy(g) - ss.time_entropy(gd))
    checks = {"feature 1 slowed < 1.3x": ratio[0] > 1.3, "phase 2 not shortened": phase[1] < 0.85,
              "phase 3 lengthened": bool(np.all(phase[2:] < 1.05)),
              "entropy gain < 0.04": dh > 0.04}  # fmt: skip
    assert [k for k, ok in checks.items() if not ok] == ([] if which in (None, "head-wise not "
                                                        "uniform") else [which])  # fmt: skip
    monkeypatch.setattr(ss, "figure1_ansatz", lambda: _fake_fig1(GD, glob, head))
    assert ss.check_fig1().holds is (which is None)
