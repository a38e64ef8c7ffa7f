"""Datasets for lookup: the Parquet files below a root (the job's discovery rules), their Hive
partition values typed as pyarrow.dataset infers them, and the one schema their files unify to.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from pageindex.errors import UnsupportedFileError
from pageindex.io.discovery import list_files

# Hive's (and Spark's, and pyarrow's null_fallback) name for a null partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset and its partition values as text (None: null), by key."""

    path: str
    partition: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class Dataset:
    files: tuple[DataFile, ...]
    partitions: pa.Schema  # the partition keys in order of first appearance, with inferred types
    directory: bool  # found below a directory (a file there that is not Parquet is skipped)

    def values(self, file: DataFile) -> dict[str, pa.Scalar]:
        """The file's partition values, typed; a key its path does not name is null."""
        given = dict(file.partition)
        return {f.name: pa.scalar(given.get(f.name), pa.string()).cast(f.type) for f in self.partitions}


def discover(fs: Any, path: str) -> Dataset:
    """A file alone, or the visible files below a directory with their `key=value` folders."""
    if not fs.isdir(path):
        return Dataset((DataFile(path, ()),), pa.schema([]), directory=False)
    root = fs._strip_protocol(path).rstrip("/") + "/"
    files = tuple(DataFile(name, _segments(name[len(root):] if name.startswith(root) else ""))
                  for name in list_files(fs, path))
    return Dataset(files, _infer(files), directory=True)


def _segments(relative: str) -> tuple[tuple[str, str | None], ...]:
    """The `key=value` folders of a path below the root (not its file name), URL-decoded."""
    out = {}
    for part in posixpath.dirname(relative).split("/"):
        if "=" in part:
            key, value = part.split("=", 1)
            out[unquote(key)] = None if value == HIVE_NULL else unquote(value)
    return tuple(out.items())


def _infer(files: tuple[DataFile, ...]) -> pa.Schema:
    """pyarrow's inference: int32 when every non-null value of a key casts to int32, else
    string. (pyarrow refuses a key that is null everywhere; here it is a string.)"""
    seen: dict[str, list[str]] = {}
    for f in files:
        for key, value in f.partition:
            seen.setdefault(key, [])
            if value is not None:
                seen[key].append(value)
    fields = []
    for key, values in seen.items():
        try:
            pc.cast(pa.array(values, pa.string()), pa.int32())
            fields.append(pa.field(key, pa.int32()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            fields.append(pa.field(key, pa.string()))
    return pa.schema(fields)


def unify(schemas: list[tuple[str, pa.Schema]]) -> pa.Schema:
    """The schema of files read as one table, as pyarrow.unify_schemas(promote_options=
    "permissive"): a column missing from some files is kept, int32 and int64 become int64.
    Columns whose types cannot be unified are refused, naming the first file that disagrees."""
    unified = schemas[0][1]
    for path, schema in schemas[1:]:
        try:
            unified = pa.unify_schemas([unified, schema], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as err:
            raise UnsupportedFileError(f"its schema cannot be unified with the files before it: {err}",
                                       path=path) from None
    # A column some file lacks is null in that file's rows, whatever the others declare.
    everywhere = set.intersection(*(set(schema.names) for _, schema in schemas))
    return pa.schema([f if f.name in everywhere else f.with_nullable(True) for f in unified],
                     metadata=unified.metadata)


def conform(table: pa.Table, schema: pa.Schema, partition: dict[str, pa.Scalar]) -> pa.Table:
    """One file's rows in the dataset's schema: its columns cast to the unified types, columns
    it lacks as nulls, partition columns as its values."""
    rows = table.num_rows
    columns = []
    for f in schema:
        if f.name in partition:
            columns.append(pa.repeat(partition[f.name], rows) if rows else pa.array([], f.type))
        elif f.name in table.column_names:
            columns.append(_cast(table.column(f.name), f.type))
        else:
            columns.append(pa.nulls(rows, f.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(
        [f.with_type(c.type) for f, c in zip(schema, columns)], metadata=schema.metadata))


def _cast(column: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """The column as `typ`; as it is where pyarrow cannot cast it (as lookup keeps a decoded
    type pyarrow has no cast to)."""
    try:
        return column if column.type == typ else column.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return column
