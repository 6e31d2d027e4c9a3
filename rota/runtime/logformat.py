"""The two log formats of long-running commands: ``text`` and ``json``.

Both write exactly one line per record, whatever the values hold.

``json``: one object per line::

    {"ts": "2026-11-30T16:20:19.123456Z", "level": "INFO", "logger": "rota.executor",
     "event": "claimed", "job_id": "...", "job_type": "report", "attempt": 1}

``ts`` is UTC ISO 8601; an event logged by ``runtime.events.emit`` carries its
fields as keys. Any other record has ``"event": "log"`` and its text as
``message``, plus the ``extra={...}`` fields it was given. A line logged
while a handler runs carries ``job_id``, ``job_type``, ``attempt`` and
``schedule`` (``runtime.logcontext``). A traceback is ``exc``.

``text``: the same, for people::

    2026-11-30T17:20:19.123+01:00 INFO rota.executor event=claimed job_id=... attempt=1
    2026-11-30T17:20:19.125+01:00 INFO myapp msg="rendering page 3" job_id=... attempt=1

Local time with its UTC offset. Values are ``key=value``; a value holding a
space, ``=``, a quote, a backslash or any control or non-printable character
is quoted, with ``\\"``, ``\\\\``, ``\\n`` and ``\\xNN`` escapes, so no value
can break the line or pass for another key. Keys are reduced to
``[A-Za-z0-9_.-]``; a field named like a built-in key gets a ``_`` appended.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from datetime import UTC, datetime
from enum import Enum
from typing import Any

# Every attribute a plain LogRecord has: anything else on a record is an extra field.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "event",
    "fields",
    "rota_job",
}
_RESERVED = ("ts", "level", "logger", "event", "message", "msg", "exc", "stack")
_BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")
_NEEDS_QUOTES = re.compile(r'[ ="\\]')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
PLAIN_EVENT = "log"


def logfmt_value(value: Any) -> str:
    """``value`` as one token of a ``key=value`` line: quoted and escaped when needed."""
    s = _as_text(value)
    if s and s.isprintable() and _NEEDS_QUOTES.search(s) is None:
        return s
    return '"' + "".join(_escape(c) for c in s) + '"'


def _escape(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    if c.isprintable():
        return c
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _as_text(value: Any) -> str:
    if type(value) is str:  # the common case first: most values are plain text
        return value
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    try:
        return str(value)
    except Exception:  # a hostile __str__: say what it was
        return f"<unprintable {type(value).__name__}>"


@functools.lru_cache(maxsize=1024)
def _key(name: str) -> str:
    """Cached: a process logs the same few keys over and over."""
    return _BAD_KEY_CHARS.sub("_", name) or "_"


@functools.lru_cache(maxsize=256)
def _token(name: str) -> str:
    """``logfmt_value`` of a level or logger name, cached: the same few on every line."""
    return logfmt_value(name)


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # a format string that does not match its arguments
        return f"{_as_text(record.msg)} {_as_text(record.args)}"


def record_fields(record: logging.LogRecord) -> tuple[str, dict[str, Any]]:
    """(event, fields) of a record: an emitted event's own, or ``log`` with the message."""
    out: dict[str, Any] = {}
    event = getattr(record, "event", None)
    fields = getattr(record, "fields", None)
    if isinstance(event, str) and isinstance(fields, dict):
        items = list(fields.items())
    else:
        event = PLAIN_EVENT
        items = [("message", _message(record))]
        items += [(k, v) for k, v in vars(record).items() if k not in _RECORD_ATTRS]
    for k, v in items:
        _put(out, _key(str(k)) if k != "message" else k, v)
    job = getattr(record, "rota_job", None)
    if isinstance(job, dict):
        for k, v in job.items():
            out.setdefault(k, v)  # the event's own job_id (if any) wins
    return event, out


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if key != "message":
        while key in _RESERVED or key in out:
            key += "_"
    out[key] = value


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event, fields = record_fields(record)
        ts = datetime.fromtimestamp(record.created).astimezone()
        level, name = _token(record.levelname), _token(record.name)
        parts = [ts.isoformat(timespec="milliseconds"), level, name]
        if event != PLAIN_EVENT:
            parts.append(f"event={logfmt_value(event)}")
        for k, v in fields.items():
            if v is None:
                continue
            parts.append(f"{'msg' if k == 'message' else k}={logfmt_value(v)}")
        parts.extend(f"{k}={logfmt_value(v)}" for k, v in _trace(self, record).items())
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event, fields = record_fields(record)
        ts = datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z")
        obj: dict[str, Any] = {
            "ts": ts,
            "level": record.levelname,
            "logger": record.name,
            "event": event,
        }
        obj.update((k, _json_value(v)) for k, v in fields.items())
        obj.update(_trace(self, record))
        try:
            return json.dumps(obj, ensure_ascii=False, default=_as_text).encode().decode()
        except UnicodeEncodeError:  # lone surrogates (undecodable bytes): escape them
            return json.dumps(obj, ensure_ascii=True, default=_as_text)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict | list | tuple):
        try:  # keep structure when it is plain JSON
            return json.loads(json.dumps(value, allow_nan=False))
        except (TypeError, ValueError):
            return _as_text(value)
    return _as_text(value)


def _trace(formatter: logging.Formatter, record: logging.LogRecord) -> dict[str, str]:
    out: dict[str, str] = {}
    if record.exc_info:
        out["exc"] = formatter.formatException(record.exc_info)
    elif record.exc_text:
        out["exc"] = record.exc_text
    if record.stack_info:
        out["stack"] = formatter.formatStack(record.stack_info)
    return out
