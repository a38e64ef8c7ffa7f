"""The cycle collector paused while decoded Thrift trees are built and used: one pause that
nests and overlaps across threads, for the decoder and for a whole run.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_pause_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the block runs. A decoded footer is hundreds of
    thousands of small objects alive for the whole run, and every full collection walks them
    again, a cost that grows with the footer (see bench/RESULTS.md, wide tables); pageindex makes
    no cyclic garbage for it to find. Pauses may nest and overlap across threads: the collector is restored, to what
    it was before the first, when the last one ends."""
    global _pauses, _was_enabled
    with _pause_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
