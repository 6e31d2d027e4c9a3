"""``command:`` job types: the handler is a subprocess in its own process group.

The job is described to the process in environment variables: ``ROTA_JOB_ID``,
``ROTA_JOB_TYPE``, ``ROTA_ATTEMPT``, ``ROTA_PAYLOAD_REF``, ``ROTA_ARGS`` (JSON)
and ``ROTA_SCHEDULED_FOR`` (ISO 8601 UTC, empty for ad-hoc jobs). Exit status 0
is success; any other status is a retryable error with code ``EXIT_<status>``
(``SIGNAL_<n>`` when a signal ended it), the tail of its stderr as the detail.
A cancellation request sends SIGTERM to the group (SIGKILL after a grace
period) and is then acknowledged; a lost lease, a timeout or a release at
shutdown kills the whole group at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

from rota.executor.context import JobContext
from rota.executor.errors import JobCancelled, RetryableError
from rota.executor.lease import HeldJob
from rota.executor.processes import kill_process_group

CANCEL_GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.02
_STDERR_TAIL = 2000


def job_environment(ctx: JobContext) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "ROTA_JOB_ID": str(ctx.job_id),
            "ROTA_JOB_TYPE": ctx.job_type,
            "ROTA_ATTEMPT": str(ctx.attempt),
            "ROTA_PAYLOAD_REF": ctx.payload_ref or "",
            "ROTA_ARGS": json.dumps(ctx.args),
            "ROTA_SCHEDULED_FOR": (
                ctx.scheduled_for.isoformat().replace("+00:00", "Z") if ctx.scheduled_for else ""
            ),
        }
    )
    return env


def run_command(argv: Sequence[str], ctx: JobContext, held: HeldJob) -> None:
    """Run the subprocess to its end; raise as a Python handler would."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            list(argv),
            env=job_environment(ctx),
            stdin=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        held.proc = proc
        if held.stop is not None:  # stopped while starting: the stopper may have missed it
            kill_process_group(proc)
        term_sent_at: float | None = None
        while True:
            try:
                status = proc.wait(timeout=_POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                pass
            if held.cancel_requested and term_sent_at is None:
                kill_process_group(proc, signal.SIGTERM)
                term_sent_at = time.monotonic()
            elif term_sent_at is not None and (
                time.monotonic() - term_sent_at > CANCEL_GRACE_SECONDS
            ):
                kill_process_group(proc)
        held.proc = None
        ctx.checkpoint()  # lost, timed out or released: nothing more to report
        if term_sent_at is not None:
            raise JobCancelled(f"job {ctx.job_id}: the command was stopped on request")
        if status == 0:
            return
        stderr.seek(max(0, stderr.seek(0, os.SEEK_END) - _STDERR_TAIL))
        tail = stderr.read().decode(errors="replace").strip()
    code = f"EXIT_{status}" if status > 0 else f"SIGNAL_{-status}"
    raise RetryableError(code, tail or f"the command exited with status {status}")
