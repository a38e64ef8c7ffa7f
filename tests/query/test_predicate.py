"""The where-clause parser (pageindex.query.predicate): SQL-like text and pyarrow-style tuples."""
from __future__ import annotations

import decimal
import random

import pytest

from pageindex.query.predicate import Condition, PredicateError, column_path, parse

# ---------------------------------------------------------------- SQL-like text


@pytest.mark.parametrize("text, op", [
    ("x = 1", "="), ("x == 1", "="), ("x != 1", "!="), ("x <> 1", "!="),
    ("x < 1", "<"), ("x <= 1", "<="), ("x > 1", ">"), ("x >= 1", ">="),
])
def test_comparison_operators(text, op):
    assert parse(text) == [Condition("x", op, (1,))]


def test_between_in_and_null_tests():
    assert parse("a BETWEEN 1 AND 5") == [Condition("a", "between", (1, 5))]
    assert parse("a IN (1, 2, 3)") == [Condition("a", "in", (1, 2, 3))]
    assert parse("a in (7)") == [Condition("a", "in", (7,))]
    assert parse("a IS NULL") == [Condition("a", "is_null")]
    assert parse("a IS NOT NULL") == [Condition("a", "is_not_null")]


def test_keywords_are_case_insensitive_and_and_combines():
    got = parse("a between 1 and 2 AND b Is Not Null and c iN ('x') AnD d is null")
    assert got == [Condition("a", "between", (1, 2)), Condition("b", "is_not_null"),
                   Condition("c", "in", ("x",)), Condition("d", "is_null")]


def test_between_binds_its_own_and():
    # The AND inside BETWEEN belongs to it; the next AND starts a new condition.
    assert parse("a BETWEEN 1 AND 2 AND b = 3") == [Condition("a", "between", (1, 2)), Condition("b", "=", (3,))]


def test_whitespace_is_optional_around_operators():
    assert parse("a>=1 AND b<>'x' AND c IN(1,2)") == [
        Condition("a", ">=", (1,)), Condition("b", "!=", ("x",)), Condition("c", "in", (1, 2))]
    assert parse("  \n a\t=\n1  ") == [Condition("a", "=", (1,))]


def test_integers_stay_exact():
    big = 2**64 - 1
    (c,) = parse(f"u = {big}")
    assert c.values == (big,) and isinstance(c.values[0], int)
    assert parse("a = -5")[0].values == (-5,)
    assert parse("a = +5")[0].values == (5,)
    assert parse("a = 007")[0].values == (7,)


@pytest.mark.parametrize("text, value", [
    ("1.5", "1.5"), ("-0.0", "-0.0"), (".25", "0.25"), ("1e3", "1E+3"), ("-2.5E-3", "-0.0025"),
    ("123456789012345678901234567890.123456789", "123456789012345678901234567890.123456789"),
])
def test_fractional_numbers_are_kept_exact_as_text(text, value):
    (c,) = parse(f"a = {text}")
    (v,) = c.values
    assert isinstance(v, str) and not isinstance(v, bool)
    assert decimal.Decimal(v) == decimal.Decimal(value)
    # -0.0 keeps its sign
    if text == "-0.0":
        assert decimal.Decimal(v).is_signed()


def test_strings_quotes_and_escapes():
    assert parse("s = 'it''s'")[0].values == ("it's",)
    assert parse("s = ''")[0].values == ("",)
    assert parse("s = 'a AND b = 1'")[0].values == ("a AND b = 1",)
    assert parse("s = '日本語 😀 \U0010ffff'")[0].values == ("日本語 😀 \U0010ffff",)
    assert parse("s = 'line\nbreak'")[0].values == ("line\nbreak",)
    assert parse("s IN ('a,b', ')')")[0].values == ("a,b", ")")


def test_booleans_and_typed_literals():
    assert parse("b = true AND c = FALSE") == [Condition("b", "=", (True,)), Condition("c", "=", (False,))]
    assert parse("d >= DATE '2024-01-02'")[0].values == ("2024-01-02",)
    assert parse("t < timestamp '2024-01-02 03:04:05.123456'")[0].values == ("2024-01-02 03:04:05.123456",)
    assert parse("t = TIME '03:04:05'")[0].values == ("03:04:05",)


def test_quoted_and_dotted_column_names():
    assert parse('"my col" = 1')[0].column == "my col"
    assert parse('"say ""hi""" = 1')[0].column == 'say "hi"'
    assert parse("`back``tick` = 1")[0].column == "back`tick"
    assert parse("a.b = 1")[0].column == "a.b"
    assert parse('"AND" = 1')[0].column == "AND"


