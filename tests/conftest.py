"""Test harness (style rule 7): deterministic, offline, CPU-only, strict.

* JAX runs in float64 with rank-promotion errors (when JAX is installed).
* numpy's and torch's global RNGs are reseeded before every test.
* Hypothesis uses a derandomized ``ci`` profile (set ``HYPOTHESIS_PROFILE=dev`` for more examples).
"""

from __future__ import annotations

import os
import random
import signal

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

#: pytester: tests of this harness run pytest on a small generated suite (tests/test_harness.py)
pytest_plugins = ["pytester"]

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

try:  # JAX is an optional extra; configure it before any test imports it.
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_numpy_rank_promotion", "raise")
    jax.config.update("jax_platforms", "cpu")
except ImportError:  # pragma: no cover - depends on the installed extras
    pass

# Ctrl-C tests send SIGINT to the commands they start. A suite started in the background by a
# non-interactive shell (`pytest ... &`) inherits SIGINT ignored, and so would every command it
# starts (an ignored signal survives exec): those tests would then time out for a reason that is
# not the code's. Restore the default so the children start as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Matplotlib must never try to open a window in tests.
os.environ.setdefault("MPLBACKEND", "Agg")
# Sweeps run in-process by default: the spawn pool's start-up (a fresh interpreter importing torch
# or JAX per worker) cost most of the quick figures' test time on 2 cores. The pool path itself is
# tested with explicit ``workers=2`` in tests/sims/test_parallel.py.
os.environ.setdefault("SBT_WORKERS", "1")


@pytest.fixture(autouse=True)
def _reseed() -> None:
    random.seed(0)
    np.random.seed(0)
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:  # pragma: no cover
        pass


@pytest.fixture
def tmp_results(tmp_path):
    """A scratch results folder."""
    d = tmp_path / "results"
    d.mkdir()
    return d


# --------------------------------------------------------------------------- parallel runs
# The suite runs on every core (pytest-xdist, `-n auto --dist loadgroup` in pyproject.toml).
# A worker computes its own module- and session-scoped fixtures, so tests that share an
# expensive one are sent to the same worker as a group (an `xdist_group` mark):
# * every test that judges the committed summaries (`all_rows`, `findings_markdown`, the page):
#   one judging (about 24 s on an idle core) per run instead of one per worker, cached below;
# * every test reading the theory claims through the `claim_run` cache (all claims: ~33 s);
# * the tests of one module that share a module-scoped fixture (a trained model, a run).
_FINDINGS_WORDS = ("all_rows(", "findings_markdown(", "build_report(")
#: Words of a test that reads claims through the session's claim cache (tests/theory/_theory_runs).
_CLAIM_WORDS = ("run_cached(", "_result(")


def _fixture_scopes(item) -> dict:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return {}
    out = {}
    for name, defs in info.name2fixturedefs.items():
        if defs:
            out[name] = (defs[-1].scope, defs[-1].baseid)
    return out


#: Words in a test's source that make it `slow` (out of the fast tier) without a mark: a Python
#: subprocess (an interpreter importing numpy/torch/JAX: seconds each), a training or pipeline
#: run, a sweep on a pool or a cluster.
_SLOW_WORDS = ("subprocess", "Popen", "run_core_only", "run_all(", "run_demo(", '"demo"',
               "pretrain_from_scratch(", "run_confirmation(", "dask-local", "LocalCluster",
               "run_campaign(", "--rehearse")


#: A test whose measured setup + call + teardown took at least this long (tests/durations.json,
#: written by ``python benchmarks/bench_suite.py --write`` on 2 idle cores) is `slow`.
SLOW_SECONDS = 0.5


def _measured() -> dict[str, float]:
    """``{node id: seconds}`` of the last measured whole-suite run (empty if none is committed)."""
    import json
    from pathlib import Path

    path = Path(__file__).with_name("durations.json")
    try:
        return json.loads(path.read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return {}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Group tests that share an expensive fixture (xdist) and mark the slow ones.

    `slow` (left out by `pytest -m "not slow"`, the fast tier) is set by hand on a test, or
    here on every test that judges the committed summaries, reads the theory claims through
    the shared cache (together: every claim), shares a module-scoped run, whose source
    names a subprocess or a training/pipeline run (:data:`_SLOW_WORDS`), or that took
    :data:`SLOW_SECONDS` or more in the last measured run (``tests/durations.json``).
    """
    import inspect

    measured = _measured()
    for item in items:
        scopes = _fixture_scopes(item)
        try:
            source = inspect.getsource(item.function)
        except (OSError, TypeError, AttributeError):
            source = ""
        if "page" in scopes and item.module.__name__.endswith("test_report_page") or any(
                w in source for w in _FINDINGS_WORDS):
            group = "findings-rows"
        elif "claim_run" in scopes or any(w in source for w in _CLAIM_WORDS):
            group = "theory-claims"
        else:
            shared = [n for n, (scope, _) in scopes.items()
                      if scope == "module" and not n.startswith("_")]
            group = f"module:{item.module.__name__}" if shared else None
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
        if (group or any(w in source for w in _SLOW_WORDS)
                or measured.get(item.nodeid, 0.0) >= SLOW_SECONDS):
            if not item.get_closest_marker("slow"):
                item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _judge_the_summaries_once():
    """Cache ``figures.report.claims.all_rows`` for the session (a deep copy per call).

    Keyed by the numbers (their JSON) and by the state of the ``figures.report`` modules (the
    identity of every attribute, the value of every number), so a test that monkeypatches a
    rule or a threshold gets a fresh judging, never a stale one.
    """
    import copy
    import hashlib
    import json
    import sys

    try:
        from figures import report
        from figures.report import claims
    except ImportError:  # pragma: no cover - depends on the installed extras
        yield
        return
    real = claims.all_rows
    cache: dict = {}

    def value(v):
        return v if isinstance(v, int | float | str | bool) else id(v)

    def state() -> dict:
        """Every number and the identity of every callable of the figures.report modules."""
        return {(name, k): value(v)
                for name, mod in list(sys.modules.items())
                if name.startswith("figures.report") and mod is not None
                for k, v in vars(mod).items()
                if isinstance(v, int | float | str | bool) or callable(v)}

    def unchanged(snapshot: dict) -> bool:
        missing = object()
        return all(value(getattr(sys.modules.get(name), k, missing)) == v
                   for (name, k), v in snapshot.items())

    def cached(numbers, *args, **kwargs):
        try:
            text = json.dumps(numbers, sort_keys=True)
        except (TypeError, ValueError):
            return real(numbers, *args, **kwargs)
        head = (hashlib.sha256(text.encode()).hexdigest(), repr(args),
                repr(sorted(kwargs.items())))
        entries = cache.setdefault(head, [])
        for snapshot, rows in entries:
            if unchanged(snapshot):  # modules imported since then do not matter
                return copy.deepcopy(rows)
        rows = real(numbers, *args, **kwargs)
        entries.append((state(), rows))  # taken after: the modules the judging imported too
        return copy.deepcopy(rows)

    mp = pytest.MonkeyPatch()
    mp.setattr(claims, "all_rows", cached)
    mp.setattr(report, "all_rows", cached)
    yield
    mp.undo()
