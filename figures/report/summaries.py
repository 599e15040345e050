"""Write the committed summaries from fresh results, and read them back for the page.

``python -m figures summaries`` calls :func:`write_summaries`: for every :class:`Source` whose
result files exist under ``results/``, it reduces and stores the files the figure draws
(``data/``), computes the numbers the page reads (``numbers/``) with the provenance of the
results (commit, config, seeds), and rewrites ``MANIFEST.json``. Sources whose results are
missing keep their previous summary (or stay absent) and are reported with the command that
makes them. :func:`load_numbers` reads every numbers file (and the GPU campaign's summary).
"""

from __future__ import annotations

import datetime as _dt
import glob
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from sims.runtime.io import git_info, to_jsonable

from . import store
from .reduce import reduce_dataset
from .sources import SOURCES, Source

__all__ = [
    "write_summaries",
    "load_numbers",
    "result_meta",
    "SummaryStatus",
    "gpu_numbers",
    "TOTAL_BYTES_LIMIT",
]

#: The committed summaries must stay well under 5 MB in all (checked by the tests).
TOTAL_BYTES_LIMIT = 4_500_000
THEORY_RESULT = "theory/report.json"
THEORY_KEEP = (
    "name",
    "verdict",
    "residual",
    "printed_residual",
    "reference",
    "statement",
    "method",
    "sizes",
    "conditions",
    "caveat",
    "erratum",
    "module",
    "detail",
    "generality",
    "failure",
    "why",
    "corrected_by",
)


def _expand(results_dir: Path, rel: str) -> list[str]:
    if any(ch in rel for ch in "*?["):
        hits = sorted(glob.glob(str(Path(results_dir) / rel)))
        return [Path(h).relative_to(results_dir).as_posix() for h in hits]
    return [rel] if (Path(results_dir) / rel).exists() else []


def result_meta(path: Path) -> dict:
    """The provenance block of a result file (NetCDF ``attrs["meta"]`` or JSON ``"meta"``)."""
    if path.suffix == ".nc":
        import xarray as xr

        with xr.open_dataset(path) as ds:
            raw = ds.attrs.get("meta", "")
        meta = json.loads(raw[5:]) if isinstance(raw, str) and raw.startswith("json:") else {}
    else:
        meta = json.loads(path.read_text()).get("meta", {})
    keep = ("git_commit", "git_dirty", "created", "seed", "status", "device", "config")
    return {k: meta.get(k) for k in keep if k in meta}


class SummaryStatus(dict):
    """``{source name: "written" | "missing: <what to run>"}`` returned by the writer."""


def _write_data(results_dir: Path, rel: str, reduction, root: Path) -> Path:
    src = Path(results_dir) / rel
    dest = store.data_path(rel, root)
    if rel.endswith(".nc"):
        import xarray as xr

        with xr.open_dataset(src) as raw:  # attributes exactly as stored (provenance as JSON)
            ds = raw.load()
        payload = store.encode_dataset(reduce_dataset(ds, reduction), sig=reduction.sig)
        return store.write_summary_json(dest, payload, indent=None)
    return store.write_summary_json(dest, json.loads(src.read_text()), indent=None)


def _write_source(s: Source, results_dir: Path, root: Path, commit: dict) -> None:
    files = {}
    for rel, red in s.files.items():
        for hit in _expand(results_dir, rel):
            _write_data(results_dir, hit, red, root)
            files[hit] = result_meta(Path(results_dir) / hit)
    numbers = to_jsonable(s.numbers(Path(results_dir))) if s.numbers is not None else {}
    provenance = {
        "summary_written": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "summary_commit": commit.get("git_commit"),
        "results": files,
    }
    if not files:  # a numbers-only source: record the results its numbers come from
        provenance["results"] = {
            hit: result_meta(Path(results_dir) / hit)
            for rel in _inputs(s)
            for hit in _expand(results_dir, rel)
        }
    store.write_summary_json(
        store.numbers_path(s.name, root),
        {"source": s.name, "numbers": numbers, "provenance": provenance},
    )


#: Result files a numbers-only source reads (for its provenance and its "missing" check).
_NUMBER_INPUTS = {
    "llm_confirm_ep5": ("llm/confirm_cpu_ep5/results.nc",),
    "markov_seeds": ("markov/seeds/*_seed*.nc",),
}


