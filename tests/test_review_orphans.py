"""Review: what a ``command:`` or isolated child starts dies with a SIGKILLed executor too.

A ``command:`` is often a shell script running the real program as its child
(``sh -c 'prog; notify'``, a wrapper script without ``exec``). PDEATHSIG reaches
only the executor's direct child: the program it started keeps running,
re-parented to init, while the sweeper hands the job to another executor.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.shared.config.model import Isolation
from tests.executor_support import Executors, add_jobs, alive, job_type, store_types, wait_for

pytestmark = pytest.mark.slow


def test_a_command_grandchild_dies_with_its_sigkilled_executor(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    spec = job_type(
        "cmd",
        handler=None,
        command=("sh", "-c", f'sleep 300 & echo $! > "{pidfile}.tmp" && '
                 f'mv "{pidfile}.tmp" "{pidfile}"; wait'),
    )
    store_types(engine, spec)
    add_jobs(engine, spec)
    proc = executors.start("--poll-interval", "0.1")
    wait_for(pidfile.exists, timeout=30, what="the command to start")
    pid = int(pidfile.read_text())
    pids.append(pid)
    assert alive(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    wait_for(lambda: not alive(pid), timeout=10, what=f"the grandchild (pid {pid}) to die")


def test_an_isolated_handlers_helper_dies_with_its_sigkilled_executor(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    pidfile = tmp_path / "helper.pid"
    spec = job_type(
        "iso", handler="tests.handlers_review:spawn_then_wait", isolation=Isolation.PROCESS
    )
    store_types(engine, spec)
    add_jobs(engine, spec, args={"file": str(pidfile)})
    proc = executors.start("--poll-interval", "0.1")
    wait_for(pidfile.exists, timeout=30, what="the helper to start")
    pid = int(pidfile.read_text())
    pids.append(pid)
    assert alive(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    wait_for(lambda: not alive(pid), timeout=10, what=f"the helper (pid {pid}) to die")
