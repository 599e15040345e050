"""The campaign in GPU leases: which device commands each lease runs, what they carry and return.

A lease is one session's device time on one machine (/work/.library/device/README.md, "Limits"):
900 s in all, counted from the asking for a machine, so its start (one to two minutes), every
transfer and every idle second between commands come out of it. Each command runs at most 600 s
and carries at most 64 MiB (the tracked tree plus the named ignored paths, 8 at most); the machine
keeps what earlier commands left only while it stays warm (~30 s after a command), and a new
lease starts bare.

:func:`plan_leases` packs the stages (in :data:`~llm_validation.campaign.stages.STAGES`' order of
value) into leases, first fit: a stage goes into the first lease where it fits, so a cheaper,
later stage may fill the end of a lease that a dearer one could not. Every lease's first command
also runs the ``preflight`` (<= 30 s; a failure blocks the command's later stages). A stage
that needs the SmolLM2 GGUF (``carries`` has ``gguf``) gets its parts spread over the commands of
its own lease (the parts are kept only while the machine stays warm), balanced so that each
command carries about the same bytes (:func:`balanced_parts`).

The times are estimates: the stages' planned seconds (no stage has run on a GPU), the start-up
at its documented upper end and a transfer model (:data:`TRANSFER_FIXED_S`, :data:`TRANSFER_MIB_S`)
that no measurement here supports; ``--lease-seconds`` / ``--startup-seconds`` change the budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from llm_validation.campaign import carry

__all__ = [
    "LEASE_SECONDS",
    "STARTUP_SECONDS",
    "COMMAND_LIMIT_S",
    "DEADLINE_S",
    "Sizes",
    "Command",
    "Lease",
    "balanced_parts",
    "plan_leases",
    "format_leases",
]

#: Device time of one lease (a drawn task's 15 minutes).
LEASE_SECONDS = 900
#: The machine's start, counted in the lease ("one to two minutes": planned at two).
STARTUP_SECONDS = 120
#: One command's limit (the tool's ``timeout_s`` at most).
COMMAND_LIMIT_S = 600
#: The ``--deadline`` inside a command: leaves 45 s to pack the results and return.
DEADLINE_S = 555
#: Seconds between two commands of a lease (issued at once; the machine stays warm ~30 s).
GAP_S = 10
#: The transfer model per command: fixed seconds, plus MiB carried per second (assumed).
TRANSFER_FIXED_S, TRANSFER_MIB_S = 10.0, 8.0
#: Room kept free in every command (files added to the tree later, the summary folder).
MARGIN = 3 * carry.MIB
#: What comes back from every command: the campaign's pack and its log, at ``$OUT``'s top.
RETURNS = ("summary.json", "campaign-results.tar.gz", "campaign.log")
#: Sizes used before ``--prepare-carry`` has run (measured 2026-11-27): the six wheels of
#: :data:`llm_validation.campaign.carry.WHEELS` for the image, SmolLM2-135M-Instruct Q4_1, its
# tokenizer.
EST_WHEELS = 12_729_000
EST_GGUF = 98_360_000
EST_TOKENIZER = 3_700_000


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Bytes the commands carry: the tree (always) and each carried thing.

    ``parts``: the GGUF parts' ``(name, bytes)`` in order (empty: not split yet, then
    :func:`plan_leases` plans a balanced split of ``gguf`` bytes); ``results``: the collected
    summary folder that the first command of every later lease carries.
    """

    tree: int
    wheels: int = EST_WHEELS
    tokenizer: int = EST_TOKENIZER
    gguf: int = EST_GGUF
    parts: tuple[tuple[str, int], ...] = ()
    results: int = 1 * carry.MIB
    prepared: bool = False


@dataclasses.dataclass
class Command:
    """One device command: the stages it runs, its carry list and bytes, its planned time.

    ``carry_bytes``: the tree plus the carried paths (the tool's 64 MiB, less :data:`MARGIN`).
    """

    lease: int
    stages: tuple[str, ...]
    carry: list[str]
    carry_bytes: int
    run_s: float
    command: str = ""
    timeout_s: int = COMMAND_LIMIT_S
    deadline_s: int = DEADLINE_S
    returns: tuple[str, ...] = RETURNS
    parts: tuple[str, ...] = ()

    @property
    def transfer_s(self) -> float:
        """Planned seconds of the command's transfers (:data:`TRANSFER_FIXED_S` + bytes)."""
        return TRANSFER_FIXED_S + self.carry_bytes / carry.MIB / TRANSFER_MIB_S

    def as_run_args(self) -> dict:
        """The device tool's ``run`` arguments."""
        return {"command": self.command, "carry": self.carry, "timeout_s": self.timeout_s}


