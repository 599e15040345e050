"""``python -m sims.sosd_toy``: the command of seed 002's Section 4 toy, kept where it was.

The toy lives in :mod:`sims.sosd.toy`; this entry only runs its ``main``, so the README command
did not change with the move (issue 39).
"""

if __name__ == "__main__":
    import sys

    from sims.sosd.toy import main

    sys.exit(main())
