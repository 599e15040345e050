"""Issue 37: every command the findings page prints exists, as printed.

The page is rendered (tables only), every ``<code>`` that starts with ``python -m`` is parsed,
and each distinct module / subcommand is asked for ``--help`` once (a handful of processes,
run side by side): every flag the page prints must be in that help, and the values that name
registered things (figures, theory claims, campaign stages, confirmation variants and scales)
must be registered. Upper-case words (``DIR``, ``NAME``) are placeholders for the reader.
"""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from figures.report import load_numbers
from figures.report.claims import all_rows
from figures.report.page import render_html

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    page = render_html(all_rows(load_numbers()), {}, tmp_path_factory.mktemp("page"))
    codes = {html.unescape(re.sub(r"<[^>]+>", "", c))
             for c in re.findall(r"<code>(.*?)</code>", page, flags=re.S)}  # fmt: skip
    return sorted(c for c in codes if c.startswith("python -m "))


def _prefix(argv: list[str]) -> tuple[str, ...]:
    """``("figures",)`` or ``("llm_validation", "confirm")``: what ``--help`` is asked of."""
    module, rest = argv[2], argv[3:]
    if rest and not rest[0].startswith("-") and not rest[0].isupper():
        return (module, rest[0])
    return (module,)


def _helps(prefixes) -> dict[tuple[str, ...], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    procs = {
        p: subprocess.Popen([sys.executable, "-m", *p, "--help"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for p in prefixes
    }  # fmt: skip
    out = {}
    for p, proc in procs.items():
        text, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"`python -m {' '.join(p)} --help` failed:\n{text[-1500:]}"
        out[p] = text
    return out


def _registered() -> dict[str, set[str]]:
    import figures
    from llm_validation.campaign.stages import stage_names
    from llm_validation.experiments.confirm import SCALES, VARIANTS

    theory = subprocess.run([sys.executable, "-m", "theory", "--list"], cwd=ROOT, text=True,
                            capture_output=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert theory.returncode == 0, theory.stderr[-1500:]
    return {
        "--only": set(figures.discover()),
        "--claim": {line.split()[0] for line in theory.stdout.splitlines() if line.strip()},
        "--stage": set(stage_names()),
        "--variants": set(VARIANTS) | {"all"},
        "--scale": set(SCALES),
    }


def test_every_command_on_the_page_parses_against_its_help(commands):
    assert len(commands) > 100  # one per theory claim and figure, the confirmation, the GPU
    parsed = [shlex.split(c) for c in commands]
    helps = _helps({_prefix(a) for a in parsed})
    known = _registered()
    wrong = []
    for cmd, argv in zip(commands, parsed, strict=True):
        prefix = _prefix(argv)
        text = helps[prefix]
        args = argv[2 + len(prefix):]
        for i, tok in enumerate(args):
            if not tok.startswith("--"):
                continue
            flag = tok.split("=", 1)[0]
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                wrong.append(f"{cmd}: {flag} is not in `{' '.join(prefix)} --help`")
            if flag in known and i + 1 < len(args) and not args[i + 1].isupper():
                for value in args[i + 1].split(","):
                    if value not in known[flag]:
                        wrong.append(f"{cmd}: {flag} {value!r} is not registered")
    assert not wrong, "\n".join(wrong)


def test_the_gpu_confirmation_row_names_its_stage_and_the_way_back(commands):
    assert "python -m llm_validation campaign --stage confirm_smollm2" in commands
    assert "python -m llm_validation campaign --collect DIR" in commands
    assert "python -m llm_validation campaign --publish" in commands
