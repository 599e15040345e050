"""Verdict vocabulary and the rules that turn summary numbers into a verdict.

Every empirical verdict on the findings page is computed by one of these rules from the numbers
in ``figures/summaries/`` (never typed by hand), so changing a number changes the verdict. Each
rule returns the verdict and a one-line statement of the rule that was applied.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

__all__ = [
    "REPRODUCED",
    "NOT_SHOWN",
    "NOT_REPRODUCED",
    "CONTRADICTED",
    "SMALLER",
    "VERIFIED",
    "REFUTED",
    "ERRATUM",
    "CORRECTED",
    "NOT_CHECKABLE",
    "NEEDS_GPU",
    "NO_RESULT",
    "VERDICTS",
    "DECISIVE",
    "FRAGILE_BELOW",
    "MIN_N",
    "Finding",
    "t_interval",
    "t_interval_stats",
    "t_pvalue",
    "paired_t_rule",
    "paired_t_rule_stats",
    "tost_rule",
    "holm",
    "bootstrap_stability",
    "leave_one_out_stability",
    "gate_small_n",
    "interval_rule",
    "count_rule",
    "all_rule",
    "threshold_rule",
    "sign_test_rule",
    "size_rule",
    "exponent_interval",
    "law_rule",
    "ONE_SIDED",
    "THEORY_VERDICTS",
]

REPRODUCED = "reproduced"
#: Neither the claim's direction nor the other was shown: absence of evidence, not evidence of
#: absence (the row gives the smallest effect the data could have detected).
NOT_SHOWN = "not shown"
#: The old name of :data:`NOT_SHOWN` (kept for callers; the page says "not shown").
NOT_REPRODUCED = NOT_SHOWN
CONTRADICTED = "contradicted"
#: The paper reports an effect size and our interval lies wholly below its smallest reported
#: value on the predicted side, while it cannot reject 0 (small telescopes, RP:P's "original
#: effect inside the replication's interval"): evidence against the paper's size, not "not shown".
SMALLER = "smaller than claimed"
VERIFIED = "verified"
REFUTED = "refuted"
#: A typo in a printed formula (sign, transpose, factor, index) where the paper's own proof or
#: neighbouring equations use the correct form; the corrected form is verified (theory rows; not a
#: refutation).
ERRATUM = "erratum"
CORRECTED = "corrected"
NOT_CHECKABLE = "not checkable"
NEEDS_GPU = "not run: needs a GPU"
NO_RESULT = "no result yet"

#: Every verdict the page can show, in the order of its legend.
VERDICTS = (
    REPRODUCED,
    NOT_SHOWN,
    CONTRADICTED,
    SMALLER,
    VERIFIED,
    REFUTED,
    ERRATUM,
    CORRECTED,
    NOT_CHECKABLE,
    NEEDS_GPU,
    NO_RESULT,
)

#: Verdicts that say the evidence decided something (a seed-based row needs n >= MIN_N for them).
DECISIVE = (REPRODUCED, CONTRADICTED, SMALLER, VERIFIED, REFUTED)
#: The stated reason of a rule without a reject-against branch (a threshold or share that is
#: missed rejects nothing); every such rule's text carries it (tests/figures/test_directions.py).
ONE_SIDED = "no reject-against branch: "
#: A seed-based row with fewer independent runs than this is "not shown (n = k)".
MIN_N = 3
#: A row whose verdict survives fewer than this share of resamples is marked fragile.
FRAGILE_BELOW = 0.8

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
    """What we found for one claim: the verdict, our numbers in words, the rule applied.

    Attributes:
        verdict: one of :data:`VERDICTS`.
        ours: our numbers in words.
        rule: the rule that turned them into the verdict.
        n: independent units behind the verdict (seeds, paired runs); ``None`` for a
            deterministic computation (an ODE, a closed form), where resampling means nothing.
        test: the test (or check) the rule applies, in a few words.
        stability: share of resamples (bootstrap over seeds/runs, or leave one batch out) that
            give the same verdict; ``None`` when it cannot be resampled (see ``resampling``).
        resampling: how ``stability`` was computed, or why there is none.
    """

    verdict: str
    ours: str
    rule: str = ""
    n: int | None = None
    test: str = ""
    stability: float | None = None
    resampling: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}; one of {VERDICTS}.")
        if self.stability is not None and not 0 <= self.stability <= 1:
            raise ValueError(f"`stability` must be in [0, 1]; got {self.stability!r}.")

    @property
    def fragile(self) -> bool:
        """The verdict survives fewer than :data:`FRAGILE_BELOW` of the resamples."""
        return self.stability is not None and self.stability < FRAGILE_BELOW


def gate_small_n(f: Finding, min_n: int = MIN_N) -> Finding:
    """A seed-based finding on fewer than ``min_n`` runs becomes *not shown (n = k)*.

    Whatever its numbers say; they stay in ``ours`` and the rule says what they would give.
    """
    if f.n is None or f.n >= min_n or f.verdict not in DECISIVE + (NOT_SHOWN,):
        return f
    return dataclasses.replace(
        f,
        verdict=NOT_SHOWN,
        rule=f"n = {f.n} < {min_n}: not shown (n = {f.n}) whatever the numbers say; "
        f"the rule at enough n would give '{f.verdict}' ({f.rule.removeprefix('rule: ')})",
    )


# ----------------------------------------------------------------------------- t statistics


@functools.lru_cache(maxsize=4096)
def t_quantile(q: float, df: int) -> float:
    """Student-t quantile ``t_{q, df}`` (scipy's ``t.ppf``), cached.

    The stability resamplings ask for the same few (level, n) tens of thousands of times, and
    scipy's call costs ~0.2 ms.
    """
    from scipy.stats import t

    return float(t.ppf(q, df))


@functools.lru_cache(maxsize=65536)
def binom_pvalue(k: int, n: int) -> float:
    """Two-sided exact binomial p-value of ``k`` successes in ``n`` against p = ½, cached.

    scipy's ``binomtest``, cached on its integer arguments for the same reason as
    :func:`t_quantile`.
    """
    from scipy.stats import binomtest

    return float(binomtest(int(k), int(n), 0.5).pvalue)



def _values(values) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    if x.size and not np.all(np.isfinite(x)):
        raise ValueError(f"`values` must be finite; got {values!r}.")
    return x


def t_interval(values, level: float = 0.95) -> tuple[float, float, float, float]:
    """Mean and two-sided ``level`` Student-t interval of the mean: ``(mean, lo, hi, half)``.

    ``half = t_{(1+level)/2, n-1} · s / √n`` (``s`` the sample SD, ddof 1); NaN below 2 values.
    """
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level!r}.")
    x = _values(values)
    n = x.size
    if n < 2:
        m = float(x[0]) if n else math.nan
        return m, math.nan, math.nan, math.nan
    m = float(x.mean())
    half = float(t_quantile(0.5 + level / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return m, m - half, m + half, half


def t_interval_stats(
    mean: float, sd: float, n: int, level: float = 0.95
) -> tuple[float, float, float, float]:
    """:func:`t_interval` from a summary's mean, SD (ddof 1) and n: ``(mean, lo, hi, half)``."""
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level!r}.")
    if n < 2 or not math.isfinite(sd):
        return float(mean), math.nan, math.nan, math.nan
    half = float(t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n))
    return float(mean), mean - half, mean + half, half


