"""Truncation of long BYTE_ARRAY bounds: min becomes a prefix, max an incremented prefix (UTF-8
aware when the value's first truncate_length + 4 bytes are UTF-8); both still bound the value.
"""
from __future__ import annotations

import codecs


def truncate_min(value: bytes, length: int, partial: bool = False) -> bytes:
    """`partial`: `value` is only a prefix (longer than `length`) of the real value."""
    if len(value) <= length:
        return value
    text = _utf8_prefix(value, length, partial)
    return text if text is not None else value[:length]


def truncate_max(value: bytes, length: int, partial: bool = False) -> bytes:
    """A value >= `value` of at most `length` bytes, or `value` itself when none exists."""
    if len(value) <= length:
        return value
    prefix = _utf8_prefix(value, length, partial)
    if prefix is not None:
        bumped = _increment_utf8(prefix.decode("utf-8"))
        return bumped if bumped is not None else value
    bumped = _increment_bytes(value[:length])
    return bumped if bumped is not None else value


def _utf8_prefix(value: bytes, length: int, partial: bool = False) -> bytes | None:
    """The longest prefix of at most `length` bytes ending on a character boundary, if `value`
    is valid UTF-8 (a `partial` value may end inside a character) and that prefix is not empty."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(value, final=not partial)
    except UnicodeDecodeError:
        return None
    cut = length
    while cut > 0 and (value[cut] & 0xC0) == 0x80:
        cut -= 1
    return value[:cut] if cut > 0 else None


def _increment_utf8(text: str) -> bytes | None:
    """Increment the last character that has a successor of the same UTF-8 width, dropping
    the characters after it (they would only make the bound tighter, never invalid)."""
    for i in range(len(text) - 1, -1, -1):
        code = ord(text[i]) + 1
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            continue
        nxt = chr(code)
        if len(nxt.encode("utf-8")) == len(text[i].encode("utf-8")):
            return (text[:i] + nxt).encode("utf-8")
    return None


def _increment_bytes(prefix: bytes) -> bytes | None:
    """Add one to the last byte, carrying into earlier bytes (0xFF wraps to 0x00)."""
    out = bytearray(prefix)
    for i in range(len(out) - 1, -1, -1):
        if out[i] != 0xFF:
            out[i] += 1
            return bytes(out)
        out[i] = 0
    return None
