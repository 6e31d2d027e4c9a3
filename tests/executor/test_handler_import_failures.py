"""A handler module that misbehaves *at import* never costs the executor.

The rolling-deploy import check (``rota.executor.importable``) imports every job
type's handler in the executor when it starts. For an ``isolation: process``
type that is exactly what isolation promised never to do: a module that calls
``os._exit`` (or segfaults, or blows up memory) at import killed the executor
before it claimed anything, silently (exit 3, no log line). And a module raising
``KeyboardInterrupt`` at import stopped the executor as if an operator had
pressed Ctrl-C. Either way the other job types' jobs never ran.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from rota.core.config import Isolation
from tests.support.executor_support import (
    Executors,
    add_jobs,
    job_type,
    states,
    store_types,
    wait_for,
)

pytestmark = pytest.mark.slow


def test_handler_modules_failing_at_import_never_stop_the_executor(
    engine: Engine, executors: Executors
) -> None:
    exits = job_type("exits", handler="tests.handlers.exits:handler", isolation=Isolation.PROCESS)
    interrupts = job_type("interrupts", handler="tests.handlers.interrupts:handler")
    fine = job_type("fine")
    store_types(engine, exits, interrupts, fine)
    bad = add_jobs(engine, exits) + add_jobs(engine, interrupts)
    (good,) = add_jobs(engine, fine)
    proc = executors.start("--poll-interval", "0.1", ready=True)
    wait_for(
        lambda: states(engine, [good])[good] == "SUCCEEDED" or proc.poll() is not None,
        timeout=30,
        what="the healthy job to run",
    )
    logs = executors.logs()
    assert proc.poll() is None, logs
    assert states(engine, [good])[good] == "SUCCEEDED"
    # They were due first, in the same pool: only the exclusion kept them from the claim.
    assert set(states(engine, bad).values()) == {"QUEUED"}
    unavailable = [ln for ln in executors.logs().splitlines() if "handler_unavailable" in ln]
    assert len(unavailable) == 2, executors.logs()
    assert any("job_type=exits" in ln and "status 3" in ln for ln in unavailable), unavailable
    assert any("job_type=interrupts" in ln and "KeyboardInterrupt" in ln for ln in unavailable)
