"""A numba scan of a compact-protocol struct into flat arrays: each struct's and list's entries
(field id, type, value) side by side, the structs and lists themselves in post-order.

Imported by pageindex.format.thrift_flat only when numba imports (the `fast` extra). It reads what
footers hold (structs, lists, integers, doubles, binaries, booleans) and gives up (BAIL) on anything
else, malformed or merely rare: the Python codec then decodes the bytes, its errors included.
"""
from __future__ import annotations

import numpy as np
from numba import njit

BAIL = -1
# Nesting the scan takes on: footers nest six deep; deeper input goes to the Python codec,
# which enforces thrift.MAX_DEPTH.
MAX_NESTING = 32
_BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _STRUCT = 3, 4, 5, 6, 7, 8, 9, 12


@njit(cache=True, nogil=True)
def _int(buf, pos, end, ttype):
    """The zigzag I16, I32 or I64 at pos and the position after it; position BAIL when it is cut
    off, over 3 (I16), 5 (I32) or 9 (I64) bytes, or out of its type's range."""
    limit = 3 if ttype == _I16 else 5 if ttype == _I32 else 9
    n = np.uint64(0)
    shift = np.uint64(0)
    q = pos
    while q < end and q - pos < limit:
        b = np.uint64(buf[q])
        q += 1
        n |= (b & np.uint64(0x7F)) << shift
        if b < 0x80:
            value = np.int64(n >> np.uint64(1)) ^ -np.int64(n & np.uint64(1))
            if ttype == _I32 and not -(1 << 31) <= value < (1 << 31):
                return np.int64(0), BAIL
            if ttype == _I16 and not -(1 << 15) <= value < (1 << 15):
                return np.int64(0), BAIL
            return value, q
        shift += np.uint64(7)
    return np.int64(0), BAIL


@njit(cache=True, nogil=True)
def _size(buf, pos, end):
    """An unsigned varint of at most 5 bytes (a length or a count) and the position after it."""
    n = np.int64(0)
    shift = 0
    q = pos
    while q < end and q - pos < 5:
        b = np.int64(buf[q])
        q += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, q
        shift += 7
    return np.int64(0), BAIL


