"""Thrift trees rebuilt without the bytes they were decoded from, so that encode_struct writes
them in canonical form rather than reusing those bytes.
"""
from __future__ import annotations

from typing import Any

from pageindex.format.thrift import Field, Struct, TList, TMap


def rebuilt(value: Any) -> Any:
    """The same tree, every struct built anew (no `raw`)."""
    if isinstance(value, Struct):
        return Struct(tuple(Field(f.id, f.type, rebuilt(f.value)) for f in value.fields))
    if isinstance(value, TList):
        return TList(value.elem_type, tuple(rebuilt(v) for v in value.items), value.is_set)
    if isinstance(value, TMap):
        return TMap(value.key_type, value.value_type, tuple((rebuilt(k), rebuilt(v)) for k, v in value.items))
    return value
