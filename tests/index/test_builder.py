"""pageindex.index.builder: page bounds against a brute-force Python reference, for every Kind.

Values are fed the way chunk_scan produces them: the defined values of the chunk, in the
PHYSICAL Arrow type Arrow C++ decodes from a physical-only schema (int32/int64/bool/float/double,
binary for BYTE_ARRAY, fixed_size_binary(n) for FIXED_LEN_BYTE_ARRAY incl. FLOAT16), possibly
split over several (sliced) Arrow chunks; `defined` gives the values per page (0 = null or
empty page).
"""
from __future__ import annotations

import math
import random
import struct

import numpy as np
import pyarrow as pa
import pytest

from pageindex.format.column_order import Kind, order_for, type_order
from pageindex.format.parquet_thrift import BoundaryOrder, Encoding, LogicalType, Type
from pageindex.format.thrift import T, decode_struct
from pageindex.index import builder as index_builder
from pageindex.index.builder import (
    Bounds,
    Refusal,
    boundary_order,
    column_index,
    offset_index,
    page_bounds,
    unencoded_bytes,
)
from pageindex.index.kinds import byte_arrays
from pageindex.index.truncation import truncate_max, truncate_min
from pageindex.scan.page_levels import PageLevels
from pageindex.scan.page_walk import ChunkPages, Page
from tests.format.test_column_order import TOTAL_ORDER, integer, leaf, logical

L = 64


# ------------------------------------------------------------------ helpers

def chunked(values: list, typ: pa.DataType, rng: random.Random, defined: np.ndarray | None = None
            ) -> pa.ChunkedArray:
    """The values as a ChunkedArray of 1-4 chunks, some of them slices (non-zero offset); given
    the pages' `defined` counts, half the time cut only where pages end (as nested leaves are)."""
    if not values:
        return pa.chunked_array([], type=typ)
    if defined is not None and rng.random() < 0.5:
        cuts = sorted(rng.sample(page_ends(defined), min(rng.randint(1, 3), len(page_ends(defined)))))
    else:
        cuts = sorted(rng.sample(range(1, len(values)), min(rng.randint(0, 3), len(values) - 1))) if len(values) > 1 else []
    parts, start = [], 0
    for end in cuts + [len(values)]:
        part = values[start:end]
        if rng.random() < 0.5:
            # build a larger array and slice it, so buffers have an offset
            pad = rng.randint(1, 3)
            filler = [part[0]] * pad
            arr = pa.array(filler + part + filler, type=typ).slice(pad, len(part))
        else:
            arr = pa.array(part, type=typ)
        parts.append(arr)
        start = end
    return pa.chunked_array(parts, type=typ)


def page_ends(defined: np.ndarray) -> list[int]:
    """Where the pages' values end, inside the chunk (not at its start or end)."""
    total = int(defined.sum())
    return sorted({int(e) for e in np.cumsum(defined) if 0 < e < total})


def random_defined(rng: random.Random, total_hint: int = 8) -> np.ndarray:
    pages = rng.randint(1, 10)
    return np.array([0 if rng.random() < 0.25 else rng.randint(1, total_hint) for _ in range(pages)],
                    dtype=np.int64)


def split(values: list, defined: np.ndarray) -> list[list]:
    out, pos = [], 0
    for d in defined:
        out.append(values[pos : pos + int(d)])
        pos += int(d)
    return out


def reference_order(mins: list, maxs: list) -> int:
    """Brute-force boundary order over the non-null pages' (comparable) bounds."""
    pairs = [(a, b) for a, b in zip(mins, maxs) if a is not None]
    if not pairs:
        return BoundaryOrder.UNORDERED
    if all(pairs[i][0] <= pairs[i + 1][0] and pairs[i][1] <= pairs[i + 1][1] for i in range(len(pairs) - 1)):
        return BoundaryOrder.ASCENDING
    if all(pairs[i][0] >= pairs[i + 1][0] and pairs[i][1] >= pairs[i + 1][1] for i in range(len(pairs) - 1)):
        return BoundaryOrder.DESCENDING
    return BoundaryOrder.UNORDERED


def check(bounds: Bounds, exp_min: list, exp_max: list, keys_min: list, keys_max: list):
    assert list(bounds.mins) == exp_min
    assert list(bounds.maxs) == exp_max
    assert boundary_order(bounds) == reference_order(keys_min, keys_max)


# ------------------------------------------------------------------ integers and booleans

INT_CASES = [
    ("int32_signed", Type.INT32, {}, 32, True),
    ("int64_signed", Type.INT64, {}, 64, True),
    ("int32_unsigned", Type.INT32, {"logical": integer(32, False)}, 32, False),
    ("int64_unsigned", Type.INT64, {"logical": integer(64, False)}, 64, False),
    ("uint32_converted", Type.INT32, {"converted": 13}, 32, False),
    ("uint64_converted", Type.INT64, {"converted": 14}, 64, False),
]


