"""Structure-aware mutations of valid Parquet files, for tests/system/test_fuzz.py.

A mutated input is fully described by a *recipe*: the source file (a corpus-relative path or
``synthetic:NAME``), the mutation kind and an integer seed.  ``build(recipe)`` is deterministic:
the same recipe gives the same bytes (every random choice comes from ``random.Random(seed)``, and
only valid originals are parsed, with pageindex's own footer reader and page walk, to find where
things are).

Mutations (``KINDS``):
  bytes / bits          random bytes or bits changed (anywhere, in the footer, in the tail)
  truncate              the file (or Thrift buffer) cut short
  cut_middle            a range removed from the data region, footer kept (offsets now point
                        past their pages, or outside the file)
  tail_length           the 4-byte footer length set to an interesting value
  huge_list             a Thrift list header's size varint replaced by 2**31 (and friends)
  huge_container        a map size or binary length varint replaced by a huge value
  deep_nesting          a run of struct-begin (or list-of-list) bytes inserted in the footer
  footer_field          decode -> change an integer field anywhere in FileMetaData -> encode
  chunk_field           the same, aimed at ColumnChunk / ColumnMetaData / RowGroup offsets,
                        sizes and counts (data_page_offset, dictionary_page_offset,
                        total_compressed_size, index offsets, num_values, num_rows...)
  footer_delete         a field or list element removed
  footer_duplicate      a list element duplicated (an extra row group, column, schema element)
  footer_type_swap      a field's Thrift type changed (with a value of the new type)
  page_header_bytes     bytes flipped inside a page header (pages found by pageindex.scan.page_walk)
  page_header_field     decode -> change a PageHeader field -> encode, offsets fixed up
  page_body_bytes       bytes flipped inside a page body (the page CRC recomputed if present)
  level_stream          the repetition/definition level stream of a data page corrupted
                        (bytes, length prefix, huge run headers, out-of-range RLE values);
                        compressed v1 bodies are decompressed, mutated and recompressed, and
                        the header sizes, CRC and footer offsets fixed so the rest still lines up
  value_bytes           the same for the values section of a page
"""
from __future__ import annotations

import functools
import random
import struct
import zlib
from pathlib import Path
from typing import Any, Callable

import fsspec.implementations.local  # noqa: F401  (pageindex.io.storage.Source refers to it)

from pageindex.format import thrift
from pageindex.format.footer import decode_footer
from pageindex.format.parquet_thrift import PageHeader, PageType
from pageindex.format.thrift import Field, Struct, T, TList, TMap, decode_struct, encode_struct
from pageindex.io.storage import FileVersion, Source
from pageindex.scan.page_walk import walk_chunk
from tests.helpers.corpus import CORPUS_DIR
from tests.helpers.page_reader import read_varint

KINDS = (
    "bytes", "bits", "truncate", "cut_middle", "tail_length", "huge_list", "huge_container",
    "deep_nesting", "footer_field", "chunk_field", "footer_delete", "footer_duplicate",
    "footer_type_swap", "page_header_bytes", "page_header_field", "page_body_bytes",
    "level_stream", "value_bytes",
)
# Mutations applied to a bare Thrift buffer (the `thrift` target).
THRIFT_KINDS = ("bytes", "bits", "truncate", "huge_list", "huge_container", "deep_nesting",
                "footer_field", "footer_delete", "footer_type_swap", "insert_random")


class NotApplicable(Exception):
    """The mutation has nothing to work on in this file (e.g. no level streams)."""


# ---------------------------------------------------------------- sources

def synthetic_files() -> dict[str, Callable[[], bytes]]:
    return {"nested_v1": functools.partial(_synthetic, "1.0", "none", False),
            "nested_v1_snappy_crc": functools.partial(_synthetic, "1.0", "snappy", True),
            "nested_v2": functools.partial(_synthetic, "2.0", "zstd", True)}


