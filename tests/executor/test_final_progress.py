"""A handler's last ``ctx.progress()`` before it ends is on the row with the outcome.

Progress reaches the row with the heartbeat (at most every half second); a
handler that reports its last stage and returns at once used to leave the
stage before it (``EXPORTING 5/6`` on a SUCCEEDED job, never ``UPLOADING 6/6``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.core.config import Isolation
from tests.support.executor_support import (
    StartExecutor,
    add_jobs,
    job_row,
    job_type,
    store_types,
    wait_for,
)


@pytest.mark.parametrize("isolation", [Isolation.THREAD, Isolation.PROCESS])
@pytest.mark.parametrize(("fail", "state"), [(False, "SUCCEEDED"), (True, "RETRY_WAIT")])
def test_the_last_progress_is_written_with_the_outcome(
    engine: Engine,
    start_executor: StartExecutor,
    tmp_path: Path,
    isolation: Isolation,
    fail: bool,
    state: str,
) -> None:
    spec = job_type(
        "progressing", handler="tests.handlers.plain:progress_to_the_end", isolation=isolation
    )
    store_types(engine, spec)
    go = tmp_path / "go"
    (job_id,) = add_jobs(engine, spec, args={"fail": fail, "go": str(go)})
    start_executor()
    wait_for(
        lambda: job_row(engine, job_id)["progress_stage"] == "EXPORTING",
        timeout=20,
        what="EXPORTING",
    )
    go.touch()
    wait_for(lambda: job_row(engine, job_id)["state"] == state, timeout=20, what=state)
    row = job_row(engine, job_id)
    assert (row["progress_stage"], row["progress_done"], row["progress_total"]) == (
        "UPLOADING",
        6,
        6,
    )