@pytest.mark.parametrize("name,ptype,kw,bits,signed", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_integer_bounds(name, ptype, kw, bits, signed):
    rng = random.Random(name)
    lf = leaf(ptype, **kw)
    order = type_order(lf)
    assert order.kind is (Kind.SIGNED if signed else Kind.UNSIGNED)
    typ = pa.int32() if bits == 32 else pa.int64()
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    specials = [lo, lo + 1, -1, 0, 1, hi - 1, hi, (1 << (bits - 2)), -(1 << (bits - 2))]
    fmt = {32: "i", 64: "q"}[bits]
    fmt = fmt if signed else fmt.upper()
    mask = (1 << bits) - 1
    for _ in range(60):
        defined = random_defined(rng)
        # physical values are signed; across 2**31 / 2**63 the unsigned order differs
        values = [rng.choice(specials) if rng.random() < 0.4 else rng.randint(lo, hi)
                  for _ in range(int(defined.sum()))]
        as_key = (lambda v: v) if signed else (lambda v: v & mask)
        pages = split([as_key(v) for v in values], defined)
        kmin = [min(p) if p else None for p in pages]
        kmax = [max(p) if p else None for p in pages]
        enc = lambda v: None if v is None else struct.pack("<" + fmt, v)
        bounds = page_bounds(lf, order, chunked(values, typ, rng, defined), defined, L)
        check(bounds, [enc(v) for v in kmin], [enc(v) for v in kmax], kmin, kmax)
        assert bounds.nan_counts is None


def test_unsigned_order_differs_from_signed():
    values = [-1, 1, 2**31 - 1, -(2**31)]  # as uint32: 4294967295, 1, 2147483647, 2147483648
    defined = np.array([4])
    s = page_bounds(leaf(Type.INT32), type_order(leaf(Type.INT32)), pa.chunked_array([values], pa.int32()), defined, L)
    uleaf = leaf(Type.INT32, logical=integer(32, False))
    u = page_bounds(uleaf, type_order(uleaf), pa.chunked_array([values], pa.int32()), defined, L)
    assert s.mins == (struct.pack("<i", -(2**31)),) and s.maxs == (struct.pack("<i", 2**31 - 1),)
    assert u.mins == (struct.pack("<I", 1),) and u.maxs == (struct.pack("<I", 2**32 - 1),)


def test_boolean_bounds():
    rng = random.Random(3)
    lf = leaf(Type.BOOLEAN)
    order = type_order(lf)
    for _ in range(40):
        defined = random_defined(rng)
        values = [rng.random() < 0.5 for _ in range(int(defined.sum()))]
        pages = split([int(v) for v in values], defined)
        kmin = [min(p) if p else None for p in pages]
        kmax = [max(p) if p else None for p in pages]
        enc = lambda v: None if v is None else bytes([v])
        check(page_bounds(lf, order, chunked(values, pa.bool_(), rng, defined), defined, L),
              [enc(v) for v in kmin], [enc(v) for v in kmax], kmin, kmax)


# ------------------------------------------------------------------ floats

FLOAT_SPECS = {
    "float": (Type.FLOAT, {}, np.float32, np.uint32, 32),
    "double": (Type.DOUBLE, {}, np.float64, np.uint64, 64),
    "float16": (Type.FIXED_LEN_BYTE_ARRAY, {"logical": logical(LogicalType.FLOAT16), "type_length": 2}, np.float16, np.uint16, 16),
}


def float_values(name: str, bit_patterns: list[int], rng, defined: np.ndarray | None = None) -> pa.ChunkedArray:
    _, _, ftype, utype, bits = FLOAT_SPECS[name]
    raw = np.array(bit_patterns, dtype=utype)
    if name == "float16":
        return chunked([raw[i : i + 1].tobytes() for i in range(len(raw))], pa.binary(2), rng, defined)
    arrow_type = pa.float32() if bits == 32 else pa.float64()
    # Built from numpy, never through Python floats: a float32 signalling NaN converted to a
    # Python float comes back quieted (bit 22 set), and the test needs exact bit patterns.
    floats = raw.view(ftype)
    if not len(floats):
        return pa.chunked_array([], arrow_type)
    ends = [] if defined is None else page_ends(defined)
    cut = rng.choice(ends) if ends and rng.random() < 0.5 else rng.randint(0, len(floats))
    parts = [floats[:cut], floats[cut:]]
    arrays = []
    for part in parts:
        padded = np.concatenate([floats[:1], part, floats[:1]])
        arrays.append(pa.array(padded, type=arrow_type).slice(1, len(part)))
    return pa.chunked_array(arrays, type=arrow_type)


def total_key(pattern: int, bits: int) -> int:
    signed = pattern - (1 << bits) if pattern >> (bits - 1) else pattern
    return signed ^ ((1 << (bits - 1)) - 1) if signed < 0 else signed


def pattern_of(x: float, name: str) -> int:
    _, _, ftype, utype, _ = FLOAT_SPECS[name]
    return int(np.array([x], dtype=ftype).view(utype)[0])


def is_nan(pattern: int, bits: int) -> bool:
    exp_bits = {16: 5, 32: 8, 64: 11}[bits]
    mant = pattern & ((1 << (bits - 1 - exp_bits)) - 1)
    exp = (pattern >> (bits - 1 - exp_bits)) & ((1 << exp_bits) - 1)
    return exp == (1 << exp_bits) - 1 and mant != 0


def random_float_patterns(name: str, n: int, rng: random.Random, nan: bool) -> list[int]:
    _, _, _ftype, _utype, bits = FLOAT_SPECS[name]
    specials = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, 65504.0, -65504.0, 1e-7, -1e-7]
    out = []
    for _ in range(n):
        r = rng.random()
        if nan and r < 0.15:
            # NaNs of both signs and varied payloads
            exp_bits = {16: 5, 32: 8, 64: 11}[bits]
            mant_bits = bits - 1 - exp_bits
            p = (((1 << exp_bits) - 1) << mant_bits) | rng.randint(1, (1 << mant_bits) - 1)
            out.append(p | (rng.randint(0, 1) << (bits - 1)))
        elif r < 0.5:
            out.append(pattern_of(rng.choice(specials), name))
        elif r < 0.6:
            out.append(rng.randint(0, (1 << bits) - 1))  # any pattern, subnormals included
        else:
            out.append(pattern_of(rng.uniform(-100, 100), name))
    return out


