"""The findings page: ``index.html`` (images beside it or embedded) and ``REPORT.md``.

One table per group (seed 000, 002, 003, 004, beyond the papers), empirical claims first and
theory claims after them; one row per claim: the claim, where the paper makes it, the paper's
number, ours, the verdict with the rule that produced it, the figure, the command. Every figure
drawn is shown once at the end with its title, and each row links to it.
"""

from __future__ import annotations

import base64
import collections
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import verdicts as V
from .claims import GROUP_SHORT, GROUPS, Row

__all__ = ["render_html", "render_markdown", "VERDICT_CLASS", "HOW_TO_READ", "evidence_text"]

VERDICT_CLASS = {
    V.REPRODUCED: "ok",
    V.VERIFIED: "ok",
    V.NOT_SHOWN: "warn",
    V.CONTRADICTED: "bad",
    V.SMALLER: "size",
    V.REFUTED: "bad",
    V.ERRATUM: "fix",
    V.CORRECTED: "fix",
    V.NOT_CHECKABLE: "none",
    V.NEEDS_GPU: "none",
    V.NO_RESULT: "none",
}

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1500px; padding: 1.5em 2em; color: #1a1a1a; line-height: 1.4; font-size: 15px; }
h1 { font-size: 1.7em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 2px solid #ccc; }
h3 { margin: 1.2em 0 .4em; font-size: 1.05em; color: #444; }
table { border-collapse: collapse; width: 100%; margin: .5em 0 1em; }
th, td { border: 1px solid #d4d4d4; padding: .35em .5em; vertical-align: top; text-align: left;
         overflow-wrap: break-word; }
table.claims { table-layout: fixed; }
th { background: #f1f1f1; position: sticky; top: 0; }
td.num { color: #666; white-space: nowrap; }
col.n { width: 2.6em; } col.claim { width: 13%; } col.where { width: 7%; }
col.paper { width: 10%; } col.ours { width: 24%; } col.verdict { width: 13%; }
col.fig { width: 10%; } col.cmd { width: 20%; }
td.cmd { overflow-x: auto; } td.cmd code { font-size: .8em; }
code { font-size: .85em; background: #f5f5f5; padding: 0 .2em; overflow-wrap: normal;
       word-break: normal; white-space: normal; }
td.cmd code { display: inline; line-height: 1.5; } code .t { white-space: nowrap; }
details summary { cursor: pointer; } details[open] summary .more { display: none; }
.more { color: #0b5394; font-size: .85em; }
.verdict { display: inline-block; padding: .1em .5em; border-radius: .7em; font-weight: 600;
           white-space: normal; }
.ok { background: #d7f0d8; color: #124d17; } .warn { background: #fbeccb; color: #6b4a00; }
.bad { background: #f8d4d4; color: #7a1010; } .fix { background: #d6e6f8; color: #0d3c73; }
.none { background: #e8e8e8; color: #444; }
.size { background: #f6dcc0; color: #6b2e00; }
.rule { display: block; color: #666; font-size: .8em; margin-top: .2em; }
.evidence { display: block; color: #333; font-size: .8em; margin-top: .2em; }
.fragile { color: #7a1010; font-weight: 600; }
ul.how li { margin: .2em 0; }
img.thumb { width: 100%; border: 1px solid #ccc; }
a.full { font-size: .8em; }
figure { margin: 2em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #333; font-size: .95em; margin-top: .3em; }
.counts td, .counts th { text-align: center; padding: .25em .4em; font-size: .9em; }
.counts td:first-child { text-align: left; white-space: nowrap; }
.meta { color: #555; font-size: .9em; }
.missing { color: #7a1010; }
img.broken { outline: 3px solid #c00; } a.dead { color: #c00; text-decoration: line-through; }
"""


#: After loading, mark broken images and in-page links that lead nowhere, and record what a
#: reader-level check needs on ``<body data-*>`` (read by the headless-browser test).
CHECK_JS = """
window.addEventListener('load', () => {
  let broken = 0, dead = 0, minFont = 1e9;
  for (const img of document.images) {
    if (!img.complete || img.naturalWidth === 0) { broken++; img.classList.add('broken'); }
  }
  for (const a of document.querySelectorAll('a[href^="#"]')) {
    if (!document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)))) {
      dead++; a.classList.add('dead');
    }
  }
  for (const el of document.querySelectorAll('p, td, th, figcaption, h1, h2, h3')) {
    if (el.textContent.trim()) {
      minFont = Math.min(minFont, parseFloat(getComputedStyle(el).fontSize));
    }
  }
  // a command token (between spaces) drawn on two lines is a command broken mid-word
  let brokenTokens = 0, backticks = 0;
  for (const code of document.querySelectorAll('code')) {
    const texts = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node = texts.nextNode(); node; node = texts.nextNode()) {
      const text = node.textContent;
      let start = 0;
      for (const tok of text.split(' ')) {
        if (tok.length > 1) {
          const r = document.createRange();
          r.setStart(node, start); r.setEnd(node, start + tok.length);
          const tops = new Set([...r.getClientRects()].map(q => Math.round(q.top)));
          if (tops.size > 1) brokenTokens++;
        }
        start += tok.length + 1;
      }
    }
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    if (t.parentElement.closest('code, script, style')) continue;
    if (t.textContent.includes('`')) backticks++;
  }
  const b = document.body.dataset;
  b.brokenTokens = brokenTokens; b.backticks = backticks;
  b.images = document.images.length; b.brokenImages = broken; b.deadLinks = dead;
  b.minFontPx = minFont; b.rows = document.querySelectorAll('tr.claim-row').length;
  b.overflowPx = document.documentElement.scrollWidth - window.innerWidth;
  b.checked = 'yes';
});
"""


#: "How to read a verdict", the page's first section (HTML and Markdown share the text).
HOW_TO_READ = (
    ("Words",
     "<b>reproduced</b> / <b>verified</b>: the declared test rejects in the direction the claim "
     "predicts (reproduced for a paper's claim, verified for one of ours). "
     "<b>contradicted</b> / <b>refuted</b>: it rejects in the other direction, or a "
     "counterexample was found. <b>smaller than claimed</b>: the paper reports an effect size "
     "and our 95 % interval, while it contains 0, lies wholly short of the paper's smallest "
     "reported value on the predicted side (a one-sided test rejects the paper's size; 'small "
     "telescopes', Simonsohn 2015): evidence against the effect at the paper's size, not "
     "against every effect; the row's first words give the paper's value, our interval and the "
     "p-value (a reproduced direction with an interval short of the paper's size stays "
     "reproduced, and its first words say the effect is smaller). <b>not shown</b>: neither; "
     "absence of evidence, not evidence "
     "against; the row gives the smallest effect the data could have detected (the interval's "
     "half-width) so you can tell 'absent' from 'underpowered'. <b>erratum</b>: a typo in a "
     "printed formula (the paper's own proof uses the right form; the corrected form is checked). "
     "<b>corrected</b>: the printed statement fails, a corrected form holds. <b>fragile</b>: "
     "the verdict survives fewer than 80 % of the resamples (listed together below)."),
    ("Tests",
     "Paired differences over seeds: a two-sided Student-t 95 % interval (reproduced when it "
     "lies wholly on the predicted side of 0). Paired runs counted by sign: a two-sided binomial "
     "sign test at α = 0.05. Several options for one claim (radii, comparisons): every option is "
     "reported, with Holm-corrected p-values. Deterministic computations (ODEs, closed forms, "
     "bounds) are checked against a stated tolerance. Every rule can reject both ways (in the "
     "direction the claim predicts and against it), or its text says why it cannot "
     "('no reject-against branch: …')."),
    ("Laws",
     "A fitted law (a power, a slope) is reproduced only when it beats its nearest rival: the "
     "fitted exponent's 95 % interval (profile likelihood) contains the claimed value and "
     "excludes the rival's; it is contradicted when the interval excludes the claimed value, and "
     "not shown when it contains both. An R² above a threshold is not evidence for a law."),
    ("Compute",
     "The confirmation compares variants at equal optimizer steps (FT+UP against "
     "<code>ft_matched</code>, hard against random or easy upsampling of the same size); a row "
     "that does not says so in its first words ('not compute-matched: …'), and where the variant "
     "predicted to win trains longer, the row gives at most 'not shown' until a step-matched "
     "baseline is run."),
    ("Margins",
     "A claim of <i>no</i> effect ('about nothing', 'matters little', 'as well as', 'gains "
     "nothing'), alone or as one half of a composite rule, is "
     "reproduced only by an equivalence test (two one-sided tests): the 90 % interval must lie "
     "inside ±margin; an interval that merely contains 0 shows nothing. The margin is declared on "
     "the row (for the LLM confirmation: 1 point of accuracy, under the paper's smallest FT+UP "
     "gain; half the main effect FT+UP − FT where a row reads held-out loss)."),
    ("n",
     "Each row states n (seeds or paired runs; none for a deterministic computation) and its "
     "test. A seed-based row with n < 3 is 'not shown (n = k)' whatever its numbers say."),
    ("Stability",
     "The share of resamples giving the same verdict: a bootstrap over seeds or runs (every "
     "resample enumerated for 3-5 seeds, 2000 random ones above), or leaving one batch of runs "
     "out at a time. Below 80 % a row is fragile; the fragile rows are listed together."),
    ("Metric",
     "Where our metric differs from the paper's (held-out loss for benchmark accuracy) or a row "
     "reads an earlier run (the previous CPU scale of the confirmation), the row's first words "
     "say so. Results are at CPU scale unless a row says otherwise."),
)  # fmt: skip


def evidence_text(f) -> str:
    """``n = 3 · paired t · stability 89% (exact bootstrap over seeds)`` for a finding."""
    if not (f.test or f.n is not None or f.resampling):
        return ""
    bits = [f"n = {f.n}"] if f.n is not None else []
    if f.test:
        bits.append(f.test)
    if f.n is None and not any(w in f.test for w in ("deterministic", "measured")):
        bits.insert(0, "no seeds")
    if f.stability is not None:
        bits.append(
            f"stability {f.stability:.0%} ({f.resampling})" + (", FRAGILE" if f.fragile else "")
        )
    elif f.resampling and f.resampling != "deterministic: nothing to resample":
        bits.append(f"stability {f.resampling}")
    return " · ".join(bits)


def _how_html() -> str:
    items = "".join(f"<li><b>{k}.</b> {v}</li>" for k, v in HOW_TO_READ)
    return f"<h2 id='how-to-read'>How to read a verdict</h2><ul class='how'>{items}</ul>"


def _how_md() -> list[str]:
    import re

    lines = ["## How to read a verdict", ""]
    for k, v in HOW_TO_READ:
        text = re.sub(r"</?code>", "`", re.sub(r"</?b>", "**", re.sub(r"</?i>", "*", v)))
        lines.append(f"- **{k}.** {text}")
    return lines + [""]


def _fragile(rows) -> list:
    return [r for r in rows if r.finding.fragile]


COLS = (
    "<colgroup>"
    + "".join(
        f"<col class='{c}'>"
        for c in ("n", "claim", "where", "paper", "ours", "verdict", "fig", "cmd")
    )
    + "</colgroup>"
)


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


def _inline(x) -> str:
    """Escaped text with its inline Markdown rendered: `code` spans and **bold**.

    Text between backticks becomes ``<code>``; an unpaired backtick stays as it is.
    """
    import re

    out = _esc(x)
    out = re.sub(r"`([^`]+)`", lambda m: _code_html(m.group(1)), out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def _code_html(escaped: str) -> str:
    """``<code>`` whose words never break inside (a line may break only at a space)."""
    return "<code>" + " ".join(f"<span class='t'>{w}</span>" for w in escaped.split(" ")) + (
        "</code>"
    )


def _code(text) -> str:
    """:func:`_code_html` of plain text (escaped here)."""
    return _code_html(_esc(text))


#: A cell longer than this is folded: its first part shows, the rest opens (``<details>``).
FOLD_AT = 700


def _cell(x) -> str:
    """:func:`_inline` of a cell; a long one folded at a clause boundary, nothing cut."""
    text = str(x)
    if len(text) <= FOLD_AT:
        return _inline(text)
    cut = -1
    for sep in ("; ", ". ", ", ", " "):  # the latest clause end between 250 and 500 characters
        cut = text.rfind(sep, 0, FOLD_AT - 200)
        while cut > 0 and text[:cut].count("`") % 2:  # never inside a code span
            cut = text.rfind(sep, 0, cut)
        if cut >= 250:
            break
    if cut <= 0:
        return _inline(text)
    head, tail = text[: cut + 1], text[cut + 1 :]
    return (
        f"<details><summary>{_inline(head)} <span class='more'>(more…)</span></summary>"
        f"{_inline(tail)}</details>"
    )


def _img_src(path: Path, base: Path, embed: bool) -> str:
    if embed:
        return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()
    return Path(path).relative_to(base).as_posix()


def _counts(rows: Sequence[Row]) -> dict:
    c = collections.defaultdict(collections.Counter)
    for r in rows:
        c[r.claim.group][r.finding.verdict] += 1
    return c


def render_html(
    rows: Sequence[Row],
    figures: Mapping[str, Mapping],
    out_dir: Path,
    *,
    embed: bool = False,
    provenance: Mapping | None = None,
    titles: Mapping[str, str] | None = None,
) -> str:
    """The page as one HTML string (images relative to ``out_dir``, or embedded)."""
    titles = titles or {}
    counts = _counts(rows)
    used = [v for v in V.VERDICTS if any(counts[g][v] for g in counts)]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>sbtheory: what the package found</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>What the package found</h1>",
        "<p>Every claim of the seed papers (000, 002, 003, 004) that this package checks, with "
        "our numbers, the "
        "verdict and the rule that produced it, the figure and the command that regenerates it. "
        "Verdicts are computed from the committed summaries in <code>figures/summaries/</code> "
        "(rebuild this page with <code>python -m figures report</code>; refresh the summaries "
        "from new runs with <code>python -m figures summaries</code>). Empirical results are at "
        "CPU scale unless a row says otherwise.</p>",
        _how_html(),
        "<h2 id='counts'>Verdicts by group</h2>",
        "<table class='counts'><tr><th>group</th>"
        + "".join(
            f"<th><span class='verdict {VERDICT_CLASS[v]}'>{_esc(v)}</span></th>" for v in used
        )
        + "<th>claims</th><th><a href='#fragile'>fragile</a></th></tr>",
    ]
    for gkey in GROUPS:
        c = counts.get(gkey, collections.Counter())
        short = GROUP_SHORT[gkey]
        nf = sum(1 for r in _fragile(rows) if r.claim.group == gkey)
        parts.append(
            f"<tr><td><a href='#group-{gkey}'>{_esc(short)}</a></td>"
            + "".join(f"<td>{c[v] or ''}</td>" for v in used)
            + f"<td>{sum(c.values())}</td><td>{nf or ''}</td></tr>"
        )
    parts.append(
        "<tr><th>all</th>"
        + "".join(f"<th>{sum(counts[g][v] for g in counts) or ''}</th>" for v in used)
        + f"<th>{len(rows)}</th><th>{len(_fragile(rows)) or ''}</th></tr></table>"
    )
    frag = _fragile(rows)
    parts.append("<h3 id='fragile'>Fragile rows (stable in &lt; 80 % of resamples)</h3>")
    parts.append(
        "<ul>"
        + "".join(
            f"<li><a href='#claim-{_esc(r.claim.id)}'>{_esc(r.claim.id)}</a>: "
            f"{_esc(r.finding.verdict)}, {_esc(evidence_text(r.finding))}</li>"
            for r in frag
        )
        + "</ul>"
        if frag
        else "<p>None.</p>"
    )
    if provenance:
        commits = sorted({str(p.get("summary_commit"))[:10] for p in provenance.values()})
        parts.append(
            f"<p class='meta'>Summaries written from results of commit(s) "
            f"{_esc(', '.join(commits))}; each numbers file in "
            "<code>figures/summaries/numbers/</code> records the commit, config and "
            "seeds of the results behind it.</p>"
        )
    n = 0
    for gkey, gname in GROUPS.items():
        grows = [r for r in rows if r.claim.group == gkey]
        parts.append(f"<h2 id='group-{gkey}'>{_esc(gname)}</h2>")
        if not grows:
            parts.append("<p>No claims of this group are on the page.</p>")
        for kind, sel in (
            ("Experiments and numerics", lambda r: not r.claim.id.startswith("theory-")),
            ("Theory (python -m theory)", lambda r: r.claim.id.startswith("theory-")),
        ):
            sub = [r for r in grows if sel(r)]
            if not sub:
                continue
            parts.append(
                f"<h3>{_esc(kind)}</h3><table class='claims'>{COLS}<tr><th>#</th><th>claim</th>"
                "<th>where in the paper</th><th>the paper</th><th>ours</th>"
                "<th>verdict</th><th>figure</th><th>regenerate</th></tr>"
            )
            for r in sub:
                n += 1
                parts.append(_html_row(n, r, figures, out_dir, embed))
            parts.append("</table>")
    parts.append(
        "<h2 id='figures'>Figures</h2><p>Drawn from the committed summaries (long "
        "curves thinned, values rounded to 4-5 significant digits); "
        "<code>python -m figures --only NAME --recompute</code> redraws one from a "
        "fresh run.</p>"
    )
    for name, info in figures.items():
        title = _esc(titles.get(name, name))
        if "paths" in info:
            for p in info["paths"]:
                parts.append(
                    f"<figure id='fig-{_esc(name)}'><img src='{_img_src(p, out_dir, embed)}' "
                    f"alt='{title}'><figcaption><b>{_esc(name)}</b>: {title}</figcaption>"
                    "</figure>"
                )
        else:
            parts.append(
                f"<p id='fig-{_esc(name)}' class='missing'><b>{_esc(name)}</b> could not "
                f"be drawn: {_esc(info.get('error', ''))}</p>"
            )
    parts.append(f"<script>{CHECK_JS}</script></body></html>")
    import re

    # every code span, typed here or rendered from a cell, breaks only at its spaces
    return re.sub(r"<code>([^<]*)</code>", lambda m: _code_html(m.group(1)), "\n".join(parts))


def _html_row(n: int, r: Row, figures, out_dir: Path, embed: bool) -> str:
    c, f = r.claim, r.finding
    cls = VERDICT_CLASS[f.verdict]
    fig = "—"
    if c.figure:
        info = figures.get(c.figure, {})
        if info.get("paths"):
            src = _img_src(info["paths"][0], out_dir, embed)
            fig = (
                f"<a href='{src}' target='_blank' title='open the full figure'>"
                f"<img class='thumb' src='{src}' alt='{_esc(c.figure)}'></a><br>"
                f"<a href='#fig-{_esc(c.figure)}'>{_esc(c.figure)}</a> · "
                f"<a class='full' href='{src}' target='_blank'>full size</a>"
            )
        else:
            fig = (
                f"<a href='#fig-{_esc(c.figure)}'>{_esc(c.figure)}</a>"
                if c.figure in figures
                else _esc(c.figure)
            )
    rule = f"<span class='rule'>{_cell(f.rule)}</span>" if f.rule else ""
    evid = evidence_text(f)
    if evid:
        rule += f"<span class='evidence{' fragile' if f.fragile else ''}'>{_inline(evid)}</span>"
    return (
        f"<tr id='claim-{_esc(c.id)}' class='claim-row'><td class='num'>{n}</td>"
        f"<td class='claim'>{_inline(c.text)}</td><td>{_inline(c.where)}</td>"
        f"<td>{_inline(c.paper)}</td><td class='ours'>{_cell(f.ours)}</td>"
        f"<td><span class='verdict {cls}'>{_esc(f.verdict)}</span>{rule}</td>"
        f"<td>{fig}</td><td class='cmd' title='{_esc(r.command)}'>{_code(r.command)}</td></tr>"
    )


def _md(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def render_markdown(
    rows: Sequence[Row],
    figures: Mapping[str, Mapping],
    out_dir: Path,
    titles: Mapping[str, str] | None = None,
    committed: bool = False,
) -> str:
    """The same content as Markdown (``REPORT.md``), images linked relative to ``out_dir``.

    ``committed``: the copy kept in ``figures/summaries/FINDINGS.md`` (tables only; it says how
    to build the page with its figures).
    """
    titles = titles or {}
    counts = _counts(rows)
    lines = [
        "# What the package found",
        "",
        *(
            [
                "Generated by `python -m figures summaries` from the summaries in this folder; do "
                "not edit. The page with every figure: `python -m figures report --out findings`, "
                "then open `findings/index.html`.",
                "",
            ]
            if committed
            else []
        ),
        "Every checked claim of the seed papers, with our numbers, the verdict and its rule, "
        "the figure and the command that regenerates it (`python -m figures report`; "
        "summaries: `python -m figures summaries`).",
        "",
    ]
    lines += _how_md()
    lines += [
        "| group | " + " | ".join(V.VERDICTS) + " | claims | fragile |",
        "|---|" + "---:|" * (len(V.VERDICTS) + 2),
    ]
    frag = _fragile(rows)
    for gkey in GROUPS:
        c = counts.get(gkey, collections.Counter())
        nf = sum(1 for r in frag if r.claim.group == gkey)
        lines.append(
            f"| {GROUP_SHORT[gkey]} | "
            + " | ".join(str(c[v] or "") for v in V.VERDICTS)
            + f" | {sum(c.values())} | {nf or ''} |"
        )
    lines += ["", "### Fragile rows (stable in < 80 % of resamples)", ""]
    lines += [f"- `{r.claim.id}`: {r.finding.verdict}, {_md(evidence_text(r.finding))}"
              for r in frag] or ["None."]  # fmt: skip
    n = 0
    for gkey, gname in GROUPS.items():
        grows = [r for r in rows if r.claim.group == gkey]
        if not grows:
            continue
        lines += [
            "",
            f"## {gname}",
            "",
            "| # | claim | where | the paper | ours | verdict | figure | regenerate |",
            "|---:|---|---|---|---|---|---|---|",
        ]
        for r in grows:
            n += 1
            c, f = r.claim, r.finding
            fig = "—"
            if c.figure and figures.get(c.figure, {}).get("paths"):
                rel = Path(figures[c.figure]["paths"][0]).relative_to(out_dir).as_posix()
                fig = f"[{c.figure}]({rel})"
            elif c.figure:
                fig = c.figure
            lines.append(
                f"| {n} | {_md(c.text)} | {_md(c.where)} | {_md(c.paper)} | "
                f"{_md(f.ours)} | **{f.verdict}**{f' ({_md(f.rule)})' if f.rule else ''}"
                f"{f'; {_md(evidence_text(f))}' if evidence_text(f) else ''} | {fig} | "
                f"`{_md(r.command)}` |"
            )
    if figures:
        lines += ["", "## Figures", ""]
    for name, info in figures.items():
        for p in info.get("paths", []):
            rel = Path(p).relative_to(out_dir).as_posix()
            lines += [f"### {name}: {titles.get(name, '')}", "", f"![{name}]({rel})", ""]
        if "error" in info:
            lines += [f"### {name}", "", f"could not be drawn: {info['error']}", ""]
    return "\n".join(lines) + "\n"
