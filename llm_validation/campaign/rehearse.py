"""The rehearsal: every planned device command run here under the device machine's limits.

The device tool's rules (/work/.library/device/README.md, "Limits" and "Notes") that a command
can break, each enforced here before or after the command runs:

* what travels, "the working tree ... (tracked and untracked-not-ignored files, shared/,
  carried paths)", is at most **64 MiB**, with at most **8** carried paths and a command of at
  most **2,000** characters: checked before the command runs (it does not run when broken);
* "files back from $OUT: at most **8 files, 16 MiB each, 64 MiB together, no more than 2 folders
  down** ($OUT/a/b/file comes back, $OUT/a/b/c/file does not), each file and folder named in
  letters, digits, '.', '_' and '-' alone" (links and other non-plain files do not come back):
  checked after it ran (:func:`out_violations`);
* one command runs at most **600 s**: here the limit is scaled to the rehearsal's size
  (:data:`TIME_SCALE`), and the command is killed at it, as there;
* "a fresh machine is bare": each lease runs in a new folder with nothing but the tree and the
  carried paths; the commands of one lease share it (the plan issues them back to back, while
  the machine stays warm), so what one command leaves in ignored paths the next one sees, and a
  carried path replaces the one there, or is removed there when it is not here.

Each command runs in a fresh interpreter with the copy on ``PYTHONPATH`` (not this checkout),
at a rehearsal size (``toy``: every stage on this CPU with the GPU image's packages emulated).
After each command its ``$OUT`` is collected here (``--collect``), as the person holding the GPU
does, and the next lease carries the collected summaries. A failed preflight stops the
rehearsal with its reason; so does any broken limit or failed command.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from llm_validation.campaign import carry, plan

__all__ = [
    "TIME_SCALE",
    "OUT_MAX_FILES",
    "OUT_MAX_FILE",
    "OUT_MAX_TOTAL",
    "OUT_MAX_DEPTH",
    "NotPrepared",
    "RehearsalError",
    "out_violations",
    "carried_bytes",
    "run_leases",
    "rehearse",
    "format_rows",
]

#: A command's limit (600 s) and deadline, scaled to the rehearsal's size on this CPU: the toy
#: stages are sized so that each planned command fits the GPU's own 600 s on 2 shared cores
#: (measured: up to ~290 s, 3x their CPU seconds under the load of five other sessions); the
#: mini ones (the test suite's) in a quarter of it (measured: up to 64 s).
TIME_SCALE = {"toy": 1.0, "mini": 0.25}
OUT_MAX_FILES, OUT_MAX_FILE, OUT_MAX_TOTAL, OUT_MAX_DEPTH = 8, 16 * carry.MIB, 64 * carry.MIB, 2
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
PREPARE = "python -m llm_validation campaign --prepare-carry"


class NotPrepared(ValueError):
    """The rehearsal needs what ``--prepare-carry`` makes; the message is the command to run."""


class RehearsalError(RuntimeError):
    """A command broke a limit of the device machine, failed, or its preflight failed."""


def out_violations(out: str | os.PathLike) -> list[str]:
    """Ways ``out`` breaks the rule for files coming back from ``$OUT`` (empty: none).

    At most :data:`OUT_MAX_FILES` files, each at most :data:`OUT_MAX_FILE` bytes and
    :data:`OUT_MAX_TOTAL` together, no more than :data:`OUT_MAX_DEPTH` folders down, every
    name in letters, digits, ``.``, ``_`` and ``-``, nothing but plain files and folders.
    """
    out = Path(out)
    bad, files = [], []
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out)
        if not _NAME.match(p.name):
            bad.append(f"{rel}: name has characters other than letters, digits, '.', '_', '-'")
        if p.is_symlink():
            bad.append(f"{rel}: a link (does not come back)")
        elif p.is_file():
            files.append(p)
            if len(rel.parts) - 1 > OUT_MAX_DEPTH:
                bad.append(f"{rel}: {len(rel.parts) - 1} folders down (at most {OUT_MAX_DEPTH})")
            if p.stat().st_size > OUT_MAX_FILE:
                bad.append(f"{rel}: {p.stat().st_size / carry.MIB:.1f} MiB (at most 16 MiB)")
        elif not p.is_dir():
            bad.append(f"{rel}: not a plain file")
    if len(files) > OUT_MAX_FILES:
        bad.append(f"{len(files)} files (at most {OUT_MAX_FILES})")
    total = sum(p.stat().st_size for p in files)
    if total > OUT_MAX_TOTAL:
        bad.append(f"{total / carry.MIB:.1f} MiB in all (at most 64 MiB)")
    return bad


def _tree_files(repo: Path) -> list[str]:
    proc = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    )
    return sorted({n for n in proc.stdout.decode().split("\0") if n and (repo / n).is_file()})


def carried_bytes(repo: str | os.PathLike, paths: Sequence[str]) -> int:
    """Bytes of what one command takes along: the tree and its carried paths."""
    repo = Path(repo)
    return carry.tree_bytes(repo) + sum(carry.path_bytes(repo / p) for p in paths)


def _send(repo: Path, machine: Path, paths: Sequence[str]) -> None:
    """Copy the tree and the carried paths onto the machine folder, as the tool does."""
    for name in _tree_files(repo):
        dst = machine / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / name, dst)
    for rel in paths:
        src, dst = repo / rel, machine / rel
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        elif dst.exists() or dst.is_symlink():
            dst.unlink()
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True)
        elif src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


@dataclasses.dataclass
class Row:
    """One rehearsed command: what it carried, how long it ran, what it returned."""

    lease: int
    index: int
    stages: tuple[str, ...]
    carried: int
    seconds: float
    limit_s: int
    rc: int
    files: list[str]
    statuses: dict[str, str]


def _statuses(out: Path) -> dict[str, str]:
    from llm_validation.campaign.runner import load_summary

    try:
        s = load_summary(out)
    except ValueError:
        return {}
    return {} if s is None else {e["name"]: e["status"] for e in s["stages"]}


def run_leases(
    repo: str | os.PathLike,
    leases: Sequence[plan.Lease],
    machines: str | os.PathLike,
    *,
    collect_into: str | os.PathLike | None = None,
    gate: str = "preflight",
    say: Callable[[str], None] = print,
) -> list[Row]:
    """Run every command of ``leases`` under the machine's limits; return what each did.

    Each lease gets a new folder under ``machines`` (bare); its commands share it. Before a
    command: the carry (tree + paths) must be <= 64 MiB, <= 8 paths, <= 2,000 characters. The
    command runs with ``$OUT`` an empty folder and is killed at its ``timeout_s``. After it:
    ``$OUT`` must obey :func:`out_violations`; its ``campaign-results.tar.gz`` is collected into
    ``collect_into`` (the folder the plan's later leases carry).

    Raises:
        RehearsalError: at the first broken limit, failed command, or failed ``gate`` stage
            (the rows so far in its ``rows`` attribute); later commands do not run.
    """
    from llm_validation.campaign.runner import collect

    repo, machines = Path(repo).resolve(), Path(machines).resolve()
    rows: list[Row] = []

    def stop(msg: str):
        err = RehearsalError(msg)
        err.rows = rows
        raise err

    for lease in leases:
        machine = machines / f"lease-{lease.number}"
        if machine.exists():
            shutil.rmtree(machine)
        tree = machine / "repo"
        tree.mkdir(parents=True)
        for k, cmd in enumerate(lease.commands, 1):
            tag = f"lease {lease.number}, command {k} ({', '.join(cmd.stages) or 'carry only'})"
            size = carried_bytes(repo, cmd.carry)
            if size > carry.TREE_LIMIT:
                stop(f"{tag}: carries {size / carry.MIB:.1f} MiB, over the 64 MiB limit")
            if len(cmd.carry) > carry.MAX_CARRY_PATHS:
                stop(f"{tag}: {len(cmd.carry)} carry paths (at most {carry.MAX_CARRY_PATHS})")
            if len(cmd.command) > carry.MAX_COMMAND_CHARS:
                stop(f"{tag}: a command of {len(cmd.command)} characters (at most 2,000)")
            _send(repo, tree, cmd.carry)
            out = machine / "OUT"
            if out.exists():
                shutil.rmtree(out)
            out.mkdir()
            env = {
                **os.environ,
                "OUT": str(out),
                "PYTHONPATH": str(tree),
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
                "PYTHONUNBUFFERED": "1",
            }
            say(f"[rehearse] {tag}: {size / carry.MIB:.1f} MiB carried, limit {cmd.timeout_s} s")
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                ["bash", "-c", cmd.command],
                cwd=tree,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its own process group: killed whole at the limit
            )
            try:
                text, _ = proc.communicate(timeout=cmd.timeout_s)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                text, _ = proc.communicate()
                rc = 124
            tail = (text or "")[-3000:]
            seconds = time.perf_counter() - t0
            files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
            row = Row(lease.number, k, cmd.stages, size, seconds, cmd.timeout_s, rc, files,
                      _statuses(out))  # fmt: skip
            rows.append(row)
            say(
                f"[rehearse] {tag}: rc {rc} in {seconds:.1f} s; returned {len(files)} files"
                + "".join(f"; {n} {s}" for n, s in row.statuses.items() if n in cmd.stages)
            )
            bad = out_violations(out)
            if bad:
                stop(f"{tag}: $OUT breaks the rule for returned files: {'; '.join(bad)}")
            if collect_into is not None and (out / "campaign-results.tar.gz").is_file():
                collect(out, collect_into)
            if gate in cmd.stages and row.statuses.get(gate) != "ok":
                stop(f"{tag}: {gate} {row.statuses.get(gate, 'did not finish')}; the campaign "
                     f"stops here. Output's end:\n{tail[-1500:]}")  # fmt: skip
            if rc == 124:
                stop(f"{tag}: killed at its {cmd.timeout_s} s limit. Output's end:\n{tail}")
            if rc != 0:
                stop(f"{tag}: exit status {rc}. Output's end:\n{tail}")
        shutil.rmtree(machine)  # the lease ends: the machine goes back
    return rows


def rehearse(
    repo: str | os.PathLike,
    *,
    size: str = "toy",
    carry_rel: str = ".carry",
    out_rel: str = "results/campaign/rehearsal",
    lease_seconds: float = plan.LEASE_SECONDS,
    startup_seconds: float = plan.STARTUP_SECONDS,
    say: Callable[[str], None] = print,
) -> tuple[list[plan.Lease], list[Row]]:
    """Plan the campaign as for the GPU, then run each command here at ``size`` under the limits.

    Raises:
        NotPrepared: when ``--prepare-carry`` has not run (nothing else is done).
        RehearsalError: see :func:`run_leases`.
    """
    from llm_validation.campaign.device import device_plan

    if size not in TIME_SCALE:
        raise ValueError(f"`size` must be one of {sorted(TIME_SCALE)}; got {size!r}.")
    repo = Path(repo).resolve()
    root = repo / carry_rel
    if not (root / "wheels").is_dir() or not (root / "gguf" / carry.MANIFEST).is_file():
        raise NotPrepared(
            f"nothing to carry in {str(root)!r}: run `{PREPARE}` first (the wheels the GPU "
            "image lacks and SmolLM2's GGUF in parts; ~110 MB of downloads)."
        )
    scale = TIME_SCALE[size]
    leases = device_plan(
        repo,
        carry_rel,
        lease_seconds=lease_seconds,
        startup_seconds=startup_seconds,
        out_rel=out_rel,
        size=size,
        deadline=int(plan.DEADLINE_S * scale),
        timeout_s=int(plan.COMMAND_LIMIT_S * scale),
    )
    local = repo / out_rel
    if local.exists():  # a rehearsal starts from nothing collected
        shutil.rmtree(local)
    machines = repo / "results" / "campaign" / "rehearsal-machines"
    rows = run_leases(repo, leases, machines, collect_into=local, say=say)
    return leases, rows


def format_rows(rows: Sequence[Row]) -> str:
    """The rehearsal's measured commands as a table."""
    lines = [f"{'cmd':<5} {'stages':<34} {'MiB':>5} {'seconds':>8} {'limit':>6} {'rc':>3} files"]
    for r in rows:
        lines.append(
            f"{r.lease}.{r.index:<3} {', '.join(r.stages) or 'carry only':<34} "
            f"{r.carried / carry.MIB:>5.1f} {r.seconds:>8.1f} {r.limit_s:>6} {r.rc:>3} "
            f"{len(r.files)}"
        )
    return "\n".join(lines)
