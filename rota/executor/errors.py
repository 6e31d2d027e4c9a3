"""How a handler says how it failed, and why ``ctx.checkpoint()`` stops a handler."""

from __future__ import annotations


class HandlerError(Exception):
    """Base of the errors a handler raises on purpose; ``code`` goes on the job row."""

    # Set on an error raised in a child process (``isolation: process``): its
    # traceback as formatted there, stored as the detail instead of ours.
    remote_traceback: str | None = None

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or code)
        self.code = code


class RetryableError(HandlerError):
    """Failed; another attempt may succeed (RETRY_WAIT with backoff, FAILED when none left)."""


class PermanentError(HandlerError):
    """Failed; retrying cannot help (FAILED at once, whatever attempts are left)."""


class AmbiguousError(HandlerError):
    """The outcome is unknown (the work may have happened): reconcile before any rerun."""


class JobInterrupted(Exception):
    """Raised by ``ctx.checkpoint()``: stop the handler now. Handlers should let it propagate."""


class JobCancelled(JobInterrupted):
    """Cancellation was requested; the worker acknowledges it (CANCELLED)."""


class LeaseLost(JobInterrupted):
    """This worker no longer holds the job (or cannot prove it does); it reports nothing more."""


class JobTimedOut(JobInterrupted):
    """The attempt overran the job type's timeout and was written off as ambiguous."""


class JobReleased(JobInterrupted):
    """The executor is shutting down and handed the job back to the queue."""