@functools.lru_cache(maxsize=None)
def _synthetic(page_version: str, compression: str, checksums: bool) -> bytes:
    """A small file with nested, nullable columns and many tiny pages (so level streams of every
    shape: repetition and definition levels, RLE and bit-packed runs)."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    n = 600
    lists = [None if i % 11 == 0 else [int(x) if x % 5 else None for x in rng.integers(0, 50, i % 4)]
             for i in range(n)]
    structs = [None if i % 13 == 0 else {"a": int(i) if i % 3 else None,
                                          "b": [f"s{j}" for j in range(i % 3)] if i % 7 else None}
               for i in range(n)]
    maps = [None if i % 17 == 0 else [(f"k{j}", j if j % 2 else None) for j in range(i % 3)]
            for i in range(n)]
    flat = [None if i % 4 == 0 else float(i) for i in range(n)]
    table = pa.table({
        "l": pa.array(lists, pa.list_(pa.int32())),
        "s": pa.array(structs, pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])),
        "m": pa.array(maps, pa.map_(pa.string(), pa.int32())),
        "f": pa.array(flat, pa.float64()),
        "r": pa.array(range(n), pa.int64()),
    })
    out = io.BytesIO()
    pq.write_table(table, out, data_page_version=page_version, compression=compression,
                   data_page_size=256, write_batch_size=32, row_group_size=400,
                   use_dictionary=["s.b.list.element"], write_page_checksum=checksums,
                   write_statistics=True, store_schema=False)
    return out.getvalue()


def source_bytes(name: str) -> bytes:
    if name.startswith("synthetic:"):
        return synthetic_files()[name.split(":", 1)[1]]()
    return _corpus_bytes(name)


@functools.lru_cache(maxsize=256)
def _corpus_bytes(rel: str) -> bytes:
    return (CORPUS_DIR / rel).read_bytes()


# ---------------------------------------------------------------- parsing valid originals

class _BytesFS:
    """Just enough of an fsspec filesystem for a pageindex Source over bytes in memory."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def cat_file(self, path: str, start: int, end: int) -> bytes:
        return self.data[start:end]


def bytes_source(data: bytes, path: str = "<memory>") -> Source:
    return Source(path, _BytesFS(data), FileVersion(len(data), None, None))


def split(data: bytes) -> tuple[int, bytes]:
    """(footer_start, FileMetaData bytes) of a file with a valid tail."""
    (n,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - n
    return start, data[start:-8]


def assemble(data: bytes, footer_start: int, meta: bytes) -> bytes:
    return data[:footer_start] + meta + struct.pack("<I", len(meta)) + b"PAR1"


@functools.lru_cache(maxsize=64)
def _layout(name: str):
    """The footer and every chunk's pages of a valid original."""
    data = source_bytes(name)
    start, raw = split(data)
    footer = decode_footer(raw, len(data), name)
    src = bytes_source(data, name)
    chunks = [(c, walk_chunk(src, c, footer.footer_start, verify_crc=False))
              for row in footer.chunks for c in row]
    return footer, chunks


def _pages(name: str, data_only: bool = False):
    """Every (chunk, chunk pages, page) of the original, dictionary pages included unless
    data_only."""
    out = []
    for chunk, pages in _layout(name)[1]:
        every = ([] if data_only or pages.dictionary is None else [pages.dictionary]) + list(pages.pages)
        out += [(chunk, pages, p) for p in every]
    if not out:
        raise NotApplicable("no pages")
    return out


# ---------------------------------------------------------------- thrift helpers

def locate(buf: bytes) -> list[tuple[str, int]]:
    """Where the lists, maps, binaries and structs of the valid Thrift struct at buf[0] start:
    a walk of its own, apart from the decoder under test."""
    marks: list[tuple[str, int]] = []

    def value(ttype: int, pos: int, in_container: bool) -> int:
        if ttype in (T.I16, T.I32, T.I64):
            return read_varint(buf, pos)[1]
        if ttype in (T.TRUE, T.FALSE):
            return pos + 1 if in_container else pos
        if ttype in (T.BYTE, T.DOUBLE, T.UUID):
            return pos + {T.BYTE: 1, T.DOUBLE: 8, T.UUID: 16}[ttype]
        if ttype == T.STRUCT:
            return struct_at(pos)
        if ttype == T.BINARY:
            marks.append(("binary", pos))
            n, pos = read_varint(buf, pos)
            return pos + n
        if ttype in (T.LIST, T.SET):
            marks.append(("list", pos))
            header, pos = buf[pos], pos + 1
            n = header >> 4
            if n == 15:
                n, pos = read_varint(buf, pos)
            for _ in range(n):
                pos = value(header & 0x0F, pos, True)
            return pos
        marks.append(("map", pos))
        n, pos = read_varint(buf, pos)
        if n:
            kv, pos = buf[pos], pos + 1
            for _ in range(n):
                pos = value(kv & 0x0F, value(kv >> 4, pos, True), True)
        return pos

    def struct_at(pos: int) -> int:
        marks.append(("struct", pos))
        while True:
            header, pos = buf[pos], pos + 1
            if header & 0x0F == T.STOP:
                return pos
            if header >> 4 == 0:
                pos = read_varint(buf, pos)[1]  # a long field id
            pos = value(header & 0x0F, pos, False)

    struct_at(0)
    return marks


def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 70) - 1
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _varint_end(buf: bytes, pos: int) -> int:
    while pos < len(buf) and buf[pos] & 0x80:
        pos += 1
    return pos + 1


