"""Claims of beyond (filled below)."""

from __future__ import annotations