def t_pvalue(values) -> float:
    """Two-sided one-sample t-test of mean 0 (NaN below 2 values; 0 or 1 at zero spread)."""
    from scipy.stats import t

    x = _values(values)
    n = x.size
    if n < 2:
        return math.nan
    sd = x.std(ddof=1)
    if sd == 0:
        return 1.0 if x.mean() == 0 else 0.0
    stat = x.mean() / (sd / math.sqrt(n))
    return float(2 * t.sf(abs(stat), n - 1))


def paired_t_rule(
    values, *, expect: str, paper: bool = True, alpha: float = 0.05, unit: str = ""
) -> tuple[str, str]:
    """A directional claim on paired differences, three-way from a two-sided t-interval.

    The interval is the ``1 − alpha`` Student-t interval of the mean (equivalently the
    two-sided one-sample t-test at ``alpha``).

    Interval on the predicted side of 0: reproduced (verified); on the other side: contradicted
    (refuted); containing 0: *not shown*, with the interval's half-width: the smallest effect
    these seeds could have detected.
    """
    if expect not in ("negative", "positive"):
        raise ValueError(f"`expect` must be 'negative' or 'positive'; got {expect!r}.")
    m, lo, hi, half = t_interval(values, 1 - alpha)
    return _directional(m, lo, hi, half, expect, paper, alpha, unit, len(_values(values)))