@pytest.mark.parametrize("column, path", [
    ("id", ("id",)), ("point.x", ("point", "x")), ("a.b.c", ("a", "b", "c")),
    ("a.b", ("a.b",)),  # a top-level name with a dot is that column
    ("nope", None), ("nope.x", None), ("point.", ("point", "")),
])
def test_column_path_names_a_column_or_a_field_inside_one(column, path):
    assert column_path(column, ["id", "point", "a", "a.b"]) == path


@pytest.mark.parametrize("text", [
    "", "   ", "a", "a =", "= 1", "a = 1 AND", "a = 1 OR b = 2", "a NOT IN (1)", "a NOT = 1",
    "a IN 1", "a IN (1", "a IN (1 2)", "a IN ()", "a BETWEEN 1", "a BETWEEN 1 OR 2", "a IS 1",
    "a IS NOT 1", "a = 'unterminated", "a = 1 b = 2", "(a = 1)", "a = 1)", "a = b", "a = @",
    "a = DATE", "1 = a", "a = NULL",
])
def test_bad_text_raises_predicate_error(text):
    with pytest.raises(PredicateError):
        parse(text)


def test_error_message_points_at_the_problem():
    with pytest.raises(PredicateError, match="OR|AND"):
        parse("a = 1 OR b = 2")
    with pytest.raises(PredicateError, match="NOT IN"):
        parse("a NOT IN (1)")
    with pytest.raises(PredicateError, match="@"):
        parse("a = @")


# ---------------------------------------------------------------- tuples


def test_tuples_like_pyarrow_filters():
    got = parse([("a", "=", 1), ("b", "==", "x"), ("c", "<>", 2.5), ("d", "in", [1, 2]),
                 ("e", "between", (1, 3)), ("f", "is null", None), ("g", "IS NOT NULL", None),
                 ("h", "is_null", None), ("i", ">=", b"\xff")])
    assert got == [
        Condition("a", "=", (1,)), Condition("b", "=", ("x",)), Condition("c", "!=", (2.5,)),
        Condition("d", "in", (1, 2)), Condition("e", "between", (1, 3)), Condition("f", "is_null"),
        Condition("g", "is_not_null"), Condition("h", "is_null"), Condition("i", ">=", (b"\xff",)),
    ]


def test_tuple_values_are_passed_through_unchanged():
    d = decimal.Decimal("1.50")
    nan = float("nan")
    got = parse([("a", "=", d), ("b", "!=", nan), ("c", "in", {5})])
    assert got[0].values == (d,) and got[1].values[0] is nan and got[2].values == (5,)


@pytest.mark.parametrize("where", [
    [], [("a", "=")], [("a", "=", 1, 2)], [("a", "like", "x")], [("a", "not in", [1])],
    [("a", "or", 1)],
])
def test_bad_tuples_raise_predicate_error(where):
    with pytest.raises(PredicateError):
        parse(where)


# ---------------------------------------------------------------- text and tuples agree


def test_random_text_and_tuples_parse_alike():
    rng = random.Random(7)
    columns = ["a", "b_2", "my col", "x.y"]
    for _ in range(300):
        text_parts, tuples = [], []
        for _ in range(rng.randrange(1, 4)):
            col = rng.choice(columns)
            qcol = f'"{col}"' if " " in col else col
            op = rng.choice(["=", "!=", "<", "<=", ">", ">=", "between", "in", "is_null", "is_not_null"])
            values = [rng.choice([rng.randrange(-10**20, 10**20), "s'q" + str(rng.randrange(9)), True, False])
                      for _ in range(rng.randrange(1, 4))]
            lit = [(f"'{v.replace(chr(39), chr(39) * 2)}'" if isinstance(v, str) else
                    str(v).lower() if isinstance(v, bool) else str(v)) for v in values]
            if op == "is_null":
                text_parts.append(f"{qcol} {rng.choice(['IS NULL', 'is null'])}")
                tuples.append((col, "is null", None))
            elif op == "is_not_null":
                text_parts.append(f"{qcol} IS NOT NULL")
                tuples.append((col, "is not null", None))
            elif op == "between":
                text_parts.append(f"{qcol} BETWEEN {lit[0]} AND {lit[-1]}")
                tuples.append((col, "between", [values[0], values[-1]]))
            elif op == "in":
                text_parts.append(f"{qcol} IN ({', '.join(lit)})")
                tuples.append((col, "in", values))
            else:
                text_parts.append(f"{qcol} {op} {lit[0]}")
                tuples.append((col, op, values[0]))
        text = rng.choice([" AND ", " and "]).join(text_parts)
        assert parse(text) == parse(tuples), text
