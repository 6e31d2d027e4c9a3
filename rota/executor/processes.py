"""Child processes of the executor: stopping a handler's whole process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def kill_process_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Signal every process of the group ``proc`` leads (it was started in a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