@dataclasses.dataclass
class Lease:
    """One lease's commands and its planned device seconds."""

    number: int
    commands: list[Command]
    lease_s: float
    startup_s: float

    @property
    def planned_s(self) -> float:
        """Start-up, every command's transfers and run, the gaps between commands."""
        busy = sum(c.transfer_s + c.run_s for c in self.commands)
        return self.startup_s + busy + GAP_S * max(len(self.commands) - 1, 0)

    @property
    def slack_s(self) -> float:
        """Seconds of the lease left unplanned."""
        return self.lease_s - self.planned_s


def balanced_parts(
    gguf: int, *, tree: int, first_extra: int, last_extra: int = 0, limit: int = carry.TREE_LIMIT
) -> list[int]:
    """Part sizes for carrying ``gguf`` bytes in as few commands as ``limit`` allows, balanced.

    The first command carries ``first_extra`` bytes (the wheels) beside its part, the last
    ``last_extra`` (the collected summaries); every command carries the tree and
    :data:`MARGIN`. With ``n`` commands each carries ``(first_extra + gguf + last_extra) / n``
    bytes of payload, so ``n`` is the smallest count for which that fits.

    Returns:
        The parts' sizes in bytes, one per command.

    Raises:
        llm_validation.campaign.carry.CarryError: when the tree leaves no room for a 1 MiB part.
    """
    room = limit - tree - MARGIN
    if room - max(first_extra, last_extra) < carry.MIB:
        raise carry.CarryError(
            f"no room for GGUF parts: the tree ({tree / carry.MIB:.1f} MiB) and what travels "
            f"with the parts ({max(first_extra, last_extra) / carry.MIB:.1f} MiB) leave less "
            f"than 1 MiB of the {limit / carry.MIB:.0f} MiB a command carries."
        )
    total = first_extra + gguf + last_extra
    n = max(1, math.ceil(total / room))
    while True:
        if n == 1:
            return [gguf]
        each = total / n
        sizes = [max(carry.MIB, round(each - first_extra))]
        sizes += [round(each)] * (n - 2)
        sizes.append(gguf - sum(sizes))
        loads = [sizes[0] + first_extra, *sizes[1:-1], sizes[-1] + last_extra]
        if min(sizes) >= carry.MIB and max(loads) <= room:
            return sizes
        n += 1


def _cmd_text(stages: Sequence[str], *, out_rel: str, size: str, deadline: int) -> str:
    size_flag = "" if size == "gpu" else f" --size {size}"
    return (
        "set -o pipefail; export PYTHONUNBUFFERED=1; python3 -m llm_validation.campaign "
        f"--stage {' '.join(stages)} --out {out_rel}{size_flag} --deadline {deadline} "
        "--pack $OUT 2>&1 | tee $OUT/campaign.log"
    )


