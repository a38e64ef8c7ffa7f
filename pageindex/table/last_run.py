"""A table's last run: the Delta version or Iceberg snapshot a run that settled every file planned
from, kept below the table's root, and the data files a Delta log added since (a rerun opens only those).

`<root>/_pageindex/last-run.json`: a folder whose name starts with `_`, which readers and VACUUM leave
alone. For Iceberg the root is the table location: no table metadata is written, so recording needs no
commit, cannot conflict with the table's writers, and covers a run that committed nothing (a
snapshot property of pageindex's own commit could not), through the storage the copies are written to.
"""
from __future__ import annotations

import json
import posixpath
from typing import Any

from pageindex.io.storage import resolve

FOLDER = "_pageindex"
NAME = "last-run.json"
LOG_DIR = "_delta_log"


def _url(root: str) -> str:
    return posixpath.join(root.rstrip("/"), FOLDER, NAME)


def read(root: str, storage_options: dict[str, Any], options: str) -> int | None:
    """The version (Delta) or snapshot id (Iceberg) the last settled run under these index `options`
    planned from; None when there is none, it was made under other options, or it cannot be read
    (then every file is opened)."""
    try:
        fs, path = resolve(_url(root), None, storage_options)
        if not fs.exists(path):
            return None
        document = json.loads(fs.cat_file(path))
        version = document.get("version")
        return int(version) if document.get("options") == options and isinstance(version, int) else None
    except (OSError, ValueError, AttributeError):
        return None


def write(root: str, storage_options: dict[str, Any], version: int, options: str) -> None:
    """Record that a run under `options` planned from `version` and settled every file it opened
    (one object, replaced whole: a concurrent run's record, the last one written, is as true)."""
    fs, path = resolve(_url(root), None, storage_options)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    fs.pipe_file(path, (json.dumps({"version": version, "options": options}, sort_keys=True) + "\n").encode())


def added_since(root: str, storage_options: dict[str, Any], since: int, until: int) -> set[str] | None:
    """The log paths of the data files the commits after `since` up to `until` added; None when
    one of those commits cannot be read (a log cleaned up since: every file is opened)."""
    if since > until:  # a table recreated or restored below the version recorded
        return None
    fs, root_path = resolve(root, None, storage_options)
    log = posixpath.join(root_path.rstrip("/"), LOG_DIR)
    added: set[str] = set()
    for version in range(since + 1, until + 1):
        try:
            with fs.open(posixpath.join(log, f"{version:020d}.json"), "rb") as f:
                lines = f.read().decode().splitlines()
        except FileNotFoundError:
            return None
        for line in lines:
            if line.strip():
                action = json.loads(line)
                if "add" in action:
                    added.add(action["add"]["path"])
    return added
