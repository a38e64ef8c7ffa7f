"""Deterministic random Arrow tables covering every Parquet type pyarrow writes, and writer-option grids.

Each table is written without a page index plus a pyarrow-indexed twin, for round-trip and engine tests.
"""
from __future__ import annotations

import datetime as dt
import decimal
import io
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.helpers.page_reader import DATA_PAGE, DATA_PAGE_V2, chunk_pages

# --------------------------------------------------------------------------------------------
# Kinds: one column per kind, named after the kind.
# --------------------------------------------------------------------------------------------

FLAT_KINDS: tuple[str, ...] = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
    "decimal5", "decimal15", "decimal30", "decimal50",
    "string", "large_string", "string_view", "json",
    "binary", "large_binary", "binary_view", "fixed_binary16", "uuid",
    "date32", "date64", "time32_ms", "time64_us", "time64_ns",
    "ts_s", "ts_ms", "ts_us", "ts_ns", "ts_s_tz", "ts_ms_tz", "ts_us_tz", "ts_ns_tz",
    "duration_us",
    "dict_string",
)  # fmt: skip
NESTED_KINDS: tuple[str, ...] = (
    "list_int32",
    "list_string",
    "large_list_int64",
    "fixed_list_int16",
    "map_string_int64",
    "struct",
    "list_struct",
    "struct_list",
    "list_list_int64",
)
ALL_KINDS: tuple[str, ...] = FLAT_KINDS + NESTED_KINDS
FLOAT_KINDS: tuple[str, ...] = ("float16", "float32", "float64")

# Always present, first, never null: `key` ascending int64 (shuffled when sorted_key=False) and
# `desc` strictly descending int32, so boundary_order ASCENDING / DESCENDING both get exercised.
KEY_COLUMN = "key"
DESC_COLUMN = "desc"

TZ = "UTC"
_DATE_LO = dt.date(1900, 1, 1).toordinal() - dt.date(1970, 1, 1).toordinal()
_DATE_HI = dt.date(2200, 12, 31).toordinal() - dt.date(1970, 1, 1).toordinal()
_DAY_MS = 86_400_000

# What pyarrow reads back when it differs from what was written (Parquet has no seconds unit and
# one DATE type; pyarrow 26 does not restore these from the stored ARROW:schema).
READBACK_TYPES: Mapping[str, pa.DataType] = {
    "ts_s": pa.timestamp("ms"),
    "ts_s_tz": pa.timestamp("ms", TZ),
    "date64": pa.date32(),
}