def plan_leases(
    stages: Sequence,
    sizes: Sizes,
    *,
    lease_seconds: float = LEASE_SECONDS,
    startup_seconds: float = STARTUP_SECONDS,
    carry_rel: str = ".carry",
    out_rel: str = "results/campaign/gpu",
    size: str = "gpu",
    deadline: int = DEADLINE_S,
    timeout_s: int = COMMAND_LIMIT_S,
) -> list[Lease]:
    """Pack ``stages`` (:class:`~llm_validation.campaign.runner.StageSpec`) into leases.

    Args:
        stages: the campaign in order of value; a ``gate`` stage (the preflight) is folded into
            the first command of every lease.
        sizes: bytes of the tree and of what is carried.
        lease_seconds: device seconds of a lease (start-up and transfers included).
        startup_seconds: the machine's start, counted in the lease.
        carry_rel: the carried folder, relative to the repository root.
        out_rel: the summary folder, relative to the repository root (``--out``).
        size: the stages' size (``gpu``; the rehearsal plans the same commands at ``toy``).
        deadline: the ``--deadline`` of each command (seconds of its run).
        timeout_s: each command's ``timeout_s``.

    Raises:
        llm_validation.campaign.carry.CarryError: when a stage fits no lease or a command breaks a
            limit (64 MiB, 8 carry paths, 2,000 characters).
    """
    gate = [s for s in stages if s.gate]
    work = [s for s in stages if not s.gate]
    pre = gate[0] if gate else None
    pre_s = pre.planned_seconds if pre else 0.0
    wheels_p, tok_p, man_p = f"{carry_rel}/wheels", f"{carry_rel}/tokenizer", "manifest.json"
    parts = list(sizes.parts) or [
        (f"part-{i:02d}", b)
        for i, b in enumerate(
            balanced_parts(
                sizes.gguf, tree=sizes.tree, first_extra=sizes.wheels, last_extra=sizes.results
            ),
            start=1,
        )
    ]

    def commands_for(spec, first: bool, lease_no: int) -> list[Command]:
        """The commands that run ``spec``, as the lease's first (with preflight) or a later one.

        The collected summaries (``out_rel``) travel with the lease's first command that runs
        a stage besides the preflight, so a fresh machine skips what earlier leases finished.
        """
        pre_names = (pre.name,) if first and pre else ()
        extra_s = pre_s if first else 0.0
        base = sizes.tree
        wheels = [wheels_p] if ("wheels" in spec.carries or first) else []
        tok = [tok_p] if "tokenizer" in spec.carries else []
        res = [out_rel] if first and lease_no > 1 else []
        tok_b = sizes.tokenizer if tok else 0
        res_b = sizes.results if res else 0
        if "gguf" not in spec.carries:
            paths = res + wheels + tok
            b = base + res_b + (sizes.wheels if wheels else 0) + tok_b
            return [Command(lease_no, pre_names + (spec.name,), paths, b, spec.planned_seconds
                            + extra_s)]  # fmt: skip
        # the parts over consecutive commands: the first carries the wheels (and runs the
        # preflight when it is the lease's first), the last the summaries and runs the stage
        man = f"{carry_rel}/gguf/{man_p}"
        cmds: list[Command] = []
        for k, (name, nb) in enumerate(parts):
            last = k == len(parts) - 1
            paths = (wheels if k == 0 else []) + [man, f"{carry_rel}/gguf/{name}"]
            b = base + nb + (sizes.wheels if k == 0 and wheels else 0)
            stg: tuple[str, ...] = pre_names if k == 0 else ()
            run_s = extra_s if k == 0 else 0.0
            if last:
                paths += res + tok
                b += res_b + tok_b
                stg += (spec.name,)
                run_s += spec.planned_seconds
            cmds.append(Command(lease_no, stg, paths, b, run_s, parts=(name,)))
        return cmds

    leases: list[Lease] = []
    todo = list(work)
    while todo:
        lease = Lease(len(leases) + 1, [], lease_seconds, startup_seconds)
        for spec in list(todo):
            cmds = commands_for(spec, not lease.commands, lease.number)
            trial = Lease(lease.number, lease.commands + cmds, lease_seconds, startup_seconds)
            if trial.planned_s <= lease_seconds and all(
                c.run_s <= deadline or size != "gpu" for c in cmds
            ):
                lease.commands += cmds
                todo.remove(spec)
        if not lease.commands:
            spec = todo[0]
            raise carry.CarryError(
                f"stage {spec.name!r} ({spec.planned_seconds:.0f} s) fits no lease of "
                f"{lease_seconds:.0f} s with {startup_seconds:.0f} s of start-up; give "
                "--lease-seconds more or plan the stage shorter."
            )
        leases.append(lease)
    for lease in leases:
        for c in lease.commands:
            if c.stages:
                c.command = _cmd_text(c.stages, out_rel=out_rel, size=size, deadline=deadline)
            else:
                c.command = "python3 -m llm_validation.campaign --check-parts"
                c.returns = ()
            c.timeout_s, c.deadline_s = timeout_s, deadline
            _check_limits(c)
    return leases


def _check_limits(c: Command) -> None:
    if (
        c.carry_bytes + MARGIN > carry.TREE_LIMIT
        or len(c.carry) > carry.MAX_CARRY_PATHS
        or len(c.command) > carry.MAX_COMMAND_CHARS
    ):
        raise carry.CarryError(
            f"lease {c.lease}'s command for {c.stages or 'carrying'} breaks the tool's limits "
            f"({c.carry_bytes / carry.MIB:.1f} MiB + {MARGIN // carry.MIB} MiB margin of 64, "
            f"{len(c.carry)} carry paths of 8, "
            f"{len(c.command)} characters of 2,000); run --prepare-carry again (it balances "
            "the GGUF parts against the tree as it is now)."
        )


def format_leases(leases: Sequence[Lease], stages: Sequence, *, run_args: bool = False) -> str:
    """Lease by lease: each command's stages, carry, planned seconds and what it returns."""
    planned = {s.name: s.planned_seconds for s in stages}
    lines = []
    for lease in leases:
        lines.append(
            f"Lease {lease.number}: {lease.planned_s:.0f} s of {lease.lease_s:.0f} planned "
            f"(start-up {lease.startup_s:.0f} s; {lease.slack_s:.0f} s left)"
        )
        for k, c in enumerate(lease.commands, 1):
            what = (
                " + ".join(f"{n} {planned.get(n, 0):.0f} s" for n in c.stages)
                if c.stages
                else "carry only"
            )
            lines.append(
                f"  {lease.number}.{k} {what}; carries {c.carry_bytes / carry.MIB:.1f} MiB "
                f"(transfer ~{c.transfer_s:.0f} s): {', '.join(c.carry) or 'the tree only'}"
            )
            back = ", ".join(c.returns) if c.returns else "nothing (prints the parts' state)"
            lines.append(f"      returns: {back}")
            if run_args:
                import json

                lines.append("      run " + json.dumps(c.as_run_args()))
    return "\n".join(lines)