HUGE = (2**31, 2**31 - 1, 2**32 - 1, 2**32, 2**35 - 1, 2**28, 1 << 62, 15, 16, 255)


def _children(node: Any) -> list:
    if isinstance(node, Struct):
        return list(node.fields)
    if isinstance(node, Field):
        return [node.value]
    if isinstance(node, TList):
        return list(node.items)
    if isinstance(node, TMap):
        return [x for kv in node.items for x in kv]
    return []


_DELETE = object()


def _rebuild(node: Any, kids: list) -> Any:
    if isinstance(node, Struct):
        return Struct(tuple(k for k in kids if k is not _DELETE))
    if isinstance(node, Field):
        return Field(node.id, node.type, kids[0])
    if isinstance(node, TList):
        return TList(node.elem_type, tuple(k for k in kids if k is not _DELETE), node.is_set)
    if isinstance(node, TMap):
        return TMap(node.key_type, node.value_type, tuple(zip(kids[0::2], kids[1::2])))
    raise TypeError(node)


def sites(node: Any, path: tuple = ()):
    """Every (path, node) in the tree, depth first; Field objects are nodes too."""
    yield path, node
    for i, kid in enumerate(_children(node)):
        yield from sites(kid, path + (i,))


def edit(node: Any, path: tuple, fn: Callable[[Any], Any]) -> Any:
    if not path:
        return fn(node)
    kids = _children(node)
    kids[path[0]] = edit(kids[path[0]], path[1:], fn)
    return _rebuild(node, kids)


def get(node: Any, path: tuple) -> Any:
    for step in path:
        node = _children(node)[step]
    return node


_RANGES = {T.BYTE: 7, T.I16: 15, T.I32: 31, T.I64: 63}


def interesting_int(rng: random.Random, ttype: T, old: int, file_size: int, footer_start: int) -> int:
    pool = [0, 1, -1, 2, 3, 4, 7, 8, 12, 15, 16, 127, 128, 255, 256, 2**15 - 1, 2**15, 2**16,
            2**31 - 1, -(2**31), 2**31, 2**32 - 1, 2**32, 2**53, 2**62, 2**63 - 1, -(2**63),
            file_size, file_size - 1, file_size + 1, file_size - 8, footer_start, footer_start - 1,
            footer_start + 1, old + 1, old - 1, old * 2, old // 2, -old, old + 2**32,
            rng.randrange(max(1, file_size))]
    value = rng.choice(pool)
    bits = _RANGES.get(ttype, 63)
    if rng.random() < 0.85:  # mostly in range for the field's type (out of range also decodes)
        lo, hi = -(1 << bits), (1 << bits) - 1
        value = max(lo, min(hi, value))
    return max(-(2**63), min(2**63 - 1, value))


def _sample_value(rng: random.Random, ttype: T) -> Any:
    if ttype in (T.TRUE, T.FALSE):
        return rng.random() < 0.5
    if ttype in _RANGES:
        bits = _RANGES[ttype]
        return rng.choice([0, 1, -1, (1 << bits) - 1, -(1 << bits)])
    if ttype == T.DOUBLE:
        return rng.choice([0.0, -1.5, float("nan"), float("inf")])
    if ttype == T.BINARY:
        return rng.choice([b"", b"x", b"\xff" * 40])
    if ttype == T.UUID:
        return bytes(16)
    if ttype == T.STRUCT:
        return Struct(rng.choice([(), (Field(1, T.I32, 5),)]))
    if ttype in (T.LIST, T.SET):
        return TList(T.I32, tuple(range(rng.choice([0, 1, 20]))), ttype == T.SET)
    if ttype == T.MAP:
        return TMap(T.BINARY, T.I32, ((b"k", 1),))
    raise ValueError(ttype)


_SWAP_TYPES = (T.TRUE, T.BYTE, T.I16, T.I32, T.I64, T.DOUBLE, T.BINARY, T.STRUCT, T.LIST,
               T.SET, T.MAP, T.UUID)


# ---------------------------------------------------------------- mutations of a Thrift buffer

