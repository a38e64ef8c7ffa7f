"""Replacements: an indexed copy standing in for one logged data file, and a commit's outcome.

Shared by the formats' committers so the job's batch loop treats every table alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
