"""Progress: one self-redrawing line on a terminal for a run over many files: files and bytes
done, rate and time left. Nothing at all when the stream is not a terminal (logs, pipes).
"""
from __future__ import annotations

import time
from typing import TextIO

from pageindex.job.report import format_size

BAR_WIDTH = 24


class Progress:
    """Counts finished files; `clear` before other output to the terminal, `draw` after it."""

    def __init__(self, files: int, total_bytes: int, stream: TextIO, enabled: bool = True) -> None:
        self.files, self.total_bytes, self.stream = files, total_bytes, stream
        self.done, self.done_bytes = 0, 0
        self.started = time.monotonic()
        self.enabled = enabled and stream.isatty()
        self._width = 0

    def advance(self, size: int) -> None:
        self.done += 1
        self.done_bytes += size
        self.draw()

    def draw(self) -> None:
        if self.enabled:
            line = render(self.done, self.files, self.done_bytes, self.total_bytes,
                          time.monotonic() - self.started)
            self.stream.write("\r" + line.ljust(self._width))
            self.stream.flush()
            self._width = len(line)

    def clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def render(done: int, files: int, done_bytes: int, total_bytes: int, seconds: float) -> str:
    """`[#####-----] 3/10 files  1.2 MiB/4.0 MiB  350.0 KiB/s  ETA 0:08`."""
    share = done_bytes / total_bytes if total_bytes else done / max(files, 1)
    filled = round(BAR_WIDTH * share)
    rate = done_bytes / seconds if seconds > 0 else 0.0
    eta = "ETA " + _clock((total_bytes - done_bytes) / rate) if rate > 0 and done < files else \
        ("done" if done == files else "ETA --:--")
    return (f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{files} files  "
            f"{format_size(done_bytes)}/{format_size(total_bytes)}  {format_size(rate)}/s  {eta}")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
