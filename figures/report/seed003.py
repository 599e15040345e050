"""Claims of seed003 (filled below)."""

from __future__ import annotations