# The Parquet leaf each flat kind becomes with pyarrow 26 defaults:
# (physical type, logical type as pyarrow prints it or None). decimal5/decimal15 become INT32/INT64
# with store_decimal_as_integer=True; see PARQUET_TYPES_DECIMAL_AS_INTEGER.
PARQUET_TYPES: Mapping[str, tuple[str, str | None]] = {
    "key": ("INT64", None),
    "desc": ("INT32", None),
    "bool": ("BOOLEAN", None),
    "int8": ("INT32", "Int(bitWidth=8, isSigned=true)"),
    "int16": ("INT32", "Int(bitWidth=16, isSigned=true)"),
    "int32": ("INT32", None),
    "int64": ("INT64", None),
    "uint8": ("INT32", "Int(bitWidth=8, isSigned=false)"),
    "uint16": ("INT32", "Int(bitWidth=16, isSigned=false)"),
    "uint32": ("INT32", "Int(bitWidth=32, isSigned=false)"),
    "uint64": ("INT64", "Int(bitWidth=64, isSigned=false)"),
    "float16": ("FIXED_LEN_BYTE_ARRAY", "Float16"),
    "float32": ("FLOAT", None),
    "float64": ("DOUBLE", None),
    "decimal5": ("FIXED_LEN_BYTE_ARRAY", "Decimal(precision=5, scale=2)"),
    "decimal15": ("FIXED_LEN_BYTE_ARRAY", "Decimal(precision=15, scale=3)"),
    "decimal30": ("FIXED_LEN_BYTE_ARRAY", "Decimal(precision=30, scale=6)"),
    "decimal50": ("FIXED_LEN_BYTE_ARRAY", "Decimal(precision=50, scale=10)"),
    "string": ("BYTE_ARRAY", "String"),
    "large_string": ("BYTE_ARRAY", "String"),
    "string_view": ("BYTE_ARRAY", "String"),
    "json": ("BYTE_ARRAY", "JSON"),
    "binary": ("BYTE_ARRAY", None),
    "large_binary": ("BYTE_ARRAY", None),
    "binary_view": ("BYTE_ARRAY", None),
    "fixed_binary16": ("FIXED_LEN_BYTE_ARRAY", None),
    "uuid": ("FIXED_LEN_BYTE_ARRAY", "UUID"),
    "date32": ("INT32", "Date"),
    "date64": ("INT32", "Date"),
    "time32_ms": ("INT32", "Time(isAdjustedToUTC=false, timeUnit=milliseconds)"),
    "time64_us": ("INT64", "Time(isAdjustedToUTC=false, timeUnit=microseconds)"),
    "time64_ns": ("INT64", "Time(isAdjustedToUTC=false, timeUnit=nanoseconds)"),
    "ts_s": ("INT64", "Timestamp(isAdjustedToUTC=false, timeUnit=milliseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "ts_ms": ("INT64", "Timestamp(isAdjustedToUTC=false, timeUnit=milliseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "ts_us": ("INT64", "Timestamp(isAdjustedToUTC=false, timeUnit=microseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "ts_ns": ("INT64", "Timestamp(isAdjustedToUTC=false, timeUnit=nanoseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "ts_s_tz": ("INT64", "Timestamp(isAdjustedToUTC=true, timeUnit=milliseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "ts_ms_tz": ("INT64", "Timestamp(isAdjustedToUTC=true, timeUnit=milliseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "ts_us_tz": ("INT64", "Timestamp(isAdjustedToUTC=true, timeUnit=microseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "ts_ns_tz": ("INT64", "Timestamp(isAdjustedToUTC=true, timeUnit=nanoseconds, is_from_converted_type=false, force_set_converted_type=false)"),
    "duration_us": ("INT64", None),
    "dict_string": ("BYTE_ARRAY", "String"),
}  # fmt: skip
PARQUET_TYPES_DECIMAL_AS_INTEGER: Mapping[str, tuple[str, str | None]] = {
    **PARQUET_TYPES,
    "decimal5": ("INT32", "Decimal(precision=5, scale=2)"),
    "decimal15": ("INT64", "Decimal(precision=15, scale=3)"),
}
# With use_deprecated_int96_timestamps=True every timestamp leaf becomes INT96 (no logical type).
INT96_KINDS: tuple[str, ...] = ("ts_s", "ts_ms", "ts_us", "ts_ns", "ts_s_tz", "ts_ms_tz", "ts_us_tz", "ts_ns_tz")

DECIMALS: Mapping[str, tuple[int, int, Callable[[int, int], pa.DataType]]] = {
    "decimal5": (5, 2, pa.decimal128),
    "decimal15": (15, 3, pa.decimal128),
    "decimal30": (30, 6, pa.decimal128),
    "decimal50": (50, 10, pa.decimal256),
}

# Strings chosen for the page-index edge cases: empty, NUL, multi-byte, the largest code point,
# neighbours of the surrogate gap, and values past the 64-byte truncation length (including ones
# whose 64-byte prefix ends inside a multi-byte character, and ones made only of U+10FFFF whose
# upper bound cannot be incremented).
SPECIAL_STRINGS: tuple[str, ...] = (
    "",
    "\x00",
    "\x7f",
    "a",
    "é",
    "日本語",
    "😀",
    "\ud7ff",
    "\ue000",
    "\uffff",
    "\U00010000",
    "\U0010ffff",
    "\U0010ffff" * 20,
    "z" * 70,
    "é" * 40,
    "a" * 63 + "\U0010ffff" * 3,
    "\U0010ffff" * 16 + "a",
    "zz" + "\uffff" * 30,
)
# Binary edge cases: empty, 0x00/0xFF runs, >64-byte all-0xFF (no incrementable upper bound).
SPECIAL_BINARIES: tuple[bytes, ...] = (
    b"",
    b"\x00",
    b"\xff",
    b"\xff" * 8,
    b"\xff" * 70,
    b"\xfe" + b"\xff" * 70,
    b"\x00" * 70,
    b"\x7f\xff\xff",
    b"\x80",
)
_ALPHABET: tuple[str, ...] = tuple("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 _-") + (
    "é", "ß", "ж", "日", "本", "😀", "\U0010ffff", "\ud7ff", "\ue000", "\uffff",
)  # fmt: skip
_DICT_WORDS: tuple[str, ...] = (
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon",
    "", "Ωmega", "日本", "😀smile", "\U0010ffff", "z" * 80,
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Random building blocks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """Generation knobs shared by every column of one table."""

    seed: int
    num_rows: int
    null_fraction: float
    nan_fraction: float
    nan_payloads: bool


def _rng(spec: _Spec, name: str) -> np.random.Generator:
    # One generator per column, keyed by name, so choosing a subset of kinds leaves the data of
    # the remaining columns unchanged.
    return np.random.default_rng([spec.seed, zlib.crc32(name.encode())])


def _null_mask(spec: _Spec, rng: np.random.Generator) -> np.ndarray:
    """Random nulls plus one contiguous all-null run, so small pages can be entirely null."""
    n = spec.num_rows
    mask = rng.random(n) < spec.null_fraction
    if spec.null_fraction > 0 and n >= 20:
        run = max(1, n // 20)
        start = int(rng.integers(0, n - run))
        mask[start : start + run] = True
    return mask


def _clustered_order(rng: np.random.Generator, sort_keys: Sequence | np.ndarray) -> np.ndarray:
    """Row order that sorts the values and then shuffles 8 blocks of rows.

    Pages inside a block cover narrow value ranges (so a page index can prune), the ones
    straddling blocks wide ones, and the page order mostly ends up UNORDERED, with some row
    groups ASCENDING by chance: the common real-world shapes.
    """
    n = len(sort_keys)
    if isinstance(sort_keys, np.ndarray):
        order = np.argsort(sort_keys, kind="stable")
    else:
        order = np.array(sorted(range(n), key=sort_keys.__getitem__), dtype=np.int64)
    blocks = np.array_split(order, max(1, min(8, n)))
    perm = rng.permutation(len(blocks))
    return np.concatenate([blocks[i] for i in perm]) if n else order


def _inject(rng: np.random.Generator, values: list, specials: Sequence) -> list:
    """Write each special value twice into one run of adjacent rows at a random place.

    Keeping the extremes together means only a page or two get the widest min/max, so the
    other pages keep narrow ranges that a page index can prune on.
    """
    n = len(values)
    if n == 0 or not specials:
        return values
    count = min(n, 2 * len(specials))
    start = int(rng.integers(0, n - count + 1))
    for i in range(count):
        values[start + i] = specials[i % len(specials)]
    return values


def _arrange(spec: _Spec, name: str, values: list, specials: Sequence, sort_key: Callable | None = None) -> tuple[list, np.ndarray]:
    """Cluster `values`, inject `specials`, and draw the null mask: the common path of flat kinds."""
    rng = _rng(spec, name + "/layout")
    keys = [sort_key(v) for v in values] if sort_key is not None else values
    order = _clustered_order(rng, keys)
    arranged = [values[int(i)] for i in order]
    arranged = _inject(rng, arranged, specials)
    return arranged, _null_mask(spec, rng)


def _masked(values: list, mask: np.ndarray) -> list:
    return [None if m else v for v, m in zip(values, mask)]


def _ints(spec: _Spec, name: str, lo: int, hi: int, specials: Sequence[int]) -> tuple[list[int], np.ndarray]:
    """Integers uniform over [lo, hi] (inclusive; Python ints so uint64 works), clustered."""
    rng = _rng(spec, name)
    n = spec.num_rows
    span = hi - lo + 1
    if span <= 2**63:
        raw = [lo + int(x) for x in rng.integers(0, span, size=n, dtype=np.uint64)]
    else:  # wider than numpy's draw: combine two 32-bit draws (the modulo bias is irrelevant)
        hi32 = rng.integers(0, 2**32, size=n, dtype=np.uint64)
        lo32 = rng.integers(0, 2**32, size=n, dtype=np.uint64)
        raw = [lo + (((int(a) << 32) | int(b)) % span) for a, b in zip(hi32, lo32)]
    return _arrange(spec, name, raw, specials)


def _int_column(spec: _Spec, name: str, typ: pa.DataType) -> pa.Array:
    if pa.types.is_unsigned_integer(typ):
        lo, hi = 0, 2 ** typ.bit_width - 1
        # Values on both sides of the signed boundary test unsigned ordering.
        specials = [lo, hi, 2 ** (typ.bit_width - 1), 2 ** (typ.bit_width - 1) - 1, 2 ** (typ.bit_width - 1) + 1]
    else:
        lo, hi = -(2 ** (typ.bit_width - 1)), 2 ** (typ.bit_width - 1) - 1
        specials = [lo, hi, 0, -1, 1]
    values, mask = _ints(spec, name, lo, hi, specials)
    return pa.array(_masked(values, mask), typ)


# --- floats -------------------------------------------------------------------------------

_NAN_BITS: Mapping[str, tuple[int, ...]] = {
    # quiet NaN, -NaN, signalling NaN with payload 1, quiet NaN with a payload, -NaN with payload
    "float16": (0x7E00, 0xFE00, 0x7C01, 0x7E55, 0xFC01),
    "float32": (0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FC00123, 0xFF800001),
    "float64": (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF8000000000123, 0xFFF0000000000001),
}
_FLOAT_DTYPES: Mapping[str, tuple[type, type, pa.DataType, float]] = {
    "float16": (np.float16, np.uint16, pa.float16(), 6.0e4),
    "float32": (np.float32, np.uint32, pa.float32(), 1.0e30),
    "float64": (np.float64, np.uint64, pa.float64(), 1.0e300),
}


def _float_column(spec: _Spec, name: str) -> pa.Array:
    dtype, bits_dtype, typ, big = _FLOAT_DTYPES[name]
    rng = _rng(spec, name)
    n = spec.num_rows
    base = rng.normal(0.0, 100.0, size=n)
    base[rng.random(n) < 0.05] = 0.0  # plenty of zeros so some pages have min -0.0 / max +0.0
    values = base.astype(dtype)
    layout = _rng(spec, name + "/layout")
    values = values[_clustered_order(layout, values)]
    tiny = np.finfo(dtype).tiny
    specials = np.array([-0.0, 0.0, np.inf, -np.inf, big, -big, tiny, -tiny], dtype=dtype)
    count = min(n, 2 * len(specials))
    start = int(layout.integers(0, n - count + 1))
    values[start : start + count] = np.resize(specials, count)  # one run, as in _inject
    mask = _null_mask(spec, layout)
    if spec.nan_fraction > 0:
        nan_rows = np.flatnonzero((rng.random(n) < spec.nan_fraction) & ~mask)
        bits = values.view(bits_dtype)
        if spec.nan_payloads:
            payloads = np.array(_NAN_BITS[name], dtype=bits_dtype)
            bits[nan_rows] = payloads[np.arange(len(nan_rows)) % len(payloads)]
        else:
            bits[nan_rows] = np.array(_NAN_BITS[name][0], dtype=bits_dtype)
    # from_numpy keeps the exact bit patterns (NaN payloads and -0.0).
    return pa.array(values, typ, mask=mask)


# --- decimals ------------------------------------------------------------------------------


def _decimal_column(spec: _Spec, name: str) -> pa.Array:
    precision, scale, ctor = DECIMALS[name]
    rng = _rng(spec, name)
    n = spec.num_rows
    limit = 10**precision - 1
    words = rng.integers(0, 10**9, size=(n, -(-precision // 9)), dtype=np.int64)
    shifts = rng.integers(0, precision, size=n)  # vary magnitudes, not only p-digit values
    signs = rng.random(n) < 0.5
    raw = []
    for row, shift, negative in zip(words, shifts, signs):
        v = 0
        for w in row:
            v = v * 10**9 + int(w)
        v = (v % (limit + 1)) // 10 ** int(shift)
        raw.append(-v if negative else v)
    unscaled, mask = _arrange(spec, name, raw, [limit, -limit, 0, 1, -1])
    # The string constructor is exact at any precision (scaleb would round at 28 digits).
    values = [decimal.Decimal(f"{v}E-{scale}") for v in unscaled]
    return pa.array(_masked(values, mask), ctor(precision, scale))


# --- strings and binaries ---------------------------------------------------------------------


def _random_strings(spec: _Spec, name: str) -> list[str]:
    rng = _rng(spec, name)
    n = spec.num_rows
    lengths = rng.integers(0, 12, size=n)
    long_rows = rng.random(n) < 0.03
    lengths[long_rows] = rng.integers(40, 90, size=int(long_rows.sum()))
    picks = rng.integers(0, len(_ALPHABET), size=int(lengths.sum()))
    # Mostly ASCII so clustering yields readable ranges; multi-byte characters 1 in 4.
    ascii_only = rng.random(len(picks)) < 0.75
    picks = np.where(ascii_only, picks % 45, picks)
    out, pos = [], 0
    for length in lengths:
        out.append("".join(_ALPHABET[int(i)] for i in picks[pos : pos + length]))
        pos += length
    return out


def _string_column(spec: _Spec, name: str, typ: pa.DataType) -> pa.Array:
    # Python str order is code-point order, which equals UTF-8 byte order.
    values, mask = _arrange(spec, name, _random_strings(spec, name), SPECIAL_STRINGS)
    return pa.array(_masked(values, mask), typ)


def _json_column(spec: _Spec, name: str) -> pa.Array:
    rng = _rng(spec, name)
    raw = [f'{{"k": {int(x)}, "s": "{"é" * int(x % 5)}"}}' for x in rng.integers(-1000, 1000, size=spec.num_rows)]
    values, mask = _arrange(spec, name, raw, ["{}", "[]", "null", '{"z": "' + "\U0010ffff" * 20 + '"}'])
    return pa.array(_masked(values, mask), pa.json_())


def _random_binaries(spec: _Spec, name: str, length: int | None) -> list[bytes]:
    rng = _rng(spec, name)
    n = spec.num_rows
    out = []
    lengths = rng.integers(0, 20, size=n) if length is None else np.full(n, length)
    for ln in lengths:
        raw = rng.integers(0, 256, size=int(ln), dtype=np.uint8)
        raw[rng.random(int(ln)) < 0.5] = 0xFF  # 0xFF-heavy: stresses unsigned comparison
        out.append(raw.tobytes())
    return out


def _binary_column(spec: _Spec, name: str, typ: pa.DataType) -> pa.Array:
    values, mask = _arrange(spec, name, _random_binaries(spec, name, None), SPECIAL_BINARIES)
    return pa.array(_masked(values, mask), typ)


def _fixed_binary_column(spec: _Spec, name: str, typ: pa.DataType) -> pa.Array:
    specials = [b"\x00" * 16, b"\xff" * 16, b"\x80" + b"\x00" * 15, b"\x7f" + b"\xff" * 15]
    values, mask = _arrange(spec, name, _random_binaries(spec, name, 16), specials)
    if isinstance(typ, pa.UuidType):
        storage = pa.array(_masked(values, mask), pa.binary(16))
        return pa.ExtensionArray.from_storage(typ, storage)
    return pa.array(_masked(values, mask), typ)


def _dict_string_column(spec: _Spec, name: str) -> pa.Array:
    rng = _rng(spec, name)
    codes = rng.integers(0, len(_DICT_WORDS), size=spec.num_rows)
    values, mask = _arrange(spec, name, [int(c) for c in codes], [], sort_key=lambda c: _DICT_WORDS[c])
    indices = pa.array(_masked(values, mask), pa.int32())
    return pa.DictionaryArray.from_arrays(indices, pa.array(_DICT_WORDS, pa.string()))


# --- dates, times, timestamps -------------------------------------------------------------------

_UNIT_PER_SECOND: Mapping[str, int] = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _temporal_column(spec: _Spec, name: str) -> pa.Array:
    if name in ("date32", "date64"):
        days, mask = _ints(spec, name, _DATE_LO, _DATE_HI, [0, -1, _DATE_LO, _DATE_HI, 24855])
        if name == "date32":
            return pa.array(_masked(days, mask), pa.date32())
        # date64 must hold whole days to survive Parquet's DATE (INT32 days) round trip.
        return pa.array(_masked([d * _DAY_MS for d in days], mask), pa.date64())
    if name.startswith("time"):
        unit = name.split("_")[1]
        day = 86_400 * _UNIT_PER_SECOND[unit]
        values, mask = _ints(spec, name, 0, day - 1, [0, day - 1, 1])
        typ = pa.time32(unit) if name.startswith("time32") else pa.time64(unit)
        return pa.array(_masked(values, mask), typ)
    if name.startswith("duration"):
        unit = name.split("_")[1]
        big = 10**6 * 86_400 * _UNIT_PER_SECOND[unit]
        values, mask = _ints(spec, name, -big, big, [0, -1, 1, -big, big])
        return pa.array(_masked(values, mask), pa.duration(unit))
    # timestamps: ts_<unit>[_tz], spanning 1900..2200 with the epoch and its neighbours.
    parts = name.split("_")
    unit, tz = parts[1], (TZ if len(parts) > 2 else None)
    per_day = 86_400 * _UNIT_PER_SECOND[unit]
    lo, hi = _DATE_LO * per_day, (_DATE_HI + 1) * per_day - 1
    values, mask = _ints(spec, name, lo, hi, [0, -1, 1, lo, hi])
    return pa.array(_masked(values, mask), pa.timestamp(unit, tz))


# --- nested -----------------------------------------------------------------------------------


def _nested_lengths(rng: np.random.Generator, spec: _Spec, max_len: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Per-row list lengths (0..max_len, so empty lists occur) and a null-list mask."""
    return rng.integers(0, max_len + 1, size=spec.num_rows), _null_mask(spec, rng)


def _maybe_null(rng: np.random.Generator, value, fraction: float):
    return None if rng.random() < fraction else value


def _nested_column(spec: _Spec, name: str) -> pa.Array:
    rng = _rng(spec, name)
    n = spec.num_rows
    lengths, nulls = _nested_lengths(rng, spec)
    # Enough draws for the hungriest kind: list<list> takes up to 3 per element, fixed lists 3 a row.
    ints = rng.integers(-(2**31), 2**31, size=int(lengths.sum()) * 4 + 3 * n + 4)
    strs = _random_strings(spec, name)
    null_el = spec.null_fraction
    pos = 0

    def take(k: int) -> list[int]:
        nonlocal pos
        out = [int(x) for x in ints[pos : pos + k]]
        pos += k
        return out

    rows: list = []
    for i in range(n):
        k = int(lengths[i])
        s = strs[i]
        if name == "list_int32":
            row = [_maybe_null(rng, v, null_el) for v in take(k)]
        elif name == "list_string":
            row = [_maybe_null(rng, s[: j + 1] + str(j), null_el) for j in range(k)]
        elif name == "large_list_int64":
            row = [_maybe_null(rng, v * 2**31, null_el) for v in take(k)]
        elif name == "fixed_list_int16":
            row = [_maybe_null(rng, v % 65536 - 32768, null_el) for v in take(3)]
        elif name == "map_string_int64":
            row = [(f"{s[:4]}#{j}", _maybe_null(rng, v, null_el)) for j, v in enumerate(take(k))]
        elif name == "struct":
            a, = take(1)
            row = {"a": _maybe_null(rng, a, null_el), "b": _maybe_null(rng, s, null_el)}
        elif name == "list_struct":
            row = [{"x": _maybe_null(rng, v, null_el), "y": _maybe_null(rng, s[:j], null_el)} for j, v in enumerate(take(k))]
        elif name == "struct_list":
            row = {"ids": _maybe_null(rng, [_maybe_null(rng, v, null_el) for v in take(k)], null_el), "name": _maybe_null(rng, s, null_el)}
        elif name == "list_list_int64":
            row = [_maybe_null(rng, take(int(v) % 3), null_el) for v in take(k)]
        else:
            raise ValueError(name)
        rows.append(None if nulls[i] else row)
    return pa.array(rows, NESTED_TYPES[name])


NESTED_TYPES: Mapping[str, pa.DataType] = {
    "list_int32": pa.list_(pa.int32()),
    "list_string": pa.list_(pa.string()),
    "large_list_int64": pa.large_list(pa.int64()),
    "fixed_list_int16": pa.list_(pa.int16(), 3),
    "map_string_int64": pa.map_(pa.string(), pa.int64()),
    "struct": pa.struct([("a", pa.int32()), ("b", pa.string())]),
    "list_struct": pa.list_(pa.struct([("x", pa.int32()), ("y", pa.string())])),
    "struct_list": pa.struct([("ids", pa.list_(pa.int32())), ("name", pa.string())]),
    "list_list_int64": pa.list_(pa.list_(pa.int64())),
}

_SIMPLE_TYPES: Mapping[str, pa.DataType] = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "string": pa.string(), "large_string": pa.large_string(), "string_view": pa.string_view(),
    "binary": pa.binary(), "large_binary": pa.large_binary(), "binary_view": pa.binary_view(),
    "fixed_binary16": pa.binary(16), "uuid": pa.uuid(),
}  # fmt: skip


def _column(spec: _Spec, kind: str) -> pa.Array:
    """One column of the given kind (dispatch on the kind name)."""
    if kind == "bool":
        rng = _rng(spec, kind)
        values, mask = _arrange(spec, kind, [bool(b) for b in rng.random(spec.num_rows) < 0.5], [])
        return pa.array(_masked(values, mask), pa.bool_())
    if kind.startswith(("int", "uint")):
        return _int_column(spec, kind, _SIMPLE_TYPES[kind])
    if kind in FLOAT_KINDS:
        return _float_column(spec, kind)
    if kind in DECIMALS:
        return _decimal_column(spec, kind)
    if kind in ("string", "large_string", "string_view"):
        return _string_column(spec, kind, _SIMPLE_TYPES[kind])
    if kind == "json":
        return _json_column(spec, kind)
    if kind in ("binary", "large_binary", "binary_view"):
        return _binary_column(spec, kind, _SIMPLE_TYPES[kind])
    if kind in ("fixed_binary16", "uuid"):
        return _fixed_binary_column(spec, kind, _SIMPLE_TYPES[kind])
    if kind == "dict_string":
        return _dict_string_column(spec, kind)
    if kind.startswith(("date", "time", "ts_", "duration")):
        return _temporal_column(spec, kind)
    if kind in NESTED_TYPES:
        return _nested_column(spec, kind)
    raise ValueError(f"unknown kind {kind!r}; expected one of ALL_KINDS")


def _key_columns(spec: _Spec, sorted_key: bool) -> dict[str, pa.Array]:
    rng = _rng(spec, KEY_COLUMN)
    n = spec.num_rows
    # Ascending with duplicates (steps of 0..3), starting negative so the sign boundary is crossed.
    key = np.cumsum(rng.integers(0, 4, size=n)) - n
    if not sorted_key:
        key = rng.permutation(key)
    desc = (n - np.arange(n, dtype=np.int32) * 3).astype(np.int32)
    return {KEY_COLUMN: pa.array(key.astype(np.int64)), DESC_COLUMN: pa.array(desc)}


def random_table(
    seed: int,
    num_rows: int,
    *,
    kinds: Iterable[str] | None = None,
    null_fraction: float = 0.1,
    sorted_key: bool = True,
    nan_fraction: float = 0.0,
    nan_payloads: bool = False,
) -> pa.Table:
    """A deterministic table: `key`, `desc`, then one column per kind (ALL_KINDS order).

    null_fraction: share of random nulls per column (plus one all-null run of 5% of the rows,
    so small pages can be all-null); `key`/`desc` are never null.
    nan_fraction: share of float rows set to NaN; nan_payloads mixes -NaN, signalling NaN and
    payload-carrying NaN bit patterns instead of the canonical quiet NaN.
    """
    wanted = set(ALL_KINDS if kinds is None else kinds)
    unknown = wanted - set(ALL_KINDS)
    if unknown:
        raise ValueError(f"unknown kinds: {sorted(unknown)}")
    spec = _Spec(seed, num_rows, null_fraction, nan_fraction, nan_payloads)
    columns = _key_columns(spec, sorted_key)
    for kind in ALL_KINDS:
        if kind in wanted:
            columns[kind] = _column(spec, kind)
    return pa.table(columns)


def expected_readback(table: pa.Table, options: Mapping[str, object] | None = None) -> pa.Table:
    """`table` cast to the types pyarrow reads back after writing it with `options`.

    See READBACK_TYPES; with use_deprecated_int96_timestamps every timestamp comes back as
    timezone-less nanoseconds.
    """
    int96 = bool(options and options.get("use_deprecated_int96_timestamps"))
    fields = []
    for f in table.schema:
        typ = READBACK_TYPES.get(f.name, f.type)
        if int96 and pa.types.is_timestamp(f.type):
            typ = pa.timestamp("ns")
        fields.append(pa.field(f.name, typ, f.nullable))
    return table.cast(pa.schema(fields))


def same_content(actual: pa.Table, expected: pa.Table) -> bool:
    """Equal schemas and values, ignoring chunking and dictionary layout.

    Dictionary columns are compared decoded: written with use_dictionary=False they read back
    as dictionaries rebuilt per chunk, with different dictionaries and indices.
    """
    def decoded(t: pa.Table) -> pa.Table:
        cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
        return pa.table(cols, names=t.column_names)

    return decoded(actual).equals(decoded(expected))


# --------------------------------------------------------------------------------------------
# Writer option grids
# --------------------------------------------------------------------------------------------

EncodingPlan = Literal["default", "delta", "byte_stream_split"]


@dataclass(frozen=True)
class WriterVariant:
    """One combination of pq.write_table options; `encodings` is resolved per table schema."""

    name: str
    options: Mapping[str, object] = field(hash=False)
    encodings: EncodingPlan = "default"


@dataclass(frozen=True)
class WrittenFile:
    """A table written without page index (`path`) and its pyarrow-indexed `twin` (same options)."""

    name: str
    path: Path
    twin: Path
    options: Mapping[str, object] = field(hash=False)  # exact kwargs given to pq.write_table


# Small pages: pyarrow only checks data_page_size between write batches, so a small batch is what
# actually yields many pages per chunk; max_rows_per_page caps rows directly (and is what splits
# dictionary-encoded chunks, whose index pages stay tiny). Byte-limited pages start at different
# rows in different columns; row-capped ones line up.
_SMALL_PAGES: Mapping[str, object] = {"data_page_size": 512, "write_batch_size": 32, "max_rows_per_page": 120}
_ROW_CAP: Mapping[str, object] = {"max_rows_per_page": 100, "write_batch_size": 100}

SMALL_GRID: tuple[WriterVariant, ...] = (
    WriterVariant("v1-dict-snappy", {"data_page_version": "1.0", "use_dictionary": True, "compression": "snappy", **_SMALL_PAGES}),
    WriterVariant("v2-plain-zstd-crc", {"data_page_version": "2.0", "use_dictionary": False, "compression": "zstd", "write_page_checksum": True, **_SMALL_PAGES}),
    WriterVariant("v1-delta-none", {"data_page_version": "1.0", "use_dictionary": False, "compression": "none", **_SMALL_PAGES}, "delta"),
    WriterVariant("v2-dict-gzip-decint", {"data_page_version": "2.0", "use_dictionary": True, "compression": "gzip", "store_decimal_as_integer": True, **_ROW_CAP}),
    WriterVariant("v1-bss-lz4", {"data_page_version": "1.0", "use_dictionary": False, "compression": "lz4", **_SMALL_PAGES}, "byte_stream_split"),
    WriterVariant("v2-delta-brotli-crc", {"data_page_version": "2.0", "use_dictionary": False, "compression": "brotli", "write_page_checksum": True, **_ROW_CAP}, "delta"),
)  # fmt: skip


def _full_grid() -> tuple[WriterVariant, ...]:
    """Every page version x dictionary x codec, with checksums, decimal-as-integer and page-size
    styles rotated through, plus the encoding, INT96 and dictionary-fallback specials."""
    out = []
    i = 0
    for version in ("1.0", "2.0"):
        for use_dict in (True, False):
            for codec in ("none", "snappy", "gzip", "zstd", "lz4", "brotli"):
                opts: dict[str, object] = {
                    "data_page_version": version,
                    "use_dictionary": use_dict,
                    "compression": codec,
                    **(_SMALL_PAGES if i % 2 == 0 else _ROW_CAP),
                }
                if i % 3 == 0:
                    opts["write_page_checksum"] = True
                if i % 4 == 1:
                    opts["store_decimal_as_integer"] = True
                name = f"v{version[0]}-{'dict' if use_dict else 'plain'}-{codec}"
                out.append(WriterVariant(name, opts))
                i += 1
    for version in ("1.0", "2.0"):
        v = version[0]
        out.append(WriterVariant(f"v{v}-delta", {"data_page_version": version, "use_dictionary": False, "compression": "zstd", **_SMALL_PAGES}, "delta"))
        out.append(WriterVariant(f"v{v}-bss-decint", {"data_page_version": version, "use_dictionary": False, "compression": "snappy", "store_decimal_as_integer": True, **_ROW_CAP}, "byte_stream_split"))
        out.append(WriterVariant(f"v{v}-int96", {"data_page_version": version, "use_dictionary": True, "compression": "snappy", "use_deprecated_int96_timestamps": True, **_SMALL_PAGES}))
        # A tiny dictionary page limit forces the fallback to PLAIN mid-chunk: a chunk with a
        # dictionary page, dictionary-encoded pages, then plain pages.
        out.append(WriterVariant(f"v{v}-dict-fallback", {"data_page_version": version, "use_dictionary": True, "compression": "snappy", "dictionary_pagesize_limit": 1024, **_SMALL_PAGES}))
    return tuple(out)  # fmt: skip


FULL_GRID: tuple[WriterVariant, ...] = _full_grid()


@dataclass(frozen=True)
class _Leaf:
    path: str
    physical: str
    is_dictionary: bool


def _leaves(table: pa.Table, options: Mapping[str, object]) -> list[_Leaf]:
    """The Parquet leaf columns `table` becomes under `options` (found by writing zero rows)."""
    sink = io.BytesIO()
    schema_opts = {k: options[k] for k in ("store_decimal_as_integer", "use_deprecated_int96_timestamps") if k in options}
    pq.write_table(table.slice(0, 0), sink, **schema_opts)
    schema = pq.ParquetFile(io.BytesIO(sink.getvalue())).schema
    out = []
    for i in range(len(schema)):
        col = schema.column(i)
        top = col.path.split(".")[0]
        is_dict = pa.types.is_dictionary(table.schema.field(top).type)
        out.append(_Leaf(col.path, col.physical_type, is_dict))
    return out


def _resolve_encodings(table: pa.Table, variant: WriterVariant) -> dict[str, object]:
    """Per-leaf encodings for the delta / byte-stream-split plans, limited to legal pairs."""
    if variant.encodings == "default":
        return {}
    leaves = _leaves(table, variant.options)
    if variant.encodings == "byte_stream_split":
        legal = {"FLOAT", "DOUBLE", "INT32", "INT64", "FIXED_LEN_BYTE_ARRAY"}
        return {"use_byte_stream_split": [leaf.path for leaf in leaves if leaf.physical in legal]}
    encodings: dict[str, str] = {}
    byte_array_seen = 0
    for leaf in leaves:
        if leaf.is_dictionary:
            # pyarrow 26 cannot read DELTA_(LENGTH_)BYTE_ARRAY back into a dictionary array
            # ("DecodeArrow of DictAccumulator ... not implemented"), so leave those PLAIN.
            continue
        if leaf.physical in ("INT32", "INT64"):
            encodings[leaf.path] = "DELTA_BINARY_PACKED"
        elif leaf.physical == "BYTE_ARRAY":
            # Alternate so both byte-array delta encodings appear.
            encodings[leaf.path] = ("DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY")[byte_array_seen % 2]
            byte_array_seen += 1
        elif leaf.physical == "FIXED_LEN_BYTE_ARRAY":
            encodings[leaf.path] = "DELTA_BYTE_ARRAY"
        elif leaf.physical in ("FLOAT", "DOUBLE"):
            encodings[leaf.path] = "BYTE_STREAM_SPLIT"
        elif leaf.physical == "BOOLEAN":
            encodings[leaf.path] = "RLE"
    return {"column_encoding": encodings}


def _row_group_size(num_rows: int, index: int) -> int:
    # Three even row groups, or an uneven split (last group short) on odd variants.
    third = max(1, -(-num_rows // 3))
    return third if index % 2 == 0 else max(1, (num_rows * 2) // 5)


def write_variants(
    table: pa.Table,
    directory: str | Path,
    grid: Literal["small", "full"] | Sequence[WriterVariant] = "small",
) -> list[WrittenFile]:
    """Write `table` once per writer variant, without page index, plus an indexed twin of each.

    Files are `<directory>/<variant>.parquet` and `<variant>.indexed.parquet`; every variant has
    at least two row groups when the table has at least two rows.
    """
    variants = SMALL_GRID if grid == "small" else FULL_GRID if grid == "full" else tuple(grid)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for index, variant in enumerate(variants):
        options = {
            **variant.options,
            **_resolve_encodings(table, variant),
            "row_group_size": _row_group_size(table.num_rows, index),
        }
        path = directory / f"{variant.name}.parquet"
        twin = directory / f"{variant.name}.indexed.parquet"
        pq.write_table(table, path, **options)
        pq.write_table(table, twin, write_page_index=True, **options)
        written.append(WrittenFile(variant.name, path, twin, dict(options)))
    return written


# --------------------------------------------------------------------------------------------
# Page counting (an independent oracle: a minimal Thrift compact reader for PageHeader)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageInfo:
    """What the tests need from one PageHeader."""

    type: int  # DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2, ...
    header_size: int
    compressed_size: int
    has_crc: bool


def page_headers(path: str | Path) -> dict[tuple[int, str], list[PageInfo]]:
    """Every page header of every column chunk, keyed by (row group, column path), in file order."""
    data = Path(path).read_bytes()
    md = pq.ParquetFile(path).metadata
    out = {}
    for rg in range(md.num_row_groups):
        for ci in range(md.num_columns):
            chunk = md.row_group(rg).column(ci)
            out[(rg, chunk.path_in_schema)] = [
                PageInfo(header[1], header_size, header[3], 4 in header)
                for header, header_size, _ in chunk_pages(data, chunk)
            ]
    return out


def data_page_counts(path: str | Path) -> dict[tuple[int, str], int]:
    """Data pages (v1 and v2, not dictionary pages) per (row group, column path)."""
    return {
        key: sum(p.type in (DATA_PAGE, DATA_PAGE_V2) for p in pages)
        for key, pages in page_headers(path).items()
    }
