"""Open a file for a run: its Source and validated footer, now or ahead on a background thread.

On an object store opening costs a HEAD and the footer's tail read, each a request's latency.
"""
from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from typing import Any

from pageindex.format.footer import DEFAULT_MAX_PAGE_BYTES, Footer, read_footer
from pageindex.io.storage import Source, open_source


@dataclass(frozen=True)
class OpenedFile:
    """A file's Source, holding its footer's tail on an object store, and its footer."""

    source: Source
    footer: Footer


def open_file(path: str, filesystem: Any = None, max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> OpenedFile:
    """Open `path` and read its footer, which carries the largest page the run reads of it
    (`max_page_bytes`); raises what open_source and read_footer raise."""
    source = open_source(path, filesystem)
    try:
        footer = read_footer(source)
        return OpenedFile(source, footer if max_page_bytes == footer.max_page_bytes
                          else replace(footer, max_page_bytes=max_page_bytes))
    except BaseException:
        source.close()
        raise


class OpenAhead:
    """`path` being opened on `executor` while the caller does other work. take() gives the
    OpenedFile, or raises the error opening it raised (the same typed error, naming the file, as
    opening it then would); discard() closes it if it is not taken. Holds, until taken, what
    open_file holds: the Source's tail read (ReadOptions.tail_bytes) and the decoded footer."""

    def __init__(self, executor: Executor, path: str, filesystem: Any = None,
                 max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> None:
        self.path = path
        self.max_page_bytes = max_page_bytes
        self._taken = False
        self._future: Future[OpenedFile] = executor.submit(open_file, path, filesystem, max_page_bytes)

    def take(self) -> OpenedFile:
        self._taken = True
        return self._future.result()

    def discard(self) -> None:
        if not self._taken and not self._future.cancel():
            self._future.add_done_callback(_close_opened)


def _close_opened(future: Future[OpenedFile]) -> None:
    if future.exception() is None:
        future.result().source.close()
