"""A file's columns for lookup: its top-level fields with their schema subtrees and leaves, the
Arrow schema pyarrow would give it, and decoded rows cast back to that schema.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.errors import UnsupportedFileError
from pageindex.format.footer import MAGIC, Footer
from pageindex.format.parquet_thrift import FileMetaData, SchemaElement
from pageindex.format.schema import Leaf, element_name
from pageindex.format.thrift import Struct, encode_struct


def no_columns(rows: int, metadata: dict | None) -> pa.Table:
    """A table of no columns but `rows` rows (pyarrow keeps the count only through select)."""
    return pa.table({"": pa.nulls(rows)}).replace_schema_metadata(metadata).select([])


@dataclass(frozen=True)
class Field:
    name: str
    elements: tuple[Struct, ...]  # the field's schema subtree, depth first
    leaves: tuple[Leaf, ...]
    arrow_type: pa.DataType


def file_fields(footer: Footer, schema: pa.Schema) -> dict[str, Field]:
    """Top-level fields with their schema subtrees (children counted as schema.leaves_of does)."""
    items = footer.metadata.get(FileMetaData.SCHEMA).items
    by_name: dict[str, list[Leaf]] = {}
    for leaf in footer.leaves:
        by_name.setdefault(leaf.path[0], []).append(leaf)
    out, pos = {}, 1
    for _ in range(items[0].get(SchemaElement.NUM_CHILDREN)):
        start, pending = pos, 1
        while pending:
            children = items[pos].get(SchemaElement.NUM_CHILDREN)
            pending += (children if isinstance(children, int) and children > 0 else 0) - 1
            pos += 1
        name = element_name(items[start])
        arrow_type = schema.field(name).type if name in schema.names else None
        out[name] = Field(name, tuple(items[start:pos]), tuple(by_name.get(name, ())), arrow_type)
    return out


def arrow_schema(footer: Footer) -> pa.Schema:
    """The schema pyarrow would give the file (ARROW:schema applied), from our validated footer."""
    raw = encode_struct(footer.metadata)
    buf = MAGIC + raw + struct.pack("<I", len(raw)) + MAGIC
    try:
        return pq.ParquetFile(pa.BufferReader(buf)).schema_arrow
    except (OSError, pa.ArrowException) as err:
        raise UnsupportedFileError(f"pyarrow cannot map this schema: {err}") from None



def conform_types(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The types, nullability and metadata pyarrow gives the file (its ARROW:schema, if any)."""
    if not schema.names:
        return no_columns(table.num_rows, schema.metadata)
    columns, fields = [], []
    for target in schema:
        column = table.column(target.name)
        try:
            column = column.cast(target.type) if column.type != target.type else column
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            target = target.with_type(column.type)
        columns.append(column)
        fields.append(target)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=schema.metadata))
