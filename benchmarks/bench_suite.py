"""Time of the test suite and of its fast tier, and the per-test durations behind it (issue 40).

Targets (issue 40, on 2 idle cores, pytest's own time): the whole suite (the README's test
command) in <= 5 minutes; the fast tier (``pytest -m "not slow"``) in <= 2 minutes.

Runs pytest in a child process exactly as the README types it (plus ``--durations=0``), and
prints pytest's own time, the wall time, the CPU seconds of every worker (user + system of the
children: on a machine shared with other work the wall time grows, the CPU seconds do not), the
load average before and after, and the slowest tests. With ``--write`` (whole suite only) it
writes ``tests/durations.json``: every test's setup + call + teardown seconds, from which
``tests/conftest.py`` marks the tests over its threshold ``slow`` (out of the fast tier).

    python benchmarks/bench_suite.py                 # whole suite
    python benchmarks/bench_suite.py --tier fast     # pytest -m "not slow"
    python benchmarks/bench_suite.py --write         # whole suite; rewrite tests/durations.json
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages
from sims.runtime.cli import ArgumentParser, positive_int  # noqa: E402 - this checkout's

REPO = Path(__file__).resolve().parent.parent
DURATIONS = REPO / "tests" / "durations.json"
#: ``12.34s call     tests/x.py::test_y[a]@module:x`` (pytest's --durations lines)
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*?)\s*$")
#: the ``@group`` suffix xdist's loadgroup adds to a node id
_GROUP = re.compile(r"@[^\[\]@]+$")


def parse_durations(text: str) -> dict[str, float]:
    """``{node id: setup + call + teardown seconds}`` from pytest's ``--durations=0`` output.

    The ``@group`` suffix of ``--dist loadgroup`` is dropped, so the ids are pytest's own.
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            node = _GROUP.sub("", m.group(3))
            out[node] = out.get(node, 0.0) + float(m.group(1))
    return out


def pytest_seconds(text: str) -> float | None:
    """pytest's own time from its last line (``... in 461.86s (0:07:41)``)."""
    found = re.findall(r" in (\d+(?:\.\d+)?)s", text)
    return float(found[-1]) if found else None


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", choices=("all", "fast"), default="all",
                   help="all: the README's test command; fast: pytest -m 'not slow'")
    p.add_argument("--write", action="store_true",
                   help="write tests/durations.json from this run (whole suite only)")
    p.add_argument("--top", type=positive_int, default=15,
                   help="how many of the slowest tests to print")
    p.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    a = p.parse_args(argv)
    if a.write and a.tier != "all":
        p.error("--write needs the whole suite (--tier all): the tier is computed from it")
    if a.write and not os.access(DURATIONS.parent, os.W_OK):
        p.error(f"--write: {DURATIONS.parent} is not writable")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--durations=0",
           "--durations-min=0.05", *(["-m", "not slow"] if a.tier == "fast" else []),
           *a.pytest_args]
    print("running:", " ".join(cmd[1:]), flush=True)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = proc.stdout + proc.stderr
    tail = [ln for ln in text.splitlines() if ln.strip()][-3:]
    durations = parse_durations(text)
    print("\n".join(tail))
    print(f"exit status {proc.returncode}; pytest's time {pytest_seconds(text)} s; "
          f"wall {wall:.0f} s; CPU {ru.ru_utime + ru.ru_stime:.0f} s; "
          f"load average {load0[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    slowest = sorted(durations.items(), key=lambda kv: -kv[1])
    print(f"{len(durations)} tests took >= 0.05 s (sum {sum(durations.values()):.0f} s); "
          f"the {a.top} slowest:")
    for node, s in slowest[: a.top]:
        print(f"  {s:7.2f} s  {node}")
    if a.write:
        if proc.returncode != 0:
            print("not writing tests/durations.json: the suite failed", file=sys.stderr)
            return 1
        body = {"measured": time.strftime("%Y-%m-%d"), "command": " ".join(cmd[1:]),
                "cpu_count": os.cpu_count(), "load_before": round(load0[0], 2),
                "seconds": {k: round(v, 2) for k, v in sorted(durations.items())}}
        tmp = DURATIONS.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=0, sort_keys=True) + "\n")
        os.replace(tmp, DURATIONS)
        print(f"wrote {DURATIONS.relative_to(REPO)} ({len(durations)} tests)")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
