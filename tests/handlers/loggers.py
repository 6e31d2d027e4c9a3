"""Handlers that log with their own loggers (the log format and job context tests)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from typing import Any

log = logging.getLogger("tests.handlers.loggers")

# A message an attacker controls: a newline followed by a forged line, quotes, a key.
HOSTILE = 'done" event=forged job_id=0\n2026-01-01T00:00:00+00:00 ERROR rota forged=1 \\ \x00'


def chatty(ctx: Any) -> None:
    """Log a plain line, a line with extra fields, and a hostile one."""
    log.info("rendering page %d", 3)
    log.warning("slow upstream", extra={"upstream": "billing", "ts": "not-the-ts"})
    log.info(HOSTILE)


def from_a_task(ctx: Any) -> None:
    """Log from an asyncio task and from a thread that was handed the context."""

    async def work() -> None:
        log.info("inside a task")

    asyncio.run(work())
    t = threading.Thread(target=contextvars.copy_context().run, args=(log.info, "in a thread"))
    t.start()
    t.join()