def mutate_thrift(buf: bytes, kind: str, rng: random.Random, file_size: int = 0,
                  footer_start: int = 0) -> bytes:
    """Mutate a buffer that holds one valid Thrift struct at its start."""
    if kind == "bytes":
        return _flip_bytes(buf, rng, 0, len(buf))
    if kind == "bits":
        return _flip_bits(buf, rng, 0, len(buf))
    if kind == "truncate":
        return buf[: rng.randrange(len(buf))]
    if kind == "insert_random":
        pos = rng.randrange(len(buf) + 1)
        return buf[:pos] + rng.randbytes(rng.choice([1, 2, 5, 40])) + buf[pos:]
    if kind in ("huge_list", "huge_container", "deep_nesting"):
        marks = locate(buf)
        if kind == "huge_list":
            candidates = [p for k, p in marks if k == "list"]
            if not candidates:
                raise NotApplicable("no list")
            p = rng.choice(candidates)
            header = buf[p]
            end = _varint_end(buf, p + 1) if header >> 4 == 15 else p + 1
            return buf[:p] + bytes([0xF0 | (header & 0x0F)]) + varint(rng.choice(HUGE)) + buf[end:]
        if kind == "huge_container":
            candidates = [p for k, p in marks if k in ("map", "binary")]
            if not candidates:
                raise NotApplicable("no map or binary")
            p = rng.choice(candidates)
            return buf[:p] + varint(rng.choice(HUGE)) + buf[_varint_end(buf, p):]
        p = rng.choice([p for k, p in marks if k == "struct"])
        depth = rng.choice([thrift.MAX_DEPTH - 1, thrift.MAX_DEPTH, thrift.MAX_DEPTH + 1, 200,
                            5000, 100_000])
        opener = rng.choice([b"\x1c", b"\x19", b"\x0c\x02"])  # struct, list of lists, long-id struct
        closer = b"\x00" * depth if opener != b"\x19" and rng.random() < 0.5 else b""
        return buf[:p] + opener * depth + closer + buf[p:]
    tree, end = decode_struct(buf)
    tree = mutate_tree(tree, kind, rng, file_size or len(buf), footer_start or len(buf))
    return encode_struct(tree) + buf[end:]


def _pick(rng: random.Random, candidates: list):
    """A (path, node) chosen by depth first, then uniformly: the few top-level fields
    (row groups, schema, key-value metadata, column orders) are picked as often as the many
    deep ones (statistics, encodings)."""
    by_depth: dict[int, list] = {}
    for path, node in candidates:
        by_depth.setdefault(len(path), []).append((path, node))
    return rng.choice(by_depth[rng.choice(sorted(by_depth))])


def mutate_tree(tree: Struct, kind: str, rng: random.Random, file_size: int,
                footer_start: int) -> Struct:
    nodes = list(sites(tree))
    if kind == "footer_field":
        ints = [(p, n) for p, n in nodes if isinstance(n, Field) and n.type in _RANGES]
        if not ints:
            raise NotApplicable("no integer field")
        path, f = _pick(rng, ints)
        value = interesting_int(rng, f.type, f.value, file_size, footer_start)
        return edit(tree, path, lambda f: Field(f.id, f.type, value))
    if kind == "footer_delete":
        deletable = [(p, n) for p, n in nodes if p and not isinstance(get(tree, p[:-1]), (Field, TMap))]
        if not deletable:
            raise NotApplicable("nothing to delete")
        path, _ = _pick(rng, deletable)
        return edit(tree, path, lambda _: _DELETE)
    if kind == "footer_duplicate":
        lists = [(p, n) for p, n in nodes if isinstance(n, TList) and n.items]
        if not lists:
            raise NotApplicable("no list")
        path, _ = _pick(rng, lists)

        def dup(lst: TList) -> TList:
            i = rng.randrange(len(lst.items))
            return TList(lst.elem_type, lst.items[: i + 1] + lst.items[i:], lst.is_set)
        return edit(tree, path, dup)
    if kind == "footer_type_swap":
        path, _ = _pick(rng, [(p, n) for p, n in nodes if isinstance(n, Field)])
        ttype = rng.choice(_SWAP_TYPES)
        value = _sample_value(rng, ttype)
        return edit(tree, path, lambda f: Field(f.id, ttype, value))
    raise ValueError(f"not a tree mutation: {kind}")


def _flip_bytes(buf: bytes, rng: random.Random, lo: int, hi: int) -> bytes:
    if hi <= lo:
        raise NotApplicable("empty region")
    out = bytearray(buf)
    for _ in range(rng.choice([1, 1, 2, 3, 8])):
        pos = rng.randrange(lo, hi)
        out[pos] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x0F, 0xF0, rng.randrange(256)])
    return bytes(out)


def _flip_bits(buf: bytes, rng: random.Random, lo: int, hi: int) -> bytes:
    if hi <= lo:
        raise NotApplicable("empty region")
    out = bytearray(buf)
    for _ in range(rng.choice([1, 1, 2, 4])):
        pos = rng.randrange(lo, hi)
        out[pos] ^= 1 << rng.randrange(8)
    return bytes(out)


