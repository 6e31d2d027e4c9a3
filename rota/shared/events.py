"""One structured log event per transition, with stable keys.

``emit(log, "lease_lost", job_id=..., generation=...)`` logs the line
``event=lease_lost job_id=... generation=...`` and attaches the same fields as
``record.event`` and ``record.fields``, so operators can grep and tests can
assert on them (``caplog.records``).
"""

from __future__ import annotations

import logging
from typing import Any


def emit(log: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    if not log.isEnabledFor(level):
        return
    text = " ".join([f"event={event}", *(f"{k}={_fmt(v)}" for k, v in fields.items())])
    log.log(level, text, extra={"event": event, "fields": fields})


def _fmt(value: Any) -> str:
    s = str(value)
    return f'"{s}"' if (" " in s or not s) else s
