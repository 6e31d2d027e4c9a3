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

from typing import TYPE_CHECKING, Any

from rota.core.version import __version__
from rota.executor.context import Covers, JobContext
from rota.executor.errors import (
    AmbiguousError,
    HandlerError,
    JobInterrupted,
    PermanentError,
    RetryableError,
)

if TYPE_CHECKING:
    from rota.producer.enqueue import (
        Enqueued,
        JobRequest,
        QueueFull,
        UnknownJobType,
        enqueue,
        enqueue_many,
    )

# The producer's names are imported on first use (PEP 562): a process that only
# runs jobs (an executor, whose handlers import rota for JobContext and the
# errors) never loads the producer, its backpressure checks and their queries.
_PRODUCER = frozenset(
    ("Enqueued", "JobRequest", "QueueFull", "UnknownJobType", "enqueue", "enqueue_many")
)


def __getattr__(name: str) -> Any:
    if name in _PRODUCER:
        import rota.producer.enqueue as producer  # here: see _PRODUCER

        value = getattr(producer, name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_PRODUCER})


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