# ---------------------------------------------------------------- consistent splicing

_CMD_OFFSETS = (9, 10, 11)  # data_page_offset, index_page_offset, dictionary_page_offset


def _field_type(s: Struct, field_id: int) -> T:
    """The type a field was read with (kept when its value is shifted)."""
    return next(f.type for f in s.fields if f.id == field_id)


def splice(data: bytes, start: int, end: int, new: bytes) -> bytes:
    """Replace data[start:end] (inside the data region) with `new`, shifting every absolute
    offset in the footer that lies at or after `end` and resizing the column chunk (and row
    group) that contains the range, so the rest of the file still lines up."""
    footer_start, raw = split(data)
    meta, _ = decode_struct(raw)
    delta = len(new) - (end - start)

    def shifted(v: Any) -> Any:
        return v + delta if isinstance(v, int) and not isinstance(v, bool) and v >= end else v

    def fix_meta(m: Struct) -> Struct:
        chunk_start = m.get(9)
        dict_off = m.get(11)
        if isinstance(dict_off, int) and 0 < dict_off < (chunk_start or 0):
            chunk_start = dict_off
        size = m.get(7)
        for fid in _CMD_OFFSETS:
            if m.has(fid):
                m = m.set(fid, _field_type(m, fid), shifted(m.get(fid)))
        if isinstance(chunk_start, int) and isinstance(size, int) and chunk_start <= start < chunk_start + size:
            m = m.set(7, T.I64, size + delta)
            if isinstance(m.get(6), int):
                m = m.set(6, T.I64, m.get(6) + delta)
        return m

    def fix_chunk(cc: Struct) -> Struct:
        for fid in (2, 4, 6):  # file_offset, offset_index_offset, column_index_offset
            if cc.has(fid):
                cc = cc.set(fid, _field_type(cc, fid), shifted(cc.get(fid)))
        if isinstance(cc.get(3), Struct):
            cc = cc.set(3, T.STRUCT, fix_meta(cc.get(3)))
        return cc

    def fix_group(rg: Struct) -> Struct:
        cols = rg.get(1)
        if isinstance(cols, TList):
            rg = rg.set(1, T.LIST, TList(cols.elem_type, tuple(fix_chunk(c) for c in cols.items)))
        if rg.has(5):
            first = rg.get(5)
            rg = rg.set(5, _field_type(rg, 5), shifted(first))
        return rg

    groups = meta.get(4)
    meta = meta.set(4, T.LIST, TList(groups.elem_type, tuple(fix_group(g) for g in groups.items)))
    body = data[:start] + new + data[end:footer_start]
    return assemble(body, len(body), encode_struct(meta))


def _with_crc(header: Struct, body: bytes) -> Struct:
    if header.has(PageHeader.CRC):
        crc = zlib.crc32(body)
        return header.set(PageHeader.CRC, T.I32, crc - (1 << 32) if crc >= 1 << 31 else crc)
    return header


def _replace_page(data: bytes, page, header: Struct, body: bytes) -> bytes:
    header = header.set(PageHeader.COMPRESSED_PAGE_SIZE, T.I32, len(body))
    header = _with_crc(header, body)
    return splice(data, page.offset, page.offset + page.size, encode_struct(header) + body)


_CODECS = {1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}


def _compress(codec: int, raw: bytes) -> bytes:
    if codec == 0:
        return raw
    if codec not in _CODECS:
        raise NotApplicable(f"codec {codec}")
    import pyarrow as pa

    return pa.Codec(_CODECS[codec]).compress(raw, asbytes=True)


def _decompress(codec: int, body: bytes, size: int) -> bytes:
    from pageindex.format.compression import decompress

    if codec not in (0, *_CODECS):
        raise NotApplicable(f"codec {codec}")
    return decompress(codec, body, size)


def _level_sections(chunk, pages, page) -> tuple[bytes, list[tuple[int, int, bool]], int]:
    """The page's level bytes as stored uncompressed: (buffer, [(start, end, prefixed)],
    values_start).  For v1 the buffer is the decompressed body; for v2 the raw body."""
    leaf = chunk.leaf
    body = bytes(pages.body(page))
    if page.kind == PageType.DATA_PAGE_V2:
        rep = (0, page.rep_levels_size, False)
        dfn = (page.rep_levels_size, page.rep_levels_size + page.def_levels_size, False)
        return body, [s for s in (rep, dfn) if s[1] > s[0]], dfn[1]
    raw = _decompress(chunk.codec, body, page.uncompressed_size)
    sections, pos = [], 0
    for max_level in (leaf.max_rep, leaf.max_def):
        if max_level == 0:
            continue
        (n,) = struct.unpack_from("<I", raw, pos)
        sections.append((pos, pos + 4 + n, True))
        pos += 4 + n
    return raw, sections, pos


