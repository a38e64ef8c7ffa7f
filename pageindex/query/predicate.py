"""Predicates for lookup: parse `where` (SQL-like text or pyarrow-style tuples) into conditions.

Supports =, !=, <, <=, >, >=, BETWEEN, IN (...), IS [NOT] NULL, combined with AND.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Collection, Sequence

from pageindex.errors import PageIndexError
from pageindex.index.kinds.base import NUMBER, parse_number


class PredicateError(PageIndexError):
    """The `where` clause cannot be parsed or does not fit the file's columns."""

    usage = True  # how pageindex was asked: exit code 2


OPS = ("=", "!=", "<", "<=", ">", ">=", "between", "in", "is_null", "is_not_null")


@dataclass(frozen=True)
class Condition:
    column: str
    op: str
    values: tuple[Any, ...] = ()  # one value; two for between; any number for in


def column_path(column: str, names: Collection[str]) -> tuple[str, ...] | None:
    """What a condition's column names among top-level `names`: that column, or a field inside
    it by a dotted path (point.x: x in point), as the names from the top; None: neither."""
    if column in names:
        return (column,)
    head, dot, rest = column.partition(".")
    return (head, *rest.split(".")) if dot and head in names else None


_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>'(?:[^']|'')*')
    | (?P<number>""" + NUMBER + r""")
    | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
    | (?P<quoted>"(?:[^"]|"")*"|`(?:[^`]|``)*`)
    | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise PredicateError(f"cannot parse the where clause at: {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise PredicateError("the where clause ends early")
        self.i += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token and token[0] == "word" and token[1].lower() == word:
            self.i += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.keyword(word):
            raise PredicateError(f"expected {word.upper()} in the where clause")

    def column(self) -> str:
        kind, text = self.take()
        if kind == "word":
            return text
        if kind == "quoted":
            quote = text[0]
            return text[1:-1].replace(quote * 2, quote)
        raise PredicateError(f"expected a column name, found {text!r}")

    def literal(self) -> Any:
        kind, text = self.take()
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "number":
            return parse_number(text)
        if kind == "word":
            low = text.lower()
            if low in ("true", "false"):
                return low == "true"
            if low in ("date", "timestamp", "time") and self.peek() and self.peek()[0] == "string":
                return self.literal()
        raise PredicateError(f"expected a literal value, found {text!r}")

    def condition(self) -> Condition:
        column = self.column()
        if self.keyword("is"):
            negated = self.keyword("not")
            self.expect("null")
            return Condition(column, "is_not_null" if negated else "is_null")
        if self.keyword("between"):
            low = self.literal()
            self.expect("and")
            return Condition(column, "between", (low, self.literal()))
        negated = self.keyword("not")
        if self.keyword("in"):
            if negated:
                raise PredicateError("NOT IN is not supported")
            kind, text = self.take()
            if text != "(":
                raise PredicateError("expected ( after IN")
            values = [self.literal()]
            while True:
                kind, text = self.take()
                if text == ")":
                    break
                if text != ",":
                    raise PredicateError("expected , or ) in the IN list")
                values.append(self.literal())
            return Condition(column, "in", tuple(values))
        if negated:
            raise PredicateError("NOT is only supported as IS NOT NULL")
        kind, op = self.take()
        if kind != "op" or op in ("(", ")", ","):
            raise PredicateError(f"expected a comparison operator after {column}, found {op!r}")
        op = {"==": "=", "<>": "!="}.get(op, op)
        return Condition(column, op, (self.literal(),))

    def conditions(self) -> list[Condition]:
        out = [self.condition()]
        while self.keyword("and"):
            out.append(self.condition())
        if self.peek() is not None:
            raise PredicateError(f"unexpected {self.peek()[1]!r} (only AND combines conditions)")
        return out


def parse(where: str | Sequence[Sequence[Any]]) -> list[Condition]:
    """Conditions from SQL-like text, or from (column, op, value) tuples as pyarrow filters use."""
    if isinstance(where, str):
        return _Parser(where).conditions()
    out = []
    for item in where:
        if len(item) != 3:
            raise PredicateError(f"filter {item!r} is not a (column, op, value) tuple")
        column, op, value = item
        op = str(op).lower().replace(" ", "_")
        op = {"==": "=", "<>": "!="}.get(op, op)
        if op not in OPS:
            raise PredicateError(f"operator {item[1]!r} is not supported")
        if op in ("in", "between"):
            out.append(Condition(column, op, tuple(value)))
        elif op in ("is_null", "is_not_null"):
            out.append(Condition(column, op))
        else:
            out.append(Condition(column, op, (value,)))
    if not out:
        raise PredicateError("the where clause has no condition")
    return out
