"""A strict reader of rota's text log lines, for the tests: what a log shipper would do."""

from __future__ import annotations

import re
from datetime import datetime

_TOKEN = re.compile(r'([A-Za-z0-9_.\-]+)=("(?:[^"\\]|\\.)*"|[^\s"=]+)(?: |$)')
_HEAD = re.compile(r'^(\S+) (DEBUG|INFO|WARNING|ERROR|CRITICAL) ("(?:[^"\\]|\\.)*"|\S+) ')
_UNESCAPE = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


def _unquote(value: str) -> str:
    if not value.startswith('"'):
        return value
    out = []
    body = value[1:-1]
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _UNESCAPE:
            out.append(_UNESCAPE[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        else:
            raise ValueError(f"unknown escape \\{nxt} in {value!r}")
    return "".join(out)


def parse_line(line: str) -> tuple[datetime, str, str, list[tuple[str, str]]]:
    """(timestamp, level, logger, [(key, value), ...]); raises if any part does not parse."""
    assert "\n" not in line
    head = _HEAD.match(line + " ")
    assert head, f"no timestamp, level and logger at the start of {line!r}"
    ts = datetime.fromisoformat(head.group(1))
    assert ts.utcoffset() is not None, f"timestamp without its offset: {head.group(1)}"
    rest = line[head.end() :]
    pairs: list[tuple[str, str]] = []
    pos = 0
    while pos < len(rest):
        m = _TOKEN.match(rest, pos)
        assert m, f"unparseable at {rest[pos:]!r} in {line!r}"
        pairs.append((m.group(1), _unquote(m.group(2))))
        pos = m.end()
    return ts, head.group(2), _unquote(head.group(3)), pairs
