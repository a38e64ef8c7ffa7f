"""Random predicates for lookup tests, rendered as SQL-like text and as (column, op, value) tuples,
and an independent reference filter built only on pyarrow compute.

Reference semantics (what lookup must return, as Spark, DuckDB and DataFusion do): nulls never
match; floats compare as numbers except that NaN equals NaN and is greater than every number
(infinity included), and -0.0 equals 0.0; IN is a disjunction of equalities (so NaN IN (NaN) is
true, -0.0 IN (0.0) is true); BETWEEN a AND b is a >= a AND a <= b.
"""
from __future__ import annotations

import datetime as dt
import decimal
import math
import random
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

OPS = ("=", "!=", "<", "<=", ">", ">=", "between", "in", "is_null", "is_not_null")
_CMP = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
        ">": pc.greater, ">=": pc.greater_equal}


@dataclass(frozen=True)
class Cond:
    """One condition; `lits` are pyarrow scalars of the column's (decoded) type."""

    column: str
    op: str
    lits: tuple[pa.Scalar, ...] = ()


# ---------------------------------------------------------------- types

def base_type(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def decoded(column: pa.ChunkedArray | pa.Array):
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def filterable(typ: pa.DataType) -> bool:
    """Flat primitive types lookup can filter on."""
    typ = base_type(typ)
    if isinstance(typ, pa.ExtensionType) or pa.types.is_null(typ) or pa.types.is_nested(typ):
        return False
    if pa.types.is_duration(typ) or pa.types.is_interval(typ):
        return False
    return True


def _ns(typ: pa.DataType) -> bool:
    return (pa.types.is_timestamp(typ) or pa.types.is_time64(typ)) and typ.unit == "ns"


def _raw_int(s: pa.Scalar) -> int:
    """The integer storage of a temporal scalar."""
    width = pa.int32() if s.type.bit_width == 32 else pa.int64()
    return s.cast(width).as_py()


# ---------------------------------------------------------------- rendering

def show_value(v: Any) -> str:
    """repr that never needs pandas (pyarrow's repr of ns scalars does)."""
    if isinstance(v, pa.Scalar):
        if pa.types.is_temporal(v.type) and v.is_valid:
            return f"pa.scalar({_raw_int(v)}, {v.type})"
        return f"pa.scalar({v.as_py()!r}, {v.type})"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(show_value(x) for x in v) + "]"
    return repr(v)


def show(where: Any) -> str:
    if isinstance(where, str):
        return repr(where)
    return "[" + ", ".join(f"({c!r}, {op!r}, {show_value(v)})" for c, op, v in where) + "]"


def py_value(s: pa.Scalar) -> Any:
    """The literal as a Python value for a tuple predicate (a pyarrow scalar where Python has no
    exact equivalent: nanosecond timestamps and times with a sub-microsecond part)."""
    if _ns(s.type) and _raw_int(s) % 1000:
        return s
    if _ns(s.type):
        return s.cast(pa.timestamp("us", s.type.tz) if pa.types.is_timestamp(s.type) else pa.time64("us")).as_py()
    return s.as_py()


_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def sql_literal(s: pa.Scalar) -> str | None:
    """The literal as SQL-like text, or None where the grammar cannot express it exactly."""
    t = s.type
    if pa.types.is_boolean(t):
        return "true" if s.as_py() else "false"
    if pa.types.is_integer(t):
        return str(s.as_py())
    if pa.types.is_floating(t):
        f = float(s.as_py())
        if math.isnan(f):
            return "'NaN'"
        return ("'inf'" if f > 0 else "'-inf'") if math.isinf(f) else repr(f)
    if pa.types.is_decimal(t):
        return str(s.as_py())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "'" + s.as_py().replace("'", "''") + "'"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        try:
            text = s.as_py().decode("utf-8")
        except UnicodeDecodeError:
            return None
        return "'" + text.replace("'", "''") + "'"
    if pa.types.is_date(t):
        days = s.cast(pa.date32()).cast(pa.int32()).as_py()
        try:
            return f"DATE '{(dt.date(1970, 1, 1) + dt.timedelta(days=days)).isoformat()}'"
        except OverflowError:
            return None
    if pa.types.is_timestamp(t):
        per = 10 ** _DIGITS[t.unit]
        seconds, frac = divmod(_raw_int(s), per)
        try:
            stamp = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)
        except OverflowError:
            return None
        if stamp.year < 1000:
            return None
        text = stamp.strftime("%Y-%m-%d %H:%M:%S")
        if per > 1:
            text += "." + str(frac).rjust(_DIGITS[t.unit], "0")
        if t.tz:
            text += "Z"
        return f"TIMESTAMP '{text}'"
    return None  # times: pyarrow cannot cast text to them


