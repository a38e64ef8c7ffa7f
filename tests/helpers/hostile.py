"""Hostile Parquet files, small on disk and costly to read: decompression bombs of each codec
(honest: each decompresses to what its header says), huge counts and sizes, deep schemas.

Built from a one-column pyarrow file whose footer is rewritten around hand-made pages with
pageindex.format.thrift only; `measured` runs the CLI on one in a child and reports its peak RSS
and CPU time (for bench/hostile.py; the tests assert only the outcome).
"""
from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct
from tests.helpers.paths import REPO_ROOT

MiB, GiB = 1 << 20, 1 << 30
_DATA_PAGE, _DICTIONARY_PAGE = 0, 2
_PLAIN, _RLE, _RLE_DICTIONARY = 0, 3, 8
UNCOMPRESSED, SNAPPY, GZIP, BROTLI, LZ4, ZSTD, LZ4_RAW = 0, 1, 2, 4, 5, 6, 7


def _page_header(kind: int, uncompressed: int, compressed: int, num_values: int, encoding: int) -> bytes:
    if kind == _DICTIONARY_PAGE:
        sub = Field(7, T.STRUCT, Struct((Field(1, T.I32, num_values), Field(2, T.I32, _PLAIN))))
    else:
        sub = Field(5, T.STRUCT, Struct((Field(1, T.I32, num_values), Field(2, T.I32, encoding),
                                         Field(3, T.I32, _RLE), Field(4, T.I32, _RLE))))
    return encode_struct(Struct((Field(1, T.I32, kind), Field(2, T.I32, uncompressed),
                                 Field(3, T.I32, compressed), sub)))


def data_page(body: bytes, uncompressed: int, num_values: int, encoding: int = _PLAIN) -> bytes:
    return _page_header(_DATA_PAGE, uncompressed, len(body), num_values, encoding) + body


def dictionary_page(body: bytes, num_values: int) -> bytes:
    return _page_header(_DICTIONARY_PAGE, len(body), len(body), num_values, _PLAIN) + body


def _base(field: pa.Field, value: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({field.name: pa.array([value], field.type)}, schema=pa.schema([field])), sink,
                   compression="none", use_dictionary=False, write_statistics=False)
    return sink.getvalue()


def file_of(field: pa.Field, chunks: list[tuple[bytes, int, int | None]], codec: int, num_values: int,
            data: bytes | None = None, rows: int | None = None) -> bytes:
    """A file with `field`'s one column: each chunk (its pages, its offset in the data region,
    its dictionary page's offset or None) in a row group of its own, all over the data region
    `data` (the chunks' bytes laid end to end when None), each claiming `num_values`."""
    raw = _base(field, b"x" if pa.types.is_binary(field.type) else 1)
    (length,) = struct.unpack("<I", raw[-8:-4])
    metadata, _ = decode_struct(raw[-8 - length : -8])
    (group,) = metadata.get(4).items
    (column,) = group.get(1).items
    region = data if data is not None else b"".join(c for c, _, _ in chunks)
    groups = []
    for chunk, offset, dictionary in chunks:
        meta = (column.get(3).without(11).set(4, T.I32, codec).set(5, T.I64, num_values)
                .set(6, T.I64, len(chunk)).set(7, T.I64, len(chunk)).set(9, T.I64, 4 + offset))
        if dictionary is not None:
            meta = meta.set(11, T.I64, 4 + dictionary)
        one = column.set(2, T.I64, 4 + offset).set(3, T.STRUCT, meta)
        groups.append(group.set(1, T.LIST, TList(T.STRUCT, (one,))).set(2, T.I64, len(chunk))
                      .set(3, T.I64, num_values if rows is None else rows))
    footer = encode_struct(metadata.set(4, T.LIST, TList(T.STRUCT, tuple(groups)))
                           .set(3, T.I64, num_values if rows is None else rows))
    return b"PAR1" + region + footer + struct.pack("<I", len(footer)) + b"PAR1"


BINARY = pa.field("s", pa.binary(), nullable=False)
INT64 = pa.field("i", pa.int64(), nullable=False)
NULLABLE = pa.field("n", pa.int64(), nullable=True)


def _one_page(codec: int, compressed: bytes, size: int, field: pa.Field = BINARY, num_values: int = 1) -> bytes:
    page = data_page(compressed, size, num_values)
    return file_of(field, [(page, 0, None)], codec, num_values)


# --------------------------------------------------------------------------- the codecs' bombs
# Each page holds one PLAIN byte array: a 4-byte length, then that many zero bytes.


def zstd_bomb(size: int) -> bytes:
    """A zstd frame of a raw block (the length) and RLE blocks of zeros: 4 bytes per 128 KiB."""
    out = [b"\x28\xb5\x2f\xfd", b"\x00\x38"]  # magic; no content size, 128 KiB window
    out.append(struct.pack("<I", 4 << 3)[:3] + struct.pack("<I", size - 4))
    left = size - 4
    while left:
        n = min(left, 128 << 10)
        left -= n
        out.append(struct.pack("<I", (n << 3) | (1 << 1) | (left == 0))[:3] + b"\x00")
    return _one_page(ZSTD, b"".join(out), size)


