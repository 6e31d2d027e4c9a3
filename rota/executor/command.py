"""``command:`` job types: the handler is a subprocess in its own process group.

The job is described to the process in environment variables: ``ROTA_JOB_ID``,
``ROTA_JOB_TYPE``, ``ROTA_ATTEMPT``, ``ROTA_PAYLOAD_REF``, ``ROTA_ARGS`` (JSON)
and ``ROTA_SCHEDULED_FOR`` (ISO 8601 UTC, empty for ad-hoc jobs). Exit status 0
is success; any other status is a retryable error with code ``EXIT_<status>``
(``SIGNAL_<n>`` when a signal ended it), the tail of its stderr as the detail.
Its stdout and stderr are logged line by line (event ``command_output``, with
the stream's name), each line tagged with the job's fields, never mixed raw
into the executor's own output; a line longer than ``LINE_MAX_BYTES`` is
logged in pieces, bytes that are not UTF-8 are replaced. Both streams also go,
as they arrive, to the attempt's own output (``output``: the last 64 KiB are
kept with its lease renewals and its outcome).
It dies with the executor (``processes.die_with_parent``).
A cancellation request sends SIGTERM to the group (SIGKILL after a grace
period) and is then acknowledged; a lost lease, a timeout or a release at
shutdown kills the whole group at once.
"""

from __future__ import annotations

import codecs
import contextvars
import logging
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import IO

from rota.core.storable import command_args_problem, command_payload_ref_problem, rota_args_env
from rota.executor.context import JobContext
from rota.executor.errors import JobCancelled, PermanentError, RetryableError
from rota.executor.lease import HeldJob
from rota.executor.output import OutputTail
from rota.executor.processes import die_with_parent, end_watch, kill_process_group, watch_group
from rota.runtime.events import emit

CANCEL_GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.02
_STDERR_TAIL = 2000
LINE_MAX_BYTES = 8192
# After the process ends, how long its pipes may take to reach their end (a
# grandchild that escaped the process group may hold them open forever).
_DRAIN_SECONDS = 2.0

log = logging.getLogger("rota.command")


class _OutputLines:
    """Logs one pipe of the subprocess line by line, in the job's log context."""

    def __init__(
        self, pipe: IO[bytes], stream: str, output: OutputTail | None, keep_tail: int = 0
    ) -> None:
        self._pipe = pipe
        self._stream = stream
        self._output = output
        # Its own decoder per stream: a character split between two reads survives.
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._keep = keep_tail
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._tail_lock = threading.Lock()  # read while a straggler may still append
        context = contextvars.copy_context()  # the job's log fields, in the reading thread
        self._thread = threading.Thread(
            target=context.run, args=(self._read,), name=f"rota-{stream}", daemon=True
        )
        self._thread.start()

    def _read(self) -> None:
        try:
            for raw in iter(lambda: self._pipe.readline(LINE_MAX_BYTES), b""):
                if self._output is not None:
                    self._output.write(self._decoder.decode(raw))
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                emit(log, "command_output", stream=self._stream, line=line)
                if self._keep:
                    self._remember(line)
        except (OSError, ValueError):  # the pipe was closed under us: nothing more to read
            pass
        finally:
            if self._output is not None:
                self._output.write(self._decoder.decode(b"", final=True))
            self._pipe.close()

    def _remember(self, line: str) -> None:
        with self._tail_lock:
            self._tail.append(line)
            self._tail_len += len(line) + 1
            while self._tail_len > self._keep and len(self._tail) > 1:
                self._tail_len -= len(self._tail.popleft()) + 1

    def wait(self, timeout: float) -> None:
        self._thread.join(timeout)

    def tail(self) -> str:
        with self._tail_lock:
            return "\n".join(self._tail)[-self._keep :].strip()


def job_environment(ctx: JobContext) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "ROTA_JOB_ID": str(ctx.job_id),
            "ROTA_JOB_TYPE": ctx.job_type,
            "ROTA_ATTEMPT": str(ctx.attempt),
            "ROTA_PAYLOAD_REF": ctx.payload_ref or "",
            "ROTA_ARGS": rota_args_env(ctx.args),
            "ROTA_SCHEDULED_FOR": (
                ctx.scheduled_for.isoformat().replace("+00:00", "Z") if ctx.scheduled_for else ""
            ),
        }
    )
    return env


def _exited(pid: int) -> bool:
    """True once the command has ended; it stays a zombie (its group id ours) until reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def run_command(argv: Sequence[str], ctx: JobContext, held: HeldJob) -> None:
    """Run the subprocess to its end; raise as a Python handler would."""
    problem = command_args_problem(ctx.args)
    if problem is not None:  # the kernel would refuse the exec (E2BIG) on every attempt
        raise PermanentError("ARGS_TOO_LARGE_FOR_COMMAND", problem)
    problem = command_payload_ref_problem(ctx.payload_ref)
    if problem is not None:  # the same, for a row written before payload_ref had a limit
        raise PermanentError("PAYLOAD_REF_TOO_LARGE_FOR_COMMAND", problem)
    watcher = watch_group()  # what the command starts dies with the executor too
    try:
        proc = subprocess.Popen(
            list(argv),
            env=job_environment(ctx),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=() if watcher is None or watcher.report_fd is None else (watcher.report_fd,),
            preexec_fn=die_with_parent(watcher),  # only syscalls between fork and exec
        )
    except BaseException:
        end_watch(watcher)
        raise
    if watcher is not None:
        watcher.started()
    assert proc.stdout is not None and proc.stderr is not None
    stdout = _OutputLines(proc.stdout, "stdout", held.output)
    stderr = _OutputLines(proc.stderr, "stderr", held.output, keep_tail=_STDERR_TAIL)
    try:
        held.proc = proc
        if held.stop is not None:  # stopped while starting: the stopper may have missed it
            kill_process_group(proc)
        term_sent_at: float | None = None
        while True:
            if _exited(proc.pid):
                end_watch(watcher)  # before the reap: the group id is still ours
                watcher = None
                status = proc.wait()
                break
            time.sleep(_POLL_SECONDS)
            if held.cancel_requested and term_sent_at is None:
                kill_process_group(proc, signal.SIGTERM)
                term_sent_at = time.monotonic()
            elif term_sent_at is not None and (
                time.monotonic() - term_sent_at > CANCEL_GRACE_SECONDS
            ):
                kill_process_group(proc)
        held.proc = None
    finally:
        end_watch(watcher)
        deadline = time.monotonic() + _DRAIN_SECONDS
        for lines in (stdout, stderr):
            lines.wait(max(0.0, deadline - time.monotonic()))
    ctx.checkpoint()  # lost, timed out or released: nothing more to report
    if term_sent_at is not None:
        raise JobCancelled(f"job {ctx.job_id}: the command was stopped on request")
    if status == 0:
        return
    tail = stderr.tail()
    code = f"EXIT_{status}" if status > 0 else f"SIGNAL_{-status}"
    raise RetryableError(code, tail or f"the command exited with status {status}")
