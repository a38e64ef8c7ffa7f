"""pageindex.format.index_blocks: the direct ColumnIndex and OffsetIndex encoders write the bytes
format.thrift's generic encoder writes for the same structs, on random and corpus-derived inputs."""
from __future__ import annotations

import random
import struct

import pytest

from pageindex.format.index_blocks import column_index_bytes, offset_index_bytes
from pageindex.format.parquet_thrift import ColumnChunk, ColumnIndex, FileMetaData, OffsetIndex, PageLocation, RowGroup
from pageindex.format.thrift import Struct, T, TList, decode_struct, encode_struct
from tests.helpers.corpus import corpus_path, corpus_rows
from tests.helpers.thrift_trees import rebuilt

VALID = [corpus_path(r) for cat in ("candidate", "oracle") for r in corpus_rows(cat)]
_I64_LISTS = (ColumnIndex.NULL_COUNTS, ColumnIndex.REPETITION_LEVEL_HISTOGRAMS,
              ColumnIndex.DEFINITION_LEVEL_HISTOGRAMS, ColumnIndex.NAN_COUNTS)


def generic_column_index(null_pages, mins, maxs, boundary_order, *i64_lists) -> bytes:
    fields = [ColumnIndex.field(ColumnIndex.NULL_PAGES, TList(T.TRUE, tuple(null_pages))),
              ColumnIndex.field(ColumnIndex.MIN_VALUES, TList(T.BINARY, tuple(mins))),
              ColumnIndex.field(ColumnIndex.MAX_VALUES, TList(T.BINARY, tuple(maxs))),
              ColumnIndex.field(ColumnIndex.BOUNDARY_ORDER, boundary_order)]
    fields += [ColumnIndex.field(i, TList(T.I64, tuple(v))) for i, v in zip(_I64_LISTS, i64_lists) if v is not None]
    return encode_struct(Struct(tuple(fields)))


def generic_offset_index(offsets, sizes, first_rows, unencoded) -> bytes:
    locations = tuple(PageLocation.make(OFFSET=o, COMPRESSED_PAGE_SIZE=s, FIRST_ROW_INDEX=f)
                      for o, s, f in zip(offsets, sizes, first_rows))
    fields = [OffsetIndex.field(OffsetIndex.PAGE_LOCATIONS, TList(T.STRUCT, locations))]
    if unencoded is not None:
        fields.append(OffsetIndex.field(OffsetIndex.UNENCODED_BYTE_ARRAY_DATA_BYTES, TList(T.I64, tuple(unencoded))))
    return encode_struct(Struct(tuple(fields)))


def _int(rng: random.Random, bits: int) -> int:
    """Small, one-byte-boundary and full-width values, either sign."""
    magnitude = rng.choice([0, 1, 63, 64, 127, 128, 8191, 8192, rng.getrandbits(rng.randint(1, bits - 1))])
    return -magnitude - 1 if rng.random() < 0.2 and magnitude < (1 << (bits - 1)) else magnitude


def test_random_column_indexes_match_the_generic_encoder():
    rng = random.Random(28)
    for _ in range(500):
        n = rng.choice([0, 1, 2, 14, 15, 16, rng.randint(0, 300)])
        mins = [rng.randbytes(rng.choice([0, 1, 8, 127, 128, 300])) for _ in range(n)]
        maxs = [rng.randbytes(rng.choice([0, 4, 16, 129])) for _ in range(n)]
        lists = [[_int(rng, 64) for _ in range(n * rng.randint(1, 3))] if rng.random() < 0.6 else None
                 for _ in _I64_LISTS]
        args = ([rng.random() < 0.3 for _ in range(n)], mins, maxs, rng.randint(0, 2), *lists)
        assert column_index_bytes(*args) == generic_column_index(*args)


def test_random_offset_indexes_match_the_generic_encoder():
    rng = random.Random(29)
    for _ in range(500):
        n = rng.choice([0, 1, 2, 14, 15, 16, rng.randint(0, 300)])
        columns = ([_int(rng, 64) for _ in range(n)], [_int(rng, 32) for _ in range(n)], [_int(rng, 64) for _ in range(n)])
        unencoded = [_int(rng, 64) for _ in range(n)] if rng.random() < 0.5 else None
        assert offset_index_bytes(*columns, unencoded) == generic_offset_index(*columns, unencoded)


def test_offset_index_columns_must_have_one_length():
    with pytest.raises(ValueError):
        offset_index_bytes([4, 100], [96], [0, 3])


def _corpus_blocks() -> list[tuple[str, bytes, bytes]]:
    """Every ColumnIndex and OffsetIndex the corpus files hold: (file name, kind, raw block)."""
    blocks = []
    for path in VALID:
        data = path.read_bytes()
        (n,) = struct.unpack("<I", data[-8:-4])
        meta = decode_struct(data[-8 - n : -8])[0]
        for rg in meta.get(FileMetaData.ROW_GROUPS).items:
            for cc in rg.get(RowGroup.COLUMNS).items:
                for kind, offset, length in (("ci", ColumnChunk.COLUMN_INDEX_OFFSET, ColumnChunk.COLUMN_INDEX_LENGTH),
                                             ("oi", ColumnChunk.OFFSET_INDEX_OFFSET, ColumnChunk.OFFSET_INDEX_LENGTH)):
                    start, size = cc.get(offset), cc.get(length)
                    if isinstance(start, int) and isinstance(size, int) and 0 <= start <= start + size <= len(data):
                        blocks.append((path.name, kind, data[start : start + size]))
    return blocks


def test_corpus_indexes_match_the_generic_encoder():
    """The corpus writers' own indexes, decoded, written again both ways: the same bytes, and
    the writer's where it wrote canonical form and no field the builder never writes."""
    seen = {"ci": 0, "oi": 0}
    for name, kind, raw in _corpus_blocks():
        tree = decode_struct(raw)[0]
        if kind == "ci":
            if not {f.id for f in tree.fields} <= set(ColumnIndex.TYPES):
                continue
            lists = [None if tree.get(i) is None else tree.get(i).items for i in _I64_LISTS]
            args = (tree.get(ColumnIndex.NULL_PAGES).items, tree.get(ColumnIndex.MIN_VALUES).items,
                    tree.get(ColumnIndex.MAX_VALUES).items, tree.get(ColumnIndex.BOUNDARY_ORDER), *lists)
            ours = column_index_bytes(*args)
            assert ours == generic_column_index(*args) == encode_struct(rebuilt(tree)), name
        else:
            locations = tree.get(OffsetIndex.PAGE_LOCATIONS).items
            unencoded = tree.get(OffsetIndex.UNENCODED_BYTE_ARRAY_DATA_BYTES)
            columns = [[loc.get(i) for loc in locations] for i in (PageLocation.OFFSET,
                       PageLocation.COMPRESSED_PAGE_SIZE, PageLocation.FIRST_ROW_INDEX)]
            ours = offset_index_bytes(*columns, None if unencoded is None else unencoded.items)
            assert ours == generic_offset_index(*columns, None if unencoded is None else unencoded.items)
        assert decode_struct(ours)[0] == tree, name
        seen[kind] += 1
    assert seen["ci"] > 50 and seen["oi"] > 50