def _inputs(s: Source) -> tuple[str, ...]:
    return tuple(s.files) or _NUMBER_INPUTS.get(s.name, ())


def _producer(s: Source) -> str:
    if s.producer:
        return s.producer
    from figures import discover

    figs = discover()
    return figs[s.name].FIGURE.producer if s.name in figs else s.name


def _write_theory(results_dir: Path, root: Path, commit: dict) -> None:
    path = Path(results_dir) / THEORY_RESULT
    rep = json.loads(path.read_text())
    claims = [{k: c.get(k) for k in THEORY_KEEP} for c in rep["claims"]]
    store.write_summary_json(
        store.numbers_path("theory", root),
        {
            "source": "theory",
            "numbers": {
                "claims": claims,
                "summary": rep["summary"],
                "total_seconds": rep.get("total_seconds"),
            },
            "provenance": {
                "summary_written": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "summary_commit": commit.get("git_commit"),
                "results": {THEORY_RESULT: result_meta(path)},
            },
        },
    )


def write_summaries(
    results_dir: str | Path,
    *,
    root: str | Path = store.SUMMARY_DIR,
    only: Sequence[str] | None = None,
    progress=print,
) -> SummaryStatus:
    """(Re)write the summaries of every source whose results exist; see the module docstring.

    Args:
        results_dir: the results folder (``results/``).
        root: the summaries folder (``figures/summaries/``).
        only: source names to rewrite (``"theory"`` included); default: all.
        progress: called with one line per source.

    Returns:
        A :class:`SummaryStatus`.
    """
    results_dir, root = Path(results_dir), Path(root)
    names = ["theory", *SOURCES] if only is None else list(only)
    unknown = [n for n in names if n != "theory" and n not in SOURCES]
    if unknown:
        raise ValueError(
            f"unknown summary source(s) {unknown}; known: theory, {', '.join(SOURCES)}."
        )
    commit = git_info()
    status = SummaryStatus()
    for name in names:
        if name == "theory":
            if (results_dir / THEORY_RESULT).exists():
                _write_theory(results_dir, root, commit)
                status[name] = "written"
            else:
                status[name] = "missing: run `python -m theory`"
        else:
            s = SOURCES[name]
            missing = [rel for rel in _inputs(s) if not _expand(results_dir, rel)]
            if missing:
                status[name] = f"missing {missing[0]}: run `{_producer(s)}`"
            else:
                _write_source(s, results_dir, root, commit)
                status[name] = "written"
        progress(f"[{name}] {status[name]}")
    store.write_summary_json(root / "MANIFEST.json", store.manifest(root))
    return status


def gpu_numbers(root: Path = store.SUMMARY_DIR) -> dict:
    """The GPU campaign's finished stages as numbers sources ``gpu_<stage>``.

    Reads ``gpu/summary.json`` as ``python -m llm_validation campaign --publish`` writes it
    (schema ``sbtheory-campaign/1``: ``stages``, each with ``name``, ``status``, ``seconds``,
    ``device``, ``figures``, ``targets``; see ``figures/summaries/gpu/README.md``). A stage
    whose status is not ``ok``, or a rehearsal, is absent, so its claims say they need a GPU.
    """
    path = Path(root) / "gpu" / "summary.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if data.get("kind", "gpu") != "gpu":
        return {}
    return {
        f"gpu_{st['name']}": dict(st) for st in data.get("stages", []) if st.get("status") == "ok"
    }


def load_numbers(
    root: str | Path = store.SUMMARY_DIR, names: Iterable[str] | None = None
) -> dict[str, dict]:
    """Every committed numbers file (``{source: numbers}``) plus the GPU stages."""
    root = Path(root)
    out = {}
    for p in sorted((root / "numbers").glob("*.json")):
        if names is None or p.stem in names:
            out[p.stem] = store.read_summary_json(p)["numbers"]
    out.update(gpu_numbers(root))
    return out


def load_provenance(root: str | Path = store.SUMMARY_DIR) -> dict[str, dict]:
    """``{source: provenance}`` of every committed numbers file."""
    return {
        p.stem: store.read_summary_json(p).get("provenance", {})
        for p in sorted((Path(root) / "numbers").glob("*.json"))
    }
