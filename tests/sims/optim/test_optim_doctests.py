"""Docstring examples of the optimizer modules (style rule 13)."""

import doctest
import importlib

import pytest

MODULES = ["sims.optim", "sims.optim.torch_sam", "sims.optim.muon", "sims.optim.factory"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_importing_sims_optim_imports_neither_torch_nor_jax():
    import subprocess
    import sys

    code = "import sys, sims.optim; print('torch' in sys.modules, 'jax' in sys.modules)"
    from tests.core_only import REPO

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.split() == ["False", "False"]
