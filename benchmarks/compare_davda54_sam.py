"""Compare ``sims.optim.SAM`` (SAM and ASAM) with davda54/sam step for step on a small network.

davda54/sam (https://github.com/davda54/sam) is the reference PyTorch SAM most users come from;
its ``sam.py`` is not part of this repository: pass the path of a copy you have
(``git clone https://github.com/davda54/sam`` and ``--sam-py sam/sam.py``). For each base
(SGD with momentum and weight decay, AdamW), each of SAM (``rho=0.05``) and ASAM
(``adaptive=True``, ``rho=2.0`` as davda54/sam's README uses), it trains the same float64 MLP for
``--steps`` steps from the same start with

* davda54's two-step API against ours (``first_step``/``second_step``),
* davda54's closure loop (``loss.backward(); opt.step(closure)``, the closure calling backward)
  run unchanged on ``sims.optim.SAM`` (the davda54-style closure is detected),
* davda54's closure loop against our own closure protocol (forward only, ``(loss, logits)``),

and prints the largest parameter difference of each pair. davda54/sam adds ``1e-12`` to the
gradient norm, so differences of about ``1e-12`` relative are expected in float64.

Usage: ``python benchmarks/compare_davda54_sam.py --sam-py /path/to/davda54/sam.py [--steps 20]``.
The line ``max |Δθ| = <x> over <n> runs`` sums up; exit status 1 when it exceeds ``1e-9``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's packages, also when run as a script
from sims.runtime.cli import ArgumentParser, positive_int  # noqa: E402 - this checkout's

#: davda54/sam divides by ‖g‖ + 1e-12: a 1e-12-relative change per step, ~1e-11 after 20 steps.
TOL = 1e-9


def _load_davda54(path: Path):
    spec = importlib.util.spec_from_file_location("davda54_sam", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"--sam-py {str(path)!r} is not a Python file.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "SAM"):
        raise ValueError(f"--sam-py {str(path)!r} defines no SAM class; is it davda54's sam.py?")
    return module.SAM


def _run(opt_cls, base, kw, api, steps):
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.Tanh(), torch.nn.LayerNorm(32),
                              torch.nn.Linear(32, 4)).double()  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 10, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (64,), generator=gen)
    opt = opt_cls(net.parameters(), base, **kw)

    def loss():
        return torch.nn.functional.cross_entropy(net(x), y)

    for _ in range(steps):
        if api == "two_step":
            loss().backward()
            opt.first_step(zero_grad=True)
            loss().backward()
            opt.second_step(zero_grad=True)
        elif api == "davda54_closure":

            def closure():
                value = loss()
                value.backward()
                return value

            loss().backward()
            opt.step(closure)
            opt.zero_grad()
        else:  # ours: the closure only runs the forward pass

            def closure():
                z = net(x)
                return torch.nn.functional.cross_entropy(z, y), z

            opt.step(closure)
    return torch.cat([p.detach().flatten() for p in net.parameters()])


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sam-py", type=Path, required=True,
                   help="path of davda54/sam's sam.py (not shipped here)")  # fmt: skip
    p.add_argument("--steps", type=positive_int, default=20, help="steps per run (default 20)")
    a = p.parse_args(argv)
    if a.steps < 1:
        p.error("--steps must be >= 1")
    if not a.sam_py.is_file():
        p.exit(2, f"error: --sam-py {str(a.sam_py)!r} does not exist; clone davda54/sam.\n")
    import torch

    from sims.optim import SAM

    try:
        Davda54 = _load_davda54(a.sam_py)
    except (ValueError, SyntaxError, ImportError) as exc:
        p.exit(2, f"error: {exc}\n")
    bases = {
        "SGD": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=5e-4)),
        "AdamW": (torch.optim.AdamW, dict(lr=1e-3, weight_decay=0.01)),
    }
    methods = {"SAM": dict(rho=0.05, adaptive=False), "ASAM": dict(rho=2.0, adaptive=True)}
    pairs = [("two_step", "two_step"), ("davda54_closure", "davda54_closure"),
             ("davda54_closure", "ours")]  # fmt: skip
    worst, n = 0.0, 0
    print(f"{'base':>6} {'method':>6} {'davda54 API':>16} {'sims.optim API':>16} {'max |Δθ|':>10}")
    for bname, (base, base_kw) in bases.items():
        for mname, mkw in methods.items():
            kw = {**mkw, **base_kw}
            for theirs, ours in pairs:
                ref = _run(Davda54, base, kw, theirs, a.steps)
                got = _run(SAM, base, kw, ours, a.steps)
                moved = float((ref - _run(SAM, base, kw, "ours", 0)).abs().max())
                diff = float((ref - got).abs().max())
                worst, n = max(worst, diff), n + 1
                print(f"{bname:>6} {mname:>6} {theirs:>16} {ours:>16} {diff:10.2e}"
                      f"  (parameters moved by {moved:.2e})")  # fmt: skip
    print(f"max |Δθ| = {worst:.2e} over {n} runs of {a.steps} steps (float64)")
    if worst > TOL:  # the verdict follows the comparison: a mismatch is a failure
        print(f"MISMATCH: above the tolerance {TOL:.0e} (davda54's 1e-12 norm offset)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