def paired_t_rule_stats(
    mean: float,
    sd: float,
    n: int,
    *,
    expect: str,
    paper: bool = True,
    alpha: float = 0.05,
    unit: str = "",
) -> tuple[str, str]:
    """:func:`paired_t_rule` from a summary's mean, SD (ddof 1) and n."""
    if expect not in ("negative", "positive"):
        raise ValueError(f"`expect` must be 'negative' or 'positive'; got {expect!r}.")
    m, lo, hi, half = t_interval_stats(mean, sd, n, 1 - alpha)
    return _directional(m, lo, hi, half, expect, paper, alpha, unit, n)


def _directional(m, lo, hi, half, expect, paper, alpha, unit, n) -> tuple[str, str]:
    yes, no = (REPRODUCED, CONTRADICTED) if paper else (VERIFIED, REFUTED)
    side = "below" if expect == "negative" else "above"
    other = "above" if side == "below" else "below"
    head = f"rule: paired t, {1 - alpha:.0%} interval {side} 0 = {yes}, {other} 0 = {no}"
    if math.isnan(half):
        return NOT_SHOWN, head + f", else not shown (needs >= 2 seeds; n = {n})"
    below, above = hi < 0, lo > 0
    want, other = (below, above) if expect == "negative" else (above, below)
    verdict = yes if want else (no if other else NOT_SHOWN)
    rule = head + ", else not shown"
    if verdict == NOT_SHOWN:
        rule += (
            f"; smallest detectable effect ±{half:.2g}{' ' + unit if unit else ''} "
            "(the interval's half-width)"
        )
    return verdict, rule


def size_rule(
    values,
    verdict: str,
    rule: str,
    *,
    expect: str,
    claimed: float,
    unit: str = "",
    alpha: float = 0.05,
) -> tuple[str, str, str]:
    """Add "smaller than claimed" to a directional verdict on paired differences ``values``.

    ``claimed`` is the paper's smallest reported effect, signed on the predicted side (> 0 for
    ``expect="positive"``, < 0 for ``"negative"``). When the ``1 − alpha`` t-interval lies wholly
    short of it (below a positive ``claimed``, above a negative one), the paper's size is
    rejected (one-sided t-test at ``alpha / 2``): a *not shown* becomes :data:`SMALLER`; a
    *reproduced* (*verified*) stays, and the clause says the effect is smaller than the paper's;
    a *contradicted* stays. Returns ``(verdict, rule, clause)``: ``clause`` (empty when the
    paper's size is inside the interval) is the first words of the row's "ours".
    """
    from scipy.stats import t

    if expect not in ("negative", "positive"):
        raise ValueError(f"`expect` must be 'negative' or 'positive'; got {expect!r}.")
    if not (math.isfinite(claimed) and (claimed > 0) == (expect == "positive") and claimed):
        raise ValueError(
            f"`claimed` must be the paper's smallest effect on the predicted ({expect}) side of "
            f"0; got {claimed!r}."
        )
    x = _values(values)
    m, lo, hi, half = t_interval(x, 1 - alpha)
    u = f" {unit}" if unit else ""
    short = "below" if expect == "positive" else "above"
    rule = rule + (
        f"; {SMALLER} when that interval contains 0 but lies wholly {short} the paper's "
        f"smallest reported effect {claimed:+.3g}{u}"
    )
    if math.isnan(half):
        return verdict, rule, ""
    excluded = hi < claimed if expect == "positive" else lo > claimed
    if not excluded:
        return verdict, rule, ""
    se = x.std(ddof=1) / math.sqrt(x.size)
    stat = (m - claimed) / se if se else (-math.inf if expect == "positive" else math.inf)
    p = float(t.cdf(stat, x.size - 1) if expect == "positive" else t.sf(stat, x.size - 1))
    clause = (
        f"smaller than the paper's effect: its smallest reported {claimed:+.3g}{u} lies "
        f"outside our {1 - alpha:.0%} interval [{lo:+.3g}, {hi:+.3g}] (one-sided p = {p:.2g}); "
    )
    return (SMALLER if verdict == NOT_SHOWN else verdict), rule, clause


