"""Run the registered claims and render the verdict table (text, Markdown, JSON).

Library side of ``python -m theory`` (the CLI in :mod:`theory.__main__` only parses arguments).
Every module of the package is discovered by :func:`theory.load_all`, so checks added later (e.g.
``theory/markov_tensor.py``) appear here without edits.

Examples:
    >>> rows = run_claims(["thm44_I1_I2_closed_forms"])
    >>> rows[0].verdict
    'verified'
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
import time
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path

import sympy as sp

from . import load_all
from .verify import CLAIMS, CheckResult, Claim, Verdict, erratum_residuals

__all__ = [
    "Row",
    "run_claims",
    "format_table",
    "to_markdown",
    "to_payload",
    "write_report",
    "ERROR",
]

#: Verdict string used when a check raised instead of returning a result.
ERROR = "error (check crashed)"


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the report: a claim, its verdict and the evidence."""

    name: str
    reference: str
    statement: str
    verdict: str
    residual: str
    seconds: float
    method: str
    conditions: str
    detail: str
    erratum: bool
    approximation: bool
    module: str
    error: str | None = None
    sizes: str = ""
    printed_residual: str = ""
    caveat: str = ""
    generality: str = ""
    failure: str = ""
    why: str = ""
    corrected_by: str = ""
    parts: tuple = ()

    @property
    def generality_class(self) -> str:
        """The kind of generality (symbolic in all sizes, reduction, fixed sizes, sampled, ...)."""
        return self.generality.split(":")[0] if self.generality else "—"

    @property
    def residual_cell(self) -> str:
        """The residual as shown in the table: both residuals for an erratum."""
        if self.erratum and self.printed_residual:
            return f"printed {self.printed_residual}; corrected {self.residual}"
        return self.residual


def _fmt_residual(res, width: int = 60) -> str:
    """A short display string for any residual (number, SymPy expression, matrix, text)."""
    try:
        if isinstance(res, (int, float)):
            return f"{res:.3g}" if res != 0 else "0"
        expr = sp.sympify(res)
        if isinstance(expr, sp.Basic) and expr == 0:
            return "0"
        if isinstance(expr, sp.Expr) and expr.is_number:
            return f"{float(sp.N(expr)):.3g}"
        text = str(expr)
    except Exception:  # noqa: BLE001 - any residual must render; the raw text is the fallback
        text = str(res)
    return text if len(text) <= width else text[: width - 3] + "..."


def _row(c: Claim, result: CheckResult | None, seconds: float, error: str | None) -> Row:
    base = dict(name=c.name, reference=c.reference, statement=c.statement, seconds=seconds,
                erratum=c.erratum, approximation=c.approximation, module=c.module,
                sizes=c.sizes, failure=c.failure, why=c.why,
                corrected_by=c.corrected_by)  # fmt: skip
    if result is None:
        return Row(verdict=ERROR, residual="", method="", conditions="", detail="", error=error,
                   **base)  # fmt: skip
    if not isinstance(result, CheckResult):
        return Row(verdict=ERROR, residual="", method="", conditions="", detail="",
                   error=f"check returned {type(result).__name__}, not CheckResult", **base)
    printed, corrected = erratum_residuals(result) if c.erratum else (None, result.residual)
    base["sizes"] = result.sizes or c.sizes
    parts = tuple(f"{p.name}: {'ok' if p.ok else 'fails'}"
                  f"{'' if p.as_needed else ' (not as needed)'}" for p in result.parts)
    return Row(verdict=c.verdict(result).value, residual=_fmt_residual(corrected),
               method=result.method, conditions=result.conditions, detail=result.detail,
               printed_residual=("—" if printed is None else _fmt_residual(printed))
               if c.erratum else "", caveat=result.caveat, generality=result.generality,
               parts=parts, **base)  # fmt: skip


