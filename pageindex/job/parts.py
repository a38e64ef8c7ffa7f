"""Part files: the job's report and state as folders of part files, as Spark writes a table; each
task writes its own, named by the run and the task, and every engine reads the folder as one table.

A part's name sorts by its run: `part-<run>-<kind><index>.<ext>`, run = UTC start time and a random tag.
"""
from __future__ import annotations

import datetime
import os
import posixpath
import re
import uuid
from dataclasses import dataclass
from typing import Any

from pageindex.errors import UsageError
from pageindex.io.storage import resolve, storage_errors
from pageindex.job.preflight import check_report_path

PREFIX = "part-"
_PART = re.compile(r"^part-(?P<run>\d{8}T\d{6}Z-[0-9a-f]{8})-(?P<kind>[a-z]+)(?P<index>\d+)\.(?P<ext>parquet|jsonl)$")
# The run of a state that was one file before it became a folder: older than any run.
OLDEST_RUN = "00000000T000000Z-00000000"
JSON_SUFFIXES = (".jsonl", ".json")


def new_run() -> str:
    """A run's tag: its start in UTC (parts sort by it) and 8 random hex digits."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def extension(url: str) -> str:
    """A report folder's parts are JSON lines when its name ends .jsonl or .json, else Parquet
    (a state's are always Parquet)."""
    return "jsonl" if url.rstrip("/").endswith(JSON_SUFFIXES) else "parquet"


def part_url(folder: str, run: str, kind: str, index: int, ext: str = "parquet") -> str:
    """The URL of one part: `kind` names what wrote it (task: a processing task; kept: the
    listing's unchanged files and the state's entries carried over)."""
    return posixpath.join(folder.rstrip("/"), f"{PREFIX}{run}-{kind}{index:05d}.{ext}")


@dataclass(frozen=True)
class Part:
    """One part file found in a folder."""

    url: str
    run: str
    kind: str


def list_parts(url: str, storage_options: dict[str, Any]) -> list[Part]:
    """The part files in the folder at `url`, oldest run first (none: no folder there)."""
    with storage_errors("list the parts", url):
        fs, path = resolve(url, storage_options=storage_options)
        if not fs.isdir(path):
            return []
        names = [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
    parts = []
    for name in names:
        match = _PART.match(name)
        if match:
            parts.append(Part(posixpath.join(url.rstrip("/"), name), match["run"], match["kind"]))
    return sorted(parts, key=lambda p: (p.run, p.url))


def as_part(url: str, storage_options: dict[str, Any]) -> list[Part]:
    """A file at `url` (a state kept as one file) as the oldest run's one part; none there: []."""
    with storage_errors("read the state", url):
        fs, path = resolve(url, storage_options=storage_options)
        if not fs.exists(path) or fs.isdir(path):
            return []
    return [Part(url, OLDEST_RUN, "kept")]


def remove(urls: list[str], storage_options: dict[str, Any]) -> None:
    """Delete these files (a part another run already removed is no error)."""
    if not urls:
        return
    with storage_errors("remove old parts", urls[0]):
        fs, _ = resolve(urls[0], storage_options=storage_options)
        for url in urls:
            _, path = resolve(url, storage_options=storage_options)
            if fs.exists(path):
                fs.rm_file(path)


def make_folder(url: str, storage_options: dict[str, Any]) -> bool:
    """Make `url` a folder for parts; a file there (a report of an earlier version) is removed
    first. Returns whether a file was removed."""
    with storage_errors("make the folder", url):
        fs, path = resolve(url, storage_options=storage_options)
        removed = fs.exists(path) and not fs.isdir(path)
        if removed:
            fs.rm_file(path)
        if "file" in ((fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)):
            os.makedirs(path, exist_ok=True)
        return removed


def fold_file(url: str, storage_options: dict[str, Any], part: str) -> None:
    """A file at `url` (a state kept as one file) moved into a folder there, as the part `part`."""
    with storage_errors("make the folder", url):
        fs, path = resolve(url, storage_options=storage_options)
        if not fs.exists(path) or fs.isdir(path):
            return
        data = fs.cat_file(path)
        fs.rm_file(path)
        _, target = resolve(part, storage_options=storage_options)
        fs.makedirs(posixpath.dirname(target), exist_ok=True)
        fs.pipe_file(target, data)


def check_folder_path(url: str | None, storage_options: dict[str, Any], what: str) -> None:
    """Raises UsageError when the job cannot keep `what` (the report, the state) as a folder of
    parts at `url`: a directory there that holds anything but part files (an input, say), or a
    folder (or a path for a new one) preflight.check_report_path's probe cannot write in."""
    if url is None:
        return
    try:
        fs, path = resolve(url, storage_options=storage_options)
    except (ValueError, ImportError) as err:
        raise UsageError(f"{what} cannot be written here: {err}", path=url) from None
    with storage_errors(f"check {what}", url):
        if fs.isdir(path):
            strays = [p for p in fs.ls(path, detail=False)
                      if not _PART.match(posixpath.basename(p.rstrip("/")))
                      and not posixpath.basename(p.rstrip("/")).startswith((".", "_"))]
            if strays:
                raise UsageError(f"{what} cannot be written here: a directory that holds other files "
                                 f"than part files ({posixpath.basename(strays[0].rstrip('/'))})", path=url)
            # The parts go inside it: the probe is written there (a read-only mount holding an
            # earlier run's folder is found now, not after the files changed).
            url = url.rstrip("/") + "/part-probe"
    check_report_path(url, storage_options, what)
