"""Which code the scan runs: the compiled kernels built into the wheel (pageindex/scan/*.pyx), or
Arrow's decode where they cannot load; PAGEINDEX_SCAN_KERNEL says auto, arrow or compiled (insist).
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
from types import ModuleType

ENV = "PAGEINDEX_SCAN_KERNEL"
AUTO, ARROW, COMPILED = "auto", "arrow", "compiled"
# What a record says of the path its file took.
PATHS = (COMPILED, ARROW)
# The modules built from pageindex/scan/*.pyx that the scan calls.
MODULES = ("hybrid_kernels", "plain_kernels", "level_kernels", "delta_kernels", "header_kernel")

log = logging.getLogger("pageindex")


class KernelsMissing(ImportError):
    """PAGEINDEX_SCAN_KERNEL=compiled, but the compiled kernels do not load here."""


def compiled(name: str) -> ModuleType | None:
    """The compiled module pageindex.scan.`name`, or None for the Python and Arrow code. The
    variable is read on every call, so a test can set it."""
    choice = _choice(_RAW.get(_KEY) if _RAW is not None else os.environ.get(ENV))
    if choice == ARROW:
        return None
    module = _import(name)
    if module is None and choice == COMPILED:
        raise KernelsMissing(f"{ENV}={COMPILED} but the compiled kernels do not load: {missing()}")
    return module


def path() -> str:
    """The path this process's scan takes with the variable as it is: compiled or arrow."""
    return COMPILED if all(compiled(name) is not None for name in MODULES) else ARROW


def missing() -> str | None:
    """Why the compiled kernels do not load in this process (None when they all do)."""
    for name in MODULES:
        if _import(name) is None:
            return _failure(name)
    return None


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
    if choice not in (AUTO, ARROW, COMPILED):
        raise ValueError(f"{ENV} must be {AUTO!r}, {ARROW!r} or {COMPILED!r}, not {choice!r}")
    return choice


_FAILURES: dict[str, str] = {}


@functools.cache
def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"pageindex.scan.{name}")
    except ImportError as err:
        # A source tree never built, or a wheel for another platform: Arrow's decode gives the
        # same bytes at 2-3x the CPU. Said once per process, whichever module is missed first.
        _FAILURES[name] = f"{type(err).__name__}: {err}"
        if len(_FAILURES) == 1:
            log.warning("pageindex: the compiled kernels do not load (%s); page bounds come from "
                        "Arrow's decode: the same index, at 2-3x the CPU", _FAILURES[name])
        return None


def _failure(name: str) -> str:
    return _FAILURES.get(name, "not imported")