def run_claims(names: Iterable[str] | None = None, *, progress: bool = False) -> list[Row]:
    """Run the named claims (all registered claims when ``names`` is None) and collect rows.

    A check that raises is reported with verdict :data:`ERROR` and its traceback in ``error``
    (the other checks still run).

    Args:
        names: claim names (default: every registered claim).
        progress: show a progress bar on stderr (one tick per claim, the running claim named).

    Raises:
        KeyError: for an unknown claim name (with close matches suggested).
        KeyboardInterrupt: on Ctrl-C, saying which claim was running and how many were done.
    """
    load_all()
    if names is None:
        selected = list(CLAIMS.values())
    else:
        names = list(names)
        for n in names:
            if n not in CLAIMS:
                import difflib

                near = difflib.get_close_matches(n, list(CLAIMS), n=3)
                hint = f" Did you mean {', '.join(near)}?" if near else ""
                raise KeyError(f"unknown claim {n!r}.{hint} `python -m theory --list` lists them.")
        selected = [CLAIMS[n] for n in names]
    from tqdm.auto import tqdm

    rows: list[Row] = []
    bar = tqdm(selected, desc="theory", unit="claim", disable=not progress, file=sys.stderr,
               leave=False)  # fmt: skip
    try:
        for c in bar:
            bar.set_postfix_str(c.name, refresh=True)
            t0 = time.perf_counter()
            try:
                result, err = c.run(), None
            except Exception:  # noqa: BLE001 - a crashing check is itself a reported outcome
                result, err = None, traceback.format_exc()
            rows.append(_row(c, result, time.perf_counter() - t0, err))
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"interrupted in claim {c.name} ({len(rows)} of {len(selected)} claims done)"
        ) from None
    finally:
        bar.close()
    return _check_companions(rows)


def _check_companions(rows: list[Row]) -> list[Row]:
    """A typo row is an erratum only while its corrected companion (when run) is verified."""
    by_name = {r.name: r for r in rows}
    out = []
    for r in rows:
        mate = by_name.get(r.corrected_by)
        if (r.verdict == Verdict.TYPO.value and mate is not None
                and mate.verdict not in (Verdict.ERRATUM.value, Verdict.VERIFIED.value)):
            r = dataclasses.replace(r, verdict=Verdict.REFUTED.value,
                                    why=f"{r.why} (but {r.corrected_by} is '{mate.verdict}', so "
                                        "the correction is not verified)")  # fmt: skip
        out.append(r)
    return out


#: Column headers and widths of the plain-text table (cells wrap onto more lines).
_COLUMNS = (("claim", 38), ("paper reference", 26), ("verdict", 28), ("residual", 22),
            ("sizes", 26), ("method", 16), ("generality", 22), ("s", 6))  # fmt: skip


