"""The chaos soak's handlers: one per way a job can go (``bench/soak.py``).

Every handler is short and deterministic in what it does with its attempt, so
the soak's checks can tell an outcome the handler chose from one the chaos
caused. ``command:`` job types need no module (they are argv in the file).
"""

from __future__ import annotations

import time

import rota


def ok(ctx: rota.JobContext) -> None:
    """Succeeds at once."""
    ctx.checkpoint()


def flaky(ctx: rota.JobContext) -> None:
    """Fails its first attempt (retryable), succeeds on the second."""
    ctx.checkpoint()
    if ctx.attempt < 2:
        raise rota.RetryableError("SOAK_FLAKY")


def broken(ctx: rota.JobContext) -> None:
    """Fails every attempt: FAILED once max_attempts are spent."""
    raise rota.RetryableError("SOAK_BROKEN")


def permanent(ctx: rota.JobContext) -> None:
    """Fails at once, for good."""
    raise rota.PermanentError("SOAK_PERMANENT")


def hang(ctx: rota.JobContext) -> None:
    """Runs far past its job type's timeout, checking in: every attempt times out."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.1)


def long(ctx: rota.JobContext) -> None:
    """Runs about four seconds, checking in: long enough to be cancelled while running."""
    seconds = float(ctx.args.get("seconds", 4.0))
    deadline = time.monotonic() + min(seconds, 20.0)
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.1)
