"""Regenerate ``sam_entropy_reference.json``: Theorem 4.4 learning times from the per-feature code.

This script was run ONCE at commit 7cf70cf, BEFORE ``sims.sam_entropy`` was vectorised (issue 24,
item 5): there ``check_theorem`` computed every learning time with one ``learning_time`` call per
feature and ρ (closed forms; full SAM by partial fractions over ``np.polyroots`` roots), and
cross-checked each against adaptive quadrature (``scipy.integrate.quad``, rtol 1e-13) and ODE
integration (DOP853, rtol 1e-12). The stored ``xcheck_*`` fields are those agreements (all below
1e-10 relative), which is why the stored numbers are trustworthy: three independent methods agree.
Running it on a later commit records that commit's values instead (``commit`` says which).

Stored per case: the GD and SAM times (every feature for d <= 60, every 25th and the last for
d = 600), statuses, entropies, gaps, majorization margins and verdicts (which depend on every
feature). Usage: ``PYTHONPATH=. python tests/sims/data/make_sam_entropy_reference.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from sims.sam_entropy import SamEntropyConfig, check_theorem, spectrum

OUT = Path(__file__).with_name("sam_entropy_reference.json")
MODELS = (
    ("truncated", "first_order", 0.5),
    ("truncated", "exact", 0.5),
    ("full", "first_order", 0.5),  # GD stalls below some endpoints: the "undefined" path
    ("full", "exact", 0.5),
    ("full", "first_order", 0.05),  # every feature learned under full dynamics
    ("full", "exact", 0.05),
)


def _num(x):
    x = float(x)
    return "nan" if np.isnan(x) else ("inf" if np.isinf(x) else x)


def case(family: str, dim: int, dynamics: str, sam_form: str, c: float, xcheck: bool) -> dict:
    cfg = SamEntropyConfig(
        eigenvalues=tuple(spectrum(family, dim)), dynamics=dynamics, sam_form=sam_form, c=c,
        cross_check=xcheck,
    )  # fmt: skip
    ds = check_theorem(cfg, progress=False)
    idx = np.arange(dim) if dim <= 60 else np.unique(np.r_[np.arange(0, dim, 25), dim - 1])
    out = {
        "family": family, "dim": dim, "dynamics": dynamics, "sam_form": sam_form, "c": c,
        "rhos": [float(r) for r in ds.rho.values],
        "feature_index": idx.tolist(),
        "t_gd": [_num(t) for t in ds.t_gd.values[idx]],
        "status_gd": [str(s) for s in ds.status_gd.values[idx]],
        "t_sam": [[_num(t) for t in row[idx]] for row in ds.t_sam.values],
        "status_sam": [[str(s) for s in row[idx]] for row in ds.status_sam.values],
        "entropy_gd": _num(ds.entropy_gd),
        "entropy_sam": [_num(h) for h in ds.entropy_sam.values],
        "entropy_gap": [_num(g) for g in ds.entropy_gap.values],
        "majorizes": [bool(m) for m in ds.majorizes.values],
        "min_margin": [_num(m) for m in ds.min_margin.values],
        "learned_all": [bool(m) for m in ds.learned_all.values],
        "verdict": [str(v) for v in ds.verdict.values],
    }  # fmt: skip
    if "entropy_gap_truncated" in ds:
        out["entropy_gap_truncated"] = [_num(g) for g in ds.entropy_gap_truncated.values]
    if xcheck:
        out["xcheck_quad"] = float(ds.xcheck_quad.max())
        out["xcheck_ode"] = float(ds.xcheck_ode.max())
    return out


def main() -> int:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    cases = []
    for dim in (6, 60, 600):
        for family in ("linear", "geometric", "power"):
            for dyn, form, c in MODELS:
                cases.append(case(family, dim, dyn, form, c, xcheck=True))
                print(family, dim, dyn, form, c, cases[-1].get("xcheck_ode"), flush=True)
    OUT.write_text(json.dumps({"commit": commit, "cases": cases}, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