def enc(pattern: int | None, bits: int) -> bytes | None:
    return None if pattern is None else pattern.to_bytes(bits // 8, "little")


@pytest.mark.parametrize("name", list(FLOAT_SPECS))
def test_float_bounds_type_order(name):
    ptype, kw, _ftype, _utype, bits = FLOAT_SPECS[name]
    lf = leaf(ptype, **kw)
    order = type_order(lf)
    assert order.kind is Kind.FLOAT and not order.total_order
    rng = random.Random(name)
    neg_zero, pos_zero = 1 << (bits - 1), 0
    for _ in range(60):
        defined = random_defined(rng)
        pats = [p for p in random_float_patterns(name, int(defined.sum()) * 2, rng, nan=False)
                if not is_nan(p, bits)][: int(defined.sum())]
        if len(pats) < int(defined.sum()):
            continue
        pages = split(pats, defined)
        mins, maxs, kmin, kmax = [], [], [], []
        for p in pages:
            if not p:
                mins.append(None), maxs.append(None), kmin.append(None), kmax.append(None)
                continue
            lo = min(p, key=lambda x: total_key(x, bits))
            hi = max(p, key=lambda x: total_key(x, bits))
            # zero rule: a min of zero is -0.0, a max of zero is +0.0
            lo = neg_zero if lo in (neg_zero, pos_zero) else lo
            hi = pos_zero if hi in (neg_zero, pos_zero) else hi
            mins.append(enc(lo, bits)), maxs.append(enc(hi, bits))
            kmin.append(total_key(lo, bits)), kmax.append(total_key(hi, bits))
        bounds = page_bounds(lf, order, float_values(name, pats, rng, defined), defined, L)
        assert not isinstance(bounds, Refusal)
        check(bounds, mins, maxs, kmin, kmax)
        assert bounds.nan_counts is None


@pytest.mark.parametrize("name", list(FLOAT_SPECS))
def test_float_zero_rule_examples(name):
    ptype, kw, _ftype, _utype, bits = FLOAT_SPECS[name]
    lf = leaf(ptype, **kw)
    neg, pos = enc(1 << (bits - 1), bits), enc(0, bits)
    one = enc(pattern_of(1.0, name), bits)
    mone = enc(pattern_of(-1.0, name), bits)
    cases = [([0.0], neg, pos), ([-0.0], neg, pos), ([0.0, -0.0], neg, pos), ([0.0, 1.0], neg, one),
             ([-1.0, -0.0], mone, pos), ([-1.0, 1.0], mone, one)]
    for values, lo, hi in cases:
        pats = [pattern_of(v, name) for v in values]
        b = page_bounds(lf, type_order(lf), float_values(name, pats, random.Random(0)), np.array([len(pats)]), L)
        assert (b.mins[0], b.maxs[0]) == (lo, hi), values


@pytest.mark.parametrize("name", list(FLOAT_SPECS))
def test_nan_under_type_order_refused(name):
    ptype, kw, _ftype, _utype, _bits = FLOAT_SPECS[name]
    lf = leaf(ptype, **kw)
    nan = pattern_of(float("nan"), name)
    for where in (0, 5, 9):
        pats = [pattern_of(float(i), name) for i in range(10)]
        pats[where] = nan
        result = page_bounds(lf, type_order(lf), float_values(name, pats, random.Random(1)),
                             np.array([3, 0, 7]), L)
        assert isinstance(result, Refusal) and "NaN" in result.reason
        levels = PageLevels(np.array([3, 1, 7]), np.array([0, 1, 0]), np.array([3, 0, 7]), None, None, None)
        assert isinstance(column_index(lf, type_order(lf), levels,
                                       float_values(name, pats, random.Random(1)), L), Refusal)


@pytest.mark.parametrize("name", list(FLOAT_SPECS))
def test_float_bounds_total_order(name):
    ptype, kw, _ftype, _utype, bits = FLOAT_SPECS[name]
    lf = leaf(ptype, **kw)
    order = order_for(lf, TOTAL_ORDER)
    assert order.total_order
    rng = random.Random("total" + name)
    for i in range(80):
        defined = random_defined(rng)
        n = int(defined.sum())
        pats = random_float_patterns(name, n, rng, nan=True)
        if i % 5 == 0 and n:  # some pages entirely NaN
            pats = [p if rng.random() < 0.3 else
                    ((((1 << {16: 5, 32: 8, 64: 11}[bits]) - 1) << (bits - 1 - {16: 5, 32: 8, 64: 11}[bits])) | 1 |
                     (rng.randint(0, 1) << (bits - 1)))
                    for p in pats]
        pages = split(pats, defined)
        mins, maxs, kmin, kmax, nans = [], [], [], [], []
        for p in pages:
            nans.append(sum(is_nan(x, bits) for x in p))
            if not p:
                mins.append(None), maxs.append(None), kmin.append(None), kmax.append(None)
                continue
            pool = [x for x in p if not is_nan(x, bits)] or p  # NaN excluded unless all NaN
            lo = min(pool, key=lambda x: total_key(x, bits))
            hi = max(pool, key=lambda x: total_key(x, bits))
            mins.append(enc(lo, bits)), maxs.append(enc(hi, bits))  # no zero rule: -0.0 < +0.0
            kmin.append(total_key(lo, bits)), kmax.append(total_key(hi, bits))
        bounds = page_bounds(lf, order, float_values(name, pats, rng, defined), defined, L)
        check(bounds, mins, maxs, kmin, kmax)
        assert list(bounds.nan_counts) == nans


def test_total_order_zero_is_not_normalized():
    lf = leaf(Type.DOUBLE)
    order = order_for(lf, TOTAL_ORDER)
    pats = [pattern_of(0.0, "double"), pattern_of(0.0, "double")]
    b = page_bounds(lf, order, float_values("double", pats, random.Random(0)), np.array([2]), L)
    assert b.mins == (struct.pack("<d", 0.0),) and b.maxs == (struct.pack("<d", 0.0),)
    pats = [pattern_of(-0.0, "double"), pattern_of(0.0, "double")]
    b = page_bounds(lf, order, float_values("double", pats, random.Random(0)), np.array([2]), L)
    assert b.mins == (struct.pack("<d", -0.0),) and b.maxs == (struct.pack("<d", 0.0),)


# ------------------------------------------------------------------ decimals

def test_decimal_flba_bounds():
    rng = random.Random(11)
    for width in (1, 2, 5, 9, 16):
        lf = leaf(Type.FIXED_LEN_BYTE_ARRAY, type_length=width, logical=logical(LogicalType.DECIMAL))
        order = type_order(lf)
        assert order.kind is Kind.DECIMAL_BYTES
        lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
        for _ in range(25):
            defined = random_defined(rng)
            ints = [rng.choice([lo, hi, -1, 0, 1]) if rng.random() < 0.3 else rng.randint(lo, hi)
                    for _ in range(int(defined.sum()))]
            raw = [v.to_bytes(width, "big", signed=True) for v in ints]
            pages = split(ints, defined)
            kmin = [min(p) if p else None for p in pages]
            kmax = [max(p) if p else None for p in pages]
            e = lambda v, w=width: None if v is None else v.to_bytes(w, "big", signed=True)
            bounds = page_bounds(lf, order, chunked(raw, pa.binary(width), rng, defined), defined, L)
            check(bounds, [e(v) for v in kmin], [e(v) for v in kmax], kmin, kmax)


def _random_decimal_bytes(rng: random.Random, v: int) -> bytes:
    """v as big-endian two's complement, minimal or sign-padded (both are valid encodings)."""
    n = max(1, (v.bit_length() + 8) // 8)
    raw = v.to_bytes(n, "big", signed=True)
    pad = rng.choice([0, 0, 1, 3])
    return (b"\xff" if v < 0 else b"\x00") * pad + raw


def test_decimal_byte_array_bounds():
    rng = random.Random(12)
    lf = leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.DECIMAL))
    order = type_order(lf)
    assert order.kind is Kind.DECIMAL_BYTES and not order.truncatable
    for _ in range(80):
        defined = random_defined(rng)
        ints = []
        for _ in range(int(defined.sum())):
            bits = rng.choice([3, 7, 8, 9, 15, 16, 63, 64, 65, 127, 200])
            v = rng.randint(-(1 << bits), (1 << bits))
            ints.append(rng.choice([v, -128, 127, 128, -129, 0, -1, -(1 << 64), (1 << 64)]) if rng.random() < 0.2 else v)
        raw = [_random_decimal_bytes(rng, v) for v in ints]
        pages = split(ints, defined)
        kmin = [min(p) if p else None for p in pages]
        kmax = [max(p) if p else None for p in pages]
        bounds = page_bounds(lf, order, chunked(raw, pa.binary(), rng, defined), defined, L)
        dec = lambda b: None if b is None else int.from_bytes(b, "big", signed=True)
        assert [dec(b) for b in bounds.mins] == kmin
        assert [dec(b) for b in bounds.maxs] == kmax
        assert all(b is None or len(b) <= 1 + max(1, (dec(b).bit_length() + 8) // 8) for b in bounds.mins)
        assert boundary_order(bounds) == reference_order(kmin, kmax)


def test_decimal_byte_array_empty_value_is_zero():
    lf = leaf(Type.BYTE_ARRAY, converted=5)
    b = page_bounds(lf, type_order(lf), pa.chunked_array([[b"", b"\xff", b"\x01"]], pa.binary()), np.array([3]), L)
    assert int.from_bytes(b.mins[0], "big", signed=True) == -1
    assert int.from_bytes(b.maxs[0], "big", signed=True) == 1


def test_decimal_is_never_truncated():
    lf = leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.DECIMAL))
    big = (1 << 1000) + 12345
    raw = [big.to_bytes(127, "big", signed=True), (-big).to_bytes(127, "big", signed=True)]
    b = page_bounds(lf, type_order(lf), pa.chunked_array([raw], pa.binary()), np.array([2]), 8)
    assert int.from_bytes(b.mins[0], "big", signed=True) == -big
    assert int.from_bytes(b.maxs[0], "big", signed=True) == big


