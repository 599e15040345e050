"""The claims on the findings page: what each says, where the paper says it, and its verdict rule.

One :class:`Claim` per row. ``judge(numbers)`` reads the committed summary numbers
(``numbers[source][...]``, see :mod:`figures.report.sources`) and returns a
:class:`~figures.report.verdicts.Finding`: our numbers in words and the verdict computed by a
stated rule (:mod:`figures.report.verdicts`). A claim whose numbers are missing shows the command
that makes them; a GPU claim without the campaign's summary says it needs a GPU.

Groups: ``"000"`` main paper, ``"002"`` SoSD, ``"003"`` Functional-SAM, ``"004"`` Markov chains,
``"beyond"`` findings beyond the papers. The theory claims (``python -m theory``) are added row
by row from ``theory.json`` by :func:`theory_claims`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from . import verdicts as V
from .verdicts import Finding

__all__ = [
    "Claim",
    "Row",
    "CLAIMS",
    "GROUPS",
    "GROUP_SHORT",
    "evaluate",
    "theory_claims",
    "all_rows",
    "ev",
    "boot_ev",
    "bootstrap_text",
]

GROUPS = {
    "000": "Seed 000 — main paper: data distribution as a lever (GD, SAM, upsampling)",
    "002": "Seed 002 — stability of the singular distribution (SoSD)",
    "003": "Seed 003 — Functional-SAM and the SAM family",
    "004": "Seed 004 — stage-wise learning of sparse Markov chains",
    "beyond": "Beyond the papers",
}
#: Short labels (the verdict-count table).
GROUP_SHORT = {
    "000": "000 main paper",
    "002": "002 SoSD",
    "003": "003 Functional-SAM",
    "004": "004 Markov chains",
    "beyond": "beyond the papers",
}

Numbers = Mapping[str, Mapping]


@dataclasses.dataclass(frozen=True)
class Claim:
    """One row of the findings page.

    Attributes:
        id: stable identifier (anchor of the row).
        group: one of :data:`GROUPS`.
        text: the claim in a few words.
        where: where the paper makes it (section, figure, table).
        paper: the paper's number or statement.
        figure: the registered figure that shows our result (``None``: none).
        needs: the summary sources whose numbers ``judge`` reads.
        judge: ``judge(numbers) -> Finding``.
        command: the command that regenerates the result (default: the figure's).
        gpu: whether the result needs a GPU (the campaign's summaries).
    """

    id: str
    group: str
    text: str
    where: str
    paper: str
    figure: str | None
    needs: tuple[str, ...]
    judge: Callable[[Numbers], Finding]
    command: str | None = None
    gpu: bool = False

    def __post_init__(self):
        if self.group not in GROUPS:
            raise ValueError(f"claim {self.id!r}: unknown group {self.group!r}.")


@dataclasses.dataclass(frozen=True)
class Row:
    """A claim with its finding, ready to render."""

    claim: Claim
    finding: Finding
    command: str


def figure_command(figure: str | None) -> str:
    """The command that recomputes a figure's result and redraws it."""
    if figure is None:
        return "python -m theory"
    return f"python -m figures --only {figure} --recompute"


#: How a GPU run's results come back into ``figures/summaries/gpu/`` (``--out`` is the
#: campaign's default folder).
GPU_COLLECT = "python -m llm_validation campaign --collect DIR"
GPU_PUBLISH = "python -m llm_validation campaign --publish"


def evaluate(claim: Claim, numbers: Numbers) -> Row:
    """Judge a claim on the loaded summary numbers (or say which command makes them)."""
    command = claim.command or figure_command(claim.figure)
    missing = [n for n in claim.needs if n not in numbers]
    if missing:
        if claim.gpu:
            text = (
                f"needs a GPU; run `{command}` on the GPU machine, then here "
                f"`{GPU_COLLECT}` and `{GPU_PUBLISH}` (the campaign's README section has the "
                "lease-by-lease commands)"
            )
            return Row(claim, Finding(V.NEEDS_GPU, text), command)
        text = f"no summary yet; run `{command}`, then `python -m figures summaries`"
        return Row(claim, Finding(V.NO_RESULT, text), command)
    try:
        finding = claim.judge(numbers)
    except KeyError as exc:  # a variant or a measurement the summarised run did not make
        finding = Finding(
            V.NO_RESULT,
            f"the summary has no {exc.args[0]!r}; run `{command}`, "
            "then `python -m figures summaries`",
        )
    return Row(claim, finding, command)


# ----------------------------------------------------------------------------- formatting


def g(x, digits: int = 3) -> str:
    """A number with ``digits`` significant digits (``—`` for None)."""
    if x is None:
        return "—"
    return f"{float(x):.{digits}g}"


def sg(x, digits: int = 3) -> str:
    """A signed number."""
    if x is None:
        return "—"
    return f"{float(x):+.{digits}g}"


def ci(d: Mapping, digits: int = 3) -> str:
    """``mean [lo, hi]`` of a paired-difference record."""
    return f"{sg(d['mean'], digits)} [{sg(d['lo'], digits)}, {sg(d['hi'], digits)}]"


def ev(n: int | None, test: str, stability: float | None = None, resampling: str = "") -> dict:
    """The evidence behind a verdict (:class:`~figures.report.verdicts.Finding`'s fields).

    ``n``: seeds or paired runs (``None``: a deterministic computation); ``test``: the test or
    check in a few words; ``stability``: share of resamples giving the same verdict;
    ``resampling``: how it was resampled, or why it could not be.
    """
    if stability is None and not resampling:
        resampling = "deterministic: nothing to resample" if n is None else ""
    return {"n": n, "test": test, "stability": stability, "resampling": resampling}


DETERMINISTIC = "deterministic: nothing to resample"
NO_PER_SEED = "n/a (no per-seed values kept)"


def bootstrap_text(k: int, unit: str = "seeds", what: str = "") -> str:
    """How :func:`~figures.report.verdicts.bootstrap_stability` resamples ``k`` units.

    For :func:`ev`'s ``resampling``: every one of the ``k^k`` resamples up to its
    ``exact_below`` (5000), else 2000 random ones; ``what`` says what a drawn unit carries.
    """
    exact = k**k <= 5000
    how = f"{k**k} resamples, all enumerated" if exact else "2000 random resamples"
    tail = f"; {what}" if what else ""
    return f"{'exact ' if exact else ''}bootstrap over the {k} {unit}: {how}{tail}"


def boot_ev(rows, decide, test: str, unit: str = "seeds", what: str = "") -> dict:
    """The evidence of a row whose one rule ``decide`` is resampled over ``rows``.

    ``rows`` are the row's independent units (seeds, paired runs), each carrying every value a
    resample must draw together; the stability is
    :func:`~figures.report.verdicts.bootstrap_stability` of ``decide`` over them.
    """
    return ev(len(rows), test, V.bootstrap_stability(rows, decide),
              bootstrap_text(len(rows), unit, what))  # fmt: skip


def _judge(fn: Callable[[Numbers], tuple], id: str = "") -> Callable[[Numbers], Finding]:
    """Wrap ``fn(numbers) -> (verdict, ours, rule[, evidence])`` into a judge.

    ``evidence`` is :func:`ev`'s dict; a row with seeds on fewer than
    :data:`~figures.report.verdicts.MIN_N` of them is *not shown (n = k)*
    (:func:`~figures.report.verdicts.gate_small_n`). A rule without a reject-against branch
    gets its stated reason (:data:`~figures.report.directions.ONE_SIDED_WHY`) appended.
    """
    from .directions import ONE_SIDED_WHY, has_against_branch

    def one_sided(f: Finding) -> Finding:
        why = ONE_SIDED_WHY.get(id)
        if not why or not f.rule or has_against_branch(f.rule):
            return f
        return dataclasses.replace(f, rule=f"{f.rule} ({V.ONE_SIDED}{why})")

    def judge(numbers: Numbers) -> Finding:
        out = fn(numbers)
        if isinstance(out, Finding):
            return V.gate_small_n(one_sided(out))
        verdict, ours, rule, *rest = out
        f = Finding(verdict, ours, rule, **(rest[0] if rest else {}))
        return V.gate_small_n(one_sided(f))

    judge.__name__ = fn.__name__
    judge.__doc__ = fn.__doc__
    return judge


CLAIMS: list[Claim] = []


def claim(id, group, text, where, paper, figure, needs, command=None, gpu=False):
    """Decorator registering ``fn(numbers) -> (verdict, ours, rule)`` as a claim's judge."""

    def register(fn):
        if any(c.id == id for c in CLAIMS):
            raise ValueError(f"two claims are named {id!r}.")
        CLAIMS.append(
            Claim(id, group, text, where, paper, figure, tuple(needs), _judge(fn, id), command,
                  gpu)  # fmt: skip
        )
        return fn

    return register


# ----------------------------------------------------------------------------- theory rows

#: Theory claims drawn in a figure (by name prefix).
THEORY_FIGURES = (
    ("sosd_", "sosd_theory"),
    ("seed004_coupling", "markov_coupling"),
    ("seed004_theorem1", "markov_fig10"),
    ("sam_", "la_sam_mechanism"),
    ("upsampling_", "la_upsampling"),
    ("thm44_sam_higher_entropy", "sam_entropy"),
    ("thm44_condition_role", "sam_entropy_sweep"),
)


def _theory_group(reference: str, failure: str = "") -> str:
    ref = reference.lower()
    if ref.startswith("beyond") or failure == "ours":  # our readings and hypotheses
        return "beyond"
    if ref.startswith("seed002"):
        return "002"
    if ref.startswith("seed004"):
        return "004"
    return "000"


def _theory_paper(c: Mapping) -> str:
    """What the paper says, for a theory row: its printed statement, or the erratum's status."""
    if c.get("failure") == "ours":
        return "not the paper's claim: our reading (whose: the row's reference)"
    if c["verdict"].startswith("printed statement refuted"):
        return "printed differently (refuted); the statement in this row is the correction"
    if c["verdict"].startswith("erratum"):
        mate = c.get("corrected_by") or "this row"
        return f"printed with a typo (an erratum); the corrected form is verified in {mate}"
    if c["verdict"] == "refuted" and c.get("erratum"):
        return "the printed statement (an erratum; its corrected form is checked in its own row)"
    return "the printed statement"


def theory_claims(theory: Mapping) -> list[Claim]:
    """One claim per ``python -m theory`` check, judged by its own verdict and residual.

    The "ours" column leads with what ran (method) and how general the verdict is (symbolic in
    all sizes, a hand-argued reduction machine-checked at fixed sizes, fixed sizes, sampled, an
    adversarial search); a failing row says why it failed (typo, substantive, ours).
    """
    out = []
    for c in theory.get("claims", []):
        name = c["name"]
        fig = next((f for p, f in THEORY_FIGURES if name.startswith(p)), None)

        def judge(numbers, c=c):
            verdict = V.THEORY_VERDICTS.get(c["verdict"])
            if verdict is None:
                raise ValueError(f"theory claim {c['name']!r}: unknown verdict {c['verdict']!r}.")
            bits = [f"method: {c['method']}"]
            bits.append(f"generality: {c.get('generality') or c['sizes']}")
            bits.append(f"residual {c['residual']}")
            if c.get("printed_residual") not in (None, "", "—", "-"):
                bits.append(f"printed form: residual {c['printed_residual']}")
            if c.get("why"):
                whose = {
                    "ours": "ours, not the paper's",
                    "typo": "a typo",
                    "substantive": "fails in substance",
                }.get(c.get("failure"), "")
                bits.append(f"{whose}: {c['why']}" if whose else c["why"])
            if c["verdict"].startswith("verified under"):
                bits.append(c["verdict"])
            if c.get("caveat"):
                bits.append(c["caveat"])
            if c.get("detail"):
                d = str(c["detail"])
                bits.append(d)  # whole: the page folds a long cell (<details>), never cuts it
            return Finding(
                verdict, "; ".join(bits), f"rule: `python -m theory` verdict '{c['verdict']}'"
            )

        out.append(
            Claim(
                id=f"theory-{name}",
                group=_theory_group(c["reference"], c.get("failure") or ""),
                text=c["statement"],
                where=c["reference"],
                paper=_theory_paper(c),
                figure=fig,
                needs=("theory",),
                judge=judge,
                command=f"python -m theory --claim {name}",
            )
        )
    return out


def all_rows(numbers: Numbers, claims: Sequence[Claim] | None = None) -> list[Row]:
    """Every empirical claim, then every theory claim, judged on ``numbers``."""
    claims = list(CLAIMS if claims is None else claims)
    if "theory" in numbers:
        claims += theory_claims(numbers["theory"])
    else:
        claims.append(
            Claim(
                "theory-all",
                "000",
                "The papers' lemmas and theorems, re-derived with SymPy",
                "all seeds",
                "—",
                None,
                ("theory",),
                lambda n: Finding(V.NO_RESULT, ""),
                "python -m theory",
            )
        )
    return [evaluate(c, numbers) for c in claims]
