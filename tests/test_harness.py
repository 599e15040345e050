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
