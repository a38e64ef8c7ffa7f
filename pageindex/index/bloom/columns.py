"""Which leaves of one file the columns named for bloom filters mean, and what to say of the rest.

A name is a leaf's dotted path, or a list or map by its own name; a name the file lacks is noted.
"""
from __future__ import annotations

from dataclasses import dataclass

from pageindex.format.parquet_thrift import ConvertedType, LogicalType, SchemaElement, Type
from pageindex.format.schema import Leaf
from pageindex.format.thrift import Struct
from pageindex.index.bloom.chunk_hashes import eligible
from pageindex.index.bloom.options import AUTO_TYPES, BloomOptions

# Below a list or map, the levels between its name and a value: list.element (or a legacy
# two-level list's repeated leaf), key_value.key and key_value.value.
WRAPPER_LEVELS = 2
_CONTAINERS = {ConvertedType.LIST: "list", ConvertedType.MAP: "map", ConvertedType.MAP_KEY_VALUE: "map"}
_LOGICAL_CONTAINERS = {LogicalType.LIST: "list", LogicalType.MAP: "map"}


@dataclass(frozen=True)
class Chosen:
    """The leaves (Leaf.index) whose chunks are candidates for a filter, and notes on named
    columns that get none in this file."""

    leaves: frozenset[int]
    notes: tuple[str, ...] = ()


def choose(bloom: BloomOptions, leaves: tuple[Leaf, ...]) -> Chosen:
    """The file's leaves that `bloom` asks a filter for. A named column the file lacks, or
    whose type has no filter, is noted, not refused: files of one lake differ in their
    columns as its schema evolved."""
    if bloom.auto:
        return Chosen(frozenset(leaf.index for leaf in leaves if leaf.physical_type in AUTO_TYPES))
    chosen: set[int] = set()
    notes: list[str] = []
    for name in bloom.named:
        matched, note = _resolve(name, leaves)
        if note:
            notes.append(note)
        for leaf in matched:
            if eligible(leaf.physical_type):
                chosen.add(leaf.index)
            else:
                notes.append(f"bloom filter: column {leaf.dotted} is {Type.name(leaf.physical_type)}, "
                             f"which has no bloom filter{_WHY_NONE.get(leaf.physical_type, '')}")
    return Chosen(frozenset(chosen), tuple(dict.fromkeys(notes)))


_WHY_NONE = {Type.BOOLEAN: " (of two values, min/max statistics already skip what a filter could)",
             Type.INT96: " (its values need not round-trip to the bytes a reader would probe)"}


def _resolve(name: str, leaves: tuple[Leaf, ...]) -> tuple[list[Leaf], str]:
    """The leaves `name` means, or a note saying why none."""
    exact = [leaf for leaf in leaves if leaf.dotted == name]
    if exact:
        return exact, ""
    depth = name.count(".") + 1
    below = [leaf for leaf in leaves if leaf.path[:depth] == tuple(name.split(".")) and len(leaf.path) > depth]
    if not below:
        return [], f"bloom filter: column {name} not in this file"
    kind = _container(below[0].ancestry[depth - 1])
    values = [leaf for leaf in below if len(leaf.path) - depth <= WRAPPER_LEVELS]
    if kind is None:
        columns = ", ".join(leaf.dotted for leaf in below)
        return [], f"bloom filter: {name} is a group of columns, not a column; name the ones to filter: {columns}"
    if len(values) < len(below):  # a list or map of groups: its values are several columns
        columns = ", ".join(leaf.dotted for leaf in below)
        return [], f"bloom filter: {name} is a {kind} of groups; name the columns to filter: {columns}"
    return values, ""


def _container(element: Struct) -> str | None:
    """"list" or "map" when the schema element is annotated as one, else None."""
    logical = element.get(SchemaElement.LOGICAL_TYPE)
    if isinstance(logical, Struct) and logical.fields:
        return _LOGICAL_CONTAINERS.get(logical.fields[0].id)
    return _CONTAINERS.get(element.get(SchemaElement.CONVERTED_TYPE))
