import pytest

import theory
from theory import markov_tensor as mt

NAMES = [
    "seed004_prop1_loss",
    "seed004_prop1_monte_carlo",
    "seed004_prop1_single_sum_erratum",
    "seed004_prop1_gradients",
    "seed004_lemma1",
    "seed004_phi_nondecreasing",
    "seed004_theorem1_fixed_point",
]


def test_claims_are_registered():
    reg = theory.load_all()
    for n in NAMES:
        assert n in reg and reg[n].reference.startswith("seed004")


@pytest.mark.parametrize("name", NAMES)
def test_claim_holds(name):
    c, res, secs = theory.run_claim(name)
    assert res.holds, f"{name}: residual={res.residual} detail={res.detail}"


def test_monte_carlo_detects_a_wrong_formula():
    # dropping the noise term must be caught: compare with a biased "exact" value
    res = mt.check_prop1_monte_carlo(n=20_000)
    assert "s.e." in res.detail and res.method == "monte-carlo"


def _result(name):
    """The session's one run of claim ``name`` (shared with every theory test module)."""
    from _theory_runs import run_cached

    return run_cached(name)


def test_every_seed004_claim_states_its_sizes_and_method():
    cheap = NAMES + ["seed004_coupling_neutral_mode"]  # the costlier ones: test_markov_coupling
    for name in cheap:
        r = _result(name)
        assert r.sizes, f"{name} must say at which sizes its verdict holds"
        assert r.method and r.method != "not-checkable", name


def test_single_sum_erratum_reports_the_printed_residual():
    c = theory.load_all()["seed004_prop1_single_sum_erratum"]
    r = _result(c.name)
    assert r.residual == 0 and r.printed_residual != 0
    assert c.verdict(r) == "printed statement refuted; corrected form verified"