# ------------------------------------------------------------------ bytes

def random_bytes(rng: random.Random, text: bool) -> bytes:
    n = rng.choice([0, 1, 2, 5, 20, 63, 64, 65, 100, 300])
    if text:
        return "".join(rng.choice("aAz~é€😀\U0010FFFF") for _ in range(n // 2)).encode()
    return bytes(rng.choice([0, 1, 0x7F, 0x80, 0xFE, 0xFF, rng.randrange(256)]) for _ in range(n))


def _capped_min(v: bytes, length: int) -> bytes:
    """The builder's rule: UTF-8 or not is judged on the first length + 4 bytes."""
    cap = length + 4
    return truncate_min(v[:cap], length, partial=len(v) >= cap)


def _capped_max(v: bytes, length: int) -> bytes:
    cap = length + 4
    bound = truncate_max(v[:cap], length, partial=len(v) >= cap)
    return v if len(v) >= cap and bound == v[:cap] else bound  # no shorter bound: the whole value


def as_dictionary(values: pa.ChunkedArray, rng: random.Random) -> pa.ChunkedArray:
    """The same values as dictionary arrays, the way chunk_scan reads dictionary-encoded strings:
    each part with its own dictionary, shuffled and holding entries no value uses."""
    parts = []
    for part in values.chunks:
        distinct = sorted(set(part.to_pylist()))
        dictionary = distinct + [random_bytes(rng, False) for _ in range(rng.randint(0, 3))]
        rng.shuffle(dictionary)
        position = {v: i for i, v in enumerate(dictionary)}  # a repeated unused entry maps once
        indices = pa.array([position[v] for v in part.to_pylist()], pa.int32())
        parts.append(pa.DictionaryArray.from_arrays(indices, pa.array(dictionary, pa.binary())))
    return pa.chunked_array(parts, type=pa.dictionary(pa.int32(), pa.binary()))


# How page_bounds reduces byte strings: per-page slices (few pages), one grouped aggregation
# over prefixes (many pages), or ranks of the dictionary (dictionary-encoded chunks).
BYTES_PATHS = ["sliced", "grouped", "dictionary"]


@pytest.mark.parametrize("kind,path", [(k, p) for k in ("binary", "string", "uuid", "flba") for p in BYTES_PATHS
                                       if p != "dictionary" or k in ("binary", "string")])  # BYTE_ARRAY only
@pytest.mark.parametrize("truncate_length", [64, 5, 1])
def test_bytes_bounds(kind, truncate_length, path, monkeypatch):
    if path == "grouped":
        monkeypatch.setattr(byte_arrays, "FEW_PAGES", 0)
    rng = random.Random(f"{kind}{truncate_length}")
    if kind == "binary":
        lf, typ = leaf(Type.BYTE_ARRAY), pa.binary()
    elif kind == "string":
        lf, typ = leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.STRING)), pa.binary()
    elif kind == "uuid":
        lf, typ = leaf(Type.FIXED_LEN_BYTE_ARRAY, type_length=16, logical=logical(LogicalType.UUID)), pa.binary(16)
    else:
        lf, typ = leaf(Type.FIXED_LEN_BYTE_ARRAY, type_length=70), pa.binary(70)
    order = type_order(lf)
    assert order.kind is Kind.BYTES
    for _ in range(40):
        defined = random_defined(rng)
        if kind in ("uuid", "flba"):
            w = typ.byte_width
            values = [bytes(rng.choice([0, 0xFF, rng.randrange(256)]) for _ in range(w))
                      for _ in range(int(defined.sum()))]
        else:
            values = [random_bytes(rng, kind == "string") for _ in range(int(defined.sum()))]
        pages = split(values, defined)
        exact_min = [min(p) if p else None for p in pages]
        exact_max = [max(p) if p else None for p in pages]
        if order.truncatable:
            exp_min = [None if v is None else _capped_min(v, truncate_length) for v in exact_min]
            exp_max = [None if v is None else _capped_max(v, truncate_length) for v in exact_max]
        else:
            exp_min, exp_max = exact_min, exact_max
        arrays = chunked(values, typ, rng, defined)
        if path == "dictionary":
            arrays = as_dictionary(arrays, rng)
        bounds = page_bounds(lf, order, arrays, defined, truncate_length)
        # boundary order is computed on the STORED (possibly truncated) bounds
        check(bounds, exp_min, exp_max, exp_min, exp_max)
        for m, x, lo, hi in zip(bounds.mins, bounds.maxs, exact_min, exact_max):
            if m is not None:
                assert m <= lo and x >= hi


