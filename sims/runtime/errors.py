"""The package's user-error type and its registry of environment checks: the base of ``sims``.

This module imports nothing of the package, so every other module (``sims.runtime.io``,
``sims.runtime.executors``, ``sims.runtime.parallel``, ``sims.runtime.cli``, the experiments) can
depend on it without an import circle (``tests/test_layers.py`` fails on any circle in ``sims/``).

* :class:`UsageError`: bad user input found by library code, printed by the CLIs as one line
  with exit status 2 (:func:`sims.runtime.cli.run_cli`).
* :func:`register_env_check`: each environment variable of the package is checked by a function
  of the module that owns it (``SBT_WORKERS`` by :mod:`sims.runtime.executors`, ``MARKOV_SCALE`` by
  :mod:`sims.markov.experiments`), registered here by name and imported only when the variable is
  set, so the CLI layer imports no experiment module (:func:`sims.runtime.cli.check_env` runs them).

Examples:
    >>> isinstance(UsageError("x"), ValueError)
    True
    >>> "SBT_WORKERS" in registered_env_checks()
    True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

__all__ = ["UsageError", "env_checks", "register_env_check", "registered_env_checks"]


class UsageError(ValueError):
    """Bad user input found by library code (an environment variable, a config or saved file).

    A ``ValueError``, so library callers can catch it as one; :func:`sims.runtime.cli.run_cli`
    prints it as one line and exits with status 2.
    """


#: variable -> its check: a callable, or ``"module:function"`` imported when the variable is set.
_ENV_CHECKS: dict[str, Callable[[], object] | str] = {}


def register_env_check(name: str, check: Callable[[], object] | str) -> None:
    """Register the check of environment variable ``name`` (one per variable; the last wins).

    Args:
        name: the variable, e.g. ``"MARKOV_SCALE"``.
        check: a function of no argument returning the parsed value and raising ``ValueError``
            naming the variable, its value and the fix; or ``"module:function"`` naming it, so
            the owning module is imported only when the variable is set.
    """
    if not (callable(check) or (isinstance(check, str) and check.count(":") == 1)):
        raise TypeError(f"`check` must be a callable or 'module:function'; got {check!r}.")
    _ENV_CHECKS[name] = check


def registered_env_checks() -> dict[str, Callable[[], object] | str]:
    """A copy of the registry: variable -> check (callable or ``"module:function"``)."""
    return dict(_ENV_CHECKS)


def env_checks(names: set[str] | None = None) -> list[tuple[str, Callable[[], object]]]:
    """``(variable, check)`` of each registered variable (of ``names`` only, when given).

    Checks named ``"module:function"`` are imported here, so call it with the set variables.
    """
    out = []
    for name, check in _ENV_CHECKS.items():
        if names is not None and name not in names:
            continue
        if isinstance(check, str):
            module, _, attr = check.partition(":")
            check = getattr(importlib.import_module(module), attr)
        out.append((name, check))
    return out


# The package's variables, each checked by the module it concerns (imported only when set).
register_env_check("SBT_WORKERS", "sims.runtime.executors:check_workers_env")
register_env_check("SBT_EXECUTOR", "sims.runtime.executors:check_executor_setting")
register_env_check("MARKOV_SCALE", "sims.markov.experiments:check_scale_env")
