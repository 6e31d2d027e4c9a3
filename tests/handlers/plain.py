"""Handlers the executor tests run; importable by executor subprocesses too.

Handlers that record their execution append one line per run to the file named
in ``ctx.args["file"]`` (O_APPEND: lines from several processes never mix).
"""

from __future__ import annotations

import gc
import os
import signal
import time
from pathlib import Path
from typing import Any

from rota.executor import AmbiguousError, PermanentError, RetryableError
from tests.handlers import append_line


def noop(ctx: Any) -> None:
    return None


def record(ctx: Any) -> None:
    """Record start and end of each run: ``job_id attempt pid start end`` (monotonic ns)."""
    start = time.monotonic_ns()
    pause = float(ctx.args.get("sleep", 0.0))
    if pause:
        time.sleep(pause)
    end = time.monotonic_ns()
    append_line(ctx.args["file"], f"{ctx.job_id} {ctx.attempt} {os.getpid()} {start} {end}")


def heap_frozen(ctx: Any) -> None:
    """Record how many objects the executor's process froze before its loop ran."""
    append_line(ctx.args["file"], str(gc.get_freeze_count()))


def retryable(ctx: Any) -> None:
    raise RetryableError("FLAKY", "the downstream said try later")


def permanent(ctx: Any) -> None:
    raise PermanentError("BAD_INPUT", "the payload cannot be parsed")


def generic(ctx: Any) -> None:
    raise KeyError("missing")


def ambiguous(ctx: Any) -> None:
    raise AmbiguousError("MAYBE_CHARGED", "the payment call timed out")


def ambiguous_first(ctx: Any) -> None:
    """Ambiguous on attempt 1; records its later runs."""
    if ctx.attempt == 1:
        raise AmbiguousError("MAYBE_CHARGED")
    append_line(ctx.args["file"], f"ran {ctx.attempt}")


def reconcile_done(ctx: Any) -> bool:
    append_line(ctx.args["file"], f"reconcile {ctx.attempt}")
    return True


def reconcile_not_done(ctx: Any) -> bool:
    append_line(ctx.args["file"], f"reconcile {ctx.attempt}")
    return False


def until_stopped(ctx: Any) -> None:
    """Report progress and loop on checkpoints until told to stop; note why it stopped."""
    ctx.progress(stage="WORKING", done=1, total=3)
    path = ctx.args.get("file")
    if path:
        append_line(path, f"started {ctx.attempt}")
    try:
        while True:
            ctx.checkpoint()
            time.sleep(0.01)
    except BaseException as exc:
        if path:
            append_line(path, f"stopped {type(exc).__name__} {time.monotonic()} {time.time()}")
        raise


def sleep_blind(ctx: Any) -> None:
    """Sleep without checkpoints (a handler that overruns its timeout)."""
    time.sleep(float(ctx.args.get("seconds", 3.0)))
    if ctx.args.get("file"):
        append_line(ctx.args["file"], "woke")


def finish_after(ctx: Any) -> None:
    """Run for args["seconds"], checking for cancellation, then succeed."""
    deadline = time.monotonic() + float(ctx.args["seconds"])
    if ctx.args.get("file"):
        append_line(ctx.args["file"], f"started {ctx.job_id}")
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.01)


def kill_own_process(ctx: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def context_dump(ctx: Any) -> None:
    import json

    append_line(
        ctx.args["file"],
        json.dumps(
            {
                "job_id": str(ctx.job_id),
                "job_type": ctx.job_type,
                "attempt": ctx.attempt,
                "payload_ref": ctx.payload_ref,
                "args": ctx.args,
                "scheduled_for": ctx.scheduled_for.isoformat() if ctx.scheduled_for else None,
                "covers": (
                    [ctx.covers.first.isoformat(), ctx.covers.last.isoformat(), ctx.covers.count]
                    if ctx.covers
                    else None
                ),
                "key": ctx.idempotency_key("charge"),
            }
        ),
    )


def slow_first_attempt(ctx: Any) -> None:
    """The first attempt runs (checking in) until stopped; later attempts record and end."""
    if ctx.attempt == 1:
        while True:
            ctx.checkpoint()
            time.sleep(0.02)
    append_line(ctx.args["file"], f"{ctx.job_id} {ctx.attempt}")


def returns_result_ref(ctx: Any) -> str:
    return f"s3://results/{ctx.job_id}.csv"


def checkpoints_only(ctx: Any) -> None:
    """Loop on checkpoints without reporting progress (so nothing forces a renewal)."""
    append_line(ctx.args["file"], "started")
    try:
        while True:
            ctx.checkpoint()
            time.sleep(0.01)
    except BaseException as exc:
        append_line(ctx.args["file"], f"stopped {type(exc).__name__}")
        raise


def progress_to_the_end(ctx: Any) -> None:
    """Report a stage and hold it until ``ctx.args["go"]`` exists (the test saw a heartbeat
    store it), then report the last one and end (raising ``FLAKY`` when
    ``ctx.args["fail"]``) at once: no heartbeat comes after."""
    ctx.progress(stage="EXPORTING", done=5, total=6)
    go = Path(ctx.args["go"])
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    ctx.progress(stage="UPLOADING", done=6, total=6)
    if ctx.args.get("fail"):
        raise RetryableError("FLAKY", "failed after its last progress")
