"""One structured log event per transition, with stable keys.

``emit(log, "lease_lost", job_id=..., generation=...)`` logs the line
``event=lease_lost job_id=... generation=...`` and attaches the same fields as
``record.event`` and ``record.fields``, so operators can grep and tests can
assert on them (``caplog.records``). ``--log-format json`` writes the fields
as keys of the line's object (``runtime.logformat``). Values are quoted and
escaped as in the text format: no value can break the line or forge a key.
"""

from __future__ import annotations

import logging
from typing import Any

from rota.runtime.logformat import logfmt_value


def emit(log: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    if not log.isEnabledFor(level):
        return
    text = " ".join([f"event={event}", *(f"{k}={logfmt_value(v)}" for k, v in fields.items())])
    log.log(level, text, extra={"event": event, "fields": fields})
