"""Large structs (footers) decoded through the compiled scan of format.thrift_kernel, the tree built
from its flat arrays a struct or list at a time; thrift.decode_struct's result, to the object.

Without numba (or with PAGEINDEX_SCAN_KERNEL=arrow), and on anything the scan gives up on, it is
thrift.decode_struct itself, which decodes the same bytes or raises their error.
"""
from __future__ import annotations

import functools
import os
import struct
from collections import deque
from itertools import repeat
from types import ModuleType

import numpy as np

from pageindex.format.thrift import Buffer, Field, Struct, T, TList, decode_struct

# Below this the Python codec is as fast, and a small footer need not import numba.
MIN_BYTES = 16 << 10
# Structs this many structs and lists deep or more (in a footer: a chunk's Statistics and its
# PageEncodingStats, under FileMetaData, the row group list, RowGroup, the chunk list, ColumnChunk
# and ColumnMetaData) are decoded when first used: footer validation reads none of them.
LAZY_DEPTH = 6
_TYPES = tuple(T)
_DOUBLE = struct.Struct("<d")
_new = object.__new__
_new_field = tuple.__new__
_set = object.__setattr__
_each = functools.partial(deque, maxlen=0)  # runs an iterator of calls to its end


@functools.cache
def _kernel() -> ModuleType | None:
    try:
        from pageindex.format import thrift_kernel
    except (ImportError, RuntimeError):  # no numba; or numba without a writable cache directory
        return None
    return thrift_kernel


def kernel() -> ModuleType | None:
    """The compiled scan, or None: numba missing, or turned off (PAGEINDEX_SCAN_KERNEL=arrow)."""
    if os.environ.get("PAGEINDEX_SCAN_KERNEL", "").strip().lower() == "arrow":
        return None
    return _kernel()


def decode_large(buf: Buffer) -> tuple[Struct, int]:
    """decode_struct(buf) for a struct at buf[0:], through the compiled scan when it is worth it."""
    module = kernel() if len(buf) >= MIN_BYTES else None
    if module is not None:
        decoded = decode_flat(module, buf)
        if decoded is not None:
            return decoded
    return decode_struct(buf)


def decode_flat(module: ModuleType, buf: Buffer, lazy_depth: int = LAZY_DEPTH) -> tuple[Struct, int] | None:
    """The struct at buf[0:] and the position after it, built from the compiled scan (structs
    nested `lazy_depth` deep or more hold only their bytes until used); None when the scan gave
    up (the bytes are for decode_struct)."""
    data = bytes(buf)
    try:
        scanned = module.scan(np.frombuffer(data, np.uint8), len(data), lazy_depth)
    except OSError:  # numba could not save the code it compiled; the Python codec decodes alike
        return None
    if scanned[0] < 0:
        return None
    return _tree(data, *scanned[1:]), scanned[0]


def _tree(data: bytes, ne: int, nn: int, e_id: np.ndarray, e_type: np.ndarray, e_val: np.ndarray,
          e_len: np.ndarray, n_kind: np.ndarray, n_first: np.ndarray, n_count: np.ndarray,
          n_start: np.ndarray, n_end: np.ndarray, n_etype: np.ndarray, n_ref: np.ndarray,
          n_mode: np.ndarray) -> Struct:
    """The tree of the scan's arrays, built a kind of object at a time by C loops (map, numpy's
    object arrays): the structs and lists first as empty objects, which the entries can hold, then
    the entries, then each struct's fields and each list's items (the last node is the root)."""
    kinds, modes, firsts, counts = n_kind[:nn], n_mode[:nn], n_first[:nn], n_count[:nn]
    built = np.repeat(modes == 0, counts)  # the entries of the structs and lists built
    types = e_type[:ne]
    values = e_val[:ne].astype(object)  # as Python ints
    binaries = np.flatnonzero((types == 8) & built)
    values[binaries] = _objects(list(map(data.__getitem__, map(slice, e_val[binaries].tolist(),
                                                                  (e_val[binaries] + e_len[binaries]).tolist()))))
    doubles = np.flatnonzero((types == 7) & built)
    values[doubles] = _objects([_DOUBLE.unpack_from(data, off)[0] for off in e_val[doubles].tolist()])
    booleans = np.flatnonzero(types == 1)
    values[booleans] = (e_val[booleans] == 1).astype(object)
    structs = np.flatnonzero((kinds == 0) & (modes == 0))
    lazy = np.flatnonzero(modes == 1)
    lists = np.flatnonzero((kinds == 1) & (modes == 0))
    nodes = np.empty(nn, object)
    for chosen, cls in ((structs, Struct), (lazy, Struct), (lists, TList)):
        nodes[chosen] = _objects(list(map(_new, repeat(cls, len(chosen)))))
    referred = np.flatnonzero((n_ref[:nn] >= 0) & (modes < 2))
    values[n_ref[referred]] = nodes[referred]
    # Where each struct's fields start among the fields built.
    at = np.concatenate(([0], np.cumsum(built)))[firsts]
    kept = np.flatnonzero(built)
    fields = list(map(_new_field, repeat(Field), zip(e_id[kept].tolist(), map(_TYPES.__getitem__, types[kept].tolist()),
                                                   values[kept].tolist())))
    shells = nodes[structs].tolist()
    spans = map(slice, at[structs].tolist(), (at[structs] + counts[structs]).tolist())
    _each(map(_set, shells, repeat("fields"), map(tuple, map(fields.__getitem__, spans))))
    for chosen in (structs, lazy):
        _each(map(_set, nodes[chosen].tolist(), repeat("raw"),
                  map(data.__getitem__, map(slice, n_start[chosen].tolist(), n_end[chosen].tolist()))))
    shells = nodes[lists].tolist()
    items = values.tolist()
    spans = map(slice, firsts[lists].tolist(), (firsts[lists] + counts[lists]).tolist())
    _each(map(_set, shells, repeat("elem_type"), map(_TYPES.__getitem__, n_etype[lists].tolist())))
    _each(map(_set, shells, repeat("items"), map(tuple, map(items.__getitem__, spans))))
    _each(map(_set, shells, repeat("is_set"), repeat(False, len(shells))))
    return nodes[nn - 1]


def _objects(items: list) -> np.ndarray:
    """A numpy array of these objects, taken as they are (np.array would look into each one for
    an array interface, which asks a lazy struct's __getattr__)."""
    return np.fromiter(items, object, len(items))
