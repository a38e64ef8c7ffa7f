"""Targets: the CLI's paths expanded into files by the job's discovery rules, each paired with
its destination: in place, the --output file, or its mirror below the --output directory.
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, replace
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from pageindex.errors import OutputRefusedError
from pageindex.io.discovery import Discovery, InputFile, discover, tidy_local
from pageindex.io.storage import resolve
from pageindex.job.spark import check_modes

GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Target:
    """One input file and where its indexed version goes (None: the file itself, in place)."""

    file: InputFile
    output: str | None
    # Given as a path of its own, not found in a directory or by a glob: meant to be Parquet,
    # so a file that is not fails instead of being skipped.
    named: bool


def legacy_destination(paths: list[str], output: str | None, storage_options: dict[str, Any]) -> str | None:
    """The second path when the call looks like the old `retrofit SRC DST`: exactly two paths,
    no --output, and the second does not exist. Read as two inputs it could only fail; read as
    before it would write a file the new syntax never writes, so the caller refuses it."""
    if output is not None or len(paths) != 2 or _is_glob(paths[1]):
        return None
    fs, path = resolve(paths[1], storage_options=storage_options)
    return None if fs.exists(path) else paths[1]


def expand(paths: list[str], storage_options: dict[str, Any], follow_links: bool = False) -> list[Target]:
    """The files below `paths` (files, directories, globs; local or remote), in path order,
    with no destination; local links leading outside an input followed only with `follow_links`."""
    return _targets(discover(paths, storage_options, follow_links=follow_links), paths, storage_options)


def _targets(found: Discovery, paths: list[str], storage_options: dict[str, Any]) -> list[Target]:
    named = set()
    for path in paths:
        fs, inner = resolve(path, storage_options=storage_options)
        if not _is_glob(path) and not fs.isdir(inner):
            named.add(tidy_local(inner) if isinstance(fs, LocalFileSystem) else inner)
    return [Target(f, None, resolve(f.url, storage_options=storage_options)[1] in named) for f in found.files]


def plan(paths: list[str], output: str | None, overwrite: bool, storage_options: dict[str, Any],
         follow_links: bool = False) -> list[Target]:
    """Every input file with its destination. Raises UsageError (in place on a table format,
    two files mirrored to one path) or OutputRefusedError before anything is written. Local
    links leading outside an input's real path are skipped unless `follow_links`."""
    found = discover(paths, storage_options, follow_links=follow_links)
    check_modes(found, in_place=output is None)
    targets = _targets(found, paths, storage_options)
    if output is None:
        return targets
    # One file named alone: --output names the output file (unless it ends in "/").
    if len(paths) == 1 and len(targets) == 1 and targets[0].named and not output.endswith("/"):
        targets = [replace(targets[0], output=output)]
        existing = _kinds(output, storage_options, below=False)
    else:
        _refuse_file_as_directory(output, storage_options)
        root = output.rstrip("/")
        targets = [replace(t, output=posixpath.join(root, t.file.relative)) for t in targets]
        existing = _kinds(root, storage_options, below=True)
    _refuse_clobbering(targets, existing, overwrite, storage_options)
    return targets


def _is_glob(path: str) -> bool:
    return any(c in path for c in GLOB_CHARS)


def _refuse_file_as_directory(output: str, storage_options: dict[str, Any]) -> None:
    fs, path = resolve(output, storage_options=storage_options)
    if fs.isfile(path):
        raise OutputRefusedError("is a file; with several inputs or a directory, --output names "
                                 "the directory to mirror them into", path=output)


def _refuse_clobbering(targets: list[Target], existing: dict[str, str], overwrite: bool,
                       storage_options: dict[str, Any]) -> None:
    """Refuse a destination that is one of the inputs, a directory, or (without `overwrite`) an
    existing file."""
    inputs = {_identity(t.file.url, storage_options) for t in targets}
    for t in targets:
        if _identity(t.output, storage_options) in inputs:
            raise OutputRefusedError(f"is one of the inputs ({t.file.url}); to index a file in "
                                     "place, leave out --output", path=t.output)
        kind = existing.get(resolve(t.output, storage_options=storage_options)[1])
        if kind == "directory":
            raise OutputRefusedError(
                "is a directory; with one input file --output names the file to write (end it "
                "with / to write into the directory)", path=t.output)
        if kind is not None and not overwrite:
            raise OutputRefusedError("exists; pass --overwrite to replace it", path=t.output)


def _kinds(url: str, storage_options: dict[str, Any], below: bool) -> dict[str, str]:
    """Path -> "file" | "directory" of what exists at `url` (and, if `below`, under it): one
    listing of the output tree, not a request per output file (on S3 each is a round trip)."""
    fs, path = resolve(url, storage_options=storage_options)
    try:
        entries = fs.find(path, withdirs=True, detail=True) if below else {path: fs.info(path)}
    except FileNotFoundError:
        return {}
    return {name: info.get("type", "file") for name, info in entries.items()}


def _identity(url: str, storage_options: dict[str, Any]) -> str:
    """What names one stored file: a local path with its symlinks resolved, or the URL."""
    fs, path = resolve(url, storage_options=storage_options)
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return os.path.realpath(path) if "file" in protocols else f"{protocols[0]}://{path}"