@njit(cache=True, nogil=True)
def scan(buf, end, lazy_depth):
    """Scan the struct at buf[0:end]. Returns (end position or BAIL, entries, nodes, entry arrays
    id/type/value/length, node arrays kind (0 struct, 1 list)/first entry/entry count/start/end/
    element type/referring entry/mode). A binary's value is its offset, its length in `length`;
    a double's value is its offset; a struct's or list's its node number; booleans have type 1
    (TRUE) and value 0 or 1.
    A node's mode: 0 to build, 1 a struct nested `lazy_depth` structs and lists deep or more
    (built from its bytes when used), 2 inside such a struct (not built)."""
    cap = end + 2
    e_id = np.empty(cap, np.int64)
    e_type = np.empty(cap, np.int64)
    e_val = np.empty(cap, np.int64)
    e_len = np.zeros(cap, np.int64)
    p_id = np.empty(cap, np.int64)  # entries of the open structs and lists, innermost last
    p_type = np.empty(cap, np.int64)
    p_val = np.empty(cap, np.int64)
    p_len = np.zeros(cap, np.int64)
    n_kind = np.empty(cap, np.int64)
    n_first = np.empty(cap, np.int64)
    n_count = np.empty(cap, np.int64)
    n_start = np.empty(cap, np.int64)
    n_end = np.empty(cap, np.int64)
    n_etype = np.empty(cap, np.int64)
    n_ref = np.full(cap, -1, np.int64)
    n_mode = np.zeros(cap, np.int64)
    s_kind = np.empty(MAX_NESTING + 1, np.int64)  # the open structs and lists
    s_start = np.empty(MAX_NESTING + 1, np.int64)
    s_base = np.empty(MAX_NESTING + 1, np.int64)
    s_last = np.empty(MAX_NESTING + 1, np.int64)  # a struct's last field id; a list's items left
    s_fid = np.empty(MAX_NESTING + 1, np.int64)  # the field id the struct or list has in its parent
    s_etype = np.empty(MAX_NESTING + 1, np.int64)
    depth = 1
    s_kind[0], s_start[0], s_base[0], s_last[0], s_fid[0] = 0, 0, 0, 0, 0
    pos = 0
    top = 0  # open entries
    ne = 0
    nn = 0
    while True:
        d = depth - 1
        closing = False
        ftype = 0
        fid = 0
        if s_kind[d] == 0:
            if pos >= end:
                return BAIL, ne, nn, e_id, e_type, e_val, e_len, n_kind, n_first, n_count, n_start, n_end, n_etype, n_ref, n_mode
            header = np.int64(buf[pos])
            pos += 1
            ftype = header & 0x0F
            delta = header >> 4
            if ftype == 0:
                closing = True
            else:
                if delta == 0:  # the long form: the id as a zigzag I16
                    fid, pos = _int(buf, pos, end, _I16)
                else:
                    fid = s_last[d] + delta
                s_last[d] = fid
        else:
            if s_last[d] == 0:
                closing = True
            else:
                s_last[d] -= 1
                ftype = s_etype[d]
                fid = 0
        if closing:
            base = s_base[d]
            count = top - base
            for i in range(count):
                j = base + i
                e_id[ne + i], e_type[ne + i], e_val[ne + i], e_len[ne + i] = p_id[j], p_type[j], p_val[j], p_len[j]
                if p_type[j] == _STRUCT or p_type[j] == _LIST:
                    n_ref[p_val[j]] = ne + i
            n_kind[nn], n_first[nn], n_count[nn] = s_kind[d], ne, count
            n_start[nn], n_end[nn], n_etype[nn] = s_start[d], pos, s_etype[d]
            for j in range(lazy_depth, d):
                if s_kind[j] == 0:
                    n_mode[nn] = 2
            if n_mode[nn] == 0 and s_kind[d] == 0 and d >= lazy_depth:
                n_mode[nn] = 1
            ne += count
            top = base
            depth -= 1
            if depth == 0:
                return pos, ne, nn + 1, e_id, e_type, e_val, e_len, n_kind, n_first, n_count, n_start, n_end, n_etype, n_ref, n_mode
            p_id[top], p_type[top], p_val[top] = s_fid[d], _STRUCT if s_kind[d] == 0 else _LIST, nn
            top += 1
            nn += 1
            continue
        if pos == BAIL:
            break
        if ftype == _I32 or ftype == _I64 or ftype == _I16:
            value, pos = _int(buf, pos, end, ftype)
            p_id[top], p_type[top], p_val[top] = fid, ftype, value
            top += 1
        elif ftype == _BYTE:
            if pos >= end:
                pos = BAIL
            else:
                p_id[top], p_type[top], p_val[top] = fid, ftype, np.int64(np.int8(buf[pos]))
                top += 1
                pos += 1
        elif ftype == _DOUBLE:
            if end - pos < 8:
                pos = BAIL
            else:
                p_id[top], p_type[top], p_val[top] = fid, ftype, pos
                top += 1
                pos += 8
        elif ftype == _BINARY:
            n, pos = _size(buf, pos, end)
            if pos == BAIL or n > end - pos:
                pos = BAIL
            else:
                p_id[top], p_type[top], p_val[top], p_len[top] = fid, ftype, pos, n
                top += 1
                pos += n
        elif (ftype == 1 or ftype == 2) and s_kind[d] == 0:
            p_id[top], p_type[top], p_val[top] = fid, 1, 1 if ftype == 1 else 0
            top += 1
        elif ftype == _STRUCT and depth < MAX_NESTING:
            s_kind[depth], s_start[depth], s_base[depth], s_last[depth] = 0, pos, top, 0
            s_fid[depth], s_etype[depth] = fid, 0
            depth += 1
        elif ftype == _LIST and s_kind[d] == 0 and depth < MAX_NESTING and pos < end:
            header = np.int64(buf[pos])
            pos += 1
            etype = header & 0x0F
            n = header >> 4
            if header != 0 and etype != _I32 and etype != _I64 and etype != _BINARY and etype != _STRUCT \
                    and etype != _I16 and etype != _BYTE and etype != _DOUBLE:
                pos = BAIL
            elif n == 15:
                n, pos = _size(buf, pos, end)
                if pos != BAIL and n > end - pos:
                    pos = BAIL
            elif n > end - pos:
                pos = BAIL
            s_kind[depth], s_start[depth], s_base[depth], s_last[depth] = 1, pos, top, n
            s_fid[depth], s_etype[depth] = fid, etype
            depth += 1
        else:
            pos = BAIL
        if pos == BAIL:
            break
    return BAIL, ne, nn, e_id, e_type, e_val, e_len, n_kind, n_first, n_count, n_start, n_end, n_etype, n_ref, n_mode
