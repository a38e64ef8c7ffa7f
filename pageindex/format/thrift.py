"""Thrift compact protocol codec: decodes any struct into a generic tree and encodes it back.

Nothing is mapped onto a schema, so unknown fields and newer structures survive a round trip.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple, Union

from pageindex.errors import ThriftDecodeError, ThriftTruncatedError

MAX_DEPTH = 64
Buffer = Union[bytes, bytearray, memoryview]


class T(IntEnum):
    """Compact-protocol type ids (booleans carry their value in the field header)."""

    STOP = 0
    TRUE = 1
    FALSE = 2
    BYTE = 3
    I16 = 4
    I32 = 5
    I64 = 6
    DOUBLE = 7
    BINARY = 8
    LIST = 9
    SET = 10
    MAP = 11
    STRUCT = 12
    UUID = 13


# Type ids as plain ints, for the hot paths (an IntEnum member lookup costs more than the compare).
(_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT,
 _UUID) = range(14)
_TYPES = tuple(T)  # by id, without the cost of an Enum lookup
_VARINT_BYTES = {T.BYTE: 10, T.I16: 3, T.I32: 5, T.I64: 10}
_INT_RANGES = {
    T.BYTE: (-(1 << 7), (1 << 7) - 1),
    T.I16: (-(1 << 15), (1 << 15) - 1),
    T.I32: (-(1 << 31), (1 << 31) - 1),
    T.I64: (-(1 << 63), (1 << 63) - 1),
}
_INT_LIMITS = {int(t): (_VARINT_BYTES[t], *_INT_RANGES[t]) for t in _INT_RANGES}
# Zigzag varints this short hold at most 28 bits: in range of I32 and I64 without a check.
_SHORT_INT_BYTES = 4


class Field(NamedTuple):
    # A named tuple, not a dataclass: footers hold hundreds of thousands and it builds faster.
    id: int
    type: T
    value: Any


@dataclass(frozen=True)
class TList:
    """A list (or set) value: its element type and items."""

    elem_type: T
    items: tuple
    is_set: bool = False


@dataclass(frozen=True)
class TMap:
    key_type: T
    value_type: T
    items: tuple  # of (key, value) pairs


@dataclass(frozen=True)
class Struct:
    """A decoded struct: its fields in the order they were read.

    A struct decoded from a buffer also keeps `raw`, the bytes it was decoded from, which the
    encoder writes back as they are (a footer's unchanged subtrees are not encoded again). It is
    an instance attribute outside the dataclass fields: equality, hash and repr ignore it, and
    every new struct (set, without, dataclasses.replace) starts without it."""

    fields: tuple[Field, ...] = ()
    raw = None  # bytes | None: the class default, for structs built rather than decoded

    def get(self, field_id: int, default: Any = None) -> Any:
        for f in self.fields:
            if f.id == field_id:
                return f.value
        return default

    def has(self, field_id: int) -> bool:
        return any(f.id == field_id for f in self.fields)

    def set(self, field_id: int, ftype: T, value: Any) -> "Struct":
        """A copy with the field replaced in place, or inserted in field-id order."""
        new = Field(field_id, T.TRUE if ftype in (T.TRUE, T.FALSE) else ftype, value)
        fields = list(self.fields)
        for i, f in enumerate(fields):
            if f.id == field_id:
                fields[i] = new
                return Struct(tuple(fields))
        pos = len(fields)
        for i, f in enumerate(fields):
            if f.id > field_id:
                pos = i
                break
        fields.insert(pos, new)
        return Struct(tuple(fields))

    def without(self, *field_ids: int) -> "Struct":
        return Struct(tuple(f for f in self.fields if f.id not in field_ids))


class Encoded(NamedTuple):
    """A struct given as its encoded bytes, which the encoder writes as they are: a struct that is
    only ever written, built straight to bytes, can sit in a tree of others (as `raw` does)."""

    raw: bytes


# Decoding works on (buffer, position) pairs in plain functions: a footer runs this for every
# field it holds, and local variables cost less than a reader object's attributes. The frequent
# cases are inlined where they occur: one-byte varints (always in range), binaries, lists of ints.
_new_field = tuple.__new__  # Field(...) without the named tuple's Python-level __new__


def _truncated(pos: int, reason: str = "thrift data ends early") -> ThriftTruncatedError:
    return ThriftTruncatedError(reason, offset=pos)


def _too_deep(pos: int) -> ThriftDecodeError:
    return ThriftDecodeError(f"nesting deeper than {MAX_DEPTH}", offset=pos)


def _varint(buf: Buffer, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    start, stop = pos, min(pos + max_bytes, end)
    result = shift = 0
    while pos < stop:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    if pos - start < max_bytes:
        raise _truncated(pos)
    raise ThriftDecodeError("varint is too long", offset=pos)


def _zigzag(buf: Buffer, pos: int, end: int, ttype: int) -> tuple[int, int]:
    max_bytes, lo, hi = _INT_LIMITS[ttype]
    n, pos = _varint(buf, pos, end, max_bytes)
    value = (n >> 1) ^ -(n & 1)
    if not lo <= value <= hi:
        raise ThriftDecodeError(f"{_TYPES[ttype].name} value {value} out of range", offset=pos)
    return value, pos


def _wide_int(buf: Buffer, pos: int, end: int, ttype: int) -> tuple[int, int]:
    """An I32 or I64 whose varint is longer than a byte: up to _SHORT_INT_BYTES bytes in one
    loop here (in range of both types), longer or cut off ones by _zigzag's checks."""
    n = shift = 0
    q = pos
    stop = pos + _SHORT_INT_BYTES if pos + _SHORT_INT_BYTES < end else end
    while q < stop:
        b = buf[q]
        q += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), q
        shift += 7
    return _zigzag(buf, pos, end, ttype)