def quote_column(name: str) -> str:
    if name.isidentifier() and name.lower() not in ("and", "is", "not", "null", "in", "between"):
        return name
    return '"' + name.replace('"', '""') + '"'


def as_tuples(conds: Sequence[Cond]) -> list[tuple]:
    out = []
    for c in conds:
        if c.op in ("is_null", "is_not_null"):
            out.append((c.column, c.op, None))
        elif c.op in ("in", "between"):
            out.append((c.column, c.op, [py_value(x) for x in c.lits]))
        else:
            out.append((c.column, c.op, py_value(c.lits[0])))
    return out


def as_sql(conds: Sequence[Cond], rng: random.Random | None = None) -> str | None:
    """SQL-like text (keyword case varied by `rng`), or None if a literal has no text form."""
    def kw(word: str) -> str:
        if rng is None:
            return word
        return rng.choice([word, word.lower(), word.capitalize()])

    parts = []
    for c in conds:
        q = quote_column(c.column)
        if c.op == "is_null":
            parts.append(f"{q} {kw('IS')} {kw('NULL')}")
            continue
        if c.op == "is_not_null":
            parts.append(f"{q} {kw('IS')} {kw('NOT')} {kw('NULL')}")
            continue
        texts = [sql_literal(x) for x in c.lits]
        if any(t is None for t in texts):
            return None
        if c.op == "between":
            parts.append(f"{q} {kw('BETWEEN')} {texts[0]} {kw('AND')} {texts[1]}")
        elif c.op == "in":
            parts.append(f"{q} {kw('IN')} ({', '.join(texts)})")
        else:
            op = c.op
            if rng is not None and op == "!=" and rng.random() < 0.3:
                op = "<>"
            parts.append(f"{q} {op} {texts[0]}")
    return f" {kw('AND')} ".join(parts)


# ---------------------------------------------------------------- reference

def _comparable(column, lit: pa.Scalar):
    """pyarrow compute has no float16 kernels: compare those as float32 (exact)."""
    if pa.types.is_float16(column.type):
        return column.cast(pa.float32()), lit.cast(pa.float32())
    if pa.types.is_float16(lit.type):
        lit = lit.cast(pa.float32())
    return column, lit


def _engine_compare(column, op: str, lit: pa.Scalar):
    """A float comparison as the engines make it, from the trichotomy (less, equal) of the pair
    (is NaN, value): NaN above every number, equal to NaN."""
    if not pa.types.is_floating(column.type) or not lit.is_valid:
        col, v = _comparable(column, lit)
        return _CMP[op](col, v)
    values = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
    x = float(lit.cast(pa.float64()).as_py())
    col_nan, lit_nan = np.isnan(values), math.isnan(x)
    with np.errstate(invalid="ignore"):
        less = ~col_nan & (lit_nan | (values < x))
        equal = (col_nan & lit_nan) | (~col_nan & (not lit_nan) & (values == x))
    result = {"<": less, "<=": less | equal, "=": equal, "!=": ~equal, ">": ~(less | equal), ">=": ~less}[op]
    return pa.array(result, mask=pc.is_null(column).to_numpy(zero_copy_only=False))