def _store_page(data: bytes, chunk, page, buf: bytes) -> bytes:
    """Put a (mutated) level/value buffer from _level_sections back into the page."""
    if page.kind == PageType.DATA_PAGE_V2:
        return _replace_page(data, page, page.header, buf)  # the stored body, same size
    return _replace_page(data, page, page.header, _compress(chunk.codec, buf))


def _mutate_levels(buf: bytes, sections, rng: random.Random) -> bytes:
    start, end, prefixed = rng.choice(sections)
    out = bytearray(buf)
    stream = start + 4 if prefixed else start
    how = rng.choice(["bytes", "bytes", "length", "long_header", "packed_header", "rle_value",
                      "zero_header"])
    if how == "length" and prefixed:
        length = struct.unpack_from("<I", buf, start)[0]
        new = rng.choice([0, 1, length - 1, length + 1, length * 2, 2**31, 2**32 - 1])
        struct.pack_into("<I", out, start, new % 2**32)
        return bytes(out)
    if stream >= end:
        raise NotApplicable("empty level stream")
    if how == "long_header":  # a run header (ULEB128) longer than five bytes, or huge
        patch = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\xfe\xff\xff\xff\x0f"])
    elif how == "packed_header":  # a bit-packed run of a huge number of groups
        patch = varint((rng.choice([2**20, 2**27, 2**31 - 1]) << 1) | 1)
    elif how == "rle_value":  # an RLE run whose value exceeds the maximum level
        patch = bytes([rng.choice([2, 8, 0x7E]), 0xFF, 0xFF])
    elif how == "zero_header":  # runs of zero length
        patch = b"\x00" * rng.choice([1, 4, 64])
    else:
        return _flip_bytes(buf, rng, stream, end)
    pos = rng.randrange(stream, end)
    patch = patch[: end - pos]
    out[pos : pos + len(patch)] = patch
    return bytes(out)


# ---------------------------------------------------------------- mutations of a file

def mutate_file(name: str, data: bytes, kind: str, rng: random.Random) -> bytes:
    footer_start, raw = split(data)
    size = len(data)
    if kind in ("bytes", "bits"):
        where = rng.choice(["anywhere", "footer", "footer", "tail", "data"])
        lo, hi = {"anywhere": (0, size), "footer": (footer_start, size - 8),
                  "tail": (max(0, size - 16), size), "data": (4, footer_start)}[where]
        return (_flip_bytes if kind == "bytes" else _flip_bits)(data, rng, lo, hi)
    if kind == "truncate":
        how = rng.choice(["anywhere", "in_footer", "keep_tail"])
        if how == "anywhere":
            return data[: rng.randrange(size)]
        if how == "in_footer":
            return data[: rng.randrange(footer_start, size)]
        cut = rng.randrange(4, footer_start) if footer_start > 4 else 4
        return data[:cut] + raw + data[-8:]  # footer intact, data region shortened
    if kind == "cut_middle":
        if footer_start <= 5:
            raise NotApplicable("no data region")
        a = rng.randrange(4, footer_start)
        b = rng.randrange(a, min(footer_start, a + rng.choice([1, 16, 512, 1 << 20])) + 1)
        return data[:a] + data[b:]
    if kind == "tail_length":
        value = rng.choice([0, 1, len(raw) - 1, len(raw) + 1, size - 8, size - 12, size - 11,
                            size, 2**31, 2**32 - 1, (1 << 30) + 1])
        return data[:-8] + struct.pack("<I", value % 2**32) + data[-4:]
    if kind in ("huge_list", "huge_container", "deep_nesting"):
        return assemble(data, footer_start, mutate_thrift(raw, kind, rng))
    if kind == "chunk_field":
        return assemble(data, footer_start, encode_struct(_chunk_field(name, raw, rng, size, footer_start)))
    if kind.startswith("footer_"):
        tree, _ = decode_struct(raw)
        return assemble(data, footer_start, encode_struct(mutate_tree(tree, kind, rng, size, footer_start)))
    if kind == "page_header_bytes":
        _, _, page = rng.choice(_pages(name))
        return _flip_bytes(data, rng, page.offset, page.offset + page.header_size)
    if kind == "page_header_field":
        return _page_header_field(name, data, rng, size, footer_start)
    if kind == "page_body_bytes":
        _, _, page = rng.choice(_pages(name))
        body_start = page.offset + page.header_size
        if page.compressed_size == 0:
            raise NotApplicable("empty page body")
        out = _flip_bytes(data, rng, body_start, body_start + page.compressed_size)
        header = _with_crc(page.header, out[body_start : body_start + page.compressed_size])
        return splice(out, page.offset, body_start, encode_struct(header))
    if kind in ("level_stream", "value_bytes"):
        return _page_sections(name, data, kind, rng)
    raise ValueError(f"unknown mutation {kind}")