def _take(buf: Buffer, pos: int, end: int, n: int) -> tuple[bytes, int]:
    if n > end - pos:
        raise _truncated(pos, f"length {n} exceeds the {end - pos} bytes left")
    return bytes(buf[pos : pos + n]), pos + n


def _size(buf: Buffer, pos: int, end: int, min_elem_bytes: int) -> tuple[int, int]:
    n, pos = _varint(buf, pos, end, 5)
    if n * min_elem_bytes > end - pos:
        raise _truncated(pos, f"container of {n} elements cannot fit in {end - pos} bytes")
    return n, pos


def _struct(buf: Buffer, pos: int, end: int, depth: int) -> tuple[Struct, int]:
    start = pos
    fields: list[Field] = []
    append = fields.append
    last_id = 0
    while True:
        if pos >= end:
            raise _truncated(pos)
        header = buf[pos]
        pos += 1
        ftype = header & 0x0F
        if ftype == _STOP:
            decoded = Struct(tuple(fields))
            raw = buf[start:pos]
            # Set past the frozen __setattr__, once, here; as bytes: a view would keep its buffer alive.
            decoded.__dict__["raw"] = raw if type(raw) is bytes else bytes(raw)
            return decoded, pos
        delta = header >> 4
        if delta:
            field_id = last_id + delta
        else:
            field_id, pos = _zigzag(buf, pos, end, _I16)
        if ftype == _I32 or ftype == _I64:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
                value = (n >> 1) ^ -(n & 1)
            else:
                value, pos = _wide_int(buf, pos, end, ftype)
        elif ftype == _BINARY:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = _varint(buf, pos, end, 5)
            value, pos = _take(buf, pos, end, n)
        elif ftype == _STRUCT:
            if depth >= MAX_DEPTH:
                raise _too_deep(pos)
            value, pos = _struct(buf, pos, end, depth + 1)
        elif ftype == _LIST:
            if depth >= MAX_DEPTH:
                raise _too_deep(pos)
            value, pos = _list(buf, pos, end, False, depth + 1)
        elif ftype == _TRUE or ftype == _FALSE:
            ftype, value = _TRUE, ftype == _TRUE
        elif ftype > _UUID:
            raise ThriftDecodeError(f"invalid field type {ftype} for field {field_id}", offset=pos)
        else:
            value, pos = _value(buf, pos, end, ftype, depth, False)
        append(_new_field(Field, (field_id, _TYPES[ftype], value)))
        last_id = field_id


