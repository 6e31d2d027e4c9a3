"""The job a log line belongs to, carried by a context variable.

The executor sets it around a handler call (``job_log_context``); every record
logged meanwhile, from any logger, by the handler's own code too, gets the
job's fields through ``JobContextFilter`` (installed on rota's log handler by
``rota.cli.common.configure_logging``)::

    log = logging.getLogger("myapp.reports")

    def generate(ctx):
        log.info("rendering")  # ... msg=rendering job_id=... job_type=... attempt=1

Context variables follow the code that runs the handler: the worker slot's
thread, and any asyncio task created from it (a task copies the context it
was created in). A thread the handler starts itself does not inherit them:
``contextvars.copy_context().run`` passes them on.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

JOB_FIELDS = ("job_id", "job_type", "attempt", "schedule")

_job: ContextVar[dict[str, Any] | None] = ContextVar("rota_job", default=None)


@contextmanager
def job_log_context(
    job_id: uuid.UUID, job_type: str, attempt: int, schedule: str | None
) -> Iterator[None]:
    """Every record logged inside carries this job's fields."""
    token = _job.set(
        {"job_id": str(job_id), "job_type": job_type, "attempt": attempt, "schedule": schedule}
    )
    try:
        yield
    finally:
        _job.reset(token)


def current_job_fields() -> dict[str, Any] | None:
    """The fields of the job whose handler is running in this context, if any."""
    return _job.get()


class JobContextFilter(logging.Filter):
    """Attach the current job's fields to a record as ``record.rota_job``.

    A handler filter runs in the thread that logs, when the record is made, so
    the context is the handler's even if formatting happens later elsewhere.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "rota_job"):
            record.rota_job = _job.get()
        return True
