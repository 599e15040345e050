"""Run the docstring examples of the core modules (style rule 13)."""

import doctest
import importlib

import pytest

MODULES = [
    "sims.entropy", "sims.scalar_odes", "sims.sam_entropy", "sims.runtime.io",
    "sims.runtime.extras", "sims.runtime.cli",
    "theory.verify",
]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