def test_bytes_truncation_applies_only_to_truncatable():
    long = b"a" * 100
    for lf, truncated in [(leaf(Type.BYTE_ARRAY), True), (leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.STRING)), True),
                          (leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.JSON)), True),
                          (leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.UNKNOWN)), False)]:
        b = page_bounds(lf, type_order(lf), pa.chunked_array([[long]], pa.binary()), np.array([1]), 64)
        assert (len(b.mins[0]) == 64) is truncated
        assert (b.maxs[0] == b"a" * 63 + b"b") is truncated


def test_unsigned_bytewise_order():
    lf = leaf(Type.BYTE_ARRAY)
    values = [b"\x7f", b"\x80", b"\xff", b"", b"\x00"]
    b = page_bounds(lf, type_order(lf), pa.chunked_array([values], pa.binary()), np.array([5]), 64)
    assert b.mins == (b"",) and b.maxs == (b"\xff",)


# ------------------------------------------------------------------ boundary order

def bounds_of(pairs: list) -> Bounds:
    mins = tuple(None if p is None else p[0] for p in pairs)
    maxs = tuple(None if p is None else p[1] for p in pairs)
    enc = lambda v: None if v is None else struct.pack("<q", v)
    return Bounds(tuple(enc(v) for v in mins), tuple(enc(v) for v in maxs), mins, maxs, None)


