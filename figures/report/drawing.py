"""Draw registered figures from the committed summaries (no recomputation, no GPU).

A figure's ``make`` reads its result files from a results folder and computes them only when
they are missing. :func:`summary_results` writes the summarised result files of the chosen
figures into a scratch results folder (:func:`figures.report.store.hydrate`), so the unchanged
``make`` draws from them. The summaries are the CPU-scale results, so ``$MARKOV_SCALE`` is set to
``cpu`` while drawing.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import time
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import store
from .sources import SOURCES

__all__ = ["summarised", "has_full_result", "use_summary", "summary_results", "draw", "DrawResult"]


def summarised(name: str, root: Path = store.SUMMARY_DIR) -> bool:
    """Whether figure ``name`` has a summary with every file it reads."""
    s = SOURCES.get(name)
    if s is None or not s.files:
        return False
    return all(store.data_path(rel, root).exists() for rel in _files(name, root))


def _files(name: str, root: Path) -> list[str]:
    out = []
    for rel in SOURCES[name].files:
        if any(ch in rel for ch in "*?["):
            base = Path(root) / "data"
            pattern = rel if rel.endswith(".json") else rel + ".json"
            hits = [p.relative_to(base).as_posix() for p in base.glob(pattern)]
            if rel.endswith(".json"):  # a JSON result, not an encoded NetCDF's summary
                hits = [h for h in hits if not h.endswith(".nc.json")]
            out += sorted(h if rel.endswith(".json") else h[: -len(".json")] for h in hits)
        else:
            out.append(rel)
    return out


def has_full_result(spec, results_dir: Path) -> bool:
    """Whether the figure's own (CPU-scale) result file exists under ``results_dir``."""
    return (Path(results_dir) / spec.result_file).exists()


#: Environment variables that select a non-CPU scale; a summary stands in only at the CPU scale.
SCALE_ENV = ("MARKOV_SCALE", "SOSD_LM_SCALE")


def use_summary(
    spec,
    results_dir: Path,
    *,
    quick: bool = False,
    recompute: bool = False,
    root: Path = store.SUMMARY_DIR,
) -> bool:
    """Whether ``python -m figures`` should draw ``spec`` from its committed summary.

    Yes when its full CPU-scale result is missing, a summary exists, and neither ``--quick``,
    ``--recompute`` nor a non-CPU scale was asked for.
    """
    if quick or recompute or has_full_result(spec, results_dir):
        return False
    if any(os.environ.get(v, "cpu") != "cpu" for v in SCALE_ENV):
        return False
    return summarised(spec.name, root)


@contextlib.contextmanager
def _scale_cpu() -> Iterator[None]:
    old = os.environ.get("MARKOV_SCALE")
    os.environ["MARKOV_SCALE"] = "cpu"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MARKOV_SCALE", None)
        else:
            os.environ["MARKOV_SCALE"] = old


@contextlib.contextmanager
def summary_results(names: Iterable[str], root: Path = store.SUMMARY_DIR) -> Iterator[Path]:
    """A scratch results folder holding the summarised result files of ``names``.

    The folder is removed afterwards; ``$MARKOV_SCALE`` is ``cpu`` meanwhile.
    """
    tmp = store.scratch_dir()
    try:
        rels = sorted({rel for n in names if summarised(n, root) for rel in _files(n, root)})
        store.hydrate(rels, tmp, root)
        with _scale_cpu():
            yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class DrawResult(dict):
    """``{figure: {"paths": [...], "seconds": s}}`` or ``{"error": message}`` per figure."""


def _draw_job(job: tuple[str, str, str]) -> dict:
    """Draw one figure from hydrated results (a process-pool job; errors are returned)."""
    from figures import discover

    name, out_dir, results_dir = job
    spec = discover()[name].FIGURE
    if not spec.available:
        from sims.runtime.extras import EXTRAS

        return {
            "error": f"needs the `{spec.extra}` extra ({EXTRAS[spec.extra].install})",
            "missing_extra": spec.extra,
        }
    t0 = time.perf_counter()
    try:  # a figure's own printout (its tables) is for its CLI, not the report's output
        with _scale_cpu(), contextlib.redirect_stdout(io.StringIO()):
            paths = discover()[name].make(
                Path(out_dir), results_dir=Path(results_dir), quick=False, recompute=False
            )
        return {"paths": [Path(p) for p in paths], "seconds": time.perf_counter() - t0}
    except Exception as exc:  # noqa: BLE001 - reported on the page and by the CLI
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=3)}


def draw(
    names: Iterable[str],
    out_dir: str | Path,
    root: Path = store.SUMMARY_DIR,
    progress=None,
    workers: int | None = None,
) -> DrawResult:
    """Draw ``names`` from the summaries into ``out_dir``, in ``workers`` processes.

    ``workers`` defaults to ``$SBT_WORKERS`` or the cores. A failing figure is recorded, not
    raised (the page then says so in place of its image).
    """
    from figures import discover
    from sims.runtime.parallel import pmap

    figs = discover()
    names = [n for n in names if n in figs and summarised(n, root)]
    out = DrawResult()
    with summary_results(names, root) as res:
        jobs = [(n, str(out_dir), str(res)) for n in names]
        for name, info in zip(names, pmap(_draw_job, jobs, workers=workers), strict=True):
            out[name] = info
            if progress:
                progress(
                    f"[{name}] "
                    + (
                        f"{len(info['paths'])} image(s), {info['seconds']:.1f} s"
                        if "paths" in info
                        else info["error"]
                    )
                )
    return out
