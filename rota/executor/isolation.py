"""``isolation: process``: one run of a Python handler in a child process of its own.

The worker slot starts ``python -m rota.executor.child`` (``child.py`` has the
protocol) in a new process group, sends it the job, and serves it until it
ends: progress goes to the heartbeat, log records to the executor's log (with
the job's fields), a cancellation request to the child's ``ctx``. What the
executor does to a job, it does to the child's whole group, with SIGKILL:

* execution timeout, lost lease, release at shutdown: killed at once (the
  group is gone before the slot is free and before a release is written);
* cancellation: ``ctx.checkpoint()`` raises ``JobCancelled`` in the child;
  a child still running ``CANCEL_GRACE_SECONDS`` later is killed; CANCELLED
  either way;
* the child ends without reporting (``os._exit``, a segfault, the OOM killer):
  a retryable failure with code ``CHILD_EXIT_<status>`` or
  ``CHILD_<SIGNAL>`` (``CHILD_SIGSEGV``, ``CHILD_SIGKILL``), one attempt spent;
  the executor is not touched.

When the run ends, whatever the handler left in its process group is killed
too. A child costs a Python start-up (a few hundred milliseconds, counted in
the job's ``timeout``): thread isolation stays the default for cheap jobs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from rota.core.storable import storable_text
from rota.executor import output
from rota.executor.child import MAX_MESSAGE_BYTES, ChildJob
from rota.executor.context import JobContext
from rota.executor.errors import (
    AmbiguousError,
    HandlerError,
    JobCancelled,
    PermanentError,
    RetryableError,
)
from rota.executor.lease import HeldJob
from rota.executor.output import JOB_LOGGER
from rota.executor.processes import die_with_parent, kill_process_group

CANCEL_GRACE_SECONDS = 2.0
_POLL_SECONDS = 0.02
_REAP_SECONDS = 5.0  # after its report, how long the child may take to exit
CHILD_PROTOCOL_ERROR = "CHILD_PROTOCOL_ERROR"

log = logging.getLogger("rota.executor")


def run_isolated(path: str, mode: str, ctx: JobContext, held: HeldJob) -> Any:
    """Call ``path`` for the job in a child process; return or raise as the handler did.

    ``mode`` is "handler" (returns the result reference) or "reconcile" (returns
    a bool). Raises ``JobInterrupted`` subclasses as ``ctx.checkpoint()`` does
    when the executor stopped the job.
    """
    ours, theirs = multiprocessing.Pipe(duplex=True)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rota.executor.child", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # only prctl(2) between fork and exec
        )
    finally:
        theirs.close()
    try:
        held.proc = proc
        if held.stop is not None:  # stopped while starting: the stopper may have missed it
            kill_process_group(proc)
        job = ChildJob(
            held.claimed,
            held.spec,
            path,
            mode,
            list(sys.path),
            logging.getLogger().getEffectiveLevel(),
        )
        with contextlib.suppress(OSError):  # a child dead already: its status tells
            ours.send_bytes(pickle.dumps(job))
        report, cancelled = _serve(proc, ours, ctx, held)
        status = _reap(proc)
    except BaseException:
        kill_process_group(proc)
        proc.wait()
        raise
    finally:
        held.proc = None
        ours.close()
    if held.stop is not None:
        ctx.checkpoint()  # raises why: lease lost, timed out, released
    return _outcome(report, cancelled, status, proc.pid, mode)


def _serve(
    proc: subprocess.Popen[bytes], conn: Connection, ctx: JobContext, held: HeldJob
) -> tuple[dict[str, Any] | None, bool]:
    """Serve the child until it ends: (its last report or None, whether cancel was sent)."""
    report: dict[str, Any] | None = None
    cancel_sent_at: float | None = None
    while True:
        if held.cancel_requested and cancel_sent_at is None:
            cancel_sent_at = time.monotonic()
            with contextlib.suppress(OSError):
                conn.send_bytes(b'{"t": "cancel"}')
        elif cancel_sent_at is not None and _past(cancel_sent_at, CANCEL_GRACE_SECONDS):
            kill_process_group(proc)
        try:
            if conn.poll(_POLL_SECONDS):
                message = json.loads(conn.recv_bytes(MAX_MESSAGE_BYTES))
                if not isinstance(message, dict):
                    raise ValueError("a message that is not an object")
                if message.get("t") in ("result", "error"):
                    report = message
                else:
                    _relay(message, ctx)
                continue
        except EOFError:
            break
        except (OSError, ValueError) as exc:  # too long, not JSON: stop listening to it
            kill_process_group(proc)
            report = {
                "t": "error",
                "kind": "retryable",
                "code": CHILD_PROTOCOL_ERROR,
                "detail": f"the handler's process sent what the executor cannot read: {exc}",
            }
            break
        if _exited(proc.pid) and not conn.poll(0):
            break
    return report, cancel_sent_at is not None


def _past(since: float, seconds: float) -> bool:
    return time.monotonic() - since > seconds


def _relay(message: dict[str, Any], ctx: JobContext) -> None:
    """Pass on a progress report or a log record of the child's."""
    kind = message.get("t")
    if kind == "progress":
        with contextlib.suppress(TypeError, ValueError):  # checked in the child already
            ctx.progress(message.get("stage"), message.get("done"), message.get("total"))
    elif kind == "log":
        level = message.get("level")
        level = level if isinstance(level, int) else logging.WARNING
        logger = logging.getLogger(storable_text(str(message.get("name") or "handler"), 200))
        logged = logger.isEnabledFor(level)
        if not logged and not (logger.name == JOB_LOGGER and level >= logging.INFO):
            return
        tail = output.current()
        with output.capturing(None):  # kept below, once its traceback is on it
            record = logger.makeRecord(
                logger.name, level, "(isolated handler)", 0, str(message.get("msg", "")), (), None
            )
        exc = message.get("exc")
        if isinstance(exc, str):
            record.exc_text = exc
        if tail is not None:  # ctx.log's from INFO up, even when it is not logged
            tail.write_record(record)
        if logged:
            logger.handle(record)