# ColumnChunk (cc), ColumnMetaData (meta), RowGroup (rg) and FileMetaData (fmd) fields aimed at.
_CHUNK_TARGETS = (
    ("meta", 9, T.I64), ("meta", 9, T.I64), ("meta", 11, T.I64), ("meta", 11, T.I64),
    ("meta", 7, T.I64), ("meta", 7, T.I64), ("meta", 6, T.I64), ("meta", 5, T.I64),
    ("meta", 10, T.I64), ("meta", 4, T.I32), ("meta", 1, T.I32),
    ("cc", 4, T.I64), ("cc", 5, T.I32), ("cc", 6, T.I64), ("cc", 7, T.I32), ("cc", 2, T.I64),
    ("rg", 3, T.I64), ("rg", 2, T.I64), ("rg", 5, T.I64), ("rg", 6, T.I64), ("fmd", 3, T.I64),
)


def _chunk_field(name: str, raw: bytes, rng: random.Random, size: int, footer_start: int) -> Struct:
    meta, _ = decode_struct(raw)
    groups = meta.get(4)
    if not isinstance(groups, TList) or not groups.items:
        raise NotApplicable("no row groups")
    where, fid, ttype = rng.choice(_CHUNK_TARGETS)
    if where == "fmd":
        old = meta.get(fid, 0)
        return meta.set(fid, ttype, interesting_int(rng, ttype, old, size, footer_start))
    rg_i = rng.randrange(len(groups.items))
    rg = groups.items[rg_i]
    if where == "rg":
        new_rg = rg.set(fid, ttype, interesting_int(rng, ttype, rg.get(fid, 0), size, footer_start))
    else:
        cols = rg.get(1)
        c_i = rng.randrange(len(cols.items))
        cc = cols.items[c_i]
        if where == "cc":
            if rng.random() < 0.3:  # an index location with only one of offset and length
                cc = cc.without(fid)
            else:
                cc = cc.set(fid, ttype, interesting_int(rng, ttype, cc.get(fid, 0), size, footer_start))
        else:
            m = cc.get(3)
            m = m.set(fid, ttype, interesting_int(rng, ttype, m.get(fid, 0), size, footer_start))
            cc = cc.set(3, T.STRUCT, m)
        items = list(cols.items)
        items[c_i] = cc
        new_rg = rg.set(1, T.LIST, TList(cols.elem_type, tuple(items)))
    items = list(groups.items)
    items[rg_i] = new_rg
    return meta.set(4, T.LIST, TList(groups.elem_type, tuple(items)))


_PAGE_FIELDS = {
    None: ((PageHeader.TYPE, T.I32), (PageHeader.UNCOMPRESSED_PAGE_SIZE, T.I32),
           (PageHeader.COMPRESSED_PAGE_SIZE, T.I32), (PageHeader.CRC, T.I32)),
    PageHeader.DATA_PAGE_HEADER: ((1, T.I32), (2, T.I32), (3, T.I32), (4, T.I32)),
    PageHeader.DICTIONARY_PAGE_HEADER: ((1, T.I32), (2, T.I32)),
    PageHeader.DATA_PAGE_HEADER_V2: ((1, T.I32), (2, T.I32), (3, T.I32), (4, T.I32), (5, T.I32), (6, T.I32)),
}
_SUB_HEADERS = (PageHeader.DATA_PAGE_HEADER, PageHeader.DICTIONARY_PAGE_HEADER, PageHeader.DATA_PAGE_HEADER_V2)


