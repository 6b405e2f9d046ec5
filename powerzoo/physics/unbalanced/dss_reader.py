"""Reader of the subset of the OpenDSS command language that distribution test feeders use.

:func:`read_statements` follows a master file through its ``Redirect`` / ``Compile`` commands
and returns its statements in order, each with the file and line it came from, so that the
circuit builder (:mod:`powerzoo.physics.unbalanced.circuit`) can name the place of any error.
What is read:

* ``New class.name key=value ...`` (also ``New object=class.name``), ``Edit class.name ...``,
  continuation lines starting with ``~`` or ``more``;
* ``class.name.property=value key=value ...`` (a property set on an existing element);
* ``Set key=value ...``, ``Clear``, ``Redirect`` / ``Compile`` (file inclusion),
  ``BatchEdit class..regex key=value ...``;
* commands that do not change the circuit (``Solve``, ``CalcVoltageBases``, ``BusCoords``,
  ``Show``, ``Plot``, ...): kept as statements without properties, the builder skips them.

Values are kept as text: :func:`parse_number` (with OpenDSS's in-line RPN arithmetic such as
``(8 1000 /)``), :func:`parse_list` and :func:`parse_matrix` (``a | b c | d e f``, the lower
triangle) convert them. Comments: ``!`` and ``//`` to the end of the line, ``/* ... */`` blocks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DSSFormatError",
    "Statement",
    "parse_list",
    "parse_matrix",
    "parse_number",
    "read_statements",
]

_OPEN_CLOSE = {"(": ")", "[": "]", "{": "}", '"': '"', "'": "'"}
_INCLUDE = ("redirect", "compile")
_NUMBER_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class DSSFormatError(ValueError):
    """An OpenDSS file that the reader does not understand (names the file and line)."""


@dataclass
class Statement:
    """One OpenDSS command with its properties, in file order.

    ``verb`` is the lower-case command (``new``, ``edit``, ``more``, ``set``, ``clear``,
    ``batchedit``, ``setproperty``, or an ignored command such as ``solve``); ``target`` the
    ``class.name`` it names (lower case, ``""`` if none); ``props`` the ``(key, value)`` pairs in
    order (keys lower case, values as written; a value without ``key=`` has key ``""``).
    """

    verb: str
    target: str
    props: list[tuple[str, str]] = field(default_factory=list)
    file: str = ""
    line: int = 0

    def where(self) -> str:
        """``file:line`` of the statement, for error messages."""
        return f"{self.file}:{self.line}"


def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``!`` or ``//`` comment (outside quotes)."""
    depth_quote = ""
    for i, ch in enumerate(line):
        if depth_quote:
            if ch == depth_quote:
                depth_quote = ""
            continue
        if ch in "\"'":
            depth_quote = ch
        elif ch == "!" or (ch == "/" and line[i + 1 : i + 2] == "/"):
            return line[:i]
    return line


def _tokens(text: str, where: str) -> list[str]:
    """Split a command line into tokens; a bracketed / quoted value is one token (delimiters
    kept, ``key=`` followed by whitespace joined to its value)."""
    tokens: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace() or ch == ",":
            i += 1
            continue
        start = i
        while i < n and not text[i].isspace() and text[i] != ",":
            if text[i] in _OPEN_CLOSE:
                close = _OPEN_CLOSE[text[i]]
                end = text.find(close, i + 1)
                if end < 0:
                    raise DSSFormatError(f"{where}: unclosed {text[i]!r} in {text.strip()!r}")
                i = end + 1
            else:
                i += 1
        tokens.append(text[start:i])
    joined: list[str] = []  # "kV=" "4.16" -> "kV=4.16"; "kV" "=" "4.16" -> "kV=4.16"
    for tok in tokens:
        if joined and (joined[-1].endswith("=") or tok.startswith("=")):
            joined[-1] += tok
        else:
            joined.append(tok)
    return joined


def _split_props(tokens: list[str]) -> list[tuple[str, str]]:
    props = []
    for tok in tokens:
        key, eq, value = tok.partition("=")
        if eq and key and key[0] not in _OPEN_CLOSE:
            props.append((key.strip().lower(), value.strip()))
        else:
            props.append(("", tok))
    return props


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] in _OPEN_CLOSE and value[-1] == _OPEN_CLOSE[value[0]]:
        return value[1:-1].strip()
    return value


