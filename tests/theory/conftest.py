"""Fixtures for the theory tests: cached claim runs (see ``_theory_runs``)."""

from __future__ import annotations

import pytest
from _theory_runs import run_cached


@pytest.fixture
def claim_run():
    return run_cached
