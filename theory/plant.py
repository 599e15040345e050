"""Planted-statement harness: does each check fail when its transcribed statement is wrong?

Every claim marks the paper's statement, as we transcribed it, with :func:`theory.verify.stated`.
The harness runs each claim whose verdict holds (verified, verified under an approximation,
corrected form verified) again with one planted error at its first stated value (then at the
next ones, up to :data:`MAX_SITES`, until one flips; :class:`theory.verify.Plant`): ``"coef"``
scales one coefficient (×5/4 in an identity; a bound made tighter: ×1/2 of an upper bound, ×2
of a lower one) and ``"sign"`` negates one term. A claim *flips* when a planted run's verdict is
no longer the baseline's (a coefficient *or* a sign error; a claim about a sign, "SAM's entropy
is higher", cannot be flipped by a coefficient); the count of each kind is reported too. Claims
that already fail (refuted, erratum as printed) and the not-checkable one are not applicable: a
perturbed false statement need not become true.

``python -m theory --plant`` prints the table and the count (a few minutes for every claim);
:data:`NO_FLIP_REASONS` says why a claim that does not flip cannot.

Examples:
    >>> rows = plant_claims(["sam_exact_kick_region"])
    >>> rows[0].flipped, rows[0].coef, rows[0].sign
    (True, 'refuted', 'refuted')
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Sequence

from . import load_all
from .verify import CLAIMS, CheckResult, Plant, Verdict

__all__ = ["PlantRow", "plant_claims", "format_plants", "summary", "NO_FLIP_REASONS", "KINDS"]

#: The planted errors tried on every applicable claim.
KINDS = ("coef", "sign")

#: Stated values tried per kind, in order, until one flips the verdict.
MAX_SITES = 4

#: Baseline verdicts on which a planted error must change the verdict.
HOLDING = {Verdict.VERIFIED, Verdict.VERIFIED_APPROX, Verdict.VERIFIED_APPROX_CAVEAT,
           Verdict.ERRATUM}  # fmt: skip

#: Why a claim cannot flip under a planted statement (kept short; each is checked by a test to
#: name a claim that really does not flip).
NO_FLIP_REASONS: dict[str, str] = {
    "a1_zero_blocks_stay_zero": "the statement is that a gradient is exactly zero (odd in w): "
    "there is no coefficient or sign in it to plant; a wrong zero pattern is covered by "
    "lemma_3_1_prediction",
    "def_b1_global_equals_layerwise_attn_s": "the statement is that entries vanish outside the "
    "active head; its one transcribed value (the learned value of eq. (3)) enters both the "
    "model and the reduction modulo eq. (3), so a planted value cancels",
    "sosd_thm49_phase1_corrected": "the corrected Phase I bound is far from tight on the GD run "
    "it is checked on (max rhs/ΔL well below 1/2), so a prefactor made 2× larger still holds; "
    "the prefactor itself is checked symbolically in sosd_thm49_eq94_prefactor",
}


@dataclasses.dataclass(frozen=True)
class PlantRow:
    """One claim under the harness: its baseline, the planted verdicts and whether it flipped."""

    name: str
    baseline: str
    sites: tuple[str, ...]
    coef: str = ""
    sign: str = ""
    flipped: bool | None = None  # None: not applicable
    reason: str = ""


class _TimedOut(Exception):
    pass


def _alarm(signum, frame):
    raise _TimedOut


def _verdict(c, plant: Plant | None, timeout: float | None = None) -> tuple[str, tuple]:
    import signal
    import threading

    use_alarm = bool(timeout) and threading.current_thread() is threading.main_thread() \
        and hasattr(signal, "SIGALRM")
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        r = c.run(plant)
    except _TimedOut:
        return f"timed out (> {timeout:g} s)", ()
    except Exception as exc:  # noqa: BLE001 - a crash under a plant is reported, not raised
        return f"crashed ({type(exc).__name__})", ()
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    if not isinstance(r, CheckResult):
        return "crashed (no CheckResult)", ()
    return c.verdict(r).value, getattr(r, "_sites", ())


def plant_claims(names: Iterable[str] | None = None, *, kinds: Sequence[str] = KINDS,
                 progress: bool = False, timeout: float | None = 60.0,
                 on_row=None) -> list[PlantRow]:  # fmt: skip
    """Run the harness on the named claims (default: all); see the module docstring.

    A planted run that takes longer than ``timeout`` seconds (SymPy lost on a perturbed
    expression) is stopped and counts as *not* flipped. ``on_row(row)`` is called as each claim
    finishes (the CLI prints rows as they come).

    Raises:
        KeyError: for an unknown claim name.
        ValueError: for an unknown plant kind.
    """
    load_all()
    for k in kinds:
        Plant(k)  # validates
    selected = list(CLAIMS) if names is None else list(names)
    unknown = [n for n in selected if n not in CLAIMS]
    if unknown:
        raise KeyError(f"unknown claim {unknown[0]!r}; `python -m theory --list` lists them.")
    from tqdm.auto import tqdm

    rows = []
    for name in tqdm(selected, desc="plant", unit="claim", disable=not progress,
                     file=sys.stderr, leave=False):  # fmt: skip
        c = CLAIMS[name]
        base, sites = _verdict(c, None)
        if base not in {v.value for v in HOLDING}:
            rows.append(PlantRow(name, base, sites, reason="not applicable: the baseline "
                                 "verdict does not hold, so a perturbed statement need not "
                                 "change it"))  # fmt: skip
            continue
        if not sites:
            rows.append(PlantRow(name, base, sites, flipped=False,
                                 reason=NO_FLIP_REASONS.get(name, "exposes no stated() value")))
            continue
        got = {}
        for k in kinds:  # the first stated value, then the next ones until one flips
            for site in range(min(len(sites), MAX_SITES)):
                got[k] = _verdict(c, Plant(k, site), timeout)[0]
                if got[k] != base and not got[k].startswith(("timed out", "crashed")):
                    got[k] += f" (site {site})" if site else ""
                    break
        flipped = any(v != base and not v.startswith(("timed out", "crashed"))
                      for v in got.values())
        reason = "" if flipped else NO_FLIP_REASONS.get(
            name, "a planted " + " and ".join(k for k, v in got.items() if v == base)
            + " error leaves the verdict unchanged")
        rows.append(PlantRow(name, base, sites, got.get("coef", ""), got.get("sign", ""),
                             flipped, reason))  # fmt: skip
        if on_row is not None:
            on_row(rows[-1])
    return rows


def summary(rows: Sequence[PlantRow]) -> dict:
    """Counts: applicable claims, flipped (by a planted error), per kind, the non-flipping."""
    app = [r for r in rows if r.flipped is not None]
    flipped = [r for r in app if r.flipped]
    per_kind = {k: sum(1 for r in app if getattr(r, k) and getattr(r, k) != r.baseline
                       and not getattr(r, k).startswith(("timed out", "crashed")))
                for k in KINDS}  # fmt: skip
    return {"applicable": len(app), "flipped": len(flipped),
            "share": len(flipped) / len(app) if app else float("nan"), "per_kind": per_kind,
            "not_flipped": {r.name: r.reason for r in app if not r.flipped},
            "not_applicable": [r.name for r in rows if r.flipped is None]}  # fmt: skip


def format_plants(rows: Sequence[PlantRow]) -> str:
    """A plain-text table and the count line."""
    out = [f"{'claim':46s} {'baseline':34s} {'sites':>5s}  {'coef plant':16s} {'sign plant':16s}"
           " flipped"]  # fmt: skip
    for r in rows:
        flag = "n/a" if r.flipped is None else ("yes" if r.flipped else "NO")
        out.append(f"{r.name:46s} {r.baseline[:34]:34s} {len(r.sites):5d}  {r.coef[:16]:16s} "
                   f"{r.sign[:16]:16s} {flag}")  # fmt: skip
    s = summary(rows)
    out.append("")
    out.append(f"planted-statement harness: {s['flipped']} of {s['applicable']} applicable claims "
               f"flip under a planted error ({100 * s['share']:.1f} %); coef plant flips "
               f"{s['per_kind']['coef']}, sign plant {s['per_kind']['sign']}; "
               f"{len(s['not_applicable'])} not applicable (baseline does not hold)")
    for n, why in s["not_flipped"].items():
        out.append(f"  not flipped: {n}: {why}")
    return "\n".join(out)
