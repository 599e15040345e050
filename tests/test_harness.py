"""The test harness itself: the session cache of the committed-summary judging (conftest)."""

from __future__ import annotations

import pytest


def test_the_judging_cache_never_serves_rows_judged_under_another_rule(monkeypatch):
    from figures.report import claims as C

    numbers = {"theory": {"claims": []}}
    first = C.all_rows(numbers)
    assert [r.claim.id for r in C.all_rows(numbers)] == [r.claim.id for r in first]
    first.clear()  # a deep copy per call: changing one result cannot change the next
    assert C.all_rows(numbers)

    def broken(theory):
        raise RuntimeError("the planted rule ran")

    monkeypatch.setattr(C, "theory_claims", broken)
    with pytest.raises(RuntimeError, match="planted rule ran"):
        C.all_rows(numbers)  # a patched module: judged again, not taken from the cache
    monkeypatch.undo()
    assert C.all_rows(numbers)


# ----------------------------------------------------------------------------- the fast tier

_PYTEST_OUT = """\
============================= slowest durations ==============================
12.50s setup    tests/figures/test_x.py::test_a@module:test_x
3.25s call     tests/figures/test_x.py::test_a@module:test_x
0.25s teardown tests/figures/test_x.py::test_a@module:test_x
2.00s call     tests/sims/test_y.py::test_b[rho=0.5-sam]
0.06s call     tests/sims/test_y.py::test_c[a@b]@findings-rows
1 failed, 2670 passed, 2 skipped, 66 warnings in 771.01s (0:12:51)
"""


def test_suite_benchmark_sums_the_phases_of_each_test_and_drops_the_group():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_suite import parse_durations, pytest_seconds

    d = parse_durations(_PYTEST_OUT)
    assert d == {"tests/figures/test_x.py::test_a": 16.0,
                 "tests/sims/test_y.py::test_b[rho=0.5-sam]": 2.0,
                 "tests/sims/test_y.py::test_c[a@b]": 0.06}
    assert pytest_seconds(_PYTEST_OUT) == 771.01


def test_a_test_measured_over_the_threshold_is_slow(pytester):
    """conftest marks `slow` what tests/durations.json measured at SLOW_SECONDS or more."""
    import json
    import re
    from pathlib import Path

    here = Path(__file__).with_name("conftest.py")  # the suite's own (not a subfolder's)
    text = here.read_text()
    pytester.makeconftest(text)
    t = float(re.search(r"^SLOW_SECONDS = (\S+)$", text, flags=re.M).group(1))
    pytester.makepyfile(test_t="def test_quick():\n    pass\n\ndef test_measured():\n    pass\n")
    (pytester.path / "durations.json").write_text(json.dumps({"seconds": {
        "test_t.py::test_quick": t - 0.01, "test_t.py::test_measured": t}}))
    result = pytester.runpytest("-p", "no:xdist", "-p", "no:cacheprovider", "-m", "not slow", "-v",
                                "-o", "addopts=", "--strict-markers",
                                "-o", "markers=slow: s\ngpu: g")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*test_t.py::test_quick PASSED*"])
