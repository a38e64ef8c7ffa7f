"""Which code builds bloom filters: the numba kernel (the `fast` extra) when importable, else numpy.

PAGEINDEX_BLOOM_KERNEL=numpy forces numpy, =numba insists on the kernel; both paths give the same bytes.
"""
from __future__ import annotations

import functools
import os
import warnings
from types import ModuleType

ENV = "PAGEINDEX_BLOOM_KERNEL"
AUTO, NUMPY, NUMBA = "auto", "numpy", "numba"


def kernel() -> ModuleType | None:
    """The compiled kernel module, or None for the numpy path. Read on every call, so a test can
    set the variable; the import happens on the first filter, so a process that builds none never
    pays numba's import and compile time."""
    choice = os.environ.get(ENV, AUTO).strip().lower() or AUTO
    if choice not in (AUTO, NUMPY, NUMBA):
        raise ValueError(f"{ENV} must be {AUTO!r}, {NUMPY!r} or {NUMBA!r}, not {choice!r}")
    if choice == NUMPY:
        return None
    compiled = _import_kernel()
    if compiled is None and choice == NUMBA:
        raise ValueError(f"{ENV}={NUMBA} but numba is not installed (pip install 'pageindex[fast]')")
    return compiled


@functools.cache
def _import_kernel() -> ModuleType | None:
    try:
        # Deferred: importing numba costs a fraction of a second, paid only when a filter is built.
        from pageindex.index.bloom import kernel as compiled
    except ImportError:
        return None
    except RuntimeError as err:
        # numba refuses cache=True when neither __pycache__ beside the module nor the user's cache
        # directory is writable (a read-only image without a home): numpy gives the same bytes.
        warnings.warn(f"bloom filters fall back to numpy: {err}; set NUMBA_CACHE_DIR to a writable "
                      "directory to use the compiled kernel", RuntimeWarning, stacklevel=2)
        return None
    try:
        compiled.warm()
    except OSError as err:
        # Imported from a zip (spark-submit's --py-files), numba caches in the user's cache
        # directory, and finds it unwritable only when it saves a kernel it compiled.
        warnings.warn(f"bloom filters fall back to numpy: numba cannot save compiled code ({err}); "
                      "give the process a writable XDG_CACHE_HOME or NUMBA_CACHE_DIR",
                      RuntimeWarning, stacklevel=2)
        return None
    return compiled