def _exited(pid: int) -> bool:
    """True once the child has ended; it stays a zombie (its pid not reused) until reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _reap(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the child, kill what it left in its group, and return its status."""
    deadline = time.monotonic() + _REAP_SECONDS
    while not _exited(proc.pid):
        if time.monotonic() > deadline:  # reported, then hung on its way out
            kill_process_group(proc)
            deadline = math.inf
        time.sleep(_POLL_SECONDS)
    kill_process_group(proc)  # before reaping: the group id cannot be reused yet
    return proc.wait()


def _outcome(
    report: dict[str, Any] | None, cancelled: bool, status: int, pid: int, mode: str
) -> Any:
    if report is not None and report.get("t") == "result":
        value = report.get("value")
        if mode == "reconcile":
            return value is True
        if value is None or isinstance(value, str):
            return value
        raise RetryableError(CHILD_PROTOCOL_ERROR, "the handler's process sent a bad result")
    if report is not None:
        kind = report.get("kind")
        if kind == "cancelled":
            raise JobCancelled("the handler stopped on request")
        code = str(report.get("code") or "CHILD_ERROR")
        error_class: type[HandlerError] = {
            "permanent": PermanentError,
            "ambiguous": AmbiguousError,
        }.get(str(kind), RetryableError)
        error = error_class(code)
        detail = report.get("detail")
        error.remote_traceback = detail if isinstance(detail, str) else None
        raise error
    if cancelled:
        raise JobCancelled("the handler's process was killed after the cancellation grace")
    raise _died(status, pid)


def _died(status: int, pid: int) -> RetryableError:
    """The failure of a child that ended without a report."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"SIGNAL_{-status}"
        how = f"was killed by {name} (signal {-status})"
        if -status == signal.SIGKILL:
            how += ": most likely the kernel's OOM killer, the handler used too much memory"
        elif -status in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE):
            how += ": a crash in native code"
        code = f"CHILD_{name}"
    else:
        how = f"exited with status {status}"
        code = f"CHILD_EXIT_{status}"
    message = f"the handler's process (pid {pid}) {how} before reporting an outcome"
    error = RetryableError(code, message)
    error.remote_traceback = message
    return error
