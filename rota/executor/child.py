"""The child process of an ``isolation: process`` run: ``python -m rota.executor.child FD``.

The executor (``rota.executor.isolation``) starts it in a process group of its
own and talks to it over one socket, the inherited file descriptor ``FD``:

* parent -> child, first: the job (pickled: the claimed job, its job type, the
  handler or hook to call, the parent's ``sys.path`` and log level); later,
  ``{"t": "cancel"}`` (JSON) when a cancellation was requested;
* child -> parent, JSON only (the parent never unpickles what a handler
  controls): ``progress`` (what ``ctx.progress()`` recorded), ``log`` (a log
  record of the handler's, logged again by the executor in the job's context),
  and last one ``result`` or ``error`` (kind, code, and the traceback as the
  detail, both made storable here).

The child dies with the executor: SIGKILL from the kernel (``PR_SET_PDEATHSIG``,
set before exec), and, should that be missing, its reader thread sees the
socket close and kills the child's whole process group. What the handler
started dies too: a watcher forked at start (``processes.fork_group_guard``)
kills the group when the child has died. It volunteers to the
kernel's OOM killer (``oom_score_adj``), so a handler that blows up memory is
killed before its executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import math
import os
import pickle
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from rota.core.claimed import ClaimedJob
from rota.core.config import JobTypeSpec
from rota.core.storable import storable_text
from rota.executor.context import JobContext
from rota.executor.errors import AmbiguousError, JobCancelled, PermanentError
from rota.executor.handlers import HandlerRegistry
from rota.executor.lease import HeldJob
from rota.executor.output import JOB_LOGGER
from rota.executor.processes import end_group_guard, fork_group_guard
from rota.executor.returned import describe, result_ref_of

MAX_MESSAGE_BYTES = 1024 * 1024  # the parent refuses longer messages
LOG_TEXT_MAX = 16_000
OOM_SCORE_ADJ = 1000  # the first to go when memory runs out


@dataclass(frozen=True)
class ChildJob:
    """What the parent sends: the job, and what to call for it."""

    claimed: ClaimedJob
    spec: JobTypeSpec | None
    path: str  # module:function
    mode: str  # "handler" (a result reference back) or "reconcile" (True: done)
    sys_path: list[str]
    log_level: int


class _Channel:
    """The child's end of the socket; sends may come from any thread of the handler."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, default=str).encode()
        if len(data) > MAX_MESSAGE_BYTES:
            raise ValueError(f"a message of {len(data):,} bytes is too long for the executor")
        with self._lock:
            self._conn.send_bytes(data)


@dataclass(eq=False)
class _ChildHeld(HeldJob):
    """The child's view of its job: progress goes to the parent, cancel comes from it."""

    channel: _Channel | None = None

    def set_progress(self, stage: str | None, done: int | None, total: int | None) -> None:
        if self.channel is not None:
            self.channel.send({"t": "progress", "stage": stage, "done": done, "total": total})


class _ForwardLogs(logging.Handler):
    def __init__(self, channel: _Channel) -> None:
        super().__init__()
        self._channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        try:
            exc = logging.Formatter().formatException(record.exc_info) if record.exc_info else None
            self._channel.send(
                {
                    "t": "log",
                    "name": storable_text(record.name, 200),
                    "level": record.levelno,
                    "msg": storable_text(record.getMessage(), LOG_TEXT_MAX, keep="middle"),
                    "exc": storable_text(exc, LOG_TEXT_MAX, keep="middle") if exc else None,
                }
            )
        except Exception:  # a record that cannot be sent is dropped, as logging does
            self.handleError(record)


def _watch_parent(conn: Connection, held: HeldJob) -> None:
    """Take cancellations from the parent; when it is gone, end this process group."""
    try:
        while True:
            message = json.loads(conn.recv_bytes(MAX_MESSAGE_BYTES))
            if message.get("t") == "cancel":
                held.cancel_requested = True
    except Exception:  # EOF: the executor is gone (or broke the protocol)
        os.killpg(0, signal.SIGKILL)


def _volunteer_for_oom_killer() -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(OOM_SCORE_ADJ))
    except OSError:  # not Linux, or not allowed: the kernel picks as it will
        pass


def _call(job: ChildJob, ctx: JobContext) -> Any:
    returned = HandlerRegistry().resolve(job.path)(ctx)
    if inspect.isawaitable(returned):
        awaitable = returned

        async def awaited() -> Any:
            return await awaitable

        returned = asyncio.run(awaited())
    return returned


def _kind(exc: BaseException) -> str:
    if isinstance(exc, PermanentError):
        return "permanent"
    if isinstance(exc, AmbiguousError):
        return "ambiguous"
    return "retryable"


def run(job: ChildJob, held: HeldJob) -> dict[str, Any]:
    """Call the handler (or hook); the message that reports how it ended."""
    try:
        ctx = JobContext.for_job(held)
        returned = _call(job, ctx)
        if job.mode == "reconcile":
            return {"t": "result", "value": returned is True}
        return {"t": "result", "value": result_ref_of(returned)}
    except JobCancelled:
        return {"t": "error", "kind": "cancelled"}
    except BaseException as exc:  # any failure of the handler: its job's outcome
        code, detail = describe(exc)
        return {"t": "error", "kind": _kind(exc), "code": code, "detail": detail}


def main(argv: list[str]) -> int:
    conn = Connection(int(argv[1]))
    guard = fork_group_guard(conn.fileno())  # before any thread: kills the group if we die
    _volunteer_for_oom_killer()
    job: ChildJob = pickle.loads(conn.recv_bytes())  # from the executor: trusted
    for entry in reversed(job.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    channel = _Channel(conn)
    # The parent watches the lease and kills this process when it is lost: no local deadline.
    held = _ChildHeld(job.claimed, job.spec, renewed_at=math.inf, channel=channel)
    root = logging.getLogger()
    root.handlers[:] = [_ForwardLogs(channel)]
    root.setLevel(job.log_level)
    # ctx.log's records from INFO up are kept in the attempt's output whatever the
    # executor's level: send them all, the parent keeps what it does not log.
    logging.getLogger(JOB_LOGGER).setLevel(min(job.log_level, logging.INFO))
    threading.Thread(target=_watch_parent, args=(conn, held), daemon=True).start()
    report = run(job, held)
    try:
        channel.send(report)
    except ValueError:  # too long even after storable_text: say so, briefly
        channel.send({"t": "error", "kind": "retryable", "code": "CHILD_MESSAGE_TOO_LONG"})
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing to keep
            stream.flush()
    end_group_guard(guard)
    # Not sys.exit: threads the handler left behind must not keep the child alive.
    os._exit(0)


if __name__ == "__main__":
    # Run as rota.executor.child, not __main__, so that its classes have one name.
    from rota.executor import child

    sys.exit(child.main(sys.argv))
