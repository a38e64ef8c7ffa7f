"""How the command line and the job's driver end: flush, run Python's exit handlers, then leave;
and how they stop when told to (SIGTERM or SIGHUP unwinds like Ctrl-C, then exit 143 or 129).

Leaving skips the C++ static destructors, where Arrow's thread pools can abort a process whose work
is done (std::terminate on a still-joinable thread, apache/arrow#34314): exit -6 after a success.
"""
from __future__ import annotations

import atexit
import functools
import multiprocessing
import os
import signal
import sys
import threading
from types import FrameType
from typing import Callable, NoReturn, TypeVar

from pageindex.io import temporaries

# SIGHUP too: a closed terminal sends it, and pyspark's daemon sends it to its Python workers
# when the driver stops (never SIGTERM), so an executor's commit in flight is undone.
STOPPING = (signal.SIGTERM, signal.SIGHUP)
R = TypeVar("R")
_terminated: list[int] = []  # the stopping signal received, once


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP) was received: raised in the main thread to unwind as Ctrl-C does, so every
    commit in flight is undone and its temporary removed."""


def stops_cleanly(run: Callable[..., R]) -> Callable[..., R]:
    """`run` with SIGTERM and SIGHUP turned into Terminated and Ctrl-C into KeyboardInterrupt, held
    back while a commit's temporary is created or swapped in; the process's previous handlers
    are back afterwards. Handlers run in the main thread only: elsewhere `run` runs as it is."""
    @functools.wraps(run)
    def stopping(*args, **kwargs) -> R:
        if threading.current_thread() is not threading.main_thread():
            return run(*args, **kwargs)
        previous = {s: signal.signal(s, _on_stop) for s in (signal.SIGINT, *STOPPING)}
        try:
            return run(*args, **kwargs)
        except KeyboardInterrupt:
            temporaries.remove_all()  # any the unwinding could not reach
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    return stopping


def _on_stop(signum: int, frame: FrameType | None) -> None:
    if temporaries.defer(lambda: _on_stop(signum, None)):
        return
    if signum not in STOPPING:
        raise KeyboardInterrupt
    if _terminated:
        return  # already unwinding: let the cleanup run to its end
    _terminated.append(signum)
    # Worker processes (--jobs) too: one in process_to unwinds (stops_cleanly), an idle one ends.
    for child in multiprocessing.active_children():
        try:
            os.kill(child.pid, signal.SIGTERM)
        except OSError:
            pass  # already gone
    raise Terminated(f"terminated by {signal.Signals(signum).name}")


def stopping() -> bool:
    """Whether SIGTERM or SIGHUP has been received: an error raised while unwinding (a call into
    another process cut short) is the stop, not a failure of its own."""
    return bool(_terminated)


def leave(code: int) -> NoReturn:
    """Exit with `code` (128 + the signal after SIGTERM or SIGHUP: 143, 129) once stdout and stderr are flushed, every temporary
    still in flight is removed and every atexit handler has run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away or the stream is closed: nothing to tell
            pass
    temporaries.remove_all()
    atexit._run_exitfuncs()
    os._exit(128 + _terminated[0] if _terminated else code)
