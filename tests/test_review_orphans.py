"""Review: what a ``command:`` or isolated child starts dies with a SIGKILLed executor too.

A ``command:`` is often a shell script running the real program as its child
(``sh -c 'prog; notify'``, a wrapper script without ``exec``). PDEATHSIG reaches
only the executor's direct child: the program it started keeps running,
re-parented to init, while the sweeper hands the job to another executor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.shared.config.model import Isolation
from tests.executor_support import (
    Executors,
    add_jobs,
    assert_dies_with_its_executor,
    job_type,
    pid_in,
    store_types,
)

pytestmark = pytest.mark.slow


def test_a_command_grandchild_assert_dies_with_its_executor(
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
    assert_dies_with_its_executor(executors, pids, "grandchild", lambda: pid_in(pidfile))


def test_an_isolated_handlers_helper_assert_dies_with_its_executor(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    pidfile = tmp_path / "helper.pid"
    spec = job_type(
        "iso", handler="tests.handlers_review:spawn_then_wait", isolation=Isolation.PROCESS
    )
    store_types(engine, spec)
    add_jobs(engine, spec, args={"file": str(pidfile)})
    assert_dies_with_its_executor(executors, pids, "helper", lambda: pid_in(pidfile))