@pytest.mark.parametrize("pairs,expected", [
    ([(1, 2)], BoundaryOrder.ASCENDING),
    ([(1, 2), (2, 3), (3, 5)], BoundaryOrder.ASCENDING),
    ([(1, 2), (1, 2), (1, 2)], BoundaryOrder.ASCENDING),  # equal pages: ascending (checked first)
    ([(1, 5), (1, 5), (2, 6)], BoundaryOrder.ASCENDING),
    ([(5, 9), (3, 4), (1, 2)], BoundaryOrder.DESCENDING),
    ([(5, 9), (5, 9), (1, 9)], BoundaryOrder.DESCENDING),
    ([(1, 5), (2, 3)], BoundaryOrder.UNORDERED),  # min up, max down
    ([(1, 2), (0, 3)], BoundaryOrder.UNORDERED),
    ([(1, 2), None, (3, 4)], BoundaryOrder.ASCENDING),  # null pages in between are ignored
    ([None, (3, 4), None, None, (1, 2), None], BoundaryOrder.DESCENDING),
    ([(1, 2), None, (0, 1), None, (3, 4)], BoundaryOrder.UNORDERED),
    ([None, (7, 7), None], BoundaryOrder.ASCENDING),
    ([None], BoundaryOrder.UNORDERED),  # no bounds at all
    ([None, None, None], BoundaryOrder.UNORDERED),
    ([(1, 10), (2, 3), (4, 11)], BoundaryOrder.UNORDERED),  # overlapping pages may still be ordered? no: max 10>3
    ([(1, 10), (2, 10), (4, 11)], BoundaryOrder.ASCENDING),  # overlapping is fine when both sequences ascend
])
def test_boundary_order(pairs, expected):
    assert boundary_order(bounds_of(pairs)) == expected