def _page_header_field(name: str, data: bytes, rng: random.Random, size: int, footer_start: int) -> bytes:
    _, _, page = rng.choice(_pages(name))
    header = page.header
    subs = [fid for fid in _SUB_HEADERS if isinstance(header.get(fid), Struct)]
    sub = rng.choice([None, None] + subs)
    if sub == PageHeader.DATA_PAGE_HEADER_V2 and rng.random() < 0.15:
        header = header.set(sub, T.STRUCT, header.get(sub).set(7, T.TRUE, rng.random() < 0.5))
    elif rng.random() < 0.1:  # a page of another kind, or two sub-headers
        other = rng.choice([*_SUB_HEADERS, 6])  # 6: index_page_header
        header = header.set(other, T.STRUCT, Struct((Field(1, T.I32, 3), Field(2, T.I32, 0))))
    else:
        fid, ttype = rng.choice(_PAGE_FIELDS[sub])
        target = header if sub is None else header.get(sub)
        old = target.get(fid, 0)
        old = old if isinstance(old, int) else 0
        value = interesting_int(rng, ttype, old, page.compressed_size + page.header_size, page.uncompressed_size)
        target = target.set(fid, ttype, value)
        header = target if sub is None else header.set(sub, T.STRUCT, target)
    # The header's length may change: the rest of the file is shifted to match.
    return splice(data, page.offset, page.offset + page.header_size, encode_struct(header))


def _page_sections(name: str, data: bytes, kind: str, rng: random.Random) -> bytes:
    candidates = []
    for chunk, pages, page in _pages(name, data_only=True):
        if page.kind not in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2) or page.num_values == 0:
            continue
        if chunk.codec not in (0, *_CODECS) and page.kind == PageType.DATA_PAGE:
            continue
        if kind == "level_stream" and not (chunk.leaf.max_rep or chunk.leaf.max_def):
            continue
        candidates.append((chunk, pages, page))
    if not candidates:
        raise NotApplicable(f"no page for {kind}")
    # Prefer nested columns (their levels are decoded by pageindex itself).
    nested = [c for c in candidates if c[0].leaf.max_rep or c[0].leaf.max_def > 1]
    chunk, pages, page = rng.choice(nested if nested and rng.random() < 0.7 else candidates)
    if page.kind == PageType.DATA_PAGE_V2 and kind == "value_bytes":
        # v2 values may be compressed: flip bytes in the stored values section
        body = bytes(pages.body(page))
        lo = page.rep_levels_size + page.def_levels_size
        new_body = _flip_bytes(body, rng, lo, len(body))
        return _replace_page(data, page, page.header, new_body)
    buf, sections, values_start = _level_sections(chunk, pages, page)
    if kind == "level_stream":
        if not sections:
            raise NotApplicable("page without level bytes")
        new = _mutate_levels(buf, sections, rng)
    else:
        new = _flip_bytes(buf, rng, values_start, len(buf))
    return _store_page(data, chunk, page, new)


# ---------------------------------------------------------------- recipes

def thrift_base(name: str, rng: random.Random) -> bytes:
    """The buffer a `thrift` recipe mutates: the FileMetaData, or a page header (with some of
    the bytes after it, as the page walk sees them)."""
    data = source_bytes(name)
    if rng.random() < 0.75:
        return split(data)[1]
    _, _, page = rng.choice(_pages(name))
    return data[page.offset : page.offset + page.header_size + rng.choice([0, 1, 16, 64])]


def build(recipe: dict) -> bytes:
    """The bytes a recipe stands for: {"file", "mutation", "seed", "target"}."""
    rng = random.Random(recipe["seed"])
    name, kind = recipe["file"], recipe["mutation"]
    if recipe["target"] == "thrift":
        base = thrift_base(name, rng)
        data = source_bytes(name)
        return mutate_thrift(base, kind, rng, len(data), split(data)[0])
    return mutate_file(name, source_bytes(name), kind, rng)


def options(recipe: dict) -> dict:
    """retrofit options drawn (deterministically) for a recipe of the `retrofit` target."""
    rng = random.Random(f"options:{recipe['seed']}")
    return {"trust_page_stats": rng.random() < 0.35, "truncate_length": rng.choice([1, 4, 16, 64]),
            "force": rng.random() < 0.9}


def corpus_pool(max_bytes: int) -> list[str]:
    """Corpus-relative paths of every valid (candidate or oracle) file up to max_bytes."""
    from tests.helpers.corpus import corpus_rows

    return [r["path"] for cat in ("candidate", "oracle") for r in corpus_rows(cat)
            if int(r["size"]) <= max_bytes]


def nested_pool(max_bytes: int) -> list[str]:
    from tests.helpers.corpus import corpus_rows

    return [r["path"] for cat in ("candidate", "oracle") for r in corpus_rows(cat)
            if int(r["size"]) <= max_bytes and r["nested"] and "LZ4" not in r["codecs"].split(",")]


def describe(recipe: dict) -> str:
    return f"{recipe['target']}:{recipe['mutation']}@{recipe['file']}#{recipe['seed']}"


def corpus_file(name: str) -> Path | None:
    return None if name.startswith("synthetic:") else CORPUS_DIR / name
