"""The README's test paragraph says what `.ci/run` really does (issue 40, row 6)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _readme_test_command() -> str:
    text = (REPO / "README.md").read_text()
    block = text.split("Set up and run the test suite.", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", block, flags=re.S).group(1).strip()


def test_ci_runs_the_readme_command_verbatim_and_the_readme_names_what_else_it_does():
    ci = (REPO / ".ci" / "run").read_text()
    command = _readme_test_command()
    assert command in ci.splitlines()  # verbatim, on a line of its own
    para = (REPO / "README.md").read_text().split("Set up and run the test suite.", 1)[1]
    para = para.split("```", 1)[0]
    assert "exactly what" not in para  # CI does more than the command
    for extra in re.findall(r"^export (\w+)=", ci, flags=re.M):
        assert extra in para, f".ci/run sets {extra}; the README does not say so"
    assert "chromium" in ci and "Chromium" in para


def test_the_suite_runs_on_every_core_and_the_fast_tier_is_documented():
    opts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-n auto" in opts["addopts"] and "--dist loadgroup" in opts["addopts"]
    assert any(m.startswith("slow:") for m in opts["markers"])
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("pytest-xdist") for d in extras["optional-dependencies"]["test"])
    readme = (REPO / "README.md").read_text()
    assert 'python -m pytest -m "not slow"' in readme
    assert "PLACEHOLDER" not in readme
