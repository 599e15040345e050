"""Docstring examples of sims.lm and the diagnostics module (style rule 13)."""

import doctest
import importlib

import pytest

MODULES = [
    "sims.lm",
    "sims.lm.model",
    "sims.lm.data",
    "sims.lm.schedules",
    "sims.optim.diagnostics",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
