"""Verdict vocabulary and the rules that turn summary numbers into a verdict.

Every empirical verdict on the findings page is computed by one of these rules from the numbers
in ``figures/summaries/`` (never typed by hand), so changing a number changes the verdict. Each
rule returns the verdict and a one-line statement of the rule that was applied.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = [
    "REPRODUCED",
    "NOT_REPRODUCED",
    "CONTRADICTED",
    "VERIFIED",
    "REFUTED",
    "CORRECTED",
    "ERRATUM",
    "NOT_CHECKABLE",
    "NEEDS_GPU",
    "NO_RESULT",
    "VERDICTS",
    "Finding",
    "interval_rule",
    "count_rule",
    "all_rule",
    "threshold_rule",
    "sign_test_rule",
    "THEORY_VERDICTS",
]

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
CONTRADICTED = "contradicted"
VERIFIED = "verified"
REFUTED = "refuted"
CORRECTED = "corrected"
#: a typo in a printed formula (sign, transpose, factor, index) where the paper's own proof or
#: neighbouring equations use the correct form; the corrected form is verified (not a refutation)
ERRATUM = "erratum"
NOT_CHECKABLE = "not checkable"
NEEDS_GPU = "not run: needs a GPU"
NO_RESULT = "no result yet"

#: Every verdict the page can show, in the order of its legend.
VERDICTS = (
    REPRODUCED,
    NOT_REPRODUCED,
    CONTRADICTED,
    VERIFIED,
    REFUTED,
    CORRECTED,
    ERRATUM,
    NOT_CHECKABLE,
    NEEDS_GPU,
    NO_RESULT,
)

#: ``python -m theory`` verdicts → the page's (the caveat goes into the "ours" column).
THEORY_VERDICTS = {
    "verified": VERIFIED,
    "verified under an approximation": VERIFIED,
    "verified under an approximation whose dropped term is comparable to a kept one in the "
    "claim's regime": VERIFIED,
    "printed statement refuted; corrected form verified": CORRECTED,
    "erratum (typo in the printed formula)": ERRATUM,
    "refuted": REFUTED,
    "not checkable": NOT_CHECKABLE,
}


@dataclasses.dataclass(frozen=True)
class Finding:
    """What we found for one claim: the verdict, our numbers in words, the rule applied."""

    verdict: str
    ours: str
    rule: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}; one of {VERDICTS}.")


def interval_rule(lo: float, hi: float, *, expect: str, paper: bool = True) -> tuple[str, str]:
    """A 95 % interval of a paired difference against the sign the claim predicts.

    ``expect`` is ``"negative"``, ``"positive"`` (the claim predicts that sign) or ``"zero"`` (the
    claim predicts no difference). The interval on the predicted side of 0 reproduces (verifies,
    for ``paper=False``) the claim; one on the other side contradicts (refutes) it; one that
    contains 0 does not reproduce a predicted effect and reproduces a predicted absence (an
    interval that excludes 0 contradicts a predicted absence).
    """
    if expect not in ("negative", "positive", "zero"):
        raise ValueError(f"`expect` must be 'negative', 'positive' or 'zero'; got {expect!r}.")
    yes, no = (REPRODUCED, CONTRADICTED) if paper else (VERIFIED, REFUTED)
    if math.isnan(lo) or math.isnan(hi):
        return NOT_REPRODUCED if paper else REFUTED, "rule: needs a 95 % interval (>= 2 seeds)"
    below, above = hi < 0, lo > 0
    if expect == "zero":
        verdict = yes if not (below or above) else no
        return verdict, f"rule: 95 % interval containing 0 = {yes}, excluding 0 = {no}"
    want, other = (below, above) if expect == "negative" else (above, below)
    verdict = yes if want else (no if other else (NOT_REPRODUCED if paper else REFUTED))
    return (
        verdict,
        f"rule: 95 % interval {'below' if expect == 'negative' else 'above'} 0 "
        f"= {yes}, on the other side = {no}, containing 0 = not shown",
    )


def count_rule(k: int, n: int, *, at_least: float, paper: bool = True) -> tuple[str, str]:
    """``k`` of ``n`` cases agree with the claim: reproduced when ``k/n >= at_least``."""
    if n <= 0:
        return NO_RESULT, "rule: no cases"
    ok = k / n >= at_least
    yes, no = (REPRODUCED, NOT_REPRODUCED) if paper else (VERIFIED, REFUTED)
    return (yes if ok else no), f"rule: {yes} when at least {at_least:.0%} of cases agree"


def all_rule(flags, *, paper: bool = True) -> tuple[str, str]:
    """Every case agrees with the claim."""
    flags = [bool(f) for f in flags]
    yes, no = (REPRODUCED, NOT_REPRODUCED) if paper else (VERIFIED, REFUTED)
    if not flags:
        return NO_RESULT, "rule: no cases"
    return (yes if all(flags) else no), f"rule: {yes} when every case agrees ({len(flags)} here)"


def threshold_rule(
    value: float,
    *,
    below: float | None = None,
    above: float | None = None,
    paper: bool = True,
    against: str | None = None,
) -> tuple[str, str]:
    """``value`` below (or above) a threshold supports the claim.

    ``against`` names the verdict when the threshold is missed (default: not reproduced /
    refuted).
    """
    if (below is None) == (above is None):
        raise ValueError("give exactly one of `below` and `above`.")
    yes, no = (REPRODUCED, NOT_REPRODUCED) if paper else (VERIFIED, REFUTED)
    no = against or no
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NO_RESULT, "rule: value missing"
    ok = value < below if below is not None else value > above
    side = f"< {below:g}" if below is not None else f"> {above:g}"
    return (yes if ok else no), f"rule: {yes} when the value is {side}, else {no}"


def sign_test_rule(
    frac_positive: float, n: int, *, expect: str, paper: bool = True, alpha: float = 0.05
) -> tuple[str, str]:
    """Paired runs: the share with a positive difference, against the predicted sign.

    A two-sided binomial sign test at level ``alpha``: significant in the predicted direction
    reproduces (verifies) the claim, significant in the other contradicts (refutes) it, and not
    significant does not reproduce it.
    """
    from scipy.stats import binomtest

    if expect not in ("negative", "positive"):
        raise ValueError(f"`expect` must be 'negative' or 'positive'; got {expect!r}.")
    if not n:
        return NO_RESULT, "rule: no paired runs"
    k = round(frac_positive * n)
    p = binomtest(k, n, 0.5).pvalue
    yes, no = (REPRODUCED, CONTRADICTED) if paper else (VERIFIED, REFUTED)
    up = k > n - k
    if p >= alpha or k == n - k:
        verdict = NOT_REPRODUCED if paper else REFUTED
    else:
        verdict = yes if up == (expect == "positive") else no
    return verdict, (
        f"rule: two-sided sign test over {n} paired runs ({k} positive, "
        f"p = {p:.2g}); p < {alpha:g} in the predicted direction = {yes}, in the "
        f"other = {no}"
    )
