"""Whole files: a file written so that readers see all of it or none, never a part (a report's
part file, a state, a summary, a copy), whatever stops the writer midway.

On a local disk it is written under a hidden temporary sibling, synced and renamed over its path;
an object store gets it in one upload, which makes the object appear whole.
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import IO, Any, Iterator

from fsspec.implementations.local import LocalFileSystem

from pageindex.io.commit import temp_name


@contextlib.contextmanager
def whole_file(fs: Any, path: str, text: bool = False) -> Iterator[IO[Any]]:
    """A file to write to `path` on `fs` (binary, or text in UTF-8): it appears there when the
    block ends, whole; after an error nothing appears and the old file, if any, stays."""
    if not isinstance(fs, LocalFileSystem):
        # The bytes are held until the block ends: an upload begun here would be completed by
        # fsspec's close() even after an error, leaving part of the file behind.
        buffer: IO[Any] = io.StringIO() if text else io.BytesIO()
        yield buffer
        data = buffer.getvalue()
        fs.pipe_file(path, data.encode() if text else data)
        return
    tmp = temp_name(path)
    try:
        with open(tmp, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
