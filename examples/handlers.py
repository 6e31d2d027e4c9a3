"""Handlers for the example ``schedules.yaml``: what a real handler looks like.

Run from the repository root (``rota run``), these are importable as
``examples.handlers:<name>``.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import rota

log = logging.getLogger("examples")

DEMO_LOG = Path("rota-demo.log")


def tick(ctx: rota.JobContext) -> None:
    """Append one line per occurrence to rota-demo.log: proof that each ran once."""
    line = (
        f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%S.%fZ} {ctx.job_type} "
        f"scheduled_for={ctx.scheduled_for:%Y-%m-%dT%H:%M:%SZ} attempt={ctx.attempt} "
        f"key={ctx.idempotency_key('tick')}\n"
    )
    with DEMO_LOG.open("a") as f:
        f.write(line)
    log.info("tick for %s written to %s", ctx.scheduled_for, DEMO_LOG)


def report(ctx: rota.JobContext) -> None:
    """A staged job: reports progress and stops at a checkpoint when cancelled."""
    total = int(ctx.args.get("rows", 5))
    if ctx.covers is not None:
        log.info("this run covers %s missed occurrences", ctx.covers.count)
    for done in range(total):
        ctx.progress(stage="GENERATING", done=done, total=total)
        ctx.checkpoint()  # raises if the job was cancelled or the lease lost
        time.sleep(0.2)
    ctx.progress(stage="PUBLISHING", done=total, total=total)
    log.info(
        "report for %s done (%s rows, region %s)",
        ctx.scheduled_for,
        total,
        ctx.args.get("region", "-"),
    )
