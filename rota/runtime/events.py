"""One structured log event per transition, with stable keys.

``emit(log, "lease_lost", job_id=..., generation=...)`` logs the line
``event=lease_lost job_id=... generation=...`` and attaches the same fields as
``record.event`` and ``record.fields``, so operators can grep and tests can
assert on them (``caplog.records``). ``--log-format json`` writes the fields
as keys of the line's object (``runtime.logformat``). Values are quoted and
escaped as in the text format: no value can break the line or forge a key.

Nothing is formatted for a level that is not enabled, and the message text is
built only if a handler asks for it (``record.getMessage()``): rota's own
formatters write from ``record.fields``, so an emitted line is formatted once.
"""

from __future__ import annotations

import logging
from typing import Any

from rota.runtime.logformat import logfmt_value


class EventText:
    """An event's ``event=... key=value`` text, made when first asked for."""

    __slots__ = ("_event", "_fields", "_text")

    def __init__(self, event: str, fields: dict[str, Any]) -> None:
        self._event = event
        self._fields = fields
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            parts = [f"event={self._event}"]
            parts.extend(f"{k}={logfmt_value(v)}" for k, v in self._fields.items())
            self._text = " ".join(parts)
        return self._text


def emit(log: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    if not log.isEnabledFor(level):
        return
    log.log(level, EventText(event, fields), extra={"event": event, "fields": fields})
