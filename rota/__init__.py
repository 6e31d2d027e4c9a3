"""rota: a scheduler service for recurring background jobs, on SQLAlchemy.

The public API, for applications that create jobs and write handlers::

    import rota

    with engine.begin() as conn:                      # the application's own transaction
        conn.execute(orders.insert().values(id=42))
        rota.enqueue(conn, "invoice.generate", args={"order": 42}, dedup_key="order-42")

    def generate(ctx: rota.JobContext) -> str | None:   # a handler, named module:function
        ctx.checkpoint()                                # raises when cancelled or the lease is lost
        ...
        raise rota.RetryableError("UPSTREAM_503")        # or PermanentError / AmbiguousError

``enqueue`` raises ``rota.QueueFull`` (with ``retry_after`` seconds) when the job
type's backpressure limits (``max_queued``, ``max_queue_age``,
``shed_below_priority``) refuse the submission; nothing is created then.

Everything under ``rota.*`` other than the names below is internal and may change.
"""

from __future__ import annotations

from rota.core.version import __version__
from rota.executor.context import Covers, JobContext
from rota.executor.errors import (
    AmbiguousError,
    HandlerError,
    JobInterrupted,
    PermanentError,
    RetryableError,
)
from rota.producer.enqueue import (
    Enqueued,
    JobRequest,
    QueueFull,
    UnknownJobType,
    enqueue,
    enqueue_many,
)

__all__ = [
    "AmbiguousError",
    "Covers",
    "Enqueued",
    "HandlerError",
    "JobContext",
    "JobInterrupted",
    "JobRequest",
    "PermanentError",
    "QueueFull",
    "RetryableError",
    "UnknownJobType",
    "__version__",
    "enqueue",
    "enqueue_many",
]