def test_page_aligned_chunks_are_bounded_one_by_one(monkeypatch):
    """Values in Arrow chunks that each hold whole pages (a nested leaf's runs of values sections)
    are bounded chunk by chunk, so fixed-width values are never joined into one copy; chunks cut
    inside a page are bounded together. Both give the bounds of the values as one array."""
    lf = leaf(Type.INT64)
    order = type_order(lf)
    defined = np.array([2, 0, 3, 0, 1, 0])
    values = [5, -1, 7, 7, 3, 9]
    whole = page_bounds(lf, order, pa.chunked_array([values], pa.int64()), defined, L)
    calls = []
    bounds = index_builder._bounds
    monkeypatch.setattr(index_builder, "_bounds", lambda *a: calls.append(len(a[2])) or bounds(*a))
    aligned = pa.chunked_array([values[:2], values[2:5], values[5:]], pa.int64())
    assert page_bounds(lf, order, aligned, defined, L) == whole and calls == [2, 3, 1]
    calls.clear()
    inside = pa.chunked_array([values[:3], values[3:]], pa.int64())
    assert page_bounds(lf, order, inside, defined, L) == whole and calls == [6]


def test_boundary_order_through_page_bounds():
    lf = leaf(Type.INT64)
    order = type_order(lf)
    asc = page_bounds(lf, order, pa.chunked_array([[1, 2, 2, 3, 5, 9]], pa.int64()), np.array([2, 0, 2, 0, 2]), L)
    assert boundary_order(asc) == BoundaryOrder.ASCENDING
    desc = page_bounds(lf, order, pa.chunked_array([[9, 5, 5, 3, 2, 1]], pa.int64()), np.array([2, 2, 0, 2]), L)
    assert boundary_order(desc) == BoundaryOrder.DESCENDING
    same = page_bounds(lf, order, pa.chunked_array([[4, 4, 4, 4]], pa.int64()), np.array([2, 0, 2]), L)
    assert boundary_order(same) == BoundaryOrder.ASCENDING


def test_boundary_order_on_truncated_bounds():
    lf = leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.STRING))
    # exact values ascend, truncated to 2 bytes they are equal: still ASCENDING
    values = [b"aaa1", b"aaa2", b"aaa3", b"aaa4"]
    b = page_bounds(lf, type_order(lf), pa.chunked_array([values], pa.binary()), np.array([1, 1, 1, 1]), 2)
    assert b.mins == (b"aa",) * 4 and b.maxs == (b"ab",) * 4
    assert boundary_order(b) == BoundaryOrder.ASCENDING


# ------------------------------------------------------------------ column_index / offset_index

def _page(offset: int, size: int, num_values: int) -> Page:
    return Page(0, offset, 10, size - 10, size, num_values, None, None, 0, 0, True, Encoding.PLAIN, None, None, None, b"")


def test_offset_index_first_rows_and_unencoded():
    pages = ChunkPages(4, b"", None, (_page(4, 100, 3), _page(104, 50, 0), _page(154, 70, 5)), False)
    levels = PageLevels(np.array([3, 0, 5]), None, None, None, None, None)
    oi = decode_struct(offset_index(pages, levels, np.array([7, 0, 11])))[0]
    locs = oi.get(1).items
    assert [(l.get(1), l.get(2), l.get(3)) for l in locs] == [(4, 100, 0), (104, 50, 3), (154, 70, 3)]
    assert oi.get(2).items == (7, 0, 11)
    assert not decode_struct(offset_index(pages, levels, None))[0].has(2)


def test_unencoded_bytes_per_page():
    values = pa.chunked_array([[b"ab", b""], [b"cde", b"f"]], pa.binary())
    assert list(unencoded_bytes(values, np.array([1, 0, 2, 1]))) == [2, 0, 3, 1]


def test_unencoded_bytes_of_dictionary_values():
    rng = random.Random(7)
    for _ in range(30):
        defined = random_defined(rng)
        values = [random_bytes(rng, False) for _ in range(int(defined.sum()))]
        plain = chunked(values, pa.binary(), rng)
        expected = [sum(len(v) for v in page) for page in split(values, defined)]
        assert list(unencoded_bytes(plain, defined)) == expected
        assert list(unencoded_bytes(as_dictionary(plain, rng), defined)) == expected


def test_decimal_bounds_from_dictionary_values():
    """Dictionary-read BYTE_ARRAY decimals are compared as numbers, like their plain values."""
    lf = leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.DECIMAL))
    order = type_order(lf)
    rng = random.Random(3)
    values = [_random_decimal_bytes(rng, rng.randint(-10**6, 10**6)) for _ in range(40)]
    defined = np.array([10, 0, 25, 5])
    plain = chunked(values, pa.binary(), rng)
    assert page_bounds(lf, order, as_dictionary(plain, rng), defined, L) == page_bounds(lf, order, plain, defined, L)


def test_column_index_fields():
    lf = leaf(Type.INT32)  # optional, max_def 1
    levels = PageLevels(np.array([3, 2, 4]), np.array([1, 2, 0]), np.array([2, 0, 4]),
                        np.array([[1, 2], [2, 0], [0, 4]]), None, None)
    values = pa.chunked_array([[5, 3, 1, 2, 3, 4]], pa.int32())
    ci = decode_struct(column_index(lf, type_order(lf), levels, values, L))[0]
    assert ci.get(1).items == (False, True, False)
    assert ci.get(2).items == (struct.pack("<i", 3), b"", struct.pack("<i", 1))
    assert ci.get(3).items == (struct.pack("<i", 5), b"", struct.pack("<i", 4))
    assert ci.get(4) == BoundaryOrder.DESCENDING
    assert ci.get(5).items == (1, 2, 0)
    assert not ci.has(6)
    assert ci.get(7).items == (1, 2, 2, 0, 0, 4)
    assert not ci.has(8)
    assert ci.fields[0].type is T.LIST and ci.get(1).elem_type is T.TRUE