def _logical_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of ``path`` with comments and ``/* */`` blocks removed."""
    out = []
    in_block = False
    for number, raw in enumerate(path.read_text(encoding="latin-1").splitlines(), start=1):
        line = raw.strip()
        if in_block:
            if "*/" in line:
                in_block = False
            continue
        if line.startswith("/*"):
            in_block = "*/" not in line
            continue
        line = _strip_comment(line).strip()
        if line:
            out.append((number, line))
    return out


def read_statements(master: str | Path, _depth: int = 0) -> list[Statement]:
    """Statements of ``master`` and of the files it includes, in execution order.

    Raises:
        DSSFormatError: a missing include file, an unclosed bracket or quote, naming the file
            and line.
    """
    path = Path(master)
    if _depth > 20:
        raise DSSFormatError(f"{path}: Redirect nested more than 20 deep")
    statements: list[Statement] = []
    for number, line in _logical_lines(path):
        where = f"{path}:{number}"
        tokens = _tokens(line, where)
        head = tokens[0].lower()
        if head in ("~", "more") or head.startswith("~"):
            rest = tokens[1:] if head in ("~", "more") else [tokens[0][1:], *tokens[1:]]
            statements.append(Statement("more", "", _split_props(rest), str(path), number))
            continue
        if head in _INCLUDE:
            if len(tokens) < 2:
                raise DSSFormatError(f"{where}: {tokens[0]} without a file name")
            target = path.parent / _unquote(tokens[1])
            if not target.is_file():
                raise DSSFormatError(f"{where}: {tokens[0]} file not found: {target}")
            statements.extend(read_statements(target, _depth + 1))
            continue
        if head in ("new", "edit"):
            if len(tokens) < 2:
                raise DSSFormatError(f"{where}: {tokens[0]} without an element name")
            first = tokens[1]
            if first.lower().startswith("object="):
                first = first.split("=", 1)[1]
            statements.append(
                Statement(head, first.lower(), _split_props(tokens[2:]), str(path), number)
            )
            continue
        if head in ("set", "batchedit"):
            target = "" if head == "set" else tokens[1].lower() if len(tokens) > 1 else ""
            rest = tokens[1:] if head == "set" else tokens[2:]
            statements.append(Statement(head, target, _split_props(rest), str(path), number))
            continue
        key, eq, value = tokens[0].partition("=")
        if eq and key.count(".") >= 2:  # class.name.property=value ...
            target, prop = key.lower().rsplit(".", 1)
            props = [(prop, value), *_split_props(tokens[1:])]
            statements.append(Statement("setproperty", target, props, str(path), number))
            continue
        statements.append(Statement(head, "", _split_props(tokens[1:]), str(path), number))
    return statements


def _rpn(items: list[str], where: str) -> float:
    stack: list[float] = []
    binary = {
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: a / b,
        "^": lambda a, b: a**b,
    }
    unary = {"sqrt": math.sqrt, "sqr": lambda a: a * a, "inv": lambda a: 1.0 / a}
    for item in items:
        low = item.lower()
        if low in binary and len(stack) >= 2:
            b, a = stack.pop(), stack.pop()
            stack.append(binary[low](a, b))
        elif low in unary and stack:
            stack.append(unary[low](stack.pop()))
        elif low == "pi":
            stack.append(math.pi)
        elif _NUMBER_RE.match(item):
            stack.append(float(item))
        else:
            raise DSSFormatError(f"{where}: cannot evaluate {' '.join(items)!r} as a number")
    if len(stack) != 1:
        raise DSSFormatError(f"{where}: {' '.join(items)!r} is not one number")
    return stack[0]


def parse_number(value: str, where: str) -> float:
    """A number, or OpenDSS in-line RPN arithmetic in brackets (``(8 1000 /)`` = 0.008)."""
    text = _unquote(value)
    if _NUMBER_RE.match(text):
        return float(text)
    return _rpn(text.replace(",", " ").split(), where)


def parse_list(value: str) -> list[str]:
    """The items of an OpenDSS array (``[a b c]``, ``(a, b)``, ``"a b"``; ``|`` dropped)."""
    text = _unquote(value).replace(",", " ").replace("|", " ")
    return text.split()


def parse_matrix(value: str, order: int, where: str) -> list[list[float]]:
    """A symmetric ``order x order`` matrix from its lower triangle (rows split by ``|``) or
    from all its entries."""
    rows = [r.replace(",", " ").split() for r in _unquote(value).split("|")]
    flat = [x for r in rows for x in r]
    try:
        numbers = [parse_number(x, where) for x in flat]
    except DSSFormatError as err:
        raise DSSFormatError(f"{where}: bad matrix {value!r}") from err
    full = [[0.0] * order for _ in range(order)]
    if len(numbers) == order * (order + 1) // 2:
        k = 0
        for i in range(order):
            for j in range(i + 1):
                full[i][j] = full[j][i] = numbers[k]
                k += 1
    elif len(numbers) == order * order:
        for i in range(order):
            full[i] = numbers[i * order : (i + 1) * order]
    else:
        raise DSSFormatError(f"{where}: matrix {value!r} does not have {order} x {order} entries")
    return full