def reference_mask(table: pa.Table, conds: Sequence[Cond]) -> pa.Array:
    mask = pa.array(np.ones(table.num_rows, dtype=bool))
    for c in conds:
        column = decoded(table.column(c.column))
        if c.op == "is_null":
            m = pc.is_null(column)
        elif c.op == "is_not_null":
            m = pc.is_valid(column)
        elif c.op == "between":
            m = pc.and_(_engine_compare(column, ">=", c.lits[0]), _engine_compare(column, "<=", c.lits[1]))
        elif c.op == "in":
            m = None
            for lit in c.lits:
                e = pc.fill_null(_engine_compare(column, "=", lit), False)
                m = e if m is None else pc.or_(m, e)
        else:
            m = _engine_compare(column, c.op, c.lits[0])
        mask = pc.and_(mask, pc.fill_null(m, False))
    return mask


def reference(table: pa.Table, conds: Sequence[Cond], columns: Sequence[str] | None = None) -> pa.Table:
    out = table.filter(reference_mask(table, conds))
    return out.select(list(columns)) if columns is not None else out


def _float_bits(array: pa.Array) -> pa.Array:
    width = {16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}[array.type.bit_width]
    return array.view(width)


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


def table_difference(actual: pa.Table, expected: pa.Table, nullability: bool = True) -> str | None:
    """None when equal: same schema (names, types, and nullability unless told not to), same rows
    in the same order, floats bit for bit (NaN and -0.0 included); dictionary columns compared
    decoded."""
    a_schema, e_schema = actual.schema, expected.schema
    if not nullability:
        a_schema, e_schema = _nullable(a_schema), _nullable(e_schema)
    if not a_schema.equals(e_schema, check_metadata=False):
        return f"schema differs:\n  got      {actual.schema.to_string(show_schema_metadata=False)!r}\n  expected {expected.schema.to_string(show_schema_metadata=False)!r}"
    if actual.num_rows != expected.num_rows:
        return f"{actual.num_rows} rows, expected {expected.num_rows}"
    for name in expected.column_names:
        a = actual.column(name).combine_chunks()
        e = expected.column(name).combine_chunks()
        if pa.types.is_dictionary(e.type):
            a, e = decoded(a), decoded(e)
        if pa.types.is_floating(e.type):
            if not a.is_null().equals(e.is_null()):
                return f"column {name}: nulls differ"
            if not pc.fill_null(_float_bits(a), 0).equals(pc.fill_null(_float_bits(e), 0)):
                return f"column {name}: values differ"
        elif not a.equals(e):
            return f"column {name}: values differ"
    return None


# ---------------------------------------------------------------- generation

