"""Coroutine handlers the executor tests run (``async def``)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

from rota.executor import RetryableError
from tests.handlers import append_line


async def record_context(ctx: Any) -> None:
    """Yield to the loop, then record what the handler saw and where it ran."""
    await asyncio.sleep(float(ctx.args.get("sleep", 0.0)))
    ctx.progress(stage="ASYNC", done=1, total=1)
    append_line(
        ctx.args["file"],
        json.dumps(
            {
                "job_id": str(ctx.job_id),
                "attempt": ctx.attempt,
                "args_n": ctx.args.get("n"),
                "thread": threading.current_thread().name,
                "loop": id(asyncio.get_running_loop()),
                "pid": os.getpid(),
            }
        ),
    )


async def result_ref(ctx: Any) -> str:
    await asyncio.sleep(0)
    return f"s3://results/{ctx.job_id}.json"


async def retryable(ctx: Any) -> None:
    await asyncio.sleep(0)
    raise RetryableError("ASYNC_FLAKY", "the downstream said try later")


async def returns_a_dict(ctx: Any) -> dict[str, int]:
    await asyncio.sleep(0)
    return {"rows": 3}


async def awaits_forever(ctx: Any) -> None:
    """Never calls ctx.checkpoint(): only cancelling its task stops it."""
    append_line(ctx.args["file"], "started")
    try:
        while True:
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        append_line(ctx.args["file"], "cancelled")
        raise


async def checkpoints(ctx: Any) -> None:
    """Loops on ctx.checkpoint(), as a plain handler would."""
    append_line(ctx.args["file"], "started")
    try:
        while True:
            ctx.checkpoint()
            await asyncio.sleep(0.01)
    except BaseException as exc:
        append_line(ctx.args["file"], f"stopped {type(exc).__name__}")
        raise


async def reconcile_done(ctx: Any) -> bool:
    await asyncio.sleep(0)
    append_line(ctx.args["file"], f"reconcile {ctx.attempt}")
    return True
