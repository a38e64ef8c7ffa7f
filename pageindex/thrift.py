"""Thrift compact protocol codec: decodes any struct into a generic tree and encodes it back.

Nothing is mapped onto a schema, so unknown fields and newer structures survive a round trip.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Iterator, NamedTuple

from .errors import ThriftDecodeError, ThriftTruncatedError

MAX_DEPTH = 64


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


BOOL = T.TRUE
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
    """A decoded struct: its fields in the order they were read."""

    fields: tuple[Field, ...] = ()

    def get(self, field_id: int, default: Any = None) -> Any:
        for f in self.fields:
            if f.id == field_id:
                return f.value
        return default

    def has(self, field_id: int) -> bool:
        return any(f.id == field_id for f in self.fields)

    def field_type(self, field_id: int) -> T | None:
        for f in self.fields:
            if f.id == field_id:
                return f.type
        return None

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


class _Reader:
    """Cursor over a buffer; every read is bounds-checked against `end`."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end

    def _fail(self, reason: str) -> ThriftDecodeError:
        return ThriftDecodeError(reason, offset=self.pos)

    def byte(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise ThriftTruncatedError("thrift data ends early", offset=pos)
        self.pos = pos + 1
        return self.buf[pos]

    def varint(self, max_bytes: int = 10) -> int:
        buf, start, end = self.buf, self.pos, self.end
        if start < end and buf[start] < 0x80:  # most varints are one byte
            self.pos = start + 1
            return buf[start]
        pos, stop = start, min(start + max_bytes, end)
        result = shift = 0
        while pos < stop:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
        self.pos = pos
        if pos - start < max_bytes:
            raise ThriftTruncatedError("thrift data ends early", offset=pos)
        raise self._fail("varint is too long")

    def zigzag(self, ttype: int) -> int:
        max_bytes, lo, hi = _INT_LIMITS[ttype]
        n = self.varint(max_bytes)
        value = (n >> 1) ^ -(n & 1)
        if not lo <= value <= hi:
            raise self._fail(f"{_TYPES[ttype].name} value {value} out of range")
        return value

    def take(self, n: int) -> bytes:
        if n < 0:
            raise self._fail("negative length")
        if n > self.end - self.pos:
            raise ThriftTruncatedError(
                f"length {n} exceeds the {self.end - self.pos} bytes left", offset=self.pos
            )
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def size(self, min_elem_bytes: int) -> int:
        n = self.varint(5)
        if n * min_elem_bytes > self.end - self.pos:
            raise ThriftTruncatedError(
                f"container of {n} elements cannot fit in {self.end - self.pos} bytes",
                offset=self.pos,
            )
        return n

    def value(self, ttype: int, depth: int, in_container: bool) -> Any:
        # Most frequent types first, compared as plain ints: this runs for every value of a footer.
        if ttype == _I32 or ttype == _I64 or ttype == _I16:
            return self.zigzag(ttype)
        if ttype == _BINARY:
            return self.take(self.varint(5))
        if ttype == _TRUE or ttype == _FALSE:
            return self.byte() == 1 if in_container else ttype == _TRUE
        if ttype == _BYTE:
            b = self.byte()
            return b - 256 if b > 127 else b
        if ttype == _DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if ttype == _UUID:
            return self.take(16)
        if depth >= MAX_DEPTH:
            raise self._fail(f"nesting deeper than {MAX_DEPTH}")
        if ttype == _STRUCT:
            return self.struct(depth + 1)
        if ttype == _LIST or ttype == _SET:
            return self.list(ttype == _SET, depth + 1)
        if ttype == _MAP:
            return self.map(depth + 1)
        raise self._fail(f"unknown thrift type {int(ttype)}")

    def elem_type(self, nibble: int) -> T:
        if nibble in (0, 14, 15):
            raise self._fail(f"invalid element type {nibble}")
        return _TYPES[nibble]

    def list(self, is_set: bool, depth: int) -> TList:
        header = self.byte()
        etype = self.elem_type(header & 0x0F)
        n = header >> 4
        if n == 15:
            n = self.size(1)
        elif n > self.end - self.pos:
            raise ThriftTruncatedError("list cannot fit in the bytes left", offset=self.pos)
        if etype == T.FALSE:
            etype = T.TRUE
        value = self.value
        items = tuple([value(etype, depth, True) for _ in range(n)])
        return TList(etype, items, is_set)

    def map(self, depth: int) -> TMap:
        n = self.size(2)
        if n == 0:
            return TMap(T.BINARY, T.BINARY, ())
        kv = self.byte()
        ktype, vtype = self.elem_type(kv >> 4), self.elem_type(kv & 0x0F)
        items = tuple(
            (self.value(ktype, depth, True), self.value(vtype, depth, True)) for _ in range(n)
        )
        return TMap(ktype, vtype, items)

    def struct(self, depth: int) -> Struct:
        fields = []
        append = fields.append
        value, zigzag = self.value, self.zigzag
        last_id = 0
        while True:
            header = self.byte()
            ftype = header & 0x0F
            if ftype == _STOP:
                return Struct(tuple(fields))
            delta = header >> 4
            field_id = last_id + delta if delta else zigzag(_I16)
            if ftype > _UUID:
                raise self._fail(f"invalid field type {ftype} for field {field_id}")
            if ftype == _I32 or ftype == _I64:
                append(Field(field_id, _TYPES[ftype], zigzag(ftype)))
            elif ftype == _FALSE:
                append(Field(field_id, T.TRUE, False))
            else:
                append(Field(field_id, _TYPES[ftype], value(ftype, depth, False)))
            last_id = field_id


def uleb128(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int] | None:
    """The unsigned varint at buf[pos] and the position after it; None if it is cut off or
    longer than `max_bytes` (for varints outside thrift: snappy's length, RLE run headers)."""
    value = shift = 0
    for i in range(pos, min(pos + max_bytes, len(buf))):
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    return None


def decode_struct(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> tuple[Struct, int]:
    """Decode one struct starting at buf[pos]; return it and the position just after it."""
    reader = _Reader(buf, pos, len(buf) if end is None else end)
    return reader.struct(0), reader.pos


class _Writer:
    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        out = self.out
        while n > 0x7F:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63))

    def value(self, ttype: T, value: Any, in_container: bool) -> None:
        if ttype == _I32 or ttype == _I64 or ttype == _I16:
            self.zigzag(value)
        elif ttype == _BYTE:
            self.out.append(value & 0xFF)
        elif ttype == _BINARY:
            data = value.encode() if isinstance(value, str) else value
            self.varint(len(data))
            self.out += data
        elif ttype == _STRUCT:
            self.struct(value)
        elif ttype == _TRUE or ttype == _FALSE:
            if in_container:
                self.out.append(1 if value else 2)
        elif ttype == _LIST or ttype == _SET:
            self.list(value)
        elif ttype == _DOUBLE:
            self.out += struct.pack("<d", value)
        elif ttype == _UUID:
            self.out += value
        elif ttype == _MAP:
            self.map(value)
        else:
            raise ValueError(f"cannot encode thrift type {ttype}")

    def list(self, value: TList) -> None:
        n = len(value.items)
        etype = int(value.elem_type)
        if n < 15:
            self.out.append((n << 4) | etype)
        else:
            self.out.append(0xF0 | etype)
            self.varint(n)
        if etype == _I32 or etype == _I64:
            zigzag = self.zigzag
            for item in value.items:
                zigzag(item)
            return
        encode = self.value
        for item in value.items:
            encode(etype, item, True)

    def map(self, value: TMap) -> None:
        self.varint(len(value.items))
        if value.items:
            self.out.append((int(value.key_type) << 4) | int(value.value_type))
        for k, v in value.items:
            self.value(value.key_type, k, True)
            self.value(value.value_type, v, True)

    def struct(self, value: Struct) -> None:
        out, encode = self.out, self.value
        last_id = 0
        for field_id, ftype, fvalue in value.fields:
            if ftype == _TRUE or ftype == _FALSE:
                ftype = _TRUE if fvalue else _FALSE
            delta = field_id - last_id
            if 0 < delta <= 15:
                out.append((delta << 4) | ftype)
            else:
                out.append(ftype)
                self.zigzag(field_id)
            if ftype == _I32 or ftype == _I64:
                self.zigzag(fvalue)
            else:
                encode(ftype, fvalue, False)
            last_id = field_id
        out.append(_STOP)


def encode_struct(value: Struct) -> bytes:
    """Encode a struct in canonical compact form."""
    writer = _Writer()
    writer.struct(value)
    return bytes(writer.out)


def walk(value: Any) -> Iterator[Any]:
    """Every value nested in `value`, depth first (for tests and diagnostics)."""
    yield value
    if isinstance(value, Struct):
        for f in value.fields:
            yield from walk(f.value)
    elif isinstance(value, TList):
        for item in value.items:
            yield from walk(item)
    elif isinstance(value, TMap):
        for k, v in value.items:
            yield from walk(k)
            yield from walk(v)
