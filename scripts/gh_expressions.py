"""A small evaluator of GitHub Actions expressions, for suite/library/test_workflow_trust.py: the
subset the workflows' job conditions use, with GitHub's documented semantics
(docs.github.com/actions/reference/evaluate-expressions-in-workflows-and-actions):

- literals: 'strings' ('' escapes a quote), numbers, true, false, null;
- context references: a.b.c and a['b']; a missing property is null;
- operators, by precedence: ( ), !, == != < <= > >=, &&, ||; && and || return an operand, not a
  bool;
- == compares strings ignoring case; operands of different types are compared as numbers
  (null 0, booleans 0/1, a string that is not a number NaN, and NaN equals nothing);
- falsy: false, 0, '', null; functions: contains, startsWith, endsWith (ignoring case).
"""

from __future__ import annotations

import math
import re

TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\].,])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)


class ExpressionError(ValueError):
    pass


def tokens(text: str) -> list[tuple[str, str]]:
    out, pos, text = [], 0, text.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ExpressionError(f"cannot read {text[pos : pos + 20]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _number(v) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip()) if v.strip() else 0.0
        except ValueError:
            return math.nan
    return math.nan  # objects and arrays


def truthy(v) -> bool:
    return not (
        v is None
        or v is False
        or v == ""
        or (isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0)
    )


def _compare(op: str, a, b) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        x, y = a.casefold(), b.casefold()
    else:
        x, y = _number(a), _number(b)
        if math.isnan(x) or math.isnan(y):
            return op == "!="
    return {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def _text(v) -> str:
    return "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


FUNCTIONS = {
    "contains": lambda hay, needle: (
        any(_compare("==", x, needle) for x in hay)
        if isinstance(hay, list)
        else _text(needle).casefold() in _text(hay).casefold()
    ),
    "startswith": lambda s, p: _text(s).casefold().startswith(_text(p).casefold()),
    "endswith": lambda s, p: _text(s).casefold().endswith(_text(p).casefold()),
    "always": lambda: True,  # a status check: true whatever the earlier steps did
}


class _Parser:
    def __init__(self, toks, context):
        self.toks, self.i, self.context = toks, 0, context

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if tok[0] is None or (value is not None and tok[1] != value):
            raise ExpressionError(f"expected {value or 'more'}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        v = self.or_()
        if self.i != len(self.toks):
            raise ExpressionError(f"unexpected {self.peek()[1]!r}")
        return v

    def or_(self):
        v = self.and_()
        while self.peek()[1] == "||":
            self.take()
            rhs = self.and_()
            v = v if truthy(v) else rhs
        return v

    def and_(self):
        v = self.unary()
        while self.peek()[1] == "&&":
            self.take()
            rhs = self.unary()
            v = rhs if truthy(v) else v
        return v

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not truthy(self.unary())
        return self.cmp()

    def cmp(self):
        v = self.primary()
        if self.peek()[1] in ("==", "!=", "<", "<=", ">", ">="):
            op = self.take()[1]
            v = _compare(op, v, self.primary())
        return v

    def primary(self):
        kind, value = self.take()
        if value == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if kind != "name":
            raise ExpressionError(f"unexpected {value!r}")
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if self.peek()[1] == "(":
            self.take("(")
            args = [] if self.peek()[1] == ")" else [self.or_()]
            while self.peek()[1] == ",":
                self.take()
                args.append(self.or_())
            self.take(")")
            fn = FUNCTIONS.get(value.lower())
            if fn is None:
                raise ExpressionError(f"function {value} is not supported here")
            return fn(*args)
        v = self.context.get(value)
        while self.peek()[1] in (".", "["):
            if self.take()[1] == ".":
                key = self.take()[1]
            else:
                key = self.or_()
                self.take("]")
            v = v.get(key) if isinstance(v, dict) else None
        return v


def evaluate(expression: str, context: dict):
    """The expression's value with ``context`` ({"github": {...}, "inputs": {...}, ...})."""
    return _Parser(tokens(expression), context).parse()