def format_table(rows: Sequence[Row]) -> str:
    """Plain-text table: claim, reference, verdict, residual, sizes, method, generality, seconds.

    Long cells wrap onto further lines, so no verdict, size or residual is cut off; an erratum
    row shows the printed and the corrected residual.
    """
    widths = [w for _, w in _COLUMNS]
    widths[0] = min(max([widths[0], *(len(r.name) for r in rows)]), 56)  # names never wrap

    def block(cells: Sequence[str]) -> list[str]:
        wrapped = [textwrap.wrap(c, w) or [""] for c, w in zip(cells, widths, strict=True)]
        height = max(len(x) for x in wrapped)
        return ["  ".join((x[k] if k < len(x) else "").ljust(w)
                          for x, w in zip(wrapped, widths, strict=True)).rstrip()
                for k in range(height)]  # fmt: skip

    out = block([h for h, _ in _COLUMNS])
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out += block([r.name, r.reference, r.verdict, r.residual_cell, r.sizes or "—",
                      r.method or "—", r.generality_class, f"{r.seconds:.2f}"])  # fmt: skip
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    out.append("")
    out.append("; ".join(f"{v}: {n}" for v, n in counts.items())
               + f"; total {sum(r.seconds for r in rows):.1f} s")  # fmt: skip
    return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(rows: Sequence[Row]) -> str:
    """Markdown report: verdict table, errata (corrected statement + evidence), details."""
    lines = ["# Theory checks: verdicts", "",
             "| claim | paper reference | verdict | residual | sizes | method | generality | s |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| `{r.name}` | {_md(r.reference)} | {r.verdict} | {_md(r.residual_cell)} "
                     f"| {_md(r.sizes or '—')} | {r.method or '—'} | {_md(r.generality_class)} "
                     f"| {r.seconds:.2f} |")
    errata = [r for r in rows if r.erratum]
    refuted = [r for r in rows if r.verdict == "refuted"]
    lines += ["", "## Errata", "",
              "Each entry: the corrected statement (verified below), then the evidence against the "
              "statement as printed, with the residual of each.", ""]  # fmt: skip
    for r in errata:
        lines += [f"### {r.reference} — `{r.name}` ({r.verdict})", "",
                  f"- **Corrected statement:** {r.statement}",
                  f"- **Residual as printed:** {r.printed_residual or '—'}; **corrected:** "
                  f"{r.residual}",
                  f"- **Evidence:** {r.detail}", f"- **Checked under:** {r.conditions}",
                  f"- **Sizes / method:** {r.sizes or '—'} / {r.method}", ""]
    caveats = [r for r in rows if r.caveat]
    if caveats:
        lines += ["## Approximations whose dropped term is not small", ""]
        for r in caveats:
            lines.append(f"- `{r.name}` ({_md(r.reference)}): {_md(r.caveat.rstrip('.'))}. "
                         f"Residual {_md(r.residual)}.")  # fmt: skip
        lines.append("")
    typos = [r for r in rows if r.verdict == Verdict.TYPO.value]
    if typos:
        lines += ["### Typos in printed formulas (errata, not refutations)", ""]
        for r in typos:
            lines.append(f"- `{r.name}` ({_md(r.reference)}): {_md(r.why)} Corrected form: "
                         f"`{r.corrected_by or r.name}`. Residual {_md(r.residual)}.")
        lines.append("")
    if refuted:
        lines += ["### Statements refuted", ""]
        for r in refuted:
            whose = "ours, not the paper's: " if r.failure == "ours" else ""
            lines.append(f"- `{r.name}` ({_md(r.reference)}): {whose}{_md(r.why)} "
                         f"{_md(r.statement)} — residual {_md(r.residual)}. "
                         f"{_md(r.detail)}")  # fmt: skip
        lines.append("")
    crashed = [r for r in rows if r.verdict == ERROR]
    if crashed:
        lines += ["## Crashed checks", ""]
        for r in crashed:
            last = (r.error or "").strip().splitlines()
            lines.append(f"- `{r.name}`: {_md(last[-1] if last else '')}")
        lines.append("")
    lines += ["## Details", ""]
    for r in rows:
        lines += [f"- `{r.name}` — {_md(r.statement)} *Conditions:* {_md(r.conditions)}. "
                  f"*Sizes:* {_md(r.sizes or '—')}. *Method:* {r.method}. *Generality:* "
                  f"{_md(r.generality or '—')}. {_md(r.detail)}"]
    return "\n".join(lines) + "\n"


def to_payload(rows: Sequence[Row]) -> dict:
    """JSON-ready payload: ``{"claims": [...], "summary": {...}}``."""
    summary: dict[str, int] = {}
    for r in rows:
        summary[r.verdict] = summary.get(r.verdict, 0) + 1
    return {"claims": [dataclasses.asdict(r) for r in rows], "summary": summary,
            "total_seconds": sum(r.seconds for r in rows)}  # fmt: skip


def write_report(rows: Sequence[Row], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.json`` (with provenance, atomically) into ``out_dir``."""
    from sims.runtime.io import atomic_path, provenance, write_json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "report.md"
    with atomic_path(md) as tmp:
        tmp.write_text(to_markdown(rows))
    status = "failed" if any(r.verdict == ERROR for r in rows) else "success"
    meta = provenance(config={"claims": [r.name for r in rows]}, status=status)
    js = write_json(out / "report.json", to_payload(rows), meta=meta)
    return md, js