class PredicateGen:
    """Random conditions on the filterable columns of `table`, literals drawn from its values
    (so predicates hit), their neighbours, and values beyond them."""

    def __init__(self, table: pa.Table, rng: random.Random, columns: Sequence[str] | None = None) -> None:
        self.table = table
        self.rng = rng
        names = columns if columns is not None else table.column_names
        self.columns = [n for n in names if filterable(table.schema.field(n).type)]
        self.values = {n: decoded(table.column(n)).combine_chunks().drop_null() for n in self.columns}
        self.types = {n: base_type(table.schema.field(n).type) for n in self.columns}

    def literal(self, column: str) -> pa.Scalar | None:
        values, typ, rng = self.values[column], self.types[column], self.rng
        if len(values) == 0:
            return None
        s = values[rng.randrange(len(values))]
        if rng.random() < 0.55:
            return s
        try:
            return self._near(s, typ)
        except (pa.ArrowException, ValueError, OverflowError, decimal.InvalidOperation):
            return s

    def _near(self, s: pa.Scalar, typ: pa.DataType) -> pa.Scalar:
        rng = self.rng
        if pa.types.is_boolean(typ):
            return pa.scalar(rng.random() < 0.5, typ)
        if pa.types.is_integer(typ):
            lo, hi = ((0, 2 ** typ.bit_width - 1) if pa.types.is_unsigned_integer(typ)
                      else (-(2 ** (typ.bit_width - 1)), 2 ** (typ.bit_width - 1) - 1))
            v = s.as_py() + rng.choice([-1, 1, rng.randrange(-1000, 1000), rng.randrange(-10**9, 10**9)])
            return pa.scalar(min(max(v, lo), hi), typ)
        if pa.types.is_date(typ) or pa.types.is_timestamp(typ) or pa.types.is_time(typ):
            storage = pa.int32() if typ.bit_width == 32 else pa.int64()
            v = _raw_int(s) + rng.choice([-1, 1, rng.randrange(-10**6, 10**6), rng.randrange(-10**12, 10**12)])
            if pa.types.is_time(typ):
                day = 86_400 * 10 ** _DIGITS[typ.unit]
                v = v % day
            elif pa.types.is_date(typ):
                v = max(min(v, 2_900_000), -700_000)
            return pa.scalar(v, storage).cast(typ)
        if pa.types.is_floating(typ):
            f = s.as_py()
            if f is None or not math.isfinite(f):
                f = 1.0
            v = rng.choice([f * (1 + rng.uniform(-1e-3, 1e-3)), f + rng.uniform(-2, 2), -0.0, 0.0,
                            rng.uniform(-500, 500), math.nextafter(f, math.inf), -f])
            if pa.types.is_float16(typ):
                return pa.scalar(np.float16(v), typ)
            return pa.scalar(v, pa.float64()).cast(typ) if pa.types.is_float32(typ) else pa.scalar(v, typ)
        if pa.types.is_decimal(typ):
            q = decimal.Decimal(1).scaleb(-typ.scale)
            v = s.as_py() + q * rng.choice([-1, 1, rng.randrange(-10**6, 10**6)])
            return pa.scalar(v, typ)
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            v = s.as_py()
            return pa.scalar(rng.choice([v + "a", v[:-1], v[: rng.randrange(0, 80)], v + "\x00",
                                         v + "\U0010ffff", "m", ""]), typ)
        if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            v = s.as_py()
            return pa.scalar(rng.choice([v + b"\x00", v[:-1], v + b"\xff", b"\x80", b""]), typ)
        if pa.types.is_fixed_size_binary(typ):
            v = bytearray(s.as_py())
            if v:
                i = rng.randrange(len(v))
                v[i] = (v[i] + rng.choice([1, 255])) % 256
            return pa.scalar(bytes(v), typ)
        return s

    @staticmethod
    def _ordered(a: pa.Scalar, b: pa.Scalar) -> tuple[pa.Scalar, pa.Scalar]:
        def key(s: pa.Scalar) -> Any:
            return _raw_int(s) if pa.types.is_temporal(s.type) else s.as_py()
        return (b, a) if key(a) > key(b) else (a, b)

    def condition(self, column: str | None = None) -> Cond:
        rng = self.rng
        column = column or rng.choice(self.columns)
        op = rng.choice(OPS + ("=", "between", "in", "<", ">="))
        if op in ("is_null", "is_not_null"):
            return Cond(column, op)
        if op == "between":
            a, b = self.literal(column), self.literal(column)
            if a is None:
                return Cond(column, "is_null")
            if rng.random() < 0.85:  # mostly low <= high; sometimes an empty range
                a, b = self._ordered(a, b)
            return Cond(column, op, (a, b))
        if op == "in":
            lits = tuple(self.literal(column) for _ in range(rng.randrange(1, 5)))
            if lits[0] is None:
                return Cond(column, "is_null")
            return Cond(column, op, lits)
        lit = self.literal(column)
        return Cond(column, "is_not_null") if lit is None else Cond(column, op, (lit,))

    def where(self, n: int | None = None) -> list[Cond]:
        n = n or self.rng.choice([1, 1, 1, 2, 2, 3])
        return [self.condition() for _ in range(n)]