def _value(buf: Buffer, pos: int, end: int, ttype: int, depth: int, in_container: bool
           ) -> tuple[Any, int]:
    if ttype == _I32 or ttype == _I64 or ttype == _I16:
        return _zigzag(buf, pos, end, ttype)
    if ttype == _BINARY:
        n, pos = _varint(buf, pos, end, 5)
        return _take(buf, pos, end, n)
    if ttype == _TRUE or ttype == _FALSE:
        if not in_container:
            return ttype == _TRUE, pos
        if pos >= end:
            raise _truncated(pos)
        return buf[pos] == 1, pos + 1
    if ttype == _BYTE:
        if pos >= end:
            raise _truncated(pos)
        b = buf[pos]
        return (b - 256 if b > 127 else b), pos + 1
    if ttype == _DOUBLE:
        raw, pos = _take(buf, pos, end, 8)
        return struct.unpack("<d", raw)[0], pos
    if ttype == _UUID:
        return _take(buf, pos, end, 16)
    if depth >= MAX_DEPTH:
        raise _too_deep(pos)
    if ttype == _STRUCT:
        return _struct(buf, pos, end, depth + 1)
    if ttype == _LIST or ttype == _SET:
        return _list(buf, pos, end, ttype == _SET, depth + 1)
    if ttype == _MAP:
        return _map(buf, pos, end, depth + 1)
    raise ThriftDecodeError(f"unknown thrift type {int(ttype)}", offset=pos)


def _elem_type(nibble: int, pos: int) -> T:
    if nibble in (0, 14, 15):
        raise ThriftDecodeError(f"invalid element type {nibble}", offset=pos)
    return _TYPES[nibble]


def _list(buf: Buffer, pos: int, end: int, is_set: bool, depth: int) -> tuple[TList, int]:
    if pos >= end:
        raise _truncated(pos)
    header = buf[pos]
    pos += 1
    n = header >> 4
    if header == 0:
        # An empty list whose element type is 0 (fastparquet writes it): Apache Thrift's C++ and
        # Java compact readers accept it, and keeping type 0 encodes it back to the same byte.
        return TList(T.STOP, (), is_set), pos
    etype = _elem_type(header & 0x0F, pos)
    if n == 15:
        n, pos = _size(buf, pos, end, 1)
    elif n > end - pos:
        raise _truncated(pos, "list cannot fit in the bytes left")
    if etype == T.FALSE:
        etype = T.TRUE
    items = []
    append = items.append
    if etype == _STRUCT and n:
        if depth >= MAX_DEPTH:
            raise _too_deep(pos)
        for _ in range(n):
            item, pos = _struct(buf, pos, end, depth + 1)
            append(item)
    elif etype == _I32 or etype == _I64:
        for _ in range(n):
            if pos < end and buf[pos] < 0x80:
                item = buf[pos]
                pos += 1
                append((item >> 1) ^ -(item & 1))
            else:
                item, pos = _wide_int(buf, pos, end, etype)
                append(item)
    else:
        for _ in range(n):
            item, pos = _value(buf, pos, end, etype, depth, True)
            append(item)
    return TList(etype, tuple(items), is_set), pos


def _map(buf: Buffer, pos: int, end: int, depth: int) -> tuple[TMap, int]:
    n, pos = _size(buf, pos, end, 2)
    if n == 0:
        return TMap(T.BINARY, T.BINARY, ()), pos
    if pos >= end:
        raise _truncated(pos)
    kv = buf[pos]
    pos += 1
    ktype, vtype = _elem_type(kv >> 4, pos), _elem_type(kv & 0x0F, pos)
    items = []
    for _ in range(n):
        key, pos = _value(buf, pos, end, ktype, depth, True)
        item, pos = _value(buf, pos, end, vtype, depth, True)
        items.append((key, item))
    return TMap(ktype, vtype, tuple(items)), pos


def uleb128(buf: Buffer, pos: int, max_bytes: int) -> tuple[int, int] | None:
    """The unsigned varint at buf[pos] and the position after it; None if it is cut off or
    longer than `max_bytes` (for varints outside thrift: snappy's length, RLE run headers)."""
    try:
        return _varint(buf, pos, len(buf), max_bytes)
    except ThriftDecodeError:
        return None


def decode_struct(buf: Buffer, pos: int = 0, end: int | None = None) -> tuple[Struct, int]:
    """Decode one struct starting at buf[pos]; return it and the position just after it."""
    return _struct(buf, pos, len(buf) if end is None else end, 0)


