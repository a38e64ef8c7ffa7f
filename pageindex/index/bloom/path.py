"""Which code builds bloom filters: the compiled kernel built into the wheel (kernel.pyx), else numpy.

PAGEINDEX_BLOOM_KERNEL=numpy forces numpy, =compiled insists on the kernel; both paths give the same bytes.
"""
from __future__ import annotations

import functools
import logging
import os
from types import ModuleType

ENV = "PAGEINDEX_BLOOM_KERNEL"
AUTO, NUMPY, COMPILED = "auto", "numpy", "compiled"

log = logging.getLogger("pageindex")


def kernel() -> ModuleType | None:
    """The compiled kernel module, or None for the numpy path. Read on every call, so a test can
    set the variable."""
    choice = os.environ.get(ENV, AUTO).strip().lower() or AUTO
    if choice not in (AUTO, NUMPY, COMPILED):
        raise ValueError(f"{ENV} must be {AUTO!r}, {NUMPY!r} or {COMPILED!r}, not {choice!r}")
    if choice == NUMPY:
        return None
    compiled = _import_kernel()
    if compiled is None and choice == COMPILED:
        raise ImportError(f"{ENV}={COMPILED} but the compiled bloom kernel does not load")
    return compiled


@functools.cache
def _import_kernel() -> ModuleType | None:
    try:
        from pageindex.index.bloom import kernel as compiled
    except ImportError as err:
        # A source tree never built: numpy gives the same bytes at more CPU per value. Once a process.
        log.warning("pageindex: the compiled bloom kernel does not load (%s); filters are built "
                    "by numpy: the same bytes, at more CPU per value", err)
        return None
    return compiled
