"""Replacements: an indexed copy standing in for one logged data file, and a commit's outcome.

Shared by the formats' committers so the job's batch loop treats every table alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pageindex.errors import StorageError

COMMIT_ATTEMPTS = 20


@dataclass(frozen=True)
class Replacement:
    """An indexed copy (`new_path`, `new_size` bytes) written for the current file `old`
    (the format's own record of it: a Delta add action, an Iceberg DataFile entry)."""

    old: Any
    new_path: str
    new_size: int


@dataclass(frozen=True)
class CommitResult:
    version: int | None  # the table version or snapshot id committed; None: nothing left to commit
    replaced: tuple[str, ...]
    changed: dict[str, str] = field(default_factory=dict)  # old path -> why it was left out
    attempts: int = 0


def why_changed(now: Any | None, planned: Any, size_record: str,
                blocked_by: Callable[[Any], str | None]) -> str | None:
    """Why a planned replacement no longer applies to the current snapshot, if it does not: the
    file left it, its size as the `size_record` ("logged", "recorded") says changed, or
    `blocked_by(now)` gives why a copy cannot stand in for it (a record's `size` is compared)."""
    if now is None:
        return "removed from the table since it was planned"
    if now.size != planned.size:
        return f"its {size_record} size changed from {planned.size} to {now.size}"
    return blocked_by(now)


def drop_changed(pending: dict[str, Replacement], current: dict[str, Any], changed: dict[str, str],
                 size_record: str, blocked_by: Callable[[Any], str | None]) -> None:
    """Move each pending replacement whose file `current` (path -> the format's record) no
    longer holds as planned into `changed`, with the reason (see why_changed)."""
    for path in list(pending):
        reason = why_changed(current.get(path), pending[path].old, size_record, blocked_by)
        if reason:
            changed[path] = reason
            del pending[path]


def gave_up(table: str) -> StorageError:
    return StorageError(f"gave up after {COMMIT_ATTEMPTS} commit attempts: the table changes "
                        "faster than a batch commits (try a smaller --commit-batch-files)", path=table)