def test_column_index_nan_counts_only_under_total_order():
    lf = leaf(Type.FLOAT)
    levels = PageLevels(np.array([2, 1]), np.array([0, 0]), np.array([2, 1]), None, None, None)
    values = pa.chunked_array([[1.0, float("nan"), float("nan")]], pa.float32())
    ci = decode_struct(column_index(lf, order_for(lf, TOTAL_ORDER), levels, values, L))[0]
    assert ci.get(8).items == (1, 1)
    assert ci.get(2).items[1] == ci.get(3).items[1]  # the all-NaN page is bounded by its NaN
    ci = decode_struct(column_index(lf, type_order(lf), levels, pa.chunked_array([[1.0, 2.0, 3.0]], pa.float32()), L))[0]
    assert not ci.has(8)


def test_value_count_mismatch():
    lf = leaf(Type.INT32)
    with pytest.raises(ValueError):
        page_bounds(lf, type_order(lf), pa.chunked_array([[1, 2]], pa.int32()), np.array([3]), L)


def test_large_chunk_is_fast():
    import time
    lf = leaf(Type.BYTE_ARRAY, logical=logical(LogicalType.STRING))
    n = 300_000
    values = pa.chunked_array([pa.array([f"v{i:07d}" for i in range(n)], pa.string()).cast(pa.binary())])
    defined = np.full(n // 100, 100)
    started = time.perf_counter()
    b = page_bounds(lf, type_order(lf), values, defined, L)
    assert time.perf_counter() - started < 5
    assert boundary_order(b) == BoundaryOrder.ASCENDING and b.mins[0] == b"v0000000"


# ------------------------------------------------------------------ bounds from each page's two extrema

def _pairs(rng, pick, counts) -> list:
    """Two values a page holding values (in either order, or equal), none for the others."""
    out = []
    for c in counts:
        if c:
            a, b = pick(), pick()
            out += [a, a] if rng.random() < 0.2 else [a, b]
    return out


PAIR_CASES = [(name, ptype, kw, np.dtype(f"<{'i' if signed else 'u'}{bits // 8}"), None)
              for name, ptype, kw, bits, signed in INT_CASES] + [
    (f"{name}_{order}", FLOAT_SPECS[name][0], {}, np.dtype(FLOAT_SPECS[name][2]).newbyteorder("<"), order)
    for name in ("float", "double") for order in ("type", "total")]


@pytest.mark.parametrize("name,ptype,kw,dtype,float_order", PAIR_CASES, ids=[c[0] for c in PAIR_CASES])
def test_pair_bounds_equal_page_bounds_of_the_pairs(name, ptype, kw, dtype, float_order):
    """Codec.pair_bounds (numpy in, for the encoded scan's extrema) gives the Bounds (or Refusal)
    page_bounds gives on the same values as an Arrow array, which the encoded scan used to build."""
    from pageindex.index.kinds import codec_for

    rng = random.Random(name)
    lf = leaf(ptype, **kw)
    order = order_for(lf, TOTAL_ORDER) if float_order == "total" else type_order(lf)
    if dtype.kind == "f":
        specials = [0.0, -0.0, 1.5, -2.25, float("inf"), -float("inf"), float("nan"), 1e-300, 5e-324]
        pick = lambda: rng.choice(specials) if rng.random() < 0.5 else rng.uniform(-1e3, 1e3)  # noqa: E731
    else:
        info = np.iinfo(dtype)
        specials = [int(info.min), int(info.max), 0, 1, -1 if info.min else 2, int(info.max) // 2 + 1]
        pick = lambda: rng.choice(specials) if rng.random() < 0.5 else rng.randint(int(info.min), int(info.max))  # noqa: E731
    refused = 0
    for _ in range(80):
        counts = np.array([2 * (rng.random() < 0.8) for _ in range(rng.randint(1, 6))], dtype=np.int64)
        if dtype.kind == "f" and rng.random() < 0.7:
            pick_now = lambda: rng.choice([v for v in specials if v == v]) if rng.random() < 0.5 else rng.uniform(-9, 9)  # noqa: E731
        else:
            pick_now = pick
        pairs = np.array(_pairs(rng, pick_now, counts), dtype=dtype)
        got = codec_for(order).pair_bounds(lf, order, pairs, counts, L)
        assert got == page_bounds(lf, order, pa.chunked_array([pa.array(pairs)]), counts, L)
        refused += isinstance(got, Refusal)
    assert (refused > 0) == (dtype.kind == "f" and float_order == "type")
