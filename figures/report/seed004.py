"""Claims of seed004 (filled below)."""

from __future__ import annotations
