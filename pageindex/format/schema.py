"""Parquet schema: flatten the SchemaElement list into leaf columns with their levels and types.

A leaf carries what later stages need: path, physical and logical type, max levels, ancestry.
"""
from __future__ import annotations

from dataclasses import dataclass

from pageindex.errors import MalformedFileError
from pageindex.format.parquet_thrift import FieldRepetitionType, SchemaElement, Type
from pageindex.format.thrift import Struct, TList

MAX_SCHEMA_DEPTH = 100


@dataclass(frozen=True)
class Leaf:
    """A primitive column: where it sits in the schema and how its values are typed."""

    index: int
    path: tuple[str, ...]
    physical_type: int
    type_length: int | None
    max_def: int
    max_rep: int
    logical_type: Struct | None
    converted_type: int | None
    scale: int | None
    precision: int | None
    ancestry: tuple[Struct, ...]  # schema elements from the root's child down to the leaf

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def logical_id(self) -> int | None:
        """Which member of the LogicalType union is set, if any."""
        if self.logical_type is None or not self.logical_type.fields:
            return None
        return self.logical_type.fields[0].id


def leaves_of(schema: object) -> tuple[Leaf, ...]:
    """Walk the depth-first SchemaElement list; reject lists that do not form a tree."""
    if not isinstance(schema, TList) or not schema.items:
        raise MalformedFileError("footer has no schema")
    elements = schema.items
    if not all(isinstance(e, Struct) for e in elements):
        raise MalformedFileError("schema element is not a struct")
    root_children = elements[0].get(SchemaElement.NUM_CHILDREN)
    if not isinstance(root_children, int) or root_children < 0:
        raise MalformedFileError("schema root has no num_children")
    leaves: list[Leaf] = []
    # Iterative walk: a stack of (children still to read, ancestry, def, rep).
    pos = 1
    stack = [(root_children, (), 0, 0)]
    while stack:
        remaining, ancestry, max_def, max_rep = stack.pop()
        if remaining == 0:
            continue
        stack.append((remaining - 1, ancestry, max_def, max_rep))
        if pos >= len(elements):
            raise MalformedFileError("schema ends before all declared children")
        element = elements[pos]
        pos += 1
        repetition = element.get(SchemaElement.REPETITION_TYPE)
        if repetition not in FieldRepetitionType.NAMES:
            raise MalformedFileError(f"schema element {pos - 1} has no valid repetition type")
        child_def = max_def + (repetition != FieldRepetitionType.REQUIRED)
        child_rep = max_rep + (repetition == FieldRepetitionType.REPEATED)
        children = element.get(SchemaElement.NUM_CHILDREN)
        here = ancestry + (element,)
        if len(here) > MAX_SCHEMA_DEPTH:
            raise MalformedFileError(f"schema nested deeper than {MAX_SCHEMA_DEPTH}")
        if isinstance(children, int) and children > 0:
            if children > len(elements) - pos:
                raise MalformedFileError(f"schema element {pos - 1} claims {children} children")
            stack.append((children, here, child_def, child_rep))
        elif element.has(SchemaElement.TYPE):
            leaves.append(_leaf(len(leaves), here, child_def, child_rep))
    if pos != len(elements):
        raise MalformedFileError(f"schema has {len(elements) - pos} elements outside the tree")
    return tuple(leaves)


def _leaf(index: int, ancestry: tuple[Struct, ...], max_def: int, max_rep: int) -> Leaf:
    element = ancestry[-1]
    ptype = element.get(SchemaElement.TYPE)
    if not isinstance(ptype, int) or ptype not in Type.NAMES:
        raise MalformedFileError(f"leaf column {index} has invalid physical type {ptype}")
    type_length = element.get(SchemaElement.TYPE_LENGTH)
    if ptype == Type.FIXED_LEN_BYTE_ARRAY and (
        not isinstance(type_length, int) or not 0 < type_length < (1 << 24)
    ):
        raise MalformedFileError(f"leaf column {index} has invalid type_length {type_length}")
    logical = element.get(SchemaElement.LOGICAL_TYPE)
    # A union holds one struct member; an empty one means no logical type.
    if logical is not None and not (isinstance(logical, Struct) and len(logical.fields) <= 1
                                    and all(isinstance(f.value, Struct) for f in logical.fields)):
        raise MalformedFileError(f"leaf column {index} has a malformed logical type")
    for field_id, what in ((SchemaElement.SCALE, "scale"), (SchemaElement.PRECISION, "precision"),
                           (SchemaElement.CONVERTED_TYPE, "converted type")):
        value = element.get(field_id)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise MalformedFileError(f"leaf column {index} has a malformed {what}")
    converted = element.get(SchemaElement.CONVERTED_TYPE)
    path = tuple(element_name(e) for e in ancestry)
    return Leaf(
        index=index,
        path=path,
        physical_type=ptype,
        type_length=type_length if ptype == Type.FIXED_LEN_BYTE_ARRAY else None,
        max_def=max_def,
        max_rep=max_rep,
        logical_type=logical if isinstance(logical, Struct) else None,
        converted_type=converted if isinstance(converted, int) else None,
        scale=element.get(SchemaElement.SCALE),
        precision=element.get(SchemaElement.PRECISION),
        ancestry=ancestry,
    )


def element_name(element: Struct) -> str:
    raw = element.get(SchemaElement.NAME, b"")
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
