"""Which compiled code the scan uses: numba's kernels (the `fast` extra) or none, as
PAGEINDEX_SCAN_KERNEL says (auto, arrow: none, numba: insist), imported on first use.
"""
from __future__ import annotations

import functools
import importlib
import os
import threading
import warnings
from types import ModuleType

ENV = "PAGEINDEX_SCAN_KERNEL"
AUTO, ARROW, NUMBA = "auto", "arrow", "numba"

# Set when numba could not save a compiled kernel: no writable cache directory (pageindex shipped
# as a zip to an executor whose home is not writable), found on a kernel's first call, not at import.
UNSAVED = threading.Event()


def compiled(name: str = "kernels") -> ModuleType | None:
    """The compiled module pageindex.scan.`name`, or None for the Python and Arrow code. Read on
    every call, so a test can set the variable; numba is imported on the first call that could
    use it."""
    choice = _choice(_RAW.get(_KEY) if _RAW is not None else os.environ.get(ENV))
    if choice == ARROW or (choice == AUTO and UNSAVED.is_set()):
        return None
    module = _import(name)
    if module is None and choice == NUMBA:
        raise ValueError(f"{ENV}={NUMBA} but numba is not installed (pip install 'pageindex[fast]')")
    return module


# The environment as the OS holds it: os.environ.get decodes the key and the value on every call,
# which costs more than the rest of compiled(), asked a few times per chunk (a wide row group
# has hundreds). It is the mapping os.environ updates in place, so a change is still seen.
_RAW = getattr(os.environ, "_data", None)
_KEY = os.environ.encodekey(ENV) if _RAW is not None else None


@functools.lru_cache(maxsize=8)
def _choice(raw: str | bytes | None) -> str:
    """The variable's value as a choice (asked for per chunk, so parsed once per value)."""
    if isinstance(raw, bytes):
        raw = os.environ.decodevalue(raw)
    choice = (raw or AUTO).strip().lower() or AUTO
    if choice not in (AUTO, ARROW, NUMBA):
        raise ValueError(f"{ENV} must be {AUTO!r}, {ARROW!r} or {NUMBA!r}, not {choice!r}")
    return choice


@functools.cache
def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"pageindex.scan.{name}")
    except ImportError:
        return None
    except RuntimeError as err:
        # numba refuses cache=True without a writable cache directory: the Python code gives the same bytes.
        if not UNSAVED.is_set():
            UNSAVED.set()
            warnings.warn(f"page bounds fall back to Arrow's decode (page headers to Python): {err}; "
                          "set NUMBA_CACHE_DIR to a writable directory to use the compiled kernels",
                          RuntimeWarning, stacklevel=3)
        return None


def unsaved(err: OSError) -> None:
    """numba could not save code it just compiled (an OSError from a kernel's first call on
    bytes in memory): the Python and Arrow code from now on, which give the same bytes."""
    if not UNSAVED.is_set():
        UNSAVED.set()
        warnings.warn(f"page bounds fall back to Arrow's decode (page headers to Python): numba cannot "
                      f"save compiled code ({err}); give the process a writable XDG_CACHE_HOME or "
                      "NUMBA_CACHE_DIR", RuntimeWarning, stacklevel=3)