def snappy_bomb(size: int) -> bytes:
    """A snappy stream: the length and one zero as a literal, then 64-byte copies of offset 1."""
    preamble = bytearray()
    n = size
    while n >= 0x80:
        preamble.append(n & 0x7F | 0x80)
        n >>= 7
    preamble.append(n)
    left = size - 5
    body = [bytes(preamble), bytes([4 << 2]), struct.pack("<I", size - 4), b"\x00",
            b"\xfe\x01\x00" * (left // 64)]
    if left % 64:
        body.append(bytes([((left % 64) - 1) << 2 | 2]) + b"\x01\x00")
    return _one_page(SNAPPY, b"".join(body), size)


def _streamed(compress: Callable[[bytes], bytes], finish: Callable[[], bytes], size: int) -> bytes:
    parts = [compress(struct.pack("<I", size - 4))]
    zeros, left = bytes(MiB), size - 4
    while left:
        n = min(left, MiB)
        parts.append(compress(zeros[:n]))
        left -= n
    return b"".join(parts + [finish()])


def gzip_bomb(size: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return _one_page(GZIP, _streamed(z.compress, z.flush, size), size)


def brotli_bomb(size: int) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "brotli") as stream:
        _streamed(lambda b: stream.write(b) and b"", lambda: b"", size)
    return _one_page(BROTLI, sink.getvalue().to_pybytes(), size)


def _lz4_block(size: int) -> bytes:
    """One LZ4 block: five literals (the length, a zero), a match of offset 1, 12 literal zeros."""
    match = size - 5 - 12
    ext = match - 4 - 15
    return (b"\x5f" + struct.pack("<I", size - 4) + b"\x00" + b"\x01\x00" + b"\xff" * (ext // 255)
            + bytes([ext % 255]) + b"\xc0" + bytes(12))


def lz4_raw_bomb(size: int) -> bytes:
    return _one_page(LZ4_RAW, _lz4_block(size), size)


def lz4_hadoop_bomb(size: int) -> bytes:
    block = _lz4_block(size)
    return _one_page(LZ4, struct.pack(">II", size, len(block)) + block, size)


# --------------------------------------------------------------------------- counts and sizes


def lying_snappy(size: int) -> bytes:
    """A header claiming `size` bytes from a 20-byte snappy body (its preamble says so too)."""
    preamble = bytearray()
    n = size
    while n >= 0x80:
        preamble.append(n & 0x7F | 0x80)
        n >>= 7
    preamble.append(n)
    return _one_page(SNAPPY, bytes(preamble) + b"\xfe\x01\x00" * 6, size)


def null_page(num_values: int) -> bytes:
    """An OPTIONAL column's page of `num_values` nulls: one RLE run of definition level 0."""
    run = bytearray()
    n = num_values << 1
    while n >= 0x80:
        run.append(n & 0x7F | 0x80)
        n >>= 7
    run.append(n)
    body = struct.pack("<I", len(run) + 1) + bytes(run) + b"\x00"
    return file_of(NULLABLE, [(data_page(body, len(body), num_values), 0, None)], UNCOMPRESSED, num_values)


def huge_dictionary(entries: int) -> bytes:
    """An INT64 chunk whose 8-byte dictionary page claims `entries` entries; one data page
    refers to entry 0."""
    dictionary = dictionary_page(struct.pack("<q", 7), entries)
    indices = b"\x01" + b"\x02\x00"  # bit width 1, a run of one 0
    page = data_page(indices, len(indices), 1, _RLE_DICTIONARY)
    return file_of(INT64, [(dictionary + page, len(dictionary), 0)], UNCOMPRESSED, 1)


def claimed_values(groups: int, pages: int) -> bytes:
    """`groups` row groups whose chunks all start at the first of `pages` one-value pages and
    each claim 2^62 values: every chunk's walk would read them all."""
    page = data_page(struct.pack("<I", 1) + b"x", 5, 1)
    region = page * pages
    return file_of(BINARY, [(region, 0, None)] * groups, UNCOMPRESSED, 1 << 62, data=region, rows=1 << 62)


def deep_schema(depth: int) -> bytes:
    """A file whose one leaf sits below `depth` nested optional structs (pyarrow's own writer)."""
    typ: pa.DataType = pa.int64()
    value: object = 1
    for i in range(depth):
        typ, value = pa.struct([pa.field(f"f{i}", typ)]), {f"f{i}": value}
    sink = io.BytesIO()
    pq.write_table(pa.table({"deep": pa.array([value, None], typ)}), sink)
    return sink.getvalue()


@dataclass(frozen=True)
class Measured:
    """A CLI run on one file: its exit code and output, its peak RSS and CPU seconds."""

    returncode: int
    stdout: str
    stderr: str
    rss_mb: float
    cpu_seconds: float


# Run by a bare interpreter: a child's peak RSS (ru_maxrss) counts its parent's at fork, so the
# parent that starts the measured child must be small, not the test process holding the files.
_MEASURE = """
import json, os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), usage.ru_maxrss, usage.ru_utime + usage.ru_stime], f)
"""


def measured(path: Path, *args: str, timeout: float | None = None) -> Measured:
    """`pageindex retrofit PATH ARGS` in a child, its peak RSS and CPU (user + system) from wait4;
    `timeout` (seconds) stops a run that goes on (subprocess.TimeoutExpired)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        usage = Path(tmp) / "usage.json"
        run = subprocess.run([sys.executable, "-S", "-c", _MEASURE, str(usage), sys.executable, "-m", "pageindex",
                              "retrofit", str(path), *args], capture_output=True, text=True, env=env, check=False,
                             timeout=timeout)
        code, rss_kb, cpu = json.loads(usage.read_text())
    return Measured(code, run.stdout, run.stderr, rss_kb / 1024, cpu)
