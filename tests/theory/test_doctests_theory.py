"""The docstring examples of the theory modules run (style rule 13)."""

import doctest
import importlib

import pytest

MODULES = ["theory.trace_algebra", "theory.attn_numeric", "theory.wishart",
           "theory.attention_model", "theory.fixed_points", "theory.sam_flow", "theory.merged_kq",
           "theory.entropy", "theory.report"]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
