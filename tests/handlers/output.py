"""Handlers whose words are kept in their attempt's output (``ctx.log``, loggers, tasks)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from rota.executor import RetryableError

log = logging.getLogger("tests.handlers.output")
ROUNDS = 30


def says(ctx: Any) -> None:
    """ctx.log at INFO, the handler's own logger at INFO and WARNING, an exception."""
    ctx.log.info("ctx says %s", ctx.args["word"])
    ctx.log("ctx called with %s", ctx.args["word"])
    log.info("own logger info %s", ctx.args["word"])
    log.warning("own logger warning %s", ctx.args["word"])
    try:
        raise ValueError("a handled problem")
    except ValueError:
        ctx.log.exception("caught it")


def fails_first(ctx: Any) -> None:
    """Attempt 1 says so and fails (retryable); attempt 2 says so and succeeds."""
    ctx.log.info("attempt %d speaking", ctx.attempt)
    if ctx.attempt == 1:
        raise RetryableError("FIRST_FAILS", "the first attempt always fails")


def tagged(ctx: Any) -> None:
    """Log its tag ROUNDS times, yielding between them (a plain thread)."""
    for i in range(ROUNDS):
        ctx.log.info("tag %s line %d", ctx.args["tag"], i)
        log.warning("tag %s record %d", ctx.args["tag"], i)
        time.sleep(0.005)


async def tagged_async(ctx: Any) -> None:
    """Log its tag ROUNDS times, awaiting between them (a task on the shared loop)."""
    for i in range(ROUNDS):
        ctx.log.info("tag %s line %d", ctx.args["tag"], i)
        log.warning("tag %s record %d", ctx.args["tag"], i)
        await asyncio.sleep(0.005)


def loud(ctx: Any) -> None:
    """Log numbered lines, far more than an attempt keeps."""
    for i in range(int(ctx.args["lines"])):
        ctx.log.info("line %06d %s", i, "x" * 60)


def gated(ctx: Any) -> None:
    """Say it started, wait for the file ``gate`` (at most 30 s), say it is ending."""
    ctx.log.info("started")
    deadline = time.monotonic() + 30
    while not os.path.exists(ctx.args["gate"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.log.info("ending")
