"""SymPy re-derivations of the papers' lemmas and theorems, as checks that can fail.

Each module re-derives one part of a paper and registers its claims with
:func:`theory.verify.claim`. :func:`load_all` imports every module so the registry is complete;
``python -m theory`` prints the verdict table.
"""

from __future__ import annotations

import importlib
import pkgutil

from .verify import CLAIMS, CheckResult, Claim, Verdict, claim, is_zero, run_claim

__all__ = ["CLAIMS", "CheckResult", "Claim", "Verdict", "claim", "is_zero", "run_claim", "load_all"]

_INFRA = {"verify", "report", "plant", "__main__"}


def load_all() -> dict[str, Claim]:
    """Import every ``theory`` module (auto-discovered) and return the claim registry."""
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _INFRA and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    return CLAIMS
