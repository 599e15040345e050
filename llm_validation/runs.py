"""Stage folders of a run: config fingerprint, status, and a refusal to mix incompatible runs.

Each stage (``proxy``, ``selection/<name>``, ``finetune/<setting>``, ...) writes into its own
folder a ``stage.json`` with the stage's config, its hash and a status (``running``,
``success``). Rerunning a stage with the same config resumes (or skips it when finished);
rerunning it with a different config is refused before anything is written, so a resume can
never mix two configurations or overwrite a finished result. A damaged ``stage.json`` is
refused by name for the same reason. :func:`leave_no_empty_folders` removes the folders a
failed or interrupted run created and left empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sims.runtime.io import provenance, read_json, to_jsonable, write_json

__all__ = ["IncompatibleRunError", "Stage", "leave_no_empty_folders"]


class IncompatibleRunError(ValueError):
    """A stage folder holds results made with a different config."""


def _hash(config: Mapping[str, Any]) -> str:
    text = json.dumps(to_jsonable(dict(config)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Stage:
    """One stage folder.

    Args:
        folder: the stage's folder.
        name: the stage's name (for messages).
        config: everything the stage's result depends on (JSON-ready mapping).
    """

    def __init__(self, folder: str | os.PathLike, name: str, config: Mapping[str, Any]):
        self.folder = Path(folder)
        self.name = name
        self.config = dict(config)
        self.hash = _hash(self.config)
        self.meta_path = self.folder / "stage.json"

    def check(self) -> str:
        """``"new"``, ``"resume"`` or ``"done"``; raises if the folder has another config.

        Raises:
            IncompatibleRunError: naming the folder, both hashes and the keys that differ.
        """
        if not self.meta_path.exists():
            return "new"
        old = self._read()
        if old.get("config_hash") != self.hash:
            before = old.get("config", {})
            now = to_jsonable(self.config)
            diff = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
            raise IncompatibleRunError(
                f"{self.folder} holds a {self.name} run made with another config (hash "
                f"{old.get('config_hash')} vs {self.hash}; differing keys: {diff}); nothing was "
                "overwritten. Use another run_dir, or delete that folder to start over."
            )
        return "done" if old.get("status") == "success" else "resume"

    def start(self) -> str:
        """Check, then mark the stage running (keeps a finished stage's marker)."""
        state = self.check()
        if state != "done":
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json(
                self.meta_path,
                {"stage": self.name, "config_hash": self.hash, "config": self.config},
                meta=provenance(self.config, status="running"),
            )
        return state

    def finish(self, summary: Mapping[str, Any] | None = None) -> None:
        """Mark the stage finished, with a summary."""
        write_json(
            self.meta_path,
            {"stage": self.name, "config_hash": self.hash, "config": self.config,
             "status": "success", "summary": dict(summary or {})},
            meta=provenance(self.config, status="success"),
        )  # fmt: skip

    def summary(self) -> dict:
        """The summary of a finished stage."""
        return self._read().get("summary", {})

    def _read(self) -> dict:
        """The stage file; a damaged one is refused by name (it guards the folder's config)."""
        try:
            old = read_json(self.meta_path)
            if not isinstance(old, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            raise IncompatibleRunError(
                f"{self.meta_path} is unreadable ({type(exc).__name__}: {exc}); it records which "
                f"config made {self.folder}, so nothing was resumed or overwritten. Delete that "
                "folder to recompute the stage."
            ) from None
        return old


@contextlib.contextmanager
def leave_no_empty_folders(root: str | os.PathLike) -> Iterator[None]:
    """On failure or Ctrl-C, remove the new folders under (and up to) ``root`` left empty.

    Folders with content (checkpoints, finished stages) are kept.
    """
    root = Path(root).expanduser().absolute()
    anchor = next(p for p in (root, *root.parents) if p.exists())
    before = {Path(d) for d, _, _ in os.walk(anchor)} if anchor == root else set()
    try:
        yield
    except BaseException:
        created = {Path(d) for d, _, _ in os.walk(root)} - before if root.exists() else set()
        chain = [p for p in (root, *root.parents) if p != anchor and anchor in p.parents]
        for d in sorted(created | set(chain), key=lambda q: len(q.parts), reverse=True):
            with contextlib.suppress(OSError):
                d.rmdir()  # only succeeds on an empty folder
        raise
