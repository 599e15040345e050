"""Run the docstring examples of the Markov modules (style rule 13)."""

import doctest
import importlib

import pytest

MODULES = ["sims.markov.chain", "sims.markov.models", "sims.markov.train",
           "sims.markov.tensor_dynamics", "sims.markov.experiments"]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