def tost_rule(
    values,
    *,
    margin: float,
    paper: bool = True,
    alpha: float = 0.05,
    unit: str = "",
    why: str = "",
) -> tuple[str, str]:
    """A claim of *no* effect: two one-sided tests (TOST) against ``±margin``.

    Reproduced (verified) only when the ``1 − 2 alpha`` t-interval (90 % at the default) lies
    inside ``(−margin, margin)``; contradicted (refuted) when it lies wholly outside
    ``[−margin, margin]`` (a one-sided test at ``alpha`` that the effect exceeds the margin);
    otherwise not shown. ``why`` says where the margin comes from (it is stated on the row).
    """  # noqa: D401
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise ValueError(f"`margin` must be a finite number > 0; got {margin!r}.")
    if not 0 < alpha < 0.5:
        raise ValueError(f"`alpha` must be in (0, 0.5); got {alpha!r}.")
    yes, no = (REPRODUCED, CONTRADICTED) if paper else (VERIFIED, REFUTED)
    level = 1 - 2 * alpha
    m, lo, hi, _ = t_interval(values, level)
    u = f" {unit}" if unit else ""
    rule = (
        f"rule: equivalence (TOST, α = {alpha:g}): the {level:.0%} t-interval inside ±{margin:.2g}"
        f"{u} = {yes}, wholly outside = {no}, else not shown" + (f"; margin {why}" if why else "")
    )
    if math.isnan(lo):
        return NOT_SHOWN, rule + f" (needs >= 2 seeds; n = {len(_values(values))})"
    if -margin < lo and hi < margin:
        verdict = yes
    elif lo > margin or hi < -margin:
        verdict = no
    else:
        verdict = NOT_SHOWN
    return verdict, rule + f"; {level:.0%} interval [{lo:+.2g}, {hi:+.2g}]{u}"


def exponent_interval(
    y, x, groups, *, grid=None, level: float = 0.95
) -> tuple[float, float, float, float]:
    """Fit ``p`` in ``y^p = a_g + b_g·x`` (one line per group ``g``) with its interval.

    A Box-Cox profile likelihood: ``y^p`` is scaled by ``p·ẏ^(p−1)`` (``ẏ`` the geometric mean
    of ``y``) so that residual sums of squares compare across ``p``; each group gets its own
    intercept and slope (least squares), groups with fewer than 3 points are left out. The
    interval is ``{p : 2 (ℓ(p̂) − ℓ(p)) <= χ²₁(level)}`` on ``grid`` (default 0.02 … 4 by 0.01).

    Returns ``(p_hat, lo, hi, delta_aic)``, ``delta_aic = AIC(p = 1) − AIC(p = 2)`` (same
    number of parameters: > 0 prefers the square). ``lo``/``hi`` at the grid's edge mean the
    interval reaches it.
    """
    from scipy.stats import chi2

    y, x = _values(y), _values(x)
    groups = np.asarray(groups)
    if not (y.shape == x.shape == groups.shape):
        raise ValueError(f"`y`, `x`, `groups` must have one shape; got {y.shape}, {x.shape}, "
                         f"{groups.shape}.")  # fmt: skip
    if np.any(y <= 0):
        raise ValueError("`y` must be > 0 (a power of it is fitted).")
    grid = np.round(np.arange(0.02, 4.0001, 0.01), 10) if grid is None else np.asarray(grid)
    resid = []  # per group, the projection onto the residual space of [1, x]
    idx = []
    for g in np.unique(groups):
        m = np.flatnonzero(groups == g)
        if m.size < 3:
            continue
        A = np.stack([np.ones(m.size), x[m]], 1)
        resid.append(np.eye(m.size) - A @ np.linalg.pinv(A))
        idx.append(m)
    if not idx:
        return math.nan, math.nan, math.nan, math.nan
    used = np.concatenate(idx)
    n = used.size
    gm = math.exp(float(np.mean(np.log(y[used]))))

    def loglik(ps):
        ps = np.asarray(ps, float)[:, None]
        z = y[None, :] ** ps / (ps * gm ** (ps - 1))
        rss = sum(np.sum((z[:, m] @ r.T) ** 2, axis=1) for m, r in zip(idx, resid, strict=True))
        return -n / 2 * np.log(rss / n)

    ll = loglik(grid)
    k = int(np.argmax(ll))
    keep = grid[2 * (ll[k] - ll) <= chi2.ppf(level, 1)]
    l1, l2 = loglik([1.0, 2.0])
    return float(grid[k]), float(keep.min()), float(keep.max()), float(2 * (l2 - l1))


