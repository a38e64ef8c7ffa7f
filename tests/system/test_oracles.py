"""Oracle comparison: for every corpus file whose writer produced a page index, strip that index,
retrofit the stripped copy with pageindex, and compare OUR index with the ORIGINAL writer's.

What is compared, chunk by chunk:
  * presence of OffsetIndex / ColumnIndex;
  * page locations (offset, compressed_page_size) and first_row_index: always identical;
  * null_pages, null_counts: identical except for known writer defects;
  * min/max bounds: identical, and for flat columns ours are EXACT (recomputed here from the
    data read by pyarrow, sliced by first_row_index) while the writer's are valid bounds;
  * boundary_order, histograms, unencoded_byte_array_data_bytes, nan_counts.

Every difference found must be listed in EXPECTED below with the rule that explains it; an
unlisted difference fails, and so does a listed one that no longer occurs (the table stays true).
verify() is also run on each original: VERIFY_FAILURES lists the writers whose index is invalid.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.format.column_order import Kind, order_for
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import FileMetaData, Type
from pageindex.format.thrift import decode_struct
from pageindex.index.reader import read_column_index, read_offset_index
from pageindex.io.storage import open_source
from pageindex.verify import verify
from tests.helpers.corpus import corpus_path, corpus_rows
from tests.helpers.strip import footer_start, strip_page_index

pytestmark = pytest.mark.slow  # every oracle file stripped, retrofitted and compared

ORACLES = {corpus_path(r).name: corpus_path(r) for r in corpus_rows("oracle")}
TRUNCATE = 64  # pageindex default, = parquet-java / arrow-rs default

# ------------------------------------------------------------------ expected differences
# Detail strings: "ours_only" / "writer_only" = only one side has the index or optional field;
# "values" = both have it and it differs; "W->O" for boundary orders (writer -> ours).
ALL_NULL_BO = ("ASCENDING->UNORDERED",
               ("every page is a null page: there are no bounds to order; parquet-mr writes "
               "ASCENDING, pageindex UNORDERED (as Arrow C++). Both are valid."))
HIST_ADDED = ("ours_only",
              ("optional definition_level_histograms (format 2.11 SizeStatistics) added; the writer "
              "predates them (parquet-mr < 1.14) or omits them when max_definition_level <= 1 "
              "(allowed by parquet.thrift). verify(ours) checks ours against the levels."))
UNENC_ADDED = ("ours_only",
               ("optional unencoded_byte_array_data_bytes added; the writer predates it "
               "(parquet-mr < 1.14). verify(ours) checks it against the values."))
CHECKSUM_DEFECT = (
    "parquet-mr 1.13.0-SNAPSHOT (build 019361e0) wrote null_pages=true and null_counts=-1 "
    "with empty bounds on pages that hold 2,560 values each: an invalid index (a reader "
    "trusting it skips every page). Ours has real null_pages/null_counts/bounds.")
CHECKSUM_DIFFS = {
    ("a", "null_pages"): ("values", CHECKSUM_DEFECT),
    ("a", "null_counts"): ("values", CHECKSUM_DEFECT),
    ("a", "bounds"): ("values", CHECKSUM_DEFECT),
    # The writer's ASCENDING covers zero non-null pages; our real bounds decrease.
    ("a", "boundary_order"): ("ASCENDING->DESCENDING", CHECKSUM_DEFECT),
    ("b", "null_pages"): ("values", CHECKSUM_DEFECT),
    ("b", "null_counts"): ("values", CHECKSUM_DEFECT),
    ("b", "bounds"): ("values", CHECKSUM_DEFECT),
}
ALLTYPES_COLUMNS = ("id", "bool_col", "tinyint_col", "smallint_col", "int_col", "bigint_col",
                    "float_col", "double_col", "date_string_col", "string_col", "year", "month")
ALLTYPES_DIFFS = {
    **{(c, "definition_level_histograms"): HIST_ADDED for c in ALLTYPES_COLUMNS},
    ("date_string_col", "unencoded_byte_array_data_bytes"): UNENC_ADDED,
    ("string_col", "unencoded_byte_array_data_bytes"): UNENC_ADDED,
    # timestamp_col (INT96): OffsetIndex only on both sides (INT96 has no defined order).
}
NAN_COUNTS_TYPEDEF = ("writer_only",
                      ("parquet-mr 1.18 writes nan_counts (all 0) also for TYPE_ORDER float "
                      "columns; pageindex writes nan_counts only under IEEE_754_TOTAL_ORDER "
                      "(TYPE_ORDER chunks with any NaN get no ColumnIndex, so the count is 0 by "
                      "construction). The chunks with NaN (row groups 1, 2) have no ColumnIndex "
                      "on either side."))
MAP_NO_VALUE_CI = ("ours_only",
                   ("parquet-rs wrote this file with statistics disabled (no chunk statistics "
                   "either): arrow-rs then writes an OffsetIndex only. Not a rule of ours."))
VARIANT_VALUE_BO = ALL_NULL_BO

EXPECTED: dict[str, dict[tuple[str, str], tuple[str, str]]] = {
    "alltypes_tiny_pages.parquet": ALLTYPES_DIFFS,
    "alltypes_tiny_pages_plain.parquet": ALLTYPES_DIFFS,
    # parquet-rs 55.1 wrote exact bounds here (the file's truncation is in the chunk statistics,
    # not in the page index), so ours equal them byte for byte.
    "binary_truncated_min_max.parquet": {},
    "data_index_bloom_encoding_stats.parquet": {
        ("String", "definition_level_histograms"): HIST_ADDED,
        ("String", "unencoded_byte_array_data_bytes"): UNENC_ADDED,
    },
    "data_index_bloom_encoding_with_length.parquet": {
        ("String", "definition_level_histograms"): HIST_ADDED,
        ("String", "unencoded_byte_array_data_bytes"): UNENC_ADDED,
        # parquet-rs < 50 always wrote UNORDERED (it did not compute the order); one page is
        # trivially ASCENDING. UNORDERED is never wrong, just less useful.
        ("String", "boundary_order"): ("UNORDERED->ASCENDING",
                                       "parquet-rs 49 never computed boundary_order"),
    },
    "datapage_v1-snappy-compressed-checksum.parquet": CHECKSUM_DIFFS,
    "datapage_v1-uncompressed-checksum.parquet": CHECKSUM_DIFFS,
    "datapage_v2_empty_datapage.snappy.parquet": {
        ("value", "boundary_order"): ALL_NULL_BO,
        ("value", "definition_level_histograms"): HIST_ADDED,
    },
    "delta_encoding_required_column.parquet": {
        (c, "unencoded_byte_array_data_bytes"): UNENC_ADDED
        for c in ("c_customer_id:", "c_salutation:", "c_first_name:", "c_last_name:",
                  "c_preferred_cust_flag:", "c_birth_country:", "c_email_address:",
                  "c_last_review_date:")
    },
    "dict-page-offset-zero.parquet": {("l_partkey", "definition_level_histograms"): HIST_ADDED},
    "fixed_length_byte_array.parquet": {("flba_field", "definition_level_histograms"): HIST_ADDED},
    "floating_orders_nan_count.parquet": {
        (c, "nan_counts"): NAN_COUNTS_TYPEDEF
        for c in ("float_typedef", "double_typedef", "float16_typedef")
    },
    # GEOGRAPHY BYTE_ARRAY columns: OffsetIndex only on both sides (no defined sort order).
    "geography-lines.parquet": {},
    "geography-points.parquet": {},
    "geography-polygons.parquet": {},
    "hadoop_lz4_compressed_larger.parquet": {("a", "unencoded_byte_array_data_bytes"): UNENC_ADDED},
    "incorrect_map_schema.parquet": {
        ("my_map.key_value.key", "definition_level_histograms"): HIST_ADDED,
        ("my_map.key_value.key", "repetition_level_histograms"): HIST_ADDED,
        ("my_map.key_value.key", "unencoded_byte_array_data_bytes"): UNENC_ADDED,
        ("my_map.key_value.value", "definition_level_histograms"): HIST_ADDED,
        ("my_map.key_value.value", "repetition_level_histograms"): HIST_ADDED,
        ("my_map.key_value.value", "unencoded_byte_array_data_bytes"): UNENC_ADDED,
    },
    "int32_with_null_pages.parquet": {("int32_field", "definition_level_histograms"): HIST_ADDED},
    # INT96: OffsetIndex only on both sides.
    "int96_from_spark.parquet": {},
    "map_no_value.parquet": {
        (c, "column_index"): MAP_NO_VALUE_CI
        for c in ("my_map.key_value.key", "my_map.key_value.value", "my_map_no_v.key_value.key",
                  "my_list.list.element")
    },
    "old_list_structure.parquet": {},
    "plain-dict-uncompressed-checksum.parquet": {
        ("binary_field", "unencoded_byte_array_data_bytes"): UNENC_ADDED},
    "repeated_primitive_no_list.parquet": {},
    "rle-dict-snappy-checksum.parquet": {
        ("binary_field", "unencoded_byte_array_data_bytes"): UNENC_ADDED},
    "case-044.parquet": {
        ("var.metadata", "definition_level_histograms"): HIST_ADDED,
        **{(c, "boundary_order"): VARIANT_VALUE_BO
           for c in ("var.value", "var.typed_value.c.value", "var.typed_value.c.typed_value.a.value",
                     "var.typed_value.c.typed_value.b.value", "var.typed_value.d.value")},
    },
    "case-083.parquet": {
        ("var.metadata", "definition_level_histograms"): HIST_ADDED,
        **{(c, "boundary_order"): VARIANT_VALUE_BO
           for c in ("var.value", "var.typed_value.c.typed_value.a.value", "var.typed_value.d.value")},
    },
    "case-126.parquet": {
        ("var.metadata", "definition_level_histograms"): HIST_ADDED,
        **{(c, "boundary_order"): VARIANT_VALUE_BO
           for c in ("var.value", "var.typed_value.list.element.typed_value.a.value",
                     "var.typed_value.list.element.typed_value.b.value")},
    },
}

# verify(original): writers whose index is invalid, and the checks it fails.
VERIFY_FAILURES = {
    "datapage_v1-snappy-compressed-checksum.parquet": {("a", "null_pages"), ("a", "null_counts"),
                                                       ("b", "null_pages"), ("b", "null_counts")},
    "datapage_v1-uncompressed-checksum.parquet": {("a", "null_pages"), ("a", "null_counts"),
                                                  ("b", "null_pages"), ("b", "null_counts")},
}

# Chunks pageindex gives an OffsetIndex but no ColumnIndex, and the rule why (the writers
# omitted exactly these too, so they are not differences).
OMITTED = {
    "alltypes_tiny_pages.parquet": {"timestamp_col": "INT96"},
    "alltypes_tiny_pages_plain.parquet": {"timestamp_col": "INT96"},
    # row groups 1 and 2 hold NaN; TYPE_ORDER columns get no ColumnIndex (parquet-java >= 1.15
    # does the same); the IEEE_754_TOTAL_ORDER twins do get one, with nan_counts
    "floating_orders_nan_count.parquet": {"float_typedef": "NaN", "double_typedef": "NaN",
                                          "float16_typedef": "NaN"},
    "geography-lines.parquet": {"geometry": "geospatial"},
    "geography-points.parquet": {"geometry": "geospatial"},
    "geography-polygons.parquet": {"geometry": "geospatial"},
    "int96_from_spark.parquet": {"a": "INT96"},
}

BO_NAMES = {0: "UNORDERED", 1: "ASCENDING", 2: "DESCENDING"}
OPTIONAL_FIELDS = ("definition_level_histograms", "repetition_level_histograms", "nan_counts")


def test_tables_cover_exactly_the_oracles():
    assert len(ORACLES) == 27
    assert set(EXPECTED) == set(ORACLES)
    assert set(VERIFY_FAILURES) <= set(ORACLES)


# ------------------------------------------------------------------ shared work per file

@dataclass
class ChunkPair:
    rg: int
    column: str
    chunk: object  # ChunkMeta of the original
    declared: object  # declared column order (thrift Struct) or None
    w_oi: object
    w_ci: object
    o_oi: object
    o_ci: object


@dataclass
class OracleRun:
    original: Path
    stripped: Path
    out: Path
    result: pageindex.RetrofitResult
    pairs: list[ChunkPair]


def _load(path: Path) -> dict:
    with open_source(str(path)) as s:
        footer = read_footer(s)
        orders = footer.metadata.get(FileMetaData.COLUMN_ORDERS)
        return {
            (c.row_group, c.leaf.dotted): (c, orders.items[c.column] if orders else None,
                                           read_offset_index(s, c), read_column_index(s, c))
            for row in footer.chunks for c in row
        }


_RUNS: dict[str, OracleRun] = {}


@pytest.fixture(scope="module")
def oracle_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("oracles")


def run(name: str, oracle_dir: Path) -> OracleRun:
    if name not in _RUNS:
        original = ORACLES[name]
        stripped = strip_page_index(original, oracle_dir / f"{name}.stripped")
        out = oracle_dir / f"{name}.indexed"
        result = pageindex.retrofit(str(stripped), str(out))
        w, o = _load(original), _load(out)
        assert w.keys() == o.keys()
        pairs = [ChunkPair(k[0], k[1], w[k][0], w[k][1], w[k][2], w[k][3], o[k][2], o[k][3]) for k in w]
        _RUNS[name] = OracleRun(original, stripped, out, result, pairs)
    return _RUNS[name]


def differences(r: OracleRun) -> dict[tuple[str, str], str]:
    """Every difference between the writer's index and ours, keyed by (column, aspect).

    Page locations / first_row_index differences are asserted away here: they must never occur.
    """
    out: dict[tuple[str, str], str] = {}

    def note(col: str, aspect: str, detail: str) -> None:
        prev = out.setdefault((col, aspect), detail)
        assert prev == detail, f"{col} {aspect}: differs by row group ({prev} vs {detail})"

    for p in r.pairs:
        col = p.column
        if (p.w_oi is None) != (p.o_oi is None):
            note(col, "offset_index", "ours_only" if p.o_oi else "writer_only")
        if p.w_oi is not None and p.o_oi is not None:
            assert p.w_oi.pages == p.o_oi.pages, f"{r.original.name} rg {p.rg} {col}: page locations"
            a, b = p.w_oi.unencoded_byte_array_data_bytes, p.o_oi.unencoded_byte_array_data_bytes
            if a != b:
                note(col, "unencoded_byte_array_data_bytes",
                     "values" if a and b else ("ours_only" if b else "writer_only"))
        if (p.w_ci is None) != (p.o_ci is None):
            note(col, "column_index", "ours_only" if p.o_ci else "writer_only")
        if p.w_ci is None or p.o_ci is None:
            continue
        w, o = p.w_ci, p.o_ci
        assert len(w) == len(o) == len(p.o_oi.pages)
        if w.null_pages != o.null_pages:
            note(col, "null_pages", "values")
        if w.null_counts != o.null_counts:
            note(col, "null_counts", "values" if w.null_counts and o.null_counts else
                 ("ours_only" if o.null_counts else "writer_only"))
        if w.min_values != o.min_values or w.max_values != o.max_values:
            note(col, "bounds", "values")
        if w.boundary_order != o.boundary_order:
            note(col, "boundary_order", f"{BO_NAMES[w.boundary_order]}->{BO_NAMES[o.boundary_order]}")
        for name in OPTIONAL_FIELDS:
            a, b = getattr(w, name), getattr(o, name)
            if a != b:
                note(col, name, "values" if a and b else ("ours_only" if b else "writer_only"))
    return out


# ------------------------------------------------------------------ the tests

@pytest.mark.parametrize("name", sorted(ORACLES))
def test_retrofit_keeps_prefix(name, oracle_dir):
    r = run(name, oracle_dir)
    stripped = r.stripped.read_bytes()
    assert r.out.read_bytes()[:len(stripped)] == stripped  # the input whole, its footer included
    assert r.result.status == "indexed"
    # Every chunk gets an OffsetIndex unless a record is split across pages.
    for p in r.pairs:
        assert p.o_oi is not None, (p.rg, p.column)
    omitted = {c.column: c.reason for c in r.result.chunks if not c.column_index}
    expected = OMITTED.get(name, {})
    assert set(omitted) == set(expected)
    for column, rule in expected.items():
        assert rule in omitted[column], omitted[column]


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_oracle_differences_are_all_explained(name, oracle_dir):
    r = run(name, oracle_dir)
    found = differences(r)
    expected = {k: v[0] for k, v in EXPECTED[name].items()}
    unexplained = {k: v for k, v in found.items() if expected.get(k) != v}
    gone = {k: v for k, v in expected.items() if k not in found}
    assert not unexplained, f"unexplained differences: {unexplained}"
    assert not gone, f"expected differences that no longer occur: {gone}"


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_verify_original_and_ours(name, oracle_dir):
    r = run(name, oracle_dir)
    original = verify(str(r.original))
    got = {(v.column, v.check) for v in original.violations}
    assert got == VERIFY_FAILURES.get(name, set()), [str(v) for v in original.violations]
    ours = verify(str(r.out))
    assert ours.ok, [str(v) for v in ours.violations]
    assert ours.chunks_with_offset_index == ours.chunks


@pytest.mark.parametrize("name", sorted(n for n in ORACLES if "checksum" in n and "datapage_v1" in n))
def test_checksum_writer_defect_detected_and_fixed(name, oracle_dir):
    """parquet-mr 1.13 checksum files: null_pages=true / null_counts=-1 on pages with values."""
    r = run(name, oracle_dir)
    for p in r.pairs:
        assert all(p.w_ci.null_pages) and set(p.w_ci.null_counts) == {-1}
        assert not any(p.o_ci.null_pages) and set(p.o_ci.null_counts) == {0}
        assert all(m for m in p.o_ci.min_values)
    checks = {v.check for v in verify(str(r.original)).violations}
    assert {"null_pages", "null_counts"} <= checks


# ------------------------------------------------------------------ exact bounds, flat columns

def _flat(chunk) -> bool:
    return chunk.leaf.max_rep == 0 and len(chunk.leaf.path) == 1


def _keys(arr: pa.Array, leaf, order) -> list:
    """Comparable Python keys for the non-null values of a pyarrow array, per the column order
    (computed independently of pageindex's own value code)."""
    t = arr.type
    if pa.types.is_floating(t):
        np_arr = arr.to_numpy(zero_copy_only=False)
        width = np_arr.dtype.itemsize * 8
        raw = np_arr.view({16: np.uint16, 32: np.uint32, 64: np.uint64}[width]).astype(object)
        return [("f", float(f), int(r), width) for f, r in zip(np_arr.tolist(), raw.tolist())]
    if pa.types.is_decimal(t):
        return [int(d.scaleb(t.scale)) for d in arr.to_pylist()]
    if pa.types.is_temporal(t):
        arr = arr.cast(pa.int64() if t.bit_width == 64 else pa.int32())
    values = arr.to_pylist()
    if values and isinstance(values[0], str):
        return [v.encode() for v in values]
    if values and isinstance(values[0], bool):
        return [int(v) for v in values]
    return values


def _total_key(k: tuple) -> int:
    _, _, raw, width = k
    signed = raw - (1 << width) if raw >> (width - 1) else raw
    return signed ^ ((1 << (width - 1)) - 1) if signed < 0 else signed


def _expected_bytes(leaf, order, value) -> bytes:
    pt = leaf.physical_type
    if pt == Type.BOOLEAN:
        return bytes([value])
    if pt in (Type.INT32, Type.INT64):
        fmt = {Type.INT32: "i", Type.INT64: "q"}[pt]
        return struct.pack("<" + (fmt.upper() if order.kind is Kind.UNSIGNED else fmt), value)
    if order.kind is Kind.FLOAT:
        return value[2].to_bytes(value[3] // 8, "little")
    if order.kind is Kind.DECIMAL_BYTES:
        return value.to_bytes(leaf.type_length, "big", signed=True)
    return value


def _page_min_max(keys: list, order) -> tuple:
    if order.kind is not Kind.FLOAT:
        return min(keys), max(keys)
    numbers = [k for k in keys if not math.isnan(k[1])]
    if order.total_order:
        pool = numbers or keys
        return min(pool, key=_total_key), max(pool, key=_total_key)
    assert len(numbers) == len(keys), "NaN under TYPE_ORDER must have been refused"
    lo, hi = min(numbers, key=lambda k: k[1]), max(numbers, key=lambda k: k[1])
    zero = {16: (0x8000, 0), 32: (0x80000000, 0), 64: (1 << 63, 0)}[lo[3]]
    if lo[1] == 0:  # TYPE_ORDER zero rule: a min of zero is -0.0, a max of zero is +0.0
        lo = ("f", -0.0, zero[0], lo[3])
    if hi[1] == 0:
        hi = ("f", 0.0, zero[1], hi[3])
    return lo, hi


def _stored_key(leaf, order, raw: bytes):
    """A stored bound as a key comparable with _keys() output."""
    pt = leaf.physical_type
    if order.kind is Kind.FLOAT:
        width = len(raw) * 8
        f = struct.unpack({2: "<e", 4: "<f", 8: "<d"}[len(raw)], raw)[0]
        return ("f", f, int.from_bytes(raw, "little"), width)
    if pt == Type.BOOLEAN:
        return raw[0]
    if pt in (Type.INT32, Type.INT64):
        return int.from_bytes(raw, "little", signed=order.kind is Kind.SIGNED)
    if order.kind is Kind.DECIMAL_BYTES:
        return int.from_bytes(raw, "big", signed=True)
    return raw


def _le(a, b, order) -> bool:
    if order.kind is Kind.FLOAT:
        return _total_key(a) <= _total_key(b) if order.total_order else a[1] <= b[1]
    return a <= b


# Files without any flat column that has a ColumnIndex: nested-only schemas, and the INT96-only file.
NO_FLAT_COLUMN_INDEX = {"incorrect_map_schema.parquet", "map_no_value.parquet",
                        "old_list_structure.parquet", "repeated_primitive_no_list.parquet",
                        "int96_from_spark.parquet"}


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_bounds_exact_for_flat_columns(name, oracle_dir):
    """Ours equal the real page min/max (computed here from pyarrow's read of the ORIGINAL file,
    sliced by first_row_index) unless truncated; the writer's are valid bounds either way."""
    r = run(name, oracle_dir)
    flat = [p for p in r.pairs if p.o_ci is not None and _flat(p.chunk)]
    if not flat:
        # Nested columns are compared with the writer and checked by verify() only.
        assert name in NO_FLAT_COLUMN_INDEX
        return
    assert name not in NO_FLAT_COLUMN_INDEX
    pf = pq.ParquetFile(r.original)
    checked = 0
    for p in flat:
        leaf = p.chunk.leaf
        order = order_for(leaf, p.declared)
        column = pf.read_row_group(p.rg, columns=[leaf.path[0]]).column(0).combine_chunks()
        firsts = [loc.first_row_index for loc in p.o_oi.pages] + [len(column)]
        for i in range(len(firsts) - 1):
            page = column.slice(firsts[i], firsts[i + 1] - firsts[i])
            nulls = page.null_count
            assert p.o_ci.null_counts[i] == nulls
            assert p.o_ci.null_pages[i] == (nulls == len(page))
            checked += 1
            if nulls == len(page):
                assert p.o_ci.min_values[i] == p.o_ci.max_values[i] == b""
                continue
            keys = _keys(page.drop_null(), leaf, order)
            lo, hi = _page_min_max(keys, order)
            exact_lo, exact_hi = _expected_bytes(leaf, order, lo), _expected_bytes(leaf, order, hi)
            ours_lo, ours_hi = p.o_ci.min_values[i], p.o_ci.max_values[i]
            if order.truncatable and len(exact_lo) > TRUNCATE:
                assert len(ours_lo) <= TRUNCATE and exact_lo.startswith(ours_lo)
            else:
                assert ours_lo == exact_lo, (p.column, i)
            if order.truncatable and len(exact_hi) > TRUNCATE:
                assert ours_hi >= exact_hi and (len(ours_hi) <= TRUNCATE or ours_hi == exact_hi)
            else:
                assert ours_hi == exact_hi, (p.column, i)
            # The writer's bounds (when its page is not marked null) must be valid bounds.
            if p.w_ci is not None and not p.w_ci.null_pages[i]:
                w_lo = _stored_key(leaf, order, p.w_ci.min_values[i])
                w_hi = _stored_key(leaf, order, p.w_ci.max_values[i])
                assert _le(w_lo, lo, order) and _le(hi, w_hi, order), (p.column, i)
    assert checked


# ------------------------------------------------------------------ the strip helper itself

@pytest.mark.parametrize("name", sorted(ORACLES))
def test_strip_helper(name, oracle_dir):
    r = run(name, oracle_dir)
    original, stripped = r.original.read_bytes(), r.stripped.read_bytes()
    start = footer_start(r.original)
    assert stripped[:start] == original[:start]  # old index blocks stay, as dead bytes
    old_meta, _ = decode_struct(original, start, len(original) - 8)
    new_meta, _ = decode_struct(stripped, start, len(stripped) - 8)
    old_rgs, new_rgs = old_meta.get(FileMetaData.ROW_GROUPS).items, new_meta.get(FileMetaData.ROW_GROUPS).items
    for old_rg, new_rg in zip(old_rgs, new_rgs, strict=True):
        for old_cc, new_cc in zip(old_rg.get(1).items, new_rg.get(1).items, strict=True):
            assert not any(new_cc.has(i) for i in (4, 5, 6, 7))
            assert new_cc == old_cc.without(4, 5, 6, 7)
    assert new_meta.without(FileMetaData.ROW_GROUPS) == old_meta.without(FileMetaData.ROW_GROUPS)
    try:
        md = pq.ParquetFile(r.stripped).metadata
    except (OSError, pa.ArrowException):
        assert name == "incorrect_map_schema.parquet"  # pyarrow refuses the schema itself
        with open_source(str(r.stripped)) as s:
            assert not any(c.has_offset_index or c.has_column_index
                           for row in read_footer(s).chunks for c in row)
        return
    for i in range(md.num_row_groups):
        for j in range(md.num_columns):
            col = md.row_group(i).column(j)
            assert not col.has_column_index and not col.has_offset_index
    assert _same_table(pq.read_table(r.stripped), pq.read_table(r.original))


def _same_table(a: pa.Table, b: pa.Table) -> bool:
    """Table equality where NaN equals NaN (float columns compared by their bit patterns)."""
    if a.schema != b.schema:
        return False
    for x, y in zip(a.columns, b.columns):
        if pa.types.is_floating(x.type):
            xs, ys = x.to_numpy(), y.to_numpy()
            if xs.tobytes() != ys.tobytes() or not x.is_null().equals(y.is_null()):
                return False
        elif not x.equals(y):
            return False
    return True


def test_strip_helper_on_pyarrow_file(tmp_path):
    table = pa.table({"k": np.arange(5000, dtype=np.int64), "s": [str(i) for i in range(5000)]})
    src = tmp_path / "src.parquet"
    pq.write_table(table, src, write_page_index=True, data_page_size=512)
    md = pq.ParquetFile(src).metadata
    assert md.row_group(0).column(0).has_column_index
    dst = strip_page_index(src, tmp_path / "dst.parquet")
    md = pq.ParquetFile(dst).metadata
    assert not any(md.row_group(0).column(j).has_column_index or md.row_group(0).column(j).has_offset_index
                   for j in range(2))
    assert pq.read_table(dst).equals(table)
    # And pageindex sees an un-indexed file it can index again.
    result = pageindex.retrofit(str(dst), str(tmp_path / "again.parquet"))
    assert result.status == "indexed"
    assert verify(str(tmp_path / "again.parquet")).ok
