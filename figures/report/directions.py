"""Why a rule has no reject-against branch, claim by claim (issue 37, "both directions").

Every empirical rule must be able to reject in the direction the claim predicts *and* against
it, or state why it cannot. A rule whose text names no "contradicted" / "refuted" outcome is
listed here with its reason; :func:`figures.report.claims.claim` appends the reason to the
row's rule text (after :data:`~figures.report.verdicts.ONE_SIDED`), so the page says it too.
``tests/figures/test_directions.py`` enumerates every rule and fails on one that has neither.
"""

from __future__ import annotations

__all__ = ["ONE_SIDED_WHY", "has_against_branch"]

#: A statistic (a median, a seed mean, a ratio of means) against a threshold, without an
#: interval: landing on the wrong side of it is not a test that rejects the claim.
THRESHOLD = (
    "the rule compares a point statistic with a threshold, without an interval; missing the "
    "threshold is not a test against the claim"
)
#: Every seed must show a qualitative pattern (stages, an order, a hitting time).
EVERY_SEED = (
    "the rule asks every seed for a qualitative pattern (stages, an order); a seed without it "
    "among noisy runs is not a counterexample, and no test of the opposite pattern is declared"
)
#: A search for a counterexample that found none proves nothing.
SEARCH = "a counterexample search that finds none shows nothing against the claim"

ONE_SIDED_WHY: dict[str, str] = {
    # seed 000 and beyond it on the same runs
    "fig1-plateau-artefact": THRESHOLD,
    "fig1-convergence": THRESHOLD,
    "thm44-edge": SEARCH,
    "up-recipe-condition": THRESHOLD,
    "up-condition-rule": THRESHOLD,
    "markov-hard-is-noisy": THRESHOLD,
    "bridge-drops-on-peaks": THRESHOLD,
    # seed 002
    "sosd-two-phase": THRESHOLD,
    "sosd-onset-vs-knee": THRESHOLD,
    "sosd-step-decay": EVERY_SEED,
    "sosd-wsd": THRESHOLD,
    "sosd-decay-loss": EVERY_SEED,
    "sosd-muon": THRESHOLD,
    "sosd-toy-onset": EVERY_SEED,
    "sosd-toy-eta": THRESHOLD,
    # seed 003
    "fsam-rho": "one seed per radius: no interval, so nothing can be rejected either way",
    "sam-lowest-lambda": THRESHOLD,
    "tau-logit": THRESHOLD,
    "tau-cross": THRESHOLD,
    "tau-init": THRESHOLD,
    # seed 004
    "markov-three-stages": EVERY_SEED,
    "markov-kl-order": EVERY_SEED,
    "markov-heads": EVERY_SEED,
    "markov-online": EVERY_SEED,
    "markov-reversed": EVERY_SEED,
    "markov-full-references": EVERY_SEED,
    "markov-u0": EVERY_SEED,
    "markov-u-slower": EVERY_SEED,
    "markov-fig5-stages": THRESHOLD,
    "markov-fig5-early-stop": EVERY_SEED,
    "markov-ode-stages": EVERY_SEED,
    "markov-coupling-log2": THRESHOLD,
    # the GPU campaign's paper-scale Markov runs (seed004.py, one rule per stage)
    "markov_fig2_3-paper-scale": EVERY_SEED,
    "markov_fig8_9-paper-scale": EVERY_SEED,
    "markov_fig5-paper-scale": THRESHOLD,
}


def has_against_branch(rule: str) -> bool:
    """Whether a rule's text names an outcome against the claim (contradicted / refuted)."""
    return any(w in rule for w in ("contradict", "refute", "smaller than claimed"))