def law_rule(
    lo: float, hi: float, *, claimed: float, rival: float, paper: bool = True
) -> tuple[str, str]:
    """A law against its nearest rival, from the fitted exponent's interval ``[lo, hi]``.

    Reproduced (verified) when the interval contains ``claimed`` and excludes ``rival``;
    contradicted (refuted) when it excludes ``claimed``; not shown when it contains both (the
    data cannot tell the law from its rival).
    """
    yes, no = (REPRODUCED, CONTRADICTED) if paper else (VERIFIED, REFUTED)
    rule = (
        f"rule: fitted exponent's 95 % interval contains the law's {claimed:g} and excludes the "
        f"rival's {rival:g} = {yes}, excludes {claimed:g} = {no}, contains both = not shown "
        "(the data cannot tell them apart)"
    )
    if math.isnan(lo) or math.isnan(hi):
        return NOT_SHOWN, rule + "; no fit"
    has = lo <= claimed <= hi
    if not has:
        return no, rule
    return (NOT_SHOWN if lo <= rival <= hi else yes), rule


def holm(pvalues) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error over the options, any dependence).

    ``p_(i) adj = max_{j <= i} min(1, (m − j + 1) p_(j))`` over the sorted p-values.
    """
    p = [float(x) for x in pvalues]
    if any(not (0 <= x <= 1) for x in p):
        raise ValueError(f"`pvalues` must lie in [0, 1]; got {pvalues!r}.")
    m = len(p)
    order = sorted(range(m), key=p.__getitem__)
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


# ----------------------------------------------------------------------------- stability


def bootstrap_stability(
    rows, decide, *, n_boot: int = 2000, seed: int = 0, exact_below: int = 5000
) -> float:
    """Share of bootstrap resamples of ``rows`` that give the verdict ``decide(rows)`` gives.

    ``rows`` are seeds or runs, drawn with replacement; ``decide(resample)`` is the row's rule.

    Every one of the ``n^n`` ordered resamples is counted when ``n^n <= exact_below`` (so the
    share is exact: 3 seeds → 27 resamples); otherwise ``n_boot`` random ones (``seed``).

    A rule judges a sample, so its verdict does not depend on the order of the rows: the exact
    share is computed over the C(2n−1, n) multisets of indices (126 for 5 seeds instead of
    3,125 ordered draws), each weighted by its multinomial count n! / ∏ kᵢ!, the number of
    ordered draws that give it. The sum of those weights is n^n.
    """
    rows = list(rows)
    n = len(rows)
    if n == 0:
        raise ValueError("`rows` is empty: nothing to resample.")
    ref = decide(rows)
    if n**n <= exact_below:
        import itertools
        from collections import Counter

        same = 0
        for idx in itertools.combinations_with_replacement(range(n), n):
            weight = math.factorial(n)
            for k in Counter(idx).values():
                weight //= math.factorial(k)
            if decide([rows[i] for i in idx]) == ref:
                same += weight
        return same / n**n
    rng = np.random.default_rng(seed)
    draws = (rng.integers(0, n, n) for _ in range(n_boot))
    return sum(decide([rows[i] for i in idx]) == ref for idx in draws) / n_boot


def leave_one_out_stability(groups, decide) -> float:
    """Share of leave-one-group-out resamples that give the verdict ``decide(groups)`` gives.

    One batch of runs is left out at a time; ``decide`` takes the list of remaining groups.
    """
    groups = list(groups)
    if len(groups) < 2:
        raise ValueError(f"need >= 2 groups to leave one out; got {len(groups)}.")
    ref = decide(groups)
    same = sum(decide(groups[:i] + groups[i + 1 :]) == ref for i in range(len(groups)))
    return same / len(groups)


# ----------------------------------------------------------------------------- simple rules


def interval_rule(lo: float, hi: float, *, expect: str, paper: bool = True) -> tuple[str, str]:
    """A 95 % interval of a paired difference against the sign the claim predicts.

    ``expect`` is ``"negative"`` or ``"positive"`` (the claim predicts that sign). The interval
    on the predicted side of 0 reproduces (verifies, for ``paper=False``) the claim; one on the
    other side contradicts (refutes) it; one that contains 0 shows neither (*not shown*, with
    its half-width). A claim of no difference needs a margin: :func:`tost_rule`.
    """
    if expect == "zero":
        raise ValueError(
            "`expect='zero'`: an interval containing 0 does not show the absence of an effect; "
            "use tost_rule(values, margin=...) with a declared equivalence margin."
        )
    if expect not in ("negative", "positive"):
        raise ValueError(f"`expect` must be 'negative' or 'positive'; got {expect!r}.")
    half = (hi - lo) / 2
    return _directional((lo + hi) / 2, lo, hi, half, expect, paper, 0.05, "", 0)


def _why_one_sided(against: str | None, what: str) -> str:
    """The stated reason of a rule whose miss is *not shown* (:data:`ONE_SIDED`)."""
    if against is not None:
        return ""
    return f" ({ONE_SIDED}{what} is not a test that rejects the claim)"


def count_rule(
    k: int, n: int, *, at_least: float, paper: bool = True, against: str | None = None
) -> tuple[str, str]:
    """``k`` of ``n`` cases agree: reproduced (verified) when ``k/n >= at_least``.

    Else *not shown* (a share below a threshold rejects nothing) or ``against``.
    """
    if n <= 0:
        return NO_RESULT, "rule: no cases"
    ok = k / n >= at_least
    yes = REPRODUCED if paper else VERIFIED
    no = against or NOT_SHOWN
    return (yes if ok else no), (
        f"rule: {yes} when at least {at_least:.0%} of cases agree, else {no}"
        + _why_one_sided(against, "a share below the threshold")
    )


def all_rule(flags, *, paper: bool = True, against: str | None = None) -> tuple[str, str]:
    """Every case agrees with the claim.

    Else *not shown*, or ``against`` where one failing case is a counterexample.
    """
    flags = [bool(f) for f in flags]
    yes = REPRODUCED if paper else VERIFIED
    no = against or NOT_SHOWN
    if not flags:
        return NO_RESULT, "rule: no cases"
    return (yes if all(flags) else no), (
        f"rule: {yes} when every case agrees ({len(flags)} here), else {no}"
        + _why_one_sided(against, "a case that disagrees among runs with noise")
    )


def threshold_rule(
    value: float,
    *,
    below: float | None = None,
    above: float | None = None,
    paper: bool = True,
    against: str | None = None,
) -> tuple[str, str]:
    """``value`` below (or above) a threshold supports the claim.

    ``against`` names the verdict when the threshold is missed (default: *not shown*: missing a
    threshold is not a test that rejects the claim).
    """
    if (below is None) == (above is None):
        raise ValueError("give exactly one of `below` and `above`.")
    yes = REPRODUCED if paper else VERIFIED
    no = against or NOT_SHOWN
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NO_RESULT, "rule: value missing"
    ok = value < below if below is not None else value > above
    side = f"< {below:g}" if below is not None else f"> {above:g}"
    return (yes if ok else no), (
        f"rule: {yes} when the value is {side}, else {no}"
        + _why_one_sided(against, "a missed threshold")
    )


def sign_test_rule(
    frac_positive: float, n: int, *, expect: str, paper: bool = True, alpha: float = 0.05
) -> tuple[str, str]:
    """Paired runs: the share with a positive difference, against the predicted sign.

    A two-sided binomial sign test at level ``alpha``: significant in the predicted direction
    reproduces (verifies) the claim, significant in the other contradicts (refutes) it, and not
    significant is *not shown*.
    """
    if expect not in ("negative", "positive"):
        raise ValueError(f"`expect` must be 'negative' or 'positive'; got {expect!r}.")
    if not n:
        return NO_RESULT, "rule: no paired runs"
    k = round(frac_positive * n)
    p = binom_pvalue(k, n)
    yes, no = (REPRODUCED, CONTRADICTED) if paper else (VERIFIED, REFUTED)
    up = k > n - k
    if p >= alpha or k == n - k:
        verdict = NOT_SHOWN
    else:
        verdict = yes if up == (expect == "positive") else no
    return verdict, (
        f"rule: two-sided sign test over {n} paired runs ({k} positive, "
        f"p = {p:.2g}); p < {alpha:g} in the predicted direction = {yes}, in the "
        f"other = {no}, else not shown"
    )
