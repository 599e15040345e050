"""Docstring examples of the LLM pipeline's pure modules (style rule 13)."""

import doctest
import importlib

import pytest

MODULES = ["llm_validation.evaluate.scoring", "llm_validation.data.records",
           "llm_validation.models.registry", "llm_validation.models.tiny",
           "llm_validation.select.synthesis"]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
