"""Shared, cached runs of the theory claims (each claim runs once per test session)."""

from __future__ import annotations

import theory

_RUNS: dict = {}


def run_cached(name: str):
    """``Claim.run()`` of ``name`` (logged comparisons in ``parts``), once per session."""
    if name not in _RUNS:
        _RUNS[name] = theory.load_all()[name].run()
    return _RUNS[name]