# Encoding appends to one bytearray through plain functions, for the same reason as decoding. The
# primitives are public for the structs that are only ever written, built straight to bytes with
# no tree (format.index_blocks, a synthesized file's column chunks).


def varint_to(out: bytearray, n: int) -> None:
    """Append the unsigned varint of n."""
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def signed_to(out: bytearray, n: int) -> None:
    """Append the zigzag varint of a signed n (i16, i32 or i64)."""
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:  # varint_to's loop, inline: this runs for every integer written
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def binary_to(out: bytearray, value: bytes | str) -> None:
    """Append a binary (or UTF-8 string): its length, then its bytes."""
    data = value.encode() if isinstance(value, str) else value
    varint_to(out, len(data))
    out += data


def field_header_to(out: bytearray, last_id: int, field_id: int, ftype: int) -> int:
    """Append the header of a field that follows field `last_id` (a boolean's ftype is TRUE or
    FALSE: its value); return field_id, the next field's last_id."""
    delta = field_id - last_id
    if 0 < delta <= 15:
        out.append((delta << 4) | ftype)
    else:
        out.append(ftype)
        signed_to(out, field_id)
    return field_id


def list_header_to(out: bytearray, elem_type: int, n: int) -> None:
    """Append the header of a list of n elements of this type."""
    if n < 15:
        out.append((n << 4) | elem_type)
    else:
        out.append(0xF0 | elem_type)
        varint_to(out, n)


def _value_to(out: bytearray, ttype: int, value: Any, in_container: bool) -> None:
    if ttype == _I32 or ttype == _I64 or ttype == _I16:
        signed_to(out, value)
    elif ttype == _BYTE:
        out.append(value & 0xFF)
    elif ttype == _BINARY:
        binary_to(out, value)
    elif ttype == _STRUCT:
        _struct_to(out, value)
    elif ttype == _TRUE or ttype == _FALSE:
        if in_container:
            out.append(1 if value else 2)
    elif ttype == _LIST or ttype == _SET:
        _list_to(out, value)
    elif ttype == _DOUBLE:
        out += struct.pack("<d", value)
    elif ttype == _UUID:
        out += value
    elif ttype == _MAP:
        _map_to(out, value)
    else:
        raise ValueError(f"cannot encode thrift type {ttype}")


def _list_to(out: bytearray, value: TList) -> None:
    etype = int(value.elem_type)
    list_header_to(out, etype, len(value.items))
    if etype == _STRUCT:
        for item in value.items:
            _struct_to(out, item)
    elif etype == _I32 or etype == _I64:
        for item in value.items:
            signed_to(out, item)
    elif etype == _TRUE:
        out += bytes(1 if item else 2 for item in value.items)
    elif etype == _BINARY:
        for item in value.items:
            binary_to(out, item)
    else:
        for item in value.items:
            _value_to(out, etype, item, True)


def _map_to(out: bytearray, value: TMap) -> None:
    varint_to(out, len(value.items))
    if value.items:
        out.append((int(value.key_type) << 4) | int(value.value_type))
    for k, v in value.items:
        _value_to(out, value.key_type, k, True)
        _value_to(out, value.value_type, v, True)


def _struct_to(out: bytearray, value: Struct | Encoded) -> None:
    raw = value.raw
    if raw is not None:
        out += raw
        return
    last_id = 0
    for field_id, ftype, fvalue in value.fields:
        if ftype == _TRUE or ftype == _FALSE:
            ftype = _TRUE if fvalue else _FALSE
        last_id = field_header_to(out, last_id, field_id, ftype)
        if ftype == _I32 or ftype == _I64:
            n = (fvalue << 1) ^ (fvalue >> 63)
            if n < 0x80:
                out.append(n)
            else:
                varint_to(out, n)
        elif ftype == _STRUCT:
            _struct_to(out, fvalue)
        elif ftype == _BINARY:
            binary_to(out, fvalue)
        else:
            _value_to(out, ftype, fvalue, False)
    out.append(_STOP)


def encode_struct(value: Struct | Encoded) -> bytes:
    """Encode a struct: the bytes a decoded struct came from, else canonical compact form (a
    struct built from decoded ones reuses their bytes)."""
    if value.raw is not None:
        return value.raw
    out = bytearray()
    _struct_to(out, value)
    return bytes(out)

