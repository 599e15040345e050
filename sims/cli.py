"""Command-line helpers shared by every ``python -m ...`` entry point of the package.

:class:`ArgumentParser` is :class:`argparse.ArgumentParser` with the project's error contract:
bad input prints **one line** (``prog: error: ... (see --help)``) on stderr and exits with status
2, before any work. Use it for every CLI so users see the same behaviour everywhere.

Examples:
    >>> p = ArgumentParser(prog="demo")
    >>> _ = p.add_argument("--n", type=int, default=1, help="a count")
    >>> p.parse_args(["--n", "3"]).n
    3
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["ArgumentParser", "UsageError", "fail", "run_cli"]


class UsageError(ValueError):
    """Bad user input found by library code (an environment variable, a config file).

    A ``ValueError``, so library callers can catch it as one; :func:`run_cli` prints it as one
    line and exits with status 2.
    """


class ArgumentParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see --help)`` and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def fail(message: str, *, prog: str | None = None, status: int = 2) -> NoReturn:
    """Print one error line (``prog: error: message``) on stderr and exit with ``status``."""
    head = f"{prog}: error: " if prog else "error: "
    print(head + message, file=sys.stderr)
    raise SystemExit(status)


def run_cli(main, argv=None, *, prog: str) -> int:
    """Call ``main(argv)`` with the project's exit contract for user errors and Ctrl-C.

    :class:`UsageError` and :class:`sims.extras.MissingExtraError` become one line and status 2;
    ``KeyboardInterrupt`` becomes one line (its message, e.g. what a sweep saved and how to
    resume) and status 130. Anything else propagates (a bug deserves its traceback).
    """
    from .extras import MissingExtraError

    try:
        return main(argv)
    except (UsageError, MissingExtraError) as exc:
        fail(str(exc), prog=prog)
    except KeyboardInterrupt as exc:
        fail(str(exc) or "interrupted", prog=prog, status=130)
