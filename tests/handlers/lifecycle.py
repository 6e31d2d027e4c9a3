"""Handlers of the shutdown, process-isolation and orphan tests (importable by children).

Each records lines in the file named ``ctx.args["file"]`` (O_APPEND, so lines of
several processes never mix): ``start <pid> <attempt> <time.time()>`` when it
starts, ``end <pid> <attempt> <time.time()> <why>`` when it ends.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

from tests.handlers import append_line


def _start(ctx: Any) -> str:
    path: str = ctx.args["file"]
    append_line(path, f"start {os.getpid()} {ctx.attempt} {time.time()}")
    return path


def blind_then_checkpoints(ctx: Any) -> None:
    """Ignore the executor for ``blind`` seconds, then check in until ``seconds`` have passed.

    With ``go`` (a path), the blind time starts only once that file exists, so a
    test decides when it begins, however slowly the machine starts processes.
    The first run only (when ``first_only``; a released attempt is refunded, so
    runs are counted in the file, not by ``ctx.attempt``); later runs just run
    ``later_seconds`` (default ``seconds``) with checkpoints.
    """
    path = _start(ctx)
    why = "done"
    with open(path) as f:
        first_run = sum(line.startswith("start ") for line in f) == 1
    blind = first_run or not ctx.args.get("first_only")
    seconds = float(ctx.args.get("seconds", 0.0))
    if not blind:
        seconds = float(ctx.args.get("later_seconds", seconds))
    try:
        if blind:
            go = ctx.args.get("go")
            while go is not None and not os.path.exists(go):
                time.sleep(0.01)
            time.sleep(float(ctx.args.get("blind", 0.0)))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ctx.checkpoint()
            time.sleep(0.01)
    except BaseException as exc:
        why = type(exc).__name__
        raise
    finally:
        append_line(path, f"end {os.getpid()} {ctx.attempt} {time.time()} {why}")


def pid_then_wait(ctx: Any) -> None:
    """Record this process's pid, then sleep without checkpoints (a stuck handler)."""
    _start(ctx)
    time.sleep(float(ctx.args.get("seconds", 300.0)))


def checkpoint_loop(ctx: Any) -> None:
    """Report progress, then check in until stopped; note why it stopped."""
    path = _start(ctx)
    ctx.progress(stage="LOOPING", done=1, total=2)
    try:
        while True:
            ctx.checkpoint()
            time.sleep(0.01)
    except BaseException as exc:
        append_line(path, f"end {os.getpid()} {ctx.attempt} {time.time()} {type(exc).__name__}")
        raise


def exit_hard(ctx: Any) -> None:
    """End the process at once, without cleanup or an outcome (``os._exit``)."""
    _start(ctx)
    os._exit(int(ctx.args.get("status", 3)))


def segfault(ctx: Any) -> None:
    """Read address 0: the process dies of SIGSEGV."""
    _start(ctx)
    ctypes.string_at(0)


def pid_and_context(ctx: Any) -> str:
    """Record the pid and what the context says; report progress; return a result ref."""
    import json

    ctx.progress(stage="HALF", done=1, total=2)
    ctx.checkpoint()
    append_line(
        ctx.args["file"],
        json.dumps(
            {
                "pid": os.getpid(),
                "pgid": os.getpgid(0),
                "job_id": str(ctx.job_id),
                "job_type": ctx.job_type,
                "attempt": ctx.attempt,
                "payload_ref": ctx.payload_ref,
                "args": ctx.args,
                "scheduled_for": ctx.scheduled_for.isoformat() if ctx.scheduled_for else None,
                "key": ctx.idempotency_key("charge"),
            }
        ),
    )
    time.sleep(float(ctx.args.get("linger", 0.0)))  # lets a test see the progress stored
    return f"s3://results/{ctx.job_id}"


def raises_permanent(ctx: Any) -> None:
    from rota import PermanentError

    raise PermanentError("BAD_INPUT", "the payload cannot be parsed")


def raises_other(ctx: Any) -> None:
    raise KeyError("missing")


async def async_returns(ctx: Any) -> str:
    import asyncio

    await asyncio.sleep(0.01)
    ctx.checkpoint()
    return "s3://async/result"


def logs_a_line(ctx: Any) -> None:
    import logging

    logging.getLogger("tests.child").warning("hello from %s", "the child")


def eats_memory(ctx: Any) -> None:
    """Allocate far more than the address space this process allows itself."""
    import resource

    _start(ctx)
    with open("/proc/self/status") as f:
        size_kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    limit = size_kb * 1024 + (256 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    hog = [bytearray(64 << 20) for _ in range(64)]  # 4 GiB
    append_line(ctx.args["file"], f"allocated {len(hog)}")
