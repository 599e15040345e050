"""The campaign's machinery: stages, the summary file, resume, deadlines, packing results.

A campaign is an ordered list of :class:`StageSpec` run by :func:`run_campaign` into two
folders: ``out`` holds the small results (``summary.json`` and one folder per stage, JSON/CSV,
a few MB in all: what comes back from the GPU machine, what is committed under
``figures/summaries/gpu/``), ``work`` the heavy ones (NetCDF results, converted models, job
stores), which never leave the machine.

``summary.json`` (schema :data:`SCHEMA`, documented in ``figures/summaries/gpu/README.md``) has
one entry per stage: ``name``, ``status``, ``seconds``, ``planned_seconds``, ``device``, the
``figures`` it measured, the ``targets`` it checked, its ``files`` and a ``message``. A rerun
skips the stages whose status is ``ok`` (``redo`` runs them again), so an interrupted campaign
resumes where it stopped. A stage that raises is recorded as ``failed`` (its traceback in
``<stage>/error.txt``) and the next stage runs: on a scarce GPU one broken stage must not cost
the others.

A ``deadline`` (seconds for the whole call) stops the call before the device tool's 10-minute
limit would kill it: a stage that would not fit its planned seconds is ``deferred``; a running
stage that reaches the deadline is interrupted (``SIGINT`` to this process, as Ctrl-C: training
loops and sweeps save what they finished) and recorded as ``interrupted``; the summary is
written either way, so :func:`pack` can still send it back.

Rehearsals (sizes ``toy`` and ``mini``, on a CPU) write ``"kind": "rehearsal"`` and a banner
into their summary; :func:`publish` refuses them, so they are never taken for GPU results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import io
import json
import os
import shutil
import signal
import tarfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sims.runtime.io import atomic_path, provenance, read_json, to_jsonable, write_json

__all__ = [
    "SCHEMA",
    "SIZES",
    "STATUSES",
    "PACK_NAME",
    "REHEARSAL_BANNER",
    "StageSpec",
    "Context",
    "StageDeadline",
    "load_summary",
    "run_campaign",
    "summary_table",
    "plan_text",
    "pack",
    "collect",
    "publish",
]

SCHEMA = "sbtheory-campaign/1"
#: ``gpu``: the planned sizes (one H100); ``toy``: the rehearsal (every stage on a CPU in
#: minutes); ``mini``: the rehearsal the test suite runs (seconds).
SIZES = ("gpu", "toy", "mini")
STATUSES = ("ok", "partial", "failed", "interrupted", "deferred", "blocked", "running")
PACK_NAME = "campaign-results.tar.gz"
REHEARSAL_BANNER = "REHEARSAL on a CPU at toy sizes: not GPU results"
#: At most this much comes back per file from the GPU machine (the device tool's limit).
PACK_LIMIT = 16 * 2**20
#: Committed GPU summaries stay well under the project's 5 MB for all small summaries.
PUBLISH_LIMIT = 2 * 2**20


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """One stage of the campaign.

    Attributes:
        name: short name (``--stage NAME``; its folder under ``out``).
        title: one line saying what it measures.
        planned_seconds: its planned wall time at the ``gpu`` size on one H100 (<= 540).
        needs: what it needs on the machine (carried wheels, GGUF parts, earlier stages).
        basis: how ``planned_seconds`` was estimated (no stage has run on a GPU yet).
        fn: ``fn(ctx) -> dict`` with ``figures``, ``targets`` (optional), ``status`` (optional:
            ``ok`` by default, ``partial`` or ``blocked``) and ``message`` (optional).
        carries: what the device command running it carries besides the tree: ``wheels``,
            ``gguf`` (SmolLM2's parts, over several commands), ``tokenizer``.
        gate: when it fails, the later stages of the call are ``blocked`` with its reason
            instead of running (the preflight: a machine without the carried packages).
        always: it runs at every call that names it, even after an ``ok`` (it checks the
            machine the call runs on, which may be a fresh one).
    """

    name: str
    title: str
    planned_seconds: float
    needs: str
    basis: str
    fn: Callable[[Context], dict]
    carries: tuple[str, ...] = ("wheels",)
    gate: bool = False
    always: bool = False

    def __post_init__(self):
        if not 0 < self.planned_seconds <= 540:
            raise ValueError(
                f"stage {self.name!r}: `planned_seconds` must be in (0, 540] (9 minutes, under "
                f"the device tool's 10-minute command limit); got {self.planned_seconds!r}."
            )


class StageDeadline(KeyboardInterrupt):
    """The call's deadline was reached inside a stage (delivered as Ctrl-C)."""


@dataclasses.dataclass
class Context:
    """What every stage sees.

    Attributes:
        size: ``gpu``, ``toy`` or ``mini`` (:data:`SIZES`).
        out: small results (one folder per stage).
        work: heavy results (never packed).
        device: ``cuda`` or ``cpu``.
        carry_dir: the carried folder (``wheels/``, ``gguf/``) at the repository root.
        emulate_image: rehearse the import check with only the image's packages.
        quiet: no progress lines.
        deadline: ``time.monotonic()`` value the call must end by (``None``: none).
    """

    size: str
    out: Path
    work: Path
    device: str = "cpu"
    carry_dir: Path = Path(".carry")
    emulate_image: bool = False
    quiet: bool = False
    deadline: float | None = None
    activated: list[str] = dataclasses.field(default_factory=list)

    @property
    def rehearsal(self) -> bool:
        """Whether this is a CPU rehearsal (``toy``/``mini``), not a GPU campaign."""
        return self.size != "gpu"

    def stage_dir(self, name: str) -> Path:
        """``out/<name>`` (created)."""
        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def work_dir(self, name: str) -> Path:
        """``work/<name>`` (created)."""
        d = self.work / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def say(self, msg: str) -> None:
        """Print a progress line (flushed: the device tool returns the output's tail)."""
        if not self.quiet:
            print(msg, flush=True)

    def remaining(self) -> float:
        """Seconds left before the deadline (``inf`` without one)."""
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def load_summary(folder: str | os.PathLike) -> dict | None:
    """The ``summary.json`` in ``folder``, or ``None`` when there is none.

    Raises:
        ValueError: for a file of another schema.
    """
    p = Path(folder) / "summary.json"
    if not p.exists():
        return None
    data = read_json(p)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{str(p)!r} is not a campaign summary (schema {data.get('schema')!r}).")
    return data


def _entry(summary: dict, name: str) -> dict | None:
    return next((e for e in summary["stages"] if e["name"] == name), None)


def _save(ctx: Context, summary: dict) -> None:
    summary["updated"] = _now()
    write_json(ctx.out / "summary.json", summary)


def _new_summary(ctx: Context, stages: Sequence[StageSpec]) -> dict:
    meta = provenance(
        {"size": ctx.size, "device": ctx.device},
        device=ctx.device,
    )
    s = {
        "schema": SCHEMA,
        "kind": "rehearsal" if ctx.rehearsal else "gpu",
        "size": ctx.size,
        "created": _now(),
        "updated": _now(),
        "stages": [],
        "meta": meta,
    }
    if ctx.rehearsal:
        s["banner"] = REHEARSAL_BANNER
    return s


def _device_name(ctx: Context) -> str:
    if ctx.device.startswith("cuda"):
        import torch

        return f"cuda ({torch.cuda.get_device_name()})"
    import platform

    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


@contextlib.contextmanager
def _watchdog(ctx: Context, fired: list[bool]) -> Iterator[None]:
    """Deliver ``SIGINT`` to this process at the deadline (a real signal wakes blocking waits).

    A timer thread rather than ``SIGALRM``: math-verify's parse timeouts use ``SIGALRM`` and
    would cancel ours. A lock keeps the signal from arriving after the block has ended. A process
    started in the background of a non-interactive shell (``cmd &``, ``nohup``) inherits
    ``SIGINT`` ignored, so the signal would be lost: Python's Ctrl-C handler is installed for the
    block and the old disposition restored after.
    """
    left = ctx.remaining()
    if left == float("inf"):
        yield
        return
    ignored = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    )
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    lock = threading.Lock()
    done = [False]

    def fire():
        with lock:
            if done[0]:
                return
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(max(left, 0.0), fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done[0] = True
        timer.cancel()
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_campaign(
    ctx: Context,
    stages: Sequence[StageSpec],
    *,
    only: Sequence[str] | None = None,
    redo: bool = False,
) -> dict:
    """Run (or resume) the stages in order; return the summary (also in ``ctx.out``).

    Args:
        ctx: the run's context.
        stages: the campaign (in priority order).
        only: run only these stage names (in campaign order).
        redo: run stages whose status is already ``ok`` again.

    Raises:
        ValueError: for an unknown stage name, or an ``out`` holding another kind of summary.
        KeyboardInterrupt: on Ctrl-C (after the summary is written).
    """
    names = [s.name for s in stages]
    unknown = [n for n in (only or ()) if n not in names]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; the stages are {', '.join(names)}.")
    ctx.out.mkdir(parents=True, exist_ok=True)
    ctx.work.mkdir(parents=True, exist_ok=True)
    summary = load_summary(ctx.out)
    kind = "rehearsal" if ctx.rehearsal else "gpu"
    if summary is not None and (summary["kind"], summary["size"]) != (kind, ctx.size):
        raise ValueError(
            f"{str(ctx.out)!r} holds a {summary['kind']} summary at size {summary['size']!r}; "
            f"this is a {kind} run at size {ctx.size!r}: choose another --out."
        )
    summary = summary or _new_summary(ctx, stages)
    device = _device_name(ctx)
    gate_failed = None  # (stage, message) of a failed gate: the later stages are blocked
    for spec in stages:
        if only and spec.name not in only:
            continue
        old = _entry(summary, spec.name)
        if gate_failed is not None:
            entry = old or {"name": spec.name, "attempts": 0}
            if old is None:
                summary["stages"].append(entry)
            entry.update(
                status="blocked",
                title=spec.title,
                planned_seconds=spec.planned_seconds,
                device=device,
                message=f"not run: {gate_failed[0]} failed ({gate_failed[1]})"[:500],
            )
            ctx.say(f"[{spec.name}] blocked: {gate_failed[0]} failed")
            _save(ctx, summary)
            continue
        if old is not None and old["status"] == "ok" and not redo and not spec.always:
            ctx.say(
                f"[{spec.name}] finished earlier ({old['seconds']:.0f} s on "
                f"{old['device']}); skipped (--redo runs it again)"
            )
            continue
        entry = old or {"name": spec.name, "attempts": 0}
        if old is None:
            summary["stages"].append(entry)
        if all(e["name"] in names for e in summary["stages"]):  # campaign order
            summary["stages"].sort(key=lambda e: names.index(e["name"]))
        entry.update(title=spec.title, planned_seconds=spec.planned_seconds, device=device)
        need = spec.planned_seconds if not ctx.rehearsal else 0.0
        if ctx.remaining() < need:
            entry.update(
                status="deferred",
                message=(
                    f"not started: planned {spec.planned_seconds:.0f} s, {ctx.remaining():.0f} s "
                    "left before the deadline; run it in the next command"
                ),
            )
            ctx.say(f"[{spec.name}] deferred: {entry['message']}")
            _save(ctx, summary)
            continue
        entry.update(
            status="running",
            started=_now(),
            attempts=entry["attempts"] + 1,
            message="",
            seconds=None,
        )
        _save(ctx, summary)
        ctx.say(f"[{spec.name}] {spec.title} (planned {spec.planned_seconds:.0f} s on an H100)")
        fired: list[bool] = []
        t0, c0 = time.perf_counter(), _cpu()
        stop = False
        try:
            with _watchdog(ctx, fired):
                result = spec.fn(ctx) or {}
            status = result.get("status", "ok")
            if status not in ("ok", "partial", "blocked", "failed"):
                raise ValueError(f"stage {spec.name!r} returned status {status!r}.")
            entry.update(
                status=status,
                message=result.get("message", ""),
                figures=to_jsonable(result.get("figures", {})),
                targets=to_jsonable(result.get("targets", [])),
            )
            if fired:  # the stage caught the interrupt itself (a training loop that returns)
                entry.update(
                    status="interrupted",
                    message="deadline reached inside the stage; rerun the same command to resume",
                )
                stop = True
        except KeyboardInterrupt as exc:
            entry.update(
                status="interrupted",
                message=(
                    ("deadline reached" if fired else "interrupted (Ctrl-C)")
                    + f": {exc}; rerun the same command to resume"
                ),
            )
            stop = True
            if not fired:
                entry["seconds"] = time.perf_counter() - t0
                entry["finished"] = _now()
                entry["files"] = _files(ctx, spec.name)
                _save(ctx, summary)
                raise
        except Exception as exc:  # noqa: BLE001 - one broken stage must not cost the others
            tb = traceback.format_exc()
            with atomic_path(ctx.stage_dir(spec.name) / "error.txt") as tmp:
                tmp.write_text(tb)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            entry.update(status="failed", message=f"{type(exc).__name__}: {first}"[:500])
        entry["seconds"] = time.perf_counter() - t0
        entry["cpu_seconds"] = _cpu() - c0
        entry["finished"] = _now()
        entry["files"] = _files(ctx, spec.name)
        _save(ctx, summary)
        ctx.say(
            f"[{spec.name}] {entry['status']} in {entry['seconds']:.1f} s"
            + (f": {entry['message']}" if entry["message"] else "")
        )
        if stop:
            break
        if spec.gate and entry["status"] != "ok":
            gate_failed = (spec.name, entry["message"] or entry["status"])
    return summary


def _cpu() -> float:
    """CPU seconds of this process and its finished children (workers, subprocesses)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _files(ctx: Context, name: str) -> list[str]:
    d = ctx.out / name
    if not d.is_dir():
        return []
    return sorted(str(p.relative_to(ctx.out)) for p in d.rglob("*") if p.is_file())


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def summary_table(summary: dict) -> str:
    """The summary as a plain-text table (one line per stage, then each stage's targets)."""
    lines = []
    if summary.get("banner"):
        lines.append(f"*** {summary['banner']} ***")
    lines.append(
        f"{'stage':<15} {'status':<12} {'seconds':>8} {'CPU s':>8} {'planned':>8}  message"
    )
    for e in summary["stages"]:
        sec = "-" if e.get("seconds") is None else f"{e['seconds']:.1f}"
        cpu = "-" if e.get("cpu_seconds") is None else f"{e['cpu_seconds']:.1f}"
        lines.append(
            f"{e['name']:<15} {e['status']:<12} {sec:>8} {cpu:>8} "
            f"{e.get('planned_seconds', 0):>8.0f}  {e.get('message', '')}"
        )
        for t in e.get("targets", []):
            mark = "met" if t.get("met") else "NOT met"
            lines.append(
                f"{'':<15}   target {t['name']}: {_fmt(t['value'])} {t.get('unit', '')}"
                f" vs {t['op']} {_fmt(t['target'])} -> {mark}"
            )
    return "\n".join(lines)


def plan_text(
    stages: Sequence[StageSpec], *, summary: dict | None = None, leases: Sequence = ()
) -> str:
    """The ``--dry-run`` text: every stage (planned seconds, needs, basis), then the leases."""
    lines = [
        "GPU campaign (one H100; planned seconds are estimates: nothing here has run on a GPU yet)",
        "",
    ]
    where = {n: c.lease for lease in leases for c in lease.commands for n in c.stages}
    for i, s in enumerate(stages, 1):
        done = ""
        if summary is not None and (e := _entry(summary, s.name)) is not None:
            sec = "-" if e.get("seconds") is None else f"{e['seconds']:.0f} s"
            done = f"  [last: {e['status']}, {sec}]"
        lease = "every lease's first command" if s.gate else f"lease {where.get(s.name, '?')}"
        lines.append(f"{i}. {s.name:<15} {s.planned_seconds:>4.0f} s  ({lease}){done}")
        lines.append(f"   {s.title}")
        lines.append(f"   needs: {s.needs}")
        lines.append(f"   plan basis: {s.basis}")
    if leases:
        from llm_validation.campaign.plan import format_leases

        lines += ["", format_leases(leases, stages)]
        lease = leases[0]
        lines += [
            "",
            f"{len(leases)} leases of {lease.lease_s:.0f} s of device time, each with "
            f"{lease.startup_s:.0f} s for the machine's start; every command's transfers are "
            "counted, its run is at most its --deadline (600-s commands). `--device-plan` "
            "prints the exact commands and carry lists.",
        ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- pack / collect


def pack(out: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Write ``dest/summary.json`` and ``dest/campaign-results.tar.gz`` (all of ``out``).

    Meant for ``$OUT`` on the GPU machine: two files, well under the 8-file / 16 MiB limits.

    Raises:
        ValueError: when ``out`` has no summary or the archive is over 16 MiB.
    """
    out, dest = Path(out), Path(dest)
    if load_summary(out) is None:
        raise ValueError(f"{str(out)!r} has no summary.json to pack.")
    dest.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(out.rglob("*")):
            if p.is_file() and not p.name.startswith("."):
                tar.add(p, arcname=str(Path("campaign") / p.relative_to(out)), recursive=False)
    if buf.tell() > PACK_LIMIT:
        raise ValueError(
            f"the packed results are {buf.tell() / 2**20:.1f} MiB, over the 16 MiB "
            "a file may have to come back; keep heavy files in the work folder."
        )
    with atomic_path(dest / PACK_NAME) as tmp:
        tmp.write_bytes(buf.getvalue())
    shutil.copyfile(out / "summary.json", dest / "summary.json")
    return [dest / "summary.json", dest / PACK_NAME]


def collect(source: str | os.PathLike, out: str | os.PathLike) -> dict:
    """Unpack a :func:`pack` archive (a file, or a folder holding one) into ``out``.

    Only regular files under ``campaign/`` are taken (no links, absolute paths or ``..``).
    Files in ``out`` that the archive also holds are replaced; others are kept. The summaries
    are merged stage by stage (a call that ran only some stages updates only their entries).

    Returns:
        The unpacked summary.

    Raises:
        ValueError: for a missing archive or an unsafe member.
    """
    src = Path(source)
    if src.is_dir():
        src = src / PACK_NAME
    if not src.is_file():
        raise ValueError(
            f"no {PACK_NAME} at {str(source)!r}; give the folder the device "
            "tool copied $OUT to (files_at), or the archive itself."
        )
    out = Path(out)
    before = load_summary(out)
    with tarfile.open(src, "r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            parts = Path(m.name).parts
            if not m.isfile() or m.name.startswith("/") or ".." in parts or parts[0] != "campaign":
                raise ValueError(f"{src.name} has an unexpected member {m.name!r}; not unpacked.")
        names = {Path(*Path(m.name).parts[1:]).as_posix() for m in members}
        if "summary.json" not in names:
            raise ValueError(f"{src.name} holds no summary.json.")
        incoming = json.loads(tar.extractfile("campaign/summary.json").read())
        if incoming.get("schema") != SCHEMA:
            raise ValueError(f"{src.name}'s summary.json is not a campaign summary.")
        if before is not None and (before["kind"], before["size"]) != (
            incoming["kind"],
            incoming["size"],
        ):
            raise ValueError(
                f"{str(out)!r} holds a {before['kind']} summary at size "
                f"{before['size']!r}, the archive a {incoming['kind']} one at "
                f"{incoming['size']!r}; collect into another --out."
            )
        for m in members:
            rel = Path(*Path(m.name).parts[1:])
            if rel.as_posix() == "summary.json":
                continue
            data = tar.extractfile(m).read()
            with atomic_path(out / rel) as tmp:
                tmp.write_bytes(data)
    if before is not None:  # a call that ran only some stages: keep the entries of the others
        new = {e["name"]: e for e in incoming["stages"]}
        kept = [e for e in before["stages"] if e["name"] not in new]
        order = [e["name"] for e in before["stages"]] + [
            n for n in new if n not in {e["name"] for e in before["stages"]}
        ]
        merged = {e["name"]: e for e in kept} | new
        incoming["stages"] = [merged[n] for n in order]
        incoming["created"] = before.get("created", incoming.get("created"))
    write_json(out / "summary.json", incoming)
    return incoming


def publish(out: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Copy a GPU campaign's small results from ``out`` to the committed folder ``dest``.

    Refuses a rehearsal, a summary none of whose stages is ``ok``, a stage that did not run on
    CUDA, and more than 2 MB in all. ``dest``'s README.md is kept; other files are replaced.

    Returns:
        The files written.

    Raises:
        ValueError: naming the reason.
    """
    out, dest = Path(out), Path(dest)
    summary = load_summary(out)
    if summary is None:
        raise ValueError(f"{str(out)!r} has no summary.json; run or --collect the campaign first.")
    if summary["kind"] != "gpu" or summary.get("banner"):
        raise ValueError(
            f"{str(out)!r} holds a rehearsal ({summary.get('banner')}); only GPU "
            "campaigns are published."
        )
    ran = [e for e in summary["stages"] if e.get("seconds") is not None]
    if not any(e["status"] == "ok" for e in ran):
        raise ValueError("no stage finished ok; nothing to publish.")
    cpu = [e["name"] for e in ran if not str(e.get("device", "")).startswith("cuda")]
    if cpu:
        raise ValueError(f"stages {cpu} did not run on CUDA; they are not GPU results.")
    files = [p for p in sorted(out.rglob("*")) if p.is_file() and not p.name.startswith(".")]
    size = sum(p.stat().st_size for p in files)
    if size > PUBLISH_LIMIT:
        raise ValueError(
            f"{size / 2**20:.1f} MB of results; the committed GPU summaries must "
            "stay under 2 MB (keep heavy files in the work folder)."
        )
    dest.mkdir(parents=True, exist_ok=True)
    for p in dest.rglob("*"):
        if p.is_file() and p.name != "README.md":
            p.unlink()
    written = []
    for p in files:
        target = dest / p.relative_to(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
        written.append(target)
    return written
