"""Temporaries in flight: the commit's temporary files this process has created and not yet
renamed or removed, so that a process told to stop (SIGTERM, Ctrl-C) can remove them all.

While a temporary is created and recorded, and while one is swapped in and forgotten, a stop
request is held back (`held`) and acted on at the end: it never falls between the two.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

_lock = threading.Lock()
_in_flight: dict[str, int] = {}  # temporary path -> its inode (only our own file is removed)
_held = [0]  # depth of `held` blocks in the main thread
_deferred: list[Callable[[], None]] = []


@contextmanager
def held() -> Iterator[None]:
    """Run the block whole: a stop request (see `defer`) arriving in it is acted on after it.
    Signal handlers run in the main thread only, so only its blocks hold anything."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held[0] += 1
    try:
        yield
    finally:
        _held[0] -= 1
        if not _held[0] and _deferred:
            act = _deferred[0]
            _deferred.clear()
            act()


def defer(act: Callable[[], None]) -> bool:
    """For a signal handler: True (and `act` kept for the end of the block) inside `held`."""
    if not _held[0]:
        return False
    _deferred.append(act)
    return True


def record(path: str, inode: int) -> None:
    with _lock:
        _in_flight[path] = inode


def forget(path: str) -> None:
    with _lock:
        _in_flight.pop(path, None)


def remove_all() -> int:
    """Remove every temporary still in flight (when the process stops); how many were removed."""
    with _lock:
        pending = list(_in_flight.items())
        _in_flight.clear()
    removed = 0
    for path, inode in pending:
        try:
            if os.lstat(path).st_ino == inode:
                os.unlink(path)
                removed += 1
        except FileNotFoundError:
            pass
    return removed
