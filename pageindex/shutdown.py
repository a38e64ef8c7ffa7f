"""How the command line and the job's driver end: flush, run Python's exit handlers, then leave.

Leaving skips the C++ static destructors, where Arrow's thread pools can abort a process whose work
is done (std::terminate on a still-joinable thread, apache/arrow#34314): exit -6 after a success.
"""
from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """Exit with `code` once stdout and stderr are flushed and every atexit handler has run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away or the stream is closed: nothing to tell
            pass
    atexit._run_exitfuncs()
    os._exit(code)
